//! How long a container takes from start to "can infer": declared with
//! `probelint.io/model-load-seconds`, else estimated from what the manifest says (which model,
//! how big, from where, which server), else the policy's default — each with its arithmetic
//! and its source, so that every message can show where its number comes from.
//!
//! The estimate is a range for one start of one pod, `[fast, slow]`:
//! `bytes read ÷ bandwidth of their source + the server's start`, where the bytes are the
//! model's parameters × bytes per parameter (÷ pipeline stages across the pods of a group), the
//! bandwidth is the policy's range for the Hub, NGC, object storage, a PVC, a hostPath, the
//! node's disk or memory, and the start is the policy's range for the server. A finding that
//! says a deadline kills the load is an error only when even the fast end outlasts it; a deadline
//! a fix adds is sized to the slow end. `docs/load-time.md` gives every default with its source.

pub mod model;
pub mod settings;
pub mod size;
pub mod source;

use crate::model::text::shown;
use model::{CommandLine, ModelArg};
use serde::Serialize;
use serde_json::Value;
pub use settings::{Bandwidth, BandwidthFile, ModelLoad, ModelLoadFile, Span};
use size::{Parameters, Precision};
use source::{Fetch, WeightSource};

/// A container's load time, as the range it plausibly falls in, and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadTime {
    /// The quickest plausible load: a deadline shorter than this kills every start mid-load.
    #[serde(rename = "fast_seconds")]
    pub fast: f64,
    /// The slowest plausible load: what a kill deadline a fix adds must outlast. Equal to
    /// `fast` for a declared or assumed load.
    #[serde(rename = "slow_seconds")]
    pub slow: f64,
    #[serde(flatten)]
    pub basis: Basis,
}

/// Where a load time comes from; its `confidence` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "confidence", rename_all = "kebab-case")]
pub enum Basis {
    /// `probelint.io/model-load-seconds` on the object or its pod template.
    Declared,
    /// In strict mode (`allowAnnotationExemptions: false`), a declared load below the fast end
    /// of the engine's estimate: the person judged does not supply the number that judges them,
    /// so the estimate's range stands, each end at least the declared figure.
    Bounded {
        declared: f64,
        estimate: Box<Estimate>,
    },
    /// Computed from the model, its size, its source and the server.
    Estimated(Box<Estimate>),
    /// The server loads models on first request, not at start (Ollama).
    Lazy { server: String },
    /// The policy's `modelLoadSeconds`: the manifest does not say enough to estimate.
    Assumed { why: String },
}

/// The inputs and arithmetic of an estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The model as the manifest names it.
    pub model: String,
    /// Where it was named: `--model`, `vllm serve`, `MODEL_ID`, `storageUri`.
    pub model_from: String,
    pub parameters: Parameters,
    pub precision: Precision,
    /// Bytes this container reads: parameters × bytes per parameter ÷ `pipeline_stages`.
    pub bytes: f64,
    /// Pods of a group that each load only their pipeline stages' layers (1: the whole model).
    pub pipeline_stages: u32,
    pub source: WeightSource,
    /// MB/s at the fast end (the larger) and at the slow end.
    pub bandwidth_mb_per_second: Span,
    pub read_seconds: Span,
    /// The server's name, when known.
    pub server: Option<String>,
    pub start_seconds: Span,
    /// An init container that downloads the weights first (outside this container's load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched_by: Option<Fetch>,
}

impl LoadTime {
    /// A load of exactly `seconds` (declared, or the policy's default).
    pub fn point(seconds: f64, basis: Basis) -> Self {
        LoadTime {
            fast: seconds,
            slow: seconds,
            basis,
        }
    }

    /// Seconds an init container spends downloading the weights before this container starts,
    /// when the manifest says from where: the whole checkpoint at that source's bandwidth, at
    /// the fast and the slow end.
    pub fn fetch_seconds(&self, bandwidth: &Bandwidth) -> Option<Span> {
        let (Basis::Estimated(e) | Basis::Bounded { estimate: e, .. }) = &self.basis else {
            return None;
        };
        let from = e.fetched_by.as_ref()?.from.as_ref()?;
        let whole = e.bytes * f64::from(e.pipeline_stages);
        let rate = from.bandwidth(bandwidth);
        Some(Span {
            fast: whole / (rate.fast * 1e6),
            slow: whole / (rate.slow * 1e6),
        })
    }

    /// Whether the manifest backs this load time (declared, or estimated from a known model);
    /// findings that rest on an assumed one are warnings at most.
    /// The estimate behind this load, where the engine made one (estimated, or bounded in
    /// strict mode).
    pub fn estimate(&self) -> Option<&Estimate> {
        match &self.basis {
            Basis::Estimated(e) | Basis::Bounded { estimate: e, .. } => Some(e),
            _ => None,
        }
    }

