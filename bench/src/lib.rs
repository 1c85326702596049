//! The probelint benchmark suite (`bench/run.sh`): a deterministic corpus generator, the
//! measuring tools and the baselines every figure is compared with.
//!
//! * `gen-corpus`: synthetic manifests ([`corpus`]).
//! * `parse-only`: the linter's own limit, reading and parsing like the CLI and nothing else.
//! * `echo-server`: the webhook's limit, the same axum + rustls stack answering an allowed
//!   AdmissionReview without looking at it.
//! * `bench-run`: timing loops, the HTTPS load generator ([`loadgen`]) and the report.

pub mod corpus;
pub mod loadgen;
pub mod process;
pub mod review;
pub mod stats;
pub mod tls;
