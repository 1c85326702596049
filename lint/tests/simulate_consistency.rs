//! `probelint simulate` never contradicts itself: on every manifest of the real corpus and every
//! scenario, the figures it prints agree with its own timeline, table and events. A summary
//! that says "lowest capacity for 7,200 s" of a run it calls 1,800 s long, a restart count that
//! is not the number of restarts on the timeline, or a first-Ready time that is not the first
//! Ready line would each be read by a user as a fact about their workload.

mod common;

use common::probelint;
use serde_json::Value;

const SCENARIOS: [&str; 4] = ["pod", "rollout", "drain", "node-loss"];

/// What a run that simulates nothing must say instead (each is a refusal that names why).
const REFUSALS: [&str; 4] = [
    "no accelerator container to simulate",
    "needs a Deployment",
    "its deletion is confirmed",
    "there is no rolling update to simulate",
];

fn times(items: &[Value], key: impl Fn(&Value) -> Option<f64>) -> Vec<f64> {
    items.iter().filter_map(key).collect()
}

fn sorted(ts: &[f64]) -> bool {
    ts.windows(2).all(|w| w[0] <= w[1])
}

/// The pod's own figures against its timeline and its range over phases.
fn check_pod(at: &str, c: &Value, problems: &mut Vec<String>) {
    let duration = c["duration_seconds"].as_f64().unwrap_or(-1.0);
    let transitions = c["transitions"].as_array().cloned().unwrap_or_default();
    let ts = times(&transitions, |t| t["t"].as_f64());
    if !sorted(&ts) || ts.iter().any(|t| *t < 0.0 || *t > duration) {
        problems.push(format!(
            "{at}: the timeline is not in order within {duration} s"
        ));
    }
    let restarted: Vec<&Value> = transitions
        .iter()
        .filter(|t| {
            t["event"]
                .as_str()
                .is_some_and(|e| e.starts_with("restarted (restartCount"))
        })
        .collect();
    let restarts = c["restarts"].as_u64().unwrap_or(u64::MAX);
    if restarted.len() as u64 != restarts {
        problems.push(format!(
            "{at}: restarts {restarts}, but {} restart(s) on the timeline",
            restarted.len()
        ));
    }
    for (i, t) in restarted.iter().enumerate() {
        let expected = format!("restarted (restartCount {})", i + 1);
        if t["event"].as_str() != Some(expected.as_str()) {
            problems.push(format!("{at}: restart {} reads {}", i + 1, t["event"]));
        }
    }
    let first_ready_line = transitions
        .iter()
        .find(|t| t["event"].as_str().is_some_and(|e| e.starts_with("Ready")))
        .and_then(|t| t["t"].as_f64());
    if c["first_ready_seconds"].as_f64() != first_ready_line {
        problems.push(format!(
            "{at}: first Ready {} but the first Ready line is at {first_ready_line:?}",
            c["first_ready_seconds"]
        ));
    }
    // The nominal run is one of the runs the range is taken over.
    let spread = &c["spread"];
    let (lo, hi) = (
        spread["restarts_min"].as_u64().unwrap_or(u64::MAX),
        spread["restarts_max"].as_u64().unwrap_or(0),
    );
    if !(lo..=hi).contains(&restarts) {
        problems.push(format!(
            "{at}: {restarts} restarts outside its own range {lo}–{hi}"
        ));
    }
    if let Some(ready) = c["first_ready_seconds"].as_f64() {
        let earliest = spread["first_ready_earliest"].as_f64().unwrap_or(f64::NAN);
        let latest = spread["first_ready_latest"].as_f64().unwrap_or(f64::NAN);
        if !(earliest <= ready && ready <= latest) {
            problems.push(format!(
                "{at}: first Ready {ready} s outside its own range {earliest}–{latest} s"
            ));
        }
    }
    let while_loading = c["ready_while_loading_seconds"].as_f64().unwrap_or(-1.0);
    if !(0.0..=duration).contains(&while_loading) {
        problems.push(format!(
            "{at}: Ready while loading for {while_loading} s of {duration} s"
        ));
    }
}

