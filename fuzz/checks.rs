//! What the fuzz targets check, shared with the regression tests that replay saved crash
//! inputs (`lint/tests/hostile.rs`, `fuzz_regressions_stay_fixed`): each function panics when an
//! invariant breaks, and does nothing else. The webhook's check is in `webhook_checks.rs`: this
//! file is compiled into the CLI's tests, which do not depend on the webhook.

#![allow(dead_code)] // each fuzz target uses one function

use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use probelint::commands::fix;
use probelint::input::Source;
use probelint_policies::Analysis;
use probelint_policies::simulate::{scenario_for, simulate};
use probelint_policies::{Policy, evaluate};
use probelint_yaml::load::{Limits, Span, parse_stream, parse_stream_partial};
use probelint_yaml::patch::{ObjectPatch, apply};
use serde_json::{Value, json};
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(|| Policy::builtin().expect("built-in policy"));

/// Small limits so each input runs fast; the code paths are the same as the defaults'.
pub const LIMITS: Limits = Limits {
    max_file_bytes: 256 * 1024,
    max_documents: 64,
    max_depth: 64,
    max_nodes: 20_000,
};

/// Every node's pointer and depth, walked without recursion.
fn nodes(value: &Value) -> Vec<(String, &Value, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), value, 0usize)];
    while let Some((pointer, node, depth)) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (k, v) in map {
                    stack.push((
                        format!("{pointer}/{}", Token::new(k).encoded()),
                        v,
                        depth + 1,
                    ));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    stack.push((format!("{pointer}/{i}"), v, depth + 1));
                }
            }
            _ => {}
        }
        out.push((pointer, node, depth));
        if out.len() > 50_000 {
            break;
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn check_span(span: &Span, len: usize, what: &str) {
    assert!(span.line >= 1 && span.column >= 1, "{what}: {span:?}");
    assert!(
        span.start <= span.end && span.end <= len,
        "{what}: {span:?} outside 0..{len}"
    );
}

/// The YAML layer on arbitrary bytes: never panics or overflows the stack, and whatever it
/// returns is consistent: every node of every document has a location inside the text, errors
/// have a position inside the text, values respect the depth limit, and the all-or-nothing
/// `parse_stream` agrees with `parse_stream_partial`.
pub fn yaml_parse(data: &[u8]) {
    let stream = parse_stream_partial(data, &LIMITS);
    if let Some(error) = &stream.error {
        assert!(error.line >= 1 && error.column >= 1, "{error:?}");
        assert!(error.offset <= data.len(), "{error:?}");
        assert!(!error.message.is_empty());
    }
    for document in &stream.documents {
        assert!(document.line >= 1);
        for (pointer, _, depth) in nodes(&document.value) {
            assert!(depth <= LIMITS.max_depth, "depth {depth} at {pointer}");
            let location = document
                .locations
                .get(&pointer)
                .unwrap_or_else(|| panic!("no location for {pointer:?}"));
            check_span(&location.value, data.len(), &pointer);
            if let Some(key) = &location.key {
                check_span(key, data.len(), &pointer);
            }
            if let Some(item) = &location.item {
                check_span(item, data.len(), &pointer);
            }
            check_span(&document.locations.locate(&pointer), data.len(), &pointer);
        }
        check_span(
            &document.locations.locate("/no/such/node/~1x/0"),
            data.len(),
            "missing node",
        );
    }
    match parse_stream(data, &LIMITS) {
        Ok(documents) => {
            assert!(stream.error.is_none());
            assert_eq!(documents.len(), stream.documents.len());
            for (a, b) in documents.iter().zip(&stream.documents) {
                assert_eq!(a.value, b.value);
            }
        }
        Err(error) => assert_eq!(Some(error), stream.error),
    }
}

fn engine_object(object: &Value) {
    let policy = &*POLICY;
    for f in evaluate(std::slice::from_ref(object), policy) {
        assert!(
            f.pointer.is_empty() || f.pointer.starts_with('/'),
            "{}: bad pointer {:?}",
            f.rule,
            f.pointer
        );
    }
    let first = probelint_policies::mutate(object, policy);
    let mut fixed = object.clone();
    if let Err(e) = json_patch::patch(&mut fixed, &first.patch.0) {
        panic!("the engine's patch does not apply: {e}\n{:#?}", first.patch);
    }
    let second = probelint_policies::mutate(&fixed, policy);
    assert!(
        second.patch.0.is_empty(),
        "mutate is not idempotent: second patch {:#?}\nafter first {:#?}",
        second.patch,
        first.patch
    );
    let analysis = Analysis::new(std::slice::from_ref(object), policy);
    for cx in analysis.containers() {
        let outcome = simulate(&scenario_for(cx.container, cx.container.load.slow, 3600.0));
        assert!(outcome.transitions.len() <= 200_000);
    }
}

/// The rule engine on arbitrary JSON: `evaluate` never panics, `fix::mutate`'s patch always
/// applies to the object it was computed for, mutating the result again changes nothing, and
/// the kubelet simulation of every container terminates. Arbitrary JSON rarely looks like a
/// workload, so the input is also tried as the pod spec of a Deployment and (when it is an
/// object) as a GPU container of a Pod.
pub fn engine_json(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    engine_object(&value);
    engine_object(&json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "annotations": {"probelint.io/model-load-seconds": "600"}},
        "spec": {"template": {"spec": value.clone()}},
    }));
    if let Value::Object(mut container) = value {
        container
            .entry("name")
            .or_insert_with(|| Value::String("c".into()));
        let resources = container.entry("resources").or_insert_with(|| json!({}));
        if let Value::Object(resources) = resources {
            resources.insert("limits".into(), json!({"nvidia.com/gpu": 1}));
        }
        engine_object(&json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [Value::Object(container)]},
        }));
    }
}

