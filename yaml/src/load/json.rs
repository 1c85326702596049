//! A stream that kubectl reads as JSON.
//!
//! apimachinery's `YAMLOrJSONDecoder` (`pkg/util/yaml/decoder.go`) looks at the first 4,096
//! bytes of a stream: when the first one that is not white space (`unicode.IsSpace`) is `{`, it
//! reads the stream with Go's `json.Decoder`, as JSON values back to back (`{}{}`, or one per
//! line as `jq -c` writes them), each one document. On the first JSON syntax error it either
//! stops, when it has read two values or more ("an unambiguous JSON stream"), or, after none or
//! one, goes back to the end of the last value read, drops the white space after it up to and
//! including the first line break, and reads the rest as a YAML stream (cut at `---` lines as
//! usual), never switching back. So `{"a": 1}` then `b: 2` is two documents, and a `...` after
//! one JSON value is a YAML piece without a document, refused.
//!
//! [`read`] does the same. It finds where each JSON value ends with a scanner that follows Go's
//! (a top-level value ends where its text does: `{}{}` is two values, `01` is `0` then `1`),
//! then parses each value on its own, with the YAML parser over that part of the file (JSON is
//! YAML's flow syntax), so that every node keeps its line, column and byte offsets; the value
//! itself is the JSON reading of the same text, as the apiserver is sent those bytes. Files
//! that do not start with `{` never come here: one look at their first bytes.

use serde_json::Value;

use super::error::YamlErrorKind;
use super::source::SourceMap;
use super::{Limits, Stream, builder, read_yaml, tolerate};

/// How far `GuessJSONStream` looks for the `{` (kubectl's buffer size).
const GUESS_BYTES: usize = 4096;

/// Whether kubectl reads `text` as a JSON stream: its first character that is not white space
/// is `{`, within the first [`GUESS_BYTES`] bytes. A byte order mark is not white space to Go
/// either, so a file that starts with one is YAML.
pub(super) fn looks_like_json(text: &str) -> bool {
    let trimmed = text.trim_start_matches(char::is_whitespace);
    let at = text.len() - trimmed.len();
    at < GUESS_BYTES && trimmed.starts_with('{')
}

/// Reads a stream that [`looks_like_json`] as kubectl does (see the module's documentation).
pub(super) fn read(map: &mut SourceMap<'_>, limits: &Limits) -> Stream {
    let text = map.text();
    let bytes = text.as_bytes();
    let mut stream = Stream {
        documents: Vec::new(),
        error: None,
        divergences: Vec::new(),
    };
    let mut chars = CharIndex::new(text);
    // End of the last value read, and how many were read.
    let mut consumed = 0usize;
    let mut count = 0usize;
    loop {
        let start = skip_json_space(bytes, consumed);
        if start == bytes.len() {
            return stream;
        }
        let fault = match value_end(bytes, start) {
            Ok(end) => end,
            Err(fault) => {
                let index = chars.at(fault.at);
                let error = map.error(
                    YamlErrorKind::Syntax,
                    format!(
                        "kubectl reads this file as a stream of JSON values (it starts with \
                         `{{`), and this is not JSON (json: {}){}",
                        fault.message,
                        if count > 1 {
                            "; after two JSON values it reads nothing else"
                        } else {
                            ""
                        }
                    ),
                    index,
                );
                if count > 1 {
                    stream.error = Some(error);
                    return stream;
                }
                let from = after_blanks(text, consumed);
                map.set_window(from, text.len(), chars.at(from));
                let rest = read_yaml(map, limits);
                // kubectl says why the JSON failed when the YAML it tried instead fails at once.
                let first_fails = rest.documents.is_empty() && count == 1;
                stream.documents.extend(rest.documents);
                stream.divergences.extend(rest.divergences);
                stream.error = rest
                    .error
                    .map(|yaml| if first_fails { error } else { yaml });
                return stream;
            }
        };
        let end = fault;
        count += 1;
        if count > limits.max_documents {
            stream.error = Some(map.error(
                YamlErrorKind::TooManyDocuments,
                format!(
                    "more than {} documents in one file; split the file",
                    limits.max_documents
                ),
                chars.at(start),
            ));
            return stream;
        }
        map.set_window(start, end, chars.at(start));
        // Tabs go-yaml refuses in YAML are JSON white space here (`[1\n\t,2]`).
        map.tolerated = tolerate::tolerate(map.parser_text()).rewritten;
        let read = builder::parse(map, limits);
        stream.divergences.extend(read.divergences);
        if let Some(error) = read.error {
            stream.error = Some(error);
            return stream;
        }
        // The bytes are what kubectl sends; the YAML reading gave the positions. They agree
        // but where JSON and YAML 1.1 read a number differently (`1.0`, `1e3`), or the JSON
        // nests too deep for serde_json, whose reading is then the YAML one.
        let json = serde_json::from_str::<Value>(&text[start..end]).ok();
        for mut document in read.documents {
            if let Some(value) = json.clone() {
                document.value = value;
            }
            stream.documents.push(document);
        }
        consumed = end;
    }
}

