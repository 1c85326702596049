//! Turns saphyr-parser events into JSON values and their locations.
//!
//! Everything here is iterative: open collections live on an explicit stack, so input depth
//! never becomes Rust stack depth. Limits are enforced as events arrive, before any tree is
//! built for them: depth on each collection start (and on each alias, counting the height of
//! what it expands to), nodes on each scalar, collection, alias expansion and anchor copy
//! ([`budget`](super::budget)). Where saphyr's spans fall short of what `--fix` needs, they are
//! repaired from the text ([`spans`]).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span as RawSpan, Tag};
use serde_json::{Map, Value};

use super::budget::Budget;
use super::error::{YamlError, YamlErrorKind};
use super::location::{Children, Entry, LocNode, Locations, NONE, Span};
use super::resolve::{self, CORE_TAG_PREFIX, Scalar};
use super::source::SourceMap;
use super::spans;
use super::{Document, Limits, Stream};

/// saphyr-parser's scanner keeps its flow nesting level in a `u8` and fails with this message
/// past 255 levels of `[`/`{`, before our own depth check sees any event.
const SAPHYR_FLOW_LIMIT_MESSAGE: &str = "recursion limit exceeded";

/// Parses every document of `text`, stopping at the first error.
pub(super) fn parse(source: &SourceMap<'_>, limits: &Limits) -> Stream {
    let mut parser = Parser::new_from_str(source.text());
    let mut builder = Builder::new(source, limits);
    let mut documents = Vec::new();
    let mut seen_documents = 0usize;
    let error = loop {
        let (event, span) = match parser.next_event() {
            None => break None,
            Some(Ok(next)) => next,
            Some(Err(e)) => break Some(syntax_error(source, &e)),
        };
        let step = match event {
            Event::StreamEnd => break None,
            Event::StreamStart | Event::Nothing => Ok(()),
            Event::DocumentStart(_) => {
                seen_documents += 1;
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
            Event::DocumentEnd => {
                documents.extend(builder.end_document());
                Ok(())
            }
            other => builder.event(other, span),
        };
        if let Err(e) = step {
            break Some(e);
        }
    };
    Stream { documents, error }
}

fn syntax_error(source: &SourceMap<'_>, e: &ScanError) -> YamlError {
    let index = e.marker().index();
    if e.info() == SAPHYR_FLOW_LIMIT_MESSAGE {
        return source.error(
            YamlErrorKind::TooDeep,
            "flow collections (`[` / `{`) nested deeper than 255 levels",
            index,
        );
    }
    let mut message = e.info().to_owned();
    let mentions_tabs = message
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|word| word == "tab" || word == "tabs");
    if mentions_tabs {
        message.push_str("; YAML indentation must use spaces, not tabs");
    }
    source.error(YamlErrorKind::Syntax, message, index)
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
    },
    /// The value of a `<<` merge key.
    Merge,
}

enum Body {
    Seq {
        items: Vec<Value>,
        locs: Vec<u32>,
    },
    Map {
        map: Map<String, Value>,
        entries: HashMap<String, Entry>,
        pending: Pending,
    },
}

/// An open collection.
struct Frame {
    body: Body,
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
    anchors: HashMap<usize, Anchor>,
    locations: Locations,
    root: Option<(Value, u32)>,
}

impl<'s, 'a> Builder<'s, 'a> {
    fn new(source: &'s SourceMap<'a>, limits: &'s Limits) -> Self {
        Builder {
            source,
            budget: Budget::new(limits),
            prev_end: 0,
            stack: Vec::new(),
            anchors: HashMap::new(),
            locations: Locations::default(),
            root: None,
        }
    }

    fn begin_document(&mut self, span: RawSpan) {
        self.stack.clear();
        // Anchors are local to a document. saphyr-parser only forgets anchor names between
        // documents in its `load()` API, not when iterated, so an alias in a later document
        // can arrive with the id of an earlier document's anchor; it finds nothing here.
        self.anchors.clear();
        self.root = None;
        self.locations = Locations {
            start: self.source.span(span.start.index(), span.end.index()),
            ..Locations::default()
        };
        self.prev_end = span.end.index();
    }

    /// The finished document, unless it is empty (`---` alone, only comments, `null`), which
    /// kubectl skips too.
    fn end_document(&mut self) -> Option<Document> {
        let (value, root) = self.root.take()?;
        if value.is_null() {
            return None;
        }
        let mut locations = std::mem::take(&mut self.locations);
        locations.root = Some(root);
        Some(Document {
            value,
            line: locations.start.line,
            locations,
        })
    }

