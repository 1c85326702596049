//! `probelint audit --timeline`: what happened to each pod of a workload, from the API's own
//! timestamps, on one time axis, with `simulate`'s prediction for the stored manifest beside it,
//! and what the workload's probe kills cost.
//!
//! What the API keeps, and so what a row can show: the pod's creation; its `PodScheduled` and
//! `Ready` conditions, each with only its latest transition; per container the running instance
//! (`state`) and the one before it (`lastState.terminated`): only the last termination is in the
//! status, earlier ones are known only through Events. Events fold repeats into one object
//! (`count`, first and last time) and expire (kube-apiserver `--event-ttl`, 1 h by default), so a
//! row says where its record is incomplete instead of drawing what it cannot know.

use super::evidence::epoch;
use probelint_policies::ProbeKind;
use probelint_policies::simulate::{CheckResult, Outcome, Subject, secs};
use serde::Serialize;
use serde_json::Value;

/// The Event reasons a timeline reads (`pkg/kubelet/events/event.go`, the scheduler's
/// `Scheduled` and `FailedScheduling`), beside the `Unhealthy` and `Killing` every audit reads.
pub const TIMELINE_REASONS: &[&str] = &[
    "Scheduled",
    "FailedScheduling",
    "Pulling",
    "Pulled",
    "Started",
    "BackOff",
];

/// A pod condition as the status keeps it: only its latest transition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Condition {
    pub status: bool,
    pub at: Option<i64>,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// One run of a container, as its status shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub reason: Option<String>,
    pub exit_code: Option<i64>,
}

/// One container of a pod: its extended resources (which of them are accelerators is the
/// policy's to say, when the cost is counted), its runs and why it waits.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerRecord {
    pub name: String,
    /// Extended resources (`nvidia.com/gpu`), whole units, from limits (else requests).
    pub resources: Vec<(String, u64)>,
    pub restarts: u64,
    pub current: Option<Run>,
    pub last: Option<Run>,
    /// `state.waiting.reason` (`CrashLoopBackOff`, `ContainerCreating`).
    pub waiting: Option<String>,
}

/// An Event about a pod, as the apiserver still holds it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventMark {
    pub reason: String,
    pub container: Option<String>,
    pub first: Option<i64>,
    pub last: Option<i64>,
    pub count: u64,
    pub message: String,
    /// The pod the Event was recorded for: a LeaderWorkerSet recreates its pods under the same
    /// names, so an Event may be of an earlier pod of that name.
    pub uid: Option<String>,
}

/// What one pod's status says, kept as it is read (the pod itself is dropped), and the Events
/// that name it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodRecord {
    pub name: String,
    pub uid: Option<String>,
    pub created: Option<i64>,
    pub node: Option<String>,
    pub scheduled: Option<Condition>,
    pub ready: Option<Condition>,
    pub containers: Vec<ContainerRecord>,
    pub events: Vec<EventMark>,
}

fn time(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_str).and_then(epoch)
}

