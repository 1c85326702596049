//! `probeHelper`: the exec probes that run `probelint-probe` (probe/, docs/probe-helper.md), and
//! the volumes that bring its binary into the serving container, written by the same fixes that
//! otherwise write httpGet.
//!
//! An httpGet probe can only ask a server's endpoint; the helper asks what the endpoint cannot
//! say (a smoke inference where a 200 `/health` does not prove the model answers), at a cost it
//! bounds itself. So where the policy turns it on and the server is one the helper knows, a fix
//! writes `exec: [/probelint/bin/probelint-probe, startup|ready|live, --server ID, --port N]`,
//! and adds, once per pod:
//! - the `probelint-probe` volume: an emptyDir (16Mi) that an init container fills with
//!   `probelint-probe install /out`, or, in `imageVolume` mode, the image itself, mounted
//!   read-only (`volumes[].image`, KEP-4639, Kubernetes 1.35 and later);
//! - the `probelint-probe-state` volume (emptyDir, Memory, 1Mi): the smoke inference's cache,
//!   which outlives a probe run and must not be written to a read-only root filesystem.

use crate::analysis::context::ContainerContext;
use crate::fix::patch::add;
use crate::model::fields::{command_words, pick};
use crate::model::pointer;
use crate::model::probe::ProbeKind;
use crate::model::servers::KnownServer;
use crate::policy::{Policy, ProbeHelper, ProbeHelperMode};
use json_patch::PatchOperation;
use serde_json::{Value, json};

/// Where the serving container finds the binary, in both modes.
pub const HELPER_PATH: &str = "/probelint/bin/probelint-probe";
/// The volume that holds the binary.
pub const BIN_VOLUME: &str = "probelint-probe";
/// The volume that holds the smoke inference's cache.
pub const STATE_VOLUME: &str = "probelint-probe-state";
/// Where the state volume is mounted: beside `/probelint`, not under it, because an image volume
/// there is read-only and the kubelet could not create a mount point inside it.
pub const STATE_MOUNT: &str = "/probelint-state";
/// The helper's own bound on each HTTP call (`--timeout`, 3 s by default in probe/src/main.rs).
pub const CALL_TIMEOUT_SECONDS: i64 = 3;
/// The smoke inference's interval (`--interval`): at most one inference per minute per pod.
pub const SMOKE_INTERVAL_SECONDS: i64 = 60;

/// The servers whose semantics probe/src/servers.rs implements for every subcommand the fixes
/// write. Others (llama.cpp routers, KServe v2 runtimes that need the model's own input) need
/// flags only a person can choose, so they keep httpGet.
pub const HELPER_SERVERS: &[&str] = &["vllm", "tgi", "sglang", "triton"];

/// The servers whose liveness the helper judges by progress: their Prometheus counters advance
/// every engine step (vLLM, TGI; probe/src/servers.rs `progress_metrics` cites where each is
/// set), so a default window of 30 s × 2 is far above the longest step. SGLang's counters move
/// only when a request finishes (the same file): a 30 s window would count a long answer as a
/// stall, so its liveness is its cheap endpoint (`/ping`); Triton's is `/v2/health/live`.
pub const PROGRESS_SERVERS: &[&str] = &["vllm", "tgi"];
/// `live`'s defaults (probe/src/main.rs): a stall is this many windows of this many seconds.
pub const LIVE_WINDOW_SECONDS: i64 = 30;
pub const LIVE_WINDOWS: i64 = 2;

/// One helper probe: its `exec` handler, the timeout its work needs, and what it does, in words.
pub struct HelperProbe {
    pub exec: Value,
    /// `calls × CALL_TIMEOUT_SECONDS + 1`: the helper's own deadline plus a second to exit.
    pub timeout_seconds: i64,
    pub describe: String,
    /// Whether the probe sends a smoke inference (once per interval).
    pub smoke: bool,
    /// The port it asks (`--port`).
    pub port: i64,
}

