//! `probelint export`: the per-object rules that have a faithful CEL form, compiled to
//! ValidatingAdmissionPolicies and their bindings (`admissionregistration.k8s.io/v1`, GA since
//! Kubernetes 1.30), for clusters that want no webhook.
//!
//! Faithful means one way round: an exported expression fails only on a container the engine
//! reports with the same severity (a denial is always an engine error). Where the engine
//! decides on evidence CEL cannot read (a command line split as a shell does, the load estimate,
//! other objects), the expression narrows to the cases it can decide and lets the rest through:
//! the policies may say less than the engine, never more. [`coverage`] says, per rule, what is
//! exported and what is not, and why.
//!
//! Pure data: the documents are `serde_json::Value`s; the CLI writes them.

mod cel;
mod mutating;

pub use mutating::{FixCoverage, fix_coverage};

use crate::analysis::serving::counter_evidence_markers;
use crate::catalog;
use crate::model::annotations::{IGNORE_ANNOTATION, IGNORE_CONTAINER_PREFIX, ROLE_ANNOTATION};
use crate::model::finding::Severity;
use crate::model::servers::{DuringLoad, KNOWN_SERVERS};
use crate::policy::Policy;
use crate::rules::rule::Check;
use cel::quote;
use serde_json::{Value, json};

/// What an error finding does in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Errors deny the request (`validationActions: [Deny]`).
    Enforce,
    /// Nothing is denied: errors warn, as warnings do (`[Warn, Audit]`).
    Warn,
}

/// What the exported policies match besides the rules: the chart's scope.
#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    /// Usernames whose objects with a controller ownerReference are a controller's (added to
    /// the built-in controllers of kube-controller-manager), as the chart's
    /// `webhook.controllerServiceAccounts`.
    pub controller_users: Vec<String>,
    /// Namespaces the policies never judge.
    pub exclude_namespaces: Vec<String>,
    /// A namespace labelled `<label>=true` is not judged.
    pub namespace_opt_out_label: String,
    /// Which policies to write.
    pub documents: Documents,
}

/// Which admission policies [`documents`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Documents {
    /// The ValidatingAdmissionPolicies and the MutatingAdmissionPolicies.
    All,
    Validating,
    Mutating,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Enforce,
            controller_users: Vec::new(),
            exclude_namespaces: vec!["kube-system".to_owned(), "kube-node-lease".to_owned()],
            namespace_opt_out_label: IGNORE_ANNOTATION.to_owned(),
            documents: Documents::All,
        }
    }
}

/// The controllers of kube-controller-manager, whose objects are never judged (the webhook's
/// and the chart's list).
pub const BUILTIN_CONTROLLER_USERS: &[&str] = &[
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:deployment-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:serviceaccount:kube-system:daemon-set-controller",
    "system:serviceaccount:kube-system:job-controller",
    "system:serviceaccount:kube-system:cronjob-controller",
    "system:serviceaccount:kube-system:replication-controller",
    "system:kube-controller-manager",
];

/// Whether and how one rule is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub rule: &'static str,
    /// The policies it becomes (empty when it is not exported).
    pub policies: Vec<String>,
    /// What the export covers of the rule, or why it is not exported.
    pub note: String,
}

/// One exported part of a rule: one ValidatingAdmissionPolicy.
struct Part {
    name: String,
    rule: &'static str,
    severity: Severity,
    /// A CEL predicate over a container `c` that holds where the engine reports the finding.
    fails: String,
    /// The message after `container "<name>"`.
    message: &'static str,
}

const STARTUP: &str = "gpu-startup-probe-missing";
const PORT_OPEN: &str = "readiness-port-open";
const ENDPOINT: &str = "known-server-endpoint";
const ENDPOINT_SCOPE: &str = "exported as a warning for httpGet readiness on a path that is not \
the ready endpoint of a server recognised by its image run by its own entrypoint (no `command`, \
one server named); not for servers recognised by a command line, paths with a query string, the \
ready-endpoint caveats (Dynamo's status body, MLServer with no model) nor llama.cpp's unsettled \
default port";

const STARTUP_SCOPE: &str = "exported for the containers whose serving CEL can prove: an \
accelerator resource the policy lists, and either probelint.io/role: server or a recognised \
model server's image with the image's own entrypoint; not for containers the engine judges \
from other evidence (a readiness probe, a port, a command line), nor DRA claims, runtime \
classes or NVIDIA_VISIBLE_DEVICES. The error only where the liveness probe gives up before even \
the fast end of the server's own start (modelLoad.serverStartSeconds) and no load is declared; \
every other missing startupProbe is the warning (the engine's error that rests on the model's \
size is not CEL's to compute)";
const PORT_OPEN_SCOPE: &str = "exported for tcpSocket readiness on the same containers (error \
where the engine errs; warning on servers that open their port only once loaded, and on \
containers with no accelerator at all), and for an exec readiness that runs `curl URL` without \
--fail, directly or as a shell's -c script, with only options that take no value; not for \
other curl command lines (they need the command split as a shell does)";

