//! The rule contract: what a rule declares ([`RuleMeta`], with its fix's [`FixMeta`]), the two
//! kinds of check a rule can be ([`Check`]), and where it writes its findings ([`Report`], one
//! [`Draft`] at a time). Rules import this and the analysis below them, never the engine that
//! runs them.

use crate::analysis::context::{Analysis, ContainerContext};
use crate::analysis::facts::ObjectFacts;
use crate::analysis::object::Workload;
use crate::fix::Change;
use crate::model::finding::{Applicability, Finding, ObjectRef, Severity};
use crate::model::load::LoadTime;
use std::borrow::Cow;
use std::sync::Arc;

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

/// Where a rule writes its findings. Each starts as a [`Draft`] that already holds what the rule
/// declares (its id, its default severity, its fix's applicability) and what the finding is
/// about (the object, the container, the evidence that it serves); the rule adds what it found.
pub struct Report<'f> {
    meta: &'static RuleMeta,
    findings: &'f mut Vec<Finding>,
}

impl<'f> Report<'f> {
    pub(crate) fn new(meta: &'static RuleMeta, findings: &'f mut Vec<Finding>) -> Self {
        Report { meta, findings }
    }

    /// A finding about a container: at the container itself unless [`Draft::at`] says where
    /// (its probe, its port), with the evidence that it serves a model when there is some.
    pub fn container<'r>(&'r mut self, cx: &'r ContainerContext<'_, '_>) -> Draft<'r> {
        let mut draft = self.draft(
            &cx.workload.object_ref,
            cx.workload.index,
            Some(cx.container.name.clone()),
            &cx.container.pointer,
        );
        draft.finding.evidence = cx.container.evidence_text();
        draft
    }

    /// A finding about an object as a whole (at its root unless [`Draft::at`] says where), or a
    /// part of it that is not a container.
    pub fn object<'r>(&'r mut self, workload: &Workload<'_>) -> Draft<'r> {
        self.draft(&workload.object_ref, workload.index, None, "")
    }

    /// A finding about a container the engine does not analyse (a plain init container), known
    /// by its name, so that per-container exemptions apply to it.
    pub fn named_container<'r>(
        &'r mut self,
        workload: &Workload<'_>,
        container: Option<&str>,
    ) -> Draft<'r> {
        self.draft(
            &workload.object_ref,
            workload.index,
            container.map(Arc::from),
            "",
        )
    }

    /// A cross-object finding about an object known by its facts.
    pub fn cross<'r>(&'r mut self, object: &ObjectFacts) -> Draft<'r> {
        self.draft(&object.object_ref, object.index, None, "")
    }

    fn draft<'r>(
        &'r mut self,
        object: &Arc<ObjectRef>,
        object_index: usize,
        container: Option<Arc<str>>,
        default_pointer: &'r str,
    ) -> Draft<'r> {
        Draft {
            meta: self.meta,
            findings: self.findings,
            pointer: None,
            default_pointer,
            finding: Finding {
                rule: Cow::Borrowed(self.meta.id),
                severity: self.meta.severity,
                message: String::new(),
                help: Cow::Borrowed(""),
                object: Arc::clone(object),
                object_index,
                container,
                pointer: String::new(),
                suppressed: None,
                fix: None,
                load: None,
                evidence: None,
            },
        }
    }
}

/// A finding being written: what the rule found, added to what [`Report`] knew, then
/// [`Draft::report`]ed.
#[must_use = "a finding counts once it is reported (`.report()`)"]
pub struct Draft<'r> {
    meta: &'static RuleMeta,
    findings: &'r mut Vec<Finding>,
    /// Where [`Draft::at`] put it, if it did.
    pointer: Option<String>,
    /// Where it is otherwise: the container, or the object's root.
    default_pointer: &'r str,
    finding: Finding,
}

impl Draft<'_> {
    /// The RFC 6901 pointer of the node at fault, or of where a missing node belongs.
    pub fn at(mut self, pointer: impl Into<String>) -> Self {
        self.pointer = Some(pointer.into());
        self
    }

    /// What is wrong, with the numbers it rests on and where they come from.
    pub fn message(mut self, message: String) -> Self {
        self.finding.message = message;
        self
    }

    /// What to do about it.
    pub fn help(mut self, help: impl Into<Cow<'static, str>>) -> Self {
        self.finding.help = help.into();
        self
    }

    /// A severity other than the rule's default, for this finding (the policy's own level for
    /// the rule still replaces it).
    pub fn severity(mut self, severity: Severity) -> Self {
        self.finding.severity = severity;
        self
    }

    /// At most this severity (a possible kill, or a guess, is a warning at most).
    pub fn at_most(mut self, ceiling: Severity) -> Self {
        self.finding.severity = self.finding.severity.min(ceiling);
        self
    }

    /// The fix, when there is one, with the applicability the rule declares for its fixes, so
    /// that no call site can give it another. A rule that declares no fix must attach none
    /// (tests panic on it, over every rule's examples and the corpus); were one to slip through,
    /// it is shown and never applied.
    pub fn fix(mut self, change: impl Into<Option<Change>>) -> Self {
        let change = change.into();
        debug_assert!(
            change.is_none() || self.meta.fix.is_some(),
            "{} attaches a fix it does not declare",
            self.meta.id
        );
        self.finding.fix = change.map(|change| {
            change.fix(
                self.meta
                    .fix
                    .as_ref()
                    .map_or(Applicability::DisplayOnly, |declared| {
                        declared.applicability
                    }),
            )
        });
        self
    }

    /// The load time the finding rests on.
    pub fn load(mut self, load: &LoadTime) -> Self {
        self.finding.load = Some(load.clone());
        self
    }

    /// Adds the finding to the rule's report.
    pub fn report(self) {
        let Draft {
            findings,
            pointer,
            default_pointer,
            mut finding,
            ..
        } = self;
        finding.pointer = pointer.unwrap_or_else(|| default_pointer.to_owned());
        findings.push(finding);
    }
}
