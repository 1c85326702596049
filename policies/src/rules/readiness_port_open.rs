//! `readiness-port-open`: readiness is a tcpSocket check, which says nothing about a loaded model.

use super::{Report, Rule, RuleMeta};
use crate::engine::Analysis;
use crate::finding::Severity;
use crate::probe::{Handler, ProbeKind};

pub struct ReadinessPortOpen;

static META: RuleMeta = RuleMeta {
    id: "readiness-port-open",
    severity: Severity::Error,
    summary: "readinessProbe only checks that a port is open (tcpSocket)",
    rationale: "Many model servers bind their port before the weights are loaded (llama.cpp, KServe \
raw deployments, most Python servers), so a tcpSocket readiness check passes while the model cannot \
answer: requests routed there fail or hang for minutes. It also stays green when the server is wedged, \
out of GPU memory or overloaded. Readiness must ask the server whether it can infer: an HTTP (or gRPC) \
ready endpoint. Error on accelerator containers, warning elsewhere.",
    example_policy: None,
    bad_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-cpp
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: server
          image: ghcr.io/ggml-org/llama.cpp:server-cuda
          ports:
            - containerPort: 8080
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /health
              port: 8080
            failureThreshold: 15
          readinessProbe:
            tcpSocket:
              port: 8080
"#,
    good_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-cpp
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: server
          image: ghcr.io/ggml-org/llama.cpp:server-cuda
          ports:
            - containerPort: 8080
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /health
              port: 8080
            failureThreshold: 15
          readinessProbe:
            httpGet:
              path: /health
              port: 8080
"#,
    fix: Some(
        "When the image is a recognised model server, replaces the tcpSocket handler with an httpGet on \
that server's ready endpoint, on the port the container declares. Otherwise there is no automatic fix.",
    ),
};

impl Rule for ReadinessPortOpen {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check(&self, analysis: &Analysis<'_>, report: &mut Report<'_>) {
        for cx in analysis.containers() {
            let Some(probe) = cx.container.probe(ProbeKind::Readiness) else {
                continue;
            };
            let Handler::TcpSocket { port } = &probe.handler else {
                continue;
            };
            let help = match cx.container.server {
                Some(server) => format!(
                    "use httpGet {} on port {port}: {} answers it only when the model can serve",
                    server.ready_path, server.name
                ),
                None => {
                    "use an httpGet (or grpc) readiness check on an endpoint that answers 200 only \
                         once the model is loaded and can infer"
                        .to_owned()
                }
            };
            let finding = report.container(
                &cx,
                format!("{}/tcpSocket", probe.pointer),
                format!(
                    "{} uses tcpSocket readiness on port {port}: an open port does not mean the model \
                     is loaded",
                    cx.container.describe()
                ),
                help,
            );
            if !cx.container.is_accelerated() {
                finding.severity = Severity::Warning;
            }
            finding.fix = crate::fix::readiness_to_server_endpoint(&cx, probe);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::rules::testing::findings_of;

    const ID: &str = "readiness-port-open";

    #[test]
    fn error_on_gpu_containers_warning_elsewhere() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(
            f.pointer,
            "/spec/template/spec/containers/0/readinessProbe/tcpSocket"
        );
        assert!(
            f.help.contains("httpGet /health on port 8080"),
            "{}",
            f.help
        );
        let cpu = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n    - name: web\n      image: nginx\n      readinessProbe:\n        tcpSocket: {port: 80}\n";
        let f = &findings_of(cpu, ID)[0];
        assert_eq!(f.severity, Severity::Warning);
    }

    #[test]
    fn policy_severity_override_applies() {
        let policy =
            crate::Policy::with_user_yaml("rules:\n  readiness-port-open: info\n").unwrap();
        let f = crate::rules::testing::lint_with(super::META.bad_example, &policy);
        let f: Vec<_> = f.iter().filter(|f| f.rule == ID).collect();
        assert_eq!(f[0].severity, Severity::Info);
    }
}
