//! The kubelet's prober for one container, read from the Go source (kubernetes/kubernetes
//! `pkg/kubelet/prober/worker.go`, `run` and `doProbe`; `prober_manager.go`, `UpdatePodStatus`):
//!
//! - One worker per probe, created when the pod is added and kept across container restarts. Its
//!   ticker fires every `periodSeconds` from when the worker started (a kubelet that has just
//!   started also sleeps a random fraction of the period first): the phase of the ticks against
//!   a container start is arbitrary, and the same for every restart of the container. The phase
//!   is an input here (a fraction of the period); [`super::spread`] runs the model over many.
//! - A check runs synchronously in the worker; the Go ticker keeps one tick buffered, so a check
//!   longer than the period (`timeoutSeconds` against a server that holds the connection) is
//!   followed at once by the next: the effective period is `max(period, check time)`.
//! - `doProbe` skips (consuming the tick) while `int(seconds since the container started) <
//!   initialDelaySeconds`; liveness and readiness do nothing until the startup probe has
//!   succeeded, the startup probe nothing after. The start it counts from is the status
//!   manager's cached `startedAt`, which `normalizeStatus` (`pkg/kubelet/status/
//!   status_manager.go`) truncates to the whole second of the wall clock: a container started
//!   at 12:00:39.6 is 10 s old at 12:00:49.0. Where in its second the wall clock is at time 0 is
//!   an input too ([`Prober::on_wall_clock`]).
//! - Results count as a run of equal results: `failureThreshold` failures in a row of liveness or
//!   startup set Failure, which kills the container, and puts the worker on hold until a new
//!   container; readiness turns Ready after `successThreshold` successes and NotReady after
//!   `failureThreshold` failures. Readiness starts not Ready; liveness and startup results of a new
//!   container start fresh.
//! - Each pod sync that finds a container not Ready triggers its readiness worker at once
//!   (`manualTriggerCh`): syncs follow the container's start and every probe result change, so
//!   readiness runs right when startup succeeds instead of waiting for its tick.
//!
//! Time is the driver's: `probelint simulate` feeds it a synthetic server, the conformance harness
//! real HTTP checks against a real process and a real clock.

use super::ProbeTiming;
use crate::model::probe::ProbeKind;

/// What a check result made the kubelet do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProbeEvent {
    /// The startup probe succeeded: liveness and readiness begin.
    Started,
    /// Ready: the pod's endpoints list it.
    Ready,
    /// Not Ready any more.
    NotReady,
    /// `failures` failures of `probe` in a row: the kubelet kills the container.
    Kill { probe: ProbeKind, failures: u32 },
}

#[derive(Debug, Clone)]
struct Worker {
    kind: ProbeKind,
    timing: ProbeTiming,
    /// One tick of the worker's ticker; the others are `phase + n × period`.
    phase: f64,
    last: Option<bool>,
    run: u32,
    in_flight: bool,
    on_hold: bool,
    /// The earliest time the worker can run again (the tick or buffered tick after its last
    /// check).
    free_at: f64,
    /// A tick fired while the last check ran: the next run is at `free_at` itself.
    buffered: bool,
    /// A pending manual trigger (readiness only): runs at `max(trigger, free_at)`.
    trigger: Option<f64>,
}

impl Worker {
    /// The first tick at or after `t`.
    fn tick_at_or_after(&self, t: f64) -> f64 {
        let p = self.timing.period;
        let n = ((t - self.phase) / p - 1e-9).ceil();
        self.phase + n * p
    }
}

/// The probes of one container, and what they have decided.
#[derive(Debug, Clone)]
pub struct Prober {
    workers: Vec<Worker>,
    /// The container's start as the worker reads it: truncated to the wall clock's second.
    container_start: f64,
    /// The wall clock's fraction of a second at time 0, in [0, 1).
    wall: f64,
    started: bool,
    ready: bool,
    running: bool,
}

