//! Turns saphyr-parser events into JSON values and their locations.
//!
//! Everything here is iterative: open collections live on an explicit stack, so input depth
//! never becomes Rust stack depth. Limits are enforced as events arrive, before any tree is
//! built for them: depth on each collection start (and on each alias, counting the height of
//! what it expands to), nodes on each scalar, collection, alias expansion and anchor copy
//! ([`budget`](super::budget)). Where saphyr's spans fall short of what `--fix` needs, they are
//! repaired from the text ([`spans`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span as RawSpan, Tag};
use serde_json::{Map, Value};

use super::budget::Budget;
use super::error::{YamlError, YamlErrorKind};
use super::location::{Children, LocNode, Locations, MapEntry, NONE, Span};
use super::resolve::{self, CORE_TAG_PREFIX, Scalar};
use super::source::SourceMap;
use super::spans;
use super::{Document, DuplicateKey, Limits, Stream};

/// `key` as one JSON Pointer segment (RFC 6901: `~` → `~0`, `/` → `~1`).
fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// saphyr-parser's scanner keeps its flow nesting level in a `u8` and fails with this message
/// past 255 levels of `[`/`{`, before our own depth check sees any event.
const SAPHYR_FLOW_LIMIT_MESSAGE: &str = "recursion limit exceeded";

/// Parses every document of `text`, stopping at the first error.
pub(super) fn parse(source: &SourceMap<'_>, limits: &Limits) -> Stream {
    let mut parser = Parser::new_from_str(source.parser_text());
    let mut builder = Builder::new(source, limits);
    let mut documents = Vec::new();
    let mut seen_documents = 0usize;
    let mut ignored = false;
    // Character index where the current document starts.
    let mut document_index = 0usize;
    let error = loop {
        let (event, span) = match parser.next_event() {
            None => break None,
            Some(Ok((event, span))) => (event, original_span(source, span)),
            Some(Err(e)) => break Some(syntax_error(source, &e)),
        };
        let step = match event {
            Event::StreamEnd => break None,
            Event::StreamStart | Event::Nothing => Ok(()),
            Event::DocumentStart(explicit) => {
                seen_documents += 1;
                // kubectl cuts the stream at `---` lines only and reads the first document of
                // each piece: a document that starts after a `...` without a `---` is never
                // read.
                ignored = !explicit && seen_documents > 1;
                document_index = span.start.index();
                if seen_documents > limits.max_documents {
                    Err(source.error(
                        YamlErrorKind::TooManyDocuments,
                        format!(
                            "more than {} documents in one file; split the file",
                            limits.max_documents
                        ),
                        span.start.index(),
                    ))
                } else {
                    builder.begin_document(span);
                    Ok(())
                }
            }
            Event::DocumentEnd => match builder.end_document() {
                Err(e) => Err(e),
                Ok(Some(_)) if ignored => {
                    builder.divergences.push(source.error(
                        YamlErrorKind::AfterDocumentEnd,
                        "kubectl never reads this document: after a document end marker \
                             (`...`) it reads nothing up to the next `---` line, so probelint \
                             skips it too; put `---` before it, or remove the `...`",
                        document_index,
                    ));
                    Ok(())
                }
                Ok(document) => {
                    documents.extend(document);
                    Ok(())
                }
            },
            other => builder.event(other, span),
        };
        if let Err(e) = step {
            break Some(e);
        }
    };
    Stream {
        documents,
        error,
        divergences: builder.divergences,
    }
}

/// `span` of the parser's text as a span of the file (they differ where `tolerate.rs` inserted
/// spaces, and where the parser reads only a part of the file, see `SourceMap::window`). Only character indices are used from here on; lines and columns come from the
/// file's [`SourceMap`].
fn original_span(source: &SourceMap<'_>, span: RawSpan) -> RawSpan {
    if source.tolerated.is_none() && source.base == 0 {
        return span;
    }
    let at = |m: saphyr_parser::Marker| {
        saphyr_parser::Marker::new(source.original_index(m.index()), m.line(), m.col())
    };
    RawSpan::new(at(span.start), at(span.end))
}

