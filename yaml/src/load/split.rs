//! Where a stream's documents end, as kubectl reads it.
//!
//! kubectl does not hand a file to a YAML parser whole: apimachinery's `YAMLReader`
//! (`pkg/util/yaml/decoder.go`) first cuts it into documents, line by line, and parses each on
//! its own. A line is what ends at `\n` (`bufio.Reader.ReadLine`: a `\r` before the `\n` is
//! dropped, a lone `\r` ends nothing). A line that starts with `---` is a separator when what
//! follows it, trimmed of Unicode white space (`strings.TrimSpace`), is empty or starts with
//! `#`; when anything else follows, kubectl refuses the whole stream ("invalid Yaml document
//! separator"). YAML agrees only where `---` is followed by a blank or the end of the line:
//! `---#`, `---#: |` or `---` followed by a no-break space are text to YAML, so a file can
//! hold, to kubectl, a document that a YAML reading of it never sees.
//!
//! [`kubectl_separators`] finds those lines before parsing. Where YAML reads one differently,
//! the text given to the parser has the rest of that line blanked (same characters, same
//! lines: every position stays the original's), and the line is reported. A JSON stream (the
//! first non-blank character is `{`) is read by kubectl as JSON (`json.rs`): only what it reads
//! as YAML after the JSON values is cut here.

use super::error::{YamlError, YamlErrorKind};
use super::source::SourceMap;

/// What the separators of a stream come to.
pub(super) struct Separators {
    /// The text to parse, when it differs from the source: divergent separators blanked, and
    /// cut before a separator kubectl refuses.
    pub(super) text: Option<String>,
    /// Each separator kubectl reads where YAML reads text.
    pub(super) divergences: Vec<YamlError>,
    /// The first separator kubectl refuses: nothing from its line on is read.
    pub(super) refused: Option<YamlError>,
    /// Byte offset of the last separator line before the refused one (0 when there
    /// is none): kubectl refuses the separator before it returns the document that ends there,
    /// so nothing from this offset on is read either.
    pub(super) refused_from: usize,
}

