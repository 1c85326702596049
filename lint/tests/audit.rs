//! `probelint audit` against a real kube-apiserver (`tests/cluster`: etcd, kube-apiserver and
//! kube-controller-manager, RBAC on), as a platform team meets it: the real binary, a real
//! kubeconfig, real TLS and client certificates.
//!
//! There is no kubelet in this cluster, so what the kubelet would write is written the way the
//! kubelet writes it, through the API: pod status (restart counts, last termination, running
//! since, the Ready condition) through the pods' `status` subresource, and the kubelet's
//! `Unhealthy` and `Killing` Events as core/v1 Events naming the pod and container (reason,
//! message and `count` as `pkg/kubelet/prober` and `kuberuntime` record them). The controller
//! manager is real: Deployments make ReplicaSets make Pods, with owner references.

mod audit_support;

use audit_support::{GPU_IMAGE, liveness_only, probelint, text, wait_with_peak_kib};
use probelint_cluster::{Cluster, wait_for};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn audit(kubeconfig: &Path, args: &[&str]) -> Output {
    probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run probelint")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

fn apply(cluster: &Cluster, ns: &str, object: &Value) {
    let out = cluster.apply(&object.to_string(), &["-n", ns]);
    assert!(out.status.success(), "kubectl apply: {}", text(&out));
}

fn pods_of(cluster: &Cluster, ns: &str, app: &str, count: usize) -> Vec<Value> {
    wait_for(
        &format!("{count} pods of {app} in {ns}"),
        Duration::from_secs(60),
        || {
            let pods = cluster.get_json(&["-n", ns, "get", "pods", "-l", &format!("app={app}")]);
            let items = pods["items"].as_array().cloned().unwrap_or_default();
            (items.len() == count).then_some(items)
        },
    )
}

/// Writes a pod's status as the kubelet would after `restarts` liveness kills: running since
/// `started`, Ready at `ready` (when given), the last run killed with exit code 137.
fn write_pod_status(
    cluster: &Cluster,
    ns: &str,
    pod: &str,
    restarts: u32,
    started: &str,
    ready: Option<&str>,
) {
    let mut conditions = vec![json!({
        "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-30T09:59:00Z",
    })];
    conditions.push(match ready {
        Some(at) => json!({"type": "Ready", "status": "True", "lastTransitionTime": at}),
        None => json!({
            "type": "Ready", "status": "False", "lastTransitionTime": started,
            "reason": "ContainersNotReady",
        }),
    });
    let last_state = if restarts > 0 {
        json!({"terminated": {
            "exitCode": 137, "reason": "Error",
            "startedAt": "2026-11-30T09:55:00Z", "finishedAt": "2026-11-30T09:59:50Z",
        }})
    } else {
        json!({})
    };
    let status = json!({"status": {
        "phase": "Running",
        "conditions": conditions,
        "containerStatuses": [{
            "name": "vllm", "image": GPU_IMAGE, "imageID": "", "ready": ready.is_some(),
            "restartCount": restarts,
            "started": true,
            "state": {"running": {"startedAt": started}},
            "lastState": last_state,
        }],
    }});
    cluster.kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "pod",
        pod,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

/// A core/v1 Event about one container of a pod, as the kubelet records it.
fn kubelet_event(
    cluster: &Cluster,
    ns: &str,
    pod: &Value,
    reason: &str,
    message: &str,
    count: u32,
) {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{}", reason.to_lowercase()), "namespace": ns},
        "involvedObject": {
            "apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
            "uid": pod["metadata"]["uid"], "fieldPath": "spec.containers{vllm}",
        },
        "reason": reason, "message": message, "count": count,
        "type": if reason == "Unhealthy" { "Warning" } else { "Normal" },
        "source": {"component": "kubelet", "host": "gpu-node-1"},
        "firstTimestamp": "2026-11-30T08:00:00Z", "lastTimestamp": "2026-11-30T09:59:40Z",
    });
    let out = cluster.apply(&event.to_string(), &["-n", ns]);
    assert!(out.status.success(), "create Event: {}", text(&out));
}

/// A core/v1 Event about `pod` as its recorder writes it, with its own times (the scheduler's
/// name no container; the kubelet's name one).
#[allow(clippy::too_many_arguments)]
fn pod_event(
    cluster: &Cluster,
    ns: &str,
    pod: &Value,
    reason: &str,
    message: &str,
    count: u32,
    (first, last): (&str, &str),
    container: Option<&str>,
) {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let mut involved = json!({
        "apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
        "uid": pod["metadata"]["uid"],
    });
    let source = match container {
        Some(c) => {
            involved["fieldPath"] = json!(format!("spec.containers{{{c}}}"));
            json!({"component": "kubelet", "host": "gpu-node-1"})
        }
        None => json!({"component": "default-scheduler"}),
    };
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{}", reason.to_lowercase()), "namespace": ns},
        "involvedObject": involved,
        "reason": reason, "message": message, "count": count,
        "type": if reason == "FailedScheduling" { "Warning" } else { "Normal" },
        "source": source, "firstTimestamp": first, "lastTimestamp": last,
    });
    let out = cluster.apply(&event.to_string(), &["-n", ns]);
    assert!(out.status.success(), "create Event: {}", text(&out));
}

