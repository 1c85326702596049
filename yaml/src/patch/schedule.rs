//! Which operations of a document may be written together.
//!
//! Applying operations one at a time costs a parse of the whole document after each one, so
//! a document with a thousand fixable containers cost a million container parses. But the
//! fixes of different containers touch different parts of the text: an operation only looks
//! at, and only edits, the text of its *anchor* (the parent of the node it adds, removes or
//! replaces). Two operations whose anchors are neither the same node nor one inside the other
//! see the same text whether the other one has been applied or not, so they can be turned into
//! edits against the same text, applied at once and read back once.
//!
//! So each operation gets a *level*: one more than the highest level of any earlier operation
//! whose anchor is the same as, inside, or around its own. Operations of one level are written
//! in one batch; the levels run in order. Every operation still comes after every earlier one
//! it could interact with, so the result is what applying them in order gives (the driver
//! checks that anyway, and falls back to one at a time when a batch does not read back as
//! expected). The number of levels is the longest chain of operations on nested anchors (the
//! few fixes of one container), not the number of operations.

use std::collections::HashMap;

use json_patch::PatchOperation;

use super::ObjectPatch;
use super::view::split_pointer;

/// One step: an operation of a patch, or a `remove` directly followed by an `add` to the same
/// mapping, which may be written as a swap.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unit<'p> {
    pub(super) patch: &'p ObjectPatch<'p>,
    pub(super) op: usize,
    /// Operation `op + 1` is the `add` of a `remove`/`add` pair. When they cannot be written
    /// as a swap, the `add` goes in the next level, which is kept free for it.
    pub(super) pair: bool,
}

/// A pointer prefix tree of anchors, each node holding the highest level of the operations
/// anchored at it (`own`) and anywhere in its subtree (`sub`).
#[derive(Default)]
struct Node {
    children: HashMap<String, usize>,
    own: usize,
    sub: usize,
}

struct Levels {
    nodes: Vec<Node>,
    /// The level of the last operation that must see everything before it and be seen by
    /// everything after it (`move`, `copy`, one on the document root).
    floor: usize,
    highest: usize,
}

impl Levels {
    fn new() -> Self {
        Levels {
            nodes: vec![Node::default()],
            floor: 0,
            highest: 0,
        }
    }

    /// The nodes from the root to `anchor`'s, created as needed.
    fn path(&mut self, anchor: &str) -> Vec<usize> {
        let mut path = vec![0];
        let mut at = 0;
        for token in anchor.split('/').skip(1) {
            let next = match self.nodes[at].children.get(token) {
                Some(&next) => next,
                None => {
                    let next = self.nodes.len();
                    self.nodes.push(Node::default());
                    self.nodes[at].children.insert(token.to_owned(), next);
                    next
                }
            };
            path.push(next);
            at = next;
        }
        path
    }

    /// The level of an operation anchored at `anchor` (`None`: one that every other must wait
    /// for); `span` levels are taken (2 for a pair, whose `add` may need the second).
    fn assign(&mut self, anchor: Option<&str>, span: usize) -> usize {
        let Some(anchor) = anchor else {
            let level = self.highest + 1;
            self.highest = level + span - 1;
            self.floor = self.highest;
            return level;
        };
        let path = self.path(anchor);
        let (last, above) = path.split_last().unwrap_or((&0, &[]));
        let around = above.iter().map(|&n| self.nodes[n].own).max().unwrap_or(0);
        let level = around.max(self.nodes[*last].sub).max(self.floor) + 1;
        let top = level + span - 1;
        self.nodes[*last].own = self.nodes[*last].own.max(top);
        for &n in &path {
            self.nodes[n].sub = self.nodes[n].sub.max(top);
        }
        self.highest = self.highest.max(top);
        level
    }
}

/// The parent of the node an operation adds, removes, replaces or tests: the text it reads
/// and edits. `None` for operations that read or write elsewhere too (`move`, `copy`) or on
/// the document root.
fn anchor(prefix: &str, op: &PatchOperation) -> Option<String> {
    match op {
        PatchOperation::Add(_)
        | PatchOperation::Remove(_)
        | PatchOperation::Replace(_)
        | PatchOperation::Test(_) => {
            let path = format!("{prefix}{}", op.path().as_str());
            let (parent, _) = split_pointer(&path)?;
            Some(parent.to_owned())
        }
        PatchOperation::Move(_) | PatchOperation::Copy(_) => None,
    }
}

