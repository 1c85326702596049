//! Each server's semantics against a scripted HTTP server on loopback, through the real binary.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

type Hits = Arc<Mutex<HashMap<String, usize>>>;

/// Answers `path -> (status, body)`; 404 for anything else. Counts requests per path.
fn serve(routes: &[(&str, u16, &str)]) -> (u16, Hits) {
    let script: Vec<(&str, Vec<(u16, &str)>)> = routes
        .iter()
        .map(|(p, s, b)| (*p, vec![(*s, *b)]))
        .collect();
    let (port, hits, _) = serve_script(&script);
    (port, hits)
}

/// Request bodies per path, in arrival order.
type Bodies = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// Like [`serve`], but each path answers its list in turn (the last one again once the list
/// runs out): a counter that rises between scrapes, a health that flips. Keeps request bodies.
fn serve_script(routes: &[(&str, Vec<(u16, &str)>)]) -> (u16, Hits, Bodies) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let routes: HashMap<String, Vec<(u16, String)>> = routes
        .iter()
        .map(|(p, answers)| {
            let answers = answers.iter().map(|(s, b)| (*s, b.to_string())).collect();
            (p.to_string(), answers)
        })
        .collect();
    let hits: Hits = Arc::default();
    let bodies: Bodies = Arc::default();
    let (h, bs) = (hits.clone(), bodies.clone());
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split(' ').nth(1).unwrap_or("").to_string();
            let body = req.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
            let seen = {
                let mut h = h.lock().unwrap();
                let e = h.entry(path.clone()).or_default();
                *e += 1;
                *e
            };
            bs.lock()
                .unwrap()
                .entry(path.clone())
                .or_default()
                .push(body.to_string());
            let (s, b) = routes
                .get(&path)
                .and_then(|a| a.get(seen - 1).or(a.last()))
                .cloned()
                .unwrap_or((404, String::new()));
            let _ = write!(
                c,
                "HTTP/1.1 {s} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                b.len()
            );
        }
    });
    (port, hits, bodies)
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

/// Pretends a whole `--window` passed since the state's window started (the probe's clock is
/// the state file; the counters stay whatever the server says).
fn age_window(state: &std::path::Path) {
    let line = std::fs::read_to_string(state).expect("state written");
    let (since, rest) = line.split_once(' ').expect("state line");
    let since: u64 = since.parse().expect("unix time");
    std::fs::write(state, format!("{} {rest}", since - 1000)).unwrap();
}

/// Runs `live --server SERVER` `windows` times, one progress window apart: every run must pass.
fn live_in_every_window(server: &str, port: u16, state: &std::path::Path, windows: usize) {
    for run in 0..windows {
        if run > 0 {
            age_window(state);
        }
        let (ok, err) = probe(&["live", "--server", server], port, state);
        assert!(ok, "run {run}: {err}");
    }
}

fn vllm_metrics(running: u32, waiting: u32, generated: u64) -> String {
    format!(
        "# TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{engine=\"0\",model_name=\"m\"}} {running}.0\n\
         vllm:num_requests_waiting{{engine=\"0\",model_name=\"m\"}} {waiting}.0\n\
         vllm:generation_tokens_total{{engine=\"0\",model_name=\"m\"}} {generated}.0\n\
         vllm:prompt_tokens_total{{engine=\"0\",model_name=\"m\"}} 50.0\n"
    )
}