    fn event(&mut self, event: Event<'_>, span: RawSpan) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                self.scalar(&text, style, anchor, tag.as_deref(), span)?;
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
                body: Body::Seq { .. },
                flow: false,
                ..
            }) => spans::item_indicator(self.source, self.prev_end, node_start, node_is_empty),
            _ => None,
        }
    }

    fn scalar(
        &mut self,
        text: &str,
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
                    bytes: text.len(),
                },
            );
        }
        let value = resolve::to_json(scalar)
            .map_err(|m| self.error(YamlErrorKind::InvalidValue, m, start))?;
        self.attach(Done {
            value,
            loc,
            nodes: 1,
            height: 0,
            bytes: text.len(),
            via_alias: false,
            item,
            index: start,
        })
    }

    fn key_scalar(
        &mut self,
        text: &str,
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
                    bytes: text.len(),
                },
            );
        }
        let key = resolve::key_string(scalar)
            .map_err(|m| self.error(YamlErrorKind::InvalidKey, m, start))?;
        self.expect_value(key, key_span, start)
    }

    /// Records a key (checking it is not a repeat) and waits for its value.
    fn expect_value(&mut self, key: String, span: Span, index: usize) -> Result<(), YamlError> {
        if let Some(Frame {
            body: Body::Map { entries, .. },
            ..
        }) = self.stack.last()
            && let Some(first) = entries.get(&key).filter(|e| e.explicit != NONE)
        {
            let at = self
                .locations
                .nodes
                .get(first.explicit as usize)
                .and_then(|n| n.key)
                .map_or_else(String::new, |k| {
                    format!(" (first defined at line {}, column {})", k.line, k.column)
                });
            return Err(self.error(
                YamlErrorKind::DuplicateKey,
                format!("duplicate key {key:?} in this mapping{at}; Kubernetes rejects it"),
                index,
            ));
        }
        let bytes = key.len();
        self.set_pending(Pending::Value { key, span }, span.end, bytes);
        Ok(())
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
        let flow =
            start_span.end > start_span.start && text.get(start_span.end - 1) == Some(&opener);
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
                map: Map::new(),
                entries: HashMap::new(),
                pending: Pending::Key,
            }
        } else {
            Body::Seq {
                items: Vec::new(),
                locs: Vec::new(),
            }
        };
        self.stack.push(Frame {
            body,
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
        let (value, children) = match frame.body {
            Body::Seq { items, locs } => (Value::Array(items), Children::Seq(locs)),
            Body::Map { map, entries, .. } => (Value::Object(map), Children::Map(entries)),
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
        let node_span = self.locations.nodes.get(done.loc as usize).map(|n| n.value);
        if let Some(node_span) = node_span {
            frame.end = frame.end.max(node_span.end);
        }
        match &mut frame.body {
            Body::Seq { items, locs } => {
                items.push(done.value);
                locs.push(done.loc);
                if let Some(node) = self.locations.nodes.get_mut(done.loc as usize) {
                    node.item = done.item;
                }
                Ok(())
            }
            Body::Map {
                map,
                entries,
                pending,
            } => match std::mem::replace(pending, Pending::Key) {
                Pending::Value { key, span } => {
                    if let Some(node) = self.locations.nodes.get_mut(done.loc as usize) {
                        node.key = Some(span);
                    }
                    entries.insert(
                        key.clone(),
                        Entry {
                            node: done.loc,
                            merged: false,
                            explicit: done.loc,
                        },
                    );
                    map.insert(key, done.value);
                    Ok(())
                }
                Pending::Merge => {
                    let index = done.index;
                    merge(&self.locations, map, entries, done).map_err(|()| {
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
}

/// Applies a merge key's value to a mapping, as go-yaml v2 does when not strict: keys are set
/// in the order the `<<` appears among the mapping's keys (a later explicit key wins, and a
/// `<<` after an explicit key overrides it); in a sequence, earlier mappings win.
fn merge(
    locations: &Locations,
    map: &mut Map<String, Value>,
    entries: &mut HashMap<String, Entry>,
    done: Done,
) -> Result<(), ()> {
    let children = |loc: u32| {
        locations
            .nodes
            .get(loc as usize)
            .and_then(|n| locations.children.get(n.children as usize))
    };
    match done.value {
        Value::Object(source) => {
            merge_one(map, entries, source, children(done.loc));
            Ok(())
        }
        Value::Array(items) if !done.via_alias && items.iter().all(Value::is_object) => {
            let item_locs: Vec<u32> = match children(done.loc) {
                Some(Children::Seq(locs)) => locs.clone(),
                _ => Vec::new(),
            };
            for (i, item) in items.into_iter().enumerate().rev() {
                if let Value::Object(source) = item {
                    let item_children = item_locs.get(i).and_then(|&l| children(l));
                    merge_one(map, entries, source, item_children);
                }
            }
            Ok(())
        }
        _ => Err(()),
    }
}

fn merge_one(
    map: &mut Map<String, Value>,
    entries: &mut HashMap<String, Entry>,
    source: Map<String, Value>,
    source_children: Option<&Children>,
) {
    for (key, value) in source {
        let node = match source_children {
            Some(Children::Map(source_entries)) => {
                source_entries.get(&key).map_or(NONE, |e| e.node)
            }
            _ => NONE,
        };
        let explicit = entries.get(&key).map_or(NONE, |e| e.explicit);
        entries.insert(
            key.clone(),
            Entry {
                node,
                merged: true,
                explicit,
            },
        );
        map.insert(key, value);
    }
}
