//! `probelint simulate`: the kubelet model's figures on hand-checkable manifests, the rollout and
//! drain scenarios, the node and start-time options, and the SVG picture.

mod common;

use common::{array, json_stdout, probelint, write};
use serde_json::Value;

/// The README's first conformance scenario: liveness (initialDelay 10 s, period 10 s, 3
/// failures), no startupProbe, a 300 s load; four replicas rolled one at a time.
const STORM: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: reference
  annotations:
    probelint.io/model-load-seconds: \"300\"
spec:
  replicas: 4
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  selector:
    matchLabels: {app: reference}
  template:
    metadata:
      labels: {app: reference}
    spec:
      containers:
        - name: server
          image: ghcr.io/probelint/reference-server:latest
          ports:
            - name: http
              containerPort: 8080
          resources:
            limits:
              nvidia.com/gpu: 1
          livenessProbe:
            httpGet: {path: /livez, port: http}
            initialDelaySeconds: 10
          readinessProbe:
            httpGet: {path: /readyz, port: http}
";

/// STORM with a startup probe covering the load (30 × 10 s + margin).
fn covered() -> String {
    STORM.replace(
        "          livenessProbe:",
        "          startupProbe:\n            httpGet: {path: /livez, port: http}\n            failureThreshold: 36\n          livenessProbe:",
    )
}

fn simulate(dir: &std::path::Path, file: &str, args: &[&str]) -> Value {
    let out = probelint()
        .current_dir(dir)
        .args(["simulate", "--format", "json"])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_stdout(&out)["containers"][0].clone()
}

#[test]
fn restart_storm_counts_restarts_as_kubectl_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "storm.yaml", STORM);
    let c = simulate(
        dir.path(),
        "storm.yaml",
        &["--duration", "800", "--loading-server", "refuses"],
    );
    // The probes tick 0.5 s before each period of the container's life (the node's measured
    // lead), so the tick 9.5 s after a start is inside initialDelaySeconds: killed 39.5 s after
    // each start, restarted 0.5 s later. Restarts at once until the back-off (10, 20, 40, 80 s)
    // is longer than the 40 s since the previous instance finished: 40, 80, 120, 160, 200,
    // then 320 and 520; the next waits until 859.5.
    assert_eq!(c["restarts"], 7, "{c:#}");
    assert_eq!(
        c["object"]["kind"], "Deployment",
        "the object as findings name it"
    );
    assert_eq!(c["object"]["name"], "reference");
    assert_eq!(c["first_ready_seconds"], Value::Null);
    let waits: Vec<f64> = array(&c, "transitions")
        .iter()
        .filter(|t| t["event"].as_str().unwrap().starts_with("CrashLoopBackOff"))
        .map(|t| t["t"].as_f64().unwrap())
        .collect();
    assert_eq!(waits, [239.5, 359.5, 559.5]);
    let spread = &c["spread"];
    assert!(spread["restarts_min"].as_u64().unwrap() <= 7);
    assert!(spread["restarts_max"].as_u64().unwrap() >= 7);
    // Over every phase the first kill is the third counted tick: 30 to 40 s after the start,
    // or up to a second sooner where `startedAt`'s truncation to its second counts a tick
    // just before 10 s as past the delay.
    let earliest = spread["first_kill_earliest"].as_f64().unwrap();
    let latest = spread["first_kill_latest"].as_f64().unwrap();
    assert!(
        (29.0..=39.5).contains(&earliest) && (38.0..40.0).contains(&latest),
        "{spread:#}"
    );
    // probelint's mutation adds a startupProbe: no restart, Ready at the first startup tick
    // after the load (309.5 s: ticks fall 0.5 s before each period).
    assert_eq!(c["mutated"]["restarts"], 0);
    assert_eq!(c["mutated"]["first_ready_seconds"], 309.5);
    assert_eq!(c["kubelet"]["backoff"]["initial"], 10.0);
    assert_eq!(c["kubelet"]["loading_server"], "refuses");
}

