//! Small, panic-free questions about the source text: where a line starts and ends, what its
//! indentation is, and where a flow collection really closes.
//!
//! Every function takes byte offsets that came from the YAML layer's spans, but clamps them
//! anyway: a wrong offset must produce a refused fix, never a panic or a slice of half a
//! character.

/// The line break the file uses: `\r\n` when its first line break is one, else `\n`. Inserted
/// lines use it so that a CRLF file stays CRLF.
pub(super) fn newline(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if i > 0 && text.as_bytes().get(i - 1) == Some(&b'\r') => "\r\n",
        _ => "\n",
    }
}

/// Byte offset of the start of the line holding `pos`.
pub(super) fn line_start(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()
        .get(..pos)
        .and_then(|b| b.iter().rposition(|&c| c == b'\n'))
        .map_or(0, |i| i + 1)
}

/// Byte offset just past the line break ending the line holding `pos`, or the end of the text
/// when that line has none (a file without a final newline).
pub(super) fn line_end_after(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()
        .get(pos..)
        .and_then(|b| b.iter().position(|&c| c == b'\n'))
        .map_or(text.len(), |i| pos + i + 1)
}

/// Whether only blanks stand between the start of its line and `pos`.
pub(super) fn first_on_line(text: &str, pos: usize) -> bool {
    let start = line_start(text, pos);
    text.as_bytes()
        .get(start..pos)
        .is_some_and(|b| b.iter().all(|&c| c == b' ' || c == b'\t'))
}

/// The blanks at the start of the line holding `pos`, verbatim.
pub(super) fn line_indent(text: &str, pos: usize) -> &str {
    let start = line_start(text, pos);
    let rest = text.get(start..).unwrap_or("");
    let len = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    rest.get(..len).unwrap_or("")
}

/// Where a node's text starts once its anchor (`&a`) and tag (`!!map`) are skipped: the
/// YAML layer's span includes them, the `{` or first key comes after.
pub(super) fn skip_properties(text: &str, start: usize, end: usize) -> usize {
    let bytes = text.as_bytes();
    let end = end.min(bytes.len());
    let mut pos = start.min(end);
    loop {
        match bytes.get(pos) {
            Some(b'&' | b'!') if pos < end => {
                while pos < end && !matches!(bytes.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
                    pos += 1;
                }
                pos = skip_blanks_and_comments(text, pos, end);
            }
            _ => return pos,
        }
    }
}

/// Skips blanks, line breaks and comments from `pos`, up to `end`.
pub(super) fn skip_blanks_and_comments(text: &str, pos: usize, end: usize) -> usize {
    let bytes = text.as_bytes();
    let end = end.min(bytes.len());
    let mut pos = pos.min(end);
    while pos < end {
        match bytes.get(pos) {
            Some(b' ' | b'\t' | b'\r' | b'\n') => pos += 1,
            Some(b'#') => {
                while pos < end && bytes.get(pos) != Some(&b'\n') {
                    pos += 1;
                }
            }
            _ => break,
        }
    }
    pos
}

/// Skips blanks and line breaks (not comments) from `pos`, up to `end`.
pub(super) fn skip_blanks(text: &str, pos: usize, end: usize) -> usize {
    let bytes = text.as_bytes();
    let end = end.min(bytes.len());
    let mut pos = pos.min(end);
    while pos < end && matches!(bytes.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        pos += 1;
    }
    pos
}

/// Walks back from `pos` over blanks and line breaks; returns the offset just past the last
/// other byte (or `floor`).
pub(super) fn back_over_blanks(text: &str, pos: usize, floor: usize) -> usize {
    let bytes = text.as_bytes();
    let mut pos = pos.min(bytes.len());
    while pos > floor && matches!(bytes.get(pos - 1), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        pos -= 1;
    }
    pos
}

/// The byte offset just past the `}` or `]` that closes the flow collection opening at `open`.
///
/// Needed because the YAML layer ends a flow collection's span at the next token, so it can
/// take in the blanks and a comment after the closing bracket. The scan knows just enough
/// YAML flow syntax to get the brackets right: quoted scalars (only where a scalar may start,
/// since `it's` is a plain scalar), comments (`#` after a blank) and nesting.
pub(super) fn flow_end(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    if !matches!(bytes.get(open), Some(b'{' | b'[')) {
        return None;
    }
    let mut depth = 0usize;
    let mut pos = open;
    // The last byte that was not a blank: decides whether a quote starts a quoted scalar.
    let mut prev = b' ';
    while let Some(&c) = bytes.get(pos) {
        match c {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(pos + 1);
                }
            }
            b'"' if matches!(prev, b'{' | b'[' | b',' | b':' | b'?') => {
                pos += 1;
                while let Some(&q) = bytes.get(pos) {
                    match q {
                        b'\\' => pos += 1,
                        b'"' => break,
                        _ => {}
                    }
                    pos += 1;
                }
                bytes.get(pos)?;
            }
            b'\'' if matches!(prev, b'{' | b'[' | b',' | b':' | b'?') => {
                pos += 1;
                loop {
                    match bytes.get(pos) {
                        None => return None,
                        Some(b'\'') if bytes.get(pos + 1) == Some(&b'\'') => pos += 2,
                        Some(b'\'') => break,
                        Some(_) => pos += 1,
                    }
                }
            }
            b'#' if pos > 0 && matches!(bytes.get(pos - 1), Some(b' ' | b'\t' | b'\n' | b'\r')) => {
                while bytes.get(pos).is_some_and(|&b| b != b'\n') {
                    pos += 1;
                }
                continue;
            }
            _ => {}
        }
        if !matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
            prev = c;
        }
        pos += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_end_skips_quotes_comments_and_nesting() {
        let text = "{a: \"x} # y\", b: [1, {c: 2}], d: it's} # {z}";
        assert_eq!(flow_end(text, 0), Some(text.find(" # {z}").unwrap_or(0)));
        let text = "[a, # ]\n b]";
        assert_eq!(flow_end(text, 0), Some(text.len()));
        assert_eq!(flow_end("{a: 'it''s}'}", 0), Some(13));
        assert_eq!(flow_end("{a: 1", 0), None);
        assert_eq!(flow_end("a", 0), None);
    }

    #[test]
    fn lines_and_indentation() {
        let text = "a:\r\n  b: 1 # c\r\n  d: 2";
        assert_eq!(newline(text), "\r\n");
        assert_eq!(newline("a: 1\n"), "\n");
        let b = text.find('b').unwrap_or(0);
        assert_eq!(line_start(text, b), 4);
        assert_eq!(line_end_after(text, b), text.find("  d").unwrap_or(0));
        assert_eq!(line_end_after(text, text.len() - 1), text.len());
        assert!(first_on_line(text, b));
        assert!(!first_on_line(text, b + 1));
        assert_eq!(line_indent(text, b), "  ");
        assert_eq!(skip_properties("&a !!map {x}", 0, 12), 9);
        assert_eq!(skip_blanks_and_comments("  # c\n  x", 0, 9), 8);
        assert_eq!(back_over_blanks("x  \n ", 5, 0), 1);
    }
}