/// Why a per-object rule is not exported.
fn not_exported(rule: &str) -> &'static str {
    match rule {
        "startup-budget-too-short"
        | "liveness-restart-loop"
        | "progress-deadline-too-short"
        | "startup-shorter-than-operator"
        | "readiness-timeout-too-short"
        | "lws-kill-recreates-group" => {
            "needs the load estimate (model size, weights source, server start-up) or the \
             operator's merged pod, which CEL cannot compute; the load annotation written in CI \
             would make the budget arithmetic exportable"
        }
        "probe-threshold-invalid" | "pod-spec-invalid" => {
            "the apiserver itself rejects these fields in a core pod spec before any admission \
             policy runs, so a policy could never fire"
        }
        "exec-probe-heavy" | "args-repeat-entrypoint" | "liveness-checks-readiness" => {
            "needs a command line split as a shell does, or the image's entrypoint"
        }
        "liveness-restarts-busy-server" => {
            "its fix is the probeHelper's exec probe, which the mutating webhook writes; a \
             policy could only deny, without the fix it needs"
        }
        "grpc-probe-unsupported" => {
            "depends on the cluster's version, which the apiserver enforces itself"
        }
        _ => {
            "needs the engine's serving evidence or the server table beyond what the exported \
             rules carry (not yet compiled to CEL)"
        }
    }
}

/// Every rule: whether it is exported under `policy`, and what of it or why not.
pub fn coverage(policy: &Policy) -> Vec<Coverage> {
    let parts = parts(policy);
    catalog::registry()
        .iter()
        .map(|rule| {
            let meta = rule.meta();
            let id = meta.id;
            let names: Vec<String> = parts
                .iter()
                .filter(|p| p.rule == id)
                .map(|p| p.name.clone())
                .collect();
            let note = if !names.is_empty() {
                match id {
                    STARTUP => STARTUP_SCOPE.to_owned(),
                    ENDPOINT => ENDPOINT_SCOPE.to_owned(),
                    _ => PORT_OPEN_SCOPE.to_owned(),
                }
            } else if matches!(rule.check(), Check::Relations(_)) {
                "cross-object: needs other objects (Services, PDBs, HPAs), which an admission \
                 policy does not see"
                    .to_owned()
            } else if matches!(id, STARTUP | PORT_OPEN | ENDPOINT) {
                skipped(policy, id).unwrap_or_default()
            } else {
                not_exported(id).to_owned()
            };
            Coverage {
                rule: id,
                policies: names,
                note,
            }
        })
        .collect()
}

/// Why an exportable rule is not exported under `policy`, if it is not.
fn skipped(policy: &Policy, rule: &str) -> Option<String> {
    let default = catalog::find(rule).map(|r| r.meta().severity)?;
    match policy.severity_for(rule, default) {
        None => Some("turned off in the policy".to_owned()),
        Some(Severity::Info) => {
            Some("info in the policy: the webhook neither denies nor warns on it".to_owned())
        }
        _ if policy.exemptions.iter().any(|e| e.covers_rule(rule)) => Some(
            "the policy's `exemptions:` name it, and the export does not carry exemptions \
             (namespace, name and owner globs); use a namespace opt-out label instead"
                .to_owned(),
        ),
        _ => None,
    }
}

/// The severity of a rule's warning part: a warning, unless the policy sets the rule's level,
/// which replaces every finding's severity (as the engine does).
fn warning_part(policy: &Policy, rule: &str, level: Severity) -> Severity {
    if policy.rule_levels.contains_key(rule) {
        level
    } else {
        Severity::Warning
    }
}

