//! Fixes: the JSON Patch operations that make a finding go away. The webhook's mutation and the
//! CLI's `--fix` both come from here, so what a cluster injects is what a developer sees.
//!
//! A fix never invents an endpoint: it reuses a check the container already has, or the real
//! endpoint of a recognised model server ([`crate::servers`]). When neither exists there is no
//! fix, and the finding stays with its help text.

use crate::engine::ContainerContext;
use crate::fields::pick;
use crate::finding::{Applicability, Finding, Fix};
use crate::pointer;
use crate::policy::Policy;
use crate::probe::{Handler, PortRef, Probe, ProbeKind};
use crate::servers::KnownServer;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Map, Value, json};

/// Annotation the webhook writes on a mutated object: `rule:container` pairs, comma-separated.
pub const MUTATED_ANNOTATION: &str = "probelint.io/mutated";

/// Period of the startup probes fixes add.
pub const STARTUP_PERIOD_SECONDS: i64 = 10;
/// Timeout given to a readiness probe that runs a generation.
pub const GENERATION_TIMEOUT_SECONDS: i64 = 10;
/// failureThreshold given to a readiness probe that runs a generation with a threshold of 1: a
/// generation must fail three times in a row to take the replica out of rotation.
pub const GENERATION_FAILURE_THRESHOLD: i64 = 3;

/// One fix that was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedFix {
    pub rule: String,
    pub container: Option<String>,
    pub description: String,
}

/// The result of mutating one object.
#[derive(Debug, Clone)]
pub struct Mutation {
    /// RFC 6902 operations against the original object; empty when nothing was fixed.
    pub patch: json_patch::Patch,
    /// What the patch fixes.
    pub applied: Vec<AppliedFix>,
    /// The findings of the original object (fixed ones included).
    pub findings: Vec<Finding>,
}

/// Computes the safe fixes for one object: every unsuppressed finding's fix, merged into one
/// patch against the original object. Two findings fixed by the same operation (a startupProbe
/// fixes both `gpu-startup-probe-missing` and `liveness-restart-loop`) share it.
pub fn mutate(object: &Value, policy: &Policy) -> Mutation {
    let findings = crate::evaluate_one(object, policy);
    let (patch, applied) = merge_fixes(&findings, Applicability::Safe);
    Mutation {
        patch,
        applied,
        findings,
    }
}

/// Merges the fixes of `findings` at or above `at_least` into one patch. Later operations on a
/// path an earlier fix already wrote are dropped, so the patch stays valid and minimal.
pub fn merge_fixes(
    findings: &[Finding],
    at_least: Applicability,
) -> (json_patch::Patch, Vec<AppliedFix>) {
    let mut ops: Vec<PatchOperation> = Vec::new();
    // The paths written so far, each with the indices of its operations: the clash test below
    // is a few lookups instead of a scan of every earlier operation (an object with thousands
    // of containers has tens of thousands of operations; the scan made `/mutate` quadratic).
    let mut written: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    let mut applied = Vec::new();
    for finding in findings {
        let Some(fix) = &finding.fix else { continue };
        if finding.is_suppressed() || fix.applicability < at_least {
            continue;
        }
        let mut used = false;
        for op in &fix.patch.0 {
            let path = op.path().to_string();
            // Clash: the same path, an earlier path above this one, or one below it.
            let above = path
                .match_indices('/')
                .any(|(i, _)| written.contains_key(&path[..i]));
            let below = written
                .range(format!("{path}/")..)
                .next()
                .is_some_and(|(p, _)| p.starts_with(&format!("{path}/")));
            let same = written.get(&path);
            if same.is_none() && !above && !below {
                written.entry(path).or_default().push(ops.len());
                ops.push(op.clone());
                used = true;
            } else if same.is_some_and(|indices| indices.iter().any(|&i| ops[i] == *op)) {
                used = true;
            }
        }
        if used || fix.patch.0.is_empty() {
            applied.push(AppliedFix {
                rule: finding.rule.clone(),
                container: finding.container.clone(),
                description: fix.description.clone(),
            });
        }
    }
    (json_patch::Patch(ops), applied)
}

/// What the mutating webhook sends for one object: [`mutation_patch`]'s answer.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationPatch {
    /// RFC 6902 operations against the original object; empty when nothing changes.
    pub patch: Patch,
    /// The object's probelint annotations copied into its pod templates
    /// ([`crate::reach::propagation`]), so that its Pods carry them.
    pub propagated: Vec<String>,
}