const LIVENESS_FAILED: &str = "Liveness probe failed: Get \"http://10.244.1.7:8000/health\": dial tcp 10.244.1.7:8000: connect: connection refused";

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn findings_come_with_the_restarts_and_probe_failures_the_pods_already_show() {
    let cluster = probelint_cluster::shared("audit_evidence");
    let ns = cluster.namespace("audit-evidence");
    apply(cluster, &ns, &liveness_only("llm", 1));
    // Two replicas covered by a PDB, and an HPA on the first one: the cross-object rules see
    // the cluster's HPAs and PDBs of the namespace.
    apply(cluster, &ns, &liveness_only("covered", 2));
    apply(
        cluster,
        &ns,
        &json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "covered"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "covered"}}},
        }),
    );
    apply(
        cluster,
        &ns,
        &json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "llm"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
                "minReplicas": 1, "maxReplicas": 4,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}],
            },
        }),
    );
    let pod = pods_of(cluster, &ns, "llm", 1).remove(0);
    let pod_name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    // 14 kills by the liveness probe while loading; up now, Ready 312 s after its last start.
    write_pod_status(
        cluster,
        &ns,
        &pod_name,
        14,
        "2026-11-30T10:00:00Z",
        Some("2026-11-30T10:05:12Z"),
    );
    kubelet_event(cluster, &ns, &pod, "Unhealthy", LIVENESS_FAILED, 42);
    kubelet_event(
        cluster,
        &ns,
        &pod,
        "Killing",
        "Container vllm failed liveness probe, will be restarted",
        14,
    );
    // The covered Deployment's pods are still loading; one was killed three times, and no
    // Event is left to say by whom.
    let mut covered_pods: Vec<String> = pods_of(cluster, &ns, "covered", 2)
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    covered_pods.sort();
    write_pod_status(
        cluster,
        &ns,
        &covered_pods[0],
        3,
        "2026-11-30T10:00:00Z",
        None,
    );
    write_pod_status(
        cluster,
        &ns,
        &covered_pods[1],
        0,
        "2026-11-30T10:00:00Z",
        None,
    );
    // A port-open readiness probe on llama.cpp, which listens while it loads: Ready 4 s after
    // start, long before its 70B model (22 s at the fastest) could load.
    let mut eager = liveness_only("eager", 1);
    let server = &mut eager["spec"]["template"]["spec"]["containers"][0];
    server["image"] = json!("ghcr.io/ggml-org/llama.cpp:server-cuda");
    server["args"] = json!([
        "-m",
        "/models/Llama-3.1-70B-Instruct-Q4_K_M.gguf",
        "--port",
        "8000"
    ]);
    server["readinessProbe"] = json!({"tcpSocket": {"port": 8000}});
    apply(cluster, &ns, &eager);
    let eager_pod = pods_of(cluster, &ns, "eager", 1)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    write_pod_status(
        cluster,
        &ns,
        &eager_pod,
        0,
        "2026-11-30T10:00:00Z",
        Some("2026-11-30T10:00:04Z"),
    );

    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = json_of(&out);
    let findings = report["findings"].as_array().unwrap();
    let find = |rule: &str, coordinates: &str| {
        findings
            .iter()
            .find(|f| f["rule"] == rule && f["coordinates"] == coordinates)
            .unwrap_or_else(|| panic!("no {rule} on {coordinates} in {findings:#?}"))
    };
    let llm = format!("Deployment/{ns}/llm");
    let startup = find("gpu-startup-probe-missing", &llm);
    assert_eq!(startup["container"], "vllm");
    assert_eq!(startup["object"]["kind"], "Deployment");
    assert_eq!(startup["evidence"]["status"], "observed");
    assert_eq!(
        startup["evidence"]["observed"],
        format!(
            "14 restarts by the liveness probe; 42 liveness probe failures (latest: {LIVENESS_FAILED:?})"
        )
    );
    // The same finding where the kills left no Event: possibly borne out, and why only that.
    let covered = format!("Deployment/{ns}/covered");
    let possible = find("gpu-startup-probe-missing", &covered);
    assert_eq!(possible["evidence"]["status"], "possible", "{possible:#}");
    assert_eq!(
        possible["evidence"]["observed"],
        format!(
            "3 restarts, the last one killed (exit code 137, pod {}); no kubelet Event is left to say whether a probe did it",
            covered_pods[0]
        )
    );
    // Readiness that passed 4 s after start, while the model loaded (the fast end of its load).
    let eager_coordinates = format!("Deployment/{ns}/eager");
    let early = find("readiness-port-open", &eager_coordinates);
    assert_eq!(
        early["evidence"]["observed"],
        format!(
            "pod {eager_pod} was Ready 4 s after its container started, before the 22 s its model takes to load at the fastest"
        ),
        "{early:#}"
    );
    // Nothing to see yet: llm's readiness is missing, but its pod was Ready only after 312 s.
    assert_eq!(
        find("gpu-readiness-probe-missing", &llm)["evidence"]["status"],
        "not-yet"
    );
    // Cross-object rules with the cluster's objects: the CPU HPA on the GPU Deployment fires;
    // the PDB covers `covered`, so only... nothing on it; `llm` has one replica.
    find(
        "hpa-cpu-metric-on-gpu-workload",
        &format!("HorizontalPodAutoscaler/{ns}/llm"),
    );
    assert!(
        !findings
            .iter()
            .any(|f| f["rule"] == "gpu-serving-without-pdb"),
        "{findings:#?}"
    );
    // The ReplicaSets and Pods are judged through their Deployment, never on their own.
    assert!(
        findings.iter().all(|f| {
            let kind = f["object"]["kind"].as_str().unwrap();
            kind != "ReplicaSet" && kind != "Pod"
        }),
        "{findings:#?}"
    );

    // The ranking: the Deployment the probes restarted first, with its evidence.
    let workloads = report["workloads"].as_array().unwrap();
    let first = &workloads[0];
    assert_eq!(first["coordinates"], llm, "{workloads:#?}");
    assert_eq!(first["pods"], 1);
    assert_eq!(first["restarts"], 14);
    assert_eq!(first["probeRestarts"], 14);
    let vllm = &first["containers"]["vllm"];
    assert_eq!(vllm["lastTermination"]["reason"], "Error");
    assert_eq!(vllm["lastTermination"]["exitCode"], 137);
    assert_eq!(vllm["lastTermination"]["pod"], pod_name.as_str());
    assert_eq!(vllm["unhealthy"]["liveness"]["count"], 42);
    assert_eq!(
        vllm["unhealthy"]["liveness"]["latestMessage"],
        LIVENESS_FAILED
    );
    assert_eq!(vllm["probeKills"]["liveness"], 14);
    assert_eq!(
        first["startToReady"],
        json!([{"pod": pod_name, "seconds": 312.0}])
    );
    let second = &workloads[1];
    assert_eq!(second["coordinates"], covered);
    assert_eq!(second["pods"], 2);
    assert_eq!(second["restarts"], 3);
    assert_eq!(second["probeRestarts"], 0);
    assert_eq!(second["startToReady"][0]["seconds"], Value::Null);
    assert_eq!(workloads[2]["coordinates"], eager_coordinates);

    // What a person reads: the finding, the evidence under it, the ranked summary.
    let out = audit(&cluster.kubeconfig, &["-n", &ns]);
    let human = String::from_utf8_lossy(&out.stdout);
    for expected in [
        &format!("  --> {llm} container \"vllm\" at /spec/template/spec/containers/0"),
        "  = observed: 14 restarts by the liveness probe; 42 liveness probe failures",
        "  = possibly observed: 3 restarts, the last one killed (exit code 137",
        "  = not observed yet: its pods show nothing this explains",
        "Workloads by GPU time lost to probe kills, then restarts caused by probes:",
        &format!("  1. {llm}: 1 pod, 14 restarts, 14 by probes;"),
        "       container vllm: 14 restarts; last terminated Error (exit code 137)",
        &format!("       pod {pod_name}: Ready 312 s after start"),
        // 14 kills × the last killed run (09:55:00 → 09:59:50) × 1 GPU.
        "       cost: 4060 GPU-s lost to 14 probe kills (1.13 GPU-hours)",
        &format!(
            "         pod {pod_name} container vllm: 14 probe kills (Killing Events) × 290 s a run"
        ),
        &format!("  2. {covered}: 2 pods, 3 restarts;"),
        &format!("  3. {eager_coordinates}: 1 pod, 0 restarts;"),
    ] {
        assert!(
            human.contains(expected),
            "missing {expected:?} in:\n{human}"
        );
    }
    // The most-hurt workload's findings come first.
    let first_finding = human.find("  --> ").unwrap();
    assert!(
        human[first_finding..].starts_with(&format!("  --> {llm}")),
        "{human}"
    );

    // SARIF names the object and container by cluster coordinates, with the evidence.
    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--format", "sarif"]);
    let sarif = json_of(&out);
    let result = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["ruleId"] == "gpu-startup-probe-missing"
                && r["properties"]["coordinates"] == llm.as_str()
        })
        .unwrap_or_else(|| panic!("{sarif:#}"));
    assert_eq!(
        result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
        format!("{llm}/vllm")
    );
    // A warning in the engine's judgement (no model named: its 30 s liveness outlasts vLLM's
    // own start, and no number says the load does), which the pods' restarts then confirm.
    assert_eq!(result["level"], "warning");
    assert_eq!(result["properties"]["evidence"]["status"], "observed");
    assert!(
        result["message"]["text"]
            .as_str()
            .unwrap()
            .contains("(observed: 14 restarts by the liveness probe;"),
        "{result:#}"
    );
    // JUnit: one case per object; GitHub: one annotation per finding, named by coordinates.
    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--format", "junit"]);
    let junit = String::from_utf8_lossy(&out.stdout);
    assert!(
        junit.contains(&format!(
            "<testcase name=\"{llm}\" classname=\"probelint.audit\""
        )),
        "{junit}"
    );
    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--format", "github"]);
    let github = String::from_utf8_lossy(&out.stdout);
    assert!(
        github.lines().any(|l| l.starts_with(&format!(
            "::warning title=probelint gpu-startup-probe-missing::{llm} container \"vllm\": "
        )) && l.contains("%0Aobserved: 14 restarts by the liveness probe")),
        "{github}"
    );

    // The selector picks workloads by their labels (the Deployments' `team` label is not on
    // their pods): `app=covered` is on none of them, `team=llm` on all three.
    let selected = |selector: &str| -> Vec<String> {
        let out = audit(
            &cluster.kubeconfig,
            &["-n", &ns, "-l", selector, "--format", "json"],
        );
        let mut names: Vec<String> = json_of(&out)["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["coordinates"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        selected("team=llm"),
        [covered.clone(), eager_coordinates, llm.clone()]
    );
    assert_eq!(selected("team=web"), Vec::<String>::new());
    // The timeline of llm: what the scheduler, the kubelet and the pod's status wrote, one
    // axis from the first of them; the prediction for the stored Deployment beside it; the
    // picture; the cost in money.
    pod_event(
        cluster,
        &ns,
        &pod,
        "FailedScheduling",
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
        3,
        ("2026-11-30T07:58:00Z", "2026-11-30T07:59:30Z"),
        None,
    );
    pod_event(
        cluster,
        &ns,
        &pod,
        "Pulling",
        &format!("Pulling image \"{GPU_IMAGE}\""),
        1,
        ("2026-11-30T08:00:02Z", "2026-11-30T08:00:02Z"),
        Some("vllm"),
    );
    pod_event(
        cluster,
        &ns,
        &pod,
        "Pulled",
        &format!(
            "Successfully pulled image \"{GPU_IMAGE}\" in 1m30.2s (1m30.2s including waiting). Image size: 8123456789 bytes."
        ),
        1,
        ("2026-11-30T08:01:32Z", "2026-11-30T08:01:32Z"),
        Some("vllm"),
    );
    let dir = tempfile::tempdir().unwrap();
    let picture = dir.path().join("timeline.svg");
    let out = audit(
        &cluster.kubeconfig,
        &["-n", &ns, "--timeline", picture.to_str().unwrap()],
    );
    let human = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "       timeline: t = 0 at 2026-11-30T07:58:00Z, the earliest record of its pods",
        "2026-11-30T07:58:00Z  -         FailedScheduling: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "2026-11-30T08:00:02Z  vllm      Pulling: Pulling image",
        "2026-11-30T08:01:32Z  vllm      Pulled: Successfully pulled image",
        "2026-11-30T08:00:00Z  vllm      Killing: Container vllm failed liveness probe, will be restarted (first of 14",
        "2026-11-30T09:59:50Z  vllm      terminated: Error, exit code 137 (lastState.terminated)",
        "2026-11-30T10:05:12Z  -         Ready (the Ready condition's lastTransitionTime",
        "         incomplete: container vllm: restartCount 14; only the last termination is in the status",
        "       predicted by simulate, container vllm",
    ] {
        assert!(
            human.contains(expected),
            "missing {expected:?} in:\n{human}"
        );
    }
    let svg = std::fs::read_to_string(&picture).expect("the picture is written");
    let mut reader = quick_xml::Reader::from_str(&svg);
    // One block per ranked workload (its title), a row per pod, a predicted row per GPU
    // container: llm's pod once, and the three Deployments' predictions.
    let mut texts: Vec<String> = Vec::new();
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Text(t)) => {
                texts.push(String::from_utf8_lossy(&t.into_inner()).trim().to_owned());
            }
            Ok(_) => {}
            Err(e) => panic!("the picture is not well-formed XML: {e}"),
        }
    }
    let count = |label: &str| texts.iter().filter(|t| *t == label).count();
    assert_eq!(count(&format!("pod {pod_name}")), 1, "{texts:?}");
    assert_eq!(count("predicted: vllm"), 3, "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t == &format!("{llm} (t = 0 at 2026-11-30T07:58:00Z)")),
        "{texts:?}"
    );
    let out = audit(
        &cluster.kubeconfig,
        &[
            "-n",
            &ns,
            "--format",
            "json",
            "--timeline",
            "--gpu-hour-cost",
            "2.5",
        ],
    );
    let report = json_of(&out);
    assert_eq!(report["gpuHourCost"], 2.5);
    let first = &report["workloads"][0];
    assert_eq!(first["coordinates"], llm);
    assert_eq!(first["cost"]["gpuSecondsLost"], 4060.0);
    assert_eq!(first["cost"]["probeKills"], 14);
    assert_eq!(first["cost"]["money"], 4060.0 / 3600.0 * 2.5);
    let row = &first["timeline"]["rows"][0];
    assert_eq!(row["pod"], pod_name.as_str());
    let kinds: Vec<&str> = row["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    for kind in [
        "waiting-to-schedule",
        "pulling",
        "pulled",
        "probe-kill",
        "terminated",
        "ready",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    assert_eq!(first["timeline"]["predictions"][0]["container"], "vllm");
    let out = audit(
        &cluster.kubeconfig,
        &["-n", &ns, "--format", "sarif", "--gpu-hour-cost", "2.5"],
    );
    let sarif = json_of(&out);
    let result = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["properties"]["coordinates"] == llm.as_str())
        .unwrap_or_else(|| panic!("{sarif:#}"));
    assert_eq!(result["properties"]["cost"]["gpuSecondsLost"], 4060.0);

    // --fail-on: errors fail by default; the findings here are errors, warnings and infos.
    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--fail-on", "error"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// A kubeconfig for `user`, authenticated by a client certificate of the cluster's CA.
