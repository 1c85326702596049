//! Scenarios beyond one pod, where slow loads hurt: a Deployment's RollingUpdate and a node drain
//! under the workload's PodDisruptionBudget. Each new pod takes what the one-pod model says it
//! takes to become Ready ([`PodStartup`], from [`super::simulate`]), so a restart storm stalls a
//! rollout as it would in a cluster.
//!
//! Sources (kubernetes/kubernetes):
//! - RollingUpdate: `pkg/controller/deployment/rolling.go` (`reconcileNewReplicaSet`,
//!   `reconcileOldReplicaSets`), `pkg/controller/deployment/util/deployment_util.go`
//!   (`NewRSNewReplicas`: total pods ≤ replicas + maxSurge; `ResolveFenceposts`: maxSurge rounds
//!   up, maxUnavailable down, both 0 → maxUnavailable 1; `MaxUnavailable`), old pods scaled down
//!   while available pods stay ≥ replicas − maxUnavailable, counting a new pod available once it
//!   has been Ready for `minReadySeconds`. `progressDeadlineSeconds` (600 by default) without
//!   progress sets the `ProgressDeadlineExceeded` condition; the rollout is not undone.
//! - Drain: `kubectl drain` evicts through the Eviction API and retries a refused eviction every
//!   5 s (`staging/src/k8s.io/kubectl/pkg/drain/drain.go`, `evictPods`); the apiserver allows one
//!   while the PDB's `disruptionsAllowed = currentHealthy − desiredHealthy` is positive
//!   (`pkg/controller/disruption/disruption.go`, `getExpectedPodCount`; percentages round up).
//!   The ReplicaSet replaces an evicted pod at once on another node.
//! - Node loss: the node stops answering. Its pods stop serving at once, but the node lifecycle
//!   controller counts them Ready until the node's Ready condition goes Unknown,
//!   `node-monitor-grace-period` after its last heartbeat (50 s by default:
//!   `pkg/controller/nodelifecycle/config/v1alpha1/defaults.go`); then it marks them NotReady
//!   (`MarkPodsNotReady`, `pkg/controller/nodelifecycle/node_lifecycle_controller.go`) and taints
//!   the node `node.kubernetes.io/unreachable:NoExecute`. The taint-eviction controller deletes
//!   each pod once its toleration of that taint runs out (`pkg/controller/tainteviction/`,
//!   `getMinTolerationTime`): 300 s for a pod that declares none, which the
//!   DefaultTolerationSeconds admission plugin gives every pod
//!   (`plugin/pkg/admission/defaulttolerationseconds/admission.go`,
//!   `defaultUnreachableTolerationSeconds`), never for one that tolerates it without
//!   `tolerationSeconds`. A pod being deleted is no longer active (`IsPodActive`,
//!   `pkg/controller/controller_utils.go`), so its ReplicaSet creates the replacement at once,
//!   though the kubelet that would confirm the deletion is gone. (A StatefulSet waits for that
//!   confirmation instead: not modelled.)
//!
//! Not modelled: scheduling, image pulls and node capacity (a replacement always finds a GPU),
//! a pod that loses Ready again after its first Ready.

use serde::Serialize;
use serde_json::Value;

/// What the one-pod model says about a new pod: seconds from its creation to first Ready, and to
/// first serving (Ready with its model loaded); `None`: never within the simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PodStartup {
    pub ready_after: Option<f64>,
    pub serving_after: Option<f64>,
}

impl PodStartup {
    /// From a one-pod [`super::Outcome`].
    pub fn from_outcome(o: &super::Outcome) -> Self {
        let serving_after = o.trace.ready.iter().find_map(|(from, to)| {
            o.trace
                .loaded
                .iter()
                .map(|(a, b)| (from.max(*a), to.min(*b)))
                .find(|(a, b)| a < b)
                .map(|(a, _)| a)
        });
        PodStartup {
            ready_after: o.first_ready_seconds,
            serving_after,
        }
    }
}

/// A Deployment's RollingUpdate parameters, resolved to pod counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rollout {
    pub replicas: u32,
    pub max_surge: u32,
    pub max_unavailable: u32,
    pub min_ready_seconds: f64,
    pub progress_deadline_seconds: f64,
}

