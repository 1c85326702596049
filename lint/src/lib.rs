//! probelint CLI library: the pieces the `probelint` binary is built from.

pub mod output;
pub mod report;
pub mod yaml;
