//! `pod-spec-invalid`: a pod spec, container, port or probe handler the apiserver refuses.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::{Analysis, ContainerContext};
use crate::analysis::object::{PodSpec, Workload};
use crate::model::apiserver::{self, PortKind, PortProblem, kind_of};
use crate::model::fields::{self, pick};
use crate::model::finding::Severity;
use crate::model::pointer;
use crate::model::probe::{PortRef, Probe, ProbeKind};
use crate::model::text::shown;
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "pod-spec-invalid",
    severity: Severity::Error,
    summary: "The apiserver would refuse this pod spec: containers, ports or probe handlers of the wrong shape",
    rationale: "The apiserver decodes a pod spec into typed fields and validates it before anything \
runs; a manifest it refuses never becomes a pod, and in a Helm chart or GitOps repo that surfaces only \
at deploy time, in the middle of a rollout. This rule reports what the apiserver refuses in the parts \
probelint reads, with the apiserver's own reason: `containers` or `initContainers` that is not a list \
(or, in a built-in workload, is null or empty), an item that is not a container; `ports` that is not a \
list, a containerPort that is missing or outside 1–65535, a port name that is not an IANA service name \
(1–15 lower-case letters, digits and '-', at least one letter, no '-' at either end or twice in a row), \
a duplicate port name, an unknown protocol; a probe that is not a map, with no handler or more than one, \
an exec probe without a command, an httpGet scheme other than HTTP or HTTPS, a bad header name, and a \
probe port that is neither a number from 1 to 65535 nor a valid name (port: \"8000\" in quotes is a \
name, and not a valid one: a name needs a letter; a gRPC port must be a number); probes on an init \
container without restartPolicy: Always; an extended resource (nvidia.com/gpu) requested without a limit, \
or with a request that is not its limit (ValidateResourceRequirements). Sources: kubernetes/kubernetes \
pkg/apis/core/validation/validation.go (validateContainers, validateContainerPorts, validateHandler, \
validateHTTPGetAction, ValidatePortNumOrName, validateInitContainers) and \
staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go (IsValidPortNum, IsValidPortName). \
Probe timing fields are probe-threshold-invalid's.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/pod-spec-invalid/bad.yaml"),
    good_example: include_str!("../../resources/rules/pod-spec-invalid/good.yaml"),
    fix: None,
};

/// Whether the apiserver lets a resource be overcommitted (requested below its limit, or without
/// one): the native resources (no domain, or a `kubernetes.io` one) but hugepages
/// (`IsOvercommitAllowed`, pkg/apis/core/helper/helpers.go). Extended resources such as
/// `nvidia.com/gpu` are not.
fn overcommit_allowed(resource: &str) -> bool {
    let native = match resource.split_once('/') {
        None => true,
        Some((domain, _)) => domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"),
    };
    native && !resource.starts_with("hugepages-")
}

/// The custom resources whose controllers create Pods from the template as written, resources
/// included (LeaderWorkerSet's, JobSet's, KubeRay's and Argo Rollouts' templates are core
/// `PodTemplateSpec`s): the apiserver refuses those Pods as it would refuse the template in a
/// Deployment. KServe and the NIM Operator build their containers (and may set limits), so they
/// are left out.
fn pods_copy_resources(workload: &Workload<'_>) -> bool {
    let at = &workload.object_ref;
    let group = at.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    matches!(
        (group, at.kind.as_str()),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
            | ("jobset.x-k8s.io", "JobSet")
            | ("ray.io", "RayCluster" | "RayService" | "RayJob")
            | ("argoproj.io", "Rollout")
    )
}

