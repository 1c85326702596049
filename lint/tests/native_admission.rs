//! `probelint export` against the engine, twice:
//!
//! - Tier 1, with no apiserver: the exported ValidatingAdmissionPolicies are evaluated by the
//!   `cel` crate (a Rust CEL interpreter) as the apiserver evaluates them (match condition,
//!   variables in order, validation), on every rule fixture of the exported rules, every
//!   example and every object of the real corpus: they never say more than the engine, and say
//!   exactly what it says on the objects CEL can decide.
//! - Tier 2, on a real kube-apiserver (`tests/cluster`), with no webhook: the policies warn and
//!   deny where the engine reports warnings and errors, never where it does not, the Pods a
//!   Deployment's controllers create still flow, and an object past the CEL cost budget is
//!   counted in the apiserver's metrics and warned about by the guard policy.
//!
//! Each object is sent with `kubectl create --dry-run=server`, which runs admission (the
//! policies) without storing anything. The policies run first in warn mode, where every
//! finding comes back as a warning naming its policy (so all of them are seen, not only the
//! first denial), then in enforce mode.

use probelint_cluster::{Cluster, wait_for};
use probelint_policies::{Policy, Severity, export};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

fn probelint() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_probelint"));
    cmd.env("NO_COLOR", "1");
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const RULES: &[&str] = &[
    "gpu-startup-probe-missing",
    "readiness-port-open",
    "known-server-endpoint",
];

/// (rule, severity, container).
type Verdict = (String, Severity, String);

/// The ValidatingAdmissionPolicies `probelint export` writes under the built-in policy.
fn export(mode: &str) -> String {
    export_only(mode, "validating")
}

