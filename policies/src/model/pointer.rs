//! RFC 6901 JSON Pointers, built as strings because findings and patches carry them as strings.
//! Escaping, parsing and decoding are `jsonptr`'s (the crate `json_patch` applies patches
//! with), so a pointer the engine writes is one the patch reads the same way; a string that is
//! not a JSON Pointer names nothing, never the whole document.

use crate::model::fields;
use json_patch::jsonptr::index::Index;
use json_patch::jsonptr::{Pointer, PointerBuf, Token};
use serde_json::Value;
use std::borrow::Cow;

/// Escapes one reference token (`~` → `~0`, `/` → `~1`).
#[cfg(test)]
pub fn escape(token: &str) -> String {
    Token::new(token).encoded().to_owned()
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

/// Appends `/` + escaped `token` to `pointer` (no copy of a token that needs no escape).
pub fn push(pointer: &mut String, token: &str) {
    pointer.push('/');
    pointer.push_str(Token::new(token).encoded());
}

/// Appends `/` + `index` to `pointer`.
pub fn push_index(pointer: &mut String, index: usize) {
    use std::fmt::Write;
    // Writing to a String cannot fail.
    let _ = write!(pointer, "/{index}");
}

/// Why `text` is not a JSON Pointer (`jsonptr`'s words), if it is not one.
pub fn invalid(text: &str) -> Option<String> {
    Pointer::parse(text).err().map(|e| e.to_string())
}

/// The pointer a patch operation takes. `pointer` was built by this module, so it parses; one
/// that does not is a bug, and is refused loudly rather than read as the root (an operation on
/// the root replaces the whole object).
pub fn to_buf(pointer: impl Into<String>) -> PointerBuf {
    PointerBuf::parse(pointer)
        .unwrap_or_else(|e| panic!("a pointer the engine built is not a JSON Pointer: {e}"))
}

/// The decoded reference tokens of `pointer`, or `None` when it is not a JSON Pointer. A token
/// without escapes is borrowed from `pointer`, not copied.
pub fn tokens(pointer: &str) -> Option<impl Iterator<Item = Cow<'_, str>>> {
    let valid = Pointer::parse(pointer).ok()?;
    // A valid pointer is `/`-separated encoded tokens (or empty, the root: no tokens).
    let encoded = valid.as_str().strip_prefix('/').map(|rest| rest.split('/'));
    Some(encoded.into_iter().flatten().map(|token| {
        if token.contains('~') {
            let token = Token::from_encoded(token).expect("a token of a parsed pointer");
            Cow::Owned(token.decoded().into_owned())
        } else {
            Cow::Borrowed(token)
        }
    }))
}

/// An array index token as RFC 6901 reads it (no sign, no leading zero; `-`, the end, names no
/// element).
pub fn index(token: &str) -> Option<usize> {
    match token.parse::<Index>().ok()? {
        Index::Num(i) => Some(i),
        Index::Next => None,
    }
}

/// The node `pointer` names in `root`, as RFC 6901 reads it: what `Value::pointer` answers for
/// a valid pointer, without its allocation per token and hash per key (this is on the path of
/// every pod template); nothing for a string that is not a JSON Pointer.
pub fn resolve<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    tokens(pointer)?.try_fold(root, |node, token| match node {
        Value::Object(_) => fields::get(node, &token),
        Value::Array(items) => index(&token).and_then(|i| items.get(i)),
        _ => None,
    })
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
    fn resolves_valid_pointers_as_serde_json_does() {
        let v = serde_json::json!({"a": [{"b~c": 1, "d/e": 2, "": 3}], "0": 4});
        for p in [
            "",
            "/",
            "/a",
            "/a/0",
            "/a/00",
            "/a/+0",
            "/a/1",
            "/a/-",
            "/a/0/b~0c",
            "/a/0/d~1e",
            "/a/0/",
            "/0",
            "a",
            "/x/y",
        ] {
            assert_eq!(resolve(&v, p), v.pointer(p), "{p}");
        }
    }

    #[test]
    fn a_string_that_is_not_a_pointer_names_nothing() {
        // serde_json reads `~` not followed by 0 or 1 as itself (so `/a/0/b~c` finds "b~c");
        // RFC 6901 makes it an error, and an error must not find anything, least of all the
        // whole document.
        let v = serde_json::json!({"a": [{"b~c": 1}]});
        for p in ["/a/0/b~c", "/a/0/b~2c", "/a/0/b~", "a"] {
            assert_eq!(resolve(&v, p), None, "{p}");
            assert!(invalid(p).is_some(), "{p}");
            assert!(tokens(p).is_none(), "{p}");
        }
        assert_eq!(invalid("/a/0/b~0c"), None);
        assert_eq!(
            tokens("/x/a~1b/~0/").map(Iterator::collect::<Vec<_>>),
            Some(vec!["x".into(), "a/b".into(), "~".into(), "".into()])
        );
        assert_eq!(tokens("").map(Iterator::count), Some(0));
    }

    #[test]
    #[should_panic(expected = "not a JSON Pointer")]
    fn a_patch_pointer_that_does_not_parse_is_refused_not_read_as_the_root() {
        to_buf("spec/containers");
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