/// The exported parts of the rules, under `policy`.
fn parts(policy: &Policy) -> Vec<Part> {
    let c = Container::new(policy);
    let mut parts = Vec::new();
    let level = |rule: &str, default: Severity| -> Option<Severity> {
        if skipped(policy, rule).is_some() {
            return None;
        }
        // A policy level replaces every finding's severity (as the engine does).
        Some(match policy.rule_levels.get(rule) {
            Some(level) => level.severity().unwrap_or(default),
            None => default,
        })
    };
    if let Some(severity) = level(STARTUP, Severity::Error) {
        // The engine's error needs a liveness probe that can kill the load: any but an httpGet
        // on a path the container's server answers while it loads. The engine asks of the one
        // server it recognises; CEL of every server whose markers it finds, and so never says
        // more.
        let kills = format!(
            "(has(c.livenessProbe) && !(has(c.livenessProbe.httpGet) && \
             {SERVERS}.exists(s, s in {answered} && \
             c.livenessProbe.httpGet.?path.orValue('') in {answered}[s])))",
            answered = c.answered_during_load
        );
        let common = format!(
            "variables.servingPod && {} && !has(c.startupProbe) && {}",
            c.accelerated,
            c.not_ignored(STARTUP),
        );
        // The engine's error needs every start killed: a liveness that gives up before the fast
        // end of the load. CEL has no load estimate; it errs only where the liveness gives up
        // before even the fast end of the server's own start, which no load is shorter than,
        // and leaves every other kill a warning (the engine's error there rests on the model's
        // size, which `probelint annotate` can write as probelint.io/model-load-seconds).
        // A declared load replaces the server's start as the engine's fast end: not judged here.
        let kills = format!(
            "({kills} && !({load} in variables.templateAnnotations || {load} in variables.objectAnnotations) && {})",
            c.gives_up_before_start,
            load = quote(crate::model::annotations::LOAD_SECONDS_ANNOTATION),
        );
        parts.push(Part {
            name: format!("probelint.io-{STARTUP}"),
            rule: STARTUP,
            severity,
            fails: format!(
                "{common} && {}",
                bound(&format!("{} && {kills}", c.loads_model_at_start()))
            ),
            message: "requests an accelerator and has no startupProbe: its liveness probe runs \
                      from container start and gives up before even the server's own start \
                      ends, so it kills every start (add a startupProbe with a budget beyond the \
                      slowest plausible load; `probelint --fix` writes one)",
        });
        parts.push(Part {
            name: format!("probelint.io-{STARTUP}-warning"),
            rule: STARTUP,
            severity: warning_part(policy, STARTUP, severity),
            fails: format!(
                "{common} && {}",
                bound(&format!("{} && !{kills}", c.loads_model_at_start()))
            ),
            message: "requests an accelerator and has no startupProbe: its liveness probe, if \
                      any, runs from container start and kills a load that outlasts it, and \
                      without one nothing restarts a load that hangs (add a startupProbe with a \
                      budget beyond the slowest plausible load)",
        });
    }
    if let Some(severity) = level(PORT_OPEN, Severity::Error) {
        let tcp = "has(c.readinessProbe) && has(c.readinessProbe.tcpSocket)";
        let common = format!("{tcp} && {}", c.not_ignored(PORT_OPEN));
        parts.push(Part {
            name: format!("probelint.io-{PORT_OPEN}"),
            rule: PORT_OPEN,
            severity,
            fails: format!(
                "{common} && {} && {}",
                c.accelerated,
                bound(&format!(
                    "{} && {SERVERS}.all(s, !(s in {}))",
                    c.serves_model(),
                    cel::list(c.port_closed.iter().copied())
                ))
            ),
            message: "uses tcpSocket readiness: an open port does not mean the model is loaded \
                      (use an httpGet readiness check on the server's ready endpoint)",
        });
        parts.push(Part {
            name: format!("probelint.io-{PORT_OPEN}-warning"),
            rule: PORT_OPEN,
            severity: warning_part(policy, PORT_OPEN, severity),
            fails: format!(
                "{common} && {}",
                bound(&format!(
                    "{} && (({} && size({SERVERS}) > 0 && {SERVERS}.all(s, s in {})) || {})",
                    c.serves_model(),
                    c.accelerated,
                    cel::list(c.port_closed.iter().copied()),
                    c.no_accelerator_evidence(),
                ))
            ),
            message: "uses tcpSocket readiness: it holds traffic through the load only where \
                      the server opens its port once loaded, and never sees an engine that has \
                      died with the port open (use an httpGet readiness check)",
        });
        let curl = format!("{} && {}", curl_without_fail(), c.not_ignored(PORT_OPEN));
        parts.push(Part {
            name: format!("probelint.io-{PORT_OPEN}-curl"),
            rule: PORT_OPEN,
            severity,
            fails: format!(
                "{curl} && {} && {}",
                c.accelerated,
                bound(&c.serves_model())
            ),
            message: CURL_MESSAGE,
        });
        parts.push(Part {
            name: format!("probelint.io-{PORT_OPEN}-curl-warning"),
            rule: PORT_OPEN,
            severity: warning_part(policy, PORT_OPEN, severity),
            fails: format!(
                "{curl} && {} && {}",
                c.no_accelerator_evidence(),
                bound(&c.serves_model())
            ),
            message: CURL_MESSAGE,
        });
    }
    if let Some(severity) = level(ENDPOINT, Severity::Warning) {
        parts.push(Part {
            name: format!("probelint.io-{ENDPOINT}-warning"),
            rule: ENDPOINT,
            severity,
            fails: format!(
                "has(c.readinessProbe) && has(c.readinessProbe.httpGet) && {} && {}",
                c.not_ignored(ENDPOINT),
                bound(&format!(
                    "{} && {}",
                    c.server_by_image(),
                    not_ready_path("c.readinessProbe.httpGet.?path.orValue('/')")
                ))
            ),
            message: "checks readiness on a path that is not the ready endpoint of the model \
                      server its image runs: the pod can be Ready while the model cannot serve \
                      (`probelint explain known-server-endpoint` names each server's endpoint; \
                      `probelint --fix` writes it)",
        });
    }
    parts
}

