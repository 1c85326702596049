//! Evaluation: analyse the objects once, run every rule, then apply the policy's severities
//! and the exemptions (annotation and policy) so that nothing is silently dropped.

use crate::analysis::context::Analysis;
use crate::analysis::facts::ObjectFacts;
use crate::analysis::object::{PodSpec, Workload};
use crate::catalog;
use crate::model::annotations::{
    IGNORE_ANNOTATION, IGNORE_CONTAINER_PREFIX, IGNORE_REASON_ANNOTATION,
};
use crate::model::finding::{Finding, ObjectRef, Suppression, SuppressionSource};
use crate::policy::Policy;
use crate::policy::custom::CustomTarget;
use crate::rules::rule::{Check, Report};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// Evaluates every built-in and custom rule over a set of objects (so that cross-object rules
/// see a Deployment beside its HPA). Findings are ordered by object, then pointer, then rule.
pub fn evaluate(objects: &[Value], policy: &Policy) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut facts = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        let evaluation = evaluate_object(object, index, policy);
        findings.extend(evaluation.findings);
        facts.extend(evaluation.facts);
    }
    findings.extend(evaluate_cross(&facts, policy));
    sort(&mut findings);
    findings
}

/// Evaluates one object on its own, as the admission webhook sees it: rules that need the other
/// objects of a manifest set (HPA and PDB checks) are skipped.
pub fn evaluate_one(object: &Value, policy: &Policy) -> Vec<Finding> {
    run_object(object, 0, policy, false).findings
}

/// What [`evaluate_object`] found in one object of a larger input.
#[derive(Debug)]
pub struct ObjectEvaluation {
    /// Findings of every rule that judges the object by itself, ordered by pointer then rule.
    pub findings: Vec<Finding>,
    /// What the cross-object rules need of this object, when they need anything: keep it for
    /// [`evaluate_cross`] and drop the object.
    pub facts: Option<ObjectFacts>,
}

/// Evaluates the object at position `index` of an input with every rule that judges an object
/// by itself. Together with [`evaluate_cross`] over the facts of the whole input this finds
/// exactly what [`evaluate`] does, without holding every object at once.
pub fn evaluate_object(object: &Value, index: usize, policy: &Policy) -> ObjectEvaluation {
    run_object(object, index, policy, true)
}

/// Evaluates the rules that judge objects by what else is in the input (an HPA scaling a GPU
/// Deployment, a PDB selecting it) over the facts of every object of that input.
pub fn evaluate_cross(facts: &[ObjectFacts], policy: &Policy) -> Vec<Finding> {
    let by_index: std::collections::HashMap<usize, &ObjectFacts> =
        facts.iter().map(|f| (f.index, f)).collect();
    let mut findings = Vec::new();
    for rule in catalog::registry() {
        let Check::Relations(check) = rule.check() else {
            continue;
        };
        let meta = rule.meta();
        let Some(severity) = policy.severity_for(meta.id, meta.severity) else {
            continue;
        };
        let start = findings.len();
        check(facts, &mut Report::new(meta, &mut findings));
        // A rule may lower a finding's severity (a guess makes at most a warning); only the
        // policy's own level for the rule replaces it.
        let overridden = policy.rule_levels.contains_key(meta.id);
        for finding in &mut findings[start..] {
            if overridden {
                finding.severity = severity;
            }
            let exemptions = by_index.get(&finding.object_index).map(|f| &f.exemptions);
            finding.suppressed = suppression(policy, finding, [exemptions, None], &[]);
        }
    }
    sort(&mut findings);
    findings
}

fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        (a.object_index, &a.pointer, &a.rule).cmp(&(b.object_index, &b.pointer, &b.rule))
    });
}

fn run_object(object: &Value, index: usize, policy: &Policy, want_facts: bool) -> ObjectEvaluation {
    let analysis = Analysis::single(object, index, policy);
    let findings = evaluate_analysed(&analysis, object, policy);
    ObjectEvaluation {
        facts: if want_facts {
            ObjectFacts::of(&analysis.workloads[0])
        } else {
            None
        },
        findings,
    }
}