/// Character index of byte offsets, counted from the last one asked for.
struct CharIndex<'a> {
    text: &'a str,
    ascii: bool,
    byte: usize,
    char: usize,
}

impl<'a> CharIndex<'a> {
    fn new(text: &'a str) -> Self {
        CharIndex {
            text,
            ascii: text.is_ascii(),
            byte: 0,
            char: 0,
        }
    }

    fn at(&mut self, byte: usize) -> usize {
        if self.ascii {
            return byte;
        }
        if byte < self.byte {
            (self.byte, self.char) = (0, 0);
        }
        self.char += self.text[self.byte..byte].chars().count();
        self.byte = byte;
        self.char
    }
}

/// After `at`, past white space (`unicode.IsSpace`) up to and including the first `\n`, as
/// `consumeWhitespace` drops it before switching to YAML.
fn after_blanks(text: &str, at: usize) -> usize {
    for (i, c) in text[at..].char_indices() {
        if c == '\n' {
            return at + i + 1;
        }
        if !c.is_whitespace() {
            return at + i;
        }
    }
    text.len()
}

fn skip_json_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// Where Go's JSON scanner stops, and what it says.
#[derive(Debug)]
struct Fault {
    at: usize,
    message: String,
}

fn fault(bytes: &[u8], at: usize, context: &str) -> Fault {
    let message = match bytes.get(at) {
        None => "unexpected EOF".to_owned(),
        Some(b'\'') => format!("invalid character '\\'' {context}"),
        Some(&b) if b.is_ascii_graphic() || b == b' ' => {
            format!("invalid character '{}' {context}", char::from(b))
        }
        Some(&b) => format!("invalid character 0x{b:02x} {context}"),
    };
    Fault { at, message }
}

/// What the scanner expects next inside a value.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    Value,
    ValueOrClose,
    KeyOrClose,
    Key,
    Colon,
    CommaOrClose,
}

/// The end of the JSON value that starts at `start` (not white space), or where it is not JSON.
/// Iterative: the nesting is kept in a `Vec`, not on the stack.
fn value_end(bytes: &[u8], start: usize) -> Result<usize, Fault> {
    let mut open: Vec<u8> = Vec::new();
    let mut at = start;
    let mut expect = Expect::Value;
    loop {
        if !open.is_empty() {
            at = skip_json_space(bytes, at);
        }
        let Some(&c) = bytes.get(at) else {
            return Err(fault(bytes, at, ""));
        };
        let mut done = false;
        match expect {
            Expect::ValueOrClose if c == b']' => {
                open.pop();
                at += 1;
                done = true;
            }
            Expect::KeyOrClose if c == b'}' => {
                open.pop();
                at += 1;
                done = true;
            }
            Expect::KeyOrClose | Expect::Key => {
                if c != b'"' {
                    return Err(fault(
                        bytes,
                        at,
                        "looking for beginning of object key string",
                    ));
                }
                at = string_end(bytes, at)?;
                expect = Expect::Colon;
            }
            Expect::Colon => {
                if c != b':' {
                    return Err(fault(bytes, at, "after object key"));
                }
                at += 1;
                expect = Expect::Value;
            }
            Expect::CommaOrClose => {
                let in_object = open.last() == Some(&b'{');
                let close = if in_object { b'}' } else { b']' };
                if c == b',' {
                    at += 1;
                    expect = if in_object {
                        Expect::Key
                    } else {
                        Expect::Value
                    };
                } else if c == close {
                    open.pop();
                    at += 1;
                    done = true;
                } else if in_object {
                    return Err(fault(bytes, at, "after object key:value pair"));
                } else {
                    return Err(fault(bytes, at, "after array element"));
                }
            }
            Expect::Value | Expect::ValueOrClose => match c {
                b'{' => {
                    open.push(c);
                    at += 1;
                    expect = Expect::KeyOrClose;
                }
                b'[' => {
                    open.push(c);
                    at += 1;
                    expect = Expect::ValueOrClose;
                }
                b'"' => {
                    at = string_end(bytes, at)?;
                    done = true;
                }
                b'-' | b'0'..=b'9' => {
                    at = number_end(bytes, at)?;
                    done = true;
                }
                b't' | b'f' | b'n' => {
                    let word: &[u8] = match c {
                        b't' => b"true",
                        b'f' => b"false",
                        _ => b"null",
                    };
                    for (i, &expected) in word.iter().enumerate().skip(1) {
                        if bytes.get(at + i) != Some(&expected) {
                            let context = format!(
                                "in literal {} (expecting '{}')",
                                String::from_utf8_lossy(word),
                                char::from(expected)
                            );
                            return Err(fault(bytes, at + i, &context));
                        }
                    }
                    at += word.len();
                    done = true;
                }
                _ => return Err(fault(bytes, at, "looking for beginning of value")),
            },
        }
        if done {
            if open.is_empty() {
                return Ok(at);
            }
            expect = Expect::CommaOrClose;
        }
    }
}

