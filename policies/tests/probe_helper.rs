//! `probeHelper`: with it on, the fixes write `probelint-probe` exec probes for the servers the
//! helper knows, bring the binary into the pod (init container or image volume), and the result
//! lints clean and mutates no further.

use probelint_policies::{Policy, evaluate_one, mutate};
use serde_json::{Value, json};

const IMAGE: &str = "registry.example.com/probelint-probe:0.1.0";

fn policy(mode: &str) -> Policy {
    let k8s = if mode == "imageVolume" {
        "1.35"
    } else {
        "1.30"
    };
    Policy::with_user_yaml(&format!(
        "kubernetesVersion: '{k8s}'\nprobeHelper:\n  image: {IMAGE}\n  mode: {mode}\n"
    ))
    .expect("policy loads")
}

/// A Deployment of `image` on one GPU that gates traffic on a port check and has no startupProbe.
fn deployment(image: &str, port: i64, args: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm"},
        "spec": {"template": {"spec": {"containers": [{
            "name": "server", "image": image, "args": args,
            "ports": [{"containerPort": port}],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 5}
        }]}}}
    })
}

fn mutated(object: &Value, policy: &Policy) -> Value {
    let mutation = mutate(object, policy);
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &mutation.patch).expect("the patch applies");
    doc
}

fn command(probe: &Value) -> Vec<String> {
    probe["exec"]["command"]
        .as_array()
        .unwrap_or_else(|| panic!("not an exec probe: {probe}"))
        .iter()
        .map(|w| w.as_str().expect("string").to_owned())
        .collect()
}

const SERVERS: &[(&str, &str, i64, bool)] = &[
    // (server id, image, port, whether readiness sends a smoke inference)
    ("vllm", "vllm/vllm-openai:v0.10.1", 8000, true),
    (
        "tgi",
        "ghcr.io/huggingface/text-generation-inference:3.0.1",
        80,
        true,
    ),
    // /health_generate already generates: no smoke on top.
    ("sglang", "lmsysorg/sglang:v0.4.6", 30000, false),
    // A v2 smoke needs the model's own input, which only a person knows.
    (
        "triton",
        "nvcr.io/nvidia/tritonserver:24.08-py3",
        8000,
        false,
    ),
];

