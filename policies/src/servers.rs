//! Model servers recognised by image, with the endpoints they really serve.
//!
//! Sources: each server's own documentation (vLLM "Deploying with Kubernetes", TGI API reference,
//! Triton's HTTP/REST health protocol, SGLang's server arguments and `/health_generate`,
//! llama.cpp's `server/README.md`, Ollama's API docs, NVIDIA NIM for LLMs API reference, the
//! KServe Open Inference Protocol). A fix only ever uses an endpoint listed here.

use crate::fields::pick;
use std::borrow::Cow;

/// A model server the engine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownServer {
    /// Short id used in messages and docs (`triton`).
    pub id: &'static str,
    pub name: &'static str,
    /// Image repository fragments (matched against the image without registry tag/digest).
    image_markers: &'static [&'static str],
    /// The HTTP port the server listens on unless told otherwise.
    pub default_port: u16,
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
    /// Text in a container's command or args that shows it launches this server (when the
    /// command is overridden, the image may be running something else: a Ray worker, a
    /// download step).
    launch_markers: &'static [&'static str],
}

pub const KNOWN_SERVERS: &[KnownServer] = &[
    KnownServer {
        id: "triton",
        name: "NVIDIA Triton Inference Server",
        image_markers: &["tritonserver"],
        default_port: 8000,
        live_path: "/v2/health/live",
        ready_path: "/v2/health/ready",
        also_ready: &[],
        single_health_endpoint: false,
        ready_runs_generation: false,
        launch_markers: &["tritonserver"],
    },
    KnownServer {
        id: "nim",
        name: "NVIDIA NIM",
        image_markers: &["nvcr.io/nim/"],
        default_port: 8000,
        live_path: "/v1/health/live",
        ready_path: "/v1/health/ready",
        also_ready: &[],
        single_health_endpoint: false,
        ready_runs_generation: false,
        launch_markers: &["start_server", "nim_llm", "start-server"],
    },
    KnownServer {
        id: "sglang",
        name: "SGLang",
        image_markers: &["lmsysorg/sglang"],
        default_port: 30000,
        live_path: "/health",
        ready_path: "/health_generate",
        also_ready: &[],
        single_health_endpoint: false,
        ready_runs_generation: true,
        launch_markers: &["sglang.launch_server", "sglang serve"],
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
        default_port: 8000,
        live_path: "/health",
        ready_path: "/health",
        also_ready: &["/v1/models", "/ping"],
        single_health_endpoint: true,
        ready_runs_generation: false,
        launch_markers: &["vllm serve", "vllm.entrypoints"],
    },
    KnownServer {
        id: "tgi",
        name: "Hugging Face Text Generation Inference",
        image_markers: &["text-generation-inference"],
        default_port: 80,
        live_path: "/health",
        ready_path: "/health",
        also_ready: &[],
        single_health_endpoint: true,
        ready_runs_generation: false,
        launch_markers: &["text-generation-launcher"],
    },
    KnownServer {
        id: "llama-cpp",
        name: "llama.cpp server",
        image_markers: &["llama.cpp:server", "llama-cpp-server", "llama.cpp/server"],
        default_port: 8080,
        live_path: "/health",
        ready_path: "/health",
        also_ready: &[],
        single_health_endpoint: true,
        ready_runs_generation: false,
        launch_markers: &["llama-server", "/server"],
    },
    KnownServer {
        id: "ollama",
        name: "Ollama",
        image_markers: &["ollama/ollama"],
        default_port: 11434,
        live_path: "/",
        ready_path: "/",
        also_ready: &["/api/version", "/api/tags"],
        single_health_endpoint: true,
        ready_runs_generation: false,
        launch_markers: &["ollama serve", "ollama"],
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
        live_path: "/v2/health/live",
        ready_path: "/v2/health/ready",
        also_ready: &[],
        single_health_endpoint: false,
        ready_runs_generation: false,
        launch_markers: &[
            "huggingfaceserver",
            "sklearnserver",
            "xgbserver",
            "lgbserver",
            "pmmlserver",
            "paddleserver",
            "model.py",
        ],
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
        KNOWN_SERVERS
            .iter()
            .find(|s| s.image_markers.iter().any(|m| image.contains(m)))
    }

    /// Whether a container of this server's image is known to run the server itself: it
    /// declares a TCP port, keeps the image's entrypoint, or its command launches the server.
    pub fn is_served_by(&self, container: &serde_json::Value) -> bool {
        use serde_json::Value;
        let [ports, command, args] = pick(container, ["ports", "command", "args"]);
        let declares_tcp_port = ports.and_then(Value::as_array).is_some_and(|ports| {
            ports.iter().any(|p| {
                crate::fields::get(p, "protocol")
                    .and_then(Value::as_str)
                    .is_none_or(|proto| proto.eq_ignore_ascii_case("TCP"))
            })
        });
        let command = command.and_then(Value::as_array);
        let Some(command) = command.filter(|c| !c.is_empty()) else {
            return true;
        };
        if declares_tcp_port {
            return true;
        }
        let args = args.and_then(Value::as_array);
        command
            .iter()
            .chain(args.into_iter().flatten())
            .filter_map(Value::as_str)
            .any(|word| self.launch_markers.iter().any(|m| word.contains(m)))
    }

    /// Whether `path` is a sound readiness endpoint for this server.
    pub fn is_ready_path(&self, path: &str) -> bool {
        let path = strip_query(path);
        path == self.ready_path || self.also_ready.contains(&path)
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
    fn inference_paths_are_recognised() {
        assert!(is_inference_path("/health_generate"));
        assert!(is_inference_path("/v1/chat/completions"));
        assert!(is_inference_path("/v2/models/resnet/infer"));
        assert!(is_inference_path("/v1/models/flowers:predict"));
        assert!(!is_inference_path("/health"));
        assert!(!is_inference_path("/v2/health/live"));
    }
}
