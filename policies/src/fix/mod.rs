//! Fix building blocks: JSON Patch operations ([`patch`]) and the probes fixes add or change
//! ([`probes`]). A rule builds its own [`Change`] from these and hands it to its finding, which
//! gives it the applicability the rule declares ([`crate::rules::rule::Draft::fix`]); merging the
//! fixes of an object into one patch is [`crate::mutate`]'s.

pub mod helper;
pub mod patch;
pub mod probes;

use crate::model::finding::{Applicability, Fix};
use json_patch::PatchOperation;

/// Operations and the words that say what they do: a fix before its rule says how safe it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub description: String,
    pub ops: Vec<PatchOperation>,
}

impl Change {
    pub fn new(description: String, ops: Vec<PatchOperation>) -> Self {
        Change { description, ops }
    }

    /// The fix a rule offers, with the applicability the rule declares for it.
    pub(crate) fn fix(self, applicability: Applicability) -> Fix {
        Fix {
            description: self.description,
            applicability,
            patch: json_patch::Patch(self.ops),
        }
    }
}
