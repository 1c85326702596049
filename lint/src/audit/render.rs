//! The audit's five renderings. Objects are named by cluster coordinates
//! (`Deployment/ns/name`, with the container) instead of file lines, and every finding carries
//! what the evidence says of it; the human and JSON formats end with the workloads ranked by
//! the restarts their probes caused.
//!
//! JSON (`"version": 1`; adding a key is compatible, renaming or removing one bumps it):
//!
//! ```json
//! {"version": 1, "cluster": {"server", "version", "context", "namespace"},
//!  "findings": [{"rule", "severity", "message", "help", "coordinates",
//!                "object": {"apiVersion", "kind", "namespace", "name"}, "container", "pointer",
//!                "evidence": {"status": "observed"|"possible"|"not-yet"|"unobservable",
//!                             "observed": "what the pods show" | null},
//!                "suppressed"?: {"source", "reason"}}],
//!  "workloads": [{"coordinates", "object", "pods", "restarts", "probeRestarts", "findings",
//!                 "supportedFindings", "containers": {NAME: {"restarts", "lastTermination",
//!                 "unhealthy": {PROBE: {"count", "latestMessage", "latestAt"}}, "probeKills"}},
//!                 "startToReady": [{"pod", "seconds"}],
//!                 "cost": {"gpuSecondsLost", "probeKills", "untimedKills", "money"?,
//!                          "firstReadySeconds", "predictedFirstReadySeconds",
//!                          "notReadyAfterReadySeconds", "arithmetic": [TEXT]},
//!                 "timeline"?: {"zero", "endSeconds", "rows": [{"pod", "node", "marks": [{"t",
//!                               "at", "kind", "container"?, "probe"?, "text", "source"}],
//!                               "spans": [{"kind", "from", "to"}], "incomplete": [TEXT]}],
//!                               "predictions": [{"container", "loadSeconds", "loadFrom",
//!                               "offsetSeconds", "offsetFrom", "restarts",
//!                               "firstReadySeconds", "marks", "spans"}]}}],
//!  "errors": [{"resource", "namespace", "message"}], "skipped": [{"what", "reason"}],
//!  "gpuHourCost"?: N (the user's currency per GPU-hour),
//!  "summary": {"objects", "errors", "warnings", "infos", "suppressed"}}
//! ```

use super::evidence::{Support, WorkloadEvidence};
use super::{Audit, AuditFinding, Scope};
use crate::output::{Format, Options, plural, sanitize};
use probelint_policies::{Severity, SuppressionSource};
use serde::Serialize;
use std::io::{self, Write};

pub fn render(
    format: Format,
    audit: &Audit,
    options: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Human => human(audit, options, out),
        Format::Json => json(audit, out),
        Format::Sarif => sarif(audit, out),
        Format::Junit => junit(audit, out),
        Format::Github => github(audit, out),
    }
}

fn scope_text(audit: &Audit) -> String {
    match &audit.scope {
        Scope::All => "all namespaces".to_owned(),
        Scope::Namespace(ns) => format!("namespace {ns}"),
    }
}

/// `Deployment/ns/llm container "vllm"`.
fn subject(f: &AuditFinding) -> String {
    match &f.finding.container {
        Some(c) => format!("{} container {c:?}", f.coordinates),
        None => f.coordinates.clone(),
    }
}

fn evidence_line(support: &Support) -> Option<String> {
    match support {
        Support::Observed(what) => Some(format!("observed: {what}")),
        Support::Possible(what) => Some(format!("possibly observed: {what}")),
        Support::NotYet => Some("not observed yet: its pods show nothing this explains".into()),
        Support::Unobservable => None,
    }
}

struct Counts {
    errors: usize,
    warnings: usize,
    infos: usize,
    suppressed: usize,
}

fn counts(audit: &Audit) -> Counts {
    let mut c = Counts {
        errors: 0,
        warnings: 0,
        infos: 0,
        suppressed: 0,
    };
    for f in &audit.findings {
        if f.finding.is_suppressed() {
            c.suppressed += 1;
            continue;
        }
        match f.finding.severity {
            Severity::Error => c.errors += 1,
            Severity::Warning => c.warnings += 1,
            Severity::Info => c.infos += 1,
        }
    }
    c
}

