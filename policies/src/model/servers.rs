//! Model servers recognised by what a container runs (its command, else its image), with the
//! endpoints they really serve, the port they listen on and what their health endpoints do while
//! the model loads.
//!
//! Each server names the source its facts were read from (`source`). A fix only ever uses an
//! endpoint listed here, and none for a server whose endpoint needs the model's name.

use crate::model::fields::pick;
use serde_json::Value;
use std::borrow::Cow;

/// What a server's health endpoints do while it loads its model: whether a probe during the
/// load can fail (and a liveness probe then kill the container mid-load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuringLoad {
    /// Nothing listens until the model is loaded: every HTTP and TCP probe fails during the
    /// load (vLLM, TGI, TEI, trtllm-serve, Triton in its default model-control mode).
    PortClosed,
    /// The port is open but the health endpoint answers 503 until the model is loaded
    /// (llama.cpp's "Loading model", SGLang while `Starting`).
    Unavailable,
    /// The liveness paths answer 200 during the load; the ready path does not (NIM's nginx
    /// layer, MLServer, BentoML, Dynamo).
    LiveAnswers,
    /// Models load lazily, on the first request that names them: the server answers within
    /// seconds of starting and there is no model load at start (Ollama).
    Lazy,
    /// Not read in the server's source: the engine assumes the worst (a probe can fail).
    Unknown,
}

/// A model server the engine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownServer {
    /// Short id used in messages and docs (`triton`).
    pub id: &'static str,
    pub name: &'static str,
    /// Image reference fragments (matched against the image without its digest; the tag stays,
    /// since llama.cpp publishes its server as a tag).
    image_markers: &'static [&'static str],
    /// Fragments of the image's repository (without registry port, tag or digest): any image
    /// whose repository is `…/ollama…` runs Ollama.
    repository_markers: &'static [&'static str],
    /// The HTTP port the server listens on unless told otherwise.
    pub default_port: u16,
    /// Flags that set the HTTP port (`--port 8000`, `--port=8000`).
    port_flags: &'static [&'static str],
    /// Environment variables that set the HTTP port (a number, or `host:port`).
    port_env: &'static [&'static str],
    /// Whether the default port is changing between releases (llama.cpp: 8080 → 9931), so a
    /// probe should not rely on it.
    pub default_port_unsettled: bool,
    /// Liveness: answers while the process can serve, even when busy.
    pub live_path: &'static str,
    /// Readiness: answers 200 only when the model is loaded and can infer.
    pub ready_path: &'static str,
    /// Other paths that are a sound readiness check for this server.
    pub also_ready: &'static [&'static str],
    /// Whether `live_path` is the server's one health endpoint, designed to be used for both
    /// liveness and readiness (vLLM's `/health`): identical probes there are not a mistake.
    pub single_health_endpoint: bool,
    /// Whether the readiness path runs a generation (needs a generous timeout).
    pub ready_runs_generation: bool,
    /// Whether the liveness path runs a generation too (SGLang's `/health`, by default): a probe
    /// on it needs the same generous timeout.
    pub live_runs_generation: bool,
    /// Whether the readiness path's 200 can still mean "not ready" (a status in the body, or
    /// vacuously true with no model): worth saying wherever readiness is judged.
    pub ready_caveat: Option<&'static str>,
    /// What its health endpoints do during the model load.
    pub during_load: DuringLoad,
    /// Paths that answer 2xx while the model loads ([`DuringLoad::LiveAnswers`],
    /// [`DuringLoad::Lazy`]).
    answers_during_load: &'static [&'static str],
    /// Text in a container's command or args that launches this server, from any image
    /// (`vllm serve`, `python -m sglang.launch_server`).
    command_markers: &'static [&'static str],
    /// Text in a container's command or args that shows it launches this server, when the
    /// image is already the server's (when the command is overridden, the image may be running
    /// something else: a Ray worker, a download step).
    launch_markers: &'static [&'static str],
    /// Whether the health paths contain the model's name (TF Serving's `/v1/models/<name>`):
    /// no fix writes them.
    pub paths_need_model_name: bool,
    /// Where these facts were read.
    pub source: &'static str,
}

