//! Finding the pod specs and containers inside Kubernetes objects, and what the engine knows
//! about each: accelerator or not, serving or batch, expected model load time, known server.

use crate::analysis::layout::{builtin_layout, expand};
use crate::analysis::serving::{self, Serving};
use crate::model::annotations::{LOAD_SECONDS_ANNOTATION, ROLE_ANNOTATION};
use crate::model::fields::{self, pick};
use crate::model::finding::ObjectRef;
use crate::model::load::LoadTime;
use crate::model::pointer;
use crate::model::probe::{Probe, ProbeKind};
use crate::model::servers::KnownServer;
use crate::model::text::shown;
use crate::policy::Policy;
use crate::policy::operators::{OperatorDefault, Placement};
use serde_json::Value;
use std::cell::OnceCell;
use std::sync::Arc;

/// KServe predictor keys that hold a single model container (`model`, or a legacy framework).
const KSERVE_MODEL_KEYS: &[&str] = &[
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
];

/// Why a container counts as an accelerator container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceleratorReason {
    /// It requests an accelerator extended resource (`nvidia.com/gpu`).
    Resource(String),
    /// It uses a DRA resource claim.
    ResourceClaim(String),
    /// The pod runs with an accelerator runtime class.
    RuntimeClass(String),
    /// `NVIDIA_VISIBLE_DEVICES` names GPUs (`all`, indices or UUIDs): with the NVIDIA container
    /// runtime as the node's default, the container gets them without requesting any.
    VisibleDevices(String),
    /// It runs a known model server in a KServe ServingRuntime, whose accelerator the
    /// InferenceService that uses the runtime requests.
    ServingRuntime(&'static str),
}

impl std::fmt::Display for AcceleratorReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AcceleratorReason::Resource(r) => write!(f, "requests {r}"),
            AcceleratorReason::ResourceClaim(c) => write!(f, "uses resource claim {c:?}"),
            AcceleratorReason::RuntimeClass(c) => write!(f, "runs with runtimeClassName {c:?}"),
            AcceleratorReason::VisibleDevices(v) => write!(f, "sets NVIDIA_VISIBLE_DEVICES={v}"),
            AcceleratorReason::ServingRuntime(server) => write!(
                f,
                "runs {server} in a ServingRuntime; the InferenceService requests its accelerator"
            ),
        }
    }
}

/// A declared container port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPort<'a> {
    pub name: Option<&'a str>,
    pub number: Option<i64>,
    /// `TCP` unless declared otherwise.
    pub protocol: &'a str,
}

impl<'a> ContainerPort<'a> {
    fn from_value(port: &'a Value) -> Self {
        let [name, number, protocol] = pick(port, ["name", "containerPort", "protocol"]);
        ContainerPort {
            name: name.and_then(Value::as_str),
            // Only a port the apiserver accepts: `pod-spec-invalid` reports the others.
            number: match crate::model::apiserver::port(
                number,
                crate::model::apiserver::PortKind::Number,
            ) {
                Ok(crate::model::apiserver::Port::Number(n)) => Some(n),
                _ => None,
            },
            protocol: protocol.and_then(Value::as_str).unwrap_or("TCP"),
        }
    }
}

/// What a container does when its pod starts, which decides whether it needs probes that hold
/// traffic and kills off until a model is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves traffic from its start (a model server, a native sidecar in front of one).
    Serving,
    /// A Ray head or worker node: the Ray container of a KubeRay group, or a container that
    /// runs `ray start` or a Ray worker script. Models load later, inside Ray Serve replicas,
    /// and RayService gates traffic on Serve application health, not on pod probes.
    RayNode,
    /// A worker of a multi-node group that serves no HTTP itself; the string says why.
    GroupWorker(&'static str),
}

/// One container (or native sidecar) of a pod spec. Thirteen rules read every container, so its
/// probes and ports are parsed here, once, rather than by each rule.
#[derive(Debug, Clone)]
pub struct Container<'a> {
    /// Pointer to the container (`/spec/template/spec/containers/0`).
    pub pointer: String,
    pub value: &'a Value,
    /// Shared with the findings about it.
    pub name: Arc<str>,
    /// An init container with `restartPolicy: Always` (a native sidecar).
    pub sidecar: bool,
    pub image: &'a str,
    /// Empty when the container uses no accelerator.
    pub accelerators: Vec<AcceleratorReason>,
    pub server: Option<&'static KnownServer>,
    /// Worst-case time from container start to "can infer", and where it comes from
    /// ([`crate::model::load`]). Estimated for accelerator containers and known servers; the others
    /// carry the policy default.
    pub load: LoadTime,
    pub role: Role,
    /// Whether it serves a model, and the evidence ([`crate::analysis::serving`]).
    pub serving: Serving,
    /// The operator config that fills in the probes this container's spec lacks, when an
    /// operator builds its pod (`policy::operators`).
    pub operator: Option<Arc<OperatorDefault>>,
    /// The probes, in [`ProbeKind::ALL`] order.
    probes: [Option<Probe<'a>>; 3],
    /// The probes the operator adds, for the kinds the spec lacks, in [`ProbeKind::ALL`] order.
    operator_probes: [Option<Value>; 3],
    ports: Vec<ContainerPort<'a>>,
    lifecycle: Option<&'a Value>,
    /// [`Container::evidence`] worded, made for the first finding about the container and
    /// shared by the others.
    evidence_text: OnceCell<Option<Arc<str>>>,
}

