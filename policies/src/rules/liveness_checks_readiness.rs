//! `liveness-checks-readiness`: liveness asks "can you serve?" instead of "are you alive?".

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::{Handler, ProbeKind};
use crate::model::servers::{GENERIC_READY_PATHS, KNOWN_SERVERS, is_inference_path, strip_query};

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

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        let Some(liveness) = cx.container.probe(ProbeKind::Liveness) else {
            continue;
        };
        let readiness = cx.container.probe(ProbeKind::Readiness);
        // Built only for a finding.
        let live_help = || match cx.container.server {
            Some(s) => format!(
                "point liveness at {} ({}'s liveness endpoint)",
                s.live_path, s.name
            ),
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
    use crate::rules::testing::fired;

    const ID: &str = "liveness-checks-readiness";

    fn peer(name: &str) -> String {
        probelint_testkit::corpus::peer(&format!("kube-score/{name}"))
    }

    #[test]
    fn agrees_with_kube_score_on_identical_probes() {
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
