//! The timeline and the cost on recorded pods and Events (lint/tests/data/audit-timeline/: what
//! the apiserver returns for a pod and its Events, in the kubelet's and the scheduler's words).

use super::*;
use crate::audit::evidence::{self, Streamed};
use serde_json::json;

struct Recording {
    now: i64,
    workload: Value,
    pods: Vec<Value>,
    events: Vec<Value>,
}

fn recording(text: &str) -> Recording {
    let v: Value = serde_json::from_str(text).unwrap();
    Recording {
        now: epoch(v["now"].as_str().unwrap()).unwrap(),
        workload: v["workload"].clone(),
        pods: v["pods"].as_array().unwrap().clone(),
        events: v["events"].as_array().unwrap().clone(),
    }
}

const STORM: &str = include_str!("../../../tests/data/audit-timeline/storm.json");
const PENDING: &str = include_str!("../../../tests/data/audit-timeline/pending-then-degraded.json");

/// The workload's evidence as the audit gathers it (each pod streamed as it is read, then the
/// Events), and its cost and timeline.
fn audit_of(r: &Recording, gpu_hour_cost: Option<f64>) -> (Cost, Timeline) {
    let policy = probelint_policies::Policy::default();
    let mut streamed = Streamed::default();
    for pod in &r.pods {
        streamed.add(0, pod);
    }
    let objects = [&r.workload];
    let mut evidence = evidence::collect(&objects, &[0], &r.events, streamed);
    let e = evidence.remove(&0).unwrap();
    let (cost, timeline) =
        crate::audit::costed(&r.workload, &e, &policy, true, gpu_hour_cost, r.now);
    (cost, timeline.unwrap())
}

fn text_of(t: &Timeline) -> String {
    let mut out = String::new();
    human(t, &mut out);
    out
}

fn marks(row: &Row, kind: MarkKind) -> Vec<&Mark> {
    row.marks.iter().filter(|m| m.kind == kind).collect()
}

#[test]
fn timestamps_go_back_to_what_the_api_wrote() {
    for t in [
        "2026-12-01T10:00:00Z",
        "2024-02-29T23:59:59Z",
        "1999-12-31T00:00:01Z",
    ] {
        assert_eq!(rfc3339(epoch(t).unwrap()), t);
    }
}

/// The restart storm of a 45 s load under a liveness probe that gives up after 30 s: five
/// kills, the last run timed by the status, the earlier ones only counted by Events; and the
/// model, on the same axis, predicting the storm too.
#[test]
fn a_restart_storm_is_drawn_from_the_status_and_the_events_beside_its_prediction() {
    let r = recording(STORM);
    let (cost, timeline) = audit_of(&r, Some(2.4));
    assert_eq!(timeline.zero, "2026-12-01T10:00:00Z");
    assert_eq!(timeline.end_seconds, 240.0);
    let row = &timeline.rows[0];
    assert_eq!(row.node.as_deref(), Some("probelint-node"));
    // The kills the Killing Event folds: its first and its last, where the API says.
    let kills: Vec<f64> = marks(row, MarkKind::ProbeKill)
        .iter()
        .map(|m| m.t)
        .collect();
    assert_eq!(kills, [39.0, 179.0]);
    // Starts: the first (the Started Event's firstTimestamp), the last killed run's and the
    // running one's (the status), and the Event's last.
    let starts: Vec<f64> = marks(row, MarkKind::Started).iter().map(|m| m.t).collect();
    assert_eq!(starts, [1.0, 140.0, 180.0, 180.0]);
    let ended = marks(row, MarkKind::Terminated);
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].t, 179.0);
    assert!(ended[0].text.contains("exit code 137"), "{}", ended[0].text);
    assert!(marks(row, MarkKind::Ready).is_empty());
    assert_eq!(row.incomplete.len(), 1, "{:#?}", row.incomplete);
    assert!(
        row.incomplete[0].contains("restartCount 5; only the last termination is in the status"),
        "{}",
        row.incomplete[0]
    );
    // The prediction for the stored manifest on the same axis: its first start where the pod's
    // was, killed over and over, never Ready.
    let p = &timeline.predictions[0];
    assert_eq!(p.container, "server");
    assert_eq!(p.offset_seconds, 0.0);
    assert!(
        p.offset_from.contains("the Started Event's firstTimestamp"),
        "{}",
        p.offset_from
    );
    assert_eq!(
        p.marks
            .iter()
            .find(|m| m.kind == MarkKind::Started)
            .map(|m| m.t),
        Some(1.0)
    );
    assert!(p.restarts >= 3, "{} restarts predicted", p.restarts);
    assert_eq!(p.first_ready_seconds, None);
    assert!(p.marks.iter().all(|m| m.t <= timeline.end_seconds + 1e-9));

    // What it cost: five kills × the one run the status times × one GPU, in money too.
    assert_eq!(cost.probe_kills, 5);
    assert_eq!(cost.untimed_kills, 0);
    assert_eq!(cost.gpu_seconds_lost, 5.0 * 39.0);
    assert_eq!(cost.money, Some(195.0 / 3600.0 * 2.4));
    assert!(
        cost.arithmetic[0].starts_with(
            "pod slow-load-6d5b8f7c9d-x2x4q container server: 5 probe kills (Killing Events) × \
             39 s a run (the last killed run, 2026-12-01T10:02:20Z → 2026-12-01T10:02:59Z"
        ),
        "{}",
        cost.arithmetic[0]
    );
    assert!(
        cost.arithmetic[0].ends_with("× 1 GPU (nvidia.com/gpu: 1) = 195 GPU-s"),
        "{}",
        cost.arithmetic[0]
    );
    assert!(
        cost.arithmetic[1].ends_with("× 2.4 per GPU-hour (--gpu-hour-cost, your currency) = 0.13"),
        "{}",
        cost.arithmetic[1]
    );
    assert_eq!(cost.first_ready_seconds, None);
    insta::assert_snapshot!("storm", text_of(&timeline));
}

