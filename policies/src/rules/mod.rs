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
mod known_server_endpoint;
mod liveness_checks_readiness;
mod liveness_restart_loop;
mod pod_spec_invalid;
mod probe_port_undeclared;
mod probe_threshold_invalid;
mod readiness_port_open;
mod readiness_timeout_too_short;
mod startup_budget_too_short;
mod startup_shorter_than_operator;

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
        });
        self.findings.last_mut().expect("just pushed")
    }
}

/// Whether an exec probe command is expensive (nvidia-smi, Python, a shell pipeline).
pub(crate) fn is_heavy_exec(command: &[String]) -> bool {
    exec_probe_heavy::heavy(command).is_some()
}

/// Seconds without a useless `.0` (`300 s`, `37.5 s`).
pub(crate) fn secs(value: f64) -> impl std::fmt::Display {
    shown(move |f| {
        if value.fract() == 0.0 && value.abs() < 1e15 {
            write!(f, "{} s", value as i64)
        } else {
            write!(f, "{value:.1} s")
        }
    })
}

/// The startup budget a container needs: load × (1 + margin), rounded up to whole seconds.
///
/// Capped at 2^53 s: an absurd `probelint.io/model-load-seconds` ("1e300") must not overflow
/// the arithmetic that rules and fixes do with the result.
pub fn required_startup_seconds(load_seconds: f64, margin: f64) -> i64 {
    const CAP: i64 = 1 << 53;
    ((load_seconds * (1.0 + margin)).ceil() as i64).clamp(-CAP, CAP)
}

/// `150 s (load 120 s + 25 %)`: how the required budget is explained.
pub(crate) fn required_arithmetic(
    load_seconds: f64,
    margin: f64,
    source: &crate::workload::LoadSource,
) -> impl std::fmt::Display + '_ {
    use crate::workload::LoadSource;
    shown(move |f| {
        write!(
            f,
            "{} s (load {}",
            required_startup_seconds(load_seconds, margin),
            secs(load_seconds)
        )?;
        match source {
            LoadSource::Annotation => f.write_str(" from probelint.io/model-load-seconds")?,
            LoadSource::Policy => f.write_str(" by policy default")?,
            LoadSource::InvalidAnnotation(raw) => write!(
                f,
                " by policy default; probelint.io/model-load-seconds {raw:?} is not a number of seconds"
            )?,
        }
        write!(f, " + {} %)", (margin * 100.0).round() as i64)
    })
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
        assert_eq!(seen.len(), 17);
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
    fn every_bad_example_fires_its_rule() {
        for rule in registry() {
            let id = rule.meta().id;
            let findings = testing::lint_example(rule.meta(), rule.meta().bad_example);
            assert!(
                findings.iter().any(|f| f.rule == id),
                "{id}: bad example does not fire; findings: {findings:#?}"
            );
        }
    }

    #[test]
    fn every_good_example_is_silent_for_its_rule_and_free_of_errors() {
        for rule in registry() {
            let id = rule.meta().id;
            let findings = testing::lint_example(rule.meta(), rule.meta().good_example);
            assert!(
                !findings.iter().any(|f| f.rule == id),
                "{id}: good example fires; findings: {findings:#?}"
            );
            let errors: Vec<_> = findings
                .iter()
                .filter(|f| f.severity == Severity::Error)
                .collect();
            assert!(
                errors.is_empty(),
                "{id}: good example has errors: {errors:#?}"
            );
        }
    }

    #[test]
    fn required_arithmetic_reads_well() {
        use crate::workload::LoadSource;
        assert_eq!(
            required_arithmetic(120.0, 0.25, &LoadSource::Annotation).to_string(),
            "150 s (load 120 s from probelint.io/model-load-seconds + 25 %)"
        );
        assert_eq!(secs(37.5).to_string(), "37.5 s");
    }
}
