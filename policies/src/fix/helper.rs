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

/// One helper probe: its `exec` handler, the timeout its work needs, and what it does, in words.
pub struct HelperProbe {
    pub exec: Value,
    /// `calls × CALL_TIMEOUT_SECONDS + 1`: the helper's own deadline plus a second to exit.
    pub timeout_seconds: i64,
    pub describe: String,
    /// Whether the probe sends a smoke inference (once per interval).
    pub smoke: bool,
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
        ProbeKind::Liveness => 2,
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
    let describe = if smoke {
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
