//! A model of the kubelet for one container and a model load time: probe transitions, restarts
//! (as kubectl's `restartCount` counts them), first-Ready time, from the manifest alone.
//!
//! The kubelet's rules live in two submodules, each citing the Go source it follows:
//! [`prober`] (per-probe workers, their tick phases, thresholds, the startup gate, readiness
//! triggered on pod syncs, checks longer than the period) and [`backoff`] (CrashLoopBackOff as
//! `doBackOff` and client-go's `flowcontrol.Backoff` apply it). This module is the synthetic
//! driver: a server that loads for `load_seconds` after each start, the kill (grace period,
//! preStop hook, the server's own exit time), and the timeline. The conformance harness drives
//! the same [`prober::Prober`] and [`backoff::CrashLoop`] with real checks on a real clock.
//!
//! What the model assumes that the manifest does not say:
//! - Each (re)start loads the model from scratch; loading takes `load_seconds`. A check at or after
//!   the end of the load passes.
//! - While loading, the server either refuses connections, accepts them and answers errors at
//!   once, or accepts and holds HTTP/gRPC until loaded ([`LoadingServer`]); a `tcpSocket` check
//!   passes whenever the port accepts. Exec checks behave as HTTP ones.
//! - Time 0 is the container's first start, plus `start_offset` (scheduling, image pull, volume
//!   attach and init containers are not modelled: the user says how long they take).
//! - The tick phase of each probe is an input (0 by default: the workers' first tick, which is
//!   `probe_lead` before time 0, so before the container's first start without a
//!   `start_offset`: the workers start with the pod, not after its pull); [`spread`]
//!   reruns the model over many phases and reports the range. A restart starts
//!   `restart_latency` after the stop (or the back-off's end).

pub mod backoff;
pub mod fleet;
pub mod prober;

use crate::model::probe::{
    DEFAULT_FAILURE_THRESHOLD, DEFAULT_INITIAL_DELAY, DEFAULT_PERIOD, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT, Field, Handler, Probe, ProbeKind,
};
use backoff::{CrashLoop, NodeSettings, Restart};
use prober::{ProbeEvent, Prober};
use serde::Serialize;

/// Probe timings in seconds, with Kubernetes' defaults applied: an absent field, and a 0 that
/// `SetDefaults_Probe` replaces, both run as the default (a field the apiserver rejects too: the
/// pod would not exist, so the simulation shows the probe as it would run once corrected).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeTiming {
    pub initial_delay: f64,
    pub period: f64,
    /// `timeoutSeconds`: how long a check waits for a server that holds the connection.
    pub timeout: f64,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// Whether the check is a bare TCP connect (which passes once the port accepts).
    pub tcp: bool,
}

impl ProbeTiming {
    pub fn from_probe(probe: &Probe<'_>) -> Self {
        ProbeTiming {
            // Valid fields are int32s ≥ 0 (≥ 1 after defaulting, but for the delay); the clamps only
            // spell that out for the casts.
            initial_delay: probe.initial_delay().max(0) as f64,
            period: probe.period().max(1) as f64,
            timeout: probe.timeout().max(1) as f64,
            success_threshold: probe.success_threshold().clamp(1, i64::from(u32::MAX)) as u32,
            failure_threshold: probe.failure_threshold().clamp(1, i64::from(u32::MAX)) as u32,
            tcp: matches!(probe.handler, Handler::TcpSocket { .. }),
        }
    }
}

/// What the server does with a check while its model loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadingServer {
    /// The port opens only once the model is loaded: every check fails at once.
    Refuses,
    /// The port accepts and HTTP answers an error at once (503): `tcpSocket` passes.
    Unavailable,
    /// The port accepts and HTTP holds the request until the model is loaded: a failed check
    /// takes `timeoutSeconds`, and one in flight when the load ends succeeds.
    Holds,
}

impl LoadingServer {
    /// When a check begun at `t` ends, and whether it passes, for a model loaded at `loaded_at`.
    pub fn check(self, timing: &ProbeTiming, t: f64, loaded_at: f64) -> (f64, bool) {
        if t >= loaded_at {
            return (t, true);
        }
        match self {
            LoadingServer::Refuses => (t, false),
            LoadingServer::Unavailable => (t, timing.tcp),
            LoadingServer::Holds if timing.tcp => (t, true),
            LoadingServer::Holds if loaded_at < t + timing.timeout => (loaded_at, true),
            LoadingServer::Holds => (t + timing.timeout, false),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            LoadingServer::Refuses => "refuses connections while loading",
            LoadingServer::Unavailable => "accepts connections and answers errors while loading",
            LoadingServer::Holds => "accepts connections and holds requests until loaded",
        }
    }
}

/// How long a kill takes (`pkg/kubelet/kuberuntime/kuberuntime_container.go`, `killContainer`
/// and `executePreStopHook`): the grace period is the probe's own
/// `terminationGracePeriodSeconds` for a liveness or startup kill, else the pod's (30 s by
/// default). The preStop hook runs first, for at most the grace period; SIGTERM then gets what is
/// left, never less than 2 s (`minimumGracePeriodInSeconds`), before SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KillTiming {
    pub grace: f64,
    pub startup_grace: Option<f64>,
    pub liveness_grace: Option<f64>,
    /// How long the preStop hook runs (`sleep N`); 0 without one.
    pub pre_stop: f64,
    /// How long the server takes to exit on SIGTERM.
    pub exit_after_sigterm: f64,
}

