//! The conformance scenarios on a real kubelet: the reference server as a locally built image,
//! run by the test node (`probelint_cluster::Node`) as the Deployments the scenarios describe;
//! restarts, probe failures (`Unhealthy` Events) and Ready transitions read back from the API;
//! requests sent to the pod's IP while the API says it is Ready; the same manifests given to
//! `probelint simulate`, and the two printed side by side.
//!
//! The kubelet's clock cannot be compressed: the scenarios here use load times and probe periods
//! of seconds to a minute, so that all of them, run at once on the node, take a few minutes.
//! The compressed in-process harness (`tests/conformance`) keeps the long cases.

mod helper;
mod observe;
mod predict;
mod webhook;

pub use helper::{
    HELPER_PATH, PROBE_HELPER_IMAGE, helper_exec, helper_mounts, helper_volumes,
    probe_helper_image, run_with_volumes,
};
pub use observe::{Observed, Observer};
pub use predict::{Predicted, simulate};
pub use webhook::Webhook;

use probelint_cluster::{Cluster, Image};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The reference server's image, as the kubelet gets it (`imagePullPolicy: Never`).
pub const REFERENCE_IMAGE: &str = "probelint.test/reference-server:test";

/// The label every scenario's pods carry (the observer watches it).
pub const SCENARIO_LABEL: &str = "kubelet.probelint.io/scenario";

/// The namespace label that puts a namespace in the webhook's scope.
pub const TREATMENT_LABEL: &str = "kubelet.probelint.io/mutate";

