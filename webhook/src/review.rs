//! AdmissionReview in, AdmissionReview out: decode the review, ask the engine what it gets
//! ([`probelint_policies::admission::admit`]: skip, judge or fix), and write the engine's answer
//! as the response kubectl shows. Pure functions: no HTTP, no I/O, no clock, so every answer is
//! unit-tested and `server.rs` only moves bytes. The wire types are in [`crate::admission`], the
//! text kubectl shows in `messages.rs`.

use crate::admission::{
    self, Operation as WireOperation, Request, Response, ReviewError, ReviewOut, Status,
};
use crate::messages::{
    at_most_listed, audit_annotations, denial_message, findings_warnings, fix_warnings, shorten,
};
use probelint_policies::admission::{self as engine, Answer, Judgement, Mutated, Operation};
use probelint_policies::{Finding, MutationPatch, Policy, Severity};

pub use probelint_policies::admission::{Controllers, Mode, OPT_OUT_LABEL, Settings};

/// The usernames the apiserver gives the built-in controllers that create objects with pod
/// specs. One list, shared with the exported admission policies, so the webhook, the chart and the
/// policies cannot disagree on who is a controller.
pub use probelint_policies::export::BUILTIN_CONTROLLER_USERS as BUILTIN_CONTROLLERS;

/// The endpoint a mode is served on, as metrics and logs name it.
pub fn endpoint(mode: Mode) -> &'static str {
    match mode {
        Mode::Validate => "validate",
        Mode::Warn => "validate/warn",
        Mode::Mutate => "mutate",
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
    let object = request.object.take().map(serde_json::Value::Object);
    let old_object = request.old_object.take().map(serde_json::Value::Object);
    let answer = engine::admit(
        engine::Request {
            operation: match request.operation {
                WireOperation::Create => Operation::Create,
                WireOperation::Update => Operation::Update,
                WireOperation::Delete => Operation::Delete,
                WireOperation::Connect => Operation::Connect,
            },
            group: &request.kind.group,
            kind: &request.kind.kind,
            sub_resource: request.sub_resource.as_deref(),
            namespace: request.namespace.as_deref(),
            username: &request.user_info.username,
        },
        object,
        old_object.as_ref(),
        mode,
        policy,
        settings,
    );
    drop(old_object);
    let response = Response::from(&request);
    let verdict = verdict(answer, response, mode, policy);
    Outcome {
        review: verdict.response.into_review(),
        decision: verdict.decision,
        findings: verdict.findings,
        summary: summarize(request),
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

/// The engine's answer as the response kubectl shows.
fn verdict(answer: Answer, mut response: Response, mode: Mode, policy: &Policy) -> Verdict {
    match answer {
        Answer::Skipped { reason, opted_out } => {
            let mut verdict = Verdict::new(response, Decision::Skipped(reason));
            verdict.opted_out = opted_out;
            verdict
        }
        Answer::Unreached(unreached) => {
            response.warnings = unreached.iter().map(|w| shorten(w)).collect();
            Verdict::new(response, Decision::Warned)
        }
        Answer::Judged(judgement) => validate(response, judgement, mode, policy),
        Answer::Mutated(mutated) => mutate(response, mutated),
    }
}

/// `/validate` and `/validate/warn`. Suppressed findings never deny and never warn (the user
/// asked for silence and gave a reason); they are still written to the audit annotation.
///
/// A Pod that a controller creates is judged but never refused (the engine's
/// [`Judgement::refuses`]): its errors become warnings, in the audit log and the metrics, with
/// one that says why. For a workload, warns also about its exemptions and load time that will
/// not reach its Pods, and about the request itself (the engine's notes).
fn validate(mut response: Response, judgement: Judgement, mode: Mode, policy: &Policy) -> Verdict {
    let (errors, rest) = judgement.partition();
    response.audit_annotations = audit_annotations(&judgement.findings);
    response.warnings = findings_warnings(rest.iter().copied());
    if let Some(controller) = &judgement.controller
        && mode == Mode::Validate
        && rest.iter().any(|f| f.severity == Severity::Error)
    {
        response.warnings.push(shorten(&format!(
            "not refused: probelint never refuses the Pods a controller ({controller}) creates"
        )));
    }
    let said = judgement.unreached.iter().chain(&judgement.notes);
    response.warnings.extend(said.map(|w| shorten(w)));
    let decision = if !errors.is_empty() {
        response = response.deny(Status::forbidden(denial_message(
            &judgement.object,
            &errors,
            policy.allow_annotation_exemptions,
        )));
        Decision::Denied
    } else if response.warnings.is_empty() {
        Decision::Allowed
    } else {
        Decision::Warned
    };
    drop((errors, rest));
    Verdict {
        response,
        decision,
        findings: judgement.findings,
        internal_error: None,
        opted_out: false,
    }
}

/// `/mutate`: never denies (refusing is the validating webhook's job, and it runs after us on the
/// mutated object). Warns only about what it changed, so that nobody is surprised by a probe they
/// did not write; the findings go to the audit annotation. Besides the fixes, the engine copies
/// the object's probelint annotations into its pod templates ([`probelint_policies::reach::propagation`]),
/// so that an exemption or load time declared on a workload reaches its Pods.
fn mutate(mut response: Response, mutated: Mutated) -> Verdict {
    let Mutated {
        findings,
        applied,
        patch,
    } = mutated;
    response.audit_annotations = audit_annotations(&findings);
    let mut verdict = match patch {
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
    use serde_json::{Value, json};

    fn policy() -> Policy {
        Policy::builtin().expect("built-in policy")
    }

    fn admit_json(review: &Value, mode: Mode) -> Outcome {
        admit(&serde_json::to_vec(review).expect("json"), mode, &policy()).expect("parses")
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
                let out = admit_json(&review, mode);
                let Decision::Skipped(reason) = &out.decision else {
                    panic!("{name} is evaluated in {mode:?}");
                };
                assert!(
                    reason.starts_with("managed by Deployment llama-3-70b: "),
                    "{reason}"
                );
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
            admit_json(&collected, Mode::Mutate).decision,
            Decision::Patched
        );
        let judged = admit_json(&collected, Mode::Validate);
        assert_eq!(judged.decision, Decision::Denied);
        assert!(
            !judged
                .review
                .response
                .warnings
                .iter()
                .any(|w| w.contains("ownerReferences")),
            "{:?}",
            judged.review.response.warnings
        );
    }

    #[test]
    fn a_pod_a_controller_creates_is_fixed_and_judged_but_never_refused() {
        let review = fixture_json("warn-pod-created-by-replicaset");
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
    }
}

#[cfg(test)]
mod listing_tests {
    use super::*;
    use crate::messages::MAX_LISTED;
    use crate::testing::fixture_json;
    use serde_json::Value;

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
        // At most fifty findings listed (each with its lines of what to change), the rest
        // counted in the last line.
        let heads = warnings.iter().filter(|w| !w.starts_with("  ")).count();
        assert_eq!(heads, MAX_LISTED, "{warnings:#?}");
        assert!(
            warnings
                .last()
                .is_some_and(|w| w.starts_with("and 71 more findings like these")),
            "{warnings:#?}"
        );
        // The audit annotation keeps every finding.
        let audit = &warned.review.response.audit_annotations["findings"];
        assert!(audit.matches("\"rule\"").count() >= 120, "{audit}");
    }
}
