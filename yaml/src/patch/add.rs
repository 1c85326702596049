//! `add`: a new mapping entry after the last one, a sequence item, content in an empty `{}`/`[]`.

use serde_json::Value;

use super::layout::layout;
use super::render::{self, Context, Layout};
use super::replace::replace;
use super::scan;
use super::view::{Edit, Node, Shape, View, indent_of, refuse_shared, split_pointer};

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
