//! Custom rules from the policy: a JSON Schema the target must satisfy (the Polaris idea).
//!
//! Each schema is compiled once when the policy loads. Compilation has no network or file
//! access (`jsonschema` is built without its resolvers), so a `$ref` to anything but the
//! schema itself fails to compile instead of fetching.

use crate::model::finding::Severity;
use crate::policy::error::PolicyError;
use serde::Deserialize;

/// What a custom rule's schema is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CustomTarget {
    /// Every container of every pod spec (regular containers and native sidecars).
    Container,
    /// Every pod spec.
    PodSpec,
    /// Every object, whole.
    Object,
}

/// A custom rule as written in the policy file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CustomRuleFile {
    pub id: String,
    pub severity: Severity,
    pub target: CustomTarget,
    /// Shown when the target does not satisfy the schema.
    pub message: String,
    #[serde(default)]
    pub help: Option<String>,
    /// Only check accelerator containers (and the pod specs that have one).
    #[serde(default)]
    pub accelerators_only: bool,
    /// The JSON Schema the target must satisfy; a target that fails it is a finding.
    pub schema: serde_json::Value,
}

/// A custom rule with its schema compiled (shared: validators are not `Clone`).
#[derive(Clone)]
pub struct CustomRule {
    pub id: String,
    pub severity: Severity,
    pub target: CustomTarget,
    pub message: String,
    pub help: String,
    pub accelerators_only: bool,
    validator: std::sync::Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for CustomRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomRule")
            .field("id", &self.id)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl CustomRule {
    pub(crate) fn compile(file: CustomRuleFile, index: usize) -> Result<Self, PolicyError> {
        let key = |field: &str| format!("customRules[{index}].{field}");
        let id_ok = !file.id.is_empty()
            && file
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !file.id.starts_with('-')
            && !file.id.ends_with('-');
        if !id_ok {
            return Err(PolicyError::Invalid {
                key: key("id"),
                message: format!(
                    "expected a kebab-case id like \"gpu-memory-limit\", got {:?}",
                    file.id
                ),
            });
        }
        let validator =
            jsonschema::validator_for(&file.schema).map_err(|e| PolicyError::Invalid {
                key: key("schema"),
                message: format!("not a valid JSON Schema: {e}"),
            })?;
        Ok(CustomRule {
            help: file.help.unwrap_or_else(|| {
                format!(
                    "make the {} satisfy the policy's schema for `{}`",
                    target_noun(file.target),
                    file.id
                )
            }),
            id: file.id,
            severity: file.severity,
            target: file.target,
            message: file.message,
            accelerators_only: file.accelerators_only,
            validator: std::sync::Arc::new(validator),
        })
    }

    /// The first way `value` breaks the schema, if any.
    pub fn violation(&self, value: &serde_json::Value) -> Option<String> {
        self.validator.validate(value).err().map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
    }
}

fn target_noun(target: CustomTarget) -> &'static str {
    match target {
        CustomTarget::Container => "container",
        CustomTarget::PodSpec => "pod spec",
        CustomTarget::Object => "object",
    }
}
