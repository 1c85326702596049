//! What of a workload reaches the Pods its controllers create.
//!
//! A controller builds each Pod from a pod template alone: the Pod carries the template's labels
//! and annotations and an ownerReference to the controller, nothing of the workload's own
//! `metadata`. So the probelint annotations on a Deployment's metadata (an exemption, a model load
//! time) are not on its Pods, and a policy exemption that names the Deployment does not name them.
//! This module
//!
//! - follows an object back to the workloads it belongs to ([`owners`]): the controller in its
//!   ownerReferences, and the workloads that controller's name and the labels controllers set on
//!   every Pod name (a ReplicaSet `<deployment>-<pod-template-hash>`, a CronJob's Job
//!   `<cronjob>-<minutes>`, `leaderworkerset.sigs.k8s.io/name`...), so that a policy exemption by
//!   kind and name also covers the Pods;
//! - copies a workload's probelint annotations into its pod templates ([`propagation`]), which the
//!   mutating webhook does when it may change the templates anyway (CREATE, or an UPDATE that
//!   changes them);
//! - says which exemptions and declarations of a workload will not reach its Pods
//!   ([`unreached`]), for the validating webhook to warn about.

use crate::analysis::object::{PodSpec, Workload};
use crate::fix::patch::add;
use crate::model::annotations::{
    IGNORE_ANNOTATION, IGNORE_CONTAINER_PREFIX, IGNORE_REASON_ANNOTATION, LOAD_SECONDS_ANNOTATION,
    ROLE_ANNOTATION,
};
use crate::model::fields::{self, pick};
use crate::model::finding::ObjectRef;
use crate::model::pointer;
use crate::policy::Policy;
use json_patch::PatchOperation;
use serde_json::{Map, Value};

/// The controller named in an object's `metadata.ownerReferences` (the entry with
/// `controller: true`; Kubernetes allows one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controller<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

impl std::fmt::Display for Controller<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// The object's controller, if a controller manages it. An ownerReference without
/// `controller: true` (garbage collection only) does not count: nothing reconciles the object
/// from a template of its own.
pub fn controller_of(object: &Value) -> Option<Controller<'_>> {
    let [metadata] = pick(object, ["metadata"]);
    let [references] = pick(metadata?, ["ownerReferences"]);
    references?.as_array()?.iter().find_map(|r| {
        let [api_version, kind, name, controller] =
            pick(r, ["apiVersion", "kind", "name", "controller"]);
        if controller.and_then(Value::as_bool) != Some(true) {
            return None;
        }
        Some(Controller {
            api_version: api_version.and_then(Value::as_str).unwrap_or_default(),
            kind: kind.and_then(Value::as_str)?,
            name: name.and_then(Value::as_str)?,
        })
    })
}

/// Labels that a controller sets on every Pod of a workload, naming that workload: the
/// workload's kind and apiVersion for each. Only followed for objects that have a controller,
/// so that a label alone on a bare Pod claims nothing.
const WORKLOAD_LABELS: &[(&str, &str, &str)] = &[
    // LeaderWorkerSet: leader and worker Pods (of StatefulSets the LWS controller owns).
    (
        "leaderworkerset.sigs.k8s.io/name",
        "LeaderWorkerSet",
        "leaderworkerset.x-k8s.io/v1",
    ),
    // JobSet: the Pods of every replicated Job.
    (
        "jobset.sigs.k8s.io/jobset-name",
        "JobSet",
        "jobset.x-k8s.io/v1alpha2",
    ),
    // KServe: the Pods of every component, raw or serverless.
    (
        "serving.kserve.io/inferenceservice",
        "InferenceService",
        "serving.kserve.io/v1beta1",
    ),
    // Knative Serving: the Pods of every Revision of a Service.
    (
        "serving.knative.dev/service",
        "Service",
        "serving.knative.dev/v1",
    ),
    // KubeRay: head and worker Pods (KubeRay also sets the RayCluster as their controller).
    ("ray.io/cluster", "RayCluster", "ray.io/v1"),
];

/// The kinds whose Pods [`owners`] traces back to them, so that a policy exemption naming one
/// covers its Pods. RayService and RayJob name their RayClusters with a random suffix, KServe
/// runtimes serve many InferenceServices, and nothing on an LLMInferenceService's Pods names it
/// for certain: their Pods are not traced.
pub const TRACED_KINDS: &[&str] = &[
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "Rollout",
    "LeaderWorkerSet",
    "JobSet",
    "RayCluster",
    "InferenceService",
    "Service",
];

