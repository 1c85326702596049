//! Property tests that `never_panics.rs` and `fixes.rs` leave out: mutation over *arbitrary*
//! pod specs (wrong types, odd values, missing and extra fields, not just well-formed probes):
//! the patch always applies to the object it was computed for, the webhook's annotation
//! operation applies after it, and mutating the result changes nothing more (idempotent).
//! Plus thousands of containers: merging fixes stays fast (it was quadratic).

use probelint_policies::{Policy, evaluate};
use probelint_policies::{annotation_ops, mutate};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::Instant;

/// Values of the wrong type as often as the right one.
fn any_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop::sample::select(vec![
            0i64,
            1,
            -1,
            3,
            10,
            30,
            600,
            65535,
            65536,
            i64::MAX,
            i64::MIN
        ])
        .prop_map(|n| json!(n)),
        prop::sample::select(vec![0.5f64, -2.5, 1e300]).prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "",
            "http",
            "8000",
            "/health",
            "/v2/health/ready",
            "x y",
            "1",
            "-1",
            "TCP",
            "HTTP",
            "abc/def",
            "0x10",
            "1e3",
            "on",
            "~1/~0",
        ])
        .prop_map(|s| json!(s)),
    ]
}

fn any_small() -> impl Strategy<Value = Value> {
    any_scalar().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..3)
                .prop_map(|kv| { Value::Object(kv.into_iter().collect()) }),
        ]
    })
}

/// A probe: usually shaped like one, with any field possibly of the wrong type.
fn any_probe() -> impl Strategy<Value = Value> {
    let handler = prop_oneof![
        (any_scalar(), any_scalar(), any_scalar()).prop_map(|(path, port, scheme)| {
            json!({"httpGet": {"path": path, "port": port, "scheme": scheme}})
        }),
        any_scalar().prop_map(|port| json!({"tcpSocket": {"port": port}})),
        any_scalar().prop_map(|port| json!({"grpc": {"port": port}})),
        any_small().prop_map(|command| json!({"exec": {"command": command}})),
        any_small(),
    ];
    let fields = prop::collection::vec(
        (
            prop::sample::select(vec![
                "initialDelaySeconds",
                "periodSeconds",
                "timeoutSeconds",
                "failureThreshold",
                "successThreshold",
                "terminationGracePeriodSeconds",
            ]),
            any_scalar(),
        ),
        0..4,
    );
    (handler, fields).prop_map(|(mut probe, fields)| {
        if let Value::Object(map) = &mut probe {
            for (k, v) in fields {
                map.insert(k.to_owned(), v);
            }
        }
        probe
    })
}

fn any_container() -> impl Strategy<Value = Value> {
    let image = prop_oneof![
        prop::sample::select(vec![
            "vllm/vllm-openai:v0.6.3",
            "nvcr.io/nvidia/tritonserver:24.08-py3",
            "lmsysorg/sglang:latest",
            "ghcr.io/huggingface/text-generation-inference:2",
            "ollama/ollama",
            "ghcr.io/ggerganov/llama.cpp:server",
            "nvcr.io/nim/meta/llama3-8b-instruct:1.0",
            "example/custom:1",
        ])
        .prop_map(|s| json!(s)),
        any_scalar(),
    ];
    let resources = prop_oneof![
        Just(json!({"limits": {"nvidia.com/gpu": 1}})),
        Just(json!({"requests": {"amd.com/gpu": "2"}, "limits": {"amd.com/gpu": "2"}})),
        Just(json!({"limits": {"nvidia.com/mig-1g.5gb": 1}})),
        Just(json!({"limits": {"cpu": "1"}})),
        any_small(),
    ];
    let ports = prop_oneof![
        Just(json!([{"name": "http", "containerPort": 8000}])),
        Just(json!([{"containerPort": 8000}, {"name": "grpc", "containerPort": 8001}])),
        any_small(),
    ];
    (
        image,
        prop::option::of(resources),
        prop::option::of(ports),
        prop::option::of(any_probe()),
        prop::option::of(any_probe()),
        prop::option::of(any_probe()),
        prop::option::of(any_small()),
    )
        .prop_map(
            |(image, resources, ports, startup, readiness, liveness, extra)| {
                let mut c = json!({"image": image});
                for (k, v) in [
                    ("resources", resources),
                    ("ports", ports),
                    ("startupProbe", startup),
                    ("readinessProbe", readiness),
                    ("livenessProbe", liveness),
                    ("args", extra),
                ] {
                    if let Some(v) = v {
                        c[k] = v;
                    }
                }
                c
            },
        )
}

