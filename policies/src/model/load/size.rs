//! How big a model's weights are: its parameter count from its id (`Llama-3.1-70B`, `8x7B`,
//! `30B-A3B`, `opt-125m`) or from the policy's table, and the bytes each parameter takes in the
//! checkpoint (from `-FP8`, `-AWQ`, GGUF `Q4_K_M` in the id, or the server's `--quantization`
//! and `--dtype` flags).

use serde::Serialize;

/// A parameter count and where it was read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parameters {
    pub billions: f64,
    /// `"70B" in the id`, `modelLoad.parametersBillions["deepseek-r1"]`.
    pub from: String,
}

/// Bytes per parameter in the checkpoint read at start, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Precision {
    pub bytes_per_parameter: f64,
    /// `bf16`, `fp8`, `4-bit`, `Q4_K_M`.
    pub name: String,
    /// `"-FP8" in the id`, `--quantization awq`, `the usual bf16 checkpoint (assumed)`.
    pub from: String,
}

/// The part of a model reference that names the model: the last path segment, without a
/// trailing `/`, a scheme, or a `.gguf`/`.safetensors` extension.
pub fn model_name(reference: &str) -> &str {
    let reference = reference.trim().trim_end_matches('/');
    let name = reference.rsplit('/').next().unwrap_or(reference);
    name.strip_suffix(".gguf")
        .or_else(|| name.strip_suffix(".safetensors"))
        .unwrap_or(name)
}

/// The parameter count of `reference`: the policy's table when the name starts with one of its
/// keys and says no size after it, else the largest size token in the name, else in the
/// nearest directory above it (`/data/gemma3_27b/hf-checkpoint`).
pub fn parameters(reference: &str, table: &[(String, f64)]) -> Option<Parameters> {
    if let Some(found) = parameters_in(model_name(reference), table) {
        return Some(found);
    }
    let reference = reference.trim().trim_end_matches('/');
    let mut segments = reference.rsplit('/');
    segments.next();
    segments.find_map(|segment| {
        let found = parameters_in(segment, table)?;
        Some(Parameters {
            from: format!("{} (in {segment:?})", found.from),
            ..found
        })
    })
}

/// The entry of a name-prefix table for `name`: its key starts the name, and what follows says
/// no size (`DeepSeek-R1-0528` is DeepSeek-R1; `DeepSeek-R1-Distill-Llama-8B` is an 8B model).
fn table_entry<'t>(name: &str, table: &'t [(String, f64)]) -> Option<&'t (String, f64)> {
    let lower = name.to_ascii_lowercase();
    table.iter().find(|(key, _)| {
        lower.strip_prefix(key.as_str()).is_some_and(|rest| {
            (rest.is_empty() || !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
                && size_tokens(rest).is_empty()
        })
    })
}

fn parameters_in(name: &str, table: &[(String, f64)]) -> Option<Parameters> {
    if let Some((key, billions)) = table_entry(name, table) {
        return Some(Parameters {
            billions: *billions,
            from: format!("modelLoad.parametersBillions[{key:?}]"),
        });
    }
    let tokens = size_tokens(name);
    // `Qwen2.5-7B-Instruct-1M` is 7B with a 1M-token context: billions before millions.
    let best = tokens
        .iter()
        .filter(|t| t.billions >= 1.0 || t.unit_is_billions)
        .max_by(|a, b| a.billions.total_cmp(&b.billions))
        .or_else(|| {
            tokens
                .iter()
                .max_by(|a, b| a.billions.total_cmp(&b.billions))
        })?;
    Some(Parameters {
        billions: best.billions,
        from: format!("{:?} in the name", best.text),
    })
}

struct SizeToken<'a> {
    text: &'a str,
    billions: f64,
    unit_is_billions: bool,
}