/// The engine's `patch`, plus the operations that record the `applied` fixes in the
/// `probelint.io/mutated` annotation and copy the object's probelint annotations into its pod
/// templates. Fails when `patch` does not apply to `object` (which it consumes: the object is
/// patched in place to see where the annotations go).
pub fn mutation_patch(
    mut object: Value,
    patch: Patch,
    applied: &[AppliedFix],
    policy: &Policy,
) -> Result<MutationPatch, json_patch::PatchError> {
    json_patch::patch(&mut object, &patch)?;
    let mut ops = patch.0;
    // Both against the patched object: one writes the object's metadata, the other the metadata
    // of its templates, so neither moves what the other addresses.
    let propagation = crate::reach::propagation(&object, policy);
    ops.extend(annotation_ops(&object, applied));
    ops.extend(propagation.ops);
    Ok(MutationPatch {
        patch: Patch(ops),
        propagated: propagation.keys,
    })
}

/// Operations that set `probelint.io/mutated` to the comma-separated `rule:container` pairs of
/// `applied` (plus those an earlier mutation recorded), against `patched`: the object after the
/// engine's own operations.
///
/// RFC 6902 `add` needs the parent to exist: adding `/metadata/annotations/probelint.io~1mutated`
/// to an object without annotations fails the whole patch, so then the map is added whole.
pub fn annotation_ops(patched: &Value, applied: &[AppliedFix]) -> Vec<PatchOperation> {
    let annotations = patched.pointer("/metadata/annotations");
    let mut entries: Vec<String> = annotations
        .and_then(|a| a.get(MUTATED_ANNOTATION))
        .and_then(Value::as_str)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // A set beside the list: an object with thousands of containers has thousands of entries.
    let mut seen: std::collections::HashSet<String> = entries.iter().cloned().collect();
    let recorded = entries.len();
    for fix in applied {
        let entry = match &fix.container {
            Some(container) => format!("{}:{container}", fix.rule),
            None => fix.rule.clone(),
        };
        if seen.insert(entry.clone()) {
            entries.push(entry);
        }
    }
    // Nothing new to record: rewriting the annotation with the value it has would make a patch
    // of an object that needs none.
    if entries.len() == recorded {
        return Vec::new();
    }
    let value = Value::String(entries.join(","));
    vec![add_to_map(
        patched,
        &["metadata", "annotations"],
        MUTATED_ANNOTATION,
        value,
    )]
}

/// An `add` of `key: value` into the map at `tokens` (unescaped pointer tokens), creating the
/// map and its missing parents: RFC 6902 `add` needs the parent to exist, so the operation
/// writes at the deepest map that exists and nests the rest (a map that is `null` or not a map
/// is replaced).
pub(crate) fn add_to_map(
    object: &Value,
    tokens: &[&str],
    key: &str,
    value: Value,
) -> PatchOperation {
    let mut node = object;
    let mut existing = 0;
    for token in tokens {
        match node.get(token) {
            Some(child) if child.is_object() => {
                node = child;
                existing += 1;
            }
            _ => break,
        }
    }
    let (path, value) = if existing == tokens.len() {
        (
            tokens.iter().copied().chain([key]).collect::<Vec<_>>(),
            value,
        )
    } else {
        let nested = tokens[existing + 1..].iter().rev().fold(
            json!({ key: value }),
            |inner, token| json!({ *token: inner }),
        );
        (tokens[..=existing].to_vec(), nested)
    };
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(path),
        value,
    })
}

fn path(p: impl Into<String>) -> json_patch::jsonptr::PointerBuf {
    // Pointers here are built by `crate::pointer`, so they always parse; an unparsable one
    // degrades to the root, which `merge_fixes` treats as clashing with everything. (A `String`
    // becomes the pointer as it is, without a copy.)
    json_patch::jsonptr::PointerBuf::parse(p).unwrap_or_default()
}

pub(crate) fn add(p: impl Into<String>, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: path(p),
        value,
    })
}

pub(crate) fn replace(p: impl Into<String>, value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: path(p),
        value,
    })
}

pub(crate) fn remove(p: impl Into<String>) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation { path: path(p) })
}

fn safe(description: String, ops: Vec<PatchOperation>) -> Fix {
    Fix {
        description,
        applicability: Applicability::Safe,
        patch: json_patch::Patch(ops),
    }
}

