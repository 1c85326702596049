//! Whether a container serves a model: the evidence that it does, or that it does not.
//!
//! An accelerator request makes a container a *candidate*, not a model server: a bare Pod that
//! runs `nvidia-smi; sleep infinity`, an sshd development box, a `gpu_burn` loop or a Jupyter
//! notebook requests GPUs and neither loads a model at start nor receives traffic. The
//! model-load and model-readiness rules fire only on [`Serving::Model`], and name its evidence;
//! [`Serving::Unknown`] draws one info (`gpu-serving-role-unknown`) saying what would make the
//! container judgeable.
//!
//! The evidence, strongest first: the `probelint.io/role` annotation; a recognised server that
//! the command launches; counter-evidence in the command (an idle shell, an interactive server,
//! a stress tool, and, in an explicit `command`, a general-purpose server such as nginx), which
//! outranks what the image suggests since an overridden command replaces the image's
//! entrypoint; a recognised server by image; an image that is a notebook, a stress tool, a CUDA
//! sample or a general-purpose server; a kind whose operator routes model traffic to the container; a readiness probe or
//! an HTTP/gRPC probe; a declared serving port; a pod that runs to completion.

use crate::analysis::object::{ContainerPort, Role};
use crate::model::annotations::ROLE_ANNOTATION;
use crate::model::fields::{self, pick};
use crate::model::load::model::CommandLine;
use crate::model::probe::{Handler, Probe, ProbeKind};
use crate::model::servers::{DuringLoad, KnownServer};
use crate::model::text::shown;
use crate::policy::operators::Placement;
use serde_json::Value;
use std::fmt;

/// What the engine can tell of a container's job at pod start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// It serves a model, loaded at start, and this shows it.
    Model(Evidence),
    /// A multi-model runtime that starts with no model: ready once the process is up, models
    /// arrive later (and are loaded on demand): no load deadline applies to it.
    StartsEmpty(String),
    /// It serves no model traffic, and this shows it.
    NoModelTraffic(CounterEvidence),
    /// It requests an accelerator, and nothing shows either way.
    Unknown,
    /// Not a candidate: no accelerator and no recognised model server.
    NotCandidate,
}

/// Why the engine takes a container for a model server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// `probelint.io/role: server`.
    Declared,
    /// It runs a recognised model server; `how` says how it was recognised.
    Server {
        name: &'static str,
        how: &'static str,
    },
    /// An operator that routes model traffic builds its pod from this spec.
    Operator(&'static str),
    /// Its own readiness probe gates traffic to it.
    Readiness,
    /// It runs an HTTP or gRPC server that its probe of this kind checks.
    ProbedServer(ProbeKind),
    /// It declares a port for traffic: the index of that port in the container's `ports`.
    Port(usize),
}

impl Evidence {
    /// `runs vLLM (the image's entrypoint)`, `declares containerPort 8000 (http)`: read from
    /// the container's own probes and ports only when a finding is written, so judging a
    /// container allocates nothing.
    pub fn describe<'c>(
        &'c self,
        probes: &'c [Option<Probe<'_>>; 3],
        ports: &'c [ContainerPort<'_>],
    ) -> impl fmt::Display + 'c {
        shown(move |f| match self {
            Evidence::Declared => write!(f, "{ROLE_ANNOTATION}: server"),
            Evidence::Server { name, how } => write!(f, "runs {name} ({how})"),
            Evidence::Operator(what) => f.write_str(what),
            Evidence::Readiness => match &probes[ProbeKind::Readiness as usize] {
                Some(p) => write!(
                    f,
                    "its readinessProbe ({}) gates traffic",
                    p.handler.describe()
                ),
                None => f.write_str("its readinessProbe gates traffic"),
            },
            Evidence::ProbedServer(kind) => match &probes[*kind as usize] {
                Some(p) => write!(f, "serves {}", p.handler.describe()),
                None => f.write_str("serves what its probes check"),
            },
            Evidence::Port(i) => match ports.get(*i).map(|p| (p.number, p.name)) {
                Some((Some(n), Some(name))) => write!(f, "declares containerPort {n} ({name})"),
                Some((Some(n), None)) => write!(f, "declares containerPort {n}"),
                _ => f.write_str("declares a containerPort"),
            },
        })
    }
}