/// CEL: `path` (an expression) is not a ready endpoint of the server `SERVERS[0]`, as
/// `KnownServer::is_ready_path` reads it; a path with a query string is set aside (CEL has no
/// split to strip it).
fn not_ready_path(path: &str) -> String {
    let table: Vec<String> = KNOWN_SERVERS
        .iter()
        .map(|s| {
            let paths: Vec<&str> = std::iter::once(s.ready_path)
                .chain(s.also_ready.iter().copied())
                .collect();
            format!("{}: {}", cel::quote(s.id), cel::list(paths.into_iter()))
        })
        .collect();
    format!(
        "[{path}].exists(p, !p.contains('?') && !(p in {{{table}}}[{SERVERS}[0]]) && \
         !({SERVERS}[0] == 'tf-serving' && p.startsWith('/v1/models/')) && \
         !({SERVERS}[0] in ['triton', 'kserve', 'mlserver'] && p.startsWith('/v2/models/') && p.endsWith('/ready')))",
        table = table.join(", ")
    )
}

const CURL_MESSAGE: &str = "checks readiness with curl without --fail: curl exits 0 on an HTTP \
                            503, so the probe only proves the port is open (add --fail, or use an \
                            httpGet probe on the same endpoint)";

/// Shells whose `-c` script an exec probe may run curl from.
const SHELLS: &[&str] = &["sh", "/bin/sh", "bash", "/bin/bash"];

/// curl options that take no value and do not make an error status fail curl (the engine's
/// `curl_call` reads each so: a test proves it). Any other option sets the probe aside.
const CURL_PLAIN_OPTIONS: &[&str] = &[
    "-s",
    "-S",
    "-sS",
    "-Ss",
    "--silent",
    "--show-error",
    "-k",
    "--insecure",
    "-v",
    "--verbose",
    "-L",
    "--location",
    "-i",
    "--include",
];

/// A predicate over a container `c` that holds where its readiness is an exec probe that the
/// engine reads as `curl URL` without `--fail` (`curl_call` in `rules::readiness_port_open`),
/// narrowed to the command lines CEL can split as the engine does: printable ASCII with no
/// quotes, pipes or separators (so splitting at spaces is the engine's `split_whitespace`),
/// exactly one curl, run directly or as a shell's `-c` script, followed only by
/// [`CURL_PLAIN_OPTIONS`] and one URL (a word with `:` or `/`).
fn curl_without_fail() -> String {
    let cmd = "c.readinessProbe.exec.command";
    let shell_words: Vec<&str> = SHELLS.iter().copied().chain(["-c"]).collect();
    let forbidden = ["\"", "'", "|", ";", "&", "http_code", "--write-out"];
    format!(
        "has(c.readinessProbe) && has(c.readinessProbe.exec) && has(c.readinessProbe.exec.command) \
         && {cmd}.all(a, a.matches('^[ -~]*$')) \
         && !{forbidden}.exists(x, {cmd}.join(' ').contains(x)) \
         && [{cmd}.join(' ').split(' ').filter(w, w != '')].exists(words, \
         [words.filter(w, w == 'curl' || w.endsWith('/curl'))].exists(curls, \
         size(curls) == 1 \
         && ((words[0] == curls[0] && !words.exists(w, w in {shell})) \
             || (size(words) > 2 && words[0] in {shells} && words[1] == '-c' && words[2] == curls[0] \
                 && size(words.filter(w, w in {shell})) == 2)) \
         && [words.filter(w, w != curls[0] && !(w in {shell}))].exists(after, \
         after.all(w, !w.startsWith('-') || w in {plain}) \
         && size(after.filter(w, !w.startsWith('-'))) == 1 \
         && after.exists(w, !w.startsWith('-') && (w.contains(':') || w.contains('/'))))))",
        forbidden = cel::list(forbidden),
        shell = cel::list(shell_words.iter().copied()),
        shells = cel::list(SHELLS.iter().copied()),
        plain = cel::list(CURL_PLAIN_OPTIONS.iter().copied()),
    )
}

/// The ValidatingAdmissionPolicies and the MutatingAdmissionPolicies, each followed by its
/// binding, in the order they are applied.
pub fn documents(policy: &Policy, options: &Options) -> Vec<Value> {
    let mut docs = Vec::new();
    if options.documents != Documents::Mutating {
        docs.extend(validating_documents(policy, options));
    }
    if options.documents != Documents::Validating {
        docs.extend(mutating::documents(policy, options));
    }
    docs
}