fn evidence_summary(e: &WorkloadEvidence) -> String {
    let mut parts = vec![
        plural(e.pods, "pod", "pods"),
        plural(e.restarts() as usize, "restart", "restarts"),
    ];
    let by_probe = e.probe_restarts();
    if by_probe > 0 {
        parts.push(format!("{by_probe} by probes"));
    }
    parts.join(", ")
}

/// Each line sanitised (what the cluster wrote may hold escapes), the line breaks kept.
fn sanitize_lines(text: &str) -> String {
    text.lines().map(|l| sanitize(l) + "\n").collect()
}

/// `4060 GPU-s lost to 14 probe kills (1.13 GPU-hours; 2.82 at 2.5 per GPU-hour)`.
fn cost_headline(c: &super::timeline::Cost, rate: Option<f64>) -> String {
    use probelint_policies::simulate::secs;
    let mut text = format!(
        "{} GPU-s lost to {} ({:.2} GPU-hours",
        secs(c.gpu_seconds_lost),
        plural(c.probe_kills as usize, "probe kill", "probe kills"),
        c.gpu_seconds_lost / 3600.0
    );
    if let (Some(money), Some(rate)) = (c.money, rate) {
        text.push_str(&format!(
            "; {money:.2} at {rate} per GPU-hour, your currency"
        ));
    }
    text.push(')');
    if c.untimed_kills > 0 {
        text.push_str(&format!("; {} not timed", c.untimed_kills));
    }
    if c.not_ready_after_ready_seconds > 0.0 {
        text.push_str(&format!(
            "; {:.1} min not Ready after being Ready",
            c.not_ready_after_ready_seconds / 60.0
        ));
    }
    text
}

