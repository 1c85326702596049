//! Where each node of a document is in the file, addressed by JSON Pointer (RFC 6901).
//!
//! Locations are a tree that mirrors the YAML text, not the expanded JSON: an alias shares the
//! subtree of its anchor instead of copying it, so an alias-heavy file costs no more here than
//! its text, and no map keyed by full pointer strings (whose total size grows with depth times
//! node count) is ever built. A lookup walks one pointer token per level.

use json_patch::jsonptr::Token;

/// A stretch of the source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// 1-based line of `start`.
    pub line: usize,
    /// 1-based column of `start`, counted in characters (what editors show), not bytes.
    pub column: usize,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

/// Where one node is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLocation {
    /// The mapping key, when the node is a mapping value (`readinessProbe` in
    /// `readinessProbe: {...}`).
    pub key: Option<Span>,
    /// The node itself: a scalar with its quotes, tag and anchor; a block scalar from its `|` or
    /// `>` to its last non-blank character; a block collection from its first key or `-` to the
    /// end of its last child; a flow collection from `[`/`{` to `]`/`}`; an alias as `*name`. An
    /// empty value (`key:` with nothing after it) is an empty span at the `:`.
    pub value: Span,
    /// The `-` indicator, when the node is an item of a block sequence.
    pub item: Option<Span>,
    /// True when this node's text is reached through an alias or a merge key (`<<`), or is an
    /// anchored node that some alias repeats: editing its text changes other places too, so a
    /// fix should not splice it.
    pub shared: bool,
}

/// Sentinel for "no children entry" (scalars and aliases of scalars).
pub(super) const NONE: u32 = u32::MAX;

/// A node's place in the file, kept compact: a document has one per node, and at 160 bytes
/// (three `Option<Span>` of `usize`s) these were most of what parsing wrote to memory.
pub(super) struct LocNode {
    pub(super) key: Packed,
    pub(super) value: Packed,
    pub(super) item: Packed,
    /// Index into `Locations::children`, or [`NONE`]. Alias nodes share their anchor's entry.
    pub(super) children: u32,
    /// This node is an alias (`*name`).
    pub(super) alias: bool,
    /// This node carries an anchor that at least one alias refers to.
    pub(super) aliased: bool,
}

impl LocNode {
    pub(super) fn leaf(value: Span) -> Self {
        LocNode {
            key: Packed::ABSENT,
            value: Packed::from(value),
            item: Packed::ABSENT,
            children: NONE,
            alias: false,
            aliased: false,
        }
    }

    pub(super) fn key(&self) -> Option<Span> {
        self.key.span()
    }

    pub(super) fn value(&self) -> Span {
        self.value.span().unwrap_or_default()
    }

    pub(super) fn item(&self) -> Option<Span> {
        self.item.span()
    }

    pub(super) fn set_key(&mut self, key: Span) {
        self.key = Packed::from(key);
    }

    pub(super) fn set_item(&mut self, item: Option<Span>) {
        self.item = item.map_or(Packed::ABSENT, Packed::from);
    }
}

/// A [`Span`] in 32-bit fields. Files are far below 4 GiB ([`super::Limits::max_file_bytes`]
/// is capped there, [`super::HARD_MAX_FILE_BYTES`]), so nothing is lost; line 0 marks an absent span (lines count from 1).
#[derive(Clone, Copy)]
pub(super) struct Packed {
    line: u32,
    column: u32,
    start: u32,
    end: u32,
}

impl Packed {
    const ABSENT: Packed = Packed {
        line: 0,
        column: 0,
        start: 0,
        end: 0,
    };

    fn span(self) -> Option<Span> {
        (self.line != 0).then_some(Span {
            line: self.line as usize,
            column: self.column as usize,
            start: self.start as usize,
            end: self.end as usize,
        })
    }
}

impl From<Span> for Packed {
    fn from(span: Span) -> Self {
        let narrow = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Packed {
            line: narrow(span.line).max(1),
            column: narrow(span.column),
            start: narrow(span.start),
            end: narrow(span.end),
        }
    }
}

/// The children of one collection: a range of [`Locations::items`] or of
/// [`Locations::entries`]. Every collection of a document shares those two arrays, so a
/// collection costs no allocation of its own.
#[derive(Clone, Copy)]
pub(super) enum Children {
    Seq { start: usize, len: usize },
    Map { start: usize, len: usize },
}

/// One key of a mapping, in the mapping's order (the order of its JSON object too).
#[derive(Debug, Clone, Copy)]
pub(super) struct MapEntry {
    /// The key's text: a range of [`Locations::keys`].
    pub(super) key_start: usize,
    pub(super) key_len: usize,
    /// The node that provides the key's value, or [`NONE`].
    pub(super) node: u32,
    /// The value came from a merge key (`<<`), so its text lives elsewhere.
    pub(super) merged: bool,
}