#[test]
fn rollout_of_four_replicas_one_at_a_time_takes_four_loads() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "good.yaml", covered());
    let c = simulate(dir.path(), "good.yaml", &["--scenario", "rollout"]);
    let r = &c["rollout"];
    // One pod at a time, each Ready 309.5 s after its start (the first startup tick after the
    // 300 s load).
    assert_eq!(r["done_seconds"], 1238.0, "{r:#}");
    assert_eq!(r["lowest_serving"], 4);
    assert_eq!(r["progress_deadline_exceeded_seconds"], Value::Null);
    // The storm never gets a new pod Ready: the rollout stalls past its 600 s deadline.
    write(dir.path(), "storm.yaml", STORM);
    let c = simulate(dir.path(), "storm.yaml", &["--scenario", "rollout"]);
    assert_eq!(c["rollout"]["done_seconds"], Value::Null);
    assert_eq!(c["rollout"]["progress_deadline_exceeded_seconds"], 600.0);
    assert_eq!(c["mutated"]["rollout_or_drain"]["done_seconds"], 1238.0);
    // Human output says it in words.
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "--scenario", "rollout", "good.yaml"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("=> rollout done in 1238 s; serving capacity never below 4 pods"),
        "{text}"
    );
}

#[test]
fn drain_waits_for_each_replacement_under_the_pdb() {
    let dir = tempfile::tempdir().unwrap();
    let pdb = "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: reference\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app: reference}\n";
    write(dir.path(), "drain.yaml", covered() + pdb);
    let c = simulate(
        dir.path(),
        "drain.yaml",
        &["--scenario", "drain", "--pods-on-node", "2"],
    );
    let d = &c["drain"];
    // The second eviction waits for the first replacement (Ready at 309.5 s) and kubectl's next
    // retry (every 5 s: 310 s); its replacement is Ready 309.5 s later.
    assert_eq!(d["done_seconds"], 619.5, "{d:#}");
    assert_eq!(d["lowest_serving"], 3);
    assert!(d["evictions_refused"].as_u64().unwrap() > 0);
    // Without the PDB both pods go at once.
    write(dir.path(), "nopdb.yaml", covered());
    let c = simulate(
        dir.path(),
        "nopdb.yaml",
        &["--scenario", "drain", "--pods-on-node", "2"],
    );
    assert_eq!(c["drain"]["done_seconds"], 309.5);
    assert_eq!(c["drain"]["lowest_serving"], 2);
}

/// The drain and pdb-blocks-gpu-drains read a PDB's selector the same way: one that selects by
/// expressions holds the evictions back exactly as the same selector written as labels does, and
/// one that allows no eviction is the rule's error and a drain that never ends.
#[test]
fn drain_and_the_pdb_rule_agree_on_a_selector_of_expressions() {
    let dir = tempfile::tempdir().unwrap();
    let pdb = |max: u32, selector: &str| {
        format!(
            "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: reference\nspec:\n  maxUnavailable: {max}\n  selector:\n    {selector}\n"
        )
    };
    let labels = "matchLabels: {app: reference}";
    let expressions = "matchExpressions: [{key: app, operator: In, values: [reference, other]}]";
    let drain = |file: &str, text: String| {
        write(dir.path(), file, text);
        simulate(
            dir.path(),
            file,
            &["--scenario", "drain", "--pods-on-node", "2"],
        )["drain"]
            .clone()
    };
    let by_labels = drain("labels.yaml", covered() + &pdb(1, labels));
    let by_expressions = drain("expressions.yaml", covered() + &pdb(1, expressions));
    assert_eq!(by_expressions, by_labels);
    assert_eq!(by_expressions["done_seconds"], 619.5, "{by_expressions:#}");

    let blocking = covered() + &pdb(0, expressions);
    write(dir.path(), "blocking.yaml", blocking);
    let lint = probelint()
        .current_dir(dir.path())
        .args(["--format", "json", "blocking.yaml"])
        .output()
        .unwrap();
    let findings: Value = serde_json::from_slice(&lint.stdout).unwrap();
    let rules: Vec<&str> = array(&findings, "findings")
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert!(rules.contains(&"pdb-blocks-gpu-drains"), "{rules:?}");
    let blocked = drain("blocking2.yaml", covered() + &pdb(0, expressions));
    assert!(blocked["done_seconds"].is_null(), "{blocked:#}");
    assert!(
        blocked["evictions_refused"].as_u64().unwrap() > 0,
        "{blocked:#}"
    );
}