    pub fn is_evidence(&self) -> bool {
        !matches!(self.basis, Basis::Assumed { .. })
    }

    /// `120 s from probelint.io/model-load-seconds`, `≈ 241–3100 s`, `300 s by policy default`.
    pub fn short(&self) -> impl std::fmt::Display + '_ {
        shown(move |f| match &self.basis {
            Basis::Declared => write!(
                f,
                "{} from probelint.io/model-load-seconds",
                secs(self.slow)
            ),
            Basis::Estimated(_) | Basis::Lazy { .. } => {
                write!(f, "≈ {}", seconds_range(self.fast, self.slow))
            }
            Basis::Bounded { declared, .. } => write!(
                f,
                "≈ {} (probelint.io/model-load-seconds says {}, below the estimate; strict mode \
                 keeps the estimate)",
                seconds_range(self.fast, self.slow),
                secs(*declared)
            ),
            Basis::Assumed { .. } => write!(f, "{} by policy default", secs(self.slow)),
        })
    }

    /// Whether the load is one number (declared or assumed) rather than a range.
    pub fn is_point(&self) -> bool {
        self.fast == self.slow
    }

    /// How the load time was found, in a sentence fragment (empty when declared).
    pub fn derivation(&self) -> impl std::fmt::Display + '_ {
        shown(move |f| match &self.basis {
            Basis::Declared => Ok(()),
            Basis::Estimated(e) | Basis::Bounded { estimate: e, .. } => {
                write!(f, "{} (", gigabytes(e.bytes))?;
                let per = e.precision.bytes_per_parameter;
                write!(
                    f,
                    "{}: {} parameters × {} byte{}, {}",
                    size::model_name(&e.model),
                    billions(e.parameters.billions),
                    trim(per),
                    if per == 1.0 { "" } else { "s" },
                    e.precision.name
                )?;
                if e.pipeline_stages > 1 {
                    write!(f, ", ÷ {} pipeline stages", e.pipeline_stages)?;
                }
                // The rate low to high, as one says a range; the seconds fast end first.
                let rate = e.bandwidth_mb_per_second;
                write!(f, ") {} at ", e.source)?;
                if rate.is_point() {
                    write!(f, "{}", trim(rate.fast))?;
                } else {
                    write!(f, "{}–{}", trim(rate.slow), trim(rate.fast))?;
                }
                write!(
                    f,
                    " MB/s = {} + {} {} start",
                    seconds_range(e.read_seconds.fast.ceil(), e.read_seconds.slow.ceil()),
                    seconds_range(e.start_seconds.fast, e.start_seconds.slow),
                    e.server.as_deref().unwrap_or("server")
                )?;
                if let Some(fetch) = &e.fetched_by {
                    write!(
                        f,
                        "; init container {:?} downloads it first",
                        fetch.container
                    )?;
                }
                Ok(())
            }
            Basis::Lazy { server } => {
                write!(f, "{server} loads models on first request, not at start")
            }
            Basis::Assumed { why } => f.write_str(why),
        })
    }
}

impl LoadTime {
    /// `120 s from probelint.io/model-load-seconds`, `≈ 765 s (141 GB (…) … + 60 s vLLM start)`.
    pub fn explained(&self) -> impl std::fmt::Display + '_ {
        shown(move |f| match &self.basis {
            Basis::Declared => write!(f, "{}", self.short()),
            _ => write!(f, "{} ({})", self.short(), self.derivation()),
        })
    }
}

impl std::fmt::Display for LoadTime {
    /// `load ≈ 765 s: 141 GB (…) downloaded from the Hugging Face Hub at 200 MB/s = 705 s + 60 s vLLM start`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "load {}", self.short())?;
        match &self.basis {
            Basis::Declared => Ok(()),
            _ => write!(f, ": {}", self.derivation()),
        }
    }
}

/// What the estimate reads of one container.
pub struct Context<'a> {
    pub object: &'a Value,
    pub kind: &'a str,
    pub pod: &'a Value,
    pub container: &'a Value,
    pub image: &'a str,
    /// The recognised server (`model::servers::recognise`: by command, then by image).
    pub server: Option<&'static crate::model::servers::KnownServer>,
}

