//! What a review will cost to evaluate, known before it is parsed: one pass over the body's
//! bytes counts what parsing would build (values, object members, strings), and the review's
//! memory is reserved from those counts rather than from an assumed multiple of its length.
//!
//! Why counts and not bytes: parsing builds a fixed-size node for every value however few bytes
//! it took (`0,` is two bytes and a whole node; the same node pretty-printed is ten), so a
//! compact body costs several times what the same object costs pretty-printed. Measured per
//! shape with `examples/review_memory.rs` (docs/reliability.md, "What a review costs").

/// Bytes one parsed value takes: the value itself (`serde_json::Value` with `preserve_order`
/// is 72 bytes) and its share of the array or map that holds it (vectors grow by doubling).
/// Measured: 160 (a million numbers in an array); 200 leaves a margin.
pub const BYTES_PER_VALUE: usize = 200;
/// Bytes one object member takes on top of its value: the map entry (hash, key, value) and its
/// index. Measured with the key's allocation: 258 per key, value and member; 120 leaves a
/// margin.
pub const BYTES_PER_MEMBER: usize = 120;
/// Bytes one string takes on top of its text: the allocator's rounding.
pub const BYTES_PER_STRING: usize = 16;
/// What the engine and the answer build per object on top of what parsing does: the findings
/// of a GPU container (its three objects: the container, `resources`, `limits`) and their
/// messages, warnings and audit annotation. Measured at ~3,800 per object for 10,000 of the
/// smallest GPU containers (`examples/review_memory.rs minimal`); 4,500 leaves a margin. Counted
/// for every object, container or not: a review with many objects that are not containers is
/// overestimated, never one with many containers under.
pub const BYTES_PER_OBJECT: usize = 4_500;

/// serde_json's recursion limit: it refuses a body nested deeper (with a position) without
/// building anything past it.
pub const PARSE_DEPTH: usize = 128;

/// Counts a body piece by piece, as it arrives: after each piece, [`Scanner::shape`] is the
/// shape of what came so far, so the memory of a review is reserved as its bytes arrive, from
/// what those bytes will build.
#[derive(Debug, Default, Clone)]
pub struct Scanner {
    shape: Shape,
    /// How deep in objects and arrays the next byte is.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The last byte outside strings that was not whitespace (0: none yet).
    previous: u8,
}

impl Scanner {
    pub fn feed(&mut self, piece: &[u8]) {
        let shape = &mut self.shape;
        shape.bytes += piece.len();
        for &byte in piece {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    shape.string_bytes += 1;
                } else if byte == b'\\' {
                    self.escaped = true;
                    shape.string_bytes += 1;
                } else if byte == b'"' {
                    self.in_string = false;
                    self.previous = b'"';
                } else {
                    shape.string_bytes += 1;
                }
                continue;
            }
            // Past the parser's depth limit nothing is built: the body is refused there.
            let built = self.depth <= PARSE_DEPTH;
            match byte {
                b'"' => {
                    self.in_string = true;
                    shape.strings += usize::from(built);
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth <= PARSE_DEPTH {
                        shape.containers += 1;
                        shape.objects += usize::from(byte == b'{');
                    }
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b':' => shape.members += usize::from(built),
                b' ' | b'\t' | b'\n' | b'\r' => continue,
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
                    if matches!(self.previous, 0 | b'[' | b',' | b':') =>
                {
                    shape.scalars += usize::from(built);
                }
                _ => {}
            }
            self.previous = byte;
        }
    }

    /// The shape of what was fed so far.
    pub fn shape(&self) -> Shape {
        self.shape
    }
}

/// What a JSON body holds, counted without building anything. Tolerant of broken JSON (the
/// parser refuses it later, with a position): the counts are then only what the bytes look
/// like, which is all the budget needs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The body's length.
    pub bytes: usize,
    /// Objects (`{`).
    pub objects: usize,
    /// Objects and arrays.
    pub containers: usize,
    /// Numbers, `true`, `false`, `null`.
    pub scalars: usize,
    /// Object members: each is a key and a map entry.
    pub members: usize,
    /// Strings, keys included: each is its own allocation once parsed.
    pub strings: usize,
    /// Bytes inside strings, keys included (escapes counted as written).
    pub string_bytes: usize,
}

