//! The reference model: a small multi-layer perceptron stored as safetensors.
//!
//! The model exists so that the server's smoke inference is a *real* forward pass whose result
//! can be wrong: a truncated, corrupted or different weights file produces a different output
//! for the recorded fixed input, and readiness says so. Weights are generated deterministically
//! from a seed (same seed and size, same bytes), one tensor at a time, so that a file of several
//! GB can be written without holding it in memory.
//!
//! Layout: `layers.{i}.weight` is `[outputs, inputs]` row-major f32 (the PyTorch convention),
//! `layers.{i}.bias` is `[outputs]`. The safetensors header metadata holds one key,
//! [`METADATA_KEY`], whose value is a JSON [`ModelMetadata`] (one key only because the crate
//! writes its metadata from a `HashMap`, whose order would make the bytes non-deterministic).

use safetensors::tensor::{Dtype, SafeTensors, View};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Format tag written into the metadata and the expected-output file.
pub const FORMAT: &str = "probelint-reference/v1";
/// The one safetensors metadata key this crate writes.
pub const METADATA_KEY: &str = "probelint_reference";
/// Number of dense layers `make-model` writes by default.
pub const DEFAULT_LAYERS: usize = 4;
/// Width of the model's output by default: small, so the expected output is readable.
pub const DEFAULT_OUTPUT_DIM: usize = 16;
/// Smallest hidden width accepted (a 1-wide layer would make a trivially degenerate model).
pub const MIN_HIDDEN: usize = 4;

/// Errors reading, writing or checking a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("safetensors: {0}")]
    SafeTensors(#[from] safetensors::SafeTensorError),
    #[error("expected-output file {path}: {message}")]
    Expected { path: PathBuf, message: String },
}

/// The nonlinearity after a dense layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    Identity,
    Relu,
    /// GELU, tanh approximation (what GPU kernels usually implement).
    Gelu,
}

const GELU_C: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)

impl Activation {
    /// Applies the activation in f32 (the serving kernels' precision).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::Gelu => {
                let c = GELU_C as f32;
                0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
            }
        }
    }

    /// Applies the activation in f64, for the recorded reference output.
    pub fn apply_f64(self, x: f64) -> f64 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::Gelu => 0.5 * x * (1.0 + (GELU_C * (x + 0.044_715 * x * x * x)).tanh()),
        }
    }

    /// Small integer code used by the GPU kernel.
    pub fn code(self) -> i32 {
        match self {
            Activation::Identity => 0,
            Activation::Relu => 1,
            Activation::Gelu => 2,
        }
    }
}

/// Shape of one dense layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerShape {
    pub inputs: usize,
    pub outputs: usize,
    pub activation: Activation,
}

impl LayerShape {
    /// Weights plus biases.
    pub fn params(&self) -> u64 {
        (self.inputs as u64) * (self.outputs as u64) + self.outputs as u64
    }
}

/// The whole network's shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Architecture {
    pub layers: Vec<LayerShape>,
}