/// An int-or-percent field: `25%` of `of`, rounded up or down.
fn scaled(value: Option<&Value>, default: &str, of: u32, round_up: bool) -> Result<u32, String> {
    let text = match value {
        None | Some(Value::Null) => default.to_owned(),
        Some(Value::Number(n)) => {
            return n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{n} is not a pod count"));
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("{other} is neither a count nor a percentage")),
    };
    let pct: f64 = text
        .strip_suffix('%')
        .and_then(|p| p.parse().ok())
        .filter(|p: &f64| *p >= 0.0)
        .ok_or_else(|| format!("{text:?} is neither a count nor a percentage"))?;
    let exact = pct * f64::from(of) / 100.0;
    Ok(if round_up {
        exact.ceil()
    } else {
        exact.floor()
    } as u32)
}

impl Rollout {
    /// Reads a Deployment (replicas 1, maxSurge and maxUnavailable 25 %, minReadySeconds 0,
    /// progressDeadlineSeconds 600 by default). A Recreate strategy is refused: it has no rolling
    /// update to simulate.
    pub fn from_deployment(object: &Value) -> Result<Self, String> {
        let spec = object.get("spec").unwrap_or(&Value::Null);
        let replicas = match spec.get("replicas") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("spec.replicas: {v} is not a count"))?,
        };
        let strategy = spec.get("strategy").unwrap_or(&Value::Null);
        if strategy.get("type").and_then(Value::as_str) == Some("Recreate") {
            return Err(
                "spec.strategy.type is Recreate: every old pod is deleted before new ones \
                        start, so there is no rolling update to simulate"
                    .to_owned(),
            );
        }
        let rolling = strategy.get("rollingUpdate").unwrap_or(&Value::Null);
        let mut max_surge = scaled(rolling.get("maxSurge"), "25%", replicas, true)
            .map_err(|e| format!("spec.strategy.rollingUpdate.maxSurge: {e}"))?;
        let mut max_unavailable = scaled(rolling.get("maxUnavailable"), "25%", replicas, false)
            .map_err(|e| format!("spec.strategy.rollingUpdate.maxUnavailable: {e}"))?;
        if max_surge == 0 && max_unavailable == 0 {
            max_unavailable = 1;
        }
        max_unavailable = max_unavailable.min(replicas);
        max_surge = max_surge.min(replicas.max(1) * 100);
        let seconds = |field: &str, default: f64| {
            spec.get(field)
                .and_then(Value::as_f64)
                .filter(|v| *v >= 0.0)
                .unwrap_or(default)
        };
        Ok(Rollout {
            replicas,
            max_surge,
            max_unavailable,
            min_ready_seconds: seconds("minReadySeconds", 0.0),
            progress_deadline_seconds: seconds("progressDeadlineSeconds", 600.0),
        })
    }
}

/// Capacity at one moment of a fleet scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub t: f64,
    /// Pods the controller counts as available (Ready for minReadySeconds).
    pub available: u32,
    /// Pods that answer requests: available ones whose model is loaded.
    pub serving: u32,
    /// Old-revision pods (rollout) or pods left on the drained node (drain).
    pub old: u32,
    /// New-revision pods (rollout) or replacements (drain), Ready or not.
    pub new: u32,
}

/// When a lost node's pods are replaced: the node controller's grace period, then the pods'
/// toleration of the unreachable taint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NodeLoss {
    /// `node-monitor-grace-period`: from the node's last heartbeat to its pods marked NotReady
    /// and the taint (50 s by default).
    pub grace_seconds: f64,
    /// The pods' `tolerationSeconds` for `node.kubernetes.io/unreachable` (300 s by default);
    /// `None`: they tolerate it forever and are never evicted.
    pub toleration_seconds: Option<f64>,
}

/// The node lifecycle controller's default `node-monitor-grace-period`.
pub const NODE_MONITOR_GRACE_SECONDS: f64 = 50.0;
/// The DefaultTolerationSeconds admission plugin's `tolerationSeconds` for the unreachable (and
/// not-ready) taint, on every pod that declares no toleration of its own.
pub const DEFAULT_UNREACHABLE_TOLERATION_SECONDS: f64 = 300.0;

