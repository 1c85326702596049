//! Health state: written by the model thread, read by a background task that turns it into
//! probe answers, which the HTTP handlers only copy.
//!
//! The split is the point of the reference server: a probe must cost nothing and must never
//! wait on the model. The model thread updates atomics (and takes a few short locks that only it
//! and the refresher touch); the refresher evaluates the checks every `--refresh-interval` and
//! publishes a [`Snapshot`] on a watch channel; `/startupz`, `/readyz`, `/livez` and `/metrics`
//! return the snapshot's pre-rendered bodies.

use crate::config::ServeConfig;
use crate::kernel::MemoryReport;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Where the server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading weights, waiting out the load delay, uploading.
    Loading,
    /// Weights on the device; the worker serves.
    Serving,
    /// Loading failed (and `--on-load-error stay` keeps the process up).
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Loading => "loading",
            Phase::Serving => "serving",
            Phase::Failed => "failed",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => Phase::Serving,
            2 => Phase::Failed,
            _ => Phase::Loading,
        }
    }
}

/// The last smoke inference.
#[derive(Debug, Clone, PartialEq)]
pub struct SmokeRecord {
    pub at: Duration,
    pub ok: bool,
    pub max_abs_error: f64,
    pub checksum: f64,
    pub latency: Duration,
    /// Why it could not run at all (kernel error, wrong input size).
    pub error: Option<String>,
}

/// Request and smoke counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    pub infer_ok: AtomicU64,
    pub infer_bad_request: AtomicU64,
    pub infer_rejected: AtomicU64,
    pub infer_timeout: AtomicU64,
    pub infer_error: AtomicU64,
    pub smoke_ok: AtomicU64,
    pub smoke_failed: AtomicU64,
    pub leaked_bytes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the probes down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Most latency samples kept, whatever the window.
const MAX_SAMPLES: usize = 10_000;
const NEVER: u64 = u64::MAX;

/// State shared by the model thread, the refresher and the inference handler.
pub struct Shared {
    start: Instant,
    phase: AtomicU8,
    phase_tx: watch::Sender<Phase>,
    pub bytes_total: AtomicU64,
    pub bytes_read: AtomicU64,
    load_seconds: Mutex<Option<f64>>,
    load_error: Mutex<Option<String>>,
    device: Mutex<String>,
    pub input_dim: AtomicUsize,
    pub model_bytes: AtomicU64,
    heartbeat_us: AtomicU64,
    /// Start of the forward pass now running (`NEVER` between passes).
    pass_started_us: AtomicU64,
    serving_since_us: AtomicU64,
    pub hung: AtomicBool,
    pub slow: AtomicBool,
    /// Requests waiting in the queue or running.
    pub queue_depth: AtomicUsize,
    smoke: Mutex<Option<SmokeRecord>>,
    latencies: Mutex<VecDeque<(Duration, f64)>>,
    baseline: Mutex<Option<f64>>,
    memory_used: AtomicU64,
    memory_total: AtomicU64,
    memory_source: Mutex<&'static str>,
    pub counters: Counters,
}

impl Default for Shared {
    fn default() -> Self {
        Self::new()
    }
}

impl Shared {
    pub fn new() -> Self {
        let (phase_tx, _) = watch::channel(Phase::Loading);
        Shared {
            start: Instant::now(),
            phase: AtomicU8::new(0),
            phase_tx,
            bytes_total: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            load_seconds: Mutex::new(None),
            load_error: Mutex::new(None),
            device: Mutex::new(String::new()),
            input_dim: AtomicUsize::new(0),
            model_bytes: AtomicU64::new(0),
            heartbeat_us: AtomicU64::new(0),
            pass_started_us: AtomicU64::new(NEVER),
            serving_since_us: AtomicU64::new(NEVER),
            hung: AtomicBool::new(false),
            slow: AtomicBool::new(false),
            queue_depth: AtomicUsize::new(0),
            smoke: Mutex::new(None),
            latencies: Mutex::new(VecDeque::new()),
            baseline: Mutex::new(None),
            memory_used: AtomicU64::new(0),
            memory_total: AtomicU64::new(NEVER),
            memory_source: Mutex::new("none"),
            counters: Counters::default(),
        }
    }

    /// Time since the process started.
    pub fn uptime(&self) -> Duration {
        self.start.elapsed()
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Watch phase changes (the main task waits for the load before binding).
    pub fn subscribe_phase(&self) -> watch::Receiver<Phase> {
        self.phase_tx.subscribe()
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Release);
        self.phase_tx.send_replace(phase);
    }