impl Architecture {
    /// The widest architecture of `layers` dense layers (hidden width `d`, output `output_dim`)
    /// whose parameter count does not exceed `params`. Hidden layers alternate ReLU (first) and
    /// GELU, the last is linear, so both activations run in every forward pass.
    pub fn for_params(params: u64, layers: usize, output_dim: usize) -> Result<Self, ModelError> {
        if layers < 2 {
            return Err(ModelError::Invalid(format!(
                "a model needs at least 2 layers, got {layers}"
            )));
        }
        if output_dim == 0 {
            return Err(ModelError::Invalid(
                "output dimension must be at least 1".into(),
            ));
        }
        let count = |d: u64| -> u64 {
            let hidden = (layers as u64 - 1).saturating_mul(d.saturating_mul(d).saturating_add(d));
            hidden.saturating_add(d.saturating_mul(output_dim as u64) + output_dim as u64)
        };
        let min = count(MIN_HIDDEN as u64);
        if params < min {
            return Err(ModelError::Invalid(format!(
                "--params {params} is too small for {layers} layers: at least {min}"
            )));
        }
        // Largest d with count(d) <= params: start from the quadratic's root, then correct.
        let l = (layers - 1) as f64;
        let mut d = ((params as f64) / l).sqrt().max(MIN_HIDDEN as f64) as u64;
        while d > MIN_HIDDEN as u64 && count(d) > params {
            d -= 1;
        }
        while count(d + 1) <= params {
            d += 1;
        }
        let d = usize::try_from(d)
            .map_err(|_| ModelError::Invalid(format!("--params {params} is too large")))?;
        let layers = (0..layers)
            .map(|i| {
                let last = i == layers - 1;
                LayerShape {
                    inputs: d,
                    outputs: if last { output_dim } else { d },
                    activation: if last {
                        Activation::Identity
                    } else if i == 0 {
                        Activation::Relu
                    } else {
                        Activation::Gelu
                    },
                }
            })
            .collect();
        Ok(Architecture { layers })
    }

    pub fn input_dim(&self) -> usize {
        self.layers.first().map_or(0, |l| l.inputs)
    }

    pub fn output_dim(&self) -> usize {
        self.layers.last().map_or(0, |l| l.outputs)
    }

    pub fn params(&self) -> u64 {
        self.layers.iter().map(LayerShape::params).sum()
    }

    /// Size of the f32 weights and biases in bytes.
    pub fn weight_bytes(&self) -> u64 {
        self.params() * 4
    }

    /// Checks that consecutive layers fit together.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.layers.is_empty() {
            return Err(ModelError::Invalid("model has no layers".into()));
        }
        for (i, pair) in self.layers.windows(2).enumerate() {
            if pair[0].outputs != pair[1].inputs {
                return Err(ModelError::Invalid(format!(
                    "layer {i} has {} outputs but layer {} has {} inputs",
                    pair[0].outputs,
                    i + 1,
                    pair[1].inputs
                )));
            }
        }
        if self.layers.iter().any(|l| l.inputs == 0 || l.outputs == 0) {
            return Err(ModelError::Invalid("a layer has a zero dimension".into()));
        }
        Ok(())
    }
}

/// What the safetensors header records about the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelMetadata {
    pub format: String,
    pub seed: u64,
    pub params: u64,
    pub activations: Vec<Activation>,
}

/// Absolute plus relative tolerance of the smoke comparison.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub abs: f32,
    pub rel: f32,
}

impl Default for Tolerance {
    /// Loose enough for f32 accumulation in any order (CPU loops, cuBLAS) against the f64
    /// reference; far tighter than what a wrong or corrupted weight does to the output.
    fn default() -> Self {
        Tolerance {
            abs: 1e-3,
            rel: 1e-3,
        }
    }
}

/// The fixed input and its recorded output: `FILE.expected.json` beside the weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    pub format: String,
    pub seed: u64,
    pub params: u64,
    pub architecture: Architecture,
    pub input: Vec<f32>,
    pub output: Vec<f32>,
    /// Sum of `output` (f64): a one-number fingerprint for logs and humans.
    pub output_checksum: f64,
    pub tolerance: Tolerance,
}

/// How an output compares with the recorded one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    pub ok: bool,
    /// Largest absolute difference (NaN when the output has a NaN).
    pub max_abs_error: f64,
    pub checksum: f64,
}

