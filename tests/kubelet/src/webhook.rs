//! The treatment's mutation, applied by the real apiserver: the real `probelint-webhook` on
//! loopback, with a serving certificate from the cluster's CA, registered as a
//! MutatingWebhookConfiguration for Deployments in namespaces labelled
//! [`crate::TREATMENT_LABEL`].

use base64::Engine as _;
use probelint_cluster::Cluster;
use std::time::Duration;

const CONFIGURATION: &str = "probelint-kubelet-conformance";

/// The running webhook, registered with the apiserver; unregistered and stopped on drop.
pub struct Webhook {
    /// Stopped when dropped, after the configuration is deleted.
    _webhook: probelint_testkit::webhook::Webhook,
    cluster: &'static Cluster,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.cluster.kubectl_output(&[
            "delete",
            "mutatingwebhookconfiguration",
            CONFIGURATION,
            "--ignore-not-found",
        ]);
    }
}

impl Webhook {
    /// Starts `binary` and registers it.
    pub fn start(cluster: &'static Cluster, binary: &std::path::Path) -> Webhook {
        let leaf = cluster.ca.server("probelint-webhook", &["127.0.0.1"]);
        let webhook =
            probelint_testkit::webhook::start_serving(binary, &cluster.ca.pem, &leaf, &[]);
        let port = webhook.addr.port();
        let bundle = base64::engine::general_purpose::STANDARD.encode(&cluster.ca.pem);
        let configuration = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION},
            "webhooks": [{
                "name": "mutate.kubelet.probelint.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/mutate"), "caBundle": bundle},
                "namespaceSelector": {"matchLabels": {crate::TREATMENT_LABEL: "true"}},
                "rules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["deployments"],
                }],
            }],
        });
        let applied = cluster.apply(&configuration.to_string(), &[]);
        assert!(
            applied.status.success(),
            "cannot register the webhook: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
        Webhook {
            _webhook: webhook,
            cluster,
        }
    }

    /// Waits until the apiserver sends Deployments in `ns` to the webhook (its informer sees a
    /// new configuration some time after it is created): a server-side dry run of `manifest`
    /// comes back with a startupProbe.
    pub fn wait_until_active(&self, ns: &str, manifest: &str) {
        probelint_cluster::wait_for(
            "the apiserver to call the mutating webhook",
            Duration::from_secs(60),
            || {
                let out = self
                    .cluster
                    .apply(manifest, &["-n", ns, "--dry-run=server", "-o", "json"]);
                let object: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or_default();
                object
                    .pointer("/spec/template/spec/containers/0/startupProbe")
                    .map(|_| ())
            },
        );
    }
}