/// The workloads an object belongs to, nearest first: its controller, then the workloads
/// above it that its controller's name and its labels name. Empty for an object without a
/// controller (then only the object itself is what it is). Each carries the object's namespace:
/// owners are always in the namespace of what they own.
///
/// - a ReplicaSet named `<name>-<hash>` beside the label `pod-template-hash: <hash>` is the
///   Deployment's (`rollouts-pod-template-hash`: the Argo Rollout's);
/// - a Job named `<name>-<digits>` is the CronJob's (the CronJob controller names each Job after
///   its scheduled time in minutes);
/// - `WORKLOAD_LABELS` name LeaderWorkerSets, JobSets, InferenceServices, Knative Services
///   and RayClusters.
pub fn owners(object: &Value) -> Vec<ObjectRef> {
    let Some(controller) = controller_of(object) else {
        return Vec::new();
    };
    let [metadata] = pick(object, ["metadata"]);
    let [namespace, labels] = metadata.map_or([None; 2], |m| pick(m, ["namespace", "labels"]));
    let namespace = namespace.and_then(Value::as_str);
    let labels = labels.and_then(Value::as_object);
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let mut refs = Vec::new();
    let mut push = |api_version: &str, kind: &str, name: &str| {
        let r = ObjectRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: Some(name.to_owned()),
        };
        if !name.is_empty() && !refs.contains(&r) {
            refs.push(r);
        }
    };
    push(controller.api_version, controller.kind, controller.name);
    match controller.kind {
        "ReplicaSet" => {
            for (hash_label, kind, api_version) in [
                ("pod-template-hash", "Deployment", "apps/v1"),
                (
                    "rollouts-pod-template-hash",
                    "Rollout",
                    "argoproj.io/v1alpha1",
                ),
            ] {
                let parent = label(hash_label).and_then(|hash| {
                    controller
                        .name
                        .strip_suffix(hash)?
                        .strip_suffix('-')
                        .filter(|_| !hash.is_empty())
                });
                if let Some(parent) = parent {
                    push(api_version, kind, parent);
                }
            }
        }
        "Job" => {
            if let Some((parent, minutes)) = controller.name.rsplit_once('-')
                && !minutes.is_empty()
                && minutes.bytes().all(|b| b.is_ascii_digit())
            {
                push("batch/v1", "CronJob", parent);
            }
        }
        _ => {}
    }
    for (key, kind, api_version) in WORKLOAD_LABELS {
        if let Some(name) = label(key) {
            push(api_version, kind, name);
        }
    }
    refs
}

/// Whether a key is one of the annotations the engine reads from a pod template or object:
/// an exemption (`probelint.io/ignore`, `probelint.io/ignore.<container>`, its reason) or the
/// model load time. `probelint.io/mutated` is not: it records what was done to that object.
fn engine_annotation(key: &str, value: &str, exemptions: bool) -> bool {
    key == LOAD_SECONDS_ANNOTATION
        // `server` is evidence the Pods are judged by; `batch` and `interactive` set the
        // model-serving rules aside, which only a policy that honours exemptions allows.
        || (key == ROLE_ANNOTATION && (exemptions || value == "server"))
        || (exemptions
            && (key == IGNORE_ANNOTATION
                || key == IGNORE_REASON_ANNOTATION
                || key.starts_with(IGNORE_CONTAINER_PREFIX)))
}

/// A pod template of a workload: a pod spec at `<template>/spec` with the template's metadata
/// beside it, which the controller copies to each Pod. Pods (`/spec`) and KServe's components
/// (pod specs with their own `annotations`, which KServe merges with the object's) have none.
fn template_pointer<'p>(pod: &'p PodSpec<'_>) -> Option<&'p str> {
    pod.pointer.strip_suffix("/spec").filter(|t| !t.is_empty())
}

/// The object's own annotations the engine reads, as strings (annotations are strings; another
/// value would be refused by the apiserver, and means nothing here). Looked up before anything
/// else: most objects have none, and then there is nothing to analyse.
fn object_engine_annotations(object: &Value, exemptions: bool) -> Vec<(&str, &str)> {
    let [metadata] = pick(object, ["metadata"]);
    let [annotations] = metadata.map_or([None], |m| pick(m, ["annotations"]));
    let Some(annotations) = annotations.and_then(Value::as_object) else {
        return Vec::new();
    };
    annotations
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .filter(|(k, v)| engine_annotation(k, v, exemptions))
        .collect()
}