/// A rollout's, drain's or node loss's summary against its table and its events.
fn check_fleet(at: &str, f: &Value, problems: &mut Vec<String>) {
    let horizon = f["horizon_seconds"].as_f64().unwrap_or(-1.0);
    let replicas = f["replicas"].as_u64().unwrap_or(0);
    let points = f["points"].as_array().cloned().unwrap_or_default();
    let events = f["events"].as_array().cloned().unwrap_or_default();
    let point_ts = times(&points, |p| p["t"].as_f64());
    let event_ts = times(&events, |e| e[0].as_f64());
    for (what, ts) in [("table", &point_ts), ("events", &event_ts)] {
        if !sorted(ts) || ts.iter().any(|t| *t < 0.0 || *t > horizon) {
            problems.push(format!(
                "{at}: the {what} is not in order within the {horizon} s simulated"
            ));
        }
    }
    if points.is_empty() {
        problems.push(format!("{at}: no table"));
        return;
    }
    for p in &points {
        if p["serving"].as_u64() > p["available"].as_u64() {
            problems.push(format!("{at}: more pods serving than available: {p}"));
        }
    }
    let done = f["done_seconds"].as_f64();
    let end = done.unwrap_or(horizon);
    let lowest = points
        .iter()
        .filter(|p| p["t"].as_f64().is_some_and(|t| t <= end))
        .filter_map(|p| p["serving"].as_u64())
        .min();
    if f["lowest_serving"].as_u64() != lowest {
        problems.push(format!(
            "{at}: lowest serving {} but the table's lowest before {end} s is {lowest:?}",
            f["lowest_serving"]
        ));
    }
    let lowest_for = f["lowest_serving_seconds"].as_f64().unwrap_or(-1.0);
    if !(0.0..=end + 1e-6).contains(&lowest_for) {
        problems.push(format!(
            "{at}: lowest capacity for {lowest_for} s of a run of {end} s"
        ));
    }
    if let Some(d) = done {
        if d > horizon || event_ts.last() != Some(&d) {
            problems.push(format!(
                "{at}: done at {d} s, but the last event is at {:?} (horizon {horizon} s)",
                event_ts.last()
            ));
        }
        let last = points
            .iter()
            .rev()
            .find(|p| p["t"].as_f64().is_some_and(|t| t <= d));
        if last.and_then(|p| p["serving"].as_u64()) != Some(replicas) {
            problems.push(format!(
                "{at}: done at {d} s with {last:?} serving of {replicas}"
            ));
        }
    }
    if let Some(x) = f["progress_deadline_exceeded_seconds"].as_f64() {
        let said = events.iter().any(|e| {
            e[0].as_f64() == Some(x)
                && e[1]
                    .as_str()
                    .is_some_and(|s| s.contains("ProgressDeadlineExceeded"))
        });
        if !said || x > horizon {
            problems.push(format!(
                "{at}: ProgressDeadlineExceeded at {x} s is not among its events"
            ));
        }
    }
}

#[test]
fn every_scenario_of_the_corpus_agrees_with_its_own_timeline_table_and_events() {
    let mut problems = Vec::new();
    let (mut pods, mut fleets) = (0, 0);
    for file in probelint_testkit::corpus::real_manifests() {
        for scenario in SCENARIOS {
            let out = probelint()
                .args(["simulate", "--format", "json", "--scenario", scenario])
                .arg(&file)
                .output()
                .unwrap();
            let at = format!("{} --scenario {scenario}", file.display());
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                if !REFUSALS.iter().any(|r| err.contains(r)) {
                    problems.push(format!("{at}: failed without a known reason: {err}"));
                }
                continue;
            }
            let report: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{at}: no JSON ({e})"));
            for c in report["containers"].as_array().into_iter().flatten() {
                let at = format!("{at}, container {}", c["container"]);
                check_pod(&at, c, &mut problems);
                pods += 1;
                if scenario != "pod" {
                    check_fleet(&at, &c[scenario], &mut problems);
                    fleets += 1;
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} contradiction(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The corpus holds real serving workloads: most of them are simulated, not refused.
    assert!(pods >= 100 && fleets >= 60, "{pods} pods, {fleets} fleets");
}
