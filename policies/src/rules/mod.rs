//! The rule catalog. One file per rule; [`registry`] lists them all, and `probelint rules`,
//! `probelint explain` and `docs/rules/` are generated from it.

use crate::cross::ObjectFacts;
use crate::engine::{Analysis, ContainerContext};
use crate::finding::{Finding, ObjectRef, Severity};
use crate::text::shown;
use crate::workload::Workload;

mod exec_probe_heavy;
mod gpu_graceful_shutdown_missing;
mod gpu_readiness_probe_missing;
mod gpu_serving_without_pdb;
mod gpu_startup_probe_missing;
mod grpc_probe_unsupported;
mod hpa_cpu_metric_on_gpu_workload;
mod hpa_min_replicas_one;
mod hpa_scale_up_outpaces_load;
mod known_server_endpoint;
mod liveness_checks_readiness;
mod liveness_restart_loop;
mod lws_kill_recreates_group;
mod lws_leader_ready_needs_workers;
mod pdb_blocks_gpu_drains;
mod pod_spec_invalid;
mod probe_port_undeclared;
mod probe_threshold_invalid;
mod progress_deadline_too_short;
mod readiness_drops_every_replica;
mod readiness_port_open;
mod readiness_timeout_too_short;
mod startup_budget_too_short;
mod startup_shorter_than_operator;
mod vllm_service_links;

/// What a rule is, for users: everything `probelint explain` prints.
#[derive(Debug)]
pub struct RuleMeta {
    /// Kebab-case, stable forever: users put it in annotations and policies.
    pub id: &'static str,
    pub severity: Severity,
    /// One line.
    pub summary: &'static str,
    /// Why this matters, in operational terms.
    pub rationale: &'static str,
    /// Policy the examples are judged under, when the defaults would not show the rule
    /// (e.g. an older `kubernetesVersion`).
    pub example_policy: Option<&'static str>,
    /// A manifest the rule fires on (its tests check that it does).
    pub bad_example: &'static str,
    /// The same manifest, corrected (its tests check that the rule is silent).
    pub good_example: &'static str,
    /// What the automatic fix does, when the rule has one.
    pub fix: Option<&'static str>,
}

/// A rule: its metadata and its check.
pub trait Rule: Sync + Send {
    fn meta(&self) -> &'static RuleMeta;
    /// Judges one object by itself (every rule but the cross-object ones).
    fn check(&self, _analysis: &Analysis<'_>, _report: &mut Report<'_>) {}
    /// Whether the rule judges an object by what else is in the input (an HPA beside its
    /// Deployment, a PDB selecting it). Such rules are skipped when one object is evaluated
    /// alone (the admission webhook), where "not in the input" means nothing; they implement
    /// [`Rule::check_cross`] instead of [`Rule::check`].
    fn needs_other_objects(&self) -> bool {
        false
    }
    /// Judges the objects of a whole input by their relations, from their [`ObjectFacts`].
    fn check_cross(&self, _objects: &[ObjectFacts], _report: &mut Report<'_>) {}
}

static REGISTRY: &[&dyn Rule] = &[
    &gpu_startup_probe_missing::GpuStartupProbeMissing,
    &gpu_readiness_probe_missing::GpuReadinessProbeMissing,
    &readiness_port_open::ReadinessPortOpen,
    &startup_budget_too_short::StartupBudgetTooShort,
    &startup_shorter_than_operator::StartupShorterThanOperator,
    &liveness_restart_loop::LivenessRestartLoop,
    &liveness_checks_readiness::LivenessChecksReadiness,
    &probe_port_undeclared::ProbePortUndeclared,
    &probe_threshold_invalid::ProbeThresholdInvalid,
    &pod_spec_invalid::PodSpecInvalid,
    &exec_probe_heavy::ExecProbeHeavy,
    &known_server_endpoint::KnownServerEndpoint,
    &readiness_timeout_too_short::ReadinessTimeoutTooShort,
    &grpc_probe_unsupported::GrpcProbeUnsupported,
    &gpu_graceful_shutdown_missing::GpuGracefulShutdownMissing,
    &hpa_cpu_metric_on_gpu_workload::HpaCpuMetricOnGpuWorkload,
    &gpu_serving_without_pdb::GpuServingWithoutPdb,
    &progress_deadline_too_short::ProgressDeadlineTooShort,
    &readiness_drops_every_replica::ReadinessDropsEveryReplica,
    &lws_kill_recreates_group::LwsKillRecreatesGroup,
    &lws_leader_ready_needs_workers::LwsLeaderReadyNeedsWorkers,
    &pdb_blocks_gpu_drains::PdbBlocksGpuDrains,
    &hpa_scale_up_outpaces_load::HpaScaleUpOutpacesLoad,
    &hpa_min_replicas_one::HpaMinReplicasOne,
    &vllm_service_links::VllmServiceLinks,
];

/// Every built-in rule, in catalog order.
pub fn registry() -> &'static [&'static dyn Rule] {
    REGISTRY
}