    pub fn set_device(&self, description: String) {
        *lock(&self.device) = description;
    }

    pub fn device(&self) -> String {
        lock(&self.device).clone()
    }

    /// Weights are on the device: startup passes from now on, and the fault clocks start.
    pub fn mark_serving(&self, load_seconds: f64) {
        *lock(&self.load_seconds) = Some(load_seconds);
        self.beat();
        self.serving_since_us
            .store(self.uptime().as_micros() as u64, Ordering::Release);
        self.set_phase(Phase::Serving);
    }

    pub fn mark_failed(&self, error: String) {
        *lock(&self.load_error) = Some(error);
        self.set_phase(Phase::Failed);
    }

    pub fn load_error(&self) -> Option<String> {
        lock(&self.load_error).clone()
    }

    /// Time since serving started (the fault clocks), if it has.
    pub fn serving_for(&self) -> Option<Duration> {
        match self.serving_since_us.load(Ordering::Acquire) {
            NEVER => None,
            since => Some(self.uptime().saturating_sub(Duration::from_micros(since))),
        }
    }

    /// The worker loop is alive and making progress.
    pub fn beat(&self) {
        self.heartbeat_us
            .store(self.uptime().as_micros() as u64, Ordering::Release);
    }

    pub fn heartbeat_age(&self) -> Duration {
        let last = Duration::from_micros(self.heartbeat_us.load(Ordering::Acquire));
        self.uptime().saturating_sub(last)
    }

    pub fn record_smoke(&self, record: SmokeRecord) {
        let counter = if record.ok {
            &self.counters.smoke_ok
        } else {
            &self.counters.smoke_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        *lock(&self.smoke) = Some(record);
    }

    pub fn last_smoke(&self) -> Option<SmokeRecord> {
        lock(&self.smoke).clone()
    }

    /// A forward pass starts (`true`) or ends (`false`).
    pub fn set_pass_running(&self, running: bool) {
        let v = if running {
            self.uptime().as_micros() as u64
        } else {
            NEVER
        };
        self.pass_started_us.store(v, Ordering::Release);
    }

    /// Adds a forward-pass latency (smoke or request) to the p99 window.
    pub fn record_latency(&self, latency: Duration, window: Duration) {
        let now = self.uptime();
        let mut samples = lock(&self.latencies);
        samples.push_back((now, latency.as_secs_f64()));
        while samples.len() > MAX_SAMPLES
            || samples
                .front()
                .is_some_and(|(at, _)| now.saturating_sub(*at) > window)
        {
            samples.pop_front();
        }
    }

    pub fn set_baseline(&self, seconds: f64) {
        *lock(&self.baseline) = Some(seconds);
    }

    pub fn baseline(&self) -> Option<f64> {
        *lock(&self.baseline)
    }

    /// p99 of the latencies of the last `window`, with the sample count. A pass still running
    /// counts with its time so far: passes slower than the window would otherwise leave it
    /// empty, and a server too slow to finish one would look healthy.
    pub fn recent_p99(&self, window: Duration) -> (Option<f64>, usize) {
        let now = self.uptime();
        let mut recent: Vec<f64> = lock(&self.latencies)
            .iter()
            .filter(|(at, _)| now.saturating_sub(*at) <= window)
            .map(|&(_, s)| s)
            .collect();
        match self.pass_started_us.load(Ordering::Acquire) {
            NEVER => {}
            started => recent.push(
                now.saturating_sub(Duration::from_micros(started))
                    .as_secs_f64(),
            ),
        }
        if recent.is_empty() {
            return (None, 0);
        }
        recent.sort_by(f64::total_cmp);
        let rank = ((recent.len() as f64) * 0.99).ceil() as usize;
        let p99 = recent[rank.clamp(1, recent.len()) - 1];
        (Some(p99), recent.len())
    }

    pub fn set_memory(&self, report: MemoryReport) {
        self.memory_used.store(report.used_bytes, Ordering::Relaxed);
        self.memory_total
            .store(report.total_bytes.unwrap_or(NEVER), Ordering::Relaxed);
        *lock(&self.memory_source) = report.source;
    }

    pub fn memory(&self) -> MemoryReport {
        MemoryReport {
            used_bytes: self.memory_used.load(Ordering::Relaxed),
            total_bytes: match self.memory_total.load(Ordering::Relaxed) {
                NEVER => None,
                total => Some(total),
            },
            source: *lock(&self.memory_source),
        }
    }
}

/// Resident set size of this process (Linux; `None` elsewhere).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// One probe's answer, pre-rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeAnswer {
    pub ok: bool,
    pub body: String,
}

