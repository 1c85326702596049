//! The promise of every fix, as a property over the real corpus and generated pods: a fix never
//! shortens a kill deadline a container has, never adds one shorter than the load probelint
//! states nor than the policy's floor, and — simulated under kubelet probe semantics at both ends
//! of the stated load and at realistic loads below the floor — never adds a restart, nor delays the
//! first Ready of a container that was Ready only once loaded by more than the probes' own
//! granularity (one startup period plus one readiness period: a startupProbe checks every
//! 10 s, and readiness runs only after it has passed).

use probelint_policies::Analysis;
use probelint_policies::Policy;
use probelint_policies::ProbeKind;
use probelint_policies::required_startup_seconds;
use probelint_policies::simulate::{loading_server_of, scenario_for, simulate};
use probelint_policies::{STARTUP_PERIOD_SECONDS, mutate};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Loads below the 1,200 s floor that real models take (a 1B model on NVMe … a 70B download).
const REALISTIC_LOADS: &[f64] = &[45.0, 120.0, 300.0, 600.0, 900.0, 1150.0];

/// Checks the promise for every container of `object`; returns how many containers a fix changed.
fn check(object: &Value, policy: &Policy) -> usize {
    let mutation = mutate(object, policy);
    if mutation.patch.0.is_empty() {
        return 0;
    }
    let mut fixed = object.clone();
    json_patch::patch(&mut fixed, &mutation.patch).expect("the engine's patch applies");
    compare(object, fixed, policy)
}

/// The same promise for advice: every display-only fix (a `help` that proposes a probe change,
/// as the patch it would be) applied on its own. Returns how many pieces of advice were held to it.
fn check_advice(object: &Value, policy: &Policy) -> usize {
    let mut held = 0;
    for finding in probelint_policies::evaluate_one(object, policy) {
        let Some(fix) = finding
            .fix
            .filter(|f| f.applicability == probelint_policies::Applicability::DisplayOnly)
        else {
            continue;
        };
        let mut advised = object.clone();
        json_patch::patch(&mut advised, &fix.patch)
            .unwrap_or_else(|e| panic!("{}: the advice does not apply: {e}", finding.rule));
        compare(object, advised, policy);
        held += 1;
    }
    held
}

