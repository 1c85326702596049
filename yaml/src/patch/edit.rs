//! Turning one JSON Patch operation into byte-range edits of the text.
//!
//! Each function looks at the document as it is *now* (the driver re-parses after every
//! operation), finds the nodes involved through [`Locations`], and returns the edits. Nothing
//! here needs to be right in every corner: the driver re-reads the edited text and refuses the
//! fix unless it reads back as exactly the patched object. What must hold is that the common
//! shapes come out as a person would have written them, and that nothing panics.

use serde_json::Value;

use super::render::{self, Context, Layout};
use super::scan;
use crate::load::{Locations, NodeLocation, escape_pointer_token};

/// Replace `start..end` of the text with `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Edit {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) text: String,
}

impl Edit {
    fn insert(at: usize, text: String) -> Self {
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

/// How a collection is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
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
struct Node<'a> {
    pointer: String,
    loc: NodeLocation,
    value: &'a Value,
    shape: Shape,
}

/// Splits a pointer into its parent and its last (decoded) token.
pub(super) fn split_pointer(pointer: &str) -> Option<(&str, String)> {
    let slash = pointer.rfind('/')?;
    let raw = pointer.get(slash + 1..)?;
    let parent = pointer.get(..slash)?;
    let mut token = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => token.push('~'),
                Some('1') => token.push('/'),
                _ => return None,
            }
        } else {
            token.push(c);
        }
    }
    Some((parent, token))
}

fn child_pointer(parent: &str, key: &str) -> String {
    format!("{parent}/{}", escape_pointer_token(key))
}

