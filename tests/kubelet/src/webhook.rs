//! The treatment's mutation, applied by the real apiserver: the real `probelint-webhook` on
//! loopback, with a serving certificate from the cluster's CA, registered as a
//! MutatingWebhookConfiguration for Deployments in namespaces labelled
//! [`crate::TREATMENT_LABEL`].

use base64::Engine as _;
use probelint_cluster::Cluster;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CONFIGURATION: &str = "probelint-kubelet-conformance";

/// The running webhook, registered with the apiserver; unregistered and stopped on drop.
pub struct Webhook {
    child: Child,
    cluster: &'static Cluster,
    _dir: tempfile::TempDir,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.cluster.kubectl_output(&[
            "delete",
            "mutatingwebhookconfiguration",
            CONFIGURATION,
            "--ignore-not-found",
        ]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Webhook {
    /// Starts `binary` and registers it.
    pub fn start(cluster: &'static Cluster, binary: &std::path::Path) -> Webhook {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let leaf = cluster.ca.server("probelint-webhook", &["127.0.0.1"]);
        std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).expect("tls.crt");
        std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).expect("tls.key");
        let (port, metrics) = (free_port(), free_port());
        let mut child = Command::new(binary)
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
            .arg("--tls-cert")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.path().join("tls.key"))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline && child.try_wait().ok().flatten().is_none(),
                "probelint-webhook did not listen on {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
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
            child,
            cluster,
            _dir: dir,
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
