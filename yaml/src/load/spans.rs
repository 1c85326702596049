//! Where saphyr-parser's spans do not say what `--fix` needs, the text does: the `-` of a block
//! sequence item (saphyr reports none), a block scalar's `|`/`>` header and its end before the
//! trailing blank lines, and the first `-` of an indentless sequence. Each function reads the
//! source around an event; none keeps state.

use saphyr_parser::{ScalarStyle, Span as RawSpan};

use super::location::Span;
use super::source::SourceMap;

/// The `-` before a node that starts an item of a block sequence: the first thing after
/// character `prev_end` (where the previous event ended) other than blanks and comments.
/// The caller knows whether the node is in a block sequence at all.
pub(super) fn item_indicator(
    source: &SourceMap<'_>,
    prev_end: usize,
    node_start: usize,
    node_is_empty: bool,
) -> Option<Span> {
    let (byte, index) = skip_gap(source, prev_end, node_start, &[])?;
    let text = source.text().as_bytes();
    let before_node = index < node_start || (index == node_start && node_is_empty);
    let is_indicator = text.get(byte) == Some(&b'-')
        && text
            .get(byte + 1)
            .is_none_or(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'));
    (before_node && is_indicator).then(|| {
        let (line, column) = source.line_column(index);
        Span {
            line,
            column,
            start: byte,
            end: byte + 1,
        }
    })
}

/// Walks from character `from` over blanks, line breaks, comments and the given
/// indicators (each followed by a blank), up to character `limit` inclusive; returns the
/// (byte, char index) of the first other character.
fn skip_gap(
    source: &SourceMap<'_>,
    from: usize,
    limit: usize,
    indicators: &[u8],
) -> Option<(usize, usize)> {
    let text = source.text();
    let start = source.byte_at(from);
    let mut index = from;
    let mut in_comment = false;
    let mut chars = text.get(start..)?.char_indices().peekable();
    while let Some((offset, c)) = chars.next() {
        if index > limit {
            return None;
        }
        let byte = start + offset;
        if in_comment {
            in_comment = c != '\n' && c != '\r';
        } else if c == '#' {
            in_comment = true;
        } else if !matches!(c, ' ' | '\t' | '\r' | '\n') {
            let blank_after = chars
                .peek()
                .is_none_or(|&(_, n)| matches!(n, ' ' | '\t' | '\r' | '\n'));
            let skippable = c.is_ascii() && indicators.contains(&(c as u8)) && blank_after;
            if !skippable {
                return Some((byte, index));
            }
        }
        index += 1;
    }
    None
}

/// The span of a scalar. saphyr starts a block scalar's span at its first content line and
/// ends it after the trailing blank lines; here it runs from the `|`/`>` header (or the
/// tag/anchor before it) to the last non-blank character. `prev_end` is the character just
/// past the previous event, where the search for the header starts.
pub(super) fn scalar_span(
    source: &SourceMap<'_>,
    prev_end: usize,
    style: ScalarStyle,
    span: RawSpan,
) -> Span {
    let start = span.start.index();
    let end = span.end.index();
    if matches!(style, ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted) {
        // saphyr ends a quoted scalar's span where the next token starts, over the blanks and
        // comment after the closing quote; it ends at that quote.
        let mut result = source.span(start, end);
        if let Some(close) = closing_quote(source.text(), result.start, result.end, style) {
            result.end = close + 1;
        }
        return result;
    }
    if !matches!(style, ScalarStyle::Literal | ScalarStyle::Folded) {
        return source.span(start, end);
    }
    let text = source.text().as_bytes();
    let mut header = start;
    let first = text.get(source.byte_at(start)).copied();
    // With a tag or anchor the span already starts before the header.
    if !matches!(first, Some(b'&' | b'!'))
        && let Some((byte, index)) = skip_gap(source, prev_end, start, b":-?")
        && matches!(text.get(byte), Some(b'|' | b'>'))
        && index <= start
    {
        header = index;
    }
    let mut result = source.span(header, end);
    while result.end > result.start
        && matches!(text.get(result.end - 1), Some(b' ' | b'\t' | b'\r' | b'\n'))
    {
        result.end -= 1;
    }
    result
}

/// Byte offset of the quote that closes the quoted scalar whose span (from saphyr) is
/// `start..end`: past any anchor and tag before it, the opening quote, then the first `"` not
/// escaped by `\\` (double-quoted) or the first `'` not doubled (single-quoted).
fn closing_quote(text: &str, start: usize, end: usize, style: ScalarStyle) -> Option<usize> {
    let bytes = text.as_bytes().get(..end)?;
    let quote = if style == ScalarStyle::DoubleQuoted {
        b'"'
    } else {
        b'\''
    };
    let mut at = start;
    // Properties (`&anchor`, `!tag`), each followed by blanks or a line break.
    while matches!(bytes.get(at), Some(b'&' | b'!')) {
        while bytes.get(at).is_some_and(|b| !b.is_ascii_whitespace()) {
            at += 1;
        }
        while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
    }
    if bytes.get(at) != Some(&quote) {
        return None;
    }
    at += 1;
    while let Some(jump) = memchr::memchr2(quote, b'\\', bytes.get(at..)?) {
        at += jump;
        let b = bytes[at];
        if b == b'\\' && quote == b'"' {
            at += 2;
        } else if b == quote {
            if quote == b'\'' && bytes.get(at + 1) == Some(&b'\'') {
                at += 2;
            } else {
                return Some(at);
            }
        } else {
            at += 1;
        }
    }
    None
}

/// Character index of the first `-` of a block sequence whose start event ends at `end`.
///
/// saphyr puts the start of an indented block sequence on its first `-`, but the start of
/// an indentless one (`key:` then `- item` in the same column, only possible as a block
/// mapping's value) after that `-` and the blanks following it. The gap scan for the first
/// item must begin at the `-` either way.
pub(super) fn first_dash(source: &SourceMap<'_>, end: usize, parent_is_block_map: bool) -> usize {
    if !parent_is_block_map {
        return end;
    }
    let text = source.text().as_bytes();
    let mut byte = source.byte_at(end);
    let mut index = end;
    while byte > 0 && matches!(text.get(byte - 1), Some(b' ' | b'\t')) {
        byte -= 1;
        index -= 1;
    }
    if byte > 0 && text.get(byte - 1) == Some(&b'-') {
        index - 1
    } else {
        end
    }
}