impl Default for KillTiming {
    fn default() -> Self {
        KillTiming {
            grace: 30.0,
            startup_grace: None,
            liveness_grace: None,
            pre_stop: 0.0,
            exit_after_sigterm: 0.0,
        }
    }
}

/// The kubelet's floor on what SIGTERM gets after the preStop hook.
pub const MINIMUM_GRACE_SECONDS: f64 = 2.0;

impl KillTiming {
    /// The grace period of a kill by `probe`.
    pub fn grace_for(&self, probe: ProbeKind) -> f64 {
        let own = match probe {
            ProbeKind::Startup => self.startup_grace,
            ProbeKind::Liveness => self.liveness_grace,
            ProbeKind::Readiness => None,
        };
        own.unwrap_or(self.grace)
    }

    /// Seconds from the kill to the container's stop.
    pub fn duration(&self, probe: ProbeKind) -> f64 {
        let grace = self.grace_for(probe).max(0.0);
        let hook = self.pre_stop.max(0.0).min(grace);
        let left = (grace - hook).max(MINIMUM_GRACE_SECONDS);
        hook + self.exit_after_sigterm.max(0.0).min(left)
    }
}

/// Where the probes' ticks fall and how the pod worker's retries are jittered: fractions in
/// [0, 1) of each probe's period (startup, readiness, liveness) and of the retry jitter, and
/// where in its second the wall clock is at time 0 (`startedAt` is truncated to it).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Phases {
    pub probes: [f64; 3],
    pub sync: f64,
    pub wall: f64,
}

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub startup: Option<ProbeTiming>,
    pub readiness: Option<ProbeTiming>,
    pub liveness: Option<ProbeTiming>,
    pub load_seconds: f64,
    /// How long to simulate, in seconds of cluster time from the pod's start.
    pub duration: f64,
    pub server: LoadingServer,
    pub kill: KillTiming,
    pub node: NodeSettings,
    pub phases: Phases,
    /// Seconds from the pod's start to its container's first start (pull, init containers).
    pub start_offset: f64,
}

impl Scenario {
    fn timing(&self, kind: ProbeKind) -> Option<&ProbeTiming> {
        match kind {
            ProbeKind::Startup => self.startup.as_ref(),
            ProbeKind::Readiness => self.readiness.as_ref(),
            ProbeKind::Liveness => self.liveness.as_ref(),
        }
    }
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// Seconds since the pod's start (the container's first start plus `start_offset`).
    pub t: f64,
    /// What the line is about: `startup`, `readiness`, `liveness`, or `container`.
    #[serde(rename = "probe")]
    pub subject: Subject,
    /// `success`, `failure`, or `-` where the line is no check's.
    pub result: CheckResult,
    /// What the kubelet did, when it did something.
    pub event: String,
}

/// What a line of a timeline is about: the container itself, or one of its probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Container,
    Probe(ProbeKind),
}

impl Subject {
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Container => "container",
            Subject::Probe(kind) => kind.noun(),
        }
    }

    /// The probe the line is about, if it is about one.
    pub fn probe(self) -> Option<ProbeKind> {
        match self {
            Subject::Container => None,
            Subject::Probe(kind) => Some(kind),
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for Subject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A check's result on a timeline line: `NotACheck` (shown `-`) where the line is a container
/// event or a decision no single check made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CheckResult {
    #[serde(rename = "success")]
    Success,
    #[serde(rename = "failure")]
    Failure,
    #[serde(rename = "-")]
    NotACheck,
}

impl CheckResult {
    pub fn of(ok: bool) -> Self {
        if ok {
            CheckResult::Success
        } else {
            CheckResult::Failure
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CheckResult::Success => "success",
            CheckResult::Failure => "failure",
            CheckResult::NotACheck => "-",
        }
    }
}

impl std::fmt::Display for CheckResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One check the prober ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    pub probe: ProbeKind,
    pub start: f64,
    pub end: f64,
    pub ok: bool,
}

/// Everything that happened, for pictures: intervals are `[from, to)` in timeline seconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    pub checks: Vec<Check>,
    /// Container instances running (start, stop).
    pub running: Vec<(f64, f64)>,
    /// Model loaded and serving (loaded, stop).
    pub loaded: Vec<(f64, f64)>,
    /// Ready (in the Service's endpoints).
    pub ready: Vec<(f64, f64)>,
    /// Kills decided (time, probe).
    pub kills: Vec<(f64, ProbeKind)>,
    /// Restarts (time).
    pub restarts: Vec<f64>,
}

/// The prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Restarts within the duration, as kubectl's `restartCount` shows them: a container waiting
    /// in CrashLoopBackOff is not counted until it starts again.
    pub restarts: u32,
    /// Seconds from the pod's start to first Ready; `None` when never Ready within the duration.
    pub first_ready_seconds: Option<f64>,
    /// Seconds the pod was Ready (receiving traffic) while its model was not loaded: every
    /// request routed to it then fails.
    pub ready_while_loading_seconds: f64,
    pub transitions: Vec<Transition>,
    #[serde(skip)]
    pub trace: Trace,
}

