//! `hpa-cpu-metric-on-gpu-workload`: an HPA scales a GPU server on CPU or memory.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::facts::{GpuTargets, ObjectFacts, Role};
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "hpa-cpu-metric-on-gpu-workload",
    severity: Severity::Warning,
    summary: "A HorizontalPodAutoscaler scales a GPU workload on cpu/memory only",
    rationale: "A model server's CPU and memory barely move with load: the work is on the GPU, and the \
weights occupy the same memory whether the server is idle or saturated. An HPA on cpu or memory therefore \
never scales out when requests queue up (or scales on tokenizer noise). Scale on a serving metric — queue \
depth, requests in flight, KV-cache use, time to first token — through a Pods or External metric.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/hpa-cpu-metric-on-gpu-workload/bad.yaml"),
    good_example: include_str!("../../resources/rules/hpa-cpu-metric-on-gpu-workload/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::relations(&META, check);

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    let targets = GpuTargets::new(objects);
    for hpa in objects {
        let Role::Autoscaler {
            cpu_or_memory_only: true,
            pointer,
            ..
        } = &hpa.role
        else {
            continue;
        };
        let Some(workload) = targets.of(hpa) else {
            continue;
        };
        report
.cross(hpa)
.at(*pointer)
.message(format!(
                "{} scales {} (a GPU workload) on cpu/memory only: GPU servers saturate long \
                 before their CPU does",
                hpa.object_ref, workload.object_ref
            ))
.help("scale on a serving metric (queue depth, requests in flight, KV-cache use) with a Pods \
             or External metric")
.report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::fired;

    const ID: &str = "hpa-cpu-metric-on-gpu-workload";

    #[test]
    fn a_v1_hpa_is_reported_at_its_spec() {
        let v1 = include_str!(
            "../../resources/rules/hpa-cpu-metric-on-gpu-workload/fires-autoscaling-v1-hpa.yaml"
        );
        assert_eq!(fired(v1, ID), [(None, "/spec".to_owned())]);
    }
}
