//! The probes operators add to the pods they build: KServe merges every LLMInferenceService over
//! its well-known configs and injects a TCP readiness into InferenceServices, KubeRay injects
//! probes into Ray nodes, the NIM Operator fills in each probe a NIMService leaves enabled.
//!
//! The defaults themselves are data (`policies/operators.yaml`, one row per operator config,
//! each with its version and source file), overridable in the policy's `operatorDefaults:`.
//! Where a row applies is decided here ([`row_for`]); the engine then judges each container as
//! its operator will run it: its own probes, and the row's for every kind it lacks.

use crate::model::fields::{self, pick};
use crate::model::probe::ProbeKind;
use crate::policy::error::PolicyError;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The built-in table.
pub const OPERATOR_DEFAULTS_YAML: &str = include_str!("../../operators.yaml");

/// A row of `operators.yaml`, or a policy's override of one: every field optional. A probe
/// given as `null` means the operator adds none of that kind.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OperatorDefaultFile {
    /// Who adds the probes (`KServe LLMInferenceService controller`).
    pub operator: Option<String>,
    /// The version the row was read from.
    pub version: Option<String>,
    /// The source file (and lines) the row was read from.
    pub source: Option<String>,
    /// Where the engine applies the row (documentation; the matching is built in).
    pub applies_to: Option<String>,
    /// `false` drops the row: the operator adds nothing (KubeRay with
    /// `ENABLE_PROBES_INJECTION=false`).
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<Value>")]
    pub startup_probe: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<Value>")]
    pub readiness_probe: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<Value>")]
    pub liveness_probe: Option<Value>,
}

/// A field that is present, even as `null` (absent stays `None` through `default`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// One operator config: the probes it adds and where they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorDefault {
    pub id: String,
    pub operator: String,
    pub version: String,
    pub source: String,
    pub applies_to: String,
    pub enabled: bool,
    /// Whether a policy changed the row.
    pub overridden: bool,
    /// In [`ProbeKind::ALL`] order; `None`: the operator adds no probe of that kind.
    probes: [Option<Value>; 3],
}

impl OperatorDefault {
    /// The probe of `kind` the operator adds, if any.
    pub fn probe(&self, kind: ProbeKind) -> Option<&Value> {
        self.probes[kind as usize].as_ref()
    }

    /// `KServe LLMInferenceService controller (kserve/kserve@aaac4e294, config/...)`: how a
    /// finding names the row.
    pub fn provenance(&self) -> String {
        let mut out = format!("{} ({}, {})", self.operator, self.version, self.source);
        if self.overridden {
            out.push_str(", as the policy's operatorDefaults.");
            out.push_str(&self.id);
            out.push_str(" overrides it");
        }
        out
    }
}

/// Every operator config the engine knows, by id.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorDefaults {
    rows: Vec<Arc<OperatorDefault>>,
}

impl OperatorDefaults {
    /// The built-in table, with `overrides` (the built-in policy's, then the user's) applied.
    pub fn with_overrides<'f>(
        overrides: impl IntoIterator<Item = &'f BTreeMap<String, OperatorDefaultFile>>,
    ) -> Result<Self, PolicyError> {
        let table: BTreeMap<String, OperatorDefaultFile> =
            serde_saphyr::from_str(OPERATOR_DEFAULTS_YAML)
                .map_err(|e| PolicyError::Parse(format!("policies/operators.yaml: {e}")))?;
        let mut rows = Vec::with_capacity(table.len());
        for (id, row) in table {
            let missing = |what: &str| {
                PolicyError::Parse(format!("policies/operators.yaml: {id} has no {what}"))
            };
            let mut out = OperatorDefault {
                operator: row.operator.clone().ok_or_else(|| missing("operator"))?,
                version: row.version.clone().ok_or_else(|| missing("version"))?,
                source: row.source.clone().ok_or_else(|| missing("source"))?,
                applies_to: row.applies_to.clone().ok_or_else(|| missing("appliesTo"))?,
                enabled: true,
                overridden: false,
                probes: [None, None, None],
                id,
            };
            set_probes(&mut out, &row, "policies/operators.yaml")?;
            rows.push(out);
        }
        for overrides in overrides {
            for (id, row) in overrides {
                let key = format!("operatorDefaults.{id}");
                let Some(out) = rows.iter_mut().find(|r| &r.id == id) else {
                    let known: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
                    return Err(PolicyError::Invalid {
                        key,
                        message: format!("unknown operator default (known: {})", known.join(", ")),
                    });
                };
                if row.applies_to.is_some() {
                    return Err(PolicyError::Invalid {
                        key: format!("{key}.appliesTo"),
                        message: "where a row applies is built in; override its probes, or set \
                                  `enabled: false`"
                            .to_owned(),
                    });
                }
                out.overridden = true;
                if let Some(enabled) = row.enabled {
                    out.enabled = enabled;
                }
                for (field, value) in [
                    (&mut out.operator, &row.operator),
                    (&mut out.version, &row.version),
                    (&mut out.source, &row.source),
                ] {
                    if let Some(value) = value {
                        value.clone_into(field);
                    }
                }
                set_probes(out, row, &key)?;
            }
        }
        Ok(OperatorDefaults {
            rows: rows.into_iter().map(Arc::new).collect(),
        })
    }

    /// The row `id`, when it is enabled.
    pub fn get(&self, id: &str) -> Option<&Arc<OperatorDefault>> {
        self.rows.iter().find(|r| r.id == id && r.enabled)
    }

    /// Every row, enabled or not, in id order.
    pub fn rows(&self) -> impl Iterator<Item = &OperatorDefault> {
        self.rows.iter().map(|r| r.as_ref())
    }
}

