//! The kubelet, for one container: start it, probe it, kill it, restart it, and record what
//! happened, on a real clock against a real process.
//!
//! The kubelet's rules are not here: probe timing and thresholds are the engine's
//! [`Prober`], restarts its [`CrashLoop`], the kill's grace periods its [`KillTiming`], so there
//! is one copy of them. What this driver adds is what a cluster adds and the model does not
//! assume: real HTTP/TCP/exec checks with real timeouts against the reference server, probe tick
//! phases and retry jitter drawn from a seed, the real preStop → SIGTERM → grace → SIGKILL
//! sequence on the process, endpoint propagation lag on both edges (the pod stays in the
//! endpoints while it is killed, until it stops, and for the lag after), and open-loop concurrent
//! traffic to whatever the endpoints list. A real kubelet can replace this driver: the scenarios
//! only read a [`Report`].

use crate::spec::{ContainerSpec, Handler, ProbeSpec};
use probelint_policies::ProbeKind;
use probelint_policies::simulate::backoff::{CrashLoop, NodeSettings, Restart};
use probelint_policies::simulate::prober::{ProbeEvent, Prober};
use probelint_policies::simulate::{
    Check, CheckResult, Outcome, Phases, Subject, Trace, Transition, secs,
};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::task::JoinSet;

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
    /// Manifest seconds between requests (open loop: each on its own task, whether or not the
    /// one before has answered) to whatever the endpoints list; `None` sends no traffic.
    pub traffic_interval: Option<f64>,
    /// Extra `reference-server serve` flags (health tuning).
    pub extra_args: Vec<String>,
    /// Draws the probes' tick phases and the pod worker's retry jitter.
    pub seed: u64,
    /// Manifest seconds from Ready to the endpoint reaching the traffic, and from NotReady (or
    /// the container's stop) to its removal.
    pub endpoint_lag: (f64, f64),
    /// The node's CrashLoopBackOff settings.
    pub node: NodeSettings,
    /// A path the harness polls on its own, every 0.2 manifest seconds, to see when the server
    /// is really loaded, independently of the probes (`/startupz` for the reference server).
    pub observe: Option<String>,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// As kubectl's restartCount: containers started again.
    pub restarts: u32,
    pub first_ready: Option<f64>,
    pub transitions: Vec<Transition>,
    pub requests_sent: u64,
    pub requests_failed: u64,
    /// The phases the seed drew.
    pub phases: Phases,
    /// Checks, runs, Ready periods, kills and restarts, for pictures.
    pub trace: Trace,
    /// Per container instance: seconds from its start until `Config::observe` first answered
    /// 2xx (`None`: never while it ran).
    pub loaded_after: Vec<Option<f64>>,
}

impl Report {
    /// The measurement in the model's terms, for the same pictures as `probelint simulate --svg`
    /// (without "model loaded": the harness does not see inside the server).
    pub fn outcome(&self) -> Outcome {
        Outcome {
            restarts: self.restarts,
            first_ready_seconds: self.first_ready,
            ready_while_loading_seconds: 0.0,
            transitions: Vec::new(),
            trace: self.trace.clone(),
        }
    }

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
                t.t, t.subject, t.result, t.event
            ));
        }
        out.push_str(&format!(
            "  => {} restarts, first Ready {}, {} requests sent, {} failed (phases {:.2?}, \
             jitter {:.2})\n",
            self.restarts,
            self.first_ready
                .map_or("never".to_owned(), |t| format!("at {t:.1} s")),
            self.requests_sent,
            self.requests_failed,
            self.phases.probes,
            self.phases.sync
        ));
        out
    }
}