/// `target/<profile>/NAME`, the workspace binary built beside this test.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join(name))
        .unwrap_or_default();
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build -p probelint -p probelint-webhook -p \
         probelint-reference` (or `cargo test --workspace`, which builds them)",
        path.display()
    );
    path
}

/// The reference server's image: its executable with the shared libraries it loads here, a small
/// model made by `make-model` and its expected output, run as 65532 like the Dockerfile's, with
/// the Dockerfile's command plus a latency floor for a busy machine.
pub fn reference_image(server: &Path, work: &Path) -> Result<Image, String> {
    let model = work.join("model.safetensors");
    let out = std::process::Command::new(server)
        .args(["make-model", "--params", "20000", "--out"])
        .arg(&model)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", server.display()))?;
    if !out.status.success() {
        return Err(format!(
            "make-model failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut image = Image::new(REFERENCE_IMAGE);
    image
        .executable_with_libraries(server, "/usr/local/bin/reference-server")?
        .copy(&model, "/models/model.safetensors")?
        .copy(
            &work.join("model.safetensors.expected.json"),
            "/models/model.safetensors.expected.json",
        )?
        .entrypoint(&["/usr/local/bin/reference-server"])
        .cmd(&[
            "serve",
            "--model",
            "/models/model.safetensors",
            "--listen",
            "0.0.0.0:8080",
            "--device",
            "cpu",
            // The readiness latency check's floor, 10 ms by default, is scheduler noise on a
            // machine whose two cores also run the rest of the test suite: a healthy pod there
            // failed it from its first probe. 200 ms keeps the degradation fault (20× the floor
            // per pass) far above the 3× threshold.
            "--latency-floor-ms",
            "200",
        ])
        .user("65532:65532");
    Ok(image)
}

/// One arm of a scenario: a Deployment of the reference server with some fault switches and
/// probes, run for `duration` seconds from its container's first start.
#[derive(Clone)]
pub struct Arm {
    /// `slow-load`, `port-open`, …: the Deployment's name and the scenario label.
    pub scenario: &'static str,
    /// `control` (as users write it) or `treatment` (probelint's fix).
    pub arm: &'static str,
    /// Fault switches (`REFERENCE_FAULT_*`).
    pub env: Vec<(&'static str, String)>,
    /// The probes (a JSON object: `startupProbe`, `readinessProbe`, `livenessProbe`).
    pub probes: Value,
    /// Annotations of the Deployment (`probelint.io/model-load-seconds`).
    pub annotations: Value,
    /// Whether the apiserver sends it through probelint's mutating webhook.
    pub mutated: bool,
    /// The model's load time, for `simulate --load-seconds`.
    pub load_seconds: f64,
    /// Whether the server accepts connections while loading (`--bind-before-load`).
    pub port_open_during_load: bool,
    /// Seconds to observe, from the container's first start.
    pub duration: f64,
    /// Send one request a second to the pod while it is Ready.
    pub traffic: bool,
}

impl Arm {
    /// `<scenario>-<arm>`: the namespace prefix and the label value.
    pub fn id(&self) -> String {
        format!("{}-{}", self.scenario, self.arm)
    }

    /// The Deployment, bound to the test node. It asks for one `nvidia.com/gpu` (which the node
    /// advertises, with no device behind it) so that probelint judges it as the GPU workload it
    /// stands for.
    pub fn deployment(&self) -> Value {
        let env: Vec<Value> = self
            .env
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        let mut container = json!({
            "name": "server",
            "image": REFERENCE_IMAGE,
            "imagePullPolicy": "Never",
            "ports": [{"name": "http", "containerPort": 8080}],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "env": env,
        });
        if let (Some(container), Some(probes)) =
            (container.as_object_mut(), self.probes.as_object())
        {
            container.extend(probes.clone());
        }
        let labels = json!({"app": "reference", SCENARIO_LABEL: self.id()});
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.scenario, "annotations": self.annotations},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeName": probelint_cluster::node::NODE_NAME,
                        // No token volume: nothing in the server talks to the apiserver.
                        "automountServiceAccountToken": false,
                        "enableServiceLinks": false,
                        // The test cluster runs no DNS (the kubelet would warn on every pod).
                        "dnsPolicy": "Default",
                        "containers": [container],
                    },
                },
            },
        })
    }
}

/// What the kubelet did to one arm, beside what `probelint simulate` predicts.
pub struct Outcome {
    pub arm: Arm,
    /// The Deployment as the apiserver stored it (mutated, for a treatment).
    pub applied: Value,
    pub observed: Observed,
    pub predicted: Predicted,
}

/// Runs every arm at once on the test node: creates its namespace (in the webhook's scope for a
/// treatment), applies its Deployment, observes it for its duration, and asks `simulate` about
/// the Deployment the apiserver stored.
pub fn run_all(
    cluster: &'static Cluster,
    webhook: &Webhook,
    probelint: &Path,
    arms: &[Arm],
) -> Vec<Outcome> {
    let observer = Observer::start(cluster, SCENARIO_LABEL);
    let mut started = Vec::new();
    for arm in arms {
        let ns = cluster.namespace(&format!("kubelet-{}", arm.id()));
        let text = serde_json::to_string(&arm.deployment()).expect("a manifest");
        if arm.mutated {
            cluster.kubectl_ok(&[
                "label",
                "namespace",
                &ns,
                &format!("{TREATMENT_LABEL}=true"),
            ]);
            webhook.wait_until_active(&ns, &text);
        }
        let applied = cluster.apply(&text, &["-n", &ns]);
        assert!(
            applied.status.success(),
            "{}: kubectl apply failed: {}",
            arm.id(),
            String::from_utf8_lossy(&applied.stderr)
        );
        let stored = cluster.get_json(&["-n", &ns, "get", "deployment", arm.scenario]);
        started.push((arm.clone(), ns, stored));
    }
    observe_and_predict(&observer, probelint, started)
}

/// Follows every started arm (arm, namespace, the Deployment as stored) at once for its
/// duration, then asks `simulate` about each stored Deployment.
pub(crate) fn observe_and_predict(
    observer: &Observer,
    probelint: &Path,
    started: Vec<(Arm, String, Value)>,
) -> Vec<Outcome> {
    let observations: Vec<Observed> = std::thread::scope(|scope| {
        let handles: Vec<_> = started
            .iter()
            .map(|(arm, ns, _)| {
                scope.spawn(move || observer.follow(ns, &arm.id(), arm.duration, arm.traffic))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("an observer thread"))
            .collect()
    });
    started
        .into_iter()
        .zip(observations)
        .map(|((arm, _, applied), observed)| {
            let predicted = simulate(probelint, &applied, &arm).unwrap_or_else(|e| panic!("{e}"));
            Outcome {
                arm,
                applied,
                observed,
                predicted,
            }
        })
        .collect()
}

fn seconds(t: Option<f64>) -> String {
    t.map_or("never".to_owned(), |t| format!("{t:.0} s"))
}

fn difference(real: Option<f64>, model: Option<f64>) -> String {
    match (real, model) {
        (Some(r), Some(m)) => format!("{:+.0} s", m - r),
        (None, None) => "0".to_owned(),
        _ => "one never".to_owned(),
    }
}

/// The table: per arm, the real kubelet's restarts and first Ready beside the model's, and
/// what only the real run measures (probe failures by probe, failed requests).
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<27} {:>8} {:>6} {:>7} {:>5}   {:>9} {:>9} {:>9}   {:>18}  {:>9}",
        "scenario/arm",
        "restarts",
        "model",
        "phases",
        "diff",
        "1st Ready",
        "model",
        "diff",
        "Unhealthy (S/R/L)",
        "failed rq"
    );
    for o in outcomes {
        let u = &o.observed.unhealthy;
        let _ = writeln!(
            out,
            "{:<27} {:>8} {:>6} {:>7} {:>+5}   {:>9} {:>9} {:>9}   {:>18}  {:>9}",
            o.arm.id(),
            o.observed.restarts,
            o.predicted.restarts,
            format!(
                "{}-{}",
                o.predicted.restarts_range.0, o.predicted.restarts_range.1
            ),
            i64::from(o.predicted.restarts) - i64::from(o.observed.restarts),
            seconds(o.observed.first_ready),
            seconds(o.predicted.first_ready),
            difference(o.observed.first_ready, o.predicted.first_ready),
            format!("{}/{}/{}", u.startup, u.readiness, u.liveness),
            if o.arm.traffic {
                format!(
                    "{}/{}",
                    o.observed.requests_failed, o.observed.requests_sent
                )
            } else {
                "-".to_owned()
            },
        );
    }
    out
}

/// Each arm's timeline from the API, beside the model's transitions.
pub fn timelines(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    for o in outcomes {
        let _ = writeln!(out, "== {} (real kubelet)", o.arm.id());
        for (t, what) in &o.observed.timeline {
            let _ = writeln!(out, "  {t:>6.0} s  {what}");
        }
        let _ = writeln!(out, "   -- probelint simulate:");
        for line in &o.predicted.transitions {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}
