//! `liveness-checks-readiness`: liveness asks "can you serve?" instead of "are you alive?".

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::{Analysis, ContainerContext};
use crate::fix::Change;
use crate::fix::patch::{add, remove, replace};
use crate::fix::probes::{
    GENERATION_TIMEOUT_SECONDS, StartupBudget, raise_threshold, startup_probe,
};
use crate::model::finding::{Applicability, Severity};
use crate::model::pointer;
use crate::model::probe::{Handler, PortRef, Probe, ProbeKind};
use crate::model::servers::{
    DuringLoad, GENERIC_READY_PATHS, KNOWN_SERVERS, KnownServer, is_inference_path, strip_query,
};
use crate::policy::Policy;
use serde_json::json;

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
    fix: Some(FixMeta {
        applicability: Applicability::DisplayOnly,
        what: "Advice, never applied: the liveness endpoint of the recognised server, with the \
timeout a generating endpoint needs, and — where that endpoint fails while the model loads and no \
startupProbe waits for the model — a startupProbe on the server's ready endpoint sized to the load \
first. It is shown as the patch it would be, and held to the invariant fixes are: simulated as written \
and as advised at both ends of the load, it adds no restart.",
    }),
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

/// The path a `curl` in an exec command asks for (`curl -f localhost:3000/health` → `/health`).
fn curl_path(command: &[String]) -> Option<&str> {
    let url = super::readiness_port_open::curl_call(command)?.url;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    Some(strip_query(&rest[rest.find('/')?..]))
}

