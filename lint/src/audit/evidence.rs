//! What a cluster has already seen of each workload: which pods are its own (by owner
//! references, else by its selector), their restarts and last terminations, the kubelet's
//! `Unhealthy` and `Killing` Events, and how long each pod took from container start to Ready.
//!
//! Everything here reads the objects as the apiserver returns them (`serde_json::Value`), so it
//! is the same for typed built-ins and dynamic custom resources, and testable without a cluster.
//! The kubelet's words are matched as it writes them (`pkg/kubelet/prober/prober.go`: `"%s probe
//! failed: %s"` with `Liveness`, `Readiness` or `Startup`, reason `Unhealthy`;
//! `pkg/kubelet/kuberuntime/kuberuntime_manager.go`: `"Container %s failed liveness probe, will
//! be restarted"`, reason `Killing`).

use super::timeline::{killing_probe, unhealthy_probe};
use probelint_policies::{Finding, ObjectRef, ProbeKind, selector};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// `Unhealthy` Events of one probe of one container, over all its pods.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failures {
    /// Occurrences (an Event's `count`: the recorder folds repeats into one Event).
    pub count: u64,
    pub latest_message: String,
    /// RFC 3339, as the Event carries it.
    pub latest_at: String,
}

/// How a container last ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Termination {
    pub reason: String,
    pub exit_code: i64,
    pub finished_at: String,
    pub pod: String,
}

/// One container (by name) of a workload, over all its pods.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerEvidence {
    /// Sum of `restartCount` over the pods.
    pub restarts: u64,
    /// The most recent `lastState.terminated` among the pods.
    pub last_termination: Option<Termination>,
    pub unhealthy: BTreeMap<ProbeKind, Failures>,
    /// Restarts the kubelet made because a probe failed (`Killing` Events), by probe.
    pub probe_kills: BTreeMap<ProbeKind, u64>,
}

/// Time from a pod's (last) container start to its Ready condition.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartToReady {
    pub pod: String,
    /// `None`: started but not Ready yet.
    pub seconds: Option<f64>,
}

/// Everything observed of one workload.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadEvidence {
    pub pods: usize,
    pub containers: BTreeMap<String, ContainerEvidence>,
    pub start_to_ready: Vec<StartToReady>,
    /// Each pod's own record and the Events naming it, for the timeline and the cost.
    #[serde(skip)]
    pub records: Vec<super::timeline::PodRecord>,
}

impl WorkloadEvidence {
    pub fn restarts(&self) -> u64 {
        self.containers.values().map(|c| c.restarts).sum()
    }

    /// Restarts caused by probes: the kubelet's `Killing` Events for failed probes.
    pub fn probe_restarts(&self) -> u64 {
        self.containers
            .values()
            .flat_map(|c| c.probe_kills.values())
            .sum()
    }
}

fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

