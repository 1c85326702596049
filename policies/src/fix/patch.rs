//! JSON Patch operations, as fixes build them: `add`, `replace`, `remove` at a pointer, and
//! `add` of a key into a map that may not exist yet.

use crate::model::pointer;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Value, json};

/// An `add` of `key: value` into the map at `tokens` (unescaped pointer tokens), creating the
/// map and its missing parents: RFC 6902 `add` needs the parent to exist, so the operation
/// writes at the deepest map that exists and nests the rest (a map that is `null` or not a map
/// is replaced).
pub fn add_to_map(object: &Value, tokens: &[&str], key: &str, value: Value) -> PatchOperation {
    let mut node = object;
    let mut existing = 0;
    for token in tokens {
        match node.get(token) {
            Some(child) if child.is_object() => {
                node = child;
                existing += 1;
            }
            _ => break,
        }
    }
    let (path, value) = if existing == tokens.len() {
        (
            tokens.iter().copied().chain([key]).collect::<Vec<_>>(),
            value,
        )
    } else {
        let nested = tokens[existing + 1..].iter().rev().fold(
            json!({ key: value }),
            |inner, token| json!({ *token: inner }),
        );
        (tokens[..=existing].to_vec(), nested)
    };
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(path),
        value,
    })
}

fn path(p: impl Into<String>) -> PointerBuf {
    // Pointers here are built by `crate::model::pointer`, so they parse; `to_buf` refuses one
    // that does not rather than degrade it to the root, which would replace the whole object.
    pointer::to_buf(p)
}

pub fn add(p: impl Into<String>, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: path(p),
        value,
    })
}

pub fn replace(p: impl Into<String>, value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: path(p),
        value,
    })
}

pub fn remove(p: impl Into<String>) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation { path: path(p) })
}
