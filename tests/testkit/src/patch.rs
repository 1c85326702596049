//! JSON Patch operations (RFC 6902) written the way a test reads them:
//! `add("/spec/replicas", json!(2))`.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::Value;

/// `path` as a JSON Pointer; a test that writes a malformed one fails, naming it.
fn pointer(path: &str) -> PointerBuf {
    PointerBuf::parse(path).unwrap_or_else(|e| panic!("{path:?} is not a JSON Pointer: {e}"))
}

/// `{"op": "add", "path": path, "value": value}`.
pub fn add(path: &str, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(path),
        value,
    })
}

/// `{"op": "remove", "path": path}`.
pub fn remove(path: &str) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: pointer(path),
    })
}

/// `{"op": "replace", "path": path, "value": value}`.
pub fn replace(path: &str, value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: pointer(path),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations_serialise_as_rfc_6902_and_apply() {
        let patch = json_patch::Patch(vec![
            add("/metadata/labels", json!({"a/b": "c"})),
            replace("/spec/replicas", json!(2)),
            remove("/metadata/labels/a~1b"),
        ]);
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"a/b": "c"}},
                {"op": "replace", "path": "/spec/replicas", "value": 2},
                {"op": "remove", "path": "/metadata/labels/a~1b"},
            ])
        );
        let mut object = json!({"metadata": {}, "spec": {"replicas": 1}});
        json_patch::patch(&mut object, &patch).expect("applies");
        assert_eq!(
            object,
            json!({"metadata": {"labels": {}}, "spec": {"replicas": 2}})
        );
    }

    #[test]
    #[should_panic(expected = "is not a JSON Pointer")]
    fn a_malformed_pointer_fails_the_test() {
        let _ = add("spec", json!(1));
    }
}
