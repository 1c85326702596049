//! Kind layouts: where the pod specs live in each kind of object, built in for the workloads
//! probelint knows and declared in the policy (`workloads:`) for the others, and the expansion
//! of a layout's pointer patterns into the pod specs of one object.

use crate::model::fields;
use crate::model::pointer;
use serde_json::Value;

/// Where pod specs live in one kind of object.
pub(crate) struct Layout {
    /// Pointers to pod specs; `*` expands to every item of an array (or value of a map).
    pub(crate) pod_specs: &'static [&'static str],
    pub(crate) batch: bool,
    /// A core PodSpec, which the apiserver itself decodes and validates (not a custom resource's).
    pub(crate) core: bool,
}

/// The built-in workload kinds. `group` is matched against the apiVersion's group when the kind
/// name alone is ambiguous (a Knative `Service` is a workload; a core `Service` is not).
pub(crate) fn builtin_layout(api_version: &str, kind: &str) -> Option<Layout> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let template = &["/spec/template/spec"][..];
    let layout = |pod_specs, batch| {
        Some(Layout {
            pod_specs,
            batch,
            core: false,
        })
    };
    let core = |pod_specs, batch| {
        Some(Layout {
            pod_specs,
            batch,
            core: true,
        })
    };
    match kind {
        "Pod" if group.is_empty() => core(&["/spec"], false),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
            if matches!(group, "apps" | "extensions") =>
        {
            core(template, false)
        }
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => layout(template, false),
        "ReplicationController" if group.is_empty() => core(template, false),
        "Job" if group == "batch" => core(template, true),
        "Job" => layout(template, true),
        "CronJob" if group == "batch" => core(&["/spec/jobTemplate/spec/template/spec"], true),
        "CronJob" => layout(&["/spec/jobTemplate/spec/template/spec"], true),
        "LeaderWorkerSet" => layout(
            &[
                "/spec/leaderWorkerTemplate/leaderTemplate/spec",
                "/spec/leaderWorkerTemplate/workerTemplate/spec",
            ],
            false,
        ),
        "Rollout" if group == "argoproj.io" => layout(template, false),
        "Service" if group == "serving.knative.dev" => layout(template, false),
        "JobSet" => layout(
            &["/spec/replicatedJobs/*/template/spec/template/spec"],
            true,
        ),
        "RayService" => layout(
            &[
                "/spec/rayClusterConfig/headGroupSpec/template/spec",
                "/spec/rayClusterConfig/workerGroupSpecs/*/template/spec",
            ],
            false,
        ),
        "RayCluster" => layout(
            &[
                "/spec/headGroupSpec/template/spec",
                "/spec/workerGroupSpecs/*/template/spec",
            ],
            false,
        ),
        "RayJob" => layout(
            &[
                "/spec/rayClusterSpec/headGroupSpec/template/spec",
                "/spec/rayClusterSpec/workerGroupSpecs/*/template/spec",
                "/spec/submitterPodTemplate/spec",
            ],
            true,
        ),
        // KServe components are pod specs with extra fields, plus a model container (below).
        "InferenceService" if group == "serving.kserve.io" => layout(
            &[
                "/spec/predictor",
                "/spec/predictor/workerSpec",
                "/spec/transformer",
                "/spec/explainer",
            ],
            false,
        ),
        "ServingRuntime" | "ClusterServingRuntime" if group == "serving.kserve.io" => {
            layout(&["/spec", "/spec/workerSpec"], false)
        }
        // The NIM Operator builds one container from the NIMService's spec (below).
        "NIMService" if group == "apps.nvidia.com" => layout(&["/spec"], false),
        "LLMInferenceService" if group == "serving.kserve.io" => layout(
            &[
                "/spec/template",
                "/spec/worker",
                "/spec/prefill/template",
                "/spec/prefill/worker",
            ],
            false,
        ),
        _ => None,
    }
}

/// Expands a pointer pattern with `*` wildcards into the nodes it names.
pub(crate) fn expand<'a>(root: &'a Value, pattern: &str) -> Vec<(String, &'a Value)> {
    // Patterns are the built-in layouts' and the policy's `workloads`, which the policy checks.
    let Some(tokens) = pointer::tokens(pattern) else {
        return Vec::new();
    };
    let mut current = vec![(String::with_capacity(pattern.len() + 16), root)];
    for token in tokens {
        if token == "*" {
            let mut next = Vec::new();
            for (ptr, node) in current {
                match node {
                    Value::Array(items) => next.extend(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, v)| (pointer::join_index(&ptr, i), v)),
                    ),
                    Value::Object(map) => {
                        next.extend(map.iter().map(|(k, v)| (pointer::join(&ptr, k), v)))
                    }
                    _ => {}
                }
            }
            current = next;
            continue;
        }
        current.retain_mut(|(ptr, node)| {
            let parent: &'a Value = node;
            let child = match parent {
                Value::Object(_) => fields::get(parent, &token),
                Value::Array(items) => pointer::index(&token).and_then(|i| items.get(i)),
                _ => None,
            };
            let Some(child) = child else {
                return false;
            };
            pointer::push(ptr, &token);
            *node = child;
            true
        });
    }
    current
}
