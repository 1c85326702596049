//! Mutation: the safe fixes of one object merged into one JSON Patch, plus the annotations that
//! record them. The webhook's mutation and the CLI's `--fix` both come from here, so what a
//! cluster injects is what a developer sees.

use crate::engine::evaluate_one;
use crate::fix::patch::add_to_map;
use crate::model::annotations::MUTATED_ANNOTATION;
use crate::model::finding::{Applicability, Finding};
use crate::policy::Policy;
use json_patch::{Patch, PatchOperation};
use serde_json::Value;

/// One fix that was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedFix {
    pub rule: String,
    pub container: Option<String>,
    pub description: String,
}

/// The result of mutating one object.
#[derive(Debug, Clone)]
pub struct Mutation {
    /// RFC 6902 operations against the original object; empty when nothing was fixed.
    pub patch: json_patch::Patch,
    /// What the patch fixes.
    pub applied: Vec<AppliedFix>,
    /// The findings of the original object (fixed ones included).
    pub findings: Vec<Finding>,
}

/// Computes the safe fixes for one object: every unsuppressed finding's fix, merged into one
/// patch against the original object. Two findings fixed by the same operation (a startupProbe
/// fixes both `gpu-startup-probe-missing` and `liveness-restart-loop`) share it.
pub fn mutate(object: &Value, policy: &Policy) -> Mutation {
    let findings = evaluate_one(object, policy);
    let (patch, applied) = merge_fixes(&findings, Applicability::Safe);
    Mutation {
        patch,
        applied,
        findings,
    }
}

/// Merges the fixes of `findings` at or above `at_least` into one patch. Later operations on a
/// path an earlier fix already wrote are dropped, so the patch stays valid and minimal.
pub fn merge_fixes(
    findings: &[Finding],
    at_least: Applicability,
) -> (json_patch::Patch, Vec<AppliedFix>) {
    let mut ops: Vec<PatchOperation> = Vec::new();
    // The paths written so far, each with the indices of its operations: the clash test below
    // is a few lookups instead of a scan of every earlier operation (an object with thousands
    // of containers has tens of thousands of operations; the scan made `/mutate` quadratic).
    let mut written: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    let mut applied = Vec::new();
    for finding in findings {
        let Some(fix) = &finding.fix else { continue };
        if finding.is_suppressed() || fix.applicability < at_least {
            continue;
        }
        let mut used = false;
        for op in &fix.patch.0 {
            let path = op.path().to_string();
            // Clash: the same path, an earlier path above this one, or one below it.
            let above = path
                .match_indices('/')
                .any(|(i, _)| written.contains_key(&path[..i]));
            let below = written
                .range(format!("{path}/")..)
                .next()
                .is_some_and(|(p, _)| p.starts_with(&format!("{path}/")));
            let same = written.get(&path);
            if same.is_none() && !above && !below {
                written.entry(path).or_default().push(ops.len());
                ops.push(op.clone());
                used = true;
            } else if same.is_some_and(|indices| indices.iter().any(|&i| ops[i] == *op)) {
                used = true;
            }
        }
        if used || fix.patch.0.is_empty() {
            applied.push(AppliedFix {
                rule: finding.rule.to_string(),
                container: finding.container.as_deref().map(str::to_owned),
                description: fix.description.clone(),
            });
        }
    }
    (json_patch::Patch(ops), applied)
}

/// What the mutating webhook sends for one object: [`mutation_patch`]'s answer.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationPatch {
    /// RFC 6902 operations against the original object; empty when nothing changes.
    pub patch: Patch,
    /// The object's probelint annotations copied into its pod templates
    /// ([`crate::reach::propagation`]), so that its Pods carry them.
    pub propagated: Vec<String>,
}

/// The engine's `patch`, plus the operations that record the `applied` fixes in the
/// `probelint.io/mutated` annotation and copy the object's probelint annotations into its pod
/// templates. Fails when `patch` does not apply to `object` (which it consumes: the object is
/// patched in place to see where the annotations go).
pub fn mutation_patch(
    mut object: Value,
    patch: Patch,
    applied: &[AppliedFix],
    policy: &Policy,
) -> Result<MutationPatch, json_patch::PatchError> {
    json_patch::patch(&mut object, &patch)?;
    let mut ops = patch.0;
    // Both against the patched object: one writes the object's metadata, the other the metadata
    // of its templates, so neither moves what the other addresses.
    let propagation = crate::reach::propagation(&object, policy);
    ops.extend(annotation_ops(&object, applied));
    ops.extend(propagation.ops);
    Ok(MutationPatch {
        patch: Patch(ops),
        propagated: propagation.keys,
    })
}

