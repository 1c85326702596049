//! CrashLoopBackOff as the kubelet applies it, read from the Go source (kubernetes/kubernetes):
//!
//! - `pkg/kubelet/kuberuntime/kuberuntime_manager.go`, `SyncPod` and `doBackOff`: a container
//!   that a probe failed is killed and restarted in the *same* pod sync, and `doBackOff` decides
//!   from the pod status read *before* the kill. It looks at the latest *exited* instance of the
//!   container: the one before the instance being killed. With none (the first kill), the restart
//!   is immediate and no back-off entry is made (kubernetes/kubernetes#133472). Otherwise the
//!   restart waits while `now − that instance's FinishedAt < back-off` (`IsInBackOffSince`); when
//!   it does not wait, `Next` doubles the back-off (capped). So restarts stay immediate until the
//!   back-off is longer than a run.
//! - When it waits, the sync fails with `ErrCrashLoopBackOff`; the pod worker requeues the pod
//!   after its error back-off (`pkg/kubelet/pod_workers.go`, `completeWork`: 10 s, jittered by up
//!   to half; kubernetes/kubernetes#123602), and each later sync sees the killed instance as the
//!   latest exited one. The restart comes with the first sync at which
//!   `now − its FinishedAt ≥ back-off`, which `Next` then doubles.
//! - `staging/src/k8s.io/client-go/util/flowcontrol/backoff.go`: `Next` starts an entry at the
//!   initial back-off when there is none or it has expired, else doubles it up to the maximum;
//!   `GC` (the kubelet's housekeeping, every 2 s) drops entries not updated for longer than the
//!   expiry. `pkg/kubelet/kubelet.go` (`NewMainKubelet`) sets that expiry to 600 s
//!   (`HasExpiredFunc`), and `newCrashLoopBackOff` the initial back-off and the maximum: 10 s and
//!   300 s; 1 s and 60 s with the `ReduceDefaultCrashLoopBackOffDecay` gate (alpha); the node's
//!   `crashLoopBackOff.maxContainerRestartPeriod` as the maximum with `KubeletCrashLoopBackOffMax`
//!   (beta, on by default since 1.35), the initial lowered to it when it is smaller.
//!
//! This is the only copy of those rules: `probelint simulate` and the conformance harness both
//! restart containers through [`CrashLoop`].

use serde::Serialize;

/// The kubelet's back-off settings for a node, and how long the node takes to start a container.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NodeSettings {
    /// The first back-off (`initialCrashLoopBackOff`).
    pub initial: f64,
    /// The cap (`MaxCrashLoopBackOff`, or the node's `maxContainerRestartPeriod`).
    pub max: f64,
    /// An entry not updated for this long is forgotten (`HasExpiredFunc`, `GC`).
    pub expiry: f64,
    /// How soon the pod worker retries a pod whose sync hit the back-off (before jitter).
    pub sync_retry: f64,
    /// Seconds from the probe workers' start to the container's first start. `SyncPod`
    /// (`pkg/kubelet/kubelet.go`) adds the pod's probe workers before the runtime creates the
    /// sandbox and starts the container, and each worker ticks every period from its own start
    /// (`prober/worker.go`, `run`): the ticks fall this long before each period of the
    /// container's life, so a budget of exactly the load time runs out one tick before the load
    /// ends.
    pub probe_lead: f64,
    /// Seconds from a killed container's stop to its next start when no back-off holds it: the
    /// runtime removes the instance and creates and starts another. A restarted instance's load
    /// ends this much later against the probes' ticks, which do not move.
    pub restart_latency: f64,
}

/// [`NodeSettings::probe_lead`] and [`NodeSettings::restart_latency`] from the node suite's
/// real kubelet (v1.36.3 with containerd v2.2.9 and runc; `tests/kubelet/README.md`). The API's
/// times are whole seconds, so they bound both to under a second: the first liveness kill with
/// `initialDelaySeconds: 10` came at 39 s (with no lead it comes at 30 s, with a lead under a
/// second at 40 s less the lead), and
/// every restart started within the second of its kill. The model takes the middle, 0.5 s; the
/// range it prints runs every phase of the ticks and of the wall clock.
pub const MEASURED_PROBE_LEAD_SECONDS: f64 = 0.5;
pub const MEASURED_RESTART_LATENCY_SECONDS: f64 = 0.5;

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            initial: 10.0,
            max: 300.0,
            expiry: 600.0,
            sync_retry: 10.0,
            probe_lead: MEASURED_PROBE_LEAD_SECONDS,
            restart_latency: MEASURED_RESTART_LATENCY_SECONDS,
        }
    }
}

impl NodeSettings {
    /// The `ReduceDefaultCrashLoopBackOffDecay` feature gate: 1 s doubling to 60 s.
    pub fn reduced_decay(self) -> Self {
        NodeSettings {
            initial: 1.0,
            max: 60.0,
            ..self
        }
    }