/// `kubectl get deploy,pdb -o yaml` writes one `kind: List`: its items are simulated as the
/// same objects written one by one (the pod's restarts, and the drain under the PDB beside it).
#[test]
fn a_list_is_simulated_item_by_item() {
    let item = |yaml: &str| -> String {
        yaml.lines()
            .enumerate()
            .map(|(i, line)| match i {
                0 => format!("  - {line}\n"),
                _ => format!("    {line}\n"),
            })
            .collect()
    };
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: reference\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels: {app: reference}\n";
    let list = |deployment: &str| {
        format!(
            "apiVersion: v1\nkind: List\nitems:\n{}{}",
            item(deployment),
            item(pdb)
        )
    };
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "storm-list.yaml", list(STORM));
    let c = simulate(
        dir.path(),
        "storm-list.yaml",
        &["--duration", "800", "--loading-server", "refuses"],
    );
    assert_eq!(c["object"]["name"], "reference", "{c:#}");
    assert_eq!(c["restarts"], 7);
    write(dir.path(), "drain-list.yaml", list(&covered()));
    let c = simulate(
        dir.path(),
        "drain-list.yaml",
        &["--scenario", "drain", "--pods-on-node", "2"],
    );
    assert_eq!(c["drain"]["done_seconds"], 619.5, "the PDB among the items");
    assert!(c["drain"]["evictions_refused"].as_u64().unwrap() > 0);
}

#[test]
fn start_offset_init_containers_and_node_settings_are_stated() {
    let dir = tempfile::tempdir().unwrap();
    let with_init = STORM.replace(
        "      containers:\n",
        "      initContainers:\n        - name: fetch\n          image: busybox\n      containers:\n",
    );
    write(dir.path(), "init.yaml", &with_init);
    let c = simulate(dir.path(), "init.yaml", &["--duration", "800"]);
    assert!(
        array(&c, "warnings")[0]
            .as_str()
            .unwrap()
            .contains("init containers"),
        "{c:#}"
    );
    let c = simulate(
        dir.path(),
        "init.yaml",
        &["--duration", "800", "--start-offset", "45"],
    );
    assert!(array(&c, "warnings").is_empty());
    assert_eq!(c["transitions"][0]["t"], 45.0);
    assert_eq!(c["start_offset_seconds"], 45.0);
    let reduced = simulate(
        dir.path(),
        "init.yaml",
        &["--duration", "800", "--reduced-crashloop-decay"],
    );
    assert_eq!(reduced["kubelet"]["backoff"]["max"], 60.0);
    assert!(reduced["restarts"].as_u64().unwrap() > 7, "{reduced:#}");
    let out = probelint()
        .current_dir(dir.path())
        .args([
            "simulate",
            "--max-container-restart-period",
            "400",
            "init.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 to 300 seconds"));
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "--duration", "800", "init.yaml"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kubelet: CrashLoopBackOff 10 s doubling to 300 s"),
        "{text}"
    );
}