fn kubeconfig_for(cluster: &Cluster, user: &str) -> PathBuf {
    let leaf = cluster.ca.client(user, None);
    let dir = cluster.dir.join(format!("user-{user}"));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca = write("ca.crt", &cluster.ca.pem);
    let cert = write("client.crt", &leaf.cert_pem);
    let key = write("client.key", &leaf.key_pem);
    write(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: {user}\n  context:\n    cluster: test\n    user: {user}\ncurrent-context: {user}\n",
            cluster.server,
            ca.display(),
            cert.display(),
            key.display()
        ),
    )
}

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn a_kind_the_user_may_not_list_is_reported_and_the_rest_is_audited() {
    let cluster = probelint_cluster::shared("audit_rbac");
    let ns = cluster.namespace("audit-rbac");
    apply(cluster, &ns, &liveness_only("llm", 1));
    pods_of(cluster, &ns, "llm", 1);
    // Everything the README's ClusterRole grants, but Deployments.
    apply(
        cluster,
        &ns,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "auditor"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods", "events", "replicationcontrollers"], "verbs": ["list"]},
                {"apiGroups": ["apps"], "resources": ["statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
                {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ["list"]},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
            ],
        }),
    );
    apply(
        cluster,
        &ns,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "auditor"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "auditor"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "auditor"}],
        }),
    );
    let kubeconfig = kubeconfig_for(cluster, "auditor");
    let out = audit(&kubeconfig, &["-n", &ns, "--format", "json"]);
    // Incomplete: exit 2, the missing permission on stderr and in the report.
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let forbidden = format!(
        "probelint: error: cannot list deployments.apps: forbidden: deployments.apps is forbidden: User \"auditor\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"{ns}\""
    );
    assert!(stderr.contains(&forbidden), "{}", text(&out));
    let report = json_of(&out);
    // Other tests of this binary install CRDs the auditor may not list either; those are
    // reported the same way, and nothing it may list is.
    let errors: Vec<&Value> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["resource"].as_str().unwrap().ends_with(".x-k8s.io"))
        .collect();
    assert_eq!(
        errors,
        [&json!({
            "resource": "deployments.apps",
            "namespace": ns,
            "message": format!(
                "{} (the audit needs `list` on it; see the ClusterRole in the README)",
                forbidden.trim_start_matches("probelint: error: cannot list deployments.apps: ")
            ),
        })],
        "{report:#}"
    );
    // A person at a terminal reads it once, in the report, above the summary.
    let out = audit(&kubeconfig, &["-n", &ns]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains(&format!(
            "error: cannot list deployments.apps in namespace {ns}: forbidden: deployments.apps is forbidden: User \"auditor\""
        )) && human.contains("could not be listed"),
        "{}",
        text(&out)
    );
    assert!(out.stderr.is_empty(), "{}", text(&out));
    // What the user may list is audited: the Deployment's ReplicaSet, now the top object it
    // can see, carries the findings.
    let findings = report["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f["rule"] == "gpu-startup-probe-missing"
                && f["object"]["kind"] == "ReplicaSet"
                && f["coordinates"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("ReplicaSet/{ns}/llm-"))),
        "{findings:#?}"
    );
}

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn custom_resources_are_found_through_discovery_and_missing_kinds_are_skipped() {
    let cluster = probelint_cluster::shared("audit_crds");
    let crd = |group: &str, kind: &str, plural: &str| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group, "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}],
            },
        })
    };
    for (group, kind, plural) in [
        (
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            "leaderworkersets",
        ),
        ("models.example.com", "ModelServer", "modelservers"),
    ] {
        let out = cluster.apply(&crd(group, kind, plural).to_string(), &[]);
        assert!(out.status.success(), "{}", text(&out));
        cluster.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{plural}.{group}"),
        ]);
    }
    let ns = cluster.namespace("audit-crds");
    let container = json!({
        "name": "vllm", "image": GPU_IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": 1}},
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}},
    });
    let template = json!({"spec": {"containers": [container]}});
    let lws = json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama-405b"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {
            "size": 2, "leaderTemplate": template, "workerTemplate": template,
        }},
    });
    let model_server = json!({
        "apiVersion": "models.example.com/v1", "kind": "ModelServer",
        "metadata": {"name": "mixtral"},
        "spec": {"template": template},
    });
    // Applied when discovery has them: a new CRD's kind takes a moment to be served.
    for object in [&lws, &model_server] {
        wait_for(
            "the CRD's kind to be served",
            Duration::from_secs(30),
            || {
                cluster
                    .apply(&object.to_string(), &["-n", &ns])
                    .status
                    .success()
                    .then_some(())
            },
        );
    }
    let policy = cluster.dir.join("audit-crds-policy.yaml");
    std::fs::write(
        &policy,
        "workloads:\n  - kind: ModelServer\n    apiVersion: models.example.com\n    podSpecs: [/spec/template/spec]\n",
    )
    .unwrap();

    let out = audit(
        &cluster.kubeconfig,
        &[
            "-n",
            &ns,
            "--format",
            "json",
            "--config",
            policy.to_str().unwrap(),
        ],
    );
    let report = json_of(&out);
    let coordinates: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "gpu-startup-probe-missing")
        .map(|f| f["coordinates"].as_str().unwrap())
        .collect();
    assert!(
        coordinates.contains(&format!("LeaderWorkerSet/{ns}/llama-405b").as_str()),
        "{report:#}"
    );
    assert!(
        coordinates.contains(&format!("ModelServer/{ns}/mixtral").as_str()),
        "{report:#}"
    );
    // Without the policy's workload, the custom kind is not listed.
    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--format", "json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ModelServer/"));

    // --verbose says which serving kinds this cluster lacks.
    let out = audit(&cluster.kubeconfig, &["-n", &ns, "--verbose"]);
    let human = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "skipped: RayService (ray.io): this cluster does not serve it",
        "skipped: InferenceService (serving.kserve.io): this cluster does not serve it",
    ] {
        assert!(
            human.contains(expected),
            "missing {expected:?} in:\n{human}"
        );
    }
    assert!(!human.contains("skipped: LeaderWorkerSet"), "{human}");
    let out = audit(&cluster.kubeconfig, &["-n", &ns]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(!human.contains("skipped: RayService"), "{human}");
    assert!(human.contains("skipped (--verbose lists them)"), "{human}");
}

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn a_rejected_credential_stops_the_audit_and_says_what_to_do() {
    let cluster = probelint_cluster::shared("audit_credentials");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &cluster.ca.pem).unwrap();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: an-expired-token\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n",
            cluster.server,
            ca.display()
        ),
    )
    .unwrap();
    let out = audit(&kubeconfig, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "probelint: error: the cluster at {} rejected the credentials (401 Unauthorized",
            cluster.server
        )) && stderr.contains("refresh the kubeconfig"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty(), "{}", text(&out));
}