/// `70B`, `1.5b`, `125m`, `1T`, `8x7B` delimited by non-alphanumerics (so not `Qwen2.5`,
/// `A3B`, `8bit`).
fn size_tokens(name: &str) -> Vec<SizeToken<'_>> {
    let bytes = name.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !bytes[i - 1].is_ascii_alphanumeric() && bytes[i - 1] != b'.';
        if !(starts_word && bytes[i].is_ascii_digit()) {
            i += 1;
            continue;
        }
        let start = i;
        let number = |i: &mut usize| -> Option<f64> {
            let from = *i;
            while *i < bytes.len() && bytes[*i].is_ascii_digit() {
                *i += 1;
            }
            if *i + 1 < bytes.len() && bytes[*i] == b'.' && bytes[*i + 1].is_ascii_digit() {
                *i += 1;
                while *i < bytes.len() && bytes[*i].is_ascii_digit() {
                    *i += 1;
                }
            }
            name[from..*i].parse().ok()
        };
        let Some(mut value) = number(&mut i) else {
            i += 1;
            continue;
        };
        // `8x7B`: experts × size.
        if i + 1 < bytes.len()
            && (bytes[i] == b'x' || bytes[i] == b'X')
            && bytes[i + 1].is_ascii_digit()
        {
            i += 1;
            match number(&mut i) {
                Some(each) => value *= each,
                None => continue,
            }
        }
        let Some(&unit) = bytes.get(i) else { break };
        let scale = match unit.to_ascii_lowercase() {
            b'b' => 1.0,
            b'm' => 1e-3,
            b't' => 1e3,
            _ => continue,
        };
        i += 1;
        let ends_word = bytes.get(i).is_none_or(|b| !b.is_ascii_alphanumeric());
        if ends_word && value > 0.0 {
            out.push(SizeToken {
                text: &name[start..i],
                billions: value * scale,
                unit_is_billions: scale >= 1.0,
            });
        }
    }
    out
}

/// Quantisation hints in a model name, as (text to find, bytes per parameter, precision name).
/// 4-bit formats store scales beside the weights; 0.5 is the figure the sources use.
const NAME_HINTS: &[(&str, f64, &str)] = &[
    // Bit widths first: `GPTQ-Int8` is an 8-bit checkpoint.
    ("int4", 0.5, "4-bit (int4)"),
    ("int8", 1.0, "int8"),
    ("w4a16", 0.5, "4-bit (W4A16)"),
    ("w8a8", 1.0, "8-bit (W8A8)"),
    ("w8a16", 1.0, "8-bit (W8A16)"),
    ("4bit", 0.5, "4-bit"),
    ("8bit", 1.0, "8-bit"),
    ("nvfp4", 0.5, "4-bit (NVFP4)"),
    ("mxfp4", 0.5, "4-bit (MXFP4)"),
    ("fp4", 0.5, "4-bit (FP4)"),
    ("fp8", 1.0, "fp8"),
    ("awq", 0.5, "4-bit (AWQ)"),
    ("gptq", 0.5, "4-bit (GPTQ)"),
    ("nf4", 0.5, "4-bit (NF4)"),
    ("bf16", 2.0, "bf16"),
    ("fp16", 2.0, "fp16"),
    ("fp32", 4.0, "fp32"),
];

/// Checkpoint formats `--quantization`/`--quantize` names that need a checkpoint already
/// quantised to 4 bits. `fp8`, `bitsandbytes` and `eetq` quantise a full-precision checkpoint
/// while loading it, so they leave the bytes read unchanged.
const PREQUANTISED_4BIT: &[&str] = &[
    "awq",
    "awq_marlin",
    "gptq",
    "gptq_marlin",
    "marlin",
    "exl2",
    "bitsandbytes-nf4",
    "bitsandbytes-fp4",
];

/// Bytes per parameter of the checkpoint `reference` names, read by a server with these
/// quantisation and dtype flags: what the name says, else the policy's table of checkpoints
/// published in another precision, else a pre-quantised `--quantization`, else `--dtype
/// float32`, else 16 bits.
pub fn precision(
    reference: &str,
    table: &[(String, f64)],
    quantization: Option<&str>,
    dtype: Option<&str>,
) -> Precision {
    let name = model_name(reference);
    if let Some(p) = gguf_precision(name) {
        return p;
    }
    let lower = name.to_ascii_lowercase();
    for (hint, bytes, precision) in NAME_HINTS {
        if contains_word(&lower, hint) {
            return Precision {
                bytes_per_parameter: *bytes,
                name: (*precision).to_owned(),
                from: format!("{hint:?} in the name"),
            };
        }
    }
    if let Some((key, bytes)) = table_entry(name, table) {
        return Precision {
            bytes_per_parameter: *bytes,
            name: match *bytes {
                b if b >= 4.0 => "fp32".to_owned(),
                b if b >= 2.0 => "16-bit".to_owned(),
                b if b >= 1.0 => "8-bit".to_owned(),
                _ => "4-bit".to_owned(),
            },
            from: format!("modelLoad.bytesPerParameter[{key:?}]"),
        };
    }
    if let Some(q) = quantization.map(str::to_ascii_lowercase)
        && PREQUANTISED_4BIT.contains(&q.as_str())
    {
        return Precision {
            bytes_per_parameter: 0.5,
            name: format!("4-bit ({q})"),
            from: format!("--quantization {q}"),
        };
    }
    if let Some(d) = dtype.map(str::to_ascii_lowercase)
        && matches!(d.as_str(), "float32" | "float" | "fp32")
    {
        return Precision {
            bytes_per_parameter: 4.0,
            name: "fp32".to_owned(),
            from: format!("--dtype {d}"),
        };
    }
    Precision {
        bytes_per_parameter: 2.0,
        name: "bf16".to_owned(),
        from: ASSUMED_PRECISION.to_owned(),
    }
}

