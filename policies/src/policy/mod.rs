//! The policy: every knob the rules read, from the built-in `default.yaml` plus a user's file.
//!
//! The file format refuses what it does not understand (after kubewarden's settings): unknown keys,
//! unknown rule ids, bad patterns and invalid custom-rule schemas are errors that name the key.

pub mod custom;
pub mod error;
pub mod operators;

use crate::model::finding::Severity;
use crate::model::glob;
use crate::policy::custom::CustomRule;
use crate::policy::error::PolicyError;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// The built-in policy, compiled into every binary.
pub const DEFAULT_POLICY_YAML: &str = include_str!("../../default.yaml");

/// A Kubernetes minor version, e.g. `1.30`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubernetesVersion {
    pub const fn new(major: u32, minor: u32) -> Self {
        KubernetesVersion { major, minor }
    }

    fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches('v');
        let mut parts = text.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        // A patch number is allowed (`1.30.2`) but plays no part.
        if let Some(patch) = parts.next() {
            patch.parse::<u32>().ok()?;
        }
        parts
            .next()
            .is_none()
            .then_some(KubernetesVersion { major, minor })
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What the policy says about one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleLevel {
    Off,
    Info,
    Warning,
    Error,
}

impl RuleLevel {
    pub fn severity(self) -> Option<Severity> {
        match self {
            RuleLevel::Off => None,
            RuleLevel::Info => Some(Severity::Info),
            RuleLevel::Warning => Some(Severity::Warning),
            RuleLevel::Error => Some(Severity::Error),
        }
    }
}

/// A policy-file exemption: findings of `rules` on matching objects are reported as suppressed.
/// Every selector that is given must match; `*` wildcards are allowed in each.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Exemption {
    /// Rule ids, or `all`.
    pub rules: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub kinds: Vec<String>,
    #[serde(default)]
    pub containers: Vec<String>,
    /// Why: shown with every suppressed finding. Required, so exemptions stay explainable.
    pub reason: String,
}

impl Exemption {
    pub fn covers_rule(&self, rule: &str) -> bool {
        self.rules.iter().any(|r| r == "all" || r == rule)
    }

    pub fn matches(&self, object: &crate::ObjectRef, container: Option<&str>) -> bool {
        self.matches_workload(object) && any_matches(&self.containers, container)
    }

    /// Whether the namespace, name and kind selectors match `object` (the containers aside).
    pub fn matches_workload(&self, object: &crate::ObjectRef) -> bool {
        any_matches(&self.namespaces, object.namespace.as_deref())
            && any_matches(&self.names, object.name.as_deref())
            && any_matches(&self.kinds, Some(&object.kind))
    }
}

/// An empty selector matches everything; otherwise one of its patterns must match the value.
fn any_matches(patterns: &[String], value: Option<&str>) -> bool {
    patterns.is_empty() || value.is_some_and(|v| patterns.iter().any(|p| glob::matches(p, v)))
}

/// Where pod specs live inside a custom resource the engine does not know.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSpec {
    pub kind: String,
    /// `group/version` or just `group`; omitted: any apiVersion.
    #[serde(default)]
    pub api_version: Option<String>,
    /// JSON Pointers to pod specs (objects with `containers`); `*` stands for every array item
    /// or map value at that level, e.g. `/spec/workers/*/template/spec`.
    pub pod_specs: Vec<String>,
    /// Batch workloads (run to completion) are not required to have readiness.
    #[serde(default)]
    pub batch: bool,
}

impl WorkloadSpec {
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        kind == self.kind
            && self.api_version.as_deref().is_none_or(|want| {
                api_version == want || api_version.split('/').next() == Some(want)
            })
    }
}

/// Accelerator detection settings.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AcceleratorsFile {
    /// Extended resource names (`*` wildcards allowed), e.g. nvidia.com/gpu, nvidia.com/mig-*.
    pub resources: Option<Vec<String>>,
    /// runtimeClassNames that make every container of a pod an accelerator container.
    pub runtime_class_names: Option<Vec<String>>,
}

