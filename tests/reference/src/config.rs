//! Command line, environment and the resolved serving configuration.
//!
//! Fault switches can be given as flags or as `REFERENCE_*` environment variables, because the
//! conformance harness starts the server from a Kubernetes manifest, where faults are most
//! naturally `env:` entries. A flag wins over its variable. Every duration is given in seconds of
//! *manifest time* and multiplied by `--time-scale`, so that the harness can run one second of
//! cluster time as 20 ms (`--time-scale 0.02`) and the server's delays shrink with its probes.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// `reference-server`: a small real model server for probelint's conformance suite.
#[derive(Debug, Parser)]
#[command(name = "reference-server", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a deterministic safetensors model and FILE.expected.json beside it.
    MakeModel(MakeModelArgs),
    /// Load a model and serve probes, inference and metrics.
    Serve(Box<ServeArgs>),
}

#[derive(Debug, Args)]
pub struct MakeModelArgs {
    /// Parameter budget: the widest model of --layers dense layers with at most N parameters
    /// (4 bytes each, so N = 250000000 is a 1 GB file).
    #[arg(long, value_name = "N")]
    pub params: u64,
    /// Output file (safetensors). The expected output goes to FILE.expected.json.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Seed of the weights and the fixed input.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Number of dense layers.
    #[arg(long, default_value_t = crate::model::DEFAULT_LAYERS)]
    pub layers: usize,
    /// Width of the output layer.
    #[arg(long, default_value_t = crate::model::DEFAULT_OUTPUT_DIM)]
    pub output_dim: usize,
}

/// What to do when loading fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLoadError {
    /// Exit with status 1 (the kubelet restarts the container: CrashLoopBackOff).
    Exit,
    /// Keep running, never started: /startupz and /readyz answer 503 with the error, /livez 200
    /// (the startup probe's budget is what ends it).
    Stay,
}

impl FromStr for OnLoadError {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        <Self as ValueEnum>::from_str(s, true)
    }
}

