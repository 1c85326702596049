//! RFC 6901 JSON Pointers, built as strings because findings and patches carry them as strings.

use serde_json::Value;
use std::borrow::Cow;

/// Escapes one reference token (`~` → `~0`, `/` → `~1`).
#[cfg(test)]
pub fn escape(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    push_escaped(&mut out, token);
    out
}

fn push_escaped(out: &mut String, token: &str) {
    if !token.contains(['~', '/']) {
        out.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// `base` + `/` + escaped `token`.
pub fn join(base: &str, token: &str) -> String {
    let mut out = String::with_capacity(base.len() + token.len() + 1);
    out.push_str(base);
    push(&mut out, token);
    out
}

/// `base` + `/` + `index`.
pub fn join_index(base: &str, index: usize) -> String {
    let mut out = String::with_capacity(base.len() + 4);
    out.push_str(base);
    push_index(&mut out, index);
    out
}

/// Appends `/` + escaped `token` to `pointer` (no intermediate string).
pub fn push(pointer: &mut String, token: &str) {
    pointer.push('/');
    push_escaped(pointer, token);
}

/// Appends `/` + `index` to `pointer`.
pub fn push_index(pointer: &mut String, index: usize) {
    use std::fmt::Write;
    // Writing to a String cannot fail.
    let _ = write!(pointer, "/{index}");
}

/// The node `pointer` names in `root`: what `Value::pointer` answers, without its two string
/// allocations per reference token (it unescapes every token, even those with nothing to
/// unescape, and hashes every key: this is on the path of every pod template).
pub fn resolve<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(root);
    }
    let tokens = pointer.strip_prefix('/')?;
    tokens.split('/').try_fold(root, |node, token| {
        let token: Cow<'_, str> = if token.contains('~') {
            Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
        } else {
            Cow::Borrowed(token)
        };
        match node {
            Value::Object(_) => crate::model::fields::get(node, &token),
            Value::Array(items) => array_index(&token).and_then(|i| items.get(i)),
            _ => None,
        }
    })
}

/// An array index token as RFC 6901 (and serde_json) reads it: no sign, no leading zero.
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_slash_and_tilde_in_annotation_keys() {
        assert_eq!(
            join("/metadata/annotations", "probelint.io/ignore"),
            "/metadata/annotations/probelint.io~1ignore"
        );
        assert_eq!(escape("a~b/c"), "a~0b~1c");
    }

    #[test]
    fn joined_pointer_resolves_with_serde_json() {
        let v = serde_json::json!({"metadata": {"annotations": {"a/b~c": 1}}});
        let p = join("/metadata/annotations", "a/b~c");
        assert_eq!(v.pointer(&p), Some(&serde_json::json!(1)));
        assert_eq!(resolve(&v, &p), Some(&serde_json::json!(1)));
    }

    #[test]
    fn resolves_as_serde_json_does() {
        let v = serde_json::json!({"a": [{"b~c": 1, "d/e": 2, "": 3}], "0": 4});
        for p in [
            "",
            "/",
            "/a",
            "/a/0",
            "/a/00",
            "/a/+0",
            "/a/1",
            "/a/0/b~0c",
            "/a/0/d~1e",
            "/a/0/",
            "/0",
            "a",
            "/a/0/b~c",
            "/a/0/b~2c",
            "/x/y",
        ] {
            assert_eq!(resolve(&v, p), v.pointer(p), "{p}");
        }
    }

    #[test]
    fn escaping_matches_the_two_replaces() {
        for t in ["", "plain", "a~b/c", "~1", "/~0", "~~//"] {
            assert_eq!(escape(t), t.replace('~', "~0").replace('/', "~1"), "{t}");
            let mut p = "/x".to_owned();
            push(&mut p, t);
            assert_eq!(p, format!("/x/{}", escape(t)));
        }
        assert_eq!(join_index("/a", 12), "/a/12");
    }
}