/// The policy file as written: every key optional, unknown keys refused.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyFile {
    /// A version label for this policy, printed by `probelint --version` for the built-in one.
    pub policy_version: Option<String>,
    /// The oldest Kubernetes version the manifests must run on, e.g. "1.30".
    pub kubernetes_version: Option<String>,
    /// Load time (seconds) assumed for an accelerator container when no
    /// probelint.io/model-load-seconds annotation declares one and the manifest does not say
    /// enough to estimate it (`modelLoad`); findings that rest on it are warnings. Default 300.
    pub model_load_seconds: Option<f64>,
    /// Extra startup budget over the load time, as a fraction (0.25 = 25 %). Default 0.25.
    pub startup_margin: Option<f64>,
    /// How load times are estimated from the manifest: bandwidths, server start times, model
    /// sizes, and the shortest startupProbe budget a fix adds.
    pub model_load: Option<crate::model::load::ModelLoadFile>,
    /// What makes a container an accelerator container. Lists given here replace the built-in ones.
    pub accelerators: Option<AcceleratorsFile>,
    /// Whether probelint.io/ignore annotations exempt findings. Default true; false is strict mode.
    pub allow_annotation_exemptions: Option<bool>,
    /// Severity per rule id: off, info, warning or error.
    #[serde(default)]
    pub rules: BTreeMap<String, RuleLevel>,
    /// Findings to report as suppressed, selected by rule, namespace, name, kind and container.
    #[serde(default)]
    pub exemptions: Vec<Exemption>,
    /// Where pod specs live in custom resources the engine does not know.
    #[serde(default)]
    pub workloads: Vec<WorkloadSpec>,
    /// Rules written as JSON Schema over a container, a pod spec or a whole object.
    #[serde(default)]
    pub custom_rules: Vec<crate::policy::custom::CustomRuleFile>,
    /// Overrides of the probes operators add (`policies/operators.yaml`), by row id: a probe
    /// replaced, `null` for none, `enabled: false` when this cluster's operator adds nothing.
    #[serde(default)]
    pub operator_defaults: BTreeMap<String, crate::policy::operators::OperatorDefaultFile>,
}

impl PolicyFile {
    /// Parses a policy document. Errors carry the parser's line and column.
    pub fn from_yaml(text: &str) -> Result<Self, PolicyError> {
        if text.trim().is_empty() {
            return Ok(PolicyFile::default());
        }
        serde_saphyr::from_str(text).map_err(|e| PolicyError::Parse(e.to_string()))
    }
}

/// The JSON Schema of the policy file (`.probelint.yaml`), for editors and `docs/`, with
/// `rules` the ids of the built-in rules, which editors then complete.
pub fn json_schema(rules: &[&str]) -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(PolicyFile)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert(
            "title".to_owned(),
            serde_json::Value::String("probelint policy (.probelint.yaml)".to_owned()),
        );
    }
    // Rule levels are keyed by rule id: list the built-in ones so editors complete them
    // (custom rule ids are allowed too, hence no `additionalProperties: false`).
    if let Some(levels) = schema.pointer_mut("/properties/rules")
        && let Some(obj) = levels.as_object_mut()
    {
        let level = obj.get("additionalProperties").cloned().unwrap_or_default();
        let props: serde_json::Map<String, serde_json::Value> = rules
            .iter()
            .map(|id| ((*id).to_owned(), level.clone()))
            .collect();
        obj.insert("properties".to_owned(), serde_json::Value::Object(props));
    }
    schema
}

