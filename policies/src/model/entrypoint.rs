//! What the official model-server images run when a container gives no `command`: the image's
//! `ENTRYPOINT`, to which the kubelet appends the container's `args`. A manifest that writes
//! `args: ["--model", M]` (or vLLM's `args: [M]`) under such an image names its model there, and
//! one that repeats the entrypoint in `args` (`vllm serve serve M`) starts a server that exits at
//! once.
//!
//! Each entry says which image it is, what its entrypoint is and where that was read. An image
//! not in the table (a custom build `FROM` one of these, which may set its own entrypoint) is
//! never judged by it.

/// The entrypoint of one official image.
#[derive(Debug)]
pub struct ImageEntrypoint {
    /// The image's repository without its registry host (`vllm/vllm-openai`), matched against a
    /// container image's repository with or without `docker.io/`, `ghcr.io/` and the like.
    pub repository: &'static str,
    /// The words it runs before `args`, in its current releases.
    pub words: &'static [&'static str],
    /// Every entrypoint its releases have had, as a user reads it (`vllm serve`, `python3 -m
    /// vllm.entrypoints.openai.api_server` in older ones).
    pub described: &'static str,
    /// Leading `args` words that repeat the entrypoint: none of the image's entrypoints accepts
    /// them, so the server exits with a usage error before it loads anything.
    pub repeated_by: &'static [&'static [&'static str]],
    /// Where the entrypoint and the failure were read.
    pub source: &'static str,
}

/// The official images whose entrypoint probelint knows.
pub static IMAGE_ENTRYPOINTS: &[ImageEntrypoint] = &[
    ImageEntrypoint {
        repository: "vllm/vllm-openai",
        words: &["vllm", "serve"],
        described: "`vllm serve` (`python3 -m vllm.entrypoints.openai.api_server` in older \
                    releases)",
        // `vllm serve serve M` takes `serve` for the model and rejects M; the older api_server
        // rejects both words.
        repeated_by: &[&["vllm", "serve"], &["serve"]],
        source: "vllm-project/vllm docker/Dockerfile (`ENTRYPOINT [\"vllm\", \"serve\"]`; \
                 `python3 -m vllm.entrypoints.openai.api_server` at 0000977e); the failures: \
                 vllm-project/vllm#37133 (`vllm: error: unrecognized arguments: serve …`), \
                 #22072 (api_server)",
    },
    ImageEntrypoint {
        repository: "huggingface/text-generation-inference",
        words: &["text-generation-launcher"],
        described: "`text-generation-launcher`",
        repeated_by: &[&["text-generation-launcher"]],
        source: "huggingface/text-generation-inference@00873331 Dockerfile \
                 (`ENTRYPOINT [\"text-generation-launcher\"]`, `CMD [\"--json-output\"]`)",
    },
    ImageEntrypoint {
        repository: "ggml-org/llama.cpp",
        words: &["/app/llama-server"],
        described: "`/app/llama-server` (the `server` tags)",
        repeated_by: &[&["/app/llama-server"], &["llama-server"]],
        source: "ggml-org/llama.cpp@00d69466 .devops/cuda.Dockerfile (`ENTRYPOINT [ \
                 \"/app/llama-server\" ]` in the server stage)",
    },
];

/// The entrypoint `image` runs, when it is one of the official images in the table (for
/// llama.cpp only its `server` tags: the others run the CLI or a tools script).
pub fn of_image(image: &str) -> Option<&'static ImageEntrypoint> {
    let image = image.trim();
    let image = image.split('@').next().unwrap_or(image);
    let repository = crate::model::servers::repository(image);
    let tag = image[repository.len()..].trim_start_matches(':');
    let path = repository.to_ascii_lowercase();
    IMAGE_ENTRYPOINTS.iter().find(|e| {
        let named = path == e.repository
            || path
                .strip_suffix(e.repository)
                .is_some_and(|host| host.ends_with('/') && host.matches('/').count() == 1);
        named && (e.repository != "ggml-org/llama.cpp" || tag.starts_with("server"))
    })
}

/// The words a container with no `command` runs: its image's entrypoint, then its `args`.
/// `None` when the container sets `command` (which replaces the entrypoint) or its image is not
/// in the table.
pub fn runs(container: &serde_json::Value, image: &str) -> Option<&'static ImageEntrypoint> {
    let command = container.get("command");
    let replaced = command
        .and_then(serde_json::Value::as_array)
        .is_some_and(|c| !c.is_empty());
    (!replaced).then(|| of_image(image)).flatten()
}

impl ImageEntrypoint {
    /// How many leading words of `args` repeat the entrypoint (0 when none do).
    pub fn repeated_words(&self, args: &[&str]) -> usize {
        self.repeated_by
            .iter()
            .find(|words| args.len() >= words.len() && args[..words.len()] == ***words)
            .map_or(0, |words| words.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn official_images_are_found_with_or_without_their_registry() {
        for image in [
            "vllm/vllm-openai:v0.10.1",
            "docker.io/vllm/vllm-openai:latest",
            "vllm/vllm-openai@sha256:abc",
        ] {
            assert_eq!(
                of_image(image).map(|e| e.repository),
                Some("vllm/vllm-openai")
            );
        }
        assert_eq!(
            of_image("ghcr.io/huggingface/text-generation-inference:3.0.1").map(|e| e.words),
            Some(&["text-generation-launcher"][..])
        );
        // llama.cpp's server tags run llama-server; its other tags do not.
        assert!(of_image("ghcr.io/ggml-org/llama.cpp:server-cuda").is_some());
        assert!(of_image("ghcr.io/ggml-org/llama.cpp:full-cuda").is_none());
        // A look-alike or a build on top is not the official image.
        assert!(of_image("acme/vllm-openai-custom:1").is_none());
        assert!(of_image("registry.acme.io/team/vllm/vllm-openai:1").is_none());
    }

    #[test]
    fn a_command_replaces_the_entrypoint() {
        let image = "vllm/vllm-openai:v0.10.1";
        assert!(runs(&json!({"args": ["--model", "m"]}), image).is_some());
        assert!(runs(&json!({"command": [], "args": ["m"]}), image).is_some());
        assert!(runs(&json!({"command": ["vllm", "serve"]}), image).is_none());
    }

    #[test]
    fn repeated_entrypoint_words_are_counted() {
        let vllm = of_image("vllm/vllm-openai:v0.10.1").unwrap();
        assert_eq!(vllm.repeated_words(&["serve", "m"]), 1);
        assert_eq!(vllm.repeated_words(&["vllm", "serve", "m"]), 2);
        assert_eq!(vllm.repeated_words(&["m", "--port", "8000"]), 0);
        assert_eq!(vllm.repeated_words(&["--model", "m"]), 0);
    }
}