/// The load time of `cx`'s container: `declared` (the annotation: its seconds, or the text that
/// is not a number), else the estimate, else `default_seconds`.
///
/// `bound_declared` (strict mode): a declared load shorter than the estimate's fast end does not
/// stand; the estimate does, each end at least the declared figure ([`Basis::Bounded`]).
pub fn load_time(
    cx: &Context<'_>,
    declared: Option<Result<f64, String>>,
    default_seconds: f64,
    settings: &ModelLoad,
    bound_declared: bool,
) -> LoadTime {
    let invalid = match declared {
        Some(Ok(seconds)) if bound_declared => {
            return match estimate(cx, settings) {
                Ok(LoadTime {
                    fast,
                    slow,
                    basis: Basis::Estimated(estimate),
                }) if seconds < fast => LoadTime {
                    fast,
                    slow: slow.max(seconds),
                    basis: Basis::Bounded {
                        declared: seconds,
                        estimate,
                    },
                },
                _ => LoadTime::point(seconds, Basis::Declared),
            };
        }
        Some(Ok(seconds)) => return LoadTime::point(seconds, Basis::Declared),
        Some(Err(text)) => Some(text),
        None => None,
    };
    let estimated = estimate(cx, settings);
    match (estimated, invalid) {
        (Ok(load), None) => load,
        (_, Some(text)) => LoadTime::point(
            default_seconds,
            Basis::Assumed {
                why: format!("probelint.io/model-load-seconds {text:?} is not a number of seconds"),
            },
        ),
        (Err(why), None) => LoadTime::point(default_seconds, Basis::Assumed { why }),
    }
}

fn estimate(cx: &Context<'_>, settings: &ModelLoad) -> Result<LoadTime, String> {
    let server_id = cx.server.map(|s| s.id);
    if let Some(server) = cx
        .server
        .filter(|s| s.during_load == crate::model::servers::DuringLoad::Lazy)
    {
        let start = settings.start_seconds(server_id);
        return Ok(LoadTime {
            fast: start.fast,
            slow: start.slow,
            basis: Basis::Lazy {
                server: server.name.to_owned(),
            },
        });
    }
    let line = CommandLine::running(cx.container, cx.image);
    let mut found = model::find(server_id, &line, cx.image, cx.container);
    let mut kserve_storage =
        matches!(found, ModelArg::Found { ref found_in, .. } if found_in == "storageUri");
    // An LLMInferenceService names its model once, for every template.
    if matches!(found, ModelArg::NotFound)
        && cx.kind == "LLMInferenceService"
        && let Some(uri) = cx.object.pointer("/spec/model/uri").and_then(Value::as_str)
    {
        found = ModelArg::Found {
            reference: uri.to_owned(),
            found_in: "spec.model.uri".to_owned(),
        };
        kserve_storage = true;
    }
    let (reference, mut model_from) = match found {
        ModelArg::Found {
            reference,
            found_in,
        } => (reference, found_in),
        ModelArg::Unresolved { found_in, text } => {
            return Err(format!(
                "the model is {text:?} in {found_in}, a value the manifest does not hold"
            ));
        }
        ModelArg::NotFound => {
            return Err("no model named in the container's command, args or env".to_owned());
        }
    };
    // A local path that names no size may be where an init container downloads the model:
    // the download names it (`hf download ID --local-dir PATH`).
    let mut downloaded = None;
    let parameters = match size::parameters(&reference, &settings.parameters_billions) {
        Some(p) => p,
        None => {
            let traced = (reference.starts_with('/'))
                .then(|| source::downloaded_into(&reference, cx.pod))
                .flatten()
                .and_then(|(init, id, from)| {
                    let p = size::parameters(&id, &settings.parameters_billions)?;
                    Some((init, id, from, p))
                });
            let Some((init, id, from, p)) = traced else {
                return Err(format!(
                    "the size of {:?} is not in its name (add it to modelLoad.parametersBillions)",
                    size::model_name(&reference)
                ));
            };
            downloaded = Some((init, id, from));
            p
        }
    };
    // The name that says the size says the precision too.
    let sized_by = downloaded
        .as_ref()
        .map_or(reference.clone(), |(_, id, _)| id.clone());
    let quantization = line
        .flag(&["--quantization", "--quantize", "-q"])
        .map(|(_, v)| v);
    let dtype = line.flag(&["--dtype"]).map(|(_, v)| v);
    let precision = size::precision(
        &sized_by,
        &settings.bytes_per_parameter,
        quantization,
        dtype,
    );
    // Where the weights are read from: a storageUri beside the model (NIM's cache on a PVC)
    // says so even when the model was named elsewhere.
    let storage = match cx.container.get("storageUri").and_then(Value::as_str) {
        Some(uri) => uri,
        None => &reference,
    };
    let kserve_storage = kserve_storage || storage != reference;
    let mut located = source::locate(storage, cx.pod, cx.container, &line, kserve_storage);
    // vLLM's tensorizer reads the serialized weights from its own URI.
    if let Some(from) = source::tensorizer(&line, cx.pod, cx.container) {
        located = source::Located {
            source: from,
            fetched_by: None,
        };
    }
    if let Some((init, id, from)) = downloaded {
        located.fetched_by = Some(source::Fetch {
            container: init,
            from: Some(from),
        });
        model_from = format!("{model_from} {reference}, downloaded there as {id}");
    }
    // NIM fetches the model its image names from NGC, not from the Hub.
    if server_id == Some("nim")
        && model_from == "the image name"
        && located.source == WeightSource::Hub
    {
        located.source = WeightSource::Ngc;
    }
    // A NIMService reads its model store at /model-store: the PVC of its NIMCache (which the
    // NIM Operator filled from NGC beforehand), its own `storage.pvc`, or a `storage.hostPath`
    // (k8s-nim-operator@0464933f api/apps/v1alpha1/nimservice_types.go, GetVolumes).
    if cx.kind == "NIMService"
        && let Some(storage) = cx.object.pointer("/spec/storage")
    {
        let named = |p: &str| {
            storage
                .pointer(p)
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
        };
        if let Some(cache) = named("/nimCache/name") {
            located.source = WeightSource::PersistentVolume {
                volume: format!("NIMCache {cache}"),
                claim: None,
            };
            located.fetched_by = None;
        } else if let Some(claim) = named("/pvc/name") {
            located.source = WeightSource::PersistentVolume {
                volume: "model-store".to_owned(),
                claim: Some(claim.to_owned()),
            };
        } else if named("/hostPath").is_some() {
            located.source = WeightSource::HostPath {
                volume: "model-store".to_owned(),
            };
        }
    }
    // Pipeline stages across the pods of a LeaderWorkerSet group: each pod reads its stages'
    // layers. Tensor-parallel ranks read every file and keep their slice, and a download
    // fetches the whole checkpoint on every node: neither splits.
    let group = if cx.kind == "LeaderWorkerSet" {
        cx.object
            .pointer("/spec/leaderWorkerTemplate/size")
            .and_then(Value::as_u64)
            .unwrap_or(1)
    } else {
        1
    };
    let stages = line.pipeline_parallel();
    let pipeline_stages = if located.source.is_download() {
        1
    } else {
        group.min(stages).clamp(1, u64::from(u32::MAX)) as u32
    };
    let bytes =
        parameters.billions * 1e9 * precision.bytes_per_parameter / f64::from(pipeline_stages);
    let bandwidth = located.source.bandwidth(&settings.bandwidth);
    let read_seconds = bandwidth.map(|rate| bytes / (rate * 1e6));
    let start_seconds = settings.start_seconds(server_id);
    let server = cx.server.map(|s| s.name.to_owned());
    Ok(LoadTime {
        fast: (read_seconds.fast + start_seconds.fast).ceil(),
        slow: (read_seconds.slow + start_seconds.slow).ceil(),
        basis: Basis::Estimated(Box::new(Estimate {
            model: sized_by,
            model_from,
            parameters,
            precision,
            bytes,
            pipeline_stages,
            source: located.source,
            bandwidth_mb_per_second: bandwidth,
            read_seconds,
            server,
            start_seconds,
            fetched_by: located.fetched_by,
        })),
    })
}