impl<'a> View<'a> {
    fn node(&self, pointer: &str) -> Result<Node<'a>, String> {
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
    fn end_of(&self, node: &Node<'_>) -> usize {
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
    fn map_children(&self, parent: &Node<'a>) -> Vec<Node<'a>> {
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

    fn seq_items(&self, parent: &Node<'a>) -> Vec<Node<'a>> {
        let Value::Array(items) = parent.value else {
            return Vec::new();
        };
        (0..items.len())
            .filter_map(|i| self.node(&format!("{}/{i}", parent.pointer)).ok())
            .collect()
    }

    /// Inserted text ending a line: `body` + newline, or, where the file ends without a final
    /// newline, newline + `body` so that it still ends without one.
    fn line_at(&self, at: usize, body: &str) -> Edit {
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

    fn flow_context(&self) -> Context {
        if self.json_style() {
            Context::Json
        } else {
            Context::Flow
        }
    }
}

/// Indentation (in columns) of a key or `-` at `pos`: the blanks before it when it starts its
/// line, else its column (`- name:` puts `name` at the `-`'s column plus two).
fn indent_of(text: &str, pos: usize, column: usize) -> usize {
    if scan::first_on_line(text, pos) {
        scan::line_indent(text, pos).chars().count()
    } else {
        column.saturating_sub(1)
    }
}

fn refuse_shared(node: &Node<'_>) -> Result<(), String> {
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

/// How often each value was seen, in the order first seen: the evidence for one layout
/// setting. The values are indentation widths, so there are only ever a few of them.
#[derive(Debug, Default, Clone)]
pub(super) struct Tally(Vec<(usize, usize)>);

impl Tally {
    fn push(&mut self, value: usize) {
        match self.0.iter_mut().find(|(v, _)| *v == value) {
            Some((_, count)) => *count += 1,
            None => self.0.push((value, 1)),
        }
    }

    fn count(&self, value: usize) -> usize {
        self.0
            .iter()
            .find(|(v, _)| *v == value)
            .map_or(0, |(_, c)| *c)
    }

    /// The most frequent value of `self` followed by `then`, the first seen among equals.
    fn majority(&self, then: &Tally) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        let seen = self.0.iter().map(|(v, _)| *v).chain(
            then.0
                .iter()
                .map(|(v, _)| *v)
                .filter(|v| self.count(*v) == 0),
        );
        for v in seen {
            let count = self.count(v) + then.count(v);
            if best.is_none_or(|(_, c)| count > c) {
                best = Some((v, count));
            }
        }
        best.map(|(v, _)| v)
    }
}

/// What a document shows of its block layout: the indentation steps of nested mappings, the
/// offsets of sequences under keys and the width of `- ` before a mapping item's first key.
/// Sampled once, from the document as the user wrote it (before any fix), so that every
/// insertion follows the file's style, not that of earlier insertions, and so that a fix with
/// a thousand operations does not walk the document a thousand times.
#[derive(Debug, Default, Clone)]
pub(super) struct DocumentLayout {
    steps: Tally,
    seq_offsets: Tally,
    item_offsets: Tally,
}

/// Samples the whole document, walked without recursion and within a bound.
pub(super) fn document_layout(view: &View<'_>) -> DocumentLayout {
    let mut doc = DocumentLayout::default();
    let mut stack = vec![String::new()];
    let mut visited = 0usize;
    while let Some(p) = stack.pop() {
        visited += 1;
        if visited > 4_000 {
            break;
        }
        let Ok(node) = view.node(&p) else { continue };
        sample(view, &node, &mut doc);
        match node.value {
            Value::Object(map) => {
                stack.extend(
                    map.iter()
                        .filter(|(_, v)| is_collection(v))
                        .map(|(k, _)| child_pointer(&p, k)),
                );
            }
            Value::Array(items) => stack.extend(
                items
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| is_collection(v))
                    .map(|(i, _)| format!("{p}/{i}")),
            ),
            _ => {}
        }
    }
    doc
}

/// Detects the block layout near `pointer`: the indentation step from the closest nesting
/// that shows one, the sequence and item styles from the whole document.
fn layout(view: &View<'_>, pointer: &str) -> Layout {
    // The nearest evidence first: the mapping we insert into and its own key.
    let mut local = DocumentLayout::default();
    let mut local_step = None;
    if let Ok(node) = view.node(pointer)
        && node.shape == Shape::BlockMap
    {
        let children = view.map_children(&node);
        if let (Some(key), Some(first_key)) =
            (node.loc.key, children.first().and_then(|c| c.loc.key))
            && first_key.line > key.line
            && first_key.column > key.column
        {
            local_step = Some(first_key.column - key.column);
        } else {
            for child in &children {
                sample(view, child, &mut local);
            }
            local_step = local.steps.majority(&Tally::default());
        }
    }
    // Then the whole document.
    let doc = view.layout;
    let step = local_step
        .or_else(|| doc.steps.majority(&Tally::default()))
        .unwrap_or(2);
    Layout {
        step,
        seq_offset: local.seq_offsets.majority(&doc.seq_offsets).unwrap_or(step),
        item_offset: local.item_offsets.majority(&doc.item_offsets).unwrap_or(2),
    }
}

fn is_collection(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

/// Records what one node shows of the layout: a block mapping under a key (its step), a block
/// sequence under a key (indented or indentless), a mapping item (`- ` width).
fn sample(view: &View<'_>, node: &Node<'_>, into: &mut DocumentLayout) {
    if node.loc.shared {
        return;
    }
    match node.shape {
        Shape::BlockMap => {
            let first = view.map_children(node).into_iter().next();
            let first_key = first.and_then(|f| f.loc.key);
            if let (Some(key), Some(first_key)) = (node.loc.key, first_key)
                && first_key.line > key.line
                && first_key.column > key.column
            {
                into.steps.push(first_key.column - key.column);
            }
            if let (Some(dash), Some(first_key)) = (node.loc.item, first_key)
                && first_key.line == dash.line
                && first_key.column > dash.column
            {
                into.item_offsets.push(first_key.column - dash.column);
            }
        }
        Shape::BlockSeq => {
            let dash = view
                .locations
                .get(&format!("{}/0", node.pointer))
                .and_then(|l| l.item);
            if let (Some(key), Some(dash)) = (node.loc.key, dash)
                && dash.line > key.line
                && dash.column >= key.column
            {
                into.seq_offsets.push(dash.column - key.column);
            }
        }
        _ => {}
    }
}

/// `add` of a key that is not there yet, or of a sequence item.
pub(super) fn add(view: &View<'_>, pointer: &str, value: &Value) -> Result<Vec<Edit>, String> {
    let (parent_pointer, token) =
        split_pointer(pointer).ok_or("the whole document cannot be added to")?;
    let parent = view.node(parent_pointer)?;
    match parent.value {
        Value::Object(map) if map.contains_key(&token) => replace(view, pointer, value),
        Value::Object(_) => add_entry(view, &parent, &token, value),
        Value::Array(items) => {
            let index = if token == "-" {
                items.len()
            } else {
                token
                    .parse::<usize>()
                    .map_err(|_| format!("`{token}` is not an index of `{parent_pointer}`"))?
            };
            add_item(view, &parent, index, value)
        }
        _ => Err(format!(
            "`{parent_pointer}` is not a mapping or a sequence, so nothing can be added to it"
        )),
    }
}

fn add_entry(
    view: &View<'_>,
    parent: &Node<'_>,
    key: &str,
    value: &Value,
) -> Result<Vec<Edit>, String> {
    refuse_shared(parent)?;
    let text = view.text;
    match parent.shape {
        Shape::BlockMap => {
            let children = view.map_children(parent);
            let first_key = children
                .first()
                .and_then(|c| c.loc.key)
                .ok_or_else(|| format!("`{}` has no key of its own in the text", parent.pointer))?;
            let indent = indent_of(text, first_key.start, first_key.column);
            let layout = layout(view, &parent.pointer);
            let mut body = " ".repeat(indent);
            body.push_str(&render::key(key, Context::Block));
            body.push(':');
            render::block_value(&mut body, value, indent, &layout, 0)?;
            let last = view.end_of(parent).max(1) - 1;
            Ok(vec![view.line_at(scan::line_end_after(text, last), &body)])
        }
        Shape::FlowMap { open, close } => {
            let children = view.map_children(parent);
            let context = match children.first().and_then(|c| c.loc.key) {
                Some(k) if text.as_bytes().get(k.start) == Some(&b'"') => Context::Json,
                Some(_) => Context::Flow,
                None => view.flow_context(),
            };
            let mut entry = render::key(key, context);
            entry.push_str(": ");
            let last = children.iter().max_by_key(|c| view.end_of(c));
            let Some(last) = last else {
                if let Some(edits) =
                    expand_empty(view, parent, open, close, |body, indent, layout| {
                        let indent = indent + layout.step;
                        body.push_str(&" ".repeat(indent));
                        body.push_str(&render::key(key, Context::Block));
                        body.push(':');
                        render::block_value(body, value, indent, layout, 0)
                    })
                {
                    return edits;
                }
                render::flow(&mut entry, value, context, 0)?;
                return Ok(vec![Edit {
                    start: open + 1,
                    end: close,
                    text: entry,
                }]);
            };
            let after = view.end_of(last);
            let key_start = last.loc.key.map_or(after, |k| k.start);
            flow_append(view, open, close, key_start, after, entry, value, context)
        }
        _ => Err(format!(
            "`{}` is not written as a mapping the fix can extend",
            parent.pointer
        )),
    }
}

/// Adding to an empty `{}` or `[]` that is the value of a block mapping key (`annotations: {}`,
/// common in rendered Helm output): the braces go and the new content is written in block
/// style under the key, as the rest of the file is. `None` when the collection is not written
/// that way (flow or JSON context, something else on its line); it then stays in flow style.
/// `write` gets the body to fill, the key's indentation and the layout.
fn expand_empty(
    view: &View<'_>,
    parent: &Node<'_>,
    open: usize,
    close: usize,
    write: impl FnOnce(&mut String, usize, &Layout) -> Result<(), String>,
) -> Option<Result<Vec<Edit>, String>> {
    let text = view.text;
    let key = parent.loc.key?;
    let (grandparent, _) = split_pointer(&parent.pointer)?;
    if view.node(grandparent).ok()?.shape != Shape::BlockMap {
        return None;
    }
    // `key: {}` with only blanks inside the braces and nothing but a comment after them.
    let bytes = text.as_bytes();
    let mut colon = key.end;
    while matches!(bytes.get(colon), Some(b' ' | b'\t')) {
        colon += 1;
    }
    let inside_blank = text.get(open + 1..close)?.trim().is_empty();
    let after = scan::skip_blanks(text, close + 1, scan::line_end_after(text, close));
    let rest_ok = matches!(bytes.get(after), None | Some(b'#' | b'\r' | b'\n'));
    let between = text.get(colon + 1..open)?;
    if bytes.get(colon) != Some(&b':') || !inside_blank || !rest_ok || !between.trim().is_empty() {
        return None;
    }
    let indent = indent_of(text, key.start, key.column);
    let layout = layout(view, grandparent);
    let mut body = String::new();
    if let Err(e) = write(&mut body, indent, &layout) {
        return Some(Err(e));
    }
    Some(Ok(vec![
        Edit {
            start: colon + 1,
            end: close + 1,
            text: String::new(),
        },
        view.line_at(scan::line_end_after(text, close), &body),
    ]))
}

/// Appends `prefix` + `value` after the last entry of a flow collection (which starts at
/// `last_start` and ends at `last_end`): on a new line, pretty-printed, when the collection
/// puts one entry per line (pretty JSON), else `, entry` on the same line.
#[allow(clippy::too_many_arguments)]
fn flow_append(
    view: &View<'_>,
    open: usize,
    close: usize,
    last_start: usize,
    last_end: usize,
    mut entry: String,
    value: &Value,
    context: Context,
) -> Result<Vec<Edit>, String> {
    let text = view.text;
    let one_per_line = scan::first_on_line(text, last_start)
        && text
            .get(last_end..close)
            .is_some_and(|between| between.contains(['\n', '\r']));
    if one_per_line {
        let indent = scan::line_indent(text, last_start);
        let outer = scan::line_indent(text, open);
        let unit = indent
            .strip_prefix(outer)
            .filter(|u| !u.is_empty())
            .unwrap_or("  ");
        render::flow_pretty(&mut entry, value, context, indent, unit, 0)?;
        let inserted = format!(",\n{indent}{entry}").replace('\n', view.newline);
        Ok(vec![Edit::insert(last_end, inserted)])
    } else {
        render::flow(&mut entry, value, context, 0)?;
        Ok(vec![Edit::insert(last_end, format!(", {entry}"))])
    }
}

fn add_item(
    view: &View<'_>,
    parent: &Node<'_>,
    index: usize,
    value: &Value,
) -> Result<Vec<Edit>, String> {
    refuse_shared(parent)?;
    let text = view.text;
    let items = view.seq_items(parent);
    if index > items.len() {
        return Err(format!(
            "index {index} is past the end of `{}`",
            parent.pointer
        ));
    }
    match parent.shape {
        Shape::BlockSeq => {
            let dash = items
                .first()
                .and_then(|i| i.loc.item)
                .ok_or_else(|| format!("`{}` has no `-` item in the text", parent.pointer))?;
            if !scan::first_on_line(text, dash.start) {
                return Err(format!(
                    "`{}` starts on the line of another item (`- - x`); add the item by hand",
                    parent.pointer
                ));
            }
            let indent = scan::line_indent(text, dash.start).chars().count();
            let layout = layout(view, &parent.pointer);
            let mut body = " ".repeat(indent);
            body.push('-');
            render::block_item(&mut body, value, indent, &layout, 0)?;
            let at = match items.get(index).and_then(|i| i.loc.item) {
                Some(d) if scan::first_on_line(text, d.start) => scan::line_start(text, d.start),
                Some(_) => {
                    return Err(format!(
                        "item {index} of `{}` does not start its line",
                        parent.pointer
                    ));
                }
                None => scan::line_end_after(text, view.end_of(parent).max(1) - 1),
            };
            Ok(vec![view.line_at(at, &body)])
        }
        Shape::FlowSeq { open, close } => {
            let context = view.flow_context();
            if let Some(next) = items.get(index) {
                let mut item = String::new();
                render::flow(&mut item, value, context, 0)?;
                let start = next.loc.value.start;
                let separator = if scan::first_on_line(text, start) {
                    format!(",{}{}", view.newline, scan::line_indent(text, start))
                } else {
                    ", ".to_owned()
                };
                return Ok(vec![Edit::insert(start, format!("{item}{separator}"))]);
            }
            match items.last() {
                None => {
                    let expanded =
                        expand_empty(view, parent, open, close, |body, indent, layout| {
                            let dash = indent + layout.seq_offset;
                            body.push_str(&" ".repeat(dash));
                            body.push('-');
                            render::block_item(body, value, dash, layout, 0)
                        });
                    if let Some(edits) = expanded {
                        return edits;
                    }
                    let mut item = String::new();
                    render::flow(&mut item, value, context, 0)?;
                    Ok(vec![Edit {
                        start: open + 1,
                        end: close,
                        text: item,
                    }])
                }
                Some(last) => flow_append(
                    view,
                    open,
                    close,
                    last.loc.value.start,
                    view.end_of(last),
                    String::new(),
                    value,
                    context,
                ),
            }
        }
        _ => Err(format!(
            "`{}` is not written as a sequence the fix can extend",
            parent.pointer
        )),
    }
}

/// `remove` of a mapping entry or a sequence item.
pub(super) fn remove(view: &View<'_>, pointer: &str) -> Result<Vec<Edit>, String> {
    let (parent_pointer, _) =
        split_pointer(pointer).ok_or("the whole document cannot be removed")?;
    let parent = view.node(parent_pointer)?;
    let node = view.node(pointer)?;
    refuse_shared(&node)?;
    let text = view.text;
    let end = view.end_of(&node);
    match parent.shape {
        Shape::BlockMap => {
            let key = node.loc.key.ok_or("the entry has no key in the text")?;
            let children = view.map_children(&parent);
            if !children.iter().any(|c| c.pointer == node.pointer) {
                return Err(format!(
                    "`{pointer}` comes from a merge key (`<<`); remove it by hand"
                ));
            }
            if children.len() < 2 {
                return emptied(view, &parent, key.start, end, "{}");
            }
            if scan::first_on_line(text, key.start) {
                return Ok(vec![Edit {
                    start: scan::line_start(text, key.start),
                    end: scan::line_end_after(text, end.max(1) - 1),
                    text: String::new(),
                }]);
            }
            // The first key of a sequence item (`- name: x`): the next key moves up to its
            // place after the `-`.
            let next = children
                .iter()
                .filter_map(|c| c.loc.key)
                .filter(|k| k.start > key.start)
                .map(|k| k.start)
                .min()
                .ok_or("the entry shares its line with other text; remove it by hand")?;
            Ok(vec![Edit {
                start: key.start,
                end: next,
                text: String::new(),
            }])
        }
        Shape::BlockSeq => {
            let dash = node.loc.item.ok_or("the item has no `-` in the text")?;
            if view.seq_items(&parent).len() < 2 {
                return emptied(view, &parent, dash.start, end, "[]");
            }
            if !scan::first_on_line(text, dash.start) {
                return Err(format!(
                    "`{pointer}` shares its line with other text; remove it by hand"
                ));
            }
            Ok(vec![Edit {
                start: scan::line_start(text, dash.start),
                end: scan::line_end_after(text, end.max(1) - 1),
                text: String::new(),
            }])
        }
        Shape::FlowMap { open, close } | Shape::FlowSeq { open, close } => {
            let start = node.loc.key.map_or(node.loc.value.start, |k| k.start);
            Ok(vec![flow_remove(text, open, close, start, end)])
        }
        Shape::Scalar => Err(format!("`{parent_pointer}` is not a collection")),
    }
}

/// Removes the last entry (or item) of a block collection, which starts at `start` (its key or
/// `-`) and ends at `end`: the collection becomes `empty` (`{}` or `[]`, as the patch says),
/// written after its own key's `:` (or its `-`), and the entry's lines go.
fn emptied(
    view: &View<'_>,
    parent: &Node<'_>,
    start: usize,
    end: usize,
    empty: &str,
) -> Result<Vec<Edit>, String> {
    let text = view.text;
    let own_line = scan::first_on_line(text, start);
    if let Some(key) = parent.loc.key
        && own_line
    {
        let bytes = text.as_bytes();
        let mut colon = key.end;
        while matches!(bytes.get(colon), Some(b' ' | b'\t')) {
            colon += 1;
        }
        if bytes.get(colon) == Some(&b':') && colon < start {
            return Ok(vec![
                Edit::insert(colon + 1, format!(" {empty}")),
                Edit {
                    start: scan::line_start(text, start),
                    end: scan::line_end_after(text, end.max(1) - 1),
                    text: String::new(),
                },
            ]);
        }
    }
    if parent.loc.key.is_none() && (!own_line || parent.pointer.is_empty()) {
        // `- name: x` becomes `- {}`; a document's only key, `{}`.
        return Ok(vec![Edit {
            start,
            end,
            text: empty.to_owned(),
        }]);
    }
    Err(format!(
        "removing the last entry of `{}` would leave it empty in a way this fix cannot \
         write; edit it by hand",
        parent.pointer
    ))
}

/// Removes `start..end` from a flow collection with one adjacent comma: the one after it, else
/// the one before it, else none (the only entry).
fn flow_remove(text: &str, open: usize, close: usize, start: usize, end: usize) -> Edit {
    let after = scan::skip_blanks(text, end, close);
    if text.as_bytes().get(after) == Some(&b',') {
        let next = scan::skip_blanks(text, after + 1, close);
        // Keep the blank before a comment, which must not touch the preceding token.
        let stop = if text.as_bytes().get(next) == Some(&b'#') {
            after + 1
        } else {
            next
        };
        return Edit {
            start,
            end: stop,
            text: String::new(),
        };
    }
    let before = scan::back_over_blanks(text, start, open + 1);
    if before > open + 1 && text.as_bytes().get(before - 1) == Some(&b',') {
        return Edit {
            start: scan::back_over_blanks(text, before - 1, open + 1),
            end,
            text: String::new(),
        };
    }
    Edit {
        start,
        end,
        text: String::new(),
    }
}

/// `replace` (or `add` of a key that exists): a scalar's bytes only, keeping its key and any
/// comment; a block collection or a new non-empty collection rewrites the entry in block style.
pub(super) fn replace(view: &View<'_>, pointer: &str, value: &Value) -> Result<Vec<Edit>, String> {
    let (parent_pointer, _) =
        split_pointer(pointer).ok_or("the whole document cannot be replaced")?;
    let parent = view.node(parent_pointer)?;
    let node = view.node(pointer)?;
    refuse_shared(&node)?;
    let text = view.text;
    let end = view.end_of(&node);
    // A block collection is rewritten in block style, a flow one in flow style; a scalar that
    // becomes a collection turns into block style under a block parent.
    let block_old = matches!(node.shape, Shape::BlockMap | Shape::BlockSeq);
    let flow_old = matches!(node.shape, Shape::FlowMap { .. } | Shape::FlowSeq { .. });
    let rewrite = block_old || (is_collection(value) && !flow_old);
    match parent.shape {
        Shape::BlockMap if rewrite => {
            let key = node.loc.key.ok_or("the entry has no key in the text")?;
            let indent = indent_of(text, key.start, key.column);
            let layout = layout(view, parent_pointer);
            let mut body = text.get(key.start..key.end).unwrap_or_default().to_owned();
            body.push(':');
            render::block_value(&mut body, value, indent, &layout, 0)?;
            Ok(vec![Edit {
                start: key.start,
                end,
                text: body.replace('\n', view.newline),
            }])
        }
        Shape::BlockSeq if rewrite => {
            let dash = node.loc.item.ok_or("the item has no `-` in the text")?;
            let indent = indent_of(text, dash.start, dash.column);
            let layout = layout(view, parent_pointer);
            let mut body = String::new();
            render::block_item(&mut body, value, indent, &layout, 0)?;
            Ok(vec![Edit {
                start: dash.end,
                end,
                text: body.replace('\n', view.newline),
            }])
        }
        Shape::BlockMap | Shape::BlockSeq if !flow_old => {
            let rendered = render::scalar(value, Context::Block).unwrap_or_default();
            Ok(vec![scalar_edit(text, &node, end, rendered)])
        }
        Shape::BlockMap | Shape::BlockSeq | Shape::FlowMap { .. } | Shape::FlowSeq { .. } => {
            let mut rendered = String::new();
            render::flow(&mut rendered, value, view.flow_context(), 0)?;
            Ok(vec![scalar_edit(text, &node, end, rendered)])
        }
        Shape::Scalar => Err(format!("`{parent_pointer}` is not a collection")),
    }
}

/// Replaces a value's own bytes; an empty value (`key:`) gets ` value` after its `:`.
fn scalar_edit(text: &str, node: &Node<'_>, end: usize, rendered: String) -> Edit {
    let span = node.loc.value;
    if span.start == span.end && matches!(text.as_bytes().get(span.start), Some(b':' | b'-')) {
        return Edit::insert(span.start + 1, format!(" {rendered}"));
    }
    Edit {
        start: span.start,
        end,
        text: rendered,
    }
}

/// `remove` of a block mapping entry immediately followed by `add` of a new key to the same
/// mapping (`tcpSocket` → `httpGet`): the new entry takes the removed one's lines, so the diff
/// reads as a swap and a mapping whose only key is swapped never becomes empty. `None` when the
/// shapes do not fit; the operations then go one at a time.
pub(super) fn swap(
    view: &View<'_>,
    removed: &str,
    added: &str,
    value: &Value,
) -> Option<Result<Vec<Edit>, String>> {
    let (parent_pointer, removed_key) = split_pointer(removed)?;
    let (added_parent, key) = split_pointer(added)?;
    if added_parent != parent_pointer {
        return None;
    }
    let parent = view.node(parent_pointer).ok()?;
    let Value::Object(map) = parent.value else {
        return None;
    };
    // Re-adding the removed key is a swap too (a replace in two steps).
    if parent.shape != Shape::BlockMap || (map.contains_key(&key) && key != removed_key) {
        return None;
    }
    let node = view.node(removed).ok()?;
    if let Err(e) = refuse_shared(&node) {
        return Some(Err(e));
    }
    let text = view.text;
    let key_span = node.loc.key?;
    view.map_children(&parent)
        .iter()
        .any(|c| c.pointer == node.pointer)
        .then_some(())?;
    let end = scan::line_end_after(text, view.end_of(&node).max(1) - 1);
    let (start, mut body) = if scan::first_on_line(text, key_span.start) {
        (
            scan::line_start(text, key_span.start),
            scan::line_indent(text, key_span.start).to_owned(),
        )
    } else {
        (key_span.start, String::new())
    };
    let indent = indent_of(text, key_span.start, key_span.column);
    let layout = layout(view, parent_pointer);
    body.push_str(&render::key(&key, Context::Block));
    body.push(':');
    if let Err(e) = render::block_value(&mut body, value, indent, &layout, 0) {
        return Some(Err(e));
    }
    let mut body = body.replace('\n', view.newline);
    if text.get(..end).is_some_and(scan::ends_with_newline) {
        body.push_str(view.newline);
    }
    Some(Ok(vec![Edit {
        start,
        end,
        text: body,
    }]))
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
