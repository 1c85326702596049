//! What one run of the linter found: located findings, input errors and skipped files.
//! Every output format renders this one structure.

use probelint_policies::{Finding, Severity};
use std::collections::BTreeMap;
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

/// A file (or document) that could not be read or parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

/// A file or document that was deliberately not linted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
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

    /// The source line (without its newline) at a 1-based line number, if the file is known.
    pub fn source_line(&self, file: &str, line: usize) -> Option<&str> {
        let text = self.sources.get(file)?;
        text.lines().nth(line.checked_sub(1)?)
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
