//! The report every format's tests render: hand-built, with a bit of everything: an error with
//! a fix, a warning, an info without container, suppressions from an annotation and from the
//! policy (without a reason), a custom rule in a file whose source is not at hand, an input
//! error and a skipped file.

use std::sync::Arc;

use probelint_policies::{
    Applicability, Finding, Fix, ObjectRef, Severity, Suppression, SuppressionSource,
};

use super::{Format, Options, render};
use crate::report::{InputError, LocatedFinding, Report, SkipKind, Skipped};

pub(super) const VLLM_YAML: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: ml
  annotations:
    probelint.io/ignore: liveness-restart-loop
    probelint.io/ignore-reason: "warm pool; see RUNBOOK-12"
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            limits:
              nvidia.com/gpu: 1
          livenessProbe:
            httpGet:
              path: /health
              port: 8000
          readinessProbe:
            tcpSocket:
              port: 8000
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: triton
spec:
  template:
    spec:
      containers:
        - name: triton
          image: nvcr.io/nvidia/tritonserver:24.08-py3
"#;

pub(super) fn object(kind: &str, namespace: Option<&str>, name: Option<&str>) -> ObjectRef {
    ObjectRef {
        api_version: if kind == "Pod" { "v1" } else { "apps/v1" }.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
    }
}

pub(super) struct At {
    file: &'static str,
    line: usize,
    column: usize,
}

pub(super) fn at(file: &'static str, line: usize, column: usize) -> At {
    At { file, line, column }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn finding(
    at: At,
    rule: &str,
    severity: Severity,
    object: ObjectRef,
    container: Option<&str>,
    pointer: &str,
    message: &str,
    help: &str,
) -> LocatedFinding {
    LocatedFinding {
        finding: Finding {
            rule: rule.to_owned().into(),
            severity,
            message: message.to_owned(),
            help: help.to_owned().into(),
            object: object.into(),
            object_index: 0,
            container: container.map(Into::into),
            pointer: pointer.to_owned(),
            suppressed: None,
            fix: None,
            load: None,
            evidence: None,
        },
        file: at.file.to_owned(),
        line: at.line,
        column: at.column,
    }
}

pub(super) fn suppressed(
    mut located: LocatedFinding,
    source: SuppressionSource,
    reason: &str,
) -> LocatedFinding {
    located.finding.suppressed = Some(Suppression {
        source,
        reason: reason.to_owned(),
    });
    located
}

pub(super) fn sample() -> Report {
    let vllm = || object("Deployment", Some("ml"), Some("vllm"));
    let triton = || object("StatefulSet", None, Some("triton"));
    let mut startup = finding(
        at("deploy/vllm.yaml", 18, 11),
        "gpu-startup-probe-missing",
        Severity::Error,
        vllm(),
        Some("vllm"),
        "/spec/template/spec/containers/0/livenessProbe",
        "GPU container `vllm` has a livenessProbe but no startupProbe",
        "add a startupProbe whose budget covers the model load (150 s)",
    );
    startup.finding.fix = Some(Fix {
        description: "add a startupProbe on /health with failureThreshold 15".to_owned(),
        applicability: Applicability::Safe,
        patch: Default::default(),
    });
    let mut report = Report {
        findings: vec![
            // Deliberately out of order: `sort` puts them right.
            finding(
                at("deploy/custom.yaml", 7, 18),
                "team-image-pinned",
                Severity::Error,
                object("Pod", None, None),
                Some("worker"),
                "/spec/containers/0/image",
                "image `worker:latest` is not pinned by digest",
                "pin images by digest (image@sha256:...)",
            ),
            finding(
                at("deploy/vllm.yaml", 23, 13),
                "readiness-port-open",
                Severity::Warning,
                vllm(),
                Some("vllm"),
                "/spec/template/spec/containers/0/readinessProbe/tcpSocket",
                "readinessProbe only checks that port 8000 is open",
                "use httpGet on vLLM's /health, port 8000",
            ),
            startup,
            suppressed(
                finding(
                    at("deploy/vllm.yaml", 18, 11),
                    "liveness-restart-loop",
                    Severity::Error,
                    vllm(),
                    Some("vllm"),
                    "/spec/template/spec/containers/0/livenessProbe",
                    "livenessProbe can kill `vllm` before its model is loaded",
                    "gate liveness behind a startupProbe",
                ),
                SuppressionSource::Annotation,
                "warm pool; see RUNBOOK-12",
            ),
            finding(
                at("deploy/vllm.yaml", 26, 1),
                "gpu-serving-without-pdb",
                Severity::Info,
                triton(),
                None,
                "",
                "no PodDisruptionBudget covers StatefulSet triton",
                "add a PodDisruptionBudget with maxUnavailable: 1",
            ),
            suppressed(
                finding(
                    at("deploy/vllm.yaml", 34, 11),
                    "readiness-timeout-too-short",
                    Severity::Warning,
                    triton(),
                    Some("triton"),
                    "/spec/template/spec/containers/0",
                    "readinessProbe timeout of 1 s is shorter than a busy inference",
                    "raise timeoutSeconds to at least 5",
                ),
                SuppressionSource::Policy,
                "",
            ),
        ],
        errors: vec![InputError {
            file: "broken.yaml".to_owned(),
            line: Some(3),
            column: Some(5),
            message: "did not find expected key while parsing a block mapping".to_owned(),
            stage: crate::report::Stage::Read,
        }],
        skipped: vec![Skipped {
            file: "charts/values.yaml".to_owned(),
            reason: "no Kubernetes objects (no apiVersion and kind)".to_owned(),
            kind: SkipKind::NotKubernetes,
        }],
        files: 4,
        objects: 5,
        sources: [("deploy/vllm.yaml".to_owned(), Arc::<str>::from(VLLM_YAML))].into(),
    };
    report.sort();
    report
}

pub(super) fn rendered(format: Format, report: &Report, options: Options) -> String {
    let mut out = Vec::new();
    render(format, report, &options, &mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("every format writes UTF-8")
}

pub(super) fn plain() -> Options {
    Options {
        color: false,
        verbose: false,
    }
}