/// Copies the probes a row (or override) gives, refusing one the apiserver would refuse.
fn set_probes(
    out: &mut OperatorDefault,
    row: &OperatorDefaultFile,
    key: &str,
) -> Result<(), PolicyError> {
    for (kind, value) in [
        (ProbeKind::Startup, &row.startup_probe),
        (ProbeKind::Readiness, &row.readiness_probe),
        (ProbeKind::Liveness, &row.liveness_probe),
    ] {
        let Some(value) = value else { continue };
        let field = format!("{key}.{}", kind.field());
        if value.is_null() {
            out.probes[kind as usize] = None;
            continue;
        }
        let probe = crate::model::probe::Probe::from_value(kind, String::new(), value);
        if matches!(probe.handler, crate::model::probe::Handler::Invalid) || !probe.timings_valid()
        {
            return Err(PolicyError::Invalid {
                key: field,
                message: "expected a Kubernetes probe with one handler (httpGet, tcpSocket, grpc \
                          or exec) and valid timings, or null for none"
                    .to_owned(),
            });
        }
        out.probes[kind as usize] = Some(value.clone());
    }
    Ok(())
}

/// Where a container sits, for [`row_for`].
pub(crate) struct Placement<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub object: &'a Value,
    /// The pod spec's pointer (`/spec/template`).
    pub pod_pointer: &'a str,
    /// The container's index in `containers`; `None` for a native sidecar or a KServe model key.
    pub index: Option<usize>,
    pub name: &'a str,
    /// A KServe predictor's model container (`/spec/predictor/model`).
    pub kserve_model: bool,
}

