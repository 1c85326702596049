//! What one stream may cost while it is built ([`Limits`]): nodes (aliases counted as what they
//! repeat, anchored collections twice), text copied by aliases and anchors, and nesting depth.
//! Checked as events arrive, before anything is built or copied for them.

use super::error::{YamlError, YamlErrorKind};
use super::source::SourceMap;
use super::{HARD_MAX_DEPTH, Limits};

/// The budgets spent so far in one stream.
pub(super) struct Budget<'l> {
    limits: &'l Limits,
    /// Nodes built in the whole stream: the alias-bomb budget.
    nodes_total: usize,
    /// Bytes of scalar text copied for aliases and anchors in the whole stream: the budget
    /// against a few aliases of one huge string.
    copied_bytes: usize,
}

impl<'l> Budget<'l> {
    pub(super) fn new(limits: &'l Limits) -> Self {
        Budget {
            limits,
            nodes_total: 0,
            copied_bytes: 0,
        }
    }

    /// Counts `nodes` built (or repeated by an alias) at character `index`.
    pub(super) fn count_nodes(
        &mut self,
        nodes: usize,
        source: &SourceMap<'_>,
        index: usize,
    ) -> Result<(), YamlError> {
        self.nodes_total = self.nodes_total.saturating_add(nodes);
        if self.nodes_total > self.limits.max_nodes {
            return Err(source.error(
                YamlErrorKind::TooManyNodes,
                format!(
                    "more than {} nodes once aliases are expanded (an alias bomb?)",
                    self.limits.max_nodes
                ),
                index,
            ));
        }
        Ok(())
    }

    /// Counts text copied for an alias or an anchor: node counts alone would let
    /// `a: &a "<10 MB>"` followed by a thousand `*a` build 10 GB.
    pub(super) fn count_copied_bytes(
        &mut self,
        bytes: usize,
        source: &SourceMap<'_>,
        index: usize,
    ) -> Result<(), YamlError> {
        self.copied_bytes = self.copied_bytes.saturating_add(bytes);
        if self.copied_bytes > self.limits.max_file_bytes {
            return Err(source.error(
                YamlErrorKind::TooManyNodes,
                format!(
                    "aliases copy more than {} bytes of text (an alias bomb?)",
                    self.limits.max_file_bytes
                ),
                index,
            ));
        }
        Ok(())
    }

    /// The depth limit in force; see [`Limits::max_depth`].
    pub(super) fn max_depth(&self) -> usize {
        self.limits.max_depth.min(HARD_MAX_DEPTH)
    }

    /// The error for a collection or alias at character `index` that goes past
    /// [`Budget::max_depth`].
    pub(super) fn too_deep(&self, source: &SourceMap<'_>, index: usize) -> YamlError {
        source.error(
            YamlErrorKind::TooDeep,
            format!("collections nested deeper than {} levels", self.max_depth()),
            index,
        )
    }
}
