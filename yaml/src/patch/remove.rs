//! `remove`: a block entry's lines, or a flow entry with one comma.

use super::scan;
use super::view::{Edit, Node, Shape, View, refuse_shared, split_pointer};

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