/// Finds the lines kubectl splits `source` at (see the module's documentation).
pub(super) fn kubectl_separators(source: &SourceMap<'_>) -> Separators {
    // Offsets here are of the window; `refused_from` is made the file's at the end.
    let text = source.window_text();
    let mut found = Separators {
        text: None,
        divergences: Vec::new(),
        refused: None,
        refused_from: 0,
    };
    // Char index of each byte offset visited, for positions: counted as the lines go by.
    let mut chars = source.base;
    let mut start = 0usize;
    let mut blanked: Vec<(usize, usize)> = Vec::new();
    let mut cut: Option<usize> = None;
    // Whether the piece of the stream since the last separator holds anything but blank lines
    // and comments, or starts with its `---`: apimachinery's YAMLReader drops a separator line
    // that ends a piece, but keeps one that comes while its buffer is empty (at the start of
    // the stream, or after another separator), and go-yaml reads that `---` as an explicit
    // document.
    let mut content = false;
    let mut buffer_empty = true;
    // Inside a piece after a directive that ends its document: nothing is read up to the next
    // separator.
    let mut unread = false;
    while start < text.len() {
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = &text[start..end];
        if unread && !line.starts_with("---") {
            blanked.push((start, end));
        } else if content && is_directive(line) {
            // go-yaml scans a `%YAML` or `%TAG` line as a directive wherever it stands: it
            // ends the document before it, and kubectl reads only the first document of each
            // piece it cuts.
            found.divergences.push(source.error(
                YamlErrorKind::AfterDocumentEnd,
                "kubectl never reads this or anything after it up to the next `---` line: \
                 go-yaml ends the document at a directive, and kubectl reads one document \
                 between `---` lines; remove the directive",
                chars,
            ));
            unread = true;
            blanked.push((start, end));
        }
        if !content {
            let trimmed = line.trim_start_matches([' ', '\t', '\r', '\u{feff}']);
            let refusal = if let Some(tail) = line.strip_prefix("...")
                && tail
                    .trim_start_matches([' ', '\t', '\r'])
                    .chars()
                    .next()
                    .is_none_or(|c| c == '#')
            {
                // go-yaml reads each piece as one stream: a document end marker before any
                // document is an error there, and kubectl stops at it.
                Some(
                    "kubectl refuses this file: a document end marker (`...`) with no document \
                     before it since the last `---` (yaml: \"did not find expected node \
                     content\"); remove the `...`",
                )
            } else if line.trim_start_matches('\u{feff}').starts_with('%') {
                // A directive must be followed by `---`, which ends the piece kubectl hands to
                // go-yaml: the directive is left in a piece without a document.
                Some(
                    "kubectl refuses this file: it cuts the stream at the `---` after this \
                     directive, leaving the directive without a document (yaml: \"did not find \
                     expected <document start>\"); remove the directive",
                )
            } else {
                None
            };
            if let Some(message) = refusal {
                found.refused = Some(source.error(YamlErrorKind::Syntax, message, chars));
                found.refused_from = start;
                cut = Some(start);
                break;
            }
            content = !trimmed.is_empty() && !trimmed.starts_with('#');
        }
        let separator = line.strip_prefix("---");
        if let Some(tail) = separator {
            unread = false;
            content = buffer_empty;
            buffer_empty = !buffer_empty;
            // The `\r` of a `\r\n` is no part of the line; a lone one is.
            let tail = tail.strip_suffix('\r').unwrap_or(tail);
            let trimmed = tail.trim_matches(char::is_whitespace);
            let tail_start = start + 3;
            let index = chars + 3;
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                found.refused = Some(source.error(
                    YamlErrorKind::InvalidSeparator,
                    format!(
                        "kubectl refuses this file: a line starting with `---` may go on only with \
                         spaces and a comment (apimachinery: \"invalid Yaml document separator: \
                         {}\"); put the document's content on the next line",
                        shorten(trimmed)
                    ),
                    index,
                ));
                cut = Some(start);
                break;
            }
            found.refused_from = start;
            if !yaml_agrees(tail) {
                found.divergences.push(source.error(
                    YamlErrorKind::SeparatorDiffers,
                    "kubectl reads this line as a document separator, where YAML reads it as text \
                     (`---` not followed by a space): probelint reads the file as kubectl \
                     applies it; write `---` alone, or `--- #` with a space, so that both agree",
                    index,
                ));
                blanked.push((tail_start, tail_start + tail.len()));
            }
        }
        if separator.is_none() {
            buffer_empty = false;
        }
        chars += line.chars().count() + 1;
        start = end + 1;
    }
    found.refused_from += source.window.0;
    if blanked.is_empty() && cut.is_none() {
        return found;
    }
    let upto = cut.unwrap_or(text.len());
    let mut parse = String::with_capacity(upto);
    let mut at = 0;
    for (from, to) in blanked {
        parse.push_str(&text[at..from]);
        parse.extend(text[from..to].chars().map(|_| ' '));
        at = to;
    }
    parse.push_str(&text[at..upto]);
    found.text = Some(parse);
    found
}

/// Whether YAML reads `---` followed by `tail` (the rest of its line, without the line break) as
/// the document marker kubectl reads: nothing, or blanks, then at most a comment, which YAML
/// starts only after a blank and ends at any line break.
fn yaml_agrees(tail: &str) -> bool {
    let rest = tail.trim_start_matches([' ', '\t']);
    rest.is_empty() || (rest.len() < tail.len() && rest.starts_with('#') && !rest.contains('\r'))
}

/// Whether `line` is a directive go-yaml knows (`%YAML 1.1`, `%TAG ! tag:x,2000:`); any other
/// name is an error to go-yaml, as to saphyr-parser.
fn is_directive(line: &str) -> bool {
    ["%YAML", "%TAG"].iter().any(|name| {
        line.strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
    })
}

/// At most 40 characters of what follows a refused separator, for its message.
fn shorten(text: &str) -> String {
    let mut short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}