fn text(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Whole units of a quantity (`8`, `"8"`); a fractional or suffixed one is not a device count.
fn units(quantity: &Value) -> Option<u64> {
    match quantity {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

const CORE_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "storage"];

impl PodRecord {
    pub fn from_pod(pod: &Value) -> Self {
        let condition = |kind: &str| {
            let c = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)?
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))?;
            Some(Condition {
                status: c.get("status").and_then(Value::as_str) == Some("True"),
                at: time(c, "/lastTransitionTime"),
                reason: text(c, "/reason"),
                // Only the scheduler's words are shown (why the pod waits for a node).
                message: (kind == "PodScheduled")
                    .then(|| text(c, "/message"))
                    .flatten(),
            })
        };
        let specs = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let statuses = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut containers: Vec<ContainerRecord> = specs
            .iter()
            .filter_map(|c| {
                let name = c.get("name")?.as_str()?.to_owned();
                let resources = ["/resources/limits", "/resources/requests"]
                    .iter()
                    .find_map(|p| {
                        c.pointer(p)
                            .and_then(Value::as_object)
                            .filter(|m| !m.is_empty())
                    })
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| {
                                !CORE_RESOURCES.contains(&k.as_str())
                                    && !k.starts_with("hugepages-")
                            })
                            .filter_map(|(k, q)| Some((k.clone(), units(q)?)))
                            .filter(|(_, n)| *n > 0)
                            .collect()
                    })
                    .unwrap_or_default();
                Some(ContainerRecord {
                    name,
                    resources,
                    ..ContainerRecord::default()
                })
            })
            .collect();
        for status in statuses {
            let Some(name) = status.get("name").and_then(Value::as_str) else {
                continue;
            };
            let at = match containers.iter().position(|c| c.name == name) {
                Some(at) => at,
                None => {
                    containers.push(ContainerRecord {
                        name: name.to_owned(),
                        ..ContainerRecord::default()
                    });
                    containers.len() - 1
                }
            };
            let c = &mut containers[at];
            c.restarts = status
                .get("restartCount")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let run = |state: &Value| -> Option<Run> {
                if let Some(r) = state.get("running") {
                    return Some(Run {
                        started: time(r, "/startedAt"),
                        ..Run::default()
                    });
                }
                let t = state.get("terminated")?;
                Some(Run {
                    started: time(t, "/startedAt"),
                    finished: time(t, "/finishedAt"),
                    reason: text(t, "/reason"),
                    exit_code: t.get("exitCode").and_then(Value::as_i64),
                })
            };
            let state = status.get("state").cloned().unwrap_or(Value::Null);
            c.current = run(&state);
            c.waiting = text(&state, "/waiting/reason");
            c.last = status.get("lastState").and_then(run);
        }
        PodRecord {
            name: text(pod, "/metadata/name").unwrap_or_default(),
            uid: text(pod, "/metadata/uid"),
            created: time(pod, "/metadata/creationTimestamp"),
            node: text(pod, "/spec/nodeName"),
            scheduled: condition("PodScheduled"),
            ready: condition("Ready"),
            containers,
            events: Vec::new(),
        }
    }

    /// The Event's reason, container, times and count, kept on its pod's record.
    pub fn add_event(&mut self, event: &Value, container: Option<&str>) {
        let first = [
            "/firstTimestamp",
            "/eventTime",
            "/metadata/creationTimestamp",
        ]
        .iter()
        .find_map(|p| time(event, p));
        let last = ["/series/lastObservedTime", "/lastTimestamp", "/eventTime"]
            .iter()
            .find_map(|p| time(event, p))
            .or(first);
        self.events.push(EventMark {
            reason: text(event, "/reason").unwrap_or_default(),
            container: container.map(str::to_owned),
            first: first.or(last),
            last,
            count: event
                .pointer("/series/count")
                .or_else(|| event.get("count"))
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1),
            message: text(event, "/message").unwrap_or_default(),
            uid: text(event, "/involvedObject/uid"),
        });
    }

    /// Whether the cost can count anything of this pod: a restart (a kill), or Ready lost after
    /// its containers started.
    pub fn counts(&self) -> bool {
        let started = self
            .containers
            .iter()
            .filter_map(|c| c.current.as_ref()?.started)
            .min();
        self.containers.iter().any(|c| c.restarts > 0)
            || self
                .ready
                .as_ref()
                .is_some_and(|r| !r.status && r.at.is_some_and(|t| started.is_some_and(|s| t > s)))
    }

    /// The Killing Events of this pod's `container` that blame a probe, with their count.
    fn probe_kills(&self, container: &str) -> u64 {
        self.events
            .iter()
            .filter(|e| e.reason == "Killing" && e.container.as_deref() == Some(container))
            .filter(|e| killing_probe(&e.message).is_some())
            .map(|e| e.count)
            .sum()
    }
}

/// The probe a `Killing` Event blames (`Container vllm failed liveness probe, will be restarted`).
pub fn killing_probe(message: &str) -> Option<ProbeKind> {
    if message.contains("failed liveness probe") {
        Some(ProbeKind::Liveness)
    } else if message.contains("failed startup probe") {
        Some(ProbeKind::Startup)
    } else {
        None
    }
}

/// The probe an `Unhealthy` Event's message is about (`Liveness probe failed: …`).
pub fn unhealthy_probe(message: &str) -> Option<ProbeKind> {
    ProbeKind::from_event_word(message.split_once(" probe ")?.0)
}

/// `2026-12-01T10:00:00Z` from seconds since the epoch (Howard Hinnant's civil-from-days).
pub fn rfc3339(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let s = t.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// What a mark on a row is, for the picture's colours and the JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarkKind {
    Created,
    WaitingToSchedule,
    Scheduled,
    Pulling,
    Pulled,
    Started,
    Terminated,
    ProbeFailed,
    ProbeKill,
    BackOff,
    Ready,
    NotReady,
}

