//! The `modelLoad:` section of the policy: the constants the load-time estimate uses.
//!
//! Every default is in `policies/default.yaml` with where it comes from; `docs/load-time.md`
//! explains the formula. A user policy overrides single keys: its maps add to the built-in ones.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// A figure known only as a range: its value at the fast end of a load and at the slow end.
/// For a bandwidth the fast end is the larger number, for seconds the smaller.
///
/// A finding that says a deadline kills a load rests on the fast end (even the quickest load
/// outlasts it); a deadline a fix adds is sized to the slow end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Span {
    pub fast: f64,
    pub slow: f64,
}

impl Span {
    /// One value at both ends: a declared load, or a figure the user measured.
    pub fn point(value: f64) -> Self {
        Span {
            fast: value,
            slow: value,
        }
    }

    pub fn is_point(&self) -> bool {
        self.fast == self.slow
    }

    pub(crate) fn map(self, f: impl Fn(f64) -> f64) -> Self {
        Span {
            fast: f(self.fast),
            slow: f(self.slow),
        }
    }
}

/// A range as a policy writes it: `{fast: 1000, slow: 50}`, or one number for both ends.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its schema is used: `Span` deserializes itself, with clearer errors.
enum SpanFile {
    /// One value at both ends.
    Point(f64),
    /// The value at the fast end and at the slow end of a load.
    Range { fast: f64, slow: f64 },
}

