//! Manifests read as the product reads them: through probelint-yaml's loader, with the YAML 1.1
//! scalar rules of kubectl and the apiserver (`on` is `true`, `0644` is 420, `8080:` is the key
//! `"8080"`), not a YAML 1.2 library's (where `on` is the string `"on"`). An engine test that
//! reads its fixtures any other way tests a different manifest from the one users lint.

use probelint_yaml::load::{Limits, YamlError, parse_stream};
use serde_json::Value;

/// The documents of `text` as JSON values, in file order; empty documents (`---` alone, only
/// comments, `null`) are skipped, as kubectl skips them. A document that is a bare scalar or list
/// comes back as such. `kind: List` is not expanded: that is the CLI's reading, not YAML's.
///
/// # Panics
///
/// When `text` does not parse (with the product's default limits): the message starts with the
/// error's `line:column`, then says what is wrong, then shows the text.
pub fn objects(text: &str) -> Vec<Value> {
    try_objects(text).unwrap_or_else(|e| {
        panic!(
            "{}:{}: the test YAML does not parse: {}\n--- text:\n{text}",
            e.line, e.column, e.message
        )
    })
}

/// [`objects`], for tests that walk files which may not parse (a corpus) and skip those.
///
/// # Errors
///
/// The loader's first error, with its line and column.
pub fn try_objects(text: &str) -> Result<Vec<Value>, YamlError> {
    let documents = parse_stream(text.as_bytes(), &Limits::default())?;
    Ok(documents.into_iter().map(|d| d.value).collect())
}

/// Each key written more than once in one mapping of `text`, as the CLI reports it: the index of
/// its document among the non-empty ones ([`objects`]' order), the pointer of the value read
/// (the last), and every line the key is written on.
pub fn duplicate_keys(text: &str) -> Vec<(usize, String, Vec<usize>)> {
    let documents = parse_stream(text.as_bytes(), &Limits::default()).unwrap_or_default();
    let mut out = Vec::new();
    for (index, document) in documents.iter().filter(|d| !d.value.is_null()).enumerate() {
        let mut keys: Vec<(String, Vec<usize>)> = Vec::new();
        for d in &document.duplicates {
            match keys
                .iter_mut()
                .find(|(p, lines)| *p == d.pointer && lines[0] == d.first.line)
            {
                Some((_, lines)) => lines.push(d.repeat.line),
                None => keys.push((d.pointer.clone(), vec![d.first.line, d.repeat.line])),
            }
        }
        out.extend(keys.into_iter().map(|(p, lines)| (index, p, lines)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_read_as_yaml_1_1_and_empty_documents_are_skipped() {
        let docs = objects(
            "---\n# nothing\n---\nkind: Pod\nhostNetwork: on\nmode: 0644\nports: {8080: http}\n\
             ---\nnull\n---\n- a\n",
        );
        assert_eq!(
            docs,
            vec![
                json!({"kind": "Pod", "hostNetwork": true, "mode": 420, "ports": {"8080": "http"}}),
                json!(["a"]),
            ]
        );
    }

    #[test]
    fn a_parse_error_names_its_line_and_column() {
        let error = try_objects("a: 1\nb: [1, 2\n").expect_err("unclosed flow sequence");
        assert!(error.line >= 2, "{error}");
        let panic = std::panic::catch_unwind(|| objects("a: 1\n  b: 2\n")).expect_err("bad indent");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.starts_with("2:") && message.contains("does not parse"),
            "{message}"
        );
    }
}
