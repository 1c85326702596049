//! The conformance scenarios: each runs the reference server under the harness with probes as
//! users write them (control) and as probelint makes them (treatment), and asserts what a platform
//! team would check. `cargo test -p probelint-conformance -- --nocapture` prints the timelines;
//! the pictures (measured beside predicted) are written to `target/conformance/`.
//!
//! Where a cluster differs from the model, so does the harness: probe phases and retry jitter
//! drawn from a seed (several per scenario), endpoint propagation lag on both edges, open-loop
//! traffic, a real process killed with SIGTERM and its grace period, real check durations and
//! process start times. The model's figures are compared with the *range* `spread` gives over
//! phases, not with one run.
//!
//! Time scale: one manifest second is 20 ms, so a 15-minute scenario runs in 18 s. At that
//! scale a loaded machine moves any event by a manifest second or more, so the measured times are
//! printed beside the model's window ([`compare`]) and asserted only where they cannot move: an
//! event never comes *before* the model's earliest (a busy machine only delays), and every event
//! a user would notice (a kill, Ready, NotReady) happens within the run, whose length is the
//! generous timeout. Counts that a slow machine can only lower (restarts, failed requests) are
//! bounded above by the model.

use probelint_conformance::spec::parse_manifest;
use probelint_conformance::{Config, ContainerSpec, Report, bins, run, webhook};
use probelint_policies::simulate::backoff::NodeSettings;
use probelint_policies::simulate::{LoadingServer, Outcome, Scenario, Spread, simulate, spread};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

const SCALE: f64 = 0.02;

/// One small model for every scenario (made once per test binary).
fn model() -> PathBuf {
    static MODEL: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("model.safetensors");
            let status = std::process::Command::new(bins::reference_server())
                .args(["make-model", "--params", "20000", "--out"])
                .arg(&path)
                .status()
                .expect("make-model runs");
            assert!(status.success(), "make-model failed");
            (dir, path)
        })
        .1
        .clone()
}

/// Scenarios run one at a time: their timing is measured in tens of milliseconds.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn config(duration: f64, traffic: Option<f64>) -> Config {
    configured(duration, traffic, 1, 1.0)
}

fn configured(duration: f64, traffic: Option<f64>, seed: u64, lag: f64) -> Config {
    Config {
        seed,
        endpoint_lag: (lag, lag),
        node: NodeSettings::default(),
        observe: Some("/startupz".to_owned()),
        server: bins::reference_server(),
        model: model(),
        time_scale: SCALE,
        duration,
        traffic_interval: traffic,
        // The server's default request timeout (30 manifest s) is 0.6 s of real time at this
        // scale: on a busy CI machine a starved worker thread would turn into a failed request
        // that says nothing about probes. Give requests 5 s of real time.
        extra_args: vec!["--request-timeout".to_owned(), "250".to_owned()],
    }
}

/// A Deployment of the reference server with the given env and probes (YAML, indented 10).
fn deployment(env: &[(&str, &str)], probes: &str) -> Value {
    let env: String = env
        .iter()
        .map(|(k, v)| format!("            - name: {k}\n              value: \"{v}\"\n"))
        .collect();
    let yaml = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: reference
spec:
  template:
    spec:
      containers:
        - name: server
          image: ghcr.io/probelint/reference-server:latest
          ports:
            - name: http
              containerPort: 8080
          resources:
            limits:
              nvidia.com/gpu: 1
          env:
{env}{probes}"
    );
    parse_manifest(&yaml).expect("scenario manifest parses")
}

fn container(object: &Value) -> ContainerSpec {
    ContainerSpec::from_object(object, Some("server")).expect("container spec")
}

fn show(name: &str, report: &Report) {
    println!("== {name}\n{}", report.table());
}

/// Prints a measured time beside the model's window (manifest seconds), and asserts only that
/// it is not earlier than the window allows (`slack` for the check's own round trip).
fn compare(what: &str, measured: f64, (lo, hi): (f64, f64), slack: f64) {
    let beyond = (measured - hi).max(0.0);
    println!("{what}: measured {measured:.1} s, model {lo:.1}–{hi:.1} s ({beyond:+.1} s past it)");
    assert!(
        measured >= lo - slack,
        "{what}: measured {measured} s, before the model's earliest {lo} s"
    );
}

