//! The chart's alert pack (`templates/prometheusrule.yaml`) and dashboard
//! (`templates/configmap-dashboard.yaml`, `files/dashboard-gpu-probes.json`).
//!
//! Tier 2 (`#[ignore = "e2e: ..."]`, run with `-- --ignored`): real Helm renders the chart
//! (helm-sdkpy, in the virtualenv the chart tests use) and the real `promtool`, built from
//! Prometheus' Go module pinned in `tests/cluster/go/promtool` and cached under the target
//! directory, checks the rules and runs them over the series of
//! `charts/probelint/tests/alerts/scenarios/` (shaped from the real-kubelet scenarios of
//! `tests/kubelet`; that directory's README says how): each alert fires on the arms that show
//! its failure and stays silent on the fixed arms. `charts/probelint/tests/check_alerts.py` is
//! the harness; this test runs it and fails with its report.
//!
//! Tier 1 (no Helm, no Go): the dashboard as shipped is valid Grafana JSON showing what the
//! alerts read, and neither template renders anything unless enabled.

#![cfg(unix)]

mod common;

use common::{output, text, workspace_root};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

fn chart_dir() -> PathBuf {
    workspace_root().join("charts").join("probelint")
}

#[test]
#[ignore = "e2e: real Helm (Python 3 and PyPI: helm-sdkpy) and promtool, built with Go 1.24+ and the Go module proxy from tests/cluster/go/promtool"]
fn alerts_fire_on_the_real_kubelet_storms_and_stay_silent_on_their_fixes() {
    let promtool = probelint_cluster::promtool().unwrap_or_else(|e| panic!("{e}"));
    let python = probelint_testkit::python::helm_python(env!("CARGO_TARGET_TMPDIR"));
    let started = Instant::now();
    let out = output(
        Command::new(python)
            .arg(chart_dir().join("tests").join("check_alerts.py"))
            .arg("--promtool")
            .arg(&promtool)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(env!("CARGO_TARGET_TMPDIR")),
    );
    let report = text(&out);
    assert!(
        out.status.success(),
        "alert checks failed ({}):\n{report}",
        out.status
    );
    let module = workspace_root()
        .join("tests/cluster")
        .join(probelint_cluster::PROMTOOL_MODULE);
    let version =
        probelint_cluster::required_version(&module, "github.com/prometheus/prometheus").unwrap();
    let stamped = format!(
        "promtool, version {}",
        probelint_cluster::prometheus_release(&version)
    );
    for part in [
        &stamped,
        "ok figures",
        "ok render",
        "ok promtool",
        "and with the storm threshold at 1000 restarts, promtool reports the control arm's alert missing",
    ] {
        assert!(report.contains(part), "{part:?} not in:\n{report}");
    }
    eprintln!("{report}alert checks took {:.1?}", started.elapsed());
}

fn dashboard() -> serde_json::Value {
    let path = chart_dir().join("files").join("dashboard-gpu-probes.json");
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{path:?} is not JSON: {e}"))
}

/// No Helm needed: the dashboard is Grafana JSON with one time axis for what the alerts read —
/// when each GPU pod was Ready, its restarts, its failed probes by probe, the alerts themselves —
/// each query limited to the pods requesting the chart's accelerators (filled in at render).
#[test]
fn dashboard_shows_readiness_restarts_and_probe_failures_of_gpu_pods() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "probelint-gpu-probes");
    let panels = dashboard["panels"].as_array().expect("panels");
    let query = |metric: &str| -> (String, String) {
        panels
            .iter()
            .find_map(|p| {
                let expr = p["targets"][0]["expr"].as_str()?;
                expr.contains(metric)
                    .then(|| (p["type"].as_str().unwrap_or("").to_owned(), expr.to_owned()))
            })
            .unwrap_or_else(|| panic!("no panel reads {metric}"))
    };
    for (metric, kind) in [
        ("kube_pod_status_ready{", "state-timeline"),
        ("kube_pod_container_status_restarts_total", "timeseries"),
        ("prober_probe_total", "timeseries"),
        ("ALERTS{", "state-timeline"),
    ] {
        let (panel, expr) = query(metric);
        assert_eq!(panel, kind, "{metric}: {expr}");
        if metric != "ALERTS{" {
            assert!(
                expr.contains("resource=~\"__GPU_RESOURCES__\""),
                "{metric} is not limited to GPU pods: {expr}"
            );
        }
        assert!(expr.contains("namespace=~\"$namespace\""), "{expr}");
    }
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(variables, ["datasource", "namespace"]);
    // Every panel reads the chosen data source, so the dashboard works on any Grafana.
    for panel in panels {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{panel}");
    }
}

/// No Helm needed: the PrometheusRule and the dashboard ConfigMap are opt-in (the Prometheus
/// Operator's CRDs and Grafana's sidecar may not be there), off in values.yaml.
#[test]
fn alert_pack_and_dashboard_are_off_unless_enabled() {
    for (template, guard) in [
        (
            "prometheusrule.yaml",
            "{{- if .Values.monitoring.prometheusRule.enabled }}",
        ),
        (
            "configmap-dashboard.yaml",
            "{{- if .Values.monitoring.dashboard.enabled }}",
        ),
    ] {
        let path = chart_dir().join("templates").join(template);
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        // Everything before the guard is a template comment; everything after, up to its end,
        // is the object.
        let before = &source[..source
            .find(guard)
            .unwrap_or_else(|| panic!("{template}: no {guard}"))];
        assert!(
            before.trim().starts_with("{{- /*") && before.trim().ends_with("*/}}"),
            "{template} renders something before {guard}"
        );
    }
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml");
    let monitoring = &values[values.find("\nmonitoring:\n").expect("a monitoring block")..];
    for key in ["  prometheusRule:\n", "  dashboard:\n"] {
        let block = &monitoring[monitoring.find(key).expect(key)..];
        let enabled = block
            .lines()
            .find(|l| l.trim_start().starts_with("enabled:"))
            .expect("enabled");
        assert_eq!(enabled.trim(), "enabled: false", "{key}");
    }
}
