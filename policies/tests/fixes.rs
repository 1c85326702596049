//! Fixes, as users meet them in `probelint --fix` and the mutating webhook: they apply, they
//! fix what they claim, they are idempotent and minimal, and they never invent an endpoint.

use probelint_policies::{Applicability, Policy, evaluate_one, merge_fixes, registry};
use probelint_policies::{annotation_ops, mutate};
use proptest::prelude::*;
use serde_json::{Value, json};

fn apply(object: &Value, patch: &json_patch::Patch) -> Value {
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch.0)
        .unwrap_or_else(|e| panic!("patch does not apply: {e}\n{patch:#?}"));
    out
}

/// Idempotent, closed and minimal, for one object, with the safe fixes (as `--fix` and the
/// mutating webhook apply them). Returns the fixed object.
fn check_properties(object: &Value, policy: &Policy, what: &str) -> Value {
    check_properties_at(object, policy, what, Applicability::Safe)
}

/// The same with every fix at or above `at_least` (`--fix --unsafe-fixes` for `Unsafe`).
fn check_properties_at(
    object: &Value,
    policy: &Policy,
    what: &str,
    at_least: Applicability,
) -> Value {
    let mut first = mutate(object, policy);
    if at_least != Applicability::Safe {
        (first.patch, first.applied) = merge_fixes(&first.findings, at_least);
    }
    let fixed = apply(object, &first.patch);
    // Closed: no finding with a fix of that kind remains.
    let remaining: Vec<_> = evaluate_one(&fixed, policy)
        .into_iter()
        .filter(|f| {
            f.fix.as_ref().is_some_and(|x| x.applicability >= at_least) && !f.is_suppressed()
        })
        .map(|f| format!("{} {}", f.rule, f.pointer))
        .collect();
    assert!(
        remaining.is_empty(),
        "{what}: fixable findings remain after fixing: {remaining:?}"
    );
    // Idempotent: fixing again changes nothing.
    let mut second = mutate(&fixed, policy);
    if at_least != Applicability::Safe {
        second.patch = merge_fixes(&second.findings, at_least).0;
    }
    assert!(
        second.patch.0.is_empty(),
        "{what}: second mutation not empty: {:?}",
        second.patch
    );
    // Minimal: every operation is inside a container that had a fixed finding.
    let containers: Vec<String> = first
        .findings
        .iter()
        .filter(|f| f.fix.as_ref().is_some_and(|x| x.applicability >= at_least))
        .map(|f| {
            let p = &f.pointer;
            // The container pointer is the prefix up to `/containers/N` or `/initContainers/N`
            // (or the KServe model key).
            container_prefix(p)
        })
        .collect();
    for op in &first.patch.0 {
        let path = op.path().to_string();
        // `probeHelper`'s delivery: the pod's volumes (and init container) that bring the binary,
        // added once per pod beside the fixed container.
        if let json_patch::PatchOperation::Add(add) = op
            && (path.contains("/volumes") || path.contains("/initContainers"))
            && helper_delivery(&add.value)
        {
            continue;
        }
        assert!(
            containers.iter().any(|c| path.starts_with(c.as_str())),
            "{what}: {path} is outside the fixed containers {containers:?}"
        );
    }
    fixed
}

fn container_prefix(pointer: &str) -> String {
    let parts: Vec<&str> = pointer.split('/').collect();
    for i in (0..parts.len()).rev() {
        if matches!(parts[i], "containers" | "initContainers") && i + 1 < parts.len() {
            return parts[..=i + 1].join("/");
        }
        if matches!(
            parts[i],
            "model" | "tensorflow" | "pytorch" | "triton" | "huggingface"
        ) {
            return parts[..=i].join("/");
        }
    }
    pointer.to_owned()
}

fn objects(yaml: &str) -> Vec<Value> {
    let docs = probelint_testkit::yaml::objects(yaml);
    docs.into_iter().filter(Value::is_object).collect()
}