fn syntax_error(source: &SourceMap<'_>, e: &ScanError) -> YamlError {
    let index = source.original_index(e.marker().index());
    if e.info() == SAPHYR_FLOW_LIMIT_MESSAGE {
        return source.error(
            YamlErrorKind::TooDeep,
            "flow collections (`[` / `{`) nested deeper than 255 levels",
            index,
        );
    }
    let mut message = e.info().to_owned();
    // saphyr places an unclosed quoted scalar's error at its opening quote; go-yaml, and so
    // kubectl, at what ends it: the end of the stream, or a `---`/`...` line. The error goes
    // where kubectl's does and says where the quote opened.
    if let Some(problem) = message.strip_prefix("while scanning a quoted scalar, found ") {
        let end = source.window.1;
        let from = source.byte_at(index).min(end);
        let at = if problem == "unexpected end of stream" {
            Some(end)
        } else if problem == "unexpected document indicator" {
            document_indicator(&source.text()[from..end]).map(|i| from + i)
        } else {
            None
        };
        if let Some(at) = at {
            let (line, column) = source.line_column(index);
            let message = format!(
                "found {problem} inside a quoted scalar opened at line {line}, column {column} \
                 (yaml: \"found {problem}\"); close the quote"
            );
            let at_index = source.text()[..at].chars().count();
            return source.error(YamlErrorKind::Syntax, message, at_index);
        }
    }
    if super::mentions_tabs(&message) {
        message.push_str("; YAML indentation must use spaces, not tabs");
    }
    source.error(YamlErrorKind::Syntax, message, index)
}

/// Byte offset in `text` of the first line that is a document indicator (`---` or `...`, then a
/// blank or the line's end), as go-yaml's scanner ends a quoted scalar there.
fn document_indicator(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b'\n', bytes).map(|i| i + 1).find(|&i| {
        let line = &bytes[i..];
        (line.starts_with(b"---") || line.starts_with(b"..."))
            && line
                .get(3)
                .is_none_or(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    })
}

/// What an anchor stands for, kept so that aliases can repeat it.
struct Anchor {
    value: AnchorValue,
    loc: u32,
    /// Nodes an alias of it adds (its whole subtree, aliases inside expanded).
    nodes: usize,
    /// Nesting it adds: 0 for a scalar, 1 + children's for a collection.
    height: usize,
    /// Bytes of scalar text an alias of it copies (keys included, aliases inside expanded).
    bytes: usize,
}

enum AnchorValue {
    /// Scalars are kept unconverted: an alias may use them as a key or as a value.
    Scalar(Scalar),
    Collection(Value),
}

/// What an open mapping expects next.
enum Pending {
    Key,
    Value {
        key: String,
        span: Span,
        /// The slot that already holds this key (a merged one), which the value replaces.
        existing: Option<usize>,
    },
    /// The value of a `<<` merge key.
    Merge,
}

/// Mappings with more keys than this find a key through a hash index; smaller ones compare
/// the few keys they have, which is cheaper than hashing.
const INDEX_FROM_KEYS: usize = 16;

enum Body {
    Seq,
    Map {
        pending: Pending,
        /// Slot indices by key hash, once the mapping outgrows a linear search.
        index: Option<HashTable<usize>>,
    },
}

/// A child of an open collection, kept on the builder's one stack of children until its
/// collection closes and takes its children at once. A sequence item has an empty key.
struct Slot {
    key: String,
    value: Value,
    /// The node that provides the value, or [`NONE`] (a merged key whose node is unknown).
    node: u32,
    /// The value came from a merge key.
    merged: bool,
    /// The node whose key span is the explicit `key:` in this mapping, or [`NONE`] when the key
    /// only came from merges. Kept even when a later merge overrides the value, so that a
    /// repeated explicit key is still reported against the first one.
    explicit: u32,
}

/// An open collection.
struct Frame {
    body: Body,
    /// Where this collection's children start on [`Builder::slots`].
    base: usize,
    anchor: usize,
    /// Span of the collection's start event; its end is fixed when the collection closes.
    start: Span,
    /// The `-` when this collection is an item of a block sequence.
    item: Option<Span>,
    flow: bool,
    /// Nodes inside so far (keys and expanded aliases included).
    nodes: usize,
    /// Largest height among children.
    height: usize,
    /// Bytes of scalar text inside so far (keys and expanded aliases included).
    bytes: usize,
    /// Byte end of the last key or value written inside.
    end: usize,
    /// Character index of the start event.
    start_index: usize,
}

