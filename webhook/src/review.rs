//! AdmissionReview in, AdmissionReview out: parse the review, decide whether to look at the
//! object, ask the engine, and write the response. Pure functions: no HTTP, no I/O, no clock,
//! so every decision is unit-tested here and `server.rs` only moves bytes.
//!
//! Requests are read once, straight into [`Request`]: the handful of fields the webhook uses,
//! with the object as the `serde_json::Value` the engine takes. (kube-core's typed review buffers
//! the whole body through serde's `flatten` and reads the object as a `DynamicObject` that must
//! be turned back into a `Value`: a tenth of the webhook's CPU, bench/profile-notes.md.)
//! Responses are our own small structs too: kube-core 5.0 serialises `AdmissionResponse.patch`
//! (a `Vec<u8>`) as an array of numbers (kube-rs issue #1781), while the apiserver expects the
//! base64 string the API documents.

use base64::Engine as _;
use json_patch::Patch;
use probelint_policies::Workload;
use probelint_policies::{AppliedFix, MUTATED_ANNOTATION, Mutation, MutationPatch, mutation_patch};
use probelint_policies::{Finding, ObjectRef, Policy, Severity, Suppression, reach};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The only AdmissionReview version we speak (the webhook configuration's
/// `admissionReviewVersions: ["v1"]`).
pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

/// Key of the audit annotation that lists the findings. The apiserver prefixes every key with
/// the webhook's name and a `/` (e.g. `validate.probelint.io/findings`) and drops keys that then
/// hold two slashes, so this key must not contain one.
pub const FINDINGS_AUDIT_KEY: &str = "findings";

/// Kubernetes asks admission warnings to stay under 120 characters: kubectl prints each on one
/// line after `Warning: `.
pub const MAX_WARNING_CHARS: usize = 119;

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
        }
    }
}

/// Why a body is not a review we can answer. Answered with HTTP 400 and this text: the
/// apiserver logs it, and a human with curl reads it.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not a valid {API_VERSION} AdmissionReview: {0}")]
    Json(#[source] serde_json::Error),
    #[error(
        "unsupported review type {api_version:?} {kind:?}: probelint-webhook answers \
         {API_VERSION} {KIND} only; set admissionReviewVersions: [\"v1\"] in the webhook configuration"
    )]
    Type { api_version: String, kind: String },
    #[error(
        "the AdmissionReview has no `request`: the apiserver sends \
         {{\"apiVersion\": \"{API_VERSION}\", \"kind\": \"{KIND}\", \"request\": {{\"uid\": ..., \"object\": ...}}}}"
    )]
    MissingRequest,
}

/// The review we send back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: Response,
}

/// `AdmissionResponse` as the API documents it (`patch` is base64 text).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// The `metav1.Status` of a denial: the apiserver answers the client with `code` and shows
/// `message` after `admission webhook "..." denied the request: `.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub status: &'static str,
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
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
}

/// The fields of an `admission.k8s.io/v1` AdmissionReview the webhook reads. Any other field
/// (`response`, unknown ones) is skipped without being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a> {
    #[serde(borrow)]
    api_version: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    request: Option<Request<'a>>,
}

/// The `request` of an AdmissionReview, as much of it as the webhook uses. The fields the API
/// requires are required here too (a review without `uid`, `kind`, `resource` or `operation` is
/// refused with a message naming the field); `userInfo`, `options`, `requestKind` and the rest
/// are skipped. Strings that are only looked at borrow from the body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    pub uid: String,
    #[serde(borrow)]
    pub kind: GroupVersionKind<'a>,
    #[serde(borrow)]
    #[expect(dead_code, reason = "read only so that a review without it is refused")]
    resource: GroupVersionResource<'a>,
    #[serde(default, borrow)]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    /// Always a JSON object when present: anything else is refused while parsing.
    #[serde(default)]
    pub object: Option<Map<String, Value>>,
    #[serde(default)]
    pub old_object: Option<Map<String, Value>>,
    #[serde(default)]
    pub dry_run: bool,
}

/// `request.kind`, e.g. `{"group": "apps", "version": "v1", "kind": "Deployment"}`.
#[derive(Debug, Deserialize)]
pub struct GroupVersionKind<'a> {
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// `request.resource`: not used, but required by the API (and by kube-core before us), so a
/// review without it is still refused.
#[derive(Debug, Deserialize)]
#[expect(dead_code, reason = "read only so that a malformed one is refused")]
struct GroupVersionResource<'a> {
    #[serde(borrow)]
    group: Cow<'a, str>,
    #[serde(borrow)]
    version: Cow<'a, str>,
    #[serde(borrow)]
    resource: Cow<'a, str>,
}

/// `request.operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Parses a request body: one pass, straight into what the webhook uses.
pub fn parse(body: &[u8]) -> Result<Request<'_>, ReviewError> {
    let review: ReviewIn<'_> = serde_json::from_slice(body).map_err(ReviewError::Json)?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(ReviewError::Type {
            api_version: review.api_version.into_owned(),
            kind: review.kind.into_owned(),
        });
    }
    review.request.ok_or(ReviewError::MissingRequest)
}

