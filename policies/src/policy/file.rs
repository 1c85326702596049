//! The policy file as written (`.probelint.yaml` and the built-in `default.yaml`): its serde
//! types, which refuse unknown keys, and its JSON Schema.

use crate::model::finding::Severity;
use crate::model::glob;
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

    pub(crate) fn parse(text: &str) -> Option<Self> {
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

/// `startupProbe:` in the policy file.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartupProbeFile {
    /// `modelServers` (default): accelerator containers with evidence that they serve a model
    /// loaded at start; `allAccelerated`: every accelerator container of a pod that serves,
    /// whatever it runs.
    pub require: Option<StartupProbeRequirement>,
}

/// Which accelerator containers must carry a startupProbe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StartupProbeRequirement {
    /// Containers with evidence that they serve a model loaded at start.
    #[default]
    ModelServers,
    /// Every accelerator container of a pod that serves, whatever it runs.
    AllAccelerated,
}

/// `probeHelper:` in the policy file: fixes write exec probes that run `probelint-probe`
/// (docs/probe-helper.md) instead of httpGet, for the servers the helper knows.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProbeHelperFile {
    /// The image built from `probe/Dockerfile`, e.g. registry.example.com/probelint-probe:0.1.0.
    pub image: String,
    /// How the binary reaches the serving container. Default `initContainer`.
    #[serde(default)]
    pub mode: ProbeHelperMode,
}

/// How `probelint-probe` is delivered into the serving container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ProbeHelperMode {
    /// An init container copies the binary into an emptyDir (`probelint-probe install /out`):
    /// works on every Kubernetes version.
    #[default]
    InitContainer,
    /// The image is mounted read-only as an image volume (`volumes[].image`, KEP-4639): needs
    /// `kubernetesVersion` 1.35 or later, where the feature is on by default.
    ImageVolume,
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
    /// enough to estimate it (`modelLoad`); no finding compares a deadline with it (fixes still size what they add by it). Default 300.
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
    /// Which accelerator containers must carry a startupProbe.
    pub startup_probe: Option<StartupProbeFile>,
    /// Whether the generic probe checks (liveness-checks-readiness, readiness-port-open,
    /// readiness-timeout-too-short, readiness-drops-every-replica, exec-probe-heavy) judge every
    /// container, as kube-score does, rather than only the containers that serve a model.
    /// Default false.
    pub generic_checks: Option<bool>,
    /// Off by default. When set, `--fix`, `probelint mutate` and the mutating webhook write exec
    /// probes that run `probelint-probe` for vLLM, TGI, SGLang and Triton, instead of httpGet.
    pub probe_helper: Option<ProbeHelperFile>,
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
