//! A model of kubelet probe semantics: for a container and a model load time, predict the probe
//! transitions, restart count and first-ready time — from the manifest alone.
//!
//! What the model assumes (and the conformance suite measures against a real process):
//! - Each (re)start loads the model from scratch; loading takes `load_seconds`.
//! - HTTP, gRPC and exec checks fail until the model is loaded (a check at the very moment the
//!   load ends still fails) and pass after. A `tcpSocket`
//!   check passes from the start when the server binds its port before loading
//!   (`port_open_during_load`, the dangerous case the rules warn about), else only once loaded.
//! - The kubelet runs each probe at container start and then every `periodSeconds`, skipping
//!   runs before `initialDelaySeconds`. Liveness and readiness do not run until the startup
//!   probe has succeeded. `failureThreshold` consecutive failures of startup or liveness kill the
//!   container; readiness needs `successThreshold` consecutive successes to turn Ready and
//!   `failureThreshold` failures to turn NotReady.
//! - A killed container is restarted after CrashLoopBackOff: 10 s, doubling, capped at 300 s;
//!   the back-off resets once a container has run for 10 minutes.

use crate::probe::{
    DEFAULT_FAILURE_THRESHOLD, DEFAULT_INITIAL_DELAY, DEFAULT_PERIOD, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT, Field, Handler, Probe, ProbeKind,
};
use serde::Serialize;

/// CrashLoopBackOff's first delay, cap, and the run time after which it resets.
pub const BACKOFF_INITIAL_SECONDS: f64 = 10.0;
pub const BACKOFF_MAX_SECONDS: f64 = 300.0;
pub const BACKOFF_RESET_SECONDS: f64 = 600.0;

/// Probe timings in seconds, with Kubernetes' defaults applied: an absent field, and a 0 that
/// `SetDefaults_Probe` replaces, both run as the default (a field the apiserver rejects too: the
/// pod would not exist, so the simulation shows the probe as it would run once corrected).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeTiming {
    pub initial_delay: f64,
    pub period: f64,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// Whether the check is a bare TCP connect (which passes once the port is bound).
    pub tcp: bool,
}

impl ProbeTiming {
    pub fn from_probe(probe: &Probe<'_>) -> Self {
        ProbeTiming {
            // Valid fields are int32s ≥ 0 (≥ 1 after defaulting, but for the delay); the clamps only
            // spell that out for the casts.
            initial_delay: probe.initial_delay().max(0) as f64,
            period: probe.period().max(1) as f64,
            success_threshold: probe.success_threshold().clamp(1, i64::from(u32::MAX)) as u32,
            failure_threshold: probe.failure_threshold().clamp(1, i64::from(u32::MAX)) as u32,
            tcp: matches!(probe.handler, Handler::TcpSocket { .. }),
        }
    }
}

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub startup: Option<ProbeTiming>,
    pub readiness: Option<ProbeTiming>,
    pub liveness: Option<ProbeTiming>,
    pub load_seconds: f64,
    /// How long to simulate, in seconds of cluster time.
    pub duration: f64,
    /// The server accepts TCP connections while it loads.
    pub port_open_during_load: bool,
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// Seconds since the pod was first started.
    pub t: f64,
    /// `startup`, `readiness`, `liveness`, or `container`.
    pub probe: String,
    /// `success`, `failure`, or `-` for container events.
    pub result: String,
    /// What the kubelet did, when it did something.
    pub event: String,
}

/// The prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub restarts: u32,
    /// Seconds from first start to first Ready; `None` when never Ready within the duration.
    pub first_ready_seconds: Option<f64>,
    /// Seconds the pod was Ready (receiving traffic) while its model was not loaded: every
    /// request routed to it then fails.
    pub ready_while_loading_seconds: f64,
    pub transitions: Vec<Transition>,
}

/// The next probe run time of a ticker started at `start` with `period`, at or after `t`,
/// respecting `initial_delay` (measured from `start`).
fn next_run(start: f64, timing: &ProbeTiming, t: f64) -> f64 {
    let earliest = t.max(start + timing.initial_delay);
    let k = ((earliest - start) / timing.period).ceil();
    start + k * timing.period
}

/// CrashLoopBackOff: the wait before each restart doubles up to the cap, and resets once a
/// container has run long enough.
struct CrashLoop {
    delay: f64,
}

impl CrashLoop {
    /// Records that the container started at `started` was killed at `t`; returns when it
    /// restarts.
    fn restart(&mut self, out: &mut Outcome, started: f64, t: f64) -> f64 {
        if t - started >= BACKOFF_RESET_SECONDS {
            self.delay = BACKOFF_INITIAL_SECONDS;
        }
        out.restarts += 1;
        out.transitions.push(Transition {
            t,
            probe: "container".to_owned(),
            result: "-".to_owned(),
            event: format!("CrashLoopBackOff: waiting {} s", self.delay as i64),
        });
        let next = t + self.delay;
        self.delay = (self.delay * 2.0).min(BACKOFF_MAX_SECONDS);
        next
    }
}

