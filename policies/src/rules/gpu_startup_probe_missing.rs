//! `gpu-startup-probe-missing`: a serving accelerator container has no startupProbe.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::fix::probes::{STARTUP_PERIOD_SECONDS, StartupBudget, startup_probe};
use crate::model::annotations::LOAD_SECONDS_ANNOTATION;
use crate::model::budget::required_arithmetic;
use crate::model::finding::{Applicability, Severity};
use crate::model::probe::ProbeKind;
use crate::policy::StartupProbeRequirement;

static META: RuleMeta = RuleMeta {
    id: "gpu-startup-probe-missing",
    severity: Severity::Error,
    summary: "A serving GPU container has no startupProbe",
    rationale: "A model server spends minutes loading weights before it can answer anything. Without a \
startupProbe, the liveness probe starts counting at container start and the kubelet kills the container \
mid-load; it restarts, loads again and is killed again (a restart storm, ending in CrashLoopBackOff). A \
startupProbe holds liveness and readiness off until the model is loaded, with a budget \
(failureThreshold × periodSeconds) sized to the worst-case load time. Without a liveness probe nothing \
kills the container mid-load, but nothing restarts a load that hangs either, and the first liveness probe \
someone adds will kill it mid-load: the startupProbe is what makes liveness safe to have. The finding is an \
error where a liveness probe kills every start (the restart storm): it gives up before even the fast end \
of the load range (docs/load-time.md), or, where the model is unknown, before the server's own start. \
It is a warning where only a slow start is killed, where the model is unknown and the liveness outlasts \
the server's start (no number says it kills), and where nothing can kill the load (no liveness, or one on \
an endpoint the server answers while it loads): that pod cannot storm, and its readiness still keeps \
traffic away until the model is loaded. A team that wants every serving GPU pod \
without a startupProbe refused sets the rule's level (`rules: {gpu-startup-probe-missing: error}`).",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/gpu-startup-probe-missing/bad.yaml"),
    good_example: include_str!("../../resources/rules/gpu-startup-probe-missing/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Adds a startupProbe that reuses the container's liveness handler (else its readiness handler, \
else the known server's health endpoint), periodSeconds 10, and a failureThreshold whose budget is the \
largest of: the load time plus the policy margin, the liveness tolerance and readiness budget the \
container had, and modelLoad.startupFloorSeconds (1,200 s by default). It never shortens a kill deadline \
and never adds one shorter than the load probelint states (docs/load-time.md). With the `probeHelper` \
policy option, for vLLM, TGI, SGLang and Triton, the check is an exec of `probelint-probe startup` (the same \
budget), with the volumes that bring the binary (docs/probe-helper.md).",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    let margin = analysis.policy.startup_margin;
    for cx in analysis.accelerated_containers() {
        // Ray nodes, headless workers and lazily loading servers load no model at start;
        // an operator's startupProbe (KServe's LLMInferenceService configs, the NIM
        // Operator) is in the pod that runs.
        let required = match analysis.policy.startup_probe_required {
            StartupProbeRequirement::ModelServers => cx.container.loads_model_at_start(),
            StartupProbeRequirement::AllAccelerated => true,
        };
        if !cx.pod.serving || !required || cx.container.runs_probe(ProbeKind::Startup) {
            continue;
        }
        let load = &cx.container.load;
        // A NIMService's probes are `{enabled, probe}`, not a container's: no patch fits.
        let fix = (cx.workload.object_ref.kind != "NIMService")
            .then(|| startup_probe(&cx, analysis.policy))
            .flatten();
        // Help says what to change and why; the fix line beside it says what --fix writes.
        let help = match &fix {
            Some(_) => "add a startupProbe on the server's health check with a budget beyond the \
                        slowest plausible load: it holds liveness and readiness off until the \
                        model is loaded, and lets liveness stay quick to catch real hangs"
                .to_owned(),
            None => {
                let budget = StartupBudget::for_container(&cx, analysis.policy);
                format!(
                    "add a startupProbe on the server's health endpoint with periodSeconds: {} \
                     and failureThreshold: {} (a {} s budget, set by {})",
                    STARTUP_PERIOD_SECONDS, budget.failure_threshold, budget.seconds, budget.set_by
                )
            }
        };
        // Which risk applies depends on whether anything can kill the container mid-load, and
        // on whether it does so before this load ends. This one error carries that risk and the
        // fix; liveness-restart-loop leaves the container to it (one problem, one error).
        let liveness = cx
            .container
            .probe(ProbeKind::Liveness)
            .filter(|l| super::support::kill_during_load_is_real(&cx, l));
        // The server's own start (engine start, CUDA graphs) is a floor under any load, known
        // model or not: a liveness that gives up before its fast end kills every start.
        let server_start = analysis
            .policy
            .model_load
            .start_seconds(cx.container.server.map(|s| s.id));
        let kill = liveness.map(|l| {
            if super::support::accuses_on(load) {
                super::support::liveness_kills(l, load)
            } else if super::support::kills_before(l, server_start.fast) {
                super::support::Kill::Certain
            } else {
                // The load is unknown: how surely it is killed rests on no number.
                super::support::Kill::Possible
            }
        });
        let server_name = cx.container.server.map_or("the server", |s| s.name);
        let risk = match (liveness, cx.container.probe(ProbeKind::Liveness)) {
            (Some(liveness), _) if !super::support::accuses_on(load) => {
                if kill == Some(super::support::Kill::Certain) {
                    format!(
                        "its liveness probe ({}) runs from container start and gives up before \
                         even {server_name}'s own start ends ({}–{} s, modelLoad.serverStartSeconds), \
                         whatever the model: it kills every start",
                        liveness.budget_arithmetic(),
                        server_start.fast,
                        server_start.slow
                    )
                } else {
                    format!(
                        "its liveness probe ({}) runs from container start and kills any load \
                         that takes longer",
                        liveness.budget_arithmetic()
                    )
                }
            }
            (Some(liveness), _) => match kill.unwrap_or(super::support::Kill::Possible) {
                super::support::Kill::Certain => format!(
                    "its liveness probe ({}) runs from container start and kills it mid-load",
                    liveness.budget_arithmetic()
                ),
                super::support::Kill::Possible => format!(
                    "its liveness probe ({}) runs from container start; it outlasts the fast end \
                     of this load ({}), but a slow start is killed mid-load",
                    liveness.budget_arithmetic(),
                    load.short()
                ),
                super::support::Kill::No => format!(
                    "its liveness probe ({}) runs from container start; it outlasts this load \
                     ({}), but a slower one (a cold cache, a slower volume) is killed mid-load",
                    liveness.budget_arithmetic(),
                    load.short()
                ),
            },
            (None, Some(_)) => "its liveness answers while the model loads, so nothing restarts \
                                a load that hangs"
                .to_owned(),
            (None, None) => "nothing restarts a load that hangs, and a liveness probe added \
                             later will kill it mid-load"
                .to_owned(),
        };
        // What a budget must cover: the load the manifest shows, or, where it shows none, a
        // plea for the number rather than a guess stated as a need.
        let needs = if super::support::accuses_on(load) {
            format!(
                "a startup budget needs {}",
                required_arithmetic(load, margin)
            )
        } else {
            format!(
                "its load time is unknown ({}); declare {LOAD_SECONDS_ANNOTATION}",
                load.derivation()
            )
        };
        // An error only where every start is killed: the fast end of the load (or, where the
        // load is unknown, the server's own start) outlasts the liveness tolerance. Where only
        // a slow start is killed, or nothing can kill the load, no storm is certain: a warning.
        // The policy's own level for the rule, where set, replaces this one.
        let ceiling = if kill == Some(super::support::Kill::Certain) {
            Severity::Error
        } else {
            Severity::Warning
        };
        report
            .container(&cx)
            .message(format!(
                "{} has no startupProbe: {risk} ({needs})",
                cx.container.describe(),
            ))
            .help(help)
            .at_most(ceiling)
            .fix(fix)
            .load(load)
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{findings_of, fired};

    const ID: &str = "gpu-startup-probe-missing";

    /// What --fix writes, where the rule offers a fix; else the help, which then says it.
    fn fix_of(f: &crate::Finding) -> &str {
        f.fix.as_ref().map_or(&*f.help, |x| x.description.as_str())
    }

    #[test]
    fn message_names_container_and_budget() {
        let no_liveness = include_str!(
            "../../resources/rules/gpu-startup-probe-missing/fires-warning-without-liveness.yaml"
        );
        let f = &findings_of(no_liveness, ID)[0];
        assert_eq!(f.pointer, "/spec/template/spec/containers/0");
        assert_eq!(f.container.as_deref(), Some("vllm"));
        assert!(
            f.message
                .contains("container \"vllm\" (requests nvidia.com/gpu)"),
            "{}",
            f.message
        );
        // No model named: no need is stated from a guess.
        assert!(
            f.message.contains(
                "its load time is unknown (no model named in the container's command, args or \
                 env); declare probelint.io/model-load-seconds"
            ),
            "{}",
            f.message
        );
        assert_eq!(
            f.evidence.as_deref(),
            Some("runs vLLM (the image's entrypoint)")
        );
        // No liveness: the risk is a hang nothing restarts, not a kill.
        assert!(
            f.message.contains("nothing restarts a load that hangs"),
            "{}",
            f.message
        );
        // Nothing could kill it before, and its load is unknown: the added deadline is the
        // policy's 3,600 s floor for a deadline where there was none, not the 375 s the default
        // load needs.
        assert!(
            fix_of(f).contains(
                "failureThreshold 360 (3600 s budget, set by modelLoad.newDeadlineFloorSeconds: a \
                 deadline where this container had none"
            ),
            "{}",
            fix_of(f)
        );
        assert!(
            fix_of(f).contains("readiness check (httpGet /health on port 8000)"),
            "{}",
            fix_of(f)
        );
    }

    #[test]
    fn an_error_only_where_a_liveness_probe_can_kill_the_load() {
        use crate::model::finding::Severity;
        // The bad example's liveness runs from container start: the restart storm, an error.
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.severity, Severity::Error);
        assert!(
            f.message
                .contains("its liveness probe (30 s (3 × 10 s)) runs from container start"),
            "{}",
            f.message
        );
        // No liveness: nothing can kill the load, a warning with the same fix.
        let none = include_str!(
            "../../resources/rules/gpu-startup-probe-missing/fires-warning-without-liveness.yaml"
        );
        let f = &findings_of(none, ID)[0];
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.fix.is_some());
        // A liveness on an endpoint NIM answers while it loads cannot kill it either.
        let nim = "apiVersion: v1\nkind: Pod\nmetadata: {name: nim}\nspec:\n  containers:\n    - name: nim\n      image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3\n      ports: [{containerPort: 8000}]\n      resources: {limits: {nvidia.com/gpu: 1}}\n      livenessProbe: {httpGet: {path: /v1/health/live, port: 8000}}\n      readinessProbe: {httpGet: {path: /v1/health/ready, port: 8000}}\n";
        let f = &findings_of(nim, ID)[0];
        assert_eq!(f.severity, Severity::Warning, "{}", f.message);
        // The model unknown: a liveness that outlasts vLLM's own start rests on no number, a
        // warning; one that gives up before even the server's start (20 s) ends kills every
        // start whatever the model, an error that says so.
        let unknown = super::META.bad_example.replace(
            "          args: [\"--model\", \"meta-llama/Llama-3.1-8B-Instruct\"]\n",
            "",
        );
        let f = &findings_of(&unknown, ID)[0];
        assert_eq!(f.severity, Severity::Warning, "{}", f.message);
        assert!(
            f.message.contains("its load time is unknown"),
            "{}",
            f.message
        );
        let quick = unknown.replace(
            "          livenessProbe:\n            httpGet:",
            "          livenessProbe:\n            periodSeconds: 5\n            httpGet:",
        );
        let f = &findings_of(&quick, ID)[0];
        assert_eq!(f.severity, Severity::Error, "{}", f.message);
        assert!(
            f.message.contains(
                "gives up before even vLLM's own start ends (20–180 s, \
                 modelLoad.serverStartSeconds), whatever the model"
            ),
            "{}",
            f.message
        );
        // The policy's level for the rule makes every case an error again.
        let strict =
            crate::Policy::with_user_yaml("rules:\n  gpu-startup-probe-missing: error\n").unwrap();
        let all = crate::rules::testing::lint_with(none, &strict);
        let f = all.iter().find(|f| f.rule == ID).expect("fires");
        assert_eq!(f.severity, Severity::Error);
    }

    #[test]
    fn the_added_budget_covers_the_estimated_load_and_never_undercuts_liveness() {
        // vLLM 70B from the Hub, readiness only: 140 GB at 50–1000 MB/s + 20–180 s = 160–2980 s;
        // the slow end with 25 % is 3,725 s, beyond the 3,600 s floor of a new deadline.
        let yaml = include_str!(
            "../../resources/rules/gpu-startup-probe-missing/fires-vllm-70b-from-the-hub.yaml"
        );
        let f = &findings_of(yaml, ID)[0];
        assert!(
            f.message
                .contains("3725 s (the slow end of load ≈ 160–2980 s + 25 %; 140 GB"),
            "{}",
            f.message
        );
        assert!(
            fix_of(f).contains("failureThreshold 373 (3730 s budget"),
            "{}",
            fix_of(f)
        );
        // DeepSeek-R1 on a PVC: 671B × 1 byte (FP8 in the name) at 125–2000 MB/s + 20–180 s.
        let r1 = yaml
            .replace("meta-llama/Llama-3.1-70B-Instruct", "/models/DeepSeek-R1-FP8")
            .replace("          readinessProbe", "          volumeMounts: [{name: w, mountPath: /models}]\n          readinessProbe")
            .replace("      containers:", "      volumes: [{name: w, persistentVolumeClaim: {claimName: r1}}]\n      containers:");
        let f = &findings_of(&r1, ID)[0];
        assert!(f.message.contains("load ≈ 356–5548 s + 25 %; 671 GB (DeepSeek-R1-FP8: 671B parameters × 1 byte, fp8) read from PVC \"r1\" at 125–2000 MB/s = 336–5368 s + 20–180 s vLLM start"), "{}", f.message);
        assert!(
            fix_of(f).contains("failureThreshold 694 (6940 s budget, set by the load with margin"),
            "{}",
            fix_of(f)
        );
        // A liveness tolerance longer than all of that is kept: the fix never shortens it.
        let long = yaml.replace(
            "          readinessProbe",
            "          livenessProbe: {httpGet: {path: /health, port: 8000}, initialDelaySeconds: 5000}\n          readinessProbe",
        );
        let f = &findings_of(&long, ID)[0];
        assert!(
            f.message.contains("its liveness probe (5030 s"),
            "{}",
            f.message
        );
        assert!(
            fix_of(f).contains(
                "failureThreshold 503 (5030 s budget, set by the liveness tolerance it had)"
            ),
            "{}",
            fix_of(f)
        );
    }

    #[test]
    fn all_accelerated_asks_every_gpu_container_whatever_it_runs() {
        // An idle GPU Deployment serves no model: silent by default, asked for a startupProbe
        // where the policy wants one on every accelerator container. A batch Job is still not.
        let idle = include_str!(
            "../../resources/rules/gpu-serving-role-unknown/silent-idle-shell-deployment.yaml"
        );
        assert!(fired(idle, ID).is_empty());
        let all =
            crate::Policy::with_user_yaml("startupProbe:\n  require: allAccelerated\n").unwrap();
        let on = |yaml: &str| {
            crate::rules::testing::lint_with(yaml, &all)
                .into_iter()
                .filter(|f| f.rule == ID)
                .count()
        };
        assert_eq!(on(idle), 1);
        let job =
            include_str!("../../resources/rules/gpu-startup-probe-missing/silent-batch-job.yaml");
        assert_eq!(on(job), 0);
        let bad = crate::Policy::with_user_yaml("startupProbe:\n  require: everything\n");
        assert!(bad.is_err(), "an unknown requirement is refused");
    }

    #[test]
    fn the_fix_on_sglangs_generating_health_has_a_generous_timeout() {
        let pod = include_str!(
            "../../resources/rules/gpu-startup-probe-missing/fires-sglang-without-startup-probe.yaml"
        );
        let f = &findings_of(pod, ID)[0];
        let patch = serde_json::to_value(&f.fix.as_ref().expect("fix").patch).unwrap();
        assert_eq!(patch[0]["value"]["httpGet"]["path"], "/health");
        assert_eq!(patch[0]["value"]["httpGet"]["port"], 30000);
        assert_eq!(patch[0]["value"]["timeoutSeconds"], 10, "{patch}");
    }

    #[test]
    fn fires_on_lws_leader_and_worker_and_native_sidecar_with_gpu() {
        let lws = include_str!(
            "../../resources/rules/gpu-startup-probe-missing/fires-lws-leader-worker-and-gpu-sidecar.yaml"
        );
        let got: Vec<_> = fired(lws, ID)
            .into_iter()
            .map(|(c, p)| (c.unwrap(), p))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "leader".to_owned(),
                    "/spec/leaderWorkerTemplate/leaderTemplate/spec/containers/0".to_owned()
                ),
                (
                    "worker".to_owned(),
                    "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0".to_owned()
                ),
                (
                    "gpu-sidecar".to_owned(),
                    "/spec/leaderWorkerTemplate/workerTemplate/spec/initContainers/0".to_owned()
                ),
            ]
        );
    }
}