fn namespace(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The uid of the object's managing controller (the owner reference with `controller: true`).
pub fn controller_uid(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid").and_then(Value::as_str))
}

/// Labels an operator puts on what it creates for a user's object: (label, group, kind).
const OPERATOR_LABELS: &[(&str, &str, &str)] = &[
    (
        "serving.knative.dev/service",
        "serving.knative.dev",
        "Service",
    ),
    (
        "serving.kserve.io/inferenceservice",
        "serving.kserve.io",
        "InferenceService",
    ),
];

/// The evidence of the pods whose controller is a listed workload, gathered as each pod is
/// read and the pod then dropped: an audit's memory grows with what it keeps (restarts,
/// terminations, start-to-Ready per pod), not with the pods it reads (~44 KB each as the
/// apiserver sends them).
#[derive(Debug, Default)]
pub struct Streamed {
    evidence: HashMap<usize, WorkloadEvidence>,
    /// Each pod's (namespace, name), for the Events that name it.
    by_pod: HashMap<(String, String), usize>,
    /// Without a timeline, keep only the records the cost can read (see [`add_pod`]).
    lean: bool,
}

impl Streamed {
    /// `lean`: no timeline is drawn, so keep only the pod records the cost can read.
    pub fn new(lean: bool) -> Self {
        Streamed {
            lean,
            ..Streamed::default()
        }
    }

    /// Adds `pod`'s evidence to the judged workload `workload`'s.
    pub fn add(&mut self, workload: usize, pod: &Value) {
        self.by_pod
            .insert((namespace(pod).to_owned(), name(pod).to_owned()), workload);
        add_pod(self.evidence.entry(workload).or_default(), pod, self.lean);
    }

    /// The judged workloads that have pods here.
    pub fn workloads(&self) -> HashSet<usize> {
        self.evidence.keys().copied().collect()
    }
}

/// The uid of the object's controller (`ownerReferences[].controller: true`), if it has one.
pub fn controller_of(object: &Value) -> Option<&str> {
    controller_uid(object)
}

/// Which listed workloads are judged: those whose controller is not itself a listed workload (a
/// ReplicaSet of a Deployment, a StatefulSet of a LeaderWorkerSet, a Pod of any of them is judged
/// through its owner, as Polaris audits top-level controllers). Returns, per object, the index
/// of the judged object it belongs to (itself when judged).
///
/// A judged workload that owns no pod through the listed objects (its pods are owned by kinds the
/// audit does not list, e.g. a Knative Revision) claims the pods of its namespace that its
/// `spec.selector` selects among those whose controller is not listed; bare pods stay their own.
pub fn owners(objects: &[&Value], have_pods: &HashSet<usize>) -> Vec<usize> {
    let by_uid: HashMap<&str, usize> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((uid(o)?, i)))
        .collect();
    let by_name: HashMap<(&str, &str, &str, &str), usize> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let group = o.get("apiVersion")?.as_str()?.rsplit_once('/')?.0;
            let kind = o.get("kind")?.as_str()?;
            Some(((group, kind, namespace(o), name(o)), i))
        })
        .collect();
    let owner_of = |o: &Value| -> Option<usize> {
        if let Some(&owner) = controller_uid(o).and_then(|u| by_uid.get(u)) {
            return Some(owner);
        }
        // Knative's and KServe's controllers own a workload through objects the audit does not
        // list (Configuration, Revision); their labels name the object a user wrote.
        let labels = o.pointer("/metadata/labels")?;
        OPERATOR_LABELS.iter().find_map(|(label, group, kind)| {
            let name = labels.get(*label)?.as_str()?;
            by_name.get(&(*group, *kind, namespace(o), name)).copied()
        })
    };
    let mut judged: Vec<usize> = (0..objects.len())
        .map(|start| {
            let mut at = start;
            let mut seen = HashSet::from([start]);
            // Owner chains are short; the set only guards against a cycle in bad data.
            while let Some(owner) = owner_of(objects[at]) {
                if !seen.insert(owner) {
                    break;
                }
                at = owner;
            }
            at
        })
        .collect();
    let is_pod = |o: &Value| o.get("kind").and_then(Value::as_str) == Some("Pod");
    let mut with_pods: HashSet<usize> = (0..objects.len())
        .filter(|&i| is_pod(objects[i]) && judged[i] != i)
        .map(|i| judged[i])
        .collect();
    with_pods.extend(have_pods);
    let unowned: Vec<usize> = (0..objects.len())
        .filter(|&i| is_pod(objects[i]) && judged[i] == i && controller_uid(objects[i]).is_some())
        .collect();
    for (w, object) in objects.iter().enumerate() {
        if judged[w] != w || is_pod(object) || with_pods.contains(&w) {
            continue;
        }
        let Some(selector) = object.pointer("/spec/selector") else {
            continue;
        };
        for &p in &unowned {
            if judged[p] == p
                && namespace(objects[p]) == namespace(object)
                && selects(selector, &objects[p]["metadata"]["labels"])
            {
                judged[p] = w;
            }
        }
    }
    judged
}

/// Whether a workload's `selector` selects a pod with `labels`, as the apiserver reads it. An
/// empty selector selects nothing here: the apps kinds refuse one, and matching everything would
/// pin every pod of the namespace on a workload.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    !selector::is_empty(selector) && selector::selects(Some(selector), labels.as_object())
}

/// Seconds between two RFC 3339 timestamps as the apiserver writes them (`2026-12-01T10:00:00Z`,
/// second precision, UTC).
pub fn seconds_between(from: &str, to: &str) -> Option<f64> {
    Some((epoch(to)? - epoch(from)?) as f64)
}

