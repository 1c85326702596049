//! `probelint audit` at scale, against a control plane of its own: its 1,000 Deployments keep
//! the controller manager busy for minutes, which would slow every other audit test's pods.

mod audit_support;

use audit_support::{liveness_only, probelint, text, wait_with_peak_kib};
use serde_json::{Value, json};

/// 1,000 GPU Deployments in 20 namespaces (no replicas; the controller makes their ReplicaSets
/// meanwhile): every one audited, through paginated lists (500 a
/// page). Prints the time and the audit's peak memory, a benchmark figure, not an assertion.
#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn a_thousand_deployments_in_twenty_namespaces_are_all_audited() {
    let cluster = probelint_cluster::shared("audit_scale");
    let mut namespaces = Vec::new();
    for _ in 0..20 {
        let ns = cluster.namespace("audit-scale");
        let items: Vec<Value> = (0..50)
            .map(|i| {
                let mut d = liveness_only(&format!("llm-{i}"), 0);
                d["metadata"]["namespace"] = json!(ns);
                d
            })
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        let out = cluster.apply(&list.to_string(), &[]);
        assert!(out.status.success(), "{}", text(&out));
        namespaces.push(ns);
    }
    // The ReplicaSets the controller has made by now (all 1,000 take it minutes on two cores;
    // waiting for them would only make the suite slower): counted, not awaited.
    let sets = cluster.get_json(&["get", "replicasets", "--all-namespaces"]);
    let replica_sets = sets["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|rs| {
            rs["metadata"]["namespace"]
                .as_str()
                .is_some_and(|ns| namespaces.iter().any(|n| n == ns))
        })
        .count();
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("audit.json");
    let started = std::time::Instant::now();
    let child = probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["--all-namespaces", "--format", "json", "--output"])
        .arg(&report_path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (code, peak_kib) = wait_with_peak_kib(child);
    let elapsed = started.elapsed();
    assert_eq!(code, Some(1));
    let report: Value = serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    let mut audited: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "gpu-startup-probe-missing")
        .filter(|f| {
            namespaces
                .iter()
                .any(|ns| f["object"]["namespace"] == ns.as_str())
        })
        .map(|f| f["coordinates"].as_str().unwrap())
        .collect();
    audited.sort_unstable();
    audited.dedup();
    assert_eq!(audited.len(), 1000);
    eprintln!(
        "probelint audit -A of 1,000 Deployments (and {replica_sets} ReplicaSets) in 20 \
         namespaces: {:.2} s, peak RSS {} MiB",
        elapsed.as_secs_f64(),
        peak_kib / 1024
    );
}