    /// A node that starts containers in no time, its probe workers with them: the kubelet's
    /// rules alone.
    #[must_use]
    pub fn instant(self) -> Self {
        NodeSettings {
            probe_lead: 0.0,
            restart_latency: 0.0,
            ..self
        }
    }

    /// `crashLoopBackOff.maxContainerRestartPeriod` (`KubeletCrashLoopBackOffMax`): the node's
    /// maximum; the initial back-off never exceeds it.
    pub fn max_restart_period(self, max: f64) -> Self {
        NodeSettings {
            initial: self.initial.min(max),
            max,
            ..self
        }
    }

    /// The behaviour assumed, for the output to state.
    pub fn describe(&self) -> String {
        format!(
            "CrashLoopBackOff {} s doubling to {} s (a restart waits only while the previous \
             instance finished less than the back-off ago), forgotten {} s after the last \
             restart",
            self.initial, self.max, self.expiry
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    backoff: f64,
    last_update: f64,
}

/// What the kubelet does with a container that stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Restart {
    /// Restarted in the same sync. `backoff` is the back-off it was judged against (none before
    /// the second restart) and `previous_finished` when the instance before finished.
    Immediate {
        backoff: Option<f64>,
        previous_finished: Option<f64>,
    },
    /// CrashLoopBackOff: restarted at `at`, after waiting out `backoff`.
    After { backoff: f64, at: f64 },
}

/// One container's back-off state (`getStableKey` keys it by pod and container).
#[derive(Debug, Clone)]
pub struct CrashLoop {
    settings: NodeSettings,
    entry: Option<Entry>,
    /// `FinishedAt` of the latest exited instance, as the pod status shows it.
    last_exited: Option<f64>,
}

impl CrashLoop {
    pub fn new(settings: NodeSettings) -> Self {
        CrashLoop {
            settings,
            entry: None,
            last_exited: None,
        }
    }

    pub fn settings(&self) -> &NodeSettings {
        &self.settings
    }

    fn gc(&mut self, now: f64) {
        if self
            .entry
            .is_some_and(|e| now - e.last_update > self.settings.expiry)
        {
            self.entry = None;
        }
    }

    fn expired(&self, event: f64, entry: Entry) -> bool {
        event - entry.last_update > self.settings.expiry
    }

    /// `IsInBackOffSince(key, event)` at `now`.
    fn in_backoff_since(&self, event: f64, now: f64) -> bool {
        match self.entry {
            None => false,
            Some(e) if self.expired(event, e) => false,
            Some(e) => now - event < e.backoff,
        }
    }

    /// `Next(key, event)` at `now`.
    fn next(&mut self, event: f64, now: f64) {
        let backoff = match self.entry {
            Some(e) if !self.expired(event, e) => (e.backoff * 2.0).min(self.settings.max),
            _ => self.settings.initial,
        };
        self.entry = Some(Entry {
            backoff,
            last_update: now,
        });
    }

    /// Waits, sync after sync, until `ts` is out of back-off; returns when the restart happens.
    /// `jitter` in [0, 1) picks the pod worker's retry period within its jitter.
    fn wait(&mut self, ts: f64, from: f64, jitter: f64) -> Restart {
        let backoff = self.entry.map_or(0.0, |e| e.backoff);
        let retry = self.settings.sync_retry.max(0.001) * (1.0 + 0.5 * jitter.clamp(0.0, 1.0));
        let mut now = from;
        // The back-off is at most `max` (or the entry expires): the loop ends after at most
        // max / retry + 1 syncs.
        loop {
            now += retry;
            self.gc(now);
            if !self.in_backoff_since(ts, now) {
                self.next(ts, now);
                return Restart::After { backoff, at: now };
            }
        }
    }

    /// The kubelet killed the container for a failed probe; it stopped at `stopped`. The same sync
    /// restarts it unless the instance before is still in back-off.
    pub fn after_kill(&mut self, stopped: f64, jitter: f64) -> Restart {
        self.gc(stopped);
        let previous = self.last_exited.replace(stopped);
        let backoff = self.entry.map(|e| e.backoff);
        match previous {
            None => Restart::Immediate {
                backoff: None,
                previous_finished: None,
            },
            Some(p) if self.in_backoff_since(p, stopped) => self.wait(stopped, stopped, jitter),
            Some(p) => {
                self.next(p, stopped);
                Restart::Immediate {
                    backoff,
                    previous_finished: Some(p),
                }
            }
        }
    }

    /// The container exited on its own at `stopped`: the next sync sees this instance exited.
    pub fn after_exit(&mut self, stopped: f64, jitter: f64) -> Restart {
        self.gc(stopped);
        self.last_exited = Some(stopped);
        let backoff = self.entry.map(|e| e.backoff);
        if self.in_backoff_since(stopped, stopped) {
            self.wait(stopped, stopped, jitter)
        } else {
            self.next(stopped, stopped);
            Restart::Immediate {
                backoff,
                previous_finished: Some(stopped),
            }
        }
    }

