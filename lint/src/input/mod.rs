//! The first stage: what to read, and reading it.

pub mod discover;
pub mod kustomize;