const BASE: KnownServer = KnownServer {
    id: "",
    name: "",
    image_markers: &[],
    repository_markers: &[],
    default_port: 8000,
    port_flags: &["--port"],
    port_env: &[],
    default_port_unsettled: false,
    live_path: "/health",
    ready_path: "/health",
    also_ready: &[],
    single_health_endpoint: false,
    ready_runs_generation: false,
    live_runs_generation: false,
    ready_caveat: None,
    during_load: DuringLoad::Unknown,
    answers_during_load: &[],
    command_markers: &[],
    launch_markers: &[],
    paths_need_model_name: false,
    source: "",
};

/// The servers, most specific first: recognition takes the first whose command markers match,
/// then the first whose image matches (Dynamo's `python -m dynamo.vllm` is Dynamo, not vLLM).
pub const KNOWN_SERVERS: &[KnownServer] = &[
    KnownServer {
        id: "dynamo-frontend",
        name: "NVIDIA Dynamo frontend",
        port_flags: &["--http-port"],
        live_path: "/live",
        ready_path: "/health",
        ready_caveat: Some(
            "Dynamo's /health answers HTTP 200 with \"status\": \"unhealthy\" in the body until a \
             worker registers, and a kubelet probe reads only the status code",
        ),
        during_load: DuringLoad::LiveAnswers,
        answers_during_load: &["/live"],
        command_markers: &["dynamo.frontend"],
        launch_markers: &["dynamo.frontend"],
        source: "ai-dynamo/dynamo docs/observability/health-checks.md, \
                 deploy/operator/internal/dynamo/component_frontend.go (upstream 0b71cf84)",
        ..BASE
    },
    KnownServer {
        id: "dynamo-worker",
        name: "NVIDIA Dynamo worker",
        default_port: 9090,
        port_flags: &[],
        port_env: &["DYN_SYSTEM_PORT"],
        live_path: "/live",
        ready_path: "/health",
        during_load: DuringLoad::LiveAnswers,
        answers_during_load: &["/live"],
        command_markers: &["dynamo.vllm", "dynamo.sglang", "dynamo.trtllm"],
        launch_markers: &["dynamo.vllm", "dynamo.sglang", "dynamo.trtllm"],
        source: "ai-dynamo/dynamo deploy/operator/internal/dynamo/component_worker.go, \
                 internal/consts/consts.go (upstream)",
        ..BASE
    },
    KnownServer {
        id: "triton",
        name: "NVIDIA Triton Inference Server",
        image_markers: &["tritonserver"],
        port_flags: &["--http-port"],
        live_path: "/v2/health/live",
        ready_path: "/v2/health/ready",
        // main.cc creates the server (TRITONSERVER_ServerNew loads the startup models) before
        // StartEndpoints opens any port.
        during_load: DuringLoad::PortClosed,
        command_markers: &["tritonserver"],
        launch_markers: &["tritonserver"],
        source: "triton-inference-server/server@e1db8a60 src/main.cc:516,535",
        ..BASE
    },
    KnownServer {
        id: "trtllm-serve",
        name: "TensorRT-LLM trtllm-serve",
        also_ready: &["/health_generate"],
        single_health_endpoint: true,
        // The LLM generator is built before the FastAPI app serves (inferred from code).
        during_load: DuringLoad::PortClosed,
        command_markers: &["trtllm-serve"],
        launch_markers: &["trtllm-serve"],
        source: "NVIDIA/TensorRT-LLM tensorrt_llm/serve/openai_server.py (upstream 00057725)",
        ..BASE
    },
    KnownServer {
        id: "nim",
        name: "NVIDIA NIM",
        image_markers: &["nvcr.io/nim/"],
        port_env: &["NIM_SERVER_PORT"],
        live_path: "/v1/health/live",
        ready_path: "/v1/health/ready",
        // The nginx layer answers live before the model is loaded (NIM 2.x docs).
        during_load: DuringLoad::LiveAnswers,
        answers_during_load: &["/v1/health/live"],
        launch_markers: &["start_server", "nim_llm", "start-server"],
        source: "docs.nvidia.com/nim/large-language-models reference/api-reference health-live, \
                 health-ready (v2.1.6)",
        ..BASE
    },
    KnownServer {
        id: "sglang",
        name: "SGLang",
        image_markers: &["lmsysorg/sglang"],
        default_port: 30000,
        ready_path: "/health_generate",
        ready_runs_generation: true,
        // SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION defaults to true: /health runs the same
        // one-token generation as /health_generate, bounded by a 20 s timeout.
        live_runs_generation: true,
        during_load: DuringLoad::Unavailable,
        command_markers: &["sglang.launch_server", "sglang serve"],
        launch_markers: &["sglang.launch_server", "sglang serve"],
        source: "sgl-project/sglang@9c0549b7 python/sglang/srt/entrypoints/http_server.py, \
                 python/sglang/srt/environ.py",
        ..BASE
    },
    KnownServer {
        id: "vllm",
        name: "vLLM",
        image_markers: &[
            "vllm/vllm-openai",
            "vllm-openai",
            "vllm/vllm-tpu",
            "rocm/vllm",
            "nvcr.io/nvidia/vllm",
        ],
        also_ready: &["/v1/models", "/ping"],
        single_health_endpoint: true,
        // The socket is bound but not listening until the engine is built.
        during_load: DuringLoad::PortClosed,
        command_markers: &[
            "vllm serve",
            "vllm.entrypoints.openai.api_server",
            "vllm.entrypoints.api_server",
        ],
        launch_markers: &["vllm serve", "vllm.entrypoints"],
        source: "vllm-project/vllm@048027fb vllm/entrypoints/openai/api_server.py, \
                 vllm@98b137c6 vllm/entrypoints/serve/instrumentator/health.py",
        ..BASE
    },
    KnownServer {
        id: "tgi",
        name: "Hugging Face Text Generation Inference",
        image_markers: &["text-generation-inference", "tgi-gaudi"],
        default_port: 80,
        port_env: &["PORT"],
        single_health_endpoint: true,
        during_load: DuringLoad::PortClosed,
        command_markers: &["text-generation-launcher"],
        launch_markers: &["text-generation-launcher"],
        source: "huggingface/text-generation-inference@db931fcf router/src/server.rs, \
                 launcher/src/main.rs, Dockerfile:149",
        ..BASE
    },
    KnownServer {
        id: "tei",
        name: "Hugging Face Text Embeddings Inference",
        image_markers: &["text-embeddings-inference", "tei-gaudi"],
        default_port: 80,
        port_env: &["PORT"],
        single_health_endpoint: true,
        // Backend::new and warmup run before http::server::run.
        during_load: DuringLoad::PortClosed,
        command_markers: &["text-embeddings-router"],
        launch_markers: &["text-embeddings-router"],
        source: "huggingface/text-embeddings-inference@0d124dc router/src/lib.rs:285-385, \
                 router/src/http/server.rs, Dockerfile:77",
        ..BASE
    },
    KnownServer {
        id: "llama-cpp",
        name: "llama.cpp server",
        image_markers: &["llama.cpp:server", "llama-cpp-server", "llama.cpp/server"],
        default_port: 8080,
        port_env: &["LLAMA_ARG_PORT"],
        default_port_unsettled: true,
        single_health_endpoint: true,
        also_ready: &["/v1/health"],
        during_load: DuringLoad::Unavailable,
        command_markers: &["llama-server"],
        launch_markers: &["llama-server", "/server"],
        source: "ggml-org/llama.cpp tools/server/README.md (upstream 00dc8057), PR #26508",
        ..BASE
    },
    KnownServer {
        id: "ollama",
        name: "Ollama",
        image_markers: &["ollama/ollama"],
        repository_markers: &["ollama"],
        default_port: 11434,
        port_flags: &[],
        port_env: &["OLLAMA_HOST"],
        live_path: "/",
        ready_path: "/",
        also_ready: &["/api/version", "/api/tags"],
        single_health_endpoint: true,
        during_load: DuringLoad::Lazy,
        answers_during_load: &["/", "/api/version", "/api/tags"],
        command_markers: &["ollama serve"],
        launch_markers: &["ollama serve", "ollama"],
        source: "ollama/ollama@fb307609 server/routes.go:1877-1907, envconfig/config.go",
        ..BASE
    },
    KnownServer {
        id: "tf-serving",
        name: "TensorFlow Serving",
        image_markers: &["tensorflow/serving"],
        default_port: 8501,
        port_flags: &["--rest_api_port"],
        // `/v1/models/<name>` reports the model's version status; the name is the model's.
        live_path: "/v1/models/<name>",
        ready_path: "/v1/models/<name>",
        paths_need_model_name: true,
        command_markers: &["tensorflow_model_server"],
        launch_markers: &["tensorflow_model_server"],
        source: "TensorFlow Serving REST API docs (model status: GET /v1/models/${MODEL_NAME})",
        ..BASE
    },
    KnownServer {
        id: "mlserver",
        name: "Seldon MLServer",
        image_markers: &["seldonio/mlserver"],
        default_port: 8080,
        port_flags: &[],
        port_env: &["MLSERVER_HTTP_PORT"],
        live_path: "/v2/health/live",
        ready_path: "/v2/health/ready",
        also_ready: &[],
        ready_caveat: Some(
            "MLServer's /v2/health/ready is all(model.ready), which is true with zero models \
             (SeldonIO/MLServer#2056): check that the model is configured, or probe \
             /v2/models/<name>/ready",
        ),
        during_load: DuringLoad::LiveAnswers,
        answers_during_load: &["/v2/health/live"],
        command_markers: &["mlserver start"],
        launch_markers: &["mlserver start"],
        source: "SeldonIO/MLServer@a325e523 mlserver/handlers/dataplane.py:58-67, \
                 mlserver/server.py:114-137, mlserver/settings.py:214-236",
        ..BASE
    },
    KnownServer {
        id: "bentoml",
        name: "BentoML",
        image_markers: &["bentoml/"],
        default_port: 3000,
        live_path: "/livez",
        ready_path: "/readyz",
        // /readyz waits for the model only when the service defines __is_ready__ (not flagged:
        // the manifest cannot say whether it does).
        during_load: DuringLoad::LiveAnswers,
        answers_during_load: &["/livez", "/healthz"],
        command_markers: &["bentoml serve"],
        launch_markers: &["bentoml serve"],
        source: "bentoml/BentoML@32230a527 src/bentoml/_internal/server/base_app.py:104-131",
        ..BASE
    },
    KnownServer {
        id: "torchserve",
        name: "TorchServe",
        image_markers: &["pytorch/torchserve"],
        default_port: 8080,
        port_flags: &[],
        live_path: "/ping",
        ready_path: "/ping",
        single_health_endpoint: true,
        command_markers: &["torchserve --start", "torchserve --foreground"],
        launch_markers: &["torchserve"],
        source: "TorchServe inference API docs (GET /ping on the inference port 8080); \
                 unmaintained, behaviour during load not read in code",
        ..BASE
    },
    KnownServer {
        id: "kserve",
        name: "KServe model server",
        image_markers: &[
            "kserve/huggingfaceserver",
            "kserve/sklearnserver",
            "kserve/xgbserver",
            "kserve/lgbserver",
            "kserve/pmmlserver",
            "kserve/paddleserver",
            "kserve/custom-model",
        ],
        default_port: 8080,
        port_flags: &["--http_port"],
        live_path: "/v2/health/live",
        ready_path: "/v2/health/ready",
        during_load: DuringLoad::Unknown,
        launch_markers: &[
            "huggingfaceserver",
            "sklearnserver",
            "xgbserver",
            "lgbserver",
            "pmmlserver",
            "paddleserver",
            "model.py",
        ],
        source: "kserve/kserve@aaac4e29 python/kserve/kserve/protocol/rest/v2_endpoints.py, \
                 docs/predict-api/v2/required_api.md",
        ..BASE
    },
];