fn push(
    out: &mut Outcome,
    t: f64,
    subject: Subject,
    result: CheckResult,
    event: impl Into<String>,
) {
    out.transitions.push(Transition {
        t,
        subject,
        result,
        event: event.into(),
    });
}

/// Seconds, as the timeline prints them: whole seconds exactly, else to a tenth.
pub fn secs(t: f64) -> String {
    if (t - t.round()).abs() < 1e-6 {
        format!("{}", t.round() as i64)
    } else {
        format!("{t:.1}")
    }
}

/// Simulates the scenario with its phases.
pub fn simulate(s: &Scenario) -> Outcome {
    let mut out = Outcome {
        restarts: 0,
        first_ready_seconds: None,
        ready_while_loading_seconds: 0.0,
        transitions: Vec::new(),
        trace: Trace::default(),
    };
    // The workers start before the container does (`NodeSettings::probe_lead`).
    let mut prober = Prober::new(s.startup, s.readiness, s.liveness, s.phases.probes)
        .ticking_from(-s.node.probe_lead.max(0.0))
        .on_wall_clock(s.phases.wall);
    let mut crash_loop = CrashLoop::new(s.node);
    let mut start = s.start_offset.max(0.0);
    // Guards against pathological inputs: a run cannot produce more than this many events.
    let mut budget = 200_000u32;
    'container: while start < s.duration && budget > 0 {
        let event = match out.restarts {
            0 if out.trace.running.is_empty() => "started".to_owned(),
            _ => {
                out.restarts += 1;
                out.trace.restarts.push(start);
                format!("restarted (restartCount {})", out.restarts)
            }
        };
        push(
            &mut out,
            start,
            Subject::Container,
            CheckResult::NotACheck,
            event,
        );
        let loaded_at = start + s.load_seconds;
        let mut ready_since: Option<f64> = None;
        let became_ready = |out: &mut Outcome, t: f64, why: &str, since: &mut Option<f64>| {
            *since = Some(t);
            out.first_ready_seconds.get_or_insert(t);
            push(
                out,
                t,
                Subject::Probe(ProbeKind::Readiness),
                CheckResult::NotACheck,
                why,
            );
        };
        let mut last: [Option<bool>; 3] = [None; 3];
        for e in prober.container_started(start) {
            if e == ProbeEvent::Ready {
                became_ready(
                    &mut out,
                    start,
                    "Ready (no readiness probe)",
                    &mut ready_since,
                );
            }
        }
        let mut in_flight: Vec<Check> = Vec::new();
        let stop = loop {
            budget = budget.saturating_sub(1);
            let next_end = in_flight
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.end.total_cmp(&b.1.end))
                .map(|(i, c)| (i, c.end));
            let next_start = prober.next_due();
            let t = match (next_end, next_start) {
                (Some((_, e)), Some((b, _))) => e.min(b),
                (Some((_, e)), None) => e,
                (None, Some((b, _))) => b,
                (None, None) => s.duration,
            };
            if t >= s.duration || budget == 0 {
                break s.duration;
            }
            if let Some((i, end)) = next_end
                && end <= t
            {
                let check = in_flight.swap_remove(i);
                out.trace.checks.push(check);
                let slot = check.probe as usize;
                let events = prober.finish(check.probe, check.start, check.end, check.ok);
                let result = CheckResult::of(check.ok);
                let mut kill = None;
                let mut said = false;
                for e in events {
                    said = true;
                    match e {
                        ProbeEvent::Started => push(
                            &mut out,
                            end,
                            Subject::Probe(ProbeKind::Startup),
                            CheckResult::Success,
                            "startup probe succeeded: liveness and readiness begin",
                        ),
                        ProbeEvent::Ready if check.probe == ProbeKind::Readiness => {
                            became_ready(
                                &mut out,
                                end,
                                "Ready: receives traffic",
                                &mut ready_since,
                            );
                            // The line says both the result and the event.
                            if let Some(l) = out.transitions.last_mut() {
                                l.result = result;
                            }
                        }
                        ProbeEvent::Ready => became_ready(
                            &mut out,
                            end,
                            "Ready (no readiness probe)",
                            &mut ready_since,
                        ),
                        ProbeEvent::NotReady => {
                            close_ready(&mut out, &mut ready_since, end);
                            push(
                                &mut out,
                                end,
                                Subject::Probe(ProbeKind::Readiness),
                                result,
                                "NotReady: removed from endpoints",
                            );
                        }
                        ProbeEvent::Kill { probe, failures } => {
                            push(
                                &mut out,
                                end,
                                Subject::Probe(probe),
                                CheckResult::Failure,
                                format!("killed: {} probe failed {failures} times", probe.noun()),
                            );
                            kill = Some(probe);
                        }
                    }
                }
                if !said && last[slot] != Some(check.ok) {
                    push(&mut out, end, Subject::Probe(check.probe), result, "");
                }
                last[slot] = Some(check.ok);
                if let Some(probe) = kill {
                    out.trace.kills.push((end, probe));
                    let stopped = end + s.kill.duration(probe);
                    if stopped > end {
                        push(
                            &mut out,
                            stopped.min(s.duration),
                            Subject::Container,
                            CheckResult::NotACheck,
                            format!(
                                "stopped, {} s after the kill (preStop, then SIGTERM; grace {} s)",
                                secs(stopped - end),
                                secs(s.kill.grace_for(probe))
                            ),
                        );
                    }
                    break stopped;
                }
                continue;
            }
            if let Some((b, kind)) = next_start
                && let Some(timing) = s.timing(kind)
            {
                prober.begin(kind, b);
                let (end, ok) = s.server.check(timing, b, loaded_at);
                in_flight.push(Check {
                    probe: kind,
                    start: b,
                    end,
                    ok,
                });
            }
        };
        prober.container_stopped();
        // The pod stays in the endpoints until its container stops.
        close_ready(&mut out, &mut ready_since, stop.min(s.duration));
        out.trace.running.push((start, stop.min(s.duration)));
        if loaded_at < stop.min(s.duration) {
            out.trace.loaded.push((loaded_at, stop.min(s.duration)));
        }
        if stop >= s.duration {
            break 'container;
        }
        let restart = crash_loop.after_kill(stop, s.phases.sync);
        let next = CrashLoop::restart_time(restart, stop) + s.node.restart_latency.max(0.0);
        let why = match restart {
            Restart::Immediate {
                previous_finished: None,
                ..
            } => "restarting at once: no exited instance yet, so no back-off".to_owned(),
            Restart::Immediate {
                backoff: None,
                previous_finished: Some(p),
            } => format!(
                "restarting at once: the instance before finished {} s ago and the first \
                 restart made no back-off entry",
                secs(stop - p)
            ),
            Restart::Immediate {
                backoff,
                previous_finished: Some(p),
            } => format!(
                "restarting at once: the instance before finished {} s ago, not within the {} s \
                 back-off",
                secs(stop - p),
                secs(backoff.unwrap_or(0.0))
            ),
            Restart::After { backoff, at } => format!(
                "CrashLoopBackOff: back-off {} s, restart at {} s",
                secs(backoff),
                secs(at)
            ),
        };
        push(
            &mut out,
            stop,
            Subject::Container,
            CheckResult::NotACheck,
            why,
        );
        start = next;
    }
    out.ready_while_loading_seconds = out
        .trace
        .ready
        .iter()
        .map(|(from, to)| {
            let loaded = out
                .trace
                .running
                .iter()
                .find(|(a, b)| *a <= *from && *from < b.max(*a + 1e-9))
                .map_or(*to, |(a, _)| a + s.load_seconds);
            (to.min(loaded) - from).max(0.0)
        })
        .sum();
    out
}