impl Prober {
    /// `phases` are fractions of each probe's period: where its ticks fall (startup, readiness,
    /// liveness).
    pub fn new(
        startup: Option<ProbeTiming>,
        readiness: Option<ProbeTiming>,
        liveness: Option<ProbeTiming>,
        phases: [f64; 3],
    ) -> Self {
        let workers = [
            (ProbeKind::Startup, startup, phases[0]),
            (ProbeKind::Readiness, readiness, phases[1]),
            (ProbeKind::Liveness, liveness, phases[2]),
        ]
        .into_iter()
        .filter_map(|(kind, timing, phase)| {
            let timing = timing?;
            Some(Worker {
                kind,
                timing,
                phase: phase.clamp(0.0, 1.0) * timing.period,
                last: None,
                run: 0,
                in_flight: false,
                on_hold: false,
                free_at: 0.0,
                buffered: false,
                trigger: None,
            })
        })
        .collect();
        Prober {
            workers,
            container_start: 0.0,
            wall: 0.0,
            started: false,
            ready: false,
            running: false,
        }
    }

    /// The workers started at `origin` rather than at 0: every tick moves by `origin` (negative
    /// when the workers start before the container, as the kubelet's do).
    #[must_use]
    pub fn ticking_from(mut self, origin: f64) -> Self {
        for w in &mut self.workers {
            w.phase += origin;
        }
        self
    }

    /// Time 0 falls `fraction` of a second past a whole second of the wall clock, which moves
    /// where each start's `startedAt` is truncated to.
    #[must_use]
    pub fn on_wall_clock(mut self, fraction: f64) -> Self {
        self.wall = fraction.clamp(0.0, 0.999_999);
        self
    }

    fn has(&self, kind: ProbeKind) -> bool {
        self.workers.iter().any(|w| w.kind == kind)
    }

    pub fn ready(&self) -> bool {
        self.ready
    }

    pub fn started(&self) -> bool {
        self.started
    }

    /// A new instance of the container started at `t`. Without a readiness probe a started
    /// container is Ready (`UpdatePodStatus`); the returned events say so.
    pub fn container_started(&mut self, t: f64) -> Vec<ProbeEvent> {
        // `startedAt` as the status manager caches it: whole seconds of the wall clock. The
        // small tolerance keeps a start computed as 39.5 + 0.5 on its own second.
        self.container_start = (t + self.wall + 1e-9).floor() - self.wall;
        self.running = true;
        self.started = !self.has(ProbeKind::Startup);
        self.ready = false;
        for w in &mut self.workers {
            w.last = None;
            w.run = 0;
            w.in_flight = false;
            w.on_hold = false;
            if t > w.free_at {
                w.free_at = t;
                w.buffered = false;
            }
            w.trigger = None;
        }
        let mut events = Vec::new();
        if self.started {
            self.on_started(t, &mut events);
        }
        events
    }

    /// The container stopped (killed or exited): its checks in flight are abandoned.
    pub fn container_stopped(&mut self) {
        self.running = false;
        self.ready = false;
        for w in &mut self.workers {
            w.in_flight = false;
            w.trigger = None;
        }
    }

    fn on_started(&mut self, t: f64, events: &mut Vec<ProbeEvent>) {
        self.started = true;
        // Liveness and readiness ticks until now were skipped by the startup gate.
        for w in &mut self.workers {
            if w.kind != ProbeKind::Startup && t > w.free_at {
                w.free_at = t;
                w.buffered = false;
            }
        }
        if self.has(ProbeKind::Readiness) {
            // The sync that follows triggers readiness.
            if let Some(w) = self
                .workers
                .iter_mut()
                .find(|w| w.kind == ProbeKind::Readiness)
            {
                w.trigger = Some(t);
            }
        } else {
            self.ready = true;
            events.push(ProbeEvent::Ready);
        }
    }

    fn eligible(&self, w: &Worker) -> bool {
        self.running
            && !w.on_hold
            && !w.in_flight
            && match w.kind {
                ProbeKind::Startup => !self.started,
                _ => self.started,
            }
    }