/// Seconds since the epoch of an RFC 3339 timestamp as the apiserver writes it (UTC, `Z`;
/// fractions of a second, as a MicroTime has them, are dropped).
pub fn epoch(time: &str) -> Option<i64> {
    let (date, clock) = time.trim_end_matches('Z').split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let clock = clock.split(['.', '+']).next()?;
    let mut c = clock.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, min, s) = (c.next()??, c.next()??, c.next()??);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + min * 60 + s)
}

/// `spec.containers{vllm}` → `vllm`.
fn container_of_field_path(path: &str) -> Option<&str> {
    let start = path.find('{')? + 1;
    let end = path[start..].find('}')? + start;
    Some(&path[start..end])
}

fn event_count(event: &Value) -> u64 {
    event
        .pointer("/series/count")
        .or_else(|| event.get("count"))
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1)
}

fn event_time(event: &Value) -> String {
    ["/series/lastObservedTime", "/lastTimestamp", "/eventTime"]
        .iter()
        .find_map(|p| event.pointer(p).and_then(Value::as_str))
        .or_else(|| {
            event
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
        })
        .unwrap_or("")
        .to_owned()
}

/// Builds each judged workload's evidence from the pods and the kubelet's Events. `objects` are
/// the listed workloads (pods included), `judged[i]` the judged object that object `i` belongs
/// to (see [`owners`]); `streamed`, the evidence of the pods gathered as they were read.
pub fn collect(
    objects: &[&Value],
    judged: &[usize],
    events: &[Value],
    streamed: Streamed,
) -> HashMap<usize, WorkloadEvidence> {
    let is_pod = |o: &Value| o.get("kind").and_then(Value::as_str) == Some("Pod");
    let mut pods_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, object) in objects.iter().enumerate() {
        if is_pod(object) {
            pods_of.entry(judged[i]).or_default().push(i);
        }
    }

    let Streamed {
        mut evidence,
        by_pod: streamed_pods,
        ..
    } = streamed;
    let mut by_pod: HashMap<(&str, &str), usize> = streamed_pods
        .iter()
        .map(|((ns, name), &w)| ((ns.as_str(), name.as_str()), w))
        .collect();
    for (&workload, pods) in &pods_of {
        let e = evidence.entry(workload).or_default();
        for &p in pods {
            let pod = objects[p];
            by_pod.insert((namespace(pod), name(pod)), workload);
            add_pod(e, pod, false);
        }
    }
    let mut records: HashMap<(usize, String), usize> = HashMap::new();
    for (&w, e) in &evidence {
        for (i, r) in e.records.iter().enumerate() {
            records.insert((w, r.name.clone()), i);
        }
    }
    for event in events {
        let involved = &event["involvedObject"];
        if involved.get("kind").and_then(Value::as_str) != Some("Pod") {
            continue;
        }
        let key = (
            involved
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or(""),
            involved.get("name").and_then(Value::as_str).unwrap_or(""),
        );
        let Some(&workload) = by_pod.get(&key) else {
            continue;
        };
        let Some(e) = evidence.get_mut(&workload) else {
            continue;
        };
        let field_container = involved
            .get("fieldPath")
            .and_then(Value::as_str)
            .and_then(container_of_field_path);
        if let Some(&i) = records.get(&(workload, key.1.to_owned())) {
            e.records[i].add_event(event, field_container);
        }
        let Some(container) = field_container else {
            continue;
        };
        let message = event.get("message").and_then(Value::as_str).unwrap_or("");
        let c = e.containers.entry(container.to_owned()).or_default();
        match event.get("reason").and_then(Value::as_str) {
            Some("Unhealthy") => {
                let Some(probe) = unhealthy_probe(message) else {
                    continue;
                };
                let at = event_time(event);
                let f = c.unhealthy.entry(probe).or_default();
                f.count += event_count(event);
                if at >= f.latest_at {
                    f.latest_at = at;
                    f.latest_message = message.to_owned();
                }
            }
            Some("Killing") => {
                if let Some(probe) = killing_probe(message) {
                    *c.probe_kills.entry(probe).or_default() += event_count(event);
                }
            }
            _ => {}
        }
    }
    for e in evidence.values_mut() {
        e.start_to_ready.sort_by(|a, b| a.pod.cmp(&b.pod));
    }
    evidence
}

