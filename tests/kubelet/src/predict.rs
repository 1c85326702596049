//! What `probelint simulate` predicts for an arm: the real CLI, given the Deployment as the
//! apiserver stored it, the arm's load time and window, and whether its port opens during the
//! load. Its JSON output is read, so the comparison follows whatever the model says today.

use crate::Arm;
use serde_json::Value;
use std::path::Path;

/// The model's figures for one arm.
#[derive(Debug, Default)]
pub struct Predicted {
    pub restarts: u32,
    /// The fewest and most restarts over the probe phases and wall-clock fractions `simulate`
    /// runs (its `spread`): where in its period and its second a real node's ticks fall is
    /// not known in advance.
    pub restarts_range: (u32, u32),
    pub first_ready: Option<f64>,
    /// Seconds the model has the pod Ready before its model is loaded.
    pub ready_while_loading: f64,
    /// Its timeline, one line per transition.
    pub transitions: Vec<String>,
}

/// Runs `probelint simulate --format json` on `deployment` for `arm`.
pub fn simulate(probelint: &Path, deployment: &Value, arm: &Arm) -> Result<Predicted, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let manifest = dir.path().join(format!("{}.json", arm.id()));
    std::fs::write(&manifest, deployment.to_string())
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    let mut command = std::process::Command::new(probelint);
    command
        .arg("simulate")
        .arg(&manifest)
        .args(["--container", "server", "--format", "json"])
        .arg(format!("--load-seconds={}", arm.load_seconds))
        .arg(format!("--duration={}", arm.duration))
        // No .probelint.yaml of the checkout's: the built-in policy.
        .current_dir(dir.path());
    if !arm.port_open_during_load {
        command.arg("--port-opens-after-load");
    }
    let out = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", probelint.display()))?;
    if !out.status.success() {
        return Err(format!(
            "probelint simulate {} failed ({}): {}",
            arm.id(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let report: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "probelint simulate printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let container = &report["containers"][0];
    let restarts = container["restarts"]
        .as_u64()
        .ok_or_else(|| format!("no `restarts` in simulate's output: {report}"))?;
    let bound = |key: &str| {
        container["spread"][key]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("no `spread.{key}` in simulate's output: {report}"))
    };
    Ok(Predicted {
        restarts: u32::try_from(restarts).unwrap_or(u32::MAX),
        restarts_range: (bound("restarts_min")?, bound("restarts_max")?),
        first_ready: container["first_ready_seconds"].as_f64(),
        ready_while_loading: container["ready_while_loading_seconds"]
            .as_f64()
            .unwrap_or(0.0),
        transitions: container["transitions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                format!(
                    "{:>6} s  {:<9}  {:<7}  {}",
                    t["t"],
                    t["probe"].as_str().unwrap_or_default(),
                    t["result"].as_str().unwrap_or_default(),
                    t["event"].as_str().unwrap_or_default()
                )
            })
            .collect(),
    })
}