/// Whether this run of `ready` should send a smoke inference: only where the server's ready
/// endpoint does not already run a generation (the server table's `ready_runs_generation`), where
/// the helper can build a one-token request without the model's input (not KServe v2, whose body
/// is the model's own tensors), and never on a vLLM started with sleep mode, where an inference
/// would wake the engine and keep it awake (the helper reads the sleep state only where vLLM
/// exposes it; docs/probe-helper.md says not to use `--smoke` otherwise).
fn wants_smoke(server: &KnownServer, container: &Value) -> bool {
    if server.ready_runs_generation || matches!(server.id, "triton" | "kserve" | "mlserver") {
        return false;
    }
    if server.id == "vllm" {
        let [command, args] = pick(container, ["command", "args"]);
        let sleeps = command_words(command, args).iter().any(|w| {
            w.split_whitespace().any(|w| {
                let flag = w.split('=').next().unwrap_or(w);
                flag == "--enable-sleep-mode" || flag == "--sleep-idle-ttl"
            })
        });
        return !sleeps;
    }
    true
}

/// How many HTTP calls a run makes at most (probe/src/main.rs): `startup` and `ready` read the
/// ready path once; a stale smoke cache adds the inference, and on vLLM `/is_sleeping` and
/// `/metrics` before it; `live` reads `/metrics` and, where metrics are off, the cheap path.
fn calls(kind: ProbeKind, server: &KnownServer, smoke: bool) -> i64 {
    match kind {
        ProbeKind::Startup => 1,
        ProbeKind::Readiness if smoke && server.id == "vllm" => 4,
        ProbeKind::Readiness if smoke => 2,
        ProbeKind::Readiness => 1,
        // `/metrics`, and the cheap path where metrics are off; or the cheap path alone.
        ProbeKind::Liveness if PROGRESS_SERVERS.contains(&server.id) => 2,
        ProbeKind::Liveness => 1,
    }
}

/// The port the server listens on as a number: an exec command cannot name a port.
fn numeric_port(cx: &ContainerContext<'_, '_>, server: &KnownServer) -> Option<i64> {
    match crate::fix::probes::server_port(cx, server) {
        Value::Number(n) => n.as_i64(),
        Value::String(name) => cx
            .container
            .ports()
            .iter()
            .find(|p| p.name == Some(name.as_str()))
            .and_then(|p| p.number),
        _ => None,
    }
}

/// The helper's probe of `kind` for this container, when the policy turns the helper on, the
/// container runs a server the helper knows and serves its endpoint, and the binary can be
/// delivered into its pod. `None` otherwise: the fix then writes httpGet as before.
pub fn probe(
    cx: &ContainerContext<'_, '_>,
    policy: &Policy,
    kind: ProbeKind,
) -> Option<HelperProbe> {
    let helper = policy.probe_helper.as_ref()?;
    let server = cx.container.server.filter(|s| {
        HELPER_SERVERS.contains(&s.id)
            && s.is_served_by(cx.container.value)
            && !s.paths_need_model_name
    })?;
    // A native sidecar is not the model server, and its restarts follow other rules.
    if cx.container.sidecar || delivery(cx, helper).is_none() {
        return None;
    }
    let port = numeric_port(cx, server)?;
    let smoke = kind == ProbeKind::Readiness && wants_smoke(server, cx.container.value);
    let sub = match kind {
        ProbeKind::Startup => "startup",
        ProbeKind::Readiness => "ready",
        ProbeKind::Liveness => "live",
    };
    let mut command = vec![
        json!(HELPER_PATH),
        json!(sub),
        json!("--server"),
        json!(server.id),
        json!("--port"),
        json!(port.to_string()),
    ];
    if smoke {
        command.extend([
            json!("--smoke"),
            json!("--interval"),
            json!(SMOKE_INTERVAL_SECONDS.to_string()),
        ]);
    }
    if kind == ProbeKind::Liveness && !PROGRESS_SERVERS.contains(&server.id) {
        command.extend([json!("--by"), json!("endpoint")]);
    }
    // `ready` and `live` keep their state apart (they run at the same time).
    if kind != ProbeKind::Startup {
        let file = if kind == ProbeKind::Liveness {
            "live"
        } else {
            "ready"
        };
        command.extend([json!("--cache"), json!(format!("{STATE_MOUNT}/{file}"))]);
    }
    let n = calls(kind, server, smoke);
    let describe = if kind == ProbeKind::Liveness {
        format!(
            "probelint-probe live for {} on port {port} ({})",
            server.name,
            live_criterion(server)
        )
    } else if smoke {
        format!(
            "probelint-probe {sub} for {} on port {port}, with a smoke inference at most every {SMOKE_INTERVAL_SECONDS} s",
            server.name
        )
    } else {
        format!("probelint-probe {sub} for {} on port {port}", server.name)
    };
    Some(HelperProbe {
        exec: json!({"command": command}),
        timeout_seconds: n * CALL_TIMEOUT_SECONDS + 1,
        describe,
        smoke,
        port,
    })
}