// The errors below need no cluster.

#[test]
fn an_unreachable_cluster_is_named_with_the_reason() {
    // A port nobody listens on: bound, then released.
    let port = probelint_testkit::net::free_port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: gpu-prod\n  context: {{cluster: c, user: u}}\ncurrent-context: gpu-prod\n"
        ),
    )
    .unwrap();
    let out = audit(&kubeconfig, &["--request-timeout", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "probelint: error: cannot reach the cluster at https://127.0.0.1:{port}: "
        )) && stderr.contains("Connection refused")
            && stderr.contains("kubectl cluster-info"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_broken_or_missing_kubeconfig_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("kubeconfig");
    std::fs::write(&broken, "clusters: [this is: not a kubeconfig").unwrap();
    let out = audit(&broken, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "probelint: error: cannot read kubeconfig {}: ",
            broken.display()
        )),
        "{}",
        text(&out)
    );

    // An unknown context.
    std::fs::write(
        &broken,
        "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n",
    )
    .unwrap();
    let out = audit(&broken, &["--context", "gpu-prod"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("gpu-prod"),
        "{}",
        text(&out)
    );

    // No kubeconfig anywhere, and not in a pod.
    let out = probelint()
        .args(["audit"])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "probelint: error: no kubeconfig: --kubeconfig is not given, KUBECONFIG is not set"
        ),
        "{}",
        text(&out)
    );
}

