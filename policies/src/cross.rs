//! What the cross-object rules (an HPA beside its Deployment, a PDB selecting it) read of each
//! object, kept small: a linter evaluates each object on its own, keeps these facts, drops the
//! object, and judges the relations once every file has been read.

use crate::engine::IGNORE_ANNOTATION;
use crate::finding::ObjectRef;
use crate::workload::Workload;
use serde_json::{Map, Value};

/// One object, as far as the cross-object rules are concerned.
#[derive(Debug, Clone)]
pub struct ObjectFacts {
    /// The object's position in the input (the `object_index` of its findings).
    pub index: usize,
    pub object_ref: ObjectRef,
    pub role: Role,
    /// The object's `probelint.io/ignore*` annotations: a cross-object finding is about the
    /// object itself, never inside a pod template, so only these can exempt it.
    pub(crate) exemptions: Map<String, Value>,
}

/// Why an object matters to the cross-object rules.
#[derive(Debug, Clone)]
pub enum Role {
    DisruptionBudget {
        /// `spec.selector`; `None` selects nothing (a PDB without a selector).
        selector: Option<Value>,
    },
    Autoscaler {
        target_kind: String,
        target_name: String,
        /// Every metric is a cpu/memory resource metric (or there are none: 80 % CPU).
        cpu_or_memory_only: bool,
        /// Where a finding about this HPA points.
        pointer: &'static str,
    },
    /// A workload with at least one pod spec that serves on an accelerator.
    GpuServing {
        /// Set for the kinds that run replicas of one pod template.
        replicated: Option<Replicated>,
    },
}

/// A replicated GPU serving workload: how many replicas, with which pod labels.
#[derive(Debug, Clone)]
pub struct Replicated {
    pub replicas: i64,
    pub labels: Map<String, Value>,
    /// Where a finding about this workload points.
    pub pointer: &'static str,
}

impl ObjectFacts {
    /// The facts of an analysed object, or `None` when no cross-object rule reads it.
    pub(crate) fn of(workload: &Workload<'_>) -> Option<Self> {
        let object = workload.object;
        let role = match workload.object_ref.kind.as_str() {
            "PodDisruptionBudget" => Role::DisruptionBudget {
                selector: object.pointer("/spec/selector").cloned(),
            },
            "HorizontalPodAutoscaler" => {
                let target = &object["spec"]["scaleTargetRef"];
                let (Some(kind), Some(name)) = (
                    target.get("kind").and_then(Value::as_str),
                    target.get("name").and_then(Value::as_str),
                ) else {
                    return None;
                };
                Role::Autoscaler {
                    target_kind: kind.to_owned(),
                    target_name: name.to_owned(),
                    cpu_or_memory_only: only_cpu_or_memory(object),
                    pointer: if object.pointer("/spec/metrics").is_some() {
                        "/spec/metrics"
                    } else {
                        "/spec"
                    },
                }
            }
            _ if workload
                .pod_specs
                .iter()
                .any(|p| p.serving && p.has_accelerator()) =>
            {
                Role::GpuServing {
                    replicated: replicated(workload),
                }
            }
            _ => return None,
        };
        let exemptions = workload
            .annotations
            .map(|a| {
                a.iter()
                    // `probelint.io/ignore`, `.ignore.<container>` and `ignore-reason`.
                    .filter(|(k, _)| k.starts_with(IGNORE_ANNOTATION))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Some(ObjectFacts {
            index: workload.index,
            object_ref: workload.object_ref.clone(),
            role,
            exemptions,
        })
    }

    /// Where a cross-object finding about this object would point, when one can be reported
    /// about it at all (a PDB never is; an HPA scaling on a serving metric never is). A linter
    /// places this pointer in its file while it still has the file's locations.
    pub fn reportable_pointer(&self) -> Option<&'static str> {
        match &self.role {
            Role::DisruptionBudget { .. } => None,
            Role::Autoscaler {
                cpu_or_memory_only,
                pointer,
                ..
            } => cpu_or_memory_only.then_some(*pointer),
            Role::GpuServing { replicated } => replicated
                .as_ref()
                .filter(|r| r.replicas > 1)
                .map(|r| r.pointer),
        }
    }
}

/// Whether every metric of the HPA is a cpu/memory resource metric (including the implicit
/// 80 % CPU of an HPA without metrics, and autoscaling/v1's targetCPUUtilizationPercentage).
fn only_cpu_or_memory(hpa: &Value) -> bool {
    let Some(metrics) = hpa.pointer("/spec/metrics").and_then(Value::as_array) else {
        return true;
    };
    metrics.iter().all(|m| {
        let name = match m.get("type").and_then(Value::as_str) {
            Some("Resource") => m.pointer("/resource/name"),
            Some("ContainerResource") => m.pointer("/containerResource/name"),
            _ => return false,
        };
        matches!(name.and_then(Value::as_str), Some("cpu" | "memory"))
    })
}

/// Replica count (default 1) and pod template labels of the kinds that replicate one template.
fn replicated(w: &Workload<'_>) -> Option<Replicated> {
    let template = match w.object_ref.kind.as_str() {
        "Deployment" | "StatefulSet" | "ReplicaSet" | "ReplicationController" | "Rollout" => {
            "/spec/template/metadata/labels"
        }
        "LeaderWorkerSet" => "/spec/leaderWorkerTemplate/leaderTemplate/metadata/labels",
        _ => return None,
    };
    let replicas = w.object.pointer("/spec/replicas");
    Some(Replicated {
        replicas: replicas.and_then(Value::as_i64).unwrap_or(1),
        labels: w.object.pointer(template)?.as_object()?.clone(),
        pointer: if replicas.is_some() {
            "/spec/replicas"
        } else {
            "/spec"
        },
    })
}