/// The operations that bring the binary and the state volume into this container's pod, against
/// the original object; the same for every fix of a pod, so [`crate::mutate::merge_fixes`] keeps
/// one copy. Each addition is at an explicit index (the array's length and on), never `-`: two
/// additions at one path would clash in the merge. `None` when a field is not the array it must
/// be, so nothing can be added safely.
pub fn delivery(
    cx: &ContainerContext<'_, '_>,
    helper: &ProbeHelper,
) -> Option<Vec<PatchOperation>> {
    let pod = &cx.pod.pointer;
    let bin_volume = match helper.mode {
        ProbeHelperMode::InitContainer => {
            json!({"name": BIN_VOLUME, "emptyDir": {"sizeLimit": "16Mi"}})
        }
        ProbeHelperMode::ImageVolume => json!({"name": BIN_VOLUME, "image": {
            "reference": helper.image, "pullPolicy": "IfNotPresent"
        }}),
    };
    let state_volume =
        json!({"name": STATE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}});
    let bin_mount = match helper.mode {
        // The emptyDir holds only the binary: mounted where the probes exec it.
        ProbeHelperMode::InitContainer => {
            json!({"name": BIN_VOLUME, "mountPath": "/probelint/bin", "readOnly": true})
        }
        // The image's `/probelint` directory (probe/Dockerfile), so the path is the same.
        ProbeHelperMode::ImageVolume => json!({
            "name": BIN_VOLUME, "mountPath": "/probelint", "subPath": "probelint", "readOnly": true
        }),
    };
    let state_mount = json!({"name": STATE_VOLUME, "mountPath": STATE_MOUNT});
    let mut ops = Vec::new();
    append_named(
        &mut ops,
        cx.pod.value,
        pod,
        "volumes",
        [bin_volume, state_volume],
    )?;
    if helper.mode == ProbeHelperMode::InitContainer {
        // Mounted at /out, never at /probelint/bin: that would hide the binary it runs.
        let init = json!({
            "name": BIN_VOLUME,
            "image": helper.image,
            "args": ["install", "/out"],
            "volumeMounts": [{"name": BIN_VOLUME, "mountPath": "/out"}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}}
        });
        append_named(&mut ops, cx.pod.value, pod, "initContainers", [init])?;
    }
    append_named(
        &mut ops,
        cx.container.value,
        &cx.container.pointer,
        "volumeMounts",
        [bin_mount, state_mount],
    )?;
    Some(ops)
}

/// Adds the `items` whose `name` the array at `field` lacks: the whole array when there is none.
fn append_named<const N: usize>(
    ops: &mut Vec<PatchOperation>,
    parent: &Value,
    parent_pointer: &str,
    field: &str,
    items: [Value; N],
) -> Option<()> {
    let at = pointer::join(parent_pointer, field);
    let existing = match parent.get(field) {
        None | Some(Value::Null) => {
            ops.push(add(at, Value::Array(items.into())));
            return Some(());
        }
        Some(Value::Array(existing)) => existing,
        Some(_) => return None,
    };
    let mut next = existing.len();
    for item in items {
        let taken = existing
            .iter()
            .any(|e| e.get("name").is_some() && e.get("name") == item.get("name"));
        if !taken {
            ops.push(add(pointer::join_index(&at, next), item));
            next += 1;
        }
    }
    Some(())
}

/// When `live` fails, for this server, in words.
pub fn live_criterion(server: &KnownServer) -> String {
    if PROGRESS_SERVERS.contains(&server.id) {
        format!(
            "fails only when requests are in flight and {}'s progress counters have not moved \
             for {LIVE_WINDOWS} windows of {LIVE_WINDOW_SECONDS} s",
            server.name
        )
    } else {
        let path = if server.id == "sglang" {
            "/ping"
        } else {
            server.live_path
        };
        format!("fails only when GET {path}, which never generates, fails")
    }
}