/// The effective policy the rules read.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Version of the built-in policy (or the user's `policyVersion`).
    pub version: String,
    pub kubernetes_version: KubernetesVersion,
    pub model_load_seconds: f64,
    pub startup_margin: f64,
    pub model_load: crate::model::load::ModelLoad,
    pub accelerator_resources: Vec<String>,
    pub accelerator_runtime_classes: Vec<String>,
    pub allow_annotation_exemptions: bool,
    pub rule_levels: BTreeMap<String, RuleLevel>,
    pub exemptions: Vec<Exemption>,
    pub workloads: Vec<WorkloadSpec>,
    pub custom_rules: Vec<CustomRule>,
    /// The probes operators add to the pods they build.
    pub operator_defaults: crate::policy::operators::OperatorDefaults,
}

impl Policy {
    /// The built-in policy overridden by a user policy document (`.probelint.yaml`) when there
    /// is one. `rules` are the ids of the built-in rules: a rule level or an exemption may name
    /// only those and the policy's custom rules, and a custom rule may not take one.
    /// (`Policy::builtin`, `Policy::with_user_yaml` and `Policy::default` pass the catalog's.)
    pub fn load(user: Option<&str>, rules: &[&str]) -> Result<Self, PolicyError> {
        let base = PolicyFile::from_yaml(DEFAULT_POLICY_YAML)?;
        let user = user.map(PolicyFile::from_yaml).transpose()?;
        Self::from_files(base, user, rules)
    }

