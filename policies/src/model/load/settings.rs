//! The `modelLoad:` section of the policy: the constants the load-time estimate uses.
//!
//! Every default is in `policies/default.yaml` with where it comes from; `docs/load-time.md`
//! explains the formula. A user policy overrides single keys: its maps add to the built-in ones.

use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `modelLoad:` as written.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelLoadFile {
    /// Read or download speed of model weights, in MB/s (10^6 bytes per second), by where the
    /// weights come from.
    #[serde(rename = "bandwidthMBPerSecond")]
    pub bandwidth_mb_per_second: Option<BandwidthFile>,
    /// Seconds a server needs after reading its weights before it answers (engine start, CUDA
    /// graph capture, compilation, warm-up), by server id (`vllm`, `tgi`...); `default` is used
    /// for servers not listed.
    #[serde(default)]
    pub server_start_seconds: BTreeMap<String, f64>,
    /// Parameter counts, in billions, of models whose ids do not say it (`DeepSeek-R1`: 671),
    /// keyed by the start of the model's name (the part after the last `/`, any case).
    #[serde(default)]
    pub parameters_billions: BTreeMap<String, f64>,
    /// Bytes per parameter of checkpoints published in a precision their names do not say
    /// (DeepSeek-R1 ships FP8: 1), keyed like `parametersBillions`.
    #[serde(default)]
    pub bytes_per_parameter: BTreeMap<String, f64>,
    /// The shortest budget, in seconds, of a startupProbe that a fix adds. Default 1200.
    pub startup_floor_seconds: Option<f64>,
}

/// `modelLoad.bandwidthMBPerSecond` as written.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BandwidthFile {
    /// Downloads from the Hugging Face Hub at container start.
    pub hub: Option<f64>,
    /// NIM's download of its model profile from NGC at container start.
    pub ngc: Option<f64>,
    /// Downloads from object storage (s3://, gs://, azure://, https://).
    pub object_store: Option<f64>,
    /// Reads from a PersistentVolumeClaim or another network volume (nfs, csi).
    pub persistent_volume: Option<f64>,
    /// Reads from a hostPath volume (the node's local disk).
    pub host_path: Option<f64>,
    /// Reads from an emptyDir on the node's disk, from an image volume, or from the image itself.
    pub node_disk: Option<f64>,
    /// Reads from a memory-backed emptyDir (`medium: Memory`).
    pub memory: Option<f64>,
}

/// MB/s for each source of weights, every one set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    pub hub: f64,
    pub ngc: f64,
    pub object_store: f64,
    pub persistent_volume: f64,
    pub host_path: f64,
    pub node_disk: f64,
    pub memory: f64,
}

/// The effective `modelLoad:` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelLoad {
    pub bandwidth: Bandwidth,
    /// By server id, with `default`.
    pub server_start_seconds: BTreeMap<String, f64>,
    /// Lower-cased name prefixes with their parameter counts in billions, longest first.
    pub parameters_billions: Vec<(String, f64)>,
    /// Lower-cased name prefixes with their checkpoints' bytes per parameter, longest first.
    pub bytes_per_parameter: Vec<(String, f64)>,
    pub startup_floor_seconds: f64,
}

impl ModelLoad {
    /// Seconds server `id` needs after its weights are read.
    pub fn start_seconds(&self, id: Option<&str>) -> f64 {
        id.and_then(|id| self.server_start_seconds.get(id))
            .or_else(|| self.server_start_seconds.get("default"))
            .copied()
            .unwrap_or(0.0)
    }

    /// Merges `user` over `base`: scalars replace, maps add keys. Errors name the key.
    pub(crate) fn merge(
        base: ModelLoadFile,
        user: ModelLoadFile,
    ) -> Result<Self, (String, String)> {
        let b = base.bandwidth_mb_per_second.unwrap_or_default();
        let u = user.bandwidth_mb_per_second.unwrap_or_default();
        let speed = |key: &str, user: Option<f64>, base: Option<f64>| {
            let value = user.or(base).ok_or_else(|| {
                (
                    format!("modelLoad.bandwidthMBPerSecond.{key}"),
                    "missing from the built-in policy".to_owned(),
                )
            })?;
            if value.is_finite() && value > 0.0 {
                Ok(value)
            } else {
                Err((
                    format!("modelLoad.bandwidthMBPerSecond.{key}"),
                    format!("expected MB/s > 0, got {value}"),
                ))
            }
        };
        let bandwidth = Bandwidth {
            hub: speed("hub", u.hub, b.hub)?,
            ngc: speed("ngc", u.ngc, b.ngc)?,
            object_store: speed("objectStore", u.object_store, b.object_store)?,
            persistent_volume: speed("persistentVolume", u.persistent_volume, b.persistent_volume)?,
            host_path: speed("hostPath", u.host_path, b.host_path)?,
            node_disk: speed("nodeDisk", u.node_disk, b.node_disk)?,
            memory: speed("memory", u.memory, b.memory)?,
        };
        let mut server_start_seconds = base.server_start_seconds;
        server_start_seconds.extend(user.server_start_seconds);
        for (id, seconds) in &server_start_seconds {
            if !(seconds.is_finite() && *seconds >= 0.0) {
                return Err((
                    format!("modelLoad.serverStartSeconds.{id}"),
                    format!("expected a number of seconds ≥ 0, got {seconds}"),
                ));
            }
        }
        let parameters_billions = name_table(
            "parametersBillions",
            base.parameters_billions,
            user.parameters_billions,
        )?;
        let bytes_per_parameter = name_table(
            "bytesPerParameter",
            base.bytes_per_parameter,
            user.bytes_per_parameter,
        )?;
        let startup_floor_seconds = user
            .startup_floor_seconds
            .or(base.startup_floor_seconds)
            .unwrap_or(1200.0);
        if !(startup_floor_seconds.is_finite() && startup_floor_seconds >= 0.0) {
            return Err((
                "modelLoad.startupFloorSeconds".to_owned(),
                format!("expected a number of seconds ≥ 0, got {startup_floor_seconds}"),
            ));
        }
        Ok(ModelLoad {
            bandwidth,
            server_start_seconds,
            parameters_billions,
            bytes_per_parameter,
            startup_floor_seconds,
        })
    }
}

/// A table keyed by model-name prefix: the user's keys added to the built-in ones, lower-cased,
/// the longest first (`GLM-4.5-Air` before `GLM-4.5`).
fn name_table(
    key: &str,
    base: BTreeMap<String, f64>,
    user: BTreeMap<String, f64>,
) -> Result<Vec<(String, f64)>, (String, String)> {
    let mut merged = base;
    merged.extend(user);
    let mut table = Vec::with_capacity(merged.len());
    for (name, value) in merged {
        if name.trim().is_empty() || !(value.is_finite() && value > 0.0) {
            return Err((
                format!("modelLoad.{key}.{name}"),
                format!("expected a model name and a number > 0, got {value}"),
            ));
        }
        table.push((name.trim().to_ascii_lowercase(), value));
    }
    table.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    Ok(table)
}
