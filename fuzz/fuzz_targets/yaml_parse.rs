//! The YAML layer on arbitrary bytes: never panics, never overflows the stack, and whatever it
//! returns is consistent: every node of every document has a location inside the text, errors
//! have a position inside the text, values respect the depth limit, and the all-or-nothing
//! `parse_stream` agrees with `parse_stream_partial`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelint::yaml::{Limits, Span, escape_pointer_token, parse_stream, parse_stream_partial};
use serde_json::Value;

/// Small limits so each input runs fast; the code paths are the same as the defaults'.
const LIMITS: Limits = Limits {
    max_file_bytes: 256 * 1024,
    max_documents: 64,
    max_depth: 64,
    max_nodes: 20_000,
};

fn check_span(span: &Span, len: usize, what: &str) {
    assert!(span.line >= 1 && span.column >= 1, "{what}: {span:?}");
    assert!(
        span.start <= span.end && span.end <= len,
        "{what}: {span:?} outside 0..{len}"
    );
}

/// Every node's pointer, iteratively (the value is at most `max_depth` deep, but no recursion
/// is needed to walk it).
fn pointers(value: &Value) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), value, 0usize)];
    while let Some((pointer, node, depth)) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (k, v) in map {
                    stack.push((
                        format!("{pointer}/{}", escape_pointer_token(k)),
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
        out.push((pointer, depth));
        if out.len() > 50_000 {
            break;
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let stream = parse_stream_partial(data, &LIMITS);
    if let Some(error) = &stream.error {
        assert!(error.line >= 1 && error.column >= 1, "{error:?}");
        assert!(error.offset <= data.len(), "{error:?}");
        assert!(!error.message.is_empty());
    }
    for document in &stream.documents {
        assert!(document.line >= 1);
        for (pointer, depth) in pointers(&document.value) {
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
        // Pointers to nothing fall back to a real place too.
        check_span(
            &document.locations.locate("/no/such/node/~1x/0"),
            data.len(),
            "missing",
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
});