/// The end of the string whose `"` is at `at`.
fn string_end(bytes: &[u8], at: usize) -> Result<usize, Fault> {
    let mut i = at + 1;
    loop {
        match bytes.get(i) {
            None => return Err(fault(bytes, i, "")),
            Some(b'"') => return Ok(i + 1),
            Some(b'\\') => {
                i += 1;
                match bytes.get(i) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 1,
                    Some(b'u') => {
                        for k in 1..=4 {
                            if !bytes.get(i + k).is_some_and(u8::is_ascii_hexdigit) {
                                return Err(fault(
                                    bytes,
                                    i + k,
                                    "in \\u hexadecimal character escape",
                                ));
                            }
                        }
                        i += 5;
                    }
                    _ => return Err(fault(bytes, i, "in string escape code")),
                }
            }
            Some(&b) if b < 0x20 => return Err(fault(bytes, i, "in string literal")),
            Some(_) => i += 1,
        }
    }
}

/// The end of the number that starts at `at`: where its text cannot go on.
fn number_end(bytes: &[u8], at: usize) -> Result<usize, Fault> {
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let digits = |mut i: usize| {
        while digit(i) {
            i += 1;
        }
        i
    };
    let mut i = at;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
        if !digit(i) {
            return Err(fault(bytes, i, "in numeric literal"));
        }
    }
    i = if bytes.get(i) == Some(&b'0') {
        i + 1
    } else {
        digits(i)
    };
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if !digit(i) {
            return Err(fault(bytes, i, "after decimal point in numeric literal"));
        }
        i = digits(i);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digit(i) {
            return Err(fault(bytes, i, "in exponent of numeric literal"));
        }
        i = digits(i);
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_end_where_go_ends_them() {
        let end = |s: &str| value_end(s.as_bytes(), 0).map_err(|f| (f.at, f.message));
        assert_eq!(end("{}{}"), Ok(2));
        assert_eq!(end(r#"{"a": [1, {"b": "x\"}"}]}  "#), Ok(25));
        assert_eq!(end("01"), Ok(1));
        assert_eq!(end("-1.5e+3x"), Ok(7));
        assert_eq!(end("true1"), Ok(4));
        assert_eq!(
            end("{a: 1}"),
            Err((
                1,
                "invalid character 'a' looking for beginning of object key string".to_owned()
            ))
        );
        assert_eq!(end(r#"{"a": 1"#), Err((7, "unexpected EOF".to_owned())));
        assert_eq!(
            end("..."),
            Err((
                0,
                "invalid character '.' looking for beginning of value".to_owned()
            ))
        );
        assert_eq!(
            end("[1 2]"),
            Err((3, "invalid character '2' after array element".to_owned()))
        );
    }

    #[test]
    fn only_a_brace_first_makes_a_json_stream() {
        assert!(looks_like_json(" \n\t{\"a\": 1}"));
        assert!(!looks_like_json("\u{feff}{\"a\": 1}"));
        assert!(!looks_like_json("[{\"a\": 1}]"));
        assert!(!looks_like_json(&format!(
            "{}{{}}",
            " ".repeat(GUESS_BYTES)
        )));
    }
}
