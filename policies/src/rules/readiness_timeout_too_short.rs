//! `readiness-timeout-too-short`: a readiness probe that runs a generation with a 1 s timeout.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::{Field, ProbeKind};

static META: RuleMeta = RuleMeta {
    id: "readiness-timeout-too-short",
    severity: Severity::Warning,
    summary: "Readiness runs a generation (e.g. /health_generate) with timeoutSeconds ≤ 1",
    rationale: "Some readiness endpoints run a real inference: SGLang's /health_generate, a completion \
request, a model's :predict. Under load that takes longer than Kubernetes' default timeoutSeconds of 1, \
so every replica that is busy serving real traffic fails readiness at the same moment and the Service \
is left with no endpoints — an outage caused by success. Give such probes a timeout that covers a \
generation under load (5-10 s).",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/readiness-timeout-too-short/bad.yaml"),
    good_example: include_str!("../../resources/rules/readiness-timeout-too-short/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        let Some(readiness) = cx.container.probe(ProbeKind::Readiness) else {
            continue;
        };
        let Some(path) = super::support::generation_path(&cx, readiness) else {
            continue;
        };
        if readiness.timeout() > 1 || readiness.timeout_seconds.is_invalid() {
            continue;
        }
        let (pointer, shown) = match readiness.timeout_seconds {
            Field::Set(v) => (
                format!("{}/timeoutSeconds", readiness.pointer),
                format!("timeoutSeconds: {v}"),
            ),
            Field::Zero(v) => (
                format!("{}/timeoutSeconds", readiness.pointer),
                format!("timeoutSeconds: 0 (which the apiserver turns into its default, {v})"),
            ),
            _ => (
                readiness.pointer.clone(),
                "the default timeoutSeconds of 1".to_owned(),
            ),
        };
        report
            .container(&cx)
            .at(pointer)
            .message(format!(
                "{}: readiness on {path} runs a generation with {shown}: busy replicas fail \
                 readiness together",
                cx.container.describe()
            ))
            .help("set readinessProbe.timeoutSeconds to cover a generation under load (e.g. 10)")
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::fired;

    const ID: &str = "readiness-timeout-too-short";

    #[test]
    fn default_timeout_points_at_the_probe_and_explicit_one_at_the_field() {
        assert_eq!(
            fired(super::META.bad_example, ID)[0].1,
            "/spec/template/spec/containers/0/readinessProbe"
        );
        let pod = include_str!(
            "../../resources/rules/readiness-timeout-too-short/fires-explicit-one-second-timeout.yaml"
        );
        assert_eq!(
            fired(pod, ID)[0].1,
            "/spec/containers/0/readinessProbe/timeoutSeconds"
        );
        // 0 is the default of 1 (SetDefaults_Probe), and says so.
        let zero = pod.replace("timeoutSeconds: 1", "timeoutSeconds: 0");
        let f = crate::rules::testing::findings_of(&zero, ID);
        assert_eq!(
            f[0].pointer,
            "/spec/containers/0/readinessProbe/timeoutSeconds"
        );
        assert!(
            f[0].message
                .contains("timeoutSeconds: 0 (which the apiserver turns into its default, 1)"),
            "{}",
            f[0].message
        );
    }
}
