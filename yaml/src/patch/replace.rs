//! `replace` of a node's text, and the in-place swap of a removed key for an added one.

use serde_json::Value;

use super::layout::layout;
use super::render::{self, Context};
use super::scan;
use super::view::{
    Edit, Node, Shape, View, indent_of, is_collection, refuse_shared, split_pointer,
};

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
