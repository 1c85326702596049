//! The file's block layout (indentation step, indented or indentless sequences under keys, the
//! width of `- ` before a mapping item's first key), sampled once per document and read near
//! each place that gets new content. The tallies themselves ([`DocumentLayout`]) are data the
//! [`View`] carries; this file fills and reads them.

use serde_json::Value;

use super::render::Layout;
use super::view::{DocumentLayout, Node, Shape, Tally, View, child_pointer, is_collection};

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
pub(super) fn layout(view: &View<'_>, pointer: &str) -> Layout {
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
