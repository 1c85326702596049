//! Writing JSON values as YAML (or JSON) text that reads back as the same JSON.
//!
//! Kubernetes reads YAML 1.1 (see [`crate::load`]): a plain `yes`, `on`, `8080` or `1e3` is
//! not a string there. So a string is written plain only when it looks like ordinary text *and*
//! the YAML layer itself reads it back as that string; everything else is double-quoted with
//! escapes that both JSON and YAML understand. Numbers and booleans are written plain.
//!
//! Everything here writes `\n` line breaks; the caller turns them into the file's own.

use serde_json::{Map, Value};

use crate::load::{Limits, parse_stream};

/// Deepest value an operation may carry. Fix values are a few levels deep; this only keeps a
/// hostile patch from recursing without bound.
const MAX_DEPTH: usize = 64;

/// Where a scalar or key is written: decides which characters force quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Context {
    /// In a block collection (`key: value`, `- value`).
    Block,
    /// Inside `{...}` or `[...]` of a YAML file: `,[]{}` end a plain scalar there.
    Flow,
    /// Inside a JSON file: every string and key double-quoted.
    Json,
}

/// Block layout of the file, detected from its existing nesting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// Columns a nested mapping is indented past its key.
    pub(super) step: usize,
    /// Columns a block sequence's `-` is indented past its key: 0 for indentless sequences.
    pub(super) seq_offset: usize,
    /// Columns from a sequence item's `-` to its content (2 for `- name: x`).
    pub(super) item_offset: usize,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            step: 2,
            seq_offset: 2,
            item_offset: 2,
        }
    }
}

fn too_deep() -> String {
    format!("the value to write is nested deeper than {MAX_DEPTH} levels")
}