/// `probelint export --only <only>` under the built-in policy.
fn export_only(mode: &str, only: &str) -> String {
    let empty = tempfile::NamedTempFile::new().expect("temp file");
    let out = probelint()
        .args(["export", "--mode", mode, "--only", only, "--config"])
        .arg(empty.path())
        .output()
        .expect("run probelint");
    assert!(out.status.success(), "probelint export: {}", text(&out));
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn install(cluster: &Cluster, yaml: &str) {
    let out = cluster.apply(yaml, &[]);
    assert!(out.status.success(), "kubectl apply: {}", text(&out));
}

/// `kubectl create --dry-run=server`: runs admission, stores nothing.
fn dry_run(cluster: &Cluster, ns: &str, object: &Value) -> Output {
    create_dry_run(cluster, ns, object, "name")
}

/// `kubectl create --dry-run=server -o <output>` of `object` in `ns`.
fn create_dry_run(cluster: &Cluster, ns: &str, object: &Value, output: &str) -> Output {
    use std::io::Write as _;
    let mut child = cluster
        .kubectl()
        .args([
            "create",
            "--dry-run=server",
            "-n",
            ns,
            "-f",
            "-",
            "-o",
            output,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(object.to_string().as_bytes())
        .expect("write");
    child.wait_with_output().expect("kubectl output")
}

/// What the apiserver said: each policy's warning or denial, read back into verdicts (the
/// policy's name says the part: `…-warning` is the warning part of a rule).
fn verdicts(out: &Output) -> BTreeSet<Verdict> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut got = BTreeSet::new();
    for line in stderr.lines() {
        let Some((_, rest)) = line.split_once("ValidatingAdmissionPolicy 'probelint.io-") else {
            continue;
        };
        let Some((policy, _)) = rest.split_once('\'') else {
            continue;
        };
        if format!("probelint.io-{policy}") == export::GUARD {
            continue;
        }
        let severity = if policy.ends_with("-warning") {
            Severity::Warning
        } else {
            Severity::Error
        };
        let Some((_, message)) = line.split_once(": probelint ") else {
            panic!("a probelint policy's message without its rule: {line}");
        };
        let (rule, message) = message.split_once(": ").expect("rule: message");
        let names = message
            .split_once(" requests an")
            .or_else(|| message.split_once(" uses tcpSocket"))
            .or_else(|| message.split_once(" checks readiness with curl"))
            .or_else(|| message.split_once(" checks readiness on a path"))
            .map(|(names, _)| names)
            .unwrap_or_else(|| panic!("unexpected message: {line}"));
        for name in names.split(", ") {
            let name = name.strip_prefix("container ").expect("container NAME");
            got.insert((rule.to_owned(), severity, name.to_owned()));
        }
    }
    got
}

/// Whether the guard policy warned that the object may go unjudged.
fn guarded(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stderr)
        .contains(&format!("ValidatingAdmissionPolicy '{}'", export::GUARD))
}

/// How many evaluations of the probelint policies the apiserver could not finish and so
/// admitted (`failurePolicy: Ignore`), from its own metrics: a cost limit exceeded inside one
/// expression counts as `invalid_error` (the message is CEL's), the policy's whole budget as
/// `out_of_budget` (`ErrorType` in k8s.io/apiserver's validating policy plugin).
fn unjudged(cluster: &Cluster) -> u64 {
    let out = cluster
        .kubectl()
        .args(["get", "--raw", "/metrics"])
        .output()
        .expect("kubectl");
    assert!(out.status.success(), "metrics: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_validating_admission_policy_check_total{")
                && !l.contains("error_type=\"no_error\"")
                && l.contains("enforcement_action=\"allow\"")
                && l.contains("policy=\"probelint.io-")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// The characters [`export::GUARD`] counts in a Deployment.
fn guard_size(object: &Value) -> u64 {
    let containers = object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    let mut text = Vec::new();
    for c in containers {
        let mut line: Vec<&str> = Vec::new();
        for key in ["command", "args"] {
            line.extend(
                c[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            );
        }
        text.push(format!(
            "{} {}",
            c["image"].as_str().unwrap_or(""),
            line.join(" ")
        ));
    }
    text.join(" ").len() as u64 + export::GUARD_CHARS_PER_CONTAINER * containers.len() as u64
}

/// What the engine reports on the object, for the exported rules.
fn engine(object: &Value, policy: &Policy) -> BTreeSet<Verdict> {
    probelint_policies::evaluate_one(object, policy)
        .into_iter()
        .filter(|f| f.suppressed.is_none() && RULES.contains(&&*f.rule))
        .filter(|f| f.severity >= Severity::Warning)
        .map(|f| {
            (
                f.rule.into_owned(),
                f.severity,
                f.container.as_deref().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The kinds the policies match.
fn matched(object: &Value) -> bool {
    matches!(
        (object["apiVersion"].as_str(), object["kind"].as_str()),
        (Some("v1"), Some("Pod" | "ReplicationController"))
            | (
                Some("apps/v1"),
                Some("Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
            )
            | (Some("batch/v1"), Some("Job" | "CronJob"))
    )
}

fn gpu(name: &str, image: &str, extra: Value) -> Value {
    let mut container = json!({
        "name": name, "image": image,
        "ports": [{"containerPort": 8000}],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        container[k] = v;
    }
    container
}

fn deployment(name: &str, annotations: Value, containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {"containers": containers},
            },
        },
    })
}

/// A vLLM Deployment of `containers` GPU containers, each with port-open readiness and `args`
/// arguments.
fn large_deployment(containers: i64, args: usize) -> Value {
    let args: Vec<String> = (0..args).map(|i| format!("--flag-{i}=value-{i}")).collect();
    let containers: Vec<Value> = (0..containers)
        .map(|i| {
            gpu(
                &format!("m{i}"),
                "vllm/vllm-openai:v0.10.1",
                json!({
                    "args": args,
                    "ports": [{"containerPort": 8000 + i}],
                    "readinessProbe": {"tcpSocket": {"port": 8000 + i}},
                }),
            )
        })
        .collect();
    deployment("large", json!({}), json!(containers))
}

const TRITON: &str = "nvcr.io/nvidia/tritonserver:24.08-py3";

/// A Deployment of one GPU container of `image` with an httpGet startupProbe on `startup` (a
/// 1,200 s budget) and an httpGet readiness on `ready`, both on port 8000.
fn http_probed(name: &str, container: &str, image: &str, startup: &str, ready: &str) -> Value {
    deployment(
        name,
        json!({}),
        json!([gpu(
            container,
            image,
            json!({
                "startupProbe": {"httpGet": {"path": startup, "port": 8000}, "failureThreshold": 120},
                "readinessProbe": {"httpGet": {"path": ready, "port": 8000}},
            })
        )]),
    )
}

/// Objects whose verdicts CEL can decide: the apiserver must say exactly what the engine says.
fn decidable() -> Vec<(&'static str, Value)> {
    let tcp = json!({"readinessProbe": {"tcpSocket": {"port": 8000}}});
    let http = json!({
        "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 120},
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
    });
    let role = json!({"probelint.io/role": "server"});
    vec![
        (
            "a declared server whose liveness gives up before any server's own start (6 s < 10 s)",
            deployment(
                "declared",
                role.clone(),
                json!([gpu(
                    "model",
                    "registry.example/own-server:1",
                    json!({"livenessProbe": {"httpGet": {"path": "/healthz", "port": 8000}, "periodSeconds": 3}})
                )]),
            ),
        ),
        (
            "vLLM by its image, port-open readiness and no startupProbe",
            deployment(
                "vllm",
                json!({}),
                json!([gpu("vllm", "vllm/vllm-openai:v0.10.1", tcp.clone())]),
            ),
        ),
        (
            "a declared server on CPU with port-open readiness",
            deployment(
                "cpu",
                role.clone(),
                json!([{
                    "name": "api", "image": "registry.example/api:1",
                    "readinessProbe": {"tcpSocket": {"port": 8000}},
                    "resources": {"limits": {"cpu": "1"}},
                }]),
            ),
        ),
        (
            "a declared server with port-open readiness on a GPU",
            deployment(
                "declared-tcp",
                role.clone(),
                json!([gpu(
                    "model",
                    "registry.example/own-server:1",
                    json!({
                        "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 120},
                        "readinessProbe": {"tcpSocket": {"port": 8000}},
                    })
                )]),
            ),
        ),
        (
            "vLLM with HTTP startup and readiness",
            deployment(
                "good",
                json!({}),
                json!([gpu("vllm", "vllm/vllm-openai:v0.10.1", http)]),
            ),
        ),
        (
            "an exemption on the template",
            deployment(
                "ignored",
                json!({
                    "probelint.io/role": "server",
                    "probelint.io/ignore": "gpu-startup-probe-missing",
                    "probelint.io/ignore-reason": "loads nothing",
                }),
                json!([gpu("model", "registry.example/own-server:1", json!({}))]),
            ),
        ),
        (
            "Ollama, which loads models on first request",
            deployment(
                "ollama",
                json!({}),
                json!([gpu("ollama", "ollama/ollama:0.5.7", json!({}))]),
            ),
        ),
        (
            "a vLLM image that only sleeps",
            deployment(
                "idle",
                json!({}),
                json!([gpu(
                    "box",
                    "vllm/vllm-openai:v0.10.1",
                    json!({"command": ["sleep", "infinity"]})
                )]),
            ),
        ),
        (
            "a run-to-completion Pod of vLLM, which the engine takes for batch",
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "batch"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "model", "image": "vllm/vllm-openai:v0.10.1",
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                        "readinessProbe": {"tcpSocket": {"port": 8000}},
                    }],
                },
            }),
        ),
        (
            "a Job of a declared server with port-open readiness (batch: no startupProbe asked)",
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "job"},
                "spec": {"template": {
                    "metadata": {"annotations": role.clone()},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [gpu("model", "registry.example/own-server:1", tcp.clone())],
                    },
                }},
            }),
        ),
        (
            "a CronJob of vLLM with port-open readiness, exempted on its jobTemplate only",
            json!({
                "apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "cron"},
                "spec": {
                    "schedule": "0 * * * *",
                    "jobTemplate": {
                        "metadata": {"annotations": {"probelint.io/ignore": "all", "probelint.io/ignore-reason": "r"}},
                        "spec": {"template": {"spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [gpu("vllm", "vllm/vllm-openai:v0.10.1", tcp.clone())],
                        }}},
                    },
                },
            }),
        ),
        (
            "curl without --fail as readiness, in a shell, on a declared GPU server",
            deployment(
                "curl",
                role.clone(),
                json!([gpu(
                    "model",
                    "registry.example/own-server:1",
                    json!({
                        "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 120},
                        "readinessProbe": {"exec": {"command": ["sh", "-c", "curl -s http://localhost:8000/health"]}},
                    })
                )]),
            ),
        ),
        (
            "curl without --fail as readiness on vLLM's image, and one with -sf beside it",
            deployment(
                "curl-vllm",
                json!({}),
                json!([
                    gpu(
                        "vllm",
                        "vllm/vllm-openai:v0.10.1",
                        json!({
                            "readinessProbe": {"exec": {"command": ["curl", "-sS", "localhost:8000/health"]}},
                        })
                    ),
                    gpu(
                        "checked",
                        "vllm/vllm-openai:v0.10.1",
                        json!({
                            "readinessProbe": {"exec": {"command": ["curl", "-sf", "localhost:8000/health"]}},
                        })
                    ),
                ]),
            ),
        ),
        (
            "curl without --fail as readiness on a declared server on CPU",
            deployment(
                "curl-cpu",
                role.clone(),
                json!([{
                    "name": "api", "image": "registry.example/api:1",
                    "readinessProbe": {"exec": {"command": ["/usr/bin/curl", "http://localhost:8000/ready"]}},
                    "resources": {"limits": {"cpu": "1"}},
                }]),
            ),
        ),
        (
            "a custom image with no port whose arguments name a server's image",
            deployment(
                "named",
                json!({}),
                json!([{
                    "name": "model", "image": "registry.example/own-tool:1",
                    "args": ["--base", "lmsysorg/sglang:v0.4"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }]),
            ),
        ),
        (
            "vLLM by its image with no port and no probes",
            deployment(
                "vllm-bare",
                json!({}),
                json!([{
                    "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }]),
            ),
        ),
        (
            "a declared server that only sleeps",
            deployment(
                "declared-idle",
                role.clone(),
                json!([gpu(
                    "box",
                    "registry.example/own-server:1",
                    json!({"command": ["sleep", "infinity"]})
                )]),
            ),
        ),
        (
            "a declared server whose limit is a quantity of zero written long",
            deployment(
                "declared-zero",
                role.clone(),
                json!([{
                    "name": "model", "image": "registry.example/own-server:1",
                    "resources": {"limits": {"nvidia.com/gpu": "0"}, "requests": {"nvidia.com/gpu": 0}},
                }]),
            ),
        ),
        (
            "a declared server with no probes (nothing can kill its load: a warning)",
            deployment(
                "unprobed",
                role.clone(),
                json!([gpu("model", "registry.example/own-server:1", json!({}))]),
            ),
        ),
        (
            "a NIM liveness on the path it answers while loading (a warning)",
            deployment(
                "nim",
                json!({}),
                json!([gpu(
                    "nim",
                    "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                    json!({"livenessProbe": {"httpGet": {"path": "/v1/health/live", "port": 8000}}})
                )]),
            ),
        ),
        (
            "a bare Pod of a declared server",
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "pod", "annotations": role},
                "spec": {"containers": [gpu("model", "registry.example/own-server:1", json!({}))]},
            }),
        ),
        (
            "vLLM by its image whose liveness gives up before vLLM's own start (10 s < 20 s)",
            deployment(
                "vllm-quick-liveness",
                json!({}),
                json!([gpu(
                    "vllm",
                    "vllm/vllm-openai:v0.10.1",
                    json!({"livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5}})
                )]),
            ),
        ),
        (
            "vLLM by its image whose liveness outlasts vLLM's own start, model unknown",
            deployment(
                "vllm-liveness",
                json!({}),
                json!([gpu(
                    "vllm",
                    "vllm/vllm-openai:v0.10.1",
                    json!({"livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "initialDelaySeconds": 30}})
                )]),
            ),
        ),
        (
            "a declared server whose quick liveness is judged against its declared load",
            deployment(
                "declared-load",
                json!({"probelint.io/role": "server", "probelint.io/model-load-seconds": "5"}),
                json!([gpu(
                    "model",
                    "registry.example/own-server:1",
                    json!({"livenessProbe": {"httpGet": {"path": "/healthz", "port": 8000}, "periodSeconds": 3}})
                )]),
            ),
        ),
        (
            "Triton by its image, ready on the live endpoint",
            http_probed(
                "triton-live",
                "triton",
                TRITON,
                "/v2/health/ready",
                "/v2/health/live",
            ),
        ),
        (
            "Triton by its image, ready on a model's own ready endpoint",
            http_probed(
                "triton-model-ready",
                "triton",
                TRITON,
                "/v2/health/ready",
                "/v2/models/llama/ready",
            ),
        ),
        (
            "TGI by its image, ready on an arbitrary path",
            http_probed(
                "tgi-root",
                "tgi",
                "ghcr.io/huggingface/text-generation-inference:3.0",
                "/health",
                "/",
            ),
        ),
    ]
}

/// The rule fixtures of the exported rules (every object of a kind the policies match).
fn fixtures() -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/resources/rules");
    let mut out = Vec::new();
    for rule in RULES {
        let mut files: Vec<_> = std::fs::read_dir(root.join(rule))
            .expect("fixtures")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read fixture");
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for doc in docs.into_iter().filter(matched) {
                out.push((
                    format!("{rule}/{}", file.file_name().unwrap().to_string_lossy()),
                    doc,
                ));
            }
        }
    }
    out
}

/// `object` with what the apiserver requires of a workload and a rule fixture may leave out (a
/// selector, and the template labels it selects), so that admission runs on it. Neither exported
/// rule reads labels.
fn admissible(mut object: Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let selector = json!({"probelint.io/test": "fixture"});
    let spec = &mut object["spec"];
    let needs_selector = matches!(
        kind.as_str(),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "ReplicationController"
    );
    if needs_selector && spec.is_object() && spec.get("selector").is_none() {
        spec["selector"] = match kind.as_str() {
            "ReplicationController" => selector.clone(),
            _ => json!({"matchLabels": selector.clone()}),
        };
        let template = &mut spec["template"];
        if template.is_object() {
            let labels = &mut template["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            labels["probelint.io/test"] = json!("fixture");
        }
    }
    object
}

fn without_namespace(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    object
}

/// The admission policies are cluster-wide: the tests that install them take turns.
static POLICIES_INSTALLED: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[ignore = "e2e: builds and starts etcd, kube-apiserver and kube-controller-manager"]
fn exported_policies_warn_and_deny_as_the_engine_does_and_controller_pods_flow() {
    let _alone = POLICIES_INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = probelint_cluster::shared("native admission");
    let ns = cluster.namespace("native");
    let policy = Policy::builtin().expect("built-in policy");

    let exported = export("warn");
    let policies = exported
        .lines()
        .filter(|l| *l == "kind: ValidatingAdmissionPolicy")
        .count();
    assert!(policies >= 8, "{exported}");
    install(cluster, &exported);
    let probe = decidable().remove(0).1;
    wait_for(
        "the exported policies to take effect",
        Duration::from_secs(60),
        || (!verdicts(&dry_run(cluster, &ns, &probe)).is_empty()).then_some(()),
    );
    // The apiserver type-checks each policy against the kinds it matches, and says so in its
    // status once it has.
    let vaps = wait_for(
        "the policies' type checking",
        Duration::from_secs(60),
        || {
            let vaps = cluster.get_json(&[
                "get",
                "validatingadmissionpolicies",
                "-l",
                "app.kubernetes.io/managed-by=probelint",
            ]);
            let items = vaps["items"].as_array().cloned().unwrap_or_default();
            (items.len() == policies
                && items
                    .iter()
                    .all(|v| v["status"]["observedGeneration"] == v["metadata"]["generation"]))
            .then_some(items)
        },
    );
    for vap in &vaps {
        let warnings = &vap["status"]["typeChecking"]["expressionWarnings"];
        assert!(
            warnings.as_array().is_none_or(|w| w.is_empty()),
            "{}: {warnings}",
            vap["metadata"]["name"]
        );
    }

    for (what, object) in decidable() {
        let out = dry_run(cluster, &ns, &object);
        assert!(
            out.status.success(),
            "{what}: warn mode denied: {}",
            text(&out)
        );
        assert_eq!(
            verdicts(&out),
            engine(&object, &policy),
            "{what}: {}",
            text(&out)
        );
    }

    // The CEL cost budget. 16 GPU containers, each with port-open readiness and more and more
    // arguments: while the guard is silent, every verdict is the engine's; past the budget the
    // apiserver admits the object with no verdict (failurePolicy Ignore), counts it in
    // apiserver_validating_admission_policy_check_total{enforcement_action="allow"} with an
    // error type, and the guard has warned. docs/native-admission.md states the figures printed here.
    let rules = |v: &BTreeSet<Verdict>| {
        v.iter()
            .map(|(r, s, _)| (r.clone(), *s))
            .collect::<BTreeSet<_>>()
    };
    let mut first_unjudged = None;
    for args in [20, 40, 80, 160, 320, 640, 1280] {
        let large = large_deployment(16, args);
        let before = unjudged(cluster);
        let out = dry_run(cluster, &ns, &large);
        assert!(out.status.success(), "{}", text(&out));
        let want = engine(&large, &policy);
        assert_eq!(want.len(), 32, "the engine: {want:?}");
        // The apiserver shortens long warnings: compare the rules and severities only.
        let got = rules(&verdicts(&out));
        let judged = got == rules(&want);
        let counted = unjudged(cluster) - before;
        let size = guard_size(&large);
        eprintln!(
            "16 containers × {args} arguments ({size} characters; the guard allows {}): judged {judged}, guard warned {}, admitted on an error {counted}",
            export::guard_chars(),
            guarded(&out)
        );
        if !guarded(&out) {
            assert!(
                judged,
                "16 × {args}: the guard is silent and the policies did not judge: {}",
                text(&out)
            );
        }
        assert_eq!(guarded(&out), size > export::guard_chars(), "16 × {args}");
        if !judged {
            assert!(got.is_empty(), "16 × {args}: half-judged: {got:?}");
            assert!(
                counted > 0,
                "16 × {args}: unjudged and not counted in the apiserver's metrics"
            );
            first_unjudged.get_or_insert(args);
        }
    }
    let first_unjudged = first_unjudged.expect("no size went over the CEL cost budget");
    assert!(
        first_unjudged >= 320,
        "16 containers × {first_unjudged} arguments are over the budget: update docs/native-admission.md"
    );

    // The rule fixtures, the examples and the corpus: the policies never say more than the
    // engine (a warning part may warn where the engine errs, never deny), they say what the
    // `cel` crate says in tier 1 (so tier 1 stands for this apiserver), and this says how much
    // of the engine they say.
    let cel = cel_eval::Policies::compile(&export("warn"));
    let (corpus, _) = examples_and_corpus();
    let (mut findings, mut caught, mut refused) = (0, 0, Vec::new());
    let objects: Vec<(String, Value)> = fixtures()
        .into_iter()
        .map(|(f, o)| (f, without_namespace(o)))
        .chain(corpus)
        .collect();
    for (file, object) in &objects {
        let object = admissible(object.clone());
        let out = dry_run(cluster, &ns, &object);
        if !out.status.success() {
            // The apiserver's own validation refused it, before any admission policy ran.
            refused.push(format!(
                "{file}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            continue;
        }
        let want = engine(&object, &policy);
        let got = verdicts(&out);
        for (rule, severity, container) in &got {
            let same = want.contains(&(rule.clone(), *severity, container.clone()));
            let weaker = *severity == Severity::Warning
                && want.contains(&(rule.clone(), Severity::Error, container.clone()));
            assert!(
                same || weaker,
                "{file}: the policies say {rule} {severity:?} on {container}; the engine: {want:?}"
            );
        }
        assert_eq!(
            cel.verdicts(&object, PERSON).expect("the cel crate"),
            got,
            "{file}: the cel crate and the apiserver disagree"
        );
        findings += want.len();
        caught += want
            .iter()
            .filter(|(r, _, c)| got.iter().any(|(gr, _, gc)| gr == r && gc == c))
            .count();
    }
    eprintln!(
        "fixtures, examples and corpus: the policies report {caught} of the engine's {findings} findings of the exported rules on {} objects the apiserver admits ({} it refuses itself)",
        objects.len() - refused.len(),
        refused.len()
    );
    assert!(
        refused.len() * 10 < objects.len(),
        "the apiserver refuses many of the objects:\n{}",
        refused.join("\n")
    );

    // Enforce: errors are denied, controller-made Pods are not judged.
    install(cluster, &export("enforce"));
    let declared = decidable().remove(0).1;
    wait_for(
        "enforce mode to take effect",
        Duration::from_secs(60),
        || (!dry_run(cluster, &ns, &declared).status.success()).then_some(()),
    );
    let out = dry_run(cluster, &ns, &declared);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("denied request: probelint gpu-startup-probe-missing: container model requests an accelerator"), "{stderr}");
    // The warning part still only warns.
    let cpu = decidable().remove(2).1;
    let out = dry_run(cluster, &ns, &cpu);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(verdicts(&out).len(), 1, "{}", text(&out));

    // A Deployment exempted on its own metadata passes; its Pods' template carries no exemption,
    // yet the ReplicaSet controller creates them: the apiserver says who sent them.
    let mut exempt = declared.clone();
    exempt["metadata"]["name"] = json!("exempt");
    exempt["metadata"]["annotations"] = json!({
        "probelint.io/role": "server",
        "probelint.io/ignore": "gpu-startup-probe-missing",
        "probelint.io/ignore-reason": "tested",
    });
    exempt["spec"]["template"]["metadata"]["annotations"] = json!({"probelint.io/role": "server"});
    exempt["spec"]["selector"]["matchLabels"]["app"] = json!("exempt");
    exempt["spec"]["template"]["metadata"]["labels"]["app"] = json!("exempt");
    let out = cluster.apply(&exempt.to_string(), &["-n", &ns]);
    assert!(out.status.success(), "{}", text(&out));
    let pods = wait_for(
        "the exempted Deployment's Pod",
        Duration::from_secs(60),
        || {
            let pods = cluster.get_json(&["-n", &ns, "get", "pods", "-l", "app=exempt"]);
            let items = pods["items"].as_array().cloned().unwrap_or_default();
            (!items.is_empty()).then_some(items)
        },
    );
    // The same Pod sent by a person, ownerReference and all, is denied: an ownerReference
    // alone claims nothing.
    let mut forged = pods[0].clone();
    let meta = forged["metadata"].as_object_mut().expect("metadata");
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generateName",
    ] {
        meta.remove(key);
    }
    meta.insert("name".into(), json!("forged"));
    forged.as_object_mut().expect("pod").remove("status");
    let out = dry_run(cluster, &ns, &forged);
    assert!(
        !out.status.success(),
        "a person's Pod with a controller's ownerReference was admitted: {}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("probelint gpu-startup-probe-missing"),
        "{}",
        text(&out)
    );

    cluster.kubectl_ok(&[
        "delete",
        "validatingadmissionpolicies,validatingadmissionpolicybindings",
        "-l",
        "app.kubernetes.io/managed-by=probelint",
    ]);
}

/// `kubectl create --dry-run=server -o json`: the object as the apiserver would store it, after
/// the mutating admission policies and defaulting; `None` when the apiserver refuses it.
fn admitted(cluster: &Cluster, ns: &str, object: &Value) -> Option<Value> {
    let out = create_dry_run(cluster, ns, object, "json");
    out.status
        .success()
        .then(|| settled(serde_json::from_slice(&out.stdout).expect("the admitted object")))
}

/// `object` without what the apiserver makes up anew for each request: the service-account
/// token volume it gives a Pod (`kube-api-access-<suffix>`) and its mounts, and the uid a Job's
/// selector and template labels name.
fn settled(mut object: Value) -> Value {
    if object["kind"] == "Job" {
        let spec = &mut object["spec"];
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("selector");
        }
        if let Some(labels) = spec["template"]["metadata"]["labels"].as_object_mut() {
            labels.retain(|k, _| !k.contains("controller-uid"));
        }
    }
    let token = |v: &Value| {
        v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-"))
    };
    if object["kind"] == "Pod" {
        let spec = &mut object["spec"];
        if let Some(volumes) = spec["volumes"].as_array_mut() {
            volumes.retain(|v| !token(v));
        }
        for c in spec["containers"].as_array_mut().into_iter().flatten() {
            if let Some(mounts) = c["volumeMounts"].as_array_mut() {
                mounts.retain(|m| !token(m));
            }
        }
    }
    object
}

/// The engine's patch for `object`, cut to the fixes `probelint export` writes as
/// MutatingAdmissionPolicies (a startupProbe added, a startupProbe's failureThreshold raised) on
/// the containers of `spec.containers`, applied to `object`.
fn engine_fixed(object: &Value, policy: &Policy) -> Value {
    let mutation = probelint_policies::mutate(object, policy);
    let ops: Vec<json_patch::PatchOperation> = mutation
        .patch
        .0
        .into_iter()
        .filter(|op| {
            let path = op.path().to_string();
            path.contains("/containers/")
                && !path.contains("/initContainers/")
                && (path.ends_with("/startupProbe")
                    || path.ends_with("/startupProbe/failureThreshold"))
        })
        .collect();
    let mut fixed = object.clone();
    json_patch::patch(&mut fixed, &ops).expect("the engine's patch applies");
    fixed
}

/// The containers of an admitted object's pod template (or a Pod's).
fn pod_containers(object: &Value) -> &[Value] {
    let spec = if object["kind"] == "Pod" {
        &object["spec"]
    } else {
        &object["spec"]["template"]["spec"]
    };
    spec["containers"].as_array().map_or(&[], Vec::as_slice)
}

/// `object`'s spec without the containers of its pod template.
fn outside_containers(object: &Value) -> Value {
    let mut spec = object["spec"].clone();
    let pod = if object["kind"] == "Pod" {
        &mut spec
    } else {
        &mut spec["template"]["spec"]
    };
    if let Some(pod) = pod.as_object_mut() {
        pod.remove("containers");
    }
    spec
}

/// Objects whose fixes the mutating policies can compute: each must come out exactly as the
/// engine's patch makes it.
fn mutable() -> Vec<(&'static str, Value)> {
    let load = |seconds: &str| json!({"probelint.io/model-load-seconds": seconds});
    let live = json!({"livenessProbe": {"httpGet": {"path": "/health", "port": 8000}}});
    let vllm = "vllm/vllm-openai:v0.10.1";
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bare", "annotations": load("3000")},
        "spec": {"containers": [gpu("model", vllm, json!({"livenessProbe": {"tcpSocket": {"port": 8000}, "timeoutSeconds": 5}}))]},
    });
    pod["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8000}]);
    vec![
        (
            "vLLM with a declared 600 s load: the floor (1,200 s) sets the budget",
            deployment(
                "short",
                load("600"),
                json!([gpu("model", vllm, live.clone())]),
            ),
        ),
        (
            "vLLM with a declared 2,000 s load: the load with margin (2,500 s) sets it",
            deployment(
                "long",
                load("2000"),
                json!([gpu("model", vllm, live.clone())]),
            ),
        ),
        (
            "a liveness tolerance (100 + 60 × 30 s) longer than the load is kept",
            deployment(
                "tolerant",
                load("10"),
                json!([gpu(
                    "model",
                    vllm,
                    json!({"livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "initialDelaySeconds": 100, "failureThreshold": 60, "periodSeconds": 30}})
                )]),
            ),
        ),
        (
            "a readiness budget (50 × 40 s) longer than the load and the floor sets it",
            deployment(
                "ready",
                load("999"),
                json!([gpu(
                    "model",
                    vllm,
                    json!({
                        "livenessProbe": {"grpc": {"port": 8000}},
                        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 50, "periodSeconds": 40},
                    })
                )]),
            ),
        ),
        (
            "a declared server on a StatefulSet, two containers, one fixed",
            json!({
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "two", "annotations": load("1500")},
                "spec": {
                    "serviceName": "two",
                    "selector": {"matchLabels": {"app": "two"}},
                    "template": {
                        "metadata": {"labels": {"app": "two"}, "annotations": {"probelint.io/role": "server"}},
                        "spec": {"containers": [
                            {"name": "sidecar", "image": "busybox:1.36", "livenessProbe": {"tcpSocket": {"port": 9000}}},
                            gpu("model", "registry.example/own-server:1", json!({"livenessProbe": {"httpGet": {"path": "/healthz", "port": 8000}, "periodSeconds": 3}})),
                        ]},
                    },
                },
            }),
        ),
        (
            "a person's Pod with a tcpSocket liveness and a 5 s timeout",
            pod,
        ),
        (
            "a startupProbe of 6 × 10 s for a declared 120 s load: raised to cover 150 s",
            deployment(
                "raise",
                load("120"),
                json!([gpu(
                    "model",
                    vllm,
                    json!({"startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 6}})
                )]),
            ),
        ),
        (
            "a startupProbe with a delay: 30 + 20 × 5 s for a declared 400 s load",
            deployment(
                "delayed",
                load("400"),
                json!([gpu(
                    "model",
                    vllm,
                    json!({"startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "initialDelaySeconds": 30, "failureThreshold": 20, "periodSeconds": 5}})
                )]),
            ),
        ),
    ]
}

#[test]
#[ignore = "e2e: builds and starts etcd, kube-apiserver and kube-controller-manager"]
fn exported_mutations_patch_exactly_as_the_engine_does_or_not_at_all() {
    let _alone = POLICIES_INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = probelint_cluster::shared("native admission");
    let policy = Policy::builtin().expect("built-in policy");
    // The policies mutate in one namespace only: the engine's patched object is defaulted in
    // another, where nothing mutates it again.
    let mutated = cluster.namespace("mutated");
    let plain = cluster.namespace("plain");
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&export_only("enforce", "mutating")).expect("export YAML");
    let maps = docs
        .iter()
        .filter(|d| d["kind"] == "MutatingAdmissionPolicy")
        .count();
    assert_eq!(maps, 2, "{docs:?}");
    let scoped: Vec<Value> = docs
        .into_iter()
        .map(|mut d| {
            if d["kind"] == "MutatingAdmissionPolicyBinding" {
                d["spec"]["matchResources"] = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": mutated}}});
            }
            d
        })
        .collect();
    install(
        cluster,
        &json!({"apiVersion": "v1", "kind": "List", "items": scoped}).to_string(),
    );
    let (first, probe) = mutable().remove(0);
    wait_for(
        "the mutating policies to take effect",
        Duration::from_secs(60),
        || {
            let got = admitted(cluster, &mutated, &probe).expect(first);
            pod_containers(&got)[0].get("startupProbe").map(|_| ())
        },
    );

    // Where the policies can compute the fix: exactly the engine's object.
    for (what, object) in mutable() {
        let got = admitted(cluster, &mutated, &object).unwrap_or_else(|| panic!("{what}: refused"));
        let want = admitted(cluster, &plain, &engine_fixed(&object, &policy))
            .unwrap_or_else(|| panic!("{what}: the engine's object refused"));
        assert_ne!(
            engine_fixed(&object, &policy),
            object,
            "{what}: the engine fixes nothing here"
        );
        assert_eq!(got["spec"], want["spec"], "{what}");
    }

    // Every rule fixture, example and corpus object: each container comes out as the engine
    // patches it or untouched, never otherwise, and nothing outside the containers changes.
    let (corpus, _) = examples_and_corpus();
    let objects: Vec<(String, Value)> = fixtures()
        .into_iter()
        .map(|(f, o)| (f, without_namespace(o)))
        .chain(corpus)
        .chain(mutable().into_iter().map(|(w, o)| (w.to_owned(), o)))
        .collect();
    let (mut fixed, mut written, mut judged) = (0, 0, 0);
    for (file, object) in &objects {
        let object = admissible(object.clone());
        let Some(got) = admitted(cluster, &mutated, &object) else {
            continue;
        };
        judged += 1;
        let before = admitted(cluster, &plain, &object).expect("admitted once");
        let want = admitted(cluster, &plain, &engine_fixed(&object, &policy))
            .unwrap_or_else(|| panic!("{file}: the engine's object is refused"));
        assert_eq!(
            outside_containers(&got),
            outside_containers(&before),
            "{file}: the policies changed more than containers"
        );
        let (got, before, want) = (
            pod_containers(&got),
            pod_containers(&before),
            pod_containers(&want),
        );
        assert_eq!(got.len(), before.len(), "{file}");
        for ((g, b), w) in got.iter().zip(before).zip(want) {
            assert!(
                g == b || g == w,
                "{file}: container {}: the policies wrote\n{g}\nthe engine\n{w}\nbefore\n{b}",
                g["name"]
            );
            if w != b {
                fixed += 1;
                if g == w {
                    written += 1;
                }
            }
        }
    }
    // The CEL cost budget: one expression writes every container's fix, so past its limit none
    // is written (failurePolicy Ignore). Below the guard's figure every one is.
    for args in [20, 40, 80, 160, 320] {
        let mut large = large_deployment(16, args);
        large["spec"]["template"]["metadata"]["annotations"] =
            json!({"probelint.io/model-load-seconds": "600"});
        for c in large["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("containers")
        {
            c["livenessProbe"] = json!({"httpGet": {"path": "/health", "port": 8000}});
        }
        let got = admitted(cluster, &mutated, &large).expect("admitted");
        let written = pod_containers(&got)
            .iter()
            .filter(|c| c.get("startupProbe").is_some())
            .count();
        let size = guard_size(&large);
        eprintln!(
            "mutating: 16 containers × {args} arguments ({size} characters; the guard allows {}): {written} of 16 startupProbes written",
            export::guard_chars()
        );
        assert!(
            written == 16 || (written == 0 && size > export::guard_chars()),
            "16 × {args}: {written} of 16 written"
        );
    }
    eprintln!(
        "fixtures, examples, corpus and the cases above: the mutating policies write {written} of the engine's {fixed} startupProbe fixes on {judged} objects the apiserver admits, and nothing else"
    );
    assert!(written >= mutable().len(), "{written} of {fixed}");

    cluster.kubectl_ok(&[
        "delete",
        "mutatingadmissionpolicies,mutatingadmissionpolicybindings",
        "-l",
        "app.kubernetes.io/managed-by=probelint",
    ]);
}

/// The exported policies, evaluated by the `cel` crate as the apiserver evaluates them: the
/// match condition, then the variables in order (each sees the ones before it as `variables`),
/// then the validation. What the apiserver adds around them (the kinds and namespaces matched,
/// the cost budget) is not modelled: the kinds are [`matched`]'s, and the cost is tier 2's.
mod cel_eval {
    use super::Verdict;
    use probelint_policies::Severity;
    use serde_json::{Value, json};
    use std::collections::BTreeSet;
    use std::sync::Arc;

    struct Policy {
        name: String,
        /// None for the guard, which judges no rule.
        rule: Option<String>,
        severity: Severity,
        condition: cel::Program,
        variables: Vec<(String, cel::Program)>,
        validation: cel::Program,
        message: cel::Program,
    }

    pub struct Policies {
        env: Arc<cel::Env>,
        policies: Vec<Policy>,
    }

    /// The apiserver's CEL environment, as far as the exported expressions use it: the
    /// standard library, optional values and the strings extension (`join`, `lowerAscii`,
    /// `split`, `trim`).
    fn env() -> cel::Env {
        let mut env = cel::Env::stdlib();
        cel::extensions::strings(&mut env).expect("the strings extension");
        env
    }

    fn compile(env: &cel::Env, at: &str, source: &str) -> cel::Program {
        env.compile(source)
            .unwrap_or_else(|e| panic!("{at}: the cel crate cannot parse it: {e:?}\n{source}"))
    }

    impl Policies {
        /// Compiles every ValidatingAdmissionPolicy of `probelint export`'s output. A parse
        /// error is a failure: the apiserver would refuse the policy.
        pub fn compile(yaml: &str) -> Policies {
            let env = env();
            let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("export YAML");
            let policies = docs
                .iter()
                .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
                .map(|d| {
                    let name = d["metadata"]["name"].as_str().expect("name").to_owned();
                    let spec = &d["spec"];
                    let conditions = spec["matchConditions"].as_array().expect("conditions");
                    assert_eq!(conditions.len(), 1, "{name}");
                    let validations = spec["validations"].as_array().expect("validations");
                    assert_eq!(validations.len(), 1, "{name}");
                    let text = |v: &Value| v.as_str().expect("an expression").to_owned();
                    let annotations = &d["metadata"]["annotations"];
                    Policy {
                        rule: annotations["probelint.io/rule"].as_str().map(str::to_owned),
                        severity: match annotations["probelint.io/severity"].as_str() {
                            Some("error") => Severity::Error,
                            Some("warning") | None => Severity::Warning,
                            other => panic!("{name}: severity {other:?}"),
                        },
                        condition: compile(&env, &name, &text(&conditions[0]["expression"])),
                        variables: spec["variables"]
                            .as_array()
                            .expect("variables")
                            .iter()
                            .map(|v| {
                                let var = text(&v["name"]);
                                let at = format!("{name} variables.{var}");
                                let program = compile(&env, &at, &text(&v["expression"]));
                                (var, program)
                            })
                            .collect(),
                        validation: compile(&env, &name, &text(&validations[0]["expression"])),
                        message: compile(&env, &name, &text(&validations[0]["messageExpression"])),
                        name,
                    }
                })
                .collect();
            Policies {
                env: Arc::new(env),
                policies,
            }
        }

        /// The verdicts on `object` sent by `username`, or why an expression could not be
        /// evaluated (the apiserver then admits it: `failurePolicy: Ignore`).
        pub fn verdicts(
            &self,
            object: &Value,
            username: &str,
        ) -> Result<BTreeSet<Verdict>, String> {
            let mut got = BTreeSet::new();
            for policy in &self.policies {
                let Some(rule) = &policy.rule else { continue };
                let Some((variables, message)) = policy.evaluate(&self.env, object, username)?
                else {
                    continue;
                };
                let prefix = format!("probelint {rule}: container ");
                assert!(message.starts_with(&prefix), "{}: {message}", policy.name);
                let failing = variables["failing"].as_array().cloned().unwrap_or_default();
                assert!(
                    !failing.is_empty(),
                    "{}: a denial with no container",
                    policy.name
                );
                for c in failing {
                    let name = c["name"].as_str().unwrap_or_default().to_owned();
                    assert!(message.contains(&format!("container {name}")), "{message}");
                    got.insert((rule.clone(), policy.severity, name));
                }
            }
            Ok(got)
        }

        /// The guard's count of `object`'s characters, and its message where it warns.
        pub fn guard(&self, object: &Value) -> Result<(u64, Option<String>), String> {
            let guard = self
                .policies
                .iter()
                .find(|p| p.rule.is_none())
                .expect("the guard policy");
            let (variables, message) =
                guard.variables_and_message(&self.env, object, super::PERSON)?;
            Ok((variables["size"].as_u64().expect("a size"), message))
        }
    }

    type Variables = serde_json::Map<String, Value>;

    impl Policy {
        /// Where the validation fails: the variables and the message.
        fn evaluate(
            &self,
            env: &Arc<cel::Env>,
            object: &Value,
            username: &str,
        ) -> Result<Option<(Variables, String)>, String> {
            let (variables, message) = self.variables_and_message(env, object, username)?;
            Ok(message.map(|m| (variables, m)))
        }

        /// The variables (none where the match condition excludes the object), and the message
        /// where the validation fails.
        fn variables_and_message(
            &self,
            env: &Arc<cel::Env>,
            object: &Value,
            username: &str,
        ) -> Result<(Variables, Option<String>), String> {
            let request = json!({"userInfo": {"username": username}});
            let run = |program: &cel::Program, variables: &Variables| {
                let mut ctx = cel::Context::with_env(Arc::clone(env));
                ctx.add_variable_from_value("object", cel::to_value(object).expect("object"));
                ctx.add_variable_from_value("request", cel::to_value(&request).expect("request"));
                ctx.add_variable_from_value(
                    "variables",
                    cel::to_value(Value::Object(variables.clone())).expect("variables"),
                );
                let value = program
                    .execute(&ctx)
                    .map_err(|e| format!("{}: {e:?}", self.name))?;
                value.json().map_err(|e| format!("{}: {e:?}", self.name))
            };
            let mut variables = Variables::new();
            if run(&self.condition, &variables)? != json!(true) {
                return Ok((variables, None));
            }
            // In order, each seeing the ones before. The apiserver evaluates them lazily: eagerly
            // differs only where a variable the validation does not read fails, which is then
            // an error here.
            for (name, program) in &self.variables {
                let value = run(program, &variables)?;
                variables.insert(name.clone(), value);
            }
            match run(&self.validation, &variables)? {
                Value::Bool(true) => Ok((variables, None)),
                Value::Bool(false) => {
                    let message = run(&self.message, &variables)?;
                    let message = message.as_str().unwrap_or_default().to_owned();
                    Ok((variables, Some(message)))
                }
                other => Err(format!("{}: validation gave {other}", self.name)),
            }
        }
    }
}

/// Every object of a kind the policies match in the examples and the real corpus, with its
/// file, and how many files could not be parsed as YAML (templates).
fn examples_and_corpus() -> (Vec<(String, Value)>, usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    let mut stack = vec![root.join("examples"), probelint_testkit::corpus::real_dir()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a corpus directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                files.push(path);
            }
        }
    }
    files.sort();
    let (mut out, mut unparsed) = (Vec::new(), 0);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let Ok(docs) = serde_saphyr::from_multiple::<Value>(&text) else {
            unparsed += 1;
            continue;
        };
        let at = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        out.extend(
            docs.into_iter()
                .filter(matched)
                .map(|d| (at.clone(), without_namespace(d))),
        );
    }
    (out, unparsed)
}

/// What a person sends: no controller's username.
const PERSON: &str = "kubernetes-admin";

#[test]
fn evaluated_by_cel_the_policies_say_exactly_what_the_engine_says_where_cel_can_decide() {
    let policy = Policy::builtin().expect("built-in policy");
    let policies = cel_eval::Policies::compile(&export("warn"));
    for (what, object) in decidable() {
        let got = policies
            .verdicts(&object, PERSON)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got, engine(&object, &policy), "{what}");
    }
    // Many containers with long command lines are judged as the engine judges them (the cost
    // is tier 2's to measure).
    let large = large_deployment(16, 40);
    let got = policies.verdicts(&large, PERSON).expect("large");
    assert_eq!(got, engine(&large, &policy));
    assert_eq!(got.len(), 32);
}