/// Paths that run a model (or check that one is loaded): a liveness probe there restarts a pod
/// that is merely busy, and a readiness probe there needs a generous timeout.
pub const INFERENCE_PATHS: &[&str] = &[
    "/health_generate",
    "/generate",
    "/generate_stream",
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/infer",
    "/predict",
];

/// Generic readiness endpoints (Kubernetes conventions).
pub const GENERIC_READY_PATHS: &[&str] = &["/readyz", "/ready", "/readiness", "/health/ready"];

impl KnownServer {
    /// A known server by id (`vllm`).
    pub fn by_id(id: &str) -> Option<&'static KnownServer> {
        KNOWN_SERVERS.iter().find(|s| s.id == id)
    }

    /// Recognises a server from a container image reference.
    pub fn for_image(image: &str) -> Option<&'static KnownServer> {
        let image = image.trim();
        // Lower-cased only when it has to be: image references almost always are already.
        let image = if image.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(image.to_ascii_lowercase())
        } else {
            Cow::Borrowed(image)
        };
        // Drop the digest; keep the tag, since llama.cpp publishes its server as a tag.
        let image = image.split('@').next().unwrap_or_default();
        let repository = repository(image);
        KNOWN_SERVERS.iter().find(|s| {
            s.image_markers.iter().any(|m| image.contains(m))
                || s.repository_markers.iter().any(|m| repository.contains(m))
        })
    }

    /// Every text fragment that identifies this server in an image reference or in a command
    /// (`probelint export` must set aside at least every container the engine recognises).
    pub(crate) fn markers(&self) -> impl Iterator<Item = &'static str> {
        self.image_markers
            .iter()
            .chain(self.repository_markers)
            .chain(self.command_markers)
            .chain(self.launch_markers)
            .copied()
    }

    /// The text fragments by which [`Self::for_image`] recognises this server in an image
    /// reference (in the repository for some, which the reference contains).
    pub(crate) fn image_markers(&self) -> impl Iterator<Item = &'static str> {
        self.image_markers
            .iter()
            .chain(self.repository_markers)
            .copied()
    }

    /// Recognises a server from what a container runs: `vllm serve` or
    /// `python -m sglang.launch_server` in its command or args, from any image.
    pub fn for_command(container: &Value) -> Option<&'static KnownServer> {
        let text = command_text(container)?;
        KNOWN_SERVERS
            .iter()
            .find(|s| s.command_markers.iter().any(|m| text.contains(m)))
    }

    /// Whether a container of this server's image is known to run the server itself: it
    /// declares a TCP port, keeps the image's entrypoint, or its command launches the server.
    pub fn is_served_by(&self, container: &Value) -> bool {
        let [ports, command] = pick(container, ["ports", "command"]);
        let declares_tcp_port = ports.and_then(Value::as_array).is_some_and(|ports| {
            ports.iter().any(|p| {
                crate::model::fields::get(p, "protocol")
                    .and_then(Value::as_str)
                    .is_none_or(|proto| proto.eq_ignore_ascii_case("TCP"))
            })
        });
        if command
            .and_then(Value::as_array)
            .is_none_or(|c| c.is_empty())
            || declares_tcp_port
        {
            return true;
        }
        command_text(container).is_some_and(|text| {
            self.launch_markers
                .iter()
                .chain(self.command_markers)
                .any(|m| text.contains(m))
        })
    }

    /// The HTTP port the container's command, args or environment set for this server
    /// (`--port 8001`, `--port=8001`, `LLAMA_ARG_PORT=9931`, `OLLAMA_HOST=0.0.0.0:11434`).
    /// Shell variables (`--port $PORT`) are not resolved.
    pub fn explicit_port(&self, container: &Value) -> Option<u16> {
        let [command, args, env] = pick(container, ["command", "args", "env"]);
        let words: Vec<&str> = crate::model::fields::command_words(command, args)
            .into_iter()
            .flat_map(str::split_whitespace)
            .map(|w| w.trim_matches(|c| c == '"' || c == '\'' || c == '\\'))
            .collect();
        for (i, word) in words.iter().enumerate() {
            for flag in self.port_flags {
                let value = match word.strip_prefix(flag) {
                    Some("") => words.get(i + 1).copied(),
                    Some(rest) => rest.strip_prefix('='),
                    None => None,
                };
                if let Some(n) = value.and_then(|v| v.parse::<u16>().ok()) {
                    return Some(n);
                }
            }
        }
        let env = env.and_then(Value::as_array)?;
        env.iter().find_map(|var| {
            let [name, value] = pick(var, ["name", "value"]);
            let name = name.and_then(Value::as_str)?;
            if !self.port_env.contains(&name) {
                return None;
            }
            let value = value.and_then(Value::as_str)?;
            value.rsplit(':').next()?.trim().parse::<u16>().ok()
        })
    }

    /// Whether `path` is a sound readiness endpoint for this server.
    pub fn is_ready_path(&self, path: &str) -> bool {
        let path = strip_query(path);
        path == self.ready_path
            || self.also_ready.contains(&path)
            // TF Serving's model status is per model: `/v1/models/<name>`.
            || (self.id == "tf-serving" && path.starts_with("/v1/models/"))
            // The Open Inference Protocol's per-model readiness: `/v2/models/<name>/ready`.
            || (matches!(self.id, "triton" | "kserve" | "mlserver")
                && path.starts_with("/v2/models/")
                && path.ends_with("/ready"))
    }

    /// Whether an httpGet on `path` answers 2xx while the model loads.
    /// The paths this server answers while its model loads (a liveness on one cannot kill it).
    pub fn paths_answered_during_load(&self) -> &'static [&'static str] {
        self.answers_during_load
    }

    pub fn answers_during_load(&self, path: &str) -> bool {
        let path = strip_query(path);
        self.answers_during_load.contains(&path)
    }
}

