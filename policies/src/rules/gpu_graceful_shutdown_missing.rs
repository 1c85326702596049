//! `gpu-graceful-shutdown-missing`: a serving GPU container is killed 30 s after SIGTERM with no drain.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "gpu-graceful-shutdown-missing",
    severity: Severity::Info,
    summary: "A serving GPU container has no preStop hook and terminationGracePeriodSeconds ≤ 30",
    rationale: "A generation can stream for minutes. On a rollout or node drain the pod is removed from \
the Service endpoints and sent SIGTERM at the same moment; endpoint removal propagates to load balancers \
over a few seconds, so new requests still arrive, and in-flight generations are cut off when the kubelet \
sends SIGKILL after terminationGracePeriodSeconds (default 30 s). A preStop sleep covers the propagation \
delay and a longer grace period lets long generations finish.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/gpu-graceful-shutdown-missing/bad.yaml"),
    good_example: include_str!("../../resources/rules/gpu-graceful-shutdown-missing/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        // Only a container that serves models has in-flight generations to lose.
        if !cx.pod.serving || cx.container.sidecar || !cx.container.serves_model_traffic() {
            continue;
        }
        let grace = cx.pod.termination_grace_period();
        if grace > 30 || cx.container.has_pre_stop() {
            continue;
        }
        report
            .container(&cx)
            .message(format!(
                "{} has no preStop hook and terminationGracePeriodSeconds is {grace}: in-flight \
                 generations are cut off on every rollout",
                cx.container.describe()
            ))
            .help(
                "add lifecycle.preStop (e.g. sleep 10 s while endpoints update) and raise \
             terminationGracePeriodSeconds to cover your longest generation",
            )
            .report();
    }
}
