//! One document as the operations see it: its text, locations and value ([`View`]), each node
//! with the shape it is written in ([`Node`], [`Shape`]), and the byte-range [`Edit`]s the
//! operations return.
//!
//! The operations ([`add`](super::add), [`remove`](super::remove),
//! [`replace`](super::replace)) look at the document as it is *now* (the driver re-parses after
//! every step), find the nodes involved through [`Locations`], and return the edits. Nothing
//! there needs to be right in every corner: the driver re-reads the edited text and refuses the
//! fix unless it reads back as exactly the patched object. What must hold is that the common
//! shapes come out as a person would have written them, and that nothing panics.

use serde_json::Value;

use super::render::Context;
use super::scan;
use json_patch::jsonptr::Token;

use crate::load::{Locations, NodeLocation};

/// Replace `start..end` of the text with `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Edit {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) text: String,
}

impl Edit {
    pub(super) fn insert(at: usize, text: String) -> Self {
        Edit {
            start: at,
            end: at,
            text,
        }
    }
}

/// One document of the file, as it reads now.
pub(super) struct View<'a> {
    pub(super) text: &'a str,
    pub(super) locations: &'a Locations,
    pub(super) value: &'a Value,
    pub(super) newline: &'static str,
    /// The document's block layout as the user wrote it.
    pub(super) layout: &'a DocumentLayout,
}

/// What a document shows of its block layout: the indentation steps of nested mappings, the
/// offsets of sequences under keys and the width of `- ` before a mapping item's first key.
/// Sampled once, from the document as the user wrote it (before any fix), so that every
/// insertion follows the file's style, not that of earlier insertions, and so that a fix with
/// a thousand operations does not walk the document a thousand times. Filled and read by
/// [`layout`](super::layout).
#[derive(Debug, Default, Clone)]
pub(super) struct DocumentLayout {
    pub(super) steps: Tally,
    pub(super) seq_offsets: Tally,
    pub(super) item_offsets: Tally,
}

/// How often each value was seen, in the order first seen: the evidence for one layout
/// setting. The values are indentation widths, so there are only ever a few of them.
#[derive(Debug, Default, Clone)]
pub(super) struct Tally(pub(super) Vec<(usize, usize)>);

/// How a collection is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    BlockMap,
    /// `{...}`; the offsets of `{` and of `}`.
    FlowMap {
        open: usize,
        close: usize,
    },
    BlockSeq,
    FlowSeq {
        open: usize,
        close: usize,
    },
    Scalar,
}

/// A node of the document: its pointer, location, JSON value and shape.
pub(super) struct Node<'a> {
    pub(super) pointer: String,
    pub(super) loc: NodeLocation,
    pub(super) value: &'a Value,
    pub(super) shape: Shape,
}

/// Splits a pointer into its parent and its last (decoded) token.
pub(super) fn split_pointer(pointer: &str) -> Option<(&str, String)> {
    let (parent, raw) = pointer.rsplit_once('/')?;
    let token = Token::from_encoded(raw).ok()?;
    Some((parent, token.decoded().into_owned()))
}

pub(super) fn child_pointer(parent: &str, key: &str) -> String {
    format!("{parent}/{}", Token::new(key).encoded())
}