/// A quantity as a number, where it is a plain one (`1`, `"2"`): enough to compare GPU counts.
fn plain_quantity(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Requests of extended resources the apiserver refuses (`ValidateResourceRequirements`,
/// pkg/apis/core/validation/validation.go): one with no limit ("Limit must be set for non
/// overcommitable resources"), and one whose request differs from its limit ("must be equal to
/// … limit"). A limit alone is fine: the request defaults to it.
fn check_extended_resources(
    report: &mut Report<'_>,
    subject: &Subject<'_, '_>,
    container_ptr: &str,
    container: &Value,
) {
    let Some(resources) = fields::get(container, "resources") else {
        return;
    };
    let [requests, limits] = pick(resources, ["requests", "limits"]);
    let Some(requests) = requests.and_then(Value::as_object) else {
        return;
    };
    let limits = limits.and_then(Value::as_object);
    for (resource, requested) in requests {
        if overcommit_allowed(resource) {
            continue;
        }
        let at = pointer::join(
            &pointer::join(&pointer::join(container_ptr, "resources"), "requests"),
            resource,
        );
        match limits.and_then(|l| l.get(resource)) {
            None => subject.report(
                report,
                at,
                format!(
                    "requests {resource} without a limit: the apiserver refuses it (\"Limit must \
                     be set for non overcommitable resources\"), so the pod is never created"
                ),
                format!("set resources.limits.{resource} to the same quantity (a limit alone is enough: the request defaults to it)"),
            ),
            Some(limit) => {
                if let (Some(r), Some(l)) = (plain_quantity(requested), plain_quantity(limit))
                    && r != l
                {
                    subject.report(
                        report,
                        at,
                        format!(
                            "requests {resource}: {requested} but limits it to {limit}: the \
                             apiserver refuses an extended resource whose request is not its limit"
                        ),
                        format!("make resources.requests.{resource} equal to its limit, or drop it"),
                    );
                }
            }
        }
    }
}

/// `spec.template.spec.containers[1]`: a pointer as a field path, for messages.
fn dotted(ptr: &str) -> impl std::fmt::Display + '_ {
    shown(move |f| {
        // `ptr` is one the analysis built, so it parses.
        for (i, token) in pointer::tokens(ptr).into_iter().flatten().enumerate() {
            if token.parse::<usize>().is_ok() {
                write!(f, "[{token}]")?;
            } else {
                if i > 0 {
                    f.write_str(".")?;
                }
                f.write_str(&token)?;
            }
        }
        Ok(())
    })
}

/// The container a finding is about: an analysed one, or a plain init container.
enum Subject<'x, 'a> {
    Container(ContainerContext<'x, 'a>),
    Init {
        workload: &'x Workload<'a>,
        name: Option<&'a str>,
    },
}

impl Subject<'_, '_> {
    fn report(&self, report: &mut Report<'_>, ptr: String, what: String, help: String) {
        match self {
            Subject::Container(cx) => {
                let message = format!("{}: {what}", cx.container.describe());
                report
                    .container(cx)
                    .at(ptr)
                    .message(message)
                    .help(help)
                    .report();
            }
            Subject::Init { workload, name } => {
                let message = match name {
                    Some(n) => format!("init container {n:?}: {what}"),
                    None => format!("init container: {what}"),
                };
                report
                    .named_container(workload, *name)
                    .at(ptr)
                    .message(message)
                    .help(help)
                    .report();
            }
        }
    }
}

/// The list of `key` in the pod spec: reported when it is not a list (or, for `containers` in a
/// core PodSpec, null or empty); its items that are not maps too.
fn check_list(
    report: &mut Report<'_>,
    workload: &Workload<'_>,
    pod: &PodSpec<'_>,
    key: &str,
    found: Option<&Value>,
) {
    let Some(found) = found else {
        // A pod spec without containers may be a partial manifest (a kustomize patch, a template
        // a custom resource merges over its defaults): not judged.
        return;
    };
    let ptr = pointer::join(&pod.pointer, key);
    let required = key == "containers" && pod.core;
    match found {
        Value::Null | Value::Array(_) if required && found.as_array().is_none_or(Vec::is_empty) => {
            report
                .object(workload)
                .at(ptr.clone())
                .message(format!(
                    "{} is {}: the apiserver requires at least one container",
                    dotted(&ptr),
                    if found.is_null() { "null" } else { "empty" }
                ))
                .help("list the pod's containers (`- name: ...`, `image: ...`) under containers")
                .report();
        }
        Value::Null => {}
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if item.is_object() {
                    continue;
                }
                let item_ptr = pointer::join_index(&ptr, i);
                let what = if item.is_null() {
                    "is null: the apiserver reads a container with no name and no image, and refuses it"
                        .to_owned()
                } else {
                    format!(
                        "is {}, not a container (a map): the apiserver cannot decode this object",
                        kind_of(item)
                    )
                };
                report
                    .object(workload)
                    .at(item_ptr.clone())
                    .message(format!("{} {what}", dotted(&item_ptr)))
                    .help(format!(
                        "write each item of {key} as a map (`- name: ...`, `image: ...`)"
                    ))
                    .report();
            }
        }
        other => {
            report
                .object(workload)
                .at(ptr.clone())
                .message(format!(
                    "{} is {}, not a list of containers: the apiserver cannot decode this object",
                    dotted(&ptr),
                    kind_of(other)
                ))
                .help(format!(
                    "write {key} as a list: one `- name: ...` item per container"
                ))
                .report();
        }
    }
}