#[test]
fn every_fixable_bad_example_is_fixed() {
    for rule in registry() {
        let m = rule.meta();
        if m.fix.is_none() {
            continue;
        }
        // Under the policy its examples are shown with.
        let policy = match m.example_policy {
            Some(p) => Policy::with_user_yaml(p).expect("example policy"),
            None => Policy::default(),
        };
        let at_least = m
            .fix
            .as_ref()
            .map_or(Applicability::Safe, |f| f.applicability);
        for object in objects(m.bad_example) {
            let fixed = check_properties_at(&object, &policy, m.id, at_least);
            let before = evaluate_one(&object, &policy)
                .into_iter()
                .filter(|f| f.rule == m.id)
                .count();
            let after = evaluate_one(&fixed, &policy)
                .into_iter()
                .filter(|f| f.rule == m.id)
                .count();
            assert!(
                before > 0 && after == 0,
                "{}: {before} findings before, {after} after",
                m.id
            );
        }
    }
}

#[test]
fn startup_probe_reuses_liveness_with_its_timeout_and_covers_the_load() {
    let object = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"probelint.io/model-load-seconds": "600"}},
        "spec": {"containers": [{"name": "m", "image": "registry.example.com/server:1",
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "livenessProbe": {"httpGet": {"path": "/alive", "port": 9000}, "timeoutSeconds": 3},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 9000}}}]}});
    let fixed = apply(&object, &mutate(&object, &Policy::default()).patch);
    assert_eq!(
        fixed.pointer("/spec/containers/0/startupProbe").unwrap(),
        &json!({"httpGet": {"path": "/alive", "port": 9000}, "periodSeconds": 10, "failureThreshold": 120, "timeoutSeconds": 3})
    );
    // A load longer than the 1,200 s floor sets the budget: 2,000 s + 25 %.
    let mut slow = object.clone();
    slow["metadata"]["annotations"]["probelint.io/model-load-seconds"] = json!("2000");
    let fixed = apply(&slow, &mutate(&slow, &Policy::default()).patch);
    assert_eq!(
        fixed["spec"]["containers"][0]["startupProbe"]["failureThreshold"],
        250
    );
}

#[test]
fn a_liveness_that_kills_mid_load_is_one_error_and_one_startup_probe() {
    // Two GPU containers without a startupProbe and with a liveness budget shorter than their
    // declared load: one problem each, so one error each (gpu-startup-probe-missing, whose
    // message carries the liveness risk) and one startupProbe each in the mutation. With
    // gpu-startup-probe-missing turned off, liveness-restart-loop reports it with the same fix.
    let container = |name: &str, port: u16| {
        json!({"name": name, "image": "registry.example.com/server:1",
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "livenessProbe": {"httpGet": {"path": "/alive", "port": port}}})
    };
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "annotations": {"probelint.io/model-load-seconds": "600"}},
        "spec": {"containers": [container("a", 9000), container("b", 9001)]}});
    let findings = probelint_policies::evaluate_one(&object, &Policy::default());
    let off = Policy::with_user_yaml("rules:\n  gpu-startup-probe-missing: off\n").unwrap();
    let alone = probelint_policies::evaluate_one(&object, &off);
    for name in ["a", "b"] {
        let rules = |findings: &[probelint_policies::Finding]| -> Vec<String> {
            findings
                .iter()
                .filter(|f| f.container.as_deref() == Some(name))
                .filter(|f| f.rule.contains("startup") || f.rule.contains("liveness"))
                .map(|f| f.rule.to_string())
                .collect()
        };
        assert_eq!(rules(&findings), ["gpu-startup-probe-missing"], "{name}");
        assert_eq!(rules(&alone), ["liveness-restart-loop"], "{name}");
        let fix_of = |rule: &str| {
            findings
                .iter()
                .find(|f| f.rule == rule && f.container.as_deref() == Some(name))
                .and_then(|f| f.fix.clone())
                .unwrap_or_else(|| panic!("{rule} on {name} has no fix: {findings:#?}"))
        };
        let fix = fix_of("gpu-startup-probe-missing");
        let same = alone
            .iter()
            .find(|f| f.rule == "liveness-restart-loop" && f.container.as_deref() == Some(name))
            .and_then(|f| f.fix.clone());
        assert_eq!(Some(&fix), same.as_ref());
        assert!(
            serde_json::to_string(&fix.patch)
                .unwrap()
                .contains(&format!(
                    "/spec/containers/{}/startupProbe",
                    usize::from(name == "b")
                ))
        );
    }
    let mutation = mutate(&object, &Policy::default());
    let startup_ops: Vec<String> = mutation
        .patch
        .0
        .iter()
        .map(|op| op.path().to_string())
        .filter(|path| path.ends_with("/startupProbe"))
        .collect();
    assert_eq!(
        startup_ops,
        [
            "/spec/containers/0/startupProbe",
            "/spec/containers/1/startupProbe"
        ]
    );
    let applied: Vec<(&str, Option<&str>)> = mutation
        .applied
        .iter()
        .map(|a| (a.rule.as_str(), a.container.as_deref()))
        .collect();
    for container in ["a", "b"] {
        assert!(
            applied.contains(&("gpu-startup-probe-missing", Some(container))),
            "{container} not recorded as fixed: {applied:?}"
        );
    }
}

