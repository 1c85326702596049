//! `probe-threshold-invalid`: probe timing fields the apiserver rejects.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::apiserver::{self, FieldProblem, IntType};
use crate::model::fields;
use crate::model::finding::Severity;
use crate::model::probe::{Field, ProbeKind};
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "probe-threshold-invalid",
    severity: Severity::Error,
    summary: "Probe timing fields the apiserver rejects (negative, not an int32, successThreshold ≠ 1 on liveness/startup, a bad probe terminationGracePeriodSeconds)",
    rationale: "The apiserver refuses a pod whose probe has a negative initialDelaySeconds, \
timeoutSeconds, periodSeconds, successThreshold or failureThreshold, a liveness or startup probe whose \
successThreshold is not 1, a probe terminationGracePeriodSeconds that is not positive, or one on a \
readinessProbe (validateProbe, validateLivenessProbe, validateStartupProbe and validateReadinessProbe in \
kubernetes/kubernetes pkg/apis/core/validation/validation.go). It cannot even decode a value that is \
not a whole number or does not fit the field's type (int32 for the timings, int64 for the grace \
period): a quoted \"30\", \"5s\", 2147483648. In a Helm chart or GitOps repo that failure only \
surfaces at deploy time, often in the middle of a rollout of a GPU fleet; catching it in review is \
cheaper. A 0 is not an error: SetDefaults_Probe (pkg/apis/core/v1/defaults.go) replaces a 0 \
timeoutSeconds, periodSeconds, successThreshold or failureThreshold with its default (1, 10, 1, 3), \
and probelint judges and simulates the probe with those defaults, as the kubelet will run it.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/probe-threshold-invalid/bad.yaml"),
    good_example: include_str!("../../resources/rules/probe-threshold-invalid/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        for probe in cx.container.probes() {
            // `startupProbe`: the probe's field name is how messages name it.
            let name = probe.kind.field();
            let mut problems: Vec<(&str, String)> = Vec::new();
            let fields = [
                ("initialDelaySeconds", probe.initial_delay_seconds),
                ("periodSeconds", probe.period_seconds),
                ("timeoutSeconds", probe.timeout_seconds),
                ("successThreshold", probe.success_threshold),
                ("failureThreshold", probe.failure_threshold),
            ];
            for (field, value) in fields {
                match value {
                    Field::Invalid(FieldProblem::Negative(v)) => {
                        problems.push((field, format!("is {v}: it {}", apiserver::NEGATIVE)))
                    }
                    Field::Invalid(FieldProblem::Undecodable(why)) => {
                        let raw = fields::get(probe.value, field)
                            .map_or_else(String::new, Value::to_string);
                        problems.push((field, format!("{raw} {why}")));
                    }
                    // After defaulting (0 becomes 1), only 1 passes validateLivenessProbe and
                    // validateStartupProbe.
                    Field::Set(v)
                        if field == "successThreshold"
                            && v != 1
                            && probe.kind != ProbeKind::Readiness =>
                    {
                        problems.push((
                            field,
                            format!("is {v}: it must be 1 for a {} probe", probe.kind.noun()),
                        ));
                    }
                    _ => {}
                }
            }
            const GRACE: &str = "terminationGracePeriodSeconds";
            if let Some(grace) = fields::get(probe.value, GRACE).filter(|v| !v.is_null()) {
                if probe.kind == ProbeKind::Readiness {
                    problems.push((GRACE, "must not be set for readinessProbes (the kubelet never kills a container for failing readiness)".to_owned()));
                } else {
                    match apiserver::integer(grace, IntType::Int64) {
                        Ok(v) if v <= 0 => {
                            problems.push((GRACE, format!("is {v}: it must be greater than 0")))
                        }
                        Ok(_) => {}
                        Err(why) => problems.push((GRACE, format!("{grace} {why}"))),
                    }
                }
            }
            for (field, problem) in problems {
                report
.container(&cx)
.at(format!("{}/{field}", probe.pointer))
.message(format!(
                        "{}: {name}.{field} {problem}: the apiserver rejects this pod",
                        cx.container.describe()
                    ))
.help(format!(
                        "set {name}.{field} to a whole number the apiserver accepts (or leave it out for Kubernetes' default)"
                    ))
.report();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{findings_of, fired, lint};

    const ID: &str = "probe-threshold-invalid";

    fn pod(probe: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n    - name: m\n      {probe}\n"
        )
    }

    #[test]
    fn reports_each_bad_field_at_its_own_pointer() {
        let got: Vec<_> = fired(super::META.bad_example, ID)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(
            got,
            [
                "/spec/template/spec/containers/0/readinessProbe/timeoutSeconds",
                "/spec/template/spec/containers/0/startupProbe/successThreshold",
            ]
        );
    }

    #[test]
    fn each_rejected_value_names_the_field_and_the_apiserver_reason() {
        for (fields, field, want) in [
            (
                "initialDelaySeconds: -5",
                "initialDelaySeconds",
                "is -5: it must be greater than or equal to 0",
            ),
            (
                "periodSeconds: -1",
                "periodSeconds",
                "is -1: it must be greater than or equal to 0",
            ),
            (
                "timeoutSeconds: -1",
                "timeoutSeconds",
                "must be greater than or equal to 0",
            ),
            (
                "failureThreshold: -3",
                "failureThreshold",
                "must be greater than or equal to 0",
            ),
            (
                "successThreshold: -1",
                "successThreshold",
                "must be greater than or equal to 0",
            ),
            (
                "failureThreshold: \"30\"",
                "failureThreshold",
                "\"30\" is a string, not an integer",
            ),
            (
                "failureThreshold: 2147483648",
                "failureThreshold",
                "2147483648 does not fit the field's type, int32",
            ),
            (
                "failureThreshold: 18446744073709551615",
                "failureThreshold",
                "does not fit the field's type, int32",
            ),
            (
                "periodSeconds: 1e300",
                "periodSeconds",
                "does not fit the field's type, int32",
            ),
            (
                "periodSeconds: 2.5",
                "periodSeconds",
                "2.5 is not a whole number",
            ),
            (
                "timeoutSeconds: true",
                "timeoutSeconds",
                "is a boolean, not an integer",
            ),
            (
                "successThreshold: 3",
                "successThreshold",
                "is 3: it must be 1 for a liveness probe",
            ),
            (
                "terminationGracePeriodSeconds: 0",
                "terminationGracePeriodSeconds",
                "is 0: it must be greater than 0",
            ),
            (
                "terminationGracePeriodSeconds: -1",
                "terminationGracePeriodSeconds",
                "is -1: it must be greater than 0",
            ),
            (
                "terminationGracePeriodSeconds: 9223372036854775808",
                "terminationGracePeriodSeconds",
                "int64",
            ),
        ] {
            let yaml = pod(&format!(
                "livenessProbe: {{httpGet: {{path: /h, port: 1}}, {fields}}}"
            ));
            let f = findings_of(&yaml, ID);
            assert_eq!(f.len(), 1, "{fields}: {f:#?}");
            assert_eq!(
                f[0].pointer,
                format!("/spec/containers/0/livenessProbe/{field}")
            );
            assert!(
                f[0].message
                    .starts_with(&format!("container \"m\": livenessProbe.{field} ")),
                "{}",
                f[0].message
            );
            assert!(f[0].message.contains(want), "{fields}: {}", f[0].message);
        }
    }

    #[test]
    fn readiness_may_not_set_a_kill_grace_period() {
        let bad = pod(
            "readinessProbe: {httpGet: {path: /h, port: 1}, terminationGracePeriodSeconds: 30}",
        );
        let f = findings_of(&bad, ID);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("must not be set for readinessProbes"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn timing_rules_do_not_judge_a_probe_with_rejected_fields() {
        // The budget a default would give contradicts what the manifest says: one error only.
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: m\n      \
                    image: vllm/vllm-openai:v0.6.3\n      resources: {limits: {nvidia.com/gpu: 1}}\n      \
                    startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: 2147483648}\n      \
                    readinessProbe: {httpGet: {path: /health, port: 8000}}\n";
        let rules: Vec<_> = lint(yaml)
            .into_iter()
            .map(|f| f.rule.into_owned())
            .collect();
        assert!(rules.contains(&ID.to_owned()), "{rules:?}");
        assert!(
            !rules.contains(&"startup-budget-too-short".to_owned()),
            "{rules:?}"
        );
    }
}
