//! The kubelet, for one container: start it, probe it, restart it, and record what happened.
//!
//! Semantics follow the kubelet's prober and the model in `probelint_policies::simulate`: each
//! probe runs at container start and every `periodSeconds`, skipping runs before
//! `initialDelaySeconds`; liveness and readiness wait for the startup probe; `failureThreshold`
//! consecutive failures of startup or liveness kill the container; readiness needs
//! `successThreshold` successes to turn Ready and `failureThreshold` failures to turn NotReady; a
//! dead container restarts after CrashLoopBackOff (10 s doubling to 300 s, reset after 10 min).

use crate::spec::{ContainerSpec, Handler, ProbeSpec};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::watch;

const BACKOFF_INITIAL: f64 = 10.0;
const BACKOFF_MAX: f64 = 300.0;
const BACKOFF_RESET: f64 = 600.0;

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `reference-server` binary.
    pub server: PathBuf,
    /// Its weights (from `reference-server make-model`).
    pub model: PathBuf,
    /// Real seconds per manifest second.
    pub time_scale: f64,
    /// Manifest seconds to run.
    pub duration: f64,
    /// Manifest seconds between requests while the pod is Ready; `None` sends no traffic.
    pub traffic_interval: Option<f64>,
    /// Extra `reference-server serve` flags (health tuning).
    pub extra_args: Vec<String>,
}

/// One line of the timeline, in manifest seconds since the first start.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub t: f64,
    pub probe: &'static str,
    pub result: &'static str,
    pub event: String,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub restarts: u32,
    pub first_ready: Option<f64>,
    pub transitions: Vec<Transition>,
    pub requests_sent: u64,
    pub requests_failed: u64,
}

impl Report {
    /// Times (manifest seconds) of events whose text starts with `prefix`.
    pub fn events(&self, prefix: &str) -> Vec<f64> {
        self.transitions
            .iter()
            .filter(|t| t.event.starts_with(prefix))
            .map(|t| t.t)
            .collect()
    }

    /// The timeline as a table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for t in &self.transitions {
            out.push_str(&format!(
                "  {:>7.1} s  {:<9}  {:<7}  {}\n",
                t.t, t.probe, t.result, t.event
            ));
        }
        out.push_str(&format!(
            "  => {} restarts, first Ready {}, {} requests sent, {} failed\n",
            self.restarts,
            self.first_ready
                .map_or("never".to_owned(), |t| format!("at {t:.1} s")),
            self.requests_sent,
            self.requests_failed
        ));
        out
    }
}

/// A clock in manifest seconds.
#[derive(Clone, Copy)]
struct Clock {
    origin: Instant,
    scale: f64,
}

impl Clock {
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() / self.scale
    }
    fn at(&self, t: f64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(
            self.origin + Duration::from_secs_f64(t.max(0.0) * self.scale),
        )
    }
    fn real(&self, seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds.max(0.0) * self.scale)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// Runs one HTTP GET; success is a 2xx or 3xx status, as the kubelet counts it.
async fn http_get(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.30\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 16];
    let mut read = 0;
    while read < 12 {
        match stream.read(&mut head[read..]).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => read += n,
        }
    }
    let status = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse::<u16>().ok());
    matches!(status, Some(200..=399))
}

/// Sends one inference request; success is a 200.
async fn infer(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = "POST /v1/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut response = Vec::new();
    if stream.read_to_end(&mut response).await.is_err() {
        return false;
    }
    response.starts_with(b"HTTP/1.1 200")
}

/// Runs a probe's check against the container, within its timeout.
async fn check(probe: &ProbeSpec, port_of: impl Fn(u16) -> u16, clock: &Clock) -> bool {
    let attempt = async {
        match &probe.handler {
            Handler::Http { path, port } => http_get(port_of(*port), path).await,
            Handler::Tcp { port } => TcpStream::connect(("127.0.0.1", port_of(*port)))
                .await
                .is_ok(),
            Handler::Exec { command } => {
                let Some((program, args)) = command.split_first() else {
                    return false;
                };
                Command::new(program)
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .status()
                    .await
                    .is_ok_and(|s| s.success())
            }
        }
    };
    tokio::time::timeout(clock.real(probe.timeout), attempt)
        .await
        .unwrap_or(false)
}

