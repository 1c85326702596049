//! Each server's semantics against a scripted HTTP server on loopback, through the real binary.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

type Hits = Arc<Mutex<HashMap<String, usize>>>;

/// Answers `path -> (status, body)`; 404 for anything else. Counts requests per path.
fn serve(routes: &[(&str, u16, &str)]) -> (u16, Hits) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let routes: HashMap<String, (u16, String)> = routes
        .iter()
        .map(|(p, s, b)| (p.to_string(), (*s, b.to_string())))
        .collect();
    let hits: Hits = Arc::default();
    let h = hits.clone();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split(' ').nth(1).unwrap_or("").to_string();
            *h.lock().unwrap().entry(path.clone()).or_default() += 1;
            let (s, b) = routes.get(&path).cloned().unwrap_or((404, String::new()));
            let _ = write!(
                c,
                "HTTP/1.1 {s} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                b.len()
            );
        }
    });
    (port, hits)
}

fn probe(args: &[&str], port: u16, cache: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
        .args(args)
        .args([
            "--port",
            &port.to_string(),
            "--cache",
            cache.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn hits(h: &Hits, path: &str) -> usize {
    h.lock().unwrap().get(path).copied().unwrap_or(0)
}

#[test]
fn hung_vllm_with_200_health_is_not_ready_when_smoke_is_asked() {
    let (port, _) = serve(&[
        ("/health", 200, ""),
        ("/is_sleeping", 200, r#"{"is_sleeping":false}"#),
        ("/v1/completions", 500, "engine dead"),
    ]);
    let dir = tempfile_dir();
    let (ok, err) = probe(&["ready", "--server", "vllm"], port, &dir.join("c1"));
    assert!(ok, "{err}");
    let (ok, err) = probe(
        &["ready", "--server", "vllm", "--smoke"],
        port,
        &dir.join("c2"),
    );
    assert!(!ok);
    assert!(
        err.starts_with("not ready: smoke inference failed 1 in a row (HTTP 500 \"engine dead\")"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn sleeping_vllm_gets_no_inference() {
    let (port, h) = serve(&[
        ("/health", 200, ""),
        ("/is_sleeping", 200, r#"{"is_sleeping":true}"#),
        ("/v1/completions", 200, "{}"),
    ]);
    let (ok, err) = probe(
        &["ready", "--server", "vllm", "--smoke"],
        port,
        &tempfile_dir().join("c"),
    );
    assert!(ok, "{err}");
    assert!(err.contains("sleeping"), "{err}");
    assert_eq!(hits(&h, "/v1/completions"), 0);
}

#[test]
fn smoke_inference_runs_at_most_once_per_interval() {
    let (port, h) = serve(&[
        ("/health", 200, ""),
        ("/is_sleeping", 404, ""),
        ("/v1/completions", 200, "{}"),
    ]);
    let cache = tempfile_dir().join("c");
    for _ in 0..4 {
        let (ok, err) = probe(
            &["ready", "--server", "vllm", "--smoke", "--interval", "3600"],
            port,
            &cache,
        );
        assert!(ok, "{err}");
    }
    assert_eq!(hits(&h, "/health"), 4);
    assert_eq!(hits(&h, "/v1/completions"), 1);
}

#[test]
fn loading_503_is_not_started_and_tgi_smoke_uses_generate() {
    let (port, h) = serve(&[("/health", 503, "loading")]);
    let (ok, err) = probe(
        &["startup", "--server", "tgi"],
        port,
        &tempfile_dir().join("c"),
    );
    assert!(!ok);
    assert!(
        err.starts_with("not started: GET /health: HTTP 503"),
        "{err}"
    );
    let (port2, h2) = serve(&[("/health", 200, ""), ("/generate", 200, "{}")]);
    assert!(
        probe(
            &["ready", "--server", "tgi", "--smoke"],
            port2,
            &tempfile_dir().join("c")
        )
        .0
    );
    assert_eq!(hits(&h2, "/generate"), 1);
    assert_eq!(hits(&h, "/generate"), 0);
}

#[test]
fn sglang_ready_path_already_generates_so_no_extra_inference() {
    let (port, h) = serve(&[
        ("/health_generate", 200, ""),
        ("/v1/completions", 200, "{}"),
    ]);
    assert!(
        probe(
            &["ready", "--server", "sglang", "--smoke"],
            port,
            &tempfile_dir().join("c")
        )
        .0
    );
    assert_eq!(hits(&h, "/v1/completions"), 0);
}

#[test]
fn worker_checks_leader_reachability_and_bad_input_is_exit_2() {
    let (port, _) = serve(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
        .args(["worker", "--leader", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
        .args(["ready", "--server", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown server `nope`"));
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "probelint-probe-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
