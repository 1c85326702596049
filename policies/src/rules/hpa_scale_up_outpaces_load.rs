//! `hpa-scale-up-outpaces-load`: an HPA that adds GPU pods again before the last ones loaded.

use super::rule::{Report, Rule, RuleMeta};
use super::support::accuses_on;
use crate::analysis::facts::{GpuTargets, ObjectFacts, Role};
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "hpa-scale-up-outpaces-load",
    severity: Severity::Warning,
    summary: "An HPA can scale a GPU workload up again before the pods it just added have loaded their model",
    rationale: "New model-server pods take the whole load time before they serve. An HPA that scales on \
an External or Object metric (a gateway's queue length, requests waiting at a load balancer) reads a \
number the loading pods cannot lower: the queue keeps growing until they serve, and every sync (15 s) the \
HPA adds pods for it again, while the default scale-up behaviour allows up to 4 pods or 100 % every 15 s \
with no stabilisation window. It overshoots, claims GPUs it does not need, and scales them away after its \
5-minute scale-down window. Resource and Pods metrics are not flagged: for those the HPA counts pods that \
report no metric yet as idle when it scales up (kubernetes pkg/controller/podautoscaler/\
replica_calculator.go, calcPlainMetricReplicas). Limit scale-up to a period at least as long as the load \
(behavior.scaleUp.policies with periodSeconds ≥ the load, at most 1800). The load is declared or estimated \
(docs/load-time.md); with neither, the rule says nothing. Only HPAs and workloads in the same \
input are seen.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/hpa-scale-up-outpaces-load/bad.yaml"),
    good_example: include_str!("../../resources/rules/hpa-scale-up-outpaces-load/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::relations(&META, check);

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    let targets = GpuTargets::new(objects);
    for hpa in objects {
        let Role::Autoscaler {
            scale_up_every_seconds,
            scale_up_written,
            scale_up_disabled: false,
            external_or_object_metric: true,
            ..
        } = &hpa.role
        else {
            continue;
        };
        let Some(ObjectFacts {
            role: Role::GpuServing {
                load: Some(load), ..
            },
            object_ref,
            ..
        }) = targets.of(hpa)
        else {
            continue;
        };
        // Only where even the fastest load outlasts a scale-up period.
        if !accuses_on(load) || *scale_up_every_seconds as f64 >= load.fast {
            continue;
        }
        let every = if *scale_up_written {
            format!("its behavior.scaleUp lets it add pods every {scale_up_every_seconds} s")
        } else {
            "the default scale-up behaviour lets it add up to 4 pods (or 100 %) every 15 s"
                .to_owned()
        };
        let period = (load.slow.ceil() as i64).min(1800);
        report
            .cross(hpa)
            .at(if *scale_up_written {
                "/spec/behavior/scaleUp"
            } else {
                "/spec"
            }
            .to_owned())
            .message(format!(
                "{} scales {object_ref} on an External/Object metric that its new pods cannot \
                 lower until they serve, {} later, and {every}: it keeps adding GPU pods for \
                 the same spike while they load",
                hpa.object_ref,
                load.explained()
            ))
            .help(format!(
                "limit scale-up to the load time: behavior.scaleUp.policies: [{{type: Pods, \
                 value: 1, periodSeconds: {period}}}]"
            ))
            .load(load)
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "hpa-scale-up-outpaces-load";

    #[test]
    fn the_default_behaviour_against_a_ten_minute_load() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.object.kind, "HorizontalPodAutoscaler");
        assert_eq!(f.pointer, "/spec");
        assert!(
            f.message
                .contains("until they serve, 600 s from probelint.io/model-load-seconds later"),
            "{}",
            f.message
        );
        assert!(f.message.contains("every 15 s"), "{}", f.message);
        assert!(f.help.contains("periodSeconds: 600"), "{}", f.help);
    }

    #[test]
    fn a_short_scale_up_window_is_reported_at_the_scale_up_rules() {
        let window = include_str!(
            "../../resources/rules/hpa-scale-up-outpaces-load/fires-one-minute-scale-up-window.yaml"
        );
        let f = &findings_of(window, ID)[0];
        assert_eq!(f.pointer, "/spec/behavior/scaleUp");
        assert!(f.message.contains("add pods every 60 s"), "{}", f.message);
    }
}
