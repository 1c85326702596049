//! Checks on the raw bytes before parsing, and the map from parser positions to
//! lines, columns and byte offsets.
//!
//! saphyr-parser reports positions as *character* indices (plus its own line/column). We report
//! lines and character columns to people and byte offsets to `--fix`, so every position goes
//! through [`SourceMap`], which answers both without ever walking more than a few dozen
//! characters: a file with one 30 MB line (minified JSON) must not make each lookup linear.

use super::error::{YamlError, YamlErrorKind};
use super::location::Span;
use super::tolerate::Rewritten;

/// Every `CHECKPOINT_STRIDE`-th character's byte offset is recorded for non-ASCII files, so
/// that char index → byte offset walks at most this many characters.
const CHECKPOINT_STRIDE: usize = 64;

const BOM: char = '\u{feff}';

/// Refuses what is not a UTF-8 text file, with the position of the first offending byte.
pub(super) fn check_text(src: &[u8]) -> Result<&str, YamlError> {
    // Nearly every manifest is printable ASCII, which passes every check below: one pass over
    // the bytes (in blocks without early exit, which the compiler vectorises) settles it.
    if is_printable_ascii(src)
        && let Ok(text) = std::str::from_utf8(src)
    {
        return Ok(text);
    }
    if let Some(encoding) = utf16_or_32(src) {
        return Err(YamlError {
            kind: YamlErrorKind::NotUtf8,
            message: format!(
                "the file is {encoding} (it starts with a {encoding} byte order mark); \
                 Kubernetes manifests must be UTF-8, so convert it (e.g. with iconv)"
            ),
            line: 1,
            column: 1,
            offset: 0,
        });
    }
    if let Some(offset) = src.iter().position(|&b| b == 0) {
        let (line, column) = raw_line_column(src, offset);
        return Err(YamlError {
            kind: YamlErrorKind::BinaryFile,
            message: format!(
                "the file contains a NUL byte (at byte offset {offset}); it looks like a binary \
                 file, not YAML"
            ),
            line,
            column,
            offset,
        });
    }
    let text = std::str::from_utf8(src).map_err(|e| {
        let offset = e.valid_up_to();
        let (line, column) = raw_line_column(src, offset);
        let byte = src.get(offset).copied().unwrap_or_default();
        YamlError {
            kind: YamlErrorKind::NotUtf8,
            message: format!(
                "the file is not valid UTF-8 (byte 0x{byte:02x} at byte offset {offset}); \
                 Kubernetes manifests must be UTF-8, so re-save the file as UTF-8"
            ),
            line,
            column,
            offset,
        }
    })?;
    if let Some((offset, c)) = text.char_indices().find(|&(_, c)| !is_yaml_printable(c)) {
        let (line, column) = raw_line_column(src, offset);
        return Err(YamlError {
            kind: YamlErrorKind::Syntax,
            message: format!(
                "control character U+{:04X} is not allowed in YAML (kubectl rejects it too); \
                 remove it or write it as an escape in a double-quoted string",
                u32::from(c)
            ),
            line,
            column,
            offset,
        });
    }
    Ok(text)
}

fn is_printable_ascii(src: &[u8]) -> bool {
    src.chunks(64).all(|block| {
        block.iter().fold(true, |ok, &b| {
            ok & (matches!(b, b' '..=b'~') | (b == b'\t') | (b == b'\n') | (b == b'\r'))
        })
    })
}

/// The characters go-yaml's reader accepts; anything else fails with "control characters are
/// not allowed". saphyr-parser checks this only where a token starts, so `a: b<BEL>c` would
/// otherwise load here and fail in the cluster.
fn is_yaml_printable(c: char) -> bool {
    matches!(c,
        '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}'
        | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}')
}

/// UTF-16 and UTF-32 files are valid text to an editor but full of NUL bytes to us; say what
/// they are instead of calling them binary.
fn utf16_or_32(src: &[u8]) -> Option<&'static str> {
    match src {
        [0x00, 0x00, 0xfe, 0xff, ..] | [0xff, 0xfe, 0x00, 0x00, ..] => Some("UTF-32"),
        [0xfe, 0xff, ..] | [0xff, 0xfe, ..] => Some("UTF-16"),
        _ => None,
    }
}

/// Line and column of a byte offset in bytes that may not be valid UTF-8: lines end at `\n`,
/// `\r\n` or a lone `\r` (as in [`SourceMap`]); columns count UTF-8 lead bytes.
fn raw_line_column(src: &[u8], offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let mut line = 1;
    let mut line_start = before
        .strip_prefix(BOM_BYTES)
        .map_or(0, |_| BOM_BYTES.len());
    for (i, &b) in before.iter().enumerate() {
        let ends_line = b == b'\n' || (b == b'\r' && src.get(i + 1) != Some(&b'\n'));
        if ends_line {
            line += 1;
            line_start = i + 1;
        }
    }
    let column = before
        .get(line_start..)
        .unwrap_or_default()
        .iter()
        .filter(|&&b| !is_continuation(b))
        .count()
        + 1;
    (line, column)
}

