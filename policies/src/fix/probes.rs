//! Probe builders: a startupProbe on the check a container already has (or its server's real
//! endpoint) with a budget that never shortens a kill deadline, a raised failureThreshold, and
//! readiness on a recognised server's ready endpoint.
//!
//! A builder never invents an endpoint: it reuses a check the container already has, or the real
//! endpoint of a recognised model server ([`crate::model::servers`]). When neither exists there
//! is nothing to build, and the finding stays with its help text.

use crate::analysis::context::ContainerContext;
use crate::fix::Change;
use crate::fix::patch::{add, remove, replace};
use crate::model::budget::{required_startup_seconds, threshold_for};
use crate::model::fields::pick;
use crate::model::pointer;
use crate::model::probe::{Field, Handler, PortRef, Probe, ProbeKind, heavy_exec};
use crate::model::servers::KnownServer;
use crate::policy::Policy;
use serde_json::{Map, Value, json};

/// Period of the startup probes fixes add.
pub const STARTUP_PERIOD_SECONDS: i64 = 10;
/// Timeout given to a readiness probe that runs a generation.
pub const GENERATION_TIMEOUT_SECONDS: i64 = 10;
/// failureThreshold given to a readiness probe that runs a generation with a threshold of 1: a
/// generation must fail three times in a row to take the replica out of rotation.
pub const GENERATION_FAILURE_THRESHOLD: i64 = 3;

/// The port a recognised server listens on in this container: the port its own flag or
/// environment variable sets ([`KnownServer::explicit_port`]), else the declared containerPort
/// that is the server's default (by number) or the only TCP port, else the server's default.
pub(crate) fn server_port(cx: &ContainerContext<'_, '_>, server: &KnownServer) -> Value {
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
        matches!(&probe.handler, Handler::Exec { command } if heavy_exec(command).is_some())
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

/// The budget of a startupProbe that a fix adds, and the bound that set it.
///
/// **The invariant every added startupProbe keeps:** a fix never shortens a kill deadline the
/// container already has, and a kill deadline it adds is never shorter than the worst-case load
/// probelint itself states, nor than the policy's floor. A startup budget that is too long costs
/// only the time it takes to notice a load that hung; one that is too short is the restart
/// storm the fix exists to prevent. So the budget is the largest of:
/// - the load time's slow end × (1 + margin) (declared, estimated, or the policy's default);
/// - the liveness tolerance the container had, its own or its operator's (until now liveness
///   was the first to kill it);
/// - the readiness budget it had (a hand-sized readiness says how long loading takes);
/// - `modelLoad.startupFloorSeconds` (default 1,200 s, beside NIM's 1,230 s), or, for a container
///   that had no kill deadline at all, `modelLoad.newDeadlineFloorSeconds` (default 3,600 s):
///   there the fix creates the deadline, and it must lie beyond any plausible load.
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
        let load = required_startup_seconds(cx.container.load.slow, policy.startup_margin);
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
        let liveness = budget(ProbeKind::Liveness);
        // Nothing could kill this container before: the startupProbe is a deadline where there
        // was none, so it must lie beyond any load the container may have, known or not.
        let had_no_deadline = liveness == 0
            && !cx.container.runs_probe(ProbeKind::Liveness)
            && !cx.container.runs_probe(ProbeKind::Startup);
        let floor = if had_no_deadline {
            (
                policy
                    .model_load
                    .new_deadline_floor_seconds
                    .max(policy.model_load.startup_floor_seconds)
                    .ceil() as i64,
                "modelLoad.newDeadlineFloorSeconds: a deadline where this container had none"
                    .to_owned(),
            )
        } else {
            (
                policy.model_load.startup_floor_seconds.ceil() as i64,
                "modelLoad.startupFloorSeconds, the shortest startup budget a fix adds".to_owned(),
            )
        };
        let bounds = [
            (
                load,
                if had_no_deadline {
                    format!("the load with margin ({load} s), a deadline where it had none")
                } else {
                    format!("the load with margin ({load} s)")
                },
            ),
            (liveness, "the liveness tolerance it had".to_owned()),
            (
                budget(ProbeKind::Readiness),
                "the readiness budget it had".to_owned(),
            ),
            floor,
        ];
        let (needed, set_by) = bounds
            .into_iter()
            .max_by_key(|(seconds, _)| *seconds)
            .expect("four bounds");
        let failure_threshold = threshold_for(needed, STARTUP_PERIOD_SECONDS, 0);
        StartupBudget {
            seconds: failure_threshold.saturating_mul(STARTUP_PERIOD_SECONDS),
            failure_threshold,
            set_by,
        }
    }
}