/// The findings of every rule that judges `object` by itself, from its analysis (an
/// [`Analysis`] of that one object): for a caller that has analysed it already, so that it is
/// analysed once (admission compares an UPDATE's pod specs on the same analysis).
pub(crate) fn evaluate_analysed(
    analysis: &Analysis<'_>,
    object: &Value,
    policy: &Policy,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for rule in catalog::registry() {
        let Check::Object(check) = rule.check() else {
            continue;
        };
        let meta = rule.meta();
        let Some(severity) = policy.severity_for(meta.id, meta.severity) else {
            continue;
        };
        let start = findings.len();
        check(analysis, &mut Report::new(meta, &mut findings));
        if policy.rule_levels.contains_key(meta.id) {
            for f in &mut findings[start..] {
                f.severity = severity;
            }
        }
    }
    run_custom_rules(analysis, &mut findings);
    let workload = &analysis.workloads[0];
    // A Pod's (or ReplicaSet's) policy exemptions include those of the workloads it belongs to:
    // the Pods of an exempted Deployment are exempt too.
    let owners = crate::reach::owners(object);
    for finding in &mut findings {
        finding.suppressed =
            suppression(policy, finding, annotation_sets(workload, finding), &owners);
    }
    sort(&mut findings);
    findings
}

/// A finding of a rule that the reader of the source text reports ([`Check::Reader`]: a YAML
/// key written twice, which the parsed object no longer shows), about `object` (the `index`th
/// of its input), judged as every other finding is: the policy's level for the rule (`None`
/// where it is off) and the object's exemptions.
pub(crate) fn reader_finding(
    rule: &str,
    object: &Value,
    index: usize,
    pointer: String,
    message: String,
    help: String,
    policy: &Policy,
) -> Option<Finding> {
    let meta = catalog::find(rule)
        .filter(|r| matches!(r.check(), Check::Reader))?
        .meta();
    let severity = policy.severity_for(meta.id, meta.severity)?;
    let analysis = Analysis::single(object, index, policy);
    let workload = &analysis.workloads[0];
    let mut finding = Finding {
        rule: Cow::Borrowed(meta.id),
        severity,
        message,
        help: Cow::Owned(help),
        object: Arc::clone(&workload.object_ref),
        object_index: index,
        container: None,
        pointer,
        suppressed: None,
        fix: None,
        load: None,
        evidence: None,
    };
    let owners = crate::reach::owners(object);
    finding.suppressed = suppression(
        policy,
        &finding,
        annotation_sets(workload, &finding),
        &owners,
    );
    Some(finding)
}

fn run_custom_rules(analysis: &Analysis<'_>, findings: &mut Vec<Finding>) {
    for rule in &analysis.policy.custom_rules {
        let Some(severity) = analysis.policy.severity_for(&rule.id, rule.severity) else {
            continue;
        };
        let mut push = |object_index: usize,
                        object: &Arc<ObjectRef>,
                        container: Option<&Arc<str>>,
                        pointer: &str,
                        violation: String| {
            findings.push(Finding {
                rule: Cow::Owned(rule.id.clone()),
                severity,
                message: format!("{} ({violation})", rule.message),
                help: Cow::Owned(rule.help.clone()),
                object: Arc::clone(object),
                object_index,
                container: container.map(Arc::clone),
                pointer: pointer.to_owned(),
                suppressed: None,
                fix: None,
                load: None,
                evidence: None,
            });
        };
        match rule.target {
            CustomTarget::Container => {
                for cx in analysis.containers() {
                    if rule.accelerators_only && !cx.container.is_accelerated() {
                        continue;
                    }
                    if let Some(v) = rule.violation(cx.container.value) {
                        push(
                            cx.workload.index,
                            &cx.workload.object_ref,
                            Some(&cx.container.name),
                            &cx.container.pointer,
                            v,
                        );
                    }
                }
            }
            CustomTarget::PodSpec => {
                for w in &analysis.workloads {
                    for pod in &w.pod_specs {
                        if rule.accelerators_only && !pod.has_accelerator() {
                            continue;
                        }
                        if let Some(v) = rule.violation(pod.value) {
                            push(w.index, &w.object_ref, None, &pod.pointer, v);
                        }
                    }
                }
            }
            CustomTarget::Object => {
                for w in &analysis.workloads {
                    if rule.accelerators_only && !w.pod_specs.iter().any(PodSpec::has_accelerator) {
                        continue;
                    }
                    if let Some(v) = rule.violation(w.object) {
                        push(w.index, &w.object_ref, None, "", v);
                    }
                }
            }
        }
    }
}

/// The annotations that may exempt a finding: the pod template's (closest to the container),
/// then the object's.
fn annotation_sets<'a>(
    workload: &Workload<'a>,
    finding: &Finding,
) -> [Option<&'a serde_json::Map<String, Value>>; 2] {
    let template = workload
        .pod_specs
        .iter()
        .filter(|p| finding.pointer.starts_with(&p.pointer))
        .max_by_key(|p| p.pointer.len())
        .and_then(|p| p.template_annotations);
    [template, workload.annotations]
}

