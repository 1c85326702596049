//! `pdb-blocks-gpu-drains`: a PodDisruptionBudget over GPU serving pods that no drain can
//! satisfy, or that stalls drains on pods still loading their model.

use std::collections::HashMap;

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::facts::{ObjectFacts, Role};
use crate::analysis::selector::{first_match_label, selects};
use crate::model::finding::Severity;
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "pdb-blocks-gpu-drains",
    severity: Severity::Warning,
    summary: "A PodDisruptionBudget over GPU serving pods blocks node drains, or stalls them on pods that are loading",
    rationale: "GPU nodes are drained often: driver and CUDA upgrades, node autoscaler scale-downs, \
maintenance. A PodDisruptionBudget that allows no eviction (maxUnavailable: 0, or minAvailable at or above \
the replica count, or above what an HPA scales down to) makes every such drain wait forever, until someone \
deletes the budget by hand. And a model server spends minutes NotReady while it loads: under the default \
unhealthyPodEvictionPolicy (IfHealthyBudget) such a pod can be evicted only while the budget is healthy, \
so a drain stalls for the whole load on a pod that is loading, and for ever on one that is wedged; \
AlwaysAllow lets the drain evict pods that are not Ready (policy/v1, Kubernetes 1.27+). Only the \
PodDisruptionBudgets, workloads and HPAs in the same input are seen: the CLI over a repository sees them, \
the admission webhook (one object at a time) does not.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/pdb-blocks-gpu-drains/bad.yaml"),
    good_example: include_str!("../../resources/rules/pdb-blocks-gpu-drains/good.yaml"),
    fix: None,
};

/// An int, or a percentage (`"50%"`) as a fraction of `of`, rounded as the disruption
/// controller does (up for minAvailable, down for maxUnavailable: `GetScaledValueFromIntOrPercent`).
fn scaled(value: &Value, of: i64, round_up: bool) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let percent: f64 = s.trim().strip_suffix('%')?.trim().parse().ok()?;
            let exact = percent / 100.0 * of as f64;
            Some(if round_up {
                exact.ceil()
            } else {
                exact.floor()
            } as i64)
        }
        _ => None,
    }
}

pub(crate) static RULE: Rule = Rule::relations(&META, check);