/// Everything the GET handlers return, recomputed by the refresher.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub startup: ProbeAnswer,
    pub ready: ProbeAnswer,
    pub live: ProbeAnswer,
    pub metrics: String,
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e6
}

fn ms(s: f64) -> f64 {
    (s * 1e6).round() / 1e3
}

/// Builds a probe body: `{"status", "probe", "phase", "uptime_seconds", "failing", "checks"}`.
fn answer(
    probe: &str,
    phase: Phase,
    uptime: Duration,
    checks: Vec<(&str, bool, Value)>,
) -> ProbeAnswer {
    let ok = checks.iter().all(|(_, ok, _)| *ok);
    let failing: Vec<&str> = checks.iter().filter(|c| !c.1).map(|c| c.0).collect();
    let mut map = serde_json::Map::new();
    for (name, ok, detail) in checks {
        // "ok" first, then the check's own fields.
        let mut fields = serde_json::Map::new();
        fields.insert("ok".into(), Value::Bool(ok));
        if let Value::Object(rest) = detail {
            fields.extend(rest);
        }
        map.insert(name.into(), Value::Object(fields));
    }
    let body = json!({
        "status": if ok { "ok" } else { "fail" },
        "probe": probe,
        "phase": phase.as_str(),
        "uptime_seconds": secs(uptime),
        "failing": failing,
        "checks": map,
    });
    ProbeAnswer {
        ok,
        body: body.to_string(),
    }
}

/// Evaluates every check from the shared state. Called by the refresher only.
pub fn evaluate(shared: &Shared, cfg: &ServeConfig) -> Snapshot {
    let phase = shared.phase();
    let uptime = shared.uptime();
    let serving = phase == Phase::Serving;

    // --- startup: the weights are loaded --------------------------------------------------
    let bytes_read = shared.bytes_read.load(Ordering::Relaxed);
    let bytes_total = shared.bytes_total.load(Ordering::Relaxed);
    let load_seconds = *lock(&shared.load_seconds);
    let load_error = shared.load_error();
    let loaded_detail = json!({
        "bytes_read": bytes_read,
        "bytes_total": bytes_total,
        "load_seconds": load_seconds,
        "device": shared.device(),
        "error": load_error,
    });
    let startup = answer(
        "startupz",
        phase,
        uptime,
        vec![("loaded", serving, loaded_detail.clone())],
    );

    // --- liveness: the worker loop's heartbeat is fresh -------------------------------------
    let heartbeat_age = shared.heartbeat_age();
    let hung = shared.hung.load(Ordering::Relaxed);
    let live_ok = match phase {
        // Loading is progress and a failed load is not a hang: the startup probe owns both.
        Phase::Loading | Phase::Failed => true,
        Phase::Serving => heartbeat_age <= cfg.live_heartbeat_timeout,
    };
    let live = answer(
        "livez",
        phase,
        uptime,
        vec![(
            "worker",
            live_ok,
            json!({
                "heartbeat_age_seconds": if serving { Some(secs(heartbeat_age)) } else { None },
                "timeout_seconds": secs(cfg.live_heartbeat_timeout),
                "hang_fault": hung,
            }),
        )],
    );

    // --- readiness -------------------------------------------------------------------------
    let smoke = shared.last_smoke();
    let smoke_age = smoke.as_ref().map(|s| uptime.saturating_sub(s.at));
    let smoke_ok = serving
        && smoke
            .as_ref()
            .is_some_and(|s| s.ok && smoke_age.is_some_and(|a| a <= cfg.smoke_max_age));
    let smoke_detail = match &smoke {
        None => {
            json!({ "detail": "no smoke inference yet", "max_age_seconds": secs(cfg.smoke_max_age) })
        }
        Some(s) => json!({
            "detail": if let Some(e) = &s.error {
                format!("smoke inference failed: {e}")
            } else if !s.ok {
                "output does not match the recorded output: wrong or corrupted model".to_string()
            } else if !smoke_ok {
                "last smoke inference is too old: the worker is not running it".to_string()
            } else {
                "output matches the recorded output".to_string()
            },
            "correct": s.ok,
            "age_seconds": smoke_age.map(secs),
            "max_age_seconds": secs(cfg.smoke_max_age),
            "max_abs_error": if s.max_abs_error.is_finite() { Some(s.max_abs_error) } else { None },
            "checksum": if s.checksum.is_finite() { Some(s.checksum) } else { None },
            "latency_ms": ms(s.latency.as_secs_f64()),
        }),
    };

    let worker_ok = serving && heartbeat_age <= cfg.ready_heartbeat_timeout;
    let depth = shared.queue_depth.load(Ordering::Relaxed);
    let queue_ok = depth < cfg.queue_ready_limit;

    let (p99, samples) = shared.recent_p99(cfg.latency_window);
    let baseline = shared.baseline();
    let floor = cfg.latency_floor.as_secs_f64();
    let effective = baseline.map(|b| b.max(floor));
    let threshold = effective.map(|b| b * cfg.latency_factor);
    // Not ready before the warm-up has measured the baseline (real servers warm up too). The
    // p99 of a small window is its maximum: one slow pass fails readiness until it ages out of
    // the window, and the floor under the baseline keeps scheduler noise from doing so.
    let latency_ok = match (p99, threshold) {
        (_, None) => false,
        (Some(p), Some(t)) => p <= t,
        (None, Some(_)) => true,
    };

    let memory = shared.memory();
    let limit = cfg
        .faults
        .memory_limit_bytes
        .or_else(|| memory.total_bytes.map(|t| t / 100 * 95));
    let memory_ok = limit.is_none_or(|l| memory.used_bytes <= l);

    let ready = answer(
        "readyz",
        phase,
        uptime,
        vec![
            ("loaded", serving, loaded_detail),
            ("smoke", smoke_ok, smoke_detail),
            (
                "worker",
                worker_ok,
                json!({
                    "heartbeat_age_seconds": if serving { Some(secs(heartbeat_age)) } else { None },
                    "timeout_seconds": secs(cfg.ready_heartbeat_timeout),
                }),
            ),
            (
                "queue",
                queue_ok,
                json!({ "depth": depth, "limit": cfg.queue_ready_limit }),
            ),
            (
                "latency",
                latency_ok,
                json!({
                    "detail": match (threshold, latency_ok) {
                        (None, _) => "warming up: measuring the baseline",
                        (Some(_), true) if samples == 0 => "no recent forward pass",
                        (Some(_), true) => "recent p99 within factor x baseline",
                        (Some(_), false) => "recent p99 above factor x baseline: degraded",
                    },
                    "p99_ms": p99.map(ms),
                    "baseline_ms": baseline.map(ms),
                    "threshold_ms": threshold.map(ms),
                    "factor": cfg.latency_factor,
                    "samples": samples,
                }),
            ),
            (
                "memory",
                memory_ok,
                json!({
                    "used_bytes": memory.used_bytes,
                    "limit_bytes": limit,
                    "total_bytes": memory.total_bytes,
                    "source": memory.source,
                    "rss_bytes": rss_bytes(),
                }),
            ),
        ],
    );

    let metrics = render_metrics(
        shared,
        &MetricValues {
            phase,
            startup_ok: startup.ok,
            ready_ok: ready.ok,
            live_ok: live.ok,
            heartbeat_age,
            smoke: smoke.as_ref(),
            depth,
            p99,
            baseline,
            memory,
            limit,
            load_seconds,
            uptime,
        },
    );
    Snapshot {
        startup,
        ready,
        live,
        metrics,
    }
}

