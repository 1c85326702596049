//! AdmissionReview in, AdmissionReview out: decide whether to look at the object (skip), then
//! ask the engine (validate | mutate). Pure functions: no HTTP, no I/O, no clock, so every
//! decision is unit-tested and `server.rs` only moves bytes. The wire types are in
//! [`crate::admission`], the text kubectl shows in `messages.rs`.

use crate::admission::{
    self, GroupVersionKind, Operation, Request, Response, ReviewError, ReviewOut, Status,
};
use crate::messages::{
    at_most_listed, audit_annotations, denial_message, finding_warning, fix_warnings, shorten,
};
use probelint_policies::Workload;
use probelint_policies::{Finding, ObjectRef, Policy, Severity, reach};
use probelint_policies::{MUTATED_ANNOTATION, Mutation, MutationPatch, mutation_patch};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Which endpoint the review came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `POST /validate`: deny on unsuppressed error findings, warn about the rest.
    Validate,
    /// `POST /validate/warn`: never deny; for rolling the webhook out without breaking anyone.
    Warn,
    /// `POST /mutate`: apply the engine's safe fixes as a JSON Patch.
    Mutate,
}

impl Mode {
    /// The endpoint name used in metrics and logs.
    pub fn endpoint(self) -> &'static str {
        match self {
            Mode::Validate => "validate",
            Mode::Warn => "validate/warn",
            Mode::Mutate => "mutate",
        }
    }
}

/// What the webhook decided about one review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Evaluated; nothing to say.
    Allowed,
    /// Allowed, with warnings.
    Warned,
    /// Refused: an unsuppressed error finding (only on `/validate`).
    Denied,
    /// Allowed with a JSON Patch (only on `/mutate`).
    Patched,
    /// Allowed without evaluation, for the given reason (DELETE, a subresource, an UPDATE that
    /// leaves the pod template alone...).
    Skipped(String),
    /// Not answered: the body is not a review we can read (HTTP 4xx).
    Invalid,
    /// Not answered: the webhook failed while answering (a panic, a timeout; HTTP 5xx).
    Error,
}

impl Decision {
    /// The `decision` label of the request metric.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Warned => "warned",
            Decision::Denied => "denied",
            Decision::Patched => "patched",
            Decision::Skipped(_) => "skipped",
            Decision::Invalid => "invalid",
            Decision::Error => "error",
        }
    }
}

/// The request fields worth a log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub uid: String,
    /// `group/version/Kind`, `v1/Pod` for the core group.
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub operation: &'static str,
    pub dry_run: bool,
    /// `request.userInfo.username`: who sent it.
    pub username: String,
}

/// Everything the server needs from one review: the response, and what to log and count.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub review: ReviewOut,
    pub decision: Decision,
    /// All findings, suppressed ones included (empty when the object was not evaluated).
    pub findings: Vec<Finding>,
    pub summary: Summary,
    /// A problem that did not stop the review but deserves an error log (a fix that does not
    /// apply to its own object is an engine bug).
    pub internal_error: Option<String>,
    /// The object opted itself out with the opt-out label (allowed unevaluated).
    pub opted_out: bool,
}

impl Outcome {
    /// What exempted this review from some of its judgement, each once: `label` (the object
    /// opted out), `annotation` or `policy` (a finding suppressed by one). Empty when nothing was
    /// exempted.
    pub fn exemptions(&self) -> Vec<&'static str> {
        let mut sources = Vec::new();
        if self.opted_out {
            sources.push("label");
        }
        for finding in &self.findings {
            let source = match finding.suppressed.as_ref().map(|s| s.source) {
                Some(probelint_policies::SuppressionSource::Annotation) => "annotation",
                Some(probelint_policies::SuppressionSource::Policy) => "policy",
                None => continue,
            };
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        sources
    }
}

/// The usernames the apiserver gives the built-in controllers that create objects with pod
/// specs. One list, shared with the exported admission policies, so the webhook, the chart and the
/// policies cannot disagree on who is a controller.
pub use probelint_policies::export::BUILTIN_CONTROLLER_USERS as BUILTIN_CONTROLLERS;