/// The operations of one document's patches (in order), grouped into levels. Within a level
/// the operations keep their order.
pub(super) fn levels<'p>(patches: &[&'p ObjectPatch<'p>]) -> Vec<Vec<Unit<'p>>> {
    let mut levels = Levels::new();
    let mut out: Vec<Vec<Unit<'p>>> = Vec::new();
    for patch in patches {
        let mut i = 0;
        while i < patch.ops.len() {
            let op = &patch.ops[i];
            let here = anchor(&patch.prefix, op);
            let pair = matches!(op, PatchOperation::Remove(_))
                && here.is_some()
                && patch.ops.get(i + 1).is_some_and(|next| {
                    matches!(next, PatchOperation::Add(_)) && anchor(&patch.prefix, next) == here
                });
            let span = if pair { 2 } else { 1 };
            let level = levels.assign(here.as_deref(), span);
            if out.len() < level + span - 1 {
                out.resize_with(level + span - 1, Vec::new);
            }
            out[level - 1].push(Unit { patch, op: i, pair });
            i += span;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use json_patch::jsonptr::PointerBuf;
    use json_patch::{AddOperation, MoveOperation, RemoveOperation};
    use serde_json::json;

    fn add(path: &str) -> PatchOperation {
        PatchOperation::Add(AddOperation {
            path: PointerBuf::parse(path).unwrap_or_default(),
            value: json!(1),
        })
    }

    fn remove(path: &str) -> PatchOperation {
        PatchOperation::Remove(RemoveOperation {
            path: PointerBuf::parse(path).unwrap_or_default(),
        })
    }

    fn shape(levels: &[Vec<Unit<'_>>]) -> Vec<Vec<(usize, bool)>> {
        levels
            .iter()
            .map(|l| l.iter().map(|u| (u.op, u.pair)).collect())
            .collect()
    }

    #[test]
    fn operations_on_separate_containers_share_levels_and_nested_ones_wait() {
        let c = "/spec/containers";
        let ops = vec![
            add(&format!("{c}/0/startupProbe")),
            remove(&format!("{c}/0/readinessProbe/tcpSocket")),
            add(&format!("{c}/0/readinessProbe/httpGet")),
            add(&format!("{c}/1/startupProbe")),
            add(&format!("{c}/1/livenessProbe")),
            // Around every container: after all of them.
            add("/spec/terminationGracePeriodSeconds"),
            // Elsewhere: with the first.
            add("/metadata/annotations/x"),
        ];
        let patch = ObjectPatch {
            document: 0,
            prefix: String::new(),
            ops: &ops,
        };
        let levels = levels(&[&patch]);
        assert_eq!(
            shape(&levels),
            vec![
                vec![(0, false), (3, false), (6, false)],
                vec![(1, true), (4, false)],
                // Kept free for the pair's `add` when it is not a swap.
                vec![],
                vec![(5, false)],
            ]
        );
    }

    #[test]
    fn moves_and_root_operations_wait_for_everything_and_everything_waits_for_them() {
        let ops = vec![
            add("/a/x"),
            PatchOperation::Move(MoveOperation {
                from: PointerBuf::parse("/a/x").unwrap_or_default(),
                path: PointerBuf::parse("/b/x").unwrap_or_default(),
            }),
            add("/c/x"),
            add("/d"),
            add("/e/x"),
        ];
        let patch = ObjectPatch {
            document: 0,
            prefix: "/items/0".to_owned(),
            ops: &ops,
        };
        let levels = levels(&[&patch]);
        assert_eq!(
            shape(&levels),
            vec![
                vec![(0, false)],
                vec![(1, false)],
                vec![(2, false)],
                // `/items/0/d` is anchored at the object `/items/0`, around `/items/0/c`.
                vec![(3, false)],
                vec![(4, false)],
            ]
        );
        let whole = ObjectPatch {
            document: 0,
            prefix: String::new(),
            ops: &ops[3..],
        };
        assert_eq!(
            shape(&super::levels(&[&whole])),
            vec![vec![(0, false)], vec![(1, false)]],
            "an operation on the root waits for all and all wait for it"
        );
    }
}