/// The README's ClusterRole, as a user copies it.
fn readme_cluster_role() -> String {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("```yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n")
        .expect("the README shows the audit's ClusterRole");
    let body = &readme[start + "```yaml\n".len()..];
    body[..body.find("```").unwrap()].to_owned()
}

#[test]
fn the_chart_creates_the_readmes_cluster_role() {
    let role = readme_cluster_role();
    // The chart's ClusterRole (audit.clusterRole.create) has the README's rules, word for word.
    let chart = include_str!("../../charts/probelint/templates/clusterrole-audit.yaml");
    let rules = &role[role.find("rules:\n").unwrap()..];
    assert!(
        chart.contains(rules),
        "the chart's ClusterRole differs from the README's:\n{chart}"
    );
}

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn the_readmes_cluster_role_is_all_the_audit_needs() {
    let role = readme_cluster_role();
    let cluster = probelint_cluster::shared("audit_readme_role");
    let out = cluster.apply(&role, &[]);
    assert!(out.status.success(), "{}", text(&out));
    apply(
        cluster,
        "default",
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "probelint-audit-readme"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "probelint-audit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "readme-auditor"}],
        }),
    );
    let ns = cluster.namespace("audit-readme");
    apply(cluster, &ns, &liveness_only("llm", 1));
    pods_of(cluster, &ns, "llm", 1);
    let kubeconfig = kubeconfig_for(cluster, "readme-auditor");
    let out = audit(&kubeconfig, &["--all-namespaces", "--format", "json"]);
    let report = json_of(&out);
    assert_eq!(report["errors"], json!([]), "{}", text(&out));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["coordinates"] == format!("Deployment/{ns}/llm")),
        "{report:#}"
    );
}