/// The locations of one document's nodes.
#[derive(Default)]
pub struct Locations {
    pub(super) nodes: Vec<LocNode>,
    pub(super) children: Vec<Children>,
    /// The items of every sequence, each sequence's contiguous.
    pub(super) items: Vec<u32>,
    /// The keys of every mapping, each mapping's contiguous.
    pub(super) entries: Vec<MapEntry>,
    /// The text of every key in `entries`, end to end.
    pub(super) keys: String,
    pub(super) root: Option<u32>,
    /// Where the document starts (its `---`, or its first token).
    pub(super) start: Span,
}

impl std::fmt::Debug for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locations")
            .field("nodes", &self.nodes.len())
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl Locations {
    /// The location of the node at `pointer` (`""` is the whole document), or `None` when no
    /// node is there (or the pointer is malformed).
    #[must_use]
    pub fn get(&self, pointer: &str) -> Option<NodeLocation> {
        let walk = self.walk(pointer);
        walk.complete.then(|| self.location(walk.node, walk.shared))
    }

    /// The span to show for a finding at `pointer`: the node's key when it is a mapping value
    /// (so the caret lands on `readinessProbe:`), its `-` when it is a block sequence item,
    /// else the node itself. When the pointer names something that does not exist (a missing
    /// `readinessProbe`), the nearest existing ancestor is shown instead, e.g. the `- ` line
    /// of `/spec/containers/0`.
    #[must_use]
    pub fn locate(&self, pointer: &str) -> Span {
        let walk = self.walk(pointer);
        if walk.node == NONE {
            return self.start;
        }
        let loc = self.location(walk.node, walk.shared);
        loc.key.or(loc.item).unwrap_or(loc.value)
    }

    /// Where the document starts: its `---` line, or its first token.
    #[must_use]
    pub fn document_start(&self) -> Span {
        self.start
    }

    fn location(&self, node: u32, shared: bool) -> NodeLocation {
        let Some(n) = self.nodes.get(node as usize) else {
            return NodeLocation {
                key: None,
                value: self.start,
                item: None,
                shared,
            };
        };
        NodeLocation {
            key: n.key(),
            value: n.value(),
            item: n.item(),
            shared: shared || n.alias || n.aliased,
        }
    }

    pub(super) fn map_entries(&self, start: usize, len: usize) -> &[MapEntry] {
        self.entries.get(start..start + len).unwrap_or_default()
    }

    pub(super) fn key(&self, entry: &MapEntry) -> &str {
        self.keys
            .get(entry.key_start..entry.key_start + entry.key_len)
            .unwrap_or_default()
    }

    /// Follows `pointer` as far as nodes exist.
    fn walk(&self, pointer: &str) -> Walk {
        let Some(mut node) = self.root else {
            return Walk {
                node: NONE,
                shared: false,
                complete: false,
            };
        };
        let mut shared = false;
        if pointer.is_empty() {
            return Walk {
                node,
                shared,
                complete: true,
            };
        }
        let Some(tokens) = pointer.strip_prefix('/') else {
            return Walk {
                node,
                shared,
                complete: false,
            };
        };
        for raw in tokens.split('/') {
            let Some(current) = self.nodes.get(node as usize) else {
                break;
            };
            shared |= current.alias || current.aliased;
            let next = match Token::from_encoded(raw).as_ref().map(Token::decoded) {
                Err(_) => None,
                Ok(token) => match self.children.get(current.children as usize) {
                    Some(&Children::Seq { start, len }) => parse_index(&token)
                        .filter(|&i| i < len)
                        .and_then(|i| self.items.get(start + i).copied()),
                    Some(&Children::Map { start, len }) => self
                        .map_entries(start, len)
                        .iter()
                        .find(|e| self.key(e) == token.as_ref())
                        .map(|e| {
                            shared |= e.merged;
                            e.node
                        }),
                    None => None,
                },
            };
            match next {
                Some(child) => node = child,
                None => {
                    return Walk {
                        node,
                        shared,
                        complete: false,
                    };
                }
            }
        }
        Walk {
            node,
            shared,
            complete: true,
        }
    }
}

struct Walk {
    node: u32,
    shared: bool,
    complete: bool,
}

/// An array index per RFC 6901: `0`, or digits without a leading zero.
fn parse_index(token: &str) -> Option<usize> {
    let valid = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    if valid { token.parse().ok() } else { None }
}