/// The port a recognised server listens on in this container: the port its own flag or
/// environment variable sets ([`KnownServer::explicit_port`]), else the declared containerPort
/// that is the server's default (by number) or the only TCP port, else the server's default.
fn server_port(cx: &ContainerContext<'_, '_>, server: &KnownServer) -> Value {
    if let Some(port) = server.explicit_port(cx.container.value) {
        return json!(port);
    }
    let tcp: Vec<_> = cx
        .container
        .ports()
        .iter()
        .filter(|p| p.protocol.eq_ignore_ascii_case("TCP") && p.number.is_some())
        .collect();
    if let Some(p) = tcp
        .iter()
        .find(|p| p.number == Some(i64::from(server.default_port)))
    {
        return p
            .name
            .as_ref()
            .map_or_else(|| json!(p.number), |n| json!(n));
    }
    if let [only] = tcp.as_slice() {
        return only
            .name
            .as_ref()
            .map_or_else(|| json!(only.number), |n| json!(n));
    }
    json!(server.default_port)
}

/// Where a new startupProbe's check comes from, as the fix's description names it.
enum CheckSource<'p, 'a> {
    /// `the liveness check (httpGet /health on port 8000)`
    Probe(&'p Probe<'a>),
    /// `vLLM's /health`
    Server(&'static KnownServer),
}

impl std::fmt::Display for CheckSource<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckSource::Probe(probe) => write!(
                f,
                "the {} check ({})",
                probe.kind.noun(),
                probe.handler.describe()
            ),
            CheckSource::Server(server) => write!(f, "{}'s {}", server.name, server.live_path),
        }
    }
}

/// The handler a new startupProbe should use: the liveness check, else the readiness check
/// (unless it only opens a port and the server has a real health endpoint), else the known
/// server's liveness endpoint. `None` when nothing is known to be served.
fn startup_handler<'p, 'a>(
    cx: &ContainerContext<'p, 'a>,
) -> Option<(Map<String, Value>, Option<Value>, CheckSource<'p, 'a>)> {
    // A check the apiserver refuses (no handler, a bad port) is not worth copying.
    let usable = |probe: &Probe<'_>| {
        !matches!(probe.handler, Handler::Invalid)
            && !matches!(probe.handler.port(), Some(PortRef::Invalid(_)))
    };
    // A recognised server whose endpoint this container is known to serve.
    let server = cx
        .container
        .server
        .filter(|s| s.is_served_by(cx.container.value) && !s.paths_need_model_name);
    // An exec check that forks nvidia-smi or Python on every run is not worth copying when the
    // server has a real health endpoint.
    let heavy = |probe: &Probe<'_>| {
        matches!(&probe.handler, Handler::Exec { command } if crate::rules::is_heavy_exec(command))
            && server.is_some()
    };
    let copy = |probe: &'p Probe<'a>| {
        let field = probe.handler.field()?;
        let [check, timeout] = pick(probe.value, [field, "timeoutSeconds"]);
        // Room for the fields `add_startup_probe` adds, so the map is allocated once.
        let mut handler = Map::with_capacity(4);
        handler.insert(field.to_owned(), check?.clone());
        Some((handler, timeout.cloned(), CheckSource::Probe(probe)))
    };
    if let Some(live) = cx
        .container
        .probe(ProbeKind::Liveness)
        .filter(|p| usable(p) && !heavy(p))
    {
        return copy(live);
    }
    let readiness = cx
        .container
        .probe(ProbeKind::Readiness)
        .filter(|p| usable(p) && !heavy(p));
    if let Some(ready) = readiness
        && !(matches!(ready.handler, Handler::TcpSocket { .. }) && server.is_some())
    {
        return copy(ready);
    }
    let server = server?;
    let mut handler = Map::with_capacity(4);
    handler.insert(
        "httpGet".to_owned(),
        json!({"path": server.live_path, "port": server_port(cx, server)}),
    );
    // SGLang's /health runs a generation by default: a 1 s timeout fails it under load.
    let timeout = server
        .live_runs_generation
        .then(|| json!(GENERATION_TIMEOUT_SECONDS));
    Some((handler, timeout, CheckSource::Server(server)))
}

