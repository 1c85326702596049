//! `grpc-probe-unsupported`: a gRPC probe on a cluster version without gRPC probes.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::Handler;
use crate::policy::KubernetesVersion;

/// gRPC probes are on by default from Kubernetes 1.24 (beta; GA in 1.27).
const GRPC_PROBES_SINCE: KubernetesVersion = KubernetesVersion::new(1, 24);

static META: RuleMeta = RuleMeta {
    id: "grpc-probe-unsupported",
    severity: Severity::Error,
    summary: "gRPC probe while the policy's kubernetesVersion is older than 1.24",
    rationale: "Native gRPC probes (probe.grpc) are enabled by default from Kubernetes 1.24. On older \
clusters the field is dropped or rejected, so the container runs with no probe at all — for a model \
server, that means no startup gate and traffic before the model is loaded. Set kubernetesVersion in the \
policy to your oldest cluster; on older clusters probe Triton's or TGI's HTTP endpoints, or use \
grpc_health_probe as an exec probe.",
    example_policy: Some("kubernetesVersion: \"1.23\"\n"),
    bad_example: r#"apiVersion: v1
kind: Pod
metadata:
  name: triton
  annotations:
    probelint.io/model-load-seconds: "120"
spec:
  containers:
    - name: triton
      image: nvcr.io/nvidia/tritonserver:24.08-py3
      ports:
        - containerPort: 8000
        - containerPort: 8001
      resources:
        limits:
          nvidia.com/gpu: 1
      startupProbe:
        grpc:
          port: 8001
        failureThreshold: 15
      readinessProbe:
        httpGet:
          path: /v2/health/ready
          port: 8000
"#,
    good_example: r#"apiVersion: v1
kind: Pod
metadata:
  name: triton
  annotations:
    probelint.io/model-load-seconds: "120"
spec:
  containers:
    - name: triton
      image: nvcr.io/nvidia/tritonserver:24.08-py3
      ports:
        - containerPort: 8000
        - containerPort: 8001
      resources:
        limits:
          nvidia.com/gpu: 1
      startupProbe:
        httpGet:
          path: /v2/health/ready
          port: 8000
        failureThreshold: 15
      readinessProbe:
        httpGet:
          path: /v2/health/ready
          port: 8000
"#,
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    let version = analysis.policy.kubernetes_version;
    if version >= GRPC_PROBES_SINCE {
        return;
    }
    for cx in analysis.containers() {
        for probe in cx.container.probes() {
            if !matches!(probe.handler, Handler::Grpc { .. }) {
                continue;
            }
            report.container(
                &cx,
                format!("{}/grpc", probe.pointer),
                format!(
                    "{}: {}Probe uses grpc, which Kubernetes {version} does not support (needs {GRPC_PROBES_SINCE}+)",
                    cx.container.describe(),
                    probe.kind.noun()
                ),
                "use an httpGet probe, or an exec probe running grpc_health_probe, until every \
                 cluster runs 1.24 or later"
                    .to_owned(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{fired, lint_with};

    const ID: &str = "grpc-probe-unsupported";

    #[test]
    fn depends_on_the_policy_kubernetes_version() {
        // Against the built-in 1.30, gRPC probes are fine...
        assert!(fired(super::META.bad_example, ID).is_empty());
        // ...against an older cluster they are not.
        let old = crate::Policy::with_user_yaml("kubernetesVersion: '1.23'\n").unwrap();
        let f: Vec<_> = lint_with(super::META.bad_example, &old)
            .into_iter()
            .filter(|f| f.rule == ID)
            .collect();
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("Kubernetes 1.23"), "{}", f[0].message);
        assert!(
            lint_with(super::META.good_example, &old)
                .iter()
                .all(|f| f.rule != ID)
        );
    }
}
