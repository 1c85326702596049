//! `--fix`: plan the safe fixes of every file as text edits, apply them, write the files
//! (atomically) or show them as a diff with `--dry-run`, then check again only the files that
//! changed, keeping the results (and cross-object facts) of the others.

use crate::atomic::{Expected, FileId, FileStamp};
use crate::check::{self, Checked, Texts};
use crate::error::NotFixed;
use crate::input::{Origin, Pending, Source};
use crate::load;
use crate::report::{InputError, LocatedFinding, Report};
use probelint_policies::{Applicability, Policy};
use probelint_yaml::load::Limits;
use probelint_yaml::patch::{ObjectPatch, TextFixError};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

/// What `--fix` would do to one file.
#[derive(Debug)]
pub struct FilePlan {
    pub name: String,
    pub origin: Origin,
    pub original: Arc<str>,
    /// What the file was when `original` was read.
    pub stamp: Option<FileStamp>,
    /// The fixed text, or why the file cannot be fixed (it is then left untouched).
    pub fixed: Result<String, TextFixError>,
    /// The findings the new text fixes, located in the original file.
    pub fixed_findings: Vec<LocatedFinding>,
}

/// Every file checked, and the plans of those that have safe fixes.
pub struct Planned {
    /// In input order, texts kept.
    pub files: Vec<Checked>,
    pub plans: Vec<FilePlan>,
}

impl Planned {
    /// The report of the files as they were read.
    #[must_use]
    pub fn report(self, policy: &Policy) -> Report {
        check::finish(self.files, policy)
    }
}

/// Checks every file and computes its fixes at or above `at_least` (safe ones, or with
/// `--unsafe-fixes` unsafe ones too) as text edits that keep everything else byte-for-byte.
pub fn plan<S: Into<Pending> + Send>(
    sources: Vec<S>,
    policy: &Policy,
    limits: &Limits,
    at_least: Applicability,
) -> Planned {
    let (files, plans): (Vec<Checked>, Vec<Option<FilePlan>>) = sources
        .into_par_iter()
        .map(|s| {
            plan_file(
                load::load(s.into().read(limits), limits),
                policy,
                limits,
                at_least,
            )
        })
        .unzip();
    Planned {
        files,
        plans: plans.into_iter().flatten().collect(),
    }
}

fn plan_file(
    loaded: load::Loaded,
    policy: &Policy,
    limits: &Limits,
    at_least: Applicability,
) -> (Checked, Option<FilePlan>) {
    let Some(text) = loaded.text.clone() else {
        return (check::file(loaded, policy, Texts::All, |_, _| {}), None);
    };
    let (name, origin, stamp) = (loaded.name.clone(), loaded.origin.clone(), loaded.stamp);
    let mut patches = Vec::new();
    let mut fixed_findings = Vec::new();
    let checked = check::file(loaded, policy, Texts::All, |object, located| {
        // Only findings with a fix matter to the merge, which skips the others.
        let fixable: Vec<probelint_policies::Finding> = located
            .iter()
            .filter(|l| l.finding.fix.is_some())
            .map(|l| l.finding.clone())
            .collect();
        if fixable.is_empty() {
            return;
        }
        let (patch, applied) = probelint_policies::merge_fixes(&fixable, at_least);
        if patch.0.is_empty() {
            return;
        }
        patches.push((object.document, object.prefix.clone(), patch.0));
        // A set, not a scan of `applied` per finding: an object with thousands of fixable
        // containers has thousands of each.
        let applied: HashSet<(&str, Option<&str>)> = applied
            .iter()
            .map(|a| (a.rule.as_str(), a.container.as_deref()))
            .collect();
        fixed_findings.extend(
            located
                .iter()
                .filter(|l| applied.contains(&(&*l.finding.rule, l.finding.container.as_deref())))
                .cloned(),
        );
    });
    if patches.is_empty() {
        return (checked, None);
    }
    let object_patches: Vec<ObjectPatch<'_>> = patches
        .iter()
        .map(|(document, prefix, ops)| ObjectPatch {
            document: *document,
            prefix: prefix.clone(),
            ops,
        })
        .collect();
    let fixed = probelint_yaml::patch::apply(&text, &object_patches, limits);
    let plan = FilePlan {
        name,
        origin,
        original: text,
        stamp,
        fixed,
        fixed_findings,
    };
    (checked, Some(plan))
}

/// What `--fix` did to one file that it changed (or, with `--dry-run`, would change).
pub struct FileOutcome {
    /// With `--dry-run`: the unified diff of the change.
    pub diff: Option<String>,
    /// The findings fixed, located in the original file.
    pub fixed: Vec<LocatedFinding>,
}