/// One thing that happened to a pod, at `t` seconds since the workload's time zero.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mark {
    pub t: f64,
    /// RFC 3339, the API's own timestamp.
    pub at: String,
    pub kind: MarkKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeKind>,
    pub text: String,
    /// `pod status` or `Event`.
    pub source: &'static str,
}

/// An interval on a row: a container running, the pod Ready, an image pulling, the pod waiting
/// for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpanKind {
    Unscheduled,
    Pulling,
    Running,
    Ready,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    pub kind: SpanKind,
    pub from: f64,
    pub to: f64,
}

/// One pod on the axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub pod: String,
    pub node: Option<String>,
    pub marks: Vec<Mark>,
    pub spans: Vec<Span>,
    /// Where the record is incomplete, and why.
    pub incomplete: Vec<String>,
}

/// `simulate`'s prediction for one container of the stored manifest, on the same axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prediction {
    pub container: String,
    pub load_seconds: f64,
    /// The engine's load time and its source (`simulate`'s note).
    pub load_from: String,
    /// Where the predicted pod's time zero sits on the axis, and why there.
    pub offset_seconds: f64,
    pub offset_from: String,
    pub restarts: u32,
    /// On the audit's axis (offset included); looked for over 30 min at least, past the window
    /// drawn when the pod is younger.
    pub first_ready_seconds: Option<f64>,
    pub marks: Vec<Mark>,
    pub spans: Vec<Span>,
    #[serde(skip)]
    pub outcome: Outcome,
}

/// One workload's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// Time zero: the earliest record of the workload's pods, a creation or an Event (RFC 3339).
    pub zero: String,
    /// Where the axis ends: the audit's own clock, or the last thing seen.
    pub end_seconds: f64,
    pub rows: Vec<Row>,
    pub predictions: Vec<Prediction>,
}

