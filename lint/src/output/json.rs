//! The JSON format: a contract with scripts, so its shape is spelled out here field by field
//! rather than derived from internal types that may grow.
//!
//! ```json
//! {"version": 1,
//!  "findings": [{"rule", "severity", "message", "help", "file", "line", "column",
//!                "object": {"apiVersion", "kind", "namespace", "name"},
//!                "container", "pointer", "suppressed"?: {"source", "reason"},
//!                "load"?: {…} (the load time it rests on: `output/load.rs`)}],
//!  "errors": [{"file", "line", "column", "message"}],
//!  "skipped": [{"file", "reason"}],
//!  "summary": {"files", "objects", "errors", "warnings", "infos", "suppressed"}}
//! ```
//!
//! `namespace`, `name`, `container` and an error's `line`/`column` are `null` when absent (so
//! every key is always there to read); `suppressed` appears only on suppressed findings.
//! Adding a key is compatible; renaming or removing one bumps `version`.

use std::io::{self, Write};

use probelint_policies::{Severity, SuppressionSource};
use serde::Serialize;

use crate::report::Report;

/// Bumped on any change a script could trip over.
const VERSION: u32 = 1;

#[derive(Serialize)]
struct Document<'a> {
    version: u32,
    findings: Vec<Finding<'a>>,
    errors: Vec<InputError<'a>>,
    skipped: Vec<Skipped<'a>>,
    summary: Summary,
}

#[derive(Serialize)]
struct Finding<'a> {
    rule: &'a str,
    severity: Severity,
    message: &'a str,
    help: &'a str,
    file: &'a str,
    line: usize,
    column: usize,
    object: Object<'a>,
    container: Option<&'a str>,
    pointer: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    suppressed: Option<Suppressed<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    load: Option<super::load::Load<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a> {
    api_version: &'a str,
    kind: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

#[derive(Serialize)]
struct Suppressed<'a> {
    source: SuppressionSource,
    reason: &'a str,
}

#[derive(Serialize)]
struct InputError<'a> {
    file: &'a str,
    line: Option<usize>,
    column: Option<usize>,
    message: &'a str,
}

#[derive(Serialize)]
struct Skipped<'a> {
    file: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct Summary {
    files: usize,
    objects: usize,
    errors: usize,
    warnings: usize,
    infos: usize,
    suppressed: usize,
}

pub(super) fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let counts = report.summary();
    let document = Document {
        version: VERSION,
        findings: report
            .findings
            .iter()
            .map(|located| {
                let f = &located.finding;
                Finding {
                    rule: &f.rule,
                    severity: f.severity,
                    message: &f.message,
                    help: &f.help,
                    file: &located.file,
                    line: located.line,
                    column: located.column,
                    object: Object {
                        api_version: &f.object.api_version,
                        kind: &f.object.kind,
                        namespace: f.object.namespace.as_deref(),
                        name: f.object.name.as_deref(),
                    },
                    container: f.container.as_deref(),
                    pointer: &f.pointer,
                    suppressed: f.suppressed.as_ref().map(|s| Suppressed {
                        source: s.source,
                        reason: &s.reason,
                    }),
                    load: f.load.as_ref().map(super::load::Load::of),
                }
            })
            .collect(),
        errors: report
            .errors
            .iter()
            .map(|e| InputError {
                file: &e.file,
                line: e.line,
                column: e.column,
                message: &e.message,
            })
            .collect(),
        skipped: report
            .skipped
            .iter()
            .map(|s| Skipped {
                file: &s.file,
                reason: &s.reason,
            })
            .collect(),
        summary: Summary {
            files: report.files,
            objects: report.objects,
            errors: counts.errors,
            warnings: counts.warnings,
            infos: counts.infos,
            suppressed: counts.suppressed,
        },
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}
