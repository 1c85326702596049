//! The first stage: what to read (paths walked the way `git` sees them, kustomizations rendered)
//! and reading it within the limits.

pub mod discover;
pub mod kustomize;
pub mod read;

pub use discover::{
    Discovery, Input, describe_io, discover, display_path, exclude_set, helm_chart_of,
    is_manifest_name,
};
pub use read::{Origin, Pending, Source, read_input};
