//! `liveness-checks-readiness`: liveness asks "can you serve?" instead of "are you alive?".

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::{Analysis, ContainerContext};
use crate::fix::probes::GENERATION_TIMEOUT_SECONDS;
use crate::model::finding::Severity;
use crate::model::probe::{Handler, ProbeKind};
use crate::model::servers::{
    DuringLoad, GENERIC_READY_PATHS, KNOWN_SERVERS, KnownServer, is_inference_path, strip_query,
};

static META: RuleMeta = RuleMeta {
    id: "liveness-checks-readiness",
    severity: Severity::Warning,
    summary: "livenessProbe checks the same thing as readiness, or a readiness/inference endpoint",
    rationale: "Readiness answers \"should this pod get traffic now?\"; liveness answers \"is this process \
wedged beyond repair?\". When liveness checks readiness (the same handler, or an endpoint such as /readyz, \
/v2/health/ready or /health_generate that fails while the model is busy), a server that is merely \
saturated or warming up is restarted instead of taken out of rotation — losing its loaded weights and \
in-flight requests, and putting more load on the remaining replicas, which then fail their liveness too. \
Point liveness at the server's cheap liveness endpoint. A server whose single health endpoint is designed \
for both (vLLM's, TGI's and llama.cpp's /health) is not flagged for using it twice.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/liveness-checks-readiness/bad.yaml"),
    good_example: include_str!("../../resources/rules/liveness-checks-readiness/good.yaml"),
    fix: None,
};

/// Handlers compared for identity: what they check, not how often.
fn same_check(a: &Handler, b: &Handler) -> bool {
    match (a, b) {
        (
            Handler::HttpGet {
                path: pa, port: qa, ..
            },
            Handler::HttpGet {
                path: pb, port: qb, ..
            },
        ) => strip_query(pa) == strip_query(pb) && qa == qb,
        (Handler::Invalid, _) | (_, Handler::Invalid) => false,
        (a, b) => a == b,
    }
}

/// Why a liveness path is really a readiness or inference check, if it is.
fn readiness_like(path: &str) -> Option<&'static str> {
    let path = strip_query(path);
    if is_inference_path(path) {
        return Some("an inference endpoint");
    }
    if GENERIC_READY_PATHS.contains(&path)
        || KNOWN_SERVERS
            .iter()
            .any(|s| !s.single_health_endpoint && s.ready_path == path && s.live_path != path)
            // Dynamo's readiness is /health, everyone else's liveness.
            && !KNOWN_SERVERS.iter().any(|s| s.live_path == path)
    {
        return Some("a readiness endpoint");
    }
    None
}

pub(crate) static RULE: Rule = Rule::object(&META, check);

/// What to point liveness at, held to a fix's invariant: advice that would add a restart is not
/// given. A liveness endpoint that fails while the model loads (llama.cpp's /health answers 503,
/// vLLM's port is closed) kills the container mid-load unless a startupProbe that waits for the
/// model gates it; a tcpSocket startupProbe on a server that opens its port before the model is
/// loaded does not. And an endpoint that runs a generation (SGLang's /health) needs the generous
/// timeout a generation takes, or the kubelet's 1 s default fails it under load.
fn advice(cx: &ContainerContext<'_, '_>, server: &KnownServer) -> String {
    let fails_during_load = cx.container.loads_model_at_start()
        && matches!(
            server.during_load,
            DuringLoad::PortClosed | DuringLoad::Unavailable | DuringLoad::Unknown
        )
        && !server.answers_during_load(server.live_path);
    let gated = match cx.container.probe(ProbeKind::Startup) {
        Some(startup) => match &startup.handler {
            // The port is open while llama.cpp or SGLang loads: this gate opens too early.
            Handler::TcpSocket { .. } => server.during_load == DuringLoad::PortClosed,
            Handler::Invalid => false,
            _ => true,
        },
        None => cx.container.runs_probe(ProbeKind::Startup),
    };
    let timeout = if server.live_runs_generation {
        format!(" with timeoutSeconds: {GENERATION_TIMEOUT_SECONDS} (it runs a generation)")
    } else {
        String::new()
    };
    if fails_during_load && !gated {
        return format!(
            "first make the startupProbe an httpGet {} sized to the model load (it fails while \
             {} loads, and would then gate liveness); then point liveness at {}{timeout} ({}'s \
             liveness endpoint). Pointing liveness there without that gate would kill the \
             server mid-load",
            server.ready_path, server.name, server.live_path, server.name
        );
    }
    format!(
        "point liveness at {}{timeout} ({}'s liveness endpoint)",
        server.live_path, server.name
    )
}

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        // "A busy model gets restarted" means nothing on redis or a web frontend: a generic
        // smell, judged on model servers unless the policy asks for genericChecks.
        if !cx.container.gets_generic_checks(analysis.policy) {
            continue;
        }
        let Some(liveness) = cx.container.probe(ProbeKind::Liveness) else {
            continue;
        };
        let readiness = cx.container.probe(ProbeKind::Readiness);
        // Built only for a finding.
        let live_help = || match cx.container.server {
            Some(s) => advice(&cx, s),
            None => "point liveness at a cheap endpoint that only fails when the process is wedged"
                .to_owned(),
        };
        if let Handler::HttpGet { path, .. } = &liveness.handler
            && let Some(what) = readiness_like(path)
        {
            report.container(
                &cx,
                liveness.pointer.clone(),
                format!(
                    "{}: livenessProbe targets {path}, {what}: a busy model gets restarted instead \
                     of taken out of rotation",
                    cx.container.describe()
                ),
                live_help(),
            );
            continue;
        }
        let Some(readiness) = readiness else {
            continue;
        };
        if !same_check(&liveness.handler, &readiness.handler) {
            continue;
        }
        let designed_for_both = match (&liveness.handler, cx.container.server) {
            (Handler::HttpGet { path, .. }, Some(s)) => {
                s.single_health_endpoint && strip_query(path) == s.live_path
            }
            _ => false,
        };
        if designed_for_both {
            continue;
        }
        report.container(
            &cx,
            liveness.pointer.clone(),
            format!(
                "{}: livenessProbe is the same check as readinessProbe ({}): a busy model gets \
                 restarted instead of taken out of rotation",
                cx.container.describe(),
                liveness.handler.describe()
            ),
            live_help(),
        );
    }
}

