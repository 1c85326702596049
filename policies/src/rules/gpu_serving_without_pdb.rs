//! `gpu-serving-without-pdb`: replicated GPU serving with no PodDisruptionBudget.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::facts::{ObjectFacts, Role};
use crate::analysis::selector::{first_match_label, selects};
use crate::model::finding::Severity;
use serde_json::{Map, Value};
use std::collections::HashMap;

static META: RuleMeta = RuleMeta {
    id: "gpu-serving-without-pdb",
    severity: Severity::Info,
    summary: "A GPU serving workload with more than one replica has no PodDisruptionBudget",
    rationale: "A node drain (upgrade, autoscaler scale-down, GPU driver update) evicts every pod it can. \
Without a PodDisruptionBudget it can evict all replicas of a model server at once, and a replacement \
needs minutes to load its weights: the model is down for the whole load time. A PDB with minAvailable (or \
maxUnavailable: 1) makes drains wait for replacements to become Ready. Only PDBs in the same input are \
seen; exempt the rule when the PDB lives elsewhere.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/gpu-serving-without-pdb/bad.yaml"),
    good_example: include_str!("../../resources/rules/gpu-serving-without-pdb/good.yaml"),
    fix: None,
};

/// Namespace, label key, label value.
type LabelKey<'a> = (Option<&'a str>, &'a str, &'a str);

/// The PDBs' selectors, found by namespace and by one label each requires: a workload is
/// checked against the few that could select it, not against every PDB of a large input.
struct SelectorIndex<'a> {
    /// Selectors whose first `matchLabels` entry is this label.
    by_label: HashMap<LabelKey<'a>, Vec<&'a Value>>,
    /// Selectors without such an entry (expressions only, or empty), by namespace.
    other: HashMap<Option<&'a str>, Vec<&'a Value>>,
}

impl<'a> SelectorIndex<'a> {
    fn new(objects: &'a [ObjectFacts]) -> Self {
        let mut index = SelectorIndex {
            by_label: HashMap::new(),
            other: HashMap::new(),
        };
        for object in objects {
            let Role::DisruptionBudget {
                selector: Some(selector),
                ..
            } = &object.role
            else {
                continue;
            };
            let namespace = object.object_ref.namespace.as_deref();
            match first_match_label(selector) {
                Some((key, value)) => index
                    .by_label
                    .entry((namespace, key, value))
                    .or_default()
                    .push(selector),
                None => index.other.entry(namespace).or_default().push(selector),
            }
        }
        index
    }

    /// Every selector in `namespace` that may select `labels`: all that `selects` would accept,
    /// and a few more.
    fn candidates<'s>(
        &'s self,
        namespace: Option<&'s str>,
        labels: &'s Map<String, Value>,
    ) -> impl Iterator<Item = &'a Value> + 's {
        let by_label = labels
            .iter()
            .filter_map(move |(k, v)| self.by_label.get(&(namespace, k.as_str(), v.as_str()?)));
        self.other
            .get(&namespace)
            .into_iter()
            .chain(by_label)
            .flatten()
            .copied()
    }
}

pub(crate) static RULE: Rule = Rule::relations(&META, check);

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    let selectors = SelectorIndex::new(objects);
    for object in objects {
        let Role::GpuServing {
            replicated: Some(replicated),
            ..
        } = &object.role
        else {
            continue;
        };
        if replicated.replicas <= 1 {
            continue;
        }
        let covered = selectors
            .candidates(object.object_ref.namespace.as_deref(), &replicated.labels)
            .any(|selector| selects(Some(selector), Some(&replicated.labels)));
        if covered {
            continue;
        }
        report
            .cross(object)
            .at(replicated.pointer)
            .message(format!(
                "{} runs {} GPU serving replicas and no PodDisruptionBudget selects them: a \
                 node drain can take them all down for a full model load",
                object.object_ref, replicated.replicas
            ))
            .help(
                "add a PodDisruptionBudget (maxUnavailable: 1) selecting the pod template's labels",
            )
            .report();
    }
}

#[cfg(test)]
mod tests {
    /// The selector index must find every PDB that selects a workload, whatever the form of its
    /// selector: a label that is not the workload's first, expressions only, several labels.
    #[test]
    fn every_form_of_selector_is_found() {
        let bad = super::META.bad_example.replace(
            "      labels:\n        app: vllm\n",
            "      labels:\n        tier: gpu\n        app: vllm\n",
        );
        let with_pdb = |selector: &str| {
            format!(
                "{bad}---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: p}}\nspec:\n  maxUnavailable: 1\n  selector: {selector}\n"
            )
        };
        let fired =
            |yaml: &str| crate::rules::testing::fired(yaml, "gpu-serving-without-pdb").len();
        assert_eq!(fired(&bad), 1);
        for covering in [
            "{matchLabels: {app: vllm}}",
            "{matchLabels: {tier: gpu, app: vllm}}",
            "{matchExpressions: [{key: app, operator: In, values: [vllm]}]}",
            "{}",
        ] {
            assert_eq!(fired(&with_pdb(covering)), 0, "{covering}");
        }
        for missing in [
            "{matchLabels: {app: vllm, tier: cpu}}",
            "{matchLabels: {app: tgi}}",
            "{matchExpressions: [{key: app, operator: NotIn, values: [vllm]}]}",
        ] {
            assert_eq!(fired(&with_pdb(missing)), 1, "{missing}");
        }
    }
}
