//! `gpu-readiness-probe-missing`: a serving accelerator container has no readinessProbe.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::ProbeKind;

static META: RuleMeta = RuleMeta {
    id: "gpu-readiness-probe-missing",
    severity: Severity::Error,
    summary: "A serving GPU container has no readinessProbe",
    rationale: "Without a readinessProbe a pod is Ready as soon as its containers start, so the Service \
sends user requests to a model server that is still loading weights (minutes), and they time out or fail. \
The same holds later: a server that is overloaded or has lost its GPU keeps receiving traffic. A \
readinessProbe on the server's ready endpoint keeps the pod out of rotation until it can infer.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/gpu-readiness-probe-missing/bad.yaml"),
    good_example: include_str!("../../resources/rules/gpu-readiness-probe-missing/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        // A Ray node's or a headless worker's readiness does not gate model traffic; a
        // readiness the operator injects is readiness-port-open's to judge.
        // Only a model server receives traffic before its model is loaded: not a Ray node or a
        // headless worker, not a multi-model runtime that starts empty, not an idle shell, a
        // notebook or a stress test, and not a container with no evidence either way.
        if !cx.pod.serving
            || cx.container.role != crate::analysis::object::Role::Serving
            || !cx.container.serves_model()
            || cx.container.runs_probe(ProbeKind::Readiness)
        {
            continue;
        }
        let help = match cx.container.server {
            Some(server) => format!(
                "add a readinessProbe: httpGet {} on the server's port ({} serves it on {} by default)",
                server.ready_path, server.name, server.default_port
            ),
            None => "add a readinessProbe: httpGet on an endpoint that answers 200 only once the \
                     model is loaded and can infer"
                .to_owned(),
        };
        report
            .container(&cx)
            .message(format!(
                "{} has no readinessProbe: it receives traffic before its model is loaded",
                cx.container.describe()
            ))
            .help(help)
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{findings_of, fired};

    const ID: &str = "gpu-readiness-probe-missing";

    #[test]
    fn help_names_the_known_servers_ready_endpoint() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert!(f.help.contains("/v2/health/ready"), "{}", f.help);
        assert!(f.message.contains("container \"triton\""), "{}", f.message);
    }

    #[test]
    fn kserves_injected_readiness_is_judged_as_a_port_check() {
        let isvc = include_str!(
            "../../resources/rules/gpu-readiness-probe-missing/silent-kserve-injected-port-check.yaml"
        );
        assert_eq!(
            fired(isvc, "readiness-port-open"),
            [(
                Some("kserve-container".into()),
                "/spec/predictor/model".into()
            )]
        );
    }

    #[test]
    fn a_gpu_sidecar_beside_a_ray_container_is_judged_as_any_serving_container() {
        let sidecar = include_str!(
            "../../resources/rules/gpu-readiness-probe-missing/fires-gpu-sidecar-beside-ray-worker.yaml"
        );
        assert_eq!(
            fired(sidecar, ID),
            [(
                Some("embed".into()),
                "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/1".into()
            )]
        );
    }
}