/// A finished node on its way into its parent.
struct Done {
    value: Value,
    loc: u32,
    nodes: usize,
    height: usize,
    bytes: usize,
    /// The node is an alias (`*name`), which a merge key may only use for a mapping.
    via_alias: bool,
    item: Option<Span>,
    /// Character index where the node starts, for errors about it.
    index: usize,
}

struct Builder<'s, 'a> {
    source: &'s SourceMap<'a>,
    budget: Budget<'s>,
    /// Character index just past the previous event, where the gap before the next node
    /// starts (used to find `-` indicators and block scalar headers).
    prev_end: usize,
    stack: Vec<Frame>,
    /// The children of every open collection, innermost last.
    slots: Vec<Slot>,
    /// Hashes keys for the index of large mappings (keyed per stream: keys are input).
    hasher: RandomState,
    anchors: HashMap<usize, Anchor>,
    locations: Locations,
    root: Option<(Value, u32)>,
    /// Repeated keys of the open document.
    duplicates: Vec<DuplicateKey>,
    /// Each repeated key of the stream, as a divergence to report.
    divergences: Vec<YamlError>,
    /// The values of the open document that have no JSON form (`.nan`, `.inf`), each read as
    /// [`non_finite_marker`] of its index here: an error only if the document keeps it.
    non_finite: Vec<YamlError>,
}

/// Stands in for the `index`-th value with no JSON form until the document ends. Kubernetes
/// fails on such a value when it writes the document as JSON, so only where the document still
/// holds it: a key written again replaces its earlier value (`a: .nan` then `a: 1` is read).
/// Input cannot hold a NUL byte, and one written as `"\0"` would need this exact text.
fn non_finite_marker(index: usize) -> Value {
    Value::String(format!("{NON_FINITE_PREFIX}{index}"))
}

const NON_FINITE_PREFIX: &str = "\0probelint: no JSON form #";

/// The first value with no JSON form that `value` still holds: its index among the markers.
/// Walked only for a document that has one, without recursion.
fn first_non_finite(value: &Value) -> Option<usize> {
    let mut first: Option<usize> = None;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::String(s) => {
                if let Some(index) = s
                    .strip_prefix(NON_FINITE_PREFIX)
                    .and_then(|i| i.parse::<usize>().ok())
                {
                    first = Some(first.map_or(index, |f| f.min(index)));
                }
            }
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.values()),
            _ => {}
        }
    }
    first
}

impl<'s, 'a> Builder<'s, 'a> {
    fn new(source: &'s SourceMap<'a>, limits: &'s Limits) -> Self {
        Builder {
            source,
            budget: Budget::new(limits),
            prev_end: 0,
            stack: Vec::new(),
            slots: Vec::new(),
            hasher: RandomState::new(),
            anchors: HashMap::new(),
            locations: Locations::default(),
            root: None,
            duplicates: Vec::new(),
            divergences: Vec::new(),
            non_finite: Vec::new(),
        }
    }

    fn begin_document(&mut self, span: RawSpan) {
        self.stack.clear();
        self.slots.clear();
        // Anchors are local to a document. saphyr-parser only forgets anchor names between
        // documents in its `load()` API, not when iterated, so an alias in a later document
        // can arrive with the id of an earlier document's anchor; it finds nothing here.
        self.anchors.clear();
        self.root = None;
        self.duplicates.clear();
        self.non_finite.clear();
        self.locations = Locations {
            start: self.source.span(span.start.index(), span.end.index()),
            ..Locations::default()
        };
        self.prev_end = span.end.index();
    }

    /// The finished document, unless it is empty (`---` alone, only comments, `null`), which
    /// kubectl skips too.
    ///
    /// # Errors
    ///
    /// The document holds a value with no JSON form.
    fn end_document(&mut self) -> Result<Option<Document>, YamlError> {
        let Some((value, root)) = self.root.take() else {
            return Ok(None);
        };
        if !self.non_finite.is_empty()
            && let Some(index) = first_non_finite(&value)
            && let Some(error) = self.non_finite.get(index)
        {
            return Err(error.clone());
        }
        if value.is_null() {
            return Ok(None);
        }
        let mut locations = std::mem::take(&mut self.locations);
        locations.root = Some(root);
        Ok(Some(Document {
            value,
            line: locations.start.line,
            locations,
            duplicates: std::mem::take(&mut self.duplicates),
        }))
    }

