//! Loading Kubernetes manifests (YAML or JSON) into JSON values with source locations.
//!
//! # Why not a YAML library's loader
//!
//! kubectl and the apiserver read manifests through sigs.k8s.io/yaml over go-yaml v2, i.e. with
//! **YAML 1.1** scalar rules: `yes`/`no`/`on`/`off`/`y`/`n` are booleans, `0644` is octal,
//! `1_000` is an integer, while quoted scalars are always strings. Most Rust YAML crates
//! resolve YAML 1.2, where `enabled: on` is the string `"on"`; a linter that disagrees with the
//! cluster about what a manifest says is worse than none. So this module drives
//! saphyr-parser's event API (a YAML 1.2 *syntax* parser; syntax is the same in both versions)
//! and resolves plain scalars the way go-yaml v2 does (`resolve.rs`). Mapping keys become
//! strings the way sigs.k8s.io/yaml makes them (`8080:` → `"8080"`, `yes:` → `"true"`).
//!
//! # Hostile input
//!
//! The CLI lints whatever is in a repository, so every input is bounded ([`Limits`]) and
//! checked while events stream in, before a tree exists: file size before parsing; NUL bytes
//! and invalid UTF-8 before parsing; nesting depth on each collection start and alias; node
//! count (including alias expansion, the "billion laughs" attack) on each node. Nothing here
//! recurses on input structure. The resulting [`serde_json::Value`] is at most
//! [`Limits::max_depth`] deep, which also bounds the recursion of anything that walks it later
//! (and of its `Drop`).
//!
//! # Locations
//!
//! Each [`Document`] carries [`Locations`], which map a JSON Pointer (RFC 6901, e.g.
//! `/spec/template/spec/containers/0/readinessProbe`) to the line, character column and byte
//! range of the node, its key and its `-`. Lines and columns are for people; byte offsets are
//! for `--fix`, which splices text and so must know when a node's text is shared through an
//! anchor ([`NodeLocation::shared`]).

mod budget;
mod builder;
mod error;
mod json;
mod location;
mod resolve;
mod source;
mod spans;
mod split;
mod tolerate;

#[cfg(test)]
mod tests;

pub use error::{YamlError, YamlErrorKind};
pub use location::{Locations, NodeLocation, Span};
pub use source::line_starts;

/// Bounds on what one file may cost. The defaults are far above any real manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file accepted, in bytes; checked before anything else. Default 32 MiB. Values
    /// above 4 GiB act as 4 GiB: locations are kept in 32 bits.
    pub max_file_bytes: usize,
    /// Most documents (`---` separated) in one file, empty ones included. Default 10,000.
    pub max_documents: usize,
    /// Deepest nesting of collections, counting what aliases expand to. Default 256.
    ///
    /// Values above 1,000 act as 1,000: the resulting `Value` is walked recursively (by rules,
    /// serializers, its own `Drop`), so its depth must stay far from stack limits. Flow
    /// collections (`[`, `{`) cannot nest past 255 whatever this says: saphyr-parser's own
    /// limit, reported as [`YamlErrorKind::TooDeep`] too.
    pub max_depth: usize,
    /// Most nodes (scalars, collections, keys) in one file, counting every alias as the size
    /// of what it repeats and every anchored collection twice (its copy kept for aliases).
    /// Default 1,000,000.
    ///
    /// Text copied by aliases and anchor copies is bounded too, by `max_file_bytes`: otherwise
    /// a thousand aliases of one 10 MB string would be a thousand nodes but 10 GB. Both
    /// overflows are [`YamlErrorKind::TooManyNodes`].
    pub max_nodes: usize,
}

/// Ceiling on [`Limits::max_depth`].
const HARD_MAX_DEPTH: usize = 1_000;

/// Ceiling on [`Limits::max_file_bytes`].
const HARD_MAX_FILE_BYTES: usize = u32::MAX as usize;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 32 * 1024 * 1024,
            max_documents: 10_000,
            max_depth: 256,
            max_nodes: 1_000_000,
        }
    }
}