/// Contexts, their namespaces and `KUBECONFIG` work as with kubectl.
#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn the_kubeconfig_is_read_as_kubectl_reads_it() {
    let cluster = probelint_cluster::shared("audit_contexts");
    let ns = cluster.namespace("audit-contexts");
    apply(cluster, &ns, &liveness_only("llm", 1));
    let down = probelint_testkit::net::free_port();
    let dir = tempfile::tempdir().unwrap();
    let admin = cluster.ca.client("contexts-admin", Some("system:masters"));
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (ca, cert, key) = (
        file("ca.crt", &cluster.ca.pem),
        file("admin.crt", &admin.cert_pem),
        file("admin.key", &admin.key_pem),
    );
    let kubeconfig = dir.path().join("config");
    // The current context is a cluster that is down; `real` is this one, with a namespace.
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster: {{server: \"https://127.0.0.1:{down}\", insecure-skip-tls-verify: true}}\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: down\n  context: {{cluster: down, user: admin}}\n- name: real\n  context: {{cluster: real, user: admin, namespace: {ns}}}\ncurrent-context: down\n",
            cluster.server,
            ca.display(),
            cert.display(),
            key.display(),
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        probelint()
            .arg("audit")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap()
    };
    let out = run(&["--request-timeout", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "cannot reach the cluster at https://127.0.0.1:{down}"
        )),
        "{}",
        text(&out)
    );
    // --context picks the cluster, and its namespace is the default scope.
    let out = run(&["--context", "real", "--format", "json"]);
    let report = json_of(&out);
    assert_eq!(report["cluster"]["context"], "real", "{report:#}");
    assert_eq!(report["cluster"]["server"], cluster.server);
    // The rules judge by the version the cluster runs.
    assert_eq!(report["cluster"]["version"], cluster.version.as_str());
    assert_eq!(report["cluster"]["namespace"], ns.as_str());
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["coordinates"] == format!("Deployment/{ns}/llm")),
        "{report:#}"
    );
    // -n overrides the context's namespace.
    let out = run(&["--context", "real", "-n", "kube-public", "--format", "json"]);
    let report = json_of(&out);
    assert_eq!(report["cluster"]["namespace"], "kube-public");
    assert_eq!(report["findings"], json!([]), "{report:#}");
}

/// A server that accepts connections and never answers (a wedged apiserver, a black-holing
/// proxy): the audit gives up after --request-timeout and says so, instead of hanging.
#[test]
fn a_cluster_that_never_answers_is_given_up_on() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let mut child = probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Not a timing assertion: a guard so that a hang fails the test instead of the suite.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("probelint audit still waits on a server that never answers");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "probelint: error: cannot reach the cluster at https://127.0.0.1:{port}: no answer within --request-timeout"
        )),
        "{}",
        text(&out)
    );
}