/// Copies of a workload's probelint annotations into its pod templates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Propagation {
    /// RFC 6902 operations against the object they were computed for.
    pub ops: Vec<PatchOperation>,
    /// The annotation keys copied (into one template or more), in the object's order.
    pub keys: Vec<String>,
}

/// Copies each probelint annotation of the object's metadata into every pod template that does
/// not set that key itself, so that the Pods its controller creates carry it: an exemption on a
/// Deployment then exempts its Pods too, and they are judged and fixed with its load time. A key
/// the template sets already is left alone (the template's own value is the one its Pods get).
/// Exemption keys are not copied when the policy ignores annotation exemptions.
pub fn propagation(object: &Value, policy: &Policy) -> Propagation {
    let mut out = Propagation::default();
    let wanted = object_engine_annotations(object, policy.allow_annotation_exemptions);
    if wanted.is_empty() {
        return out;
    }
    let workload = Workload::analyse(0, object, policy);
    for pod in &workload.pod_specs {
        let Some(template) = template_pointer(pod) else {
            continue;
        };
        let Some(template_value) = pointer::resolve(object, template).filter(|t| t.is_object())
        else {
            continue;
        };
        let missing: Vec<(&str, &str)> = wanted
            .iter()
            .filter(|(k, _)| pod.template_annotations.is_none_or(|a| !a.contains_key(*k)))
            .copied()
            .collect();
        if missing.is_empty() {
            continue;
        }
        let map = |pairs: &[(&str, &str)]| {
            Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
                    .collect::<Map<String, Value>>(),
            )
        };
        let metadata_ptr = pointer::join(template, "metadata");
        let metadata = fields::get(template_value, "metadata");
        match metadata {
            // `add` on a member that exists replaces it: a null metadata or annotations is
            // replaced whole, since there is nothing in it to keep.
            None | Some(Value::Null) => {
                let mut metadata = Map::new();
                metadata.insert("annotations".to_owned(), map(&missing));
                out.ops.push(add(metadata_ptr, Value::Object(metadata)));
            }
            Some(Value::Object(m)) => match m.get("annotations") {
                None | Some(Value::Null) => out.ops.push(add(
                    pointer::join(&metadata_ptr, "annotations"),
                    map(&missing),
                )),
                Some(Value::Object(_)) => {
                    let annotations = pointer::join(&metadata_ptr, "annotations");
                    for (k, v) in &missing {
                        out.ops.push(add(
                            pointer::join(&annotations, k),
                            Value::String((*v).to_owned()),
                        ));
                    }
                }
                // Annotations that are not a map: the apiserver refuses the object anyway.
                Some(_) => continue,
            },
            Some(_) => continue,
        }
        for (k, _) in missing {
            if !out.keys.iter().any(|known| known == k) {
                out.keys.push(k.to_owned());
            }
        }
    }
    // Keep the keys in the object's order, whatever the template order found them in.
    out.keys
        .sort_by_key(|k| wanted.iter().position(|(w, _)| w == k));
    out
}

