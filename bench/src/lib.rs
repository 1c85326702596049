//! The probelint benchmark suite (`bench/run.sh`): a deterministic corpus generator, the
//! measuring tools and the baselines every figure is compared with.
//!
//! * `gen-corpus`: synthetic manifests ([`corpus`]).
//! * `parse-only`: the linter's own limit, reading and parsing like the CLI and nothing else.
//! * `echo-listener`: the webhook's limit, its own listener and TLS ([`probelint_webhook::run_router`])
//!   with a handler that parses the body and answers an allowed AdmissionReview ([`echo`]).
//! * `echo-server`: the same handler on axum-server with rustls: the yardstick before
//!   `echo-listener`, kept to show what the webhook's transport costs beside a stock one.
//! * `bench-run`: timing loops, the HTTPS load generator ([`loadgen`]) and the report.

pub mod corpus;
pub mod echo;
pub mod loadgen;
pub mod process;
pub mod review;
pub mod stats;
pub mod tls;