/// Ends a Ready interval at `end`.
fn close_ready(out: &mut Outcome, since: &mut Option<f64>, end: f64) {
    if let Some(from) = since.take() {
        out.trace.ready.push((from, end.max(from)));
    }
}

/// What varies between clusters that the manifest cannot fix: probe phases, retry jitter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// How many phase combinations were run.
    pub samples: usize,
    pub restarts_min: u32,
    pub restarts_max: u32,
    /// Earliest and latest first Ready among the runs that became Ready.
    pub first_ready_earliest: Option<f64>,
    pub first_ready_latest: Option<f64>,
    /// How many runs became Ready within the duration.
    pub ready_runs: usize,
    /// Earliest and latest first kill among the runs that killed.
    pub first_kill_earliest: Option<f64>,
    pub first_kill_latest: Option<f64>,
}

/// The phase combinations [`spread`] runs: all ticks at the start, all just before the next
/// period, and pseudo-random ones (fixed, so the output is reproducible).
pub fn phase_samples(n: usize) -> Vec<Phases> {
    let mut out = vec![
        Phases::default(),
        Phases {
            probes: [0.999; 3],
            sync: 0.999,
            wall: 0.999,
        },
    ];
    // splitmix64: enough to spread phases; no need for a random-number crate.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    while out.len() < n.max(2) {
        out.push(Phases {
            probes: [next(), next(), next()],
            sync: next(),
            wall: next(),
        });
    }
    out
}

/// Runs the scenario over [`phase_samples`] and reports the range of what the phase changes.
pub fn spread(s: &Scenario) -> Spread {
    let samples = phase_samples(32);
    let mut spread = Spread {
        samples: samples.len(),
        restarts_min: u32::MAX,
        restarts_max: 0,
        first_ready_earliest: None,
        first_ready_latest: None,
        ready_runs: 0,
        first_kill_earliest: None,
        first_kill_latest: None,
    };
    let min = |a: Option<f64>, b: f64| Some(a.map_or(b, |a| a.min(b)));
    let max = |a: Option<f64>, b: f64| Some(a.map_or(b, |a| a.max(b)));
    for phases in samples {
        let o = simulate(&Scenario {
            phases,
            ..s.clone()
        });
        spread.restarts_min = spread.restarts_min.min(o.restarts);
        spread.restarts_max = spread.restarts_max.max(o.restarts);
        if let Some(r) = o.first_ready_seconds {
            spread.ready_runs += 1;
            spread.first_ready_earliest = min(spread.first_ready_earliest, r);
            spread.first_ready_latest = max(spread.first_ready_latest, r);
        }
        if let Some((k, _)) = o.trace.kills.first() {
            spread.first_kill_earliest = min(spread.first_kill_earliest, *k);
            spread.first_kill_latest = max(spread.first_kill_latest, *k);
        }
    }
    spread
}

