//go:build tools

// The node's container runtime the kubelet tests run: containerd (with its runc shim and ctr,
// which imports the locally built images), runc, and the CNI plugins that give each pod a
// network namespace and an address on a bridge. Pinned by this module's go.mod, apart from
// go/kube so that their dependencies need not agree with Kubernetes'. Built by
// probelint-cluster with `go build`; nothing here is part of probelint.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/opencontainers/runc"
)