/// The operator row that fills in this container's missing probes, by id.
pub(crate) fn row_for(at: &Placement<'_>) -> Option<&'static str> {
    let group = at.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let has = |key: &str| {
        fields::get(at.object, "spec")
            .and_then(|s| fields::get(s, key))
            .is_some_and(|v| !v.is_null())
    };
    match (group, at.kind) {
        ("serving.kserve.io", "LLMInferenceService") if at.name == "main" => match at.pod_pointer {
            "/spec/template" if has("prefill") => Some("kserve-llmisvc-decode-template"),
            "/spec/template" if has("worker") => Some("kserve-llmisvc-data-parallel-template"),
            "/spec/template" => Some("kserve-llmisvc-template"),
            "/spec/prefill/template" => Some("kserve-llmisvc-prefill-template"),
            "/spec/worker" => Some("kserve-llmisvc-data-parallel-worker"),
            _ => None,
        },
        ("serving.kserve.io", "InferenceService")
            if at.kserve_model
                || (at.pod_pointer == "/spec/predictor"
                    && (at.name == "kserve-container" || at.index == Some(0))) =>
        {
            Some("kserve-inferenceservice-readiness")
        }
        ("serving.kserve.io", "ServingRuntime" | "ClusterServingRuntime")
            if at.pod_pointer == "/spec" && at.index.is_some() =>
        {
            Some("kserve-inferenceservice-readiness")
        }
        ("serving.knative.dev", "Service") if at.index == Some(0) => {
            Some("knative-service-readiness")
        }
        ("ray.io", "RayCluster" | "RayService" | "RayJob") if at.index == Some(0) => {
            if at.pod_pointer.ends_with("/headGroupSpec/template/spec") {
                Some("kuberay-head")
            } else if !at.pod_pointer.contains("/workerGroupSpecs/") {
                None
            } else if at.kind == "RayService" {
                Some("kuberay-rayservice-worker")
            } else {
                Some("kuberay-worker")
            }
        }
        ("apps.nvidia.com", "NIMService") => Some("nim-operator-nimservice"),
        _ => None,
    }
}

/// The probe values a container gets from its operator row, for each kind the container's own
/// spec lacks; the port of a TCP readiness check is the container's first containerPort where
/// the operator takes it from there (KServe, Knative).
pub(crate) fn filled_probes(
    row: &OperatorDefault,
    container: &Value,
    own: [bool; 3],
) -> [Option<Value>; 3] {
    let first_port = || {
        let [ports] = pick(container, ["ports"]);
        ports
            .and_then(Value::as_array)?
            .first()
            .and_then(|p| fields::get(p, "containerPort"))
            .cloned()
    };
    let port_from_container = matches!(
        row.id.as_str(),
        "kserve-inferenceservice-readiness" | "knative-service-readiness"
    );
    ProbeKind::ALL.map(|kind| {
        if own[kind as usize] {
            return None;
        }
        let mut probe = row.probe(kind)?.clone();
        if port_from_container
            && let Some(port) = first_port()
            && let Some(tcp) = probe.get_mut("tcpSocket").and_then(Value::as_object_mut)
        {
            tcp.insert("port".to_owned(), port);
        }
        Some(probe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_row_names_its_source_and_version() {
        let table = OperatorDefaults::with_overrides([]).expect("operators.yaml is valid");
        assert!(table.rows().count() >= 10);
        for row in table.rows() {
            assert!(
                row.version.contains('@') || row.version.contains('#'),
                "{}: {}",
                row.id,
                row.version
            );
            assert!(!row.source.is_empty() && !row.applies_to.is_empty());
        }
        let llm = table.get("kserve-llmisvc-template").expect("row");
        let startup = llm.probe(ProbeKind::Startup).expect("startup");
        assert_eq!(startup["failureThreshold"], 60);
        assert!(
            table
                .get("kserve-llmisvc-data-parallel-worker")
                .is_some_and(|r| ProbeKind::ALL.iter().all(|k| r.probe(*k).is_none()))
        );
    }

    #[test]
    fn overrides_replace_remove_and_disable_and_refuse_what_they_do_not_know() {
        let overrides: BTreeMap<String, OperatorDefaultFile> = serde_saphyr::from_str(
            "kserve-llmisvc-template:\n  version: our fork 1.2\n  startupProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 10, failureThreshold: 180}\n  readinessProbe: null\nkuberay-worker: {enabled: false}\n",
        )
        .expect("yaml");
        let table = OperatorDefaults::with_overrides([&overrides]).expect("valid");
        let llm = table.get("kserve-llmisvc-template").expect("row");
        assert_eq!(
            llm.probe(ProbeKind::Startup).expect("startup")["failureThreshold"],
            180
        );
        assert!(llm.probe(ProbeKind::Readiness).is_none());
        assert!(llm.probe(ProbeKind::Liveness).is_some(), "kept");
        assert!(llm.provenance().contains("our fork 1.2"));
        assert!(
            llm.provenance()
                .contains("operatorDefaults.kserve-llmisvc-template")
        );
        assert!(table.get("kuberay-worker").is_none());

        let bad = |yaml: &str| {
            let overrides: BTreeMap<String, OperatorDefaultFile> =
                serde_saphyr::from_str(yaml).expect("yaml");
            OperatorDefaults::with_overrides([&overrides])
                .unwrap_err()
                .to_string()
        };
        let unknown = bad("kserve-llmisvc: {enabled: false}\n");
        assert!(
            unknown.starts_with("operatorDefaults.kserve-llmisvc: unknown operator default"),
            "{unknown}"
        );
        assert!(unknown.contains("kserve-llmisvc-template"), "{unknown}");
        let broken = bad("kuberay-head:\n  livenessProbe: {periodSeconds: 5}\n");
        assert!(
            broken.starts_with("operatorDefaults.kuberay-head.livenessProbe:"),
            "{broken}"
        );
        let moved = bad("kuberay-head:\n  appliesTo: everything\n");
        assert!(
            moved.starts_with("operatorDefaults.kuberay-head.appliesTo:"),
            "{moved}"
        );
    }
}