#[test]
fn a_rollout_needs_a_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: m\n      image: x\n      resources: {limits: {nvidia.com/gpu: 1}}\n";
    write(dir.path(), "pod.yaml", pod);
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "--scenario", "rollout", "pod.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--scenario rollout needs a Deployment"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every text node of an SVG document, after checking that it parses and its root is `<svg>`.
fn svg_texts(path: &std::path::Path) -> Vec<String> {
    use quick_xml::events::Event;
    let svg = std::fs::read_to_string(path).unwrap();
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut texts = Vec::new();
    let mut root = None;
    loop {
        match reader.read_event().expect("the picture is well-formed XML") {
            Event::Start(e) | Event::Empty(e) if root.is_none() => {
                root = Some(String::from_utf8_lossy(e.name().as_ref()).into_owned());
            }
            Event::Text(t) => texts.push(String::from_utf8_lossy(&t.into_inner()).into_owned()),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(root.as_deref(), Some("svg"));
    texts
}

#[test]
fn svg_draws_both_variants_with_every_series() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "storm.yaml", STORM);
    let svg = dir.path().join("storm.svg");
    let c = simulate(
        dir.path(),
        "storm.yaml",
        &[
            "--duration",
            "800",
            "--scenario",
            "rollout",
            "--svg",
            "storm.svg",
        ],
    );
    assert_eq!(
        c["restarts"], 7,
        "a server answering 503 while it loads: the same storm"
    );
    let texts = svg_texts(&svg);
    let has = |s: &str| texts.iter().any(|t| t.contains(s));
    for series in [
        "as written",
        "as mutated by probelint",
        "probe failure",
        "probe success",
        "restart",
        "killed",
        "Ready",
        "model loaded",
        "container running",
        "serving (Ready and loaded)",
        "available (as the controller counts)",
    ] {
        assert!(has(series), "{series} missing from {texts:?}");
    }
    // A picture that cannot be written is an error, and nothing is left behind.
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "--svg", "missing/dir/x.svg", "storm.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write the picture"));
    // A picture that would replace the manifest, named directly or through a link, is refused
    // before anything is written.
    let manifest = std::fs::read(dir.path().join("storm.yaml")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("storm.yaml", dir.path().join("link.svg")).unwrap();
    for target in ["storm.yaml", "link.svg"] {
        if cfg!(not(unix)) && target == "link.svg" {
            continue;
        }
        let out = probelint()
            .current_dir(dir.path())
            .args(["simulate", "--svg", target, "storm.yaml"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{target}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("--svg {target} is the same file as storm.yaml")),
            "{target}: {stderr}"
        );
        assert_eq!(
            std::fs::read(dir.path().join("storm.yaml")).unwrap(),
            manifest
        );
    }
}

/// The node's two timings are flags with measured defaults: a startup budget of exactly the
/// load is the storm the kubelet runs with them, and the one restart of the kubelet's rules
/// alone without them; a negative time is refused, naming the flag.
#[test]
fn probe_lead_and_restart_latency_decide_a_budget_of_exactly_the_load() {
    let dir = tempfile::tempdir().unwrap();
    // 30 × 10 s of startup budget for the 300 s load.
    let exact = STORM.replace(
        "          livenessProbe:",
        "          startupProbe:\n            httpGet: {path: /livez, port: http}\n            failureThreshold: 30\n          livenessProbe:",
    );
    write(dir.path(), "exact.yaml", &exact);
    let measured = simulate(dir.path(), "exact.yaml", &["--loading-server", "refuses"]);
    assert_eq!(measured["first_ready_seconds"], Value::Null, "{measured:#}");
    assert!(measured["restarts"].as_u64().unwrap() >= 5, "{measured:#}");
    assert_eq!(measured["kubelet"]["backoff"]["probe_lead"], 0.5);
    let ideal = simulate(
        dir.path(),
        "exact.yaml",
        &[
            "--loading-server",
            "refuses",
            "--probe-lead",
            "0",
            "--restart-latency",
            "0",
        ],
    );
    assert_eq!(ideal["restarts"], 1, "{ideal:#}");
    assert_eq!(ideal["first_ready_seconds"], 590.0);
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "--probe-lead=-1", "exact.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--probe-lead"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
