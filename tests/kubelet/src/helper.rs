//! `probelint-probe` on the real kubelet: its image, mounted into the reference server's container
//! as a Kubernetes image volume (`volumes[].image`, KEP-4639) exactly as probelint's fixes write
//! it with `probeHelper: {mode: imageVolume}` (the volume, its `subPath: probelint` mount at
//! `/probelint`, the state emptyDir at `/probelint-state`), and the arms that use it run and
//! observed as [`crate::run_all`] runs the others.

use crate::{Arm, Observer, Outcome, SCENARIO_LABEL};
use probelint_cluster::{Cluster, Image};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The helper's image as the kubelet gets it: only `/probelint/bin/probelint-probe`, as
/// `probe/Dockerfile` lays it out.
pub const PROBE_HELPER_IMAGE: &str = "probelint.test/probe-helper:test";

/// Where the serving container execs the helper (probelint's `HELPER_PATH`).
pub const HELPER_PATH: &str = "/probelint/bin/probelint-probe";

/// The shared libraries `ldd` says `binary` loads on this machine (none for a static binary).
fn libraries(binary: &Path) -> Result<BTreeSet<PathBuf>, String> {
    let out = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Ok(BTreeSet::new());
    }
    Ok(text
        .lines()
        .filter_map(|line| match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        })
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect())
}

/// The helper's image, holding `probe` (this build of `probelint-probe`) at
/// `/probelint/bin/probelint-probe`, run as 65532 like `probe/Dockerfile`'s.
///
/// With `subPath: probelint` the serving container sees only that directory of the image, so a
/// dynamically linked build runs on the libraries of the serving image. The release image is a
/// static musl build and needs none; this build is the workspace's glibc one, so the reference
/// server's image (which carries the libraries `server` loads, at their paths here) must hold
/// every library the helper loads: checked, and refused with the list when it does not.
pub fn probe_helper_image(probe: &Path, server: &Path) -> Result<Image, String> {
    let needs = libraries(probe)?;
    let has = libraries(server)?;
    let missing: Vec<String> = needs
        .difference(&has)
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} loads libraries the reference server's image does not carry ({}): build it \
             static (the release image is `x86_64-unknown-linux-musl`)",
            probe.display(),
            missing.join(", ")
        ));
    }
    let mut image = Image::new(PROBE_HELPER_IMAGE);
    image
        .copy(probe, HELPER_PATH)?
        .entrypoint(&[HELPER_PATH])
        .user("65532:65532");
    Ok(image)
}

/// The pod's volumes as probelint's fix writes them in `imageVolume` mode, for `reference`.
pub fn helper_volumes(reference: &str) -> Value {
    json!([
        {"name": "probelint-probe", "image": {"reference": reference, "pullPolicy": "IfNotPresent"}},
        {"name": "probelint-probe-state", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
    ])
}

/// The serving container's mounts of [`helper_volumes`], as the fix writes them.
pub fn helper_mounts() -> Value {
    json!([
        {"name": "probelint-probe", "mountPath": "/probelint", "subPath": "probelint", "readOnly": true},
        {"name": "probelint-probe-state", "mountPath": "/probelint-state"},
    ])
}

/// An exec probe of the helper: `args` after the binary.
pub fn helper_exec(args: &[&str]) -> Value {
    let mut command = vec![HELPER_PATH];
    command.extend_from_slice(args);
    json!({"command": command})
}

/// Runs every arm at once on the test node with `volumes` added to its pod (its `probes` carry
/// the container's `volumeMounts`), observes each for its duration, and asks `simulate` about
/// the Deployment the apiserver stored. No arm is mutated (no webhook runs).
pub fn run_with_volumes(
    cluster: &'static Cluster,
    probelint: &Path,
    arms: &[Arm],
    volumes: &Value,
) -> Vec<Outcome> {
    assert!(
        arms.iter().all(|a| !a.mutated),
        "run_with_volumes runs no webhook: use run_all for mutated arms"
    );
    let observer = Observer::start(cluster, SCENARIO_LABEL);
    let mut started = Vec::new();
    for arm in arms {
        let ns = cluster.namespace(&format!("kubelet-{}", arm.id()));
        let mut deployment = arm.deployment();
        deployment["spec"]["template"]["spec"]["volumes"] = volumes.clone();
        let text = serde_json::to_string(&deployment).expect("a manifest");
        let applied = cluster.apply(&text, &["-n", &ns]);
        assert!(
            applied.status.success(),
            "{}: kubectl apply failed: {}",
            arm.id(),
            String::from_utf8_lossy(&applied.stderr)
        );
        let stored = cluster.get_json(&["-n", &ns, "get", "deployment", arm.scenario]);
        started.push((arm.clone(), ns, stored));
    }
    crate::observe_and_predict(&observer, probelint, started)
}