/// Why a precision nothing in the manifest states was taken.
const ASSUMED_PRECISION: &str = "the usual 16-bit checkpoint (assumed)";

impl Precision {
    /// Whether nothing in the manifest or the policy's tables gave this precision.
    pub fn is_assumed(&self) -> bool {
        self.from == ASSUMED_PRECISION
    }
}

/// GGUF quantisation types in file and repository names: `Q4_K_M` ≈ 4.5 bits a weight.
fn gguf_precision(name: &str) -> Option<Precision> {
    let upper = name.to_ascii_uppercase();
    for (i, _) in upper.match_indices('Q') {
        let before = upper[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() && c != 'I') {
            continue;
        }
        let rest = &upper[i + 1..];
        let bits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let after = rest[bits.len()..].chars().next();
        if bits.is_empty() || !matches!(after, Some('_')) {
            continue;
        }
        let Ok(bits) = bits.parse::<u32>() else {
            continue;
        };
        if !(2..=8).contains(&bits) {
            continue;
        }
        let end = rest[bits.to_string().len()..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(rest.len(), |e| e + bits.to_string().len());
        let text = &name[i..i + 1 + end];
        return Some(Precision {
            bytes_per_parameter: (f64::from(bits) + 0.5) / 8.0,
            name: text.to_owned(),
            from: format!("GGUF {text} in the name"),
        });
    }
    None
}

/// `needle` in `haystack` between non-alphanumerics (so `fp8` in `-FP8-dynamic`, not `awq` in
/// `hawq`).
fn contains_word(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(i, _)| {
        let before = haystack[..i].chars().next_back();
        let after = haystack[i + needle.len()..].chars().next();
        before.is_none_or(|c| !c.is_ascii_alphabetic())
            && after.is_none_or(|c| !c.is_ascii_alphabetic())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<(String, f64)> {
        let mut t = vec![
            ("deepseek-r1".to_owned(), 671.0),
            ("mixtral-8x7b".to_owned(), 46.7),
            ("llama-4-scout-17b-16e".to_owned(), 109.0),
            ("glm-4.5".to_owned(), 355.0),
            ("glm-4.5-air".to_owned(), 106.0),
        ];
        t.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
        t
    }

    fn billions(reference: &str) -> Option<f64> {
        parameters(reference, &table()).map(|p| p.billions)
    }

    #[test]
    fn sizes_from_ids_as_public_manifests_write_them() {
        assert_eq!(billions("meta-llama/Llama-3.1-8B-Instruct"), Some(8.0));
        assert_eq!(
            billions("meta-llama/Meta-Llama-3.1-70B-Instruct"),
            Some(70.0)
        );
        assert_eq!(
            billions("meta-llama/Llama-3.1-405B-Instruct-FP8"),
            Some(405.0)
        );
        assert_eq!(billions("Qwen/Qwen2.5-1.5B-Instruct"), Some(1.5));
        assert_eq!(billions("Qwen/Qwen2.5-7B-Instruct-1M"), Some(7.0));
        assert_eq!(billions("Qwen/Qwen3-30B-A3B"), Some(30.0));
        assert_eq!(
            billions("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"),
            Some(235.0)
        );
        assert_eq!(billions("mistralai/Mistral-7B-Instruct-v0.3"), Some(7.0));
        assert_eq!(billions("google/gemma-2-27b-it"), Some(27.0));
        assert_eq!(billions("facebook/opt-125m"), Some(0.125));
        assert_eq!(billions("llama3.1:70b"), Some(70.0));
        assert_eq!(billions("/models/llama-2-7b-chat.Q4_K_M.gguf"), Some(7.0));
        assert_eq!(billions("hf://meta-llama/Llama-3.2-1B/"), Some(1.0));
        assert_eq!(billions("openai/gpt-oss-120b"), Some(120.0));
        assert_eq!(
            billions("deepseek-ai/DeepSeek-R1-Distill-Llama-8B"),
            Some(8.0)
        );
        assert_eq!(billions("TinyLlama/TinyLlama-1.1B-Chat-v1.0"), Some(1.1));
        // Mixture-of-experts ids written as experts × size.
        assert_eq!(billions("someone/Foo-8x22B"), Some(176.0));
        // Not sizes: versions, active-parameter counts, bit widths.
        assert_eq!(billions("mistralai/Mistral-Nemo-Instruct-2407"), None);
        assert_eq!(billions("BAAI/bge-reranker-v2-m3"), None);
        assert_eq!(billions("TheBloke/Llama-2-AWQ-4bit"), None);
        assert_eq!(billions("/mnt/models"), None);
        assert_eq!(billions("/data/nemo_rl_gemma3_27b_3_11/hf3-11"), Some(27.0));
    }

    #[test]
    fn the_table_names_models_whose_ids_say_no_size_or_the_wrong_one() {
        assert_eq!(billions("deepseek-ai/DeepSeek-R1"), Some(671.0));
        assert_eq!(billions("deepseek-ai/DeepSeek-R1-0528"), Some(671.0));
        assert_eq!(billions("mistralai/Mixtral-8x7B-Instruct-v0.1"), Some(46.7));
        assert_eq!(
            billions("meta-llama/Llama-4-Scout-17B-16E-Instruct"),
            Some(109.0)
        );
        assert_eq!(billions("zai-org/GLM-4.5-Air-FP8"), Some(106.0));
        assert_eq!(billions("zai-org/GLM-4.5"), Some(355.0));
        let p = parameters("deepseek-ai/DeepSeek-R1", &table()).unwrap();
        assert_eq!(p.from, "modelLoad.parametersBillions[\"deepseek-r1\"]");
        let p = parameters("meta-llama/Llama-3.1-70B", &table()).unwrap();
        assert_eq!(p.from, "\"70B\" in the name");
    }

    #[test]
    fn bytes_per_parameter_from_names_and_flags() {
        let table = [
            ("deepseek-r1".to_owned(), 1.0),
            ("gpt-oss-20b".to_owned(), 0.5),
        ];
        let bytes = |r: &str, q: Option<&str>, d: Option<&str>| {
            precision(r, &table, q, d).bytes_per_parameter
        };
        assert_eq!(bytes("meta-llama/Llama-3.1-70B-Instruct", None, None), 2.0);
        assert_eq!(
            bytes("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", None, None),
            1.0
        );
        assert_eq!(
            bytes("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", None, None),
            1.0
        );
        assert_eq!(
            bytes(
                "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
                None,
                None
            ),
            0.5
        );
        assert_eq!(
            bytes("TheBloke/Mistral-7B-Instruct-v0.2-GPTQ", None, None),
            0.5
        );
        assert_eq!(
            bytes("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int8", None, None),
            1.0,
            "the width wins"
        );
        assert_eq!(
            bytes("RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8", None, None),
            1.0
        );
        assert_eq!(bytes("openai/gpt-oss-20b", None, None), 0.5);
        assert_eq!(bytes("deepseek-ai/DeepSeek-R1-0528", None, None), 1.0);
        assert_eq!(
            bytes("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", None, None),
            2.0
        );
        assert_eq!(
            bytes("/models/llama-2-7b-chat.Q4_K_M.gguf", None, None),
            0.5625
        );
        assert_eq!(
            bytes("bartowski/Llama-3.2-3B-Instruct-GGUF:Q8_0", None, None),
            1.0625
        );
        assert_eq!(bytes("some/model", Some("awq"), None), 0.5);
        // Quantised while loading: the checkpoint read is still 16-bit.
        assert_eq!(bytes("meta-llama/Llama-3.1-8B", Some("fp8"), None), 2.0);
        assert_eq!(
            bytes("meta-llama/Llama-3.1-8B", Some("bitsandbytes"), None),
            2.0
        );
        assert_eq!(bytes("facebook/opt-125m", None, Some("float32")), 4.0);
        assert_eq!(bytes("facebook/opt-125m", None, Some("half")), 2.0);
        assert_eq!(precision("x/hawq-7B", &table, None, None).name, "bf16");
        assert_eq!(
            precision(
                "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
                &table,
                None,
                None
            )
            .from,
            "\"fp8\" in the name"
        );
    }
}