/// The phases a seed draws (splitmix64; the harness's own, independent of the model's samples).
pub fn phases_of(seed: u64) -> Phases {
    let mut state = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    Phases {
        probes: [next(), next(), next()],
        sync: next(),
        // The harness reads its own clock at full precision: no `startedAt` truncation.
        wall: 0.0,
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
async fn check(probe: &ProbeSpec, port: u16, closed: u16, serving: u16, clock: &Clock) -> bool {
    let port_of = |p: u16| if p == serving { port } else { closed };
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
    tokio::time::timeout(clock.real(probe.timing.timeout), attempt)
        .await
        .unwrap_or(false)
}

struct Recorder {
    report: Report,
}

impl Recorder {
    fn push(&mut self, t: f64, subject: Subject, result: CheckResult, event: impl Into<String>) {
        self.report.transitions.push(Transition {
            t,
            subject,
            result,
            event: event.into(),
        });
    }
}

/// The Service's view of the pod: which port the traffic reaches, changed after the lag. A
/// change overtaken by a later one (a removal with a shorter lag than the addition before it) is
/// dropped.
#[derive(Clone)]
struct Endpoints {
    state: Arc<Mutex<(u64, Option<u16>)>>,
    issued: Arc<AtomicU64>,
}

impl Endpoints {
    fn new() -> Self {
        Endpoints {
            state: Arc::new(Mutex::new((0, None))),
            issued: Arc::new(AtomicU64::new(0)),
        }
    }

    fn current(&self) -> Option<u16> {
        self.state.lock().map_or(None, |s| s.1)
    }

    fn set(&self, value: Option<u16>, lag: Duration) {
        let seq = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let state = self.state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(lag).await;
            if let Ok(mut s) = state.lock()
                && s.0 < seq
            {
                *s = (seq, value);
            }
        });
    }
}