/// The outcome of `--fix`, for the command to print.
pub struct Summary {
    /// The files changed, in input order.
    pub changed: Vec<FileOutcome>,
    /// What remains after fixing (the changed files checked again from their new text), plus
    /// the files that could not be fixed as errors.
    pub report: Report,
    pub dry_run: bool,
}

impl Summary {
    /// Files changed (or, with `--dry-run`, that would change).
    #[must_use]
    pub fn files_changed(&self) -> usize {
        self.changed.len()
    }

    /// Prints the diffs (`--dry-run`) to `out` and one line per fixed finding, then the counts,
    /// to `err`.
    ///
    /// # Errors
    ///
    /// When a diff cannot be written to `out`.
    pub fn print(&self, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<()> {
        let verb = if self.dry_run { "would fix" } else { "fixed" };
        let mut count = 0;
        for file in &self.changed {
            if let Some(diff) = &file.diff {
                out.write_all(diff.as_bytes())?;
            }
            for f in &file.fixed {
                count += 1;
                let container = f
                    .finding
                    .container
                    .as_deref()
                    .map(|c| format!(" container {c:?}:"))
                    .unwrap_or_default();
                let what = f
                    .finding
                    .fix
                    .as_ref()
                    .map(|x| x.description.as_str())
                    .unwrap_or_default();
                let _ = writeln!(
                    err,
                    "{verb}[{}]: {}:{}:{}:{container} {what}",
                    f.finding.rule, f.file, f.line, f.column
                );
            }
        }
        let files = self.files_changed();
        let verb = if self.dry_run { "Would fix" } else { "Fixed" };
        let _ = writeln!(
            err,
            "{verb} {count} finding{} in {files} file{}",
            plural(count),
            plural(files)
        );
        // A real run renders what remains as its report; a dry run writes only the diff, so
        // it lists here what --fix leaves to a person (at its lines after the fix).
        if self.dry_run {
            let remaining: Vec<&LocatedFinding> = self
                .report
                .findings
                .iter()
                .filter(|f| f.finding.suppressed.is_none())
                .collect();
            for f in &remaining {
                let _ = writeln!(
                    err,
                    "remains {}[{}]: {}:{}:{}: {}",
                    f.finding.severity,
                    f.finding.rule,
                    f.file,
                    f.line,
                    f.column,
                    crate::output::headline(&f.finding.message, 100)
                );
            }
            if !remaining.is_empty() {
                let _ = writeln!(
                    err,
                    "{} finding{} would remain (lines as they will be after --fix; run without \
                     --fix for the details)",
                    remaining.len(),
                    plural(remaining.len())
                );
            }
        }
        Ok(())
    }
}

/// Applies the plans: with `dry_run`, computes each file's diff and writes nothing; otherwise
/// replaces each file. Then checks the changed files again.
///
/// A file that cannot be written (read-only, someone else's, changed or deleted since it was
/// read, an OS error) is left as it is and reported as an error; the other files are still
/// fixed and the report still covers every file.
pub fn apply(planned: Planned, dry_run: bool, policy: &Policy, limits: &Limits) -> Summary {
    let Planned { mut files, plans } = planned;
    let mut failures = Vec::new();
    let mut changed = Vec::new();
    // The new text of each changed file, by name: every file of that name is checked again.
    let mut new_texts: HashMap<String, String> = HashMap::new();
    // The same file reached by two names (a symlink and its target): written once.
    let mut written: HashMap<FileId, String> = HashMap::new();
    for plan in plans {
        let not_fixed = |why: NotFixed| InputError {
            file: plan.name.clone(),
            line: None,
            column: None,
            message: format!("not fixed (file left unchanged): {why}"),
            stage: crate::report::Stage::Fix,
        };
        let new_text = match plan.fixed {
            Err(why) => {
                failures.push(not_fixed(why.into()));
                continue;
            }
            Ok(new_text) => new_text,
        };
        if let Origin::Rendered { dir } = &plan.origin {
            failures.push(not_fixed(NotFixed::Rendered {
                dir: crate::input::display_path(dir),
            }));
            continue;
        }
        let mut diff = None;
        if dry_run {
            let text = similar::TextDiff::from_lines(plan.original.as_ref(), new_text.as_str())
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{}", plan.name), &format!("b/{}", plan.name))
                .to_string();
            diff = Some(text);
        } else if let Some(path) = plan.origin.path() {
            let id = plan.stamp.map(|s| s.id).filter(FileId::is_known);
            if let Some(first) = id.and_then(|id| written.get(&id)) {
                failures.push(not_fixed(NotFixed::SameFile {
                    first: first.clone(),
                }));
                continue;
            }
            let expected = Expected {
                content: plan.original.as_bytes(),
                stamp: plan.stamp,
            };
            if let Err(e) = crate::atomic::replace_expected(path, new_text.as_bytes(), expected) {
                failures.push(not_fixed(NotFixed::Write(e)));
                continue;
            }
            if let Some(id) = id {
                written.insert(id, plan.name.clone());
            }
        }
        changed.push(FileOutcome {
            diff,
            fixed: plan.fixed_findings,
        });
        new_texts.insert(plan.name, new_text);
    }

    // Only the changed files are read again: the others' findings and facts still hold.
    let again: Vec<(usize, Source)> = files
        .iter()
        .enumerate()
        .filter_map(|(at, file)| {
            let text = new_texts.get(file.name())?;
            let source = Source {
                name: file.name().to_owned(),
                origin: file.origin().clone(),
                bytes: Ok(text.clone().into_bytes()),
                stamp: None,
            };
            Some((at, source))
        })
        .collect();
    let rechecked: Vec<(usize, Checked)> = again
        .into_par_iter()
        .map(|(at, source)| {
            let loaded = load::load(source, limits);
            (at, check::file(loaded, policy, Texts::Quoted, |_, _| {}))
        })
        .collect();
    for (at, checked) in rechecked {
        files[at] = checked;
    }
    let mut report = check::finish(files, policy);
    report.errors.extend(failures);
    report.sort();
    Summary {
        changed,
        report,
        dry_run,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llm}\nspec:\n  template:\n    spec:\n      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.6.3\n          resources: {limits: {nvidia.com/gpu: 1}}\n          readinessProbe:\n            tcpSocket: {port: 8000}\n";
    const SERVICE: &str =
        "apiVersion: v1\nkind: Service\nmetadata: {name: llm}\nspec: {ports: [{port: 80}]}\n";

    fn source(name: &str, text: &str) -> Source {
        Source::in_memory(name, text.as_bytes().to_vec())
    }

    /// What `--fix --dry-run` prints is the summary's: the diff of each changed file on one
    /// stream, one line per fixed finding and the counts on the other; the report is the
    /// changed file checked again beside the unchanged one.
    #[test]
    fn a_dry_run_returns_the_diff_the_fixed_findings_and_what_remains() {
        let policy = Policy::default();
        let limits = Limits::default();
        let sources = vec![source("gpu.yaml", GPU), source("service.yaml", SERVICE)];
        let planned = plan(sources, &policy, &limits, Applicability::Safe);
        assert_eq!(planned.plans.len(), 1, "the Service has nothing to fix");
        let summary = apply(planned, true, &policy, &limits);
        assert_eq!(summary.files_changed(), 1);
        let rules: Vec<&str> = summary.changed[0]
            .fixed
            .iter()
            .map(|f| &*f.finding.rule)
            .collect();
        assert_eq!(rules, ["gpu-startup-probe-missing", "readiness-port-open"]);
        let remaining: Vec<&str> = summary
            .report
            .findings
            .iter()
            .map(|f| &*f.finding.rule)
            .collect();
        assert!(
            !remaining.iter().any(|r| rules.contains(r)),
            "{remaining:?}"
        );
        assert_eq!(summary.report.files, 2);

        let (mut out, mut err) = (Vec::new(), Vec::new());
        summary.print(&mut out, &mut err).unwrap();
        let (out, err) = (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        );
        assert!(out.starts_with("--- a/gpu.yaml\n+++ b/gpu.yaml\n"), "{out}");
        assert!(out.contains("+          startupProbe:"), "{out}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 5, "{err}");
        assert!(
            lines[0].starts_with("would fix[gpu-startup-probe-missing]: gpu.yaml:8:9:"),
            "{err}"
        );
        assert!(
            lines[1].starts_with("would fix[readiness-port-open]: gpu.yaml:12:13:"),
            "{err}"
        );
        assert_eq!(lines[2], "Would fix 2 findings in 1 file");
        // What --fix cannot do is listed too: a dry run is the place to see it.
        assert_eq!(
            lines[3],
            "remains info[gpu-graceful-shutdown-missing]: gpu.yaml:8:9: container \"vllm\" \
             (requests nvidia.com/gpu) has no preStop hook"
        );
        assert_eq!(
            lines[4],
            "1 finding would remain (lines as they will be after --fix; run without --fix for \
             the details)"
        );
    }
}