fn plural_s(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The rows of `pods`, on an axis whose zero is the earliest pod's creation (or earliest thing
/// seen) and whose end is `now` (the audit's clock), or the last thing seen if that is later.
pub fn rows(pods: &[PodRecord], now: i64) -> (i64, f64, Vec<Row>) {
    // Every time a row draws, so that nothing lands before zero, even where a clock or a
    // writer other than the kubelet put a status time before the creation.
    let zero = pods
        .iter()
        .flat_map(|p| {
            let runs = p
                .containers
                .iter()
                .flat_map(|c| [c.last.as_ref(), c.current.as_ref()])
                .flatten()
                .flat_map(|r| [r.started, r.finished]);
            let conditions = [p.scheduled.as_ref(), p.ready.as_ref()]
                .into_iter()
                .flatten()
                .map(|c| c.at);
            p.created
                .into_iter()
                .chain(
                    p.events
                        .iter()
                        .filter(|e| e.uid.is_none() || e.uid == p.uid)
                        .filter_map(|e| e.first),
                )
                .chain(runs.chain(conditions).flatten())
        })
        .min()
        .unwrap_or(now);
    let mut rows: Vec<Row> = pods.iter().map(|p| row(p, zero, now)).collect();
    rows.sort_by(|a, b| {
        let first = |r: &Row| r.marks.first().map_or(f64::MAX, |m| m.t);
        first(a).total_cmp(&first(b)).then(a.pod.cmp(&b.pod))
    });
    let end = rows
        .iter()
        .flat_map(|r| r.marks.iter().map(|m| m.t))
        .fold((now - zero) as f64, f64::max);
    (zero, end, rows)
}

fn row(p: &PodRecord, zero: i64, now: i64) -> Row {
    let at = |t: i64| (t - zero) as f64;
    let mut marks: Vec<Mark> = Vec::new();
    let mut spans: Vec<Span> = Vec::new();
    let mut incomplete: Vec<String> = Vec::new();
    let mut mark = |t: i64,
                    kind: MarkKind,
                    container: Option<&str>,
                    probe: Option<ProbeKind>,
                    text: String,
                    source: &'static str| {
        marks.push(Mark {
            t: at(t),
            at: rfc3339(t),
            kind,
            container: container.map(str::to_owned),
            probe,
            text,
            source,
        });
    };
    if let Some(c) = p.created {
        mark(
            c,
            MarkKind::Created,
            None,
            None,
            "created".into(),
            "pod status",
        );
    }
    if let Some(s) = &p.scheduled {
        match (s.status, s.at) {
            (true, Some(t)) => {
                let waited = p.created.map(|c| t - c).filter(|w| *w > 0);
                mark(
                    t,
                    MarkKind::Scheduled,
                    None,
                    None,
                    format!(
                        "scheduled to {}{} (PodScheduled condition)",
                        p.node.as_deref().unwrap_or("(no node named)"),
                        waited
                            .map(|w| format!(", after waiting {w} s"))
                            .unwrap_or_default()
                    ),
                    "pod status",
                );
                if let (Some(c), Some(_)) = (p.created, waited) {
                    spans.push(Span {
                        kind: SpanKind::Unscheduled,
                        from: at(c),
                        to: at(t),
                    });
                }
            }
            (false, t) => {
                let since = t.or(p.created);
                if let Some(since) = since {
                    mark(
                        since,
                        MarkKind::WaitingToSchedule,
                        None,
                        None,
                        format!(
                            "not scheduled{}{}",
                            s.reason
                                .as_deref()
                                .map(|r| format!(": {r}"))
                                .unwrap_or_default(),
                            s.message
                                .as_deref()
                                .map(|m| format!(" ({m})"))
                                .unwrap_or_default()
                        ),
                        "pod status",
                    );
                    spans.push(Span {
                        kind: SpanKind::Unscheduled,
                        from: at(since),
                        to: at(now),
                    });
                }
            }
            (true, None) => {}
        }
    }
    // Events of an earlier pod of the same name (a recreated group) are drawn, and said to be.
    let mut earlier_pod = 0u64;
    let mut pull_started: Option<i64> = None;
    for e in &p.events {
        let Some(first) = e.first else { continue };
        let last = e.last.unwrap_or(first);
        let of_earlier = e.uid.is_some() && p.uid.is_some() && e.uid != p.uid;
        if of_earlier {
            earlier_pod += e.count;
        }
        let suffix = if of_earlier {
            " [an earlier pod of this name]"
        } else {
            ""
        };
        let container = e.container.as_deref();
        let (kind, probe) = match e.reason.as_str() {
            "FailedScheduling" => (MarkKind::WaitingToSchedule, None),
            "Scheduled" => (MarkKind::Scheduled, None),
            "Pulling" => (MarkKind::Pulling, None),
            "Pulled" => (MarkKind::Pulled, None),
            "Started" => (MarkKind::Started, None),
            "BackOff" => (MarkKind::BackOff, None),
            "Unhealthy" => match unhealthy_probe(&e.message) {
                Some(probe) => (MarkKind::ProbeFailed, Some(probe)),
                None => continue,
            },
            "Killing" => match killing_probe(&e.message) {
                Some(probe) => (MarkKind::ProbeKill, Some(probe)),
                None => continue,
            },
            _ => continue,
        };
        if kind == MarkKind::Pulling && e.count == 1 {
            pull_started = Some(first);
        }
        if kind == MarkKind::Pulled
            && e.count == 1
            && let Some(from) = pull_started.take()
            && from <= first
        {
            spans.push(Span {
                kind: SpanKind::Pulling,
                from: at(from),
                to: at(first),
            });
        }
        let message = format!("{}: {}{suffix}", e.reason, e.message);
        if e.count == 1 || first == last {
            let times = if e.count > 1 {
                format!(" (×{})", e.count)
            } else {
                String::new()
            };
            mark(
                first,
                kind,
                container,
                probe,
                format!("{message}{times}"),
                "Event",
            );
        } else {
            mark(
                first,
                kind,
                container,
                probe,
                format!(
                    "{message} (first of {}, the Event's firstTimestamp)",
                    e.count
                ),
                "Event",
            );
            mark(
                last,
                kind,
                container,
                probe,
                format!("{message} (last of {}, its lastTimestamp)", e.count),
                "Event",
            );
        }
    }
    for c in &p.containers {
        let name = Some(c.name.as_str());
        if let Some(last) = &c.last {
            if let Some(s) = last.started {
                mark(
                    s,
                    MarkKind::Started,
                    name,
                    None,
                    "started (lastState.terminated.startedAt)".into(),
                    "pod status",
                );
            }
            if let Some(f) = last.finished {
                mark(
                    f,
                    MarkKind::Terminated,
                    name,
                    None,
                    format!(
                        "terminated: {}, exit code {} (lastState.terminated)",
                        last.reason.as_deref().unwrap_or("no reason"),
                        last.exit_code.map_or("unknown".into(), |c| c.to_string())
                    ),
                    "pod status",
                );
            }
            if let (Some(s), Some(f)) = (last.started, last.finished) {
                spans.push(Span {
                    kind: SpanKind::Running,
                    from: at(s),
                    to: at(f),
                });
            }
        }
        if let Some(cur) = &c.current {
            if let Some(s) = cur.started {
                mark(
                    s,
                    MarkKind::Started,
                    name,
                    None,
                    format!(
                        "started, {} (state.{}.startedAt)",
                        if cur.finished.is_some() {
                            "ended"
                        } else {
                            "running"
                        },
                        if cur.finished.is_some() {
                            "terminated"
                        } else {
                            "running"
                        }
                    ),
                    "pod status",
                );
                spans.push(Span {
                    kind: SpanKind::Running,
                    from: at(s),
                    to: at(cur.finished.unwrap_or(now)),
                });
            }
            if let Some(f) = cur.finished {
                mark(
                    f,
                    MarkKind::Terminated,
                    name,
                    None,
                    format!(
                        "terminated: {}, exit code {} (state.terminated)",
                        cur.reason.as_deref().unwrap_or("no reason"),
                        cur.exit_code.map_or("unknown".into(), |c| c.to_string())
                    ),
                    "pod status",
                );
            }
        }
        if let Some(w) = &c.waiting {
            incomplete.push(format!("container {} is waiting: {w}", c.name));
        }
        // Restarts the record does not account for: each restart is a termination, and the
        // status keeps only the last one.
        let kills = p.probe_kills(&c.name);
        let recorded_terminations = u64::from(c.last.is_some());
        if c.restarts > 1 || (c.restarts > kills.max(recorded_terminations)) {
            let events = if kills > 0 {
                format!(
                    "Events account for {kills} probe kill{} of them",
                    plural_s(kills)
                )
            } else {
                "no Killing Event accounts for any of them".to_owned()
            };
            if c.restarts > kills {
                incomplete.push(format!(
                    "container {}: restartCount {}; only the last termination is in the status \
                     and {events}: the other {} restart{} left no record (Events expire, 1 h by \
                     default)",
                    c.name,
                    c.restarts,
                    c.restarts - kills,
                    plural_s(c.restarts - kills)
                ));
            } else {
                incomplete.push(format!(
                    "container {}: restartCount {}; only the last termination is in the status; \
                     {events}, the earlier runs' start and end times are not recorded",
                    c.name, c.restarts
                ));
            }
        }
    }
    if let Some(r) = &p.ready
        && let Some(t) = r.at
    {
        let started = p
            .containers
            .iter()
            .filter_map(|c| c.current.as_ref()?.started)
            .min();
        if r.status {
            mark(
                t,
                MarkKind::Ready,
                None,
                None,
                "Ready (the Ready condition's lastTransitionTime; earlier transitions are not kept)"
                    .into(),
                "pod status",
            );
            spans.push(Span {
                kind: SpanKind::Ready,
                from: at(t),
                to: at(now),
            });
        } else if started.is_some_and(|s| t > s) {
            mark(
                t,
                MarkKind::NotReady,
                None,
                None,
                format!(
                    "no longer Ready{} (the Ready condition's lastTransitionTime)",
                    r.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                "pod status",
            );
        }
    }
    if earlier_pod > 0 {
        incomplete.push(format!(
            "{earlier_pod} Event occurrence{} of an earlier pod of this name (its uid differs: \
             the controller recreated it); that pod's status is gone",
            plural_s(earlier_pod)
        ));
    }
    let first_event = p
        .events
        .iter()
        .filter(|e| !(e.uid.is_some() && p.uid.is_some() && e.uid != p.uid))
        .filter_map(|e| e.first)
        .min();
    let first_start = p
        .containers
        .iter()
        .flat_map(|c| [c.last.as_ref(), c.current.as_ref()])
        .flatten()
        .filter_map(|r| r.started)
        .min();
    match (first_event, first_start) {
        (Some(e), Some(s)) if e > s => incomplete.push(format!(
            "its first Event is at {} s, after a container started at {} s: earlier Events have \
             expired (kube-apiserver --event-ttl, 1 h by default)",
            at(e),
            at(s)
        )),
        (None, Some(s)) => incomplete.push(format!(
            "no Event is left for this pod (a container started at {} s): scheduling, pulls and \
             probe failures are not in the record (Events expire, 1 h by default)",
            at(s)
        )),
        _ => {}
    }
    marks.sort_by(|a, b| a.t.total_cmp(&b.t));
    Row {
        pod: p.name.clone(),
        node: p.node.clone(),
        marks,
        spans,
        incomplete,
    }
}

impl Prediction {
    /// `outcome` predicted with the pod's time zero at `offset` on the axis.
    pub fn new(
        container: String,
        load_seconds: f64,
        load_from: String,
        offset_seconds: f64,
        offset_from: String,
        outcome: Outcome,
        first_ready: Option<f64>,
    ) -> Self {
        let mut marks = Vec::new();
        for t in &outcome.transitions {
            // The model's words (`policies/src/simulate`): `started`, `restarted (…)`,
            // `stopped, …`, `killed: …`, `Ready: …`, `NotReady: …`.
            let e = t.event.as_str();
            let kind = match t.subject {
                Subject::Container if e.starts_with("started") || e.starts_with("restarted") => {
                    MarkKind::Started
                }
                Subject::Container if e.starts_with("stopped") => MarkKind::Terminated,
                Subject::Container => continue,
                _ if e.starts_with("killed") => MarkKind::ProbeKill,
                _ if e.starts_with("NotReady") => MarkKind::NotReady,
                _ if e.starts_with("Ready") => MarkKind::Ready,
                _ if t.result == CheckResult::Failure => MarkKind::ProbeFailed,
                _ => continue,
            };
            let probe = t.subject.probe();
            marks.push(Mark {
                t: t.t + offset_seconds,
                at: String::new(),
                kind,
                container: Some(container.clone()),
                probe,
                text: match (t.result, t.event.is_empty()) {
                    (CheckResult::NotACheck, _) => format!("{}: {}", t.subject, t.event),
                    (_, true) => format!("{} {}", t.subject, t.result),
                    (_, false) => format!("{} {}: {}", t.subject, t.result, t.event),
                },
                source: "simulate",
            });
        }
        let shift = |(a, b): &(f64, f64), kind| Span {
            kind,
            from: a + offset_seconds,
            to: b + offset_seconds,
        };
        let mut spans: Vec<Span> = outcome
            .trace
            .running
            .iter()
            .map(|s| shift(s, SpanKind::Running))
            .collect();
        spans.extend(
            outcome
                .trace
                .ready
                .iter()
                .map(|s| shift(s, SpanKind::Ready)),
        );
        if offset_seconds > 0.0 {
            spans.push(Span {
                kind: SpanKind::Unscheduled,
                from: 0.0,
                to: offset_seconds,
            });
        }
        Prediction {
            container,
            load_seconds,
            load_from,
            offset_seconds,
            offset_from,
            restarts: outcome.restarts,
            first_ready_seconds: first_ready.map(|t| t + offset_seconds),
            marks,
            spans,
            outcome,
        }
    }
}

/// What a workload's probes cost, each figure with its arithmetic.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Accelerator-seconds of runs a probe killed (× the group where the controller recreates
    /// it).
    pub gpu_seconds_lost: f64,
    /// Probe kills counted from Events.
    pub probe_kills: u64,
    /// Of them, kills no run time is recorded for (not in `gpuSecondsLost`).
    pub untimed_kills: u64,
    /// `gpuSecondsLost` in the user's currency (`--gpu-hour-cost`, per GPU-hour).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub money: Option<f64>,
    /// Seconds from the first pod's creation to its Ready (the current Ready condition).
    pub first_ready_seconds: Option<f64>,
    /// The same, predicted by `simulate` for the stored manifest.
    pub predicted_first_ready_seconds: Option<f64>,
    /// Seconds pods were not Ready after having been Ready, failing readiness (Events).
    pub not_ready_after_ready_seconds: f64,
    /// One line per figure: how it was computed, and from what.
    pub arithmetic: Vec<String>,
}

