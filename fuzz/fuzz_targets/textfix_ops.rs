//! `probelint::textfix::apply` with arbitrary JSON Patch operations on arbitrary manifest text.
//! The input is a few bytes that choose the operations, then the text. Never panics; when it
//! returns a text, that text parses and reads back as exactly the patched documents.
#![no_main]

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use libfuzzer_sys::fuzz_target;
use probelint::textfix::{ObjectPatch, apply};
use probelint::yaml::{Limits, escape_pointer_token, parse_stream};
use serde_json::{Value, json};

const LIMITS: Limits = Limits {
    max_file_bytes: 256 * 1024,
    max_documents: 64,
    max_depth: 64,
    max_nodes: 20_000,
};

/// Header: one byte for the number of operations, then 4 bytes per operation.
const OP_BYTES: usize = 4;

fn values() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(5),
        json!(-1.5),
        json!("on"),
        json!("8080"),
        json!(""),
        json!("a: b # c"),
        json!("line\nbreak"),
        json!("'\"\\"),
        json!([]),
        json!({}),
        json!(["x", {"y": 1}]),
        json!({"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 30}),
        json!({"a b": {"c": [1, 2]}, "yes": "no"}),
        json!("{{ .Values.x }}"),
    ]
}

fn pointers(value: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), value)];
    while let Some((pointer, node)) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (k, v) in map {
                    stack.push((format!("{pointer}/{}", escape_pointer_token(k)), v));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    stack.push((format!("{pointer}/{i}"), v));
                }
            }
            _ => {}
        }
        out.push((pointer, node));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn pointer(text: &str) -> PointerBuf {
    PointerBuf::parse(text).expect("pointer")
}

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count % 4) + 1;
    if rest.len() < count * OP_BYTES {
        return;
    }
    let (header, body) = rest.split_at(count * OP_BYTES);
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    let Ok(documents) = parse_stream(body, &LIMITS) else {
        return;
    };
    if documents.is_empty() {
        return;
    }
    let document = usize::from(header[0]) % documents.len();
    let original = &documents[document].value;
    let nodes = pointers(original);
    let values = values();
    let mut ops = Vec::new();
    for spec in header.chunks(OP_BYTES) {
        let (kind, which, value) = (spec[1] % 3, usize::from(spec[2]), spec[3]);
        let (path, node) = &nodes[which % nodes.len()];
        let value = values[usize::from(value) % values.len()].clone();
        ops.push(match kind {
            0 => {
                // add: a new key in a mapping, an item in a sequence, or over the node itself.
                let target = match node {
                    Value::Object(_) => format!("{path}/k{}", spec[0] % 3),
                    Value::Array(_) if spec[0] % 2 == 0 => format!("{path}/-"),
                    Value::Array(items) => format!("{path}/{}", usize::from(spec[0]) % (items.len() + 1)),
                    _ => path.clone(),
                };
                PatchOperation::Add(AddOperation { path: pointer(&target), value })
            }
            1 => PatchOperation::Remove(RemoveOperation { path: pointer(path) }),
            _ => PatchOperation::Replace(ReplaceOperation { path: pointer(path), value }),
        });
    }
    let patch = [ObjectPatch { document, prefix: String::new(), ops: &ops }];
    let Ok(out) = apply(text, &patch, &LIMITS) else {
        return;
    };
    let mut expected: Vec<Value> = documents.into_iter().map(|d| d.value).collect();
    if let Err(e) = json_patch::patch(&mut expected[document], &ops) {
        panic!("apply accepted operations json_patch refuses ({e}): {ops:?}");
    }
    let got: Vec<Value> = parse_stream(out.as_bytes(), &LIMITS)
        .unwrap_or_else(|e| panic!("the edited text does not parse: {e}\n{out}"))
        .into_iter()
        .map(|d| d.value)
        .collect();
    assert_eq!(got, expected, "the edited text reads back wrong\n{ops:?}\n---\n{out}");
});