    /// When the restart of `r` happens, for a container that stopped at `stopped`.
    pub fn restart_time(r: Restart, stopped: f64) -> f64 {
        match r {
            Restart::Immediate { .. } => stopped,
            Restart::After { at, .. } => at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kills every `run` seconds of running time; returns the restart times.
    fn storm(settings: NodeSettings, run: f64, until: f64) -> Vec<f64> {
        let mut c = CrashLoop::new(settings);
        let mut start = 0.0;
        let mut restarts = Vec::new();
        loop {
            let killed = start + run;
            let r = c.after_kill(killed, 0.0);
            start = CrashLoop::restart_time(r, killed);
            if start > until {
                return restarts;
            }
            restarts.push(start);
        }
    }

    #[test]
    fn first_restart_is_immediate_and_makes_no_entry() {
        // doBackOff finds no exited instance in the status from before the kill (#133472).
        let mut c = CrashLoop::new(NodeSettings::default());
        assert_eq!(
            c.after_kill(30.0, 0.0),
            Restart::Immediate {
                backoff: None,
                previous_finished: None
            }
        );
        assert_eq!(c.entry, None);
    }

    #[test]
    fn stale_status_keeps_restarts_immediate_until_the_back_off_outgrows_a_run() {
        // 30 s runs: back-off 10, 20 (immediate: the previous instance finished 30 s ago), then
        // 40 > 30: the kubelet waits 40 s after the kill, then 80, 160, 300. At the cap, the
        // instance before a waited-for one finished 300 + 30 s ago: every other restart is
        // immediate again.
        let r = storm(NodeSettings::default(), 30.0, 2000.0);
        assert_eq!(
            &r[..11],
            [
                30.0, 60.0, 90.0, 120.0, 190.0, 300.0, 490.0, 820.0, 850.0, 1180.0, 1210.0
            ]
        );
    }

    #[test]
    fn a_back_off_equal_to_the_run_does_not_wait() {
        // IsInBackOffSince is a strict `<`: 40 s since the previous finish, back-off 40 s.
        let mut c = CrashLoop::new(NodeSettings::default());
        c.after_kill(40.0, 0.0);
        c.after_kill(80.0, 0.0); // entry 10
        c.after_kill(120.0, 0.0); // 20
        c.after_kill(160.0, 0.0); // 40
        assert!(matches!(
            c.after_kill(200.0, 0.0),
            Restart::Immediate {
                backoff: Some(b),
                ..
            } if b == 40.0
        ));
    }

    #[test]
    fn an_entry_not_updated_for_600_s_expires_and_the_restart_is_immediate_again() {
        let mut c = CrashLoop::new(NodeSettings::default());
        for k in [10.0, 20.0, 30.0] {
            c.after_kill(k, 0.0);
        }
        assert_eq!(c.entry.map(|e| e.backoff), Some(20.0));
        // A container that then runs 700 s: GC dropped the entry; Next starts over at 10 s.
        assert!(matches!(
            c.after_kill(730.0, 0.0),
            Restart::Immediate { .. }
        ));
        assert_eq!(c.entry.map(|e| e.backoff), Some(10.0));
    }

    #[test]
    fn the_retry_period_of_the_pod_worker_rounds_the_wait_up() {
        let run = |jitter| {
            let mut c = CrashLoop::new(NodeSettings::default());
            for k in [10.0, 20.0, 30.0] {
                c.after_kill(k, 0.0); // no entry, then 10, then 20
            }
            // Killed at 35, 5 s after the previous instance finished: back-off 20 s.
            c.after_kill(35.0, jitter)
        };
        // Syncs every 10 s: at 55, exactly when the back-off ends.
        assert_eq!(
            run(0.0),
            Restart::After {
                backoff: 20.0,
                at: 55.0
            }
        );
        // Every 15 s (the jitter's top): 50 is too early, 65 is the restart.
        let Restart::After { at, .. } = run(0.999_999) else {
            panic!("waits")
        };
        assert!((at - 65.0).abs() < 1e-3, "{at}");
    }

    #[test]
    fn node_settings_follow_new_crash_loop_back_off() {
        let reduced = NodeSettings::default().reduced_decay();
        assert_eq!((reduced.initial, reduced.max), (1.0, 60.0));
        let capped = NodeSettings::default().max_restart_period(5.0);
        assert_eq!((capped.initial, capped.max), (5.0, 5.0));
        assert_eq!(
            NodeSettings::default().max_restart_period(120.0).initial,
            10.0
        );
        // With a 60 s cap, a 30 s run waits at most 60 s.
        let r = storm(reduced, 30.0, 1000.0);
        let gaps: Vec<f64> = r.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| *g <= 30.0 + 60.0), "{gaps:?}");
    }

    #[test]
    fn a_crash_waits_from_its_own_finish() {
        let mut c = CrashLoop::new(NodeSettings::default());
        assert!(matches!(c.after_exit(5.0, 0.0), Restart::Immediate { .. }));
        assert_eq!(
            c.after_exit(10.0, 0.0),
            Restart::After {
                backoff: 10.0,
                at: 20.0
            }
        );
    }
}
