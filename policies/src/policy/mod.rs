//! The policy: every knob the rules read, from the built-in `default.yaml` plus a user's file.
//!
//! The file format refuses what it does not understand (after kubewarden's settings): unknown keys,
//! unknown rule ids, bad patterns and invalid custom-rule schemas are errors that name the key.
//! [`file`] is the format; this module merges the built-in file with the user's and checks what
//! the format cannot say (ids, ranges, patterns).

pub mod custom;
pub mod error;
pub mod file;
pub mod operators;

pub use file::{
    DEFAULT_POLICY_YAML, Exemption, KubernetesVersion, PolicyFile, ProbeHelperMode, RuleLevel,
    StartupProbeRequirement, WorkloadSpec, json_schema,
};

use crate::model::finding::Severity;
use crate::model::glob;
use crate::policy::custom::CustomRule;
use crate::policy::error::PolicyError;
use std::collections::BTreeMap;

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
    /// Which accelerator containers must carry a startupProbe (`startupProbe.require`).
    pub startup_probe_required: StartupProbeRequirement,
    /// Whether the generic probe checks judge every container (`genericChecks`).
    pub generic_checks: bool,
    pub rule_levels: BTreeMap<String, RuleLevel>,
    pub exemptions: Vec<Exemption>,
    pub workloads: Vec<WorkloadSpec>,
    pub custom_rules: Vec<CustomRule>,
    /// The probes operators add to the pods they build.
    pub operator_defaults: crate::policy::operators::OperatorDefaults,
    /// `probeHelper`: fixes write `probelint-probe` exec probes; `None` (the default) keeps httpGet.
    pub probe_helper: Option<ProbeHelper>,
}

/// The effective `probeHelper` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeHelper {
    pub image: String,
    pub mode: ProbeHelperMode,
}

/// The first Kubernetes version whose kubelet mounts image volumes by default (KEP-4639: beta,
/// on by default, in 1.35).
pub const IMAGE_VOLUME_SINCE: KubernetesVersion = KubernetesVersion::new(1, 35);

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

        let probe_helper = match user.probe_helper.or(base.probe_helper) {
            None => None,
            Some(file) => {
                if file.image.trim().is_empty() {
                    return Err(PolicyError::invalid(
                        "probeHelper.image",
                        "name the image built from probe/Dockerfile, e.g. \
                         registry.example.com/probelint-probe:0.1.0",
                    ));
                }
                // Refused rather than skipped: an image volume on an older kubelet leaves the pod
                // without its probe binary, and every exec probe then fails.
                if file.mode == ProbeHelperMode::ImageVolume
                    && kubernetes_version < IMAGE_VOLUME_SINCE
                {
                    return Err(PolicyError::invalid(
                        "probeHelper.mode",
                        format!(
                            "imageVolume needs Kubernetes {IMAGE_VOLUME_SINCE} or later (KEP-4639: \
                             image volumes are on by default from {IMAGE_VOLUME_SINCE}), but \
                             kubernetesVersion is {kubernetes_version}; use mode initContainer, \
                             or raise kubernetesVersion"
                        ),
                    ));
                }
                Some(ProbeHelper {
                    image: file.image.trim().to_owned(),
                    mode: file.mode,
                })
            }
        };

        Ok(Policy {
            probe_helper,
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
            startup_probe_required: user
                .startup_probe
                .and_then(|s| s.require)
                .or(base.startup_probe.and_then(|s| s.require))
                .unwrap_or_default(),
            generic_checks: user.generic_checks.or(base.generic_checks).unwrap_or(false),
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
