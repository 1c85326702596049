//! The model thread: loads the weights, measures a warm baseline, then serves the queue and
//! runs the periodic smoke inference, beating a heartbeat as it goes.
//!
//! One dedicated OS thread owns the kernel (a CUDA context is bound to a thread, and a forward
//! pass must not block the async runtime that answers probes). Faults act here, because that is
//! where real servers fail: a hung worker stops beating and stops taking jobs, a slow one still
//! beats while it crawls, a leaking one allocates device memory per request.

use crate::config::{DeviceChoice, ServeConfig};
use crate::kernel::cpu::CpuKernel;
use crate::kernel::{Kernel, Mlp};
use crate::model::{Expected, ModelFile};
use crate::state::{Phase, Shared, SmokeRecord};
use std::fs::File;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::{error, info, warn};

/// Read size while loading: progress is visible in `/startupz` between chunks.
const READ_CHUNK: usize = 8 << 20;

/// An inference request on its way to the worker.
pub struct Job {
    /// `None`: the recorded fixed input, and the answer says whether the output matched.
    pub input: Option<Vec<f32>>,
    pub enqueued: Instant,
    pub reply: oneshot::Sender<JobResult>,
}

/// The worker's answer to a [`Job`].
#[derive(Debug)]
pub enum JobResult {
    Done {
        output: Vec<f32>,
        latency: Duration,
        queue_wait: Duration,
        matches_expected: Option<bool>,
    },
    Failed(String),
}

/// Starts the model thread. It reports through `shared`; it never returns while serving.
pub fn spawn(
    cfg: Arc<ServeConfig>,
    shared: Arc<Shared>,
    jobs: Receiver<Job>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("model".into())
        .spawn(move || {
            let run = std::panic::AssertUnwindSafe(|| load_and_serve(&cfg, &shared, jobs));
            match std::panic::catch_unwind(run) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    error!(error = %e, "model load failed");
                    shared.mark_failed(e);
                }
                // A panic while loading is a load failure. While serving it is left alone: the
                // heartbeat stops, and liveness reports a dead worker as it would a hung one.
                Err(_) if shared.phase() == Phase::Loading => {
                    shared.mark_failed("the model thread panicked while loading".into());
                }
                Err(_) => error!("the model thread panicked while serving"),
            }
        })
}

fn load_and_serve(
    cfg: &ServeConfig,
    shared: &Arc<Shared>,
    jobs: Receiver<Job>,
) -> Result<(), String> {
    let started = Instant::now();
    let expected = Expected::read(&cfg.expected).map_err(|e| e.to_string())?;
    let bytes = read_weights(cfg, shared)?;
    if !cfg.faults.load_delay.is_zero() {
        info!(seconds = cfg.faults.load_delay.as_secs_f64(), "load delay");
        std::thread::sleep(cfg.faults.load_delay);
    }
    if cfg.faults.fail_load {
        return Err("injected fault: --fail-load / REFERENCE_FAULT_FAIL_LOAD".into());
    }
    let ctx = Loaded {
        cfg,
        shared,
        bytes,
        expected,
        started,
    };
    match cfg.device {
        DeviceChoice::Cpu => ctx.serve_on(CpuKernel::new(), jobs),
        DeviceChoice::Cuda => {
            #[cfg(feature = "cuda")]
            {
                let kernel = crate::kernel::cuda::CudaKernel::new(0).map_err(|e| e.to_string())?;
                ctx.serve_on(kernel, jobs)
            }
            #[cfg(not(feature = "cuda"))]
            {
                Err("--device cuda: this binary was built without the `cuda` feature".into())
            }
        }
        DeviceChoice::Auto => {
            #[cfg(feature = "cuda")]
            match crate::kernel::cuda::CudaKernel::new(0) {
                Ok(kernel) => return ctx.serve_on(kernel, jobs),
                Err(e) => warn!(error = %e, "no usable GPU, running on the CPU"),
            }
            ctx.serve_on(CpuKernel::new(), jobs)
        }
    }
}