/// Adds a pod's evidence. `lean`: keep its record only where the cost can read it (a pod that
/// restarted, one that lost Ready after starting, the earliest created so far), so that a
/// large workload's memory follows its troubled pods, not all of them.
fn add_pod(e: &mut WorkloadEvidence, pod: &Value, lean: bool) {
    e.pods += 1;
    let record = super::timeline::PodRecord::from_pod(pod);
    let earliest = record.created.is_some_and(|c| {
        e.records
            .iter()
            .filter_map(|r| r.created)
            .min()
            .is_none_or(|m| c < m)
    });
    if !lean || earliest || record.counts() {
        e.records.push(record);
    }
    let pod_name = name(pod);
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut latest_start: Option<&str> = None;
    for status in statuses {
        let Some(container) = status.get("name").and_then(Value::as_str) else {
            continue;
        };
        let c = e.containers.entry(container.to_owned()).or_default();
        c.restarts += status
            .get("restartCount")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if let Some(t) = status.pointer("/lastState/terminated") {
            let termination = Termination {
                reason: t
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                exit_code: t.get("exitCode").and_then(Value::as_i64).unwrap_or(0),
                finished_at: t
                    .get("finishedAt")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                pod: pod_name.to_owned(),
            };
            if c.last_termination
                .as_ref()
                .is_none_or(|old| termination.finished_at >= old.finished_at)
            {
                c.last_termination = Some(termination);
            }
        }
        if let Some(started) = status
            .pointer("/state/running/startedAt")
            .and_then(Value::as_str)
            && latest_start.is_none_or(|l| started > l)
        {
            latest_start = Some(started);
        }
    }
    let Some(started) = latest_start else {
        return;
    };
    let ready = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    let seconds = ready
        .filter(|r| r.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|r| r.get("lastTransitionTime").and_then(Value::as_str))
        .and_then(|at| seconds_between(started, at))
        .filter(|s| *s >= 0.0);
    e.start_to_ready.push(StartToReady {
        pod: pod_name.to_owned(),
        seconds,
    });
}

/// What the evidence says about one finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// The pods show the failure the finding predicts: what was observed.
    Observed(String),
    /// The pods restarted in a way the finding explains, but nothing left names the probe
    /// (the apiserver keeps Events for an hour by default).
    Possible(String),
    /// The finding is about a probe, and its pods have not (yet) shown it hurting.
    NotYet,
    /// Nothing in pod status or Events can show this finding (an object-level rule, or a
    /// workload without pods).
    Unobservable,
}

/// The probes a finding is about, by its pointer and rule id: a finding about a missing
/// startupProbe is borne out by liveness kills during load, so it counts liveness and startup.
fn probes_of(finding: &Finding) -> &'static [ProbeKind] {
    let at = |s: &str| finding.pointer.contains(s) || finding.rule.contains(s);
    if at("readiness") {
        &[ProbeKind::Readiness]
    } else if at("startup") || at("liveness") {
        &[ProbeKind::Liveness, ProbeKind::Startup]
    } else {
        &[]
    }
}