impl<'a> Container<'a> {
    pub fn is_accelerated(&self) -> bool {
        !self.accelerators.is_empty()
    }

    pub fn probe(&self, kind: ProbeKind) -> Option<&Probe<'a>> {
        self.probes[kind as usize].as_ref()
    }

    /// The probes the container has, startup first.
    pub fn probes(&self) -> impl Iterator<Item = &Probe<'a>> + '_ {
        self.probes.iter().flatten()
    }

    /// The probe of `kind` its operator adds because the spec has none (pointing where the
    /// spec's own would be: no fix may patch it).
    pub fn operator_probe(&self, kind: ProbeKind) -> Option<Probe<'_>> {
        let value = self.operator_probes[kind as usize].as_ref()?;
        Some(Probe::from_value(
            kind,
            pointer::join(&self.pointer, kind.field()),
            value,
        ))
    }

    /// Whether the pod that runs has a probe of `kind` on this container: its own, or its
    /// operator's.
    pub fn runs_probe(&self, kind: ProbeKind) -> bool {
        self.probe(kind).is_some() || self.operator_probes[kind as usize].is_some()
    }

    /// Whether the container serves traffic from its start, so that a model load must be
    /// covered by its probes (not a Ray node, not a headless worker, not a server that loads
    /// models lazily on first request).
    pub fn loads_model_at_start(&self) -> bool {
        self.role == Role::Serving
            && matches!(self.serving, Serving::Model(_))
            && self
                .server
                .is_none_or(|s| s.during_load != crate::model::servers::DuringLoad::Lazy)
    }

    /// What shows that it serves a model, worded for a finding.
    pub fn evidence(&self) -> Option<impl std::fmt::Display + '_> {
        self.serving
            .evidence()
            .map(|e| e.describe(&self.probes, &self.ports))
    }

    /// [`Container::evidence`] as the findings about the container carry it: worded once.
    pub(crate) fn evidence_text(&self) -> Option<Arc<str>> {
        self.evidence_text
            .get_or_init(|| self.evidence().map(|e| Arc::from(e.to_string())))
            .clone()
    }

    /// Whether there is evidence that it serves a model (a model-serving verdict needs it).
    pub fn serves_model(&self) -> bool {
        matches!(self.serving, Serving::Model(_))
    }

    /// Whether it serves model traffic at all: a model server, or a multi-model runtime that
    /// starts empty and loads models on demand.
    pub fn serves_model_traffic(&self) -> bool {
        matches!(self.serving, Serving::Model(_) | Serving::StartsEmpty(_))
    }

    /// Whether the generic probe checks (liveness that checks readiness, port-open readiness,
    /// short readiness timeouts, exec cost) judge this container: a model server, or any
    /// container where the policy asks for `genericChecks`.
    pub fn gets_generic_checks(&self, policy: &Policy) -> bool {
        policy.generic_checks || matches!(self.serving, Serving::Model(_))
    }

    /// The declared `ports`, in order.
    pub fn ports(&self) -> &[ContainerPort<'a>] {
        &self.ports
    }

    /// Whether `lifecycle.preStop` is set.
    pub fn has_pre_stop(&self) -> bool {
        self.lifecycle
            .and_then(|l| fields::get(l, "preStop"))
            .is_some_and(|v| !v.is_null())
    }

    /// `container "vllm" (requests nvidia.com/gpu)` — how messages name a container.
    pub fn describe(&self) -> impl std::fmt::Display + '_ {
        shown(move |f| match self.accelerators.first() {
            Some(reason) => write!(f, "container {:?} ({reason})", self.name),
            None => write!(f, "container {:?}", self.name),
        })
    }
}