/// A built-in rule by id.
pub fn find(id: &str) -> Option<&'static dyn Rule> {
    REGISTRY.iter().copied().find(|r| r.meta().id == id)
}

/// Where a rule writes its findings; fills in the rule id and default severity.
pub struct Report<'f> {
    meta: &'static RuleMeta,
    findings: &'f mut Vec<Finding>,
}

impl<'f> Report<'f> {
    pub(crate) fn new(meta: &'static RuleMeta, findings: &'f mut Vec<Finding>) -> Self {
        Report { meta, findings }
    }

    /// A finding about a container, at `pointer` (the probe, or the container itself).
    pub fn container(
        &mut self,
        cx: &ContainerContext<'_, '_>,
        pointer: String,
        message: String,
        help: String,
    ) -> &mut Finding {
        self.push(
            cx.workload,
            Some(cx.container.name.clone()),
            pointer,
            message,
            help,
        )
    }

    /// A finding about an object as a whole, or a part of it that is not a container.
    pub fn object(
        &mut self,
        workload: &Workload<'_>,
        pointer: String,
        message: String,
        help: String,
    ) -> &mut Finding {
        self.push(workload, None, pointer, message, help)
    }

    /// A finding about a container the engine does not analyse (a plain init container), known
    /// by its name, so that per-container exemptions apply to it.
    pub fn named_container(
        &mut self,
        workload: &Workload<'_>,
        container: Option<String>,
        pointer: String,
        message: String,
        help: String,
    ) -> &mut Finding {
        self.push(workload, container, pointer, message, help)
    }

    /// A cross-object finding about an object known by its facts.
    pub fn cross(
        &mut self,
        object: &ObjectFacts,
        pointer: &str,
        message: String,
        help: String,
    ) -> &mut Finding {
        self.push_ref(
            &object.object_ref,
            object.index,
            None,
            pointer.to_owned(),
            message,
            help,
        )
    }

    fn push(
        &mut self,
        workload: &Workload<'_>,
        container: Option<String>,
        pointer: String,
        message: String,
        help: String,
    ) -> &mut Finding {
        self.push_ref(
            &workload.object_ref,
            workload.index,
            container,
            pointer,
            message,
            help,
        )
    }

    fn push_ref(
        &mut self,
        object: &ObjectRef,
        object_index: usize,
        container: Option<String>,
        pointer: String,
        message: String,
        help: String,
    ) -> &mut Finding {
        self.findings.push(Finding {
            rule: self.meta.id.to_owned(),
            severity: self.meta.severity,
            message,
            help,
            object: object.clone(),
            object_index,
            container,
            pointer,
            suppressed: None,
            fix: None,
            load: None,
        });
        self.findings.last_mut().expect("just pushed")
    }
}