#[test]
fn known_server_gets_its_real_endpoints_and_unknown_servers_get_no_fix() {
    let vllm = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
            "args": ["--model", "x", "--port", "8080"],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "readinessProbe": {"tcpSocket": {"port": 8080}}}]}});
    let m = mutate(&vllm, &Policy::default());
    let fixed = apply(&vllm, &m.patch);
    let c = &fixed["spec"]["containers"][0];
    assert_eq!(
        c["readinessProbe"],
        json!({"httpGet": {"path": "/health", "port": 8080}})
    );
    assert_eq!(
        c["startupProbe"]["httpGet"],
        json!({"path": "/health", "port": 8080}),
        "--port 8080 is honoured"
    );
    let rules: Vec<_> = m.applied.iter().map(|a| a.rule.as_str()).collect();
    assert_eq!(rules, ["gpu-startup-probe-missing", "readiness-port-open"]);

    let unknown = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "m", "image": "example/custom",
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "readinessProbe": {"tcpSocket": {"port": 8080}}}]}});
    let m = mutate(&unknown, &Policy::default());
    assert!(
        m.findings
            .iter()
            .any(|f| f.rule == "readiness-port-open" && f.fix.is_none()),
        "no invented endpoint"
    );
    let fixed = apply(&unknown, &m.patch);
    let c = &fixed["spec"]["containers"][0];
    assert_eq!(
        c["readinessProbe"],
        json!({"tcpSocket": {"port": 8080}}),
        "readiness untouched"
    );
    assert_eq!(
        c["startupProbe"]["tcpSocket"],
        json!({"port": 8080}),
        "startup reuses the container's own check"
    );

    let nothing_known = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "m", "image": "example/custom",
            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    let m = mutate(&nothing_known, &Policy::default());
    assert!(
        m.patch.0.is_empty(),
        "no probe to reuse and no known server: no fix, {:?}",
        m.patch
    );
    // Nothing shows that it serves a model: one info asking, no model-serving error.
    let rules: Vec<_> = m.findings.iter().map(|f| &*f.rule).collect();
    assert_eq!(rules, ["gpu-serving-role-unknown"]);
}

#[test]
fn sglang_readiness_gets_a_generation_timeout() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "s", "image": "lmsysorg/sglang:latest",
            "ports": [{"containerPort": 30000}],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "startupProbe": {"httpGet": {"path": "/health", "port": 30000}, "failureThreshold": 40},
            "readinessProbe": {"tcpSocket": {"port": 30000}}}]}});
    let fixed = apply(&pod, &mutate(&pod, &Policy::default()).patch);
    assert_eq!(
        fixed["spec"]["containers"][0]["readinessProbe"],
        json!({"httpGet": {"path": "/health_generate", "port": 30000}, "timeoutSeconds": 10})
    );
}

