//! probelint's conformance suite: run a reference model server the way the kubelet runs a
//! container of a manifest, probe it with the manifest's own probes over real HTTP/TCP/exec, send
//! traffic only while it is Ready (as a Service would), and measure what the probes did:
//! transitions, restarts, first-ready time, failed requests.
//!
//! Time is scaled: one second of manifest (cluster) time is `time_scale` seconds of real time, for
//! the probes here and for the server's own delays (`--time-scale`), so a ten-minute scenario runs
//! in seconds.

pub mod bins;
pub mod kubelet;
pub mod spec;
pub mod webhook;

pub use kubelet::{Config, Report, run};
pub use probelint_policies::simulate::Transition;
pub use spec::{ContainerSpec, Handler, ProbeSpec};