/// The replicated GPU serving workloads a budget may select, in input order, and the HPAs that
/// scale them: a repository of thousands of budgets and workloads in one namespace would
/// otherwise compare every budget with every object.
struct Candidates<'a> {
    /// By namespace and one of their pod labels (a string value).
    by_label: HashMap<(Option<&'a str>, &'a str, &'a str), Vec<&'a ObjectFacts>>,
    /// By namespace, for selectors without a string `matchLabels` entry.
    by_namespace: HashMap<Option<&'a str>, Vec<&'a ObjectFacts>>,
    /// The `minReplicas` of the first HPA for each namespace, target kind and name.
    hpa_min: HashMap<(Option<&'a str>, &'a str, &'a str), i64>,
}

impl<'a> Candidates<'a> {
    fn new(objects: &'a [ObjectFacts]) -> Self {
        let mut candidates = Candidates {
            by_label: HashMap::new(),
            by_namespace: HashMap::new(),
            hpa_min: HashMap::new(),
        };
        for object in objects {
            let namespace = object.object_ref.namespace.as_deref();
            match &object.role {
                Role::GpuServing {
                    replicated: Some(replicated),
                    ..
                } => {
                    candidates
                        .by_namespace
                        .entry(namespace)
                        .or_default()
                        .push(object);
                    for (key, value) in &replicated.labels {
                        if let Some(value) = value.as_str() {
                            candidates
                                .by_label
                                .entry((namespace, key, value))
                                .or_default()
                                .push(object);
                        }
                    }
                }
                Role::Autoscaler {
                    target_kind,
                    target_name,
                    min_replicas,
                    ..
                } => {
                    candidates
                        .hpa_min
                        .entry((namespace, target_kind, target_name))
                        .or_insert(*min_replicas);
                }
                _ => {}
            }
        }
        candidates
    }

    /// Every workload in `namespace` that `selector` may select: all that `selects` accepts,
    /// and a few more, in input order.
    fn for_selector(&self, namespace: Option<&'a str>, selector: &'a Value) -> &[&'a ObjectFacts] {
        let found = match first_match_label(selector) {
            Some((key, value)) => self.by_label.get(&(namespace, key, value)),
            None => self.by_namespace.get(&namespace),
        };
        found.map_or(&[], Vec::as_slice)
    }

    fn hpa_min(&self, workload: &ObjectFacts) -> Option<i64> {
        let name = workload.object_ref.name.as_deref()?;
        let namespace = workload.object_ref.namespace.as_deref();
        self.hpa_min
            .get(&(namespace, workload.object_ref.kind.as_str(), name))
            .copied()
    }
}

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    let candidates = Candidates::new(objects);
    for pdb in objects {
        let Role::DisruptionBudget {
            selector: Some(selector),
            max_unavailable,
            min_available,
            unhealthy_pod_eviction_policy,
        } = &pdb.role
        else {
            continue;
        };
        let namespace = pdb.object_ref.namespace.as_deref();
        for &workload in candidates.for_selector(namespace, selector) {
            let Role::GpuServing {
                replicated: Some(replicated),
                load,
                ..
            } = &workload.role
            else {
                continue;
            };
            if !selects(Some(selector), Some(&replicated.labels)) {
                continue;
            }
            let replicas = replicated.replicas;
            let hpa_min = candidates.hpa_min(workload);
            let blocked = match (max_unavailable, min_available) {
                (Some(max), _) if scaled(max, replicas, false) == Some(0) => Some((
                    "/spec/maxUnavailable",
                    format!("maxUnavailable: {max}"),
                    replicas,
                )),
                (_, Some(min)) => scaled(min, replicas, true)
                    .filter(|m| *m >= replicas)
                    .map(|_| {
                        (
                            "/spec/minAvailable",
                            format!("minAvailable: {min}"),
                            replicas,
                        )
                    })
                    .or_else(|| {
                        let low = hpa_min?;
                        scaled(min, low, true)
                            .filter(|m| *m >= low && low < replicas)
                            .map(|_| ("/spec/minAvailable", format!("minAvailable: {min}"), low))
                    }),
                _ => None,
            };
            if let Some((pointer, written, at)) = blocked {
                let when = if at == replicas {
                    format!("its {replicas} replicas")
                } else {
                    format!("the {at} replicas its HPA scales down to (minReplicas)")
                };
                report
                    .cross(pdb)
                    .at(pointer)
                    .message(format!(
                        "{} selects {}'s GPU serving pods and allows no eviction of {when} \
                         ({written}): every node drain (driver upgrade, autoscaler \
                         scale-down) waits until someone deletes the budget",
                        pdb.object_ref, workload.object_ref
                    ))
                    .help(
                        "allow one eviction at a time (maxUnavailable: 1): the drain then waits \
                     for each replacement to load and become Ready",
                    )
                    .report();
                continue;
            }
            if unhealthy_pod_eviction_policy.as_deref() != Some("AlwaysAllow") {
                let loading = load.as_ref().map_or_else(String::new, |l| {
                    format!(" (NotReady for its load, {})", l.explained())
                });
                report
                    .cross(pdb)
                    .at("/spec")
                    .message(format!(
                        "{} selects {}'s GPU serving pods with unhealthyPodEvictionPolicy \
                             {}: a pod that is loading{loading} or wedged cannot be evicted \
                             while the budget is short, so a drain stalls on it",
                        pdb.object_ref,
                        workload.object_ref,
                        unhealthy_pod_eviction_policy
                            .as_deref()
                            .unwrap_or("IfHealthyBudget (the default)")
                    ))
                    .help("set spec.unhealthyPodEvictionPolicy: AlwaysAllow (Kubernetes 1.27+)")
                    .severity(Severity::Info)
                    .report();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "pdb-blocks-gpu-drains";

    #[test]
    fn a_budget_that_allows_no_eviction_blocks_drains() {
        let f = &findings_of(super::META.bad_example, ID);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pointer, "/spec/maxUnavailable");
        assert_eq!(f[0].object.kind, "PodDisruptionBudget");
        assert!(
            f[0].message
                .contains("allows no eviction of its 2 replicas (maxUnavailable: 0)"),
            "{}",
            f[0].message
        );
        let all = include_str!(
            "../../resources/rules/pdb-blocks-gpu-drains/fires-min-available-100-percent.yaml"
        );
        let f = &findings_of(all, ID)[0];
        assert_eq!(f.pointer, "/spec/minAvailable");
    }

    #[test]
    fn min_available_at_the_hpas_minimum_and_the_eviction_policy() {
        let yaml = include_str!(
            "../../resources/rules/pdb-blocks-gpu-drains/fires-min-available-at-the-hpa-minimum.yaml"
        );
        let f = &findings_of(yaml, ID)[0];
        assert!(
            f.message.contains("the 1 replicas its HPA scales down to"),
            "{}",
            f.message
        );
        let lenient = include_str!(
            "../../resources/rules/pdb-blocks-gpu-drains/fires-loading-pods-count-against-the-budget.yaml"
        );
        let f = &findings_of(lenient, ID);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, crate::Severity::Info);
        assert!(
            f[0].message.contains("IfHealthyBudget (the default)"),
            "{}",
            f[0].message
        );
        assert!(
            f[0].message
                .contains("loading (NotReady for its load, 600 s from"),
            "{}",
            f[0].message
        );
    }
}