#[test]
fn same_patch_for_a_deployment_template_and_a_bare_pod() {
    let spec = json!({"containers": [{"name": "triton", "image": "nvcr.io/nvidia/tritonserver:24.08-py3",
        "ports": [{"containerPort": 8000}], "resources": {"limits": {"nvidia.com/gpu": 1}},
        "readinessProbe": {"httpGet": {"path": "/v2/health/live", "port": 8000}}}]});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t"}, "spec": spec});
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "t"},
        "spec": {"template": {"spec": spec}}});
    let policy = Policy::default();
    let strip = |patch: json_patch::Patch, prefix: &str| -> Vec<Value> {
        patch
            .0
            .into_iter()
            .map(|op| {
                let mut v = serde_json::to_value(op).unwrap();
                let p = v["path"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(prefix)
                    .unwrap()
                    .to_owned();
                v["path"] = json!(p);
                v
            })
            .collect()
    };
    let a = strip(mutate(&pod, &policy).patch, "/spec");
    let b = strip(mutate(&deploy, &policy).patch, "/spec/template/spec");
    assert!(!a.is_empty());
    assert_eq!(a, b);
}

#[test]
fn suppressed_findings_are_not_fixed() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"probelint.io/ignore": "gpu-startup-probe-missing"}},
        "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai", "resources": {"limits": {"nvidia.com/gpu": 1}},
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}}}]}});
    assert!(mutate(&pod, &Policy::default()).patch.0.is_empty());
}

#[test]
fn annotation_ops_create_or_extend_annotations() {
    let applied = vec![probelint_policies::AppliedFix {
        rule: "gpu-startup-probe-missing".into(),
        container: Some("vllm".into()),
        description: String::new(),
    }];
    for object in [
        json!({"metadata": {"name": "x"}}),
        json!({"metadata": {"name": "x", "annotations": {"a": "b"}}}),
        json!({"kind": "Pod"}),
    ] {
        let ops = annotation_ops(&object, &applied);
        let out = apply(&object, &json_patch::Patch(ops));
        assert_eq!(
            out["metadata"]["annotations"]["probelint.io/mutated"],
            "gpu-startup-probe-missing:vllm"
        );
    }
}

#[test]
fn fixes_hold_on_the_real_corpus() {
    let policy = Policy::default();
    let mut fixed_objects = 0;
    for path in probelint_testkit::corpus::real_manifests() {
        if path.extension().is_none_or(|e| e != "yaml" && e != "yml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let Ok(docs) = probelint_testkit::yaml::try_objects(&text) else {
            continue;
        };
        for object in docs.into_iter().filter(Value::is_object) {
            if !mutate(&object, &policy).patch.0.is_empty() {
                fixed_objects += 1;
            }
            check_properties(&object, &policy, &path.display().to_string());
        }
    }
    assert!(
        fixed_objects >= 30,
        "only {fixed_objects} corpus objects had fixes"
    );
}

fn arb_probe() -> impl Strategy<Value = Option<Value>> {
    let handler = prop_oneof![
        (
            prop::sample::select(vec![
                "/health",
                "/v2/health/live",
                "/v2/health/ready",
                "/readyz"
            ]),
            prop::sample::select(vec![json!(8000), json!("http"), json!(30000)])
        )
            .prop_map(|(p, port)| json!({"httpGet": {"path": p, "port": port}})),
        prop::sample::select(vec![json!(8000), json!("http")])
            .prop_map(|port| json!({"tcpSocket": {"port": port}})),
        Just(json!({"exec": {"command": ["cat", "/tmp/ready"]}})),
    ];
    prop::option::of(
        (
            handler,
            prop::option::of(-1i64..50),
            prop::option::of(0i64..20),
            prop::option::of(0i64..5),
        )
            .prop_map(|(mut h, failure, period, timeout)| {
                if let Some(f) = failure {
                    h["failureThreshold"] = json!(f);
                }
                if let Some(p) = period {
                    h["periodSeconds"] = json!(p);
                }
                if let Some(t) = timeout {
                    h["timeoutSeconds"] = json!(t);
                }
                h
            }),
    )
}

