//! `readiness-port-open`: readiness is a tcpSocket check, which says nothing about a loaded model.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::{Analysis, ContainerContext};
use crate::model::finding::{Applicability, Severity};
use crate::model::probe::{Handler, ProbeKind};
use crate::model::servers::DuringLoad;

static META: RuleMeta = RuleMeta {
    id: "readiness-port-open",
    severity: Severity::Error,
    summary: "readinessProbe only checks that a port is open (tcpSocket, curl without --fail, or the port check an operator injects)",
    rationale: "Many model servers bind their port before the weights are loaded (llama.cpp, KServe \
raw deployments, most Python servers), so a tcpSocket readiness check passes while the model cannot \
answer: requests routed there fail or hang for minutes. It also stays green when the server is wedged, \
out of GPU memory or overloaded. Readiness must ask the server whether it can infer: an HTTP (or gRPC) \
ready endpoint. An exec probe that runs `curl` without `--fail` is the same check in disguise: curl \
exits 0 on an HTTP 503, so only a refused connection fails it (`wget` fails on an error status by \
default, and Python's urllib raises, so those are real checks). Where a container has no readiness of \
its own and its operator injects a port check (KServe raw deployments on the first containerPort, \
Knative's queue-proxy), the finding says so. A tcpSocket check, its own or injected, is a warning when \
the server is known to open its port only once the model is loaded (vLLM, TGI, TEI, trtllm-serve, \
Triton, each read in the server's source): it then holds traffic through the load, and misses only an \
engine that dies with the port open. Otherwise an error on accelerator containers, a warning \
elsewhere. An exec of `probelint-probe ready` (the `probeHelper` policy option) is not a port check: it \
reads the server's ready signal and, where that does not prove the model answers, a cached smoke \
inference.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/readiness-port-open/bad.yaml"),
    good_example: include_str!("../../resources/rules/readiness-port-open/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "When the image is a recognised model server, replaces the tcpSocket handler with an httpGet on \
that server's ready endpoint, on the port the container declares; with the `probeHelper` policy option, \
for vLLM, TGI, SGLang and Triton, with an exec of `probelint-probe ready` and the volumes that bring it. \
Otherwise there is no automatic fix.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        // "The model is not loaded" needs a model: on CPU services and sidecars this is a
        // generic smell, judged only where the policy asks for genericChecks.
        if !cx.container.gets_generic_checks(analysis.policy) {
            continue;
        }
        let Some(probe) = cx.container.probe(ProbeKind::Readiness) else {
            injected(&cx, report);
            continue;
        };
        let (port, at, what) = match &probe.handler {
            Handler::TcpSocket { port } => (
                port.to_string(),
                format!("{}/tcpSocket", probe.pointer),
                format!("uses tcpSocket readiness on port {port}"),
            ),
            // probelint-probe (`probeHelper`) asks the server's ready signal, and where that
            // does not prove the model answers, a smoke inference: not a port check.
            Handler::Exec { command } if crate::model::probe::is_probe_helper(command) => {
                continue;
            }
            Handler::Exec { command } => match curl_without_fail(command) {
                Some(url) => (
                    url.to_owned(),
                    format!("{}/exec", probe.pointer),
                    format!(
                        "checks readiness with `curl {url}` without --fail: curl exits 0 on an \
                         HTTP 503, so the probe only proves the port is open"
                    ),
                ),
                None => continue,
            },
            _ => continue,
        };
        let help = match (&probe.handler, cx.container.server) {
            (Handler::Exec { .. }, _) => {
                "add --fail (-f) to the curl command, so an error status fails the probe; or use \
                 an httpGet probe on the same endpoint"
                    .to_owned()
            }
            (_, Some(server)) if !server.paths_need_model_name => format!(
                "use httpGet {} on port {port}: {} answers it only when the model can serve",
                server.ready_path, server.name
            ),
            _ => "use an httpGet (or grpc) readiness check on an endpoint that answers 200 only \
                  once the model is loaded and can infer"
                .to_owned(),
        };
        // A server that opens its port only once the model is loaded (vLLM listens after its
        // engine is built, TGI's router after its shards) holds traffic through the load on a
        // port check: what such a check misses is an engine that dies with the port open.
        let binds_late =
            matches!(probe.handler, Handler::TcpSocket { .. }) && listens_once_loaded(&cx);
        let consequence = match cx.container.server {
            Some(server) if binds_late => format!(
                "{} opens its port only once the model is loaded, so this holds traffic through \
                 the load, but it never sees an engine that has died with the port open",
                server.name
            ),
            _ => "an open port does not mean the model is loaded".to_owned(),
        };
        let ceiling = if binds_late || !cx.container.is_accelerated() {
            Severity::Warning
        } else {
            Severity::Error
        };
        let fix = matches!(probe.handler, Handler::TcpSocket { .. })
            .then(|| crate::fix::probes::readiness_endpoint(&cx, probe, analysis.policy))
            .flatten();
        report
            .container(&cx)
            .at(at)
            .message(format!("{} {what}: {consequence}", cx.container.describe()))
            .help(help)
            .at_most(ceiling)
            .fix(fix)
            .report();
    }
}

/// Whether the container's server opens its port only once the model is loaded (the server
/// table's `PortClosed`: vLLM, TGI, TEI, trtllm-serve, Triton), so that a port check holds
/// traffic through the load.
fn listens_once_loaded(cx: &ContainerContext<'_, '_>) -> bool {
    cx.container
        .server
        .is_some_and(|s| s.during_load == DuringLoad::PortClosed)
}