#[cfg(test)]
mod tests {

    const ID: &str = "liveness-checks-readiness";

    fn peer(name: &str) -> String {
        probelint_testkit::corpus::peer(&format!("kube-score/{name}"))
    }

    #[test]
    fn advice_that_would_add_a_restart_is_not_given() {
        let llama = include_str!(
            "../../resources/rules/liveness-checks-readiness/fires-llama-cpp-advice-needs-a-startup-gate.yaml"
        );
        let f = &crate::rules::testing::findings_of(llama, ID)[0];
        assert!(
            f.help
                .starts_with("first make the startupProbe an httpGet /health"),
            "{}",
            f.help
        );
        // With a startupProbe that waits for the model, the plain advice is safe.
        let gated = llama.replace(
            "startupProbe: {tcpSocket: {port: 8080}, failureThreshold: 30}",
            "startupProbe: {httpGet: {path: /health, port: 8080}, failureThreshold: 30}",
        );
        let f = &crate::rules::testing::findings_of(&gated, ID)[0];
        assert!(
            f.help.starts_with("point liveness at /health"),
            "{}",
            f.help
        );
        // SGLang's /health runs a generation: the advice carries the timeout it needs.
        let sglang = include_str!(
            "../../resources/rules/liveness-checks-readiness/fires-liveness-on-generation-and-ready-endpoints.yaml"
        );
        let f = &crate::rules::testing::findings_of(sglang, ID)[0];
        assert!(f.help.contains("timeoutSeconds: 10"), "{}", f.help);
    }

    #[test]
    fn agrees_with_kube_score_on_identical_probes() {
        // kube-score judges every container; probelint does with genericChecks, and by default
        // only the containers that serve a model ("a busy model" means nothing on nginx).
        let generic = crate::Policy::with_user_yaml("genericChecks: true\n").unwrap();
        let fired = |yaml: &str, id: &str| -> Vec<(Option<String>, String)> {
            crate::rules::testing::lint_with(yaml, &generic)
                .into_iter()
                .filter(|f| f.rule == id)
                .map(|f| (f.container, f.pointer))
                .collect()
        };
        for name in [
            "pod-probes-identical-http.yaml",
            "pod-probes-identical-tcp.yaml",
            "pod-probes-identical-exec.yaml",
        ] {
            assert!(
                crate::rules::testing::fired(&peer(name), ID).is_empty(),
                "{name}"
            );
        }
        for name in [
            "pod-probes-identical-http.yaml",
            "pod-probes-identical-tcp.yaml",
            "pod-probes-identical-exec.yaml",
        ] {
            let got = fired(&peer(name), ID);
            assert_eq!(got.len(), 1, "{name}: {got:?}");
            assert_eq!(got[0].0.as_deref(), Some("foobar"), "{name}");
        }
        for name in [
            "pod-probes-both.yaml",
            "pod-probes-on-different-containers.yaml",
        ] {
            assert!(fired(&peer(name), ID).is_empty(), "{name}");
        }
    }
}
