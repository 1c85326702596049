//! `known-server-endpoint`: a recognised model server is probed for readiness on the wrong endpoint.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::fix::probes::readiness_endpoint;
use crate::model::finding::{Applicability, Severity};
use crate::model::probe::{Handler, ProbeKind};

static META: RuleMeta = RuleMeta {
    id: "known-server-endpoint",
    severity: Severity::Warning,
    summary: "A known model server's readiness does not use that server's ready endpoint",
    rationale: "Model servers separate \"the process is up\" from \"the model is loaded and can infer\": \
Triton's /v2/health/ready answers 200 only when its models are ready, while /v2/health/live only says \
the process is up (in Triton's default mode no port is open while the startup models load: main.cc \
creates the server, which loads them, before it starts the HTTP endpoint; with explicit model control, \
live answers while models are still loading); NIM has /v1/health/live and /v1/health/ready; SGLang's \
/health_generate runs a real generation. A readiness probe on the liveness endpoint (or on an arbitrary \
path) marks the pod Ready while the model is still loading, and keeps it Ready when the model has \
failed. probelint recognises a server by what the container runs (`vllm serve`, \
`python -m sglang.launch_server`, `text-generation-launcher`, `trtllm-serve`, `tritonserver`, \
`llama-server`, ... from any image), else by its image, and knows the endpoints of vLLM, TGI, TEI, \
Triton, trtllm-serve, SGLang, llama.cpp, Ollama, NVIDIA NIM, NVIDIA Dynamo, TF Serving, MLServer, \
BentoML, TorchServe and KServe's model servers. It also warns when a llama.cpp server's probes rely on \
its default port, which is moving from 8080 to 9931.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/known-server-endpoint/bad.yaml"),
    good_example: include_str!("../../resources/rules/known-server-endpoint/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Replaces the readiness handler with an httpGet on the server's ready endpoint, on the port the \
container declares (or the probe's own port); with the `probeHelper` policy option, for vLLM, TGI, \
SGLang and Triton, with an exec of `probelint-probe ready` and the volumes that bring it.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        let Some(server) = cx.container.server else {
            continue;
        };
        if server.default_port_unsettled {
            unsettled_port(&cx, server, report);
        }
        let Some(readiness) = cx.container.probe(ProbeKind::Readiness) else {
            continue;
        };
        // tcpSocket readiness is readiness-port-open's finding; exec and gRPC are the user's call.
        let Handler::HttpGet { path, .. } = &readiness.handler else {
            continue;
        };
        if server.is_ready_path(path) {
            // A ready endpoint whose 200 can still mean "not ready" (Dynamo's status in the
            // body, MLServer with zero models): worth a warning of its own.
            if let Some(caveat) = server.ready_caveat
                && crate::model::servers::strip_query(path) == server.ready_path
            {
                report
                    .container(&cx)
                    .at(format!("{}/httpGet/path", readiness.pointer))
                    .message(format!(
                        "{}: readiness on {path} can pass while {} cannot serve: {caveat}",
                        cx.container.describe(),
                        server.name
                    ))
                    .help(
                        "gate traffic on a check that fails when the model cannot serve (an exec \
                     probe that reads the status, or the per-model ready endpoint)",
                    )
                    .report();
            }
            continue;
        }
        let fix = readiness_endpoint(&cx, readiness, analysis.policy);
        report
.container(&cx)
.at(format!("{}/httpGet/path", readiness.pointer))
.message(format!(
                "{}: {} readiness should be {} but the probe checks {path}",
                cx.container.describe(),
                server.name,
                server.ready_path
            ))
.help(format!(
                "set readinessProbe.httpGet.path to {}: it answers 200 only when the model can serve",
                server.ready_path
            ))
            .fix(fix)
            .report();
    }
}

/// A server whose default port changes between releases (llama.cpp, 8080 → 9931), probed on
/// a numeric port the container never sets: the probes break when the image updates.
fn unsettled_port(
    cx: &crate::analysis::context::ContainerContext<'_, '_>,
    server: &crate::model::servers::KnownServer,
    report: &mut Report<'_>,
) {
    if server.explicit_port(cx.container.value).is_some() {
        return;
    }
    let Some(probe) = cx.container.probes().find(|p| {
        matches!(
            p.handler.port(),
            Some(crate::model::probe::PortRef::Number(_))
        )
    }) else {
        return;
    };
    let port = probe
        .handler
        .port()
        .map(ToString::to_string)
        .unwrap_or_default();
    report
        .container(cx)
        .message(format!(
            "{}: {} sets no port (neither --port nor LLAMA_ARG_PORT) and its {}Probe uses port \
             {port}; the server's default is moving from 8080 to 9931 (ggml-org/llama.cpp#26508)",
            cx.container.describe(),
            server.name,
            probe.kind.noun()
        ))
        .help(format!(
            "pass --port {port} (or set LLAMA_ARG_PORT) so the probes and the server agree"
        ))
        .report();
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "known-server-endpoint";

    #[test]
    fn triton_live_endpoint_for_readiness_fires_with_the_right_path() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(
            f.pointer,
            "/spec/template/spec/containers/0/readinessProbe/httpGet/path"
        );
        assert!(f.help.contains("/v2/health/ready"), "{}", f.help);
    }
}