impl NodeLoss {
    /// From a pod spec's tolerations: the shortest `tolerationSeconds` among those that tolerate
    /// `node.kubernetes.io/unreachable:NoExecute` (as `getMinTolerationTime`: 0 or less is 0),
    /// `None` when one of them tolerates it forever, and the admission plugin's 300 s when none
    /// does (it adds its toleration only then).
    pub fn from_pod_spec(spec: &Value, grace_seconds: f64) -> Self {
        let tolerates = |t: &&Value| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let operator = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let key_matches = if key.is_empty() {
                operator == "Exists"
            } else {
                key == "node.kubernetes.io/unreachable"
                    && (operator == "Exists"
                        || t.get("value")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .is_empty())
            };
            key_matches && (effect.is_empty() || effect == "NoExecute")
        };
        let matching: Vec<&Value> = spec
            .get("tolerations")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter(tolerates).collect())
            .unwrap_or_default();
        let toleration_seconds = if matching.is_empty() {
            Some(DEFAULT_UNREACHABLE_TOLERATION_SECONDS)
        } else {
            matching
                .iter()
                .map(|t| t.get("tolerationSeconds").and_then(Value::as_f64))
                .try_fold(f64::INFINITY, |min, s| s.map(|s| min.min(s.max(0.0))))
                .filter(|s| s.is_finite())
        };
        NodeLoss {
            grace_seconds,
            toleration_seconds,
        }
    }
}

/// What a fleet scenario predicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetOutcome {
    /// `rollout`, `drain` or `node-loss`.
    pub scenario: &'static str,
    pub replicas: u32,
    /// How long the scenario was simulated, in seconds from its start.
    pub horizon_seconds: f64,
    /// When the rollout (or drain) was complete at full capacity; `None`: not within the horizon.
    pub done_seconds: Option<f64>,
    pub lowest_serving: u32,
    /// How long serving capacity stayed at its lowest.
    pub lowest_serving_seconds: f64,
    /// Rollout: when `ProgressDeadlineExceeded` is set, if it is.
    pub progress_deadline_exceeded_seconds: Option<f64>,
    /// Drain: evictions the PDB refused (each retried 5 s later).
    pub evictions_refused: u32,
    pub points: Vec<Point>,
    pub events: Vec<(f64, String)>,
}

#[derive(Debug, Clone, Copy)]
struct NewPod {
    created: f64,
}

impl NewPod {
    fn available_at(&self, p: &PodStartup, min_ready: f64) -> Option<f64> {
        p.ready_after.map(|r| self.created + r + min_ready)
    }
    fn serving_at(&self, p: &PodStartup, min_ready: f64) -> Option<f64> {
        let avail = self.available_at(p, min_ready)?;
        p.serving_after.map(|s| (self.created + s).max(avail))
    }
}

/// A drain's replacements, by creation time. Every replacement starts as the same
/// [`PodStartup`] and they are created in time order, so the ones available (or serving) by a
/// time are a prefix of the list, found by binary search: a drain of `n` replicas costs
/// O(n log n), not the O(n²) of counting every replacement at every step.
#[derive(Default)]
struct Replacements {
    created: Vec<f64>,
}