#[test]
fn evaluated_by_cel_the_policies_leave_a_controllers_pods_to_its_controller() {
    let policies = cel_eval::Policies::compile(&export("warn"));
    let mut pod = decidable()
        .into_iter()
        .find(|(what, _)| what.starts_with("a bare Pod"))
        .expect("a bare Pod")
        .1;
    assert!(!policies.verdicts(&pod, PERSON).expect("pod").is_empty());
    pod["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": true,
    }]);
    let controller = "system:serviceaccount:kube-system:replicaset-controller";
    assert!(policies.verdicts(&pod, controller).expect("pod").is_empty());
    // An ownerReference alone claims nothing.
    assert!(!policies.verdicts(&pod, PERSON).expect("pod").is_empty());
}

#[test]
fn evaluated_by_cel_the_policies_never_say_more_than_the_engine_on_fixtures_examples_and_corpus() {
    let policy = Policy::builtin().expect("built-in policy");
    let policies = cel_eval::Policies::compile(&export("warn"));
    let (corpus, unparsed) = examples_and_corpus();
    let mut objects: Vec<(String, Value)> = fixtures()
        .into_iter()
        .map(|(f, o)| (f, without_namespace(o)))
        .collect();
    let fixture_count = objects.len();
    objects.extend(corpus);
    let (mut findings, mut caught, mut errors) = ([0; 2], [0; 2], Vec::new());
    let mut by_rule: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for (i, (file, object)) in objects.iter().enumerate() {
        let set = usize::from(i >= fixture_count);
        let want = engine(object, &policy);
        let got = match policies.verdicts(object, PERSON) {
            Ok(got) => got,
            Err(e) => {
                errors.push(format!("{file}: {e}"));
                continue;
            }
        };
        for (rule, severity, container) in &got {
            let same = want.contains(&(rule.clone(), *severity, container.clone()));
            let weaker = *severity == Severity::Warning
                && want.contains(&(rule.clone(), Severity::Error, container.clone()));
            assert!(
                same || weaker,
                "{file}: the policies say {rule} {severity:?} on {container}; the engine: {want:?}"
            );
        }
        findings[set] += want.len();
        for (rule, _, container) in &want {
            let hit = got.iter().any(|(r, _, c)| r == rule && c == container);
            let entry = by_rule.entry(rule.clone()).or_default();
            entry.0 += 1;
            entry.1 += usize::from(hit);
            caught[set] += usize::from(hit);
        }
    }
    for (rule, (all, hit)) in &by_rule {
        eprintln!("cel: {rule}: the policies report {hit} of the engine's {all} findings");
    }
    assert!(
        errors.is_empty(),
        "expressions that could not be evaluated:\n{}",
        errors.join("\n")
    );
    eprintln!(
        "cel: the policies report {} of the engine's {} findings of the exported rules on {fixture_count} fixture objects, \
         {} of {} on {} example and corpus objects ({unparsed} files not YAML)",
        caught[0],
        findings[0],
        caught[1],
        findings[1],
        objects.len() - fixture_count
    );
    assert!(
        caught[0] > 0 && caught[1] > 0,
        "the policies catch nothing: {caught:?}"
    );
}

#[test]
fn evaluated_by_cel_the_guard_counts_what_the_cost_arithmetic_counts_and_warns_past_its_limit() {
    let policies = cel_eval::Policies::compile(&export("warn"));
    for args in [0, 40, 640] {
        let large = large_deployment(16, args);
        let (size, message) = policies.guard(&large).expect("guard");
        assert_eq!(size, guard_size(&large), "16 × {args}");
        assert_eq!(
            message.is_some(),
            size > export::guard_chars(),
            "16 × {args}"
        );
        if let Some(message) = message {
            assert!(
                message.starts_with(&format!("probelint: 16 containers whose images and command lines count {size} characters, more than the {}", export::guard_chars())),
                "{message}"
            );
        }
    }
}
