//! The catalog: every built-in rule, in the order `probelint rules` lists them, and what needs
//! the whole list (the rule ids a policy may name, the policy file's JSON Schema).

use crate::policy::error::PolicyError;
use crate::policy::{self, Policy};
use crate::rules;
use crate::rules::rule::Rule;
use serde_json::Value;
use std::sync::LazyLock;

static REGISTRY: &[&Rule] = &[
    &rules::gpu_startup_probe_missing::RULE,
    &rules::gpu_readiness_probe_missing::RULE,
    &rules::gpu_serving_role_unknown::RULE,
    &rules::readiness_port_open::RULE,
    &rules::startup_budget_too_short::RULE,
    &rules::startup_shorter_than_operator::RULE,
    &rules::liveness_restart_loop::RULE,
    &rules::liveness_checks_readiness::RULE,
    &rules::liveness_restarts_busy_server::RULE,
    &rules::probe_port_undeclared::RULE,
    &rules::probe_threshold_invalid::RULE,
    &rules::pod_spec_invalid::RULE,
    &rules::args_repeat_entrypoint::RULE,
    &rules::exec_probe_heavy::RULE,
    &rules::known_server_endpoint::RULE,
    &rules::readiness_timeout_too_short::RULE,
    &rules::grpc_probe_unsupported::RULE,
    &rules::gpu_graceful_shutdown_missing::RULE,
    &rules::hpa_cpu_metric_on_gpu_workload::RULE,
    &rules::gpu_serving_without_pdb::RULE,
    &rules::model_exceeds_storage_limit::RULE,
    &rules::progress_deadline_too_short::RULE,
    &rules::readiness_drops_every_replica::RULE,
    &rules::lws_kill_recreates_group::RULE,
    &rules::lws_leader_ready_needs_workers::RULE,
    &rules::pdb_blocks_gpu_drains::RULE,
    &rules::hpa_scale_up_outpaces_load::RULE,
    &rules::hpa_min_replicas_one::RULE,
    &rules::vllm_service_links::RULE,
    &rules::duplicate_key::RULE,
];

/// Every built-in rule, in catalog order.
pub fn registry() -> &'static [&'static Rule] {
    REGISTRY
}

/// A built-in rule by id.
pub fn find(id: &str) -> Option<&'static Rule> {
    REGISTRY.iter().copied().find(|r| r.meta().id == id)
}

/// The ids of the built-in rules, in catalog order.
pub fn ids() -> &'static [&'static str] {
    static IDS: LazyLock<Vec<&'static str>> =
        LazyLock::new(|| REGISTRY.iter().map(|r| r.meta().id).collect());
    &IDS
}

/// The JSON Schema of the policy file (`.probelint.yaml`), for editors and `docs/`, listing the
/// built-in rule ids.
pub fn json_schema() -> serde_json::Value {
    policy::json_schema(ids())
}

/// Everything the policy file's schema ([`json_schema`]) refuses in a policy document read as
/// JSON, each as the JSON Pointer of the value and what is wrong with it. The policy reader stops
/// at its first problem; this finds them all, so that a user fixes them in one go.
pub fn policy_schema_problems(document: &serde_json::Value) -> Vec<(String, String)> {
    static VALIDATOR: LazyLock<Option<jsonschema::Validator>> =
        LazyLock::new(|| jsonschema::validator_for(&json_schema()).ok());
    let Some(validator) = VALIDATOR.as_ref() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for error in validator.iter_errors(document) {
        said_plainly(&error, &mut problems);
    }
    problems
}