    /// Merges: scalars and lists in `user` replace the built-in ones; rule levels, exemptions,
    /// workloads and custom rules add to them.
    fn from_files(
        base: PolicyFile,
        user: Option<PolicyFile>,
        rules: &[&str],
    ) -> Result<Self, PolicyError> {
        let user = user.unwrap_or_default();
        let base_accel = base.accelerators.unwrap_or_default();
        let user_accel = user.accelerators.unwrap_or_default();

        let version = user
            .policy_version
            .or(base.policy_version)
            .unwrap_or_else(|| "unversioned".to_owned());
        let k8s_text = user
            .kubernetes_version
            .or(base.kubernetes_version)
            .unwrap_or_else(|| "1.30".to_owned());
        let kubernetes_version = KubernetesVersion::parse(&k8s_text).ok_or_else(|| {
            PolicyError::invalid(
                "kubernetesVersion",
                format!("expected a version like \"1.30\", got {k8s_text:?}"),
            )
        })?;
        let model_load_seconds = user
            .model_load_seconds
            .or(base.model_load_seconds)
            .unwrap_or(300.0);
        if !(model_load_seconds.is_finite() && model_load_seconds >= 0.0) {
            return Err(PolicyError::invalid(
                "modelLoadSeconds",
                format!("expected a number of seconds ≥ 0, got {model_load_seconds}"),
            ));
        }
        let startup_margin = user.startup_margin.or(base.startup_margin).unwrap_or(0.25);
        if !(startup_margin.is_finite() && (0.0..=10.0).contains(&startup_margin)) {
            return Err(PolicyError::invalid(
                "startupMargin",
                format!("expected a fraction between 0 and 10 (0.25 = 25 %), got {startup_margin}"),
            ));
        }
        let model_load = crate::model::load::ModelLoad::merge(
            base.model_load.unwrap_or_default(),
            user.model_load.unwrap_or_default(),
        )
        .map_err(|(key, message)| PolicyError::invalid(key, message))?;
        let accelerator_resources = user_accel
            .resources
            .or(base_accel.resources)
            .unwrap_or_default();
        for (i, pattern) in accelerator_resources.iter().enumerate() {
            if pattern.trim().is_empty() {
                return Err(PolicyError::invalid(
                    format!("accelerators.resources[{i}]"),
                    "empty resource name",
                ));
            }
        }
        let accelerator_runtime_classes = user_accel
            .runtime_class_names
            .or(base_accel.runtime_class_names)
            .unwrap_or_default();

        let mut rule_levels = base.rules;
        for (id, level) in user.rules {
            rule_levels.insert(id, level);
        }
        let mut custom_rules = Vec::new();
        for (i, file) in base
            .custom_rules
            .into_iter()
            .chain(user.custom_rules)
            .enumerate()
        {
            custom_rules.push(CustomRule::compile(file, i)?);
        }
        let known = |id: &str| rules.contains(&id) || custom_rules.iter().any(|c| c.id == id);
        for (i, custom) in custom_rules.iter().enumerate() {
            if rules.contains(&custom.id.as_str())
                || custom_rules[..i].iter().any(|c| c.id == custom.id)
            {
                return Err(PolicyError::invalid(
                    format!("customRules[{i}].id"),
                    format!("rule id {:?} is already taken", custom.id),
                ));
            }
        }
        for id in rule_levels.keys() {
            if !known(id) {
                return Err(PolicyError::invalid(
                    format!("rules.{id}"),
                    format!("unknown rule id {id:?} (`probelint rules` lists them)"),
                ));
            }
        }
        let exemptions: Vec<Exemption> =
            base.exemptions.into_iter().chain(user.exemptions).collect();
        for (i, exemption) in exemptions.iter().enumerate() {
            if exemption.rules.is_empty() {
                return Err(PolicyError::invalid(
                    format!("exemptions[{i}].rules"),
                    "list at least one rule id, or `all`",
                ));
            }
            for id in &exemption.rules {
                if id != "all" && !known(id) {
                    return Err(PolicyError::invalid(
                        format!("exemptions[{i}].rules"),
                        format!("unknown rule id {id:?}"),
                    ));
                }
            }
            if exemption.reason.trim().is_empty() {
                return Err(PolicyError::invalid(
                    format!("exemptions[{i}].reason"),
                    "say why the exemption exists; it is shown with every suppressed finding",
                ));
            }
        }
        let workloads: Vec<WorkloadSpec> =
            base.workloads.into_iter().chain(user.workloads).collect();
        for (i, workload) in workloads.iter().enumerate() {
            for (j, pointer) in workload.pod_specs.iter().enumerate() {
                let problem = if !pointer.starts_with('/') {
                    Some("starting with '/'".to_owned())
                } else {
                    crate::model::pointer::invalid(pointer).map(|why| format!("({why})"))
                };
                if let Some(problem) = problem {
                    return Err(PolicyError::invalid(
                        format!("workloads[{i}].podSpecs[{j}]"),
                        format!("expected a JSON Pointer {problem}, got {pointer:?}"),
                    ));
                }
            }
        }

        let operator_defaults = crate::policy::operators::OperatorDefaults::with_overrides([
            &base.operator_defaults,
            &user.operator_defaults,
        ])?;

        Ok(Policy {
            operator_defaults,
            version,
            kubernetes_version,
            model_load_seconds,
            startup_margin,
            model_load,
            accelerator_resources,
            accelerator_runtime_classes,
            allow_annotation_exemptions: user
                .allow_annotation_exemptions
                .or(base.allow_annotation_exemptions)
                .unwrap_or(true),
            rule_levels,
            exemptions,
            workloads,
            custom_rules,
        })
    }

    /// Whether an extended resource name is an accelerator.
    pub fn is_accelerator_resource(&self, resource: &str) -> bool {
        self.accelerator_resources
            .iter()
            .any(|p| glob::matches(p, resource))
    }

