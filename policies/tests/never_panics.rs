//! Property tests: the engine never panics, whatever JSON it is given.

use probelint_policies::{Policy, evaluate};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Arbitrary JSON, biased toward the keys the engine looks at so that deep paths get exercised.
fn arb_json() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "apiVersion",
        "kind",
        "metadata",
        "annotations",
        "spec",
        "template",
        "containers",
        "initContainers",
        "resources",
        "limits",
        "requests",
        "nvidia.com/gpu",
        "readinessProbe",
        "livenessProbe",
        "startupProbe",
        "httpGet",
        "tcpSocket",
        "grpc",
        "exec",
        "port",
        "path",
        "ports",
        "containerPort",
        "name",
        "periodSeconds",
        "failureThreshold",
        "restartPolicy",
        "probelint.io/model-load-seconds",
        "probelint.io/ignore",
        "scaleTargetRef",
        "metrics",
        "replicas",
        "selector",
        "matchLabels",
        "predictor",
        "model",
        "command",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "Deployment",
            "Pod",
            "apps/v1",
            "v1",
            "Always",
            "1",
            "all",
            "http",
            "/health",
            "Never"
        ])
        .prop_map(|s| json!(s)),
        ".*".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

fn pod_shaped(spec: Value, kind: &'static str) -> Value {
    match kind {
        "Pod" => {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
        }
        k => {
            json!({"apiVersion": "apps/v1", "kind": k, "metadata": {"name": "d"}, "spec": {"template": {"spec": spec}}})
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_json_never_panics(objects in prop::collection::vec(arb_json(), 0..4)) {
        let _ = evaluate(&objects, &Policy::default());
    }

    #[test]
    fn arbitrary_pod_specs_never_panic(spec in arb_json(), kind in prop::sample::select(vec!["Pod", "Deployment", "Job"])) {
        let object = pod_shaped(spec, kind);
        let findings = evaluate(std::slice::from_ref(&object), &Policy::default());
        for f in findings {
            // Every pointer names a node in the object, or a place just under one.
            let parent = f.pointer.rsplit_once('/').map_or("", |(p, _)| p);
            prop_assert!(object.pointer(&f.pointer).is_some() || object.pointer(parent).is_some(),
                "{} points nowhere: {}", f.rule, f.pointer);
        }
    }
}