/// Ends a Ready interval at `end`, counting the part of it before the model was loaded.
fn close_ready(out: &mut Outcome, since: &mut Option<f64>, end: f64, loaded_at: f64) {
    if let Some(from) = since.take() {
        out.ready_while_loading_seconds += (end.min(loaded_at) - from).max(0.0);
    }
}

/// Simulates the scenario.
pub fn simulate(s: &Scenario) -> Outcome {
    let mut out = Outcome {
        restarts: 0,
        first_ready_seconds: None,
        ready_while_loading_seconds: 0.0,
        transitions: Vec::new(),
    };
    let push = |out: &mut Outcome, t: f64, probe: &str, result: &str, event: String| {
        out.transitions.push(Transition {
            t,
            probe: probe.to_owned(),
            result: result.to_owned(),
            event,
        });
    };
    let mut start = 0.0_f64;
    let mut crash_loop = CrashLoop {
        delay: BACKOFF_INITIAL_SECONDS,
    };
    // Guards against pathological inputs: a run cannot produce more than this many events.
    let mut budget = 100_000u32;
    'container: while start < s.duration && budget > 0 {
        let event = match out.restarts {
            0 => "started".to_owned(),
            n => format!("restarted (restart {n})"),
        };
        push(&mut out, start, "container", "-", event);
        let loaded_at = start + s.load_seconds;
        // A check landing exactly at the end of the load still finds the server loading (it needs
        // a moment to start serving), so a probe passes only after `loaded_at`.
        let passes =
            |timing: &ProbeTiming, t: f64| t > loaded_at || (timing.tcp && s.port_open_during_load);

        // Startup phase.
        let mut started_at = start; // when liveness/readiness may begin
        if let Some(timing) = &s.startup {
            let mut failures = 0;
            let mut t = next_run(start, timing, start);
            let mut last: Option<bool> = None;
            loop {
                budget = budget.saturating_sub(1);
                if t >= s.duration || budget == 0 {
                    break 'container;
                }
                let ok = passes(timing, t);
                if ok {
                    push(
                        &mut out,
                        t,
                        "startup",
                        "success",
                        "startup probe succeeded: liveness and readiness begin".into(),
                    );
                    started_at = t;
                    break;
                }
                failures += 1;
                if last != Some(false) {
                    push(&mut out, t, "startup", "failure", String::new());
                }
                last = Some(false);
                if failures >= timing.failure_threshold {
                    push(
                        &mut out,
                        t,
                        "startup",
                        "failure",
                        format!("killed: startup probe failed {failures} times"),
                    );
                    start = crash_loop.restart(&mut out, start, t);
                    continue 'container;
                }
                t += timing.period;
            }
        }

        // Running phase: liveness and readiness on their own tickers.
        let mut ready = false;
        let mut ready_since: Option<f64> = None;
        if s.readiness.is_none() {
            ready = true;
            ready_since = Some(started_at);
            if out.first_ready_seconds.is_none() {
                out.first_ready_seconds = Some(started_at);
            }
            push(
                &mut out,
                started_at,
                "readiness",
                "-",
                "Ready (no readiness probe)".into(),
            );
        }
        let mut live_fail = 0u32;
        let mut ready_ok = 0u32;
        let mut ready_fail = 0u32;
        let mut last_live: Option<bool> = None;
        let mut last_ready: Option<bool> = None;
        let mut next_live = s.liveness.as_ref().map(|l| next_run(start, l, started_at));
        let mut next_ready = s.readiness.as_ref().map(|r| next_run(start, r, started_at));
        loop {
            budget = budget.saturating_sub(1);
            let t = match (next_live, next_ready) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => {
                    close_ready(&mut out, &mut ready_since, s.duration, loaded_at);
                    break 'container;
                }
            };
            if t >= s.duration || budget == 0 {
                close_ready(&mut out, &mut ready_since, s.duration, loaded_at);
                break 'container;
            }
            if next_ready == Some(t)
                && let Some(timing) = &s.readiness
            {
                let ok = passes(timing, t);
                let changed = last_ready != Some(ok);
                last_ready = Some(ok);
                let mut event = String::new();
                if ok {
                    ready_ok += 1;
                    ready_fail = 0;
                    if !ready && ready_ok >= timing.success_threshold {
                        ready = true;
                        ready_since = Some(t);
                        event = "Ready: receives traffic".into();
                        out.first_ready_seconds.get_or_insert(t);
                    }
                } else {
                    ready_fail += 1;
                    ready_ok = 0;
                    if ready && ready_fail >= timing.failure_threshold {
                        ready = false;
                        close_ready(&mut out, &mut ready_since, t, loaded_at);
                        event = "NotReady: removed from endpoints".into();
                    }
                }
                if changed || !event.is_empty() {
                    push(
                        &mut out,
                        t,
                        "readiness",
                        if ok { "success" } else { "failure" },
                        event,
                    );
                }
                next_ready = Some(t + timing.period);
            }
            if next_live == Some(t)
                && let Some(timing) = &s.liveness
            {
                let ok = passes(timing, t);
                let changed = last_live != Some(ok);
                last_live = Some(ok);
                if ok {
                    live_fail = 0;
                } else {
                    live_fail += 1;
                }
                let killed = !ok && live_fail >= timing.failure_threshold;
                if changed && !killed {
                    push(
                        &mut out,
                        t,
                        "liveness",
                        if ok { "success" } else { "failure" },
                        String::new(),
                    );
                }
                if killed {
                    push(
                        &mut out,
                        t,
                        "liveness",
                        "failure",
                        format!("killed: liveness probe failed {live_fail} times"),
                    );
                    if ready {
                        close_ready(&mut out, &mut ready_since, t, loaded_at);
                        push(
                            &mut out,
                            t,
                            "readiness",
                            "-",
                            "NotReady: container killed".into(),
                        );
                    }
                    start = crash_loop.restart(&mut out, start, t);
                    continue 'container;
                }
                next_live = Some(t + timing.period);
            }
        }
    }
    out
}

