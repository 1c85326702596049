//! `vllm-service-links`: a Service named `vllm` makes Kubernetes inject `VLLM_PORT` into vLLM
//! pods of its namespace, and vLLM reads it as its own setting.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::facts::{ObjectFacts, Role};
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "vllm-service-links",
    severity: Severity::Error,
    summary: "A Service named vllm injects VLLM_PORT into vLLM pods that keep enableServiceLinks on",
    rationale: "For every Service in a namespace, the kubelet injects Docker-link style variables into \
each pod that does not set enableServiceLinks: false: a Service named vllm gives VLLM_SERVICE_HOST and \
VLLM_PORT=tcp://10.0.0.1:8000. vLLM reads VLLM_PORT as its own setting (a port number for its internal \
communication) and exits when it finds a URL there, so the pod crash-loops the moment the Service \
exists: the failure the Gateway API Inference Extension's vLLM manifest guards against with \
enableServiceLinks: false. Only Services and pods in the same input are seen: the CLI over a repository \
sees them, the admission webhook (one object at a time) does not.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/vllm-service-links/bad.yaml"),
    good_example: include_str!("../../resources/rules/vllm-service-links/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::relations(&META, check);

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    for service in objects {
        let Role::ClashingService { name } = &service.role else {
            continue;
        };
        for workload in objects
            .iter()
            .filter(|o| o.object_ref.namespace == service.object_ref.namespace)
        {
            let Role::GpuServing {
                vllm_with_service_links,
                ..
            } = &workload.role
            else {
                continue;
            };
            for pod in vllm_with_service_links {
                report
                    .cross(workload)
                    .at(pod)
                    .message(format!(
                        "{}: the Service {name:?} in its namespace makes Kubernetes inject \
                         VLLM_PORT=tcp://… into these pods (enableServiceLinks defaults to \
                         true), and vLLM reads VLLM_PORT as its own setting and exits: the pod \
                         crash-loops",
                        workload.object_ref
                    ))
                    .help(format!(
                        "set enableServiceLinks: false at {pod} (or rename the Service)"
                    ))
                    .report();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "vllm-service-links";

    #[test]
    fn the_service_and_the_pod_in_one_namespace() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.object.kind, "Deployment");
        assert_eq!(f.pointer, "/spec/template/spec");
        assert!(f.help.contains("enableServiceLinks: false"), "{}", f.help);
    }
}