/// Reads the whole weights file: real I/O, so a large file is an honestly slow load.
fn read_weights(cfg: &ServeConfig, shared: &Shared) -> Result<Vec<u8>, String> {
    let path = &cfg.model;
    let io = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let len = usize::try_from(len).map_err(|_| format!("{} is too large", path.display()))?;
    shared.bytes_total.store(len as u64, Ordering::Relaxed);
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|e| format!("cannot allocate {len} bytes for the weights: {e}"))?;
    bytes.resize(len, 0);
    for piece in bytes.chunks_mut(READ_CHUNK) {
        file.read_exact(piece).map_err(io)?;
        shared
            .bytes_read
            .fetch_add(piece.len() as u64, Ordering::Relaxed);
    }
    info!(bytes = len, file = %path.display(), "weights read");
    Ok(bytes)
}

struct Loaded<'a> {
    cfg: &'a ServeConfig,
    shared: &'a Arc<Shared>,
    bytes: Vec<u8>,
    expected: Expected,
    started: Instant,
}

impl Loaded<'_> {
    /// Uploads the weights to `kernel`, then runs the worker loop (which returns only when the
    /// server drops the job queue).
    fn serve_on<K: Kernel>(self, mut kernel: K, jobs: Receiver<Job>) -> Result<(), String> {
        let mlp = {
            let file = ModelFile::parse(&self.bytes)
                .map_err(|e| format!("{}: {e}", self.cfg.model.display()))?;
            Mlp::upload(&mut kernel, &file).map_err(|e| e.to_string())?
        };
        drop(self.bytes);
        let shared = self.shared;
        shared.set_device(kernel.describe());
        shared.input_dim.store(mlp.input_dim(), Ordering::Relaxed);
        shared.model_bytes.store(mlp.bytes(), Ordering::Relaxed);
        shared.set_memory(kernel.memory());
        let load_seconds = self.started.elapsed().as_secs_f64();
        info!(seconds = load_seconds, device = %kernel.describe(), bytes = mlp.bytes(), "weights loaded");
        shared.mark_serving(load_seconds);
        let mut worker = Worker {
            kernel,
            mlp,
            expected: self.expected,
            cfg: self.cfg,
            shared,
        };
        worker.warm_up();
        worker.run(jobs);
        Ok(())
    }
}

struct Worker<'a, K: Kernel> {
    kernel: K,
    mlp: Mlp<K>,
    expected: Expected,
    cfg: &'a ServeConfig,
    shared: &'a Shared,
}

