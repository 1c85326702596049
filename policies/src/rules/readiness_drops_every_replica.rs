//! `readiness-drops-every-replica`: readiness that runs a generation and gives up at the first
//! failure.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::fix::Change;
use crate::fix::patch::replace;
use crate::fix::probes::GENERATION_FAILURE_THRESHOLD as SUGGESTED_FAILURE_THRESHOLD;
use crate::model::finding::{Applicability, Severity};
use crate::model::pointer;
use crate::model::probe::{Field, ProbeKind};
use serde_json::json;

static META: RuleMeta = RuleMeta {
    id: "readiness-drops-every-replica",
    severity: Severity::Warning,
    summary: "Readiness runs a generation with failureThreshold 1: one slow spike takes every replica out of rotation",
    rationale: "A readiness probe that runs a generation (SGLang's /health_generate, a completion, a \
model's :predict) is slow exactly when the server is busy, and it is busy on every replica at once: a \
burst of traffic makes them all slow together. With failureThreshold: 1 a single slow answer marks a \
replica NotReady, so one spike removes every replica from the Service's endpoints at the same moment \
and their traffic moves onto nothing, until each passes again a period later. Three failures in a row \
tell a wedged server from a busy one. Seen by every front end: the probe is in the object itself.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/readiness-drops-every-replica/bad.yaml"),
    good_example: include_str!("../../resources/rules/readiness-drops-every-replica/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Sets readinessProbe.failureThreshold to 3. Readiness never restarts a container, so a \
higher threshold only keeps a busy replica in rotation a little longer.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        if !cx.pod.serving {
            continue;
        }
        let Some(readiness) = cx.container.probe(ProbeKind::Readiness) else {
            continue;
        };
        if !matches!(readiness.failure_threshold, Field::Set(1)) || !readiness.value.is_object() {
            continue;
        }
        let Some(path) = super::support::generation_path(&cx, readiness) else {
            continue;
        };
        let field = pointer::join(&readiness.pointer, "failureThreshold");
        let fix = Change::new(
            format!("set readinessProbe.failureThreshold to {SUGGESTED_FAILURE_THRESHOLD}"),
            vec![replace(field.clone(), json!(SUGGESTED_FAILURE_THRESHOLD))],
        );
        report
            .container(&cx)
            .at(field)
            .message(format!(
                "{}: readiness runs a generation ({path}, every {} s) with failureThreshold 1: \
                 one slow answer takes this replica out of rotation, and a traffic spike slows \
                 every replica at once",
                cx.container.describe(),
                readiness.period()
            ))
            .help(format!(
                "set readinessProbe.failureThreshold to {SUGGESTED_FAILURE_THRESHOLD} or more"
            ))
            .fix(fix)
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "readiness-drops-every-replica";

    #[test]
    fn fires_on_generation_readiness_with_threshold_one_and_fixes_to_three() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(
            f.pointer,
            "/spec/template/spec/containers/0/readinessProbe/failureThreshold"
        );
        assert!(
            f.message.contains("/health_generate, every 5 s"),
            "{}",
            f.message
        );
        assert_eq!(
            serde_json::to_value(&f.fix.as_ref().unwrap().patch).unwrap(),
            serde_json::json!([{"op": "replace", "path": "/spec/template/spec/containers/0/readinessProbe/failureThreshold", "value": 3}])
        );
    }
}
