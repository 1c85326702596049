//! The load time a finding rests on, as JSON and SARIF carry it: spelled out here (a contract
//! with scripts) rather than derived from the engine's types.
//!
//! ```json
//! "load": {"fast_seconds": 160, "slow_seconds": 3100, "confidence": "estimated",
//!          "explanation": "≈ 160–3100 s (140 GB (…) …)", "why"?: "…",
//!          "estimate"?: {"model", "model_from", "parameters_billions", "parameters_from",
//!          "bytes_per_parameter", "precision", "precision_from", "bytes", "pipeline_stages",
//!          "source", "bandwidth_mb_per_second": {"fast", "slow"}, "read_seconds": {"fast",
//!          "slow"}, "server", "start_seconds": {"fast", "slow"}, "fetched_by"}}
//! ```
//! A load is a range: `fast_seconds` is the quickest it plausibly takes (an error that says a
//! deadline kills it rests on this end), `slow_seconds` the slowest (what a deadline a fix adds
//! covers). A declared or assumed load has both ends equal.
//! `confidence` is `declared` (probelint.io/model-load-seconds), `declared-bounded` (in strict
//! mode, a declared load below the estimate's fast end: the estimate stands), `estimated`, `lazy` (the server
//! loads models on first request) or `assumed` (the policy's default; `why` says what was
//! missing). Findings that rest on an assumed load are warnings at most.

use probelint_policies::load::{Basis, LoadTime, Span};
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct Load<'a> {
    fast_seconds: f64,
    slow_seconds: f64,
    confidence: &'static str,
    explanation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate: Option<Estimate<'a>>,
}

#[derive(Serialize)]
struct Estimate<'a> {
    model: &'a str,
    model_from: &'a str,
    parameters_billions: f64,
    parameters_from: &'a str,
    bytes_per_parameter: f64,
    precision: &'a str,
    precision_from: &'a str,
    bytes: f64,
    pipeline_stages: u32,
    /// `downloaded from the Hugging Face Hub`, `read from PVC "models"`.
    source: String,
    bandwidth_mb_per_second: Span,
    read_seconds: Span,
    server: Option<&'a str>,
    start_seconds: Span,
    /// The init container that downloads the weights before this one starts.
    fetched_by: Option<&'a str>,
}

impl<'a> Load<'a> {
    pub(super) fn of(load: &'a LoadTime) -> Self {
        let (confidence, why, estimate) = match &load.basis {
            Basis::Declared => ("declared", None, None),
            Basis::Lazy { .. } => ("lazy", None, None),
            Basis::Assumed { why } => ("assumed", Some(why.as_str()), None),
            Basis::Estimated(e) | Basis::Bounded { estimate: e, .. } => (
                if matches!(load.basis, Basis::Bounded { .. }) {
                    "declared-bounded"
                } else {
                    "estimated"
                },
                None,
                Some(Estimate {
                    model: &e.model,
                    model_from: &e.model_from,
                    parameters_billions: e.parameters.billions,
                    parameters_from: &e.parameters.from,
                    bytes_per_parameter: e.precision.bytes_per_parameter,
                    precision: &e.precision.name,
                    precision_from: &e.precision.from,
                    bytes: e.bytes,
                    pipeline_stages: e.pipeline_stages,
                    source: e.source.to_string(),
                    bandwidth_mb_per_second: e.bandwidth_mb_per_second,
                    read_seconds: e.read_seconds,
                    server: e.server.as_deref(),
                    start_seconds: e.start_seconds,
                    fetched_by: e.fetched_by.as_ref().map(|f| f.container.as_str()),
                }),
            ),
        };
        Load {
            fast_seconds: load.fast,
            slow_seconds: load.slow,
            confidence,
            explanation: load.explained().to_string(),
            why,
            estimate,
        }
    }
}