impl<K: Kernel> Worker<'_, K> {
    /// One forward pass, slowed by the slow fault when it is in effect.
    fn timed_forward(&mut self, input: &[f32]) -> (Result<Vec<f32>, String>, Duration) {
        let started = Instant::now();
        self.shared.set_pass_running(true);
        let result = self
            .mlp
            .forward(&mut self.kernel, input)
            .map_err(|e| e.to_string());
        self.slow_fault(started);
        self.shared.set_pass_running(false);
        (result, started.elapsed())
    }

    /// When the slow fault is on, stretches the pass to `factor × baseline` (baseline floored at
    /// `--latency-floor-ms`, so a microsecond CPU pass slows measurably). The wait is spent in
    /// slices with a heartbeat after each: a slow worker is busy, not hung.
    fn slow_fault(&self, started: Instant) {
        let (Some(after), Some(serving), Some(baseline)) = (
            self.cfg.faults.slow_after,
            self.shared.serving_for(),
            self.shared.baseline(),
        ) else {
            return;
        };
        if serving < after {
            return;
        }
        if !self.shared.slow.swap(true, Ordering::Relaxed) {
            warn!(factor = self.cfg.faults.slow_factor, "fault: slowing down");
        }
        let target = Duration::from_secs_f64(
            baseline.max(self.cfg.latency_floor.as_secs_f64()) * self.cfg.faults.slow_factor,
        );
        while let Some(left) = target
            .checked_sub(started.elapsed())
            .filter(|d| !d.is_zero())
        {
            std::thread::sleep(left.min(self.cfg.heartbeat_interval));
            self.shared.beat();
        }
    }

    /// The fixed input through the model, compared with the recorded output.
    fn smoke(&mut self) -> Duration {
        let input = self.expected.input.clone();
        let (result, latency) = self.timed_forward(&input);
        let record = match result {
            Ok(output) => {
                let cmp = self.expected.compare(&output);
                if !cmp.ok {
                    warn!(
                        max_abs_error = cmp.max_abs_error,
                        checksum = cmp.checksum,
                        expected = self.expected.output_checksum,
                        "smoke inference does not match the recorded output"
                    );
                }
                SmokeRecord {
                    at: self.shared.uptime(),
                    ok: cmp.ok,
                    max_abs_error: cmp.max_abs_error,
                    checksum: cmp.checksum,
                    latency,
                    error: None,
                }
            }
            Err(e) => {
                warn!(error = %e, "smoke inference failed");
                SmokeRecord {
                    at: self.shared.uptime(),
                    ok: false,
                    max_abs_error: f64::INFINITY,
                    checksum: f64::NAN,
                    latency,
                    error: Some(e),
                }
            }
        };
        self.shared.record_smoke(record);
        latency
    }

    /// One cold pass (caches, lazy device initialisation), then `--baseline-samples` warm passes
    /// whose median is the latency baseline readiness compares against.
    fn warm_up(&mut self) {
        self.smoke();
        let mut samples: Vec<f64> = (0..self.cfg.baseline_samples)
            .map(|_| self.smoke().as_secs_f64())
            .collect();
        samples.sort_by(f64::total_cmp);
        let Some(&median) = samples.get(samples.len() / 2) else {
            return;
        };
        self.shared.set_baseline(median);
        for s in samples {
            self.shared
                .record_latency(Duration::from_secs_f64(s), self.cfg.latency_window);
        }
        info!(baseline_ms = median * 1e3, "warm baseline measured");
    }

    fn hang_due(&self) -> bool {
        match (self.cfg.faults.hang_after, self.shared.serving_for()) {
            (Some(after), Some(serving)) => serving >= after,
            _ => false,
        }
    }

    /// The worker loop: beat, take a job or time out, run the smoke inference when due.
    fn run(&mut self, jobs: Receiver<Job>) {
        let mut next_smoke = Instant::now() + self.cfg.smoke_interval;
        loop {
            self.shared.beat();
            self.shared.set_memory(self.kernel.memory());
            if self.hang_due() {
                self.shared.hung.store(true, Ordering::Relaxed);
                warn!("fault: worker hangs (no heartbeat, no inference) until killed");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            let wait = next_smoke
                .saturating_duration_since(Instant::now())
                .min(self.cfg.heartbeat_interval);
            match jobs.recv_timeout(wait) {
                Ok(job) => self.handle(job),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if Instant::now() >= next_smoke {
                let latency = self.smoke();
                self.shared.record_latency(latency, self.cfg.latency_window);
                next_smoke = Instant::now() + self.cfg.smoke_interval;
            }
        }
    }

    fn handle(&mut self, job: Job) {
        let queue_wait = job.enqueued.elapsed();
        let fixed = job.input.is_none();
        let input = job.input.unwrap_or_else(|| self.expected.input.clone());
        let (result, latency) = self.timed_forward(&input);
        self.shared.record_latency(latency, self.cfg.latency_window);
        let leak = self.cfg.faults.leak_bytes_per_request;
        if leak > 0 {
            match self.kernel.leak(leak) {
                Ok(()) => {
                    self.shared
                        .counters
                        .leaked_bytes
                        .fetch_add(leak as u64, Ordering::Relaxed);
                }
                Err(e) => warn!(error = %e, "leak fault allocation failed"),
            }
        }
        self.shared.set_memory(self.kernel.memory());
        let outcome = match result {
            Ok(output) => JobResult::Done {
                matches_expected: fixed.then(|| self.expected.compare(&output).ok),
                output,
                latency,
                queue_wait,
            },
            Err(e) => JobResult::Failed(e),
        };
        self.shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
        // The requester may have timed out and gone; that is not the worker's problem.
        let _ = job.reply.send(outcome);
    }
}