/// Whether the comma-separated rule list `pods` (a template's `probelint.io/ignore...`) exempts
/// at least what `object` does.
fn covers(pods: &str, object: &str) -> bool {
    let listed = |list: &str| -> Vec<String> {
        list.split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let pods = listed(pods);
    pods.iter().any(|r| r == "all") || listed(object).iter().all(|r| pods.contains(r))
}

/// One line for each probelint annotation and policy exemption of a workload that does not
/// reach the Pods its controller creates, for the validating webhook's warnings (each under
/// 120 characters for an ordinary key and kind):
///
/// - an annotation of the object's metadata that a pod template lacks (or, for an exemption,
///   lists fewer rules): the template's Pods are judged, and fixed, without it;
/// - a policy exemption naming the object by kind or name, for a kind whose Pods [`owners`]
///   does not trace back to it.
///
/// Nothing for an object without pod templates, or with a controller of its own (what reaches
/// its Pods is its owner's business).
///
/// `workload` is `object`'s analysis, made once by the caller (admission judges the same one).
pub fn unreached(workload: &Workload<'_>, object: &Value, policy: &Policy) -> Vec<String> {
    let exemptions = policy.allow_annotation_exemptions;
    let annotations = object_engine_annotations(object, exemptions);
    if (annotations.is_empty() && policy.exemptions.is_empty()) || controller_of(object).is_some() {
        return Vec::new();
    }
    if workload.pod_specs.is_empty() {
        return Vec::new();
    }
    let kind = &workload.object_ref.kind;
    let mut lines = Vec::new();
    let templates: Vec<&PodSpec<'_>> = workload
        .pod_specs
        .iter()
        .filter(|p| template_pointer(p).is_some())
        .collect();
    for (key, value) in annotations {
        if key == IGNORE_REASON_ANNOTATION {
            continue;
        }
        let reaches = |pod: &&PodSpec<'_>| {
            let own = pod
                .template_annotations
                .and_then(|a| a.get(key))
                .and_then(Value::as_str);
            match own {
                Some(own) if key == LOAD_SECONDS_ANNOTATION => !own.is_empty(),
                Some(own) if key == ROLE_ANNOTATION => own == value,
                Some(own) => covers(own, value),
                None => false,
            }
        };
        if !templates.iter().all(reaches) {
            lines.push(format!(
                "{key} does not reach this {kind}'s Pods: set it in the pod template's annotations"
            ));
        }
    }
    if !TRACED_KINDS.contains(&kind.as_str()) {
        // What a Pod of this workload looks like to an exemption, with no trace to its owner.
        let pod = ObjectRef {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            namespace: workload.object_ref.namespace.clone(),
            name: None,
        };
        for (i, exemption) in policy.exemptions.iter().enumerate() {
            if exemption.matches_workload(&workload.object_ref) && !exemption.matches_workload(&pod)
            {
                lines.push(format!(
                    "policy exemptions[{i}] names this {kind} but not its Pods (probelint cannot trace them to it)"
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unreached_of(object: &Value, policy: &Policy) -> Vec<String> {
        unreached(&Workload::analyse(0, object, policy), object, policy)
    }

    fn pod(owner: Value, labels: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": "x-",
                "namespace": "serving",
                "labels": labels,
                "ownerReferences": [owner],
            },
            "spec": {"containers": [{"name": "c"}]},
        })
    }

    fn owner(kind: &str, name: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u", "controller": true, "blockOwnerDeletion": true})
    }

    fn names(refs: &[ObjectRef]) -> Vec<String> {
        refs.iter()
            .map(|r| format!("{} {}", r.kind, r.name.as_deref().unwrap_or("")))
            .collect()
    }

    #[test]
    fn a_deployments_pod_is_traced_through_its_replicaset() {
        let p = pod(
            owner("ReplicaSet", "llama-3-70b-5d8f7c9b4"),
            json!({"app": "llama", "pod-template-hash": "5d8f7c9b4"}),
        );
        let refs = owners(&p);
        assert_eq!(
            names(&refs),
            ["ReplicaSet llama-3-70b-5d8f7c9b4", "Deployment llama-3-70b"]
        );
        assert!(
            refs.iter()
                .all(|r| r.namespace.as_deref() == Some("serving"))
        );
        // A hash label that does not end the ReplicaSet's name names no Deployment.
        let p = pod(
            owner("ReplicaSet", "llama-3-70b-5d8f7c9b4"),
            json!({"pod-template-hash": "other"}),
        );
        assert_eq!(names(&owners(&p)), ["ReplicaSet llama-3-70b-5d8f7c9b4"]);
        let p = pod(
            owner("ReplicaSet", "canary-7c9"),
            json!({"rollouts-pod-template-hash": "7c9"}),
        );
        assert_eq!(
            names(&owners(&p)),
            ["ReplicaSet canary-7c9", "Rollout canary"]
        );
    }

    #[test]
    fn jobs_of_cronjobs_and_labelled_workloads_are_traced() {
        let p = pod(owner("Job", "nightly-eval-29384756"), json!({}));
        assert_eq!(
            names(&owners(&p)),
            ["Job nightly-eval-29384756", "CronJob nightly-eval"]
        );
        let p = pod(owner("Job", "train-v2"), json!({}));
        assert_eq!(names(&owners(&p)), ["Job train-v2"]);
        let p = pod(
            owner("StatefulSet", "llama-lws-0"),
            json!({"leaderworkerset.sigs.k8s.io/name": "llama-lws"}),
        );
        assert_eq!(
            names(&owners(&p)),
            ["StatefulSet llama-lws-0", "LeaderWorkerSet llama-lws"]
        );
        let p = pod(
            owner("ReplicaSet", "isvc-predictor-7f6d9"),
            json!({"serving.kserve.io/inferenceservice": "isvc", "pod-template-hash": "7f6d9"}),
        );
        assert_eq!(
            names(&owners(&p)),
            [
                "ReplicaSet isvc-predictor-7f6d9",
                "Deployment isvc-predictor",
                "InferenceService isvc"
            ]
        );
    }

    #[test]
    fn only_a_controller_reference_counts() {
        let mut p = pod(
            owner("ReplicaSet", "a-1"),
            json!({"pod-template-hash": "1"}),
        );
        p["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert!(controller_of(&p).is_none());
        assert!(owners(&p).is_empty());
        // Labels alone claim nothing.
        p["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
        p["metadata"]["labels"] = json!({"leaderworkerset.sigs.k8s.io/name": "exempt"});
        assert!(owners(&p).is_empty());
        for broken in [
            json!({"metadata": {"ownerReferences": "x"}}),
            json!({"metadata": {"ownerReferences": [7, {"controller": true}]}}),
            json!("pod"),
        ] {
            assert!(controller_of(&broken).is_none(), "{broken}");
            assert!(owners(&broken).is_empty());
        }
    }

    fn deployment(annotations: Value, template_annotations: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "llama", "namespace": "serving", "annotations": annotations},
            "spec": {"template": {
                "metadata": {"labels": {"app": "llama"}, "annotations": template_annotations},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3"}]}
            }}
        })
    }

    fn applied(object: &Value, ops: &[PatchOperation]) -> Value {
        let mut doc = object.clone();
        json_patch::patch(&mut doc, ops).expect("the propagation applies");
        doc
    }

    #[test]
    fn propagation_copies_the_objects_probelint_annotations_the_template_lacks() {
        let policy = Policy::default();
        let object = deployment(
            json!({
                "probelint.io/ignore": "all",
                "probelint.io/ignore-reason": "benchmark, never serves",
                "probelint.io/model-load-seconds": "900",
                "probelint.io/mutated": "gpu-startup-probe-missing:vllm",
                "team": "ml"
            }),
            json!({"probelint.io/model-load-seconds": "600"}),
        );
        let p = propagation(&object, &policy);
        assert_eq!(
            p.keys,
            ["probelint.io/ignore", "probelint.io/ignore-reason"]
        );
        let doc = applied(&object, &p.ops);
        assert_eq!(
            doc["spec"]["template"]["metadata"]["annotations"],
            json!({
                "probelint.io/model-load-seconds": "600",
                "probelint.io/ignore": "all",
                "probelint.io/ignore-reason": "benchmark, never serves"
            })
        );
        assert!(unreached_of(&doc, &policy).is_empty());
        assert_eq!(propagation(&doc, &policy), Propagation::default());
    }

    #[test]
    fn a_declared_role_reaches_the_pods_as_the_load_time_does() {
        let policy = Policy::default();
        let object = deployment(json!({"probelint.io/role": "server"}), json!({}));
        let p = propagation(&object, &policy);
        assert_eq!(p.keys, ["probelint.io/role"]);
        assert_eq!(
            unreached_of(&object, &policy),
            [
                "probelint.io/role does not reach this Deployment's Pods: set it in the pod template's annotations"
            ]
        );
        let doc = applied(&object, &p.ops);
        assert_eq!(
            doc["spec"]["template"]["metadata"]["annotations"]["probelint.io/role"],
            "server"
        );
        assert!(unreached_of(&doc, &policy).is_empty());
        // A template that declares another role keeps it, and is told it differs.
        let other = deployment(
            json!({"probelint.io/role": "server"}),
            json!({"probelint.io/role": "batch"}),
        );
        assert!(propagation(&other, &policy).keys.is_empty());
        assert_eq!(unreached_of(&other, &policy).len(), 1);
        // `batch` sets rules aside: a strict policy neither copies nor mentions it; `server`
        // is evidence, and still reaches the Pods.
        let strict = Policy::with_user_yaml("allowAnnotationExemptions: false\n").expect("policy");
        let batch = deployment(json!({"probelint.io/role": "batch"}), json!({}));
        assert!(propagation(&batch, &strict).keys.is_empty());
        assert!(unreached_of(&batch, &strict).is_empty());
        assert_eq!(propagation(&object, &strict).keys, ["probelint.io/role"]);
    }

    #[test]
    fn propagation_creates_missing_metadata_and_covers_every_template() {
        let policy = Policy::default();
        let object = json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "annotations": {"probelint.io/ignore.vllm": "gpu-readiness-probe-missing"}},
            "spec": {"leaderWorkerTemplate": {
                "leaderTemplate": {"metadata": null, "spec": {"containers": [{"name": "vllm"}]}},
                "workerTemplate": {"spec": {"containers": [{"name": "vllm"}]}}
            }}
        });
        let p = propagation(&object, &policy);
        assert_eq!(p.keys, ["probelint.io/ignore.vllm"]);
        let doc = applied(&object, &p.ops);
        for t in ["leaderTemplate", "workerTemplate"] {
            assert_eq!(
                doc["spec"]["leaderWorkerTemplate"][t]["metadata"]["annotations"]["probelint.io/ignore.vllm"],
                "gpu-readiness-probe-missing",
                "{t}"
            );
        }
        // A Pod has no template, nor an object without pod specs.
        for nothing in [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": {"probelint.io/ignore": "all"}}, "spec": {"containers": []}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {"probelint.io/ignore": "all"}}}),
        ] {
            assert_eq!(propagation(&nothing, &policy), Propagation::default());
        }
    }

    #[test]
    fn strict_mode_copies_and_reports_only_the_load_time() {
        let strict = Policy::with_user_yaml("allowAnnotationExemptions: false\n").expect("policy");
        let object = deployment(
            json!({"probelint.io/ignore": "all", "probelint.io/model-load-seconds": "900"}),
            json!({}),
        );
        assert_eq!(
            propagation(&object, &strict).keys,
            ["probelint.io/model-load-seconds"]
        );
        assert_eq!(unreached_of(&object, &strict).len(), 1);
    }

    #[test]
    fn unreached_names_each_annotation_the_templates_lack_or_narrow() {
        let policy = Policy::default();
        let object = deployment(
            json!({"probelint.io/ignore": "gpu-readiness-probe-missing, liveness-restart-loop", "probelint.io/model-load-seconds": "900"}),
            json!({"probelint.io/ignore": "gpu-readiness-probe-missing"}),
        );
        assert_eq!(
            unreached_of(&object, &policy),
            [
                "probelint.io/ignore does not reach this Deployment's Pods: set it in the pod template's annotations",
                "probelint.io/model-load-seconds does not reach this Deployment's Pods: set it in the pod template's annotations",
            ]
        );
        for line in unreached_of(&object, &policy) {
            assert!(line.chars().count() < 120, "{line}");
        }
        let wide = deployment(
            json!({"probelint.io/ignore": "gpu-readiness-probe-missing"}),
            json!({"probelint.io/ignore": "all"}),
        );
        assert!(unreached_of(&wide, &policy).is_empty());
        // Owned objects are their owner's business.
        let mut owned = object.clone();
        owned["metadata"]["ownerReferences"] = json!([owner("Deployment", "x")]);
        assert!(unreached_of(&owned, &policy).is_empty());
    }

    #[test]
    fn unreached_names_policy_exemptions_of_kinds_whose_pods_are_not_traced() {
        let policy = Policy::with_user_yaml(
            "exemptions:\n  - rules: [all]\n    kinds: [RayService]\n    names: [chat]\n    reason: r\n  - rules: [all]\n    namespaces: [serving]\n    reason: r\n  - rules: [all]\n    kinds: [Deployment]\n    names: [chat]\n    reason: r\n",
        )
        .expect("policy");
        let ray = json!({
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "chat", "namespace": "serving"},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head"}]}}}}}
        });
        assert_eq!(
            unreached_of(&ray, &policy),
            [
                "policy exemptions[0] names this RayService but not its Pods (probelint cannot trace them to it)"
            ]
        );
        let mut deploy = deployment(json!({}), json!({}));
        deploy["metadata"]["name"] = json!("chat");
        assert!(unreached_of(&deploy, &policy).is_empty());
    }
}