/// One non-empty document of a file.
#[derive(Debug)]
pub struct Document {
    /// The document as Kubernetes sees it (what `kubectl` would send as JSON). Usually an
    /// object; a document that is a bare scalar or list comes back as such, for the caller to
    /// report.
    pub value: serde_json::Value,
    /// Where each node of `value` is written.
    pub locations: Locations,
    /// 1-based line where the document starts: its `---`, or its first token.
    pub line: usize,
    /// Every key written again in the same mapping, in file order. `value` holds what
    /// Kubernetes reads, the value written last; each repeat is also a
    /// [`YamlErrorKind::DuplicateKey`] in [`Stream::divergences`].
    pub duplicates: Vec<DuplicateKey>,
}

/// A key written twice in one mapping (`image: a` … `image: b`). kubectl (go-yaml, not strict)
/// reads the value written last; strict decoding refuses the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// JSON Pointer of the key's value in [`Document::value`], e.g.
    /// `/spec/containers/0/image`; a mapping inside a merge value is `<<`.
    pub pointer: String,
    /// The key as first written.
    pub first: Span,
    /// The key written again. Where it is written several times, each repeat is one
    /// [`DuplicateKey`] with the same `first`; the last repeat's value is the one read.
    pub repeat: Span,
}

/// Everything read from a file, even when a later part of it is broken.
#[derive(Debug)]
pub struct Stream {
    /// The documents that were complete before `error`, in file order. Empty documents (only
    /// `---`, only comments, or `null`) are skipped, as kubectl skips them.
    pub documents: Vec<Document>,
    /// The first error, if any; nothing after it was read.
    pub error: Option<YamlError>,
    /// Where a reading of the file as YAML and Kubernetes' reading of it differ, in file order,
    /// each read as Kubernetes reads it; a caller should say so. Lines kubectl reads as
    /// document separators where YAML reads text (`---#...`), each a
    /// [`YamlErrorKind::SeparatorDiffers`]: the documents are split there, as kubectl splits
    /// them. Keys written twice in one mapping, each a [`YamlErrorKind::DuplicateKey`] at the
    /// repeat: the value written last is read, as kubectl reads it (YAML forbids the repeat;
    /// strict decoding refuses the object).
    pub divergences: Vec<YamlError>,
}

/// Parses a file of one or more YAML (or JSON) documents; any error fails the whole file.
///
/// # Errors
///
/// The first problem found, with its line and column; see [`YamlErrorKind`].
pub fn parse_stream(src: &[u8], limits: &Limits) -> Result<Vec<Document>, YamlError> {
    let stream = parse_stream_partial(src, limits);
    match stream.error {
        Some(error) => Err(error),
        None => Ok(stream.documents),
    }
}

/// Like [`parse_stream`], but keeps the documents completed before the first error, so that a
/// linter can still check the healthy documents of a file whose third document is broken.
/// Errors found before parsing (size, encoding) leave `documents` empty.
#[must_use]
pub fn parse_stream_partial(src: &[u8], limits: &Limits) -> Stream {
    let failed = |error| Stream {
        documents: Vec::new(),
        error: Some(error),
        divergences: Vec::new(),
    };
    let max_file_bytes = limits.max_file_bytes.min(HARD_MAX_FILE_BYTES);
    if src.len() > max_file_bytes {
        return failed(YamlError {
            kind: YamlErrorKind::TooLarge,
            message: format!(
                "the file is {} bytes, more than the {}-byte limit",
                src.len(),
                max_file_bytes
            ),
            line: 1,
            column: 1,
            offset: 0,
        });
    }
    let text = match source::check_text(src) {
        Ok(text) => text,
        Err(error) => return failed(error),
    };
    let mut map = source::SourceMap::new(text);
    if json::looks_like_json(text) {
        return json::read(&mut map, limits);
    }
    read_yaml(&mut map, limits)
}