/// Whether `annotations` may hold a `probelint.io/ignore...` key. Most objects have none, and a
/// scan of their few annotations spares every finding the lookups below (and the container key's
/// formatting); a large map is not scanned for each finding, just looked up.
fn may_hold_exemption(annotations: &serde_json::Map<String, Value>) -> bool {
    annotations.len() > crate::model::fields::SCAN_LIMIT
        || annotations.keys().any(|k| k.starts_with(IGNORE_ANNOTATION))
}

/// Whether a finding is exempted, and by what. Policy exemptions are checked first: they hold
/// even in strict mode. A policy exemption matches the finding's object or one of its `owners`
/// ([`crate::reach::owners`]).
fn suppression(
    policy: &Policy,
    finding: &Finding,
    annotation_sets: [Option<&serde_json::Map<String, Value>>; 2],
    owners: &[ObjectRef],
) -> Option<Suppression> {
    let container = finding.container.as_deref();
    if let Some(exemption) = policy.exemptions.iter().find(|e| {
        e.covers_rule(&finding.rule)
            && (e.matches(&finding.object, container)
                || owners.iter().any(|o| e.matches(o, container)))
    }) {
        return Some(Suppression {
            source: SuppressionSource::Policy,
            reason: exemption.reason.clone(),
        });
    }
    if !policy.allow_annotation_exemptions {
        return None;
    }
    for annotations in annotation_sets
        .into_iter()
        .flatten()
        .filter(|a| may_hold_exemption(a))
    {
        let container_key = finding
            .container
            .as_ref()
            .map(|c| format!("{IGNORE_CONTAINER_PREFIX}{c}"));
        let listed = [Some(IGNORE_ANNOTATION), container_key.as_deref()]
            .into_iter()
            .flatten()
            .any(|key| {
                annotations
                    .get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|list| {
                        list.split(',')
                            .map(str::trim)
                            .any(|r| r == "all" || r == finding.rule)
                    })
            });
        if listed {
            let reason = annotations
                .get(IGNORE_REASON_ANNOTATION)
                .and_then(Value::as_str)
                .filter(|r| !r.trim().is_empty())
                .unwrap_or("no reason given (add probelint.io/ignore-reason)");
            return Some(Suppression {
                source: SuppressionSource::Annotation,
                reason: reason.to_owned(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::model::finding::SuppressionSource;
    use crate::rules::testing::{lint, lint_with, objects};
    use crate::{Policy, Severity};

    const NO_PROBES: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: serving
  annotations: ANNOTATIONS
spec:
  template:
    spec:
      containers:
        - name: server
          image: vllm/vllm-openai:v0.6.3
          resources: {limits: {nvidia.com/gpu: 1}}
        - name: metrics
          image: prom/exporter
"#;

    fn with_annotations(a: &str) -> String {
        NO_PROBES.replace("ANNOTATIONS", a)
    }

    fn rules_of(findings: &[crate::Finding], suppressed: bool) -> Vec<String> {
        findings
            .iter()
            .filter(|f| f.is_suppressed() == suppressed)
            .map(|f| f.rule.to_string())
            .collect()
    }

    #[test]
    fn annotation_exemption_is_reported_as_suppressed_with_its_reason() {
        let yaml = with_annotations(
            "{probelint.io/ignore: 'gpu-readiness-probe-missing', probelint.io/ignore-reason: 'served behind a queue'}",
        );
        let findings = lint(&yaml);
        let suppressed: Vec<_> = findings.iter().filter(|f| f.is_suppressed()).collect();
        assert_eq!(suppressed.len(), 1);
        assert_eq!(suppressed[0].rule, "gpu-readiness-probe-missing");
        let s = suppressed[0].suppressed.as_ref().unwrap();
        assert_eq!(s.source, SuppressionSource::Annotation);
        assert_eq!(s.reason, "served behind a queue");
        assert!(rules_of(&findings, false).contains(&"gpu-startup-probe-missing".to_owned()));
    }

    #[test]
    fn ignore_all_and_per_container_annotations() {
        let all = lint(&with_annotations("{probelint.io/ignore: all}"));
        assert!(!all.is_empty() && all.iter().all(|f| f.is_suppressed()));
        assert_eq!(
            all[0].suppressed.as_ref().unwrap().reason,
            "no reason given (add probelint.io/ignore-reason)"
        );
        let other = lint(&with_annotations("{probelint.io/ignore.metrics: all}"));
        assert!(
            other.iter().all(|f| !f.is_suppressed()),
            "only container metrics is exempt"
        );
        let this = lint(&with_annotations(
            "{probelint.io/ignore.server: 'gpu-startup-probe-missing, gpu-readiness-probe-missing'}",
        ));
        assert_eq!(
            rules_of(&this, true),
            ["gpu-readiness-probe-missing", "gpu-startup-probe-missing"]
        );
    }

    #[test]
    fn template_annotations_exempt_too() {
        let yaml = NO_PROBES
            .replace("  annotations: ANNOTATIONS\n", "")
            .replace("  template:\n    spec:", "  template:\n    metadata:\n      annotations: {probelint.io/ignore: all}\n    spec:");
        assert!(lint(&yaml).iter().all(|f| f.is_suppressed()));
    }

    #[test]
    fn strict_mode_ignores_annotations_but_keeps_policy_exemptions() {
        let yaml = with_annotations("{probelint.io/ignore: all}");
        let strict = Policy::with_user_yaml(
            "allowAnnotationExemptions: false\nexemptions:\n  - rules: [gpu-readiness-probe-missing]\n    namespaces: [serv*]\n    containers: [server]\n    reason: readiness is enforced by the gateway\n",
        )
        .unwrap();
        let findings = lint_with(&yaml, &strict);
        assert_eq!(rules_of(&findings, true), ["gpu-readiness-probe-missing"]);
        let f = findings.iter().find(|f| f.is_suppressed()).unwrap();
        assert_eq!(
            f.suppressed.as_ref().unwrap().source,
            SuppressionSource::Policy
        );
        assert!(rules_of(&findings, false).contains(&"gpu-startup-probe-missing".to_owned()));
    }

    #[test]
    fn a_policy_exemption_of_a_deployment_covers_the_pods_of_its_replicasets() {
        let pod = |owner_controller: bool| {
            format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  generateName: llm-6b8f9d7c5-
  namespace: serving
  labels: {{app: llm, pod-template-hash: 6b8f9d7c5}}
  ownerReferences:
    - {{apiVersion: apps/v1, kind: ReplicaSet, name: llm-6b8f9d7c5, uid: u, controller: {owner_controller}}}
spec:
  containers:
    - name: server
      image: vllm/vllm-openai:v0.6.3
      resources: {{limits: {{nvidia.com/gpu: 1}}}}
"#
            )
        };
        let policy = Policy::with_user_yaml(
            "exemptions:\n  - rules: [gpu-readiness-probe-missing]\n    kinds: [Deployment]\n    names: [llm]\n    reason: behind a queue\n",
        )
        .unwrap();
        let findings = lint_with(&pod(true), &policy);
        let readiness = findings
            .iter()
            .find(|f| f.rule == "gpu-readiness-probe-missing")
            .expect("finding");
        assert_eq!(
            readiness.suppressed.as_ref().map(|s| s.reason.as_str()),
            Some("behind a queue")
        );
        assert!(
            findings
                .iter()
                .any(|f| f.rule == "gpu-startup-probe-missing" && !f.is_suppressed()),
            "only the exempted rule: {findings:#?}"
        );
        // Without a controller nothing is traced: the Pod is only itself.
        assert!(
            lint_with(&pod(false), &policy)
                .iter()
                .all(|f| !f.is_suppressed())
        );
    }

    #[test]
    fn policy_exemption_selectors_must_all_match() {
        let policy = Policy::with_user_yaml(
            "exemptions:\n  - rules: [all]\n    namespaces: [other]\n    reason: not ours\n",
        )
        .unwrap();
        assert!(
            lint_with(&with_annotations("{}"), &policy)
                .iter()
                .all(|f| !f.is_suppressed())
        );
    }

    #[test]
    fn rule_off_drops_its_findings() {
        let policy = Policy::with_user_yaml("rules:\n  gpu-startup-probe-missing: off\n").unwrap();
        let findings = lint_with(&with_annotations("{}"), &policy);
        assert!(
            findings
                .iter()
                .all(|f| f.rule != "gpu-startup-probe-missing")
        );
        assert!(
            findings
                .iter()
                .any(|f| f.rule == "gpu-readiness-probe-missing")
        );
    }

    #[test]
    fn custom_rules_check_containers_pod_specs_and_objects() {
        let policy = Policy::with_user_yaml(
            r#"customRules:
  - id: gpu-memory-limit
    severity: warning
    target: container
    acceleratorsOnly: true
    message: GPU containers must set a memory limit
    schema:
      type: object
      required: [resources]
      properties:
        resources:
          required: [limits]
          properties:
            limits: {required: [memory]}
  - id: owner-label
    severity: info
    target: object
    message: objects need an owner label
    schema: {required: [metadata], properties: {metadata: {required: [labels]}}}
  - id: no-host-network
    severity: error
    target: podSpec
    message: no hostNetwork
    schema: {properties: {hostNetwork: {const: false}}}
"#,
        )
        .unwrap();
        let findings = lint_with(&with_annotations("{}"), &policy);
        let custom: Vec<_> = findings
            .iter()
            .filter(|f| ["gpu-memory-limit", "owner-label", "no-host-network"].contains(&&*f.rule))
            .map(|f| {
                (
                    &*f.rule,
                    f.severity,
                    f.container.as_deref(),
                    f.pointer.as_str(),
                )
            })
            .collect();
        assert_eq!(
            custom,
            [
                ("owner-label", Severity::Info, None, ""),
                (
                    "gpu-memory-limit",
                    Severity::Warning,
                    Some("server"),
                    "/spec/template/spec/containers/0"
                ),
            ]
        );
    }

    #[test]
    fn custom_rule_schema_errors_and_remote_refs_are_refused() {
        let err = Policy::with_user_yaml(
            "customRules:\n  - id: x\n    severity: error\n    target: object\n    message: m\n    schema: {type: 12}\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("customRules[0].schema"),
            "{err}"
        );
        let err = Policy::with_user_yaml(
            "customRules:\n  - id: x\n    severity: error\n    target: object\n    message: m\n    schema: {$ref: 'https://example.com/s.json'}\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("customRules[0].schema"),
            "{err}"
        );
        let err = Policy::with_user_yaml(
            "customRules:\n  - id: x\n    severity: error\n    target: object\n    message: m\n    schema: {$ref: 'file:///etc/passwd'}\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("customRules[0].schema"),
            "{err}"
        );
        let err = Policy::with_user_yaml(
            "customRules:\n  - id: gpu-startup-probe-missing\n    severity: error\n    target: object\n    message: m\n    schema: {}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("already taken"), "{err}");
    }

    /// Cross-object findings are judged from small facts after the objects are gone; the
    /// object's own exemption annotations must still reach them (a pod template's cannot: the
    /// findings point outside it).
    #[test]
    fn cross_object_findings_honour_the_objects_exemptions() {
        let bad = crate::catalog::find("gpu-serving-without-pdb")
            .unwrap()
            .meta()
            .bad_example;
        let rule = |yaml: &str| {
            lint(yaml)
                .into_iter()
                .find(|f| f.rule == "gpu-serving-without-pdb")
                .expect("the rule fires")
        };
        assert!(!rule(bad).is_suppressed());
        let exempt = bad.replace(
            "metadata:\n  name: vllm\n",
            "metadata:\n  name: vllm\n  annotations:\n    probelint.io/ignore: gpu-serving-without-pdb\n    probelint.io/ignore-reason: the PDB is managed by the platform\n",
        );
        let finding = rule(&exempt);
        let suppression = finding.suppressed.as_ref().expect("suppressed");
        assert_eq!(suppression.source, SuppressionSource::Annotation);
        assert_eq!(suppression.reason, "the PDB is managed by the platform");
        let raised =
            Policy::with_user_yaml("rules:\n  gpu-serving-without-pdb: warning\n").unwrap();
        let findings = lint_with(bad, &raised);
        let f = findings
            .iter()
            .find(|f| f.rule == "gpu-serving-without-pdb")
            .unwrap();
        assert_eq!(f.severity, Severity::Warning);
    }

    #[test]
    fn a_lone_object_is_not_judged_by_what_is_missing_around_it() {
        let yaml = crate::catalog::find("gpu-serving-without-pdb")
            .unwrap()
            .meta()
            .bad_example;
        let object = &objects(yaml)[0];
        assert!(
            crate::evaluate(std::slice::from_ref(object), &Policy::default())
                .iter()
                .any(|f| f.rule == "gpu-serving-without-pdb")
        );
        assert!(
            crate::evaluate_one(object, &Policy::default())
                .iter()
                .all(|f| f.rule != "gpu-serving-without-pdb")
        );
    }

    #[test]
    fn findings_know_which_input_object_they_are_about() {
        let yaml = format!(
            "{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: s}}\n---\n{}",
            with_annotations("{}"),
            with_annotations("{}").replace("name: llm", "name: llm2")
        );
        let objs = objects(&yaml);
        let findings = crate::evaluate(&objs, &Policy::default());
        assert!(
            findings
                .iter()
                .any(|f| f.object_index == 0 && f.object.name.as_deref() == Some("llm"))
        );
        assert!(
            findings
                .iter()
                .any(|f| f.object_index == 2 && f.object.name.as_deref() == Some("llm2"))
        );
        assert!(findings.iter().all(|f| f.object_index != 1));
    }
}