fn scenario_of(object: &Value, load: f64, duration: f64, server: LoadingServer) -> Scenario {
    let policy = probelint_policies::Policy::default();
    let analysis = probelint_policies::Analysis::new(std::slice::from_ref(object), &policy);
    let cx = analysis.containers().next().expect("a container");
    let mut scenario =
        probelint_policies::simulate::scenario_for_pod(cx.pod, cx.container, load, duration);
    scenario.server = server;
    // The harness runs the kubelet's rules on its own clock, starting workers and containers
    // together and restarting at once: the model is compared without the node's timings.
    scenario.node = NodeSettings::default().instant();
    scenario
}

/// The model's nominal run and its range over probe phases.
fn predicted(object: &Value, load: f64, duration: f64, server: LoadingServer) -> (Outcome, Spread) {
    let scenario = scenario_of(object, load, duration, server);
    (simulate(&scenario), spread(&scenario))
}

/// `target/conformance/NAME.svg`: the measured runs beside the model's, on one time axis.
fn picture(name: &str, duration: f64, panels: &[(String, Outcome, bool)]) {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test binary>
    let Some(target) = exe.ancestors().nth(3) else {
        return;
    };
    let dir = target.join("conformance");
    let panels: Vec<probelint::simulate_svg::Panel<'_>> = panels
        .iter()
        .map(
            |(title, outcome, knows_load)| probelint::simulate_svg::Panel {
                title: title.clone(),
                outcome,
                fleet: None,
                knows_load: *knows_load,
            },
        )
        .collect();
    let svg = probelint::simulate_svg::render(&panels, duration).expect("the picture renders");
    std::fs::create_dir_all(&dir).expect("target/conformance");
    let path = dir.join(format!("{name}.svg"));
    std::fs::write(&path, svg).expect("the picture is written");
    println!("picture: {}", path.display());
}

const LIVENESS_ONLY: &str = "          livenessProbe:
            httpGet: {path: /livez, port: http}
            initialDelaySeconds: 10
          readinessProbe:
            httpGet: {path: /readyz, port: http}
";

/// Scenario 1: a load far longer than liveness tolerates. Control restarts forever; the manifest
/// mutated by the real webhook loads once and is Ready within a period of the load. Three seeds
/// (three probe phases and retry jitters) for the control.
#[test]
fn slow_load_control_restart_storm_treatment_loads_once() {
    let _serial = serial();
    let load = 300.0;
    let duration = 800.0;
    let control = deployment(&[("REFERENCE_FAULT_LOAD_SECONDS", "300")], LIVENESS_ONLY);
    let hook = probelint_testkit::webhook::start(&bins::webhook());
    let treatment = webhook::mutate(&hook, &control).expect("webhook mutates");
    assert!(
        treatment
            .pointer("/spec/template/spec/containers/0/startupProbe")
            .is_some(),
        "the webhook added a startupProbe: {treatment:#}"
    );
    // The reference server binds its port only once loaded.
    let (model, range) = predicted(&control, load, duration, LoadingServer::Refuses);
    println!("model: {} restarts, over phases {range:?}", model.restarts);
    let mut panels = vec![("control, model (phase 0)".to_owned(), model.clone(), true)];
    for seed in [1, 2, 3] {
        let before = run(&container(&control), &configured(duration, None, seed, 1.0));
        show(&format!("scenario 1, control, seed {seed}"), &before);
        assert_eq!(before.first_ready, None, "control was never Ready");
        // A restart storm: restarted again and again. Process starts and check round trips add
        // to every cycle, so a busy machine fits fewer restarts in the run, never more than the
        // model's most (plus one across the end of the run).
        println!(
            "seed {seed}: measured {} restarts, the model's range is {}–{}",
            before.restarts, range.restarts_min, range.restarts_max
        );
        assert!(
            (2..=range.restarts_max + 1).contains(&before.restarts),
            "seed {seed}: measured {} restarts, the model's range is {}–{}",
            before.restarts,
            range.restarts_min,
            range.restarts_max
        );
        // The first kill lands where the phase puts it, [iD + (F−1)·P, iD + F·P), and in any case
        // long before the load ends: the user sees the server killed while it loads.
        let first_kill = before.trace.kills[0].0;
        let window = (
            range.first_kill_earliest.unwrap(),
            range.first_kill_latest.unwrap(),
        );
        compare(&format!("seed {seed}: first kill"), first_kill, window, 0.5);
        assert!(
            first_kill < load,
            "seed {seed}: first kill at {first_kill} s, after the {load} s load"
        );
        if seed == 1 {
            panels.push((
                format!("control, measured (seed {seed})"),
                before.outcome(),
                true,
            ));
        }
    }

    let after = run(&container(&treatment), &config(duration, None));
    show(
        "scenario 1, treatment (mutated by probelint-webhook)",
        &after,
    );
    assert_eq!(after.restarts, 0);
    let ready = after.first_ready.expect("treatment becomes Ready");
    let (model, _) = predicted(&treatment, load, duration, LoadingServer::Refuses);
    assert_eq!(model.restarts, 0);
    // The server is ready some seconds after its 300 s load fault (warm passes, the first smoke
    // inference, a busy machine): the harness sees when, by polling /startupz on its own, and
    // the model given that load must place first Ready where it was measured.
    let loaded = after.loaded_after[0].expect("the server loaded");
    assert!(loaded >= load, "loaded after {loaded} s");
    let (_, range) = predicted(&treatment, loaded, duration, LoadingServer::Refuses);
    let window = (
        range.first_ready_earliest.unwrap(),
        range.first_ready_latest.unwrap(),
    );
    compare(
        &format!("treatment: first Ready (measured load {loaded:.1} s)"),
        ready,
        window,
        0.5,
    );
    panels.push(("treatment, model".to_owned(), model, true));
    panels.push(("treatment, measured".to_owned(), after.outcome(), true));
    picture("scenario-1-slow-load", duration, &panels);
}