/// One pod spec inside an object.
#[derive(Debug, Clone)]
pub struct PodSpec<'a> {
    /// Pointer to the pod spec (`/spec/template/spec`, `/spec` for a Pod, `/spec/predictor`).
    pub pointer: String,
    pub value: &'a Value,
    /// The annotations that apply to this pod spec's template, if it has its own.
    pub template_annotations: Option<&'a serde_json::Map<String, Value>>,
    /// The labels the pods made from this spec carry, as written: a template's
    /// `metadata.labels` (`/spec/template/metadata/labels`), a Pod's own, a KServe component's
    /// `labels`. The one answer to "which labels do this workload's pods have" that PDB
    /// selection reads, in the rules and in `probelint simulate --scenario drain` alike.
    pub labels: Option<&'a serde_json::Map<String, Value>>,
    /// Serves traffic (false for Jobs, CronJobs, JobSets, run-to-completion Pods).
    pub serving: bool,
    /// A core PodSpec (Pod, Deployment, ..., CronJob), which the apiserver decodes and validates
    /// itself; false in a custom resource, whose schema may be partial (KServe, LLMInferenceService
    /// merge theirs over defaults).
    pub core: bool,
    pub containers: Vec<Container<'a>>,
    termination_grace_period: i64,
}

impl PodSpec<'_> {
    pub fn has_accelerator(&self) -> bool {
        self.containers.iter().any(Container::is_accelerated)
    }

    /// `terminationGracePeriodSeconds`, with Kubernetes' default of 30.
    pub fn termination_grace_period(&self) -> i64 {
        self.termination_grace_period
    }
}

/// An object given to the engine, analysed.
#[derive(Debug, Clone)]
pub struct Workload<'a> {
    /// Position in the input.
    pub index: usize,
    pub object: &'a Value,
    /// Shared with the findings about it.
    pub object_ref: Arc<ObjectRef>,
    pub annotations: Option<&'a serde_json::Map<String, Value>>,
    /// Empty for objects without pod specs (Services, HPAs, PDBs...).
    pub pod_specs: Vec<PodSpec<'a>>,
    /// Values where a pod spec belongs that are not maps (`spec: []`, `template: {spec: null}`),
    /// with their pointers and whether they are core PodSpecs: no pod can be made from them.
    pub malformed_pod_specs: Vec<(String, &'a Value, bool)>,
}

impl<'a> Workload<'a> {
    /// The accelerator containers of the pod specs that serve: those whose model load the
    /// workload's controllers wait for.
    pub fn serving_accelerated_containers(&self) -> impl Iterator<Item = &Container<'a>> + '_ {
        self.pod_specs
            .iter()
            .filter(|p| p.serving)
            .flat_map(|p| &p.containers)
            .filter(|c| c.is_accelerated() && c.serves_model())
    }

    pub fn analyse(index: usize, object: &'a Value, policy: &Policy) -> Self {
        #[cfg(test)]
        ANALYSES.with(|n| n.set(n.get() + 1));
        let object_ref = Arc::new(ObjectRef::from_object(object));
        let annotations = fields::get(object, "metadata")
            .and_then(|m| fields::get(m, "annotations"))
            .and_then(Value::as_object);
        let mut pod_specs = Vec::new();
        let mut malformed_pod_specs = Vec::new();
        let mut add_pattern = |pattern: &str, batch: bool, core: bool| {
            for (ptr, value) in expand(object, pattern) {
                if value.is_object() {
                    pod_specs.push(analyse_pod_spec(
                        &object_ref,
                        object,
                        annotations,
                        ptr,
                        value,
                        (batch, core),
                        policy,
                    ));
                } else {
                    malformed_pod_specs.push((ptr, value, core));
                }
            }
        };
        match builtin_layout(&object_ref.api_version, &object_ref.kind) {
            Some(layout) => {
                for pattern in layout.pod_specs {
                    add_pattern(pattern, layout.batch, layout.core);
                }
            }
            // A kind the policy declares: the first matching declaration says batch or not;
            // every matching one adds its pod specs.
            None => {
                let mut matching = policy
                    .workloads
                    .iter()
                    .filter(|w| w.matches(&object_ref.api_version, &object_ref.kind))
                    .peekable();
                if let Some(batch) = matching.peek().map(|w| w.batch) {
                    for pattern in matching.flat_map(|w| &w.pod_specs) {
                        add_pattern(pattern, batch, false);
                    }
                }
            }
        }
        Workload {
            index,
            object,
            object_ref,
            annotations,
            pod_specs,
            malformed_pod_specs,
        }
    }
}