impl JsonSchema for Span {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Range".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = SpanFile::json_schema(generator);
        // Both ends are required and nothing else is allowed, as `Span` reads them.
        if let Some(any) = schema
            .get_mut("anyOf")
            .and_then(serde_json::Value::as_array_mut)
        {
            for variant in any.iter_mut().filter(|v| v.get("properties").is_some()) {
                variant["additionalProperties"] = serde_json::Value::Bool(false);
            }
        }
        schema
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Span;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number, or a range {fast: N, slow: N}")
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Span, E> {
                Ok(Span::point(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Span, E> {
                Ok(Span::point(v as f64))
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Span, E> {
                Ok(Span::point(v as f64))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Span, A::Error> {
                use serde::de::Error;
                let (mut fast, mut slow) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    let slot = match key.as_str() {
                        "fast" => &mut fast,
                        "slow" => &mut slow,
                        other => return Err(A::Error::unknown_field(other, &["fast", "slow"])),
                    };
                    if slot.is_some() {
                        return Err(A::Error::custom(format_args!("`{key}` given twice")));
                    }
                    *slot = Some(map.next_value::<f64>()?);
                }
                match (fast, slow) {
                    (Some(fast), Some(slow)) => Ok(Span { fast, slow }),
                    (None, _) => Err(A::Error::missing_field("fast")),
                    (_, None) => Err(A::Error::missing_field("slow")),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

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
    /// Each a range `{fast, slow}` or one number for both.
    #[serde(default)]
    pub server_start_seconds: BTreeMap<String, Span>,
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
    /// The shortest budget, in seconds, of a startupProbe that a fix adds to a container that
    /// had no kill deadline at all (no liveness, no startupProbe): the fix creates the deadline,
    /// so it must lie beyond any load the container may have. Default 3600.
    pub new_deadline_floor_seconds: Option<f64>,
}

/// `modelLoad.bandwidthMBPerSecond` as written: each a range `{fast, slow}` (the best and the
/// worst plausible rate) or one number for both.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BandwidthFile {
    /// Downloads from the Hugging Face Hub at container start.
    pub hub: Option<Span>,
    /// NIM's download of its model profile from NGC at container start.
    pub ngc: Option<Span>,
    /// Downloads from object storage (s3://, gs://, azure://, https://).
    pub object_store: Option<Span>,
    /// Reads from a PersistentVolumeClaim or another network volume (nfs, csi).
    pub persistent_volume: Option<Span>,
    /// Reads from a hostPath volume (the node's local disk).
    pub host_path: Option<Span>,
    /// Reads from an emptyDir on the node's disk, from an image volume, or from the image itself.
    pub node_disk: Option<Span>,
    /// Reads from a memory-backed emptyDir (`medium: Memory`).
    pub memory: Option<Span>,
}

/// MB/s for each source of weights, every one set: at the fast end (the larger) and the slow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    pub hub: Span,
    pub ngc: Span,
    pub object_store: Span,
    pub persistent_volume: Span,
    pub host_path: Span,
    pub node_disk: Span,
    pub memory: Span,
}

/// The effective `modelLoad:` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelLoad {
    pub bandwidth: Bandwidth,
    /// By server id, with `default`.
    pub server_start_seconds: BTreeMap<String, Span>,
    /// Lower-cased name prefixes with their parameter counts in billions, longest first.
    pub parameters_billions: Vec<(String, f64)>,
    /// Lower-cased name prefixes with their checkpoints' bytes per parameter, longest first.
    pub bytes_per_parameter: Vec<(String, f64)>,
    pub startup_floor_seconds: f64,
    pub new_deadline_floor_seconds: f64,
}

impl ModelLoad {
    /// Seconds server `id` needs after its weights are read, at the fast and the slow end.
    pub fn start_seconds(&self, id: Option<&str>) -> Span {
        id.and_then(|id| self.server_start_seconds.get(id))
            .or_else(|| self.server_start_seconds.get("default"))
            .copied()
            .unwrap_or(Span::point(0.0))
    }

    /// Merges `user` over `base`: scalars replace, maps add keys. Errors name the key.
    pub(crate) fn merge(
        base: ModelLoadFile,
        user: ModelLoadFile,
    ) -> Result<Self, (String, String)> {
        let b = base.bandwidth_mb_per_second.unwrap_or_default();
        let u = user.bandwidth_mb_per_second.unwrap_or_default();
        let speed = |key: &str, user: Option<Span>, base: Option<Span>| {
            let key = format!("modelLoad.bandwidthMBPerSecond.{key}");
            let value = user
                .or(base)
                .ok_or_else(|| (key.clone(), "missing from the built-in policy".to_owned()))?;
            for end in [value.fast, value.slow] {
                if !(end.is_finite() && end > 0.0) {
                    return Err((key, format!("expected MB/s > 0, got {end}")));
                }
            }
            if value.fast < value.slow {
                return Err((
                    key,
                    format!(
                        "the fast end ({}) is a lower rate than the slow end ({}): fast is the \
                         best plausible bandwidth",
                        value.fast, value.slow
                    ),
                ));
            }
            Ok(value)
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
            let key = || format!("modelLoad.serverStartSeconds.{id}");
            for end in [seconds.fast, seconds.slow] {
                if !(end.is_finite() && end >= 0.0) {
                    return Err((
                        key(),
                        format!("expected a number of seconds ≥ 0, got {end}"),
                    ));
                }
            }
            if seconds.fast > seconds.slow {
                return Err((
                    key(),
                    format!(
                        "the fast end ({} s) is longer than the slow end ({} s)",
                        seconds.fast, seconds.slow
                    ),
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
        let floor = |key: &str, user: Option<f64>, base: Option<f64>, default: f64| {
            let seconds = user.or(base).unwrap_or(default);
            if seconds.is_finite() && seconds >= 0.0 {
                Ok(seconds)
            } else {
                Err((
                    format!("modelLoad.{key}"),
                    format!("expected a number of seconds ≥ 0, got {seconds}"),
                ))
            }
        };
        let startup_floor_seconds = floor(
            "startupFloorSeconds",
            user.startup_floor_seconds,
            base.startup_floor_seconds,
            1200.0,
        )?;
        let new_deadline_floor_seconds = floor(
            "newDeadlineFloorSeconds",
            user.new_deadline_floor_seconds,
            base.new_deadline_floor_seconds,
            3600.0,
        )?;
        Ok(ModelLoad {
            bandwidth,
            server_start_seconds,
            parameters_billions,
            bytes_per_parameter,
            startup_floor_seconds,
            new_deadline_floor_seconds,
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