/// Seconds without a useless `.0`.
fn secs(value: f64) -> impl std::fmt::Display {
    shown(move |f| write!(f, "{} s", trim(value)))
}

/// `241–3100 s`, or `760 s` when both ends are one number.
pub fn seconds_range(fast: f64, slow: f64) -> impl std::fmt::Display {
    shown(move |f| {
        if fast == slow {
            write!(f, "{}", secs(slow))
        } else {
            write!(f, "{}–{}", trim(fast), secs(slow))
        }
    })
}

fn trim(value: f64) -> impl std::fmt::Display {
    shown(move |f| {
        if value.fract() == 0.0 && value.abs() < 1e15 {
            write!(f, "{}", value as i64)
        } else {
            let text = format!("{value:.2}");
            f.write_str(text.trim_end_matches('0').trim_end_matches('.'))
        }
    })
}

fn billions(value: f64) -> impl std::fmt::Display {
    shown(move |f| {
        if value >= 1.0 {
            write!(f, "{}B", trim((value * 10.0).round() / 10.0))
        } else {
            write!(f, "{}M", trim((value * 1000.0).round()))
        }
    })
}

/// `141 GB`, `2.5 GB`, `250 MB` (decimal units, as model cards and disks state them).
pub fn gigabytes(bytes: f64) -> impl std::fmt::Display {
    shown(move |f| {
        let gb = bytes / 1e9;
        if gb >= 10.0 {
            write!(f, "{} GB", gb.round() as i64)
        } else if gb >= 1.0 {
            write!(f, "{:.1} GB", gb)
        } else {
            write!(f, "{} MB", (bytes / 1e6).round() as i64)
        }
    })
}

#[cfg(test)]
mod tests;
