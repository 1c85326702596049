//! The warnings kubectl prints for warn mode, as a person reads them (`Warning: ` and the text,
//! one line each): for each finding what is wrong and in which container, then what to change,
//! and for each fix the mutating webhook made, what it changed. Snapshots, so that a change to
//! what users see is reviewed; and every line within kubectl's warning length.

use base64::Engine as _;
use probelint_policies::Policy;
use probelint_webhook::MAX_WARNING_CHARS;
use probelint_webhook::review::{Mode, admit};
use serde_json::{Value, json};

fn policy() -> Policy {
    Policy::builtin().expect("built-in policy")
}

/// A CREATE of `object` in `default`, sent by a person (not a controller).
fn review(object: &Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version,
        "resource": format!("{}s", kind.to_ascii_lowercase())});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-4000-8000-000000000035",
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": object["metadata"]["name"],
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "jane@example.com", "groups": ["system:authenticated"]},
            "object": object,
            "dryRun": true,
        }
    })
}

/// What kubectl prints for `object` with both webhooks of the chart's defaults: the mutating
/// webhook's warnings, then the validating webhook's (warn mode) on the mutated object.
fn kubectl_warnings(object: &Value) -> String {
    let policy = policy();
    let body = |object: &Value| serde_json::to_vec(&review(object)).expect("json");
    let mutated = admit(&body(object), Mode::Mutate, &policy).expect("a review");
    let mut stored = object.clone();
    if let Some(patch) = &mutated.review.response.patch {
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSON Patch");
        json_patch::patch(&mut stored, &patch).expect("the patch applies");
    }
    let validated = admit(&body(&stored), Mode::Warn, &policy).expect("a review");
    let lines: Vec<&String> = mutated
        .review
        .response
        .warnings
        .iter()
        .chain(&validated.review.response.warnings)
        .collect();
    for line in &lines {
        assert!(
            line.chars().count() <= MAX_WARNING_CHARS,
            "{} characters, past kubectl's {MAX_WARNING_CHARS}: {line}",
            line.chars().count()
        );
    }
    lines.iter().map(|l| format!("Warning: {l}\n")).collect()
}

/// The pod of the README's smoke test, as `kubectl run` sends it.
fn smoke_test_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probelint-smoke-test", "labels": {"run": "probelint-smoke-test"}},
        "spec": {"containers": [{
            "name": "probelint-smoke-test",
            "image": "vllm/vllm-openai:latest",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}
        }]}
    })
}

#[test]
fn the_smoke_tests_warnings() {
    insta::assert_snapshot!(kubectl_warnings(&smoke_test_pod()));
}

#[test]
fn a_deployment_of_two_gpu_containers_without_probes() {
    // An image no policy knows, so nothing can be fixed; a liveness probe on one container.
    let container = |name: &str, port: u16, extra: Value| {
        let mut c = json!({
            "name": name,
            "image": "registry.example/team/llm-server:1.4",
            "ports": [{"name": format!("http-{name}"), "containerPort": port}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}}
        });
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        c
    };
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "two"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "two"}},
            "template": {
                "metadata": {"labels": {"app": "two"}},
                "spec": {"containers": [
                    container("a", 8080, json!({})),
                    container("b", 8081, json!({"livenessProbe": {"exec": {"command": ["nvidia-smi"]}}})),
                ]}
            }
        }
    });
    let warnings = kubectl_warnings(&deployment);
    // Two containers with the same finding: each has its own lines. The apiserver sends a
    // warning once per request, so the only repeats are the same change in the same container
    // (two heavy exec probes in `b`), which it rightly shows once.
    let mut lines: Vec<&str> = warnings.lines().collect();
    lines.sort_unstable();
    for pair in lines.windows(2).filter(|p| p[0] == p[1]) {
        assert!(
            pair[0].starts_with("Warning:   fix in b: "),
            "{:?} twice in:\n{warnings}",
            pair[0]
        );
    }
    for rule in [
        "gpu-readiness-probe-missing",
        "gpu-graceful-shutdown-missing",
    ] {
        for container in ["a", "b"] {
            assert!(
                warnings.contains(&format!("{rule} in {container}: ")),
                "{rule} in {container}:\n{warnings}"
            );
        }
    }
    insta::assert_snapshot!(warnings);
}
