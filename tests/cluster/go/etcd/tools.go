//go:build tools

// etcd for the tests' control plane, pinned by this module's go.mod; built by probelint-cluster
// with `go build`. Its own module, so that its dependencies do not have to agree with
// Kubernetes'.
package tools

import _ "go.etcd.io/etcd/server/v3"
