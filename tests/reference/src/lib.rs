//! probelint's reference serving container.
//!
//! A small but real model server: it loads safetensors weights from disk, runs a real forward
//! pass (a few dense layers) as its smoke inference, and serves `/startupz`, `/readyz`, `/livez`,
//! `POST /v1/infer` and `/metrics`. Fault switches make it load slowly, open its port early, hang,
//! slow down, leak or fail to load, so that the conformance suite can show each Kubernetes probe
//! doing its one job. See `tests/reference/README.md`.

pub mod config;
pub mod kernel;
pub mod model;
pub mod server;
pub mod state;
pub mod worker;