/// Which kernel runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeviceChoice {
    /// CUDA when built with the `cuda` feature and a GPU opens, else the CPU.
    Auto,
    Cpu,
    /// CUDA or a load failure.
    Cuda,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Weights (safetensors, as written by make-model).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Expected output of the fixed input [default: MODEL.expected.json].
    #[arg(long, value_name = "FILE")]
    pub expected: Option<PathBuf>,
    /// Address to listen on. With port 0 the chosen port is printed on stdout.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    #[arg(long, value_enum, default_value_t = DeviceChoice::Auto)]
    pub device: DeviceChoice,
    /// Multiply every configured duration by F [env: REFERENCE_TIME_SCALE] [default: 1].
    #[arg(long, value_name = "F")]
    pub time_scale: Option<f64>,

    // --- faults --------------------------------------------------------------------------
    /// Extra load time after reading the weights, seconds [env: REFERENCE_FAULT_LOAD_SECONDS].
    #[arg(long, value_name = "S", help_heading = "Faults")]
    pub load_seconds: Option<f64>,
    /// Open the port and answer HTTP while loading, as llama.cpp does: TCP probes pass, HTTP
    /// probes get 503 [env: REFERENCE_FAULT_BIND_BEFORE_LOAD=1]. Default: bind after loading.
    #[arg(long, help_heading = "Faults")]
    pub bind_before_load: bool,
    /// Fail the load (after reading the file and the load delay) [env: REFERENCE_FAULT_FAIL_LOAD=1].
    #[arg(long, help_heading = "Faults")]
    pub fail_load: bool,
    /// On a load failure, exit 1 or stay up unstarted [env: REFERENCE_ON_LOAD_ERROR] [default: exit].
    #[arg(long, value_enum, help_heading = "Faults")]
    pub on_load_error: Option<OnLoadError>,
    /// The worker hangs S seconds after serving starts: no heartbeat, no inference
    /// [env: REFERENCE_FAULT_HANG_AFTER].
    #[arg(long, value_name = "S", help_heading = "Faults")]
    pub hang_after: Option<f64>,
    /// Forward passes slow down S seconds after serving starts [env: REFERENCE_FAULT_SLOW_AFTER].
    #[arg(long, value_name = "S", help_heading = "Faults")]
    pub slow_after: Option<f64>,
    /// When slow, every forward pass takes F × the warm baseline [env: REFERENCE_FAULT_SLOW_FACTOR] [default: 10].
    #[arg(long, value_name = "F", help_heading = "Faults")]
    pub slow_factor: Option<f64>,
    /// Leak M MiB of device memory per inference request [env: REFERENCE_FAULT_LEAK_MB_PER_REQUEST].
    #[arg(long, value_name = "M", help_heading = "Faults")]
    pub leak_mb_per_request: Option<f64>,
    /// Readiness fails above this much device memory, MiB [env: REFERENCE_MEMORY_LIMIT_MB]
    /// [default: 95% of the GPU's memory; none on the CPU].
    #[arg(long, value_name = "M", help_heading = "Faults")]
    pub memory_limit_mb: Option<f64>,

    // --- health tuning (seconds of manifest time, scaled) ----------------------------------
    /// Worker heartbeat period.
    #[arg(long, default_value_t = 1.0, value_name = "S", help_heading = "Health")]
    pub heartbeat_interval: f64,
    /// /livez fails when the worker's heartbeat is older than this (a hung worker).
    #[arg(
        long,
        default_value_t = 20.0,
        value_name = "S",
        help_heading = "Health"
    )]
    pub live_heartbeat_timeout: f64,
    /// /readyz fails when the worker's heartbeat is older than this (shorter than the liveness
    /// timeout, so that a hanging pod leaves the Service before it is restarted).
    #[arg(long, default_value_t = 5.0, value_name = "S", help_heading = "Health")]
    pub ready_heartbeat_timeout: f64,
    /// Period of the smoke inference (fixed input, compared with the recorded output).
    #[arg(long, default_value_t = 5.0, value_name = "S", help_heading = "Health")]
    pub smoke_interval: f64,
    /// /readyz fails when the last smoke inference is older than this.
    #[arg(
        long,
        default_value_t = 15.0,
        value_name = "S",
        help_heading = "Health"
    )]
    pub smoke_max_age: f64,
    /// Requests waiting or running beyond which inference is refused (503).
    #[arg(long, default_value_t = 64, help_heading = "Health")]
    pub queue_capacity: usize,
    /// /readyz fails at this queue depth (below the capacity, so readiness sheds load first).
    #[arg(long, default_value_t = 16, help_heading = "Health")]
    pub queue_ready_limit: usize,
    /// /readyz fails when the recent p99 latency exceeds K × the warm baseline.
    #[arg(long, default_value_t = 3.0, value_name = "K", help_heading = "Health")]
    pub latency_factor: f64,
    /// Floor of the baseline, milliseconds of real time (not scaled): a CPU forward pass of a
    /// few microseconds would otherwise make scheduler noise look like a slowdown.
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "MS",
        help_heading = "Health"
    )]
    pub latency_floor_ms: f64,
    /// Latencies older than this leave the p99 window.
    #[arg(
        long,
        default_value_t = 30.0,
        value_name = "S",
        help_heading = "Health"
    )]
    pub latency_window: f64,
    /// Warm forward passes measured after loading to set the baseline (median).
    #[arg(long, default_value_t = 5, help_heading = "Health")]
    pub baseline_samples: usize,
    /// An inference request waiting longer than this for the worker gets 504.
    #[arg(
        long,
        default_value_t = 30.0,
        value_name = "S",
        help_heading = "Health"
    )]
    pub request_timeout: f64,
    /// Period of the background task that recomputes the probe answers.
    #[arg(long, default_value_t = 0.1, value_name = "S", help_heading = "Health")]
    pub refresh_interval: f64,
    /// Time allowed to drain connections after SIGTERM.
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "S",
        help_heading = "Health"
    )]
    pub shutdown_grace: f64,
}

/// A configuration error (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Everything the server needs, durations already scaled.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub model: PathBuf,
    pub expected: PathBuf,
    pub listen: SocketAddr,
    pub device: DeviceChoice,
    pub time_scale: f64,
    pub faults: Faults,
    pub heartbeat_interval: Duration,
    pub live_heartbeat_timeout: Duration,
    pub ready_heartbeat_timeout: Duration,
    pub smoke_interval: Duration,
    pub smoke_max_age: Duration,
    pub queue_capacity: usize,
    pub queue_ready_limit: usize,
    pub latency_factor: f64,
    pub latency_floor: Duration,
    pub latency_window: Duration,
    pub baseline_samples: usize,
    pub request_timeout: Duration,
    pub refresh_interval: Duration,
    pub shutdown_grace: Duration,
}