fn human(audit: &Audit, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let bold = |s: &str| {
        if options.color {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    writeln!(
        out,
        "{}",
        bold(&format!(
            "probelint audit of {}{} (context {}, {})",
            audit.server,
            audit
                .version
                .as_ref()
                .map(|v| format!(", Kubernetes {}", sanitize(v)))
                .unwrap_or_default(),
            sanitize(&audit.context),
            scope_text(audit)
        ))
    )?;
    writeln!(out)?;
    for f in audit.active() {
        let finding = &f.finding;
        writeln!(
            out,
            "{}[{}]: {}",
            finding.severity,
            finding.rule,
            sanitize(&finding.message)
        )?;
        writeln!(
            out,
            "  --> {} at {}",
            sanitize(&subject(f)),
            finding.pointer
        )?;
        if let Some(line) = evidence_line(&f.support) {
            writeln!(out, "  = {}", sanitize(&line))?;
        }
        if !finding.help.is_empty() {
            writeln!(out, "  = help: {}", sanitize(&finding.help))?;
        }
        writeln!(out)?;
    }
    for f in audit.findings.iter().filter(|f| f.finding.is_suppressed()) {
        let reason = f
            .finding
            .suppressed
            .as_ref()
            .map_or("", |s| s.reason.as_str());
        writeln!(
            out,
            "suppressed[{}]: {} ({})",
            f.finding.rule,
            sanitize(&subject(f)),
            sanitize(reason)
        )?;
    }
    if !audit.workloads.is_empty() {
        writeln!(
            out,
            "{}",
            bold("Workloads by GPU time lost to probe kills, then restarts caused by probes:")
        )?;
        for (rank, w) in audit.workloads.iter().enumerate() {
            writeln!(
                out,
                "{:>3}. {}: {}; {}, {} borne out by the evidence",
                rank + 1,
                sanitize(&w.coordinates),
                evidence_summary(&w.evidence),
                plural(w.findings, "finding", "findings"),
                w.supported
            )?;
            for (name, c) in &w.evidence.containers {
                let mut parts = vec![format!("{} restarts", c.restarts)];
                if let Some(t) = &c.last_termination {
                    parts.push(format!(
                        "last terminated {} (exit code {}) in pod {}",
                        t.reason, t.exit_code, t.pod
                    ));
                }
                for (probe, f) in &c.unhealthy {
                    parts.push(format!(
                        "{} {} probe failures, latest {:?}",
                        f.count,
                        probe.noun(),
                        f.latest_message
                    ));
                }
                for (probe, n) in &c.probe_kills {
                    parts.push(format!("{n} killed by the {} probe", probe.noun()));
                }
                writeln!(
                    out,
                    "       container {}: {}",
                    sanitize(name),
                    sanitize(&parts.join("; "))
                )?;
            }
            for s in &w.evidence.start_to_ready {
                match s.seconds {
                    Some(secs) => {
                        writeln!(out, "       pod {}: Ready {secs:.0} s after start", s.pod)?
                    }
                    None => writeln!(out, "       pod {}: started, not Ready", s.pod)?,
                }
            }
            writeln!(
                out,
                "       cost: {}",
                sanitize(&cost_headline(&w.cost, audit.gpu_hour_cost))
            )?;
            for line in &w.cost.arithmetic {
                writeln!(out, "         {}", sanitize(line))?;
            }
            if let Some(t) = &w.timeline {
                let mut text = String::new();
                super::timeline::human(t, &mut text);
                write!(out, "{}", sanitize_lines(&text))?;
            }
        }
        writeln!(out)?;
    }
    if options.verbose {
        for s in &audit.skipped {
            writeln!(
                out,
                "skipped: {}: {}",
                sanitize(&s.what),
                sanitize(&s.reason)
            )?;
        }
    }
    for e in &audit.errors {
        writeln!(
            out,
            "error: cannot list {}{}: {}",
            e.resource,
            e.namespace
                .as_ref()
                .map(|ns| format!(" in namespace {ns}"))
                .unwrap_or_default(),
            sanitize(&e.message)
        )?;
    }
    let c = counts(audit);
    let mut summary = format!(
        "Audited {} in {}: {}, {}, {}",
        plural(audit.objects, "object", "objects"),
        scope_text(audit),
        plural(c.errors, "error", "errors"),
        plural(c.warnings, "warning", "warnings"),
        plural(c.infos, "info", "infos"),
    );
    if c.suppressed > 0 {
        summary.push_str(&format!(" ({} suppressed)", c.suppressed));
    }
    if !audit.errors.is_empty() {
        summary.push_str(&format!(
            "; {} could not be listed",
            plural(audit.errors.len(), "resource", "resources")
        ));
    }
    if !audit.skipped.is_empty() && !options.verbose {
        summary.push_str(&format!(
            "; {} skipped (--verbose lists them)",
            plural(audit.skipped.len(), "kind or object", "kinds or objects")
        ));
    }
    writeln!(out, "{}", bold(&summary))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonObject<'a> {
    api_version: &'a str,
    kind: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

impl<'a> From<&'a probelint_policies::ObjectRef> for JsonObject<'a> {
    fn from(o: &'a probelint_policies::ObjectRef) -> Self {
        JsonObject {
            api_version: &o.api_version,
            kind: &o.kind,
            namespace: o.namespace.as_deref(),
            name: o.name.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct JsonEvidence<'a> {
    status: &'static str,
    observed: Option<&'a str>,
}

fn json_evidence(support: &Support) -> JsonEvidence<'_> {
    match support {
        Support::Observed(what) => JsonEvidence {
            status: "observed",
            observed: Some(what),
        },
        Support::Possible(what) => JsonEvidence {
            status: "possible",
            observed: Some(what),
        },
        Support::NotYet => JsonEvidence {
            status: "not-yet",
            observed: None,
        },
        Support::Unobservable => JsonEvidence {
            status: "unobservable",
            observed: None,
        },
    }
}

#[derive(Serialize)]
struct JsonSuppressed<'a> {
    source: SuppressionSource,
    reason: &'a str,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    rule: &'a str,
    severity: Severity,
    message: &'a str,
    help: &'a str,
    coordinates: &'a str,
    object: JsonObject<'a>,
    container: Option<&'a str>,
    pointer: &'a str,
    evidence: JsonEvidence<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suppressed: Option<JsonSuppressed<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonWorkload<'a> {
    coordinates: &'a str,
    object: JsonObject<'a>,
    pods: usize,
    restarts: u64,
    probe_restarts: u64,
    findings: usize,
    supported_findings: usize,
    containers: &'a std::collections::BTreeMap<String, super::evidence::ContainerEvidence>,
    start_to_ready: &'a [super::evidence::StartToReady],
    cost: &'a super::timeline::Cost,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<&'a super::timeline::Timeline>,
}

/// The JSON report, its keys in this order.
#[derive(Serialize)]
struct JsonDocument<'a> {
    version: u32,
    cluster: serde_json::Value,
    findings: Vec<JsonFinding<'a>>,
    workloads: Vec<JsonWorkload<'a>>,
    errors: Vec<serde_json::Value>,
    skipped: Vec<JsonSkipped<'a>>,
    #[serde(rename = "gpuHourCost", skip_serializing_if = "Option::is_none")]
    gpu_hour_cost: Option<f64>,
    summary: serde_json::Value,
}

#[derive(Serialize)]
struct JsonSkipped<'a> {
    what: &'a str,
    reason: &'a str,
}

