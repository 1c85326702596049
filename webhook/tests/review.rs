//! The library's answer to each review (`probelint_webhook::review::admit`), over the fixtures:
//! what each endpoint decides, and the response, warnings and audit annotation it writes.

mod support;

use base64::Engine as _;
use json_patch::Patch;
use probelint_policies::MUTATED_ANNOTATION;
use probelint_policies::{Finding, Policy};
use probelint_webhook::review::{
    Controllers, Decision, Mode, Outcome, Settings, admit, admit_with,
};
use serde_json::{Value, json};
use support::{fixture, fixture_json};

/// Key of the audit annotation that lists the findings.
const FINDINGS_AUDIT_KEY: &str = "findings";
/// Why an UPDATE that changes no pod spec is not evaluated.
const UNCHANGED: &str = "the UPDATE leaves every pod spec unchanged";

const MODES: [Mode; 3] = [Mode::Validate, Mode::Warn, Mode::Mutate];

fn policy() -> Policy {
    Policy::builtin().expect("built-in policy")
}

fn answer(name: &str, mode: Mode) -> Outcome {
    admit(&fixture(name), mode, &policy()).expect("fixture parses")
}

fn admit_json(review: &Value, mode: Mode) -> Outcome {
    admit(&serde_json::to_vec(review).expect("json"), mode, &policy()).expect("parses")
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
            .starts_with("probelint found 2 errors in Deployment inference/llama-3-70b:"),
        "{}",
        status.message
    );
    // One problem, one error: the missing startupProbe carries the liveness risk.
    assert!(!status.message.contains("liveness-restart-loop"));
    assert!(status.message.contains("kills it mid-load"));
    for rule in ["gpu-startup-probe-missing", "gpu-readiness-probe-missing"] {
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
    assert_eq!(audit.as_array().map(Vec::len), Some(2));
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
    // Each finding: what is wrong in which container, then the whole change, in that container.
    assert_eq!(
        response.warnings,
        [
            "error gpu-readiness-probe-missing in vllm: has no readinessProbe: it receives traffic before its model is loaded",
            "  fix in vllm: add a readinessProbe: httpGet /health on the server's port (vLLM serves it on 8000 by default)",
            "error gpu-startup-probe-missing in vllm: has no startupProbe",
            "  fix in vllm: add a startupProbe on the server's health check with a budget beyond",
            "  fix in vllm: …the slowest plausible load: it holds liveness and readiness off until",
            "  fix in vllm: …the model is loaded, and lets liveness stay quick to catch real hangs",
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
    assert_eq!(response.warnings.len(), 2, "{:#?}", response.warnings);
    assert!(
        response.warnings[0].starts_with("warning exec-probe-heavy in vllm: "),
        "{:#?}",
        response.warnings
    );
    assert!(
        response.warnings[1].starts_with("  fix in vllm: "),
        "{:#?}",
        response.warnings
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
            serde_json::from_slice(&fixture("deny-gpu-deployment-without-probes")).expect("json");
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
                .starts_with("probelint found 2 errors in Deployment inference/llama-3-70b:"),
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
    review["request"]["userInfo"]["extra"] = json!({"scopes": ["a", "b"]});
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
    // A userInfo that is not one names nobody: no controller, judged all the same.
    review["request"]["userInfo"] = json!(7);
    let body = serde_json::to_vec(&review).expect("json");
    let out = admit(&body, Mode::Validate, &policy()).expect("parses");
    assert_eq!(out.decision, Decision::Denied);
    assert_eq!(out.summary.username, "");
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
fn an_update_is_judged_only_when_a_pod_spec_or_a_template_probelint_annotation_changes() {
    let review: Value = serde_json::from_slice(&fixture("allow-update-labels-only")).expect("json");
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
fn mutate_without_fixes_allows_with_no_patch_exact_json() {
    let out = answer("allow-clean-gpu-pod", Mode::Mutate);
    assert_eq!(out.decision, Decision::Allowed);
    assert_eq!(
        String::from_utf8(out.review.to_json()).expect("utf-8"),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01","allowed":true}}"#
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

/// The ownerReference anyone may write: every namespace has the ConfigMap `kube-root-ca.crt`,
/// and whoever may read ConfigMaps sees its uid.
fn fabricated_owner() -> Value {
    json!([{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "kube-root-ca.crt",
        "uid": "0b6f8e0c-7f0e-4d1e-9a39-2f2b4c1d5e6f",
        "controller": true
    }])
}

/// `fixture` with the fabricated owner, sent by `username`.
fn claimed_by(fixture: &str, username: &str) -> Value {
    let mut review = fixture_json(fixture);
    review["request"]["object"]["metadata"]["ownerReferences"] = fabricated_owner();
    review["request"]["userInfo"] = json!({
        "username": username,
        "groups": ["system:authenticated"]
    });
    review
}

const REPLICASET_CONTROLLER: &str = "system:serviceaccount:kube-system:replicaset-controller";
const CLAIM_WARNING: &str = "ownerReferences name ConfigMap kube-root-ca.crt as controller, but alice is no controller: judged as alice's";

#[test]
fn a_fabricated_owner_from_a_person_is_judged_and_refused() {
    for fixture in [
        "deny-gpu-deployment-without-probes",
        "warn-pod-created-by-replicaset",
    ] {
        let review = claimed_by(fixture, "alice");
        let out = admit_json(&review, Mode::Validate);
        assert_eq!(
            out.decision,
            Decision::Denied,
            "{fixture}: {:?}",
            out.review
        );
        let response = &out.review.response;
        assert!(!response.allowed, "{fixture}");
        assert!(
            response.warnings.iter().any(|w| w == CLAIM_WARNING),
            "{fixture}: {:?}",
            response.warnings
        );
        // Warn mode says the same without refusing; the mutating webhook fixes it.
        let warned = admit_json(&review, Mode::Warn);
        assert!(warned.review.response.allowed, "{fixture}");
        assert!(
            warned
                .review
                .response
                .warnings
                .iter()
                .any(|w| w == CLAIM_WARNING),
            "{fixture}"
        );
        assert_eq!(
            admit_json(&review, Mode::Mutate).decision,
            Decision::Patched,
            "{fixture}"
        );
    }
}

#[test]
fn the_same_owner_from_a_controller_is_a_controllers_object() {
    // A Deployment (any object but a Pod) a controller sends is left to that controller.
    let review = claimed_by("deny-gpu-deployment-without-probes", REPLICASET_CONTROLLER);
    for mode in MODES {
        let out = admit_json(&review, mode);
        assert!(
            matches!(&out.decision, Decision::Skipped(r) if r.starts_with("managed by ConfigMap kube-root-ca.crt: ")),
            "{mode:?}: {:?}",
            out.decision
        );
        assert!(out.review.response.allowed, "{mode:?}");
        assert!(out.review.response.patch.is_none(), "{mode:?}");
    }
    // A Pod a controller sends is judged but never refused.
    let review = claimed_by("warn-pod-created-by-replicaset", REPLICASET_CONTROLLER);
    let out = admit_json(&review, Mode::Validate);
    assert_eq!(out.decision, Decision::Warned, "{:?}", out.review);
    assert!(out.review.response.allowed);
    assert_eq!(
        out.review.response.warnings.last().map(String::as_str),
        Some(
            "not refused: probelint never refuses the Pods a controller (ConfigMap kube-root-ca.crt) creates"
        )
    );
}

#[test]
fn an_operators_objects_are_a_controllers_only_when_it_is_configured() {
    let kserve = "system:serviceaccount:kserve:kserve-controller-manager";
    let review = claimed_by("deny-gpu-deployment-without-probes", kserve);
    let body = serde_json::to_vec(&review).expect("json");
    assert_eq!(
        admit(&body, Mode::Validate, &policy())
            .expect("parses")
            .decision,
        Decision::Denied
    );
    let settings = Settings {
        controllers: Controllers::with_operators([kserve]),
        ..Settings::default()
    };
    let out = admit_with(&body, Mode::Validate, &policy(), &settings).expect("parses");
    assert!(
        matches!(out.decision, Decision::Skipped(_)),
        "{:?}",
        out.decision
    );
    assert!(out.review.response.allowed);
    // Another operator's name does not stand for it.
    let other = Settings {
        controllers: Controllers::with_operators(["system:serviceaccount:kserve:default"]),
        ..Settings::default()
    };
    let out = admit_with(&body, Mode::Validate, &policy(), &other).expect("parses");
    assert_eq!(out.decision, Decision::Denied);
}

#[test]
fn a_fabricated_owner_claims_no_policy_exemption_of_the_workload_it_names() {
    let policy = Policy::with_user_yaml(
        "exemptions:\n  - rules: [all]\n    kinds: [Deployment]\n    names: [llama-3-70b]\n    reason: load test\n",
    )
    .expect("policy");
    // The Pod of the exempted Deployment's ReplicaSet, as its controller sends it: exempt.
    let body = fixture("warn-pod-created-by-replicaset");
    let out = admit(&body, Mode::Validate, &policy).expect("parses");
    assert_eq!(out.decision, Decision::Allowed, "{:?}", out.review);
    assert_eq!(out.exemptions(), ["policy"]);
    // The same Pod, ownerReference and all, from alice: judged as hers.
    let mut review = fixture_json("warn-pod-created-by-replicaset");
    review["request"]["userInfo"] = json!({"username": "alice"});
    let body = serde_json::to_vec(&review).expect("json");
    let out = admit(&body, Mode::Validate, &policy).expect("parses");
    assert_eq!(out.decision, Decision::Denied, "{:?}", out.review);
    assert!(out.exemptions().is_empty());
}

#[test]
fn the_opt_out_label_exempts_only_where_the_policy_allows_it() {
    let mut review = fixture_json("deny-gpu-deployment-without-probes");
    review["request"]["object"]["metadata"]["labels"]["probelint.io/ignore"] = json!("true");
    review["request"]["userInfo"] = json!({"username": "alice"});
    for mode in MODES {
        let out = admit_json(&review, mode);
        assert_eq!(
            out.decision,
            Decision::Skipped("opted out by the label probelint.io/ignore=true".into()),
            "{mode:?}"
        );
        assert!(out.review.response.allowed);
        assert_eq!(out.exemptions(), ["label"], "{mode:?}");
        assert_eq!(out.summary.username, "alice");
    }
    // Strict mode: judged, refused, and told why the label did nothing.
    let strict = Policy::with_user_yaml("allowAnnotationExemptions: false\n").expect("policy");
    let body = serde_json::to_vec(&review).expect("json");
    let out = admit(&body, Mode::Validate, &strict).expect("parses");
    assert_eq!(out.decision, Decision::Denied, "{:?}", out.review);
    assert!(out.exemptions().is_empty());
    assert!(
        out.review
            .response
            .warnings
            .iter()
            .any(|w| w.starts_with("the label probelint.io/ignore=true is not honoured")),
        "{:?}",
        out.review.response.warnings
    );
    let out = admit(&body, Mode::Mutate, &strict).expect("parses");
    assert_eq!(out.decision, Decision::Patched);
    // Any value but "true" opts nothing out.
    review["request"]["object"]["metadata"]["labels"]["probelint.io/ignore"] = json!("yes");
    assert_eq!(
        admit_json(&review, Mode::Validate).decision,
        Decision::Denied
    );
    // Another label, when the webhook is told so.
    let settings = Settings {
        opt_out_label: "example.com/skip-probelint".into(),
        ..Settings::default()
    };
    review["request"]["object"]["metadata"]["labels"]["example.com/skip-probelint"] = json!("true");
    let body = serde_json::to_vec(&review).expect("json");
    let out = admit_with(&body, Mode::Validate, &policy(), &settings).expect("parses");
    assert_eq!(out.exemptions(), ["label"]);
}

#[test]
fn mutate_with_the_probe_helper_patches_in_its_exec_probes_and_volumes() {
    let policy = Policy::with_user_yaml(
        "probeHelper: {image: registry.example.com/probelint-probe:0.1.0, mode: initContainer}\n",
    )
    .expect("policy loads");
    let review = fixture_json("deny-gpu-deployment-without-probes");
    let body = serde_json::to_vec(&review).expect("json");
    let out = admit(&body, Mode::Mutate, &policy).expect("parses");
    assert_eq!(out.decision, Decision::Patched);
    let patch = base64::engine::general_purpose::STANDARD
        .decode(out.review.response.patch.as_deref().expect("patch"))
        .expect("base64");
    let patch: Patch = serde_json::from_slice(&patch).expect("patch json");
    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).expect("the patch applies to the object as sent");
    let pod = &object["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    // The liveness check's named port `http`, as the number an exec command needs.
    assert_eq!(
        c["startupProbe"]["exec"]["command"],
        json!([
            "/probelint/bin/probelint-probe",
            "startup",
            "--server",
            "vllm",
            "--port",
            "8000"
        ])
    );
    assert_eq!(pod["initContainers"][0]["args"], json!(["install", "/out"]));
    let volumes: Vec<&str> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(
        volumes.contains(&"probelint-probe") && volumes.contains(&"probelint-probe-state"),
        "{volumes:?}"
    );
    // Without the option the same review gets httpGet, as before.
    let plain = admit(&body, Mode::Mutate, &policy_default()).expect("parses");
    let plain = base64::engine::general_purpose::STANDARD
        .decode(plain.review.response.patch.as_deref().expect("patch"))
        .expect("base64");
    assert!(!String::from_utf8_lossy(&plain).contains("probelint-probe"));
}

fn policy_default() -> Policy {
    policy()
}