/// A pod that waited five minutes for GPUs, pulled its image for two, loaded, was Ready, and
/// then failed readiness for 13 minutes: every wait on the row, and the minutes not Ready.
#[test]
fn waiting_for_a_node_pulling_and_readiness_lost_after_ready_are_on_the_row() {
    let r = recording(PENDING);
    let (cost, timeline) = audit_of(&r, None);
    let row = &timeline.rows[0];
    let waits = marks(row, MarkKind::WaitingToSchedule);
    assert_eq!(waits.iter().map(|m| m.t).collect::<Vec<_>>(), [0.0, 250.0]);
    assert!(
        waits[0]
            .text
            .contains("0/3 nodes are available: 3 Insufficient nvidia.com/gpu"),
        "{}",
        waits[0].text
    );
    let scheduled = marks(row, MarkKind::Scheduled);
    assert!(
        scheduled
            .iter()
            .any(|m| m.t == 302.0 && m.text.contains("to gpu-node-2, after waiting 302 s")),
        "{scheduled:#?}"
    );
    assert!(
        row.spans
            .iter()
            .any(|s| s.kind == SpanKind::Unscheduled && s.from == 0.0 && s.to == 302.0)
    );
    assert!(
        row.spans
            .iter()
            .any(|s| s.kind == SpanKind::Pulling && s.from == 303.0 && s.to == 415.0)
    );
    let not_ready = marks(row, MarkKind::NotReady);
    assert_eq!(not_ready.len(), 1);
    assert_eq!(not_ready[0].t, 2400.0);
    assert!(row.incomplete.is_empty(), "{:#?}", row.incomplete);
    // The model starts where the container did (417 s, from the status), loads 300 s.
    let p = &timeline.predictions[0];
    assert!(
        p.offset_from.contains("417 s later (the pod's status"),
        "{}",
        p.offset_from
    );
    assert_eq!(p.restarts, 0);
    let predicted = p.first_ready_seconds.unwrap();
    assert!((717.0..=737.0).contains(&predicted), "{predicted}");
    // Cost: no kill; 13.3 minutes not Ready after Ready; first Ready not recorded.
    assert_eq!(cost.gpu_seconds_lost, 0.0);
    assert_eq!(cost.not_ready_after_ready_seconds, 800.0);
    assert!(
        cost.arithmetic.iter().any(|l| l
            == "pod llm-6b7f9c8d4-q7wz2: Ready, then not Ready at 2026-12-01T09:40:00Z (its \
                Ready condition), failing readiness until 2026-12-01T09:53:20Z (the latest \
                readiness Unhealthy Event) = 800 s (13.3 min)"),
        "{:#?}",
        cost.arithmetic
    );
    assert!(
        cost.arithmetic
            .iter()
            .any(|l| l.contains("was Ready before 2026-12-01T09:40:00Z and is not now")),
        "{:#?}",
        cost.arithmetic
    );
    insta::assert_snapshot!("pending_then_degraded", text_of(&timeline));
}

