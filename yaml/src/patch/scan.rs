//! Small, panic-free questions about the source text: where a line starts and ends, what its
//! indentation is, and where a flow collection really closes.
//!
//! Every function takes byte offsets that came from the YAML layer's spans, but clamps them
//! anyway: a wrong offset must produce a refused fix, never a panic or a slice of half a
//! character.

/// The line break the file uses, from its first one: `\r\n`, `\r` alone (classic Mac OS) or
/// `\n`. Inserted lines use it so that a file keeps its line endings.
pub(super) fn newline(text: &str) -> &'static str {
    match text.find(['\n', '\r']) {
        Some(i) if text.as_bytes().get(i) == Some(&b'\r') => {
            if text.as_bytes().get(i + 1) == Some(&b'\n') {
                "\r\n"
            } else {
                "\r"
            }
        }
        _ => "\n",
    }
}

/// Whether the text ends with a line break (of any of the three kinds).
pub(super) fn ends_with_newline(text: &str) -> bool {
    text.ends_with(['\n', '\r'])
}

/// Byte offset of the start of the line holding `pos`. Lines end at `\n`, `\r\n` or a lone
/// `\r`, as the YAML layer counts them.
pub(super) fn line_start(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()
        .get(..pos)
        .and_then(|b| b.iter().rposition(|&c| c == b'\n' || c == b'\r'))
        .map_or(0, |i| i + 1)
}

/// Byte offset just past the line break ending the line holding `pos`, or the end of the text
/// when that line has none (a file without a final newline).
pub(super) fn line_end_after(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    let bytes = text.as_bytes();
    match bytes
        .get(pos..)
        .and_then(|b| b.iter().position(|&c| c == b'\n' || c == b'\r'))
    {
        Some(i) if bytes.get(pos + i) == Some(&b'\r') && bytes.get(pos + i + 1) == Some(&b'\n') => {
            pos + i + 2
        }
        Some(i) => pos + i + 1,
        None => text.len(),
    }
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
                while pos < end && !matches!(bytes.get(pos), Some(b'\n' | b'\r')) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_indentation() {
        let text = "a:\r\n  b: 1 # c\r\n  d: 2";
        assert_eq!(newline(text), "\r\n");
        assert_eq!(newline("a: 1\n"), "\n");
        assert_eq!(newline("a: 1\rb: 2\r"), "\r");
        let cr = "a:\r  b: 1 # c\r  d: 2\r";
        let d = cr.find("  d").unwrap_or(0);
        assert_eq!(line_start(cr, d + 2), d);
        assert_eq!(line_end_after(cr, 3), d);
        assert_eq!(skip_blanks_and_comments(cr, 9, cr.len()), d + 2);
        assert!(ends_with_newline(cr) && !ends_with_newline("a: 1"));
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