/// Parses a body and answers it.
pub fn admit(body: &[u8], mode: Mode, policy: &Policy) -> Result<Outcome, ReviewError> {
    Ok(respond(parse(body)?, mode, policy))
}

/// Answers one request. Takes it by value: the object is evaluated (and patched) in place.
pub fn respond(mut request: Request<'_>, mode: Mode, policy: &Policy) -> Outcome {
    let object = request.object.take().map(Value::Object);
    let old_object = request.old_object.take().map(Value::Object);
    let scope = scope(&request, object.as_ref(), old_object.as_ref(), mode, policy);
    drop(old_object);
    let mut outcome = Outcome {
        review: ReviewOut::new(Response::allow(&request.uid)),
        decision: Decision::Allowed,
        findings: Vec::new(),
        summary: summarize(request),
        internal_error: None,
    };
    let (controller, annotations_only) = match scope {
        Scope::Skip(reason) => return outcome.skipped(reason),
        Scope::Unchanged {
            annotations_changed: false,
        } => return outcome.skipped(UNCHANGED.into()),
        Scope::Unchanged {
            annotations_changed: true,
        } => (None, true),
        Scope::Evaluate { controller } => (controller, false),
    };
    let Some(mut object) = object else {
        return outcome.skipped("the request carries no object".into());
    };
    // Policy exemptions and messages name the namespace. The apiserver copies it from the URL
    // into the object before admission, but a review from another client may only carry it in
    // the request. (Only into an existing `metadata`: the patch must apply to the real object.)
    if let (Some(namespace), Some(metadata)) = (
        outcome
            .summary
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty()),
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) && metadata.get("namespace").is_none_or(Value::is_null)
    {
        metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
    if annotations_only {
        // The object's own probelint annotations changed, its pod specs did not: nothing to
        // judge, but whoever changed them should learn whether its Pods will see them.
        if mode != Mode::Mutate {
            outcome.review.response.warnings = reach::unreached(&object, policy)
                .iter()
                .map(|w| shorten(w))
                .collect();
        }
        if outcome.review.response.warnings.is_empty() {
            return outcome.skipped(UNCHANGED.into());
        }
        outcome.decision = Decision::Warned;
        return outcome;
    }
    match mode {
        Mode::Validate | Mode::Warn => validate(&mut outcome, &object, mode, controller, policy),
        Mode::Mutate => mutate(&mut outcome, object, policy),
    }
    outcome
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
    /// Judged or mutated. `controller` names the controller of a Pod that one created.
    Evaluate { controller: Option<String> },
}

