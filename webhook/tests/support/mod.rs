//! Test harness: the real `probelint-webhook` binary on loopback ports, with its certificate
//! files laid out the way the kubelet mounts a Secret (the testkit's `SecretDir`), and a small HTTPS client that reports
//! which certificate the server presented.

#![allow(dead_code)] // each test binary uses a different part of the harness

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

pub const BIN: &str = env!("CARGO_BIN_EXE_probelint-webhook");

/// How long a test waits for something the webhook does (an answer, a log line, a reload)
/// before calling it hung: far past every bound of the server's own (its 5 s review timeout,
/// its 10 s header timeout), so that only a hang fails a test, never a loaded machine. The wait
/// ends as soon as the event comes.
pub const HANG: Duration = Duration::from_secs(60);

pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).expect("fixture is JSON")
}

pub use probelint_testkit::pki::{Ca, LOOPBACK, Leaf};
pub use probelint_testkit::secret::SecretDir;

/// Writes a file atomically (temporary file + rename), as editors and config tools do.
pub fn write_atomically(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// How to start the webhook.
#[derive(Default)]
pub struct Options {
    /// Require client certificates signed by the test CA.
    pub client_ca: bool,
    /// Start with `--policy` and this text in the policy file.
    pub policy: Option<String>,
    /// `--log-format text` instead of JSON; the lines are kept in [`Webhook::text_logs`].
    pub text_logs: bool,
    /// Start under these soft and hard limits on open files (`ulimit -S -n`, `-H -n`).
    pub nofile: Option<(u64, u64)>,
    /// More arguments for the binary.
    pub args: Vec<String>,
}

/// The real binary, running.
pub struct Webhook {
    child: Child,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub logs: Arc<Mutex<Vec<Value>>>,
    /// The lines of `--log-format text`, as printed.
    pub text_logs: Arc<Mutex<Vec<String>>>,
    /// The connection caps the webhook announced (`max_connections` of the `listening` lines).
    pub max_connections: usize,
    pub max_metrics_connections: usize,
    pub ca: Ca,
    pub server_leaf: Leaf,
    pub certs: SecretDir,
    pub policy_path: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Webhook {
    pub async fn start() -> Webhook {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Webhook {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::new("probelint test CA");
        let server_leaf = ca.server("probelint-webhook v1", LOOPBACK);
        let certs = SecretDir::create(
            &dir.path().join("certs"),
            &[
                ("tls.crt", &server_leaf.cert_pem),
                ("tls.key", &server_leaf.key_pem),
                ("ca.crt", &ca.pem),
            ],
        );
        let policy_dir = dir.path().join("policy");
        std::fs::create_dir(&policy_dir).expect("policy dir");
        let policy_path = policy_dir.join("policy.yaml");

        let mut command = match options.nofile {
            None => Command::new(BIN),
            Some((soft, hard)) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!(
                        "ulimit -S -n {soft} && ulimit -H -n {hard} && exec \"$0\" \"$@\""
                    ))
                    .arg(BIN);
                sh
            }
        };
        let format = if options.text_logs { "text" } else { "json" };
        command
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(certs.path("tls.crt"))
            .arg("--tls-key")
            .arg(certs.path("tls.key"))
            .args(["--log-format", format])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if options.client_ca {
            command.arg("--client-ca").arg(certs.path("ca.crt"));
        }
        command.args(&options.args);
        if let Some(policy) = &options.policy {
            std::fs::write(&policy_path, policy).expect("policy");
            command.arg("--policy").arg(&policy_path);
        }
        let mut child = command.spawn().expect("start probelint-webhook");

        // Drain stdout continuously (a full pipe would block the server's logging) and pick the
        // ports out of the `listening` lines.
        let logs = Arc::new(Mutex::new(Vec::new()));
        let text_logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        let (sink, text_sink) = (logs.clone(), text_logs.clone());
        let text = options.text_logs;
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if text {
                    if line.contains(" listening ") {
                        let field = |name: &str| {
                            line.split_whitespace()
                                .find_map(|f| f.strip_prefix(name))
                                .unwrap_or("")
                                .trim_matches('"')
                                .to_owned()
                        };
                        let _ = tx.send((
                            field("port="),
                            field("addr="),
                            field("max_connections=").parse().unwrap_or(0),
                        ));
                    }
                    text_sink.lock().expect("logs").push(line);
                    continue;
                }
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    eprintln!("non-JSON log line: {line}");
                    continue;
                };
                if value["message"] == "listening" {
                    let _ = tx.send((
                        value["port"].as_str().unwrap_or("").to_owned(),
                        value["addr"].as_str().unwrap_or("").to_owned(),
                        value["max_connections"].as_u64().unwrap_or(0) as usize,
                    ));
                }
                sink.lock().expect("logs").push(value);
            }
        });
        let (mut addr, mut metrics_addr) = (None, None);
        let (mut max_connections, mut max_metrics_connections) = (0, 0);
        while addr.is_none() || metrics_addr.is_none() {
            let (port, text, max) = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the webhook logs its listening addresses");
            let parsed: SocketAddr = text.parse().expect("listening addr");
            match port.as_str() {
                "tls" => {
                    addr = Some(parsed);
                    max_connections = max;
                }
                _ => {
                    metrics_addr = Some(parsed);
                    max_metrics_connections = max;
                }
            }
        }
        let webhook = Webhook {
            child,
            addr: addr.expect("tls addr"),
            metrics_addr: metrics_addr.expect("metrics addr"),
            logs,
            text_logs,
            max_connections,
            max_metrics_connections,
            ca,
            server_leaf,
            certs,
            policy_path,
            dir,
        };
        let deadline = Instant::now() + HANG;
        loop {
            if let Ok(reply) = webhook.metrics_get("/readyz").await
                && reply.status == 200
            {
                break;
            }
            assert!(Instant::now() < deadline, "the webhook never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        webhook
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A client that trusts the test CA, TLS 1.2 and 1.3, no client certificate.
    pub fn client(&self) -> Arc<ClientConfig> {
        client_config(&self.ca.pem, ALL_VERSIONS, None)
    }

    /// POST `body` to `path` as JSON with a fresh connection.
    pub async fn post(&self, path: &str, body: &[u8]) -> Reply {
        https(
            self.addr,
            self.client(),
            "POST",
            path,
            Some("application/json"),
            body.to_vec(),
        )
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// POST a fixture and parse the AdmissionReview that comes back.
    pub async fn review(&self, path: &str, fixture_name: &str) -> Value {
        let reply = self.post(path, &fixture(fixture_name)).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        reply.json()
    }

    pub async fn metrics_get(&self, path: &str) -> Result<Reply, Error> {
        let tcp = TcpStream::connect(self.metrics_addr).await?;
        request(tcp, "GET", path, None, Vec::new(), None).await
    }

    pub fn log_lines(&self) -> Vec<Value> {
        self.logs.lock().expect("logs").clone()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends SIGHUP.
    pub fn hangup(&self) {
        self.signal("HUP");
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{name}");
    }

    /// Polls `/readyz` on the metrics port until its text contains `needle` (10 s at most).
    pub async fn readyz_saying(&self, needle: &str) -> Reply {
        let deadline = Instant::now() + HANG;
        loop {
            let reply = self.metrics_get("/readyz").await.expect("readyz");
            if reply.text().contains(needle) {
                return reply;
            }
            assert!(
                Instant::now() < deadline,
                "/readyz never said {needle:?}: {}",
                reply.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the webhook did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub static ALL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// A rustls client trusting `ca_pem`, speaking only `versions`, with an optional client
/// certificate.
pub fn client_config(
    ca_pem: &str,
    versions: &[&'static SupportedProtocolVersion],
    client_cert: Option<&Leaf>,
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA cert");
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .expect("versions")
            .with_root_certificates(roots);
    let mut config = match client_cert {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.der()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("key PEM"),
            )
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// An HTTP response, and the certificate the server presented.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub peer_cert: Option<CertificateDer<'static>>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// One request on a new TLS connection to `addr` (server name `localhost`).
pub async fn https(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> Result<Reply, Error> {
    let tcp = TcpStream::connect(addr).await?;
    let tls = TlsConnector::from(config)
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .map(|c| c.clone().into_owned());
    request(tls, method, path, content_type, body, peer).await
}

async fn request<S>(
    stream: S,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
    peer_cert: Option<CertificateDer<'static>>,
) -> Result<Reply, Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    if let Some(content_type) = content_type {
        builder = builder.header("content-type", content_type);
    }
    let response = sender
        .send_request(builder.body(Full::new(Bytes::from(body)))?)
        .await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.into_body().collect().await?.to_bytes().to_vec();
    Ok(Reply {
        status,
        content_type,
        body,
        peer_cert,
    })
}