/// Operations that set `probelint.io/mutated` to the comma-separated `rule:container` pairs of
/// `applied` (plus those an earlier mutation recorded), against `patched`: the object after the
/// engine's own operations.
///
/// RFC 6902 `add` needs the parent to exist: adding `/metadata/annotations/probelint.io~1mutated`
/// to an object without annotations fails the whole patch, so then the map is added whole.
pub fn annotation_ops(patched: &Value, applied: &[AppliedFix]) -> Vec<PatchOperation> {
    let annotations = patched.pointer("/metadata/annotations");
    let mut entries: Vec<String> = annotations
        .and_then(|a| a.get(MUTATED_ANNOTATION))
        .and_then(Value::as_str)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // A set beside the list: an object with thousands of containers has thousands of entries.
    let mut seen: std::collections::HashSet<String> = entries.iter().cloned().collect();
    let recorded = entries.len();
    for fix in applied {
        let entry = match &fix.container {
            Some(container) => format!("{}:{container}", fix.rule),
            None => fix.rule.clone(),
        };
        if seen.insert(entry.clone()) {
            entries.push(entry);
        }
    }
    // Nothing new to record: rewriting the annotation with the value it has would make a patch
    // of an object that needs none.
    if entries.len() == recorded {
        return Vec::new();
    }
    let value = Value::String(entries.join(","));
    vec![add_to_map(
        patched,
        &["metadata", "annotations"],
        MUTATED_ANNOTATION,
        value,
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn applied(rule: &str, container: Option<&str>) -> AppliedFix {
        AppliedFix {
            rule: rule.into(),
            container: container.map(Into::into),
            description: "added a startupProbe".into(),
        }
    }

    fn apply(object: &Value, ops: Vec<PatchOperation>) -> Value {
        let mut doc = object.clone();
        json_patch::patch(&mut doc, &Patch(ops)).expect("patch applies");
        doc
    }

    #[test]
    fn annotation_op_adds_the_whole_map_when_there_are_no_annotations() {
        let object = json!({"metadata": {"name": "x"}});
        let ops = annotation_ops(
            &object,
            &[
                applied("gpu-startup-probe-missing", Some("vllm")),
                applied("readiness-port-open", Some("vllm")),
                applied("gpu-startup-probe-missing", Some("vllm")),
            ],
        );
        assert_eq!(
            serde_json::to_value(&ops).expect("json"),
            json!([{"op": "add", "path": "/metadata/annotations", "value": {
                "probelint.io/mutated": "gpu-startup-probe-missing:vllm,readiness-port-open:vllm"
            }}])
        );
        let doc = apply(&object, ops);
        assert_eq!(
            doc["metadata"]["annotations"]["probelint.io/mutated"],
            "gpu-startup-probe-missing:vllm,readiness-port-open:vllm"
        );
    }

    #[test]
    fn annotation_op_adds_one_key_to_existing_annotations_and_keeps_earlier_entries() {
        let object = json!({"metadata": {"annotations": {
            "team": "ml",
            "probelint.io/mutated": "readiness-port-open:vllm"
        }}});
        let ops = annotation_ops(
            &object,
            &[applied("gpu-startup-probe-missing", Some("vllm"))],
        );
        assert_eq!(
            serde_json::to_value(&ops).expect("json"),
            json!([{"op": "add", "path": "/metadata/annotations/probelint.io~1mutated",
                    "value": "readiness-port-open:vllm,gpu-startup-probe-missing:vllm"}])
        );
        let doc = apply(&object, ops);
        assert_eq!(doc["metadata"]["annotations"]["team"], "ml");
    }

    #[test]
    fn annotation_op_replaces_null_annotations_and_creates_missing_metadata() {
        for object in [
            json!({"metadata": {"annotations": null}}),
            json!({"kind": "Pod"}),
        ] {
            let ops = annotation_ops(&object, &[applied("some-object-rule", None)]);
            let doc = apply(&object, ops);
            assert_eq!(
                doc["metadata"]["annotations"]["probelint.io/mutated"],
                "some-object-rule"
            );
        }
        assert!(annotation_ops(&json!({}), &[]).is_empty());
        let recorded =
            json!({"metadata": {"annotations": {"probelint.io/mutated": "some-object-rule"}}});
        assert!(annotation_ops(&recorded, &[]).is_empty());
        assert!(annotation_ops(&recorded, &[applied("some-object-rule", None)]).is_empty());
    }

    #[test]
    fn mutation_patch_appends_the_annotation_to_the_engine_patch() {
        let object = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "vllm"}]}});
        let mutation = Mutation {
            patch: serde_json::from_value(json!([
                {"op": "add", "path": "/spec/containers/0/startupProbe", "value": {"httpGet": {"path": "/health", "port": 8000}}}
            ]))
            .expect("patch"),
            applied: vec![applied("gpu-startup-probe-missing", Some("vllm"))],
            findings: Vec::new(),
        };
        let policy = Policy::default();
        let MutationPatch { patch, propagated } = mutation_patch(
            object.clone(),
            mutation.patch.clone(),
            &mutation.applied,
            &policy,
        )
        .expect("applies");
        assert_eq!(patch.0.len(), 2);
        assert!(propagated.is_empty());
        let mut doc = object.clone();
        json_patch::patch(&mut doc, &patch).expect("applies");
        assert_eq!(
            doc["spec"]["containers"][0]["startupProbe"]["httpGet"]["port"],
            8000
        );
        assert_eq!(
            doc["metadata"]["annotations"]["probelint.io/mutated"],
            "gpu-startup-probe-missing:vllm"
        );

        let broken = Mutation {
            patch: serde_json::from_value(json!([
                {"op": "replace", "path": "/spec/nothing/here", "value": 1}
            ]))
            .expect("patch"),
            ..mutation
        };
        assert!(mutation_patch(object.clone(), broken.patch, &broken.applied, &policy).is_err());
    }

    #[test]
    fn mutation_patch_copies_the_objects_exemption_into_the_template() {
        let object = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"probelint.io/ignore": "all"}},
            "spec": {"template": {"spec": {"containers": [{"name": "vllm"}]}}}
        });
        let policy = Policy::default();
        let out = mutation_patch(object.clone(), Patch(Vec::new()), &[], &policy).expect("applies");
        assert_eq!(out.propagated, ["probelint.io/ignore"]);
        let mut doc = object;
        json_patch::patch(&mut doc, &out.patch).expect("applies");
        assert_eq!(
            doc["spec"]["template"]["metadata"]["annotations"]["probelint.io/ignore"],
            "all"
        );
        assert!(
            doc["metadata"]["annotations"]
                .get(MUTATED_ANNOTATION)
                .is_none()
        );
    }
}
