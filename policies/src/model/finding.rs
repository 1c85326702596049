//! What a rule reports: findings, their severities, and the fixes they may carry.

use crate::model::fields::pick;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// How much a finding matters. Ordered: `Info < Warning < Error`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Kubernetes object a finding belongs to, as a user would name it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `None` for objects without `metadata.name` (e.g. `generateName` or test fixtures).
    pub name: Option<String>,
}

impl ObjectRef {
    pub fn from_object(object: &serde_json::Value) -> Self {
        let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_owned);
        let [api_version, kind, metadata] = pick(object, ["apiVersion", "kind", "metadata"]);
        let [namespace, name, generate_name] = match metadata {
            Some(m) => pick(m, ["namespace", "name", "generateName"]),
            None => [None; 3],
        };
        ObjectRef {
            api_version: text(api_version).unwrap_or_default(),
            kind: text(kind).unwrap_or_default(),
            namespace: text(namespace),
            name: text(name).or_else(|| text(generate_name)),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        match (&self.namespace, &self.name) {
            (Some(ns), Some(name)) => write!(f, " {ns}/{name}"),
            (None, Some(name)) => write!(f, " {name}"),
            (_, None) => write!(f, " (unnamed)"),
        }
    }
}

/// Why a finding does not count: who exempted it and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    /// `annotation` (`probelint.io/ignore...` on the object) or `policy` (an `exemptions` entry).
    pub source: SuppressionSource,
    /// The reason the user gave (`probelint.io/ignore-reason` or the exemption's `reason`).
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuppressionSource {
    Annotation,
    Policy,
}

/// Whether a fix may be applied without a human looking at it (after ruff's applicability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    /// Shown to the user, never applied automatically.
    DisplayOnly,
    /// Applied by `--fix --unsafe-fixes` only: it may change behaviour beyond the finding.
    Unsafe,
    /// Applied by `--fix` and by the mutating webhook.
    Safe,
}

/// A fix: JSON Patch operations against the object the finding is in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    pub description: String,
    pub applicability: Applicability,
    pub patch: json_patch::Patch,
}

/// One problem found in one object.
///
/// What every finding of an object or container shares is shared, not copied: the rule id and
/// most helps are the rule's own `'static` text, the object's reference and the container's name
/// and evidence are counted references to what its analysis made once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule id (kebab-case, stable) — built-in or a custom rule from the policy.
    pub rule: Cow<'static, str>,
    pub severity: Severity,
    pub message: String,
    /// What to do about it.
    pub help: Cow<'static, str>,
    pub object: Arc<ObjectRef>,
    /// Which of the objects given to [`crate::evaluate`] this finding is about.
    #[serde(skip)]
    pub object_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Arc<str>>,
    /// RFC 6901 pointer into the object: the node at fault, or where a missing node belongs.
    pub pointer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<Suppression>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// The load time the finding rests on, with its inputs and arithmetic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::model::load::LoadTime>,
    /// What shows that the container serves a model, for the findings about one that does
    /// (`runs vLLM (the image's entrypoint)`, `declares containerPort 8000`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Arc<str>>,
}

impl Finding {
    pub fn is_suppressed(&self) -> bool {
        self.suppressed.is_some()
    }
}