fn analyse_pod_spec<'a>(
    object_ref: &ObjectRef,
    object: &'a Value,
    object_annotations: Option<&'a serde_json::Map<String, Value>>,
    pointer: String,
    spec: &'a Value,
    (batch_kind, core): (bool, bool),
    policy: &Policy,
) -> PodSpec<'a> {
    let [
        container_list,
        init_container_list,
        runtime_class,
        restart_policy,
        grace,
        annotations,
        labels,
    ] = pick(
        spec,
        [
            "containers",
            "initContainers",
            "runtimeClassName",
            "restartPolicy",
            "terminationGracePeriodSeconds",
            "annotations",
            "labels",
        ],
    );
    // A template's metadata sits beside its spec (`/spec/template/metadata`); a Pod's is its
    // own; KServe components carry `annotations` and `labels` on the component itself.
    let map = |metadata: Option<&'a Value>, key: &str| {
        metadata
            .and_then(|metadata| fields::get(metadata, key))
            .and_then(Value::as_object)
    };
    let (template_annotations, labels) = match pointer.strip_suffix("/spec") {
        Some("") if object_ref.kind == "Pod" => {
            (None, map(fields::get(object, "metadata"), "labels"))
        }
        Some("") => (None, None),
        Some(prefix) => {
            let metadata = pointer::resolve(object, prefix)
                .and_then(|template| fields::get(template, "metadata"));
            (map(metadata, "annotations"), map(metadata, "labels"))
        }
        None => (
            annotations.and_then(Value::as_object),
            labels.and_then(Value::as_object),
        ),
    };
    let declared = declared_load(template_annotations, object_annotations);

    let runtime_class = runtime_class.and_then(Value::as_str).filter(|rc| {
        policy
            .accelerator_runtime_classes
            .iter()
            .any(|a| crate::model::glob::matches(a, rc))
    });
    let pod_facts = PodFacts {
        declared_role: declared_role(template_annotations, object_annotations),
        restart_policy: restart_policy.and_then(Value::as_str),
        accelerator_runtime_class: runtime_class,
    };
    let container_list = container_list.and_then(Value::as_array);
    let mut containers = Vec::with_capacity(container_list.map_or(0, Vec::len));
    let mut add = |ptr: String,
                   value: &'a Value,
                   sidecar: bool,
                   default_name: &str,
                   (index, kserve_model): (Option<usize>, bool)| {
        if !value.is_object() {
            return;
        }
        let placement = Placement {
            api_version: &object_ref.api_version,
            kind: &object_ref.kind,
            object,
            pod_pointer: &pointer,
            index,
            name: "",
            kserve_model,
        };
        containers.push(analyse_container(
            ptr,
            value,
            sidecar,
            default_name,
            &placement,
            &pod_facts,
            policy,
        ));
    };
    // `<pod spec>/containers/0`, built in one allocation.
    let item = |list: &str, index: usize| {
        let mut item = String::with_capacity(pointer.len() + list.len() + 8);
        item.push_str(&pointer);
        pointer::push(&mut item, list);
        pointer::push_index(&mut item, index);
        item
    };
    // Knative names an unnamed serving container `user-container`.
    let unnamed = if object_ref.kind == "Service" {
        "user-container"
    } else {
        ""
    };
    if let Some(list) = container_list {
        for (i, c) in list.iter().enumerate() {
            add(item("containers", i), c, false, unnamed, (Some(i), false));
        }
    }
    if let Some(list) = init_container_list.and_then(Value::as_array) {
        for (i, c) in list.iter().enumerate() {
            if fields::get(c, "restartPolicy").and_then(Value::as_str) == Some("Always") {
                add(item("initContainers", i), c, true, "", (None, false));
            }
        }
    }
    if object_ref.kind == "InferenceService" {
        for key in KSERVE_MODEL_KEYS {
            if let Some(model) = fields::get(spec, key) {
                add(
                    pointer::join(&pointer, key),
                    model,
                    false,
                    "kserve-container",
                    (None, true),
                );
            }
        }
    }

    if object_ref.kind == "NIMService" && pointer == "/spec" {
        let name = object_ref.name.as_deref().unwrap_or("nim");
        add(pointer.clone(), spec, false, name, (Some(0), false));
    }

    for container in &mut containers {
        if !(container.is_accelerated() || container.server.is_some()) {
            container.load.fast = policy.model_load_seconds;
            container.load.slow = policy.model_load_seconds;
            continue;
        }
        let cx = crate::model::load::Context {
            object,
            kind: &object_ref.kind,
            pod: spec,
            container: container.value,
            image: container.image,
            server: container.server,
        };
        container.load = crate::model::load::load_time(
            &cx,
            declared.clone(),
            policy.model_load_seconds,
            &policy.model_load,
            !policy.allow_annotation_exemptions,
        );
    }

    let run_to_completion = matches!(
        restart_policy.and_then(Value::as_str),
        Some("Never" | "OnFailure")
    );
    let declares_port = containers.iter().any(|c| !c.ports.is_empty());
    let batch = batch_kind || (object_ref.kind == "Pod" && run_to_completion && !declares_port);

    PodSpec {
        pointer,
        value: spec,
        template_annotations,
        labels,
        serving: !batch,
        core,
        containers,
        termination_grace_period: grace.and_then(Value::as_i64).unwrap_or(30),
    }
}

