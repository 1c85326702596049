//! What the cross-object rules (an HPA beside its Deployment, a PDB selecting it) read of each
//! object, kept small: a linter evaluates each object on its own, keeps these facts, drops the
//! object, and judges the relations once every file has been read.

use crate::analysis::object::Workload;
use crate::model::annotations::IGNORE_ANNOTATION;
use crate::model::finding::ObjectRef;
use serde_json::{Map, Value};
use std::sync::Arc;

/// One object, as far as the cross-object rules are concerned.
#[derive(Debug, Clone)]
pub struct ObjectFacts {
    /// The object's position in the input (the `object_index` of its findings).
    pub index: usize,
    /// Shared with the findings about it.
    pub object_ref: Arc<ObjectRef>,
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
        /// `spec.maxUnavailable` and `spec.minAvailable` as written (an int or a percentage).
        max_unavailable: Option<Value>,
        min_available: Option<Value>,
        /// `spec.unhealthyPodEvictionPolicy` (`IfHealthyBudget` when absent).
        unhealthy_pod_eviction_policy: Option<String>,
    },
    Autoscaler {
        target_kind: String,
        target_name: String,
        /// Every metric is a cpu/memory resource metric (or there are none: 80 % CPU).
        cpu_or_memory_only: bool,
        /// Where a finding about this HPA points.
        pointer: &'static str,
        /// `spec.minReplicas` (1 when absent).
        min_replicas: i64,
        /// How often scale-up may add pods: the longest `periodSeconds` of
        /// `behavior.scaleUp.policies` (the default policies' 15 s) and its
        /// `stabilizationWindowSeconds` (0 by default), the larger.
        scale_up_every_seconds: i64,
        /// Whether `behavior.scaleUp` is written.
        scale_up_written: bool,
        /// `behavior.scaleUp.selectPolicy: Disabled`.
        scale_up_disabled: bool,
        /// A metric of type External or Object: computed away from the pods, so pods that are
        /// still loading do not dampen it (for Resource and Pods metrics the HPA counts pods
        /// without metrics as idle when it scales up: `calcPlainMetricReplicas`).
        external_or_object_metric: bool,
    },
    /// A workload with at least one pod spec that serves on an accelerator.
    GpuServing {
        /// Set for the kinds that run replicas of one pod template.
        replicated: Option<Replicated>,
        /// The slowest serving accelerator container's load time.
        load: Option<crate::model::load::LoadTime>,
        /// Pod specs that run vLLM with service links on (`enableServiceLinks` not false).
        vllm_with_service_links: Vec<String>,
    },
    /// A core Service whose name makes Kubernetes inject an environment variable a model
    /// server reads as its own setting (`vllm` → `VLLM_PORT`).
    ClashingService { name: String },
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
                max_unavailable: object.pointer("/spec/maxUnavailable").cloned(),
                min_available: object.pointer("/spec/minAvailable").cloned(),
                unhealthy_pod_eviction_policy: object
                    .pointer("/spec/unhealthyPodEvictionPolicy")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
            "Service"
                if workload.object_ref.api_version == "v1"
                    && workload.object_ref.name.as_deref() == Some("vllm") =>
            {
                Role::ClashingService {
                    name: "vllm".to_owned(),
                }
            }
            "HorizontalPodAutoscaler" => {
                let target = &object["spec"]["scaleTargetRef"];
                let (Some(kind), Some(name)) = (
                    target.get("kind").and_then(Value::as_str),
                    target.get("name").and_then(Value::as_str),
                ) else {
                    return None;
                };
                let scale_up = object.pointer("/spec/behavior/scaleUp");
                // The default scale-up behaviour: no stabilisation, at most 4 pods or 100 % every
                // 15 s (k8s.io/kubernetes pkg/apis/autoscaling/v2 defaults).
                let longest_period = scale_up
                    .and_then(|s| s.get("policies"))
                    .and_then(Value::as_array)
                    .and_then(|ps| {
                        ps.iter()
                            .filter_map(|p| p.get("periodSeconds")?.as_i64())
                            .max()
                    })
                    .unwrap_or(15);
                let window = scale_up
                    .and_then(|s| s.get("stabilizationWindowSeconds"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                Role::Autoscaler {
                    target_kind: kind.to_owned(),
                    target_name: name.to_owned(),
                    cpu_or_memory_only: only_cpu_or_memory(object),
                    pointer: if object.pointer("/spec/metrics").is_some() {
                        "/spec/metrics"
                    } else {
                        "/spec"
                    },
                    min_replicas: object
                        .pointer("/spec/minReplicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1),
                    scale_up_every_seconds: longest_period.max(window),
                    scale_up_written: scale_up.is_some(),
                    scale_up_disabled: scale_up
                        .and_then(|s| s.get("selectPolicy"))
                        .and_then(Value::as_str)
                        == Some("Disabled"),
                    external_or_object_metric: object
                        .pointer("/spec/metrics")
                        .and_then(Value::as_array)
                        .is_some_and(|ms| {
                            ms.iter().any(|m| {
                                matches!(
                                    m.get("type").and_then(Value::as_str),
                                    Some("External" | "Object")
                                )
                            })
                        }),
                }
            }
            _ if workload.pod_specs.iter().any(|p| {
                p.serving
                    && p.containers
                        .iter()
                        .any(|c| c.is_accelerated() && c.serves_model())
            }) =>
            {
                Role::GpuServing {
                    replicated: replicated(workload),
                    load: slowest_load(workload),
                    vllm_with_service_links: vllm_with_service_links(workload),
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

    /// Where cross-object findings about this object may point. A linter places these
    /// pointers in its file while it still has the file's locations; a finding at another
    /// pointer is placed at the first.
    pub fn reportable_pointers(&self) -> Vec<String> {
        match &self.role {
            Role::DisruptionBudget { .. } => {
                ["/spec/maxUnavailable", "/spec/minAvailable", "/spec"]
                    .map(str::to_owned)
                    .to_vec()
            }
            Role::Autoscaler { pointer, .. } => [
                *pointer,
                "/spec/minReplicas",
                "/spec/behavior/scaleUp",
                "/spec",
            ]
            .map(str::to_owned)
            .to_vec(),
            Role::GpuServing {
                replicated,
                vllm_with_service_links,
                ..
            } => replicated
                .iter()
                .map(|r| r.pointer.to_owned())
                .chain(vllm_with_service_links.iter().cloned())
                .collect(),
            Role::ClashingService { .. } => Vec::new(),
        }
    }
}

/// The GPU serving workloads of an input by kind, namespace and name (the first, as written,
/// wins): what an HPA's `scaleTargetRef` names. Built once per rule, so each HPA is a lookup.
pub(crate) struct GpuTargets<'a>(
    std::collections::HashMap<(&'a str, Option<&'a str>, &'a str), &'a ObjectFacts>,
);

impl<'a> GpuTargets<'a> {
    pub(crate) fn new(objects: &'a [ObjectFacts]) -> Self {
        let mut by_name = std::collections::HashMap::new();
        for w in objects {
            if let (Role::GpuServing { .. }, Some(name)) = (&w.role, &w.object_ref.name) {
                let key = (
                    w.object_ref.kind.as_str(),
                    w.object_ref.namespace.as_deref(),
                    name.as_str(),
                );
                by_name.entry(key).or_insert(w);
            }
        }
        GpuTargets(by_name)
    }

    /// The GPU serving workload `hpa` scales, when it is in the input.
    pub(crate) fn of(&self, hpa: &ObjectFacts) -> Option<&'a ObjectFacts> {
        let Role::Autoscaler {
            target_kind,
            target_name,
            ..
        } = &hpa.role
        else {
            return None;
        };
        self.0
            .get(&(
                target_kind.as_str(),
                hpa.object_ref.namespace.as_deref(),
                target_name.as_str(),
            ))
            .copied()
    }
}

/// The load time of the slowest serving accelerator container.
fn slowest_load(w: &Workload<'_>) -> Option<crate::model::load::LoadTime> {
    w.serving_accelerated_containers()
        .map(|c| &c.load)
        .max_by(|a, b| a.slow.total_cmp(&b.slow))
        .cloned()
}

/// Serving pod specs with a vLLM container that leave `enableServiceLinks` on (the default).
fn vllm_with_service_links(w: &Workload<'_>) -> Vec<String> {
    w.pod_specs
        .iter()
        .filter(|p| p.serving && p.core)
        .filter(|p| {
            crate::model::fields::get(p.value, "enableServiceLinks") != Some(&Value::Bool(false))
        })
        .filter(|p| {
            p.containers
                .iter()
                .any(|c| c.server.is_some_and(|s| s.id == "vllm"))
        })
        .map(|p| p.pointer.clone())
        .collect()
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

/// Replica count (default 1) and pod labels of the kinds that replicate one template. The
/// labels are those of the workload's first pod spec ([`PodSpec::labels`]): a LeaderWorkerSet's
/// leader template, or its worker template where it has none (the leader is then made from it).
///
/// [`PodSpec::labels`]: crate::analysis::object::PodSpec::labels
fn replicated(w: &Workload<'_>) -> Option<Replicated> {
    if !matches!(
        w.object_ref.kind.as_str(),
        "Deployment"
            | "StatefulSet"
            | "ReplicaSet"
            | "ReplicationController"
            | "Rollout"
            | "LeaderWorkerSet"
    ) {
        return None;
    }
    let replicas = w.object.pointer("/spec/replicas");
    Some(Replicated {
        replicas: replicas.and_then(Value::as_i64).unwrap_or(1),
        labels: w.pod_specs.first()?.labels?.clone(),
        pointer: if replicas.is_some() {
            "/spec/replicas"
        } else {
            "/spec"
        },
    })
}
