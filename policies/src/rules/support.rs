//! Helpers that several rules share: what a generation endpoint is, and how a finding that
//! rests on a guessed load time is worded and graded.

use crate::analysis::context::ContainerContext;
use crate::model::finding::{Finding, Severity};
use crate::model::load::LoadTime;
use crate::model::probe::{Handler, Probe};
use crate::model::servers;

/// The path of an httpGet probe that runs a generation: an inference path, or a known server's
/// ready endpoint that generates (SGLang's `/health_generate`).
pub(crate) fn generation_path<'p>(
    cx: &ContainerContext<'_, '_>,
    probe: &'p Probe<'_>,
) -> Option<&'p str> {
    let Handler::HttpGet { path, .. } = &probe.handler else {
        return None;
    };
    let generates = servers::is_inference_path(path)
        || cx
            .container
            .server
            .is_some_and(|s| s.ready_runs_generation && s.is_ready_path(path));
    generates.then_some(*path)
}

/// What a finding that rests on an assumed load time adds to its message, and the severity it
/// gets: an error needs evidence, a guess makes at most a warning.
pub(crate) fn rest_on(load: &LoadTime, finding: &mut Finding) {
    finding.load = Some(load.clone());
    if !load.is_evidence() {
        finding.severity = finding.severity.min(Severity::Warning);
        finding.message.push_str(
            " — a warning, not an error: the load time is the policy's default, since nothing in \
             the manifest says how big the model is (declare it with probelint.io/model-load-seconds)",
        );
    }
}