/// Everything the rules read of one container, looked up in one pass over its fields.
fn analyse_container<'a>(
    pointer: String,
    value: &'a Value,
    sidecar: bool,
    default_name: &str,
    placement: &Placement<'_>,
    pod: &PodFacts<'a>,
    policy: &Policy,
) -> Container<'a> {
    let [
        name,
        image,
        resources,
        ports,
        startup,
        readiness,
        liveness,
        lifecycle,
    ] = pick(
        value,
        [
            "name",
            "image",
            "resources",
            "ports",
            ProbeKind::Startup.field(),
            ProbeKind::Readiness.field(),
            ProbeKind::Liveness.field(),
            "lifecycle",
        ],
    );
    let mut accelerators = accelerator_resources(resources, policy);
    if accelerators.is_empty()
        && let Some(devices) = visible_devices(value)
    {
        accelerators.push(AcceleratorReason::VisibleDevices(devices));
    }
    // The pod's accelerator runtime class makes its containers accelerator containers, not its
    // native sidecars.
    if let Some(rc) = pod.accelerator_runtime_class.filter(|_| !sidecar) {
        accelerators.push(AcceleratorReason::RuntimeClass(rc.to_owned()));
    }
    // A NIMService's spec is its container: `image: {repository, tag}`, and each probe is
    // `{enabled, probe}` (enabled by default; the operator's probe when `probe` is absent).
    let nim = placement.kind == "NIMService";
    let image = match image {
        Some(Value::Object(_)) if nim => image
            .and_then(|i| fields::get(i, "repository"))
            .and_then(Value::as_str),
        _ => image.and_then(Value::as_str),
    }
    .unwrap_or_default();
    let disabled = |found: Option<&Value>| {
        nim && found
            .and_then(|f| fields::get(f, "enabled"))
            .and_then(Value::as_bool)
            == Some(false)
    };
    let probe = |kind: ProbeKind, found: Option<&'a Value>| {
        let found = found.filter(|v| !v.is_null())?;
        if nim {
            if disabled(Some(found)) {
                return None;
            }
            let inner = fields::get(found, "probe").filter(|v| !v.is_null())?;
            let at = pointer::join(&pointer::join(&pointer, kind.field()), "probe");
            return Some(Probe::from_value(kind, at, inner));
        }
        Some(Probe::from_value(
            kind,
            pointer::join(&pointer, kind.field()),
            found,
        ))
    };
    let probes = [
        probe(ProbeKind::Startup, startup),
        probe(ProbeKind::Readiness, readiness),
        probe(ProbeKind::Liveness, liveness),
    ];
    // Kinds the container has, or that its NIMService turns off: the operator fills neither.
    let off = [startup, readiness, liveness].map(disabled);
    let own = [0, 1, 2].map(|k| off[k] || probes[k].is_some());
    // An empty name is no name (`name: ''`, as OpenShift AI's dashboard writes a predictor
    // model's): the container runs under the default, KServe's `kserve-container` for one.
    let name = name
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(default_name);
    let crate::model::servers::Recognised { server, launched } =
        crate::model::servers::recognise(value, image);
    let placement = Placement { name, ..*placement };
    let operator = crate::policy::operators::row_for(&placement)
        .and_then(|id| policy.operator_defaults.get(id))
        .cloned();
    let operator_probes = match &operator {
        Some(row) => crate::policy::operators::filled_probes(row, value, own),
        None => [None, None, None],
    };
    let role = role(value, server, &placement);
    if matches!(placement.kind, "ServingRuntime" | "ClusterServingRuntime")
        && !sidecar
        && accelerators.is_empty()
        && let Some(server) = server
    {
        accelerators.push(AcceleratorReason::ServingRuntime(server.name));
    }
    let ports = if nim {
        // The operator declares the container's port as `api`, on spec.expose.service.port.
        let port = pointer::resolve(value, "/expose/service/port")
            .and_then(Value::as_i64)
            .unwrap_or(8000);
        vec![ContainerPort {
            name: Some("api"),
            number: Some(port),
            protocol: "TCP",
        }]
    } else {
        ports
            .and_then(Value::as_array)
            .map(|p| p.iter().map(ContainerPort::from_value).collect())
            .unwrap_or_default()
    };
    let serving = serving::judge(&serving::Inputs {
        container: value,
        server,
        launched,
        accelerated: !accelerators.is_empty(),
        role,
        placement: &placement,
        probes: &probes,
        ports: &ports,
        declared_role: pod.declared_role,
        trust_annotations: policy.allow_annotation_exemptions,
        restart_policy: pod.restart_policy,
    });
    Container {
        name: Arc::from(name),
        server,
        role,
        serving,
        operator,
        operator_probes,
        image,
        probes,
        ports,
        lifecycle,
        load: LoadTime::point(
            policy.model_load_seconds,
            crate::model::load::Basis::Assumed {
                why: "not an accelerator container or a known model server".to_owned(),
            },
        ),
        pointer,
        value,
        sidecar,
        accelerators,
        evidence_text: OnceCell::new(),
    }
}

