//! The rule engine on arbitrary JSON: `evaluate` never panics, `fix::mutate`'s patch always
//! applies to the object it was computed for, mutating the result again changes nothing
//! (idempotence), and the kubelet simulation of every container terminates.
//!
//! Arbitrary JSON rarely looks like a workload, so each input is also tried as a pod spec of a
//! Deployment, and (when it is an object) as a GPU container of a Pod.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelint_policies::engine::Analysis;
use probelint_policies::simulate::{scenario_for, simulate};
use probelint_policies::{Policy, evaluate, fix};
use serde_json::{Value, json};
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(|| Policy::builtin().expect("built-in policy"));

fn check(object: &Value) {
    let policy = &*POLICY;
    let findings = evaluate(std::slice::from_ref(object), policy);
    for f in &findings {
        assert!(
            f.pointer.is_empty() || f.pointer.starts_with('/'),
            "{}: bad pointer {:?}",
            f.rule,
            f.pointer
        );
    }
    let first = fix::mutate(object, policy);
    let mut fixed = object.clone();
    if let Err(e) = json_patch::patch(&mut fixed, &first.patch.0) {
        panic!("the engine's patch does not apply: {e}\n{:#?}", first.patch);
    }
    let second = fix::mutate(&fixed, policy);
    assert!(
        second.patch.0.is_empty(),
        "mutate is not idempotent: second patch {:#?}\nafter first {:#?}",
        second.patch,
        first.patch
    );
    let objects = std::slice::from_ref(object);
    let analysis = Analysis::new(objects, policy);
    for cx in analysis.containers() {
        let scenario = scenario_for(cx.container, cx.pod.load_seconds, 3600.0);
        let outcome = simulate(&scenario);
        assert!(outcome.transitions.len() <= 200_000);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    check(&value);
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "annotations": {"probelint.io/model-load-seconds": "600"}},
        "spec": {"template": {"spec": value.clone()}},
    });
    check(&deployment);
    if let Value::Object(mut container) = value {
        container
            .entry("name")
            .or_insert_with(|| Value::String("c".into()));
        let resources = container
            .entry("resources")
            .or_insert_with(|| json!({}));
        if let Value::Object(resources) = resources {
            resources.insert("limits".into(), json!({"nvidia.com/gpu": 1}));
        }
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [Value::Object(container)]},
        });
        check(&pod);
    }
});