fn json(audit: &Audit, out: &mut dyn Write) -> io::Result<()> {
    let c = counts(audit);
    // A document of borrowed rows serialised as it is written, not built as a JSON value first:
    // an audit of a large cluster skips one row per pod judged through its controller, and a
    // value of 20,000 rows would cost more than the audit kept.
    let document = JsonDocument {
        version: 1,
        cluster: serde_json::json!({
            "server": audit.server,
            "version": audit.version,
            "context": audit.context,
            "namespace": match &audit.scope { Scope::All => None, Scope::Namespace(ns) => Some(ns) },
        }),
        findings: audit
            .findings
            .iter()
            .map(|f| JsonFinding {
                rule: &f.finding.rule,
                severity: f.finding.severity,
                message: &f.finding.message,
                help: &f.finding.help,
                coordinates: &f.coordinates,
                object: (&*f.finding.object).into(),
                container: f.finding.container.as_deref(),
                pointer: &f.finding.pointer,
                evidence: json_evidence(&f.support),
                suppressed: f.finding.suppressed.as_ref().map(|s| JsonSuppressed {
                    source: s.source,
                    reason: &s.reason,
                }),
            })
            .collect::<Vec<_>>(),
        workloads: audit
            .workloads
            .iter()
            .map(|w| JsonWorkload {
                coordinates: &w.coordinates,
                object: (&w.object).into(),
                pods: w.evidence.pods,
                restarts: w.evidence.restarts(),
                probe_restarts: w.evidence.probe_restarts(),
                findings: w.findings,
                supported_findings: w.supported,
                containers: &w.evidence.containers,
                start_to_ready: &w.evidence.start_to_ready,
                cost: &w.cost,
                timeline: w.timeline.as_ref(),
            })
            .collect::<Vec<_>>(),
        errors: audit
            .errors
            .iter()
            .map(|e| {
                serde_json::json!({
                    "resource": e.resource, "namespace": e.namespace, "message": e.message,
                })
            })
            .collect::<Vec<_>>(),
        skipped: audit
            .skipped
            .iter()
            .map(|s| JsonSkipped {
                what: &s.what,
                reason: &s.reason,
            })
            .collect::<Vec<_>>(),
        gpu_hour_cost: audit.gpu_hour_cost,
        summary: serde_json::json!({
            "objects": audit.objects, "errors": c.errors, "warnings": c.warnings,
            "infos": c.infos, "suppressed": c.suppressed,
        }),
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

fn sarif_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// SARIF 2.1.0 with logical locations (`Deployment/ns/name/container`): a cluster object has no
/// file, so `physicalLocation` is absent and `fullyQualifiedName` names it.
fn sarif(audit: &Audit, out: &mut dyn Write) -> io::Result<()> {
    let mut rules: Vec<&str> = audit.findings.iter().map(|f| &*f.finding.rule).collect();
    rules.sort_unstable();
    rules.dedup();
    let descriptors: Vec<Value> = rules
        .iter()
        .map(|id| {
            let meta = probelint_policies::find(id).map(|r| r.meta());
            serde_json::json!({
                "id": id,
                "shortDescription": {"text": meta.map_or(*id, |m| m.summary)},
                "helpUri": format!("https://github.com/probelint/probelint/blob/main/docs/rules/{id}.md"),
            })
        })
        .collect();
    let results: Vec<Value> = audit
        .findings
        .iter()
        .map(|f| {
            let mut name = f.coordinates.clone();
            if let Some(c) = &f.finding.container {
                name.push('/');
                name.push_str(c);
            }
            let mut text = f.finding.message.clone();
            if let Some(line) = evidence_line(&f.support) {
                text.push_str(" (");
                text.push_str(&line);
                text.push(')');
            }
            let mut result = serde_json::json!({
                "ruleId": f.finding.rule,
                "ruleIndex": rules.binary_search(&&*f.finding.rule).unwrap_or(0),
                "level": sarif_level(f.finding.severity),
                "message": {"text": text},
                "locations": [{"logicalLocations": [{
                    "fullyQualifiedName": name,
                    "name": f.finding.object.name,
                    "kind": "object",
                }]}],
                "properties": {
                    "coordinates": f.coordinates,
                    "container": f.finding.container,
                    "pointer": f.finding.pointer,
                    "evidence": json_evidence(&f.support),
                },
            });
            // The cost of the workload the finding is on: what its probes have burnt so far.
            if let Some(w) = audit.workloads.iter().find(|w| w.coordinates == f.coordinates) {
                result["properties"]["cost"] = serde_json::to_value(&w.cost).unwrap_or(Value::Null);
            }
            if let Some(s) = &f.finding.suppressed {
                result["suppressions"] = serde_json::json!([{
                    "kind": match s.source { SuppressionSource::Annotation => "inSource", SuppressionSource::Policy => "external" },
                    "justification": s.reason,
                }]);
            }
            result
        })
        .collect();
    let document = serde_json::json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "probelint",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/probelint/probelint",
                "rules": descriptors,
            }},
            "properties": {"server": audit.server, "context": audit.context, "scope": scope_text(audit),
                           "gpuHourCost": audit.gpu_hour_cost},
            "results": results,
        }],
    });
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