/// Why the engine takes a container for something that serves no model traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterEvidence {
    /// `probelint.io/role: batch` or `interactive` (honoured only where the policy trusts
    /// annotations).
    Declared(String),
    /// The command only waits or prints (`sleep infinity`, `tail -f /dev/null`, `nvidia-smi`).
    IdleShell(String),
    /// An interactive server that is not a model server (sshd, Jupyter, code-server).
    Interactive(&'static str),
    /// A GPU stress or benchmark tool (`gpu_burn`, `dcgmi diag`, nccl-tests).
    StressTool(&'static str),
    /// A general-purpose server that loads no model (nginx, Envoy, Redis): its port carries
    /// traffic, but not to a model.
    GeneralServer(&'static str),
    /// `restartPolicy: Never` or `OnFailure`: it runs to completion.
    RunsToCompletion(String),
}

impl Serving {
    /// Evidence that it serves a model loaded at start.
    pub fn evidence(&self) -> Option<&Evidence> {
        match self {
            Serving::Model(evidence) => Some(evidence),
            _ => None,
        }
    }
}

/// What [`judge`] reads beside the container.
pub(crate) struct Inputs<'x, 'a> {
    pub container: &'a Value,
    pub server: Option<&'static KnownServer>,
    /// The server the container's command launches (`vllm serve`), whatever its image:
    /// [`KnownServer::for_command`], computed once with `server`.
    pub launched: Option<&'static KnownServer>,
    pub accelerated: bool,
    pub role: Role,
    pub placement: &'x Placement<'x>,
    pub probes: &'x [Option<Probe<'a>>; 3],
    pub ports: &'x [ContainerPort<'a>],
    /// `probelint.io/role` from the pod template, else the object.
    pub declared_role: Option<&'a str>,
    /// Whether the policy honours annotations that silence findings.
    pub trust_annotations: bool,
    /// The pod's `restartPolicy`.
    pub restart_policy: Option<&'a str>,
}

/// The serving judgement of one container.
pub(crate) fn judge(i: &Inputs<'_, '_>) -> Serving {
    // A container declared a model server is one, on CPU too.
    if i.declared_role.map(str::trim) == Some("server") {
        return Serving::Model(Evidence::Declared);
    }
    // A KServe or NIM model container serves a model even on CPU (a sklearn predictor); any
    // other container without an accelerator or a recognised server is no candidate.
    if !i.accelerated && i.server.is_none() && !model_serving_kind(i.placement) {
        return Serving::NotCandidate;
    }
    match i.declared_role.map(str::trim) {
        Some(role @ ("batch" | "interactive")) if i.trust_annotations => {
            return Serving::NoModelTraffic(CounterEvidence::Declared(role.to_owned()));
        }
        _ => {}
    }
    let [command, args] = pick(i.container, ["command", "args"]);
    let words = fields::command_words(command, args);
    let overridden = command
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    if let Some(server) = i.launched {
        return server_judgement(server, "its command launches it", i);
    }
    if let Some(counter) = command_counter_evidence(&words) {
        return Serving::NoModelTraffic(counter);
    }
    // A general-purpose server the command launches (`command: [nginx, -g, …]`). Only an
    // explicit command counts: arguments alone go to the image's entrypoint, whose image is
    // judged below (and `probelint export`, which judges only images run by their own
    // entrypoint, need not search command lines for these names).
    if overridden && let Some(counter) = general_server_program(&words) {
        return Serving::NoModelTraffic(counter);
    }
    if let Some(server) = i.server {
        let how = if overridden {
            "its command launches the image's server"
        } else {
            "the image's entrypoint"
        };
        return server_judgement(server, how, i);
    }
    if !overridden && let Some(counter) = image_counter_evidence(i.container) {
        return Serving::NoModelTraffic(counter);
    }
    if let Some(what) = operator_routes_traffic(i.placement) {
        return Serving::Model(Evidence::Operator(what));
    }
    if i.role != Role::Serving {
        return Serving::Unknown;
    }
    if i.probes[ProbeKind::Readiness as usize].is_some() {
        return Serving::Model(Evidence::Readiness);
    }
    if let Some(probe) = i
        .probes
        .iter()
        .flatten()
        .find(|p| matches!(p.handler, Handler::HttpGet { .. } | Handler::Grpc { .. }))
    {
        return Serving::Model(Evidence::ProbedServer(probe.kind));
    }
    if let Some(policy) = i
        .restart_policy
        .filter(|p| matches!(*p, "Never" | "OnFailure"))
    {
        return Serving::NoModelTraffic(CounterEvidence::RunsToCompletion(policy.to_owned()));
    }
    if let Some(port) = i.ports.iter().position(carries_traffic) {
        return Serving::Model(Evidence::Port(port));
    }
    Serving::Unknown
}

