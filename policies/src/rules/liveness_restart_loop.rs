//! `liveness-restart-loop`: liveness without a startupProbe kills the server before it has loaded.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use super::support::{Kill, accuses_on, kill_during_load_is_real, liveness_kills};
use crate::analysis::context::Analysis;
use crate::fix::probes::startup_probe;
use crate::model::finding::{Applicability, Severity};
use crate::model::probe::ProbeKind;

static META: RuleMeta = RuleMeta {
    id: "liveness-restart-loop",
    severity: Severity::Error,
    summary: "Liveness kills the container before its model can load (no startupProbe)",
    rationale: "Without a startupProbe, liveness runs from container start. If its tolerance \
(initialDelaySeconds + failureThreshold × periodSeconds) is shorter than the model load time, the kubelet \
kills the server mid-load, every time: a restart loop that never serves, burns GPU time and, with many \
replicas reloading weights at once, can saturate the node's disk and network. Add a startupProbe (which \
gates liveness until the model is loaded) rather than stretching initialDelaySeconds, which also delays \
detection of real hangs. The load time is declared (probelint.io/model-load-seconds) or estimated from the \
model the server is given (docs/load-time.md), as a range: an error when liveness gives up before even \
the fast end of the load, a warning when it outlasts the fast end but not the slow end; where the \
manifest shows neither, this rule says nothing and \
gpu-startup-probe-missing reports the missing startupProbe. In a pod that serves, gpu-startup-probe-missing \
reports the missing startupProbe with this risk in its message, and this rule stays quiet (one problem, one \
error); it speaks for batch pods (a Job that runs a model server) and where that rule is turned off, with \
the same fix.",
    // Shown on its own: by default gpu-startup-probe-missing reports a serving container's
    // missing startupProbe, this risk included.
    example_policy: Some("rules:\n  gpu-startup-probe-missing: off\n"),
    bad_example: include_str!("../../resources/rules/liveness-restart-loop/bad.yaml"),
    good_example: include_str!("../../resources/rules/liveness-restart-loop/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Fixed by the startupProbe that gpu-startup-probe-missing adds; liveness stays as written.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        // An operator's startupProbe gates liveness as the container's own would.
        if cx.container.runs_probe(ProbeKind::Startup) {
            continue;
        }
        // A liveness probe with a rejected timing is probe-threshold-invalid's to report: its
        // budget with defaults in place would contradict the manifest.
        let Some(liveness) = cx
            .container
            .probe(ProbeKind::Liveness)
            .filter(|p| p.timings_valid())
        else {
            continue;
        };
        // Only a kill the load can meet, and only a load the manifest shows.
        let load = &cx.container.load;
        if !kill_during_load_is_real(&cx, liveness) || !accuses_on(load) {
            continue;
        }
        let kill = liveness_kills(liveness, load);
        if kill == Kill::No {
            continue;
        }
        // One problem, one error: where gpu-startup-probe-missing reports this container's
        // missing startupProbe, its error already says that liveness kills it mid-load and
        // carries the fix. This rule speaks where that one does not: a batch pod, or a policy
        // that turns it off.
        if cx.pod.serving
            && analysis
                .policy
                .severity_for("gpu-startup-probe-missing", Severity::Error)
                .is_some()
        {
            continue;
        }
        // A NIMService's probes are `{enabled, probe}`, not a container's: no patch fits.
        let fix = (cx.workload.object_ref.kind != "NIMService")
            .then(|| startup_probe(&cx, analysis.policy))
            .flatten();
        report
            .container(&cx)
            .at(liveness.pointer.clone())
            .message(match kill {
                Kill::Certain => format!(
                    "{}: liveness tolerates {} but loading takes {}, and there is no \
                     startupProbe: the kubelet will kill it mid-load, forever",
                    cx.container.describe(),
                    liveness.budget_arithmetic(),
                    load.explained()
                ),
                _ => format!(
                    "{}: liveness tolerates {}, and there is no startupProbe: it outlasts the \
                     fast end of the load but not its slow end ({}), so a slow start is \
                     killed mid-load, and every start after it",
                    cx.container.describe(),
                    liveness.budget_arithmetic(),
                    load.explained()
                ),
            })
            .help(
                "add a startupProbe sized to the load time (it gates liveness until the model is \
             loaded); keep liveness quick to catch real hangs",
            )
            .at_most(kill.ceiling())
            .fix(fix)
            .load(load)
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    /// Findings under the rule's example policy (gpu-startup-probe-missing off).
    fn of(yaml: &str, rule: &str) -> Vec<crate::Finding> {
        crate::rules::testing::lint_example(&super::META, yaml)
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    const ID: &str = "liveness-restart-loop";

    #[test]
    fn message_compares_tolerance_and_load() {
        let f = &of(super::META.bad_example, ID)[0];
        assert!(
            f.message.contains("60 s (30 s delay + 3 × 10 s)"),
            "{}",
            f.message
        );
        assert!(
            f.message
                .contains("loading takes 120 s from probelint.io/model-load-seconds"),
            "{}",
            f.message
        );
        assert_eq!(
            f.severity,
            crate::Severity::Error,
            "a declared load is evidence"
        );
        assert_eq!(f.pointer, "/spec/template/spec/containers/0/livenessProbe");
    }

    #[test]
    fn an_estimated_load_is_evidence_and_an_assumed_one_accuses_nothing() {
        // Llama-3.1-70B from the Hub: 160–2980 s, whose fast end a 60 s liveness tolerance
        // cannot cover.
        let estimated = include_str!(
            "../../resources/rules/liveness-restart-loop/fires-estimated-load-from-the-hub.yaml"
        );
        let f = &of(estimated, ID)[0];
        assert_eq!(f.severity, crate::Severity::Error);
        assert!(
            f.message.contains(
                "loading takes ≈ 160–2980 s (140 GB (Llama-3.1-70B-Instruct: 70B parameters × 2 \
                 bytes, bf16) downloaded from the Hugging Face Hub at 50–1000 MB/s = 140–2800 s + \
                 20–180 s vLLM start)"
            ),
            "{}",
            f.message
        );
        let load = f.load.as_ref().expect("the load it rests on");
        assert_eq!((load.fast, load.slow), (160.0, 2980.0));
        // An 8B model (36–500 s) outlasts the tolerance at its fast end but not at its slow end:
        // a warning, not an error.
        let small = estimated.replace("Llama-3.1-70B-Instruct", "Llama-3.1-8B-Instruct");
        let f = &of(&small, ID)[0];
        assert_eq!(f.severity, crate::Severity::Warning, "{}", f.message);
        assert!(
            f.message
                .contains("outlasts the fast end of the load but not its slow end"),
            "{}",
            f.message
        );
        let assumed = estimated.replace(
            "      args: [--model, meta-llama/Llama-3.1-70B-Instruct]\n",
            "",
        );
        // No model named: the 300 s default is a guess, so this rule says nothing; the
        // container's one error is the missing startupProbe, which says the load is unknown.
        assert!(of(&assumed, ID).is_empty());
        let f = &findings_of(&assumed, "gpu-startup-probe-missing")[0];
        assert!(
            f.message.contains("kills any load that takes longer")
                && f.message.contains("its load time is unknown"),
            "{}",
            f.message
        );
        // By default a serving container's one error is gpu-startup-probe-missing, which
        // carries this risk; this rule stays quiet.
        assert!(findings_of(estimated, ID).is_empty());
        let f = &findings_of(estimated, "gpu-startup-probe-missing")[0];
        assert!(f.message.contains("kills it mid-load"), "{}", f.message);
    }
}