/// Who may create objects that probelint treats as a controller's: the built-in controllers
/// ([`BUILTIN_CONTROLLERS`]) and the operators the webhook was told about
/// (`--controller-service-account`, the chart's `webhook.controllerServiceAccounts`). An object
/// is a controller's only when the request comes from one of them (`request.userInfo`, the
/// apiserver's word) *and* the object names its controller in `ownerReferences`: anyone may
/// write an ownerReference (to the `kube-root-ca.crt` ConfigMap every namespace has, say), so
/// what an object says about itself never decides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Controllers {
    operators: std::collections::BTreeSet<String>,
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
        BUILTIN_CONTROLLERS.contains(&username) || self.operators.contains(username)
    }
}

/// The label that takes an object out of both webhooks' scope by default (`<label>=true`), where
/// the policy allows an object to exempt itself (`allowAnnotationExemptions`).
pub const OPT_OUT_LABEL: &str = "probelint.io/ignore";

/// What the webhook was started with that decides reviews beside the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whose objects are a controller's.
    pub controllers: Controllers,
    /// `<label>=true` on an object opts it out, when the policy allows annotation exemptions
    /// (`--object-opt-out-label`, the chart's `webhook.objectOptOutLabel`).
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

/// Parses a body and answers it with the default [`Settings`].
pub fn admit(body: &[u8], mode: Mode, policy: &Policy) -> Result<Outcome, ReviewError> {
    admit_with(body, mode, policy, &Settings::default())
}

/// Parses a body and answers it.
pub fn admit_with(
    body: &[u8],
    mode: Mode,
    policy: &Policy,
    settings: &Settings,
) -> Result<Outcome, ReviewError> {
    Ok(respond(admission::parse(body)?, mode, policy, settings))
}

/// Answers one request. Takes it by value: the object is evaluated (and patched) in place.
pub fn respond(
    mut request: Request<'_>,
    mode: Mode,
    policy: &Policy,
    settings: &Settings,
) -> Outcome {
    let object = request.object.take().map(Value::Object);
    let old_object = request.old_object.take().map(Value::Object);
    let scope = scope(
        &request,
        object.as_ref(),
        old_object.as_ref(),
        mode,
        policy,
        settings,
    );
    drop(old_object);
    let response = Response::from(&request);
    let summary = summarize(request);
    let verdict = decide(
        scope,
        object,
        response,
        summary.namespace.as_deref(),
        mode,
        policy,
    );
    Outcome {
        review: verdict.response.into_review(),
        decision: verdict.decision,
        findings: verdict.findings,
        summary,
        internal_error: verdict.internal_error,
        opted_out: verdict.opted_out,
    }
}

/// What a request comes to: the response, and what to count and log about it.
struct Verdict {
    response: Response,
    decision: Decision,
    findings: Vec<Finding>,
    internal_error: Option<String>,
    opted_out: bool,
}

impl Verdict {
    /// `response` as it is, for `decision`, with no findings.
    fn new(response: Response, decision: Decision) -> Self {
        Verdict {
            response,
            decision,
            findings: Vec::new(),
            internal_error: None,
            opted_out: false,
        }
    }
}

