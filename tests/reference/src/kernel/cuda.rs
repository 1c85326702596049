//! The GPU kernel: cuBLAS `sgemv` for the matrix product, one small NVRTC-compiled kernel for
//! bias plus activation, NVML for accelerator memory. Compiled only with the `cuda` feature;
//! libcuda, libcublas, libnvrtc and libnvidia-ml are opened at run time, so a build needs no
//! CUDA toolkit and a machine without a GPU fails in [`CudaKernel::new`], not at link time.

use super::{Kernel, KernelError, MemoryReport};
use crate::model::Activation;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemv, GemvConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;
use std::sync::Arc;

const BIAS_ACTIVATION_SRC: &str = r#"
extern "C" __global__ void bias_activation(float* y, const float* b, int n, int act) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i] + b[i];
        if (act == 1) {
            v = v > 0.0f ? v : 0.0f;
        } else if (act == 2) {
            const float c = 0.7978845608028654f;
            v = 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
        }
        y[i] = v;
    }
}
"#;

fn err(what: &str, e: impl std::fmt::Debug) -> KernelError {
    KernelError(format!("{what}: {e:?}"))
}

fn to_c_int(n: usize, what: &str) -> Result<i32, KernelError> {
    i32::try_from(n).map_err(|_| KernelError(format!("{what} {n} exceeds cuBLAS's int range")))
}

/// One GPU, its default stream, a cuBLAS handle and the bias/activation kernel.
pub struct CudaKernel {
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    blas: CudaBlas,
    bias_activation: CudaFunction,
    nvml: Option<Nvml>,
    ordinal: u32,
    name: String,
    leaked: Vec<CudaSlice<u8>>,
}

impl CudaKernel {
    /// Opens GPU `ordinal`. Fails (with the driver's reason) where there is no GPU or driver.
    pub fn new(ordinal: usize) -> Result<Self, KernelError> {
        // cudarc panics when a library it opens lazily is missing: look for them first, and
        // turn any other initialisation panic (a driver without a symbol) into an error.
        // SAFETY: these only try to open the shared libraries.
        let present = unsafe {
            cudarc::driver::sys::is_culib_present()
                && cudarc::cublas::sys::is_culib_present()
                && cudarc::nvrtc::sys::is_culib_present()
        };
        if !present {
            return Err(KernelError(
                "CUDA libraries not found (libcuda, libcublas, libnvrtc)".into(),
            ));
        }
        std::panic::catch_unwind(|| Self::open(ordinal)).unwrap_or_else(|_| {
            Err(KernelError(
                "CUDA initialisation panicked (a driver older than the CUDA 12.8 API?)".into(),
            ))
        })
    }

    fn open(ordinal: usize) -> Result<Self, KernelError> {
        let ctx = CudaContext::new(ordinal).map_err(|e| err("cuda context", e))?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(Arc::clone(&stream)).map_err(|e| err("cublas", e))?;
        let ptx = cudarc::nvrtc::compile_ptx(BIAS_ACTIVATION_SRC).map_err(|e| err("nvrtc", e))?;
        let module = ctx.load_module(ptx).map_err(|e| err("load module", e))?;
        let bias_activation = module
            .load_function("bias_activation")
            .map_err(|e| err("load function", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        // NVML is optional: without it memory comes from the driver's free/total figures.
        let nvml = Nvml::init().ok();
        Ok(CudaKernel {
            stream,
            ctx,
            blas,
            bias_activation,
            nvml,
            ordinal: u32::try_from(ordinal).unwrap_or(0),
            name,
            leaked: Vec::new(),
        })
    }

    /// This process's memory on the GPU per NVML, if NVML sees the process (inside a container
    /// without the host PID namespace it usually does not), else the whole device's use.
    fn nvml_memory(&self) -> Option<MemoryReport> {
        let nvml = self.nvml.as_ref()?;
        let device = nvml.device_by_index(self.ordinal).ok()?;
        let info = device.memory_info().ok()?;
        let pid = std::process::id();
        let own = device
            .running_compute_processes()
            .ok()
            .and_then(|procs| procs.into_iter().find(|p| p.pid == pid))
            .and_then(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            });
        Some(match own {
            Some(bytes) => MemoryReport {
                used_bytes: bytes,
                total_bytes: Some(info.total),
                source: "nvml-process",
            },
            None => MemoryReport {
                used_bytes: info.used,
                total_bytes: Some(info.total),
                source: "nvml-device",
            },
        })
    }
}

impl Kernel for CudaKernel {
    type Tensor = CudaSlice<f32>;