#[test]
fn each_server_and_mode_gets_the_helpers_probes_and_its_volumes() {
    for mode in ["initContainer", "imageVolume"] {
        let policy = policy(mode);
        for &(id, image, port, smoke) in SERVERS {
            let what = format!("{id} ({mode})");
            let object = deployment(image, port, json!([]));
            let doc = mutated(&object, &policy);
            let pod = &doc["spec"]["template"]["spec"];
            let c = &pod["containers"][0];

            let startup = command(&c["startupProbe"]);
            let p = port.to_string();
            assert_eq!(
                startup,
                [
                    "/probelint/bin/probelint-probe",
                    "startup",
                    "--server",
                    id,
                    "--port",
                    p.as_str()
                ],
                "{what}"
            );
            // One call of at most 3 s, plus a second to exit; SGLang's startup check generates,
            // and the 10 s the fix gives it without the helper is kept (never shortened).
            let startup_timeout = if id == "sglang" { 10 } else { 4 };
            assert_eq!(
                c["startupProbe"]["timeoutSeconds"], startup_timeout,
                "{what}"
            );

            let ready = command(&c["readinessProbe"]);
            assert_eq!(
                &ready[..6],
                [
                    "/probelint/bin/probelint-probe",
                    "ready",
                    "--server",
                    id,
                    "--port",
                    p.as_str()
                ],
                "{what}"
            );
            assert_eq!(
                ready.contains(&"--smoke".to_owned()),
                smoke,
                "{what}: {ready:?}"
            );
            assert!(c["readinessProbe"].get("tcpSocket").is_none(), "{what}");
            let calls = match (id, smoke) {
                ("vllm", true) => 4,
                (_, true) => 2,
                _ => 1,
            };
            assert_eq!(
                c["readinessProbe"]["timeoutSeconds"],
                calls * 3 + 1,
                "{what}"
            );

            let volumes = pod["volumes"].as_array().expect("volumes");
            assert_eq!(volumes.len(), 2, "{what}: {volumes:?}");
            assert_eq!(
                volumes[1],
                json!({"name": "probelint-probe-state", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
            );
            let mounts = c["volumeMounts"].as_array().expect("mounts");
            assert_eq!(mounts[0]["readOnly"], true, "{what}");
            assert_eq!(mounts[1]["mountPath"], "/probelint-state", "{what}");
            match mode {
                "initContainer" => {
                    assert_eq!(
                        volumes[0],
                        json!({"name": "probelint-probe", "emptyDir": {"sizeLimit": "16Mi"}})
                    );
                    let init = &pod["initContainers"][0];
                    assert_eq!(init["image"], IMAGE);
                    assert_eq!(init["args"], json!(["install", "/out"]));
                    assert_eq!(init["volumeMounts"][0]["mountPath"], "/out");
                    assert_eq!(mounts[0]["mountPath"], "/probelint/bin");
                }
                _ => {
                    assert_eq!(
                        volumes[0]["image"],
                        json!({"reference": IMAGE, "pullPolicy": "IfNotPresent"})
                    );
                    assert!(pod.get("initContainers").is_none(), "{what}");
                    assert_eq!(mounts[0]["mountPath"], "/probelint");
                    assert_eq!(mounts[0]["subPath"], "probelint");
                }
            }

            // The rules accept what the fixes wrote: nothing left to fix, and neither
            // exec-probe-heavy nor readiness-port-open speaks of the helper.
            let after = evaluate_one(&doc, &policy);
            for f in &after {
                assert!(
                    !matches!(&*f.rule, "exec-probe-heavy" | "readiness-port-open"),
                    "{what}: {f:?}"
                );
                assert!(
                    f.fix.is_none(),
                    "{what}: a fix is left after mutation: {f:?}"
                );
            }
            assert!(
                mutate(&doc, &policy).patch.0.is_empty(),
                "{what}: not idempotent"
            );
        }
    }
}

#[test]
fn off_by_default_the_fixes_write_http_get() {
    let object = deployment("vllm/vllm-openai:v0.10.1", 8000, json!([]));
    let doc = mutated(&object, &Policy::default());
    let c = &doc["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/health");
    assert!(c["startupProbe"].get("httpGet").is_some());
    assert!(doc["spec"]["template"]["spec"].get("volumes").is_none());
}

#[test]
fn a_vllm_with_sleep_mode_gets_no_smoke_inference() {
    for args in [
        json!(["--model", "m", "--enable-sleep-mode"]),
        json!(["--model", "m", "--sleep-idle-ttl=300"]),
    ] {
        let object = deployment("vllm/vllm-openai:v0.10.1", 8000, args);
        let doc = mutated(&object, &policy("initContainer"));
        let ready = command(&doc["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]);
        assert!(!ready.contains(&"--smoke".to_owned()), "{ready:?}");
    }
}

#[test]
fn image_volumes_are_refused_below_kubernetes_1_35() {
    let err = Policy::with_user_yaml(&format!(
        "kubernetesVersion: '1.34'\nprobeHelper: {{image: {IMAGE}, mode: imageVolume}}\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("probeHelper.mode:"), "{err}");
    assert!(
        err.contains("1.35") && err.contains("initContainer"),
        "{err}"
    );
    let err = Policy::with_user_yaml("probeHelper: {image: ' '}\n").unwrap_err();
    assert!(err.to_string().starts_with("probeHelper.image:"), "{err}");
    let err = Policy::with_user_yaml(&format!("probeHelper: {{image: {IMAGE}, mode: sidecar}}\n"))
        .unwrap_err();
    assert!(err.to_string().contains("sidecar"), "{err}");
}

#[test]
fn existing_timeouts_volumes_and_mounts_are_kept() {
    let mut object = deployment("vllm/vllm-openai:v0.10.1", 8000, json!([]));
    let c = &mut object["spec"]["template"]["spec"]["containers"][0];
    c["readinessProbe"]["timeoutSeconds"] = json!(30);
    c["volumeMounts"] = json!([{"name": "cache", "mountPath": "/root/.cache"}]);
    object["spec"]["template"]["spec"]["volumes"] = json!([{"name": "cache", "emptyDir": {}}]);
    let policy = policy("initContainer");
    let doc = mutated(&object, &policy);
    let pod = &doc["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["readinessProbe"]["timeoutSeconds"], 30, "never shortened");
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|e| e["name"].as_str().expect("name").to_owned())
            .collect()
    };
    assert_eq!(
        names(&pod["volumes"]),
        ["cache", "probelint-probe", "probelint-probe-state"]
    );
    assert_eq!(
        names(&c["volumeMounts"]),
        ["cache", "probelint-probe", "probelint-probe-state"]
    );
    // The startup budget is the one the fix writes without the helper: only the check differs.
    let plain = mutated(&object, &Policy::default());
    let plain = &plain["spec"]["template"]["spec"]["containers"][0]["startupProbe"];
    for key in ["periodSeconds", "failureThreshold"] {
        assert_eq!(c["startupProbe"][key], plain[key], "{key}");
    }
}

#[test]
fn two_servers_in_one_pod_share_one_copy_of_the_volumes() {
    let mut object = deployment("vllm/vllm-openai:v0.10.1", 8000, json!([]));
    let mut second = object["spec"]["template"]["spec"]["containers"][0].clone();
    second["name"] = json!("second");
    second["args"] = json!(["--port", "8001"]);
    second["ports"] = json!([{"containerPort": 8001}]);
    second["readinessProbe"]["tcpSocket"]["port"] = json!(8001);
    object["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(second);
    let policy = policy("initContainer");
    let doc = mutated(&object, &policy);
    let pod = &doc["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"].as_array().expect("volumes").len(), 2);
    assert_eq!(pod["initContainers"].as_array().expect("init").len(), 1);
    let ready = command(&pod["containers"][1]["readinessProbe"]);
    assert_eq!(ready[5], "8001");
    assert!(mutate(&doc, &policy).patch.0.is_empty());
}

#[test]
fn a_liveness_that_cannot_tell_busy_from_wedged_becomes_live_and_keeps_its_deadline() {
    // (server id, image, port, the liveness path users give it, progress or endpoint)
    let servers: &[(&str, &str, i64, &str, bool)] = &[
        ("vllm", "vllm/vllm-openai:v0.10.1", 8000, "/health", true),
        (
            "tgi",
            "ghcr.io/huggingface/text-generation-inference:3.0.1",
            80,
            "/health",
            true,
        ),
        ("sglang", "lmsysorg/sglang:v0.4.6", 30000, "/health", false),
        (
            "triton",
            "nvcr.io/nvidia/tritonserver:24.08-py3",
            8000,
            "/v2/health/ready",
            false,
        ),
    ];
    for mode in ["initContainer", "imageVolume"] {
        let policy = policy(mode);
        for &(id, image, port, path, progress) in servers {
            let what = format!("{id} ({mode})");
            let mut object = deployment(image, port, json!([]));
            let c = &mut object["spec"]["template"]["spec"]["containers"][0];
            c["livenessProbe"] = json!({"httpGet": {"path": path, "port": port},
                "initialDelaySeconds": 5, "periodSeconds": 10, "failureThreshold": 3});
            let findings = evaluate_one(&object, &policy);
            let busy: Vec<_> = findings
                .iter()
                .filter(|f| f.rule == "liveness-restarts-busy-server")
                .collect();
            assert_eq!(busy.len(), 1, "{what}: {findings:?}");
            assert!(
                findings
                    .iter()
                    .all(|f| f.rule != "liveness-checks-readiness"),
                "{what}: one finding per probe"
            );
            let doc = mutated(&object, &policy);
            let pod = &doc["spec"]["template"]["spec"];
            let c = &pod["containers"][0];
            let live = &c["livenessProbe"];
            let words = command(live);
            let p = port.to_string();
            assert_eq!(
                &words[..6],
                [
                    "/probelint/bin/probelint-probe",
                    "live",
                    "--server",
                    id,
                    "--port",
                    p.as_str()
                ],
                "{what}"
            );
            assert_eq!(
                words.windows(2).any(|w| w == ["--by", "endpoint"]),
                !progress,
                "{what}: {words:?}"
            );
            assert!(words.ends_with(&["--cache".into(), "/probelint-state/live".into()]));
            // The kill deadline it had: 5 + 3 × 10 s; the timeout covers the helper's calls.
            assert_eq!(live["initialDelaySeconds"], 5, "{what}");
            assert_eq!(live["periodSeconds"], 10, "{what}");
            assert_eq!(live["failureThreshold"], 3, "{what}");
            assert_eq!(
                live["timeoutSeconds"],
                if progress { 7 } else { 4 },
                "{what}"
            );
            assert!(live.get("httpGet").is_none(), "{what}");
            // No startupProbe before: the one gpu-startup-probe-missing adds gates it.
            assert_eq!(command(&c["startupProbe"])[1], "startup", "{what}");
            assert_eq!(
                pod["volumes"].as_array().map(Vec::len),
                Some(2),
                "{what}: one copy of the volumes"
            );
            for f in evaluate_one(&doc, &policy) {
                assert!(f.fix.is_none(), "{what}: a fix is left: {f:?}");
                assert_ne!(f.rule, "liveness-restarts-busy-server", "{what}");
            }
            assert!(
                mutate(&doc, &policy).patch.0.is_empty(),
                "{what}: not idempotent"
            );
        }
    }
}

#[test]
fn a_cheap_liveness_is_left_alone_and_without_the_helper_the_rule_is_silent() {
    let mut object = deployment("nvcr.io/nvidia/tritonserver:24.08-py3", 8000, json!([]));
    object["spec"]["template"]["spec"]["containers"][0]["livenessProbe"] =
        json!({"httpGet": {"path": "/v2/health/live", "port": 8000}});
    let fired = |object: &Value, policy: &Policy| {
        evaluate_one(object, policy)
            .iter()
            .any(|f| f.rule == "liveness-restarts-busy-server")
    };
    assert!(!fired(&object, &policy("initContainer")));
    object["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["path"] =
        json!("/v2/health/ready");
    assert!(fired(&object, &policy("initContainer")));
    assert!(!fired(&object, &Policy::default()));
}