/// Scenario 2: the server opens its port before loading. tcpSocket readiness sends requests to
/// a pod that cannot infer; HTTP readiness on /readyz lets none fail. Endpoint lag swept.
#[test]
fn port_open_before_load_tcp_readiness_fails_requests_http_readiness_does_not() {
    let _serial = serial();
    let load = 120.0;
    let duration = 240.0;
    let env = [
        ("REFERENCE_FAULT_LOAD_SECONDS", "120"),
        ("REFERENCE_FAULT_BIND_BEFORE_LOAD", "1"),
    ];
    let tcp = deployment(
        &env,
        "          readinessProbe:\n            tcpSocket: {port: http}\n            periodSeconds: 5\n",
    );
    let http = deployment(
        &env,
        "          readinessProbe:\n            httpGet: {path: /readyz, port: http}\n            periodSeconds: 5\n",
    );
    let (model, range) = predicted(&tcp, load, duration, LoadingServer::Unavailable);
    let mut panels = vec![("tcpSocket readiness, model".to_owned(), model.clone(), true)];
    for (seed, lag) in [(1, 1.0), (2, 3.0)] {
        let control = run(
            &container(&tcp),
            &configured(duration, Some(1.0), seed, lag),
        );
        show(
            &format!("scenario 2, control (tcpSocket readiness), endpoint lag {lag} s"),
            &control,
        );
        let control_ready = control.first_ready.expect("Ready on an open port");
        // The model opens the port the moment the container starts; the real process needs a
        // moment to bind, so the check at the start can fail and Ready come a period later.
        compare(
            &format!("lag {lag} s: tcpSocket Ready"),
            control_ready,
            (
                range.first_ready_earliest.unwrap(),
                range.first_ready_latest.unwrap() + 5.0,
            ),
            0.5,
        );
        assert!(
            control_ready < load,
            "Ready at {control_ready} s: an open port is Ready before the {load} s load ends"
        );
        // The model's Ready-while-loading time, less the lag before the endpoint carries traffic,
        // at one request a second: each of those requests fails. Requests do fail (what the user
        // sees), and never more than the model's window allows; a busy machine sends fewer.
        let window = model.ready_while_loading_seconds;
        let failed = control.requests_failed as f64;
        println!(
            "lag {lag} s: {failed} requests failed, model Ready-while-loading {window} s (expected \
             about {:.0}–{window:.0})",
            (window - lag - 5.0).max(0.0)
        );
        assert!(
            failed >= 1.0 && failed <= window + 2.0,
            "lag {lag} s: {failed} requests failed, model Ready-while-loading {window} s"
        );
        if seed == 1 {
            panels.push((
                "tcpSocket readiness, measured".to_owned(),
                control.outcome(),
                true,
            ));
        }
    }

    let treatment = run(&container(&http), &configured(duration, Some(1.0), 3, 3.0));
    show("scenario 2, treatment (httpGet /readyz)", &treatment);
    assert_eq!(
        treatment.requests_failed, 0,
        "no request reached a loading pod"
    );
    assert!(
        treatment.requests_sent > 50,
        "traffic flowed once Ready: {}",
        treatment.requests_sent
    );
    let ready = treatment.first_ready.expect("Ready after the load");
    let (model, _) = predicted(&http, load, duration, LoadingServer::Unavailable);
    let loaded = treatment.loaded_after[0].expect("the server loaded");
    let (_, range) = predicted(&http, loaded, duration, LoadingServer::Unavailable);
    compare(
        &format!("/readyz Ready (measured load {loaded:.1} s)"),
        ready,
        (
            range.first_ready_earliest.unwrap(),
            range.first_ready_latest.unwrap(),
        ),
        0.5,
    );
    assert_eq!(model.ready_while_loading_seconds, 0.0);
    panels.push(("/readyz readiness, model".to_owned(), model, true));
    panels.push((
        "/readyz readiness, measured".to_owned(),
        treatment.outcome(),
        true,
    ));
    picture("scenario-2-port-open-during-load", duration, &panels);
}

