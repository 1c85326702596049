//! The real `reference-server` binary over real HTTP, one fault per test, at `--time-scale 0.05`
//! (every duration in the flags below is manifest seconds; the server runs it 20 times faster).

mod common;

use common::{Spawn, failing, spawn, spawn_with};
use probelint_reference::model::{self, Expected};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long a test waits for the server to reach a state before calling it hung; the wait
/// ends as soon as it does.
const LONG: Duration = Duration::from_secs(60);

#[test]
fn probes_fail_while_loading_then_pass() {
    let started = Instant::now();
    // 40 s of load at scale 0.05 = 2 s.
    let mut s = spawn(&["--bind-before-load", "--load-seconds", "40"]);
    let (status, body) = s.get("/startupz");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["phase"], "loading");
    assert_eq!(body["status"], "fail");
    assert_eq!(body["checks"]["loaded"]["ok"], false);
    let (status, body) = s.get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(failing(&body).contains(&"loaded".to_string()), "{body}");
    // Loading is progress, not a hang: liveness passes.
    assert_eq!(s.status("/livez"), 200);
    let (status, body) = s.post("/v1/infer", "{}");
    assert_eq!(status, 503, "{body}");

    s.wait_status("/startupz", 200, LONG);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the load delay was honoured"
    );
    s.wait_status("/readyz", 200, LONG);
    let (_, body) = s.get("/readyz");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["phase"], "serving");
    assert_eq!(body["checks"]["smoke"]["correct"], true, "{body}");
    assert!(
        body["checks"]["latency"]["baseline_ms"].as_f64().is_some(),
        "{body}"
    );
    let (_, body) = s.get("/startupz");
    assert_eq!(body["checks"]["loaded"]["device"], "cpu");
    assert!(
        body["checks"]["loaded"]["load_seconds"]
            .as_f64()
            .is_some_and(|t| t >= 2.0),
        "{body}"
    );
}

#[test]
fn bind_before_load_accepts_tcp_while_unready() {
    let mut s = spawn(&["--bind-before-load", "--load-seconds", "40"]);
    let addr = s.listening(LONG);
    // What a tcpSocket readiness probe sees: the port is open...
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).expect("TCP connect while loading");
    // ...while the model cannot infer.
    assert_eq!(s.status("/readyz"), 503);
    assert_eq!(s.post("/v1/infer", "{}").0, 503);
    s.wait_status("/readyz", 200, LONG);
}

#[test]
fn default_binds_only_after_load() {
    let port = probelint_testkit::net::free_port();
    let started = Instant::now();
    let mut s = spawn_with(Spawn {
        args: vec!["--load-seconds", "40"],
        listen: format!("127.0.0.1:{port}"),
        ..Spawn::default()
    });
    std::thread::sleep(Duration::from_millis(300));
    let addr = format!("127.0.0.1:{port}").parse().expect("addr");
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "port must be closed while loading"
    );
    assert!(!s.has_listened());
    assert_eq!(s.listening(LONG), addr);
    assert!(started.elapsed() >= Duration::from_secs(2));
    s.wait_status("/startupz", 200, Duration::from_secs(2));
    s.wait_status("/readyz", 200, LONG);
}

#[test]
fn infer_returns_model_output() {
    let mut s = spawn(&[]);
    s.wait_status("/readyz", 200, LONG);
    let expected = Expected::read(&model::expected_path(&s.model)).expect("expected");

    // No input: the recorded fixed input, checked by the server.
    let (status, body) = s.post("/v1/infer", "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["matches_expected"], true);
    let output: Vec<f32> = serde_json::from_value(body["output"].clone()).expect("output");
    assert!(expected.compare(&output).ok);

    // Any input: checked here against the f64 reference.
    let input: Vec<f32> = (0..expected.input.len())
        .map(|i| (i as f32 * 0.3).cos())
        .collect();
    let reference = model::reference_forward(common::SEED, &expected.architecture, &input);
    let request = serde_json::json!({ "input": input }).to_string();
    let (status, body) = s.post("/v1/infer", &request);
    assert_eq!(status, 200, "{body}");
    assert!(body["matches_expected"].is_null());
    let output: Vec<f32> = serde_json::from_value(body["output"].clone()).expect("output");
    assert_eq!(output.len(), reference.len());
    for (o, r) in output.iter().zip(&reference) {
        assert!((o - r).abs() < 1e-4, "{o} vs {r}");
    }

    // Bad requests are 400 with a reason, never a crash.
    let (status, body) = s.post("/v1/infer", "{\"input\": [1, 2, 3]}");
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("takes")),
        "{body}"
    );
    assert_eq!(s.post("/v1/infer", "not json").0, 400);
    assert_eq!(s.post("/v1/infer", "{\"input\": \"x\"}").0, 400);
    assert_eq!(s.status("/readyz"), 200);

    s.wait_for("metrics counting the requests", LONG, |s| {
        let (_, body) = s.get("/metrics");
        let text = body.as_str().unwrap_or_default().to_owned();
        text.contains("reference_infer_requests_total{result=\"ok\"} 2")
            && text.contains("reference_infer_requests_total{result=\"bad_request\"} 3")
            && text.contains("# TYPE reference_latency_p99_seconds gauge")
            && text.contains("reference_probe_ok{probe=\"readyz\"} 1")
    });
}