/// The next run of a probe ticking from `start`, at or after `t`, honouring its initial delay.
fn next_run(start: f64, probe: &ProbeSpec, t: f64) -> f64 {
    let earliest = t.max(start + probe.initial_delay);
    start + ((earliest - start) / probe.period - 1e-9).ceil().max(0.0) * probe.period
}

struct Recorder {
    report: Report,
}

impl Recorder {
    fn push(
        &mut self,
        t: f64,
        probe: &'static str,
        result: &'static str,
        event: impl Into<String>,
    ) {
        self.report.transitions.push(Transition {
            t,
            probe,
            result,
            event: event.into(),
        });
    }
}

/// Why a container stopped running.
enum Stop {
    Killed(String),
    Exited(String),
    TimeUp,
}

/// Runs the container for `config.duration` manifest seconds.
pub fn run(spec: &ContainerSpec, config: &Config) -> Report {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run_async(spec, config))
}

async fn run_async(spec: &ContainerSpec, config: &Config) -> Report {
    let clock = Clock {
        origin: Instant::now(),
        scale: config.time_scale,
    };
    let mut rec = Recorder {
        report: Report::default(),
    };
    // The port of the Ready container, as a Service's endpoints would list it.
    let (endpoint_tx, endpoint_rx) = watch::channel::<Option<u16>>(None);
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut traffic = config.traffic_interval.map(|interval| {
        let (sent, failed, mut rx) = (sent.clone(), failed.clone(), endpoint_rx.clone());
        let period = clock.real(interval);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            loop {
                ticker.tick().await;
                let port = *rx.borrow_and_update();
                if let Some(port) = port {
                    sent.fetch_add(1, Ordering::Relaxed);
                    let ok = tokio::time::timeout(Duration::from_secs(5), infer(port))
                        .await
                        .unwrap_or(false);
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    });

    let serving_port = spec.serving_port();
    let closed_port = free_port();
    let mut backoff = BACKOFF_INITIAL;
    loop {
        let start = clock.now();
        if start >= config.duration {
            break;
        }
        let port = free_port();
        let port_of = |p: u16| if p == serving_port { port } else { closed_port };
        let child = Command::new(&config.server)
            .arg("serve")
            .arg("--model")
            .arg(&config.model)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--time-scale")
            .arg(config.time_scale.to_string())
            .args(&config.extra_args)
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                rec.push(
                    start,
                    "container",
                    "-",
                    format!("cannot start {}: {e}", config.server.display()),
                );
                break;
            }
        };
        let event = match rec.report.restarts {
            0 => "started".to_owned(),
            n => format!("restarted (restart {n})"),
        };
        rec.push(start, "container", "-", event);
        let stop = run_container(
            spec,
            config,
            &clock,
            &mut rec,
            &mut child,
            start,
            &port_of,
            &endpoint_tx,
            port,
        )
        .await;
        let _ = endpoint_tx.send(None);
        if matches!(stop, Stop::TimeUp)
            && let Some(task) = traffic.take()
        {
            // The run is over, not the container: a request still in flight now is not a
            // failure, so stop the traffic before killing the server.
            task.abort();
            let _ = task.await;
        }
        let _ = child.kill().await;
        let now = clock.now();
        match stop {
            Stop::TimeUp => break,
            Stop::Killed(why) | Stop::Exited(why) => {
                if now - start >= BACKOFF_RESET {
                    backoff = BACKOFF_INITIAL;
                }
                rec.report.restarts += 1;
                rec.push(
                    now,
                    "container",
                    "-",
                    format!("{why}; CrashLoopBackOff: waiting {} s", backoff as i64),
                );
                tokio::time::sleep_until(clock.at(now + backoff)).await;
                backoff = (backoff * 2.0).min(BACKOFF_MAX);
            }
        }
    }
    if let Some(task) = traffic {
        task.abort();
    }
    rec.report.requests_sent = sent.load(Ordering::Relaxed);
    rec.report.requests_failed = failed.load(Ordering::Relaxed);
    rec.report
}