/// What to point liveness at, held to a fix's invariant: advice that would add a restart is not
/// given. A liveness endpoint that fails while the model loads (llama.cpp's /health answers 503,
/// vLLM's port is closed) kills the container mid-load unless a startupProbe that waits for the
/// model gates it; a tcpSocket startupProbe on a server that opens its port before the model is
/// loaded does not. And an endpoint that runs a generation (SGLang's /health) needs the generous
/// timeout a generation takes, or the kubelet's 1 s default fails it under load.
fn advice(
    cx: &ContainerContext<'_, '_>,
    server: &KnownServer,
    liveness: &Probe<'_>,
    policy: &Policy,
) -> (String, Option<Change>) {
    let fails_during_load = cx.container.loads_model_at_start()
        && matches!(
            server.during_load,
            DuringLoad::PortClosed | DuringLoad::Unavailable | DuringLoad::Unknown
        )
        && !server.answers_during_load(server.live_path);
    let startup = cx.container.probe(ProbeKind::Startup);
    let gated = match startup {
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
    let needs_gate = fails_during_load && !gated;
    let text = if needs_gate {
        format!(
            "first make the startupProbe an httpGet {} sized to the model load (it fails while \
             {} loads, and would then gate liveness); then point liveness at {}{timeout} ({}'s \
             liveness endpoint). Pointing liveness there without that gate would kill the \
             server mid-load",
            server.ready_path, server.name, server.live_path, server.name
        )
    } else {
        format!(
            "point liveness at {}{timeout} ({}'s liveness endpoint)",
            server.live_path, server.name
        )
    };
    let patch = advised_patch(cx, server, liveness, startup, needs_gate, policy);
    (
        text,
        patch.map(|(description, ops)| Change::new(description, ops)),
    )
}

/// The advice as the patch it would be: liveness on the server's liveness path (an httpGet
/// liveness keeps its port), the timeout a generating endpoint needs, and where a gate is needed
/// the startupProbe that waits for the model. `None` where the advice has no exact patch (an
/// exec or tcpSocket liveness, a startupProbe that is not a mapping).
fn advised_patch(
    cx: &ContainerContext<'_, '_>,
    server: &KnownServer,
    liveness: &Probe<'_>,
    startup: Option<&Probe<'_>>,
    needs_gate: bool,
    policy: &Policy,
) -> Option<(String, Vec<json_patch::PatchOperation>)> {
    let port_value = |port: &PortRef<'_>| match port {
        PortRef::Number(n) => Some(json!(n)),
        PortRef::Name(n) => Some(json!(n)),
        PortRef::Invalid(_) => None,
    };
    let mut ops = match &liveness.handler {
        Handler::HttpGet { path, .. }
            if liveness.value.pointer("/httpGet/path").is_some()
                && strip_query(path) != server.live_path =>
        {
            vec![replace(
                pointer::join(&pointer::join(&liveness.pointer, "httpGet"), "path"),
                json!(server.live_path),
            )]
        }
        // A port check, asked over HTTP for the liveness endpoint on the same port.
        Handler::TcpSocket { port } if liveness.value.is_object() => vec![
            remove(pointer::join(&liveness.pointer, "tcpSocket")),
            add(
                pointer::join(&liveness.pointer, "httpGet"),
                json!({"path": server.live_path, "port": port_value(port)?}),
            ),
        ],
        _ => return None,
    };
    let mut said = format!("point liveness at {}", server.live_path);
    if server.live_runs_generation && liveness.timeout() < GENERATION_TIMEOUT_SECONDS {
        let path = pointer::join(&liveness.pointer, "timeoutSeconds");
        ops.push(if liveness.value.get("timeoutSeconds").is_some() {
            replace(path, json!(GENERATION_TIMEOUT_SECONDS))
        } else {
            add(path, json!(GENERATION_TIMEOUT_SECONDS))
        });
        said.push_str(&format!(
            " with timeoutSeconds {GENERATION_TIMEOUT_SECONDS}"
        ));
    }
    if !needs_gate {
        return Some((said, ops));
    }
    let budget = StartupBudget::for_container(cx, policy);
    match startup {
        // A tcpSocket gate on a port that opens early: the same port, asked over HTTP for the
        // ready endpoint, with a budget that covers the load.
        Some(
            gate @ Probe {
                handler: Handler::TcpSocket { port },
                ..
            },
        ) if gate.value.is_object() => {
            let port = port_value(port)?;
            // The threshold the same way every raised startupProbe gets it, never lower.
            let needed = budget.seconds.max(gate.budget_seconds());
            let raise = raise_threshold(gate, needed)?;
            let mut gate_ops = vec![
                remove(pointer::join(&gate.pointer, "tcpSocket")),
                add(
                    pointer::join(&gate.pointer, "httpGet"),
                    json!({"path": server.ready_path, "port": port}),
                ),
            ];
            gate_ops.extend(raise.ops);
            gate_ops.extend(ops);
            Some((
                format!(
                    "make the startupProbe httpGet {} and {} (a {needed} s budget, set by {}), \
                     then {said}",
                    server.ready_path, raise.description, budget.set_by
                ),
                gate_ops,
            ))
        }
        // No startupProbe at all: the one gpu-startup-probe-missing adds, then liveness.
        None => {
            let gate = startup_probe(cx, policy)?;
            let description = format!("{}, then {said}", gate.description);
            let mut all = gate.ops;
            all.extend(ops);
            Some((description, all))
        }
        Some(_) => None,
    }
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
        // With probeHelper on, liveness-restarts-busy-server judges this probe and fixes it.
        if super::liveness_restarts_busy_server::applies(&cx, analysis.policy).is_some() {
            continue;
        }
        let readiness = cx.container.probe(ProbeKind::Readiness);
        // Built only for a finding.
        let live_help = || match cx.container.server {
            Some(s) => advice(&cx, s, liveness, analysis.policy),
            None => (
                "point liveness at a cheap endpoint that only fails when the process is wedged"
                    .to_owned(),
                None,
            ),
        };
        // One finding, with the advice and the patch it would be.
        let emit = |report: &mut Report<'_>, what: String| {
            let (help, fix) = live_help();
            report
                .container(&cx)
                .at(liveness.pointer.clone())
                .message(format!(
                    "{}: livenessProbe {what}: a busy model gets restarted instead of taken out \
                     of rotation",
                    cx.container.describe()
                ))
                .help(help)
                .fix(fix)
                .report();
        };
        if let Handler::HttpGet { path, .. } = &liveness.handler
            && let Some(what) = readiness_like(path)
        {
            emit(report, format!("targets {path}, {what}"));
            continue;
        }
        let Some(readiness) = readiness else {
            continue;
        };
        // `curl URL` without --fail exits 0 on any HTTP status: as liveness it fails only on a
        // refused connection, which a busy server does not give (readiness-port-open reports the
        // same curl as a readiness check).
        if let Handler::Exec { command } = &liveness.handler
            && super::readiness_port_open::curl_without_fail(command).is_some()
        {
            continue;
        }
        if !same_check(&liveness.handler, &readiness.handler) {
            continue;
        }
        let designed_for_both = match (&liveness.handler, cx.container.server) {
            (Handler::HttpGet { path, .. }, Some(s)) => {
                s.single_health_endpoint && strip_query(path) == s.live_path
            }
            // `curl -f localhost:3000/health`: the same endpoint, asked by exec.
            (Handler::Exec { command }, Some(s)) => {
                s.single_health_endpoint && curl_path(command) == Some(s.live_path)
            }
            _ => false,
        };
        if designed_for_both {
            continue;
        }
        emit(
            report,
            format!(
                "is the same check as readinessProbe ({})",
                liveness.handler.describe()
            ),
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
                .map(|f| (f.container.as_deref().map(str::to_owned), f.pointer))
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
