//! The conformance scenarios: each runs the reference server under the harness with probes as
//! users write them (control) and as probelint makes them (treatment), and asserts what a platform
//! team would check. `cargo test -p probelint-conformance -- --nocapture` prints the timelines.
//!
//! Time scale: one manifest second is 20 ms, so a 15-minute scenario runs in 18 s.

use probelint_conformance::spec::parse_manifest;
use probelint_conformance::{Config, ContainerSpec, Report, bins, run, webhook::Webhook};
use probelint_policies::simulate::{Scenario, simulate};
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
    Config {
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

fn predicted(
    object: &Value,
    load: f64,
    duration: f64,
    port_open_during_load: bool,
) -> probelint_policies::simulate::Outcome {
    let policy = probelint_policies::Policy::default();
    let analysis = probelint_policies::Analysis::new(std::slice::from_ref(object), &policy);
    let cx = analysis.containers().next().expect("a container");
    let mut scenario: Scenario =
        probelint_policies::simulate::scenario_for(cx.container, load, duration);
    scenario.port_open_during_load = port_open_during_load;
    simulate(&scenario)
}

const LIVENESS_ONLY: &str = "          livenessProbe:
            httpGet: {path: /livez, port: http}
            initialDelaySeconds: 10
          readinessProbe:
            httpGet: {path: /readyz, port: http}
";

/// Scenario 1: a load far longer than liveness tolerates. Control restarts forever; the manifest
/// mutated by the real webhook loads once and is Ready within a period of the load.
#[test]
fn slow_load_control_restart_storm_treatment_loads_once() {
    let _serial = serial();
    let load = 300.0;
    let duration = 800.0;
    let control = deployment(&[("REFERENCE_FAULT_LOAD_SECONDS", "300")], LIVENESS_ONLY);
    let hook = Webhook::start(&bins::webhook()).expect("webhook starts");
    let treatment = hook.mutate(&control).expect("webhook mutates");
    assert!(
        treatment
            .pointer("/spec/template/spec/containers/0/startupProbe")
            .is_some(),
        "the webhook added a startupProbe: {treatment:#}"
    );

    let before = run(&container(&control), &config(duration, None));
    show("scenario 1, control (liveness, no startupProbe)", &before);
    assert!(
        before.restarts >= 3,
        "control restarted {} times",
        before.restarts
    );
    assert_eq!(before.first_ready, None, "control was never Ready");

    let after = run(&container(&treatment), &config(duration, None));
    show(
        "scenario 1, treatment (mutated by probelint-webhook)",
        &after,
    );
    assert_eq!(after.restarts, 0);
    let ready = after.first_ready.expect("treatment becomes Ready");
    let period = 10.0;
    assert!(
        (load..=load + period + 5.0).contains(&ready),
        "first Ready at {ready} s"
    );

    // The engine's kubelet model predicts the same figures from the manifests alone.
    let p = predicted(&control, load, duration, false);
    assert_eq!(
        p.restarts, before.restarts,
        "simulated vs measured restarts (control)"
    );
    assert_eq!(p.first_ready_seconds, None);
    let p = predicted(&treatment, load, duration, false);
    assert_eq!(p.restarts, 0);
    let predicted_ready = p.first_ready_seconds.expect("predicted Ready");
    // Within one period (plus the fraction of a second a process start takes).
    assert!(
        (predicted_ready - ready).abs() <= period + 1.0,
        "simulated {predicted_ready} s vs measured {ready} s"
    );
}

/// Scenario 2: the server opens its port before loading. tcpSocket readiness sends requests to
/// a pod that cannot infer; HTTP readiness on /readyz lets none fail.
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

    let control = run(&container(&tcp), &config(duration, Some(1.0)));
    show("scenario 2, control (tcpSocket readiness)", &control);
    let control_ready = control.first_ready.expect("Ready on an open port");
    assert!(
        control_ready < load / 2.0,
        "Ready at {control_ready} s, long before the load ends"
    );
    assert!(
        control.requests_failed >= 30,
        "requests failed during load: {}",
        control.requests_failed
    );

    let treatment = run(&container(&http), &config(duration, Some(1.0)));
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
    assert!((load..=load + 10.0).contains(&ready), "Ready at {ready} s");

    let p = predicted(&tcp, load, duration, true);
    assert!(
        (p.first_ready_seconds.unwrap() - control_ready).abs() <= 6.0,
        "{:?} vs {control_ready}",
        p.first_ready_seconds
    );
    assert!(p.ready_while_loading_seconds > 100.0);
    let p = predicted(&http, load, duration, true);
    assert!(
        (p.first_ready_seconds.unwrap() - ready).abs() <= 6.0,
        "{:?} vs {ready}",
        p.first_ready_seconds
    );
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
    // The latency window needs a few slow passes, then 3 failures × 5 s.
    assert!(
        dropped > slow_after && dropped <= slow_after + 60.0,
        "NotReady at {dropped} s"
    );
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
/// limit; liveness does not restart it.
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
    let report = run(&container(&object), &config(150.0, Some(1.0)));
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