/// What a container does at pod start ([`Role`]).
fn role(value: &Value, server: Option<&'static KnownServer>, at: &Placement<'_>) -> Role {
    let group = at.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    if group == "ray.io"
        && matches!(at.kind, "RayCluster" | "RayService" | "RayJob")
        && at.index == Some(0)
        && !at.pod_pointer.starts_with("/spec/submitterPodTemplate")
    {
        return Role::RayNode;
    }
    let [command, args] = pick(value, ["command", "args"]);
    let text = fields::command_words(command, args);
    let runs = |needle: &str| text.iter().any(|w| w.contains(needle));
    // vLLM's examples/online_serving/multi-node-serving.sh `worker` runs `ray start --address`
    // and blocks: the group's API server runs on the leader.
    if server.is_none_or(|s| s.id != "vllm" || !runs("vllm serve"))
        && (runs("ray start") || runs("multi-node-serving.sh worker") || runs("--ray_address"))
        && !runs("ray start --head")
    {
        return Role::RayNode;
    }
    if server.is_some_and(|s| s.id == "vllm") && runs("--headless") {
        return Role::GroupWorker("it runs `vllm serve --headless`, which starts no API server");
    }
    if group == "serving.kserve.io"
        && at.kind == "LLMInferenceService"
        && at.pod_pointer == "/spec/worker"
        && at.name == "main"
        && command.is_none()
    {
        return Role::GroupWorker(
            "KServe runs an LLMInferenceService worker as `vllm serve --headless` \
             (config-llm-worker-data-parallel.yaml), which starts no API server",
        );
    }
    Role::Serving
}

/// What every container of a pod spec shares, for [`serving::judge`].
struct PodFacts<'a> {
    declared_role: Option<&'a str>,
    restart_policy: Option<&'a str>,
    /// The pod's runtimeClassName, when it is an accelerator runtime class.
    accelerator_runtime_class: Option<&'a str>,
}

/// `probelint.io/role` from the pod template, else the object.
fn declared_role<'a>(
    template: Option<&'a serde_json::Map<String, Value>>,
    object: Option<&'a serde_json::Map<String, Value>>,
) -> Option<&'a str> {
    let role = |a: &'a serde_json::Map<String, Value>| a.get(ROLE_ANNOTATION)?.as_str();
    template.and_then(role).or_else(|| object.and_then(role))
}

/// `probelint.io/model-load-seconds` from the pod template, else the object: its seconds, or
/// the text that is not a number of seconds.
fn declared_load(
    template: Option<&serde_json::Map<String, Value>>,
    object: Option<&serde_json::Map<String, Value>>,
) -> Option<Result<f64, String>> {
    let annotation = |a: &serde_json::Map<String, Value>| a.get(LOAD_SECONDS_ANNOTATION).cloned();
    let raw = template
        .and_then(annotation)
        .or_else(|| object.and_then(annotation))?;
    let parsed = match &raw {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().trim_end_matches('s').trim().parse::<f64>().ok(),
        _ => None,
    };
    Some(match parsed {
        Some(secs) if secs.is_finite() && secs >= 0.0 => Ok(secs),
        _ => Err(match raw {
            Value::String(s) => s,
            other => other.to_string(),
        }),
    })
}

/// The GPUs a container's literal `NVIDIA_VISIBLE_DEVICES` names, when it names any: the NVIDIA
/// container runtime reads `void`, `none` and an empty value as no GPU (NVIDIA container
/// toolkit docs, "Environment variables"). NVIDIA_DRIVER_CAPABILITIES alone grants no device.
fn visible_devices(container: &Value) -> Option<String> {
    fields::get(container, "env")?
        .as_array()?
        .iter()
        .filter(|e| {
            fields::get(e, "name").and_then(Value::as_str) == Some("NVIDIA_VISIBLE_DEVICES")
        })
        .find_map(|e| fields::get(e, "value").and_then(Value::as_str))
        .map(str::trim)
        .filter(|v| !v.is_empty() && !matches!(v.to_ascii_lowercase().as_str(), "void" | "none"))
        .map(str::to_owned)
}

/// Accelerator resources a container asks for (non-zero quantities only), and DRA claims.
fn accelerator_resources(resources: Option<&Value>, policy: &Policy) -> Vec<AcceleratorReason> {
    let mut out: Vec<AcceleratorReason> = Vec::new();
    let Some(resources) = resources else {
        return out;
    };
    let [limits, requests, claims] = pick(resources, ["limits", "requests", "claims"]);
    for map in [limits, requests]
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
    {
        for (name, quantity) in map {
            let zero = match quantity {
                Value::Number(n) => n.as_f64() == Some(0.0),
                Value::String(s) => s.trim() == "0",
                _ => false,
            };
            if !zero
                && policy.is_accelerator_resource(name)
                && !out
                    .iter()
                    .any(|r| matches!(r, AcceleratorReason::Resource(n) if n == name))
            {
                out.push(AcceleratorReason::Resource(name.clone()));
            }
        }
    }
    if let Some(claims) = claims.and_then(Value::as_array) {
        for claim in claims {
            if let Some(name) = fields::get(claim, "name").and_then(Value::as_str) {
                out.push(AcceleratorReason::ResourceClaim(name.to_owned()));
            }
        }
    }
    out
}