/// Decides what a request gets (webhook/README.md, "What is judged, and what is left alone"):
///
/// - DELETE, CONNECT and subresources (`scale`, `status`, `eviction`...) carry no pod template:
///   allowed. An HPA scales through `scale`.
/// - An object with a controller (`ownerReferences[].controller: true`) other than a Pod: a
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
///   (see [`validate`]).
fn scope(
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
    mode: Mode,
    policy: &Policy,
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
    let kind = &request.kind;
    let is_pod = kind.group.is_empty() && kind.kind == "Pod";
    let controller = reach::controller_of(object);
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
    }
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
    outcome: &mut Outcome,
    object: &Value,
    mode: Mode,
    controller: Option<String>,
    policy: &Policy,
) {
    let mut findings = probelint_policies::evaluate_one(object, policy);
    // Most severe first: in the denial message and in kubectl's list of warnings.
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let active: Vec<&Finding> = findings.iter().filter(|f| !f.is_suppressed()).collect();
    let refuses = mode == Mode::Validate && controller.is_none();
    let (errors, rest): (Vec<&Finding>, Vec<&Finding>) = active
        .iter()
        .partition(|f| f.severity == Severity::Error && refuses);

    let response = &mut outcome.review.response;
    response.audit_annotations = audit_annotations(&findings);
    response.warnings = rest.iter().map(|f| finding_warning(f)).collect();
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
    outcome.decision = if !errors.is_empty() {
        response.allowed = false;
        response.status = Some(Status::forbidden(denial_message(
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
    outcome.findings = findings;
}

/// `/mutate`: never denies (refusing is the validating webhook's job, and it runs after us on the
/// mutated object). Warns only about what it changed, so that nobody is surprised by a probe they
/// did not write; the findings go to the audit annotation. Besides the fixes, copies the
/// object's probelint annotations into its pod templates ([`reach::propagation`]), so that an
/// exemption or load time declared on a workload reaches its Pods.
fn mutate(outcome: &mut Outcome, object: Value, policy: &Policy) {
    let Mutation {
        patch,
        applied,
        findings,
    } = probelint_policies::mutate(&object, policy);
    let response = &mut outcome.review.response;
    response.audit_annotations = audit_annotations(&findings);
    outcome.findings = findings;
    match mutation_patch(object, patch, &applied, policy) {
        Ok(MutationPatch { patch, .. }) if patch.0.is_empty() => {}
        Ok(MutationPatch { patch, propagated }) => {
            response.set_patch(&patch);
            response.warnings = fix_warnings(&applied);
            if !propagated.is_empty() {
                response.warnings.push(shorten(&format!(
                    "probelint copied {} into the pod template, so that its Pods carry it",
                    propagated.join(", ")
                )));
            }
            outcome.decision = Decision::Patched;
        }
        Err(e) => {
            // Never send a patch the apiserver would fail to apply: that fails the request.
            response.warnings =
                vec!["probelint could not apply its fixes; the object is unchanged".into()];
            outcome.internal_error = Some(format!(
                "the engine's patch does not apply to the object it was computed for: {e}"
            ));
        }
    }
}

/// `auditAnnotations`: the findings as compact JSON (suppressed ones included, with who
/// suppressed them and why), for the cluster's audit log.
fn audit_annotations(findings: &[Finding]) -> BTreeMap<String, String> {
    #[derive(Serialize)]
    struct AuditFinding<'a> {
        rule: &'a str,
        severity: Severity,
        #[serde(skip_serializing_if = "Option::is_none")]
        container: Option<&'a str>,
        pointer: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        suppressed: Option<&'a Suppression>,
    }
    let mut map = BTreeMap::new();
    if findings.is_empty() {
        return map;
    }
    let list: Vec<AuditFinding<'_>> = findings
        .iter()
        .map(|f| AuditFinding {
            rule: &f.rule,
            severity: f.severity,
            container: f.container.as_deref(),
            pointer: &f.pointer,
            suppressed: f.suppressed.as_ref(),
        })
        .collect();
    if let Ok(json) = serde_json::to_string(&list) {
        map.insert(FINDINGS_AUDIT_KEY.to_owned(), json);
    }
    map
}

/// The denial text, fit for kubectl: which object, then each violated rule with its container,
/// what is wrong and how to fix it.
fn denial_message(object: &ObjectRef, errors: &[&Finding], annotation_exemptions: bool) -> String {
    let count = match errors.len() {
        1 => "1 error".to_owned(),
        n => format!("{n} errors"),
    };
    let mut text = format!("probelint found {count} in {object}:");
    for f in errors {
        // Built-in messages already start with `container "name"`; custom rules' may not.
        let container = f
            .container
            .as_deref()
            .filter(|c| !f.message.contains(&format!("container {c:?}")))
            .map(|c| format!(" (container {c:?})"))
            .unwrap_or_default();
        text.push_str(&format!(
            "\n- {}{container}: {}\n  fix: {}",
            f.rule, f.message, f.help
        ));
    }
    if annotation_exemptions {
        text.push_str(
            "\nTo exempt this object from a rule, annotate it with probelint.io/ignore: \"<rule>\" \
             and probelint.io/ignore-reason: \"<why>\".",
        );
    }
    text
}

/// One warning per finding, on one short line: severity, rule and the finding's message when it
/// fits; otherwise the rule's one-line summary (a whole sentence beats a cut one) and the
/// container. The full text is in the denial message and the audit annotation.
fn finding_warning(f: &Finding) -> String {
    let fits = |w: &String| w.chars().count() <= MAX_WARNING_CHARS && !w.contains(['\n', '\r']);
    let full = format!("{} {}: {}", f.severity, f.rule, f.message);
    if fits(&full) {
        return full;
    }
    let Some(rule) = probelint_policies::find(&f.rule) else {
        return shorten(&full);
    };
    let container = f
        .container
        .as_deref()
        .map(|c| format!(" in {c}"))
        .unwrap_or_default();
    let summary = rule.meta().summary;
    let with_summary = |summary: &str| format!("{} {}{container}: {summary}", f.severity, f.rule);
    let long = with_summary(summary);
    if fits(&long) {
        return long;
    }
    // Summaries may end in a parenthesised detail, the first thing to go.
    match summary.rsplit_once(" (") {
        Some((head, _)) if summary.ends_with(')') && fits(&with_summary(head)) => {
            with_summary(head)
        }
        _ => shorten(&long),
    }
}

/// One warning per distinct change, so that whoever applied the object learns it was changed:
/// `probelint fixed gpu-startup-probe-missing, liveness-restart-loop in vllm: add a startupProbe…`
/// (one operation often fixes several rules).
fn fix_warnings(applied: &[AppliedFix]) -> Vec<String> {
    let mut groups: Vec<(Option<&str>, &str, Vec<&str>)> = Vec::new();
    // Index of each (container, description) in `groups`, which keeps the first-seen order.
    let mut index: std::collections::HashMap<(Option<&str>, &str), usize> = Default::default();
    for fix in applied {
        let (container, description) = (fix.container.as_deref(), fix.description.as_str());
        match index.get(&(container, description)) {
            Some(&i) => groups[i].2.push(&fix.rule),
            None => {
                index.insert((container, description), groups.len());
                groups.push((container, description, vec![&fix.rule]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(container, description, rules)| {
            let container = container.map(|c| format!(" in {c}")).unwrap_or_default();
            shorten(&format!(
                "probelint fixed {}{container}: {description}",
                rules.join(", ")
            ))
        })
        .collect()
}

/// One line of at most [`MAX_WARNING_CHARS`] characters, cut at a word where possible.
fn shorten(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    if text.chars().count() <= MAX_WARNING_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_WARNING_CHARS - 1).collect();
    let cut = match cut.rfind(' ') {
        Some(space) if space > cut.len() / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([' ', ',', ':', ';', '(']))
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
    }
}

impl Outcome {
    /// The outcome, allowed unevaluated for `reason`.
    fn skipped(mut self, reason: String) -> Self {
        self.decision = Decision::Skipped(reason);
        self
    }
}

impl ReviewOut {
    pub fn new(response: Response) -> Self {
        ReviewOut {
            api_version: API_VERSION,
            kind: KIND,
            response,
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        // Sized up front (the text plus room for escapes), so that the buffer is not regrown
        // and copied on the way.
        let r = &self.response;
        let text = r.uid.len()
            + r.patch.as_ref().map_or(0, String::len)
            + r.status.as_ref().map_or(0, |s| s.message.len() + 64)
            + r.warnings.iter().map(|w| w.len() + 3).sum::<usize>()
            + r.audit_annotations
                .iter()
                .map(|(k, v)| k.len() + v.len() + 6)
                .sum::<usize>();
        let mut json = Vec::with_capacity(192 + text + text / 8);
        // Plain structs of strings, bools and maps with string keys: serialisation cannot fail.
        match serde_json::to_writer(&mut json, self) {
            Ok(()) => json,
            Err(_) => Vec::new(),
        }
    }
}

impl Response {
    /// An allowing response that echoes the request's uid, as the apiserver requires.
    pub fn allow(uid: &str) -> Self {
        Response {
            uid: uid.to_owned(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
        }
    }

    /// Attaches a JSON Patch the way the API documents it: base64 of the patch's JSON text.
    pub fn set_patch(&mut self, patch: &Patch) {
        let json = serde_json::to_vec(patch).unwrap_or_default();
        self.patch = Some(base64::engine::general_purpose::STANDARD.encode(json));
        self.patch_type = Some("JSONPatch");
    }
}

impl Status {
    fn forbidden(message: String) -> Self {
        Status {
            status: "Failure",
            code: 403,
            reason: "Forbidden",
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use probelint_policies::MUTATED_ANNOTATION;
    use serde_json::json;

    fn applied(rule: &str, container: Option<&str>) -> AppliedFix {
        AppliedFix {
            rule: rule.into(),
            container: container.map(Into::into),
            description: "added a startupProbe".into(),
        }
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn policy() -> Policy {
        Policy::builtin().expect("built-in policy")
    }

    fn answer(name: &str, mode: Mode) -> Outcome {
        admit(&fixture(name), mode, &policy()).expect("fixture parses")
    }

    fn fixture_json(name: &str) -> Value {
        serde_json::from_slice(&fixture(name)).expect("fixture JSON")
    }

    fn admit_json(review: &Value, mode: Mode) -> Outcome {
        admit(&serde_json::to_vec(review).expect("json"), mode, &policy()).expect("parses")
    }

    /// What `scope` decides for a review.
    fn scope_of(review: &Value, mode: Mode) -> Scope {
        let body = serde_json::to_vec(review).expect("json");
        let mut request = parse(&body).expect("parses");
        let object = request.object.take().map(Value::Object);
        let old = request.old_object.take().map(Value::Object);
        scope(&request, object.as_ref(), old.as_ref(), mode, &policy())
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
            Scope::Evaluate { controller: None }
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
            Scope::Evaluate { controller: None }
        );
    }

    #[test]
    fn a_pod_a_controller_creates_is_fixed_and_judged_but_never_refused() {
        let review = fixture_json("warn-pod-created-by-replicaset");
        assert_eq!(
            scope_of(&review, Mode::Validate),
            Scope::Evaluate {
                controller: Some("ReplicaSet llama-3-70b-5d8f7c9b4".into())
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
    fn replicas_only_updates_are_neither_judged_nor_patched() {
        for name in [
            "allow-deployment-replicas-update",
            "allow-deployment-scale-to-zero",
        ] {
            let review = fixture_json(name);
            for mode in MODES {
                let out = admit_json(&review, mode);
                assert_eq!(out.decision, Decision::Skipped(UNCHANGED.into()), "{name}");
                assert!(out.review.response.allowed);
                assert!(out.review.response.patch.is_none());
            }
            // The template is one that a CREATE would be refused for.
            let mut create = review.clone();
            create["request"]["operation"] = json!("CREATE");
            create["request"]["oldObject"] = Value::Null;
            assert_eq!(
                admit_json(&create, Mode::Validate).decision,
                Decision::Denied
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

    #[test]
    fn a_metadata_update_warns_when_the_workloads_own_probelint_annotations_miss_the_pods() {
        let mut review = fixture_json("allow-update-labels-only");
        review["request"]["object"]["metadata"]["annotations"] = json!({
            "probelint.io/ignore": "gpu-readiness-probe-missing",
            "probelint.io/ignore-reason": "behind a queue"
        });
        let out = admit_json(&review, Mode::Validate);
        assert_eq!(out.decision, Decision::Warned);
        assert_eq!(
            out.review.response.warnings,
            [
                "probelint.io/ignore does not reach this Deployment's Pods: set it in the pod template's annotations"
            ]
        );
        // Never judged, never patched: the template is what it was.
        assert!(out.findings.is_empty());
        let mutated = admit_json(&review, Mode::Mutate);
        assert_eq!(mutated.decision, Decision::Skipped(UNCHANGED.into()));
        assert!(mutated.review.response.patch.is_none());
        // Already there before this UPDATE: nothing new to say.
        review["request"]["oldObject"]["metadata"]["annotations"] =
            review["request"]["object"]["metadata"]["annotations"].clone();
        assert_eq!(
            admit_json(&review, Mode::Validate).decision,
            Decision::Skipped(UNCHANGED.into())
        );
    }

    #[test]
    fn mutation_carries_a_workloads_exemption_to_its_pods() {
        let review = fixture_json("warn-deployment-exemption-not-on-template");
        let out = admit_json(&review, Mode::Validate);
        assert_eq!(out.decision, Decision::Warned);
        assert_eq!(
            out.review.response.warnings,
            [
                "probelint.io/ignore does not reach this Deployment's Pods: set it in the pod template's annotations"
            ]
        );
        let out = admit_json(&review, Mode::Mutate);
        assert_eq!(out.decision, Decision::Patched);
        assert_eq!(
            out.review.response.warnings,
            [
                "probelint copied probelint.io/ignore, probelint.io/ignore-reason into the pod template, so that its Pods carry it"
            ]
        );
        let patch = base64::engine::general_purpose::STANDARD
            .decode(out.review.response.patch.as_deref().expect("patch"))
            .expect("base64");
        let patch: Patch = serde_json::from_slice(&patch).expect("patch json");
        let mut mutated = review.clone();
        json_patch::patch(&mut mutated["request"]["object"], &patch).expect("applies");
        let template = &mutated["request"]["object"]["spec"]["template"]["metadata"];
        assert_eq!(template["annotations"]["probelint.io/ignore"], "all");
        assert_eq!(
            template["annotations"]["probelint.io/model-load-seconds"],
            "480"
        );
        assert_eq!(
            admit_json(&mutated, Mode::Validate).decision,
            Decision::Allowed
        );
        assert_eq!(
            admit_json(&mutated, Mode::Mutate).decision,
            Decision::Allowed
        );
    }

    #[test]
    fn the_pods_of_an_exempted_workload_are_neither_warned_about_nor_fixed() {
        let review = fixture_json("allow-pod-of-exempted-deployment");
        for mode in MODES {
            let out = admit_json(&review, mode);
            assert_eq!(out.decision, Decision::Allowed, "{mode:?}");
            assert!(out.review.response.patch.is_none());
            assert!(out.review.response.warnings.is_empty());
            assert!(!out.findings.is_empty() && out.findings.iter().all(Finding::is_suppressed));
        }
    }

    #[test]
    fn clean_gpu_pod_is_allowed_without_comment() {
        let out = answer("allow-clean-gpu-pod", Mode::Validate);
        assert_eq!(out.decision, Decision::Allowed);
        assert_eq!(
            serde_json::to_value(&out.review).expect("json"),
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": "7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01", "allowed": true}
            })
        );
        assert_eq!(out.summary.kind, "v1/Pod");
        assert_eq!(out.summary.operation, "CREATE");
    }

    #[test]
    fn gpu_deployment_without_probes_is_denied_with_rules_container_and_fix() {
        let out = answer("deny-gpu-deployment-without-probes", Mode::Validate);
        assert_eq!(out.decision, Decision::Denied);
        let response = &out.review.response;
        assert!(!response.allowed);
        assert_eq!(response.uid, "2d7e8f8a-0b7c-4b8e-8a55-5c2a0f1b9e02");
        let status = response.status.as_ref().expect("status");
        assert_eq!(status.code, 403);
        assert!(
            status
                .message
                .starts_with("probelint found 3 errors in Deployment inference/llama-3-70b:"),
            "{}",
            status.message
        );
        for rule in [
            "gpu-startup-probe-missing",
            "gpu-readiness-probe-missing",
            "liveness-restart-loop",
        ] {
            assert!(
                status
                    .message
                    .contains(&format!("- {rule}: container \"vllm\" ")),
                "{rule} missing from:\n{}",
                status.message
            );
        }
        assert!(status.message.contains("\n  fix: add a startupProbe"));
        // Errors are in the message, not repeated as warnings.
        assert!(response.warnings.is_empty(), "{:?}", response.warnings);
        let audit: Value =
            serde_json::from_str(&response.audit_annotations[FINDINGS_AUDIT_KEY]).expect("json");
        assert_eq!(audit.as_array().map(Vec::len), Some(3));
        assert_eq!(audit[0]["container"], "vllm");
        assert_eq!(audit[0]["severity"], "error");
    }

    #[test]
    fn warn_mode_never_denies_and_warns_about_errors_too() {
        let out = answer("deny-gpu-deployment-without-probes", Mode::Warn);
        assert_eq!(out.decision, Decision::Warned);
        let response = &out.review.response;
        assert!(response.allowed);
        assert!(response.status.is_none());
        assert_eq!(
            response.warnings,
            [
                "error gpu-readiness-probe-missing in vllm: A serving GPU container has no readinessProbe",
                "error gpu-startup-probe-missing in vllm: A serving GPU container has no startupProbe",
                "error liveness-restart-loop in vllm: Liveness kills the container before its model can load (no startupProbe)",
            ]
        );
        assert!(response.audit_annotations.contains_key(FINDINGS_AUDIT_KEY));
    }

    #[test]
    fn warnings_alone_are_allowed_with_short_warnings() {
        let out = answer("warn-gpu-deployment-exec-probe", Mode::Validate);
        assert_eq!(out.decision, Decision::Warned);
        let response = &out.review.response;
        assert!(response.allowed);
        assert_eq!(response.warnings.len(), 1);
        let warning = &response.warnings[0];
        assert_eq!(
            warning,
            "warning exec-probe-heavy in vllm: An exec probe on a GPU container runs nvidia-smi, Python or a shell pipeline"
        );
    }

    #[test]
    fn suppressed_findings_never_deny_but_are_audited() {
        let mut review: Value =
            serde_json::from_slice(&fixture("deny-gpu-deployment-without-probes")).expect("json");
        review["request"]["object"]["metadata"]["annotations"] = json!({
            "probelint.io/ignore": "gpu-startup-probe-missing,gpu-readiness-probe-missing,liveness-restart-loop",
            "probelint.io/ignore-reason": "batch warm-up pod, never serves"
        });
        let body = serde_json::to_vec(&review).expect("json");
        let out = admit(&body, Mode::Validate, &policy()).expect("parses");
        // Allowed; the one warning says that the Deployment's Pods will not be exempt.
        assert_eq!(out.decision, Decision::Warned, "{:?}", out.review);
        assert!(out.review.response.allowed);
        assert_eq!(
            out.review.response.warnings,
            [
                "probelint.io/ignore does not reach this Deployment's Pods: set it in the pod template's annotations"
            ]
        );
        let audit = &out.review.response.audit_annotations[FINDINGS_AUDIT_KEY];
        assert!(
            audit.contains(
                r#""suppressed":{"source":"annotation","reason":"batch warm-up pod, never serves"}"#
            ),
            "{audit}"
        );
        // On the template as well: the Pods carry it, nothing to say.
        review["request"]["object"]["spec"]["template"]["metadata"]["annotations"]["probelint.io/ignore"] =
            json!("all");
        let body = serde_json::to_vec(&review).expect("json");
        let out = admit(&body, Mode::Validate, &policy()).expect("parses");
        assert_eq!(out.decision, Decision::Allowed, "{:?}", out.review);
    }

    #[test]
    fn the_request_namespace_names_an_object_that_lacks_one_or_has_null() {
        for null in [false, true] {
            let mut review: Value =
                serde_json::from_slice(&fixture("deny-gpu-deployment-without-probes"))
                    .expect("json");
            let metadata = review["request"]["object"]["metadata"]
                .as_object_mut()
                .expect("metadata");
            if null {
                metadata.insert("namespace".into(), Value::Null);
            } else {
                metadata.remove("namespace");
            }
            let body = serde_json::to_vec(&review).expect("json");
            let out = admit(&body, Mode::Validate, &policy()).expect("parses");
            let status = out.review.response.status.expect("denied");
            assert!(
                status
                    .message
                    .starts_with("probelint found 3 errors in Deployment inference/llama-3-70b:"),
                "null: {null}: {}",
                status.message
            );
        }
    }

    #[test]
    fn objects_without_pod_specs_are_allowed() {
        let out = answer("allow-configmap", Mode::Validate);
        assert_eq!(out.decision, Decision::Allowed);
        assert!(out.findings.is_empty());
    }

    #[test]
    fn delete_subresource_and_metadata_only_updates_are_skipped() {
        for (name, reason) in [
            ("allow-delete-deployment", "DELETE is not checked"),
            (
                "allow-scale-subresource",
                "subresource \"scale\" is not checked",
            ),
            ("allow-update-labels-only", UNCHANGED),
        ] {
            for mode in [Mode::Validate, Mode::Warn, Mode::Mutate] {
                let out = answer(name, mode);
                assert_eq!(out.decision, Decision::Skipped(reason.into()), "{name}");
                assert!(out.review.response.allowed);
                assert!(out.review.response.patch.is_none());
            }
        }
    }

    #[test]
    fn updates_that_change_the_pod_template_are_evaluated() {
        let out = answer("deny-update-new-image", Mode::Validate);
        assert_eq!(out.decision, Decision::Denied);
        assert_eq!(out.summary.operation, "UPDATE");
    }

    #[test]
    fn dry_run_is_evaluated_the_same() {
        let mut review: Value =
            serde_json::from_slice(&fixture("deny-gpu-deployment-without-probes")).expect("json");
        review["request"]["dryRun"] = json!(true);
        let body = serde_json::to_vec(&review).expect("json");
        let out = admit(&body, Mode::Validate, &policy()).expect("parses");
        assert_eq!(out.decision, Decision::Denied);
        assert!(out.summary.dry_run);
    }

    #[test]
    fn unknown_fields_and_a_large_old_object_do_not_change_the_answer() {
        let plain = answer("deny-gpu-deployment-without-probes", Mode::Validate);
        let mut review: Value =
            serde_json::from_slice(&fixture("deny-gpu-deployment-without-probes")).expect("json");
        review["somethingNew"] = json!({"nested": [1, 2, {"x": null}]});
        review["response"] = json!("not a response");
        review["request"]["userInfo"] = json!(7);
        review["request"]["options"] = json!([null]);
        review["request"]["futureField"] = json!({"a": "b"});
        // Not looked at on a CREATE, however big.
        let container =
            review["request"]["object"]["spec"]["template"]["spec"]["containers"][0].clone();
        let mut old = review["request"]["object"].clone();
        old["spec"]["template"]["spec"]["containers"] = Value::Array(vec![container; 2_000]);
        review["request"]["oldObject"] = old;
        let body = serde_json::to_vec(&review).expect("json");
        assert!(body.len() > 1_000_000, "{}", body.len());
        let out = admit(&body, Mode::Validate, &policy()).expect("parses");
        assert_eq!(out.decision, Decision::Denied);
        assert_eq!(out.review.to_json(), plain.review.to_json());
        assert_eq!(out.summary, plain.summary);
    }

    #[test]
    fn the_object_must_be_a_json_object_or_null() {
        let with_object = |object: Value| {
            let mut review: Value =
                serde_json::from_slice(&fixture("allow-clean-gpu-pod")).expect("json");
            review["request"]["object"] = object;
            admit(
                &serde_json::to_vec(&review).expect("json"),
                Mode::Mutate,
                &policy(),
            )
        };
        for object in [json!(7), json!("pod"), json!([]), json!(true)] {
            let err = with_object(object.clone())
                .expect_err("refused")
                .to_string();
            assert!(
                err.starts_with(
                    "the body is not a valid admission.k8s.io/v1 AdmissionReview: invalid type:"
                ),
                "{object}: {err}"
            );
        }
        let out = with_object(Value::Null).expect("answered");
        assert_eq!(
            out.decision,
            Decision::Skipped("the request carries no object".into())
        );
        assert!(out.review.response.allowed);
    }

    #[test]
    fn required_request_fields_are_named_when_missing_or_mistyped() {
        for (field, value, expect) in [
            ("uid", None, "missing field `uid`"),
            ("kind", None, "missing field `kind`"),
            ("resource", None, "missing field `resource`"),
            ("operation", None, "missing field `operation`"),
            ("operation", Some(json!("PATCH")), "unknown variant `PATCH`"),
            (
                "dryRun",
                Some(json!("yes")),
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                "name",
                Some(json!(null)),
                "invalid type: null, expected a string",
            ),
        ] {
            let mut review: Value =
                serde_json::from_slice(&fixture("allow-clean-gpu-pod")).expect("json");
            let request = review["request"].as_object_mut().expect("request");
            match value {
                Some(value) => request.insert(field.into(), value),
                None => request.remove(field),
            };
            let err = admit(
                &serde_json::to_vec(&review).expect("json"),
                Mode::Validate,
                &policy(),
            )
            .expect_err("refused")
            .to_string();
            assert!(err.contains(expect), "{field}: {err}");
        }
    }

    #[test]
    fn an_update_is_judged_only_when_a_pod_spec_or_a_template_probelint_annotation_changes() {
        let review: Value =
            serde_json::from_slice(&fixture("allow-update-labels-only")).expect("json");
        let decide = |review: &Value| {
            admit(
                &serde_json::to_vec(review).expect("json"),
                Mode::Validate,
                &policy(),
            )
            .expect("parses")
            .decision
        };
        let skipped = Decision::Skipped(UNCHANGED.into());
        assert_eq!(decide(&review), skipped);
        for (path, value, judged) in [
            ("/request/object/status", json!({"replicas": 3}), false),
            (
                "/request/object/metadata/annotations",
                json!({"a": "b"}),
                false,
            ),
            ("/request/object/spec/paused", json!(true), false),
            ("/request/object/spec/replicas", json!(7), false),
            // `kubectl rollout restart`: the Pods restart as they were.
            (
                "/request/object/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt",
                json!("2026-11-02T10:00:00Z"),
                false,
            ),
            (
                "/request/object/spec/template/metadata/labels/version",
                json!("2"),
                false,
            ),
            (
                "/request/object/spec/template/metadata/annotations/probelint.io~1model-load-seconds",
                json!("1200"),
                true,
            ),
            (
                "/request/object/spec/template/spec/containers/0/image",
                json!("vllm/vllm-openai:v0.6.4"),
                true,
            ),
            (
                "/request/object/spec/template/spec/nodeSelector",
                json!({"gpu": "h100"}),
                true,
            ),
        ] {
            let mut changed = review.clone();
            let (parent, key) = path.rsplit_once('/').expect("path");
            if changed.pointer(parent).is_none_or(Value::is_null) {
                *changed.pointer_mut(parent).expect("grandparent exists") = json!({});
            }
            changed.pointer_mut(parent).expect("parent")[key.replace("~1", "/")] = value;
            assert_eq!(decide(&changed) != skipped, judged, "{path}");
        }
    }

    #[test]
    fn an_object_without_metadata_gets_a_patch_that_applies_to_it() {
        let mut review: Value =
            serde_json::from_slice(&fixture("deny-gpu-deployment-without-probes")).expect("json");
        review["request"]["object"]
            .as_object_mut()
            .expect("object")
            .remove("metadata");
        let body = serde_json::to_vec(&review).expect("json");
        let out = admit(&body, Mode::Mutate, &policy()).expect("parses");
        assert_eq!(out.decision, Decision::Patched);
        let patch = base64::engine::general_purpose::STANDARD
            .decode(out.review.response.patch.as_deref().expect("patch"))
            .expect("base64");
        let patch: Patch = serde_json::from_slice(&patch).expect("patch json");
        let mut object = review["request"]["object"].clone();
        json_patch::patch(&mut object, &patch).expect("the patch applies to the object as sent");
        assert!(object["metadata"]["annotations"][MUTATED_ANNOTATION].is_string());
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        let err = |body: &str| {
            admit(body.as_bytes(), Mode::Validate, &policy())
                .expect_err("must fail")
                .to_string()
        };
        assert!(err("{not json").contains("not a valid admission.k8s.io/v1 AdmissionReview"));
        let missing = err(r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#);
        assert!(missing.contains("has no `request`"), "{missing}");
        let v1beta1 = err(
            r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}"#,
        );
        assert!(v1beta1.contains("admissionReviewVersions"), "{v1beta1}");
        let no_uid = err(
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#,
        );
        assert!(no_uid.contains("uid"), "{no_uid}");
    }

    #[test]
    fn mutate_without_fixes_allows_with_no_patch_exact_json() {
        let out = answer("allow-clean-gpu-pod", Mode::Mutate);
        assert_eq!(out.decision, Decision::Allowed);
        assert_eq!(
            String::from_utf8(out.review.to_json()).expect("utf-8"),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01","allowed":true}}"#
        );
    }

    #[test]
    fn patch_is_a_base64_string_with_patch_type() {
        let mut response = Response::allow("u-1");
        let patch: Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}
        ]))
        .expect("patch");
        response.set_patch(&patch);
        let json = serde_json::to_string(&ReviewOut::new(response)).expect("json");
        // base64 of [{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]
        assert_eq!(
            json,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u-1","allowed":true,"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7ImEiOiJiIn19XQ==","patchType":"JSONPatch"}}"#
        );
    }

    #[test]
    fn mutate_fixes_gpu_deployment_without_startup_probe() {
        let body = fixture("deny-gpu-deployment-without-probes");
        let out = admit(&body, Mode::Mutate, &policy()).expect("parses");
        assert_eq!(out.decision, Decision::Patched);
        let response = &out.review.response;
        assert_eq!(response.patch_type, Some("JSONPatch"));
        let patch_json = base64::engine::general_purpose::STANDARD
            .decode(response.patch.as_deref().expect("patch"))
            .expect("base64");
        let patch: Patch = serde_json::from_slice(&patch_json).expect("patch json");
        let review: Value = serde_json::from_slice(&body).expect("json");
        let mut object = review["request"]["object"].clone();
        json_patch::patch(&mut object, &patch).expect("patch applies");
        let after = probelint_policies::evaluate_one(&object, &policy());
        assert!(
            !after.iter().any(|f| f.rule == "gpu-startup-probe-missing"),
            "{after:#?}"
        );
        assert!(
            object["metadata"]["annotations"]["probelint.io/mutated"]
                .as_str()
                .is_some_and(|v| v.contains("gpu-startup-probe-missing:vllm"))
        );
        assert!(!response.warnings.is_empty());
    }

    #[test]
    fn fix_warnings_group_rules_fixed_by_one_change() {
        let fixes = [
            applied("gpu-startup-probe-missing", Some("vllm")),
            applied("liveness-restart-loop", Some("vllm")),
            applied("gpu-startup-probe-missing", Some("sidecar")),
        ];
        assert_eq!(
            fix_warnings(&fixes),
            [
                "probelint fixed gpu-startup-probe-missing, liveness-restart-loop in vllm: added a startupProbe",
                "probelint fixed gpu-startup-probe-missing in sidecar: added a startupProbe",
            ]
        );
    }

    #[test]
    fn shorten_cuts_at_a_word_and_stays_on_one_line() {
        let long = format!("error rule-x: {}", "word ".repeat(40));
        let short = shorten(&long);
        assert!(short.chars().count() <= MAX_WARNING_CHARS);
        assert!(short.ends_with("word…"), "{short}");
        assert_eq!(shorten("a\nb"), "a b");
        let unicode = "é".repeat(300);
        assert_eq!(shorten(&unicode).chars().count(), MAX_WARNING_CHARS);
    }
}
