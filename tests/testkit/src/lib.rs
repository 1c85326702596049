//! Helpers shared by the tests of every probelint crate. Dev-only: no product crate depends on
//! it outside `[dev-dependencies]`.
//!
//! Everything a test reads lives in the repository: a clone in an empty folder passes
//! `cargo test --workspace --locked`. A vendored file that is missing fails the test that needs
//! it with the file's path and what to do, never with "0 files" or a bare panic.

pub mod corpus;
pub mod net;
pub mod patch;
pub mod pki;
pub mod process;
pub mod python;
pub mod secret;
pub mod text;
pub mod webhook;
pub mod yaml;

use std::path::{Path, PathBuf};

/// The repository's root directory (the workspace root).
pub fn repo_root() -> &'static Path {
    // This crate lives at `tests/testkit/`.
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A path inside the repository, from the root: `repo_path("tests/corpus/real")`.
pub fn repo_path(relative: &str) -> PathBuf {
    repo_root().join(relative)
}
