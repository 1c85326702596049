//! `probe-threshold-invalid`: probe timings the apiserver rejects, or that cannot work.

use super::{Report, Rule, RuleMeta};
use crate::engine::Analysis;
use crate::finding::Severity;
use crate::probe::{Field, ProbeKind};

pub struct ProbeThresholdInvalid;

static META: RuleMeta = RuleMeta {
    id: "probe-threshold-invalid",
    severity: Severity::Error,
    summary: "Probe timing fields the apiserver rejects (successThreshold ≠ 1 on liveness/startup, non-positive values)",
    rationale: "The apiserver rejects a liveness or startup probe whose successThreshold is not 1, and any \
probe with a periodSeconds, timeoutSeconds, successThreshold or failureThreshold below 1 or a negative \
initialDelaySeconds. In a Helm chart or GitOps repo that failure only surfaces at deploy time, often in \
the middle of a rollout of a GPU fleet. Catching it in review is cheaper. Values that are not integers \
(a quoted \"30\") are rejected the same way.",
    example_policy: None,
    bad_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nim
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: nim
          image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.1.0
          ports:
            - containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /v1/health/ready
              port: 8000
            failureThreshold: 15
            successThreshold: 2
          readinessProbe:
            httpGet:
              path: /v1/health/ready
              port: 8000
            periodSeconds: 0
"#,
    good_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nim
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: nim
          image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.1.0
          ports:
            - containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /v1/health/ready
              port: 8000
            failureThreshold: 15
          readinessProbe:
            httpGet:
              path: /v1/health/ready
              port: 8000
            periodSeconds: 5
            successThreshold: 2
"#,
    fix: None,
};

impl Rule for ProbeThresholdInvalid {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check(&self, analysis: &Analysis<'_>, report: &mut Report<'_>) {
        for cx in analysis.containers() {
            for probe in cx.container.probes() {
                // `startupProbe`: the probe's field name is how messages name it.
                let name = probe.kind.field();
                let fields = [
                    ("initialDelaySeconds", probe.initial_delay_seconds, 0),
                    ("periodSeconds", probe.period_seconds, 1),
                    ("timeoutSeconds", probe.timeout_seconds, 1),
                    ("successThreshold", probe.success_threshold, 1),
                    ("failureThreshold", probe.failure_threshold, 1),
                ];
                for (field, value, min) in fields {
                    let problem = match value {
                        Field::Invalid => Some(format!(
                            "is {}, not an integer",
                            probe
                                .value
                                .get(field)
                                .map(|v| v.to_string())
                                .unwrap_or_default()
                        )),
                        Field::Set(v) if v < min => Some(format!("is {v}; the minimum is {min}")),
                        Field::Set(v)
                            if field == "successThreshold"
                                && v != 1
                                && probe.kind != ProbeKind::Readiness =>
                        {
                            Some(format!("is {v}; {name} must use 1"))
                        }
                        _ => None,
                    };
                    if let Some(problem) = problem {
                        report.container(
                            &cx,
                            format!("{}/{field}", probe.pointer),
                            format!(
                                "{}: {name}.{field} {problem}: the apiserver rejects this pod",
                                cx.container.describe()
                            ),
                            format!("set {name}.{field} to a valid value (Kubernetes' default applies when it is omitted)"),
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::fired;

    const ID: &str = "probe-threshold-invalid";

    #[test]
    fn reports_each_bad_field_at_its_own_pointer() {
        let got: Vec<_> = fired(super::META.bad_example, ID)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(
            got,
            [
                "/spec/template/spec/containers/0/readinessProbe/periodSeconds",
                "/spec/template/spec/containers/0/startupProbe/successThreshold",
            ]
        );
    }

    #[test]
    fn string_and_negative_values_are_invalid() {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: m\n      livenessProbe:\n        httpGet: {path: /h, port: 1}\n        failureThreshold: \"30\"\n        initialDelaySeconds: -5\n";
        assert_eq!(fired(pod, ID).len(), 2);
    }
}