/// How a LeaderWorkerSet restarts its group: a probe kill of one pod recreates every pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    pub size: u64,
    /// Whether a kill recreates the whole group (`RecreateGroupOnPodRestart`).
    pub recreates: bool,
}

/// Counts a workload's cost from its pods' records. `accelerator` says which extended resources
/// are accelerators (the policy's list); `prediction` is `simulate`'s first Ready, in seconds
/// since the first pod's creation.
pub fn cost(
    pods: &[PodRecord],
    accelerator: &dyn Fn(&str) -> bool,
    group: Option<Group>,
    prediction: Option<f64>,
    gpu_hour_cost: Option<f64>,
) -> Cost {
    let mut cost = Cost::default();
    let mut pods_sorted: Vec<&PodRecord> = pods.iter().collect();
    pods_sorted.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    for p in &pods_sorted {
        for c in &p.containers {
            let kills = p.probe_kills(&c.name);
            if kills == 0 {
                continue;
            }
            cost.probe_kills += kills;
            let gpus: Vec<&(String, u64)> = c
                .resources
                .iter()
                .filter(|(r, _)| accelerator(r.as_str()))
                .collect();
            let per_pod: u64 = gpus.iter().map(|(_, n)| n).sum();
            // A run the status times, killed (SIGKILL or SIGTERM) and not by the kernel: the
            // kill deadline of a probe is the same each time, so its length stands for each
            // kill's run.
            let timed = c.last.as_ref().and_then(|r| {
                let (s, f) = (r.started?, r.finished?);
                let killed = matches!(r.exit_code, Some(137 | 143))
                    && r.reason.as_deref() != Some("OOMKilled");
                (killed && f >= s).then_some((s, f))
            });
            let Some((s, f)) = timed else {
                cost.untimed_kills += kills;
                cost.arithmetic.push(format!(
                    "pod {} container {}: {kills} probe kill{} (Killing Events), not timed: no \
                     killed run (exit code 137 or 143) with its start and end is in the status",
                    p.name,
                    c.name,
                    plural_s(kills)
                ));
                continue;
            };
            let run = (f - s) as f64;
            let (multiplier, group_text) = match group {
                Some(g) if g.recreates && g.size > 1 => (
                    g.size,
                    format!(
                        " × {} pods a group (the LeaderWorkerSet recreates the whole group on a \
                         restart, RecreateGroupOnPodRestart)",
                        g.size
                    ),
                ),
                _ => (1, String::new()),
            };
            let lost = kills as f64 * run * per_pod as f64 * multiplier as f64;
            cost.gpu_seconds_lost += lost;
            let resources = if gpus.is_empty() {
                "no accelerator requested by this container".to_owned()
            } else {
                gpus.iter()
                    .map(|(r, n)| format!("{r}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            cost.arithmetic.push(format!(
                "pod {} container {}: {kills} probe kill{} (Killing Events) × {} s a run (the \
                 last killed run, {} → {}, lastState.terminated; earlier runs are only counted \
                 in Events) × {per_pod} GPU{} ({resources}){group_text} = {} GPU-s",
                p.name,
                c.name,
                plural_s(kills),
                secs(run),
                rfc3339(s),
                rfc3339(f),
                plural_s(per_pod),
                secs(lost)
            ));
        }
    }
    if let Some(rate) = gpu_hour_cost {
        let money = cost.gpu_seconds_lost / 3600.0 * rate;
        cost.money = Some(money);
        cost.arithmetic.push(format!(
            "{} GPU-s / 3600 × {rate} per GPU-hour (--gpu-hour-cost, your currency) = {money:.2}",
            secs(cost.gpu_seconds_lost)
        ));
    }
    // Time to first Ready: the first pod created, to its Ready condition.
    if let Some(first) = pods_sorted.first()
        && let Some(created) = first.created
    {
        let ready = first.ready.as_ref().filter(|r| r.status).and_then(|r| r.at);
        // A Ready time before the creation is of a clock or a record that cannot be trusted.
        let ready = ready.filter(|r| *r >= created);
        cost.first_ready_seconds = ready.map(|r| (r - created) as f64);
        cost.predicted_first_ready_seconds = prediction;
        let predicted = match prediction {
            Some(p) => format!("simulate predicts {} s for the stored manifest", secs(p)),
            None => "simulate predicts it never Ready within 30 min".to_owned(),
        };
        let started = first
            .containers
            .iter()
            .filter_map(|c| c.current.as_ref()?.started)
            .min();
        let was_ready = first
            .ready
            .as_ref()
            .filter(|r| !r.status)
            .and_then(|r| r.at)
            .filter(|t| started.is_some_and(|s| *t > s));
        cost.arithmetic.push(match (ready, was_ready) {
            (Some(r), _) => format!(
                "first Ready: pod {} created {}, Ready {} (its Ready condition) = {} s; \
                 {predicted}",
                first.name,
                rfc3339(created),
                rfc3339(r),
                r - created
            ),
            (None, Some(t)) => format!(
                "first Ready: pod {} (created {}) was Ready before {} and is not now; when it \
                 first became Ready is not recorded (the condition keeps only its latest \
                 transition); {predicted}",
                first.name,
                rfc3339(created),
                rfc3339(t)
            ),
            (None, None) => format!(
                "first Ready: pod {} (created {}) has not been Ready; {predicted}",
                first.name,
                rfc3339(created)
            ),
        });
    }
    // Ready, then failing readiness: a Ready condition that turned False after its container
    // started (it can only have been True before), with readiness failures after it.
    for p in &pods_sorted {
        let Some(r) = p.ready.as_ref().filter(|r| !r.status) else {
            continue;
        };
        let Some(turned) = r.at else { continue };
        let started = p
            .containers
            .iter()
            .filter_map(|c| c.current.as_ref()?.started)
            .min();
        if started.is_none_or(|s| turned <= s) {
            continue;
        }
        let latest = p
            .events
            .iter()
            .filter(|e| {
                e.reason == "Unhealthy" && unhealthy_probe(&e.message) == Some(ProbeKind::Readiness)
            })
            .filter(|e| !(e.uid.is_some() && p.uid.is_some() && e.uid != p.uid))
            .filter_map(|e| e.last)
            .filter(|l| *l >= turned)
            .max();
        if let Some(latest) = latest {
            let seconds = (latest - turned) as f64;
            cost.not_ready_after_ready_seconds += seconds;
            cost.arithmetic.push(format!(
                "pod {}: Ready, then not Ready at {} (its Ready condition), failing readiness \
                 until {} (the latest readiness Unhealthy Event) = {} s ({:.1} min)",
                p.name,
                rfc3339(turned),
                rfc3339(latest),
                secs(seconds),
                seconds / 60.0
            ));
        }
    }
    cost
}

/// The timeline as text, for the human report.
pub fn human(timeline: &Timeline, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "       timeline: t = 0 at {}, the earliest record of its pods (a creation or an Event); one axis in seconds",
        timeline.zero
    );
    for row in &timeline.rows {
        let _ = writeln!(
            out,
            "       pod {}{}:",
            row.pod,
            row.node
                .as_ref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default()
        );
        for m in &row.marks {
            let _ = writeln!(
                out,
                "       {:>8} s  {}  {:<9} {}",
                secs(m.t),
                m.at,
                m.container.as_deref().unwrap_or("-"),
                m.text
            );
        }
        for note in &row.incomplete {
            let _ = writeln!(out, "         incomplete: {note}");
        }
    }
    for p in &timeline.predictions {
        let _ = writeln!(
            out,
            "       predicted by simulate, container {} (load {} s: {}; the pod's time zero at \
             {} s: {}): {} restart{}, {}",
            p.container,
            secs(p.load_seconds),
            p.load_from,
            secs(p.offset_seconds),
            p.offset_from,
            p.restarts,
            plural_s(u64::from(p.restarts)),
            match p.first_ready_seconds {
                Some(t) => format!("first Ready at {} s", secs(t)),
                None => "never Ready".to_owned(),
            }
        );
        for m in &p.marks {
            let _ = writeln!(
                out,
                "       {:>8} s  {:<20}  {:<9} {}",
                secs(m.t),
                "(predicted)",
                p.container,
                m.text
            );
        }
    }
}

