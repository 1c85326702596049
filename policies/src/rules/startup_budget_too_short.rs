//! `startup-budget-too-short`: the startupProbe gives up before the model can have loaded.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use super::support::{Kill, accuses_on, startup_kills};
use crate::analysis::context::Analysis;
use crate::fix::probes::raise_threshold;
use crate::model::budget::{needed_for, required_arithmetic, threshold_for};
use crate::model::finding::{Applicability, Severity};
use crate::model::probe::ProbeKind;

static META: RuleMeta = RuleMeta {
    id: "startup-budget-too-short",
    severity: Severity::Error,
    summary: "startupProbe budget is shorter than the model load time plus margin",
    rationale: "The kubelet kills a container whose startupProbe has failed failureThreshold times in a \
row, so a startup budget (initialDelaySeconds + failureThreshold × periodSeconds) shorter than the \
model's load time restarts the server mid-load, every time: it never becomes ready and the node churns \
through CrashLoopBackOff. Weights load slower on a cold node, from a busy registry or with more replicas \
pulling at once, so the budget needs a margin over the load time: budget ≥ load × (1 + startupMargin). \
The load time is the probelint.io/model-load-seconds annotation when there is one; else it is estimated \
from the manifest as a range, parameters × bytes per parameter ÷ the bandwidth of where the weights come \
from (the Hub, a PVC, the node's disk) + the server's start, at the fastest and the slowest plausible \
rate of each, from the policy's modelLoad section (docs/load-time.md). A budget shorter than even the \
fast end is an error (every start is killed mid-load); one that covers the fast end but not the slow end \
is a warning (a slow start is); the fix raises it to the slow end plus margin. Where the manifest shows neither, the rule says nothing: no \
finding rests on a guessed load.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/startup-budget-too-short/bad.yaml"),
    good_example: include_str!("../../resources/rules/startup-budget-too-short/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Raises failureThreshold until the budget covers the load time plus margin; nothing else changes.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    let margin = analysis.policy.startup_margin;
    for cx in analysis.accelerated_containers() {
        // A startupProbe with a rejected timing is probe-threshold-invalid's to report: its
        // budget with defaults in place would contradict the manifest.
        let Some(probe) = cx
            .container
            .probe(ProbeKind::Startup)
            .filter(|p| p.timings_valid())
        else {
            continue;
        };
        // A Ray node, a headless worker, a multi-model runtime or a container with no evidence
        // that it serves loads no model at start; a guessed load accuses nothing.
        let load = &cx.container.load;
        if !cx.container.loads_model_at_start() || !accuses_on(load) {
            continue;
        }
        let kill = startup_kills(probe.budget_seconds(), load);
        if kill == Kill::No {
            continue;
        }
        let needed = needed_for(load, margin);
        // The same number the fix writes: both come from threshold_for.
        let threshold = threshold_for(needed, probe.period(), probe.initial_delay());
        let fix = raise_threshold(probe, needed);
        report
            .container(&cx)
            .at(probe.pointer.clone())
            .message(format!(
                "{}: startup budget {} < {}: {}",
                cx.container.describe(),
                probe.budget_arithmetic(),
                required_arithmetic(load, margin),
                match (kill, load.is_point()) {
                    (Kill::Certain, true) => "shorter than the load itself, so every start is \
                                              killed mid-load"
                        .to_owned(),
                    (Kill::Certain, false) => format!(
                        "shorter than even the fast end ({} s), so every start is killed mid-load",
                        load.fast
                    ),
                    (_, _) => format!(
                        "it covers the fast end ({} s), but a slow start (a busy link, a cold \
                         volume) is killed mid-load",
                        load.fast
                    ),
                }
            ))
            .help(format!(
                "raise startupProbe.failureThreshold to {threshold} (or set \
                 probelint.io/model-load-seconds to the real worst-case load time)"
            ))
            .at_most(kill.ceiling())
            .fix(fix)
            .load(load)
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "startup-budget-too-short";

    #[test]
    fn message_shows_the_arithmetic() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(
            f.message,
            "container \"tgi\" (requests nvidia.com/gpu): startup budget 60 s (6 × 10 s) < 150 s \
             (load 120 s from probelint.io/model-load-seconds + 25 %): shorter than the load \
             itself, so every start is killed mid-load"
        );
        assert!(f.help.contains("failureThreshold to 15"), "{}", f.help);
        assert_eq!(f.pointer, "/spec/template/spec/containers/0/startupProbe");
    }

    #[test]
    fn defaults_apply_when_fields_are_missing() {
        // 3 × 10 s = 30 s against the policy default of 300 s + 25 %.
        let pod = include_str!(
            "../../resources/rules/startup-budget-too-short/fires-defaults-when-fields-are-missing.yaml"
        );
        let f = &findings_of(pod, ID)[0];
        assert!(
            f.message.contains("30 s (3 × 10 s) < 375 s"),
            "{}",
            f.message
        );
    }

    #[test]
    fn zero_fields_count_as_the_apiserver_defaults_and_the_fix_keeps_period_ten() {
        // periodSeconds: 0 and failureThreshold: 0 run as 10 and 3 (SetDefaults_Probe): the
        // same 30 s budget as no fields at all, not a budget of 0.
        let pod = include_str!(
            "../../resources/rules/startup-budget-too-short/fires-zero-fields-are-the-defaults.yaml"
        );
        let f = &findings_of(pod, ID)[0];
        assert!(
            f.message.contains("30 s (3 × 10 s) < 125 s"),
            "{}",
            f.message
        );
        // 125 s at the defaulted 10 s period: failureThreshold 13, replacing the 0.
        assert!(f.help.contains("failureThreshold to 13"), "{}", f.help);
        let fix = f.fix.as_ref().expect("a fix");
        let ops = serde_json::to_value(&fix.patch).unwrap();
        assert_eq!(
            ops,
            serde_json::json!([{"op": "replace", "path": "/spec/containers/0/startupProbe/failureThreshold", "value": 13}])
        );
    }

    #[test]
    fn in_strict_mode_the_judged_do_not_supply_the_number_that_judges_them() {
        // `probelint.io/model-load-seconds: "1"` on a 70B model behind a 60 s startup budget.
        let yaml = r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations: {probelint.io/model-load-seconds: "1"}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.10.1
      args: [--model, meta-llama/Llama-3.1-70B-Instruct]
      ports: [{containerPort: 8000}]
      resources: {limits: {nvidia.com/gpu: 4}}
      startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: 6}
"#;
        assert!(
            findings_of(yaml, ID).is_empty(),
            "the declared 1 s stands by default"
        );
        let strict = crate::Policy::with_user_yaml("allowAnnotationExemptions: false\n").unwrap();
        let found: Vec<_> = crate::rules::testing::lint_with(yaml, &strict)
            .into_iter()
            .filter(|f| f.rule == ID)
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, crate::Severity::Error);
        assert!(
            found[0].message.contains("says 1 s, below the estimate"),
            "{}",
            found[0].message
        );
    }
}