/// What the hostile apiserver answers a list request for `path` with.
fn hostile_answer(path: &str, stream: &mut std::net::TcpStream) {
    use std::io::Write;
    let json = |stream: &mut std::net::TcpStream, code: &str, body: &str| {
        let _ = write!(
            stream,
            "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
    };
    let list = |kind: &str, token: &str| {
        format!(
            r#"{{"kind":"{kind}","apiVersion":"v1","metadata":{{"continue":"{token}"}},"items":[]}}"#
        )
    };
    let route = path.split('?').next().unwrap_or("");
    let page = path
        .split("continue=")
        .nth(1)
        .and_then(|t| t.split('&').next())
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(0);
    if route == "/api" {
        json(
            stream,
            "200 OK",
            r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}"#,
        );
    } else if route == "/apis" {
        json(
            stream,
            "200 OK",
            r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#,
        );
    } else if route == "/api/v1" {
        json(
            stream,
            "200 OK",
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[]}"#,
        );
    } else if route.ends_with("/deployments") {
        // The same continue token again and again: a list that would never end.
        json(stream, "200 OK", &list("DeploymentList", "again"));
    } else if route.ends_with("/replicasets") {
        // A new token every page, forever.
        json(
            stream,
            "200 OK",
            &list("ReplicaSetList", &(page + 1).to_string()),
        );
    } else if route.ends_with("/pods") {
        // A drip: a byte every 100 ms, never the whole answer.
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
        );
        while stream.write_all(b" ").is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    } else if route.ends_with("/events") {
        // An answer without end: `{"items":[` and then empty objects, as fast as it is read.
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        let head = r#"{"kind":"EventList","apiVersion":"v1","metadata":{},"items":["#;
        let _ = write!(stream, "{:x}\r\n{head}\r\n", head.len());
        let chunk = "{},".repeat(20_000);
        while write!(stream, "{:x}\r\n{chunk}\r\n", chunk.len()).is_ok() {}
    } else if route.starts_with("/api/v1/") || route.starts_with("/apis/") {
        json(stream, "200 OK", &list("List", ""));
    } else {
        json(
            stream,
            "404 Not Found",
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
        );
    }
}

/// An apiserver (or a proxy in front of one) that misbehaves in every way a list can: the same
/// continue token forever, a new one forever, an answer that drips a byte at a time, an answer
/// that never ends. The audit ends, reports each of those kinds with what went wrong, and
/// audits the rest; its memory stays bounded by the answer cap.
#[test]
fn an_apiserver_that_never_stops_talking_is_given_up_on_kind_by_kind() {
    let port = fake_apiserver(std::sync::Arc::new(hostile_answer));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake_kubeconfig(dir.path(), port);
    let mut child = probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout", "2", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Not a timing assertion: a guard so that a hang fails the test instead of the suite.
    let started = std::time::Instant::now();
    let deadline = started + Duration::from_secs(300);
    // The audit's peak memory, sampled while it runs: printed, a figure, not an assertion.
    let mut peak_kib = 0u64;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("probelint audit still listing from an apiserver that never stops");
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
        if let Some(kib) = status.ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        }) {
            peak_kib = peak_kib.max(kib);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "audit of a hostile apiserver ended after {:.1} s, peak RSS {} MiB (last sample)",
        started.elapsed().as_secs_f64(),
        peak_kib / 1024
    );
    let out = child.wait_with_output().unwrap();
    let report = json_of(&out);
    let errors = report["errors"].as_array().cloned().unwrap_or_default();
    let said = |resource: &str| -> String {
        errors
            .iter()
            .filter(|e| e["resource"] == resource)
            .map(|e| e["message"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
            .join(" | ")
    };
    for (resource, expected) in [
        ("deployments.apps", "sent a continue token already followed"),
        ("replicasets.apps", "more than 1000 pages of 500"),
        (
            "pods",
            "did not arrive whole within --request-timeout (2 s)",
        ),
        ("events", "length limit exceeded"),
    ] {
        assert!(
            said(resource).contains(expected),
            "{resource}: {:?}\n{}",
            said(resource),
            text(&out)
        );
    }
    // The kinds that answered are audited.
    assert!(said("statefulsets.apps").is_empty(), "{}", text(&out));
}

/// How a fake apiserver answers the request for a path, on its stream.
type Answer = dyn Fn(&str, &mut std::net::TcpStream) + Send + Sync;

/// An HTTP apiserver on a free local port whose every request is answered by `answer(path,
/// stream)`; aggregated discovery (kubectl's first question) is answered as not served, so
/// that clients fall back to the plain discovery documents.
fn fake_apiserver(answer: std::sync::Arc<Answer>) -> u16 {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let mut aggregated = false;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        aggregated |= header.to_ascii_lowercase().starts_with("accept:")
                            && header.contains("apidiscovery");
                        if header == "\r\n" {
                            break;
                        }
                    }
                    if aggregated {
                        hostile_answer("/not-served", &mut stream);
                    } else {
                        answer(&path, &mut stream);
                    }
                }
            });
        }
    });
    port
}

/// A kubeconfig in `dir` for the fake apiserver on `port`.
fn fake_kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u, namespace: default}}\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    kubeconfig
}