/// Builds the scenario of a container from its probes, with the kubelet's defaults for the rest.
pub fn scenario_for(
    container: &crate::analysis::object::Container<'_>,
    load_seconds: f64,
    duration: f64,
) -> Scenario {
    let timing = |k| container.probe(k).map(|p| ProbeTiming::from_probe(p));
    let probe_grace = |k| {
        container
            .probe(k)
            .and_then(|p| p.value.get("terminationGracePeriodSeconds"))
            .and_then(serde_json::Value::as_f64)
            .filter(|g| *g >= 1.0)
    };
    Scenario {
        startup: timing(ProbeKind::Startup),
        readiness: timing(ProbeKind::Readiness),
        liveness: timing(ProbeKind::Liveness),
        load_seconds,
        duration,
        server: LoadingServer::Unavailable,
        kill: KillTiming {
            startup_grace: probe_grace(ProbeKind::Startup),
            liveness_grace: probe_grace(ProbeKind::Liveness),
            pre_stop: pre_stop_seconds(container.value).map_or(0.0, |(s, _)| s),
            ..KillTiming::default()
        },
        node: NodeSettings::default(),
        phases: Phases::default(),
        start_offset: 0.0,
    }
}

/// What `container`'s recognised server does with a check while its model loads, from the
/// server table: the port closed (vLLM, TGI…) refuses every check; a server that is up but
/// answers 503 (llama.cpp, SGLang), or one whose behaviour is not known, passes only `tcpSocket`
/// checks, the worse case for a startupProbe on the port.
pub fn loading_server_of(container: &crate::analysis::object::Container<'_>) -> LoadingServer {
    match container.server.map(|s| s.during_load) {
        Some(crate::model::servers::DuringLoad::PortClosed) => LoadingServer::Refuses,
        _ => LoadingServer::Unavailable,
    }
}

/// [`scenario_for`] with the pod's `terminationGracePeriodSeconds`.
pub fn scenario_for_pod(
    pod: &crate::analysis::object::PodSpec<'_>,
    container: &crate::analysis::object::Container<'_>,
    load_seconds: f64,
    duration: f64,
) -> Scenario {
    let mut s = scenario_for(container, load_seconds, duration);
    s.kill.grace = pod.termination_grace_period().max(0) as f64;
    s
}