/// A startupProbe for a container that has none, on the check [`startup_handler`] finds, with
/// the [`StartupBudget`]. `None` when nothing is known to be served, or when the budget does not
/// fit an int32 failureThreshold.
///
/// Two rules offer it for one container (gpu-startup-probe-missing, and liveness-restart-loop
/// when the container has a liveness probe): both build the same operations, which
/// [`crate::mutate::merge_fixes`] applies once.
pub fn startup_probe(cx: &ContainerContext<'_, '_>, policy: &Policy) -> Option<Change> {
    let (mut probe, mut timeout, source) = startup_handler(cx)?;
    // With `probeHelper`, the same budget on the helper's `startup` (the server's ready signal,
    // no inference); a timeout the copied check had is kept when it is longer.
    let helper = crate::fix::helper::probe(cx, policy, ProbeKind::Startup);
    let source = match &helper {
        Some(h) => {
            probe.clear();
            probe.insert("exec".to_owned(), h.exec.clone());
            let had = timeout.as_ref().and_then(Value::as_i64).unwrap_or(1);
            timeout = Some(json!(had.max(h.timeout_seconds)));
            h.describe.clone()
        }
        None => source.to_string(),
    };
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
    let mut ops = vec![add(
        pointer::join(&cx.container.pointer, "startupProbe"),
        Value::Object(probe),
    )];
    if helper.is_some() {
        ops.extend(delivery(cx, policy)?);
    }
    Some(Change::new(
        format!(
            "add a startupProbe on {source} with periodSeconds {STARTUP_PERIOD_SECONDS} and failureThreshold {threshold} ({} s budget, set by {})",
            budget.seconds, budget.set_by
        ),
        ops,
    ))
}

/// The volumes, mounts and init container the helper's probes need (`probeHelper`).
fn delivery(
    cx: &ContainerContext<'_, '_>,
    policy: &Policy,
) -> Option<Vec<json_patch::PatchOperation>> {
    crate::fix::helper::delivery(cx, policy.probe_helper.as_ref()?)
}

/// Readiness on the helper's `ready` in place of the probe's handler, with a timeout that covers
/// the helper's calls (never a shorter one than the probe had) and, where it sends a smoke
/// inference, more than one failure to drop the replica (readiness-drops-every-replica).
fn helper_readiness(
    cx: &ContainerContext<'_, '_>,
    probe: &Probe<'_>,
    policy: &Policy,
) -> Option<Change> {
    let helper = crate::fix::helper::probe(cx, policy, ProbeKind::Readiness)?;
    let field = match &probe.handler {
        Handler::TcpSocket { .. } => "tcpSocket",
        Handler::HttpGet { .. } => "httpGet",
        _ => return None,
    };
    probe.value.get(field)?;
    let mut ops = vec![
        remove(pointer::join(&probe.pointer, field)),
        add(pointer::join(&probe.pointer, "exec"), helper.exec),
    ];
    if probe.timeout() < helper.timeout_seconds {
        let path = pointer::join(&probe.pointer, "timeoutSeconds");
        let value = json!(helper.timeout_seconds);
        ops.push(if probe.value.get("timeoutSeconds").is_some() {
            replace(path, value)
        } else {
            add(path, value)
        });
    }
    let server = cx.container.server?;
    if (helper.smoke || server.ready_runs_generation)
        && matches!(probe.failure_threshold, Field::Set(1))
    {
        ops.push(replace(
            pointer::join(&probe.pointer, "failureThreshold"),
            json!(GENERATION_FAILURE_THRESHOLD),
        ));
    }
    ops.extend(delivery(cx, policy)?);
    Some(Change::new(
        format!("use {} for readiness", helper.describe),
        ops,
    ))
}

/// Raises a startupProbe's failureThreshold until its budget covers `needed` seconds.
pub fn raise_threshold(probe: &Probe<'_>, needed: i64) -> Option<Change> {
    let period = probe.period();
    // A probe that is not a mapping (`startupProbe: []`) has nowhere to put the field.
    if period <= 0 || probe.period_seconds.is_invalid() || !probe.value.is_object() {
        return None;
    }
    let threshold = threshold_for(needed, period, probe.initial_delay());
    if threshold > i64::from(i32::MAX) {
        return None;
    }
    let path = pointer::join(&probe.pointer, "failureThreshold");
    let op = if probe.value.get("failureThreshold").is_some() {
        replace(path, json!(threshold))
    } else {
        add(path, json!(threshold))
    };
    Some(Change::new(
        format!("raise startupProbe.failureThreshold to {threshold}"),
        vec![op],
    ))
}

/// Points readiness at the recognised server's ready endpoint.
///
/// With `probeHelper` on, and a server the helper knows, readiness runs the helper's `ready`
/// instead ([`helper_readiness`]).
pub fn readiness_endpoint(
    cx: &ContainerContext<'_, '_>,
    probe: &Probe<'_>,
    policy: &Policy,
) -> Option<Change> {
    if !probe.value.is_object() {
        return None;
    }
    if let Some(change) = helper_readiness(cx, probe, policy) {
        return Some(change);
    }
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
    if server.ready_runs_generation && matches!(probe.failure_threshold, Field::Set(1)) {
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
    Some(Change::new(
        format!(
            "use httpGet {} ({}'s ready endpoint) for readiness",
            server.ready_path, server.name
        ),
        ops,
    ))
}
