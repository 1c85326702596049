//! `lws-leader-ready-needs-workers`: `startupPolicy: LeaderReady` on a group whose leader cannot
//! become Ready without its workers.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::analysis::object::AcceleratorReason;
use crate::model::finding::Severity;
use crate::model::load::model::CommandLine;
use crate::model::probe::{Handler, ProbeKind};
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "lws-leader-ready-needs-workers",
    severity: Severity::Warning,
    summary: "startupPolicy LeaderReady on a group whose model is split across the leader and its workers",
    rationale: "With startupPolicy: LeaderReady a LeaderWorkerSet creates a group's workers only once its \
leader is Ready (LWS api/leaderworkerset/v1/leaderworkerset_types.go). When the model is split across the \
group (tensor × pipeline parallelism larger than the leader's own GPUs), the leader's server cannot load \
it, nor answer its readiness probe, until the workers have joined: the leader waits for workers that wait \
for the leader, and the group never starts. This is inferred from the parallelism flags and the leader's \
GPU count, not observed: a leader whose readiness does not depend on its workers is fine. Use \
LeaderCreated (the default), or a readiness on the leader that passes before the workers join. Seen by \
every front end.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/lws-leader-ready-needs-workers/bad.yaml"),
    good_example: include_str!("../../resources/rules/lws-leader-ready-needs-workers/good.yaml"),
    fix: None,
};

const LEADER: &str = "/spec/leaderWorkerTemplate/leaderTemplate/spec";

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        let object = cx.workload.object;
        if cx.workload.object_ref.kind != "LeaderWorkerSet"
            || cx.pod.pointer != LEADER
            || object
                .pointer("/spec/startupPolicy")
                .and_then(Value::as_str)
                != Some("LeaderReady")
        {
            continue;
        }
        let size = object
            .pointer("/spec/leaderWorkerTemplate/size")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let Some(readiness) = cx.container.probe(ProbeKind::Readiness) else {
            continue;
        };
        // A port check passes once the server binds, whatever the workers do.
        if size <= 1 || matches!(readiness.handler, Handler::TcpSocket { .. }) {
            continue;
        }
        let line = CommandLine::of(cx.container.value);
        let tensor = line.tensor_parallel() as i64;
        let pipeline = line.pipeline_parallel() as i64;
        let gpus = leader_gpus(cx.container.value, &cx.container.accelerators);
        let Some(gpus) = gpus.filter(|g| tensor * pipeline > *g) else {
            continue;
        };
        report
            .container(&cx)
            .at("/spec/startupPolicy")
            .message(format!(
                "LeaderWorkerSet {}: startupPolicy LeaderReady creates the workers only once the \
                 leader is Ready, but the leader's model spans {} GPUs (tensor {tensor} × \
                 pipeline {pipeline}) and it has {gpus}: its readiness ({}) needs the workers, \
                 so the group never starts (inferred from the parallelism flags)",
                cx.workload.object_ref.name.as_deref().unwrap_or("-"),
                tensor * pipeline,
                readiness.handler.describe()
            ))
            .help(
                "use startupPolicy: LeaderCreated (the default), or give the leader a readiness \
             that passes before its workers join",
            )
            .report();
    }
}

/// The GPUs the leader container asks for (its first accelerator resource's limit or request).
fn leader_gpus(container: &Value, accelerators: &[AcceleratorReason]) -> Option<i64> {
    let AcceleratorReason::Resource(name) = accelerators.first()? else {
        return None;
    };
    ["limits", "requests"].iter().find_map(|k| {
        let quantity = container.pointer(&format!("/resources/{k}"))?.get(name)?;
        match quantity {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "lws-leader-ready-needs-workers";

    #[test]
    fn a_model_split_over_the_group_with_leader_ready_never_starts() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.pointer, "/spec/startupPolicy");
        assert!(
            f.message
                .contains("spans 16 GPUs (tensor 8 × pipeline 2) and it has 8"),
            "{}",
            f.message
        );
    }
}