/// The fuzzed `--fix` applies unsafe fixes too (`--fix --unsafe-fixes`): every fix is held to
/// the same promises.
const UNSAFE_TOO: probelint_policies::Applicability = probelint_policies::Applicability::Unsafe;

fn source(bytes: Vec<u8>) -> Source {
    Source::in_memory("fuzz.yaml", bytes)
}

/// `probelint --fix` on arbitrary manifest text, minus the file write: the engine's fixes of
/// every object turned into text edits. Never panics; a fixed text parses into as many
/// documents as the original, and fixing it again changes nothing.
pub fn yaml_fix(data: &[u8]) {
    let plans = fix::plan(vec![source(data.to_vec())], &POLICY, &LIMITS, UNSAFE_TOO).plans;
    for plan in plans {
        let Ok(fixed) = plan.fixed else { continue };
        let before = parse_stream(data, &LIMITS).expect("only parsed files are fixed");
        let after = parse_stream(fixed.as_bytes(), &LIMITS)
            .unwrap_or_else(|e| panic!("the fixed text does not parse: {e}\n{fixed}"));
        assert_eq!(
            before.len(),
            after.len(),
            "documents lost or added\n{fixed}"
        );
        assert!(!plan.fixed_findings.is_empty());
        let again = fix::plan(
            vec![source(fixed.clone().into_bytes())],
            &POLICY,
            &LIMITS,
            UNSAFE_TOO,
        )
        .plans;
        for plan in again {
            if let Ok(twice) = plan.fixed {
                assert_eq!(twice, fixed, "--fix is not idempotent");
            }
        }
    }
}

/// Header of a `yaml_patch` input: one byte for the number of operations (1-4), then 4 bytes
/// per operation; the rest is the manifest text.
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

fn pointer(text: &str) -> PointerBuf {
    PointerBuf::parse(text).expect("pointer")
}

/// `probelint_yaml::patch::apply` with arbitrary JSON Patch operations on arbitrary manifest
/// text. Never panics; when it returns a text, that text reads back as exactly the patched
/// documents, and the operations are ones `json_patch` accepts.
pub fn yaml_patch(data: &[u8]) {
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
    let all = nodes(&documents[document].value);
    let values = values();
    let mut ops = Vec::new();
    for spec in header.chunks(OP_BYTES) {
        let (kind, which, value) = (spec[1] % 3, usize::from(spec[2]), spec[3]);
        let (path, node, _) = &all[which % all.len()];
        let value = values[usize::from(value) % values.len()].clone();
        ops.push(match kind {
            0 => {
                // add: a new key in a mapping, an item in a sequence, or over the node itself.
                let target = match node {
                    Value::Object(_) => format!("{path}/k{}", spec[0] % 3),
                    Value::Array(_) if spec[0] % 2 == 0 => format!("{path}/-"),
                    Value::Array(items) => {
                        format!("{path}/{}", usize::from(spec[0]) % (items.len() + 1))
                    }
                    _ => path.clone(),
                };
                PatchOperation::Add(AddOperation {
                    path: pointer(&target),
                    value,
                })
            }
            1 => PatchOperation::Remove(RemoveOperation {
                path: pointer(path),
            }),
            _ => PatchOperation::Replace(ReplaceOperation {
                path: pointer(path),
                value,
            }),
        });
    }
    let patch = [ObjectPatch {
        document,
        prefix: String::new(),
        ops: &ops,
    }];
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
    assert_eq!(
        got, expected,
        "the edited text reads back wrong\n{ops:?}\n---\n{out}"
    );
}
