//! The real `probelint-webhook` binary on loopback ports, and a client that POSTs to it over
//! real TLS: what the conformance suites, the kubelet test and the benchmarks start.

use crate::pki::{Ca, LOOPBACK, Leaf};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long the webhook may take to listen and become ready (a debug build on a busy machine).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The uid of the reviews [`review_for`] writes.
pub const REVIEW_UID: &str = "00000000-0000-4000-8000-000000000001";

/// The webhook binary, running; killed on drop.
pub struct Webhook {
    child: Child,
    /// The TLS port: reviews, `/livez`, `/readyz`.
    pub addr: SocketAddr,
    /// The plain-HTTP port: `/metrics`, `/livez`, `/readyz`.
    pub metrics_addr: SocketAddr,
    /// The CA that signed the serving certificate, PEM.
    pub ca_pem: String,
    logs: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; fails the test, with the body, when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): HTTP {} {}", self.status, self.text()))
    }
}

/// Starts `binary` with a serving certificate for `localhost`/`127.0.0.1` from a CA made for
/// it, and waits until it is ready.
pub fn start(binary: &Path) -> Webhook {
    let ca = Ca::new("probelint test CA");
    let leaf = ca.server("probelint-webhook", LOOPBACK);
    start_serving(binary, &ca.pem, &leaf, &[])
}

/// Starts `binary` serving `leaf` (signed by the CA of `ca_pem`), with `args` after the
/// listening and certificate flags, and waits until `/readyz` answers 200. Both ports are
/// chosen by the webhook (port 0) and read from its `listening` log lines, so no other process
/// can take them in between.
pub fn start_serving(binary: &Path, ca_pem: &str, leaf: &Leaf, args: &[&str]) -> Webhook {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &leaf.cert_pem).expect("tls.crt");
    std::fs::write(&key, &leaf.key_pem).expect("tls.key");
    let mut child = Command::new(binary)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .args(["--log-format", "json"])
        .args(args)
        .env("RUST_LOG", "info")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));

    // Drained all along: a full pipe would block the webhook's logging.
    let logs = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    let sink = logs.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && value["message"] == "listening"
                && let (Some(port), Some(addr)) = (value["port"].as_str(), value["addr"].as_str())
            {
                let _ = tx.send((port.to_owned(), addr.to_owned()));
            }
            sink.lock().expect("logs").push(line);
        }
    });
    let stderr = child.stderr.take().expect("stderr");
    let errors = logs.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            errors.lock().expect("logs").push(line);
        }
    });

    let deadline = Instant::now() + START_TIMEOUT;
    let failed = |child: &mut Child, what: &str| -> ! {
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(100));
        panic!(
            "{} {what}:\n{}",
            binary.display(),
            logs.lock().expect("logs").join("\n")
        )
    };
    let (mut addr, mut metrics_addr) = (None, None);
    while addr.is_none() || metrics_addr.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((port, text)) = rx.recv_timeout(left) else {
            failed(&mut child, "did not listen");
        };
        let parsed: SocketAddr = text.parse().expect("a listening address");
        match port.as_str() {
            "tls" => addr = Some(parsed),
            _ => metrics_addr = Some(parsed),
        }
    }
    let (addr, metrics_addr) = (addr.expect("tls"), metrics_addr.expect("metrics"));
    while http_get(metrics_addr, "/readyz").is_none_or(|reply| reply.status != 200) {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            failed(&mut child, "did not become ready");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Webhook {
        child,
        addr,
        metrics_addr,
        ca_pem: ca_pem.to_owned(),
        logs,
        _dir: dir,
    }
}

impl Webhook {
    /// POSTs `body` to `path` as JSON over TLS, trusting only the webhook's CA.
    pub fn post(&self, path: &str, body: &[u8]) -> Result<Reply, String> {
        post(self.addr, &self.ca_pem, path, body)
    }

    /// What the webhook printed so far (JSON log lines; anything on stderr as it came).
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().expect("logs").clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// POSTs `body` to `https://localhost:<port of addr><path>` as JSON on a connection of its own
/// (HTTP/1.1, TLS 1.3 or 1.2 with ring), trusting only the CA of `ca_pem`.
pub fn post(addr: SocketAddr, ca_pem: &str, path: &str, body: &[u8]) -> Result<Reply, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| format!("CA PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("CA certificate: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS configuration: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name)
        .map_err(|e| format!("TLS client: {e}"))?;
    let tcp = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(REQUEST_TIMEOUT))
        .and_then(|()| tcp.set_write_timeout(Some(REQUEST_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes())
        .and_then(|()| tls.write_all(body))
        .and_then(|()| tls.flush())
        .map_err(|e| format!("POST {path}: {e}"))?;
    let mut answer = Vec::new();
    match tls.read_to_end(&mut answer) {
        Ok(_) => {}
        // A server that closes without close_notify has still sent its whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(format!("POST {path}: reading the answer: {e}")),
    }
    parse_answer(&answer).map_err(|e| format!("POST {path}: {e}"))
}

/// `GET path` on a plain-HTTP port (HTTP/1.0); `None` when nothing answers.
fn http_get(addr: SocketAddr, path: &str) -> Option<Reply> {
    let mut tcp = TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).ok()?;
    parse_answer(&answer).ok()
}

/// An HTTP/1.x answer read to its end: status and body (de-chunked).
fn parse_answer(answer: &[u8]) -> Result<Reply, String> {
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {:?}", String::from_utf8_lossy(answer)))?;
    let head = String::from_utf8_lossy(&answer[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no HTTP status: {head:?}"))?;
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let mut body = answer[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Reply { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk without its size line")?;
        let size = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("chunk size {size:?}: {e}"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = data.get(..size).ok_or("a chunk cut short")?;
        body.extend_from_slice(chunk);
        data = data.get(size + 2..).ok_or("a chunk without its CRLF")?;
    }
}

/// A `CREATE` AdmissionReview of `object`, as the apiserver sends it for a `kubectl apply`
/// (uid [`REVIEW_UID`]; the namespace is the object's, `default` when it names none).
pub fn review_for(object: &Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = format!("{}s", kind.to_ascii_lowercase());
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": resource});
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": REVIEW_UID,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "a1b2c3d4-0000-4000-8000-000000000001",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
            },
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl-client-side-apply"}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_names_the_objects_kind_resource_and_namespace() {
        let review = review_for(&json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "llm"}
        }));
        let request = &review["request"];
        assert_eq!(request["uid"], REVIEW_UID);
        assert_eq!(
            request["kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(request["resource"]["resource"], "deployments");
        assert_eq!(request["namespace"], "default");
        assert_eq!(request["name"], "llm");
        let pod = review_for(
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}),
        );
        assert_eq!(pod["request"]["kind"]["group"], "");
        assert_eq!(pod["request"]["namespace"], "ml");
    }

    #[test]
    fn answers_are_read_plain_or_chunked() {
        let plain = parse_answer(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 3\r\n\r\nbad")
            .expect("parses");
        assert_eq!((plain.status, plain.text().as_str()), (400, "bad"));
        let chunked = parse_answer(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n",
        )
        .expect("parses");
        assert_eq!(chunked.json(), json!({"a": 1}));
        assert!(parse_answer(b"garbage").is_err());
    }
}