/// How long a container's preStop hook runs, and whether that is known: the native `sleep`
/// action, or an exec hook that sleeps (`sleep 20`, `sh -c "sleep 20 && ..."`). An HTTP hook or
/// another command: unknown, taken as 0 s.
pub fn pre_stop_seconds(container: &serde_json::Value) -> Option<(f64, bool)> {
    let hook = container.pointer("/lifecycle/preStop")?;
    if let Some(n) = hook
        .pointer("/sleep/seconds")
        .and_then(serde_json::Value::as_f64)
    {
        return Some((n.max(0.0), true));
    }
    let words: Vec<String> = hook
        .pointer("/exec/command")
        .and_then(serde_json::Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(serde_json::Value::as_str)
                .flat_map(|a| a.split([' ', ';', '&', '|']))
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let sleep = words
        .windows(2)
        .find(|w| w[0] == "sleep" || w[0].ends_with("/sleep"))
        .and_then(|w| w[1].trim_end_matches('s').parse::<f64>().ok());
    Some(match sleep {
        Some(n) => (n.max(0.0), true),
        None => (0.0, false),
    })
}

/// What a simulation of `container` assumes that its manifest does not spell out, for the
/// timeline to say: a probe field written as 0 runs as the apiserver's default
/// (`SetDefaults_Probe`), and a field the apiserver rejects is simulated with the default.
pub fn assumptions(container: &crate::analysis::object::Container<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for probe in container.probes() {
        let fields = [
            (
                "initialDelaySeconds",
                probe.initial_delay_seconds,
                DEFAULT_INITIAL_DELAY,
            ),
            ("periodSeconds", probe.period_seconds, DEFAULT_PERIOD),
            ("timeoutSeconds", probe.timeout_seconds, DEFAULT_TIMEOUT),
            (
                "successThreshold",
                probe.success_threshold,
                DEFAULT_SUCCESS_THRESHOLD,
            ),
            (
                "failureThreshold",
                probe.failure_threshold,
                DEFAULT_FAILURE_THRESHOLD,
            ),
        ];
        for (name, field, default) in fields {
            match field {
                Field::Zero(d) => out.push(format!(
                    "{}.{name}: 0 runs as {d}, the apiserver's default",
                    probe.kind.field()
                )),
                Field::Invalid(_) => out.push(format!(
                    "{}.{name}: {} is rejected by the apiserver (probe-threshold-invalid); \
                     simulated as the default, {default}",
                    probe.kind.field(),
                    crate::model::fields::get(probe.value, name)
                        .map_or_else(String::new, ToString::to_string)
                )),
                Field::Default(_) | Field::Set(_) => {}
            }
        }
    }
    match pre_stop_seconds(container.value) {
        Some((seconds, true)) if seconds > 0.0 => out.push(format!(
            "lifecycle.preStop sleeps {} s before SIGTERM on every kill",
            secs(seconds)
        )),
        Some((_, false)) => out.push(
            "lifecycle.preStop: how long this hook runs is not known; simulated as 0 s".to_owned(),
        ),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(initial_delay: f64, period: f64, failure: u32) -> ProbeTiming {
        ProbeTiming {
            initial_delay,
            period,
            timeout: 1.0,
            success_threshold: 1,
            failure_threshold: failure,
            tcp: false,
        }
    }

    fn scenario(
        startup: Option<ProbeTiming>,
        readiness: Option<ProbeTiming>,
        liveness: Option<ProbeTiming>,
        load: f64,
    ) -> Scenario {
        Scenario {
            startup,
            readiness,
            liveness,
            load_seconds: load,
            duration: 1800.0,
            server: LoadingServer::Unavailable,
            kill: KillTiming::default(),
            // The kubelet's rules alone; the node's own timing has tests of its own.
            node: NodeSettings::default().instant(),
            phases: Phases::default(),
            start_offset: 0.0,
        }
    }

    fn events<'a>(o: &'a Outcome, prefix: &str) -> Vec<(f64, &'a str)> {
        o.transitions
            .iter()
            .filter(|t| t.event.starts_with(prefix))
            .map(|t| (t.t, t.event.as_str()))
            .collect()
    }

    /// The README's first scenario: liveness (initialDelay 10, period 10, 3 failures) and no
    /// startup probe, against a 300 s load, for 800 s.
    fn readme_first() -> Scenario {
        let mut s = scenario(
            None,
            Some(timing(0.0, 10.0, 3)),
            Some(timing(10.0, 10.0, 3)),
            300.0,
        );
        s.duration = 800.0;
        s.server = LoadingServer::Refuses;
        s
    }

    #[test]
    fn first_restarts_are_immediate_until_the_back_off_outgrows_a_run() {
        // Killed 30 s after each start. doBackOff judges against the instance before the one
        // killed: none at the first kill, then 30 s ago while the back-off is 10 and 20 s.
        let out = simulate(&readme_first());
        assert_eq!(
            out.trace.restarts,
            [30.0, 60.0, 90.0, 120.0, 190.0, 300.0, 490.0]
        );
        assert_eq!(out.restarts, 7, "restartCount after 800 s");
        assert_eq!(out.first_ready_seconds, None);
        let waits = events(&out, "CrashLoopBackOff");
        assert_eq!(
            waits,
            [
                (150.0, "CrashLoopBackOff: back-off 40 s, restart at 190 s"),
                (220.0, "CrashLoopBackOff: back-off 80 s, restart at 300 s"),
                (330.0, "CrashLoopBackOff: back-off 160 s, restart at 490 s"),
                (520.0, "CrashLoopBackOff: back-off 300 s, restart at 820 s"),
            ]
        );
        assert_eq!(
            events(&out, "restarting at once")[0],
            (
                30.0,
                "restarting at once: no exited instance yet, so no back-off"
            )
        );
    }

    #[test]
    fn the_phase_moves_the_first_kill_within_one_period() {
        // [iD + (F−1)·P, iD + F·P) = [30, 40), and up to a second earlier: the delay counts
        // from `startedAt` truncated to the wall clock's second.
        let sp = spread(&readme_first());
        let (lo, hi) = (
            sp.first_kill_earliest.unwrap(),
            sp.first_kill_latest.unwrap(),
        );
        assert!(lo > 29.0 && lo < 30.0, "{lo}");
        assert!(hi < 40.0 && hi > 38.0, "{hi}");
        assert!(sp.restarts_min >= 6 && sp.restarts_max <= 9, "{sp:?}");
    }

    #[test]
    fn a_probe_at_the_end_of_the_load_passes_and_readiness_follows_startup_at_once() {
        // Startup every 10 s covering the load; readiness every 30 s: startup succeeds at 300,
        // the pod sync triggers readiness, Ready at 300, not at the next readiness tick.
        let out = simulate(&scenario(
            Some(timing(0.0, 10.0, 38)),
            Some(timing(0.0, 30.0, 3)),
            Some(timing(0.0, 10.0, 3)),
            300.0,
        ));
        assert_eq!(out.restarts, 0);
        assert_eq!(out.first_ready_seconds, Some(300.0));
        assert_eq!(out.ready_while_loading_seconds, 0.0);
        // With any phase: Ready within one startup period of the load.
        let sp = spread(&scenario(
            Some(timing(0.0, 10.0, 38)),
            Some(timing(0.0, 30.0, 3)),
            None,
            300.0,
        ));
        assert!(sp.first_ready_earliest.unwrap() >= 300.0);
        assert!(sp.first_ready_latest.unwrap() < 310.0, "{sp:?}");
    }

    #[test]
    fn the_probe_grace_period_bounds_a_slow_exit() {
        // The server takes 60 s to exit on SIGTERM; the pod gives 30 s, the liveness probe 5 s.
        let mut s = readme_first();
        s.kill.exit_after_sigterm = 60.0;
        let out = simulate(&s);
        assert_eq!(out.trace.restarts[0], 30.0 + 30.0);
        s.kill.liveness_grace = Some(5.0);
        let out = simulate(&s);
        assert_eq!(out.trace.restarts[0], 30.0 + 5.0);
        assert_eq!(KillTiming::default().duration(ProbeKind::Liveness), 0.0);
    }

    #[test]
    fn a_pre_stop_sleep_lengthens_each_cycle_and_sigterm_keeps_two_seconds() {
        let mut s = readme_first();
        s.kill.pre_stop = 20.0;
        let out = simulate(&s);
        assert_eq!(out.trace.restarts[0], 50.0);
        assert_eq!(out.trace.kills[1].0, 50.0 + 30.0);
        // A hook longer than the grace period is cut at it; SIGTERM still gets 2 s.
        let k = KillTiming {
            grace: 10.0,
            pre_stop: 60.0,
            exit_after_sigterm: 5.0,
            ..KillTiming::default()
        };
        assert_eq!(k.duration(ProbeKind::Liveness), 12.0);
    }

    #[test]
    fn a_server_that_holds_makes_the_timeout_the_period() {
        // Period 10, timeout 30, against a server that accepts and holds while loading: three
        // checks of 30 s each before the kill, not three ticks 10 s apart.
        let mut live = timing(0.0, 10.0, 3);
        live.timeout = 30.0;
        let mut s = scenario(None, None, Some(live), 300.0);
        s.server = LoadingServer::Holds;
        let out = simulate(&s);
        assert_eq!(out.trace.kills[0].0, 90.0);
        // Refusing, the same probe kills at 20.
        s.server = LoadingServer::Refuses;
        assert_eq!(simulate(&s).trace.kills[0].0, 20.0);
        // A check in flight when the load ends succeeds: startup with timeout 30 from 280.
        let mut startup = timing(0.0, 10.0, 20);
        startup.timeout = 30.0;
        let mut s = scenario(Some(startup), None, None, 295.0);
        s.server = LoadingServer::Holds;
        let out = simulate(&s);
        assert_eq!(out.restarts, 0);
        assert_eq!(out.first_ready_seconds, Some(295.0));
    }

    /// A startupProbe whose budget (30 × 10 s) is exactly the load (300 s).
    fn budget_equals_load(node: NodeSettings) -> Scenario {
        let mut s = scenario(
            Some(timing(0.0, 10.0, 30)),
            Some(timing(0.0, 10.0, 3)),
            None,
            300.0,
        );
        s.server = LoadingServer::Refuses;
        s.node = node;
        s
    }

    #[test]
    fn a_budget_of_exactly_the_load_storms_on_a_real_node() {
        // The kubelet's rules alone: the first instance is killed at its 30th failure (290 s);
        // the second's ticks then fall on its load's end, and it is Ready at 590 s.
        let ideal = simulate(&budget_equals_load(NodeSettings::default().instant()));
        assert_eq!(
            (ideal.restarts, ideal.first_ready_seconds),
            (1, Some(590.0))
        );
        // On a node whose workers tick half a second before each period and whose restarts take
        // half a second, the 30th failure comes 0.5 s before the load ends, every time: a storm.
        let real = simulate(&budget_equals_load(NodeSettings::default()));
        assert_eq!(real.first_ready_seconds, None);
        let kills: Vec<f64> = real.trace.kills.iter().map(|k| k.0).collect();
        assert_eq!(kills, [299.5, 599.5, 899.5, 1199.5, 1499.5, 1799.5]);
        assert_eq!(real.trace.restarts, [300.0, 600.0, 900.0, 1200.0, 1500.0]);
        // One tick more of budget is enough on the same node.
        let mut more = budget_equals_load(NodeSettings::default());
        more.startup = Some(timing(0.0, 10.0, 31));
        let more = simulate(&more);
        assert_eq!((more.restarts, more.first_ready_seconds), (0, Some(309.5)));
    }

    #[test]
    fn the_node_lead_delays_the_first_liveness_kill_by_a_skipped_tick() {
        // initialDelaySeconds 10: the tick 9.5 s after the start is still inside the delay, so
        // the third failure is at 39.5 s (the real kubelet's first kill in tests/kubelet came at
        // 39 s in the API's whole seconds), and the restart half a second after it.
        let mut s = readme_first();
        s.node = NodeSettings::default();
        let out = simulate(&s);
        assert_eq!(out.trace.kills[0].0, 39.5);
        assert_eq!(out.trace.restarts[0], 40.0);
    }

    #[test]
    fn the_initial_delay_counts_from_the_start_truncated_to_its_wall_clock_second() {
        // Ticks at 9.5, 19.5… after the first start. With time 0 on a whole second the tick at
        // 9.5 s is inside initialDelaySeconds 10; with time 0 at .6 of a second the start reads
        // as 0.6 s earlier, the tick is 10.1 s after it, and counts: the kill comes a period
        // sooner. Whether an instance runs 30 or 40 s depends on which side of a second its
        // start lands: the real kubelet's instances ran 39 and 31 s by turns
        // (tests/kubelet/README.md).
        let mut s = readme_first();
        s.node = NodeSettings::default();
        s.phases.wall = 0.6;
        let out = simulate(&s);
        assert_eq!(out.trace.kills[0].0, 29.5);
        s.phases.wall = 0.4;
        let out = simulate(&s);
        assert_eq!(out.trace.kills[0].0, 39.5);
    }

    #[test]
    fn start_offset_and_node_settings_shift_and_reshape_the_timeline() {
        let mut s = readme_first();
        s.start_offset = 45.0;
        let out = simulate(&s);
        // The worker's ticks (0, 10, 20...) do not move with the container: the first one 10 s
        // after the start at 45 is 60, the third failure 80.
        assert_eq!(out.trace.kills[0].0, 80.0);
        assert_eq!(out.transitions[0].t, 45.0);
        let mut s = readme_first();
        s.node = NodeSettings::default().instant().reduced_decay();
        let out = simulate(&s);
        // 1 s doubling to 60 s: never more than 60 s of waiting.
        assert!(out.restarts > 7, "{}", out.restarts);
        let waits = events(&out, "CrashLoopBackOff");
        assert!(
            waits.iter().all(|(_, w)| !w.contains("back-off 120")),
            "{waits:?}"
        );
    }

    #[test]
    fn tcp_readiness_is_ready_before_the_model_is_loaded() {
        let mut tcp = timing(0.0, 10.0, 3);
        tcp.tcp = true;
        let out = simulate(&scenario(
            Some(timing(0.0, 10.0, 40)),
            Some(tcp),
            None,
            300.0,
        ));
        // The startup probe (HTTP) gates readiness until the load is done...
        assert!(out.first_ready_seconds.unwrap() >= 300.0);
        // ...but without a startup probe, the open port makes the pod Ready at once.
        let out = simulate(&scenario(None, Some(tcp), None, 300.0));
        assert_eq!(out.first_ready_seconds, Some(0.0));
        assert_eq!(
            out.ready_while_loading_seconds, 300.0,
            "Ready for the whole load"
        );
    }

    #[test]
    fn no_probes_is_ready_immediately() {
        let out = simulate(&scenario(None, None, None, 300.0));
        assert_eq!(out.first_ready_seconds, Some(0.0));
        assert_eq!(out.restarts, 0);
    }

    #[test]
    fn initial_delay_skips_ticks_and_success_threshold_counts() {
        let mut r = timing(25.0, 10.0, 3);
        r.success_threshold = 2;
        let out = simulate(&scenario(None, Some(r), None, 0.0));
        // Ticks at 0, 10, 20 are skipped; 30 and 40 succeed.
        assert_eq!(out.first_ready_seconds, Some(40.0));
    }

    #[test]
    fn pre_stop_hooks_are_read_from_the_manifest() {
        use serde_json::json;
        let c = |hook| json!({"lifecycle": {"preStop": hook}});
        assert_eq!(
            pre_stop_seconds(&c(json!({"sleep": {"seconds": 15}}))),
            Some((15.0, true))
        );
        assert_eq!(
            pre_stop_seconds(&c(
                json!({"exec": {"command": ["/bin/sh", "-c", "sleep 20 && kill 1"]}})
            )),
            Some((20.0, true))
        );
        assert_eq!(
            pre_stop_seconds(&c(json!({"httpGet": {"path": "/drain", "port": 80}}))),
            Some((0.0, false))
        );
        assert_eq!(pre_stop_seconds(&json!({})), None);
    }

    #[test]
    fn zero_fields_simulate_exactly_as_the_apiserver_defaults() {
        use crate::model::probe::Probe;
        use serde_json::json;
        let handler = json!({"path": "/health", "port": 8000});
        let zeros = json!({"httpGet": handler, "periodSeconds": 0, "timeoutSeconds": 0,
            "successThreshold": 0, "failureThreshold": 0, "initialDelaySeconds": 0});
        let defaults = json!({"httpGet": handler, "periodSeconds": 10, "timeoutSeconds": 1,
            "successThreshold": 1, "failureThreshold": 3});
        let absent = json!({"httpGet": handler});
        let timing = |kind, v| ProbeTiming::from_probe(&Probe::from_value(kind, "/p".into(), v));
        for kind in ProbeKind::ALL {
            assert_eq!(timing(kind, &zeros), timing(kind, &defaults), "{kind:?}");
            assert_eq!(timing(kind, &absent), timing(kind, &defaults), "{kind:?}");
        }
        let run = |v| {
            simulate(&scenario(
                Some(timing(ProbeKind::Startup, v)),
                Some(timing(ProbeKind::Readiness, v)),
                Some(timing(ProbeKind::Liveness, v)),
                120.0,
            ))
        };
        let with_zeros = run(&zeros);
        assert_eq!(with_zeros, run(&defaults));
        // 3 × 10 s of startup budget against a 120 s load: the default restart loop.
        assert!(with_zeros.restarts > 0);
        assert!(
            with_zeros
                .transitions
                .iter()
                .any(|t| t.event == "killed: startup probe failed 3 times")
        );
    }

    #[test]
    fn assumptions_say_which_numbers_are_defaults_the_manifest_did_not_write() {
        use serde_json::json;
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "m",
            "startupProbe": {"httpGet": {"path": "/h", "port": 1}, "periodSeconds": 0,
                "failureThreshold": -1, "timeoutSeconds": 5},
            "readinessProbe": {"httpGet": {"path": "/h", "port": 1}}}]}});
        let policy = crate::Policy::default();
        let w = crate::analysis::object::Workload::analyse(0, &pod, &policy);
        assert_eq!(
            assumptions(&w.pod_specs[0].containers[0]),
            [
                "startupProbe.periodSeconds: 0 runs as 10, the apiserver's default",
                "startupProbe.failureThreshold: -1 is rejected by the apiserver \
                 (probe-threshold-invalid); simulated as the default, 3",
            ]
        );
    }
}