#[test]
fn corrupted_weights_fail_readiness() {
    let mut s = spawn_with(Spawn {
        prepare: Some(Box::new(|path| {
            let mut bytes = std::fs::read(path).expect("read");
            let middle = bytes.len() / 2;
            bytes[middle..middle + 64].fill(0xff);
            std::fs::write(path, bytes).expect("write");
        })),
        ..Spawn::default()
    });
    // It loads (the file parses) but never becomes ready: the smoke output is wrong.
    s.wait_status("/startupz", 200, LONG);
    s.wait_for("a failed smoke inference after warm-up", LONG, |s| {
        let (_, body) = s.get("/readyz");
        body["checks"]["smoke"]["correct"] == false && body["checks"]["latency"]["ok"] == true
    });
    let (status, body) = s.get("/readyz");
    assert_eq!(status, 503);
    assert!(failing(&body).contains(&"smoke".to_string()), "{body}");
    assert!(
        body["checks"]["smoke"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("corrupted")),
        "{body}"
    );
    assert_eq!(s.status("/livez"), 200);
    let (status, body) = s.post("/v1/infer", "{}");
    assert_eq!(status, 200);
    assert_eq!(body["matches_expected"], false);
    // Readiness stays down over several smoke periods.
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(s.status("/readyz"), 503);
    }
}

