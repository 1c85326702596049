//! The Helm chart of the admission webhook (`charts/probelint`), checked by real Helm and by
//! probelint itself.
//!
//! Real Helm is the Helm v4 library that the PyPI package `helm-sdkpy` bundles (a shared object
//! behind a C ABI, driven from Python). `charts/probelint/tests/check_chart.py` runs its Lint
//! action over the chart for every values variant, and its Install and Upgrade actions against
//! an in-process fake Kubernetes API server to render the chart exactly as `helm install` does
//! (`lookup` included), then checks what was rendered; see the script's docstring for the list.
//! Each `#[test]` here runs one of its checks.
//!
//! Needs Python 3 (with `venv`) and PyPI: `helm-sdkpy`, `PyYAML` and `cel-expr-python`, pinned
//! below, are installed once into a virtualenv kept under the cargo target directory and reused
//! while it has those versions. `helm-sdkpy` declares Python >= 3.12 but runs on 3.11, so it is
//! installed with `--ignore-requires-python`. These tests are part of the ecosystem suite
//! (tier 2): `#[ignore = "e2e: ..."]`, run with `-- --ignored`; there a missing Python or PyPI
//! fails them with what to install. `PYTHON` names another interpreter than `python3`.
//!
//! `UPDATE_DOCS=1` (as for `docs/`) regenerates the policy schema inside `values.schema.json` and
//! the Deployment fixture instead of failing when they are stale.
//!
//! `rendered_deployment_fixture_lints_clean` needs none of that: it lints the chart's Deployment
//! as kept in `charts/probelint/tests/rendered-deployment.yaml` (which `check_chart.py --only
//! render` compares with Helm's render) with the probelint binary of this build.

#![cfg(unix)]

mod common;

use common::{BIN, output, text, workspace_root};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn chart_dir() -> PathBuf {
    workspace_root().join("charts").join("probelint")
}

/// The virtualenv's python with the pinned Helm packages; created once per target directory.
fn helm_python() -> &'static Path {
    probelint_testkit::python::helm_python(env!("CARGO_TARGET_TMPDIR"))
}