struct MetricValues<'a> {
    phase: Phase,
    startup_ok: bool,
    ready_ok: bool,
    live_ok: bool,
    heartbeat_age: Duration,
    smoke: Option<&'a SmokeRecord>,
    depth: usize,
    p99: Option<f64>,
    baseline: Option<f64>,
    memory: MemoryReport,
    limit: Option<u64>,
    load_seconds: Option<f64>,
    uptime: Duration,
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

fn b(v: bool) -> f64 {
    if v { 1.0 } else { 0.0 }
}

/// Prometheus text exposition (version 0.0.4).
fn render_metrics(shared: &Shared, v: &MetricValues<'_>) -> String {
    let c = &shared.counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
    let mut out = String::with_capacity(4096);
    metric(
        &mut out,
        "reference_up_seconds",
        "gauge",
        "Seconds since the process started.",
        &[("", secs(v.uptime))],
    );
    metric(
        &mut out,
        "reference_phase",
        "gauge",
        "1 for the current phase (loading, serving, failed).",
        &[
            ("phase=\"loading\"", b(v.phase == Phase::Loading)),
            ("phase=\"serving\"", b(v.phase == Phase::Serving)),
            ("phase=\"failed\"", b(v.phase == Phase::Failed)),
        ],
    );
    metric(
        &mut out,
        "reference_probe_ok",
        "gauge",
        "1 when the probe endpoint currently answers 200.",
        &[
            ("probe=\"startupz\"", b(v.startup_ok)),
            ("probe=\"readyz\"", b(v.ready_ok)),
            ("probe=\"livez\"", b(v.live_ok)),
        ],
    );
    metric(
        &mut out,
        "reference_model_bytes",
        "gauge",
        "Bytes of weights on the device.",
        &[("", get(&shared.model_bytes))],
    );
    metric(
        &mut out,
        "reference_load_bytes_read",
        "gauge",
        "Bytes of the weights file read so far.",
        &[("", get(&shared.bytes_read))],
    );
    if let Some(s) = v.load_seconds {
        metric(
            &mut out,
            "reference_load_seconds",
            "gauge",
            "Wall time of the load (read, delay, upload).",
            &[("", s)],
        );
    }
    metric(
        &mut out,
        "reference_heartbeat_age_seconds",
        "gauge",
        "Age of the worker loop's last heartbeat.",
        &[("", secs(v.heartbeat_age))],
    );
    metric(
        &mut out,
        "reference_smoke_total",
        "counter",
        "Smoke inferences by result.",
        &[
            ("result=\"ok\"", get(&c.smoke_ok)),
            ("result=\"failed\"", get(&c.smoke_failed)),
        ],
    );
    if let Some(s) = v.smoke {
        metric(
            &mut out,
            "reference_smoke_correct",
            "gauge",
            "1 when the last smoke output matched the recorded output.",
            &[("", b(s.ok))],
        );
        metric(
            &mut out,
            "reference_smoke_latency_seconds",
            "gauge",
            "Latency of the last smoke inference.",
            &[("", s.latency.as_secs_f64())],
        );
    }
    metric(
        &mut out,
        "reference_infer_requests_total",
        "counter",
        "Inference requests by outcome.",
        &[
            ("result=\"ok\"", get(&c.infer_ok)),
            ("result=\"bad_request\"", get(&c.infer_bad_request)),
            ("result=\"rejected\"", get(&c.infer_rejected)),
            ("result=\"timeout\"", get(&c.infer_timeout)),
            ("result=\"error\"", get(&c.infer_error)),
        ],
    );
    metric(
        &mut out,
        "reference_queue_depth",
        "gauge",
        "Inference requests waiting or running.",
        &[("", v.depth as f64)],
    );
    if let Some(p) = v.p99 {
        metric(
            &mut out,
            "reference_latency_p99_seconds",
            "gauge",
            "p99 forward-pass latency over the recent window.",
            &[("", p)],
        );
    }
    if let Some(bl) = v.baseline {
        metric(
            &mut out,
            "reference_latency_baseline_seconds",
            "gauge",
            "Warm forward-pass latency measured after loading (median).",
            &[("", bl)],
        );
    }
    metric(
        &mut out,
        "reference_memory_used_bytes",
        "gauge",
        "Device memory in use (see /readyz for its source).",
        &[("", v.memory.used_bytes as f64)],
    );
    if let Some(l) = v.limit {
        metric(
            &mut out,
            "reference_memory_limit_bytes",
            "gauge",
            "Readiness memory limit.",
            &[("", l as f64)],
        );
    }
    if let Some(rss) = rss_bytes() {
        metric(
            &mut out,
            "reference_rss_bytes",
            "gauge",
            "Resident set size of the process.",
            &[("", rss as f64)],
        );
    }
    metric(
        &mut out,
        "reference_leaked_bytes_total",
        "counter",
        "Bytes leaked by the leak fault.",
        &[("", get(&c.leaked_bytes))],
    );
    metric(
        &mut out,
        "reference_fault_active",
        "gauge",
        "1 while an injected fault is in effect.",
        &[
            ("fault=\"hang\"", b(shared.hung.load(Ordering::Relaxed))),
            ("fault=\"slow\"", b(shared.slow.load(Ordering::Relaxed))),
        ],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_of_a_small_window_is_its_maximum() {
        let s = Shared::new();
        let w = Duration::from_secs(60);
        for ms in [1u64, 2, 3, 50] {
            s.record_latency(Duration::from_millis(ms), w);
        }
        let (p99, n) = s.recent_p99(w);
        assert_eq!(n, 4);
        assert_eq!(p99, Some(0.05));
        for _ in 0..196 {
            s.record_latency(Duration::from_millis(1), w);
        }
        // 200 samples: rank 198, so the two largest (3 ms, 50 ms) do not count.
        assert_eq!(s.recent_p99(w).0, Some(0.002));
    }

    #[test]
    fn phases_round_trip() {
        for p in [Phase::Loading, Phase::Serving, Phase::Failed] {
            assert_eq!(Phase::from_u8(p as u8), p);
        }
    }
}