#[test]
fn wedged_vllm_with_requests_in_flight_fails_live_only_after_the_threshold_windows() {
    let metrics = vllm_metrics(2, 5, 100);
    let (port, h) = serve(&[("/health", 200, ""), ("/metrics", 200, &metrics)]);
    let state = tempfile_dir().join("live");
    let live = ["live", "--server", "vllm", "--failure-threshold", "2"];
    let (ok, err) = probe(&live, port, &state);
    assert!(ok, "{err}");
    assert!(err.contains("first sample"), "{err}");
    age_window(&state);
    let (ok, err) = probe(&live, port, &state);
    assert!(ok, "one stalled window of two: {err}");
    assert!(err.contains("1/2 windows"), "{err}");
    age_window(&state);
    let (ok, err) = probe(&live, port, &state);
    assert!(!ok);
    assert!(
        err.starts_with(
            "not live: wedged: 7 request(s) in flight and \
             vllm:generation_tokens_total+vllm:prompt_tokens_total flat at 150 for 2 windows of 30 s \
             (= 60 s; --failure-threshold 2); these counters advance every engine step"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(hits(&h, "/health"), 0, "liveness never reads /health");
    assert_eq!(hits(&h, "/metrics"), 3);
}

#[test]
fn busy_vllm_whose_tokens_rise_is_never_restarted() {
    let scrapes: Vec<String> = (1..=4).map(|i| vllm_metrics(64, 200, 1000 * i)).collect();
    let script = vec![(
        "/metrics",
        scrapes.iter().map(|m| (200, m.as_str())).collect(),
    )];
    let (port, _, _) = serve_script(&script);
    let state = tempfile_dir().join("live");
    live_in_every_window("vllm", port, &state, 4);
    let line = std::fs::read_to_string(&state).unwrap();
    assert!(line.trim_end().ends_with(" 0"), "no stalled window: {line}");
}

#[test]
fn tgi_whose_health_fails_under_a_full_queue_stays_live_while_it_decodes() {
    let scrape = |steps: u32| {
        format!(
            "tgi_queue_size 128\ntgi_batch_current_size 32\n\
             tgi_batch_inference_success{{method=\"prefill\"}} 10\n\
             tgi_batch_inference_success{{method=\"decode\"}} {steps}\n"
        )
    };
    let scrapes = [scrape(500), scrape(900), scrape(1300)];
    let script = vec![
        ("/health", vec![(503, r#"{"error":"unhealthy"}"#)]),
        (
            "/metrics",
            scrapes.iter().map(|m| (200, m.as_str())).collect(),
        ),
    ];
    let (port, h, _) = serve_script(&script);
    let state = tempfile_dir().join("live");
    live_in_every_window("tgi", port, &state, 3);
    assert_eq!(hits(&h, "/health"), 0);
}

#[test]
fn an_idle_server_with_flat_counters_is_live() {
    let metrics = vllm_metrics(0, 0, 100);
    let (port, _) = serve(&[("/metrics", 200, &metrics)]);
    let state = tempfile_dir().join("live");
    live_in_every_window("vllm", port, &state, 3);
}

#[test]
fn sglang_without_metrics_falls_back_to_ping_not_to_its_generating_health() {
    let (port, h) = serve(&[("/ping", 200, ""), ("/health", 200, "")]);
    let (ok, err) = probe(
        &["live", "--server", "sglang"],
        port,
        &tempfile_dir().join("live"),
    );
    assert!(ok, "{err}");
    assert!(
        err.starts_with("live: GET /ping answered; cannot judge progress (GET /metrics: HTTP 404)"),
        "{err}"
    );
    assert_eq!(hits(&h, "/health"), 0);
}

#[test]
fn dynamo_frontend_200_with_unhealthy_body_is_not_ready() {
    let (port, _) = serve(&[(
        "/health",
        200,
        r#"{"instances":[],"message":"No endpoints available","status":"unhealthy"}"#,
    )]);
    let cache = tempfile_dir().join("c");
    let (ok, err) = probe(&["ready", "--server", "dynamo-frontend"], port, &cache);
    assert!(!ok);
    assert_eq!(
        err.trim_end(),
        "not ready: GET /health: body says status \"unhealthy\", not \"healthy\""
    );
    let (port, _) = serve(&[(
        "/health",
        200,
        r#"{"status":"healthy","instances":[{"endpoint":"generate"}]}"#,
    )]);
    let (ok, err) = probe(&["startup", "--server", "dynamo-frontend"], port, &cache);
    assert!(ok, "{err}");
}

#[test]
fn llama_router_is_ready_only_once_the_model_is_loaded_and_smoke_names_it() {
    let models = |state: &str| {
        format!(
            r#"{{"object":"list","data":[{{"id":"qwen","aliases":[],"status":{{"value":"{state}"}}}}]}}"#
        )
    };
    let (loading, loaded) = (models("loading"), models("loaded"));
    let script = vec![
        ("/health", vec![(200, r#"{"status":"ok"}"#)]),
        (
            "/props",
            vec![(200, r#"{"role":"router","max_instances":4}"#)],
        ),
        (
            "/models",
            vec![(200, loading.as_str()), (200, loaded.as_str())],
        ),
        ("/v1/completions", vec![(200, "{}")]),
    ];
    let (port, h, bodies) = serve_script(&script);
    let cache = tempfile_dir().join("c");
    let args = [
        "ready",
        "--server",
        "llama-cpp",
        "--model",
        "qwen",
        "--smoke",
    ];
    let (ok, err) = probe(&args, port, &cache);
    assert!(!ok);
    assert_eq!(
        err.trim_end(),
        "not ready: router has no model loaded (qwen loading)"
    );
    assert_eq!(hits(&h, "/v1/completions"), 0);
    let (ok, err) = probe(&args, port, &cache);
    assert!(ok, "{err}");
    assert!(err.contains("router has model qwen loaded"), "{err}");
    let sent = bodies.lock().unwrap()["/v1/completions"].clone();
    assert_eq!(
        sent,
        [r#"{"prompt":"1","max_tokens":1,"temperature":0,"model":"qwen"}"#]
    );
}

#[test]
fn triton_smoke_needs_the_models_own_input_and_uses_its_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
        .args(["ready", "--server", "triton", "--smoke"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --smoke-body"));
    let (port, h, bodies) = serve_script(&[
        ("/v2/health/ready", vec![(200, "")]),
        ("/v2/models/resnet/ready", vec![(200, "")]),
        ("/v2/models/resnet/infer", vec![(200, "{}")]),
    ]);
    let input = r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[0]}]}"#;
    let args = [
        "ready",
        "--server",
        "triton",
        "--model",
        "resnet",
        "--smoke",
        "--smoke-body",
        input,
    ];
    let (ok, err) = probe(&args, port, &tempfile_dir().join("c"));
    assert!(ok, "{err}");
    assert_eq!(hits(&h, "/v2/models/resnet/ready"), 1);
    assert_eq!(bodies.lock().unwrap()["/v2/models/resnet/infer"], [input]);
}

#[test]
fn live_flags_that_cannot_work_are_exit_2() {
    for args in [
        &["live", "--server", "vllm", "--failure-threshold", "0"][..],
        &["live", "--server", "ollama", "--by", "progress"],
        &["live", "--metric-work", "a"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// The real reference server (tests/reference), the binary the conformance suite runs: it loads
/// weights, runs a real forward pass as its smoke inference, and breaks on purpose. Its paths are
/// not in the server table, so the probe is told them — as a user of a server the table does not
/// know would.
mod reference {
    use super::{age_window, probe, tempfile_dir};
    use probelint_conformance::bins;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// 1 s of the server's flags = 50 ms (its `--time-scale`); the probe's own windows are real
    /// seconds, which the tests move with [`age_window`] instead of waiting.
    const SCALE: &str = "0.05";
    /// Bound on polls while waiting for the server to change state (each poll is one probe run).
    const POLLS: usize = 600;

    struct Server {
        child: Child,
        port: u16,
        _dir: std::path::PathBuf,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn start(faults: &[&str]) -> Server {
        let dir = tempfile_dir();
        let model = dir.join("model.safetensors");
        let made = Command::new(bins::reference_server())
            .args(["make-model", "--params", "20000", "--out"])
            .arg(&model)
            .output()
            .expect("make-model runs");
        assert!(made.status.success(), "make-model failed");
        let mut cmd = Command::new(bins::reference_server());
        cmd.arg("serve")
            .arg("--model")
            .arg(&model)
            .args(["--listen", "127.0.0.1:0", "--time-scale", SCALE])
            .args(faults)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (name, _) in std::env::vars() {
            if name.starts_with("REFERENCE_") {
                cmd.env_remove(name);
            }
        }
        let mut child = cmd.spawn().expect("spawn reference-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("listening line");
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no `listening on ADDR` line: {line:?}"));
        Server {
            child,
            port,
            _dir: dir,
        }
    }

    const STARTUP: &[&str] = &["startup", "--startup-path", "/startupz"];
    const READY: &[&str] = &[
        "ready",
        "--ready-path",
        "/readyz",
        "--smoke",
        "--smoke-path",
        "/v1/infer",
        "--smoke-body",
        "{}",
        "--interval",
        "0",
    ];
    const LIVEZ: &[&str] = &["live", "--live-path", "/livez"];
    /// Work: requests waiting or running; progress: smoke passes and answered inferences (not
    /// timeouts, which a hung worker also produces).
    const LIVE_PROGRESS: &[&str] = &[
        "live",
        "--metric-work",
        "reference_queue_depth",
        "--metric-progress",
        "reference_smoke_total,reference_infer_requests_total{result=\"ok\"}",
        "--failure-threshold",
        "2",
    ];

    /// Runs `args` until its verdict is `want`; returns that run's stderr.
    fn until(s: &Server, args: &[&str], want: bool, cache: &std::path::Path) -> String {
        for _ in 0..POLLS {
            let (ok, err) = probe(args, s.port, cache);
            if ok == want {
                return err;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("{args:?} never became {want} in {POLLS} runs");
    }

    fn http(port: u16, req: &str) -> String {
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.write_all(req.as_bytes()).expect("send");
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    }

    fn infer(port: u16) -> String {
        http(
            port,
            "POST /v1/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
    }

    /// The lines of the two progress counters: they change exactly when progress is made.
    fn progress_lines(port: u16) -> Vec<String> {
        http(
            port,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .lines()
        .filter(|l| {
            l.starts_with("reference_smoke_total")
                || l.starts_with("reference_infer_requests_total{result=\"ok\"}")
        })
        .map(str::to_string)
        .collect()
    }

    #[test]
    fn startup_and_ready_fail_while_loading_and_pass_once_loaded_while_live_holds() {
        let s = start(&["--bind-before-load", "--load-seconds", "60"]);
        let dir = tempfile_dir();
        let (ok, err) = probe(STARTUP, s.port, &dir.join("s"));
        assert!(!ok, "{err}");
        assert!(
            err.starts_with("not started: GET /startupz: HTTP 503"),
            "{err}"
        );
        let (ok, err) = probe(READY, s.port, &dir.join("r"));
        assert!(!ok, "{err}");
        assert!(err.starts_with("not ready: GET /readyz: HTTP 503"), "{err}");
        // Liveness must hold through the load: failing it here is the restart storm.
        let (ok, err) = probe(LIVEZ, s.port, &dir.join("l"));
        assert!(ok, "{err}");

        until(&s, STARTUP, true, &dir.join("s"));
        let err = until(&s, READY, true, &dir.join("r"));
        assert!(err.contains("smoke inference passed just now"), "{err}");
        let (ok, err) = probe(LIVE_PROGRESS, s.port, &dir.join("p"));
        assert!(ok, "{err}");
        let (ok, err) = probe(LIVEZ, s.port, &dir.join("l"));
        assert!(ok, "{err}");
    }

    #[test]
    fn a_hung_worker_drops_readiness_then_fails_liveness_from_progress() {
        let s = start(&["--hang-after", "100"]);
        let dir = tempfile_dir();
        until(&s, READY, true, &dir.join("r"));
        let err = until(&s, READY, false, &dir.join("r"));
        assert!(
            err.contains("worker"),
            "readiness names the hung worker: {err}"
        );
        // Requests sent now queue behind the hung worker and stay in flight.
        let port = s.port;
        let senders: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(move || infer(port)))
            .collect();
        for _ in 0..POLLS {
            let m = http(
                port,
                "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            );
            if m.lines()
                .any(|l| l.starts_with("reference_queue_depth ") && !l.ends_with(" 0"))
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let state = dir.join("p");
        let (ok, err) = probe(LIVE_PROGRESS, s.port, &state);
        assert!(ok, "first sample: {err}");
        age_window(&state);
        let (ok, err) = probe(LIVE_PROGRESS, s.port, &state);
        assert!(ok, "one stalled window of two: {err}");
        age_window(&state);
        let (ok, err) = probe(LIVE_PROGRESS, s.port, &state);
        assert!(!ok, "{err}");
        assert!(err.starts_with("not live: wedged: "), "{err}");
        // The server's own liveness agrees once its heartbeat is 20 s (scaled) old.
        until(&s, LIVEZ, false, &dir.join("l"));
        for t in senders {
            let answer = t.join().expect("sender");
            assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
        }
    }

    #[test]
    fn a_slow_busy_server_drops_readiness_but_is_never_failed_by_liveness() {
        let s = start(&["--slow-after", "0", "--slow-factor", "20"]);
        let dir = tempfile_dir();
        until(&s, STARTUP, true, &dir.join("s"));
        let stop = Arc::new(AtomicBool::new(false));
        let port = s.port;
        let traffic: Vec<_> = (0..4)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        infer(port);
                    }
                })
            })
            .collect();
        let err = until(&s, READY, false, &dir.join("r"));
        assert!(
            err.contains("latency"),
            "readiness sheds the slow pod: {err}"
        );
        let state = dir.join("p");
        let mut last = progress_lines(port);
        let mut busy_rounds = 0;
        for round in 0..4 {
            if round > 0 {
                // A window's worth of work: wait for at least one pass to finish.
                for _ in 0..POLLS {
                    let now = progress_lines(port);
                    if now != last {
                        last = now;
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                age_window(&state);
            }
            let (ok, err) = probe(LIVE_PROGRESS, s.port, &state);
            assert!(ok, "round {round}: {err}");
            busy_rounds += usize::from(
                err.starts_with("live: progressing: ") && !err.starts_with("live: progressing: 0 "),
            );
        }
        assert!(busy_rounds > 0, "no round saw requests in flight");
        let (ok, err) = probe(LIVEZ, s.port, &dir.join("l"));
        assert!(ok, "{err}");
        stop.store(true, Ordering::Relaxed);
        for t in traffic {
            t.join().expect("traffic");
        }
    }
}

#[test]
fn install_copies_a_runnable_binary_for_an_init_container() {
    let dir = tempfile_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
        .args(["install", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let copied = dir.join("probelint-probe");
    let (port, _) = serve(&[("/health", 200, "")]);
    let run = Command::new(&copied)
        .args(["startup", "--server", "vllm", "--port", &port.to_string()])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let missing = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
        .args(["install", dir.join("no/such/dir").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn vllm_asleep_by_its_metrics_gets_no_inference_and_awake_does() {
    let asleep = "vllm:engine_sleep_state{engine=\"0\",model_name=\"m\",sleep_state=\"awake\"} 0.0\n\
                  vllm:engine_sleep_state{engine=\"0\",model_name=\"m\",sleep_state=\"weights_offloaded\"} 1.0\n";
    let (port, h) = serve(&[
        ("/health", 200, ""),
        ("/metrics", 200, asleep),
        ("/v1/completions", 200, "{}"),
    ]);
    let (ok, err) = probe(
        &["ready", "--server", "vllm", "--smoke"],
        port,
        &tempfile_dir().join("c"),
    );
    assert!(ok, "{err}");
    assert!(err.contains("engine is sleeping"), "{err}");
    assert_eq!(hits(&h, "/v1/completions"), 0);
    let awake = asleep.replace("} 0.0", "} 1.0");
    let (port, h) = serve(&[
        ("/health", 200, ""),
        ("/metrics", 200, &awake),
        ("/v1/completions", 200, "{}"),
    ]);
    let (ok, err) = probe(
        &["ready", "--server", "vllm", "--smoke"],
        port,
        &tempfile_dir().join("c"),
    );
    assert!(ok, "{err}");
    assert_eq!(hits(&h, "/v1/completions"), 1);
}