use serde_json::Value;

fn junit(audit: &Audit, out: &mut dyn Write) -> io::Result<()> {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new("probelint audit");
    let mut by_object: std::collections::BTreeMap<&str, Vec<&AuditFinding>> = Default::default();
    for f in audit.active() {
        by_object.entry(&f.coordinates).or_default().push(f);
    }
    for (coordinates, findings) in &by_object {
        let failing: Vec<&&AuditFinding> = findings
            .iter()
            .filter(|f| f.finding.severity >= Severity::Warning)
            .collect();
        let describe = findings
            .iter()
            .map(|f| {
                let mut line = format!(
                    "{}[{}]: {}: {}",
                    f.finding.severity,
                    f.finding.rule,
                    subject(f),
                    f.finding.message
                );
                if let Some(e) = evidence_line(&f.support) {
                    line.push_str(&format!(" ({e})"));
                }
                line
            })
            .collect::<Vec<_>>()
            .join("\n");
        let status = match failing.first() {
            None => TestCaseStatus::success(),
            Some(first) => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status
                    .set_message(first.finding.message.as_str())
                    .set_type(&*first.finding.rule)
                    .set_description(describe.clone());
                status
            }
        };
        let mut case = TestCase::new(*coordinates, status);
        case.set_classname("probelint.audit");
        if failing.is_empty() {
            case.set_system_out(describe);
        }
        suite.add_test_case(case);
    }
    for e in &audit.errors {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
        status
            .set_message(e.message.as_str())
            .set_type("list-error");
        let mut case = TestCase::new(format!("list {}", e.resource), status);
        case.set_classname("probelint.audit");
        suite.add_test_case(case);
    }
    let clean = audit.objects.saturating_sub(by_object.len());
    if clean > 0 {
        let mut case = TestCase::new(
            format!("{} without findings", plural(clean, "object", "objects")),
            TestCaseStatus::success(),
        );
        case.set_classname("probelint.audit");
        suite.add_test_case(case);
    }
    let mut report = quick_junit::Report::new("probelint");
    report.add_test_suite(suite);
    report.serialize(&mut *out).map_err(io::Error::other)
}

/// GitHub Actions workflow commands, without a file: the annotation shows on the run summary.
fn github(audit: &Audit, out: &mut dyn Write) -> io::Result<()> {
    fn data(s: &str) -> String {
        s.replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A")
    }
    fn property(s: &str) -> String {
        data(s).replace(':', "%3A").replace(',', "%2C")
    }
    for f in audit.active() {
        let command = match f.finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut message = format!("{}: {}", subject(f), f.finding.message);
        if let Some(e) = evidence_line(&f.support) {
            message.push('\n');
            message.push_str(&e);
        }
        if !f.finding.help.is_empty() {
            message.push_str("\nhelp: ");
            message.push_str(&f.finding.help);
        }
        writeln!(
            out,
            "::{command} title={}::{}",
            property(&format!("probelint {}", f.finding.rule)),
            data(&message)
        )?;
    }
    for e in &audit.errors {
        writeln!(
            out,
            "::error title={}::{}",
            property(&format!("probelint audit: list {}", e.resource)),
            data(&e.message)
        )?;
    }
    Ok(())
}