    fn next_start_of(&self, w: &Worker) -> Option<f64> {
        if !self.eligible(w) {
            return None;
        }
        // `int32(since start) < initialDelaySeconds` skips: with whole-second delays, that is
        // every time before start + delay.
        let delay_over = self.container_start + w.timing.initial_delay;
        let earliest = w.free_at.max(delay_over);
        let tick = if w.buffered && w.free_at >= delay_over {
            w.free_at
        } else {
            w.tick_at_or_after(earliest)
        };
        let trigger = w
            .trigger
            .map(|t| t.max(w.free_at))
            .filter(|t| *t >= self.container_start + w.timing.initial_delay);
        Some(trigger.map_or(tick, |t| t.min(tick)))
    }

    /// The next check to run: when, and which probe.
    pub fn next_due(&self) -> Option<(f64, ProbeKind)> {
        self.workers
            .iter()
            .filter_map(|w| Some((self.next_start_of(w)?, w.kind)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The driver starts the check of `kind` at `t` (from [`Prober::next_due`]).
    pub fn begin(&mut self, kind: ProbeKind, _t: f64) {
        if let Some(w) = self.workers.iter_mut().find(|w| w.kind == kind) {
            w.in_flight = true;
            w.trigger = None;
        }
    }

    /// The check of `kind` that began at `start` ended at `end` with `ok`.
    pub fn finish(&mut self, kind: ProbeKind, start: f64, end: f64, ok: bool) -> Vec<ProbeEvent> {
        let mut events = Vec::new();
        let Some(i) = self.workers.iter().position(|w| w.kind == kind) else {
            return events;
        };
        if !self.running || !self.workers[i].in_flight {
            return events;
        }
        let (run, threshold) = {
            let w = &mut self.workers[i];
            w.in_flight = false;
            // A tick that fired while the check ran is buffered: the next run is at its end.
            let tick = w.tick_at_or_after(start + 1e-6);
            w.buffered = tick <= end;
            w.free_at = if w.buffered { end } else { tick };
            if w.last == Some(ok) {
                w.run = w.run.saturating_add(1);
            } else {
                w.last = Some(ok);
                w.run = 1;
            }
            let threshold = if ok {
                w.timing.success_threshold
            } else {
                w.timing.failure_threshold
            };
            (w.run, threshold)
        };
        if run < threshold {
            return events;
        }
        match (kind, ok) {
            (ProbeKind::Startup, true) => {
                events.push(ProbeEvent::Started);
                self.on_started(end, &mut events);
            }
            (ProbeKind::Readiness, true) => {
                if !self.ready {
                    self.ready = true;
                    events.push(ProbeEvent::Ready);
                }
            }
            (ProbeKind::Readiness, false) => {
                if self.ready {
                    self.ready = false;
                    events.push(ProbeEvent::NotReady);
                    // The result change syncs the pod, which finds it not Ready.
                    self.workers[i].trigger = Some(end);
                }
            }
            (ProbeKind::Liveness, true) => {}
            (ProbeKind::Startup | ProbeKind::Liveness, false) => {
                let w = &mut self.workers[i];
                w.on_hold = true;
                w.run = 0;
                events.push(ProbeEvent::Kill {
                    probe: kind,
                    failures: run,
                });
            }
        }
        events
    }
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

    /// Runs checks that fail until `ok_from` and take no time; returns (t, kind, events).
    fn drive(p: &mut Prober, ok_from: f64, until: f64) -> Vec<(f64, ProbeKind, Vec<ProbeEvent>)> {
        let mut out = Vec::new();
        while let Some((t, kind)) = p.next_due() {
            if t > until {
                break;
            }
            p.begin(kind, t);
            let events = p.finish(kind, t, t, t >= ok_from);
            let kill = events.iter().any(|e| matches!(e, ProbeEvent::Kill { .. }));
            out.push((t, kind, events));
            if kill {
                break;
            }
        }
        out
    }

    #[test]
    fn the_kill_lands_in_the_range_the_phase_allows() {
        // initialDelay 10, period 10, failureThreshold 3: [10 + 2×10, 10 + 3×10).
        for phase in [0.0, 0.3, 0.999] {
            let mut p = Prober::new(None, None, Some(timing(10.0, 10.0, 3)), [0.0, 0.0, phase]);
            p.container_started(0.0);
            let run = drive(&mut p, f64::INFINITY, 1000.0);
            let (t, _, events) = run.last().unwrap();
            assert!(matches!(events[..], [ProbeEvent::Kill { failures: 3, .. }]));
            assert!((30.0..40.0).contains(t), "phase {phase}: killed at {t}");
            assert!((t - (30.0 + phase * 10.0)).abs() < 1e-6);
        }
    }

    #[test]
    fn readiness_is_triggered_when_startup_succeeds() {
        // Startup every 10 s; readiness every 30 s with a phase that puts its ticks 29 s after
        // the startup probe's: the startup success at 60 syncs the pod, which runs readiness at
        // once instead of at 89.
        let mut p = Prober::new(
            Some(timing(0.0, 10.0, 30)),
            Some(timing(0.0, 30.0, 3)),
            None,
            [0.0, 29.0 / 30.0, 0.0],
        );
        p.container_started(0.0);
        let run = drive(&mut p, 55.0, 100.0);
        let ready = run
            .iter()
            .find(|(_, _, e)| e.contains(&ProbeEvent::Ready))
            .unwrap();
        assert_eq!((ready.0, ready.1), (60.0, ProbeKind::Readiness));
        let started = run
            .iter()
            .find(|(_, _, e)| e.contains(&ProbeEvent::Started))
            .unwrap();
        assert_eq!(started.0, 60.0);
    }

    #[test]
    fn a_check_longer_than_the_period_is_followed_at_once() {
        // timeoutSeconds 25 against a server that holds: every check ends 25 s after it began,
        // and the buffered tick starts the next one there.
        let mut t = timing(0.0, 10.0, 3);
        t.timeout = 25.0;
        let mut p = Prober::new(None, None, Some(t), [0.0; 3]);
        p.container_started(0.0);
        let mut starts = Vec::new();
        while let Some((start, kind)) = p.next_due() {
            starts.push(start);
            p.begin(kind, start);
            if p.finish(kind, start, start + 25.0, false)
                .iter()
                .any(|e| matches!(e, ProbeEvent::Kill { .. }))
            {
                break;
            }
        }
        assert_eq!(starts, [0.0, 25.0, 50.0]);
    }

    #[test]
    fn initial_delay_counts_from_each_container_start_with_the_ticks_of_the_same_worker() {
        let mut p = Prober::new(None, None, Some(timing(10.0, 10.0, 1)), [0.5, 0.5, 0.5]);
        p.container_started(0.0);
        assert_eq!(p.next_due(), Some((15.0, ProbeKind::Liveness)));
        p.begin(ProbeKind::Liveness, 15.0);
        p.finish(ProbeKind::Liveness, 15.0, 15.0, false);
        p.container_stopped();
        // Restarted at 17: the same worker ticks at 25, 35...; 25 < 17 + 10, so 35.
        p.container_started(17.0);
        assert_eq!(p.next_due(), Some((35.0, ProbeKind::Liveness)));
    }

    #[test]
    fn no_readiness_probe_is_ready_once_started() {
        let mut p = Prober::new(Some(timing(0.0, 10.0, 3)), None, None, [0.0; 3]);
        assert!(p.container_started(0.0).is_empty());
        let run = drive(&mut p, 5.0, 100.0);
        assert_eq!(run[1].2, [ProbeEvent::Started, ProbeEvent::Ready]);
        let mut p = Prober::new(None, None, None, [0.0; 3]);
        assert_eq!(p.container_started(3.0), [ProbeEvent::Ready]);
    }
}
