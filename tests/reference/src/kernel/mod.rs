//! The compute kernel behind the model: one small trait, a CPU implementation, and (with the
//! `cuda` feature) a GPU one. Everything above the trait — loading, the forward pass, smoke
//! checks, faults, probes — is the same code for both, so the CPU path that CI tests is the path
//! the GPU image runs, minus three functions.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;

use crate::model::{Activation, ModelError, ModelFile};

/// A failure inside the kernel (allocation, launch, copy).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct KernelError(pub String);

/// Memory as the device sees it: on a GPU what NVML reports, on the CPU what the kernel holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    pub used_bytes: u64,
    /// Capacity, when the device has a meaningful one.
    pub total_bytes: Option<u64>,
    /// Where `used_bytes` comes from (shown in `/readyz` and `/metrics`).
    pub source: &'static str,
}

/// The operations the forward pass needs from a device.
pub trait Kernel {
    /// A buffer of f32 living on the device.
    type Tensor;

    /// Short device kind: `cpu` or `cuda`.
    fn kind(&self) -> &'static str;

    /// Human description (`cpu`, `cuda:0 NVIDIA H200`).
    fn describe(&self) -> String;

    /// Moves host values to the device (the CPU kernel keeps the `Vec` as is).
    fn upload(&mut self, data: Vec<f32>) -> Result<Self::Tensor, KernelError>;

    /// `activation(weight · input + bias)`, `weight` row-major `[outputs, inputs]`.
    fn dense(
        &mut self,
        weight: &Self::Tensor,
        bias: &Self::Tensor,
        input: &Self::Tensor,
        outputs: usize,
        inputs: usize,
        activation: Activation,
    ) -> Result<Self::Tensor, KernelError>;

    /// Copies a tensor back to the host, waiting for the device to finish.
    fn download(&mut self, tensor: &Self::Tensor) -> Result<Vec<f32>, KernelError>;

    /// Allocates `bytes` of device memory, touches it, and never frees it (the leak fault).
    fn leak(&mut self, bytes: usize) -> Result<(), KernelError>;

    /// Current memory use, for the readiness memory check.
    fn memory(&mut self) -> MemoryReport;
}

/// Why uploading a model failed.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("device: {0}")]
    Kernel(#[from] KernelError),
}

struct DeviceLayer<T> {
    weight: T,
    bias: T,
    inputs: usize,
    outputs: usize,
    activation: Activation,
}

/// The network on a device: the same forward pass for every kernel.
pub struct Mlp<K: Kernel> {
    layers: Vec<DeviceLayer<K::Tensor>>,
    bytes: u64,
}

impl<K: Kernel> Mlp<K> {
    /// Converts and uploads one layer at a time (peak host memory: the file plus one layer).
    pub fn upload(kernel: &mut K, file: &ModelFile<'_>) -> Result<Self, UploadError> {
        let mut layers = Vec::with_capacity(file.architecture.layers.len());
        for (i, shape) in file.architecture.layers.iter().enumerate() {
            let (weight, bias) = file.layer(i)?;
            layers.push(DeviceLayer {
                weight: kernel.upload(weight)?,
                bias: kernel.upload(bias)?,
                inputs: shape.inputs,
                outputs: shape.outputs,
                activation: shape.activation,
            });
        }
        Ok(Mlp {
            layers,
            bytes: file.architecture.weight_bytes(),
        })
    }

    /// Bytes of weights and biases on the device.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn input_dim(&self) -> usize {
        self.layers.first().map_or(0, |l| l.inputs)
    }

    /// One forward pass. An input of the wrong length is an error, not a panic: a request or a
    /// recorded input for a different model must fail cleanly.
    pub fn forward(&self, kernel: &mut K, input: &[f32]) -> Result<Vec<f32>, KernelError> {
        if input.len() != self.input_dim() {
            return Err(KernelError(format!(
                "input has {} values, the model takes {}",
                input.len(),
                self.input_dim()
            )));
        }
        let mut x = kernel.upload(input.to_vec())?;
        for layer in &self.layers {
            x = kernel.dense(
                &layer.weight,
                &layer.bias,
                &x,
                layer.outputs,
                layer.inputs,
                layer.activation,
            )?;
        }
        kernel.download(&x)
    }
}
