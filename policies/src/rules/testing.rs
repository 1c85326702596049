//! Test helpers for rules: lint YAML the way users write it.

use crate::model::finding::Finding;
use crate::policy::Policy;
use serde_json::Value;

/// Parses a (multi-document) YAML manifest into objects.
pub fn objects(yaml: &str) -> Vec<Value> {
    let docs = probelint_testkit::yaml::objects(yaml);
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Evaluates a YAML manifest with the built-in policy.
pub fn lint(yaml: &str) -> Vec<Finding> {
    lint_with(yaml, &Policy::default())
}

pub fn lint_with(yaml: &str, policy: &Policy) -> Vec<Finding> {
    crate::evaluate(&objects(yaml), policy)
}

/// Findings of one rule, as `(container, pointer)` pairs.
pub fn fired(yaml: &str, rule: &str) -> Vec<(Option<String>, String)> {
    lint(yaml)
        .into_iter()
        .filter(|f| f.rule == rule)
        .map(|f| (f.container.as_deref().map(str::to_owned), f.pointer))
        .collect()
}

/// The findings of one rule.
pub fn findings_of(yaml: &str, rule: &str) -> Vec<Finding> {
    lint(yaml).into_iter().filter(|f| f.rule == rule).collect()
}

/// Evaluates one of a rule's examples under the rule's example policy.
pub fn lint_example(meta: &crate::RuleMeta, yaml: &str) -> Vec<Finding> {
    let policy = match meta.example_policy {
        Some(p) => Policy::with_user_yaml(p).expect("example policy is valid"),
        None => Policy::default(),
    };
    lint_with(yaml, &policy)
}