/// A recognised server: a model server, unless it starts with no model.
fn server_judgement(
    server: &'static KnownServer,
    how: &'static str,
    i: &Inputs<'_, '_>,
) -> Serving {
    if let Some(why) = starts_empty(server, i) {
        return Serving::StartsEmpty(why);
    }
    Serving::Model(Evidence::Server {
        name: server.name,
        how,
    })
}

/// Why a multi-model runtime starts with no model, if it does.
fn starts_empty(server: &KnownServer, i: &Inputs<'_, '_>) -> Option<String> {
    // ModelMesh runtimes: the ServingRuntime says `multiModel: true`, and ModelMesh's own `mm`
    // container loads models into it later and owns the pod's readiness
    // (kserve/modelmesh-serving docs/runtimes/custom_runtimes.md).
    if matches!(i.placement.kind, "ServingRuntime" | "ClusterServingRuntime")
        && i.placement
            .object
            .pointer("/spec/multiModel")
            .and_then(Value::as_bool)
            == Some(true)
    {
        return Some(format!(
            "{} in a ModelMesh runtime (multiModel: true): ModelMesh loads models into it later \
             and its `mm` container owns readiness",
            server.name
        ));
    }
    if server.during_load == DuringLoad::Lazy {
        return Some(format!(
            "{} loads models on first request, not at start",
            server.name
        ));
    }
    let line = CommandLine::of(i.container);
    match server.id {
        // Triton's explicit model control loads only the models named by --load-model at
        // startup (server docs/user_guide/model_management.md, "Model Control Mode EXPLICIT").
        "triton"
            if line
                .flag(&["--model-control-mode"])
                .is_some_and(|(_, mode)| mode.eq_ignore_ascii_case("explicit"))
                && line.flag(&["--load-model"]).is_none() =>
        {
            Some(
                "Triton with --model-control-mode=explicit and no --load-model starts with no \
                 model; models are loaded through its model-repository API"
                    .to_owned(),
            )
        }
        // llama-server without a model runs as a router that loads models on demand
        // (tools/server/server.cpp route registration; ggml-org's "model management" post).
        "llama-cpp" if llama_router(&line, i.container) => Some(
            "llama-server with no model (router mode) loads models on demand; its /health \
             describes the router"
                .to_owned(),
        ),
        _ => None,
    }
}

