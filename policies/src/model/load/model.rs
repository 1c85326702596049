//! Which model a container serves, read from the server's own arguments and environment.

use crate::model::fields::{get, pick};
use serde_json::Value;

/// A container's command line as the kubelet runs it: `command` then `args`, with `$(VAR)`
/// replaced by the container's literal `env` values (as the kubelet expands them), and a
/// `sh -c` script split into words (its `$VAR` and `${VAR}` expanded the same way).
#[derive(Debug, Clone, Default)]
pub struct CommandLine {
    pub words: Vec<String>,
    env: Vec<(String, String)>,
}

impl CommandLine {
    pub fn of(container: &Value) -> Self {
        let [command, args, env] = pick(container, ["command", "args", "env"]);
        let env: Vec<(String, String)> = env
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let name = get(e, "name")?.as_str()?;
                let value = match get(e, "value")? {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return None,
                };
                Some((name.to_owned(), value))
            })
            .collect();
        let raw: Vec<String> = [command, args]
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(Value::as_str)
            .map(|w| expand_kubelet(w, &env))
            .collect();
        let mut words = Vec::with_capacity(raw.len());
        let mut shell = false;
        let mut script_next = false;
        for (i, word) in raw.iter().enumerate() {
            if script_next {
                words.extend(shell_words(word, &env));
                script_next = false;
                continue;
            }
            if i == 0 {
                let program = word.rsplit('/').next().unwrap_or(word);
                shell = matches!(program, "sh" | "bash" | "dash" | "zsh" | "ash");
            }
            if shell && word.starts_with('-') && !word.starts_with("--") && word.ends_with('c') {
                script_next = true;
                continue;
            }
            words.push(word.clone());
        }
        CommandLine { words, env }
    }

    /// The words the container runs: as [`CommandLine::of`], with the image's entrypoint before
    /// its `args` when it gives no `command` and its image is an official server image
    /// ([`crate::model::entrypoint`]): `args: [M]` under `vllm/vllm-openai` is `vllm serve M`.
    /// Leading `args` that repeat the entrypoint (`serve M`) are left out here: the
    /// `args-repeat-entrypoint` rule reports them, and the estimate reads what was meant.
    pub fn running(container: &Value, image: &str) -> Self {
        let mut line = Self::of(container);
        if let Some(entry) = crate::model::entrypoint::runs(container, image) {
            let args: Vec<&str> = line.words.iter().map(String::as_str).collect();
            let repeated = entry.repeated_words(&args);
            let mut words: Vec<String> = Vec::with_capacity(entry.words.len() + args.len());
            words.extend(entry.words.iter().map(|w| (*w).to_owned()));
            words.extend(line.words.drain(repeated..));
            line.words = words;
        }
        line
    }

    /// The value of the first of `flags` given (`--model X` or `--model=X`), with the flag.
    /// Dashes and underscores in long flags are the same (`--pipeline_parallel_size`), as the
    /// servers' argument parsers treat them.
    pub fn flag(&self, flags: &[&'static str]) -> Option<(&'static str, &str)> {
        for (i, word) in self.words.iter().enumerate() {
            let (name, value) = match word.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (word.as_str(), None),
            };
            for flag in flags {
                if !same_flag(name, flag) {
                    continue;
                }
                match value {
                    Some(value) => return Some((flag, value)),
                    None => {
                        if let Some(next) = self.words.get(i + 1).filter(|n| !n.starts_with('-')) {
                            return Some((flag, next));
                        }
                    }
                }
            }
        }
        None
    }

    /// The degree of tensor parallelism the server is started with (1 when not given).
    pub fn tensor_parallel(&self) -> u64 {
        self.degree(&["--tensor-parallel-size", "-tp", "--tp-size", "--tp"])
    }

    /// The degree of pipeline parallelism the server is started with (1 when not given).
    pub fn pipeline_parallel(&self) -> u64 {
        self.degree(&["--pipeline-parallel-size", "-pp", "--pp-size", "--pp"])
    }

    fn degree(&self, flags: &[&'static str]) -> u64 {
        self.flag(flags)
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .filter(|d| *d >= 1)
            .unwrap_or(1)
    }

    /// The first positional word after `program` (and `sub`, when given): `vllm serve MODEL`.
    pub fn positional_after(&self, program: &str, sub: Option<&str>) -> Option<&str> {
        let at = self
            .words
            .iter()
            .position(|w| w.rsplit('/').next() == Some(program))?;
        let mut rest = self.words[at + 1..].iter();
        if let Some(sub) = sub
            && rest.next().map(String::as_str) != Some(sub)
        {
            return None;
        }
        rest.next()
            .map(String::as_str)
            .filter(|w| !w.starts_with('-'))
    }

    /// A literal `env` value of the container.
    pub fn env(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether any word contains `text`.
    pub fn mentions(&self, text: &str) -> bool {
        self.words.iter().any(|w| w.contains(text))
    }
}

fn same_flag(word: &str, flag: &str) -> bool {
    if !flag.starts_with("--") {
        return word == flag;
    }
    word.len() == flag.len()
        && word
            .bytes()
            .zip(flag.bytes())
            .all(|(a, b)| a == b || matches!((a, b), (b'_', b'-') | (b'-', b'_')))
}

/// `$(VAR)` from earlier literal env values; `$$(VAR)` is an escaped `$(VAR)`.
fn expand_kubelet(word: &str, env: &[(String, String)]) -> String {
    if !word.contains("$(") {
        return word.to_owned();
    }
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(escaped) = tail.strip_prefix("$$") {
            out.push('$');
            rest = escaped;
        } else if let Some(open) = tail.strip_prefix("$(")
            && let Some(close) = open.find(')')
            && let Some((_, value)) = env.iter().rev().find(|(n, _)| *n == open[..close])
        {
            out.push_str(value);
            rest = &open[close + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A shell script's words, with `$VAR`/`${VAR}` from literal env values and the shell's
/// separators (`&&`, `;`, `|`) kept apart from the words beside them.
fn shell_words(script: &str, env: &[(String, String)]) -> Vec<String> {
    let split = shlex::split(script)
        .unwrap_or_else(|| script.split_whitespace().map(str::to_owned).collect());
    split
        .into_iter()
        .flat_map(|w| {
            let w = w.trim_end_matches(';').to_owned();
            let expanded = expand_shell(&w, env);
            // `exec vllm serve ...` and `python3 -m vllm...` need no special case: the words
            // are scanned as they come.
            expanded
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

fn expand_shell(word: &str, env: &[(String, String)]) -> String {
    if !word.contains('$') {
        return word.to_owned();
    }
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let (name, after) = if let Some(braced) = tail.strip_prefix('{') {
            match braced.find('}') {
                Some(close) => (&braced[..close], &braced[close + 1..]),
                None => ("", tail),
            }
        } else {
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            (&tail[..end], &tail[end..])
        };
        match env.iter().rev().find(|(n, _)| n == name) {
            Some((_, value)) if !name.is_empty() => {
                out.push_str(value);
                rest = after;
            }
            _ => {
                out.push('$');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The model a container serves and where that was read.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelArg {
    Found {
        reference: String,
        /// `--model`, `vllm serve`, `MODEL_ID`, `storageUri`, `the image name`.
        found_in: String,
    },
    /// Given, but through a variable probelint cannot resolve (`--model $(MODEL)` with the value
    /// from a ConfigMap).
    Unresolved {
        found_in: String,
        text: String,
    },
    NotFound,
}

/// Flags that name the model in vLLM, SGLang, TGI, TEI and KServe's Hugging Face server, and the
/// `--model-uri` of custom servers (MLflow's `mlflow models serve`, custom KServe predictors).
const MODEL_FLAGS: &[&str] = &[
    "--model",
    "--model-id",
    "--model-path",
    "--model_id",
    "--model-uri",
    "--model_uri",
];
/// llama.cpp's `llama-server` flags, checked only for llama.cpp (`-m` is Python's too).
const LLAMA_CPP_FLAGS: &[&str] = &["--hf-repo", "-hfr", "-hf", "--model", "-m"];
/// Environment variables the servers read their model from.
const MODEL_ENV: &[&str] = &[
    "MODEL_ID",
    "LLAMA_ARG_HF_REPO",
    "LLAMA_ARG_MODEL",
    "STORAGE_URI",
];

/// The model `container` serves, for server `server` (an id of `model::servers`).
pub fn find(server: Option<&str>, line: &CommandLine, image: &str, container: &Value) -> ModelArg {
    let found = |reference: &str, found_in: String| {
        if reference.contains('$') {
            ModelArg::Unresolved {
                found_in,
                text: reference.to_owned(),
            }
        } else {
            ModelArg::Found {
                reference: reference.to_owned(),
                found_in,
            }
        }
    };
    // NIM's image is its model (`NIM_MODEL_NAME` when one image serves many); a storageUri
    // beside it is where the model cache lives.
    if server == Some("nim") {
        if let Some(name) = line.env("NIM_MODEL_NAME") {
            return found(name, "NIM_MODEL_NAME".to_owned());
        }
        if let Some(model) = nim_image_model(image) {
            return found(&model, "the image name".to_owned());
        }
    }
    // An InferenceService's model component names its weights itself.
    if let Some(uri) = get(container, "storageUri").and_then(Value::as_str) {
        return found(uri, "storageUri".to_owned());
    }
    let llama_cpp = server == Some("llama-cpp") || line.mentions("llama-server");
    if llama_cpp && let Some((flag, value)) = line.flag(LLAMA_CPP_FLAGS) {
        return found(value, flag.to_owned());
    }
    if let Some(model) = line.positional_after("vllm", Some("serve")) {
        return found(model, "vllm serve".to_owned());
    }
    if let Some(model) = line
        .positional_after("trtllm-serve", Some("serve"))
        .or_else(|| line.positional_after("trtllm-serve", None))
    {
        return found(model, "trtllm-serve".to_owned());
    }
    if let Some((flag, value)) = line.flag(MODEL_FLAGS) {
        return found(value, flag.to_owned());
    }
    for name in MODEL_ENV {
        if let Some(value) = line.env(name) {
            return found(value, (*name).to_owned());
        }
    }
    ModelArg::NotFound
}

/// `nvcr.io/nim/meta/llama-3.1-70b-instruct:1.3.3` serves `meta/llama-3.1-70b-instruct`.
fn nim_image_model(image: &str) -> Option<String> {
    let path = image.split('@').next()?;
    let rest = path.split_once("nvcr.io/nim/")?.1;
    let rest = match rest.rsplit_once(':') {
        Some((name, _tag)) => name,
        None => rest,
    };
    (!rest.is_empty()).then(|| rest.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model(server: Option<&str>, image: &str, container: Value) -> ModelArg {
        find(server, &CommandLine::of(&container), image, &container)
    }

    fn reference(arg: ModelArg) -> (String, String) {
        match arg {
            ModelArg::Found {
                reference,
                found_in,
            } => (reference, found_in),
            other => panic!("no model: {other:?}"),
        }
    }

    #[test]
    fn vllm_models_in_every_form_public_manifests_use() {
        let cases = [
            json!({"args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"]}),
            json!({"args": ["--model=meta-llama/Llama-3.1-8B-Instruct"]}),
            json!({"command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"]}),
            json!({"command": ["python3", "-m", "vllm.entrypoints.openai.api_server"], "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"]}),
            json!({"command": ["/bin/sh", "-c"], "args": ["pip install x && exec vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000"]}),
            json!({"command": ["bash", "-ec", "vllm serve \"$MODEL\" --max-model-len 4096"], "env": [{"name": "MODEL", "value": "meta-llama/Llama-3.1-8B-Instruct"}]}),
            json!({"args": ["--model", "$(MODEL_NAME)"], "env": [{"name": "MODEL_NAME", "value": "meta-llama/Llama-3.1-8B-Instruct"}]}),
        ];
        for case in cases {
            let (r, _) = reference(model(
                Some("vllm"),
                "vllm/vllm-openai:v0.10.0",
                case.clone(),
            ));
            assert_eq!(r, "meta-llama/Llama-3.1-8B-Instruct", "{case}");
        }
        let (_, found_in) = reference(model(
            None,
            "ghcr.io/llm-d/llm-d-cuda:v0.3",
            json!({"command": ["vllm", "serve", "Qwen/Qwen3-8B"]}),
        ));
        assert_eq!(found_in, "vllm serve");
        let line = CommandLine::of(
            &json!({"command": ["sh", "-c", "python3 -m vllm.entrypoints.openai.api_server --pipeline_parallel_size 2"]}),
        );
        assert_eq!(
            line.flag(&["--pipeline-parallel-size"]),
            Some(("--pipeline-parallel-size", "2"))
        );
    }

    #[test]
    fn other_servers_name_their_model_their_own_way() {
        let tgi =
            json!({"env": [{"name": "MODEL_ID", "value": "mistralai/Mistral-7B-Instruct-v0.3"}]});
        assert_eq!(
            reference(model(
                Some("tgi"),
                "ghcr.io/huggingface/text-generation-inference:3.0",
                tgi
            ))
            .1,
            "MODEL_ID"
        );
        let tgi = json!({"args": ["--model-id", "bigscience/bloom-560m", "--num-shard", "1"]});
        assert_eq!(
            reference(model(Some("tgi"), "", tgi)).0,
            "bigscience/bloom-560m"
        );
        let sglang = json!({"command": ["python3", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8"]});
        assert_eq!(
            reference(model(Some("sglang"), "", sglang)).0,
            "deepseek-ai/DeepSeek-R1"
        );
        let llama = json!({"args": ["-m", "/models/llama-2-7b.Q4_K_M.gguf", "--port", "8080"]});
        assert_eq!(
            reference(model(Some("llama-cpp"), "", llama)),
            ("/models/llama-2-7b.Q4_K_M.gguf".to_owned(), "-m".to_owned())
        );
        let llama = json!({"command": ["llama-server", "-hf", "ggml-org/gemma-3-1b-it-GGUF"]});
        assert_eq!(reference(model(None, "", llama)).1, "-hf");
        let trt = json!({"command": ["trtllm-serve", "serve", "nvidia/Llama-3.1-8B-Instruct-FP8", "--backend", "pytorch"]});
        assert_eq!(
            reference(model(None, "", trt)).0,
            "nvidia/Llama-3.1-8B-Instruct-FP8"
        );
        let nim = json!({"name": "nim"});
        assert_eq!(
            reference(model(
                Some("nim"),
                "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.3.3",
                nim
            )),
            (
                "meta/llama-3.1-70b-instruct".to_owned(),
                "the image name".to_owned()
            )
        );
        let kserve = json!({"modelFormat": {"name": "huggingface"}, "storageUri": "hf://meta-llama/Llama-3.1-8B-Instruct"});
        assert_eq!(reference(model(Some("kserve"), "", kserve)).1, "storageUri");
        let custom =
            json!({"command": ["python", "serve.py", "--model-uri", "s3://models/llama-3.1-8b"]});
        assert_eq!(
            reference(model(None, "", custom)),
            (
                "s3://models/llama-3.1-8b".to_owned(),
                "--model-uri".to_owned()
            )
        );
        // `-m` is Python's module flag unless the server is llama.cpp.
        let python = json!({"command": ["python", "-m", "my_server"]});
        assert_eq!(model(None, "", python), ModelArg::NotFound);
    }

    #[test]
    fn a_model_from_a_variable_probelint_cannot_see_is_unresolved() {
        let c = json!({"args": ["--model", "$(MODEL)"], "env": [{"name": "MODEL", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}]});
        assert_eq!(
            model(Some("vllm"), "", c),
            ModelArg::Unresolved {
                found_in: "--model".to_owned(),
                text: "$(MODEL)".to_owned()
            }
        );
        // `$$(X)` is the kubelet's escape for a literal `$(X)`.
        assert_eq!(
            expand_kubelet("$$(A)-$(A)", &[("A".into(), "x".into())]),
            "$(A)-x"
        );
    }
}
