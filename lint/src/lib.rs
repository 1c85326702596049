//! probelint CLI library: the pieces the `probelint` binary is built from.

pub mod atomic;
pub mod audit;
pub mod check;
pub mod commands;
pub mod config;
pub mod input;
pub mod output;
pub mod overlap;
pub mod report;
pub mod simulate_svg;
pub mod textfix;
pub mod yaml;

// The modules' names before they moved into stages; the next commits move their users.
pub use check as lint;
pub use commands::fix as fixcmd;
pub use commands::rules as explain;
pub use commands::{mutate, simulate};
pub use input::discover as inputs;
pub use input::kustomize;