fn validating_documents(policy: &Policy, options: &Options) -> Vec<Value> {
    let parts = parts(policy);
    let mut docs = Vec::new();
    for part in &parts {
        docs.push(validating_policy(part, policy, options));
        docs.push(binding(&part.name, part.severity, options));
    }
    if !parts.is_empty() {
        docs.push(guard(policy, options));
        docs.push(binding(GUARD, Severity::Warning, options));
    }
    docs
}

/// The kinds whose pod template the policies read, and the operations judged on each. A Pod's
/// probes, and a Job's pod template, cannot change after creation: judging an UPDATE would refuse
/// a label change for what the object already runs. Jobs and CronJobs are batch to the engine:
/// gpu-startup-probe-missing never judges them, readiness-port-open does.
const RESOURCE_RULES: &[(&str, &[&str], &[&str])] = &[
    ("", &["pods"], &["CREATE"]),
    ("", &["replicationcontrollers"], &["CREATE", "UPDATE"]),
    (
        "apps",
        &["deployments", "statefulsets", "daemonsets", "replicasets"],
        &["CREATE", "UPDATE"],
    ),
    ("batch", &["jobs"], &["CREATE"]),
    ("batch", &["cronjobs"], &["CREATE", "UPDATE"]),
];

fn validating_policy(part: &Part, policy: &Policy, options: &Options) -> Value {
    // The containers that fail, once: the validation and its message read the variable, which
    // the apiserver evaluates at most once per request.
    let mut variables = variables();
    if let Some(list) = variables.as_array_mut() {
        list.push(json!({
            "name": "failing",
            "expression": format!("variables.containers.filter(c, {})", part.fails),
        }));
    }
    let bad = "variables.failing";
    policy_document(
        &part.name,
        json!({
            "probelint.io/rule": part.rule,
            "probelint.io/severity": part.severity.as_str(),
            "probelint.io/policy-version": policy.version,
        }),
        variables,
        json!({
            "expression": format!("size({bad}) == 0"),
            "messageExpression": format!(
                "'probelint {}: ' + {bad}.map(c, 'container ' + c.name).join(', ') + ' ' + {}",
                part.rule,
                quote(part.message)
            ),
            "reason": "Invalid",
        }),
        options,
    )
}

/// The name of the policy that warns where an object is too large for the others to judge.
pub const GUARD: &str = "probelint.io-too-large-to-judge";

/// The apiserver's cost limit for one CEL expression (`PerCallLimit` in
/// `k8s.io/apiserver/pkg/apis/cel/config.go`, 1.30 to 1.36).
pub const APISERVER_PER_CALL_LIMIT: u64 = 1_000_000;

/// The characters of image and command line that [`GUARD`] lets through, summed over the
/// containers it judges, each container counted [`GUARD_CHARS_PER_CONTAINER`] more.
///
/// The costly step of every exported expression is searching each container's image and command
/// line (`n` characters) for each marker `m` of the server table and the counter-evidence words:
/// CEL's `contains` costs `⌈n / 10⌉ × ⌈|m| / 10⌉` (cel-go `interpreter/runtimecost.go`), so a
/// container costs about `⌈n / 10⌉ × W`, where `W` ([`marker_weight`]) is the sum of
/// `⌈|m| / 10⌉` over all markers. Half the apiserver's per-expression limit, for the rest of the
/// expression and as a margin, allows `10 × (LIMIT / 2) / W` characters.
pub fn guard_chars() -> u64 {
    10 * (APISERVER_PER_CALL_LIMIT / 2) / marker_weight()
}

/// What one container adds to [`guard_chars`]'s count besides its characters: the per-marker
/// steps of a short text, which cost at least one unit each.
pub const GUARD_CHARS_PER_CONTAINER: u64 = 10;

/// `Σ ⌈|m| / 10⌉` over the markers an exported expression searches a container's text for.
pub fn marker_weight() -> u64 {
    let weight = |m: &str| m.len().div_ceil(10) as u64;
    KNOWN_SERVERS
        .iter()
        .flat_map(|s| s.markers())
        .chain(counter_evidence_markers())
        .chain(RAY_OR_WORKER.iter().copied())
        .map(weight)
        .sum()
}