/// A container's command and args as one line of text, when it has either.
fn command_text(container: &Value) -> Option<String> {
    let [command, args] = pick(container, ["command", "args"]);
    let mut text = String::new();
    for word in [command, args]
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str)
    {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
    (!text.is_empty()).then_some(text)
}

/// The image's repository: no tag, no digest (`ghcr.io/x/ollama:0.5` → `ghcr.io/x/ollama`); a
/// registry port (`host:5000/x`) is not a tag.
pub(crate) fn repository(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    match image.rfind(':') {
        Some(colon) if !image[colon..].contains('/') => &image[..colon],
        _ => image,
    }
}

/// What [`recognise`] found, and whether the command launched it.
#[derive(Debug, Clone, Copy)]
pub struct Recognised {
    pub server: Option<&'static KnownServer>,
    /// [`KnownServer::for_command`]: the server the command launches, whatever the image.
    pub launched: Option<&'static KnownServer>,
}

/// The server a container runs: recognised by its command (`vllm serve` in any image), else by
/// its image reference `image` (a NIMService's is its `image.repository`). This is the one place
/// the engine decides which server a container is; the model load estimate reads the server's
/// model argument from the same container.
pub fn recognise(container: &Value, image: &str) -> Recognised {
    let launched = KnownServer::for_command(container);
    Recognised {
        server: launched.or_else(|| KnownServer::for_image(image)),
        launched,
    }
}