/// Whether a llama-server command line runs router mode: router flags, or a command line with
/// no model flag and no model variable.
fn llama_router(line: &CommandLine, container: &Value) -> bool {
    if line
        .flag(&["--models-dir", "--models-preset", "--models-max"])
        .is_some()
    {
        return true;
    }
    let model_flag = line
        .flag(&[
            "-m",
            "--model",
            "-hf",
            "-hfr",
            "--hf-repo",
            "-mu",
            "--model-url",
            "-dr",
            "--docker-repo",
        ])
        .is_some();
    let model_env = fields::get(container, "env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| fields::get(e, "name").and_then(Value::as_str))
        .any(|n| n.starts_with("LLAMA_ARG_MODEL") || n.starts_with("LLAMA_ARG_HF_REPO"));
    !line.words.is_empty() && !model_flag && !model_env
}

/// The kinds whose containers are model servers whatever they request: KServe's and NIM's.
fn model_serving_kind(at: &Placement<'_>) -> bool {
    let group = at.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    matches!(
        (group, at.kind),
        (
            "serving.kserve.io",
            "InferenceService" | "ServingRuntime" | "ClusterServingRuntime" | "LLMInferenceService"
        ) | ("apps.nvidia.com", "NIMService")
    ) && operator_routes_traffic(at).is_some()
}

/// The operator kinds that route model traffic to the containers they build.
fn operator_routes_traffic(at: &Placement<'_>) -> Option<&'static str> {
    let group = at.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (group, at.kind) {
        ("serving.kserve.io", "InferenceService") if at.kserve_model || at.index == Some(0) => {
            Some("an InferenceService component, which KServe routes inference traffic to")
        }
        ("serving.kserve.io", "ServingRuntime" | "ClusterServingRuntime")
            if at.index == Some(0) =>
        {
            Some("a KServe ServingRuntime container, which serves the InferenceServices using it")
        }
        ("serving.kserve.io", "LLMInferenceService") if at.name == "main" => {
            Some("an LLMInferenceService template, which KServe routes inference traffic to")
        }
        ("ray.io", "RayService") => {
            Some("a RayService node, whose Serve applications serve the models")
        }
        ("apps.nvidia.com", "NIMService") => Some("a NIMService, whose pods serve the NIM's API"),
        ("serving.knative.dev", "Service") if at.index == Some(0) => {
            Some("a Knative Service container, which Knative routes requests to")
        }
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
            if at.pod_pointer.contains("/leaderTemplate/") =>
        {
            Some("a LeaderWorkerSet leader, which serves the group's API")
        }
        _ => None,
    }
}

/// Ports that carry no model traffic: SSH, Jupyter, torch.distributed's rendezvous, the DCGM
/// exporter's metrics (Ray's ports need no entry: a Ray node is judged by its role).
const NON_SERVING_PORTS: &[i64] = &[22, 2222, 8888, 29500, 9400];
const NON_SERVING_PORT_NAMES: &[&str] =
    &["metrics", "ssh", "jupyter", "notebook", "gcs", "dashboard"];

/// Whether a declared port may carry model traffic: TCP, numbered, and none of the above.
/// (Port names are lower case: the apiserver refuses others.)
fn carries_traffic(port: &ContainerPort<'_>) -> bool {
    let name = port.name.unwrap_or_default();
    port.protocol.eq_ignore_ascii_case("TCP")
        && port.number.is_some_and(|n| !NON_SERVING_PORTS.contains(&n))
        && !NON_SERVING_PORT_NAMES.iter().any(|n| name.contains(n))
}

/// Programs an idle shell runs while it waits.
/// Text whose presence in a command line may make it counter-evidence (an interactive program, a
/// stress tool, a wait): more than [`command_counter_evidence`] accuses, so that
/// `probelint export` sets aside at least every command line the engine does.
pub(crate) fn counter_evidence_markers() -> impl Iterator<Item = &'static str> {
    INTERACTIVE_PROGRAMS
        .iter()
        .chain(STRESS_TOOLS)
        .map(|(p, _)| *p)
        .chain([
            "ssh", "code", "jupyter", "notebook", "sleep", "wait", "while", "until", "tail",
        ])
}

const IDLE_PROGRAMS: &[&str] = &[
    "sleep",
    "tail",
    "wait",
    "true",
    ":",
    "echo",
    "printf",
    "nvidia-smi",
    "date",
    "env",
    "printenv",
    "ls",
    "cat",
    "hostname",
    "set",
    "export",
    "trap",
    "while",
    "until",
    "for",
    "done",
    "if",
    "fi",
    "[",
    "test",
    "}",
    "{",
    "(",
    ")",
    "nvcc",
    "rocm-smi",
    "uname",
    "id",
    "whoami",
    "df",
    "free",
];

/// Interactive servers that are not model servers, by the program that starts them.
const INTERACTIVE_PROGRAMS: &[(&str, &str)] = &[
    ("sshd", "sshd (a development box)"),
    ("dropbear", "an SSH server (a development box)"),
    ("jupyter", "Jupyter (a notebook)"),
    ("jupyter-lab", "JupyterLab (a notebook)"),
    ("jupyter-notebook", "Jupyter (a notebook)"),
    (
        "jupyterhub-singleuser",
        "a JupyterHub single-user server (a notebook)",
    ),
    (
        "start-notebook.sh",
        "Jupyter's start-notebook.sh (a notebook)",
    ),
    (
        "start-notebook.py",
        "Jupyter's start-notebook.py (a notebook)",
    ),
    (
        "start-singleuser.sh",
        "a JupyterHub single-user server (a notebook)",
    ),
    ("code-server", "code-server (a development box)"),
    ("ttyd", "a web terminal (a development box)"),
];

/// General-purpose servers that load no model, by their program and by the last part of their
/// official image's repository (`registry.k8s.io/nginx-slim`, `envoyproxy/envoy`): a GPU request on
/// one of them (a scheduling sample, a sidecar given the pod's GPUs) makes no model server of it.
const GENERAL_SERVERS: &[(&str, &str)] = &[
    ("nginx", "nginx (a web server)"),
    ("nginx-slim", "nginx (a web server)"),
    ("nginx-unprivileged", "nginx (a web server)"),
    ("openresty", "OpenResty (a web server)"),
    ("httpd", "Apache httpd (a web server)"),
    ("caddy", "Caddy (a web server)"),
    ("envoy", "Envoy (a proxy)"),
    ("haproxy", "HAProxy (a proxy)"),
    ("traefik", "Traefik (a proxy)"),
    ("redis-server", "Redis (a key-value store)"),
    ("redis", "Redis (a key-value store)"),
    ("memcached", "memcached (a cache)"),
];

/// GPU stress and benchmark tools, by a fragment of their program or script name.
const STRESS_TOOLS: &[(&str, &str)] = &[
    ("gpu_burn", "gpu_burn (a GPU stress test)"),
    ("gpu-burn", "gpu-burn (a GPU stress test)"),
    ("dcgmi", "DCGM diagnostics (dcgmi)"),
    ("all_reduce_perf", "nccl-tests (a benchmark)"),
    ("all_gather_perf", "nccl-tests (a benchmark)"),
    ("alltoall_perf", "nccl-tests (a benchmark)"),
    ("sendrecv_perf", "nccl-tests (a benchmark)"),
    ("stress-ng", "stress-ng (a stress test)"),
    ("nvbandwidth", "nvbandwidth (a benchmark)"),
    ("vectoradd", "a CUDA sample"),
    ("devicequery", "a CUDA sample"),
];

/// Counter-evidence in a container's command and args.
fn command_counter_evidence(words: &[&str]) -> Option<CounterEvidence> {
    if words.is_empty() {
        return None;
    }
    let text = words.join(" ");
    let lower = text.to_ascii_lowercase();
    let programs = programs(&text);
    for program in &programs {
        let base = program.rsplit('/').next().unwrap_or(program);
        if let Some((_, what)) = INTERACTIVE_PROGRAMS.iter().find(|(p, _)| *p == base) {
            return Some(CounterEvidence::Interactive(what));
        }
        // `service ssh start -D`, `service sshd start`: the init script starts sshd.
        if base == "service" && (lower.contains("service ssh ") || lower.contains("service sshd "))
        {
            return Some(CounterEvidence::Interactive("sshd (a development box)"));
        }
        if base == "code" && lower.contains("code tunnel") {
            return Some(CounterEvidence::Interactive(
                "a VS Code tunnel (a development box)",
            ));
        }
    }
    for module in ["-m jupyterlab", "-m notebook", "-m jupyter"] {
        if lower.contains(module) {
            return Some(CounterEvidence::Interactive("Jupyter (a notebook)"));
        }
    }
    if let Some((_, what)) = STRESS_TOOLS.iter().find(|(t, _)| lower.contains(t)) {
        return Some(CounterEvidence::StressTool(what));
    }
    let waits = programs.iter().any(|p| {
        let base = p.rsplit('/').next().unwrap_or(p);
        matches!(base, "sleep" | "wait" | "while" | "until")
    }) || lower.contains("tail -f");
    let only_idle = programs.iter().all(|p| {
        let base = p.rsplit('/').next().unwrap_or(p);
        IDLE_PROGRAMS.contains(&base)
    });
    (waits && only_idle && !programs.is_empty()).then(|| {
        let mut shown: String = text.chars().take(60).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        CounterEvidence::IdleShell(format!("`{shown}`"))
    })
}

/// A general-purpose server among the programs a command line runs.
fn general_server_program(words: &[&str]) -> Option<CounterEvidence> {
    let text = words.join(" ");
    programs(&text).iter().find_map(|program| {
        let base = program.rsplit('/').next().unwrap_or(program);
        GENERAL_SERVERS
            .iter()
            .find(|(p, _)| *p == base)
            .map(|(_, what)| CounterEvidence::GeneralServer(what))
    })
}

/// The program of each simple command of a command line: `sh -c "nvidia-smi; sleep infinity"`
/// runs `nvidia-smi` and `sleep`. Shell keywords that lead a command (`do`, `then`, `exec`) and
/// variable assignments are skipped; a shell's own `-c` is looked through.
fn programs(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for segment in text.split([';', '&', '|', '\n']) {
        let mut words = segment.split_whitespace().peekable();
        while let Some(word) = words.peek() {
            let shell = matches!(
                word.rsplit('/').next().unwrap_or(word),
                "sh" | "bash" | "dash" | "zsh" | "ash"
            );
            if matches!(
                *word,
                "do" | "then" | "else" | "exec" | "!" | "time" | "nohup"
            ) || (word.contains('=') && !word.starts_with('-'))
                || shell
                || (word.starts_with('-') && out.is_empty())
            {
                words.next();
                continue;
            }
            break;
        }
        if let Some(program) = words.next() {
            out.push(program.trim_matches(|c| c == '"' || c == '\''));
        }
    }
    out
}

/// Counter-evidence in an image that runs its own entrypoint.
fn image_counter_evidence(container: &Value) -> Option<CounterEvidence> {
    let image = fields::get(container, "image")?
        .as_str()?
        .to_ascii_lowercase();
    let repository = crate::model::servers::repository(&image);
    // The tag counts too: tensorflow/tensorflow:latest-gpu-jupyter runs a notebook.
    if image.contains("jupyter") || repository.contains("notebook") {
        return Some(CounterEvidence::Interactive("a Jupyter image (a notebook)"));
    }
    let name = repository.rsplit('/').next().unwrap_or_default();
    if repository.contains("sshd") || name == "ssh" || name.ends_with("-ssh") {
        return Some(CounterEvidence::Interactive(
            "an SSH server image (a development box)",
        ));
    }
    if repository.contains("code-server") {
        return Some(CounterEvidence::Interactive(
            "a code-server image (a development box)",
        ));
    }
    if let Some((_, what)) = STRESS_TOOLS.iter().find(|(t, _)| repository.contains(t)) {
        return Some(CounterEvidence::StressTool(what));
    }
    if repository.contains("nccl-tests") {
        return Some(CounterEvidence::StressTool("nccl-tests (a benchmark)"));
    }
    // NVIDIA's nvcr.io/nvidia/k8s/cuda-sample (nbody, vectoradd by tag): GPU demos.
    if matches!(name, "cuda-sample" | "cuda-samples") {
        return Some(CounterEvidence::StressTool("a CUDA sample"));
    }
    if let Some((_, what)) = GENERAL_SERVERS.iter().find(|(p, _)| *p == name) {
        return Some(CounterEvidence::GeneralServer(what));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_shells_are_told_from_servers() {
        let idle = |words: &[&str]| command_counter_evidence(words);
        assert!(matches!(
            idle(&["sleep", "infinity"]),
            Some(CounterEvidence::IdleShell(_))
        ));
        assert!(matches!(
            idle(&["/bin/bash", "-c", "nvidia-smi; sleep infinity"]),
            Some(CounterEvidence::IdleShell(_))
        ));
        assert!(matches!(
            idle(&["sh", "-c", "while true; do sleep 30; done"]),
            Some(CounterEvidence::IdleShell(_))
        ));
        assert!(matches!(
            idle(&["tail", "-f", "/dev/null"]),
            Some(CounterEvidence::IdleShell(_))
        ));
        // A script that runs something else is not idle, even if it sleeps first.
        assert_eq!(idle(&["sh", "-c", "sleep 5 && python serve.py"]), None);
        assert_eq!(idle(&["python", "-m", "my_server"]), None);
        assert_eq!(idle(&[]), None);
    }

    #[test]
    fn interactive_servers_and_stress_tools_are_counter_evidence() {
        assert_eq!(
            command_counter_evidence(&["/usr/sbin/sshd", "-D", "-e"]),
            Some(CounterEvidence::Interactive("sshd (a development box)"))
        );
        assert_eq!(
            command_counter_evidence(&["sh", "-c", "service ssh start -D && sleep infinity"]),
            Some(CounterEvidence::Interactive("sshd (a development box)"))
        );
        assert_eq!(
            command_counter_evidence(&["sh", "-c", "pip install x && jupyter lab --ip=0.0.0.0"]),
            Some(CounterEvidence::Interactive("Jupyter (a notebook)"))
        );
        assert_eq!(
            command_counter_evidence(&["./gpu_burn", "-d", "3600"]),
            Some(CounterEvidence::StressTool("gpu_burn (a GPU stress test)"))
        );
        assert_eq!(
            command_counter_evidence(&["dcgmi", "diag", "-r", "3"]),
            Some(CounterEvidence::StressTool("DCGM diagnostics (dcgmi)"))
        );
    }

    #[test]
    fn general_servers_are_counter_evidence_by_program_and_by_image() {
        assert_eq!(
            general_server_program(&["/usr/sbin/nginx", "-g", "daemon off;"]),
            Some(CounterEvidence::GeneralServer("nginx (a web server)"))
        );
        assert_eq!(general_server_program(&["vllm", "serve", "nginx"]), None);
        let image = |image: &str| image_counter_evidence(&serde_json::json!({"image": image}));
        assert_eq!(
            image("registry.k8s.io/nginx-slim:0.27"),
            Some(CounterEvidence::GeneralServer("nginx (a web server)"))
        );
        assert_eq!(
            image("docker.io/envoyproxy/envoy:v1.31"),
            Some(CounterEvidence::GeneralServer("Envoy (a proxy)"))
        );
        // Only the image's own name counts: a model server's repository that mentions a
        // proxy in its path is not one.
        assert_eq!(image("ghcr.io/nginx/vllm-openai:latest"), None);
        assert_eq!(
            image("nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04"),
            Some(CounterEvidence::StressTool("a CUDA sample"))
        );
        assert_eq!(image("vllm/vllm-openai:v0.11.0"), None);
    }

    #[test]
    fn ports_that_carry_no_model_traffic_are_not_evidence() {
        let port = |number, name| ContainerPort {
            name,
            number: Some(number),
            protocol: "TCP",
        };
        assert!(!carries_traffic(&port(22, None)));
        assert!(!carries_traffic(&port(9090, Some("metrics"))));
        assert!(carries_traffic(&port(8000, Some("http"))));
        let ports = [port(22, None), port(8000, Some("http"))];
        let probes = [None, None, None];
        assert_eq!(
            Evidence::Port(1).describe(&probes, &ports).to_string(),
            "declares containerPort 8000 (http)"
        );
    }
}
