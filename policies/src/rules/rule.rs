//! The rule contract: what a rule declares ([`RuleMeta`], with its fix's [`FixMeta`]), the two
//! kinds of check a rule can be ([`Check`]), and where it writes its findings ([`Report`]). Rules
//! import this and the analysis below them, never the engine that runs them.

use crate::analysis::context::{Analysis, ContainerContext};
use crate::analysis::facts::ObjectFacts;
use crate::analysis::object::Workload;
use crate::model::finding::{Applicability, Finding, ObjectRef, Severity};

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
    /// The automatic fix, when the rule has one. A rule that declares none never attaches a
    /// fix to a finding, and every fix it attaches has the declared applicability (both are
    /// tested over every rule's examples).
    pub fix: Option<FixMeta>,
}

/// A rule's automatic fix, as declared: how safe it is and what it does.
#[derive(Debug)]
pub struct FixMeta {
    /// Which fixes `probelint --fix` and the mutating webhook apply: they apply
    /// [`Applicability::Safe`] fixes only.
    pub applicability: Applicability,
    /// What the fix does, for users.
    pub what: &'static str,
}

impl std::fmt::Display for FixMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }
}

/// How a rule judges its input. The two kinds run at different times, so a rule is one or the
/// other and says which by the variant it is built with.
#[derive(Clone, Copy)]
pub enum Check {
    /// Judges one object by itself (every rule but the cross-object ones).
    Object(fn(&Analysis<'_>, &mut Report<'_>)),
    /// Judges the objects of a whole input by their relations (an HPA beside its Deployment, a
    /// PDB selecting it), from their [`ObjectFacts`]. Skipped when one object is evaluated
    /// alone (the admission webhook), where "not in the input" means nothing.
    Relations(fn(&[ObjectFacts], &mut Report<'_>)),
    /// Reported by the reader of the source text, from what the parsed object no longer shows
    /// (a YAML key written twice): the engine runs no check of its own, and builds the reader's
    /// findings through the engine so that levels and exemptions apply.
    Reader,
}

/// A rule: its metadata and its check.
pub struct Rule {
    meta: &'static RuleMeta,
    check: Check,
}

impl Rule {
    /// A rule that judges each object by itself.
    pub const fn object(
        meta: &'static RuleMeta,
        check: fn(&Analysis<'_>, &mut Report<'_>),
    ) -> Self {
        Rule {
            meta,
            check: Check::Object(check),
        }
    }

    /// A rule that judges objects by their relations.
    pub const fn relations(
        meta: &'static RuleMeta,
        check: fn(&[ObjectFacts], &mut Report<'_>),
    ) -> Self {
        Rule {
            meta,
            check: Check::Relations(check),
        }
    }

    /// A rule whose findings the reader of the source text reports.
    pub const fn reader(meta: &'static RuleMeta) -> Self {
        Rule {
            meta,
            check: Check::Reader,
        }
    }

    pub fn meta(&self) -> &'static RuleMeta {
        self.meta
    }

    pub fn check(&self) -> Check {
        self.check
    }

    /// Whether the rule judges an object by what else is in the input.
    pub fn needs_other_objects(&self) -> bool {
        matches!(self.check, Check::Relations(_))
    }
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
        let finding = self.push(
            cx.workload,
            Some(cx.container.name.clone()),
            pointer,
            message,
            help,
        );
        finding.evidence = cx.container.evidence().map(|e| e.to_string());
        finding
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
            evidence: None,
        });
        self.findings.last_mut().expect("just pushed")
    }
}
