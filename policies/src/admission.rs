//! The engine answers admission: what an admission request gets — left alone (with the reason),
//! judged, or fixed — decided here from what the apiserver says about the request, so that the
//! webhook keeps transport only (decode, call [`admit`], encode, log) and every decision is
//! unit-tested without HTTP. Each object is analysed once per request: the analysis that tells
//! whether an UPDATE changes any pod spec is the one the rules judge and the fixes patch.
//!
//! Who made an object is the request's `userInfo` ([`Controllers`]); what the object says about
//! itself (its ownerReferences, its labels) never decides on its own.

use crate::analysis::context::Analysis;
use crate::analysis::object::Workload;
use crate::engine::evaluate_analysed;
use crate::model::annotations::MUTATED_ANNOTATION;
use crate::model::finding::{Applicability, Finding, ObjectRef, Severity};
use crate::mutate::{AppliedFix, MutationPatch, merge_fixes, mutation_patch};
use crate::policy::Policy;
use crate::reach;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What the request does to the object (`request.operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// What the caller answers for: refusing, warning only, or fixing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Refuse on unsuppressed error findings, warn about the rest.
    Validate,
    /// Never refuse; for rolling admission out without breaking anyone.
    Warn,
    /// Apply the safe fixes as a JSON Patch.
    Mutate,
}

/// What the engine needs of an admission request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'r> {
    pub operation: Operation,
    /// `request.kind.group` (empty for the core group) and `.kind`.
    pub group: &'r str,
    pub kind: &'r str,
    /// `request.subResource`, when the request is for one (`scale`, `status`…).
    pub sub_resource: Option<&'r str>,
    /// `request.namespace`.
    pub namespace: Option<&'r str>,
    /// `request.userInfo.username`, as the apiserver authenticated it.
    pub username: &'r str,
}

/// Who may create objects that probelint treats as a controller's: the built-in controllers
/// ([`BUILTIN_CONTROLLER_USERS`](crate::export::BUILTIN_CONTROLLER_USERS)) and the operators
/// the caller was told about (the webhook's `--controller-service-account`). An object is a
/// controller's only when the request comes from one of them (`request.userInfo`, the
/// apiserver's word) *and* the object names its controller in `ownerReferences`: anyone may
/// write an ownerReference (to the `kube-root-ca.crt` ConfigMap every namespace has, say), so
/// what an object says about itself never decides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Controllers {
    operators: BTreeSet<String>,
}

impl Controllers {
    /// The built-in controllers and these operators' usernames (empty ones are ignored).
    pub fn with_operators<I, S>(operators: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Controllers {
            operators: operators
                .into_iter()
                .map(Into::into)
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
        }
    }

    /// The operators' usernames, as configured.
    pub fn operators(&self) -> impl Iterator<Item = &str> {
        self.operators.iter().map(String::as_str)
    }

    /// Whether `username` is a controller's.
    pub fn contains(&self, username: &str) -> bool {
        crate::export::BUILTIN_CONTROLLER_USERS.contains(&username)
            || self.operators.contains(username)
    }
}

/// The label that takes an object out of admission by default (`<label>=true`), where the
/// policy allows an object to exempt itself (`allowAnnotationExemptions`).
pub const OPT_OUT_LABEL: &str = "probelint.io/ignore";

/// What admission was started with that decides requests beside the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whose objects are a controller's.
    pub controllers: Controllers,
    /// `<label>=true` on an object opts it out, when the policy allows annotation exemptions.
    pub opt_out_label: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            controllers: Controllers::default(),
            opt_out_label: OPT_OUT_LABEL.to_owned(),
        }
    }
}

/// What a request gets.
#[derive(Debug)]
pub enum Answer {
    /// Allowed unevaluated, for `reason`. `opted_out`: the object opted itself out with the
    /// opt-out label (counted as an exemption).
    Skipped { reason: String, opted_out: bool },
    /// An UPDATE that changes the object's own probelint annotations and no pod spec: nothing
    /// is judged, but whoever changed them learns which do not reach its Pods (never empty).
    Unreached(Vec<String>),
    /// Judged (validate and warn modes).
    Judged(Judgement),
    /// Fixed (mutate mode).
    Mutated(Mutated),
}

/// Why an UPDATE that changes no pod spec is not evaluated.
pub const UNCHANGED: &str = "the UPDATE leaves every pod spec unchanged";

/// The verdict on a judged object.
#[derive(Debug)]
pub struct Judgement {
    /// Every finding, suppressed ones included, most severe first.
    pub findings: Vec<Finding>,
    /// Whether unsuppressed errors refuse the request: validate mode, and not a Pod a
    /// controller creates.
    pub refuses: bool,
    /// The controller of a Pod that one created (`Kind name`): judged, never refused.
    pub controller: Option<String>,
    /// Said about the request itself: ownerReferences naming a controller in a request that no
    /// controller sent, an opt-out label that is not honoured.
    pub notes: Vec<String>,
    /// The object's probelint annotations and policy exemptions that do not reach its Pods
    /// ([`reach::unreached`]); empty for a Pod a controller created.
    pub unreached: Vec<String>,
    /// The object judged, as findings name it.
    pub object: ObjectRef,
}

impl Judgement {
    /// The findings that refuse the request (none unless [`Judgement::refuses`]), and the
    /// others that are not suppressed, both most severe first.
    pub fn partition(&self) -> (Vec<&Finding>, Vec<&Finding>) {
        self.findings
            .iter()
            .filter(|f| !f.is_suppressed())
            .partition(|f| f.severity == Severity::Error && self.refuses)
    }
}

/// The fixes for a mutated object.
#[derive(Debug)]
pub struct Mutated {
    /// The findings of the object as sent (fixed ones included).
    pub findings: Vec<Finding>,
    /// What the patch fixes.
    pub applied: Vec<AppliedFix>,
    /// The patch to send, or why the engine's own patch does not apply to the object it was
    /// computed for (an engine bug: send nothing).
    pub patch: Result<MutationPatch, json_patch::PatchError>,
}

/// Decides what a request gets (webhook/README.md, "What is judged, and what is left alone"):
///
/// - DELETE, CONNECT and subresources (`scale`, `status`, `eviction`...) carry no pod template:
///   allowed. An HPA scales through `scale`.
/// - An object a controller creates, other than a Pod: one with a controller
///   (`ownerReferences[].controller: true`) that comes from a controller ([`Controllers`]): a
///   ReplicaSet of a Deployment or Rollout, a CronJob's Job, a LeaderWorkerSet's StatefulSet, a
///   KServe Deployment. Its controller recreates it whenever its template differs from the one
///   the controller wants (the Deployment controller compares templates and makes a new
///   ReplicaSet), so mutating it loops, and refusing it blocks the controller's scaling and
///   rollouts with an error no person sees. What it was made from was judged when a person
///   applied it, and its Pods are judged when they are created.
/// - UPDATE of a Pod, a Job, a JobSet or a RayJob: their Pods come from the spec they were
///   created with (a Pod's containers and probes, a Job's and a JobSet's templates are
///   immutable; Kueue changes only where they are scheduled), which was judged at CREATE. A
///   patch would be refused by the apiserver, and a denial would keep a queued workload from
///   ever starting.
/// - Any other UPDATE that leaves every pod spec unchanged (`replicas`, labels, a rollout
///   restart's annotation, a KServe component's scaling bounds): what runs does not change, so
///   a workload that predates admission can still be scaled, or stopped with `replicas: 0`,
///   and a mutation cannot restart its Pods unasked.
/// - Everything else is evaluated; a Pod a controller creates is judged but never refused. An
///   object whose ownerReferences name a controller, sent by anyone else, is judged (and
///   refused) as its author's, with a note that says why.
pub fn admit(
    request: Request<'_>,
    object: Option<Value>,
    old_object: Option<&Value>,
    mode: Mode,
    policy: &Policy,
    settings: &Settings,
) -> Answer {
    let skipped = |reason: String| Answer::Skipped {
        reason,
        opted_out: false,
    };
    match request.operation {
        Operation::Delete => return skipped("DELETE is not checked".into()),
        Operation::Connect => return skipped("CONNECT is not checked".into()),
        Operation::Create | Operation::Update => {}
    }
    if let Some(sub) = request.sub_resource.filter(|s| !s.is_empty()) {
        return skipped(format!("subresource {sub:?} is not checked"));
    }
    let Some(mut object) = object else {
        return skipped("the request carries no object".into());
    };
    let mut notes = Vec::new();
    if opts_out(&object, &settings.opt_out_label) {
        let label = &settings.opt_out_label;
        if policy.allow_annotation_exemptions {
            return Answer::Skipped {
                reason: format!("opted out by the label {label}=true"),
                opted_out: true,
            };
        }
        notes.push(format!(
            "the label {label}=true is not honoured: the policy does not let an object exempt \
             itself (allowAnnotationExemptions: false)"
        ));
    }
    let is_pod = request.group.is_empty() && request.kind == "Pod";
    let from_controller = settings.controllers.contains(request.username);
    let owner = reach::controller_of(&object).map(|c| c.to_string());
    let (controller, claimed) = match owner {
        Some(owner) if from_controller => (Some(owner), None),
        Some(owner) => (None, Some(owner)),
        None => (None, None),
    };
    if let Some(controller) = controller.as_ref().filter(|_| !is_pod) {
        return skipped(match mode {
            Mode::Mutate => format!(
                "managed by {controller}: changing its pod template would fight that controller; its Pods get the fixes"
            ),
            Mode::Validate | Mode::Warn => {
                format!("managed by {controller}: judged as what it was made from, and by its Pods")
            }
        });
    }
    if request.operation == Operation::Update
        && let Some(reason) = judged_at_create(request.group, request.kind)
    {
        return skipped(reason);
    }
    if let Some(owner) = &claimed {
        let who = if request.username.is_empty() {
            "an unnamed user"
        } else {
            request.username
        };
        notes.insert(
            0,
            format!("ownerReferences name {owner} as controller, but {who} is no controller: judged as {who}'s"),
        );
    }
    prepare(&mut object, claimed.is_some(), request.namespace, mode);
    let workload = Workload::analyse(0, &object, policy);
    if request.operation == Operation::Update
        && let Some(old) = old_object
        && !pod_specs_changed(&workload, &Workload::analyse(0, old, policy))
    {
        let annotations_changed = probelint_annotations(object_annotations(&object))
            != probelint_annotations(object_annotations(old));
        let unreached = if annotations_changed && mode != Mode::Mutate {
            reach::unreached(&workload, &object, policy)
        } else {
            Vec::new()
        };
        return if unreached.is_empty() {
            skipped(UNCHANGED.into())
        } else {
            Answer::Unreached(unreached)
        };
    }
    let object_ref = ObjectRef::clone(&workload.object_ref);
    let analysis = Analysis::of(workload, policy);
    let mut findings = evaluate_analysed(&analysis, &object, policy);
    match mode {
        Mode::Validate | Mode::Warn => {
            // Most severe first: in the denial message and in kubectl's list of warnings.
            findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
            let unreached = if controller.is_none() {
                reach::unreached(&analysis.workloads[0], &object, policy)
            } else {
                Vec::new()
            };
            Answer::Judged(Judgement {
                refuses: mode == Mode::Validate && controller.is_none(),
                findings,
                controller,
                notes,
                unreached,
                object: object_ref,
            })
        }
        Mode::Mutate => {
            drop(analysis);
            let (patch, applied) = merge_fixes(&findings, Applicability::Safe);
            let patch = mutation_patch(object, patch, &applied, policy);
            Answer::Mutated(Mutated {
                findings,
                applied,
                patch,
            })
        }
    }
}

/// The object as it is judged. An owner claimed by someone who is not a controller claims
/// nothing: not the policy exemptions of the workload it names (the engine traces a Pod's
/// exemptions to its owners), not its silence about unreached annotations; it is judged as its
/// author's. (Kept for mutate mode, whose patch must apply to the object as sent; it only adds
/// fixes.) Policy exemptions and messages name the namespace: the apiserver copies it from the
/// URL into the object before admission, but a review from another client may only carry it in
/// the request (written only into an existing `metadata`: a patch must apply to the real object).
fn prepare(object: &mut Value, claimed: bool, namespace: Option<&str>, mode: Mode) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if claimed && mode != Mode::Mutate {
        metadata.remove("ownerReferences");
    }
    if let Some(namespace) = namespace.filter(|ns| !ns.is_empty())
        && metadata.get("namespace").is_none_or(Value::is_null)
    {
        metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
}

/// Whether `metadata.labels.<label>` of the object is `"true"`.
fn opts_out(object: &Value, label: &str) -> bool {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(label))
        .and_then(Value::as_str)
        == Some("true")
}

/// Why an UPDATE of this kind is never evaluated: its Pods come from the spec it was created
/// with (see [`admit`]).
fn judged_at_create(group: &str, kind: &str) -> Option<String> {
    match (group, kind) {
        ("", "Pod") => Some(
            "a Pod's containers and probes cannot change after it is created: it was judged at CREATE"
                .into(),
        ),
        ("batch", "Job") | ("jobset.x-k8s.io", "JobSet") | ("ray.io", "RayJob") => Some(format!(
            "a {kind}'s Pods come from the template it was created with: it was judged at CREATE"
        )),
        _ => None,
    }
}

/// Fields of a KServe component (a pod spec with more fields beside it) that do not go into
/// its Pods: scaling, traffic split, the Pods' labels and annotations (beside a template's
/// metadata, which is not compared either), and the worker spec, which is a pod spec of its own.
/// (`ComponentExtensionSpec`, kserve `pkg/apis/serving/v1beta1/component.go`.)
const COMPONENT_NON_POD_KEYS: &[&str] = &[
    "minReplicas",
    "maxReplicas",
    "scaleTarget",
    "scaleMetric",
    "scaleMetricType",
    "autoScaling",
    "canaryTrafficPercent",
    "labels",
    "annotations",
    "workerSpec",
];

/// Whether an UPDATE changes what the object's Pods are made of: a pod spec (at any of the
/// places the engine finds them: both LeaderWorkerSet templates, every Ray worker group...), the
/// set of pod specs, or the probelint annotations of a template (the engine reads them). A
/// template's other metadata (a rollout restart's `restartedAt`, labels) and everything outside
/// the pod specs (`replicas`, `paused`, strategies) is not compared.
fn pod_specs_changed(new: &Workload<'_>, old: &Workload<'_>) -> bool {
    let (new_specs, old_specs) = (pod_specs_by_pointer(new), pod_specs_by_pointer(old));
    if new_specs.len() != old_specs.len() {
        return true;
    }
    new_specs.iter().any(|(pointer, (spec, annotations))| {
        let Some((old_spec, old_annotations)) = old_specs.get(pointer) else {
            return true;
        };
        annotations != old_annotations || !same_pod_spec(pointer, spec, old_spec)
    })
}

/// A pod spec and its template's probelint annotations.
type PodSpecView<'w> = (&'w Value, Vec<(&'w String, &'w Value)>);

/// The workload's pod specs by pointer.
fn pod_specs_by_pointer<'w>(workload: &'w Workload<'_>) -> BTreeMap<&'w str, PodSpecView<'w>> {
    workload
        .pod_specs
        .iter()
        .map(|p| {
            (
                p.pointer.as_str(),
                (p.value, probelint_annotations(p.template_annotations)),
            )
        })
        .collect()
}

/// Two pod specs at `pointer`, equal as the Pods they make. A pod spec beside its template's
/// metadata (`…/template/spec`) is compared whole; any other (a KServe component) without the
/// fields in [`COMPONENT_NON_POD_KEYS`]. Key order never matters.
fn same_pod_spec(pointer: &str, new: &Value, old: &Value) -> bool {
    let in_template = pointer.strip_suffix("/spec").is_some_and(|t| !t.is_empty());
    match (new.as_object(), old.as_object()) {
        (Some(new), Some(old)) if !in_template => {
            let pod = |k: &&String| !COMPONENT_NON_POD_KEYS.contains(&k.as_str());
            new.keys().filter(pod).count() == old.keys().filter(pod).count()
                && new
                    .iter()
                    .filter(|(k, _)| pod(k))
                    .all(|(k, v)| old.get(k) == Some(v))
        }
        _ => new == old,
    }
}

/// `metadata.annotations` of an object.
fn object_annotations(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata")?.get("annotations")?.as_object()
}

/// The `probelint.io/` annotations of a map, sorted, without `probelint.io/mutated` (which the
/// mutating webhook writes on the object, and which changes nothing that is judged).
fn probelint_annotations(annotations: Option<&Map<String, Value>>) -> Vec<(&String, &Value)> {
    let mut found: Vec<(&String, &Value)> = annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("probelint.io/") && k.as_str() != MUTATED_ANNOTATION)
        .collect();
    found.sort_by_key(|(k, _)| *k);
    found
}

#[cfg(test)]
mod tests;