/// Skip, or validate, or mutate, as `scope` says. `namespace`: the request's.
fn decide(
    scope: Scope,
    object: Option<Value>,
    response: Response,
    namespace: Option<&str>,
    mode: Mode,
    policy: &Policy,
) -> Verdict {
    let skipped = |response, reason: String| Verdict::new(response, Decision::Skipped(reason));
    let (controller, claimed, notes, annotations_only) = match scope {
        Scope::Skip(reason) => return skipped(response, reason),
        Scope::OptedOut(reason) => {
            let mut verdict = skipped(response, reason);
            verdict.opted_out = true;
            return verdict;
        }
        Scope::Unchanged {
            annotations_changed: false,
        } => return skipped(response, UNCHANGED.into()),
        Scope::Unchanged {
            annotations_changed: true,
        } => (None, None, Vec::new(), true),
        Scope::Evaluate {
            controller,
            claimed,
            notes,
        } => (controller, claimed, notes, false),
    };
    let Some(mut object) = object else {
        return skipped(response, "the request carries no object".into());
    };
    // An owner claimed by someone who is not a controller claims nothing: not the policy
    // exemptions of the workload it names (the engine traces a Pod's exemptions to its owners),
    // not its silence about unreached annotations. The object is judged as its author's. (Kept
    // for `/mutate`, whose patch must apply to the object as sent; it only adds fixes.)
    if claimed.is_some()
        && mode != Mode::Mutate
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.remove("ownerReferences");
    }
    // Policy exemptions and messages name the namespace. The apiserver copies it from the URL
    // into the object before admission, but a review from another client may only carry it in
    // the request. (Only into an existing `metadata`: the patch must apply to the real object.)
    if let (Some(namespace), Some(metadata)) = (
        namespace.filter(|ns| !ns.is_empty()),
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) && metadata.get("namespace").is_none_or(Value::is_null)
    {
        metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
    if annotations_only {
        return unreached_annotations(response, &object, mode, policy);
    }
    match mode {
        Mode::Validate | Mode::Warn => {
            let mut verdict = validate(response, &object, mode, controller, policy);
            let said = claimed.iter().chain(&notes).map(|w| shorten(w));
            verdict.response.warnings.extend(said);
            if verdict.decision == Decision::Allowed && !verdict.response.warnings.is_empty() {
                verdict.decision = Decision::Warned;
            }
            verdict
        }
        Mode::Mutate => mutate(response, object, policy),
    }
}

/// An UPDATE that changes the object's own probelint annotations and no pod spec: nothing to
/// judge, but whoever changed them should learn whether its Pods will see them.
fn unreached_annotations(
    mut response: Response,
    object: &Value,
    mode: Mode,
    policy: &Policy,
) -> Verdict {
    if mode != Mode::Mutate {
        response.warnings = reach::unreached(object, policy)
            .iter()
            .map(|w| shorten(w))
            .collect();
    }
    let decision = if response.warnings.is_empty() {
        Decision::Skipped(UNCHANGED.into())
    } else {
        Decision::Warned
    };
    Verdict::new(response, decision)
}

/// Why an UPDATE that changes no pod spec is not evaluated.
const UNCHANGED: &str = "the UPDATE leaves every pod spec unchanged";

/// What a review gets, decided from the request before any rule runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    /// Allowed at once, unevaluated, for this reason.
    Skip(String),
    /// An UPDATE that leaves every pod spec (and the probelint annotations of its templates)
    /// as it was: what runs does not change, so it is neither judged nor mutated. Whether it
    /// changes the object's own probelint annotations decides whether the validating webhook
    /// says if those reach the Pods.
    Unchanged { annotations_changed: bool },
    /// Judged or mutated. `controller` names the controller of a Pod that one created;
    /// `claimed`, the warning for an object whose ownerReferences name a controller although
    /// the request does not come from one (judged as its author's).
    Evaluate {
        controller: Option<String>,
        claimed: Option<String>,
        /// Warnings about the request itself (an opt-out label that is not honoured).
        notes: Vec<String>,
    },
    /// The object opts itself out (`<label>=true`) and the policy allows it: allowed
    /// unevaluated, for this reason, and counted as an exemption.
    OptedOut(String),
}