/// Reads the window of `map` as kubectl's YAMLReader and go-yaml read YAML.
fn read_yaml(map: &mut source::SourceMap<'_>, limits: &Limits) -> Stream {
    // kubectl's reading of the stream first (`split.rs`): where its documents end.
    let separators = split::kubectl_separators(map);
    map.parse = separators.text;
    let mut tab = tolerate_text(map);
    let mut stream = builder::parse(map, limits);
    // go-yaml reads one document of each piece kubectl cuts and stops there: what follows the
    // first document's root node in its piece (`{"a": 1}` then `{"b": 2}` after a `---`) is
    // never read, where saphyr-parser refuses it. Blank it and read again: at most a few
    // times, so that a file of such pieces costs a few parses, not one per piece (past that,
    // the file is refused as before).
    let mut unread = Vec::new();
    for _ in 0..8 {
        let Some(error) = stream
            .error
            .as_ref()
            .filter(|e| e.message == TRAILING_CONTENT)
        else {
            break;
        };
        let index = map.text()[..error.offset].chars().count();
        unread.push(map.error(
            YamlErrorKind::AfterDocumentEnd,
            "kubectl never reads this or anything after it up to the next `---` line: it reads \
             one document between `---` lines; put `---` before it",
            index,
        ));
        let mut parse = map
            .parse
            .take()
            .unwrap_or_else(|| map.window_text().to_owned());
        let Some((from, _)) = parse.char_indices().nth(index - map.base) else {
            break;
        };
        let to = parse[from..]
            .match_indices("\n---")
            .next()
            .map_or(parse.len(), |(i, _)| from + i + 1);
        let blank: String = parse[from..to]
            .chars()
            .map(|c| if c == '\n' { c } else { ' ' })
            .collect();
        parse.replace_range(from..to, &blank);
        map.parse = Some(parse);
        tab = tolerate_text(map);
        stream = builder::parse(map, limits);
    }
    stream.divergences.extend(unread);
    // go-yaml fails on the piece (between kubectl's `---` lines) that holds a tab it refuses;
    // the documents before it are read. saphyr, where it refuses the same tab, may say so at the
    // start of the scalar before it: kubectl's place wins.
    if let Some(tab) = tab
        && stream
            .error
            .as_ref()
            .is_none_or(|e| e.offset > tab.offset || mentions_tabs(&e.message))
    {
        let text = map.text().as_bytes();
        let piece = memchr::memmem::rfind(&text[..tab.offset], b"\n---").map_or(0, |i| i + 1);
        stream.documents.retain(|d| d.locations.start.start < piece);
        stream.error = Some(tab);
    }
    let read_to = stream.error.as_ref().map_or(usize::MAX, |e| e.offset);
    let duplicates = std::mem::take(&mut stream.divergences);
    stream.divergences = separators
        .divergences
        .into_iter()
        .filter(|d| d.offset < read_to)
        .chain(duplicates)
        .collect();
    stream.divergences.sort_by_key(|d| d.offset);
    // The parser read up to the refused line: an error it found there (a collection the cut
    // left open) is the cut's, not the file's.
    if separators.refused.is_some() {
        stream
            .documents
            .retain(|d| d.locations.start.start < separators.refused_from);
    }
    if let Some(refused) = separators.refused
        && stream
            .error
            .as_ref()
            .is_none_or(|e| e.offset >= refused.offset.saturating_sub(3))
    {
        stream.error = Some(refused);
    }
    stream
}

/// Whether a parser message is about a tab.
fn mentions_tabs(message: &str) -> bool {
    message
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|word| word == "tab" || word == "tabs")
}

/// saphyr-parser's error for content after a document's root node, with no `---` before it.
const TRAILING_CONTENT: &str = "did not find expected <document start>";

/// Rewrites the parser's text where go-yaml reads what saphyr refuses (`tolerate.rs`), and
/// returns the first tab go-yaml refuses where saphyr would read it, as kubectl's error.
fn tolerate_text(map: &mut source::SourceMap<'_>) -> Option<YamlError> {
    let tolerated = tolerate::tolerate(map.parser_text());
    let refused = tolerated.refused.map(|(byte, message)| {
        // `parse` has the window's characters, one for one.
        let index = map.base + map.parser_text()[..byte].chars().count();
        map.error(YamlErrorKind::Syntax, message, index)
    });
    map.tolerated = tolerated.rewritten;
    refused
}
