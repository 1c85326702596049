//! probelint-yaml against Kubernetes' own decoder on the same bytes: the same documents, the
//! same JSON values, an error on both sides or on neither. The decoder is one long-lived Go
//! process (`tests/yaml-reference/`), at the path in `PROBELINT_YAML_REFERENCE`; `fuzz/run.sh`
//! builds it and sets that. Inputs in a class of known disagreements (`docs/yaml.md`) are
//! skipped.
#![no_main]

use std::sync::{Mutex, OnceLock};

use probelint_yaml_reference::{Reference, disagreement, ours};

fn reference() -> &'static Mutex<Reference> {
    static REFERENCE: OnceLock<Mutex<Reference>> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let path = std::env::var_os("PROBELINT_YAML_REFERENCE").unwrap_or_else(|| {
            panic!(
                "set PROBELINT_YAML_REFERENCE to the built decoder (fuzz/run.sh does: \
                 cargo run -p probelint-yaml-reference --bin yaml-reference-path)"
            )
        });
        Mutex::new(Reference::start_at(path.as_ref()).unwrap_or_else(|e| panic!("{e}")))
    })
}

/// The classes `docs/yaml.md` lists as known disagreements, recognised from the bytes (loosely:
/// an input that might be in one is skipped).
fn known(text: &str) -> bool {
    let flow = text.contains(['[', '{']);
    text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
        .starts_with('{')
        || text.contains(['\u{85}', '\u{2028}', '\u{2029}'])
        || text.contains('%')
        || text.contains("\\/")
        || text.contains("\\'")
        || glued_comment(text)
        || odd_anchor_name(text)
        || (flow && (text.contains('?') || glued_colon(text) || flow_dash(text)))
}

/// A `#` with no blank before it, after something on its line.
fn glued_comment(text: &str) -> bool {
    text.as_bytes()
        .windows(2)
        .any(|w| w[1] == b'#' && !matches!(w[0], b' ' | b'\t' | b'\n' | b'\r'))
}

/// A `:` followed by something other than a blank or a flow indicator.
fn glued_colon(text: &str) -> bool {
    text.as_bytes()
        .windows(2)
        .any(|w| w[0] == b':' && !matches!(w[1], b' ' | b'\t' | b'\n' | b'\r' | b',' | b']' | b'}'))
}

/// A `-` right before a flow indicator, or right after `[`.
fn flow_dash(text: &str) -> bool {
    text.as_bytes()
        .windows(2)
        .any(|w| (w[0] == b'-' && matches!(w[1], b',' | b']' | b'}')) || w == b"[-")
}

/// An anchor or alias whose name has a character go-yaml does not allow in one.
fn odd_anchor_name(text: &str) -> bool {
    text.match_indices(['&', '*']).any(|(at, _)| {
        text[at + 1..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | '[' | ']' | '{' | '}'))
            .any(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Kubernetes reads bytes that are not UTF-8 differently (Go replaces them); probelint
    // refuses them, which is not the property under test here.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if known(text) {
        return;
    }
    let theirs = match reference().lock() {
        Ok(mut reference) => reference.decode(data),
        Err(_) => return,
    }
    .unwrap_or_else(|e| panic!("{e}"));
    if let Some(difference) = disagreement(&ours(data), &theirs) {
        panic!("probelint and Kubernetes read {text:?} differently:\n{difference}");
    }
});