/// The path of an httpGet probe that runs a generation: an inference path, or a known server's
/// ready endpoint that generates (SGLang's `/health_generate`).
pub(crate) fn generation_path<'p>(
    cx: &ContainerContext<'_, '_>,
    probe: &'p crate::probe::Probe<'_>,
) -> Option<&'p str> {
    let crate::probe::Handler::HttpGet { path, .. } = &probe.handler else {
        return None;
    };
    let generates = crate::servers::is_inference_path(path)
        || cx
            .container
            .server
            .is_some_and(|s| s.ready_runs_generation && s.is_ready_path(path));
    generates.then_some(*path)
}

/// Whether an exec probe command is expensive (nvidia-smi, Python, a shell pipeline).
pub(crate) fn is_heavy_exec(command: &[String]) -> bool {
    exec_probe_heavy::heavy(command).is_some()
}

/// The startup budget a container needs: load × (1 + margin), rounded up to whole seconds.
///
/// Capped at 2^53 s: an absurd `probelint.io/model-load-seconds` ("1e300") must not overflow
/// the arithmetic that rules and fixes do with the result.
pub fn required_startup_seconds(load_seconds: f64, margin: f64) -> i64 {
    const CAP: i64 = 1 << 53;
    ((load_seconds * (1.0 + margin)).ceil() as i64).clamp(-CAP, CAP)
}

/// `150 s (load 120 s from probelint.io/model-load-seconds + 25 %)`, or with an estimate
/// `957 s (load ≈ 765 s + 25 %; load: 141 GB (…) downloaded from the Hugging Face Hub …)`: how
/// the required budget is explained.
pub(crate) fn required_arithmetic(
    load: &crate::load::LoadTime,
    margin: f64,
) -> impl std::fmt::Display + '_ {
    shown(move |f| {
        write!(
            f,
            "{} s (load {} + {} %",
            required_startup_seconds(load.seconds, margin),
            load.short(),
            (margin * 100.0).round() as i64
        )?;
        match load.basis {
            crate::load::Basis::Declared => f.write_str(")"),
            _ => write!(f, "; {})", load.derivation()),
        }
    })
}

/// What a finding that rests on an assumed load time adds to its message, and the severity it
/// gets: an error needs evidence, a guess makes at most a warning.
pub(crate) fn rest_on(load: &crate::load::LoadTime, finding: &mut Finding) {
    finding.load = Some(load.clone());
    if !load.is_evidence() {
        finding.severity = finding.severity.min(Severity::Warning);
        finding.message.push_str(
            " — a warning, not an error: the load time is the policy's default, since nothing in \
             the manifest says how big the model is (declare it with probelint.io/model-load-seconds)",
        );
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case() {
        let mut seen = std::collections::HashSet::new();
        for rule in registry() {
            let id = rule.meta().id;
            assert!(seen.insert(id), "duplicate id {id}");
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !id.starts_with('-'),
                "{id} is not kebab-case"
            );
        }
        assert_eq!(seen.len(), registry().len());
    }

    #[test]
    fn every_rule_documents_itself() {
        for rule in registry() {
            let m = rule.meta();
            assert!(
                !m.summary.is_empty() && !m.summary.contains('\n'),
                "{}: one-line summary",
                m.id
            );
            assert!(m.rationale.len() > 80, "{}: rationale too thin", m.id);
        }
    }

    #[test]
    fn required_arithmetic_reads_well() {
        use crate::load::{Basis, LoadTime};
        let declared = LoadTime {
            seconds: 120.0,
            basis: Basis::Declared,
        };
        assert_eq!(
            required_arithmetic(&declared, 0.25).to_string(),
            "150 s (load 120 s from probelint.io/model-load-seconds + 25 %)"
        );
        let assumed = LoadTime {
            seconds: 300.0,
            basis: Basis::Assumed {
                why: "no model named".into(),
            },
        };
        assert_eq!(
            required_arithmetic(&assumed, 0.25).to_string(),
            "375 s (load 300 s by policy default + 25 %; no model named)"
        );
    }
}