    /// The severity a rule's finding gets after the policy's override; `None` when it is off.
    pub fn severity_for(&self, rule: &str, default: Severity) -> Option<Severity> {
        match self.rule_levels.get(rule) {
            Some(level) => level.severity(),
            None => Some(default),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_policy_loads_with_documented_defaults() {
        let p = Policy::builtin().unwrap();
        assert_eq!(p.model_load_seconds, 300.0);
        assert_eq!(p.startup_margin, 0.25);
        assert_eq!(p.kubernetes_version, KubernetesVersion::new(1, 30));
        assert!(p.is_accelerator_resource("nvidia.com/gpu"));
        assert!(p.is_accelerator_resource("nvidia.com/mig-1g.10gb"));
        assert!(p.is_accelerator_resource("gpu.intel.com/i915"));
        assert!(p.is_accelerator_resource("aws.amazon.com/neuroncore"));
        assert!(!p.is_accelerator_resource("cpu"));
        assert!(!p.is_accelerator_resource("nvidia.com/gpux"));
    }

    #[test]
    fn user_policy_overrides_scalars_and_rule_levels() {
        let p = Policy::with_user_yaml(
            "modelLoadSeconds: 900\nkubernetesVersion: '1.23'\nrules:\n  readiness-port-open: off\n",
        )
        .unwrap();
        assert_eq!(p.model_load_seconds, 900.0);
        assert_eq!(p.kubernetes_version, KubernetesVersion::new(1, 23));
        assert_eq!(p.severity_for("readiness-port-open", Severity::Error), None);
        assert_eq!(
            p.severity_for("gpu-startup-probe-missing", Severity::Error),
            Some(Severity::Error)
        );
    }

    #[test]
    fn unknown_key_is_an_error_naming_the_key_and_line() {
        let err = Policy::with_user_yaml("modelLoadSeconds: 10\nmodelLoadSecs: 20\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("modelLoadSecs"), "{err}");
        assert!(err.contains('2'), "line number missing: {err}");
    }

    #[test]
    fn wrong_type_is_an_error() {
        let err = Policy::with_user_yaml("modelLoadSeconds: soon\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("modelLoadSeconds") || err.contains("soon"),
            "{err}"
        );
    }

    #[test]
    fn unknown_rule_id_is_an_error() {
        let err = Policy::with_user_yaml("rules:\n  gpu-startup-probe-mising: off\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("rules.gpu-startup-probe-mising"), "{err}");
        assert!(err.contains("unknown rule id"), "{err}");
    }

    #[test]
    fn bad_kubernetes_version_and_margin_are_errors() {
        let err = Policy::with_user_yaml("kubernetesVersion: latest\n").unwrap_err();
        assert!(err.to_string().starts_with("kubernetesVersion:"), "{err}");
        let err = Policy::with_user_yaml("startupMargin: -1\n").unwrap_err();
        assert!(err.to_string().starts_with("startupMargin:"), "{err}");
    }

    #[test]
    fn exemption_needs_a_reason_and_known_rules() {
        let err =
            Policy::with_user_yaml("exemptions:\n  - rules: [all]\n    reason: ''\n").unwrap_err();
        assert!(err.to_string().contains("exemptions[0].reason"), "{err}");
        let err =
            Policy::with_user_yaml("exemptions:\n  - rules: [nope]\n    reason: x\n").unwrap_err();
        assert!(
            err.to_string().contains("unknown rule id \"nope\""),
            "{err}"
        );
    }

    #[test]
    fn a_pod_spec_pattern_that_is_not_a_json_pointer_is_an_error() {
        let workload = |pattern: &str| {
            format!(
                "workloads:\n  - apiVersion: example.com/v1\n    kind: Server\n    podSpecs: [{pattern:?}]\n"
            )
        };
        let err = Policy::with_user_yaml(&workload("spec/template/spec")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "workloads[0].podSpecs[0]: expected a JSON Pointer starting with '/', got \"spec/template/spec\""
        );
        let err = Policy::with_user_yaml(&workload("/spec/a~2b/spec")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("workloads[0].podSpecs[0]: expected a JSON Pointer (")
                && text.ends_with(", got \"/spec/a~2b/spec\""),
            "{text}"
        );
        assert!(Policy::with_user_yaml(&workload("/spec/a~1b/*/spec")).is_ok());
    }

    #[test]
    fn empty_user_policy_is_the_builtin_policy() {
        let p = Policy::with_user_yaml("# nothing here\n").unwrap();
        assert_eq!(p.model_load_seconds, 300.0);
    }
}