/// Adds a startupProbe whose budget covers the model load plus margin.
///
/// Two rules offer this fix for one container: gpu-startup-probe-missing, and
/// liveness-restart-loop when the container has a liveness probe. A GPU container without a
/// startupProbe whose liveness budget is short (the classic mistake) gets both findings, so the
/// first to ask builds the fix and, when the container has a liveness probe, leaves a copy for
/// the second: a copy costs about a third of a build.
pub(crate) fn add_startup_probe(cx: &ContainerContext<'_, '_>, policy: &Policy) -> Option<Fix> {
    if let Some(spare) = cx.container.spare_startup_probe_fix.take() {
        return Some(spare);
    }
    let fix = build_startup_probe(cx, policy)?;
    if cx.container.probe(ProbeKind::Liveness).is_some() {
        *cx.container.spare_startup_probe_fix.borrow_mut() = Some(fix.clone());
    }
    Some(fix)
}

/// The budget of a startupProbe that a fix adds, and the bound that set it.
///
/// **The invariant every added startupProbe keeps:** a fix never shortens a kill deadline the
/// container already has, and a kill deadline it adds is never shorter than the worst-case load
/// probelint itself states, nor than the policy's floor. A startup budget that is too long costs
/// only the time it takes to notice a load that hung; one that is too short is the restart
/// storm the fix exists to prevent. So the budget is the largest of:
/// - the load time × (1 + margin) (declared, estimated, or the policy's default);
/// - the liveness tolerance the container had, its own or its operator's (until now liveness
///   was the first to kill it);
/// - the readiness budget it had (a hand-sized readiness says how long loading takes);
/// - `modelLoad.startupFloorSeconds` (default 1,200 s, beside NIM's 1,230 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupBudget {
    /// Seconds: `failure_threshold × STARTUP_PERIOD_SECONDS`.
    pub seconds: i64,
    pub failure_threshold: i64,
    /// What set it: `the load (957 s with margin)`, `the policy's floor`.
    pub set_by: String,
}

impl StartupBudget {
    pub fn for_container(cx: &ContainerContext<'_, '_>, policy: &Policy) -> Self {
        let load = crate::rules::required_startup_seconds(
            cx.container.load.seconds,
            policy.startup_margin,
        );
        // The container's own probe, else the one its operator adds (the pod that runs).
        let budget = |kind: ProbeKind| {
            let own = cx
                .container
                .probe(kind)
                .filter(|p| p.timings_valid())
                .map(Probe::budget_seconds);
            own.or_else(|| {
                cx.container
                    .operator_probe(kind)
                    .filter(|p| p.timings_valid())
                    .map(|p| p.budget_seconds())
            })
            .unwrap_or(0)
        };
        let floor = policy.model_load.startup_floor_seconds.ceil() as i64;
        let bounds = [
            (load, format!("the load with margin ({load} s)")),
            (
                budget(ProbeKind::Liveness),
                "the liveness tolerance it had".to_owned(),
            ),
            (
                budget(ProbeKind::Readiness),
                "the readiness budget it had".to_owned(),
            ),
            (
                floor,
                "modelLoad.startupFloorSeconds, the shortest startup budget a fix adds".to_owned(),
            ),
        ];
        let (needed, set_by) = bounds
            .into_iter()
            .max_by_key(|(seconds, _)| *seconds)
            .expect("four bounds");
        // Rounded up without an addition that overflows for an absurd load time.
        let failure_threshold = (needed.max(1) - 1) / STARTUP_PERIOD_SECONDS + 1;
        StartupBudget {
            seconds: failure_threshold.saturating_mul(STARTUP_PERIOD_SECONDS),
            failure_threshold,
            set_by,
        }
    }
}

fn build_startup_probe(cx: &ContainerContext<'_, '_>, policy: &Policy) -> Option<Fix> {
    let (mut probe, timeout, source) = startup_handler(cx)?;
    let budget = StartupBudget::for_container(cx, policy);
    // failureThreshold is an int32: a budget it cannot express gets no fix (the finding stays).
    if budget.failure_threshold > i64::from(i32::MAX) {
        return None;
    }
    let threshold = budget.failure_threshold;
    probe.insert("periodSeconds".to_owned(), json!(STARTUP_PERIOD_SECONDS));
    probe.insert("failureThreshold".to_owned(), json!(threshold));
    if let Some(timeout) = timeout {
        probe.insert("timeoutSeconds".to_owned(), timeout);
    }
    Some(safe(
        format!(
            "add a startupProbe on {source} with periodSeconds {STARTUP_PERIOD_SECONDS} and failureThreshold {threshold} ({} s budget, set by {})",
            budget.seconds, budget.set_by
        ),
        vec![add(
            pointer::join(&cx.container.pointer, "startupProbe"),
            Value::Object(probe),
        )],
    ))
}