/// Runs `check_chart.py --only CHECK` and fails with its report when the check fails.
fn run_check(check: &str) {
    let python = helm_python();
    let started = Instant::now();
    // As for docs/: `UPDATE_DOCS=1` rewrites what the chart copies from the engine and the
    // Deployment fixture, instead of failing on them.
    let update: &[&str] = match (std::env::var("UPDATE_DOCS").as_deref(), check) {
        (Ok("1"), "sync") => &["--sync-policy-schema"],
        (Ok("1"), "render") => &["--update-fixture"],
        _ => &[],
    };
    let out = output(
        Command::new(python)
            .arg(chart_dir().join("tests").join("check_chart.py"))
            .args(["--probelint", BIN, "--only", check])
            .args(update)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(env!("CARGO_TARGET_TMPDIR")),
    );
    let report = text(&out);
    assert!(
        out.status.success(),
        "chart check `{check}` failed ({}):\n{report}",
        out.status
    );
    eprintln!(
        "{report}chart check `{check}` took {:.1?}",
        started.elapsed()
    );
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn chart_matches_the_engine() {
    run_check("sync");
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn helm_lints_the_chart_in_every_mode() {
    run_check("lint");
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn helm_renders_the_chart_as_specified_and_probelint_finds_nothing() {
    run_check("render");
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn values_schema_refuses_wrong_values_by_name() {
    run_check("schema");
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn generated_certificate_survives_upgrades_and_renews() {
    run_check("upgrade");
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn accelerator_match_condition_agrees_with_the_engine() {
    run_check("cel");
}

#[test]
#[ignore = "e2e: real Helm; needs Python 3 and PyPI (helm-sdkpy)"]
fn admission_mode_renders_the_webhooks_the_exported_policies_or_both() {
    run_check("admission");
}

/// No Helm needed: the admission policies the chart renders in `admission.mode: policies` and
/// `both` are `probelint export`'s output under the built-in policy, as kept in `files/`.
/// `UPDATE_DOCS=1` rewrites them.
#[test]
fn the_charts_admission_policies_are_the_exporters_output() {
    for mode in ["warn", "enforce"] {
        let empty = tempfile::NamedTempFile::new().expect("temp file");
        let out = output(
            Command::new(BIN)
                .args(["export", "--mode", mode, "--config"])
                .arg(empty.path()),
        );
        assert!(out.status.success(), "probelint export: {}", text(&out));
        let exported = String::from_utf8(out.stdout).expect("UTF-8");
        let kept = chart_dir()
            .join("files")
            .join(format!("admission-policies-{mode}.yaml"));
        if std::env::var("UPDATE_DOCS").as_deref() == Ok("1") {
            std::fs::write(&kept, &exported).expect("write the chart's copy");
        }
        let have = std::fs::read_to_string(&kept).unwrap_or_default();
        assert!(
            have == exported,
            "{} is not `probelint export --mode {mode}`'s output; regenerate it with \
             UPDATE_DOCS=1 cargo test -p probelint --test helm_chart",
            kept.display()
        );
    }
}

/// No Helm needed: the chart's Deployment, as kept in the fixture, has no finding at any
/// severity, survives a slow start, and its probes are the ones the chart promises.
#[test]
fn rendered_deployment_fixture_lints_clean() {
    let fixture = chart_dir().join("tests").join("rendered-deployment.yaml");
    let scratch = tempfile::tempdir().unwrap();
    // Outside the repository, so that no .probelint.yaml applies: the built-in policy.
    let out = output(
        Command::new(BIN)
            .args(["--fail-on", "info", "--format", "json"])
            .arg(&fixture)
            .current_dir(scratch.path()),
    );
    let report = text(&out);
    assert!(
        out.status.success(),
        "probelint finds problems in {}:\n{report}",
        fixture.display()
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(json["findings"], serde_json::json!([]), "{report}");
    assert_eq!(json["summary"]["objects"], 1, "{report}");

    // A webhook that takes 30 s to start (slow node, cold image) is never restarted by its own
    // liveness probe, and takes no traffic before it answers.
    let out = output(
        Command::new(BIN)
            .args(["simulate", "--container", "webhook", "--load-seconds", "30"])
            .args(["--duration", "300", "--format", "json"])
            .arg(&fixture)
            .current_dir(scratch.path()),
    );
    assert!(out.status.success(), "probelint simulate:\n{}", text(&out));
    let simulated: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let webhook = &simulated["containers"][0];
    assert_eq!(webhook["restarts"], 0, "{webhook:#}");
    assert_eq!(webhook["ready_while_loading_seconds"], 0.0, "{webhook:#}");
    let first_ready = webhook["first_ready_seconds"]
        .as_f64()
        .expect("first_ready_seconds");
    assert!(first_ready <= 35.0, "{webhook:#}");

    let manifest = std::fs::read_to_string(&fixture).unwrap();
    for expected in [
        "kind: Deployment",
        "startupProbe:",
        "path: /readyz",
        "path: /livez",
        "scheme: HTTPS",
        "automountServiceAccountToken: false",
        "readOnlyRootFilesystem: true",
    ] {
        assert!(
            manifest.contains(expected),
            "{expected:?} missing from the fixture"
        );
    }
}

/// The text of the chart's `{{- define "NAME" -}}` block, up to the next comment or define.
fn chart_define(template: &str, name: &str) -> String {
    let path = chart_dir().join("templates").join(template);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let start = text
        .find(&format!("{{{{- define \"{name}\" -}}}}"))
        .unwrap_or_else(|| panic!("no define {name} in {path:?}"));
    let rest = &text[start + 1..];
    let end = ["{{/*", "{{- define"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    text[start..start + 1 + end].to_owned()
}

/// No Helm needed: the controller matchConditions trust who sent an object
/// (`request.userInfo.username`, the apiserver's word), never its ownerReferences alone; the
/// users are the webhook's built-in controllers (webhook/src/review.rs) and the operators of
/// `webhook.controllerServiceAccounts`, which the Deployment also passes to the webhook. The
/// object opt-out label is left to the webhook (no objectSelector on it). (check_chart.py's
/// `cel` and `render` checks evaluate the rendered expressions with real Helm and CEL.)
#[test]
fn controller_match_conditions_trust_the_sender_not_the_object() {
    let condition = chart_define("_helpers.tpl", "probelint.controllerCondition");
    assert!(
        condition
            .contains("!(request.userInfo.username in %s && has(object.metadata.ownerReferences)"),
        "{condition}"
    );
    assert!(
        condition.contains("probelint.controllerUsers"),
        "{condition}"
    );
    let users = chart_define("_helpers.tpl", "probelint.controllerUsers");
    assert!(
        users.contains(".Values.webhook.controllerServiceAccounts"),
        "{users}"
    );
    let names = probelint_policies::export::BUILTIN_CONTROLLER_USERS;
    assert_eq!(names.len(), 8, "{names:?}");
    for &name in names {
        let in_chart = match name
            .strip_prefix("system:serviceaccount:kube-system:")
            .and_then(|n| n.strip_suffix("-controller"))
        {
            Some(short) => {
                users.contains(&format!("\"{short}\""))
                    && users.contains("system:serviceaccount:kube-system:%s-controller")
            }
            None => users.contains(&format!("\"{name}\"")),
        };
        assert!(
            in_chart,
            "{name} is not among the chart's controller users:\n{users}"
        );
    }
    let selector = chart_define("_helpers.tpl", "probelint.objectSelector");
    assert!(!selector.contains("objectOptOutLabel"), "{selector}");
    let deployment =
        std::fs::read_to_string(chart_dir().join("templates/deployment.yaml")).expect("deployment");
    for arg in [
        "- --object-opt-out-label={{ .Values.webhook.objectOptOutLabel }}",
        "- --controller-service-account={{ . }}",
    ] {
        assert!(deployment.contains(arg), "{arg} not in deployment.yaml");
    }
}

/// No Helm needed: with `acceleratorsOnly`, a container that gets its GPUs from the NVIDIA
/// runtime by `NVIDIA_VISIBLE_DEVICES` alone (no resource request) is still sent to the
/// webhooks, and the values the chart's condition lets pass unsent are ones the engine does not
/// count as GPUs either: the condition may send more than the engine judges, never less.
/// (check_chart.py's `cel` check evaluates the rendered condition with real Helm and CEL.)
#[test]
fn accelerator_condition_sends_what_nvidia_visible_devices_makes_a_gpu_container() {
    let condition = chart_define("_helpers.tpl", "probelint.acceleratorCondition");
    let clause = "c.env.exists(e, has(e.name) && e.name == 'NVIDIA_VISIBLE_DEVICES' && has(e.value) && !(e.value in [";
    let start = condition
        .find(clause)
        .unwrap_or_else(|| panic!("no NVIDIA_VISIBLE_DEVICES clause in:\n{condition}"))
        + clause.len();
    let list = &condition[start..start + condition[start..].find(']').unwrap()];
    let unsent: Vec<&str> = list
        .split(',')
        .map(|v| v.trim().trim_matches('\''))
        .collect();
    assert_eq!(unsent, ["", "void", "none"], "{list}");
    let policy = probelint_policies::Policy::default();
    let gpu = |value: &str| {
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "vllm/vllm-openai:v0.6.3",
                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]}]}});
        probelint_policies::Workload::analyse(0, &pod, &policy).pod_specs[0].has_accelerator()
    };
    for value in &unsent {
        assert!(
            !gpu(value),
            "the chart skips {value:?}, which the engine counts a GPU"
        );
    }
    for value in ["all", "0,1", "GPU-8c9f1c2e-5d1f-4a3b-9e0f-1b2c3d4e5f60"] {
        assert!(gpu(value), "{value:?}");
    }
}
