//! `lws-kill-recreates-group`: in a LeaderWorkerSet that recreates its group on any restart, a
//! probe that can kill one member costs every node of the group a full reload.

use super::rule::{Report, Rule, RuleMeta};
use super::support::{Kill, accuses_on, kill_during_load_is_real, liveness_kills, startup_kills};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::ProbeKind;
use serde_json::Value;

/// The shortest stall a group member's liveness should ride out: long enough for a garbage
/// collection pause, a checkpoint write or a burst of long prefills (probelint's threshold).
pub const GROUP_STALL_TOLERANCE_SECONDS: i64 = 60;

static META: RuleMeta = RuleMeta {
    id: "lws-kill-recreates-group",
    severity: Severity::Warning,
    summary: "A probe can kill one pod of a LeaderWorkerSet group, and the group's restart policy then recreates every pod",
    rationale: "A LeaderWorkerSet's restartPolicy defaults to RecreateGroupOnPodRestart: when any container \
of any pod in a group restarts, the controller deletes and recreates the whole group (LWS \
api/leaderworkerset/v1/leaderworkerset_types.go), so every node reloads its share of the model. One \
liveness kill on one worker therefore costs the group size × the load time, and a group that is killed \
while loading never finishes. This rule flags group members whose liveness gives up after less than a \
minute of unresponsiveness (a transient stall trips it), and, under RecreateGroupOnPodRestart, members that \
can be killed before their model has loaded (a startup budget, or without one a liveness tolerance, \
shorter than the load). RecreateGroupAfterStart recreates the group only once it has started, so kills \
during the load restart one pod; None (formerly Default) restarts only the container. Seen by every front \
end: the group and its probes are in one object.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/lws-kill-recreates-group/bad.yaml"),
    good_example: include_str!("../../resources/rules/lws-kill-recreates-group/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for workload in &analysis.workloads {
        if workload.object_ref.kind != "LeaderWorkerSet" {
            continue;
        }
        let template = workload.object.pointer("/spec/leaderWorkerTemplate");
        let size = template
            .and_then(|t| t.get("size"))
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let policy = template
            .and_then(|t| t.get("restartPolicy"))
            .and_then(Value::as_str)
            .unwrap_or("RecreateGroupOnPodRestart");
        let during_load = match policy {
            "RecreateGroupOnPodRestart" => true,
            "RecreateGroupAfterStart" => false,
            _ => continue,
        };
        if size <= 1 {
            continue;
        }
        let cost = format!(
            "recreates all {size} pods of the group (restartPolicy {policy}{})",
            if template.and_then(|t| t.get("restartPolicy")).is_none() {
                ", the default"
            } else {
                ""
            }
        );
        for cx in analysis
            .accelerated_containers()
            .filter(|cx| std::ptr::eq(cx.workload, workload))
        {
            let c = cx.container;
            let load = &c.load;
            let startup = c.probe(ProbeKind::Startup).filter(|p| p.timings_valid());
            let liveness = c.probe(ProbeKind::Liveness).filter(|p| p.timings_valid());
            // Killed before loading: a startup budget short of the load, or liveness from
            // container start without a startupProbe; only a load the manifest shows accuses.
            let kill_during_load = match (startup, liveness) {
                _ if !during_load || !accuses_on(load) => None,
                (Some(s), _) => Some((s, startup_kills(s.budget_seconds(), load))),
                (None, Some(l)) if kill_during_load_is_real(&cx, l) => {
                    Some((l, liveness_kills(l, load)))
                }
                _ => None,
            }
            .filter(|(_, kill)| *kill != Kill::No);
            if let Some((probe, kill)) = kill_during_load {
                report
                    .container(&cx)
                    .at(probe.pointer.clone())
                    .message(format!(
                        "{}: its {} ({}) can kill it before the model has loaded ({}{}), and \
                         every kill {cost}: the group reloads from scratch on every node",
                        c.describe(),
                        probe.kind.field(),
                        probe.budget_arithmetic(),
                        load.explained(),
                        if kill == Kill::Possible {
                            "; at the slow end"
                        } else {
                            ""
                        }
                    ))
                    .help(
                        "cover the load first (see startup-budget-too-short / \
                     liveness-restart-loop); a group that is killed while loading never starts",
                    )
                    .report();
                continue;
            }
            // After the start: a stall shorter than a minute trips liveness.
            let Some(liveness) = liveness else { continue };
            let tolerance = liveness.failure_threshold() * liveness.period();
            if tolerance >= GROUP_STALL_TOLERANCE_SECONDS {
                continue;
            }
            report
                .container(&cx)
                .at(liveness.pointer.clone())
                .message(format!(
                    "{}: liveness gives up after {tolerance} s of unresponsiveness ({} × {} s), \
                     and a liveness kill {cost}: one stall on one pod makes {size} nodes \
                     reload the model ({})",
                    c.describe(),
                    liveness.failure_threshold(),
                    liveness.period(),
                    load.explained()
                ))
                .help(format!(
                    "let liveness ride out a stall of at least {GROUP_STALL_TOLERANCE_SECONDS} s \
                     (failureThreshold × periodSeconds), or set \
                     spec.leaderWorkerTemplate.restartPolicy: None if the server survives a \
                     peer's restart"
                ))
                .report();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "lws-kill-recreates-group";

    #[test]
    fn a_quick_liveness_on_a_group_member_names_the_group_cost() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(
            f.pointer,
            "/spec/leaderWorkerTemplate/leaderTemplate/spec/containers/0/livenessProbe"
        );
        assert!(
            f.message.contains(
                "liveness gives up after 10 s of unresponsiveness (2 × 5 s), and a liveness kill \
                 recreates all 2 pods of the group (restartPolicy RecreateGroupOnPodRestart, the default)"
            ),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_kill_during_the_load_under_recreate_on_restart_and_the_policies_that_spare_the_group() {
        let short = include_str!(
            "../../resources/rules/lws-kill-recreates-group/fires-startup-budget-shorter-than-the-load.yaml"
        );
        let f = &findings_of(short, ID)[0];
        assert!(
            f.message.contains("before the model has loaded"),
            "{}",
            f.message
        );
        assert_eq!(
            f.pointer,
            "/spec/leaderWorkerTemplate/leaderTemplate/spec/containers/0/startupProbe"
        );
        // After start only: the short startup budget restarts one pod, the quick liveness still
        // recreates the group.
        let after_start = include_str!(
            "../../resources/rules/lws-kill-recreates-group/fires-recreate-after-start-with-a-quick-liveness.yaml"
        );
        let f = &findings_of(after_start, ID);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("gives up after 10 s"),
            "{}",
            f[0].message
        );
    }
}