/// The policy that warns (never denies) where an object is larger than [`guard_chars`]: the
/// others may then go over the apiserver's CEL cost budget, and `failurePolicy: Ignore` admits
/// the object with no verdict. Its own cost is one pass over the text.
fn guard(policy: &Policy, options: &Options) -> Value {
    let text = "variables.containers.map(c, c.?image.orValue('') + ' ' + (c.?command.orValue([]) + c.?args.orValue([])).join(' ')).join(' ')";
    let mut variables = variables();
    if let Some(list) = variables.as_array_mut() {
        list.retain(|v| v["name"] == "spec" || v["name"] == "containers");
        list.push(json!({
            "name": "size",
            "expression": format!("size({text}) + {GUARD_CHARS_PER_CONTAINER} * size(variables.containers)"),
        }));
    }
    policy_document(
        GUARD,
        json!({"probelint.io/policy-version": policy.version}),
        variables,
        json!({
            "expression": format!("variables.size <= {}", guard_chars()),
            "messageExpression": format!(
                "'probelint: ' + string(size(variables.containers)) + ' containers whose images and command lines count ' + string(variables.size) + {}",
                quote(&format!(
                    " characters, more than the {} that the probelint policies are sure to judge within the apiserver's CEL cost budget: past it they may not judge this object, and admit it unjudged (lint it with probelint in CI, or keep the webhook)",
                    guard_chars()
                ))
            ),
            "reason": "Invalid",
        }),
        options,
    )
}

/// A ValidatingAdmissionPolicy with the chart's scope.
fn policy_document(
    name: &str,
    annotations: Value,
    variables: Value,
    validation: Value,
    options: &Options,
) -> Value {
    let mut spec = scope(RESOURCE_RULES, options);
    spec["variables"] = variables;
    spec["validations"] = json!([validation]);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "probelint"},
            "annotations": annotations,
        },
        "spec": spec,
    })
}

/// The chart's scope as an admission policy's spec: the kinds and operations `rules` name, the
/// namespaces, and the controller exemption by who sent the object.
fn scope(rules: &[(&str, &[&str], &[&str])], options: &Options) -> Value {
    let mut users: Vec<String> = BUILTIN_CONTROLLER_USERS
        .iter()
        .map(|u| (*u).to_owned())
        .collect();
    for user in &options.controller_users {
        if !users.contains(user) {
            users.push(user.clone());
        }
    }
    let resource_rules: Vec<Value> = rules
        .iter()
        .map(|(group, resources, operations)| {
            json!({
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "resources": resources,
                "operations": operations,
            })
        })
        .collect();
    json!({
        // An object the expressions cannot read (a field of an unexpected type) is let
        // through, as the webhook's failurePolicy Ignore does: a policy's own error never
        // blocks a workload the engine would admit.
        "failurePolicy": "Ignore",
        "matchConstraints": {
            "resourceRules": resource_rules,
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": options.exclude_namespaces},
                    {"key": options.namespace_opt_out_label, "operator": "NotIn", "values": ["true"]},
                ],
            },
        },
        "matchConditions": [{
            "name": "not-created-by-a-controller",
            // Who sent it is the apiserver's word; an ownerReference alone claims nothing.
            "expression": format!(
                "!(request.userInfo.username in {} && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))",
                cel::list(users.iter().map(String::as_str))
            ),
        }],
    })
}

fn variables() -> Value {
    json!([
        {"name": "spec", "expression": "object.kind == 'Pod' ? object.spec : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : object.spec.template.spec"},
        // The engine reads a template's annotations first, then the object's; a Pod's are both
        // (a CronJob's jobTemplate has metadata of its own, which the engine does not read).
        {"name": "templateAnnotations", "expression": "object.kind == 'Pod' ? object.metadata.?annotations.orValue({}) : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.?metadata.?annotations.orValue({}) : object.spec.template.?metadata.?annotations.orValue({})"},
        {"name": "objectAnnotations", "expression": "object.metadata.?annotations.orValue({})"},
        {"name": "role", "expression": format!(
            "variables.templateAnnotations[?{r}].orValue(variables.objectAnnotations[?{r}].orValue('')).trim()",
            r = quote(ROLE_ANNOTATION)
        )},
        {"name": "hasRole", "expression": format!(
            "{r} in variables.templateAnnotations || {r} in variables.objectAnnotations",
            r = quote(ROLE_ANNOTATION)
        )},
        // Jobs and CronJobs are batch to the engine (`analysis::layout`), and so is a bare Pod
        // that runs to completion unless a container declares a port; CEL sets every such Pod
        // aside, ports or not.
        {"name": "servingPod", "expression": "!(object.kind in ['Job', 'CronJob']) && (object.kind != 'Pod' || !(variables.spec.?restartPolicy.orValue('Always') in ['Never', 'OnFailure']))"},
        // Native sidecars are containers the engine judges too.
        {"name": "containers", "expression": "variables.spec.containers + variables.spec.?initContainers.orValue([]).filter(c, c.?restartPolicy.orValue('') == 'Always')"},
        {"name": "servers", "expression": server_table()},
    ])
}