    fn event(&mut self, event: Event<'_>, span: RawSpan) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                self.scalar(text, style, anchor, tag.as_deref(), span)?;
                self.prev_end = span.end.index();
            }
            Event::Alias(id) => {
                self.alias(id, span)?;
                self.prev_end = span.end.index();
            }
            Event::SequenceStart(anchor, _) => self.start_collection(false, anchor, span)?,
            Event::MappingStart(anchor, _) => self.start_collection(true, anchor, span)?,
            Event::SequenceEnd | Event::MappingEnd => self.end_collection(span)?,
            // Stream and document events are handled by `parse`.
            _ => {}
        }
        Ok(())
    }

    fn error(&self, kind: YamlErrorKind, message: impl Into<String>, index: usize) -> YamlError {
        self.source.error(kind, message, index)
    }

    fn expects_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame {
                body: Body::Map {
                    pending: Pending::Key,
                    ..
                },
                ..
            })
        )
    }

    /// The `-` before a node that starts an item of a block sequence (see
    /// [`spans::item_indicator`]); none outside one.
    fn item_indicator(&self, node_start: usize, node_is_empty: bool) -> Option<Span> {
        match self.stack.last() {
            Some(Frame {
                body: Body::Seq,
                flow: false,
                ..
            }) => spans::item_indicator(self.source, self.prev_end, node_start, node_is_empty),
            _ => None,
        }
    }

    fn scalar(
        &mut self,
        text: Cow<'_, str>,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&Tag>,
        span: RawSpan,
    ) -> Result<(), YamlError> {
        let start = span.start.index();
        self.budget.count_nodes(1, self.source, start)?;
        let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
        let tag = tag.as_deref();
        if self.expects_key() {
            return self.key_scalar(text, style, anchor, tag, span);
        }
        // An empty value (`key:`, `- `) gets an empty span where the parser put it; for an
        // empty sequence item that span is the `-` itself.
        let empty = text.is_empty() && style == ScalarStyle::Plain;
        let item = self.item_indicator(start, empty);
        let text_bytes = text.len();
        let scalar = resolve::resolve(text, style == ScalarStyle::Plain, tag)
            .map_err(|m| self.error(YamlErrorKind::InvalidValue, m, start))?;
        let value_span = if empty {
            self.source.span(start, start)
        } else {
            spans::scalar_span(self.source, self.prev_end, style, span)
        };
        let loc = self.push_loc(LocNode::leaf(value_span));
        if anchor != 0 {
            self.anchors.insert(
                anchor,
                Anchor {
                    value: AnchorValue::Scalar(scalar.clone()),
                    loc,
                    nodes: 1,
                    height: 0,
                    bytes: text_bytes,
                },
            );
        }
        let value = match resolve::to_json(scalar) {
            Ok(value) => value,
            Err(message) => {
                let marker = non_finite_marker(self.non_finite.len());
                let error = self.error(YamlErrorKind::InvalidValue, message, start);
                self.non_finite.push(error);
                marker
            }
        };
        self.attach(Done {
            value,
            loc,
            nodes: 1,
            height: 0,
            bytes: text_bytes,
            via_alias: false,
            item,
            index: start,
        })
    }

    fn key_scalar(
        &mut self,
        text: Cow<'_, str>,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&str>,
        span: RawSpan,
    ) -> Result<(), YamlError> {
        let start = span.start.index();
        let key_span = spans::scalar_span(self.source, self.prev_end, style, span);
        // go-yaml's isMerge: `<<` written plain (untagged or with the non-specific `!`), or
        // tagged `!!merge`. A quoted "<<" is an ordinary key.
        let merge_tag = tag.and_then(|t| t.strip_prefix(CORE_TAG_PREFIX)) == Some("merge");
        let plain_untagged = style == ScalarStyle::Plain && matches!(tag, None | Some("!"));
        if text == "<<" && (plain_untagged || merge_tag) {
            self.set_pending(Pending::Merge, key_span.end, text.len());
            return Ok(());
        }
        let text_bytes = text.len();
        let scalar = resolve::resolve(text, style == ScalarStyle::Plain, tag)
            .map_err(|m| self.error(YamlErrorKind::InvalidValue, m, start))?;
        if anchor != 0 {
            let loc = self.push_loc(LocNode::leaf(key_span));
            self.anchors.insert(
                anchor,
                Anchor {
                    value: AnchorValue::Scalar(scalar.clone()),
                    loc,
                    nodes: 1,
                    height: 0,
                    bytes: text_bytes,
                },
            );
        }
        let key = resolve::key_string(scalar)
            .map_err(|m| self.error(YamlErrorKind::InvalidKey, m, start))?;
        self.expect_value(key, key_span, start)
    }

    /// The slot of the innermost mapping that holds `key`, if any.
    fn find_key(&self, key: &str) -> Option<usize> {
        let frame = self.stack.last()?;
        let Body::Map { index, .. } = &frame.body else {
            return None;
        };
        match index {
            Some(table) => table
                .find(self.hasher.hash_one(key), |&i| {
                    self.slots.get(i).is_some_and(|s| s.key == key)
                })
                .copied(),
            None => self
                .slots
                .get(frame.base..)?
                .iter()
                .position(|s| s.key == key)
                .map(|i| frame.base + i),
        }
    }

    /// Records a key and waits for its value. A key the mapping already has from an explicit
    /// `key:` is read as Kubernetes reads it: the later value wins (go-yaml's non-strict
    /// decoding), and the repeat is recorded ([`Document::duplicates`]).
    fn expect_value(&mut self, key: String, span: Span, index: usize) -> Result<(), YamlError> {
        let existing = self.find_key(&key);
        if let Some(first) = existing
            .and_then(|i| self.slots.get(i))
            .filter(|s| s.explicit != NONE)
            .and_then(|s| self.locations.nodes.get(s.explicit as usize))
            .and_then(LocNode::key)
        {
            let pointer = self.pointer_to(&key);
            let error = self.error(
                YamlErrorKind::DuplicateKey,
                format!(
                    "duplicate key {key:?} in this mapping (first at line {}, column {}): \
                     Kubernetes reads only the value written last, here, and strict decoding \
                     refuses the object; remove the one you do not mean",
                    first.line, first.column
                ),
                index,
            );
            self.duplicates.push(DuplicateKey {
                pointer,
                first,
                repeat: span,
            });
            self.divergences.push(error);
        }
        let bytes = key.len();
        self.set_pending(
            Pending::Value {
                key,
                span,
                existing,
            },
            span.end,
            bytes,
        );
        Ok(())
    }

    /// The JSON Pointer of `key` in the innermost open mapping: the path of keys and indices
    /// that leads to it through the open collections (`<<` for a mapping inside a merge value).
    fn pointer_to(&self, key: &str) -> String {
        let mut pointer = String::new();
        for (depth, frame) in self.stack.iter().enumerate() {
            let Some(child) = self.stack.get(depth + 1) else {
                break;
            };
            match &frame.body {
                Body::Seq => pointer.push_str(&format!("/{}", child.base - frame.base)),
                Body::Map { pending, .. } => {
                    pointer.push('/');
                    match pending {
                        Pending::Value { key, .. } => pointer.push_str(&escape_pointer(key)),
                        Pending::Merge | Pending::Key => pointer.push_str("<<"),
                    }
                }
            }
        }
        pointer.push('/');
        pointer.push_str(&escape_pointer(key));
        pointer
    }

    fn set_pending(&mut self, next: Pending, key_end: usize, key_bytes: usize) {
        if let Some(Frame {
            body: Body::Map { pending, .. },
            nodes,
            bytes,
            end,
            ..
        }) = self.stack.last_mut()
        {
            *pending = next;
            *nodes += 1;
            *bytes = bytes.saturating_add(key_bytes);
            *end = (*end).max(key_end);
        }
    }

    fn alias(&mut self, id: usize, span: RawSpan) -> Result<(), YamlError> {
        let start = span.start.index();
        let Some(anchor) = self.anchors.get(&id) else {
            let message = if self.stack.iter().any(|f| f.anchor == id) {
                "this alias refers to a node that contains it (a recursive alias), which \
                 Kubernetes cannot decode"
            } else {
                "this alias refers to an anchor of an earlier document; anchors only reach \
                 within their own document"
            };
            return Err(self.error(YamlErrorKind::Alias, message, start));
        };
        let (anchor_loc, nodes, height, bytes) =
            (anchor.loc, anchor.nodes, anchor.height, anchor.bytes);
        let key_scalar = match &anchor.value {
            AnchorValue::Scalar(s) if self.expects_key() => Some(s.clone()),
            _ => None,
        };
        let alias_span = self.source.span(start, span.end.index());
        if self.expects_key() {
            let Some(scalar) = key_scalar else {
                return Err(self.error(
                    YamlErrorKind::InvalidKey,
                    "this alias names a mapping or sequence, which cannot be a mapping key",
                    start,
                ));
            };
            let key = resolve::key_string(scalar)
                .map_err(|m| self.error(YamlErrorKind::InvalidKey, m, start))?;
            self.budget.count_nodes(1, self.source, start)?;
            return self.expect_value(key, alias_span, start);
        }
        // Check the budgets before copying anything.
        self.budget.count_nodes(nodes, self.source, start)?;
        self.budget.count_copied_bytes(bytes, self.source, start)?;
        if self.stack.len() + height > self.budget.max_depth() {
            return Err(self.budget.too_deep(self.source, start));
        }
        let value = match self.anchors.get(&id).map(|a| &a.value) {
            Some(AnchorValue::Collection(v)) => v.clone(),
            Some(AnchorValue::Scalar(s)) => resolve::to_json(s.clone())
                .map_err(|m| self.error(YamlErrorKind::InvalidValue, m, start))?,
            None => Value::Null,
        };
        let item = self.item_indicator(start, false);
        let children = match self.locations.nodes.get_mut(anchor_loc as usize) {
            Some(anchored) => {
                anchored.aliased = true;
                anchored.children
            }
            None => NONE,
        };
        let loc = self.push_loc(LocNode {
            children,
            alias: true,
            ..LocNode::leaf(alias_span)
        });
        self.attach(Done {
            value,
            loc,
            nodes,
            height,
            bytes,
            via_alias: true,
            item,
            index: start,
        })
    }

    fn start_collection(
        &mut self,
        is_map: bool,
        anchor: usize,
        span: RawSpan,
    ) -> Result<(), YamlError> {
        let start = span.start.index();
        if self.expects_key() {
            return Err(self.error(
                YamlErrorKind::InvalidKey,
                "a mapping or sequence cannot be a mapping key (a Helm `{{ }}` template left \
                 unquoted parses as one; quote the value or render the template first)",
                start,
            ));
        }
        if self.stack.len() >= self.budget.max_depth() {
            return Err(self.budget.too_deep(self.source, start));
        }
        self.budget.count_nodes(1, self.source, start)?;
        let end = span.end.index();
        let start_span = self.source.span(start, end);
        let text = self.source.text().as_bytes();
        let opener = if is_map { b'{' } else { b'[' };
        // The start event of a flow collection covers its bracket and the blanks after it.
        let flow = text
            .get(start_span.start..start_span.end)
            .is_some_and(|t| t.trim_ascii_end().last() == Some(&opener));
        let item = self.item_indicator(start, false);
        let parent_is_block_map = matches!(
            self.stack.last(),
            Some(Frame {
                body: Body::Map { .. },
                flow: false,
                ..
            })
        );
        let body = if is_map {
            Body::Map {
                pending: Pending::Key,
                index: None,
            }
        } else {
            Body::Seq
        };
        self.stack.push(Frame {
            body,
            base: self.slots.len(),
            anchor,
            start: start_span,
            item,
            flow,
            nodes: 0,
            height: 0,
            bytes: 0,
            end: start_span.end,
            start_index: start,
        });
        self.prev_end = if flow || is_map {
            end
        } else {
            spans::first_dash(self.source, end, parent_is_block_map)
        };
        Ok(())
    }

    fn end_collection(&mut self, span: RawSpan) -> Result<(), YamlError> {
        let Some(frame) = self.stack.pop() else {
            return Err(self.error(
                YamlErrorKind::Syntax,
                "unbalanced collection end from the parser",
                span.start.index(),
            ));
        };
        // A block collection's end event sits at the next token; a flow one covers `]`/`}`.
        let end = if frame.flow {
            self.prev_end = span.end.index();
            // The parser's end mark can run past the bracket over trailing blanks and a
            // comment; the collection ends just after its `]` or `}`.
            let bracket = self.source.byte_at(span.start.index());
            match self.source.text.as_bytes().get(bracket) {
                Some(b']' | b'}') => bracket + 1,
                _ => self.source.byte_at(span.end.index()),
            }
        } else {
            self.prev_end = span.start.index();
            frame.end
        };
        let value_span = Span {
            end: end.max(frame.start.start),
            ..frame.start
        };
        let base = frame.base.min(self.slots.len());
        let (value, children) = match frame.body {
            Body::Seq => {
                let start = self.locations.items.len();
                let len = self.slots.len() - base;
                self.locations.items.reserve(len);
                let mut items = Vec::with_capacity(len);
                for slot in self.slots.drain(base..) {
                    self.locations.items.push(slot.node);
                    items.push(slot.value);
                }
                (Value::Array(items), Children::Seq { start, len })
            }
            Body::Map { .. } => {
                let start = self.locations.entries.len();
                let len = self.slots.len() - base;
                self.locations.entries.reserve(len);
                let mut map = Map::with_capacity(len);
                for slot in self.slots.drain(base..) {
                    let key_start = self.locations.keys.len();
                    self.locations.keys.push_str(&slot.key);
                    self.locations.entries.push(MapEntry {
                        key_start,
                        key_len: slot.key.len(),
                        node: slot.node,
                        merged: slot.merged,
                    });
                    map.insert(slot.key, slot.value);
                }
                (Value::Object(map), Children::Map { start, len })
            }
        };
        let children_index = u32::try_from(self.locations.children.len()).unwrap_or(NONE);
        self.locations.children.push(children);
        let loc = self.push_loc(LocNode {
            children: children_index,
            ..LocNode::leaf(value_span)
        });
        let nodes = frame.nodes.saturating_add(1);
        let height = frame.height + 1;
        let bytes = frame.bytes;
        if frame.anchor != 0 {
            // Keeping a copy for aliases costs as much as building it again.
            self.budget
                .count_nodes(nodes, self.source, span.start.index())?;
            self.budget
                .count_copied_bytes(bytes, self.source, span.start.index())?;
            self.anchors.insert(
                frame.anchor,
                Anchor {
                    value: AnchorValue::Collection(value.clone()),
                    loc,
                    nodes,
                    height,
                    bytes,
                },
            );
        }
        self.attach(Done {
            value,
            loc,
            nodes,
            height,
            bytes,
            via_alias: false,
            item: frame.item,
            index: frame.start_index,
        })
    }

    fn push_loc(&mut self, node: LocNode) -> u32 {
        let index = u32::try_from(self.locations.nodes.len()).unwrap_or(NONE);
        self.locations.nodes.push(node);
        index
    }

    /// Puts a finished node into its parent (or makes it the document root).
    fn attach(&mut self, done: Done) -> Result<(), YamlError> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some((done.value, done.loc));
            return Ok(());
        };
        frame.nodes = frame.nodes.saturating_add(done.nodes);
        frame.height = frame.height.max(done.height);
        frame.bytes = frame.bytes.saturating_add(done.bytes);
        let node_span = self
            .locations
            .nodes
            .get(done.loc as usize)
            .map(LocNode::value);
        if let Some(node_span) = node_span {
            frame.end = frame.end.max(node_span.end);
        }
        match &mut frame.body {
            Body::Seq => {
                if let Some(node) = self.locations.nodes.get_mut(done.loc as usize) {
                    node.set_item(done.item);
                }
                self.slots.push(Slot {
                    key: String::new(),
                    value: done.value,
                    node: done.loc,
                    merged: false,
                    explicit: NONE,
                });
                Ok(())
            }
            Body::Map { pending, .. } => match std::mem::replace(pending, Pending::Key) {
                Pending::Value {
                    key,
                    span,
                    existing,
                } => {
                    if let Some(node) = self.locations.nodes.get_mut(done.loc as usize) {
                        node.set_key(span);
                    }
                    let slot = Slot {
                        key,
                        value: done.value,
                        node: done.loc,
                        merged: false,
                        explicit: done.loc,
                    };
                    match existing.and_then(|i| self.slots.get_mut(i)) {
                        // An explicit key after a merge that brought it, or after the same
                        // explicit key: the key keeps its place in the mapping, the value is
                        // the later one; a repeat is still reported against the first key.
                        Some(earlier) => {
                            let first = earlier.explicit;
                            *earlier = slot;
                            if first != NONE {
                                earlier.explicit = first;
                            }
                        }
                        None => self.push_key(slot),
                    }
                    Ok(())
                }
                Pending::Merge => {
                    let index = done.index;
                    self.merge(done).map_err(|()| {
                        self.error(
                            YamlErrorKind::InvalidMerge,
                            "a merge key (`<<`) needs a mapping, an alias of a mapping, or a \
                             sequence of those as its value",
                            index,
                        )
                    })
                }
                Pending::Key => Err(self.error(
                    YamlErrorKind::InvalidKey,
                    "a mapping or sequence cannot be a mapping key",
                    self.prev_end,
                )),
            },
        }
    }

    /// Adds a key that the innermost mapping does not hold yet, indexing the mapping once it
    /// grows past [`INDEX_FROM_KEYS`].
    fn push_key(&mut self, slot: Slot) {
        let at = self.slots.len();
        let Some(Frame {
            body: Body::Map { index, .. },
            base,
            ..
        }) = self.stack.last_mut()
        else {
            return;
        };
        let hasher = &self.hasher;
        let slots = &self.slots;
        let rehash = |&i: &usize| slots.get(i).map_or(0, |s| hasher.hash_one(&s.key));
        match index {
            Some(table) => {
                table.insert_unique(hasher.hash_one(&slot.key), at, rehash);
            }
            None if at - *base >= INDEX_FROM_KEYS => {
                let mut table = HashTable::with_capacity(2 * INDEX_FROM_KEYS);
                for i in *base..at {
                    table.insert_unique(rehash(&i), i, rehash);
                }
                table.insert_unique(hasher.hash_one(&slot.key), at, rehash);
                *index = Some(table);
            }
            None => {}
        }
        self.slots.push(slot);
    }

    /// Applies a merge key's value to the innermost mapping, as go-yaml v2 does when not
    /// strict: keys are set in the order the `<<` appears among the mapping's keys (a later
    /// explicit key wins, and a `<<` after an explicit key overrides it); in a sequence,
    /// earlier mappings win.
    fn merge(&mut self, done: Done) -> Result<(), ()> {
        match done.value {
            Value::Object(source) => {
                let nodes = self.entry_nodes(done.loc);
                self.merge_one(source, &nodes);
                Ok(())
            }
            Value::Array(items) if !done.via_alias && items.iter().all(Value::is_object) => {
                let item_locs: Vec<u32> = match self.children_of(done.loc) {
                    Some(Children::Seq { start, len }) => self
                        .locations
                        .items
                        .get(start..start + len)
                        .unwrap_or_default()
                        .to_vec(),
                    _ => Vec::new(),
                };
                for (i, item) in items.into_iter().enumerate().rev() {
                    if let Value::Object(source) = item {
                        let nodes = item_locs
                            .get(i)
                            .map_or_else(Vec::new, |&l| self.entry_nodes(l));
                        self.merge_one(source, &nodes);
                    }
                }
                Ok(())
            }
            _ => Err(()),
        }
    }

    fn children_of(&self, loc: u32) -> Option<Children> {
        let node = self.locations.nodes.get(loc as usize)?;
        self.locations.children.get(node.children as usize).copied()
    }

    /// The nodes of a built mapping's values, in its order (its JSON object's order too).
    fn entry_nodes(&self, loc: u32) -> Vec<u32> {
        match self.children_of(loc) {
            Some(Children::Map { start, len }) => self
                .locations
                .map_entries(start, len)
                .iter()
                .map(|e| e.node)
                .collect(),
            _ => Vec::new(),
        }
    }

    fn merge_one(&mut self, source: Map<String, Value>, nodes: &[u32]) {
        for (i, (key, value)) in source.into_iter().enumerate() {
            let node = nodes.get(i).copied().unwrap_or(NONE);
            match self.find_key(&key).and_then(|at| self.slots.get_mut(at)) {
                Some(slot) => {
                    slot.value = value;
                    slot.node = node;
                    slot.merged = true;
                }
                None => self.push_key(Slot {
                    key,
                    value,
                    node,
                    merged: true,
                    explicit: NONE,
                }),
            }
        }
    }
}