/// One schema error as a user reads it: an unknown key at the key, not at its mapping; the
/// options of an enumeration in full; an optional section's own errors rather than "not valid
/// under any of the schemas listed in the 'anyOf' keyword" (its other branch is `null`).
fn said_plainly(error: &jsonschema::ValidationError<'_>, out: &mut Vec<(String, String)>) {
    use jsonschema::error::ValidationErrorKind as Kind;
    let path = error.instance_path().to_string();
    match error.kind() {
        Kind::AdditionalProperties { unexpected } => {
            for key in unexpected {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                out.push((format!("{path}/{escaped}"), format!("unknown key {key:?}")));
            }
        }
        Kind::Enum { options } => {
            let options = options
                .as_array()
                .map(|o| {
                    o.iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| options.to_string());
            out.push((
                path,
                format!("{} is not one of {options}", error.instance()),
            ));
        }
        Kind::AnyOf { context } => {
            let is_null_branch = |branch: &Vec<jsonschema::ValidationError<'static>>| {
                branch.len() == 1
                    && matches!(branch[0].kind(), Kind::Type { .. })
                    && branch[0].to_string().ends_with("is not of type \"null\"")
            };
            let real: Vec<_> = context.iter().filter(|b| !is_null_branch(b)).collect();
            match real.as_slice() {
                [branch] if !branch.is_empty() => {
                    for inner in branch.iter() {
                        said_plainly(inner, out);
                    }
                }
                _ => out.push((path, error.to_string())),
            }
        }
        _ => out.push((path, error.to_string())),
    }
}

/// The built-in policy overridden by a user policy document (`.probelint.yaml`), naming the
/// built-in rules: what [`Policy::with_user_yaml`] does.
pub fn load_policy(text: &str) -> Result<Policy, PolicyError> {
    Policy::load(Some(text), ids())
}

// The constructors everyone uses know the built-in rules; they live here, with the list, so that
// the policy layer needs no rule catalog (it takes the ids as [`Policy::load`]'s parameter).
impl Policy {
    /// The built-in policy alone.
    pub fn builtin() -> Result<Self, PolicyError> {
        Policy::load(None, ids())
    }

    /// The built-in policy overridden by a user policy document (`.probelint.yaml`).
    pub fn with_user_yaml(text: &str) -> Result<Self, PolicyError> {
        load_policy(text)
    }
}

impl Default for Policy {
    /// The built-in policy. It is tested to load, so this cannot fail at run time.
    fn default() -> Self {
        Policy::builtin().expect("the built-in policy (policies/default.yaml) is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for rule in registry() {
            let id = rule.meta().id;
            assert!(seen.insert(id), "duplicate id {id}");
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !id.starts_with('-'),
                "{id} is not kebab-case"
            );
        }
        assert_eq!(seen.len(), registry().len());
    }

    #[test]
    fn every_rule_documents_itself() {
        for rule in registry() {
            let m = rule.meta();
            assert!(
                !m.summary.is_empty() && !m.summary.contains('\n'),
                "{}: one-line summary",
                m.id
            );
            assert!(m.rationale.len() > 80, "{}: rationale too thin", m.id);
        }
    }

    #[test]
    fn every_rule_attaches_only_the_fix_it_declares() {
        for rule in registry() {
            let meta = rule.meta();
            let mut fixed = 0;
            for example in [meta.bad_example, meta.good_example] {
                let findings = crate::rules::testing::lint_example(meta, example);
                // The applicability is the declared one by construction (`Draft::fix`), and
                // an undeclared fix panics there in tests: what is left to check is that a
                // declared fix is produced at all.
                fixed += findings
                    .iter()
                    .filter(|f| f.rule == meta.id && f.fix.is_some())
                    .count();
            }
            // A rule that declares a fix shows it on its bad example.
            assert_eq!(
                meta.fix.is_some(),
                fixed > 0,
                "{}: declared fix {:?}, {fixed} fixes on its examples",
                meta.id,
                meta.fix
            );
        }
    }

    #[test]
    fn the_kind_of_check_decides_where_a_rule_runs() {
        // A relations rule is skipped when one object is judged alone (the webhook) and runs
        // over a whole input; an object rule runs in both.
        let relations = registry()
            .iter()
            .find(|r| r.needs_other_objects())
            .expect("a cross-object rule");
        let yaml = relations.meta().bad_example;
        let objects = crate::rules::testing::objects(yaml);
        let id = relations.meta().id;
        let policy = Policy::default();
        assert!(
            crate::engine::evaluate(&objects, &policy)
                .iter()
                .any(|f| f.rule == id)
        );
        assert!(
            objects
                .iter()
                .flat_map(|o| crate::engine::evaluate_one(o, &policy))
                .all(|f| f.rule != id)
        );
    }
}
