//! probelint CLI library: the pieces the `probelint` binary is built from.

pub mod yaml;
