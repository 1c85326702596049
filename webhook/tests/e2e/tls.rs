//! HTTPS on loopback for the end-to-end tests, blocking and small: a client that posts a review
//! to the webhook, and a proxy the apiserver calls instead of the webhook, which records every
//! AdmissionReview it carries (request and answer), can hold each one back (a slow webhook), or
//! answer `allowed` itself (capturing what the apiserver sends for any object, even one the
//! webhook would refuse).
//!
//! HTTP/1.1 only (the proxy offers no `h2` in ALPN, so the apiserver's Go client speaks
//! HTTP/1.1 to it); one request per upstream connection.

use probelint_cluster::Leaf;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS server configuration serving `leaf`, HTTP/1.1 only.
pub fn server_config(leaf: &Leaf) -> Arc<ServerConfig> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .expect("the leaf's certificate PEM");
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("the leaf's key PEM");
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("a serving certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A TLS client configuration trusting only `ca_pem`.
pub fn client_config(ca_pem: &str) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("a CA certificate");
    }
    Arc::new(
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// One HTTP/1.1 message: the start line, the headers, the body.
pub struct Message {
    pub start: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one message; `None` at a clean end of the stream (the peer closed between messages).
pub fn read_message(reader: &mut impl BufRead) -> std::io::Result<Option<Message>> {
    let mut start = String::new();
    if reader.read_line(&mut start)? == 0 {
        return Ok(None);
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut message = Message {
        start: start.trim_end().to_owned(),
        headers,
        body: Vec::new(),
    };
    if message
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|e| std::io::Error::other(format!("bad chunk size: {e}")))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            message.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = message.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|e| std::io::Error::other(format!("bad Content-Length: {e}")))?;
        message.body = vec![0; length];
        reader.read_exact(&mut message.body)?;
    }
    Ok(Some(message))
}

/// `POST https://127.0.0.1:port{path}` with a JSON body, trusting `ca_pem`: the status and the
/// body of the answer.
pub fn post(port: u16, ca_pem: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    post_with(&client_config(ca_pem), port, path, body)
}

fn post_with(
    config: &Arc<ClientConfig>,
    port: u16,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    let name = ServerName::try_from("127.0.0.1").expect("an IP address");
    let connection = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    let mut message = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    message.extend_from_slice(body);
    // One write: headers and body in separate small writes would wait on delayed ACKs.
    tls.write_all(&message)?;
    tls.flush()?;
    let mut reader = BufReader::new(tls);
    let answer = read_message(&mut reader)?
        .ok_or_else(|| std::io::Error::other("the server closed without answering"))?;
    let status = answer
        .start
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {:?}", answer.start)))?;
    Ok((status, answer.body))
}

/// One AdmissionReview the proxy carried.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The path the apiserver called (`/validate?timeout=5s`).
    pub path: String,
    /// The AdmissionReview the apiserver sent.
    pub request: Value,
    /// What the apiserver got back.
    pub response: Value,
}

/// Where the proxy sends what it receives.
#[derive(Clone)]
pub enum Upstream {
    /// The webhook on this loopback port, whose serving certificate this CA signed.
    Webhook { port: u16, ca_pem: String },
    /// Nobody: the proxy answers `allowed: true` itself.
    AllowAll,
}

/// A TLS-terminating proxy on a loopback port.
pub struct Proxy {
    pub port: u16,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    delay_ms: Arc<AtomicU64>,
}

impl Proxy {
    /// Listens on a free loopback port with `leaf` (a certificate for `127.0.0.1`).
    pub fn start(leaf: &Leaf, upstream: Upstream) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let server = server_config(leaf);
        let client = match &upstream {
            Upstream::Webhook { ca_pem, .. } => Some(client_config(ca_pem)),
            Upstream::AllowAll => None,
        };
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let shared = (exchanges.clone(), delay_ms.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (server, client, upstream) = (server.clone(), client.clone(), upstream.clone());
                let (exchanges, delay_ms) = (shared.0.clone(), shared.1.clone());
                std::thread::spawn(move || {
                    let _ =
                        serve_connection(stream, &server, &upstream, client, &exchanges, &delay_ms);
                });
            }
        });
        Proxy {
            port,
            exchanges,
            delay_ms,
        }
    }

    /// `https://127.0.0.1:<port>`, for `webhook.external.url`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Holds every request back for `delay` before passing it on.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Every review carried so far, in the order they were answered.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().expect("exchanges").clone()
    }
}

fn serve_connection(
    tcp: TcpStream,
    server: &Arc<ServerConfig>,
    upstream: &Upstream,
    client: Option<Arc<ClientConfig>>,
    exchanges: &Mutex<Vec<Exchange>>,
    delay_ms: &AtomicU64,
) -> std::io::Result<()> {
    tcp.set_nodelay(true)?;
    let connection = ServerConnection::new(server.clone()).map_err(std::io::Error::other)?;
    let mut reader = BufReader::new(rustls::StreamOwned::new(connection, tcp));
    while let Some(request) = read_message(&mut reader)? {
        let path = request
            .start
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_owned();
        std::thread::sleep(Duration::from_millis(delay_ms.load(Ordering::SeqCst)));
        let review: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let (status, body) = match (upstream, &client) {
            (Upstream::Webhook { port, .. }, Some(client)) => {
                let endpoint = path.split('?').next().unwrap_or("");
                match post_with(client, *port, endpoint, &request.body) {
                    Ok(answer) => answer,
                    // The webhook is down: so is the proxy, as far as the apiserver can tell.
                    Err(_) => return Ok(()),
                }
            }
            _ => (
                200,
                serde_json::to_vec(&serde_json::json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], "allowed": true}
                }))
                .expect("JSON"),
            ),
        };
        exchanges.lock().expect("exchanges").push(Exchange {
            path,
            request: review,
            response: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        let mut message = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        message.extend_from_slice(&body);
        let stream = reader.get_mut();
        stream.write_all(&message)?;
        stream.flush()?;
    }
    Ok(())
}