// How many objects this thread has analysed: admission's tests check that a review analyses
// each object once.
#[cfg(test)]
thread_local! {
    static ANALYSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Objects analysed so far on this thread.
#[cfg(test)]
pub(crate) fn analyses() -> usize {
    ANALYSES.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn analyse(v: &Value) -> Workload<'_> {
        Workload::analyse(0, v, Box::leak(Box::new(Policy::default())))
    }

    #[test]
    fn deployment_template_is_found_with_gpu_container_and_sidecar() {
        let v = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm"},
            "spec": {"template": {"metadata": {"annotations": {LOAD_SECONDS_ANNOTATION: "600"}},
              "spec": {
                "initContainers": [
                  {"name": "download", "image": "busybox"},
                  {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
                "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
                  "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}
        });
        let w = analyse(&v);
        assert_eq!(w.pod_specs.len(), 1);
        let pod = &w.pod_specs[0];
        assert_eq!(pod.pointer, "/spec/template/spec");
        assert!(pod.serving);
        assert_eq!(pod.containers[0].load.slow, 600.0);
        assert_eq!(
            pod.containers[0].load.basis,
            crate::model::load::Basis::Declared
        );
        let names: Vec<_> = pod
            .containers
            .iter()
            .map(|c| (&*c.name, c.sidecar, c.is_accelerated()))
            .collect();
        assert_eq!(names, [("vllm", false, true), ("proxy", true, false)]);
        assert_eq!(
            pod.containers[0].pointer,
            "/spec/template/spec/containers/0"
        );
        assert_eq!(
            pod.containers[1].pointer,
            "/spec/template/spec/initContainers/1"
        );
        assert_eq!(pod.containers[0].server.map(|s| s.id), Some("vllm"));
    }

    #[test]
    fn zero_gpu_and_unknown_resources_are_not_accelerators() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "0"}}},
            {"name": "b", "resources": {"limits": {"example.com/fpga": 1}}},
            {"name": "c", "resources": {"requests": {"nvidia.com/mig-1g.10gb": 1}}}]}});
        let w = analyse(&v);
        let accel: Vec<_> = w.pod_specs[0]
            .containers
            .iter()
            .map(|c| c.is_accelerated())
            .collect();
        assert_eq!(accel, [false, false, true]);
    }

    #[test]
    fn nvidia_visible_devices_makes_an_accelerator_container_unless_it_names_none() {
        let with = |value: &str| {
            let v = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
                {"name": "a", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]}]}});
            analyse(&v).pod_specs[0].containers[0].accelerators.clone()
        };
        assert_eq!(
            with("all"),
            [AcceleratorReason::VisibleDevices("all".into())]
        );
        assert_eq!(
            with("0,1"),
            [AcceleratorReason::VisibleDevices("0,1".into())]
        );
        for none in ["void", "none", "NONE", ""] {
            assert!(with(none).is_empty(), "{none:?}");
        }
    }

    #[test]
    fn runtime_class_and_dra_claims_make_accelerator_containers() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"runtimeClassName": "nvidia",
            "containers": [{"name": "a"}]}});
        assert!(analyse(&v).pod_specs[0].containers[0].is_accelerated());
        let v = json!({"apiVersion": "v1", "kind": "Pod", "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "a", "resources": {"claims": [{"name": "gpu"}]}}, {"name": "b"}]}});
        let w = analyse(&v);
        assert!(w.pod_specs[0].containers[0].is_accelerated());
        assert!(!w.pod_specs[0].containers[1].is_accelerated());
    }

    #[test]
    fn batch_kinds_and_run_to_completion_pods_do_not_serve() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        assert!(!analyse(&job).pod_specs[0].serving);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"restartPolicy": "Never", "containers": [{"name": "a"}]}});
        assert!(!analyse(&pod).pod_specs[0].serving);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"restartPolicy": "Never",
            "containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}});
        assert!(analyse(&pod).pod_specs[0].serving);
    }

    #[test]
    fn every_builtin_kind_finds_its_pod_specs() {
        let pod = json!({"containers": [{"name": "c"}]});
        let tpl = json!({"spec": pod});
        let cases = [
            (
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"template": tpl}}),
                vec!["/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template": tpl}}),
                vec!["/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"template": tpl}}),
                vec!["/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "v1", "kind": "ReplicationController", "spec": {"template": tpl}}),
                vec!["/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": tpl}}}}),
                vec!["/spec/jobTemplate/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": {"leaderWorkerTemplate": {"leaderTemplate": tpl, "workerTemplate": tpl}}}),
                vec![
                    "/spec/leaderWorkerTemplate/leaderTemplate/spec",
                    "/spec/leaderWorkerTemplate/workerTemplate/spec",
                ],
            ),
            (
                json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "spec": {"template": tpl}}),
                vec!["/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "serving.knative.dev/v1", "kind": "Service", "spec": {"template": tpl}}),
                vec!["/spec/template/spec"],
            ),
            (
                json!({"apiVersion": "v1", "kind": "Service", "spec": {"template": tpl}}),
                vec![],
            ),
            (
                json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": [{"template": {"spec": {"template": tpl}}}, {"template": {"spec": {"template": tpl}}}]}}),
                vec![
                    "/spec/replicatedJobs/0/template/spec/template/spec",
                    "/spec/replicatedJobs/1/template/spec/template/spec",
                ],
            ),
            (
                json!({"apiVersion": "ray.io/v1", "kind": "RayService", "spec": {"rayClusterConfig": {"headGroupSpec": {"template": tpl}, "workerGroupSpecs": [{"template": tpl}]}}}),
                vec![
                    "/spec/rayClusterConfig/headGroupSpec/template/spec",
                    "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec",
                ],
            ),
            (
                json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {"headGroupSpec": {"template": tpl}, "workerGroupSpecs": [{"template": tpl}]}}),
                vec![
                    "/spec/headGroupSpec/template/spec",
                    "/spec/workerGroupSpecs/0/template/spec",
                ],
            ),
            (
                json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime", "spec": pod}),
                vec!["/spec"],
            ),
            (
                json!({"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "spec": {"template": pod, "prefill": {"template": pod}}}),
                vec!["/spec/template", "/spec/prefill/template"],
            ),
        ];
        for (object, want) in cases {
            let w = analyse(&object);
            let got: Vec<_> = w.pod_specs.iter().map(|p| p.pointer.as_str()).collect();
            assert_eq!(got, want, "{}", object["kind"]);
        }
    }

    #[test]
    fn ray_nodes_and_headless_workers_are_told_apart_from_servers() {
        let pod = |container: Value| json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [container]}});
        let role = |container: Value| {
            let v = pod(container);
            analyse(&v).pod_specs[0].containers[0].role
        };
        assert_eq!(
            role(
                json!({"name": "w", "command": ["sh", "-c", "ray start --address=$LEADER:6379 --block"]})
            ),
            Role::RayNode
        );
        // A leader that starts the Ray head and then the API server serves.
        assert_eq!(
            role(
                json!({"name": "l", "command": ["sh", "-c", "ray start --head --port=6379; vllm serve m --tensor-parallel-size 16"]})
            ),
            Role::Serving
        );
        assert!(matches!(
            role(
                json!({"name": "h", "image": "vllm/vllm-openai:v0.10.0", "args": ["--headless", "--data-parallel-start-rank", "1"]})
            ),
            Role::GroupWorker(_)
        ));
        assert_eq!(
            role(json!({"name": "s", "image": "vllm/vllm-openai:v0.10.0"})),
            Role::Serving
        );
    }

    #[test]
    fn kserve_model_spec_is_a_container() {
        let v = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}}}});
        let w = analyse(&v);
        let c = &w.pod_specs[0].containers[0];
        assert_eq!(c.pointer, "/spec/predictor/model");
        assert_eq!(&*c.name, "kserve-container");
        assert!(c.is_accelerated());
        // `name: ''` (as OpenShift AI's dashboard writes it) is no name.
        let mut unnamed = v.clone();
        unnamed["spec"]["predictor"]["model"]["name"] = json!("");
        assert_eq!(
            &*analyse(&unnamed).pod_specs[0].containers[0].name,
            "kserve-container"
        );
    }

    #[test]
    fn policy_workloads_add_crd_pod_specs() {
        let policy = Policy::with_user_yaml(
            "workloads:\n  - kind: Model\n    apiVersion: kubeai.org\n    podSpecs: [/spec/pods/*/spec]\n",
        )
        .unwrap();
        let v = json!({"apiVersion": "kubeai.org/v1", "kind": "Model",
            "spec": {"pods": {"a": {"spec": {"containers": [{"name": "x"}]}}}}});
        let w = Workload::analyse(0, &v, &policy);
        assert_eq!(w.pod_specs[0].pointer, "/spec/pods/a/spec");
    }

    #[test]
    fn bad_load_annotation_falls_back_to_policy_and_says_so() {
        let v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"annotations": {LOAD_SECONDS_ANNOTATION: "ten minutes"}},
            "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
        let w = analyse(&v);
        let load = &w.pod_specs[0].containers[0].load;
        assert_eq!((load.fast, load.slow), (300.0, 300.0));
        assert_eq!(
            load.basis,
            crate::model::load::Basis::Assumed {
                why: "probelint.io/model-load-seconds \"ten minutes\" is not a number of seconds"
                    .into()
            }
        );
    }
}