/// A container without readiness of its own whose operator injects a port check (KServe's raw
/// deployments, Knative's queue-proxy): said as what the pod will run, not as "no readiness".
/// A warning where the server is known to open its port only once the model is loaded (the check
/// then holds traffic through the load, but never sees a dead engine), else the rule's severity.
fn injected(cx: &ContainerContext<'_, '_>, report: &mut Report<'_>) {
    let Some(operator) = &cx.container.operator else {
        return;
    };
    let Some(probe) = cx.container.operator_probe(ProbeKind::Readiness) else {
        return;
    };
    let Handler::TcpSocket { port } = &probe.handler else {
        return;
    };
    if !cx.pod.serving
        || cx.container.role != crate::analysis::object::Role::Serving
        || !cx.container.serves_model()
    {
        return;
    }
    let binds_late = listens_once_loaded(cx);
    let endpoint = match cx.container.server {
        Some(server) if !server.paths_need_model_name => {
            format!(
                "httpGet {} ({}'s ready endpoint)",
                server.ready_path, server.name
            )
        }
        _ => "an httpGet on an endpoint that answers 200 only once the model can infer".to_owned(),
    };
    let ceiling = if binds_late || !cx.container.is_accelerated() {
        Severity::Warning
    } else {
        Severity::Error
    };
    report
        .container(cx)
        .message(format!(
            "{} has no readinessProbe, so its readiness will be the port check {} injects \
             (tcpSocket on port {port}): it passes before the model loads unless the server binds \
             its port late{}",
            cx.container.describe(),
            operator.provenance(),
            if binds_late {
                ", as this one does, but it never sees an engine that has died"
            } else {
                ""
            }
        ))
        .help(format!(
            "add a readinessProbe: {endpoint}; the operator keeps a probe you set"
        ))
        .at_most(ceiling)
        .report();
}

/// The URL of a curl in an exec command that lacks `--fail` (curl then exits 0 on any HTTP
/// status). Not judged: a curl whose output a pipeline or a test reads (`| grep`, `-w
/// %{http_code}`), where the exit status is not curl's alone. `wget` fails on an error status by
/// default, and Python's urllib raises, so neither is a port check.
pub(crate) fn curl_without_fail(command: &[String]) -> Option<&str> {
    curl_call(command)
        .filter(|call| !call.fails_on_error)
        .map(|call| call.url)
}

/// The first `curl` of an exec command: the URL it asks for, and whether an error status fails
/// it (`--fail`, `-f`, `-sf`…). `None` where there is no curl, or a pipeline or a test reads its
/// output (the exit status is then not curl's alone).
pub(crate) struct CurlCall<'c> {
    pub url: &'c str,
    pub fails_on_error: bool,
}

pub(crate) fn curl_call(command: &[String]) -> Option<CurlCall<'_>> {
    let words: Vec<&str> = command.iter().flat_map(|a| a.split_whitespace()).collect();
    if words
        .iter()
        .any(|w| w.contains('|') || w.contains("http_code") || w.contains("--write-out"))
    {
        return None;
    }
    let start = words
        .iter()
        .position(|w| w.rsplit('/').next() == Some("curl"))?;
    // Options whose value is the next word (`-o /dev/null`), which is not the URL.
    const TAKES_VALUE: &[&str] = &[
        "-o",
        "-H",
        "-X",
        "-d",
        "-m",
        "-u",
        "-A",
        "-e",
        "--output",
        "--header",
        "--request",
        "--data",
        "--max-time",
        "--connect-timeout",
        "--user",
        "--retry",
        "--cacert",
        "--cert",
    ];
    let mut url = None;
    let mut fails_on_error = false;
    let mut skip = false;
    for word in &words[start + 1..] {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        if matches!(word, ";" | "&&" | "||") || word.ends_with(';') {
            break;
        }
        if std::mem::take(&mut skip) {
            continue;
        }
        if TAKES_VALUE.contains(&word) {
            skip = true;
            continue;
        }
        if word == "--fail" || word == "--fail-with-body" || word == "--fail-early" {
            fails_on_error = true;
        } else if let Some(short) = word.strip_prefix('-')
            && !short.starts_with('-')
            && short.contains('f')
        {
            fails_on_error = true;
        } else if url.is_none()
            && !word.starts_with('-')
            && (word.contains(':') || word.contains('/'))
        {
            url = Some(word);
        }
    }
    Some(CurlCall {
        url: url?,
        fails_on_error,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_port_check_on_a_server_that_listens_only_once_loaded_is_a_warning() {
        let yaml = include_str!(
            "../../resources/rules/readiness-port-open/fires-vllm-port-check-is-a-warning.yaml"
        );
        let f = &crate::rules::testing::findings_of(yaml, "readiness-port-open")[0];
        assert_eq!(f.severity, crate::Severity::Warning, "{}", f.message);
        assert!(
            f.message
                .contains("vLLM opens its port only once the model is loaded"),
            "{}",
            f.message
        );
        assert!(
            f.fix.is_some(),
            "the ready endpoint is still the better check"
        );
    }

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
        // On a CPU container that loads no model it is a generic smell: judged (as a warning)
        // only where the policy asks for genericChecks.
        let cpu = include_str!(
            "../../resources/rules/readiness-port-open/silent-cpu-container-port-check.yaml"
        );
        assert!(findings_of(cpu, ID).is_empty());
        let generic = crate::Policy::with_user_yaml("genericChecks: true\n").unwrap();
        let f = crate::rules::testing::lint_with(cpu, &generic)
            .into_iter()
            .find(|f| f.rule == ID)
            .expect("judged with genericChecks");
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