impl<'a> View<'a> {
    pub(super) fn node(&self, pointer: &str) -> Result<Node<'a>, String> {
        let value = self
            .value
            .pointer(pointer)
            .ok_or_else(|| format!("nothing is at `{pointer}`"))?;
        let loc = self
            .locations
            .get(pointer)
            .ok_or_else(|| format!("`{pointer}` has no place in the text"))?;
        let shape = self.shape(value, &loc, pointer);
        Ok(Node {
            pointer: pointer.to_owned(),
            loc,
            value,
            shape,
        })
    }

    fn shape(&self, value: &Value, loc: &NodeLocation, pointer: &str) -> Shape {
        let text = self.text;
        let start = scan::skip_properties(text, loc.value.start, loc.value.end);
        let opener = text.as_bytes().get(start).copied();
        let flow = |want: u8| -> Option<(usize, usize)> {
            if opener != Some(want) {
                return None;
            }
            // The YAML layer's span of a flow collection ends just past its bracket.
            let close = loc.value.end.checked_sub(1)?;
            (text.as_bytes().get(close) == Some(&closing(want))).then_some((start, close))
        };
        match value {
            Value::Object(_) => match flow(b'{') {
                Some((open, close)) => Shape::FlowMap { open, close },
                None => Shape::BlockMap,
            },
            Value::Array(items) => {
                // An indentless sequence's span starts at its first item's content, which may
                // itself be `[`: the first item's `-` tells block from flow.
                let first_dash = !items.is_empty()
                    && self
                        .locations
                        .get(&format!("{pointer}/0"))
                        .is_some_and(|l| l.item.is_some());
                match flow(b'[') {
                    Some((open, close)) if !first_dash => Shape::FlowSeq { open, close },
                    _ => Shape::BlockSeq,
                }
            }
            _ => Shape::Scalar,
        }
    }

    /// Byte offset just past a node's own text: an empty value's is at its key's `:`.
    pub(super) fn end_of(&self, node: &Node<'_>) -> usize {
        match node.shape {
            Shape::FlowMap { close, .. } | Shape::FlowSeq { close, .. } => close + 1,
            _ => {
                let span = node.loc.value;
                if span.start == span.end {
                    // `key:` with nothing after it: the span is empty at the `:`.
                    let colon = self.text.as_bytes().get(span.start) == Some(&b':');
                    span.end + usize::from(colon)
                } else {
                    span.end
                }
            }
        }
    }

    /// The children of a mapping whose keys are written inside it, in text order. Keys that
    /// come from a merge (`<<: *base`) are written elsewhere and left out.
    pub(super) fn map_children(&self, parent: &Node<'a>) -> Vec<Node<'a>> {
        let Value::Object(map) = parent.value else {
            return Vec::new();
        };
        let (lo, hi) = (parent.loc.value.start, self.end_of(parent));
        let mut children: Vec<Node<'a>> = map
            .keys()
            .filter_map(|k| self.node(&child_pointer(&parent.pointer, k)).ok())
            .filter(|n| n.loc.key.is_some_and(|k| k.start >= lo && k.end <= hi))
            .collect();
        children.sort_by_key(|n| n.loc.key.map_or(0, |k| k.start));
        children
    }

    pub(super) fn seq_items(&self, parent: &Node<'a>) -> Vec<Node<'a>> {
        let Value::Array(items) = parent.value else {
            return Vec::new();
        };
        (0..items.len())
            .filter_map(|i| self.node(&format!("{}/{i}", parent.pointer)).ok())
            .collect()
    }

    /// Inserted text ending a line: `body` + newline, or, where the file ends without a final
    /// newline, newline + `body` so that it still ends without one.
    pub(super) fn line_at(&self, at: usize, body: &str) -> Edit {
        let body = body.replace('\n', self.newline);
        if at >= self.text.len() && !self.text.is_empty() && !scan::ends_with_newline(self.text) {
            Edit::insert(self.text.len(), format!("{}{body}", self.newline))
        } else {
            Edit::insert(at, format!("{body}{}", self.newline))
        }
    }

    /// Whether this document is written as JSON: its top-level keys are double-quoted.
    fn json_style(&self) -> bool {
        self.node("").is_ok_and(|root| {
            matches!(root.shape, Shape::FlowMap { .. })
                && self
                    .map_children(&root)
                    .first()
                    .and_then(|c| c.loc.key)
                    .is_some_and(|k| self.text.as_bytes().get(k.start) == Some(&b'"'))
        })
    }

    pub(super) fn flow_context(&self) -> Context {
        if self.json_style() {
            Context::Json
        } else {
            Context::Flow
        }
    }
}

/// Indentation (in columns) of a key or `-` at `pos`: the blanks before it when it starts its
/// line, else its column (`- name:` puts `name` at the `-`'s column plus two).
pub(super) fn indent_of(text: &str, pos: usize, column: usize) -> usize {
    if scan::first_on_line(text, pos) {
        scan::line_indent(text, pos).chars().count()
    } else {
        column.saturating_sub(1)
    }
}

pub(super) fn refuse_shared(node: &Node<'_>) -> Result<(), String> {
    if node.loc.shared {
        Err(format!(
            "`{}` is written through a YAML anchor, alias or merge key (`&`, `*`, `<<`), so \
             editing its text would change other places too; make this change by hand",
            node.pointer
        ))
    } else {
        Ok(())
    }
}

pub(super) fn is_collection(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

/// Applies edits back to front; they must not overlap and must fall on character boundaries.
pub(super) fn apply_edits(text: &str, mut edits: Vec<Edit>) -> Result<String, String> {
    edits.sort_by_key(|e| (e.start, e.end));
    let mut out =
        String::with_capacity(text.len() + edits.iter().map(|e| e.text.len()).sum::<usize>());
    let mut pos = 0;
    for edit in &edits {
        if edit.start < pos || edit.end < edit.start {
            return Err("two edits overlap".to_owned());
        }
        let (Some(kept), Some(_)) = (text.get(pos..edit.start), text.get(edit.start..edit.end))
        else {
            return Err("an edit falls outside the text or inside a character".to_owned());
        };
        out.push_str(kept);
        out.push_str(&edit.text);
        pos = edit.end;
    }
    out.push_str(text.get(pos..).unwrap_or_default());
    Ok(out)
}

/// The bracket that closes a flow collection opened by `open`.
fn closing(open: u8) -> u8 {
    if open == b'{' { b'}' } else { b']' }
}