impl Expected {
    /// Compares an output element by element: `|y - e| <= abs + rel * |e|`. NaN never passes.
    pub fn compare(&self, output: &[f32]) -> Comparison {
        let checksum = output.iter().map(|&v| f64::from(v)).sum();
        if output.len() != self.output.len() {
            return Comparison {
                ok: false,
                max_abs_error: f64::INFINITY,
                checksum,
            };
        }
        let mut ok = true;
        let mut max_abs_error = 0.0f64;
        for (&y, &e) in output.iter().zip(&self.output) {
            let diff = (y - e).abs();
            let bound = self.tolerance.abs + self.tolerance.rel * e.abs();
            // NaN compares as neither: a NaN difference fails.
            if diff.is_nan() || diff > bound {
                ok = false;
            }
            if diff.is_nan() || f64::from(diff) > max_abs_error {
                max_abs_error = f64::from(diff);
                if diff.is_nan() {
                    break;
                }
            }
        }
        Comparison {
            ok,
            max_abs_error,
            checksum,
        }
    }

    pub fn read(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io {
            path: path.to_owned(),
            source,
        })?;
        let expected: Expected = serde_json::from_str(&text).map_err(|e| ModelError::Expected {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if expected.input.len() != expected.architecture.input_dim()
            || expected.output.len() != expected.architecture.output_dim()
        {
            return Err(ModelError::Expected {
                path: path.to_owned(),
                message: "input/output length does not match the recorded architecture".into(),
            });
        }
        Ok(expected)
    }
}

/// `FILE.expected.json` for a model at `FILE`.
pub fn expected_path(model: &Path) -> PathBuf {
    let mut name = OsString::from(model.as_os_str());
    name.push(".expected.json");
    PathBuf::from(name)
}

/// SplitMix64: tiny, fast, and the same on every platform, which is all determinism needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), with 24 bits (exactly representable in f32).
    fn next_signed_unit(&mut self) -> f32 {
        let bits = (self.next_u64() >> 40) as u32; // 24 bits
        (bits as f32 / (1u32 << 23) as f32) - 1.0
    }
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Deterministic values for the tensor `name`: uniform in [-scale, scale).
fn generate(seed: u64, name: &str, len: usize, scale: f32) -> Vec<f32> {
    let mut rng = SplitMix64(seed ^ fnv1a(name));
    (0..len).map(|_| rng.next_signed_unit() * scale).collect()
}

/// Weight scale: variance 1/fan_in (Xavier-like), so activations stay of order one at any width.
fn weight_scale(inputs: usize) -> f32 {
    (3.0 / inputs as f64).sqrt() as f32
}

const BIAS_SCALE: f32 = 0.1;

pub fn weight_name(layer: usize) -> String {
    format!("layers.{layer}.weight")
}

pub fn bias_name(layer: usize) -> String {
    format!("layers.{layer}.bias")
}

/// The generated weights of one layer (row-major `[outputs, inputs]`) and its bias.
pub fn generate_layer(seed: u64, index: usize, shape: &LayerShape) -> (Vec<f32>, Vec<f32>) {
    let weight = generate(
        seed,
        &weight_name(index),
        shape.inputs * shape.outputs,
        weight_scale(shape.inputs),
    );
    let bias = generate(seed, &bias_name(index), shape.outputs, BIAS_SCALE);
    (weight, bias)
}

/// The fixed smoke input for a model of this seed.
pub fn fixed_input(seed: u64, dim: usize) -> Vec<f32> {
    generate(seed, "input", dim, 1.0)
}

/// A tensor whose bytes are generated when the writer asks for them, so that writing a model
/// holds one tensor in memory at a time.
struct LazyTensor {
    seed: u64,
    name: String,
    shape: Vec<usize>,
    scale: f32,
}

impl View for LazyTensor {
    fn dtype(&self) -> Dtype {
        Dtype::F32
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        let len = self.shape.iter().product();
        let values = generate(self.seed, &self.name, len, self.scale);
        Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    fn data_len(&self) -> usize {
        self.shape.iter().product::<usize>() * 4
    }
}

/// The network's output in f64 for `input`, regenerating one layer at a time from the seed.
pub fn reference_forward(seed: u64, arch: &Architecture, input: &[f32]) -> Vec<f32> {
    let mut x: Vec<f64> = input.iter().map(|&v| f64::from(v)).collect();
    for (i, layer) in arch.layers.iter().enumerate() {
        let (weight, bias) = generate_layer(seed, i, layer);
        x = weight
            .chunks_exact(layer.inputs)
            .zip(&bias)
            .map(|(row, &b)| {
                let dot: f64 = row.iter().zip(&x).map(|(&w, &v)| f64::from(w) * v).sum();
                layer.activation.apply_f64(dot + f64::from(b))
            })
            .collect();
    }
    x.iter().map(|&v| v as f32).collect()
}

/// Writes `out` (safetensors) and `out.expected.json`. Deterministic: the same `params`,
/// `seed`, `layers` and `output_dim` give the same bytes.
pub fn make_model(
    params: u64,
    seed: u64,
    layers: usize,
    output_dim: usize,
    out: &Path,
) -> Result<Expected, ModelError> {
    let arch = Architecture::for_params(params, layers, output_dim)?;
    let metadata = ModelMetadata {
        format: FORMAT.into(),
        seed,
        params: arch.params(),
        activations: arch.layers.iter().map(|l| l.activation).collect(),
    };
    let metadata_json =
        serde_json::to_string(&metadata).map_err(|e| ModelError::Invalid(e.to_string()))?;
    let tensors: Vec<(String, LazyTensor)> = arch
        .layers
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| {
            [
                (
                    weight_name(i),
                    LazyTensor {
                        seed,
                        name: weight_name(i),
                        shape: vec![layer.outputs, layer.inputs],
                        scale: weight_scale(layer.inputs),
                    },
                ),
                (
                    bias_name(i),
                    LazyTensor {
                        seed,
                        name: bias_name(i),
                        shape: vec![layer.outputs],
                        scale: BIAS_SCALE,
                    },
                ),
            ]
        })
        .collect();
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| ModelError::Io {
            path: parent.to_owned(),
            source,
        })?;
    }
    let info = HashMap::from([(METADATA_KEY.to_owned(), metadata_json)]);
    safetensors::serialize_to_file(tensors, Some(info), out)?;
    // The writer goes through a 0600 temporary file; a model is meant to be read by the
    // server, which may run as another user (an init container writes it, say).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o644)).map_err(
            |source| ModelError::Io {
                path: out.to_owned(),
                source,
            },
        )?;
    }

    let input = fixed_input(seed, arch.input_dim());
    let output = reference_forward(seed, &arch, &input);
    let expected = Expected {
        format: FORMAT.into(),
        seed,
        params: arch.params(),
        output_checksum: output.iter().map(|&v| f64::from(v)).sum(),
        architecture: arch,
        input,
        output,
        tolerance: Tolerance::default(),
    };
    let path = expected_path(out);
    let text =
        serde_json::to_string_pretty(&expected).map_err(|e| ModelError::Invalid(e.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|source| ModelError::Io { path, source })?;
    Ok(expected)
}