/// The known servers' identifying text, as a CEL map from id to lower-case fragments.
fn server_table() -> String {
    let entries: Vec<String> = KNOWN_SERVERS
        .iter()
        .map(|s| {
            let markers: Vec<String> = s.markers().map(str::to_ascii_lowercase).collect();
            format!(
                "{}: {}",
                quote(s.id),
                cel::list(markers.iter().map(String::as_str))
            )
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

fn binding(name: &str, severity: Severity, options: &Options) -> Value {
    let actions = match (severity, options.mode) {
        (Severity::Error, Mode::Enforce) => json!(["Deny"]),
        _ => json!(["Warn", "Audit"]),
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "probelint"},
        },
        "spec": {"policyName": name, "validationActions": actions},
    })
}

/// CEL predicates over one container `c` of `variables.containers`.
struct Container {
    /// It requests a non-zero quantity of an accelerator resource the policy lists.
    accelerated: String,
    /// `k` names an accelerator resource the policy lists.
    resource: String,
    /// The servers that open their port only once the model is loaded.
    port_closed: Vec<&'static str>,
    /// The servers that load their model at start whatever the command line says.
    loads_at_start: Vec<&'static str>,
    /// A CEL map from each known server to the paths it answers while its model loads (the
    /// servers that answer some).
    answered_during_load: String,
    /// Its liveness probe gives up before the fast end of the start of every server its text
    /// names (the policy's default start where it names none): it kills every start, whatever
    /// the model.
    gives_up_before_start: String,
    allow_annotation_exemptions: bool,
}

const IMAGE: &str = "c.?image.orValue('').lowerAscii()";
/// Text in a command line that makes the container a Ray node or a headless worker, which does
/// not serve from its start.
const RAY_OR_WORKER: &[&str] = &[
    "ray start",
    "--ray_address",
    "multi-node-serving.sh",
    "--headless",
];
/// The container's command line (`command` and `args` joined by spaces, lower-case), bound by
/// [`bound`].
const COMMAND: &str = "line";
/// The ids of the known servers its image or command line mentions, bound by [`bound`].
const SERVERS: &str = "servers";

/// `body`, with [`COMMAND`] and [`SERVERS`] computed once for the container `c`.
///
/// The apiserver's CEL has no `cel.bind` for admission policies (1.34), and it stops an
/// expression whose cost goes over its budget. Written inline, the command line is joined and
/// lower-cased once per marker of every known server, and the servers found again at every use:
/// 16 containers of 40 arguments went over it. A one-element list binds a value to a name at the
/// cost of one iteration: `[x].exists(n, p(n))` is `p(x)`, errors included. The image and the
/// command line are searched as one text, joined by a newline that no marker contains, so that
/// a marker is found in it exactly where it is found in one of them.
fn bound(body: &str) -> String {
    format!(
        "[(c.?command.orValue([]) + c.?args.orValue([])).join(' ').lowerAscii()].exists({COMMAND}, \
         [{IMAGE} + '\\n' + {COMMAND}].exists(text, \
         [variables.servers.filter(s, variables.servers[s].exists(m, text.contains(m)))].exists({SERVERS}, \
         {body})))"
    )
}

impl Container {
    fn new(policy: &Policy) -> Self {
        let resource = |k: &str| -> String {
            let alternatives: Vec<String> = policy
                .accelerator_resources
                .iter()
                .map(|p| cel::glob(k, p))
                .collect();
            format!("({})", alternatives.join(" || "))
        };
        let nonzero = |map: &str| {
            format!(
                "c.?resources.?{map}.orValue({{}}).exists(k, {} && string(c.resources.{map}[k]) != '0')",
                resource("k")
            )
        };
        Container {
            accelerated: format!("({} || {})", nonzero("limits"), nonzero("requests")),
            resource: resource("k"),
            answered_during_load: {
                let entries: Vec<String> = KNOWN_SERVERS
                    .iter()
                    .filter(|s| !s.paths_answered_during_load().is_empty())
                    .map(|s| {
                        format!(
                            "{}: {}",
                            cel::quote(s.id),
                            cel::list(s.paths_answered_during_load().iter().copied())
                        )
                    })
                    .collect();
                format!("{{{}}}", entries.join(", "))
            },
            port_closed: KNOWN_SERVERS
                .iter()
                .filter(|s| s.during_load == DuringLoad::PortClosed)
                .map(|s| s.id)
                .collect(),
            // Lazy servers load nothing at start; Triton and llama.cpp start empty with some
            // flags, which only a command line split as a shell does can tell.
            loads_at_start: KNOWN_SERVERS
                .iter()
                .filter(|s| {
                    s.during_load != DuringLoad::Lazy && !matches!(s.id, "triton" | "llama-cpp")
                })
                .map(|s| s.id)
                .collect(),
            gives_up_before_start: {
                // A liveness probe's F-th failure comes at delay + (F − 1) × period at the
                // earliest (`rules::support::kills_before`), with the kubelet's defaults; the
                // start's fast end rounded up, so that the comparison of integers is the engine's.
                let gives_up = "(int(c.livenessProbe.?initialDelaySeconds.orValue(0)) + \
                                (int(c.livenessProbe.?failureThreshold.orValue(3)) - 1) * \
                                int(c.livenessProbe.?periodSeconds.orValue(10)))";
                let fast =
                    |id: Option<&str>| policy.model_load.start_seconds(id).fast.ceil() as i64;
                let entries: Vec<String> = KNOWN_SERVERS
                    .iter()
                    .map(|s| format!("{}: {}", cel::quote(s.id), fast(Some(s.id))))
                    .collect();
                format!(
                    "(size({SERVERS}) == 0 ? {gives_up} < {default} : {SERVERS}.all(s, {gives_up} < {{{table}}}[s]))",
                    default = fast(None),
                    table = entries.join(", "),
                )
            },
            allow_annotation_exemptions: policy.allow_annotation_exemptions,
        }
    }

