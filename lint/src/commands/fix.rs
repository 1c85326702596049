//! `--fix`: write the planned text edits (atomically), or show them as a diff with `--dry-run`,
//! then report what remains.

use crate::atomic::{Expected, FileId};
use crate::inputs::Input;
use crate::lint::{FileFix, Source, lint_sources};
use crate::report::Report;
use crate::yaml::Limits;
use probelint_policies::Policy;
use std::collections::HashMap;
use std::io::Write;

/// The outcome of `--fix`.
pub struct Fixed {
    /// What remains after fixing (re-linted from the new text), plus files that could not be
    /// fixed as errors.
    pub report: Report,
    /// Files changed (or, with `--dry-run`, that would change).
    pub files_changed: usize,
}

/// Applies the plans. With `dry_run`, prints a unified diff to standard output and writes nothing.
///
/// A file that cannot be written (read-only, someone else's, changed or deleted since it was
/// read, an OS error) is left as it is and reported as an error; the other files are still
/// fixed and the report still covers every file.
///
/// # Errors
///
/// Only when the diff cannot be written to standard output.
pub fn apply_plans(
    original: Report,
    plans: Vec<FileFix>,
    dry_run: bool,
    policy: &Policy,
    limits: &Limits,
) -> Result<Fixed, String> {
    let mut err = anstream::stderr();
    let mut changed: HashMap<String, String> = HashMap::new();
    let mut failures = Vec::new();
    let mut fixed_count = 0;
    // The same file reached by two names (a symlink and its target): written once.
    let mut written: HashMap<FileId, String> = HashMap::new();
    for plan in plans {
        let not_fixed = |why: String| crate::report::InputError {
            file: plan.name.clone(),
            line: None,
            column: None,
            message: format!("not fixed (file left unchanged): {why}"),
        };
        let new_text = match &plan.fixed {
            Err(why) => {
                failures.push(not_fixed(why.clone()));
                continue;
            }
            Ok(new_text) => new_text,
        };
        if dry_run {
            let diff = similar::TextDiff::from_lines(plan.original.as_ref(), new_text.as_str());
            let text = diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{}", plan.name), &format!("b/{}", plan.name))
                .to_string();
            std::io::stdout()
                .lock()
                .write_all(text.as_bytes())
                .map_err(|e| format!("cannot write the diff: {e}"))?;
        } else if let Some(path) = &plan.path {
            let id = plan.stamp.map(|s| s.id).filter(FileId::is_known);
            if let Some(first) = id.and_then(|id| written.get(&id)) {
                failures.push(not_fixed(format!(
                    "it is the same file as {first}, which was fixed"
                )));
                continue;
            }
            let expected = Expected {
                content: plan.original.as_bytes(),
                stamp: plan.stamp,
            };
            if let Err(e) = crate::atomic::replace_expected(path, new_text.as_bytes(), expected) {
                failures.push(not_fixed(e.to_string()));
                continue;
            }
            if let Some(id) = id {
                written.insert(id, plan.name.clone());
            }
        }
        for f in &plan.fixed_findings {
            fixed_count += 1;
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
            let verb = if dry_run { "would fix" } else { "fixed" };
            let _ = writeln!(
                err,
                "{verb}[{}]: {}:{}:{}:{container} {what}",
                f.finding.rule, f.file, f.line, f.column
            );
        }
        changed.insert(plan.name.clone(), new_text.clone());
    }
    let files = changed.len();
    let verb = if dry_run { "Would fix" } else { "Fixed" };
    let _ = writeln!(
        err,
        "{verb} {fixed_count} finding{} in {files} file{}",
        plural(fixed_count),
        plural(files)
    );

    if changed.is_empty() {
        let mut report = original;
        report.errors.extend(failures);
        report.sort();
        return Ok(Fixed {
            report,
            files_changed: 0,
        });
    }
    // Re-lint with the new text in place of the old, so the report shows what remains.
    let sources: Vec<Source> = original
        .sources
        .iter()
        .map(|(name, text)| {
            let bytes = changed
                .remove(name)
                .map_or_else(|| text.as_bytes().to_vec(), String::into_bytes);
            Source {
                name: name.clone(),
                input: Input::File(std::path::PathBuf::from(name)),
                bytes: Ok(bytes),
                stamp: None,
            }
        })
        .collect();
    let mut report = lint_sources(sources, policy, limits);
    // Files that were unreadable or skipped keep their entries from the first pass.
    report.files = original.files;
    report.errors.extend(original.errors);
    report.skipped = original.skipped;
    report.errors.extend(failures);
    report.sort();
    report.errors.dedup();
    Ok(Fixed {
        report,
        files_changed: files,
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
