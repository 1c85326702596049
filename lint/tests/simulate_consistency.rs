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

/// `namespace/name` as the rules' messages write an object (`name` without a namespace).
fn named(object: &Value) -> String {
    let name = object["name"].as_str().unwrap_or("");
    match object["namespace"].as_str() {
        Some(namespace) => format!(
            "{} {namespace}/{name}",
            object["kind"].as_str().unwrap_or("")
        ),
        None => format!("{} {name}", object["kind"].as_str().unwrap_or("")),
    }
}

/// The drain simulation and the PDB rules read the same budgets over the same pod labels
/// (`PodSpec::labels`, `selector::selects`): where `gpu-serving-without-pdb` says no budget
/// selects a workload's pods, its drain holds no eviction back; where `pdb-blocks-gpu-drains`
/// says a budget allows no eviction of them, its drain is refused. Over the two rules' fixtures
/// (a selector of expressions only, a budget in another namespace, a LeaderWorkerSet's leader
/// pods) and every real manifest with a budget.
#[test]
fn the_drain_simulation_and_the_pdb_rules_agree_on_every_fixture() {
    let rules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/resources/rules");
    let mut files: Vec<std::path::PathBuf> = ["pdb-blocks-gpu-drains", "gpu-serving-without-pdb"]
        .iter()
        .flat_map(|rule| std::fs::read_dir(rules.join(rule)).expect("fixtures"))
        .map(|entry| entry.expect("fixture").path())
        .collect();
    files.extend(
        probelint_testkit::corpus::real_manifests()
            .into_iter()
            .filter(|file| {
                std::fs::read_to_string(file).is_ok_and(|text| text.contains("PodDisruptionBudget"))
            }),
    );
    files.sort();
    let mut problems = Vec::new();
    let (mut unbudgeted, mut blocked) = (0, 0);
    for file in &files {
        let lint = probelint()
            .args(["--format", "json"])
            .arg(file)
            .output()
            .unwrap();
        let lint: Value = serde_json::from_slice(&lint.stdout)
            .unwrap_or_else(|e| panic!("{}: no JSON from the lint ({e})", file.display()));
        let findings = lint["findings"].as_array().cloned().unwrap_or_default();
        let drain = probelint()
            .args(["simulate", "--format", "json", "--scenario", "drain"])
            .arg(file)
            .output()
            .unwrap();
        if !drain.status.success() {
            continue;
        }
        let drain: Value = serde_json::from_slice(&drain.stdout)
            .unwrap_or_else(|e| panic!("{}: no JSON from the drain ({e})", file.display()));
        // Per workload: whether the drain of some container's pods holds to no budget, and
        // whether that of some container's pods is refused. The rules judge one pod template of a
        // workload (a LeaderWorkerSet's leader), the drain each container's own pods.
        let mut drains: Vec<(&Value, bool, bool)> = Vec::new();
        for c in drain["containers"].as_array().into_iter().flatten() {
            let events = c["drain"]["events"].as_array().into_iter().flatten();
            let no_budget = events
                .filter_map(|e| e[1].as_str())
                .any(|e| e.starts_with("no PodDisruptionBudget selects the pods"));
            let refused = !no_budget && c["drain"]["evictions_refused"].as_u64() > Some(0);
            match drains
                .iter_mut()
                .find(|(object, ..)| **object == c["object"])
            {
                Some(seen) => (seen.1, seen.2) = (seen.1 || no_budget, seen.2 || refused),
                None => drains.push((&c["object"], no_budget, refused)),
            }
        }
        for (object, no_budget, refused) in drains {
            let at = format!("{}, {}", file.display(), named(object));
            let workload_pods = format!(
                "{}'s GPU serving pods and allows no eviction",
                named(object)
            );
            for f in &findings {
                if f["rule"] == "gpu-serving-without-pdb" && f["object"] == *object {
                    unbudgeted += 1;
                    if !no_budget {
                        problems.push(format!(
                            "{at}: the rule sees no budget, every drain holds to one"
                        ));
                    }
                }
                if f["rule"] == "pdb-blocks-gpu-drains"
                    && f["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&workload_pods))
                {
                    blocked += 1;
                    if !refused {
                        problems.push(format!(
                            "{at}: the rule says {} allows no eviction, every drain evicts",
                            named(&f["object"])
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(blocked >= 3, "{unbudgeted} unbudgeted, {blocked} blocked");
}