/// Where Events have expired: more restarts than Events account for, and a first Event after
/// the pod's containers started, are said on the row; no kill is counted that no Event shows.
#[test]
fn an_expired_record_says_what_it_lacks() {
    let mut r = recording(STORM);
    r.pods[0]["status"]["containerStatuses"][0]["restartCount"] = json!(14);
    r.events.retain(|e| e["reason"] == "Killing");
    r.events[0]["count"] = json!(2);
    r.events[0]["firstTimestamp"] = json!("2026-12-01T10:02:30Z");
    let (cost, timeline) = audit_of(&r, None);
    let notes = &timeline.rows[0].incomplete;
    assert!(
        notes.iter().any(|n| n.contains(
            "restartCount 14; only the last termination is in the status and Events account \
             for 2 probe kills of them: the other 12 restarts left no record"
        )),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("its first Event is at 150 s, after a container started at 140 s")),
        "{notes:#?}"
    );
    assert_eq!(cost.probe_kills, 2);
    assert_eq!(cost.gpu_seconds_lost, 2.0 * 39.0);
    // The first start is no longer recorded: the prediction says so and starts at creation.
    assert!(
        timeline.predictions[0].offset_from.contains("not recorded"),
        "{}",
        timeline.predictions[0].offset_from
    );
}

/// A LeaderWorkerSet that recreates its group on a restart loses every pod's run to one kill;
/// one that does not, only the killed pod's.
#[test]
fn a_recreated_group_multiplies_the_cost_by_its_size() {
    let r = recording(STORM);
    let mut streamed = Streamed::default();
    streamed.add(0, &r.pods[0]);
    let mut evidence = evidence::collect(&[&r.workload], &[0], &r.events, streamed);
    let records = evidence.remove(&0).unwrap().records;
    let gpu = |name: &str| name == "nvidia.com/gpu";
    let group = |recreates| Some(Group { size: 4, recreates });
    let lost = cost(&records, &gpu, group(true), None, None);
    assert_eq!(lost.gpu_seconds_lost, 5.0 * 39.0 * 4.0);
    assert!(
        lost.arithmetic[0]
            .contains("× 4 pods a group (the LeaderWorkerSet recreates the whole group"),
        "{}",
        lost.arithmetic[0]
    );
    assert_eq!(
        cost(&records, &gpu, group(false), None, None).gpu_seconds_lost,
        195.0
    );
    // A kill that ended OOMKilled is not timed as a probe's: the kernel ended that run.
    let mut oom = records.clone();
    oom[0].containers[0].last.as_mut().unwrap().reason = Some("OOMKilled".into());
    let untimed = cost(&oom, &gpu, None, None, None);
    assert_eq!((untimed.gpu_seconds_lost, untimed.untimed_kills), (0.0, 5));
}

/// The picture of observed pods and predictions is one well-formed SVG document naming each
/// row.
#[test]
fn the_timeline_picture_is_well_formed_svg_with_a_row_per_pod_and_prediction() {
    let (_, storm) = audit_of(&recording(STORM), None);
    let (_, pending) = audit_of(&recording(PENDING), None);
    let blocks = [
        block("Deployment/kubelet-slow-load-control/slow-load", &storm),
        block("Deployment/serving/llm", &pending),
    ];
    let svg = crate::simulate_svg::lanes(&blocks).unwrap();
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut texts = Vec::new();
    let mut elements = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(_) | quick_xml::events::Event::Empty(_)) => {
                elements += 1;
            }
            Ok(quick_xml::events::Event::Text(t)) => {
                texts.push(String::from_utf8_lossy(&t.into_inner()).into_owned());
            }
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", reader.buffer_position()),
        }
    }
    assert!(elements > 50, "{elements} elements");
    for label in [
        "pod slow-load-6d5b8f7c9d-x2x4q",
        "predicted: server",
        "pod llm-6b7f9c8d4-q7wz2",
        "predicted: vllm",
        "killed by a probe",
    ] {
        assert!(
            texts.iter().any(|t| t.trim() == label),
            "no {label:?} in {texts:?}"
        );
    }
}
