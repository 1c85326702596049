//go:build tools

// The Kubernetes components the tests run, pinned by this module's go.mod (k8s.io/kubernetes and
// every staging module at the matching v0 version). Built by probelint-cluster with
// `go build`; nothing here is part of probelint.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