/// Decides what a request gets (webhook/README.md, "What is judged, and what is left alone"):
///
/// - DELETE, CONNECT and subresources (`scale`, `status`, `eviction`...) carry no pod template:
///   allowed. An HPA scales through `scale`.
/// - An object a controller creates, other than a Pod: one with a controller
///   (`ownerReferences[].controller: true`) that comes from a controller ([`Controllers`]: the
///   apiserver's `userInfo`, not the object, says who sent it): a
///   ReplicaSet of a Deployment or Rollout, a CronJob's Job, a LeaderWorkerSet's StatefulSet, a
///   KServe Deployment. Its controller recreates it whenever its template differs from the one
///   the controller wants (the Deployment controller compares templates and makes a new
///   ReplicaSet), so mutating it loops, and refusing it blocks the controller's scaling and
///   rollouts with an error no person sees. What it was made from was judged when a person
///   applied it, and its Pods are judged when they are created.
/// - UPDATE of a Pod, a Job, a JobSet or a RayJob: their Pods come from the spec they were
///   created with (a Pod's containers and probes, a Job's and a JobSet's templates are
///   immutable; Kueue changes only where they are scheduled), which was judged at CREATE. A patch would be refused by the apiserver, and a denial would keep a
///   queued workload from ever starting.
/// - Any other UPDATE that leaves every pod spec unchanged (`replicas`, labels, a rollout
///   restart's annotation, a KServe component's scaling bounds): what runs does not change, so
///   a workload that predates the webhook can still be scaled, or stopped with `replicas: 0`,
///   and a mutation cannot restart its Pods unasked.
/// - Everything else is evaluated; a Pod a controller creates is judged but never refused
///   (see [`validate`]). An object whose ownerReferences name a controller, sent by anyone
///   else, is judged (and refused) as its author's, with a warning that says why.
fn scope(
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    mode: Mode,
    policy: &Policy,
    settings: &Settings,
) -> Scope {
    match request.operation {
        Operation::Delete => return Scope::Skip("DELETE is not checked".into()),
        Operation::Connect => return Scope::Skip("CONNECT is not checked".into()),
        Operation::Create | Operation::Update => {}
    }
    if let Some(sub) = request.sub_resource.as_deref().filter(|s| !s.is_empty()) {
        return Scope::Skip(format!("subresource {sub:?} is not checked"));
    }
    let Some(object) = object else {
        return Scope::Skip("the request carries no object".into());
    };
    let mut notes = Vec::new();
    if opts_out(object, &settings.opt_out_label) {
        let label = &settings.opt_out_label;
        if policy.allow_annotation_exemptions {
            return Scope::OptedOut(format!("opted out by the label {label}=true"));
        }
        notes.push(format!(
            "the label {label}=true is not honoured: the policy does not let an object exempt \
             itself (allowAnnotationExemptions: false)"
        ));
    }
    let kind = &request.kind;
    let is_pod = kind.group.is_empty() && kind.kind == "Pod";
    let owner = reach::controller_of(object);
    let username = request.user_info.username.as_str();
    let from_controller = settings.controllers.contains(username);
    let controller = owner.filter(|_| from_controller);
    let claimed = owner.filter(|_| !from_controller).map(|owner| {
        let who = if username.is_empty() {
            "an unnamed user"
        } else {
            username
        };
        format!("ownerReferences name {owner} as controller, but {who} is no controller: judged as {who}'s")
    });
    if let Some(controller) = controller.filter(|_| !is_pod) {
        return Scope::Skip(match mode {
            Mode::Mutate => format!(
                "managed by {controller}: changing its pod template would fight that controller; its Pods get the fixes"
            ),
            Mode::Validate | Mode::Warn => {
                format!("managed by {controller}: judged as what it was made from, and by its Pods")
            }
        });
    }
    if request.operation == Operation::Update {
        if let Some(reason) = judged_at_create(kind) {
            return Scope::Skip(reason);
        }
        if let Some(old) = old
            && !pod_specs_changed(object, old, policy)
        {
            return Scope::Unchanged {
                annotations_changed: probelint_annotations(object_annotations(object))
                    != probelint_annotations(object_annotations(old)),
            };
        }
    }
    Scope::Evaluate {
        controller: controller.map(|c| c.to_string()),
        claimed,
        notes,
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
/// with (see [`scope`]).
fn judged_at_create(kind: &GroupVersionKind<'_>) -> Option<String> {
    match (kind.group.as_ref(), kind.kind.as_ref()) {
        ("", "Pod") => Some(
            "a Pod's containers and probes cannot change after it is created: it was judged at CREATE"
                .into(),
        ),
        ("batch", "Job") | ("jobset.x-k8s.io", "JobSet") | ("ray.io", "RayJob") => Some(format!(
            "a {}'s Pods come from the template it was created with: it was judged at CREATE",
            kind.kind
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
fn pod_specs_changed(new: &Value, old: &Value, policy: &Policy) -> bool {
    let new = Workload::analyse(0, new, policy);
    let old = Workload::analyse(0, old, policy);
    let (new_specs, old_specs) = (pod_specs_by_pointer(&new), pod_specs_by_pointer(&old));
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

/// `/validate` and `/validate/warn`. Suppressed findings never deny and never warn (the user
/// asked for silence and gave a reason); they are still written to the audit annotation.
///
/// A Pod that a `controller` creates is judged but never refused: it comes from a template that
/// was judged when a person applied it, or that predates the webhook or the policy; refusing it
/// reaches no person (the controller retries, the error is in its events) and blocks what the
/// controller is for: scaling up, replacing the Pods of a drained node, finishing the rollout
/// that fixes the template. Its errors become warnings, in the audit log and the metrics.
///
/// For a workload, warns also about its exemptions and load time that will not reach its Pods
/// ([`reach::unreached`]).
fn validate(
    mut response: Response,
    object: &Value,
    mode: Mode,
    controller: Option<String>,
    policy: &Policy,
) -> Verdict {
    let mut findings = probelint_policies::evaluate_one(object, policy);
    // Most severe first: in the denial message and in kubectl's list of warnings.
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let active: Vec<&Finding> = findings.iter().filter(|f| !f.is_suppressed()).collect();
    let refuses = mode == Mode::Validate && controller.is_none();
    let (errors, rest): (Vec<&Finding>, Vec<&Finding>) = active
        .iter()
        .partition(|f| f.severity == Severity::Error && refuses);

    response.audit_annotations = audit_annotations(&findings);
    response.warnings = at_most_listed(rest.iter().map(|f| finding_warning(f)).collect());
    match &controller {
        Some(controller)
            if mode == Mode::Validate && rest.iter().any(|f| f.severity == Severity::Error) =>
        {
            response.warnings.push(shorten(&format!(
                "not refused: probelint never refuses the Pods a controller ({controller}) creates"
            )));
        }
        Some(_) => {}
        None => response
            .warnings
            .extend(reach::unreached(object, policy).iter().map(|w| shorten(w))),
    }
    let decision = if !errors.is_empty() {
        response = response.deny(Status::forbidden(denial_message(
            &ObjectRef::from_object(object),
            &errors,
            policy.allow_annotation_exemptions,
        )));
        Decision::Denied
    } else if response.warnings.is_empty() {
        Decision::Allowed
    } else {
        Decision::Warned
    };
    Verdict {
        response,
        decision,
        findings,
        internal_error: None,
        opted_out: false,
    }
}

/// `/mutate`: never denies (refusing is the validating webhook's job, and it runs after us on the
/// mutated object). Warns only about what it changed, so that nobody is surprised by a probe they
/// did not write; the findings go to the audit annotation. Besides the fixes, copies the
/// object's probelint annotations into its pod templates ([`reach::propagation`]), so that an
/// exemption or load time declared on a workload reaches its Pods.
fn mutate(mut response: Response, object: Value, policy: &Policy) -> Verdict {
    let Mutation {
        patch,
        applied,
        findings,
    } = probelint_policies::mutate(&object, policy);
    response.audit_annotations = audit_annotations(&findings);
    let mut verdict = match mutation_patch(object, patch, &applied, policy) {
        Ok(MutationPatch { patch, .. }) if patch.0.is_empty() => {
            Verdict::new(response, Decision::Allowed)
        }
        Ok(MutationPatch { patch, propagated }) => {
            let mut response = response.with_patch(&patch);
            response.warnings = at_most_listed(fix_warnings(&applied));
            if !propagated.is_empty() {
                response.warnings.push(shorten(&format!(
                    "probelint copied {} into the pod template, so that its Pods carry it",
                    propagated.join(", ")
                )));
            }
            Verdict::new(response, Decision::Patched)
        }
        Err(e) => {
            // Never send a patch the apiserver would fail to apply: that fails the request.
            response.warnings =
                vec!["probelint could not apply its fixes; the object is unchanged".into()];
            let mut verdict = Verdict::new(response, Decision::Allowed);
            verdict.internal_error = Some(format!(
                "the engine's patch does not apply to the object it was computed for: {e}"
            ));
            verdict
        }
    };
    verdict.findings = findings;
    verdict
}

/// What to log about a request; takes its strings rather than copying them.
fn summarize(request: Request<'_>) -> Summary {
    let kind = &request.kind;
    Summary {
        kind: if kind.group.is_empty() {
            format!("{}/{}", kind.version, kind.kind)
        } else {
            format!("{}/{}/{}", kind.group, kind.version, kind.kind)
        },
        uid: request.uid,
        namespace: request.namespace,
        name: request.name,
        operation: request.operation.as_str(),
        dry_run: request.dry_run,
        username: request.user_info.username,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::FINDINGS_AUDIT_KEY;
    use crate::testing::fixture_json;
    use serde_json::json;
    use std::borrow::Cow;

    fn policy() -> Policy {
        Policy::builtin().expect("built-in policy")
    }

    fn admit_json(review: &Value, mode: Mode) -> Outcome {
        admit(&serde_json::to_vec(review).expect("json"), mode, &policy()).expect("parses")
    }

    /// What `scope` decides for a review.
    fn scope_of(review: &Value, mode: Mode) -> Scope {
        let body = serde_json::to_vec(review).expect("json");
        let mut request = admission::parse(&body).expect("parses");
        let object = request.object.take().map(Value::Object);
        let old = request.old_object.take().map(Value::Object);
        scope(
            &request,
            object.as_ref(),
            old.as_ref(),
            mode,
            &policy(),
            &Settings::default(),
        )
    }

    const MODES: [Mode; 3] = [Mode::Validate, Mode::Warn, Mode::Mutate];

    #[test]
    fn what_a_controller_manages_is_neither_mutated_nor_judged() {
        for name in [
            "allow-replicaset-create-by-deployment-controller",
            "allow-replicaset-scale-by-deployment-controller",
        ] {
            let review = fixture_json(name);
            for mode in MODES {
                let Scope::Skip(reason) = scope_of(&review, mode) else {
                    panic!("{name} is evaluated in {mode:?}");
                };
                assert!(
                    reason.starts_with("managed by Deployment llama-3-70b: "),
                    "{reason}"
                );
                let out = admit_json(&review, mode);
                assert!(out.review.response.allowed, "{name} {mode:?}");
                assert!(out.review.response.patch.is_none(), "{name} {mode:?}");
                assert!(out.review.response.warnings.is_empty(), "{name} {mode:?}");
            }
        }
        // The same ReplicaSet on its own is what someone applied: judged and fixed.
        let mut alone = fixture_json("allow-replicaset-create-by-deployment-controller");
        alone["request"]["object"]["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
        assert_eq!(
            scope_of(&alone, Mode::Mutate),
            Scope::Evaluate {
                controller: None,
                claimed: None,
                notes: Vec::new()
            }
        );
        assert_eq!(admit_json(&alone, Mode::Mutate).decision, Decision::Patched);
        assert_eq!(
            admit_json(&alone, Mode::Validate).decision,
            Decision::Denied
        );
        // An ownerReference that is not a controller's (garbage collection only) changes nothing.
        let mut collected = fixture_json("allow-replicaset-create-by-deployment-controller");
        collected["request"]["object"]["metadata"]["ownerReferences"][0]["controller"] =
            json!(false);
        assert_eq!(
            scope_of(&collected, Mode::Mutate),
            Scope::Evaluate {
                controller: None,
                claimed: None,
                notes: Vec::new()
            }
        );
    }

    #[test]
    fn a_pod_a_controller_creates_is_fixed_and_judged_but_never_refused() {
        let review = fixture_json("warn-pod-created-by-replicaset");
        assert_eq!(
            scope_of(&review, Mode::Validate),
            Scope::Evaluate {
                controller: Some("ReplicaSet llama-3-70b-5d8f7c9b4".into()),
                claimed: None,
                notes: Vec::new()
            }
        );
        let out = admit_json(&review, Mode::Validate);
        assert_eq!(out.decision, Decision::Warned);
        let response = &out.review.response;
        assert!(response.allowed && response.status.is_none());
        assert_eq!(
            response.warnings.last().map(String::as_str),
            Some(
                "not refused: probelint never refuses the Pods a controller (ReplicaSet llama-3-70b-5d8f7c9b4) creates"
            )
        );
        assert!(
            response.warnings[0].starts_with("error "),
            "{:?}",
            response.warnings
        );
        assert!(response.audit_annotations.contains_key(FINDINGS_AUDIT_KEY));
        // In warn mode there is nothing to explain.
        let warned = admit_json(&review, Mode::Warn);
        assert!(
            !warned
                .review
                .response
                .warnings
                .iter()
                .any(|w| w.starts_with("not refused"))
        );
        // The fixes land on the Pod.
        assert_eq!(
            admit_json(&review, Mode::Mutate).decision,
            Decision::Patched
        );
        // A Pod nobody manages is refused.
        let mut bare = review.clone();
        bare["request"]["object"]["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
        assert_eq!(admit_json(&bare, Mode::Validate).decision, Decision::Denied);
    }

    #[test]
    fn updates_of_pods_and_batch_workloads_are_judged_at_create_only() {
        for (name, reason) in [
            (
                "allow-pod-ungate-by-kueue",
                "a Pod's containers and probes cannot change after it is created: it was judged at CREATE",
            ),
            (
                "allow-pod-set-image",
                "a Pod's containers and probes cannot change after it is created: it was judged at CREATE",
            ),
            (
                "allow-job-unsuspend-by-kueue",
                "a Job's Pods come from the template it was created with: it was judged at CREATE",
            ),
        ] {
            let review = fixture_json(name);
            for mode in MODES {
                let out = admit_json(&review, mode);
                assert_eq!(out.decision, Decision::Skipped(reason.into()), "{name}");
                assert!(out.review.response.allowed);
                assert!(out.review.response.patch.is_none());
            }
            // As a CREATE the same object would be fixed: the UPDATE is what keeps it unpatched.
            let mut create = review.clone();
            create["request"]["operation"] = json!("CREATE");
            create["request"]["oldObject"] = Value::Null;
            assert_eq!(
                admit_json(&create, Mode::Mutate).decision,
                Decision::Patched,
                "{name}"
            );
        }
        let gvk = |group, kind| GroupVersionKind {
            group: Cow::Borrowed(group),
            version: Cow::Borrowed("v1"),
            kind: Cow::Borrowed(kind),
        };
        for (group, kind, immutable) in [
            ("jobset.x-k8s.io", "JobSet", true),
            ("ray.io", "RayJob", true),
            ("batch", "CronJob", false),
            ("apps", "Deployment", false),
            ("ray.io", "RayCluster", false),
            ("example.com", "Job", false),
            ("example.com", "Pod", false),
        ] {
            assert_eq!(
                judged_at_create(&gvk(group, kind)).is_some(),
                immutable,
                "{group} {kind}"
            );
        }
    }

    #[test]
    fn pod_specs_changed_compares_every_template_and_only_what_makes_the_pods() {
        let policy = policy();
        let changed = |old: &Value, edit: &dyn Fn(&mut Value)| {
            let mut new = old.clone();
            edit(&mut new);
            pod_specs_changed(&new, old, &policy)
        };
        let pod = |image: &str| json!({"containers": [{"name": "vllm", "image": image}]});
        let lws = json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {
                "size": 4,
                "leaderTemplate": {"spec": pod("vllm:1")},
                "workerTemplate": {"spec": pod("vllm:1")}
            }}
        });
        assert!(!changed(&lws, &|o| o["spec"]["replicas"] = json!(3)));
        assert!(!changed(
            &lws,
            &|o| o["spec"]["leaderWorkerTemplate"]["size"] = json!(8)
        ));
        assert!(changed(&lws, &|o| {
            o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] =
                json!("vllm:2")
        }));
        assert!(changed(&lws, &|o| {
            o["spec"]["leaderWorkerTemplate"]
                .as_object_mut()
                .expect("lws")
                .remove("leaderTemplate");
        }));
        let ray = json!({
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "ray"},
            "spec": {
                "headGroupSpec": {"template": {"spec": pod("ray:1")}},
                "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 8, "template": {"spec": pod("ray:1")}}]
            }
        });
        // The Ray autoscaler writes replicas and workersToDelete.
        assert!(!changed(&ray, &|o| {
            o["spec"]["workerGroupSpecs"][0]["replicas"] = json!(4);
            o["spec"]["workerGroupSpecs"][0]["scaleStrategy"] =
                json!({"workersToDelete": ["ray-gpu-x"]});
        }));
        assert!(changed(&ray, &|o| {
            let group = o["spec"]["workerGroupSpecs"][0].clone();
            o["spec"]["workerGroupSpecs"]
                .as_array_mut()
                .expect("groups")
                .push(group);
        }));
        let isvc = json!({
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "isvc"},
            "spec": {"predictor": {
                "minReplicas": 1,
                "maxReplicas": 2,
                "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://meta-llama/a"},
                "containers": []
            }}
        });
        assert!(!changed(&isvc, &|o| {
            o["spec"]["predictor"]["minReplicas"] = json!(2);
            o["spec"]["predictor"]["maxReplicas"] = json!(6);
            o["spec"]["predictor"]["canaryTrafficPercent"] = json!(10);
        }));
        assert!(changed(&isvc, &|o| {
            o["spec"]["predictor"]["model"]["storageUri"] = json!("hf://meta-llama/b")
        }));
        assert!(changed(&isvc, &|o| {
            o["spec"]["predictor"]["annotations"] =
                json!({"probelint.io/model-load-seconds": "900"})
        }));
        assert!(!changed(&isvc, &|o| {
            o["spec"]["predictor"]["annotations"] = json!({"team": "a"})
        }));
        // Objects without pod specs never change any.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
        assert!(!changed(&cm, &|o| o["data"]["a"] = json!("2")));
    }
}

#[cfg(test)]
mod listing_tests {
    use super::*;
    use crate::messages::MAX_LISTED;
    use crate::testing::fixture_json;

    #[test]
    fn a_denial_and_its_warnings_list_at_most_fifty_and_count_the_rest() {
        let mut review = fixture_json("deny-gpu-deployment-without-probes");
        let spec = &mut review["request"]["object"]["spec"]["template"]["spec"];
        let template = spec["containers"][0].clone();
        spec["containers"] = Value::Array(
            (0..60)
                .map(|i| {
                    let mut c = template.clone();
                    c["name"] = Value::String(format!("c{i}"));
                    c
                })
                .collect(),
        );
        let body = serde_json::to_vec(&review).expect("json");
        let policy = Policy::builtin().expect("built-in policy");
        let denied = admit(&body, Mode::Validate, &policy).expect("parses");
        let message = &denied
            .review
            .response
            .status
            .as_ref()
            .expect("denied")
            .message;
        let listed = message.matches("\n- ").count();
        assert_eq!(listed, MAX_LISTED + 1, "{message}");
        assert!(
            message.contains("more errors (every finding is in the audit annotation"),
            "{message}"
        );
        let warned = admit(&body, Mode::Warn, &policy).expect("parses");
        let warnings = &warned.review.response.warnings;
        assert_eq!(warnings.len(), MAX_LISTED, "{warnings:#?}");
        assert!(
            warnings[MAX_LISTED - 1].starts_with("and "),
            "{warnings:#?}"
        );
        // The audit annotation keeps every finding.
        let audit = &warned.review.response.audit_annotations["findings"];
        assert!(audit.matches("\"rule\"").count() >= 120, "{audit}");
    }
}
