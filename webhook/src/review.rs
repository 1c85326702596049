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
use probelint_policies::fix::{self, AppliedFix, Mutation, MutationPatch, mutation_patch};
use probelint_policies::{Finding, ObjectRef, Policy, Severity, Suppression};
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
    let skip = skip_reason(&request);
    let object = request.object.take();
    let mut outcome = Outcome {
        review: ReviewOut::new(Response::allow(&request.uid)),
        decision: Decision::Allowed,
        findings: Vec::new(),
        summary: summarize(request),
        internal_error: None,
    };
    if let Some(reason) = skip {
        outcome.decision = Decision::Skipped(reason);
        return outcome;
    }
    let Some(mut object) = object else {
        outcome.decision = Decision::Skipped("the request carries no object".into());
        return outcome;
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
    let object = Value::Object(object);
    match mode {
        Mode::Validate | Mode::Warn => validate(&mut outcome, &object, mode, policy),
        Mode::Mutate => mutate(&mut outcome, object, policy),
    }
    outcome
}

/// Requests answered without looking at the object. Deleting or connecting to something cannot
/// start a pod; subresources (`status`, `scale`, `eviction`...) do not carry a pod template; and
/// an UPDATE that leaves everything but metadata and status alone does not change what runs, so
/// an object admitted before the webhook existed can still be labelled or scaled.
fn skip_reason(request: &Request<'_>) -> Option<String> {
    match request.operation {
        Operation::Delete => return Some("DELETE is not checked".into()),
        Operation::Connect => return Some("CONNECT is not checked".into()),
        Operation::Create | Operation::Update => {}
    }
    if let Some(sub) = request.sub_resource.as_deref().filter(|s| !s.is_empty()) {
        return Some(format!("subresource {sub:?} is not checked"));
    }
    if request.operation == Operation::Update
        && let (Some(new), Some(old)) = (&request.object, &request.old_object)
        && type_of(new) == type_of(old)
        && same_except_metadata_and_status(new, old)
    {
        return Some("the UPDATE changes only metadata or status".into());
    }
    None
}

/// `apiVersion` and `kind`, when both are strings.
fn type_of(object: &Map<String, Value>) -> Option<(&str, &str)> {
    Some((
        object.get("apiVersion")?.as_str()?,
        object.get("kind")?.as_str()?,
    ))
}

/// Whether two objects' bodies (everything but `apiVersion`, `kind` and `metadata`) are equal
/// once `status` is ignored. Key order is irrelevant.
fn same_except_metadata_and_status(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let body = |k: &String| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status");
    a.keys().filter(|k| body(k)).count() == b.keys().filter(|k| body(k)).count()
        && a.iter()
            .filter(|(k, _)| body(k))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// `/validate` and `/validate/warn`. Suppressed findings never deny and never warn (the user
/// asked for silence and gave a reason); they are still written to the audit annotation.
fn validate(outcome: &mut Outcome, object: &Value, mode: Mode, policy: &Policy) {
    let mut findings = probelint_policies::evaluate_one(object, policy);
    // Most severe first: in the denial message and in kubectl's list of warnings.
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let active: Vec<&Finding> = findings.iter().filter(|f| !f.is_suppressed()).collect();
    let (errors, rest): (Vec<&Finding>, Vec<&Finding>) = active
        .iter()
        .partition(|f| f.severity == Severity::Error && mode == Mode::Validate);

    let response = &mut outcome.review.response;
    response.audit_annotations = audit_annotations(&findings);
    response.warnings = rest.iter().map(|f| finding_warning(f)).collect();
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
/// did not write; the findings go to the audit annotation.
fn mutate(outcome: &mut Outcome, object: Value, policy: &Policy) {
    let Mutation {
        patch,
        applied,
        findings,
    } = fix::mutate(&object, policy);
    let response = &mut outcome.review.response;
    response.audit_annotations = audit_annotations(&findings);
    if !patch.0.is_empty() {
        match mutation_patch(object, patch, &applied, policy) {
            Ok(MutationPatch { patch, .. }) => {
                response.set_patch(&patch);
                response.warnings = fix_warnings(&applied);
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
    outcome.findings = findings;
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
    let Some(rule) = probelint_policies::rules::find(&f.rule) else {
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
    use probelint_policies::fix::MUTATED_ANNOTATION;
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
        assert_eq!(out.decision, Decision::Allowed, "{:?}", out.review);
        let audit = &out.review.response.audit_annotations[FINDINGS_AUDIT_KEY];
        assert!(
            audit.contains(
                r#""suppressed":{"source":"annotation","reason":"batch warm-up pod, never serves"}"#
            ),
            "{audit}"
        );
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
            (
                "allow-update-labels-only",
                "the UPDATE changes only metadata or status",
            ),
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
    fn update_skip_ignores_metadata_and_status_but_not_the_body_or_type() {
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
        let skipped = Decision::Skipped("the UPDATE changes only metadata or status".into());
        assert_eq!(decide(&review), skipped);

        let mut status = review.clone();
        status["request"]["object"]["status"] = json!({"replicas": 3});
        status["request"]["object"]["metadata"]["annotations"] = json!({"a": "b"});
        assert_eq!(decide(&status), skipped);

        let mut body = review.clone();
        body["request"]["object"]["spec"]["paused"] = json!(true);
        assert_ne!(decide(&body), skipped);

        let mut kind = review.clone();
        kind["request"]["oldObject"]["apiVersion"] = json!("apps/v1beta2");
        assert_ne!(decide(&kind), skipped);
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
