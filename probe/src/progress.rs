//! Liveness from progress: a server is wedged when work is in flight (requests running or
//! waiting) and its work counters have not moved for `threshold` windows in a row. A busy server
//! moves its counters, an idle one has no work in flight: neither fails, whatever its health
//! endpoint says under load.
//!
//! State line: `<window start, unix s> <counter sum at window start> <stalled windows>`.

use crate::prom;

pub struct Sample {
    pub work: f64,
    pub progress: f64,
}

/// Reads the sample from a `/metrics` text; Err names the metric that is absent.
pub fn sample(text: &str, work: &[&str], progress: &[&str]) -> Result<Sample, String> {
    let sum = |names: &[&str]| -> Result<f64, String> {
        names.iter().try_fold(0.0, |acc, n| {
            prom::sum(text, n)
                .map(|v| acc + v)
                .ok_or_else(|| format!("{n} is absent from the metrics"))
        })
    };
    Ok(Sample {
        work: sum(work)?,
        progress: sum(progress)?,
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct State {
    pub since: u64,
    pub progress: f64,
    pub stalled: u32,
}

impl State {
    pub fn parse(line: &str) -> Option<State> {
        let mut p = line.split_whitespace();
        Some(State {
            since: p.next()?.parse().ok()?,
            progress: p.next()?.parse().ok()?,
            stalled: p.next()?.parse().ok()?,
        })
    }

    pub fn line(&self) -> String {
        format!("{} {} {}", self.since, self.progress, self.stalled)
    }
}

pub struct Rules {
    pub window: u64,
    pub threshold: u32,
}

/// The verdict and the state to keep. `Ok`/`Err` carry the one-line reason.
pub fn judge(
    prev: Option<State>,
    now: u64,
    s: &Sample,
    r: &Rules,
    names: &str,
) -> (Result<String, String>, State) {
    let fresh = State {
        since: now,
        progress: s.progress,
        stalled: 0,
    };
    let Some(prev) = prev else {
        return (
            Ok(format!("first sample: {names} at {}", s.progress)),
            fresh,
        );
    };
    if s.progress < prev.progress {
        return (
            Ok(format!(
                "{names} fell from {} to {} (the server restarted): new baseline",
                prev.progress, s.progress
            )),
            fresh,
        );
    }
    if s.progress > prev.progress {
        return (
            Ok(format!(
                "progressing: {} request(s) in flight, {names} rose by {} in {} s",
                s.work,
                s.progress - prev.progress,
                now.saturating_sub(prev.since)
            )),
            fresh,
        );
    }
    if s.work <= 0.0 {
        return (Ok("idle: no request running or waiting".into()), fresh);
    }
    let elapsed = now.saturating_sub(prev.since);
    if elapsed < r.window {
        let verdict = if prev.stalled >= r.threshold {
            Err(stall_message(s, prev.stalled, r, names))
        } else {
            Ok(format!(
                "{} request(s) in flight, {names} flat for {elapsed} s of a {} s window \
                 ({}/{} stalled windows so far)",
                s.work, r.window, prev.stalled, r.threshold
            ))
        };
        return (verdict, prev);
    }
    let next = State {
        since: now,
        progress: prev.progress,
        stalled: prev.stalled + 1,
    };
    let verdict = if next.stalled >= r.threshold {
        Err(stall_message(s, next.stalled, r, names))
    } else {
        Ok(format!(
            "{} request(s) in flight and {names} flat at {} for {}/{} windows of {} s",
            s.work, s.progress, next.stalled, r.threshold, r.window
        ))
    };
    (verdict, next)
}

fn stall_message(s: &Sample, stalled: u32, r: &Rules, names: &str) -> String {
    format!(
        "wedged: {} request(s) in flight and {names} flat at {} for {stalled} windows of {} s \
         (= {} s; --failure-threshold {})",
        s.work,
        s.progress,
        r.window,
        u64::from(stalled) * r.window,
        r.threshold
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Rules = Rules {
        window: 30,
        threshold: 2,
    };

    fn run(prev: Option<State>, now: u64, work: f64, progress: f64) -> (bool, State) {
        let (v, s) = judge(prev, now, &Sample { work, progress }, &R, "tokens");
        (v.is_ok(), s)
    }

    #[test]
    fn busy_progressing_and_idle_servers_pass_and_reset() {
        let (ok, s) = run(None, 0, 5.0, 100.0);
        assert!(ok);
        let (ok, s) = run(Some(s), 100, 5.0, 101.0);
        assert!(ok);
        assert_eq!(s.stalled, 0);
        let (ok, s) = run(Some(s), 500, 0.0, 101.0);
        assert!(ok);
        assert_eq!(s.since, 500);
    }

    #[test]
    fn only_consecutive_flat_windows_with_work_fail() {
        let (_, s) = run(None, 0, 3.0, 7.0);
        // Within the first window: no verdict yet, window start kept.
        let (ok, s) = run(Some(s), 10, 3.0, 7.0);
        assert!(ok);
        assert_eq!(s.since, 0);
        let (ok, s) = run(Some(s), 30, 3.0, 7.0);
        assert!(ok, "one stalled window of two");
        assert_eq!(s.stalled, 1);
        let (ok, s) = run(Some(s), 60, 3.0, 7.0);
        assert!(!ok);
        // Still failing until the counters move, then passing at once.
        let (ok, s) = run(Some(s), 65, 3.0, 7.0);
        assert!(!ok);
        let (ok, s) = run(Some(s), 70, 3.0, 8.0);
        assert!(ok);
        assert_eq!(s.stalled, 0);
    }

    #[test]
    fn a_counter_that_falls_is_a_restart_not_a_stall() {
        let (_, s) = run(None, 0, 1.0, 900.0);
        let (ok, s) = run(Some(s), 40, 1.0, 3.0);
        assert!(ok);
        assert_eq!((s.progress, s.stalled), (3.0, 0));
    }

    #[test]
    fn state_lines_round_trip_and_garbage_is_no_history() {
        let s = State {
            since: 12,
            progress: 3.5,
            stalled: 1,
        };
        assert_eq!(State::parse(&s.line()), Some(s));
        assert_eq!(State::parse("12 x 1"), None);
    }

    #[test]
    fn an_absent_metric_is_named() {
        let err = sample("a 1\n", &["a"], &["b"]).err().unwrap();
        assert_eq!(err, "b is absent from the metrics");
    }
}
