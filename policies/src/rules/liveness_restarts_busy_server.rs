//! `liveness-restarts-busy-server`: with `probeHelper` on, a recognised server's liveness asks the
//! endpoint readiness asks (or one that generates) where `probelint-probe live` can tell a busy
//! server from a wedged one.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::{Analysis, ContainerContext};
use crate::fix::helper;
use crate::model::finding::{Applicability, Severity};
use crate::model::probe::{Handler, PortRef, Probe, ProbeKind};
use crate::model::servers::strip_query;
use crate::policy::Policy;

static META: RuleMeta = RuleMeta {
    id: "liveness-restarts-busy-server",
    severity: Severity::Warning,
    summary: "With probeHelper, liveness shares readiness's endpoint where probelint-probe live can tell busy from wedged",
    rationale: "Liveness should fail only when the process is wedged. An httpGet liveness on the \
endpoint readiness uses fails when the server is merely busy, and the kubelet then restarts a loaded, \
healthy model: vLLM's /health times out on a busy engine and yet answers 200 while the engine is hung \
(gonka-ai/gonka#1421 reports 8+ false restarts a day); TGI's /health goes unhealthy when its queue is \
full (huggingface/text-generation-inference#3241); SGLang's /health is a generation that takes at \
least a second; Triton's /v2/health/ready fails while any model is not ready. This rule judges only \
where the `probeHelper` policy option is on and the server is one the helper knows (vLLM, TGI, SGLang, \
Triton): `probelint-probe live` then fails only when requests are in flight and the server's progress \
counters have not moved for two windows of 30 s (vLLM and TGI, whose counters advance every engine \
step), or when the server's cheap liveness path fails (SGLang's /ping, Triton's /v2/health/live). \
Without the helper, liveness-checks-readiness judges the same probes. docs/probe-helper.md gives the \
source of each server fact.",
    example_policy: Some(
        "probeHelper: {image: registry.example.com/probelint-probe:0.1.0, mode: initContainer}\n",
    ),
    bad_example: include_str!("../../resources/rules/liveness-restarts-busy-server/bad.yaml"),
    good_example: include_str!("../../resources/rules/liveness-restarts-busy-server/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Replaces the httpGet liveness with an exec of `probelint-probe live --server ID --port N` \
(with `--by endpoint` for SGLang and Triton) and the volumes that bring the binary. The kill deadline \
never shrinks: periodSeconds, failureThreshold and initialDelaySeconds stay, timeoutSeconds only grows \
to cover the helper's calls (7 s with metrics, 4 s without), and `live` waits its own windows before \
it fails. It is written only behind a startupProbe that waits for the model: the container's own (not \
a tcpSocket on a port that opens before the model is loaded), its operator's, or, where it has none, \
the startupProbe gpu-startup-probe-missing adds, in the same fix.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

/// The numeric port an httpGet asks, resolved among the container's declared ports.
fn port_number(cx: &ContainerContext<'_, '_>, port: &PortRef<'_>) -> Option<i64> {
    match port {
        PortRef::Number(n) => Some(*n),
        PortRef::Name(name) => cx
            .container
            .ports()
            .iter()
            .find(|p| p.name == Some(*name))
            .and_then(|p| p.number),
        PortRef::Invalid(_) => None,
    }
}

/// Why this container's liveness cannot tell busy from wedged, when the helper would judge it
/// instead: an httpGet on the server's own port (the one the helper asks) whose path is the
/// server's shared or generating health endpoint, its ready endpoint, or readiness's own check.
/// liveness-checks-readiness stays silent where this says `Some`, so a probe draws one finding.
pub(crate) fn applies(
    cx: &ContainerContext<'_, '_>,
    policy: &Policy,
) -> Option<(&'static str, String)> {
    let liveness = cx.container.probe(ProbeKind::Liveness)?;
    let Handler::HttpGet { path, port, .. } = &liveness.handler else {
        return None;
    };
    let probe = helper::probe(cx, policy, ProbeKind::Liveness)?;
    let server = cx.container.server?;
    let helper_port = probe.port;
    if port_number(cx, port) != Some(helper_port) {
        return None;
    }
    let path = strip_query(path);
    if let Some(evidence) = helper::shared_liveness_evidence(server, path) {
        return Some((evidence, path.to_owned()));
    }
    let same_as_readiness =
        cx.container
            .probe(ProbeKind::Readiness)
            .is_some_and(|r| match &r.handler {
                Handler::HttpGet {
                    path: ready_path,
                    port: ready_port,
                    ..
                } => {
                    strip_query(ready_path) == path
                        && port_number(cx, ready_port) == Some(helper_port)
                }
                _ => false,
            });
    same_as_readiness.then(|| {
        (
            "it is readiness's own check, which a busy server fails",
            path.to_owned(),
        )
    })
}

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    if analysis.policy.probe_helper.is_none() {
        return;
    }
    for cx in analysis.containers() {
        let Some((evidence, path)) = applies(&cx, analysis.policy) else {
            continue;
        };
        let (Some(liveness), Some(server)) =
            (cx.container.probe(ProbeKind::Liveness), cx.container.server)
        else {
            continue;
        };
        let fix = helper::liveness(&cx, liveness, analysis.policy);
        let help = help(&cx, liveness, server, fix.is_some());
        report
            .container(&cx)
            .at(liveness.pointer.clone())
            .message(format!(
                "{}: livenessProbe httpGet {path} cannot tell a busy {} from a wedged one: \
                 {evidence}",
                cx.container.describe(),
                server.name
            ))
            .help(help)
            .fix(fix)
            .report();
    }
}

fn help(
    cx: &ContainerContext<'_, '_>,
    liveness: &Probe<'_>,
    server: &crate::model::servers::KnownServer,
    fixable: bool,
) -> String {
    let run = format!(
        "run `probelint-probe live --server {}` for liveness: it {}; keep its {} kill deadline",
        server.id,
        helper::live_criterion(server),
        liveness.budget_arithmetic()
    );
    if fixable || cx.container.probe(ProbeKind::Startup).is_none() {
        run
    } else {
        format!(
            "first make the startupProbe wait for the model (an httpGet {} or `probelint-probe \
             startup`: a port that opens before the model is loaded lets liveness start too \
             early), then {run}",
            server.ready_path
        )
    }
}

#[cfg(test)]
mod tests {
    const ID: &str = "liveness-restarts-busy-server";

    fn findings_of_with(yaml: &str, rule: &str, policy: &crate::Policy) -> Vec<crate::Finding> {
        crate::rules::testing::lint_with(yaml, policy)
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    fn helper() -> crate::Policy {
        crate::Policy::with_user_yaml(super::META.example_policy.unwrap()).unwrap()
    }

    #[test]
    fn without_the_helper_the_rule_is_silent_and_liveness_checks_readiness_judges() {
        let bad = super::META.bad_example;
        assert!(crate::rules::testing::findings_of(bad, ID).is_empty());
        let with = findings_of_with(bad, ID, &helper());
        assert_eq!(with.len(), 1, "{with:?}");
        let others = findings_of_with(bad, "liveness-checks-readiness", &helper());
        assert!(others.is_empty(), "one finding per probe: {others:?}");
    }

    #[test]
    fn the_fix_keeps_the_kill_deadline_and_only_raises_the_timeout() {
        let f = &findings_of_with(super::META.bad_example, ID, &helper())[0];
        let fix = f.fix.as_ref().expect("a fix");
        let mut fixed = probelint_testkit::yaml::objects(super::META.bad_example)[0].clone();
        json_patch::patch(&mut fixed, &fix.patch).unwrap();
        let c = &fixed["spec"]["template"]["spec"]["containers"][0];
        let live = &c["livenessProbe"];
        assert_eq!(live["periodSeconds"], 10, "{live}");
        assert_eq!(live["failureThreshold"], 3, "{live}");
        assert_eq!(live["timeoutSeconds"], 7, "{live}");
        assert!(live.get("httpGet").is_none(), "{live}");
        assert_eq!(live["exec"]["command"][1], "live");
        assert_eq!(live["exec"]["command"][3], "vllm");
        assert!(
            findings_of_with(&serde_json::to_string(&fixed).unwrap(), ID, &helper()).is_empty()
        );
    }

    #[test]
    fn a_startup_gate_that_opens_early_gets_no_fix() {
        // SGLang opens its port once the weights are in memory, before its warm-up: a tcpSocket
        // startupProbe there does not wait for the model.
        let yaml = "
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: s
      image: lmsysorg/sglang:v0.4.1-cu124
      command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen2.5-1.5B-Instruct]
      ports: [{containerPort: 30000}]
      resources: {limits: {nvidia.com/gpu: 1}}
      startupProbe: {tcpSocket: {port: 30000}, failureThreshold: 120, periodSeconds: 10}
      livenessProbe: {httpGet: {path: /health, port: 30000}, timeoutSeconds: 10}
      readinessProbe: {httpGet: {path: /health_generate, port: 30000}, timeoutSeconds: 10}
";
        let f = &findings_of_with(yaml, ID, &helper())[0];
        assert!(f.fix.is_none(), "{:?}", f.fix);
        assert!(
            f.help.starts_with("first make the startupProbe wait"),
            "{}",
            f.help
        );
        let gated = yaml.replace(
            "startupProbe: {tcpSocket: {port: 30000}",
            "startupProbe: {httpGet: {path: /health_generate, port: 30000}, timeoutSeconds: 10",
        );
        let f = &findings_of_with(&gated, ID, &helper())[0];
        let fix = f.fix.as_ref().expect("a fix behind a gate that waits");
        let text = serde_json::to_string(&fix.patch).unwrap();
        assert!(text.contains(r#""--by","endpoint""#), "{text}");
        // 10 s it had, more than the helper's 4 s: kept.
        assert!(!text.contains("timeoutSeconds"), "{text}");
    }

    #[test]
    fn a_cheap_liveness_or_another_port_is_left_alone() {
        let yaml = "
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: t
      image: nvcr.io/nvidia/tritonserver:24.08-py3
      ports: [{containerPort: 8000}, {containerPort: 8002}]
      resources: {limits: {nvidia.com/gpu: 1}}
      startupProbe: {httpGet: {path: /v2/health/ready, port: 8000}, failureThreshold: 120}
      livenessProbe: {httpGet: {path: /v2/health/live, port: 8000}}
      readinessProbe: {httpGet: {path: /v2/health/ready, port: 8000}}
";
        assert!(findings_of_with(yaml, ID, &helper()).is_empty());
        let ready = yaml.replace(
            "livenessProbe: {httpGet: {path: /v2/health/live",
            "livenessProbe: {httpGet: {path: /v2/health/ready",
        );
        assert_eq!(findings_of_with(&ready, ID, &helper()).len(), 1);
        let other_port = ready.replace(
            "livenessProbe: {httpGet: {path: /v2/health/ready, port: 8000}",
            "livenessProbe: {httpGet: {path: /v2/health/ready, port: 8002}",
        );
        assert!(findings_of_with(&other_port, ID, &helper()).is_empty());
    }
}