/// A GPU Deployment, its ReplicaSet and `pods` Pods of it as an apiserver sends them (managed
/// fields, status, a restart or two), served a page of 500 at a time: every other list is
/// empty.
fn deployment_of_pods(pods: usize) -> impl Fn(&str, &mut std::net::TcpStream) + Send + Sync {
    use std::io::Write;
    let mut deployment = liveness_only("llm", pods as u32);
    deployment["metadata"]["namespace"] = json!("default");
    deployment["metadata"]["uid"] = json!("d-uid");
    let template = deployment["spec"]["template"].clone();
    let replica_set = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "llm-1", "namespace": "default", "uid": "rs-uid",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "name": "llm", "uid": "d-uid", "controller": true}]},
        "spec": {"replicas": pods, "selector": deployment["spec"]["selector"].clone(),
                 "template": template.clone()},
    });
    let pod = move |i: usize| {
        let mut spec = template["spec"].clone();
        spec["nodeName"] = json!(format!("node-{}", i % 500));
        let container = &mut spec["containers"][0];
        container["env"] = json!((0..20)
            .map(|e| json!({"name": format!("SETTING_{e}"), "value": format!("value-{e}-of-pod-{i}")}))
            .collect::<Vec<_>>());
        let managed = json!([{"manager": "kube-controller-manager", "operation": "Update",
            "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"vllm\"}": (0..40)
                .map(|f| (format!("f:field{f}"), json!({})))
                .collect::<serde_json::Map<String, Value>>()}}}}]);
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("llm-1-{i:05}"), "namespace": "default",
                         "uid": format!("pod-{i}"), "labels": template["metadata"]["labels"].clone(),
                         "creationTimestamp": "2026-12-01T10:00:00Z",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "llm-1", "uid": "rs-uid", "controller": true}],
                         "managedFields": managed},
            "spec": spec,
            "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "10.1.0.1",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-12-01T10:05:00Z"}],
                       "containerStatuses": [{"name": "vllm", "ready": true, "restartCount": i % 3,
                           "image": "vllm/vllm-openai:v0.6.3", "imageID": "sha256:0123456789abcdef",
                           "containerID": format!("containerd://{i:064}"),
                           "state": {"running": {"startedAt": "2026-12-01T10:01:00Z"}}}]},
        })
    };
    move |path: &str, stream: &mut std::net::TcpStream| {
        let route = path.split('?').next().unwrap_or("");
        let body = |kind: &str, items: Vec<Value>, next: Option<usize>| {
            json!({"kind": kind, "apiVersion": "v1",
                   "metadata": {"continue": next.map(|n| n.to_string()).unwrap_or_default()},
                   "items": items})
            .to_string()
        };
        let text = if route.ends_with("/deployments") {
            body("DeploymentList", vec![deployment.clone()], None)
        } else if route.ends_with("/replicasets") {
            body("ReplicaSetList", vec![replica_set.clone()], None)
        } else if route.ends_with("/pods") {
            let from = path
                .split("continue=")
                .nth(1)
                .and_then(|t| t.split('&').next())
                .and_then(|t| t.parse::<usize>().ok())
                .unwrap_or(0);
            let to = (from + 500).min(pods);
            body(
                "PodList",
                (from..to).map(&pod).collect(),
                (to < pods).then_some(to),
            )
        } else if route.starts_with("/api/v1/") || route.starts_with("/apis/") {
            body("List", Vec::new(), None)
        } else {
            // Discovery, and 404 for the rest.
            return hostile_answer(path, stream);
        };
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
    }
}

/// `probelint audit` of the fake apiserver on `port`: its exit status, peak RSS in KiB (wait4:
/// this child's own) and report.
fn audit_peak_kib(port: u16, extra: &[&str]) -> (i32, u64, Value) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake_kubeconfig(dir.path(), port);
    let report_path = dir.path().join("audit.json");
    let child = probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--format", "json", "--output"])
        .arg(&report_path)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (code, peak_kib) = wait_with_peak_kib(child);
    let code = code.expect("the audit exited");
    let report = std::fs::read(&report_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    (code, peak_kib, report)
}

/// The audit keeps of each pod its controller owns only the evidence it reports (restarts,
/// terminations, readiness), not the pod: going from 2,000 pods to 20,000, its peak memory
/// grows by a small fraction of what the pods themselves take as the apiserver sends them
/// (~10 KB each here; ~44 KB on a real cluster with managed fields), and every pod's restarts
/// still count.
#[test]
fn audit_memory_grows_with_what_is_kept_not_with_the_pods_read() {
    let small = fake_apiserver(std::sync::Arc::new(deployment_of_pods(2_000)));
    let large = fake_apiserver(std::sync::Arc::new(deployment_of_pods(20_000)));
    let (code, small_kib, small_report) = audit_peak_kib(small, &[]);
    assert_eq!(code, 1, "{small_report:#}");
    let (code, large_kib, report) = audit_peak_kib(large, &[]);
    assert_eq!(code, 1, "{report:#}");
    // Every pod was read: the workload's restarts are the sum over its 20,000 pods (i % 3).
    let restarts: u64 = (0..20_000u64).map(|i| i % 3).sum();
    let workload = &report["workloads"][0];
    assert_eq!(workload["restarts"], restarts, "{workload:#}");
    let per_thousand_kib = (large_kib.saturating_sub(small_kib)) / 18;
    eprintln!(
        "audit peak RSS: 2,000 pods {} MiB, 20,000 pods {} MiB: {per_thousand_kib} KiB per \
         1,000 pods",
        small_kib / 1024,
        large_kib / 1024
    );
    // The pods themselves are ~10 MB per 1,000 as sent; what is kept is a few hundred KB.
    assert!(
        per_thousand_kib < 2 * 1024,
        "{per_thousand_kib} KiB per 1,000 pods (2,000 pods: {small_kib} KiB, 20,000: {large_kib} KiB)"
    );
    assert!(large_kib < 100 * 1024, "20,000 pods: {large_kib} KiB");
}

/// `--deadline` bounds the whole run: against an apiserver whose every page of pods drips
/// forever, the audit gives up at its deadline and says which limit ended it.
#[test]
fn the_whole_audit_ends_at_its_deadline() {
    let port = fake_apiserver(std::sync::Arc::new(hostile_answer));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake_kubeconfig(dir.path(), port);
    let out = probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout", "60", "--deadline", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the audit did not finish within --deadline (3 s, the whole run's limit)"),
        "{}",
        text(&out)
    );
    let out = probelint()
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--deadline", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--deadline must be at least 1 second"),
        "{}",
        text(&out)
    );
}
