//! The CPU kernel: plain loops, f32 accumulation in eight lanes (which the compiler vectorises
//! in release builds). Correctness first: this is the path CI tests.

use super::{Kernel, KernelError, MemoryReport};
use crate::model::Activation;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A host tensor that counts its bytes in the kernel's "device memory" while it lives, the way
/// a GPU allocator would.
pub struct CpuTensor {
    data: Vec<f32>,
    live: Arc<AtomicU64>,
}

impl CpuTensor {
    fn new(data: Vec<f32>, live: &Arc<AtomicU64>) -> Self {
        live.fetch_add(bytes_of(&data), Ordering::Relaxed);
        CpuTensor {
            data,
            live: Arc::clone(live),
        }
    }
}

impl Drop for CpuTensor {
    fn drop(&mut self) {
        self.live.fetch_sub(bytes_of(&self.data), Ordering::Relaxed);
    }
}

fn bytes_of(data: &[f32]) -> u64 {
    (data.len() * 4) as u64
}

/// The CPU device. Its "accelerator memory" is the bytes of live tensors plus leaked blocks, so
/// the memory readiness check behaves on the CPU as it does on a GPU.
#[derive(Default)]
pub struct CpuKernel {
    live: Arc<AtomicU64>,
    leaked: Vec<Vec<u8>>,
    leaked_bytes: u64,
}

impl CpuKernel {
    pub fn new() -> Self {
        Self::default()
    }
}

/// Dot product with eight independent accumulators.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks_a = a.chunks_exact(8);
    let chunks_b = b.chunks_exact(8);
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for ((sum, x), y) in acc.iter_mut().zip(ca).zip(cb) {
            *sum += x * y;
        }
    }
    acc.iter().sum::<f32>() + tail
}

impl Kernel for CpuKernel {
    type Tensor = CpuTensor;

    fn kind(&self) -> &'static str {
        "cpu"
    }

    fn describe(&self) -> String {
        "cpu".into()
    }

    fn upload(&mut self, data: Vec<f32>) -> Result<CpuTensor, KernelError> {
        Ok(CpuTensor::new(data, &self.live))
    }

    fn dense(
        &mut self,
        weight: &CpuTensor,
        bias: &CpuTensor,
        input: &CpuTensor,
        outputs: usize,
        inputs: usize,
        activation: Activation,
    ) -> Result<CpuTensor, KernelError> {
        if weight.data.len() != outputs * inputs
            || bias.data.len() != outputs
            || input.data.len() != inputs
        {
            return Err(KernelError(format!(
                "dense: shapes do not match (weight {}, bias {}, input {}, layer {outputs}x{inputs})",
                weight.data.len(),
                bias.data.len(),
                input.data.len()
            )));
        }
        let out = weight
            .data
            .chunks_exact(inputs)
            .zip(&bias.data)
            .map(|(row, &b)| activation.apply(dot(row, &input.data) + b))
            .collect();
        Ok(CpuTensor::new(out, &self.live))
    }

    fn download(&mut self, tensor: &CpuTensor) -> Result<Vec<f32>, KernelError> {
        Ok(tensor.data.clone())
    }

    fn leak(&mut self, bytes: usize) -> Result<(), KernelError> {
        // A non-zero fill writes every page, so the leak is resident (RSS grows), not just
        // reserved address space.
        let mut block = Vec::new();
        block
            .try_reserve_exact(bytes)
            .map_err(|e| KernelError(format!("leak of {bytes} bytes: {e}")))?;
        block.resize(bytes, 0xa5u8);
        self.leaked.push(block);
        self.leaked_bytes += bytes as u64;
        Ok(())
    }

    fn memory(&mut self) -> MemoryReport {
        MemoryReport {
            used_bytes: self.live.load(Ordering::Relaxed) + self.leaked_bytes,
            total_bytes: None,
            source: "cpu-kernel",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_matches_naive_loops() {
        let mut k = CpuKernel::new();
        let (outputs, inputs) = (5, 19);
        let w: Vec<f32> = (0..outputs * inputs)
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        let b: Vec<f32> = (0..outputs).map(|i| i as f32 * 0.1 - 0.2).collect();
        let x: Vec<f32> = (0..inputs).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: Vec<f32> = (0..outputs)
            .map(|r| {
                let s: f32 = (0..inputs).map(|c| w[r * inputs + c] * x[c]).sum();
                (s + b[r]).max(0.0)
            })
            .collect();
        let (wt, bt, xt) = (
            k.upload(w).expect("upload"),
            k.upload(b).expect("upload"),
            k.upload(x).expect("upload"),
        );
        let y = k
            .dense(&wt, &bt, &xt, outputs, inputs, Activation::Relu)
            .expect("dense");
        let y = k.download(&y).expect("download");
        for (a, e) in y.iter().zip(&naive) {
            assert!((a - e).abs() < 1e-5, "{a} vs {e}");
        }
        assert!(
            k.dense(&wt, &bt, &xt, outputs, inputs + 1, Activation::Relu)
                .is_err()
        );
    }

    #[test]
    fn memory_counts_live_tensors_and_leaks() {
        let mut k = CpuKernel::new();
        let t = k.upload(vec![0.0; 256]).expect("upload");
        assert_eq!(k.memory().used_bytes, 1024);
        drop(t);
        assert_eq!(k.memory().used_bytes, 0);
        k.leak(4096).expect("leak");
        assert_eq!(k.memory().used_bytes, 4096);
    }
}