#[cfg(test)]
thread_local! {
    /// Replacements looked at on this thread, for the test that bounds a drain's work.
    static LOOKED_AT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Replacements {
    fn push(&mut self, t: f64) {
        debug_assert!(self.created.last().is_none_or(|&last| last <= t));
        self.created.push(t);
    }

    fn len(&self) -> u32 {
        self.created.len() as u32
    }

    /// How many are created at least `after` seconds before `t` (`after`: `None` never).
    fn count(&self, t: f64, after: Option<f64>) -> u32 {
        after.map_or(0, |after| self.done_by(t, after) as u32)
    }

    /// When the next one reaches `after` seconds of age, strictly after `t`.
    fn next_after(&self, t: f64, after: Option<f64>) -> Option<f64> {
        let after = after?;
        self.created.get(self.done_by(t, after)).map(|c| c + after)
    }

    fn done_by(&self, t: f64, after: f64) -> usize {
        self.created.partition_point(|c| {
            #[cfg(test)]
            LOOKED_AT.with(|n| n.set(n.get() + 1));
            c + after <= t
        })
    }
}

fn count(pods: &[NewPod], t: f64, at: impl Fn(&NewPod) -> Option<f64>) -> u32 {
    pods.iter()
        .filter(|p| at(p).is_some_and(|a| a <= t))
        .count() as u32
}

fn finish(mut o: FleetOutcome, until: f64) -> FleetOutcome {
    o.horizon_seconds = until;
    let end = o.done_seconds.unwrap_or(until);
    let lowest = o
        .points
        .iter()
        .filter(|p| p.t <= end)
        .map(|p| p.serving)
        .min()
        .unwrap_or(o.replicas);
    o.lowest_serving = lowest;
    o.lowest_serving_seconds = o
        .points
        .windows(2)
        .filter(|w| w[0].serving == lowest && w[0].t < end)
        .map(|w| w[1].t.min(end) - w[0].t)
        .sum::<f64>()
        + o.points
            .last()
            .filter(|p| p.serving == lowest && p.t < end)
            .map_or(0.0, |p| end - p.t);
    o
}

/// A RollingUpdate from a revision whose pods all serve to one whose pods start as `pod` says,
/// over `horizon` seconds.
pub fn rollout(r: &Rollout, pod: &PodStartup, horizon: f64) -> FleetOutcome {
    let n = r.replicas;
    let mut old = n;
    let mut new: Vec<NewPod> = Vec::new();
    let mut o = FleetOutcome {
        scenario: "rollout",
        replicas: n,
        done_seconds: None,
        lowest_serving: n,
        lowest_serving_seconds: 0.0,
        horizon_seconds: horizon,
        progress_deadline_exceeded_seconds: None,
        evictions_refused: 0,
        points: Vec::new(),
        events: Vec::new(),
    };
    let min_available = n.saturating_sub(r.max_unavailable);
    let mut t = 0.0;
    let mut last_progress = 0.0;
    let avail_at = |p: &NewPod| p.available_at(pod, r.min_ready_seconds);
    let serve_at = |p: &NewPod| p.serving_at(pod, r.min_ready_seconds);
    for _ in 0..10_000 {
        // reconcileNewReplicaSet, then reconcileOldReplicaSets, until nothing changes at `t`.
        loop {
            let total = old + new.len() as u32;
            let room = (n + r.max_surge).saturating_sub(total);
            let want = n.saturating_sub(new.len() as u32).min(room);
            for _ in 0..want {
                new.push(NewPod { created: t });
            }
            if want > 0 {
                last_progress = t;
                o.events.push((
                    t,
                    format!("new ReplicaSet scaled up by {want} (to {})", new.len()),
                ));
            }
            let available = old + count(&new, t, avail_at);
            let down = available.saturating_sub(min_available).min(old);
            if down > 0 {
                old -= down;
                o.events.push((
                    t,
                    format!("old ReplicaSet scaled down by {down} (to {old})"),
                ));
            }
            if want == 0 && down == 0 {
                break;
            }
        }
        let available = old + count(&new, t, avail_at);
        let serving = old + count(&new, t, serve_at);
        o.points.push(Point {
            t,
            available,
            serving,
            old,
            new: new.len() as u32,
        });
        if old == 0 && new.len() as u32 == n && count(&new, t, serve_at) == n {
            o.done_seconds = Some(t);
            o.events
                .push((t, "rollout complete: every pod new and serving".to_owned()));
            break;
        }
        let next = new
            .iter()
            .flat_map(|p| [avail_at(p), serve_at(p)])
            .flatten()
            .filter(|a| *a > t)
            .fold(f64::INFINITY, f64::min);
        let deadline = last_progress + r.progress_deadline_seconds;
        if o.progress_deadline_exceeded_seconds.is_none() && deadline < next.min(horizon) {
            o.progress_deadline_exceeded_seconds = Some(deadline);
            o.events.push((
                deadline,
                format!(
                    "ProgressDeadlineExceeded: no new pod available for {} s",
                    super::secs(r.progress_deadline_seconds)
                ),
            ));
        }
        if !next.is_finite() || next > horizon {
            break;
        }
        if count(&new, next, avail_at) > count(&new, t, avail_at) {
            last_progress = next;
        }
        t = next;
    }
    o.events.sort_by(|a, b| a.0.total_cmp(&b.0));
    finish(o, horizon)
}

/// A PodDisruptionBudget, resolved against the workload's replicas.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// `desiredHealthy`: the apiserver refuses an eviction that would go below it.
    pub desired_healthy: u32,
}

impl Budget {
    /// From a PodDisruptionBudget's spec (`minAvailable` or `maxUnavailable`, percentages of the
    /// replicas rounded up).
    pub fn from_pdb(pdb: &Value, replicas: u32) -> Result<Self, String> {
        let spec = pdb.get("spec").unwrap_or(&Value::Null);
        if let Some(v) = spec.get("minAvailable").filter(|v| !v.is_null()) {
            let m = scaled(Some(v), "0", replicas, true)
                .map_err(|e| format!("spec.minAvailable: {e}"))?;
            return Ok(Budget { desired_healthy: m });
        }
        if let Some(v) = spec.get("maxUnavailable").filter(|v| !v.is_null()) {
            let m = scaled(Some(v), "0", replicas, true)
                .map_err(|e| format!("spec.maxUnavailable: {e}"))?;
            return Ok(Budget {
                desired_healthy: replicas.saturating_sub(m),
            });
        }
        Err("a PodDisruptionBudget needs minAvailable or maxUnavailable".to_owned())
    }

