//! The two echo servers as `bench-run webhook` runs them: the real binaries over real TLS, with
//! the run's kind of certificate. Both answer every benchmark body with an allowed review for
//! its uid; the same-stack echo (`echo-listener`) is served by the webhook's own listener, whose
//! limits it keeps (a connection that sends no request is closed).

use hyper::body::Bytes;
use probelint_bench::loadgen::{self, Target};
use probelint_bench::{review, tls};
use probelint_testkit::net::free_port;
use probelint_testkit::pki::{Ca, LOOPBACK};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt as _;

/// The webhook's `FIRST_REQUEST_TIMEOUT` (`webhook/src/listen.rs`): a connection must send its
/// first request within this time of its handshake. axum-server has no such limit.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// An echo server process, killed when dropped; its output goes to `log`.
struct Echo {
    child: Child,
    name: &'static str,
    log: std::path::PathBuf,
    target: Target,
    _dir: tempfile::TempDir,
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Echo {
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Starts `name` (`--listen --tls-cert --tls-key`, as bench-run does) and waits until it
/// completes a TLS handshake.
async fn start(name: &'static str, program: &str) -> Echo {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ca = Ca::new("probelint bench test CA");
    let leaf = ca.server("probelint-bench", LOOPBACK);
    let (cert, key, log) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("out.log"),
    );
    write(&cert, &leaf.cert_pem);
    write(&key, &leaf.key_pem);
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let out = std::fs::File::create(&log).expect("log file");
    let child = Command::new(program)
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log file"))
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let target = Target {
        addr,
        path: "/echo".to_owned(),
        tls: tls::client_config(ca.pem.as_bytes()).expect("client TLS configuration"),
        server_pid: Some(child.id()),
    };
    let mut echo = Echo {
        child,
        name,
        log,
        target,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = echo.child.try_wait() {
            panic!("{name} exited ({status}):\n{}", echo.output());
        }
        match loadgen::connect(&echo.target).await {
            Ok(_) => return echo,
            Err(e) if Instant::now() > deadline => {
                panic!("{name} did not come up: {e}\n{}", echo.output())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn both() -> [Echo; 2] {
    [
        start("echo-listener", env!("CARGO_BIN_EXE_echo-listener")).await,
        start("echo-server", env!("CARGO_BIN_EXE_echo-server")).await,
    ]
}

#[tokio::test]
async fn both_echoes_answer_every_body_with_an_allowed_review_for_its_uid() {
    for echo in both().await {
        let name = echo.name;
        let mut sender = loadgen::connect(&echo.target).await.expect("connect");
        // Several requests on one keep-alive connection, on each path bench-run may use.
        for path in ["/echo", "/validate", "/mutate"] {
            for body in review::bodies() {
                let answer = loadgen::post(&mut sender, path, &Bytes::from(body.json.clone()))
                    .await
                    .unwrap_or_else(|e| panic!("{name} {path} {}: {e}", body.name));
                let answer: Value = serde_json::from_slice(&answer).expect("JSON");
                let sent: Value = serde_json::from_slice(&body.json).expect("JSON");
                assert_eq!(answer["kind"], "AdmissionReview", "{name}: {answer}");
                assert_eq!(
                    answer["response"]["uid"], sent["request"]["uid"],
                    "{name}: {answer}"
                );
                assert_eq!(answer["response"]["allowed"], true, "{name}: {answer}");
                assert!(
                    answer["response"].get("patch").is_none(),
                    "{name}: {answer}"
                );
            }
        }
        // A body that is not a review is refused, and the connection still serves the next.
        let refused = loadgen::post(&mut sender, "/echo", &Bytes::from_static(b"{\"no\": 1}"))
            .await
            .expect_err("no request.uid");
        assert!(refused.contains("400"), "{name}: {refused}");
        let body = &review::bodies()[0];
        loadgen::post(&mut sender, "/echo", &Bytes::from(body.json.clone()))
            .await
            .unwrap_or_else(|e| panic!("{name} after a refusal: {e}"));
    }
}

#[tokio::test]
async fn the_same_stack_echo_closes_a_connection_that_sends_no_request() {
    let echo = start("echo-listener", env!("CARGO_BIN_EXE_echo-listener")).await;
    let tcp = tokio::net::TcpStream::connect(echo.target.addr)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(&echo.target.tls));
    let mut stream = connector.connect(name, tcp).await.expect("TLS handshake");
    let start = Instant::now();
    let mut buf = [0u8; 64];
    // The webhook's watch looks once a second; a few more seconds for a loaded machine.
    let read = tokio::time::timeout(
        FIRST_REQUEST_TIMEOUT + Duration::from_secs(5),
        stream.read(&mut buf),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "echo-listener kept an idle connection past the first-request timeout:\n{}",
            echo.output()
        )
    });
    // A close, with or without TLS close_notify: EOF, or an error for the cut connection.
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "echo-listener sent bytes unasked: {read:?}"
    );
    let waited = start.elapsed();
    assert!(
        waited >= FIRST_REQUEST_TIMEOUT - Duration::from_millis(500),
        "closed after {waited:?}, before the first-request timeout"
    );
}