/// Every timeline of the audit as one picture: per workload, its pods and, paler, the
/// predictions, on its own axis.
pub fn svg(audit: &super::Audit) -> Result<String, crate::simulate_svg::DrawError> {
    let blocks: Vec<crate::simulate_svg::Block<'_>> = audit
        .workloads
        .iter()
        .filter_map(|w| Some((w, w.timeline.as_ref()?)))
        .map(|(w, t)| block(&w.coordinates, t))
        .collect();
    crate::simulate_svg::lanes(&blocks)
}

/// One workload's rows for the picture.
pub fn block<'a>(coordinates: &str, t: &'a Timeline) -> crate::simulate_svg::Block<'a> {
    let mut lanes: Vec<crate::simulate_svg::Lane<'a>> = t
        .rows
        .iter()
        .map(|r| crate::simulate_svg::Lane {
            label: format!("pod {}", r.pod),
            predicted: false,
            spans: &r.spans,
            marks: &r.marks,
        })
        .collect();
    lanes.extend(t.predictions.iter().map(|p| crate::simulate_svg::Lane {
        label: format!("predicted: {}", p.container),
        predicted: true,
        spans: &p.spans,
        marks: &p.marks,
    }));
    crate::simulate_svg::Block {
        title: format!("{coordinates} (t = 0 at {})", t.zero),
        end: t.end_seconds,
        lanes,
    }
}

#[cfg(test)]
mod tests;