#[test]
fn hang_fault_fails_liveness_while_process_stays_up() {
    // Hangs 60 s (3 s) after serving starts: time enough to see it ready first.
    let mut s = spawn(&["--hang-after", "60"]);
    s.wait_status("/readyz", 200, LONG);
    assert_eq!(s.status("/livez"), 200);
    let mut ready_dropped = None;
    let mut live_dropped = None;
    let start = Instant::now();
    while live_dropped.is_none() && start.elapsed() < LONG {
        if ready_dropped.is_none() && s.status("/readyz") == 503 {
            ready_dropped = Some(start.elapsed());
        }
        if s.status("/livez") == 503 {
            live_dropped = Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (Some(ready), Some(live)) = (ready_dropped, live_dropped) else {
        panic!(
            "ready {ready_dropped:?} live {live_dropped:?}; log:\n{}",
            s.log()
        );
    };
    assert!(
        ready < live,
        "readiness ({ready:?}) drops before liveness ({live:?})"
    );
    let (_, body) = s.get("/livez");
    assert_eq!(body["checks"]["worker"]["hang_fault"], true, "{body}");
    assert!(failing(&s.get("/readyz").1).contains(&"worker".to_string()));
    // The process is up and answers probes; only the worker is stuck.
    assert!(s.try_wait().is_none(), "process must stay up");
    let (status, body) = s.post("/v1/infer", "{}");
    assert_eq!(status, 504, "{body}");
    assert!(s.try_wait().is_none());
}

#[test]
fn slow_fault_drops_readiness_but_not_liveness() {
    // Slows down 60 s (3 s) after serving: each pass takes 10 × max(baseline, 10 ms).
    let mut s = spawn(&["--slow-after", "60", "--slow-factor", "10"]);
    s.wait_status("/readyz", 200, LONG);
    let mut live_failures = 0;
    s.wait_for("readiness to drop on latency", LONG, |s| {
        if s.status("/livez") != 200 {
            live_failures += 1;
        }
        let (status, body) = s.get("/readyz");
        status == 503 && failing(&body).contains(&"latency".to_string())
    });
    let (_, body) = s.get("/readyz");
    let p99 = body["checks"]["latency"]["p99_ms"].as_f64().unwrap_or(0.0);
    let threshold = body["checks"]["latency"]["threshold_ms"]
        .as_f64()
        .unwrap_or(f64::MAX);
    assert!(p99 > threshold, "{body}");
    // Busy, not hung: requests still complete and liveness holds.
    for _ in 0..3 {
        let (status, body) = s.post("/v1/infer", "{}");
        assert_eq!(status, 200, "{body}");
        assert!(
            body["latency_ms"].as_f64().is_some_and(|ms| ms >= 90.0),
            "{body}"
        );
    }
    for _ in 0..50 {
        if s.status("/livez") != 200 {
            live_failures += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        live_failures,
        0,
        "liveness must hold while slow; log:\n{}",
        s.log()
    );
    assert_eq!(s.status("/readyz"), 503);
}

#[test]
fn leak_fault_drops_readiness_on_memory() {
    let mut s = spawn(&["--leak-mb-per-request", "4", "--memory-limit-mb", "10"]);
    s.wait_status("/readyz", 200, LONG);
    let (_, body) = s.get("/readyz");
    assert_eq!(body["checks"]["memory"]["ok"], true, "{body}");
    assert_eq!(body["checks"]["memory"]["limit_bytes"], 10 * 1024 * 1024);
    for _ in 0..3 {
        assert_eq!(s.post("/v1/infer", "{}").0, 200);
    }
    // Wait for the memory check itself (on a loaded machine a latency spike may fail
    // readiness too, for a moment).
    s.wait_for("readiness to fail on memory", LONG, |s| {
        let (status, body) = s.get("/readyz");
        status == 503 && failing(&body).contains(&"memory".to_string())
    });
    let (_, body) = s.get("/readyz");
    assert_eq!(body["checks"]["memory"]["ok"], false, "{body}");
    let used = body["checks"]["memory"]["used_bytes"].as_u64().unwrap_or(0);
    assert!(used > 12 * 1024 * 1024, "{body}");
    assert_eq!(s.status("/livez"), 200);
}

#[test]
fn fail_to_load_exits_non_zero() {
    let mut s = spawn(&["--fail-load", "--load-seconds", "10"]);
    let status = s.wait_exit(LONG);
    assert_eq!(status.code(), Some(1), "log:\n{}", s.log());
    assert!(
        !s.has_listened(),
        "never bound: bind-after-load is the default"
    );
    assert!(s.log().contains("injected fault"), "{}", s.log());
}

#[test]
fn missing_weights_exit_non_zero() {
    let mut s = spawn_with(Spawn {
        prepare: Some(Box::new(|path| std::fs::remove_file(path).expect("remove"))),
        ..Spawn::default()
    });
    assert_eq!(s.wait_exit(LONG).code(), Some(1), "log:\n{}", s.log());
}

#[test]
fn fail_to_load_can_stay_up_unstarted() {
    // Through the environment, as a manifest's `env:` would set it.
    let mut s = spawn_with(Spawn {
        env: vec![
            ("REFERENCE_FAULT_FAIL_LOAD", "1"),
            ("REFERENCE_ON_LOAD_ERROR", "stay"),
        ],
        ..Spawn::default()
    });
    s.listening(LONG);
    s.wait_for("the failed phase", LONG, |s| {
        s.get("/startupz").1["phase"] == "failed"
    });
    let (status, body) = s.get("/startupz");
    assert_eq!(status, 503);
    assert!(
        body["checks"]["loaded"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("injected fault")),
        "{body}"
    );
    assert_eq!(s.status("/readyz"), 503);
    assert_eq!(s.status("/livez"), 200);
    assert_eq!(s.post("/v1/infer", "{}").0, 503);
    assert!(s.try_wait().is_none());
}

#[cfg(unix)]
#[test]
fn sigterm_exits_cleanly() {
    let mut s = spawn(&[]);
    s.wait_status("/readyz", 200, LONG);
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &s.pid().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    assert_eq!(s.wait_exit(LONG).code(), Some(0), "log:\n{}", s.log());
}
