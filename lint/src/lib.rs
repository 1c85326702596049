//! probelint CLI library: the pieces the `probelint` binary is built from, in the order a
//! manifest goes through them:
//!
//! `commands` (one per subcommand) → [`input`] (discover, kustomize, read within limits) →
//! [`load`] (parse, expand `List`s, objects with their places) → [`check`] (the engine's
//! findings placed in their files, then the cross-object rules) → `commands::fix` (with
//! `--fix`: plan, apply, write, check the changed files again) → [`output`] (one renderer per
//! format). [`error`] holds the errors, by kind. YAML is read and patched by `probelint-yaml`.

pub mod atomic;
pub mod audit;
pub mod check;
pub mod commands;
pub mod config;
pub mod error;
pub mod input;
pub mod load;
pub mod output;
pub mod overlap;
pub mod report;
pub mod simulate_svg;
