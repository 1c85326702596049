//go:build tools

// Pins the Helm CLI that the node suite's in-cluster install runs (tests/kubelet/tests/
// helm_install.rs): `helm install`, `helm upgrade` and `helm uninstall` as users type them, at
// one Helm version on every machine. Its own module, apart from go/kube, so that Helm's
// Kubernetes client libraries need not agree with the apiserver's version.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