    /// Whether `pdb` selects the pods of a template with `template_labels`, as the eviction API
    /// decides it (the engine's one reading of a label selector).
    pub fn selects(pdb: &Value, template_labels: Option<&serde_json::Map<String, Value>>) -> bool {
        crate::analysis::selector::selects(pdb.pointer("/spec/selector"), template_labels)
    }
}

/// `kubectl drain` of a node running `on_node` of the workload's `replicas` pods, with an
/// optional PDB; replacements start as `pod` says.
pub fn drain(
    replicas: u32,
    on_node: u32,
    budget: Option<Budget>,
    pod: &PodStartup,
    horizon: f64,
) -> FleetOutcome {
    const RETRY: f64 = 5.0;
    let on_node = on_node.min(replicas);
    let mut left = on_node;
    let elsewhere = replicas - on_node;
    let mut new = Replacements::default();
    let mut o = FleetOutcome {
        scenario: "drain",
        replicas,
        done_seconds: None,
        lowest_serving: replicas,
        lowest_serving_seconds: 0.0,
        horizon_seconds: horizon,
        progress_deadline_exceeded_seconds: None,
        evictions_refused: 0,
        points: Vec::new(),
        events: Vec::new(),
    };
    // How long after its creation a replacement is available, and serves (as
    // `NewPod::available_at` and `serving_at` with no minReadySeconds).
    let healthy_after = pod.ready_after;
    let serve_after = pod
        .ready_after
        .and_then(|r| pod.serving_after.map(|s| s.max(r)));
    if budget.is_none() {
        o.events.push((
            0.0,
            "no PodDisruptionBudget selects the pods: nothing holds the evictions back".to_owned(),
        ));
    }
    let mut t = 0.0;
    let mut refused_since: Option<f64> = None;
    for _ in 0..100_000 {
        // Every pod still on the node is evicted as soon as the budget allows.
        while left > 0 {
            let healthy = elsewhere + left + new.count(t, healthy_after);
            let allowed = match budget {
                None => u32::MAX,
                Some(b) => healthy.saturating_sub(b.desired_healthy),
            };
            if allowed == 0 {
                if refused_since.is_none() {
                    o.events.push((
                        t,
                        format!(
                            "eviction refused: the PDB allows no disruption ({healthy} healthy, \
                             {} desired); kubectl drain retries every 5 s",
                            budget.map_or(0, |b| b.desired_healthy)
                        ),
                    ));
                    refused_since = Some(t);
                }
                o.evictions_refused += 1;
                break;
            }
            refused_since = None;
            left -= 1;
            new.push(t);
            o.events.push((
                t,
                format!("pod evicted ({left} left on the node); replacement created"),
            ));
        }
        let ready_new = new.count(t, healthy_after);
        let serving_new = new.count(t, serve_after);
        o.points.push(Point {
            t,
            available: elsewhere + left + ready_new,
            serving: elsewhere + left + serving_new,
            old: left,
            new: new.len(),
        });
        if left == 0 && serving_new == on_node {
            o.done_seconds = Some(t);
            o.events
                .push((t, "node drained and every replacement serving".to_owned()));
            break;
        }
        let next_change = [
            new.next_after(t, healthy_after),
            new.next_after(t, serve_after),
        ]
        .into_iter()
        .flatten()
        .fold(f64::INFINITY, f64::min);
        let next = if left > 0 {
            // The next retry that can succeed: when a replacement turns healthy, on kubectl's
            // 5 s retry grid.
            let since = refused_since.unwrap_or(t);
            if next_change.is_finite() {
                since + ((next_change - since) / RETRY).ceil().max(1.0) * RETRY
            } else {
                f64::INFINITY
            }
        } else {
            next_change
        };
        if !next.is_finite() || next > horizon {
            if left > 0 {
                let retries = ((horizon - refused_since.unwrap_or(t)) / RETRY).floor() as u32;
                o.evictions_refused += retries;
                o.events.push((
                    horizon,
                    format!("drain still blocked: {left} pod(s) left on the node"),
                ));
            }
            break;
        }
        if left > 0 {
            // Refusals between now and the next retry that succeeds.
            o.evictions_refused += ((next - t) / RETRY).round().max(1.0) as u32 - 1;
        }
        t = next;
    }
    finish(o, horizon)
}