/// `ports`: a list of maps, each with a valid containerPort, name, protocol and hostPort, and no
/// name twice. `core`: a core PodSpec, which reaches the apiserver as written; in a custom
/// resource, what is missing (a containerPort, a probe's handler or port) may be the operator's
/// to fill, so only what is there is judged.
fn check_ports(
    report: &mut Report<'_>,
    subject: &Subject<'_, '_>,
    ptr: &str,
    ports: &Value,
    core: bool,
) {
    let ports_ptr = pointer::join(ptr, "ports");
    let items = match ports {
        Value::Null => return,
        Value::Array(items) => items,
        other => {
            subject.report(
                report,
                ports_ptr,
                format!(
                    "ports is {}, not a list: the apiserver cannot decode this object",
                    kind_of(other)
                ),
                "write ports as a list (`- containerPort: 8000`)".to_owned(),
            );
            return;
        }
    };
    let mut names: Vec<&str> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_ptr = pointer::join_index(&ports_ptr, i);
        if !item.is_object() {
            subject.report(
                report,
                item_ptr,
                format!(
                    "ports[{i}] is {}, not a port (a map): the apiserver cannot decode this object",
                    kind_of(item)
                ),
                "write each port as a map (`- containerPort: 8000`)".to_owned(),
            );
            continue;
        }
        let [number, name, protocol, host_port] =
            pick(item, ["containerPort", "name", "protocol", "hostPort"]);
        let field = |key: &str| pointer::join(&item_ptr, key);
        match apiserver::port(number, PortKind::Number) {
            Ok(_) => {}
            // Go decodes a missing port as 0: to an operator the two are the same.
            Err(PortProblem::Missing | PortProblem::OutOfRange(0)) if !core => {}
            Err(PortProblem::Missing | PortProblem::OutOfRange(0)) => subject.report(
                report,
                if number.is_some() {
                    field("containerPort")
                } else {
                    item_ptr.clone()
                },
                format!("ports[{i}].containerPort is missing: the apiserver requires it"),
                "set containerPort to the port the server listens on (1–65535)".to_owned(),
            ),
            Err(problem) => subject.report(
                report,
                field("containerPort"),
                format!("ports[{i}].containerPort {problem}"),
                match problem {
                    PortProblem::NameNotAllowed(_) => problem.help("containerPort"),
                    _ => "set containerPort to the port the server listens on (1–65535)".to_owned(),
                },
            ),
        }
        match name {
            None | Some(Value::Null) => {}
            Some(Value::String(n)) => {
                let errors = apiserver::port_name_errors(n);
                if !errors.is_empty() {
                    subject.report(
                        report,
                        field("name"),
                        format!("ports[{i}].name {}", PortProblem::BadName(n)),
                        "name the port with 1–15 lower-case letters, digits and '-' (e.g. http)"
                            .to_owned(),
                    );
                } else if names.contains(&n.as_str()) {
                    subject.report(
                        report,
                        field("name"),
                        format!(
                            "ports[{i}].name {n:?} is a duplicate: the apiserver requires unique port names"
                        ),
                        "give each declared port its own name".to_owned(),
                    );
                } else {
                    names.push(n);
                }
            }
            Some(other) => subject.report(
                report,
                field("name"),
                format!(
                    "ports[{i}].name is {}, not a string: the apiserver cannot decode this object",
                    kind_of(other)
                ),
                "quote the port name, or remove it".to_owned(),
            ),
        }
        match protocol {
            None | Some(Value::Null) => {}
            Some(Value::String(p)) if matches!(p.as_str(), "" | "TCP" | "UDP" | "SCTP") => {}
            Some(other) => subject.report(
                report,
                field("protocol"),
                format!(
                    "ports[{i}].protocol {other} is not supported: the apiserver accepts \"TCP\", \"UDP\" and \"SCTP\""
                ),
                "use protocol: TCP (the default), UDP or SCTP, in capitals".to_owned(),
            ),
        }
        // hostPort 0 (or absent) means none; anything else must be a port.
        if let Some(hp) = host_port.filter(|v| !v.is_null()) {
            match apiserver::port(Some(hp), PortKind::Number) {
                Ok(_) | Err(PortProblem::OutOfRange(0)) => {}
                Err(problem) => subject.report(
                    report,
                    field("hostPort"),
                    format!("ports[{i}].hostPort {problem}"),
                    "set hostPort to a port number (1–65535), or leave it out".to_owned(),
                ),
            }
        }
    }
}