/// A parsed model file: the architecture, with each layer's f32 values converted on demand so
/// that uploading to a device holds the file plus one layer, not two copies of the model.
pub struct ModelFile<'a> {
    tensors: SafeTensors<'a>,
    pub architecture: Architecture,
    pub metadata: Option<ModelMetadata>,
}

impl<'a> ModelFile<'a> {
    /// Parses and validates the header: every `layers.{i}` pair present, f32, shapes chained.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ModelError> {
        let (_, header) = SafeTensors::read_metadata(bytes)?;
        let metadata = header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(METADATA_KEY))
            .map(|text| serde_json::from_str::<ModelMetadata>(text))
            .transpose()
            .map_err(|e| ModelError::Invalid(format!("bad {METADATA_KEY} metadata: {e}")))?;
        let tensors = SafeTensors::deserialize(bytes)?;
        let mut layers = Vec::new();
        for i in 0.. {
            let Ok(weight) = tensors.tensor(&weight_name(i)) else {
                break;
            };
            let bias = tensors.tensor(&bias_name(i)).map_err(|_| {
                ModelError::Invalid(format!(
                    "{} is present but {} is not",
                    weight_name(i),
                    bias_name(i)
                ))
            })?;
            if weight.dtype() != Dtype::F32 || bias.dtype() != Dtype::F32 {
                return Err(ModelError::Invalid(format!("layer {i} is not f32")));
            }
            let [outputs, inputs] = weight.shape() else {
                return Err(ModelError::Invalid(format!(
                    "{} has shape {:?}, expected [outputs, inputs]",
                    weight_name(i),
                    weight.shape()
                )));
            };
            if bias.shape() != [*outputs] {
                return Err(ModelError::Invalid(format!(
                    "{} has shape {:?}, expected [{outputs}]",
                    bias_name(i),
                    bias.shape()
                )));
            }
            let activation = match &metadata {
                Some(m) => *m.activations.get(i).ok_or_else(|| {
                    ModelError::Invalid(format!("metadata names no activation for layer {i}"))
                })?,
                None => Activation::Identity,
            };
            layers.push(LayerShape {
                inputs: *inputs,
                outputs: *outputs,
                activation,
            });
        }
        if let Some(m) = &metadata
            && m.activations.len() != layers.len()
        {
            return Err(ModelError::Invalid(format!(
                "metadata lists {} activations for {} layers",
                m.activations.len(),
                layers.len()
            )));
        }
        let architecture = Architecture { layers };
        architecture.validate()?;
        Ok(ModelFile {
            tensors,
            architecture,
            metadata,
        })
    }

    /// Layer `index`'s weights (row-major `[outputs, inputs]`) and bias as f32.
    pub fn layer(&self, index: usize) -> Result<(Vec<f32>, Vec<f32>), ModelError> {
        let read = |name: String| -> Result<Vec<f32>, ModelError> {
            let view = self.tensors.tensor(&name)?;
            Ok(view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        Ok((read(weight_name(index))?, read(bias_name(index))?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architecture_fits_the_parameter_budget() {
        for params in [200u64, 1_000, 50_000, 1_000_000, 123_456_789] {
            let arch = Architecture::for_params(params, 4, 16).expect("fits");
            assert!(arch.params() <= params, "{params}");
            let wider = Architecture {
                layers: arch
                    .layers
                    .iter()
                    .map(|l| LayerShape {
                        inputs: l.inputs + 1,
                        outputs: if l.outputs == 16 { 16 } else { l.outputs + 1 },
                        ..*l
                    })
                    .collect(),
            };
            assert!(wider.params() > params, "{params}: not the widest");
            arch.validate().expect("valid");
        }
        assert!(Architecture::for_params(10, 4, 16).is_err());
        assert!(Architecture::for_params(1000, 1, 16).is_err());
    }

    #[test]
    fn compare_rejects_nan_and_wrong_values() {
        let arch = Architecture::for_params(1000, 2, 2).expect("fits");
        let e = Expected {
            format: FORMAT.into(),
            seed: 1,
            params: arch.params(),
            architecture: arch,
            input: vec![],
            output: vec![1.0, -2.0],
            output_checksum: -1.0,
            tolerance: Tolerance::default(),
        };
        assert!(e.compare(&[1.0, -2.0]).ok);
        assert!(e.compare(&[1.0005, -2.001]).ok);
        assert!(!e.compare(&[1.1, -2.0]).ok);
        assert!(!e.compare(&[f32::NAN, -2.0]).ok);
        assert!(e.compare(&[f32::NAN, -2.0]).max_abs_error.is_nan());
        assert!(!e.compare(&[1.0]).ok);
    }

    #[test]
    fn expected_path_appends_suffix() {
        assert_eq!(
            expected_path(Path::new("/m/model.safetensors")),
            PathBuf::from("/m/model.safetensors.expected.json")
        );
    }
}
