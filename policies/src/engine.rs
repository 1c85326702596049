//! Evaluation: analyse the objects once, run every rule, then apply the policy's severities
//! and the exemptions (annotation and policy) so that nothing is silently dropped.

use crate::custom::CustomTarget;
use crate::finding::{Finding, ObjectRef, Suppression, SuppressionSource};
use crate::policy::Policy;
use crate::rules::{self, Report};
use crate::workload::{Container, PodSpec, Workload};
use serde_json::Value;

/// Object-level annotation listing exempted rule ids (comma-separated, or `all`).
pub const IGNORE_ANNOTATION: &str = "probelint.io/ignore";
/// Prefix of the per-container form: `probelint.io/ignore.<container-name>`.
pub const IGNORE_CONTAINER_PREFIX: &str = "probelint.io/ignore.";
/// Why the exemption exists.
pub const IGNORE_REASON_ANNOTATION: &str = "probelint.io/ignore-reason";

/// Everything the rules read: the policy and every input object, analysed once.
pub struct Analysis<'a> {
    pub policy: &'a Policy,
    pub workloads: Vec<Workload<'a>>,
}

/// A container together with the pod spec and object it is in.
#[derive(Clone, Copy)]
pub struct ContainerContext<'x, 'a> {
    pub workload: &'x Workload<'a>,
    pub pod: &'x PodSpec<'a>,
    pub container: &'x Container<'a>,
}

impl<'a> Analysis<'a> {
    pub fn new(objects: &'a [Value], policy: &'a Policy) -> Self {
        Analysis {
            policy,
            workloads: objects
                .iter()
                .enumerate()
                .map(|(i, o)| Workload::analyse(i, o, policy))
                .collect(),
        }
    }

    /// Every container (regular and native sidecar) of every pod spec of every object.
    pub fn containers(&self) -> impl Iterator<Item = ContainerContext<'_, 'a>> {
        self.workloads.iter().flat_map(|workload| {
            workload.pod_specs.iter().flat_map(move |pod| {
                pod.containers.iter().map(move |container| ContainerContext {
                    workload,
                    pod,
                    container,
                })
            })
        })
    }

    /// Containers that use an accelerator.
    pub fn accelerated_containers(&self) -> impl Iterator<Item = ContainerContext<'_, 'a>> {
        self.containers().filter(|c| c.container.is_accelerated())
    }
}

/// Evaluates every built-in and custom rule over a set of objects (so that cross-object rules
/// see a Deployment beside its HPA). Findings are ordered by object, then pointer, then rule.
pub fn evaluate(objects: &[Value], policy: &Policy) -> Vec<Finding> {
    let analysis = Analysis::new(objects, policy);
    let mut findings = Vec::new();
    for rule in rules::registry() {
        let meta = rule.meta();
        let Some(severity) = policy.severity_for(meta.id, meta.severity) else {
            continue;
        };
        let start = findings.len();
        rule.check(&analysis, &mut Report::new(meta, &mut findings));
        if policy.rule_levels.contains_key(meta.id) {
            for f in &mut findings[start..] {
                f.severity = severity;
            }
        }
    }
    run_custom_rules(&analysis, &mut findings);
    for finding in &mut findings {
        finding.suppressed = suppression(&analysis, finding);
    }
    findings.sort_by(|a, b| {
        (a.object_index, &a.pointer, &a.rule).cmp(&(b.object_index, &b.pointer, &b.rule))
    });
    findings
}

/// [`evaluate`] for one object.
pub fn evaluate_one(object: &Value, policy: &Policy) -> Vec<Finding> {
    evaluate(std::slice::from_ref(object), policy)
}

fn run_custom_rules(analysis: &Analysis<'_>, findings: &mut Vec<Finding>) {
    for rule in &analysis.policy.custom_rules {
        let Some(severity) = analysis.policy.severity_for(&rule.id, rule.severity) else {
            continue;
        };
        let mut push = |object_index: usize,
                        object: &ObjectRef,
                        container: Option<&str>,
                        pointer: &str,
                        violation: String| {
            findings.push(Finding {
                rule: rule.id.clone(),
                severity,
                message: format!("{} ({violation})", rule.message),
                help: rule.help.clone(),
                object: object.clone(),
                object_index,
                container: container.map(str::to_owned),
                pointer: pointer.to_owned(),
                suppressed: None,
                fix: None,
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

/// Whether a finding is exempted, and by what. Policy exemptions are checked first: they hold
/// even in strict mode.
fn suppression(analysis: &Analysis<'_>, finding: &Finding) -> Option<Suppression> {
    let policy = analysis.policy;
    if let Some(exemption) = policy.exemptions.iter().find(|e| {
        e.covers_rule(&finding.rule) && e.matches(&finding.object, finding.container.as_deref())
    }) {
        return Some(Suppression {
            source: SuppressionSource::Policy,
            reason: exemption.reason.clone(),
        });
    }
    if !policy.allow_annotation_exemptions {
        return None;
    }
    let workload = analysis.workloads.get(finding.object_index)?;
    // The pod template's annotations first (closest to the container), then the object's.
    let template = workload
        .pod_specs
        .iter()
        .filter(|p| finding.pointer.starts_with(&p.pointer))
        .max_by_key(|p| p.pointer.len())
        .and_then(|p| p.template_annotations);
    for annotations in [template, workload.annotations].into_iter().flatten() {
        let mut keys = vec![IGNORE_ANNOTATION.to_owned()];
        if let Some(container) = &finding.container {
            keys.push(format!("{IGNORE_CONTAINER_PREFIX}{container}"));
        }
        let listed = keys.iter().any(|key| {
            annotations
                .get(key)
                .and_then(Value::as_str)
                .is_some_and(|list| list.split(',').map(str::trim).any(|r| r == "all" || r == finding.rule))
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