/// A valid HTTP header name (`IsHTTPHeaderName`: `[-A-Za-z0-9]+`).
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The handler keys a probe may carry, in `validateHandler`'s order.
const HANDLERS: [&str; 4] = ["exec", "httpGet", "tcpSocket", "grpc"];

/// One probe of an analysed container: a map with exactly one handler, which must be a map with
/// what the apiserver requires of it (for `core`, see [`check_ports`]).
fn check_probe(report: &mut Report<'_>, subject: &Subject<'_, '_>, probe: &Probe<'_>, core: bool) {
    let (name, value, probe_ptr) = (probe.kind.field(), probe.value, probe.pointer.as_str());
    if !value.is_object() {
        subject.report(
            report,
            probe_ptr.to_owned(),
            format!(
                "{name} is {}, not a probe (a map): the apiserver cannot decode this object",
                kind_of(value)
            ),
            format!("write {name} as a map with one handler (httpGet, tcpSocket, grpc or exec)"),
        );
        return;
    }
    // The handlers set (present and not null), without allocating for the usual one.
    static NULL: Value = Value::Null;
    let mut set = [("", &NULL); HANDLERS.len()];
    let mut count = 0;
    for (key, found) in HANDLERS.into_iter().zip(pick(value, HANDLERS)) {
        if let Some(h) = found.filter(|h| !h.is_null()) {
            set[count] = (key, h);
            count += 1;
        }
    }
    let (key, h) = match &set[..count] {
        // KServe and LLMInferenceService merge a probe's handler from their defaults.
        [] if !core => return,
        [] => {
            subject.report(
                report,
                probe_ptr.to_owned(),
                format!("{name} has no handler: the apiserver requires one (must specify a handler type)"),
                format!("give {name} one of httpGet, tcpSocket, grpc or exec"),
            );
            return;
        }
        [one] => *one,
        [(first, _), rest @ ..] => {
            let others: Vec<&str> = rest.iter().map(|(k, _)| *k).collect();
            subject.report(
                report,
                pointer::join(probe_ptr, rest[0].0),
                format!(
                    "{name} sets {first} and {}: the apiserver refuses it (may not specify more than 1 handler type)",
                    others.join(" and ")
                ),
                format!("keep one handler in {name}"),
            );
            return;
        }
    };
    // Built only for a finding: most handlers are fine.
    let h_ptr = || pointer::join(probe_ptr, key);
    if !h.is_object() {
        subject.report(
            report,
            h_ptr(),
            format!(
                "{name}.{key} is {}, not a map: the apiserver cannot decode this object",
                kind_of(h)
            ),
            format!("write {name}.{key} as a map"),
        );
        return;
    }
    if key == "exec" {
        match fields::get(h, "command") {
            Some(Value::Array(items)) if !items.is_empty() => {}
            None | Some(Value::Null | Value::Array(_)) if !core => {}
            None | Some(Value::Null | Value::Array(_)) => subject.report(
                report,
                h_ptr(),
                format!("{name}.exec.command is empty: the apiserver requires a command"),
                format!("give {name}.exec.command the command to run, as a list"),
            ),
            Some(other) => subject.report(
                report,
                pointer::join(&h_ptr(), "command"),
                format!(
                    "{name}.exec.command is {}, not a list: the apiserver cannot decode this object",
                    kind_of(other)
                ),
                "write the command as a list of words (`command: [cat, /tmp/healthy]`)".to_owned(),
            ),
        }
        return;
    }
    if let Some(PortRef::Invalid(problem)) = probe.handler.port()
        && (core || !matches!(problem, PortProblem::Missing | PortProblem::OutOfRange(0)))
    {
        let port_ptr = match fields::get(h, "port") {
            Some(_) => pointer::join(&h_ptr(), "port"),
            None => h_ptr(),
        };
        subject.report(
            report,
            port_ptr,
            format!("{name}.{key}.port {problem}"),
            problem.help("port"),
        );
    }
    if key != "httpGet" {
        return;
    }
    let [scheme, headers] = pick(h, ["scheme", "httpHeaders"]);
    match scheme {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if matches!(s.as_str(), "" | "HTTP" | "HTTPS") => {}
        Some(other) => subject.report(
            report,
            pointer::join(&h_ptr(), "scheme"),
            format!(
                "{name}.httpGet.scheme {other} is not supported: the apiserver accepts \"HTTP\" and \"HTTPS\""
            ),
            "use scheme: HTTP (the default) or HTTPS, in capitals".to_owned(),
        ),
    }
    match headers {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, header) in items.iter().enumerate() {
                let header_name = fields::get(header, "name");
                if let Some(Value::String(n)) = header_name
                    && is_header_name(n)
                {
                    continue;
                }
                let ptr = pointer::join_index(&pointer::join(&h_ptr(), "httpHeaders"), i);
                let shown = match (header.is_object(), header_name) {
                    (false, _) => format!("is {}, not a header (a map)", kind_of(header)),
                    (true, Some(Value::String(n))) => format!(
                        "has the name {n:?}: a valid HTTP header must consist of alphanumeric characters or '-'"
                    ),
                    (true, Some(other)) => format!("has a name that is {}", kind_of(other)),
                    (true, None) => "has no name".to_owned(),
                };
                subject.report(
                    report,
                    ptr,
                    format!("{name}.httpGet.httpHeaders[{i}] {shown}: the apiserver refuses it"),
                    "give each header a name of letters, digits and '-', and a value".to_owned(),
                );
            }
        }
        Some(other) => subject.report(
            report,
            pointer::join(&h_ptr(), "httpHeaders"),
            format!(
                "{name}.httpGet.httpHeaders is {}, not a list: the apiserver cannot decode this object",
                kind_of(other)
            ),
            "write httpHeaders as a list (`- name: X-Probe`, `value: \"1\"`)".to_owned(),
        ),
    }
}

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for workload in &analysis.workloads {
        for (ptr, value, core) in &workload.malformed_pod_specs {
            // A custom resource's null template is dropped by its schema, not refused.
            if value.is_null() && !core {
                continue;
            }
            let what = if value.is_null() {
                "is null: the apiserver requires a pod spec with at least one container".to_owned()
            } else {
                format!(
                    "is {}, not a pod spec (a map): the apiserver cannot decode this object",
                    kind_of(value)
                )
            };
            report
                .object(workload)
                .at(ptr.clone())
                .message(format!("{} {what}", dotted(ptr)))
                .help("write the pod spec as a map with a containers list")
                .report();
        }
        for pod in &workload.pod_specs {
            let [containers, init] = pick(pod.value, ["containers", "initContainers"]);
            check_list(report, workload, pod, "containers", containers);
            check_list(report, workload, pod, "initContainers", init);
            for container in &pod.containers {
                let cx = ContainerContext {
                    workload,
                    pod,
                    container,
                };
                let subject = Subject::Container(cx);
                if let Some(ports) = fields::get(container.value, "ports") {
                    check_ports(report, &subject, &container.pointer, ports, pod.core);
                }
                for probe in container.probes() {
                    check_probe(report, &subject, probe, pod.core);
                }
                if pod.core || pods_copy_resources(workload) {
                    check_extended_resources(report, &subject, &container.pointer, container.value);
                }
            }
            // Plain init containers (native sidecars are among `pod.containers`).
            let Some(init) = init.and_then(Value::as_array) else {
                continue;
            };
            for (i, item) in init.iter().enumerate() {
                let [restart, name, ports, startup, readiness, liveness] = pick(
                    item,
                    [
                        "restartPolicy",
                        "name",
                        "ports",
                        ProbeKind::Startup.field(),
                        ProbeKind::Readiness.field(),
                        ProbeKind::Liveness.field(),
                    ],
                );
                if !item.is_object() || restart.and_then(Value::as_str) == Some("Always") {
                    continue;
                }
                let ptr = || pointer::join_index(&pointer::join(&pod.pointer, "initContainers"), i);
                let subject = Subject::Init {
                    workload,
                    name: name.and_then(Value::as_str),
                };
                if let Some(ports) = ports {
                    check_ports(report, &subject, &ptr(), ports, pod.core);
                }
                let probes = ProbeKind::ALL
                    .into_iter()
                    .zip([startup, readiness, liveness]);
                for (kind, _) in probes.filter(|(_, v)| v.is_some_and(|v| !v.is_null())) {
                    subject.report(
                        report,
                        pointer::join(&ptr(), kind.field()),
                        format!(
                            "{} may not be set for init containers without restartPolicy=Always: \
                             the apiserver refuses it",
                            kind.field()
                        ),
                        "remove the probe, or make the container a native sidecar with \
                         restartPolicy: Always"
                            .to_owned(),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{findings_of, fired};

    const ID: &str = "pod-spec-invalid";

    fn pod(containers: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:{containers}"
        )
    }

    fn messages(yaml: &str) -> Vec<(String, String)> {
        findings_of(yaml, ID)
            .into_iter()
            .map(|f| (f.pointer, f.message))
            .collect()
    }

    #[test]
    fn bad_example_reports_the_quoted_port_and_the_second_handler() {
        let got: Vec<_> = fired(super::META.bad_example, ID)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(
            got,
            [
                "/spec/template/spec/containers/0/readinessProbe/tcpSocket",
                "/spec/template/spec/containers/0/startupProbe/httpGet/port",
            ]
        );
    }

    #[test]
    fn containers_that_are_not_a_list_of_maps_are_reported() {
        for (containers, want) in [
            (
                " {vllm: {image: x}}\n",
                "is a map, not a list of containers",
            ),
            (" vllm\n", "is a string, not a list of containers"),
            (
                "\n",
                "is null: the apiserver requires at least one container",
            ),
            (
                " []\n",
                "is empty: the apiserver requires at least one container",
            ),
        ] {
            let got = messages(&pod(containers));
            assert_eq!(got.len(), 1, "{containers:?}: {got:?}");
            assert_eq!(got[0].0, "/spec/containers");
            assert!(got[0].1.starts_with("spec.containers "), "{}", got[0].1);
            assert!(got[0].1.contains(want), "{containers:?}: {}", got[0].1);
        }
        let got = messages(&pod(
            "\n    - vllm\n    - null\n    - 8\n    - {name: ok, image: x}\n",
        ));
        let pointers: Vec<_> = got.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/spec/containers/0",
                "/spec/containers/1",
                "/spec/containers/2"
            ]
        );
        assert!(
            got[0]
                .1
                .contains("spec.containers[0] is a string, not a container")
        );
        assert!(got[1].1.contains("is null"));
        assert!(got[2].1.contains("is a number"));
    }

    #[test]
    fn a_pod_spec_that_is_not_a_map_is_reported() {
        let d = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec: [a]\n";
        let got = messages(d);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "/spec/template/spec");
        assert!(
            got[0].1.contains("is a list, not a pod spec"),
            "{}",
            got[0].1
        );
        let null = d.replace("spec: [a]", "spec: null");
        assert!(messages(&null)[0].1.contains("is null"));
    }

    #[test]
    fn probe_ports_the_apiserver_refuses_are_invalid_with_its_reason() {
        for (port, want) in [
            ("true", "true is a boolean, not an integer"),
            ("8080.5", "8080.5 is not a whole number"),
            ("null", "is missing (the apiserver reads it as 0)"),
            ("0", "is 0: it must be between 1 and 65535, inclusive"),
            ("-1", "is -1: it must be between 1 and 65535, inclusive"),
            (
                "99999",
                "is 99999: it must be between 1 and 65535, inclusive",
            ),
            ("4294967297", "does not fit the field's type, int32"),
            (
                "\"8080\"",
                "not a valid port name: must contain at least one letter (a-z)",
            ),
            ("HTTP", "must contain only alpha-numeric characters"),
            ("a--b", "must not contain consecutive hyphens"),
            ("-web", "must not begin or end with a hyphen"),
            ("abcdefghijklmnop", "must be no more than 15 characters"),
        ] {
            let yaml = pod(&format!(
                "\n    - name: m\n      ports: [{{containerPort: 8080, name: web}}]\n      \
                 readinessProbe: {{httpGet: {{path: /h, port: {port}}}}}\n"
            ));
            let got = messages(&yaml);
            assert_eq!(got.len(), 1, "{port}: {got:?}");
            assert_eq!(got[0].0, "/spec/containers/0/readinessProbe/httpGet/port");
            assert!(
                got[0]
                    .1
                    .starts_with("container \"m\": readinessProbe.httpGet.port "),
                "{}",
                got[0].1
            );
            assert!(got[0].1.contains(want), "{port}: {}", got[0].1);
            // Invalid is not "undeclared": one finding, from this rule.
            assert!(fired(&yaml, "probe-port-undeclared").is_empty(), "{port}");
        }
    }

    #[test]
    fn a_missing_port_points_at_the_handler_and_a_quoted_number_says_how_to_fix_it() {
        let f = findings_of(
            &pod(
                "\n    - name: m\n      livenessProbe: {tcpSocket: {}}\n      readinessProbe: {httpGet: {path: /h, port: \"8000\"}}\n",
            ),
            ID,
        );
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].pointer, "/spec/containers/0/livenessProbe/tcpSocket");
        assert!(f[0].message.contains("is missing"), "{}", f[0].message);
        assert_eq!(
            f[1].help,
            "write the port as a number, without quotes (port: 8000)"
        );
    }

    #[test]
    fn grpc_ports_are_numbers_only() {
        let yaml = pod("\n    - name: m\n      livenessProbe: {grpc: {port: grpc}}\n");
        let got = messages(&yaml);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].1.contains("is an int32, so it cannot be a name"),
            "{}",
            got[0].1
        );
    }

    #[test]
    fn container_ports_are_validated_like_validate_container_ports() {
        let yaml = pod(
            "\n    - name: m\n      ports:\n        - {containerPort: true}\n        - {containerPort: 99999}\n        \
             - {protocol: TCP}\n        - {containerPort: 80, name: HTTP}\n        - {containerPort: 81, name: web}\n        \
             - {containerPort: 82, name: web}\n        - {containerPort: 83, protocol: tcp}\n        \
             - {containerPort: 84, hostPort: 70000}\n        - {containerPort: 85, hostPort: 0}\n        - 8080\n",
        );
        let got = messages(&yaml);
        let pointers: Vec<_> = got.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/spec/containers/0/ports/0/containerPort",
                "/spec/containers/0/ports/1/containerPort",
                "/spec/containers/0/ports/2",
                "/spec/containers/0/ports/3/name",
                "/spec/containers/0/ports/5/name",
                "/spec/containers/0/ports/6/protocol",
                "/spec/containers/0/ports/7/hostPort",
                "/spec/containers/0/ports/9",
            ],
            "{got:#?}"
        );
        assert!(
            got[0]
                .1
                .contains("ports[0].containerPort true is a boolean")
        );
        assert!(got[1].1.contains("must be between 1 and 65535"));
        assert!(
            got[2]
                .1
                .contains("ports[2].containerPort is missing: the apiserver requires it")
        );
        assert!(got[4].1.contains("\"web\" is a duplicate"));
        assert!(got[5].1.contains("\"tcp\" is not supported"));
        let ports_map = pod("\n    - name: m\n      ports: {http: 8000}\n");
        assert!(
            messages(&ports_map)[0]
                .1
                .contains("ports is a map, not a list")
        );
    }

    #[test]
    fn probe_shapes_the_apiserver_refuses() {
        for (probe, pointer, want) in [
            ("[]", "", "livenessProbe is a list, not a probe (a map)"),
            ("{periodSeconds: 5}", "", "has no handler"),
            (
                "{httpGet: {path: /h, port: 1}, exec: {command: [x]}}",
                "/httpGet",
                "sets exec and httpGet",
            ),
            (
                "{httpGet: /healthz}",
                "/httpGet",
                "livenessProbe.httpGet is a string, not a map",
            ),
            ("{exec: {}}", "/exec", "exec.command is empty"),
            ("{exec: {command: []}}", "/exec", "exec.command is empty"),
            (
                "{exec: {command: cat}}",
                "/exec/command",
                "is a string, not a list",
            ),
            (
                "{httpGet: {path: /h, port: 1, scheme: http}}",
                "/httpGet/scheme",
                "\"http\" is not supported",
            ),
            (
                "{httpGet: {path: /h, port: 1, httpHeaders: [{name: 'X Y', value: a}]}}",
                "/httpGet/httpHeaders/0",
                "a valid HTTP header",
            ),
        ] {
            let yaml = pod(&format!("\n    - name: m\n      livenessProbe: {probe}\n"));
            let got = messages(&yaml);
            assert_eq!(got.len(), 1, "{probe}: {got:?}");
            assert_eq!(
                got[0].0,
                format!("/spec/containers/0/livenessProbe{pointer}"),
                "{probe}"
            );
            assert!(got[0].1.contains(want), "{probe}: {}", got[0].1);
        }
    }

    #[test]
    fn init_containers_without_restart_always_may_not_have_probes() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n    \
                    - name: fetch\n      readinessProbe: {exec: {command: [x]}}\n    \
                    - name: proxy\n      restartPolicy: Always\n      readinessProbe: {exec: {command: [x]}}\n  \
                    containers:\n    - name: m\n";
        let f = findings_of(yaml, ID);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pointer, "/spec/initContainers/0/readinessProbe");
        assert_eq!(f[0].container.as_deref(), Some("fetch"));
        assert!(
            f[0].message
                .starts_with("init container \"fetch\": readinessProbe may not be set")
        );
    }
}
