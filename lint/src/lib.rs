//! probelint CLI library: the pieces the `probelint` binary is built from.

pub mod atomic;
pub mod config;
pub mod explain;
pub mod inputs;
pub mod kustomize;
pub mod lint;
pub mod output;
pub mod report;
pub mod yaml;