/// A string as a double-quoted scalar. The escapes used (`\"`, `\\`, `\n`, `\uXXXX`, ...) mean
/// the same in JSON and in YAML, and every character YAML forbids raw is escaped.
pub(super) fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c < ' '
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` may be written as a plain scalar (a value, or a key when `key`) in `context`.
///
/// A cheap character filter first (letters, digits and `-_./:@+=~%()`, inner single spaces;
/// no `: `, no trailing `:`; a leading digit is quoted, as people read `"8080"` as a string
/// only when it is quoted), then the authority: the YAML layer must read it back as exactly
/// this string, which rules out `yes`, `8080`, `0x1F`, `1e3`, `null`, `2024-01-01`, ...
fn plain_ok(s: &str, context: Context, key: bool) -> bool {
    if context == Context::Json || s.is_empty() || s.len() > 256 {
        return false;
    }
    let mut chars = s.chars();
    let first_ok = match chars.next() {
        // `-x` is a plain scalar, `- x` an item and `-1` a number (the read-back catches that).
        Some('-') => chars.next().is_some_and(|c| c != ' '),
        Some(c) => c.is_alphabetic() || matches!(c, '/' | '_' | '.'),
        None => false,
    };
    let flow = context == Context::Flow;
    let rest_ok = s.chars().all(|c| {
        c.is_alphanumeric()
            || matches!(
                c,
                '-' | '_' | '.' | '/' | '@' | '+' | '=' | '~' | '%' | '(' | ')' | ' '
            )
            || (c == ':' && !flow)
    });
    let spaces_ok = !s.ends_with(' ') && !s.contains("  ");
    if !(first_ok && rest_ok && spaces_ok) || s.contains(": ") || s.ends_with(':') {
        return false;
    }
    let probe = match (context, key) {
        (Context::Flow, true) => format!("{{{s}: 0}}"),
        (Context::Flow, false) => format!("k: {{x: {s}}}"),
        (_, true) => format!("{s}: 0"),
        (_, false) => format!("k: {s}"),
    };
    let Ok(docs) = parse_stream(probe.as_bytes(), &Limits::default()) else {
        return false;
    };
    let Some(Value::Object(map)) = docs.first().map(|d| &d.value) else {
        return false;
    };
    match (context, key) {
        (_, true) => map.len() == 1 && map.contains_key(s),
        (Context::Flow, false) => {
            map.get("k").and_then(|m| m.get("x")) == Some(&Value::String(s.to_owned()))
        }
        (_, false) => map.get("k") == Some(&Value::String(s.to_owned())),
    }
}

/// A mapping key as written in `context`.
pub(super) fn key(k: &str, context: Context) -> String {
    if plain_ok(k, context, true) {
        k.to_owned()
    } else {
        double_quoted(k)
    }
}

/// A scalar (or an empty collection, `{}` / `[]`) as written in `context`; `None` for a
/// non-empty collection.
pub(super) fn scalar(value: &Value, context: Context) -> Option<String> {
    Some(match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if plain_ok(s, context, false) => s.clone(),
        Value::String(s) => double_quoted(s),
        Value::Object(m) if m.is_empty() => "{}".to_owned(),
        Value::Array(a) if a.is_empty() => "[]".to_owned(),
        Value::Object(_) | Value::Array(_) => return None,
    })
}

fn spaces(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// What follows `key:` in a block mapping whose keys are at column `indent` (0-based): ` value`
/// for a scalar, else the nested block lines, each starting with `\n`.
pub(super) fn block_value(
    out: &mut String,
    value: &Value,
    indent: usize,
    layout: &Layout,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    if let Some(s) = scalar(value, Context::Block) {
        out.push(' ');
        out.push_str(&s);
        return Ok(());
    }
    match value {
        Value::Object(map) => block_entries(out, map, indent + layout.step, layout, depth, true),
        Value::Array(items) => {
            let dash = indent + layout.seq_offset;
            for item in items {
                out.push('\n');
                spaces(out, dash);
                out.push('-');
                block_item(out, item, dash, layout, depth + 1)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The entries of a block mapping at column `indent`. With `first_newline` false the first
/// entry continues the current line (after `- `, or where a removed entry's key was).
pub(super) fn block_entries(
    out: &mut String,
    map: &Map<String, Value>,
    indent: usize,
    layout: &Layout,
    depth: usize,
    first_newline: bool,
) -> Result<(), String> {
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 || first_newline {
            out.push('\n');
            spaces(out, indent);
        }
        out.push_str(&key(k, Context::Block));
        out.push(':');
        block_value(out, v, indent, layout, depth + 1)?;
    }
    Ok(())
}

/// What follows the `-` of a block sequence item whose `-` is at column `dash`.
pub(super) fn block_item(
    out: &mut String,
    value: &Value,
    dash: usize,
    layout: &Layout,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let offset = layout.item_offset.max(2);
    match value {
        Value::Object(map) if !map.is_empty() => {
            spaces(out, offset - 1);
            block_entries(out, map, dash + offset, layout, depth, false)
        }
        Value::Array(items) if !items.is_empty() => {
            out.push(' ');
            flow(out, value, Context::Flow, depth)
        }
        _ => {
            out.push(' ');
            out.push_str(&scalar(value, Context::Block).unwrap_or_default());
            Ok(())
        }
    }
}

/// A value on one line in flow style: `{path: /health, port: 8000}`, or JSON in a JSON file.
pub(super) fn flow(
    out: &mut String,
    value: &Value,
    context: Context,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    if let Some(s) = scalar(value, context) {
        out.push_str(&s);
        return Ok(());
    }
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&key(k, context));
                out.push_str(": ");
                flow(out, v, context, depth + 1)?;
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                flow(out, v, context, depth + 1)?;
            }
            out.push(']');
        }
        _ => {}
    }
    Ok(())
}

/// A value over several lines in flow style, the way JSON is pretty-printed: `indent` is the
/// current line's indentation and `unit` one level of it (both verbatim, so tabs stay tabs).
pub(super) fn flow_pretty(
    out: &mut String,
    value: &Value,
    context: Context,
    indent: &str,
    unit: &str,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    if let Some(s) = scalar(value, context) {
        out.push_str(&s);
        return Ok(());
    }
    let inner = format!("{indent}{unit}");
    let (open, close) = if value.is_object() {
        ('{', '}')
    } else {
        ('[', ']')
    };
    out.push(open);
    let mut first = true;
    let mut entry = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push('\n');
        out.push_str(&inner);
    };
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                entry(out);
                out.push_str(&key(k, context));
                out.push_str(": ");
                flow_pretty(out, v, context, &inner, unit, depth + 1)?;
            }
        }
        Value::Array(items) => {
            for v in items {
                entry(out);
                flow_pretty(out, v, context, &inner, unit, depth + 1)?;
            }
        }
        _ => {}
    }
    out.push('\n');
    out.push_str(indent);
    out.push(close);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_that_yaml_1_1_would_not_read_as_strings_are_quoted() {
        for s in [
            "yes",
            "on",
            "Off",
            "y",
            "N",
            "8080",
            "1e3",
            "0x1F",
            "0644",
            "1_000",
            "null",
            "~",
            "true",
            ".inf",
            "2024-01-01",
            "",
            " lead",
            "a: b",
            "a #b",
            "-1",
            "- x",
            "*a",
            "&a",
            "!t",
            "{x}",
            "[x]",
            "'q'",
            "\"q\"",
            "%x",
            "@x",
            "`x",
            "|",
            ">",
            "a\nb",
            "trail:",
        ] {
            let out = scalar(&json!(s), Context::Block).unwrap_or_default();
            assert!(out.starts_with('"'), "{s:?} was written {out}");
        }
        for s in [
            "/health",
            "vllm",
            "a b",
            "v1.2.3",
            "nvidia.com/gpu",
            "host:8000",
            "--port",
        ] {
            assert_eq!(
                scalar(&json!(s), Context::Block).as_deref(),
                Some(s),
                "{s:?}"
            );
        }
        assert_eq!(
            scalar(&json!("host:8000"), Context::Flow).as_deref(),
            Some("\"host:8000\"")
        );
        assert_eq!(
            scalar(&json!("/health"), Context::Json).as_deref(),
            Some("\"/health\"")
        );
        assert_eq!(
            scalar(&json!(8080), Context::Block).as_deref(),
            Some("8080")
        );
        assert_eq!(
            scalar(&json!(true), Context::Block).as_deref(),
            Some("true")
        );
        assert_eq!(scalar(&json!({"a": 1}), Context::Block), None);
        assert_eq!(
            double_quoted("a\"\\\u{1}\u{85}é"),
            "\"a\\\"\\\\\\u0001\\u0085é\""
        );
    }

    #[test]
    fn keys_are_quoted_when_kubernetes_would_read_another_string() {
        assert_eq!(
            key("probelint.io/mutated", Context::Block),
            "probelint.io/mutated"
        );
        assert_eq!(key("yes", Context::Block), "\"yes\"");
        assert_eq!(key("8080", Context::Block), "\"8080\"");
        assert_eq!(
            key("n", Context::Block),
            "\"n\"",
            "`n:` is the key \"false\""
        );
        assert_eq!(key("a", Context::Json), "\"a\"");
    }

    #[test]
    fn block_values_nest_by_the_layout() {
        let value = json!({"exec": {"command": ["sh", "-c", "curl -f localhost"]},
                           "items": [{"a": 1, "b": [1]}], "e": {}});
        let mut out = String::new();
        let layout = Layout {
            step: 4,
            seq_offset: 0,
            item_offset: 2,
        };
        block_value(&mut out, &value, 2, &layout, 0).unwrap_or_default();
        assert_eq!(
            out,
            "\n      exec:\n          command:\n          - sh\n          - -c\n          \
             - curl -f localhost\n      items:\n      - a: 1\n        b:\n        - 1\n      e: {}"
        );
    }

    #[test]
    fn flow_values_inline_and_pretty() {
        let value = json!({"httpGet": {"path": "/health", "port": "http"}, "m": [1, "on"]});
        let mut out = String::new();
        flow(&mut out, &value, Context::Flow, 0).unwrap_or_default();
        assert_eq!(
            out,
            "{httpGet: {path: /health, port: http}, m: [1, \"on\"]}"
        );
        let mut out = String::new();
        flow_pretty(&mut out, &value, Context::Json, "  ", "  ", 0).unwrap_or_default();
        assert_eq!(
            out,
            "{\n    \"httpGet\": {\n      \"path\": \"/health\",\n      \"port\": \"http\"\n    },\n    \
             \"m\": [\n      1,\n      \"on\"\n    ]\n  }"
        );
    }

    #[test]
    fn deep_values_are_refused_not_recursed() {
        let mut value = json!(1);
        for _ in 0..100 {
            value = json!({ "a": value });
        }
        let mut out = String::new();
        assert!(block_value(&mut out, &value, 0, &Layout::default(), 0).is_err());
        assert!(flow(&mut out, &value, Context::Flow, 0).is_err());
    }
}
