//! The rule contract's input: every object analysed once, and each container with the pod spec
//! and object around it. Rules read these; the engine builds them.

use crate::analysis::object::{Container, PodSpec, Workload};
use crate::policy::Policy;
use serde_json::Value;

/// Everything the rules read: the policy and every input object, analysed once.
pub struct Analysis<'a> {
    pub policy: &'a Policy,
    pub workloads: Vec<Workload<'a>>,
}

/// A container together with the pod spec and object it is in.
#[derive(Clone, Copy)]
pub struct ContainerContext<'x, 'a> {
    pub workload: &'x Workload<'a>,
    pub pod: &'x PodSpec<'a>,
    pub container: &'x Container<'a>,
}

impl<'a> Analysis<'a> {
    pub fn new(objects: &'a [Value], policy: &'a Policy) -> Self {
        Analysis {
            policy,
            workloads: objects
                .iter()
                .enumerate()
                .map(|(i, o)| Workload::analyse(i, o, policy))
                .collect(),
        }
    }

    /// The analysis of one object, made already.
    pub fn of(workload: Workload<'a>, policy: &'a Policy) -> Self {
        Analysis {
            policy,
            workloads: vec![workload],
        }
    }

    /// One object at position `index` of a larger input.
    pub fn single(object: &'a Value, index: usize, policy: &'a Policy) -> Self {
        Analysis {
            policy,
            workloads: vec![Workload::analyse(index, object, policy)],
        }
    }

    /// Every container (regular and native sidecar) of every pod spec of every object.
    pub fn containers(&self) -> impl Iterator<Item = ContainerContext<'_, 'a>> {
        self.workloads.iter().flat_map(|workload| {
            workload.pod_specs.iter().flat_map(move |pod| {
                pod.containers
                    .iter()
                    .map(move |container| ContainerContext {
                        workload,
                        pod,
                        container,
                    })
            })
        })
    }

    /// Containers that use an accelerator.
    pub fn accelerated_containers(&self) -> impl Iterator<Item = ContainerContext<'_, 'a>> {
        self.containers().filter(|c| c.container.is_accelerated())
    }
}
