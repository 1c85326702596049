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
    bad_example: include_str!("../../resources/rules/grpc-probe-unsupported/bad.yaml"),
    good_example: include_str!("../../resources/rules/grpc-probe-unsupported/good.yaml"),
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
            report
.container(&cx)
.at(format!("{}/grpc", probe.pointer))
.message(format!(
                    "{}: {}Probe uses grpc, which Kubernetes {version} does not support (needs {GRPC_PROBES_SINCE}+)",
                    cx.container.describe(),
                    probe.kind.noun()
                ))
.help("use an httpGet probe, or an exec probe running grpc_health_probe, until every \
                 cluster runs 1.24 or later")
.report();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{fired, lint_example};

    const ID: &str = "grpc-probe-unsupported";

    #[test]
    fn depends_on_the_policy_kubernetes_version() {
        // Against the built-in 1.30, gRPC probes are fine...
        assert!(fired(super::META.bad_example, ID).is_empty());
        // ...against the older cluster of the example policy they are not.
        let f: Vec<_> = lint_example(&super::META, super::META.bad_example)
            .into_iter()
            .filter(|f| f.rule == ID)
            .collect();
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("Kubernetes 1.23"), "{}", f[0].message);
    }
}