/// The promise between `object` as written and `fixed`, container by container; returns how many
/// containers got a startupProbe they did not have.
fn compare(object: &Value, fixed: Value, policy: &Policy) -> usize {
    let before = [object.clone()];
    let after = [fixed];
    let before = Analysis::new(&before, policy);
    let after = Analysis::new(&after, policy);
    let mut changed = 0;
    for old in before.containers() {
        let Some(new) = after
            .containers()
            .find(|c| c.container.pointer == old.container.pointer)
        else {
            panic!("a fix removed container {}", old.container.pointer);
        };
        let (old_c, new_c) = (old.container, new.container);
        let name = format!("{} {}", old.workload.object_ref, old_c.pointer);
        // No deadline shortened: every kill budget is at least what it was.
        for kind in [ProbeKind::Startup, ProbeKind::Liveness] {
            if let Some(was) = old_c.probe(kind) {
                let now = new_c.probe(kind).expect("a fix never removes a kill probe");
                assert!(
                    now.budget_seconds() >= was.budget_seconds(),
                    "{name}: {kind:?} budget shortened from {} to {}",
                    was.budget_seconds(),
                    now.budget_seconds()
                );
            }
        }
        // An added startupProbe covers the stated load, the old deadlines and the floor.
        if old_c.probe(ProbeKind::Startup).is_none()
            && let Some(added) = new_c.probe(ProbeKind::Startup)
        {
            changed += 1;
            // Where nothing could kill it before, the added deadline lies beyond any load.
            let had_no_deadline = !old_c.runs_probe(ProbeKind::Liveness);
            let floor = if had_no_deadline {
                policy
                    .model_load
                    .new_deadline_floor_seconds
                    .max(policy.model_load.startup_floor_seconds)
            } else {
                policy.model_load.startup_floor_seconds
            };
            let needed = [
                required_startup_seconds(old_c.load.slow, policy.startup_margin),
                old_c
                    .probe(ProbeKind::Liveness)
                    .map_or(0, |p| p.budget_seconds()),
                old_c
                    .probe(ProbeKind::Readiness)
                    .map_or(0, |p| p.budget_seconds()),
                floor as i64,
            ];
            let needed = needed.into_iter().max().unwrap_or_default();
            assert!(
                added.budget_seconds() >= needed,
                "{name}: added startup budget {} < {needed} ({})",
                added.budget_seconds(),
                old_c.load
            );
        }
        // Simulated: no added restart, no later first Ready for what was Ready once loaded.
        let mut loads = REALISTIC_LOADS.to_vec();
        loads.extend([old_c.load.fast, old_c.load.slow]);
        for load in loads {
            let duration = (load * 4.0).max(3600.0);
            // As the container's server behaves while it loads (a port check passes early on
            // llama.cpp, never on vLLM), the same for both.
            let server = loading_server_of(old_c);
            let run = |c| {
                let mut s = scenario_for(c, load, duration);
                s.server = server;
                simulate(&s)
            };
            let was = run(old_c);
            let now = run(new_c);
            // At a load beyond both deadlines the container loops, fixed or not, and the count
            // within the window is a matter of where the back-off falls: a longer deadline
            // (kept by the check above) can end one more cycle inside the window, since the
            // kubelet waits out a back-off only when the previous instance ended within it.
            let loops_either_way =
                was.first_ready_seconds.is_none() && now.first_ready_seconds.is_none();
            assert!(
                loops_either_way || now.restarts <= was.restarts,
                "{name}: at a {load} s load the fix adds restarts ({} → {})",
                was.restarts,
                now.restarts
            );
            if let Some(ready) = was.first_ready_seconds.filter(|t| *t >= load) {
                let readiness_period =
                    new_c.probe(ProbeKind::Readiness).map_or(0, |p| p.period()) as f64;
                let slack = STARTUP_PERIOD_SECONDS as f64 + readiness_period;
                let later = now.first_ready_seconds.map(|t| t - ready);
                assert!(
                    later.is_some_and(|d| d <= slack),
                    "{name}: at a {load} s load first Ready moves from {ready} s to {:?}",
                    now.first_ready_seconds
                );
            }
        }
    }
    changed
}

#[test]
fn on_the_real_corpus_no_fix_makes_a_workload_worse() {
    let policy = Policy::default();
    let mut changed = 0;
    for path in probelint_testkit::corpus::real_manifests() {
        let text = std::fs::read_to_string(&path).expect("corpus file is UTF-8");
        let Ok(docs) = probelint_testkit::yaml::try_objects(&text) else {
            continue;
        };
        for doc in docs.iter().filter(|d| d.is_object()) {
            changed += check(doc, &policy);
        }
    }
    // The corpus is full of GPU servers without startupProbes: the property is exercised.
    assert!(
        changed >= 20,
        "only {changed} containers got a startupProbe"
    );
}

#[test]
fn no_advice_adds_a_restart_on_the_corpus_or_the_rules_fixtures() {
    let policy = Policy::default();
    let mut held = 0;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("resources/rules");
    let mut files = probelint_testkit::corpus::real_manifests();
    files.extend(probelint_testkit::corpus::manifests_under(&root));
    for path in files {
        let text = std::fs::read_to_string(&path).expect("manifest is UTF-8");
        let Ok(docs) = probelint_testkit::yaml::try_objects(&text) else {
            continue;
        };
        for doc in docs.iter().filter(|d| d.is_object()) {
            held += check_advice(doc, &policy);
        }
    }
    // liveness-checks-readiness advises on the corpus and on its own fixtures (llama.cpp behind
    // a tcpSocket gate among them): the property is exercised.
    assert!(held >= 3, "only {held} pieces of advice were checked");
}