impl Shape {
    /// Counts `body` in one pass.
    pub fn of(body: &[u8]) -> Shape {
        let mut scanner = Scanner::default();
        scanner.feed(body);
        scanner.shape()
    }

    /// Values of every kind (objects, arrays, strings, numbers, literals); keys are not values.
    pub fn values(&self) -> usize {
        // Every string is a value except the keys, one per member.
        self.containers + self.scalars + self.strings.saturating_sub(self.members)
    }

    /// The memory evaluating the review takes beyond its body: what parsing builds, and what
    /// the engine and the answer build from it, at the measured worst per value, member,
    /// string and object.
    pub fn evaluation_bytes(&self) -> usize {
        self.values()
            .saturating_mul(BYTES_PER_VALUE)
            .saturating_add(self.members.saturating_mul(BYTES_PER_MEMBER))
            .saturating_add(self.strings.saturating_mul(BYTES_PER_STRING))
            .saturating_add(self.string_bytes)
            .saturating_add(self.objects.saturating_mul(BYTES_PER_OBJECT))
    }

    /// The review's whole cost while it is evaluated: its body and [`Shape::evaluation_bytes`].
    pub fn review_bytes(&self) -> usize {
        self.bytes.saturating_add(self.evaluation_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> (usize, usize, usize, usize) {
        let s = Shape::of(text.as_bytes());
        (s.values(), s.members, s.strings, s.string_bytes)
    }

    #[test]
    fn counts_what_parsing_would_build_compact_or_pretty() {
        // {"a": [1, -2.5e3, true, null, "x\"y"], "b": {}}: the object, the array, five
        // scalars, the inner object; two members; three strings (two keys).
        let compact = r#"{"a":[1,-2.5e3,true,null,"x\"y"],"b":{}}"#;
        assert_eq!(shape(compact), (8, 2, 3, 6));
        assert_eq!(Shape::of(compact.as_bytes()).objects, 2);
        let value: serde_json::Value = serde_json::from_str(compact).expect("JSON");
        let pretty = serde_json::to_string_pretty(&value).expect("JSON");
        assert_eq!(shape(&pretty), (8, 2, 3, 6));
        // Colons, braces and digits inside strings are text.
        assert_eq!(shape(r#"["{:[1,", "\\"]"#), (3, 0, 2, 7));
    }

    #[test]
    fn a_body_counted_piece_by_piece_has_the_shape_of_the_whole() {
        let body = br#"{"a": [1, -2.5e3, true, null, "x\"y{"], "b": {"c": "\\"}}"#;
        for piece in 1..body.len() {
            let mut scanner = Scanner::default();
            for chunk in body.chunks(piece) {
                scanner.feed(chunk);
            }
            assert_eq!(scanner.shape(), Shape::of(body), "in pieces of {piece}");
        }
    }

    #[test]
    fn a_compact_body_costs_more_than_the_same_object_pretty_printed_per_byte() {
        let value = serde_json::json!({"list": vec![0; 1000]});
        let compact = serde_json::to_vec(&value).expect("JSON");
        let pretty = serde_json::to_vec_pretty(&value).expect("JSON");
        let (c, p) = (Shape::of(&compact), Shape::of(&pretty));
        assert_eq!(
            c.evaluation_bytes(),
            p.evaluation_bytes(),
            "the same object"
        );
        assert!(
            c.review_bytes() / c.bytes > 3 * (p.review_bytes() / p.bytes),
            "{c:?} vs {p:?}"
        );
    }

    #[test]
    fn nothing_past_the_parsers_depth_limit_is_counted() {
        let deep = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
        let shape = Shape::of(deep.as_bytes());
        assert_eq!(shape.objects, PARSE_DEPTH);
        assert_eq!((shape.members, shape.strings), (PARSE_DEPTH, PARSE_DEPTH));
        // The parser agrees: it refuses the body at that depth.
        let err = serde_json::from_str::<serde_json::Value>(&deep).expect_err("too deep");
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn broken_json_is_counted_without_panicking() {
        for text in ["", "\"", "\\", "{", "]]]", "\"\\", ":::", "tfn-"] {
            let _ = Shape::of(text.as_bytes());
        }
    }
}