    /// The engine's serving evidence CEL can read: `probelint.io/role: server`, or a
    /// recognised server run by its image's own entrypoint with nothing in its arguments that
    /// could be counter-evidence. The server must be named by the image itself: a server's name
    /// in the arguments of another image is not the engine's evidence.
    fn serves_model(&self) -> String {
        let loads = cel::list(self.loads_at_start.iter().copied());
        let counter: Vec<&str> = counter_evidence_markers().collect();
        let declared = format!("(variables.role == 'server' && {SERVERS}.all(s, s in {loads}))");
        let by_image = format!(
            "(!variables.hasRole && size(c.?command.orValue([])) == 0 && size({SERVERS}) == 1 && {SERVERS}[0] in {loads} && variables.servers[{SERVERS}[0]].exists(m, {IMAGE}.contains(m)) && !{list}.exists(w, {COMMAND}.contains(w)))",
            list = cel::list(counter.iter().copied()),
        );
        format!("({declared} || {by_image})")
    }

    /// The engine recognises the server `SERVERS[0]` by the image: the image's own entrypoint
    /// (no `command`), and the text names one server only, whose markers the image carries.
    fn server_by_image(&self) -> String {
        let table: Vec<String> = KNOWN_SERVERS
            .iter()
            .map(|s| {
                let markers: Vec<String> = s.image_markers().map(str::to_ascii_lowercase).collect();
                format!(
                    "{}: {}",
                    cel::quote(s.id),
                    cel::list(markers.iter().map(String::as_str))
                )
            })
            .collect();
        // Only the image markers: a command marker found in an image name (llama.cpp's
        // `/server` in `example/server`) is not how the engine recognises a server.
        format!(
            "(size(c.?command.orValue([])) == 0 && size({SERVERS}) == 1 && \
             {{{}}}[{SERVERS}[0]].exists(m, {IMAGE}.contains(m)))",
            table.join(", ")
        )
    }

    /// [`Self::serves_model`], and the container serves from its start: no Ray node, no
    /// headless worker (`role` in `analysis::object`).
    fn loads_model_at_start(&self) -> String {
        format!(
            "{} && !{}.exists(w, {COMMAND}.contains(w))",
            self.serves_model(),
            cel::list(RAY_OR_WORKER.iter().copied())
        )
    }

    /// No `probelint.io/ignore` naming the rule on the template or the object (when the policy
    /// lets annotations exempt).
    fn not_ignored(&self, rule: &str) -> String {
        if !self.allow_annotation_exemptions {
            return "true".to_owned();
        }
        // Once per annotation map: a list of the two would mix a `dyn` (the ternary's) with a
        // map, which the apiserver's type check refuses.
        let lists = |a: &str| {
            format!(
                "[{}, {} + c.name].exists(k, k in {a} && {a}[k].split(',').exists(r, r.trim() == 'all' || r.trim() == {}))",
                quote(IGNORE_ANNOTATION),
                quote(IGNORE_CONTAINER_PREFIX),
                quote(rule)
            )
        };
        format!(
            "!({} || {})",
            lists("variables.templateAnnotations"),
            lists("variables.objectAnnotations")
        )
    }

    /// Nothing that makes the engine take it for an accelerator container: no accelerator
    /// resource, no DRA claim, no runtime class, no NVIDIA_VISIBLE_DEVICES.
    fn no_accelerator_evidence(&self) -> String {
        format!(
            "(!c.?resources.?limits.orValue({{}}).exists(k, {r}) && !c.?resources.?requests.orValue({{}}).exists(k, {r}) \
             && !c.?resources.?claims.hasValue() && !has(variables.spec.runtimeClassName) && !has(variables.spec.resourceClaims) \
             && !c.?env.orValue([]).exists(e, e.name == 'NVIDIA_VISIBLE_DEVICES'))",
            r = self.resource
        )
    }
}

#[cfg(test)]
mod tests;