/// Why an httpGet liveness on `path` cannot tell this busy server from a wedged one, with the
/// source; `None` where the path is the server's cheap liveness (Triton's `/v2/health/live`).
pub fn shared_liveness_evidence(server: &KnownServer, path: &str) -> Option<&'static str> {
    match (server.id, path) {
        ("vllm", "/health") => Some(
            "vLLM's /health times out on a busy engine and answers 200 while the engine is hung \
             (8+ false restarts a day, and stalls it missed, in gonka-ai/gonka#1421)",
        ),
        ("tgi", "/health") => Some(
            "TGI's /health goes unhealthy when its queue is full, so a busy server is restarted \
             (huggingface/text-generation-inference#3241)",
        ),
        ("sglang", "/health" | "/health_generate") => Some(
            "SGLang's /health is /health_generate: a generation that takes at least 1 s and \
             answers 503 when it does not finish within SGLANG_HEALTH_CHECK_TIMEOUT \
             (sgl-project/sglang@0025436e python/sglang/srt/entrypoints/http_server.py)",
        ),
        ("triton", "/v2/health/ready") => Some(
            "Triton's /v2/health/ready fails while any model is not ready, which is readiness's \
             question, not whether the process is wedged",
        ),
        _ => None,
    }
}

/// Liveness on the helper's `live` in place of an httpGet liveness on the server's own port,
/// held to the invariant of every fix: the kill deadline never shrinks. The period,
/// failureThreshold and initialDelaySeconds stay; timeoutSeconds only grows (to cover the
/// helper's calls); `live` itself waits its windows before it fails, so a wedged server is
/// killed later than before, never sooner. It fails during the load exactly where the httpGet
/// did (the port is closed: vLLM, TGI, Triton) or less (SGLang's `/ping` answers once the port
/// is open), and is written only behind a startupProbe that waits for the model: the one the
/// container has (not a tcpSocket on a port that opens before the model is loaded), its
/// operator's, or, where it has none, the startupProbe gpu-startup-probe-missing adds (the same
/// operations, which [`crate::mutate::merge_fixes`] applies once). `None` when any of it cannot
/// be had: the finding then keeps its help.
pub fn liveness(
    cx: &ContainerContext<'_, '_>,
    probe: &crate::model::probe::Probe<'_>,
    policy: &Policy,
) -> Option<crate::fix::Change> {
    use crate::fix::patch::{remove, replace};
    use crate::model::probe::Handler;
    let helper = self::probe(cx, policy, ProbeKind::Liveness)?;
    let server = cx.container.server?;
    if !matches!(probe.handler, Handler::HttpGet { .. }) || !probe.value.is_object() {
        return None;
    }
    probe.value.get("httpGet")?;
    let mut ops = Vec::new();
    let mut gate = String::new();
    match cx.container.probe(ProbeKind::Startup) {
        Some(startup) => {
            let waits = match startup.handler {
                Handler::TcpSocket { .. } => {
                    server.during_load == crate::model::servers::DuringLoad::PortClosed
                }
                Handler::Invalid => false,
                _ => true,
            };
            if !waits {
                return None;
            }
        }
        None if cx.container.runs_probe(ProbeKind::Startup) => {}
        None => {
            let startup = crate::fix::probes::startup_probe(cx, policy)?;
            gate = format!("{}, then ", startup.description);
            ops.extend(startup.ops);
        }
    }
    ops.push(remove(pointer::join(&probe.pointer, "httpGet")));
    ops.push(add(pointer::join(&probe.pointer, "exec"), helper.exec));
    if probe.timeout() < helper.timeout_seconds {
        let path = pointer::join(&probe.pointer, "timeoutSeconds");
        let value = json!(helper.timeout_seconds);
        ops.push(if probe.value.get("timeoutSeconds").is_some() {
            replace(path, value)
        } else {
            add(path, value)
        });
    }
    // The startupProbe's operations already bring the binary.
    if gate.is_empty() {
        ops.extend(delivery(cx, policy.probe_helper.as_ref()?)?);
    }
    Some(crate::fix::Change::new(
        format!(
            "{gate}use {} for liveness, keeping its {} kill deadline (timeoutSeconds {})",
            helper.describe,
            probe.budget_arithmetic(),
            probe.timeout().max(helper.timeout_seconds)
        ),
        ops,
    ))
}
