//! Helpers that several rules share: what a generation endpoint is, whether a liveness probe
//! kills a container mid-load, and whether a finding may rest on a load time.

use crate::analysis::context::ContainerContext;
use crate::model::finding::Severity;
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

/// Whether a finding may rest on this load time: declared, or estimated from what the manifest
/// says. Nothing accuses on a guessed load: where the load is only the policy's default, the
/// rules that compare a deadline with it say nothing (gpu-startup-probe-missing still asks for
/// the startupProbe, and says the load is unknown).
pub(crate) fn accuses_on(load: &LoadTime) -> bool {
    load.is_evidence()
}

/// How surely a deadline kills a load that is a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kill {
    /// Even the fast end of the load outlasts the deadline: every start is killed mid-load.
    Certain,
    /// Only the slow end outlasts it: a slow start is killed mid-load.
    Possible,
    /// The deadline outlasts the whole range.
    No,
}

impl Kill {
    /// The most a finding about this kill may be ([`Draft::at_most`]): a possible kill is a
    /// warning at most.
    ///
    /// [`Draft::at_most`]: crate::rules::rule::Draft::at_most
    pub(crate) fn ceiling(self) -> Severity {
        match self {
            Kill::Possible => Severity::Warning,
            Kill::Certain | Kill::No => Severity::Error,
        }
    }
}

/// Whether a startupProbe budget of `budget_seconds` kills `load`: certainly when it is shorter
/// than the load's fast end, possibly when it is shorter than the slow end. (A fix gives it the
/// slow end × (1 + margin): the margin sizes what is added, it does not accuse.)
pub(crate) fn startup_kills(budget_seconds: i64, load: &LoadTime) -> Kill {
    let budget = budget_seconds as f64;
    if budget < load.fast {
        Kill::Certain
    } else if budget < load.slow {
        Kill::Possible
    } else {
        Kill::No
    }
}

/// Whether `liveness` with no startupProbe kills `load`: certainly when its earliest kill comes
/// before the fast end, possibly when it comes before the slow end.
pub(crate) fn liveness_kills(liveness: &Probe<'_>, load: &LoadTime) -> Kill {
    if kills_before(liveness, load.fast) {
        Kill::Certain
    } else if kills_before(liveness, load.slow) {
        Kill::Possible
    } else {
        Kill::No
    }
}

/// Whether `liveness`, running from container start with no startupProbe to gate it, can kill
/// the container before a load of `load_seconds` ends. The F-th failure in a row kills it,
/// somewhere in [delay + (F − 1) × period, delay + F × period) depending on the probe's phase
/// (`pkg/kubelet/prober/worker.go`): only a tolerance whose earliest kill comes after the load
/// is safe for every phase.
pub(crate) fn kills_before(liveness: &Probe<'_>, load_seconds: f64) -> bool {
    ((liveness.budget_seconds() - liveness.period()) as f64) < load_seconds
}

/// Whether this liveness probe can fail while the model loads. Not for a container that loads
/// no model at start (a Ray node's liveness checks its raylet; a headless worker serves nothing;
/// Ollama loads models on first request), nor for an httpGet on a path the server answers
/// during the load (NIM's /v1/health/live, MLServer's /v2/health/live). Where the server's
/// behaviour is unknown, the kill is assumed real.
pub(crate) fn kill_during_load_is_real(
    cx: &ContainerContext<'_, '_>,
    liveness: &Probe<'_>,
) -> bool {
    if !cx.container.loads_model_at_start() {
        return false;
    }
    match (cx.container.server, &liveness.handler) {
        (Some(server), Handler::HttpGet { path, .. }) => !server.answers_during_load(path),
        _ => true,
    }
}