/// Builds the scenario of a container from its probes.
pub fn scenario_for(
    container: &crate::workload::Container<'_>,
    load_seconds: f64,
    duration: f64,
) -> Scenario {
    let timing = |k| container.probe(k).map(|p| ProbeTiming::from_probe(p));
    Scenario {
        startup: timing(ProbeKind::Startup),
        readiness: timing(ProbeKind::Readiness),
        liveness: timing(ProbeKind::Liveness),
        load_seconds,
        duration,
        port_open_during_load: true,
    }
}

/// What a simulation of `container` assumes that its manifest does not spell out, for the
/// timeline to say: a probe field written as 0 runs as the apiserver's default
/// (`SetDefaults_Probe`), and a field the apiserver rejects is simulated with the default.
pub fn assumptions(container: &crate::workload::Container<'_>) -> Vec<String> {
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
                    crate::fields::get(probe.value, name)
                        .map_or_else(String::new, ToString::to_string)
                )),
                Field::Default(_) | Field::Set(_) => {}
            }
        }
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
            port_open_during_load: true,
        }
    }

    #[test]
    fn liveness_without_startup_restarts_forever_during_a_long_load() {
        // Liveness tolerates 60 + 2×10 = 80 s; the model needs 300 s.
        let out = simulate(&scenario(
            None,
            Some(timing(0.0, 10.0, 3)),
            Some(timing(60.0, 10.0, 3)),
            300.0,
        ));
        assert_eq!(out.first_ready_seconds, None);
        // Runs of 80 s separated by 10, 20, 40, 80, 160, 300, 300... s of back-off.
        assert!(out.restarts >= 8, "{}", out.restarts);
        assert!(
            out.transitions
                .iter()
                .any(|t| t.event.starts_with("killed: liveness"))
        );
    }

    #[test]
    fn startup_probe_covering_the_load_gives_zero_restarts_and_ready_within_a_period() {
        let out = simulate(&scenario(
            Some(timing(0.0, 10.0, 38)),
            Some(timing(0.0, 5.0, 3)),
            Some(timing(0.0, 10.0, 3)),
            300.0,
        ));
        assert_eq!(out.restarts, 0);
        let ready = out.first_ready_seconds.unwrap();
        assert!((300.0..=315.0).contains(&ready), "{ready}");
        assert_eq!(out.ready_while_loading_seconds, 0.0);
    }

    #[test]
    fn short_startup_budget_loops_and_back_off_doubles_to_the_cap() {
        let out = simulate(&scenario(
            Some(timing(0.0, 10.0, 6)),
            Some(timing(0.0, 10.0, 3)),
            None,
            120.0,
        ));
        assert_eq!(out.first_ready_seconds, None);
        let waits: Vec<&str> = out
            .transitions
            .iter()
            .filter(|t| t.event.starts_with("CrashLoopBackOff"))
            .map(|t| t.event.as_str())
            .collect();
        assert_eq!(
            &waits[..7],
            [
                "CrashLoopBackOff: waiting 10 s",
                "CrashLoopBackOff: waiting 20 s",
                "CrashLoopBackOff: waiting 40 s",
                "CrashLoopBackOff: waiting 80 s",
                "CrashLoopBackOff: waiting 160 s",
                "CrashLoopBackOff: waiting 300 s",
                "CrashLoopBackOff: waiting 300 s",
            ]
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
    fn zero_fields_simulate_exactly_as_the_apiserver_defaults() {
        use crate::probe::Probe;
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
        let w = crate::workload::Workload::analyse(0, &pod, &policy);
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