const HEALTHY_PROBES: &str = "          startupProbe:
            httpGet: {path: /startupz, port: http}
            periodSeconds: 5
            failureThreshold: 30
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            periodSeconds: 5
            failureThreshold: 3
          livenessProbe:
            httpGet: {path: /livez, port: http}
            periodSeconds: 10
            failureThreshold: 3
";

/// Scenario 3: the model slows down. Readiness takes the pod out of rotation within
/// failureThreshold × period; liveness leaves it running.
#[test]
fn degradation_readiness_sheds_traffic_liveness_does_not_restart() {
    let _serial = serial();
    let slow_after = 60.0;
    let object = deployment(
        &[
            ("REFERENCE_FAULT_SLOW_AFTER", "60"),
            ("REFERENCE_FAULT_SLOW_FACTOR", "20"),
        ],
        HEALTHY_PROBES,
    );
    let report = run(&container(&object), &config(200.0, Some(1.0)));
    show("scenario 3, degradation", &report);
    assert_eq!(report.restarts, 0, "a slow server is not restarted");
    let ready = report.first_ready.expect("Ready before the slowdown");
    let not_ready = report.events("NotReady");
    let dropped = not_ready
        .iter()
        .copied()
        .find(|t| *t > ready)
        .expect("readiness dropped");
    // The latency window needs a few slow passes, then 3 failures × 5 s: about 15–60 s after
    // the slowdown on an idle machine (printed); never before it, and within the run.
    println!(
        "NotReady {:.1} s after the slowdown at {slow_after} s",
        dropped - slow_after
    );
    assert!(dropped > slow_after, "NotReady at {dropped} s");
}

/// Scenario 4: the worker hangs. Readiness drops first, then liveness restarts the container.
#[test]
fn hang_readiness_drops_first_then_liveness_restarts() {
    let _serial = serial();
    let object = deployment(&[("REFERENCE_FAULT_HANG_AFTER", "40")], HEALTHY_PROBES);
    let report = run(&container(&object), &config(160.0, Some(1.0)));
    show("scenario 4, hang", &report);
    assert!(report.restarts >= 1, "a hung server is restarted");
    let not_ready = report.events("NotReady: removed");
    let killed = report.events("killed: liveness");
    let (first_drop, first_kill) = (not_ready.first().copied(), killed.first().copied());
    assert!(
        matches!((first_drop, first_kill), (Some(d), Some(k)) if d < k),
        "readiness dropped ({first_drop:?}) before liveness killed ({first_kill:?})"
    );
}

/// Scenario 5: the server leaks memory per request. Readiness drops when memory crosses the
/// limit; liveness does not restart it. The run is long enough for the ~30 requests that reach
/// the limit even when a busy machine sends them slowly.
#[test]
fn leak_readiness_drops_at_the_memory_limit() {
    let _serial = serial();
    let object = deployment(
        &[
            ("REFERENCE_FAULT_LEAK_MB_PER_REQUEST", "4"),
            ("REFERENCE_MEMORY_LIMIT_MB", "120"),
        ],
        HEALTHY_PROBES,
    );
    let report = run(&container(&object), &config(300.0, Some(1.0)));
    show("scenario 5, leak", &report);
    assert_eq!(report.restarts, 0);
    let ready = report.first_ready.expect("Ready before the leak grows");
    assert!(
        report
            .events("NotReady: removed")
            .iter()
            .any(|t| *t > ready),
        "readiness dropped on memory"
    );
}