/// The fault switches, resolved from flags and environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    pub load_delay: Duration,
    pub bind_before_load: bool,
    pub fail_load: bool,
    pub on_load_error: OnLoadError,
    pub hang_after: Option<Duration>,
    pub slow_after: Option<Duration>,
    pub slow_factor: f64,
    pub leak_bytes_per_request: usize,
    pub memory_limit_bytes: Option<u64>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// Reads an environment variable through a lookup function (so tests need not touch the real
/// environment). An unparsable value is an error, never silently ignored.
fn env_value<T: FromStr>(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<T>, ConfigError> {
    match env(name) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ConfigError(format!("{name}={v:?} is not a valid value"))),
    }
}

fn env_flag(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<bool, ConfigError> {
    match env(name).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(v) => match v.as_str() {
            "" | "0" | "false" | "no" | "off" => Ok(false),
            "1" | "true" | "yes" | "on" => Ok(true),
            _ => Err(ConfigError(format!("{name}={v:?} is not a boolean"))),
        },
    }
}

fn non_negative(name: &str, v: f64) -> Result<f64, ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(ConfigError(format!(
            "{name} must be a finite number >= 0, got {v}"
        )))
    }
}

impl ServeConfig {
    /// Resolves flags, then `REFERENCE_*` variables from `env`, then defaults.
    pub fn resolve(
        args: &ServeArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let time_scale = match args.time_scale {
            Some(v) => Some(v),
            None => env_value(env, "REFERENCE_TIME_SCALE")?,
        }
        .unwrap_or(1.0);
        if !(time_scale.is_finite() && time_scale > 0.0) {
            return Err(ConfigError(format!(
                "--time-scale must be a finite number > 0, got {time_scale}"
            )));
        }
        let scaled = |name: &str, secs: f64| -> Result<Duration, ConfigError> {
            let secs = non_negative(name, secs)? * time_scale;
            Duration::try_from_secs_f64(secs).map_err(|e| ConfigError(format!("{name}: {e}")))
        };
        let opt = |flag: Option<f64>, var: &str| -> Result<Option<f64>, ConfigError> {
            match flag {
                Some(v) => Ok(Some(v)),
                None => env_value(env, var),
            }
        };

        let load_seconds = opt(args.load_seconds, "REFERENCE_FAULT_LOAD_SECONDS")?.unwrap_or(0.0);
        let hang_after = opt(args.hang_after, "REFERENCE_FAULT_HANG_AFTER")?;
        let slow_after = opt(args.slow_after, "REFERENCE_FAULT_SLOW_AFTER")?;
        let slow_factor = opt(args.slow_factor, "REFERENCE_FAULT_SLOW_FACTOR")?.unwrap_or(10.0);
        if !(slow_factor.is_finite() && slow_factor >= 1.0) {
            return Err(ConfigError(format!(
                "--slow-factor must be >= 1, got {slow_factor}"
            )));
        }
        let leak_mb = opt(
            args.leak_mb_per_request,
            "REFERENCE_FAULT_LEAK_MB_PER_REQUEST",
        )?
        .unwrap_or(0.0);
        let leak_mb = non_negative("--leak-mb-per-request", leak_mb)?;
        let memory_limit_mb = opt(args.memory_limit_mb, "REFERENCE_MEMORY_LIMIT_MB")?;
        let on_load_error = match args.on_load_error {
            Some(v) => v,
            None => env_value(env, "REFERENCE_ON_LOAD_ERROR")?.unwrap_or(OnLoadError::Exit),
        };
        let faults = Faults {
            load_delay: scaled("--load-seconds", load_seconds)?,
            bind_before_load: args.bind_before_load
                || env_flag(env, "REFERENCE_FAULT_BIND_BEFORE_LOAD")?,
            fail_load: args.fail_load || env_flag(env, "REFERENCE_FAULT_FAIL_LOAD")?,
            on_load_error,
            hang_after: hang_after.map(|s| scaled("--hang-after", s)).transpose()?,
            slow_after: slow_after.map(|s| scaled("--slow-after", s)).transpose()?,
            slow_factor,
            leak_bytes_per_request: (leak_mb * MIB) as usize,
            memory_limit_bytes: memory_limit_mb
                .map(|m| non_negative("--memory-limit-mb", m).map(|m| (m * MIB) as u64))
                .transpose()?,
        };
        if args.queue_capacity == 0 || args.queue_ready_limit == 0 {
            return Err(ConfigError(
                "--queue-capacity and --queue-ready-limit must be at least 1".into(),
            ));
        }
        if !(args.latency_factor.is_finite() && args.latency_factor >= 1.0) {
            return Err(ConfigError("--latency-factor must be >= 1".into()));
        }
        let floor_ms = non_negative("--latency-floor-ms", args.latency_floor_ms)?;
        Ok(ServeConfig {
            model: args.model.clone(),
            expected: args
                .expected
                .clone()
                .unwrap_or_else(|| crate::model::expected_path(&args.model)),
            listen: args.listen,
            device: args.device,
            time_scale,
            faults,
            // Floors keep a tiny --time-scale from turning periodic loops into busy loops.
            heartbeat_interval: scaled("--heartbeat-interval", args.heartbeat_interval)?
                .max(Duration::from_millis(1)),
            live_heartbeat_timeout: scaled(
                "--live-heartbeat-timeout",
                args.live_heartbeat_timeout,
            )?,
            ready_heartbeat_timeout: scaled(
                "--ready-heartbeat-timeout",
                args.ready_heartbeat_timeout,
            )?,
            smoke_interval: scaled("--smoke-interval", args.smoke_interval)?
                .max(Duration::from_millis(1)),
            smoke_max_age: scaled("--smoke-max-age", args.smoke_max_age)?,
            queue_capacity: args.queue_capacity,
            queue_ready_limit: args.queue_ready_limit,
            latency_factor: args.latency_factor,
            latency_floor: Duration::from_secs_f64(floor_ms / 1000.0),
            latency_window: scaled("--latency-window", args.latency_window)?,
            baseline_samples: args.baseline_samples.max(1),
            request_timeout: scaled("--request-timeout", args.request_timeout)?,
            refresh_interval: scaled("--refresh-interval", args.refresh_interval)?
                .max(Duration::from_millis(2)),
            shutdown_grace: scaled("--shutdown-grace", args.shutdown_grace)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> ServeArgs {
        let mut full = vec!["reference-server", "serve", "--model", "/m.safetensors"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full).expect("parses").command {
            Command::Serve(args) => *args,
            Command::MakeModel(_) => unreachable!(),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn durations_are_scaled() {
        let cfg = ServeConfig::resolve(
            &parse(&["--time-scale", "0.02", "--load-seconds", "100"]),
            &no_env,
        )
        .expect("valid");
        assert_eq!(cfg.faults.load_delay, Duration::from_secs(2));
        assert_eq!(cfg.smoke_interval, Duration::from_millis(100));
        assert_eq!(cfg.live_heartbeat_timeout, Duration::from_millis(400));
        // The latency floor is real time, not scaled.
        assert_eq!(cfg.latency_floor, Duration::from_millis(10));
        assert_eq!(cfg.expected, PathBuf::from("/m.safetensors.expected.json"));
    }

    #[test]
    fn environment_sets_faults_and_flags_win() {
        let env = |name: &str| -> Option<String> {
            match name {
                "REFERENCE_FAULT_HANG_AFTER" => Some("30".into()),
                "REFERENCE_FAULT_BIND_BEFORE_LOAD" => Some("true".into()),
                "REFERENCE_ON_LOAD_ERROR" => Some("stay".into()),
                "REFERENCE_TIME_SCALE" => Some("0.5".into()),
                "REFERENCE_FAULT_LEAK_MB_PER_REQUEST" => Some("2".into()),
                _ => None,
            }
        };
        let cfg = ServeConfig::resolve(&parse(&["--time-scale", "1"]), &env).expect("valid");
        assert_eq!(cfg.time_scale, 1.0);
        assert_eq!(cfg.faults.hang_after, Some(Duration::from_secs(30)));
        assert!(cfg.faults.bind_before_load);
        assert_eq!(cfg.faults.on_load_error, OnLoadError::Stay);
        assert_eq!(cfg.faults.leak_bytes_per_request, 2 * 1024 * 1024);
        let cfg = ServeConfig::resolve(&parse(&["--hang-after", "4"]), &env).expect("valid");
        assert_eq!(cfg.faults.hang_after, Some(Duration::from_secs(2)));
    }

    #[test]
    fn bad_values_are_errors() {
        let env = |name: &str| (name == "REFERENCE_FAULT_SLOW_AFTER").then(|| "soon".to_string());
        assert!(ServeConfig::resolve(&parse(&[]), &env).is_err());
        assert!(ServeConfig::resolve(&parse(&["--time-scale", "0"]), &no_env).is_err());
        assert!(ServeConfig::resolve(&parse(&["--slow-factor", "0.5"]), &no_env).is_err());
        assert!(ServeConfig::resolve(&parse(&["--load-seconds=-1"]), &no_env).is_err());
    }
}
