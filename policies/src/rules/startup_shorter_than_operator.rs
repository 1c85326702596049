//! `startup-shorter-than-operator`: a startupProbe replaces the longer one its operator would add.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::{Probe, ProbeKind};

static META: RuleMeta = RuleMeta {
    id: "startup-shorter-than-operator",
    severity: Severity::Warning,
    summary: "A startupProbe replaces its operator's default with a shorter budget",
    rationale: "Operators that build model-serving pods give the server a startupProbe sized for model \
loads: KServe's LLMInferenceService configs allow 600 s, the NIM Operator 1,230 s. A startupProbe in the \
spec does not add to that default, it replaces it, so a shorter one (copied from a CPU service, or sized \
for a smaller model) lets the kubelet kill a load the operator's default would have waited for. Keep the \
operator's probe (remove yours), or make yours at least as long. probelint reads the operators' defaults \
from a table with each row's version and source file (the policy's `operatorDefaults:` \
overrides it where a cluster's configuration differs).",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/startup-shorter-than-operator/bad.yaml"),
    good_example: include_str!("../../resources/rules/startup-shorter-than-operator/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        let (Some(own), Some(operator)) = (
            cx.container
                .probe(ProbeKind::Startup)
                .filter(|p| p.timings_valid()),
            &cx.container.operator,
        ) else {
            continue;
        };
        let Some(default) = operator.probe(ProbeKind::Startup) else {
            continue;
        };
        let default = Probe::from_value(ProbeKind::Startup, String::new(), default);
        if own.budget_seconds() >= default.budget_seconds() {
            continue;
        }
        report
            .container(&cx)
            .at(own.pointer.clone())
            .message(format!(
                "{}: this startupProbe ({}) replaces the {} that {} adds: the merged pod gives \
                 up on the load sooner",
                cx.container.describe(),
                own.budget_arithmetic(),
                default.budget_arithmetic(),
                operator.provenance()
            ))
            .help(format!(
                "remove this startupProbe to keep the operator's, or give it a budget of at \
                 least {} s",
                default.budget_seconds()
            ))
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "startup-shorter-than-operator";

    #[test]
    fn message_compares_both_budgets_and_names_the_source() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.pointer, "/spec/template/containers/0/startupProbe");
        assert!(f.message.contains("120 s (12 × 10 s)"), "{}", f.message);
        assert!(f.message.contains("600 s (60 × 10 s)"), "{}", f.message);
        assert!(
            f.message.contains("config-llm-template.yaml"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_disabled_operator_default_is_silent() {
        let policy = crate::Policy::with_user_yaml(
            "operatorDefaults:\n  kserve-llmisvc-template: {enabled: false}\n",
        )
        .unwrap();
        let findings = crate::rules::testing::lint_with(super::META.bad_example, &policy);
        assert!(findings.iter().all(|f| f.rule != ID));
    }
}