fn plural_s(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Whether the evidence bears a finding out, in the words the report prints. `load_seconds` is
/// the fast end of the load time the engine judged the finding's container by: a pod Ready
/// sooner than that was sent traffic before its model could be loaded.
pub fn support(
    finding: &Finding,
    evidence: Option<&WorkloadEvidence>,
    load_seconds: Option<f64>,
) -> Support {
    let probes = probes_of(finding);
    let Some(evidence) = evidence.filter(|e| e.pods > 0) else {
        return Support::Unobservable;
    };
    if probes.is_empty() {
        return Support::Unobservable;
    }
    let containers: Vec<&ContainerEvidence> = evidence
        .containers
        .iter()
        .filter(|(name, _)| finding.container.as_ref().is_none_or(|c| **c == ***name))
        .map(|(_, c)| c)
        .collect();
    let mut parts = Vec::new();
    for probe in probes {
        let kills: u64 = containers
            .iter()
            .filter_map(|c| c.probe_kills.get(probe))
            .sum();
        if kills > 0 {
            parts.push(format!(
                "{kills} restart{} by the {} probe",
                plural_s(kills),
                probe.noun()
            ));
        }
        let failures: Vec<&Failures> = containers
            .iter()
            .filter_map(|c| c.unhealthy.get(probe))
            .collect();
        let count: u64 = failures.iter().map(|f| f.count).sum();
        if let Some(latest) = failures.iter().max_by(|a, b| a.latest_at.cmp(&b.latest_at)) {
            parts.push(format!(
                "{count} {} probe failure{} (latest: {:?})",
                probe.noun(),
                plural_s(count),
                latest.latest_message
            ));
        }
    }
    if probes.contains(&ProbeKind::Readiness)
        && let Some(load) = load_seconds
        && let Some(early) = evidence
            .start_to_ready
            .iter()
            .filter_map(|s| Some((s.seconds?, &s.pod)))
            .filter(|(seconds, _)| *seconds < load)
            .min_by(|a, b| a.0.total_cmp(&b.0))
    {
        parts.push(format!(
            "pod {} was Ready {:.0} s after its container started, before the {load:.0} s its \
             model takes to load at the fastest",
            early.1, early.0
        ));
    }
    if !parts.is_empty() {
        return Support::Observed(parts.join("; "));
    }
    // Killed (SIGKILL 137, SIGTERM 143) with no Event left to say by whom.
    let killed: Vec<&Termination> = containers
        .iter()
        .filter_map(|c| c.last_termination.as_ref())
        .filter(|t| matches!(t.exit_code, 137 | 143))
        .collect();
    let restarts: u64 = containers.iter().map(|c| c.restarts).sum();
    if !probes.contains(&ProbeKind::Readiness)
        && restarts > 0
        && let Some(t) = killed.first()
    {
        return Support::Possible(format!(
            "{restarts} restart{}, the last one killed (exit code {}, pod {}); no kubelet Event \
             is left to say whether a probe did it",
            plural_s(restarts),
            t.exit_code,
            t.pod
        ));
    }
    Support::NotYet
}

/// `Deployment/ns/name` (`Kind/name` for cluster-scoped objects): how the report names objects.
pub fn coordinates(object: &ObjectRef) -> String {
    let name = object.name.as_deref().unwrap_or("(unnamed)");
    match &object.namespace {
        Some(ns) => format!("{}/{ns}/{name}", object.kind),
        None => format!("{}/{name}", object.kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_are_read_as_the_apiserver_writes_them() {
        assert_eq!(
            seconds_between("2026-12-01T10:00:00Z", "2026-12-01T10:05:12Z"),
            Some(312.0)
        );
        assert_eq!(
            seconds_between("2026-02-28T23:59:59Z", "2026-03-01T00:00:01Z"),
            Some(2.0)
        );
        assert_eq!(seconds_between("yesterday", "2026-03-01T00:00:01Z"), None);
    }

    #[test]
    fn selectors_match_labels_and_expressions_and_an_empty_one_selects_nothing() {
        let labels = json!({"app": "llm", "tier": "gpu"});
        assert!(selects(&json!({"matchLabels": {"app": "llm"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"app": "web"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            &labels
        ));
        assert!(!selects(&json!({}), &labels));
    }

    #[test]
    fn the_kubelets_event_messages_name_the_probe_and_the_container() {
        assert_eq!(
            unhealthy_probe("Liveness probe failed: Get \"http://10.0.0.5:8000/health\": EOF"),
            Some(ProbeKind::Liveness)
        );
        assert_eq!(
            unhealthy_probe("Startup probe errored: rpc error"),
            Some(ProbeKind::Startup)
        );
        assert_eq!(
            unhealthy_probe("Back-off restarting failed container"),
            None
        );
        assert_eq!(
            killing_probe("Container vllm failed startup probe, will be restarted"),
            Some(ProbeKind::Startup)
        );
        assert_eq!(killing_probe("Stopping container vllm"), None);
        assert_eq!(
            container_of_field_path("spec.containers{vllm}"),
            Some("vllm")
        );
    }

    fn object(kind: &str, name: &str, uid: &str, owner: Option<&str>) -> Value {
        let mut o = json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": {"app": "llm"}},
        });
        if let Some(owner) = owner {
            o["metadata"]["ownerReferences"] = json!([
                {"uid": "someone-else", "controller": false},
                {"uid": owner, "controller": true},
            ]);
        }
        o
    }

    /// A Pod of a ReplicaSet of a Deployment belongs to the Deployment; a Pod whose owner is not
    /// listed (a Knative Revision's) is its own top, and so is a bare Pod.
    #[test]
    fn objects_belong_to_their_top_listed_controller() {
        let deployment = object("Deployment", "llm", "d", None);
        let replica_set = object("ReplicaSet", "llm-1", "r", Some("d"));
        let pod = object("Pod", "llm-1-a", "p", Some("r"));
        let orphan = object("Pod", "other", "o", Some("not-listed"));
        let objects = [&deployment, &replica_set, &pod, &orphan];
        assert_eq!(owners(&objects, &HashSet::new()), [0, 0, 0, 3]);
        // Knative's Revision Deployment belongs to the Knative Service its label names, which
        // belongs to the KServe InferenceService that owns it.
        let mut isvc = object("InferenceService", "llama", "i", None);
        isvc["apiVersion"] = json!("serving.kserve.io/v1beta1");
        let mut knative = object("Service", "llama-predictor", "k", Some("i"));
        knative["apiVersion"] = json!("serving.knative.dev/v1");
        let mut revision_deployment = object(
            "Deployment",
            "llama-predictor-00001",
            "rd",
            Some("revision"),
        );
        revision_deployment["apiVersion"] = json!("apps/v1");
        revision_deployment["metadata"]["labels"] =
            json!({"serving.knative.dev/service": "llama-predictor"});
        let objects = [&isvc, &knative, &revision_deployment];
        assert_eq!(owners(&objects, &HashSet::new()), [0, 0, 0]);
        // A cycle in bad data ends instead of looping.
        let a = object("ReplicaSet", "a", "a", Some("b"));
        let b = object("ReplicaSet", "b", "b", Some("a"));
        assert_eq!(owners(&[&a, &b], &HashSet::new()).len(), 2);
    }

    #[test]
    fn pods_and_events_add_up_per_container_and_pods_of_unlisted_owners_are_found_by_selector() {
        let mut service = object("Service", "llm", "k", None);
        service["spec"] = json!({"selector": {"matchLabels": {"app": "llm"}}});
        let mut pod = object("Pod", "llm-a", "p", Some("revision-uid"));
        pod["status"] = json!({
            "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-12-01T10:02:00Z"}],
            "containerStatuses": [{
                "name": "server", "restartCount": 2,
                "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                             "finishedAt": "2026-12-01T09:59:00Z"}},
            }],
        });
        let event = |reason: &str, message: &str, count: u64, at: &str| {
            json!({
                "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "llm-a",
                                   "fieldPath": "spec.containers{server}"},
                "reason": reason, "message": message, "count": count, "lastTimestamp": at,
            })
        };
        let events = [
            event(
                "Unhealthy",
                "Startup probe failed: HTTP probe failed with statuscode: 503",
                5,
                "2026-12-01T09:58:00Z",
            ),
            event(
                "Unhealthy",
                "Startup probe failed: context deadline exceeded",
                2,
                "2026-12-01T09:59:00Z",
            ),
            event(
                "Killing",
                "Container server failed startup probe, will be restarted",
                2,
                "2026-12-01T09:59:00Z",
            ),
            event(
                "Killing",
                "Stopping container server",
                1,
                "2026-12-01T09:59:30Z",
            ),
        ];
        let objects = [&service, &pod];
        let judged = owners(&objects, &HashSet::new());
        // The pod (its Revision not listed) is claimed by the selector, judged through it.
        assert_eq!(judged, [0, 0]);
        let evidence = collect(&objects, &judged, &events, Streamed::default());
        let e = &evidence[&0];
        assert_eq!(e.pods, 1);
        assert_eq!(e.restarts(), 2);
        assert_eq!(e.probe_restarts(), 2);
        let server = &e.containers["server"];
        assert_eq!(
            server.last_termination.as_ref().unwrap().reason,
            "OOMKilled"
        );
        assert_eq!(
            server.unhealthy[&ProbeKind::Startup],
            Failures {
                count: 7,
                latest_message: "Startup probe failed: context deadline exceeded".into(),
                latest_at: "2026-12-01T09:59:00Z".into(),
            }
        );
        assert_eq!(e.start_to_ready[0].seconds, Some(120.0));
        // The same pod's evidence taken as it is read (and the pod dropped) is the same
        // evidence, its Events included.
        let mut streamed = Streamed::default();
        streamed.add(0, &pod);
        let have = streamed.workloads();
        let objects = [&service];
        assert_eq!(owners(&objects, &have), [0]);
        let from_stream = collect(&objects, &[0], &events, streamed);
        assert_eq!(from_stream, evidence);
    }
}
