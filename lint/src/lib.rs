//! probelint CLI library: the pieces the `probelint` binary is built from.

pub mod atomic;
pub mod audit;
pub mod config;
pub mod explain;
pub mod fixcmd;
pub mod inputs;
pub mod kustomize;
pub mod lint;
pub mod mutate;
pub mod output;
pub mod overlap;
pub mod report;
pub mod simulate;
pub mod simulate_svg;

// The YAML layers are their own crate; the old paths stay so that `crate::yaml::…` reads on.
pub use probelint_yaml::{load as yaml, patch as textfix};