#[test]
fn the_issues_cases_keep_their_outcomes() {
    // vLLM 70B, readiness and no liveness: before the floor, the fix's 380 s startupProbe took
    // a container that was Ready at 910 s into a restart loop at a 900 s load.
    let policy = Policy::default();
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llama-70b"},
        "spec": {"template": {"spec": {"containers": [{
            "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
            "resources": {"limits": {"nvidia.com/gpu": 4}},
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}}
        }]}}}
    });
    assert_eq!(check(&deployment, &policy), 1);
    let lws = json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "r1"},
        "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": {"spec": {"containers": [{
            "name": "leader", "image": "vllm/vllm-openai:v0.10.1",
            "args": ["--model", "deepseek-ai/DeepSeek-R1", "--pipeline-parallel-size", "2"],
            "resources": {"limits": {"nvidia.com/gpu": 8}},
            "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "initialDelaySeconds": 900},
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}}
        }]}}}}
    });
    assert_eq!(check(&lws, &policy), 1);
}

fn probe(handler: Value, delay: i64, period: i64, failure: i64) -> Value {
    let mut p = handler;
    p["initialDelaySeconds"] = json!(delay);
    p["periodSeconds"] = json!(period);
    p["failureThreshold"] = json!(failure);
    p
}

prop_compose! {
    fn gpu_pod()(
        model in prop::sample::select(vec![
            None,
            Some("meta-llama/Llama-3.1-8B-Instruct"),
            Some("meta-llama/Llama-3.1-70B-Instruct"),
            Some("Qwen/Qwen2.5-1.5B-Instruct"),
            Some("deepseek-ai/DeepSeek-R1"),
        ]),
        declared in prop::option::of(0u32..4000),
        liveness in prop::option::of((0i64..1200, 1i64..60, 1i64..30)),
        readiness in prop::option::of((0i64..600, 1i64..30, 1i64..60, any::<bool>())),
        // A startupProbe of its own: startup-budget-too-short raises its threshold, never lowers it.
        startup in prop::option::of((0i64..300, 1i64..30, 1i64..60)),
    ) -> Value {
        let mut container = json!({
            "name": "server", "image": "vllm/vllm-openai:v0.10.1",
            "ports": [{"containerPort": 8000}],
            "resources": {"limits": {"nvidia.com/gpu": 1}}
        });
        if let Some(model) = model {
            container["args"] = json!(["--model", model]);
        }
        let http = json!({"httpGet": {"path": "/health", "port": 8000}});
        if let Some((d, p, f)) = liveness {
            container["livenessProbe"] = probe(http.clone(), d, p, f);
        }
        if let Some((d, p, f)) = startup {
            container["startupProbe"] = probe(http.clone(), d, p, f);
        }
        if let Some((d, p, f, tcp)) = readiness {
            let handler = if tcp { json!({"tcpSocket": {"port": 8000}}) } else { http };
            container["readinessProbe"] = probe(handler, d, p, f);
        }
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"containers": [container]}});
        if let Some(seconds) = declared {
            pod["metadata"]["annotations"] = json!({"probelint.io/model-load-seconds": seconds.to_string()});
        }
        pod
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn on_generated_gpu_pods_no_fix_makes_a_workload_worse(pod in gpu_pod()) {
        check(&pod, &Policy::default());
    }

    /// `probeHelper` changes the check the fixes write (an exec of probelint-probe), never the
    /// budgets: the same promise holds in both delivery modes.
    #[test]
    fn with_the_probe_helper_on_no_fix_makes_a_workload_worse(
        pod in gpu_pod(),
        image_volume in any::<bool>(),
    ) {
        check(&pod, &helper_policy(image_volume));
    }
}

fn helper_policy(image_volume: bool) -> Policy {
    let mode = if image_volume {
        "imageVolume"
    } else {
        "initContainer"
    };
    Policy::with_user_yaml(&format!(
        "kubernetesVersion: '1.35'\nprobeHelper: {{image: registry.example.com/probelint-probe:0.1.0, mode: {mode}}}\n"
    ))
    .expect("policy loads")
}
