//! `probe-port-undeclared`: a probe targets a port the container does not declare.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::analysis::object::ContainerPort;
use crate::model::finding::Severity;
use crate::model::probe::PortRef;

static META: RuleMeta = RuleMeta {
    id: "probe-port-undeclared",
    severity: Severity::Error,
    summary: "A probe targets a port the container does not declare",
    rationale: "A probe on a named port that the container does not declare can never succeed: the \
kubelet cannot resolve the name, the probe fails, and a startup or liveness probe then restarts the \
container forever. A probe on a UDP \
port can never be reached by an HTTP, TCP or gRPC check. A numeric port that matches no declared TCP \
containerPort usually means the server moved (a --port flag changed) and the probe did not: a warning, \
since declaring ports is optional.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/probe-port-undeclared/bad.yaml"),
    good_example: include_str!("../../resources/rules/probe-port-undeclared/good.yaml"),
    fix: None,
};

/// `http=8000/TCP, 9400/TCP`: the declared ports, as messages list them.
fn declared(ports: &[ContainerPort<'_>]) -> String {
    if ports.is_empty() {
        return "none".to_owned();
    }
    let listed: Vec<String> = ports
        .iter()
        .map(|p| match (p.name, p.number) {
            (Some(n), Some(num)) => format!("{n}={num}/{}", p.protocol),
            (None, Some(num)) => format!("{num}/{}", p.protocol),
            (Some(n), None) => n.to_owned(),
            (None, None) => "?".to_owned(),
        })
        .collect();
    listed.join(", ")
}

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        let ports = cx.container.ports();
        for probe in cx.container.probes() {
            let (Some(port), Some(field)) = (probe.handler.port(), probe.handler.field()) else {
                continue;
            };
            // Built only for a finding: most probes use a declared port.
            let pointer = || format!("{}/{field}/port", probe.pointer);
            match port {
                PortRef::Name(name) => {
                    let found = ports.iter().find(|p| p.name == Some(*name));
                    match found {
                        None => {
                            report
.container(&cx)
.at(pointer())
.message(format!(
                                    "{}: {}Probe uses port {name:?}, which is not a declared \
                                     containerPort name (declared: {})",
                                    cx.container.describe(),
                                    probe.kind.noun(),
                                    declared(ports)
                                ))
.help(format!("declare a containerPort named {name:?}, or use a declared name or number"))
.report();
                        }
                        Some(p) if !p.protocol.eq_ignore_ascii_case("TCP") => {
                            report
.container(&cx)
.at(pointer())
.message(format!(
                                    "{}: {}Probe uses port {name:?}, a {} port: {} probes cannot reach it",
                                    cx.container.describe(),
                                    probe.kind.noun(),
                                    p.protocol,
                                    probe.handler.kind()
                                ))
.help("probe a TCP port the server listens on")
.report();
                        }
                        Some(_) => {}
                    }
                }
                PortRef::Number(n) => {
                    let tcp_match = ports
                        .iter()
                        .any(|p| p.number == Some(*n) && p.protocol.eq_ignore_ascii_case("TCP"));
                    if !ports.is_empty() && !tcp_match {
                        report
                            .container(&cx)
                            .at(pointer())
                            .message(format!(
                                "{}: {}Probe uses port {n}, which matches no declared TCP \
                                     containerPort (declared: {})",
                                cx.container.describe(),
                                probe.kind.noun(),
                                declared(ports)
                            ))
                            .help("probe the port the server listens on, and declare it")
                            .severity(Severity::Warning)
                            .report();
                    }
                }
                // A port the apiserver refuses is pod-spec-invalid's, not "undeclared".
                PortRef::Invalid(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::rules::testing::lint;

    const ID: &str = "probe-port-undeclared";

    /// kube-linter's own fixtures: every `fire-*` container fires, no `dont-fire-*` does.
    #[test]
    fn agrees_with_kube_linter_port_fixtures() {
        for file in [
            "liveness-port.yml",
            "readiness-port.yml",
            "startup-port.yml",
        ] {
            let yaml = probelint_testkit::corpus::peer(&format!("kube-linter/{file}"));
            let objects = crate::rules::testing::objects(&yaml);
            let findings = crate::evaluate(&objects, &crate::Policy::default());
            let mut fire_seen = 0;
            for w in &crate::Analysis::new(&objects, &crate::Policy::default()).workloads {
                for pod in &w.pod_specs {
                    for c in &pod.containers {
                        let hits: Vec<_> = findings
                            .iter()
                            .filter(|f| {
                                f.rule == ID
                                    && f.object_index == w.index
                                    && f.pointer.starts_with(&format!("{}/", c.pointer))
                            })
                            .collect();
                        if c.name.starts_with("fire-") {
                            fire_seen += 1;
                            assert_eq!(
                                hits.len(),
                                1,
                                "{file}: {} should fire once: {hits:?}",
                                c.name
                            );
                        } else if c.name.starts_with("dont-fire-") {
                            assert!(
                                hits.is_empty(),
                                "{file}: {} should not fire: {hits:?}",
                                c.name
                            );
                        }
                    }
                }
            }
            assert!(fire_seen >= 3, "{file}: fixture has fire cases");
        }
    }

    #[test]
    fn undeclared_name_is_an_error_and_an_invalid_port_is_left_to_pod_spec_invalid() {
        let pod = include_str!(
            "../../resources/rules/probe-port-undeclared/fires-undeclared-port-name.yaml"
        );
        let f: Vec<_> = lint(pod).into_iter().filter(|f| f.rule == ID).collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!(
            f[0].pointer,
            "/spec/containers/0/readinessProbe/httpGet/port"
        );
        assert!(
            f[0].message.contains("declared: web=8080/TCP"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn numeric_mismatch_is_a_warning_and_no_declared_ports_is_silent() {
        let pod = include_str!(
            "../../resources/rules/probe-port-undeclared/fires-numeric-port-mismatch.yaml"
        );
        let f: Vec<_> = lint(pod).into_iter().filter(|f| f.rule == ID).collect();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(
            f[0].pointer,
            "/spec/containers/0/livenessProbe/tcpSocket/port"
        );
    }
}
