//! `hpa-min-replicas-one`: an HPA that may scale a GPU serving workload down to one pod.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::facts::{GpuTargets, ObjectFacts, Role};
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "hpa-min-replicas-one",
    severity: Severity::Info,
    summary: "An HPA may scale a GPU serving workload down to a single pod",
    rationale: "With minReplicas: 1 (the HPA's default) every quiet period leaves one model server. \
When that pod is lost (a node drain, an eviction, a crash, a GPU fault) nothing serves until a \
replacement has loaded its model: an outage of a full load time, minutes for a large model. Two replicas \
(spread over nodes) turn that into reduced capacity. Only HPAs and workloads in the same input are seen.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/hpa-min-replicas-one/bad.yaml"),
    good_example: include_str!("../../resources/rules/hpa-min-replicas-one/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::relations(&META, check);

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    let targets = GpuTargets::new(objects);
    for hpa in objects {
        let Role::Autoscaler { min_replicas, .. } = &hpa.role else {
            continue;
        };
        if *min_replicas > 1 {
            continue;
        }
        let Some(ObjectFacts {
            role: Role::GpuServing { load, .. },
            object_ref,
            ..
        }) = targets.of(hpa)
        else {
            continue;
        };
        let outage = load.as_ref().map_or_else(
            || "a full model load".to_owned(),
            |l| format!("its load, {}", l.explained()),
        );
        report
            .cross(hpa)
            .at("/spec/minReplicas")
            .message(format!(
                "{} may scale {object_ref} down to {min_replicas} pod: losing it is an outage \
                 until a replacement has loaded ({outage})",
                hpa.object_ref
            ))
            .help(
                "set minReplicas: 2 (spread over nodes) so that losing a pod costs capacity, not \
             service",
            )
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "hpa-min-replicas-one";

    #[test]
    fn the_default_min_replicas_of_one() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.object.kind, "HorizontalPodAutoscaler");
        assert!(f.message.contains("down to 1 pod"), "{}", f.message);
        assert!(
            f.message
                .contains("600 s from probelint.io/model-load-seconds"),
            "{}",
            f.message
        );
    }
}