/// The path without its query string.
pub fn strip_query(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// Whether a path runs an inference (`/v2/models/x/infer`, `/v1/models/x:predict`, `/generate`...).
pub fn is_inference_path(path: &str) -> bool {
    let path = strip_query(path).trim_end_matches('/');
    INFERENCE_PATHS
        .iter()
        .any(|p| path == *p || path.ends_with(p))
        || path.ends_with(":predict")
        || (path.starts_with("/v2/models/") && path.ends_with("/ready"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(image: &str) -> Option<&'static str> {
        KnownServer::for_image(image).map(|s| s.id)
    }

    #[test]
    fn recognises_real_images() {
        assert_eq!(id("nvcr.io/nvidia/tritonserver:24.08-py3"), Some("triton"));
        assert_eq!(
            id("us-docker.pkg.dev/google-samples/containers/gke/tritonserver:2.1"),
            Some("triton")
        );
        assert_eq!(id("vllm/vllm-openai:v0.6.3"), Some("vllm"));
        assert_eq!(id("docker.io/vllm/vllm-openai@sha256:abc"), Some("vllm"));
        assert_eq!(
            id("ghcr.io/huggingface/text-generation-inference:2.4"),
            Some("tgi")
        );
        assert_eq!(id("lmsysorg/sglang:v0.4.1-cu124"), Some("sglang"));
        assert_eq!(
            id("ghcr.io/ggml-org/llama.cpp:server-cuda"),
            Some("llama-cpp")
        );
        assert_eq!(id("ollama/ollama:0.5.1"), Some("ollama"));
        assert_eq!(
            id("nvcr.io/nim/meta/llama-3.1-8b-instruct:1.1.0"),
            Some("nim")
        );
        assert_eq!(id("kserve/huggingfaceserver:v0.14.0-gpu"), Some("kserve"));
        assert_eq!(id("nginx:1.27"), None);
        assert_eq!(id("rayproject/ray-ml:2.9.0-gpu"), None);
        assert_eq!(
            id("public.ecr.aws/data-on-eks/vllm-ray2.32.0-inf2-llama3:latest"),
            None
        );
    }

    #[test]
    fn an_overridden_command_must_launch_the_server() {
        use serde_json::json;
        let vllm = KnownServer::for_image("vllm/vllm-openai:v0.6.3").unwrap();
        assert!(
            vllm.is_served_by(&json!({"args": ["--model", "x"]})),
            "image entrypoint"
        );
        assert!(vllm.is_served_by(
            &json!({"command": ["python3", "-m", "vllm.entrypoints.openai.api_server"]})
        ));
        assert!(vllm.is_served_by(&json!({"command": ["sh", "-c", "vllm serve m"]})));
        assert!(!vllm.is_served_by(&json!({"command": ["sh", "-c", "ray start --address=$LWS_LEADER_ADDRESS:6379 --block"]})));
        assert!(vllm.is_served_by(
            &json!({"command": ["sh", "-c", "ray start"], "ports": [{"containerPort": 8000}]})
        ));
    }

    #[test]
    fn servers_are_recognised_by_what_they_run_from_any_image() {
        use serde_json::json;
        let by = |c: serde_json::Value| {
            let image = c["image"].as_str().unwrap_or_default().to_owned();
            recognise(&c, &image).server.map(|s| s.id)
        };
        let cases = [
            (
                json!({"image": "ghcr.io/llm-d/llm-d-cuda:v0.9.0", "command": ["bash", "-c", "exec vllm serve /mnt/models --port 8001"]}),
                "vllm",
            ),
            (
                json!({"image": "vault.habana.ai/gaudi-docker/vllm:1.2", "args": ["python3", "-m", "vllm.entrypoints.openai.api_server"]}),
                "vllm",
            ),
            (
                json!({"image": "custom", "command": ["python3", "-m", "sglang.launch_server"]}),
                "sglang",
            ),
            (
                json!({"image": "custom", "command": ["text-generation-launcher"]}),
                "tgi",
            ),
            (
                json!({"image": "custom", "command": ["trtllm-serve", "m"]}),
                "trtllm-serve",
            ),
            (
                json!({"image": "custom", "command": ["tritonserver", "--model-repository=/m"]}),
                "triton",
            ),
            (
                json!({"image": "custom", "command": ["/app/llama-server", "-m", "x.gguf"]}),
                "llama-cpp",
            ),
            (
                json!({"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4", "command": ["python3", "-m", "dynamo.vllm"]}),
                "dynamo-worker",
            ),
            (
                json!({"image": "registry.local:5000/team/ollama:0.6"}),
                "ollama",
            ),
            (
                json!({"image": "ghcr.io/huggingface/text-embeddings-inference:1.5"}),
                "tei",
            ),
            (
                json!({"image": "tensorflow/serving:2.13.1-gpu"}),
                "tf-serving",
            ),
        ];
        for (container, want) in cases {
            assert_eq!(by(container.clone()), Some(want), "{container}");
        }
        assert_eq!(by(json!({"image": "rayproject/ray-ml:2.9.0"})), None);
        // A registry port is not a tag, and a tag is not the repository.
        assert_eq!(by(json!({"image": "host:5000/x/app:ollama"})), None);
    }

    #[test]
    fn ports_come_from_the_servers_own_flags_and_environment() {
        use serde_json::json;
        let llama = KnownServer::by_id("llama-cpp").unwrap();
        assert_eq!(
            llama.explicit_port(&json!({"args": ["--port", "9931"]})),
            Some(9931)
        );
        assert_eq!(
            llama.explicit_port(&json!({"env": [{"name": "LLAMA_ARG_PORT", "value": "8081"}]})),
            Some(8081)
        );
        assert_eq!(llama.explicit_port(&json!({"args": ["-m", "x"]})), None);
        let ollama = KnownServer::by_id("ollama").unwrap();
        assert_eq!(
            ollama.explicit_port(
                &json!({"env": [{"name": "OLLAMA_HOST", "value": "0.0.0.0:11500"}]})
            ),
            Some(11500)
        );
        let triton = KnownServer::by_id("triton").unwrap();
        assert_eq!(
            triton
                .explicit_port(&json!({"command": ["sh", "-c", "tritonserver --http-port=8005"]})),
            Some(8005)
        );
    }

    #[test]
    fn load_facts_say_where_a_kill_during_load_is_real() {
        let id = |id| KnownServer::by_id(id).unwrap();
        for closed in ["vllm", "tgi", "tei", "trtllm-serve", "triton"] {
            assert_eq!(id(closed).during_load, DuringLoad::PortClosed, "{closed}");
        }
        assert_eq!(id("llama-cpp").during_load, DuringLoad::Unavailable);
        assert_eq!(id("sglang").during_load, DuringLoad::Unavailable);
        assert!(
            id("sglang").live_runs_generation,
            "/health generates by default"
        );
        assert!(id("nim").answers_during_load("/v1/health/live"));
        assert!(!id("nim").answers_during_load("/v1/health/ready"));
        assert_eq!(id("ollama").during_load, DuringLoad::Lazy);
        assert!(id("mlserver").ready_caveat.is_some());
        assert!(KNOWN_SERVERS.iter().all(|s| !s.source.is_empty()));
    }

    #[test]
    fn inference_paths_are_recognised() {
        assert!(is_inference_path("/health_generate"));
        assert!(is_inference_path("/v1/chat/completions"));
        assert!(is_inference_path("/v2/models/resnet/infer"));
        assert!(is_inference_path("/v1/models/flowers:predict"));
        assert!(!is_inference_path("/health"));
        assert!(!is_inference_path("/v2/health/live"));
    }
}