const BOM_BYTES: &[u8] = "\u{feff}".as_bytes();

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Byte offset of the start of every line after the first: lines end at `\n`, `\r\n` or a lone
/// `\r`, as go-yaml and editors count them. The one definition of a line for locations and for
/// quoting source lines.
pub fn line_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = text.as_bytes();
    memchr::memchr2_iter(b'\n', b'\r', bytes)
        .filter(move |&i| bytes.get(i) == Some(&b'\n') || bytes.get(i + 1) != Some(&b'\n'))
        .map(|i| i + 1)
}

/// Positions in one source text, built in a single pass over its bytes.
pub(super) struct SourceMap<'a> {
    pub(super) text: &'a str,
    /// What the YAML parser reads instead of `text`, where kubectl reads the stream differently
    /// (`split.rs`): as many characters on each line, so positions are the same in both.
    pub(super) parse: Option<String>,
    /// What the parser reads instead of `parse` (or `text`) where go-yaml reads what saphyr
    /// refuses (`tolerate.rs`), with spaces inserted: the parser's character indices go through
    /// [`SourceMap::original_index`].
    pub(super) tolerated: Option<Rewritten>,
    /// The part of `text` the parser reads, as byte offsets: all of it, except in a JSON stream
    /// (`json.rs`), whose values, and the YAML kubectl reads after them, are parsed one by one.
    /// `parse` and `tolerated` are of this part only.
    pub(super) window: (usize, usize),
    /// Character index in `text` of `window.0`: what the parser's character indices are offset by.
    pub(super) base: usize,
    /// For each line: (byte offset, char index) of its first character. Line 1 starts after a
    /// byte order mark, so that columns on the first line are what an editor shows.
    lines: Vec<(usize, usize)>,
    /// Byte offset of every `CHECKPOINT_STRIDE`-th character; empty for ASCII text, where
    /// char index and byte offset are the same.
    checkpoints: Vec<usize>,
}

impl<'a> SourceMap<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let ascii = text.is_ascii();
        let first = if text.starts_with(BOM) {
            (BOM.len_utf8(), 1)
        } else {
            (0, 0)
        };
        let mut lines = vec![first];
        let mut checkpoints = Vec::new();
        if ascii {
            lines.extend(line_starts(text).map(|i| (i, i)));
        } else {
            checkpoints.reserve(bytes.len() / CHECKPOINT_STRIDE + 1);
            let mut chars = 0;
            for (i, &b) in bytes.iter().enumerate() {
                if is_continuation(b) {
                    continue;
                }
                if chars % CHECKPOINT_STRIDE == 0 {
                    checkpoints.push(i);
                }
                chars += 1;
                if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
                    lines.push((i + 1, chars));
                }
            }
        }
        SourceMap {
            text,
            parse: None,
            tolerated: None,
            window: (0, text.len()),
            base: 0,
            lines,
            checkpoints,
        }
    }

    pub(super) fn text(&self) -> &'a str {
        self.text
    }

    /// The part of the file the parser reads (see [`SourceMap::window`]).
    pub(super) fn window_text(&self) -> &'a str {
        &self.text[self.window.0..self.window.1]
    }

    /// Reads only `from..to` (byte offsets of the file, `from` at character index `base`) from
    /// now on, as it is written.
    pub(super) fn set_window(&mut self, from: usize, to: usize, base: usize) {
        self.window = (from, to);
        self.base = base;
        self.parse = None;
        self.tolerated = None;
    }

    /// The text the YAML parser reads (see [`SourceMap::parse`]).
    pub(super) fn parser_text(&self) -> &str {
        match &self.tolerated {
            Some(rewritten) => &rewritten.text,
            None => self.parse.as_deref().unwrap_or(self.window_text()),
        }
    }

    /// The character index in the file of the parser's character `index`.
    pub(super) fn original_index(&self, index: usize) -> usize {
        self.base
            + self
                .tolerated
                .as_ref()
                .map_or(index, |rewritten| rewritten.original(index))
    }

    /// Byte offset of the character at `index` (clamped to the end of the text).
    pub(super) fn byte_at(&self, index: usize) -> usize {
        if self.checkpoints.is_empty() {
            return index.min(self.text.len());
        }
        let Some(&base) = self.checkpoints.get(index / CHECKPOINT_STRIDE) else {
            return self.text.len();
        };
        let rest = index % CHECKPOINT_STRIDE;
        self.text
            .get(base..)
            .and_then(|tail| tail.char_indices().nth(rest))
            .map_or(self.text.len(), |(i, _)| base + i)
    }

    /// 1-based line and character column of the character at `index`.
    pub(super) fn line_column(&self, index: usize) -> (usize, usize) {
        let line = self
            .lines
            .partition_point(|&(_, start)| start <= index)
            .max(1);
        let start = self.lines.get(line - 1).map_or(0, |&(_, c)| c);
        (line, index.saturating_sub(start) + 1)
    }

    /// The span between two character indices.
    pub(super) fn span(&self, start: usize, end: usize) -> Span {
        let (line, column) = self.line_column(start);
        let start_byte = self.byte_at(start);
        Span {
            line,
            column,
            start: start_byte,
            end: self.byte_at(end).max(start_byte),
        }
    }

    /// An error at the character at `index`.
    pub(super) fn error(
        &self,
        kind: YamlErrorKind,
        message: impl Into<String>,
        index: usize,
    ) -> YamlError {
        let (line, column) = self.line_column(index);
        YamlError {
            kind,
            message: message.into(),
            line,
            column,
            offset: self.byte_at(index),
        }
    }
}