    fn kind(&self) -> &'static str {
        "cuda"
    }

    fn describe(&self) -> String {
        format!("cuda:{} {}", self.ordinal, self.name)
    }

    fn upload(&mut self, data: Vec<f32>) -> Result<CudaSlice<f32>, KernelError> {
        self.stream
            .clone_htod(&data)
            .map_err(|e| err("copy to device", e))
    }

    fn dense(
        &mut self,
        weight: &CudaSlice<f32>,
        bias: &CudaSlice<f32>,
        input: &CudaSlice<f32>,
        outputs: usize,
        inputs: usize,
        activation: Activation,
    ) -> Result<CudaSlice<f32>, KernelError> {
        if weight.len() != outputs * inputs || bias.len() != outputs || input.len() != inputs {
            return Err(KernelError(format!(
                "dense: shapes do not match (weight {}, bias {}, input {}, layer {outputs}x{inputs})",
                weight.len(),
                bias.len(),
                input.len()
            )));
        }
        let mut y = self
            .stream
            .alloc_zeros::<f32>(outputs)
            .map_err(|e| err("alloc", e))?;
        let m = to_c_int(inputs, "inputs")?;
        let n = to_c_int(outputs, "outputs")?;
        // Row-major [outputs, inputs] is column-major [inputs, outputs] with lda = inputs, so
        // y = W·x is the transposed product op(A) = Aᵀ.
        let cfg = GemvConfig {
            trans: cublasOperation_t::CUBLAS_OP_T,
            m,
            n,
            alpha: 1.0f32,
            lda: m,
            incx: 1,
            beta: 0.0f32,
            incy: 1,
        };
        // SAFETY: the lengths were checked above against m, n and lda.
        unsafe { self.blas.gemv(cfg, weight, input, &mut y) }.map_err(|e| err("sgemv", e))?;
        let count = u32::try_from(outputs).map_err(|_| KernelError("too many outputs".into()))?;
        let act = activation.code();
        let mut launch = self.stream.launch_builder(&self.bias_activation);
        launch.arg(&mut y).arg(bias).arg(&n).arg(&act);
        // SAFETY: the kernel reads b[0..n] and writes y[0..n]; both hold `outputs` floats.
        unsafe { launch.launch(LaunchConfig::for_num_elems(count)) }
            .map_err(|e| err("launch bias_activation", e))?;
        Ok(y)
    }

    fn download(&mut self, tensor: &CudaSlice<f32>) -> Result<Vec<f32>, KernelError> {
        let host = self
            .stream
            .clone_dtoh(tensor)
            .map_err(|e| err("copy to host", e))?;
        self.stream
            .synchronize()
            .map_err(|e| err("synchronize", e))?;
        Ok(host)
    }

    fn leak(&mut self, bytes: usize) -> Result<(), KernelError> {
        // alloc_zeros writes the block, so the memory is committed on the device.
        let block = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| err("leak alloc", e))?;
        self.leaked.push(block);
        Ok(())
    }

    fn memory(&mut self) -> MemoryReport {
        if let Some(report) = self.nvml_memory() {
            return report;
        }
        match self.ctx.mem_get_info() {
            Ok((free, total)) => MemoryReport {
                used_bytes: (total - free) as u64,
                total_bytes: Some(total as u64),
                source: "cuda-mem-get-info",
            },
            Err(_) => MemoryReport {
                used_bytes: 0,
                total_bytes: None,
                source: "unavailable",
            },
        }
    }
}