fn any_workload() -> impl Strategy<Value = Value> {
    let containers = prop_oneof![
        4 => prop::collection::vec(any_container(), 1..4).prop_map(Value::Array),
        1 => any_small(),
    ];
    let load = prop::option::of(prop_oneof![
        (0u32..3000).prop_map(|n| json!(n.to_string())),
        any_scalar(),
    ]);
    let annotations = prop::option::of(prop_oneof![
        Just(json!({})),
        Just(json!(null)),
        Just(json!({"probelint.io/mutated": "gpu-startup-probe-missing:c0"})),
        Just(json!({"probelint.io/ignore": "readiness-port-open"})),
        any_small(),
    ]);
    (
        containers,
        prop::option::of(any_small()),
        load,
        annotations,
        prop::sample::select(vec!["Pod", "Deployment", "StatefulSet", "Job", "LeaderWorkerSet"]),
        any::<bool>(),
    )
        .prop_map(|(containers, init, load, annotations, kind, named)| {
            let mut spec = json!({"containers": containers});
            if let Some(init) = init {
                spec["initContainers"] = init;
            }
            if named && let Value::Array(items) = &mut spec["containers"] {
                for (i, c) in items.iter_mut().enumerate() {
                    if let Value::Object(map) = c {
                        map.insert("name".into(), json!(format!("c{i}")));
                    }
                }
            }
            let mut metadata = json!({"name": "w"});
            if let Some(annotations) = annotations {
                metadata["annotations"] = annotations;
            }
            if let Some(load) = load
                && metadata["annotations"].is_object()
            {
                metadata["annotations"]["probelint.io/model-load-seconds"] = load;
            }
            match kind {
                "Pod" => json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}),
                "LeaderWorkerSet" => json!({
                    "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": kind, "metadata": metadata,
                    "spec": {"leaderWorkerTemplate": {"leaderTemplate": {"spec": spec.clone()}, "workerTemplate": {"spec": spec}}}
                }),
                "Job" => json!({"apiVersion": "batch/v1", "kind": kind, "metadata": metadata, "spec": {"template": {"spec": spec}}}),
                k => json!({"apiVersion": "apps/v1", "kind": k, "metadata": metadata, "spec": {"template": {"spec": spec}}}),
            }
        })
}

fn apply(object: &Value, ops: &[json_patch::PatchOperation]) -> Result<Value, String> {
    let mut out = object.clone();
    json_patch::patch(&mut out, ops).map_err(|e| format!("{e}: {ops:#?}"))?;
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn mutating_arbitrary_workloads_applies_and_is_idempotent(object in any_workload()) {
        let policy = Policy::default();
        let _ = evaluate(std::slice::from_ref(&object), &policy);
        let first = mutate(&object, &policy);
        let fixed = apply(&object, &first.patch.0);
        prop_assert!(fixed.is_ok(), "patch does not apply to {object:#}: {}", fixed.unwrap_err());
        let fixed = fixed.unwrap();
        // The webhook records what it fixed in an annotation, after the engine's operations.
        let annotated = apply(&fixed, &annotation_ops(&fixed, &first.applied));
        prop_assert!(annotated.is_ok(), "annotation op: {}", annotated.unwrap_err());
        let second = mutate(&fixed, &policy);
        prop_assert!(
            second.patch.0.is_empty(),
            "not idempotent on {object:#}\nfirst {:#?}\nsecond {:#?}",
            first.patch,
            second.patch
        );
    }
}

/// 5,000 GPU containers without probes: 10,000 fix operations. Merging them compared every
/// operation with every earlier one (minutes); now it is a few lookups each.
#[test]
fn five_thousand_containers_get_one_applicable_idempotent_patch() {
    let containers: Vec<Value> = (0..5_000)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": "vllm/vllm-openai:v0.6.3",
                   "resources": {"limits": {"nvidia.com/gpu": 1}},
                   "readinessProbe": {"tcpSocket": {"port": 8000}}})
        })
        .collect();
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "big"},
                        "spec": {"template": {"spec": {"containers": containers}}}});
    let start = Instant::now();
    let mutation = mutate(&object, &Policy::default());
    let elapsed = start.elapsed();
    assert!(
        mutation.patch.0.len() >= 10_000,
        "{}",
        mutation.patch.0.len()
    );
    let fixed = apply(&object, &mutation.patch.0).expect("applies");
    assert!(mutate(&fixed, &Policy::default()).patch.0.is_empty());
    // The time is printed, not asserted (a loaded machine is no regression): `cargo bench -p
    // probelint-bench` measures the engine, and the quadratic merge this once caught took over a
    // minute here, which a hung-test timeout still shows.
    eprintln!("5,000 containers mutated in {elapsed:?}");
}