/// Raises a startupProbe's failureThreshold until its budget covers `needed` seconds.
pub(crate) fn raise_failure_threshold(probe: &Probe<'_>, needed: i64) -> Option<Fix> {
    let period = probe.period();
    // A probe that is not a mapping (`startupProbe: []`) has nowhere to put the field.
    if period <= 0 || probe.period_seconds.is_invalid() || !probe.value.is_object() {
        return None;
    }
    let remaining = (needed - probe.initial_delay().max(0)).max(period);
    // Rounded up (`remaining` ≥ `period` > 0) without an addition that could overflow.
    let threshold = (remaining - 1) / period + 1;
    if threshold > i64::from(i32::MAX) {
        return None;
    }
    let path = pointer::join(&probe.pointer, "failureThreshold");
    let op = if probe.value.get("failureThreshold").is_some() {
        replace(path, json!(threshold))
    } else {
        add(path, json!(threshold))
    };
    Some(safe(
        format!("raise startupProbe.failureThreshold to {threshold}"),
        vec![op],
    ))
}

/// Points readiness at the recognised server's ready endpoint.
pub(crate) fn readiness_to_server_endpoint(
    cx: &ContainerContext<'_, '_>,
    probe: &Probe<'_>,
) -> Option<Fix> {
    let server = cx
        .container
        .server
        .filter(|s| s.is_served_by(cx.container.value) && !s.paths_need_model_name)?;
    if !probe.value.is_object() {
        return None;
    }
    let mut ops = Vec::new();
    match &probe.handler {
        Handler::TcpSocket { port } => {
            let port = match port {
                PortRef::Number(n) => json!(n),
                PortRef::Name(n) => json!(n),
                PortRef::Invalid(_) => return None,
            };
            ops.push(remove(pointer::join(&probe.pointer, "tcpSocket")));
            ops.push(add(
                pointer::join(&probe.pointer, "httpGet"),
                json!({"path": server.ready_path, "port": port}),
            ));
        }
        Handler::HttpGet { .. } if probe.value.get("httpGet").is_some_and(Value::is_object) => {
            let path = pointer::join(&pointer::join(&probe.pointer, "httpGet"), "path");
            let op = if probe.value.pointer("/httpGet/path").is_some() {
                replace(path, json!(server.ready_path))
            } else {
                add(path, json!(server.ready_path))
            };
            ops.push(op);
        }
        _ => return None,
    }
    // A generation endpoint needs a generous timeout and more than one failure to drop a
    // replica (readiness-drops-every-replica): the same operations that rule's fix writes.
    if server.ready_runs_generation
        && matches!(probe.failure_threshold, crate::probe::Field::Set(1))
    {
        ops.push(replace(
            pointer::join(&probe.pointer, "failureThreshold"),
            json!(GENERATION_FAILURE_THRESHOLD),
        ));
    }
    if server.ready_runs_generation && probe.timeout() <= 1 {
        let path = pointer::join(&probe.pointer, "timeoutSeconds");
        ops.push(if probe.value.get("timeoutSeconds").is_some() {
            replace(path, json!(GENERATION_TIMEOUT_SECONDS))
        } else {
            add(path, json!(GENERATION_TIMEOUT_SECONDS))
        });
    }
    Some(safe(
        format!(
            "use httpGet {} ({}'s ready endpoint) for readiness",
            server.ready_path, server.name
        ),
        ops,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(rule: &str, container: Option<&str>) -> AppliedFix {
        AppliedFix {
            rule: rule.into(),
            container: container.map(Into::into),
            description: "added a startupProbe".into(),
        }
    }

    fn apply(object: &Value, ops: Vec<PatchOperation>) -> Value {
        let mut doc = object.clone();
        json_patch::patch(&mut doc, &Patch(ops)).expect("patch applies");
        doc
    }

    #[test]
    fn annotation_op_adds_the_whole_map_when_there_are_no_annotations() {
        let object = json!({"metadata": {"name": "x"}});
        let ops = annotation_ops(
            &object,
            &[
                applied("gpu-startup-probe-missing", Some("vllm")),
                applied("readiness-port-open", Some("vllm")),
                applied("gpu-startup-probe-missing", Some("vllm")),
            ],
        );
        assert_eq!(
            serde_json::to_value(&ops).expect("json"),
            json!([{"op": "add", "path": "/metadata/annotations", "value": {
                "probelint.io/mutated": "gpu-startup-probe-missing:vllm,readiness-port-open:vllm"
            }}])
        );
        let doc = apply(&object, ops);
        assert_eq!(
            doc["metadata"]["annotations"]["probelint.io/mutated"],
            "gpu-startup-probe-missing:vllm,readiness-port-open:vllm"
        );
    }

    #[test]
    fn annotation_op_adds_one_key_to_existing_annotations_and_keeps_earlier_entries() {
        let object = json!({"metadata": {"annotations": {
            "team": "ml",
            "probelint.io/mutated": "readiness-port-open:vllm"
        }}});
        let ops = annotation_ops(
            &object,
            &[applied("gpu-startup-probe-missing", Some("vllm"))],
        );
        assert_eq!(
            serde_json::to_value(&ops).expect("json"),
            json!([{"op": "add", "path": "/metadata/annotations/probelint.io~1mutated",
                    "value": "readiness-port-open:vllm,gpu-startup-probe-missing:vllm"}])
        );
        let doc = apply(&object, ops);
        assert_eq!(doc["metadata"]["annotations"]["team"], "ml");
    }

    #[test]
    fn annotation_op_replaces_null_annotations_and_creates_missing_metadata() {
        for object in [
            json!({"metadata": {"annotations": null}}),
            json!({"kind": "Pod"}),
        ] {
            let ops = annotation_ops(&object, &[applied("some-object-rule", None)]);
            let doc = apply(&object, ops);
            assert_eq!(
                doc["metadata"]["annotations"]["probelint.io/mutated"],
                "some-object-rule"
            );
        }
        assert!(annotation_ops(&json!({}), &[]).is_empty());
        let recorded =
            json!({"metadata": {"annotations": {"probelint.io/mutated": "some-object-rule"}}});
        assert!(annotation_ops(&recorded, &[]).is_empty());
        assert!(annotation_ops(&recorded, &[applied("some-object-rule", None)]).is_empty());
    }

    #[test]
    fn mutation_patch_appends_the_annotation_to_the_engine_patch() {
        let object = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "vllm"}]}});
        let mutation = Mutation {
            patch: serde_json::from_value(json!([
                {"op": "add", "path": "/spec/containers/0/startupProbe", "value": {"httpGet": {"path": "/health", "port": 8000}}}
            ]))
            .expect("patch"),
            applied: vec![applied("gpu-startup-probe-missing", Some("vllm"))],
            findings: Vec::new(),
        };
        let policy = Policy::default();
        let MutationPatch { patch, propagated } = mutation_patch(
            object.clone(),
            mutation.patch.clone(),
            &mutation.applied,
            &policy,
        )
        .expect("applies");
        assert_eq!(patch.0.len(), 2);
        assert!(propagated.is_empty());
        let mut doc = object.clone();
        json_patch::patch(&mut doc, &patch).expect("applies");
        assert_eq!(
            doc["spec"]["containers"][0]["startupProbe"]["httpGet"]["port"],
            8000
        );
        assert_eq!(
            doc["metadata"]["annotations"]["probelint.io/mutated"],
            "gpu-startup-probe-missing:vllm"
        );

        let broken = Mutation {
            patch: serde_json::from_value(json!([
                {"op": "replace", "path": "/spec/nothing/here", "value": 1}
            ]))
            .expect("patch"),
            ..mutation
        };
        assert!(mutation_patch(object.clone(), broken.patch, &broken.applied, &policy).is_err());
    }

    #[test]
    fn mutation_patch_copies_the_objects_exemption_into_the_template() {
        let object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"probelint.io/ignore": "all"}},
            "spec": {"template": {"spec": {"containers": [{"name": "vllm"}]}}}
        });
        let policy = Policy::default();
        let out = mutation_patch(object.clone(), Patch(Vec::new()), &[], &policy).expect("applies");
        assert_eq!(out.propagated, ["probelint.io/ignore"]);
        let mut doc = object;
        json_patch::patch(&mut doc, &out.patch).expect("applies");
        assert_eq!(
            doc["spec"]["template"]["metadata"]["annotations"]["probelint.io/ignore"],
            "all"
        );
        assert!(
            doc["metadata"]["annotations"]
                .get(MUTATED_ANNOTATION)
                .is_none()
        );
    }
}