#[allow(clippy::too_many_arguments)]
async fn run_container(
    spec: &ContainerSpec,
    config: &Config,
    clock: &Clock,
    rec: &mut Recorder,
    child: &mut Child,
    start: f64,
    port_of: &impl Fn(u16) -> u16,
    endpoint: &watch::Sender<Option<u16>>,
    port: u16,
) -> Stop {
    let mut started = spec.startup.is_none();
    let mut ready = false;
    let (mut startup_fail, mut live_fail, mut ready_ok, mut ready_fail) = (0u32, 0u32, 0u32, 0u32);
    let (mut last_startup, mut last_live, mut last_ready) = (None, None, None);
    let mut next_startup = spec.startup.as_ref().map(|p| next_run(start, p, start));
    let mut next_live = if started {
        spec.liveness.as_ref().map(|p| next_run(start, p, start))
    } else {
        None
    };
    let mut next_ready = if started {
        spec.readiness.as_ref().map(|p| next_run(start, p, start))
    } else {
        None
    };
    if started && spec.readiness.is_none() {
        ready = true;
        let _ = endpoint.send(Some(port));
        rec.report.first_ready.get_or_insert(start);
        rec.push(start, "readiness", "-", "Ready (no readiness probe)");
    }
    loop {
        let next = [next_startup, next_live, next_ready]
            .into_iter()
            .flatten()
            .fold(config.duration, f64::min);
        tokio::select! {
            status = child.wait() => {
                let why = match status {
                    Ok(s) => format!("exited ({s})"),
                    Err(e) => format!("lost ({e})"),
                };
                if ready {
                    rec.push(clock.now(), "readiness", "-", "NotReady: container exited");
                }
                return Stop::Exited(why);
            }
            () = tokio::time::sleep_until(clock.at(next)) => {}
        }
        if next >= config.duration {
            return Stop::TimeUp;
        }
        if next_startup == Some(next)
            && let Some(probe) = &spec.startup
        {
            let ok = check(probe, port_of, clock).await;
            if ok {
                started = true;
                next_startup = None;
                rec.push(
                    next,
                    "startup",
                    "success",
                    "startup probe succeeded: liveness and readiness begin",
                );
                next_live = spec.liveness.as_ref().map(|p| next_run(start, p, next));
                next_ready = spec.readiness.as_ref().map(|p| next_run(start, p, next));
                if spec.readiness.is_none() {
                    ready = true;
                    let _ = endpoint.send(Some(port));
                    rec.report.first_ready.get_or_insert(next);
                    rec.push(next, "readiness", "-", "Ready (no readiness probe)");
                }
            } else {
                startup_fail += 1;
                if last_startup != Some(false) {
                    rec.push(next, "startup", "failure", "");
                }
                if startup_fail >= probe.failure_threshold {
                    return Stop::Killed(format!(
                        "killed: startup probe failed {startup_fail} times"
                    ));
                }
                next_startup = Some(next + probe.period);
            }
            last_startup = Some(ok);
        }
        if !started {
            continue;
        }
        if next_ready == Some(next)
            && let Some(probe) = &spec.readiness
        {
            let ok = check(probe, port_of, clock).await;
            let mut event = String::new();
            if ok {
                ready_ok += 1;
                ready_fail = 0;
                if !ready && ready_ok >= probe.success_threshold {
                    ready = true;
                    let _ = endpoint.send(Some(port));
                    rec.report.first_ready.get_or_insert(next);
                    event = "Ready: receives traffic".to_owned();
                }
            } else {
                ready_fail += 1;
                ready_ok = 0;
                if ready && ready_fail >= probe.failure_threshold {
                    ready = false;
                    let _ = endpoint.send(None);
                    event = "NotReady: removed from endpoints".to_owned();
                }
            }
            if last_ready != Some(ok) || !event.is_empty() {
                rec.push(
                    next,
                    "readiness",
                    if ok { "success" } else { "failure" },
                    event,
                );
            }
            last_ready = Some(ok);
            next_ready = Some(next + probe.period);
        }
        if next_live == Some(next)
            && let Some(probe) = &spec.liveness
        {
            let ok = check(probe, port_of, clock).await;
            if ok {
                live_fail = 0;
            } else {
                live_fail += 1;
            }
            if live_fail >= probe.failure_threshold {
                if ready {
                    rec.push(next, "readiness", "-", "NotReady: container killed");
                }
                return Stop::Killed(format!("killed: liveness probe failed {live_fail} times"));
            }
            if last_live != Some(ok) {
                rec.push(next, "liveness", if ok { "success" } else { "failure" }, "");
            }
            last_live = Some(ok);
            next_live = Some(next + probe.period);
        }
    }
}
