//! The JSON format: a contract with scripts, so its shape is spelled out here field by field
//! rather than derived from internal types that may grow.
//!
//! ```json
//! {"version": 1,
//!  "findings": [{"rule", "severity", "message", "help", "file", "line", "column",
//!                "object": {"apiVersion", "kind", "namespace", "name"},
//!                "container", "pointer", "suppressed"?: {"source", "reason"},
//!                "load"?: {…} (the load time it rests on: `output/load.rs`),
//!                "evidence"?: "…" (what shows that the container serves a model)}],
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
    /// What shows that the container serves a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<&'a str>,
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
                    evidence: f.evidence.as_deref(),
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

#[cfg(test)]
mod tests {
    use crate::output::Format;
    use crate::output::sample::*;
    use crate::report::{InputError, Report};

    use serde_json::{Value, json};

    fn json_output(report: &Report) -> Value {
        let text = rendered(Format::Json, report, plain());
        assert!(
            text.ends_with("}\n"),
            "pretty-printed with a trailing newline"
        );
        serde_json::from_str(&text).expect("valid JSON")
    }

    #[test]
    fn json() {
        insta::assert_snapshot!(rendered(Format::Json, &sample(), plain()));
    }

    #[test]
    fn json_shape_is_the_contract() {
        let doc = json_output(&sample());
        let keys = |v: &Value| -> Vec<String> {
            v.as_object().expect("an object").keys().cloned().collect()
        };
        assert_eq!(
            keys(&doc),
            ["version", "findings", "errors", "skipped", "summary"]
        );
        assert_eq!(doc["version"], 1);

        let findings = doc["findings"].as_array().expect("findings array");
        assert_eq!(findings.len(), 6);
        let finding_keys = [
            "rule",
            "severity",
            "message",
            "help",
            "file",
            "line",
            "column",
            "object",
            "container",
            "pointer",
        ];
        for f in findings {
            let mut expected: Vec<&str> = finding_keys.to_vec();
            if f.get("suppressed").is_some() {
                expected.push("suppressed");
            }
            assert_eq!(keys(f), expected, "{f}");
            assert_eq!(
                keys(&f["object"]),
                ["apiVersion", "kind", "namespace", "name"]
            );
        }

        let custom = &findings[0];
        assert_eq!(custom["rule"], "team-image-pinned");
        assert_eq!(custom["file"], "deploy/custom.yaml");
        assert_eq!(
            custom["object"],
            json!({"apiVersion": "v1", "kind": "Pod", "namespace": null, "name": null})
        );
        assert_eq!(custom["container"], "worker");

        let startup = &findings[1];
        assert_eq!(startup["rule"], "gpu-startup-probe-missing");
        assert_eq!(startup["severity"], "error");
        assert_eq!(startup["line"], 18);
        assert_eq!(startup["column"], 11);
        assert_eq!(startup["object"]["namespace"], "ml");
        assert_eq!(
            startup["pointer"],
            "/spec/template/spec/containers/0/livenessProbe"
        );
        assert!(startup.get("suppressed").is_none());

        let exempt = &findings[2];
        assert_eq!(exempt["rule"], "liveness-restart-loop");
        assert_eq!(
            exempt["suppressed"],
            json!({"source": "annotation", "reason": "warm pool; see RUNBOOK-12"})
        );

        let info = findings
            .iter()
            .find(|f| f["severity"] == "info")
            .expect("the info finding");
        assert_eq!(info["container"], Value::Null);
        assert_eq!(info["object"]["namespace"], Value::Null);
        assert_eq!(info["pointer"], "");

        let policy = findings
            .iter()
            .find(|f| f["rule"] == "readiness-timeout-too-short")
            .expect("policy");
        assert_eq!(
            policy["suppressed"],
            json!({"source": "policy", "reason": ""})
        );

        assert_eq!(
            doc["errors"],
            json!([{"file": "broken.yaml", "line": 3, "column": 5,
                "message": "did not find expected key while parsing a block mapping"}])
        );
        assert_eq!(
            doc["skipped"],
            json!([{"file": "charts/values.yaml", "reason": "no Kubernetes objects (no apiVersion and kind)"}])
        );
        assert_eq!(
            doc["summary"],
            json!({"files": 4, "objects": 5, "errors": 2, "warnings": 1, "infos": 1, "suppressed": 2})
        );
    }

    #[test]
    fn json_error_without_position_has_null_line_and_column() {
        let report = Report {
            errors: vec![InputError {
                file: "big.yaml".to_owned(),
                line: None,
                column: None,
                message: "file is larger than 8 MiB".to_owned(),
                stage: crate::report::Stage::Read,
            }],
            files: 1,
            ..Report::default()
        };
        let doc = json_output(&report);
        assert_eq!(doc["errors"][0]["line"], Value::Null);
        assert_eq!(doc["errors"][0]["column"], Value::Null);
        assert_eq!(doc["findings"], json!([]));
    }
}
