//! `gpu-serving-role-unknown`: an accelerator container of a serving pod shows neither that it
//! serves a model nor that it does not.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::analysis::object::Role;
use crate::analysis::serving::Serving;
use crate::model::annotations::ROLE_ANNOTATION;
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "gpu-serving-role-unknown",
    severity: Severity::Info,
    summary: "A GPU container shows neither that it serves a model nor that it does not",
    rationale: "An accelerator request makes a container a candidate for the model-serving rules, not a \
model server: a queue worker, a training loop kept alive by a Deployment, or an agent requests GPUs too, and \
needs no startupProbe or readinessProbe. probelint judges the model-load and readiness rules only with \
evidence that a container serves a model (a recognised server, a serving operator, a readiness or HTTP \
probe, a declared port), and stays quiet on counter-evidence (an idle shell, sshd, Jupyter, a stress tool, \
a pod that runs to completion). Where the manifest shows neither, this info says so once, so that the \
container can be judged: declare its port, or annotate its pod template with probelint.io/role: server, \
batch or interactive. Teams that want every accelerator container to carry a startupProbe whatever it runs \
set `startupProbe: {require: allAccelerated}` in the policy.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/gpu-serving-role-unknown/bad.yaml"),
    good_example: include_str!("../../resources/rules/gpu-serving-role-unknown/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        if !cx.pod.serving
            || cx.container.sidecar
            || cx.container.role != Role::Serving
            || cx.container.serving != Serving::Unknown
        {
            continue;
        }
        report
            .container(&cx)
            .message(format!(
                "{}: nothing shows whether it serves a model (no recognised server, serving \
                 operator, readiness or HTTP probe, or declared port) or not (an idle shell, a \
                 notebook, a stress tool): the model-serving rules do not judge it",
                cx.container.describe()
            ))
            .help(format!(
                "if it serves a model, declare its containerPort (or annotate the pod template \
                 {ROLE_ANNOTATION}: server) so that its probes are judged; otherwise annotate \
                 {ROLE_ANNOTATION}: batch or interactive"
            ))
            .report();
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{findings_of, fired};

    const ID: &str = "gpu-serving-role-unknown";

    #[test]
    fn one_info_names_what_would_make_it_judgeable() {
        let f = &findings_of(super::META.bad_example, ID);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].pointer, "/spec/template/spec/containers/0");
        assert!(
            f[0].help.contains("probelint.io/role: server"),
            "{}",
            f[0].help
        );
        // No model-serving verdict rests on a container nothing shows to serve.
        for rule in ["gpu-startup-probe-missing", "gpu-readiness-probe-missing"] {
            assert!(fired(super::META.bad_example, rule).is_empty(), "{rule}");
        }
    }

    #[test]
    fn declaring_the_role_makes_it_judged() {
        let server = super::META.bad_example.replace(
            "      labels: {app: embedder}\n    spec:",
            "      labels: {app: embedder}\n      annotations: {probelint.io/role: server}\n    spec:",
        );
        assert!(fired(&server, ID).is_empty());
        let f = &findings_of(&server, "gpu-startup-probe-missing")[0];
        assert_eq!(f.evidence.as_deref(), Some("probelint.io/role: server"));
        assert_eq!(fired(&server, "gpu-readiness-probe-missing").len(), 1);
    }

    #[test]
    fn strict_mode_does_not_let_a_role_annotation_silence_anything() {
        // probelint.io/role: batch silences the model-serving rules, so it is honoured only
        // where the policy honours annotation exemptions.
        let good = super::META.good_example;
        assert!(fired(good, ID).is_empty());
        let strict = crate::Policy::with_user_yaml("allowAnnotationExemptions: false\n").unwrap();
        let f = crate::rules::testing::lint_with(good, &strict);
        assert!(f.iter().any(|f| f.rule == ID), "{f:#?}");
    }

    #[test]
    fn a_declared_port_is_evidence_of_serving() {
        let port = super::META.bad_example.replace(
            "          command: [\"python\", \"/app/main.py\"]",
            "          command: [\"python\", \"/app/main.py\"]\n          ports: [{containerPort: 8080, name: http}]",
        );
        assert!(fired(&port, ID).is_empty());
        let f = &findings_of(&port, "gpu-readiness-probe-missing")[0];
        assert_eq!(
            f.evidence.as_deref(),
            Some("declares containerPort 8080 (http)")
        );
    }
}
