//! The treatment: a manifest as the real `probelint-webhook` mutates it, over HTTPS.

use base64::Engine;
use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A running webhook, killed on drop.
pub struct Webhook {
    child: Child,
    port: u16,
    ca_pem: String,
    _dir: tempfile::TempDir,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl Webhook {
    /// Starts `binary` with a fresh self-signed certificate and waits until it is ready.
    pub fn start(binary: &Path) -> Result<Webhook, Error> {
        let dir = tempfile::tempdir()?;
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
            .self_signed(&key)?;
        std::fs::write(dir.path().join("tls.crt"), cert.pem())?;
        std::fs::write(dir.path().join("tls.key"), key.serialize_pem())?;
        let (port, metrics) = (free_port(), free_port());
        let mut child = Command::new(binary)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{metrics}"))
            .arg("--tls-cert")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.path().join("tls.key"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", metrics)).is_err() {
            if Instant::now() > deadline || child.try_wait()?.is_some() {
                let mut log = String::new();
                if let Some(err) = child.stderr.take() {
                    for line in BufReader::new(err).lines().map_while(Result::ok).take(20) {
                        log.push_str(&line);
                        log.push('\n');
                    }
                }
                let _ = child.kill();
                return Err(format!("webhook did not start:\n{log}").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Webhook {
            child,
            port,
            ca_pem: cert.pem(),
            _dir: dir,
        })
    }

    /// Sends `object` to `/mutate` as a CREATE AdmissionReview and returns the mutated object.
    pub fn mutate(&self, object: &Value) -> Result<Value, Error> {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (group, version) = match object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("v1")
            .split_once('/')
        {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), "v1".to_owned()),
        };
        let resource = format!("{}s", kind.to_ascii_lowercase());
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "00000000-0000-4000-8000-000000000001",
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version, "resource": resource},
                "requestKind": {"group": group, "version": version, "kind": kind},
                "requestResource": {"group": group, "version": version, "resource": resource},
                "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
                "namespace": "default",
                "operation": "CREATE",
                "userInfo": {"username": "conformance", "groups": ["system:authenticated"]},
                "object": object,
                "oldObject": null,
                "dryRun": false,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
            }
        });
        let body = serde_json::to_vec(&review)?;
        let response = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(self.post("/mutate", &body))?;
        let response: Value = serde_json::from_slice(&response)?;
        let mut mutated = object.clone();
        if let Some(patch) = response.pointer("/response/patch").and_then(Value::as_str) {
            let bytes = base64::engine::general_purpose::STANDARD.decode(patch)?;
            let patch: json_patch::Patch = serde_json::from_slice(&bytes)?;
            json_patch::patch(&mut mutated, &patch.0)?;
        }
        Ok(mutated)
    }

    async fn post(&self, path: &str, body: &[u8]) -> Result<Vec<u8>, Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes())?)?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let mut tls = connector
            .connect(ServerName::try_from("localhost")?, tcp)
            .await?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        tls.write_all(head.as_bytes()).await?;
        tls.write_all(body).await?;
        let mut response = Vec::new();
        // A server that closes without close_notify still gave us the whole response.
        let _ = tls.read_to_end(&mut response).await;
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("no HTTP response")?;
        if !response.starts_with(b"HTTP/1.1 200") {
            return Err(format!(
                "webhook answered {}",
                String::from_utf8_lossy(&response[..split])
            )
            .into());
        }
        Ok(response[split + 4..].to_vec())
    }
}