fn arb_pod() -> impl Strategy<Value = Value> {
    let image = prop::sample::select(vec![
        "vllm/vllm-openai:v0.6.3",
        "nvcr.io/nvidia/tritonserver:24.08-py3",
        "lmsysorg/sglang:latest",
        "ghcr.io/huggingface/text-generation-inference:2",
        "ollama/ollama",
        "example/custom:1",
    ]);
    let container = (
        image,
        any::<bool>(),
        any::<bool>(),
        arb_probe(),
        arb_probe(),
        arb_probe(),
    )
        .prop_map(|(image, gpu, ports, startup, readiness, liveness)| {
            let mut c = json!({"name": "c", "image": image});
            if gpu {
                c["resources"] = json!({"limits": {"nvidia.com/gpu": 1}});
            }
            if ports {
                c["ports"] = json!([{"name": "http", "containerPort": 8000}]);
            }
            if let Some(p) = startup {
                c["startupProbe"] = p;
            }
            if let Some(p) = readiness {
                c["readinessProbe"] = p;
            }
            if let Some(p) = liveness {
                c["livenessProbe"] = p;
            }
            c
        });
    (prop::collection::vec(container, 1..3), prop::option::of(0u32..2000)).prop_map(|(mut containers, load)| {
        for (i, c) in containers.iter_mut().enumerate() {
            c["name"] = json!(format!("c{i}"));
        }
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
        if let Some(load) = load {
            pod["metadata"]["annotations"] = json!({"probelint.io/model-load-seconds": load.to_string()});
        }
        pod
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn generated_pods_fix_idempotently_and_closed(pod in arb_pod()) {
        check_properties(&pod, &Policy::default(), "generated pod");
    }
}

/// The startupProbe a fix adds never kills sooner than the container's liveness would have: a
/// Deployment that predates the webhook, sized by hand with a long `initialDelaySeconds` and no
/// load-time annotation, gets the fix on its Pods at the next scale-up.
#[test]
fn an_added_startup_probe_keeps_at_least_the_deadline_liveness_gave() {
    let object = |initial_delay: i64| {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "slow"},
            "spec": {"containers": [{
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.6.3",
                "ports": [{"name": "http", "containerPort": 8000}],
                "resources": {"limits": {"nvidia.com/gpu": 1}},
                "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}},
                "livenessProbe": {"httpGet": {"path": "/health", "port": "http"}, "initialDelaySeconds": initial_delay}
            }]}
        })
    };
    let policy = Policy::default();
    let budget = |fixed: &Value| {
        let startup = &fixed["spec"]["containers"][0]["startupProbe"];
        startup["failureThreshold"].as_i64().expect("threshold")
            * startup["periodSeconds"].as_i64().expect("period")
    };
    // Liveness tolerated 1,530 s (1,500 s delay + 3 × 10 s); the policy's load time is 300 s
    // and its floor 1,200 s.
    let slow = object(1500);
    assert_eq!(budget(&apply(&slow, &mutate(&slow, &policy).patch)), 1530);
    // A short liveness does not shrink the budget below the floor for added startup probes
    // (the 300 s default load + 25 % would give 380 s: the restart storm at a 900 s load).
    let quick = object(0);
    assert_eq!(budget(&apply(&quick, &mutate(&quick, &policy).patch)), 1200);
}

/// Whether an added value is only `probeHelper`'s volumes or init container (named `probelint-probe…`).
fn helper_delivery(value: &serde_json::Value) -> bool {
    let named = |v: &serde_json::Value| {
        v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("probelint-probe"))
    };
    match value {
        serde_json::Value::Array(items) => !items.is_empty() && items.iter().all(named),
        other => named(other),
    }
}
