//! What one run of the linter found: located findings, input errors and skipped files.
//! Every output format renders this one structure.

use probelint_policies::{Finding, Severity};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A finding placed in a file.
#[derive(Debug, Clone)]
pub struct LocatedFinding {
    pub finding: Finding,
    /// The path as the user gave it (relative paths stay relative); `-` for stdin.
    pub file: String,
    /// 1-based line and column (in characters) of the node the finding's pointer names.
    pub line: usize,
    pub column: usize,
}

/// A file (or document) that could not be read or parsed, or (with `--fix`) not be fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    pub stage: Stage,
}

/// Where a file failed: the summary says "could not be read" only of the files that could not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading or parsing it.
    Read,
    /// `--fix`: it was read and checked, but not fixed (not written, or not editable exactly).
    Fix,
}

/// A file or document that was deliberately not linted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
    pub kind: SkipKind,
}

/// Why a file was not linted: most skipped YAML is not Kubernetes at all (values files, CI
/// configuration); Helm templates and kustomizations are manifests that need rendering first,
/// which a run reports without `--verbose` (a CI job pointed at a chart must not pass silently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipKind {
    /// A document that is not a Kubernetes object.
    NotKubernetes,
    /// A Helm template, with the chart directory when it sits in one's `templates/`.
    HelmTemplate { chart: Option<String> },
    /// A kustomization file, with its directory.
    Kustomization { dir: String },
}

/// The whole result of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Sorted by file, then line, then column, then rule.
    pub findings: Vec<LocatedFinding>,
    pub errors: Vec<InputError>,
    pub skipped: Vec<Skipped>,
    /// Files read (including ones that failed or held no Kubernetes object).
    pub files: usize,
    /// Kubernetes objects linted.
    pub objects: usize,
    /// File contents by path, for output formats that quote the source line.
    pub sources: BTreeMap<String, Arc<str>>,
}

/// Counts shown in summaries. Suppressed findings count only as suppressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub suppressed: usize,
}

impl Report {
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for f in &self.findings {
            if f.finding.is_suppressed() {
                s.suppressed += 1;
                continue;
            }
            match f.finding.severity {
                Severity::Error => s.errors += 1,
                Severity::Warning => s.warnings += 1,
                Severity::Info => s.infos += 1,
            }
        }
        s
    }

    /// The lines of every file that has an active finding, each file indexed once, so that a
    /// file with thousands of findings is not scanned from its first line for each of them.
    pub fn source_lines(&self) -> SourceLines<'_> {
        let mut files: HashMap<&str, LineIndex<'_>> = HashMap::new();
        for f in self.findings.iter().filter(|f| !f.finding.is_suppressed()) {
            if files.contains_key(f.file.as_str()) {
                continue;
            }
            if let Some((name, text)) = self.sources.get_key_value(&f.file) {
                files.insert(name.as_str(), LineIndex::new(text));
            }
        }
        SourceLines { files }
    }

    /// Puts findings and errors in the deterministic order every format prints.
    pub fn sort(&mut self) {
        self.findings.sort_by(|a, b| {
            (
                &a.file,
                a.line,
                a.column,
                &a.finding.rule,
                &a.finding.pointer,
            )
                .cmp(&(
                    &b.file,
                    b.line,
                    b.column,
                    &b.finding.rule,
                    &b.finding.pointer,
                ))
        });
        self.errors
            .sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        self.skipped.sort_by(|a, b| a.file.cmp(&b.file));
    }
}

/// Where each line of a text starts. Lines end at `\n`, `\r\n` or a lone `\r`, and the first
/// starts after a byte order mark: the lines and columns the YAML layer reports.
#[derive(Debug, Clone)]
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `text` in one pass.
    #[must_use]
    pub fn new(text: &'a str) -> Self {
        let mut starts = vec![if text.starts_with('\u{feff}') { 3 } else { 0 }];
        starts.extend(probelint_yaml::load::line_starts(text));
        LineIndex { text, starts }
    }

    /// The 1-based line `line`, without its line break.
    #[must_use]
    pub fn line(&self, line: usize) -> Option<&'a str> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        let end = self.starts.get(line).copied().unwrap_or(self.text.len());
        let text = self.text.get(start..end)?;
        Some(
            text.strip_suffix("\r\n")
                .or_else(|| text.strip_suffix(['\n', '\r']))
                .unwrap_or(text),
        )
    }
}

/// The indexed lines of a report's files; see [`Report::source_lines`].
pub struct SourceLines<'a> {
    files: HashMap<&'a str, LineIndex<'a>>,
}

impl<'a> SourceLines<'a> {
    /// The source line (without its line break) at a 1-based line number, if the file is known.
    #[must_use]
    pub fn line(&self, file: &str, line: usize) -> Option<&'a str> {
        self.files.get(file)?.line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_where_the_yaml_layer_ends_them() {
        let index = LineIndex::new("\u{feff}a: 1\r\nb: 2\rc: 3\nd: 4");
        let lines: Vec<_> = (1..=5).map(|n| index.line(n)).collect();
        assert_eq!(
            lines,
            [Some("a: 1"), Some("b: 2"), Some("c: 3"), Some("d: 4"), None]
        );
        assert_eq!(index.line(0), None);
        assert_eq!(LineIndex::new("x\n").line(2), Some(""));
    }
}
