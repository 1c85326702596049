//! The pod that will run: operator-supplied probes, containers that serve nothing at start, and
//! servers known by what they run. Each fixture under `resources/operators/` is named for
//! what it shows (`fires-*`, `warns-*`, `silent-*`); the snapshot lists every finding a user
//! would read, and the assertions below pin the verdict each fixture is about.

use probelint_policies::{Finding, Policy, Severity, evaluate};
use std::fmt::Write;
use std::path::PathBuf;

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("resources/operators");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn lint(name: &str) -> Vec<Finding> {
    lint_with(name, &Policy::default())
}

fn lint_with(name: &str, policy: &Policy) -> Vec<Finding> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("resources/operators")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let docs = probelint_testkit::yaml::objects(&text);
    evaluate(&docs, policy)
}

/// (rule, severity, container) of the findings that are not info.
fn verdicts(findings: &[Finding]) -> Vec<(String, Severity, String)> {
    findings
        .iter()
        .filter(|f| f.severity != Severity::Info)
        .map(|f| {
            (
                f.rule.to_string(),
                f.severity,
                f.container.as_deref().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn has(findings: &[Finding], rule: &str, severity: Severity, container: &str) -> bool {
    verdicts(findings)
        .iter()
        .any(|(r, s, c)| r == rule && *s == severity && c == container)
}

#[test]
fn every_fixture_is_named_for_its_verdict_and_its_findings_are_stable() {
    let mut out = String::new();
    for path in fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let findings = lint(&name);
        let errors = findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        let warnings = findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count();
        if name.starts_with("silent-") {
            assert_eq!(errors + warnings, 0, "{name}: {:#?}", verdicts(&findings));
        } else if name.starts_with("warns-") {
            assert!(warnings > 0, "{name}: {:#?}", verdicts(&findings));
        } else {
            assert!(
                name.starts_with("fires-"),
                "{name}: name it fires-, warns- or silent-"
            );
            assert!(errors > 0, "{name}: {:#?}", verdicts(&findings));
        }
        writeln!(out, "{name}").unwrap();
        for f in &findings {
            writeln!(
                out,
                "  {} {} {} {}\n    {}\n    help: {}",
                f.severity,
                f.rule,
                f.container.as_deref().unwrap_or("-"),
                f.pointer,
                f.message,
                f.help
            )
            .unwrap();
        }
    }
    insta::assert_snapshot!(out);
}

#[test]
fn kserve_injected_readiness_is_judged_as_the_port_check_it_is() {
    let isvc = lint("fires-kserve-isvc-injected-port-check.yaml");
    assert!(has(
        &isvc,
        "readiness-port-open",
        Severity::Error,
        "kserve-container"
    ));
    assert!(!isvc.iter().any(|f| f.rule == "gpu-readiness-probe-missing"));
    let f = isvc
        .iter()
        .find(|f| f.rule == "readiness-port-open")
        .unwrap();
    assert!(
        f.message.contains("tcpSocket on port 8080"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("deployment_reconciler.go"),
        "{}",
        f.message
    );
    assert!(f.fix.is_none(), "nothing in the manifest to patch");

    let runtime = lint("warns-servingruntime-vllm-injected-port-check-binds-late.yaml");
    assert!(has(
        &runtime,
        "readiness-port-open",
        Severity::Warning,
        "kserve-container"
    ));
    assert!(has(
        &runtime,
        "gpu-startup-probe-missing",
        Severity::Warning,
        "kserve-container"
    ));
}

#[test]
fn a_servingruntime_of_a_known_server_is_a_gpu_serving_container() {
    let tgi = lint("warns-servingruntime-tgi-liveness-unknown-model.yaml");
    // No model is named (the InferenceService names it), so the load is unknown and
    // liveness-restart-loop (which compares the liveness with a load) says nothing; the one
    // finding is the missing startupProbe, which says what the liveness kills: a warning, since
    // the 50 s liveness outlasts TGI's own start (20 s at the fast end) and no number says that
    // the load outlasts it.
    assert!(!tgi.iter().any(|f| f.rule == "liveness-restart-loop"));
    assert!(has(
        &tgi,
        "gpu-startup-probe-missing",
        Severity::Warning,
        "kserve-container"
    ));
    let f = tgi
        .iter()
        .find(|f| f.rule == "gpu-startup-probe-missing")
        .unwrap();
    assert!(f.message.contains("in a ServingRuntime"), "{}", f.message);
    assert!(
        f.message.contains("kills any load that takes longer"),
        "{}",
        f.message
    );
}

#[test]
fn llmisvc_templates_are_merged_over_kserves_configs() {
    assert!(
        verdicts(&lint("silent-llmisvc-template-sets-only-liveness.yaml")).is_empty(),
        "{:#?}",
        verdicts(&lint("silent-llmisvc-template-sets-only-liveness.yaml"))
    );
    assert!(
        verdicts(&lint(
            "silent-llmisvc-data-parallel-worker-is-headless.yaml"
        ))
        .is_empty(),
        "{:#?}",
        verdicts(&lint(
            "silent-llmisvc-data-parallel-worker-is-headless.yaml"
        ))
    );
    let replaced = lint("fires-llmisvc-user-startup-replaces-operators.yaml");
    assert!(has(
        &replaced,
        "startup-budget-too-short",
        Severity::Error,
        "main"
    ));
    assert!(has(
        &replaced,
        "startup-shorter-than-operator",
        Severity::Warning,
        "main"
    ));
    // The policy can say what this cluster's config really does.
    let policy = Policy::with_user_yaml(
        "operatorDefaults:\n  kserve-llmisvc-template:\n    startupProbe: null\n",
    )
    .unwrap();
    let custom = lint_with("silent-llmisvc-template-sets-only-liveness.yaml", &policy);
    // (A warning: its liveness gives up after 240–270 s, past the fast end of this 7B model's
    // load from the Hub, so only a slow start is killed.)
    assert!(has(
        &custom,
        "gpu-startup-probe-missing",
        Severity::Warning,
        "main"
    ));
    // Qwen2.5-7B from hf:// loads in ≈ 116 s (docs/load-time.md), and the liveness's earliest
    // kill comes at 240 s (120 s delay + 4 × 30 s): no restart loop, even without the base
    // startupProbe.
    assert!(
        !custom.iter().any(|f| f.rule == "liveness-restart-loop"),
        "{custom:#?}"
    );
}

#[test]
fn ray_nodes_and_group_workers_draw_no_model_load_findings() {
    assert!(
        verdicts(&lint("silent-kuberay-nodes-need-no-model-load-probes.yaml")).is_empty(),
        "{:#?}",
        verdicts(&lint("silent-kuberay-nodes-need-no-model-load-probes.yaml"))
    );
    assert!(
        verdicts(&lint("silent-lws-ray-worker-script.yaml")).is_empty(),
        "{:#?}",
        verdicts(&lint("silent-lws-ray-worker-script.yaml"))
    );
}

#[test]
fn nimservices_get_the_operators_probes_unless_turned_off() {
    assert!(
        verdicts(&lint("silent-nimservice-operator-defaults.yaml")).is_empty(),
        "{:#?}",
        verdicts(&lint("silent-nimservice-operator-defaults.yaml"))
    );
    let off = lint("warns-nimservice-startup-disabled.yaml");
    assert_eq!(
        verdicts(&off),
        [(
            "gpu-startup-probe-missing".to_owned(),
            Severity::Warning,
            "llama3-8b".to_owned()
        )],
        "NIM's liveness answers during the load: no restart loop, so the missing startupProbe \
         is a warning"
    );
}

#[test]
fn liveness_restart_loop_fires_only_where_a_kill_during_load_is_real() {
    assert!(
        verdicts(&lint("silent-ollama-loads-lazily.yaml")).is_empty(),
        "{:#?}",
        verdicts(&lint("silent-ollama-loads-lazily.yaml"))
    );
    let nim = lint("warns-nim-startup-missing-liveness-no-loop.yaml");
    assert!(!nim.iter().any(|f| f.rule == "liveness-restart-loop"));
}

#[test]
fn servers_are_recognised_by_command_and_fixed_on_their_own_port() {
    let llmd = lint("warns-vllm-by-command-in-llm-d-image.yaml");
    let f = llmd
        .iter()
        .find(|f| f.rule == "readiness-port-open")
        .expect("fires");
    assert!(
        f.help.contains("httpGet /health on port 8001"),
        "{}",
        f.help
    );
    let fix = serde_json::to_value(&f.fix.as_ref().expect("a fix").patch).unwrap();
    assert_eq!(
        fix[1]["value"],
        serde_json::json!({"path": "/health", "port": 8001})
    );

    let llama = lint("warns-llama-cpp-default-port.yaml");
    let f = llama
        .iter()
        .find(|f| f.rule == "known-server-endpoint")
        .expect("warns");
    assert!(f.message.contains("9931"), "{}", f.message);
}

#[test]
fn curl_without_fail_is_a_port_check_and_the_real_checks_are_not() {
    let findings = lint("fires-exec-curl-without-fail.yaml");
    let port_checks: Vec<_> = findings
        .iter()
        .filter(|f| f.rule == "readiness-port-open")
        .map(|f| f.container.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(port_checks, ["no-fail"]);
    let f = findings
        .iter()
        .find(|f| f.rule == "readiness-port-open")
        .unwrap();
    assert!(f.help.contains("--fail"), "{}", f.help);
    assert!(f.message.contains("localhost:3000/health"), "{}", f.message);
}

#[test]
fn every_operator_default_is_documented_with_its_version_and_source() {
    let docs = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/operators.md"),
    )
    .expect("docs/operators.md");
    for row in Policy::default().operator_defaults.rows() {
        let line = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", row.id)))
            .unwrap_or_else(|| panic!("docs/operators.md has no row for {}", row.id));
        assert!(line.contains(&row.version), "{}: {line}", row.id);
        assert!(line.contains(&row.source), "{}: {line}", row.id);
    }
}

#[test]
fn knative_services_get_the_queue_proxys_port_check() {
    let findings = lint("warns-knative-queue-proxy-port-check.yaml");
    let f = findings
        .iter()
        .find(|f| f.rule == "readiness-port-open")
        .expect("warns");
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("Knative Serving"), "{}", f.message);
    assert!(
        f.message.contains("tcpSocket on port 8080"),
        "{}",
        f.message
    );
    assert!(
        !findings
            .iter()
            .any(|f| f.rule == "gpu-readiness-probe-missing")
    );
}