/// Why a container stopped running.
enum Stop {
    Killed(ProbeKind, f64),
    Exited(f64, String),
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

fn sigterm(child: &Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

async fn run_async(spec: &ContainerSpec, config: &Config) -> Report {
    let clock = Clock {
        origin: Instant::now(),
        scale: config.time_scale,
    };
    let phases = phases_of(config.seed);
    let mut rec = Recorder {
        report: Report {
            phases,
            ..Report::default()
        },
    };
    let endpoints = Endpoints::new();
    let (add_lag, remove_lag) = (
        clock.real(config.endpoint_lag.0),
        clock.real(config.endpoint_lag.1),
    );
    let sent = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut traffic = config.traffic_interval.map(|interval| {
        let (sent, failed, endpoints) = (sent.clone(), failed.clone(), endpoints.clone());
        let period = clock.real(interval);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            let mut requests = JoinSet::new();
            loop {
                ticker.tick().await;
                while requests.try_join_next().is_some() {}
                if let Some(port) = endpoints.current() {
                    let (sent, failed) = (sent.clone(), failed.clone());
                    requests.spawn(async move {
                        sent.fetch_add(1, Ordering::Relaxed);
                        let ok = tokio::time::timeout(Duration::from_secs(5), infer(port))
                            .await
                            .unwrap_or(false);
                        if !ok {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            }
        })
    });

    let serving_port = spec.serving_port();
    let closed_port = probelint_testkit::net::free_port();
    let timings = |p: &Option<ProbeSpec>| p.as_ref().map(|p| p.timing);
    let mut prober = Prober::new(
        timings(&spec.startup),
        timings(&spec.readiness),
        timings(&spec.liveness),
        phases.probes,
    );
    let mut crash_loop = CrashLoop::new(config.node);
    let mut started_once = false;
    loop {
        let start = clock.now();
        if start >= config.duration {
            break;
        }
        let port = probelint_testkit::net::free_port();
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
                    Subject::Container,
                    CheckResult::NotACheck,
                    format!("cannot start {}: {e}", config.server.display()),
                );
                break;
            }
        };
        let event = if started_once {
            rec.report.restarts += 1;
            rec.report.trace.restarts.push(start);
            format!("restarted (restartCount {})", rec.report.restarts)
        } else {
            "started".to_owned()
        };
        started_once = true;
        rec.push(start, Subject::Container, CheckResult::NotACheck, event);
        let mut ready = false;
        let mut ready_since: Option<f64> = None;
        for e in prober.container_started(start) {
            if e == ProbeEvent::Ready {
                ready = true;
                ready_since = Some(start);
                endpoints.set(Some(port), add_lag);
                rec.report.first_ready.get_or_insert(start);
                rec.push(
                    start,
                    Subject::Probe(ProbeKind::Readiness),
                    CheckResult::NotACheck,
                    "Ready (no readiness probe)",
                );
            }
        }
        let observer = config.observe.clone().map(|path| {
            tokio::spawn(async move {
                loop {
                    if http_get(port, &path).await {
                        return clock.now() - start;
                    }
                    tokio::time::sleep(clock.real(0.2)).await;
                }
            })
        });
        let stop = run_container(
            spec,
            config,
            &clock,
            &mut rec,
            &mut child,
            &mut prober,
            (port, closed_port, serving_port),
            (&endpoints, add_lag, remove_lag),
            (&mut ready, &mut ready_since),
        )
        .await;
        if let Some(task) = observer {
            let loaded = if task.is_finished() {
                task.await.ok()
            } else {
                task.abort();
                None
            };
            rec.report.loaded_after.push(loaded);
            if let Some(after) = loaded {
                rec.report.trace.loaded.push((start + after, f64::NAN));
            }
        }
        let exited = matches!(stop, Stop::Exited(..));
        let stopped = match stop {
            Stop::TimeUp => {
                let end = clock.now().min(config.duration);
                rec.report.trace.running.push((start, end));
                if let Some(l) = rec.report.trace.loaded.last_mut()
                    && l.1.is_nan()
                {
                    l.1 = end;
                }
                if let Some(from) = ready_since.take() {
                    rec.report.trace.ready.push((from, end));
                }
                if let Some(task) = traffic.take() {
                    // The run is over, not the container: a request still in flight now is not
                    // a failure, so stop the traffic before killing the server.
                    task.abort();
                    let _ = task.await;
                }
                let _ = child.kill().await;
                break;
            }
            Stop::Killed(probe, at) => {
                rec.report.trace.kills.push((at, probe));
                // killContainer: the preStop hook within the grace period (the server keeps
                // serving, and stays in the endpoints), then SIGTERM with what is left (never
                // under 2 s), then SIGKILL.
                let grace = spec.kill.grace_for(probe);
                let hook = spec.kill.pre_stop.min(grace);
                if hook > 0.0 {
                    tokio::time::sleep(clock.real(hook)).await;
                }
                sigterm(&child);
                let left = clock.real((grace - hook).max(2.0));
                let how = match tokio::time::timeout(left, child.wait()).await {
                    Ok(_) => "exited on SIGTERM",
                    Err(_) => {
                        let _ = child.kill().await;
                        "SIGKILLed at the end of the grace period"
                    }
                };
                let now = clock.now();
                rec.push(
                    now,
                    Subject::Container,
                    CheckResult::NotACheck,
                    format!(
                        "stopped {} s after the kill: {how}",
                        secs((now - at).max(0.0))
                    ),
                );
                now
            }
            Stop::Exited(at, why) => {
                rec.push(at, Subject::Container, CheckResult::NotACheck, why);
                at
            }
        };
        prober.container_stopped();
        rec.report.trace.running.push((start, stopped));
        if let Some(l) = rec.report.trace.loaded.last_mut()
            && l.1.is_nan()
        {
            l.1 = stopped;
        }
        if let Some(from) = ready_since.take() {
            rec.report.trace.ready.push((from, stopped));
        }
        if ready {
            endpoints.set(None, remove_lag);
            rec.push(
                stopped,
                Subject::Probe(ProbeKind::Readiness),
                CheckResult::NotACheck,
                "NotReady: container stopped",
            );
        }
        let restart = if exited {
            crash_loop.after_exit(stopped, phases.sync)
        } else {
            crash_loop.after_kill(stopped, phases.sync)
        };
        let next = CrashLoop::restart_time(restart, stopped);
        if let Restart::After { backoff, at } = restart {
            rec.push(
                stopped,
                Subject::Container,
                CheckResult::NotACheck,
                format!(
                    "CrashLoopBackOff: back-off {} s, restart at {} s",
                    secs(backoff),
                    secs(at)
                ),
            );
        }
        tokio::time::sleep_until(clock.at(next)).await;
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
    prober: &mut Prober,
    (port, closed, serving): (u16, u16, u16),
    (endpoints, add_lag, remove_lag): (&Endpoints, Duration, Duration),
    (ready, ready_since): (&mut bool, &mut Option<f64>),
) -> Stop {
    let probe_of = |kind: ProbeKind| match kind {
        ProbeKind::Startup => spec.startup.clone(),
        ProbeKind::Readiness => spec.readiness.clone(),
        ProbeKind::Liveness => spec.liveness.clone(),
    };
    let mut checks: JoinSet<(ProbeKind, f64, bool)> = JoinSet::new();
    let mut last: [Option<bool>; 3] = [None; 3];
    loop {
        let due = prober.next_due();
        let wake = due.map_or(config.duration, |d| d.0).min(config.duration);
        tokio::select! {
            status = child.wait() => {
                checks.abort_all();
                let why = match status {
                    Ok(s) => format!("exited ({s})"),
                    Err(e) => format!("lost ({e})"),
                };
                return Stop::Exited(clock.now(), why);
            }
            Some(done) = checks.join_next(), if !checks.is_empty() => {
                let Ok((kind, started, ok)) = done else { continue };
                let end = clock.now();
                rec.report.trace.checks.push(Check { probe: kind, start: started, end, ok });
                let result = CheckResult::of(ok);
                let mut said = false;
                for e in prober.finish(kind, started, end, ok) {
                    said = true;
                    match e {
                        ProbeEvent::Started => rec.push(
                            end,
                            Subject::Probe(ProbeKind::Startup),
                            CheckResult::Success,
                            "startup probe succeeded: liveness and readiness begin",
                        ),
                        ProbeEvent::Ready => {
                            *ready = true;
                            *ready_since = Some(end);
                            endpoints.set(Some(port), add_lag);
                            rec.report.first_ready.get_or_insert(end);
                            let why = if kind == ProbeKind::Readiness {
                                "Ready: receives traffic"
                            } else {
                                "Ready (no readiness probe)"
                            };
                            rec.push(end, Subject::Probe(ProbeKind::Readiness), result, why);
                        }
                        ProbeEvent::NotReady => {
                            *ready = false;
                            if let Some(from) = ready_since.take() {
                                rec.report.trace.ready.push((from, end));
                            }
                            endpoints.set(None, remove_lag);
                            rec.push(
                                end,
                                Subject::Probe(ProbeKind::Readiness),
                                result,
                                "NotReady: removed from endpoints",
                            );
                        }
                        ProbeEvent::Kill { probe, failures } => {
                            checks.abort_all();
                            rec.push(
                                end,
                                Subject::Probe(probe),
                                CheckResult::Failure,
                                format!("killed: {} probe failed {failures} times", probe.noun()),
                            );
                            return Stop::Killed(probe, end);
                        }
                    }
                }
                let slot = kind as usize;
                if !said && last[slot] != Some(ok) {
                    rec.push(end, Subject::Probe(kind), result, "");
                }
                last[slot] = Some(ok);
            }
            () = tokio::time::sleep_until(clock.at(wake)) => {
                if clock.now() >= config.duration {
                    checks.abort_all();
                    return Stop::TimeUp;
                }
                if let Some((t, kind)) = due
                    && let Some(probe) = probe_of(kind)
                {
                    prober.begin(kind, t);
                    let clock = *clock;
                    checks.spawn(async move {
                        let ok = check(&probe, port, closed, serving, &clock).await;
                        (kind, t, ok)
                    });
                }
            }
        }
    }
}