/// The loss of a node running `on_node` of the workload's `replicas` pods (managed by a
/// ReplicaSet); replacements start as `pod` says.
pub fn node_loss(
    replicas: u32,
    on_node: u32,
    loss: &NodeLoss,
    pod: &PodStartup,
    horizon: f64,
) -> FleetOutcome {
    let on_node = on_node.min(replicas);
    let elsewhere = replicas - on_node;
    let mut o = FleetOutcome {
        scenario: "node-loss",
        replicas,
        done_seconds: None,
        lowest_serving: replicas,
        lowest_serving_seconds: 0.0,
        horizon_seconds: horizon,
        progress_deadline_exceeded_seconds: None,
        evictions_refused: 0,
        points: Vec::new(),
        events: Vec::new(),
    };
    let grace = loss.grace_seconds;
    o.events.push((
        0.0,
        format!(
            "node lost: its {on_node} pod(s) stop serving; the node controller counts them Ready \
             until node-monitor-grace-period ({} s) passes without a heartbeat",
            super::secs(grace)
        ),
    ));
    o.points.push(Point {
        t: 0.0,
        available: replicas,
        serving: elsewhere,
        old: on_node,
        new: 0,
    });
    if grace > horizon {
        return finish(o, horizon);
    }
    let lost = Point {
        t: grace,
        available: elsewhere,
        serving: elsewhere,
        old: on_node,
        new: 0,
    };
    if grace > 0.0 {
        o.points.push(lost);
    } else {
        o.points[0] = lost;
    }
    let Some(toleration) = loss.toleration_seconds else {
        o.events.push((
            grace,
            "node NotReady: its pods marked NotReady; they tolerate node.kubernetes.io/unreachable \
             forever (a toleration without tolerationSeconds): never evicted, never replaced"
                .to_owned(),
        ));
        return finish(o, horizon);
    };
    o.events.push((
        grace,
        format!(
            "node NotReady: its pods marked NotReady, the node tainted \
             node.kubernetes.io/unreachable:NoExecute; the pods tolerate it for {} s",
            super::secs(toleration)
        ),
    ));
    let evicted = grace + toleration;
    if evicted > horizon {
        return finish(o, horizon);
    }
    o.events.push((
        evicted,
        format!(
            "{on_node} pod(s) evicted ({} + {} s): the ReplicaSet creates their replacements at once",
            super::secs(grace),
            super::secs(toleration)
        ),
    ));
    let ready_at = pod.ready_after.map(|r| evicted + r);
    let serving_at = pod
        .ready_after
        .and_then(|r| pod.serving_after.map(|s| evicted + s.max(r)));
    let at = |t: f64| Point {
        t,
        available: elsewhere
            + if ready_at.is_some_and(|r| r <= t) {
                on_node
            } else {
                0
            },
        serving: elsewhere
            + if serving_at.is_some_and(|s| s <= t) {
                on_node
            } else {
                0
            },
        old: 0,
        new: on_node,
    };
    o.points.push(at(evicted));
    for t in [ready_at, serving_at].into_iter().flatten() {
        if t > evicted && t <= horizon && o.points.last().is_none_or(|p| p.t < t) {
            o.points.push(at(t));
        }
    }
    if let Some(s) = serving_at.filter(|s| *s <= horizon) {
        o.done_seconds = Some(s);
        o.events.push((
            s,
            "every replacement serving: full capacity again".to_owned(),
        ));
    }
    o.events.sort_by(|a, b| a.0.total_cmp(&b.0));
    finish(o, horizon)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loads(seconds: f64) -> PodStartup {
        PodStartup {
            ready_after: Some(seconds),
            serving_after: Some(seconds),
        }
    }

    fn deployment(replicas: u32, surge: Value, unavailable: Value) -> Rollout {
        Rollout::from_deployment(&json!({"spec": {"replicas": replicas, "strategy": {
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}}))
        .unwrap()
    }

    #[test]
    fn surge_one_unavailable_zero_takes_one_load_per_replica() {
        let r = deployment(4, json!(1), json!(0));
        let o = rollout(&r, &loads(300.0), 7200.0);
        assert_eq!(o.done_seconds, Some(1200.0), "{:#?}", o.events);
        // Capacity never drops below the replicas: one extra pod loads at a time.
        assert_eq!(o.lowest_serving, 4);
        assert_eq!(o.progress_deadline_exceeded_seconds, None);
    }

    #[test]
    fn default_quarter_surge_and_unavailable_trade_capacity_for_time() {
        // 25 % of 4: surge 1, unavailable 1: two pods load at once, one old pod goes at t = 0.
        let r = deployment(4, Value::Null, Value::Null);
        assert_eq!((r.max_surge, r.max_unavailable), (1, 1));
        let o = rollout(&r, &loads(300.0), 7200.0);
        assert_eq!(o.done_seconds, Some(600.0));
        assert_eq!(o.lowest_serving, 3);
        assert_eq!(o.lowest_serving_seconds, 600.0);
    }

    #[test]
    fn a_pod_that_never_becomes_ready_stalls_the_rollout_past_its_deadline() {
        let r = deployment(4, json!(1), json!(0));
        let never = PodStartup {
            ready_after: None,
            serving_after: None,
        };
        let o = rollout(&r, &never, 3600.0);
        assert_eq!(o.done_seconds, None);
        assert_eq!(o.progress_deadline_exceeded_seconds, Some(600.0));
        assert_eq!(o.points.last().unwrap().old, 4, "no old pod was removed");
    }

    #[test]
    fn ready_while_loading_counts_as_available_but_does_not_serve() {
        let r = deployment(2, json!(0), json!(1));
        let tcp = PodStartup {
            ready_after: Some(5.0),
            serving_after: Some(300.0),
        };
        let o = rollout(&r, &tcp, 3600.0);
        // The controller sees the new pods available after 5 s and removes the old ones.
        assert_eq!(o.lowest_serving, 0, "{:#?}", o.points);
        assert_eq!(o.done_seconds, Some(305.0));
    }

    #[test]
    fn zero_surge_and_unavailable_resolve_to_one_unavailable() {
        let r = deployment(3, json!(0), json!(0));
        assert_eq!((r.max_surge, r.max_unavailable), (0, 1));
        assert!(
            Rollout::from_deployment(&json!({"spec": {"strategy": {"type": "Recreate"}}})).is_err()
        );
        assert!(deployment_err(json!("x%")).contains("maxSurge"));
    }

    fn deployment_err(surge: Value) -> String {
        Rollout::from_deployment(
            &json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": surge}}}}),
        )
        .unwrap_err()
    }

    #[test]
    fn drain_under_a_pdb_evicts_one_pod_per_load() {
        let pdb = json!({"spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "m"}}}});
        let budget = Budget::from_pdb(&pdb, 4).unwrap();
        let o = drain(4, 2, Some(budget), &loads(300.0), 7200.0);
        assert_eq!(o.done_seconds, Some(600.0), "{:#?}", o.events);
        assert_eq!(o.lowest_serving, 3);
        assert!(o.evictions_refused > 0);
        // Without a PDB both go at once: two pods short for one load.
        let o = drain(4, 2, None, &loads(300.0), 7200.0);
        assert_eq!((o.done_seconds, o.lowest_serving), (Some(300.0), 2));
        assert_eq!(o.lowest_serving_seconds, 300.0);
    }

    /// A drain's work grows with its replicas, not with their square: ten times the pods (a
    /// PDB that lets one go at a time, so the drain takes one step per pod) look at about ten
    /// times as many replacements (× log n), where counting them all at every step would look
    /// at a hundred times as many.
    #[test]
    fn a_drains_work_is_linear_in_its_replicas() {
        let looked_at = |replicas: u32| {
            let pdb = json!({"spec": {"maxUnavailable": 1}});
            let budget = Budget::from_pdb(&pdb, replicas).unwrap();
            LOOKED_AT.with(|n| n.set(0));
            let o = drain(replicas, replicas, Some(budget), &loads(30.0), 1e9);
            assert_eq!(o.done_seconds, Some(30.0 * f64::from(replicas)));
            LOOKED_AT.with(std::cell::Cell::get)
        };
        let (small, large) = (looked_at(1_000), looked_at(10_000));
        assert!(
            large < small * 20,
            "10,000 replicas looked at {large} replacements, 1,000 at {small}"
        );
    }

    #[test]
    fn a_lost_node_is_replaced_after_the_grace_period_and_the_default_toleration() {
        let loss = NodeLoss::from_pod_spec(&json!({"containers": []}), NODE_MONITOR_GRACE_SECONDS);
        assert_eq!(loss.toleration_seconds, Some(300.0));
        let o = node_loss(4, 2, &loss, &loads(300.0), 7200.0);
        // Serving drops at once; the controller sees it at 50 s, evicts at 350 s, and the
        // replacements load for 300 s: full capacity at 650 s.
        assert_eq!(o.done_seconds, Some(650.0), "{:#?}", o.events);
        assert_eq!((o.lowest_serving, o.lowest_serving_seconds), (2, 650.0));
        let at = |t: f64| o.points.iter().rev().find(|p| p.t <= t).unwrap();
        assert_eq!((at(0.0).available, at(0.0).serving), (4, 2));
        assert_eq!((at(50.0).available, at(50.0).old), (2, 2));
        assert_eq!((at(350.0).old, at(350.0).new, at(350.0).serving), (0, 2, 2));
        assert_eq!(at(650.0).serving, 4);
        // A restart storm's replacements never serve: capacity stays down.
        let never = PodStartup {
            ready_after: None,
            serving_after: None,
        };
        let o = node_loss(4, 2, &loss, &never, 7200.0);
        assert_eq!((o.done_seconds, o.lowest_serving), (None, 2));
        assert_eq!(o.lowest_serving_seconds, 7200.0);
    }

    #[test]
    fn tolerations_decide_when_a_lost_nodes_pods_are_evicted() {
        let spec = |tolerations: Value| json!({"tolerations": tolerations});
        let grace = NODE_MONITOR_GRACE_SECONDS;
        let unreachable = |seconds: Value| {
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                   "effect": "NoExecute", "tolerationSeconds": seconds})
        };
        let short = NodeLoss::from_pod_spec(&spec(json!([unreachable(json!(30))])), grace);
        assert_eq!(short.toleration_seconds, Some(30.0));
        let o = node_loss(2, 1, &short, &loads(60.0), 7200.0);
        assert_eq!(o.done_seconds, Some(140.0));
        // Tolerated forever: a toleration with no tolerationSeconds, or one of every taint.
        for forever in [
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]),
            json!([{"operator": "Exists"}]),
        ] {
            let loss = NodeLoss::from_pod_spec(&spec(forever.clone()), grace);
            assert_eq!(loss.toleration_seconds, None, "{forever}");
            let o = node_loss(2, 1, &loss, &loads(60.0), 7200.0);
            assert_eq!((o.done_seconds, o.lowest_serving), (None, 1));
        }
        // Tolerations of other taints leave the admission plugin's 300 s.
        let other =
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
        assert_eq!(
            NodeLoss::from_pod_spec(&spec(other), grace).toleration_seconds,
            Some(300.0)
        );
    }

    #[test]
    fn a_pdb_that_allows_nothing_blocks_the_drain() {
        let pdb = json!({"spec": {"minAvailable": "100%"}});
        let budget = Budget::from_pdb(&pdb, 3).unwrap();
        let o = drain(3, 1, Some(budget), &loads(60.0), 600.0);
        assert_eq!(o.done_seconds, None);
        assert_eq!(o.points.last().unwrap().old, 1);
        assert!(o.evictions_refused >= 100, "{}", o.evictions_refused);
    }

    #[test]
    fn pdb_selection_reads_labels_and_expressions_as_the_eviction_api_does() {
        let labels = json!({"app": "m", "tier": "gpu"});
        let pdb = json!({"spec": {"selector": {"matchLabels": {"app": "m"}}}});
        assert!(Budget::selects(&pdb, labels.as_object()));
        let other = json!({"spec": {"selector": {"matchLabels": {"app": "x"}}}});
        assert!(!Budget::selects(&other, labels.as_object()));
        // A PDB that selects by expressions holds the drain back as pdb-blocks-gpu-drains says.
        let by_expression = json!({"spec": {"selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gpu"]}]}}});
        assert!(Budget::selects(&by_expression, labels.as_object()));
        // policy/v1: an empty selector selects every pod of the namespace, a missing one none.
        assert!(Budget::selects(
            &json!({"spec": {"selector": {}}}),
            labels.as_object()
        ));
        assert!(!Budget::selects(&json!({"spec": {}}), labels.as_object()));
    }
}
