//! `probelint simulate --scenario node-loss`: the node goes away, its pods are evicted after the
//! node controller's grace period and their toleration of the unreachable taint, and replaced.

mod common;

use common::{json_stdout, probelint, write};
use serde_json::Value;

/// Four replicas of a server with a 300 s load that a startupProbe covers.
const SERVER: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: reference
  annotations:
    probelint.io/model-load-seconds: \"300\"
spec:
  replicas: 4
  selector:
    matchLabels: {app: reference}
  template:
    metadata:
      labels: {app: reference}
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
          startupProbe:
            httpGet: {path: /livez, port: http}
            failureThreshold: 36
          livenessProbe:
            httpGet: {path: /livez, port: http}
            initialDelaySeconds: 10
          readinessProbe:
            httpGet: {path: /readyz, port: http}
";

fn simulate(dir: &std::path::Path, file: &str, args: &[&str]) -> std::process::Output {
    probelint()
        .current_dir(dir)
        .args(["simulate", "--scenario", "node-loss"])
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

fn node_loss(dir: &std::path::Path, file: &str, args: &[&str]) -> Value {
    let out = simulate(dir, file, &[&["--format", "json"], args].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_stdout(&out)["containers"][0]["node-loss"].clone()
}

/// Two of four pods on the lost node: they stop serving at once, the controller marks them
/// NotReady at 50 s, evicts them at 50 + 300 s, and their replacements serve 309.5 s later (the
/// first startup tick after the 300 s load: ticks fall 0.5 s before each period).
#[test]
fn a_lost_node_costs_the_grace_period_the_toleration_and_one_load() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "server.yaml", SERVER);
    let n = node_loss(dir.path(), "server.yaml", &["--pods-on-node", "2"]);
    assert_eq!(n["done_seconds"], 659.5, "{n:#}");
    assert_eq!(n["lowest_serving"], 2);
    assert_eq!(n["lowest_serving_seconds"], 659.5);
    // A shorter grace period and the pod's own toleration move the eviction.
    let tolerant = SERVER.replace(
        "      containers:\n",
        "      tolerations:\n        - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 60}\n      containers:\n",
    );
    write(dir.path(), "tolerant.yaml", &tolerant);
    let n = node_loss(
        dir.path(),
        "tolerant.yaml",
        &["--pods-on-node", "2", "--node-monitor-grace-period", "40"],
    );
    assert_eq!(n["done_seconds"], 409.5, "{n:#}");
    // The human output shows the arithmetic and the same figure as mutated.
    let out = simulate(dir.path(), "server.yaml", &["--pods-on-node", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for part in [
        "node-monitor-grace-period (50 s)",
        "2 pod(s) evicted (50 + 300 s)",
        "=> node-loss done in 659.5 s; lowest serving capacity 2 of 4 pods, for 659.5 s",
    ] {
        assert!(text.contains(part), "{part:?} not in:\n{text}");
    }
}

/// A StatefulSet or a bare Pod is refused with the reason, not simulated as if a ReplicaSet
/// replaced its pods.
#[test]
fn node_loss_refuses_what_no_replicaset_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let stateful = SERVER
        .replace("kind: Deployment", "kind: StatefulSet")
        .replace(
            "spec:\n  replicas: 4\n",
            "spec:\n  serviceName: reference\n  replicas: 4\n",
        );
    write(dir.path(), "sts.yaml", &stateful);
    let out = simulate(dir.path(), "sts.yaml", &[]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--scenario node-loss needs a Deployment")
            && err.contains("its deletion is confirmed"),
        "{err}"
    );
}
