//! SARIF 2.1.0 for GitHub code scanning (own small model, after zizmor).
//!
//! Only the parts GitHub and SARIF viewers read are modelled: the rule catalog (so an alert
//! links to its rule's documentation and shows its rationale and examples), results with one
//! physical location each, a partial fingerprint so that GitHub follows an alert across
//! commits even when lines move, suppressions (so exempted findings show up as dismissed
//! rather than vanish), and input errors as tool notifications with `executionSuccessful:
//! false`, so a file the linter could not read is never mistaken for a clean one.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use probelint_policies::{RuleMeta, Severity, SuppressionSource, registry};
use serde::Serialize;

use super::{STDIN, repo_path};
use crate::report::{LocatedFinding, Report};

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// Where each rule's documentation page lives (`docs/rules/` is generated from the registry).
const RULE_DOCS: &str = "https://github.com/probelint/probelint/blob/main/docs/rules/";

/// The `partialFingerprints` key. Bump the version if what goes into the hash changes, so
/// GitHub does not match old alerts against differently computed fingerprints.
const FINGERPRINT_KEY: &str = "probelint/v1";

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: [Run<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: Tool<'a>,
    invocations: [Invocation; 1],
    results: Vec<SarifResult<'a>>,
    /// Our columns count characters, not the UTF-16 code units SARIF assumes by default.
    column_kind: &'static str,
}

#[derive(Serialize)]
struct Tool<'a> {
    driver: Driver<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver<'a> {
    name: &'static str,
    version: &'static str,
    information_uri: &'static str,
    rules: Vec<Descriptor<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor<'a> {
    id: &'a str,
    name: String,
    short_description: Text,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_description: Option<Text>,
    help: Help,
    #[serde(skip_serializing_if = "Option::is_none")]
    help_uri: Option<String>,
    default_configuration: Configuration,
    properties: DescriptorProperties,
}

#[derive(Serialize)]
struct Text {
    text: String,
}

#[derive(Serialize)]
struct Help {
    text: String,
    markdown: String,
}

#[derive(Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Serialize)]
struct DescriptorProperties {
    tags: &'static [&'static str],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: String,
    /// Always set: [`descriptors`] lists every rule id that appears in a finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    rule_index: Option<usize>,
    level: &'static str,
    message: Text,
    locations: Vec<Location>,
    partial_fingerprints: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    suppressions: Vec<Suppression>,
    properties: ResultProperties<'a>,
}

/// What GitHub does not show but a reader of the file wants: which object and where in it.
#[derive(Serialize)]
struct ResultProperties<'a> {
    object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<String>,
    pointer: String,
    /// The load time the finding rests on (`output/load.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    load: Option<super::load::Load<'a>>,
    /// What shows that the container serves a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    physical_location: PhysicalLocation,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PhysicalLocation {
    artifact_location: ArtifactLocation,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<Region>,
}

#[derive(Serialize)]
struct ArtifactLocation {
    uri: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_column: Option<usize>,
}

#[derive(Serialize)]
struct Suppression {
    kind: &'static str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    justification: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Invocation {
    execution_successful: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_execution_notifications: Vec<Notification>,
}

#[derive(Serialize)]
struct Notification {
    level: &'static str,
    message: Text,
    locations: Vec<Location>,
}

pub(super) fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let rules = descriptors(report);
    let index: BTreeMap<&str, usize> = rules.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let results = report
        .findings
        .iter()
        .map(|located| result(located, index.get(&*located.finding.rule).copied()))
        .collect();

    let mut notifications: Vec<Notification> = report
        .errors
        .iter()
        .map(|error| Notification {
            level: "error",
            message: Text {
                text: error.message.clone(),
            },
            locations: vec![location(&error.file, error.line, error.column)],
        })
        .collect();
    // Skipped files are not failures, but a SARIF viewer should be able to say why a file
    // has no results: it was not linted, not clean.
    notifications.extend(report.skipped.iter().map(|skipped| Notification {
        level: "note",
        message: Text {
            text: format!("skipped: {}", skipped.reason),
        },
        locations: vec![location(&skipped.file, None, None)],
    }));

    let log = Log {
        schema: SCHEMA,
        version: "2.1.0",
        runs: [Run {
            tool: Tool {
                driver: Driver {
                    name: "probelint",
                    version: env!("CARGO_PKG_VERSION"),
                    information_uri: env!("CARGO_PKG_REPOSITORY"),
                    rules,
                },
            },
            invocations: [Invocation {
                execution_successful: report.errors.is_empty(),
                tool_execution_notifications: notifications,
            }],
            results,
            column_kind: "unicodeCodePoints",
        }],
    };
    serde_json::to_writer_pretty(&mut *out, &log)?;
    writeln!(out)
}

/// Every built-in rule in catalog order (so indices are stable between runs with different
/// findings), then each custom rule seen in the findings, by id.
fn descriptors(report: &Report) -> Vec<Descriptor<'_>> {
    let mut rules: Vec<Descriptor<'_>> =
        registry().iter().map(|rule| builtin(rule.meta())).collect();
    let mut custom: BTreeMap<&str, &LocatedFinding> = BTreeMap::new();
    for located in &report.findings {
        let id = &*located.finding.rule;
        if !rules.iter().any(|r| r.id == id) {
            custom.entry(id).or_insert(located);
        }
    }
    rules.extend(
        custom
            .into_iter()
            .map(|(id, located)| custom_rule(id, located)),
    );
    rules
}

fn builtin(meta: &'static RuleMeta) -> Descriptor<'static> {
    let mut text = meta.rationale.to_owned();
    let mut markdown = format!("**{}**\n\n{}\n", meta.summary, meta.rationale);
    if let Some(fix) = &meta.fix {
        let _ = write!(text, "\n\nAutomatic fix: {fix}");
        let _ = write!(markdown, "\n**Automatic fix:** {fix}\n");
    }
    let _ = write!(
        markdown,
        "\n### Example\n\n```yaml\n{}```\n\n### Use instead\n\n```yaml\n{}```\n",
        meta.bad_example, meta.good_example
    );
    Descriptor {
        id: meta.id,
        name: pascal_case(meta.id),
        short_description: Text {
            text: meta.summary.to_owned(),
        },
        full_description: Some(Text {
            text: meta.rationale.to_owned(),
        }),
        help: Help { text, markdown },
        help_uri: Some(format!("{RULE_DOCS}{}.md", meta.id)),
        default_configuration: Configuration {
            level: level(meta.severity),
        },
        properties: DescriptorProperties {
            tags: &["kubernetes", "reliability"],
        },
    }
}

/// A policy-defined rule has no catalog entry: describe it by its first finding, which
/// carries the message and help the policy author wrote.
fn custom_rule<'a>(id: &'a str, located: &LocatedFinding) -> Descriptor<'a> {
    let finding = &located.finding;
    let help = if finding.help.is_empty() {
        finding.message.clone()
    } else {
        finding.help.to_string()
    };
    Descriptor {
        id,
        name: pascal_case(id),
        short_description: Text {
            text: finding.message.clone(),
        },
        full_description: None,
        help: Help {
            markdown: help.clone(),
            text: help,
        },
        help_uri: None,
        default_configuration: Configuration {
            level: level(finding.severity),
        },
        properties: DescriptorProperties {
            tags: &["kubernetes", "custom"],
        },
    }
}

fn result(located: &LocatedFinding, rule_index: Option<usize>) -> SarifResult<'_> {
    let finding = &located.finding;
    let text = if finding.help.is_empty() {
        finding.message.clone()
    } else {
        format!("{}\nhelp: {}", finding.message, finding.help)
    };
    let suppressions = finding
        .suppressed
        .iter()
        .map(|s| Suppression {
            // An annotation lives in the manifest itself; a policy exemption lives elsewhere.
            kind: match s.source {
                SuppressionSource::Annotation => "inSource",
                SuppressionSource::Policy => "external",
            },
            status: "accepted",
            justification: (!s.reason.is_empty()).then(|| s.reason.clone()),
        })
        .collect();
    SarifResult {
        rule_id: finding.rule.to_string(),
        rule_index,
        level: level(finding.severity),
        message: Text { text },
        locations: vec![location(
            &located.file,
            Some(located.line),
            Some(located.column),
        )],
        partial_fingerprints: BTreeMap::from([(FINGERPRINT_KEY, fingerprint(located))]),
        suppressions,
        properties: ResultProperties {
            object: finding.object.to_string(),
            container: finding.container.as_deref().map(str::to_owned),
            pointer: finding.pointer.clone(),
            load: finding.load.as_ref().map(super::load::Load::of),
            evidence: finding.evidence.as_deref(),
        },
    }
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A location; lines and columns below 1 (which the schema forbids) are dropped.
fn location(file: &str, line: Option<usize>, column: Option<usize>) -> Location {
    let region = line.filter(|&l| l >= 1).map(|start_line| Region {
        start_line,
        start_column: column.filter(|&c| c >= 1),
    });
    Location {
        physical_location: PhysicalLocation {
            artifact_location: ArtifactLocation { uri: uri(file) },
            region,
        },
    }
}

/// A URI reference for a path: relative paths stay relative (GitHub resolves them against
/// the repository root), absolute ones become `file://` URIs, and standard input is `stdin`.
fn uri(file: &str) -> String {
    if file == STDIN {
        return "stdin".to_owned();
    }
    let path = repo_path(file);
    let bytes = path.as_bytes();
    let drive =
        bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'/';
    if path.starts_with('/') {
        format!("file://{}", percent_encode(&path, false))
    } else if drive {
        format!("file:///{}", percent_encode(&path, true))
    } else {
        percent_encode(&path, false)
    }
}

/// Percent-encodes everything but unreserved characters and `/`. A `:` is encoded too (a
/// relative `a:b.yaml` would otherwise read as a URI with scheme `a`), except a Windows drive
/// letter's when `drive` says there is one.
fn percent_encode(path: &str, drive: bool) -> String {
    let mut out = String::with_capacity(path.len());
    for (i, byte) in path.bytes().enumerate() {
        let keep = byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/')
            || (drive && i == 1 && byte == b':');
        if keep {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// A fingerprint that survives edits elsewhere in the file: the rule, the file, the object
/// (kind, namespace, name: a multi-document file repeats the same pointer in each object)
/// and the pointer inside it. Line numbers are deliberately left out, and so is
/// `apiVersion`, so that moving a Deployment from `apps/v1beta2` to `apps/v1` keeps its
/// alerts.
fn fingerprint(located: &LocatedFinding) -> String {
    let finding = &located.finding;
    let object = &finding.object;
    let fields = [
        &*finding.rule,
        &repo_path(&located.file),
        object.kind.as_str(),
        object.namespace.as_deref().unwrap_or(""),
        object.name.as_deref().unwrap_or(""),
        finding.pointer.as_str(),
    ];
    format!("{:032x}", fnv1a_128(&fields))
}

/// FNV-1a, 128-bit, over length-prefixed fields (so `("ab", "c")` and `("a", "bc")` differ).
/// Hand-written because the value must never change between Rust releases, which
/// `std::hash` does not promise.
fn fnv1a_128(fields: &[&str]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut hash = OFFSET;
    for field in fields {
        let len = (field.len() as u64).to_le_bytes();
        for &byte in len.iter().chain(field.as_bytes()) {
            hash ^= u128::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

/// `gpu-startup-probe-missing` → `GpuStartupProbeMissing`: SARIF wants a rule `name` that
/// reads as an identifier, distinct from the id.
fn pascal_case(id: &str) -> String {
    let name: String = id
        .split(['-', '_', '.', '/'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect();
    if name.is_empty() { id.to_owned() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Format;
    use crate::output::sample::*;
    use crate::report::Report;

    use serde_json::{Value, json};

    /// The log as code scanning reads it. The driver lists every rule of the registry; here it
    /// is cut to their ids, and the descriptors of the rules the results name are pinned on
    /// their own (`sarif_rule_descriptors`), so that the snapshot stays readable.
    #[test]
    fn sarif() {
        let mut log = sarif_output(&sample());
        let driver = &mut log["runs"][0]["tool"]["driver"];
        assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
        driver["version"] = json!("[version]");
        let ids: Vec<Value> = driver["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .map(|r| r["id"].clone())
            .collect();
        driver["rules"] = Value::Array(ids);
        insta::assert_snapshot!(serde_json::to_string_pretty(&log).expect("JSON"));
    }

    #[test]
    fn sarif_rule_descriptors() {
        let log = sarif_output(&sample());
        let run = &log["runs"][0];
        let named: std::collections::BTreeSet<&str> = run["results"]
            .as_array()
            .expect("results")
            .iter()
            .filter_map(|r| r["ruleId"].as_str())
            .collect();
        let descriptors: Vec<&Value> = run["tool"]["driver"]["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .filter(|r| r["id"].as_str().is_some_and(|id| named.contains(id)))
            .collect();
        assert_eq!(
            descriptors.len(),
            named.len(),
            "each result's rule is described"
        );
        insta::assert_snapshot!(serde_json::to_string_pretty(&descriptors).expect("JSON"));
    }

    fn sarif_output(report: &Report) -> Value {
        serde_json::from_str(&rendered(Format::Sarif, report, plain())).expect("valid JSON")
    }

    fn assert_valid_sarif(log: &Value) {
        let schema: Value =
            serde_json::from_str(include_str!("../../tests/data/sarif-schema-2.1.0.json"))
                .expect("schema");
        let validator = jsonschema::draft4::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the SARIF schema compiles as draft-04");
        let errors: Vec<String> = validator
            .iter_errors(log)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "SARIF schema violations:\n{}\n{log:#}",
            errors.join("\n")
        );
    }

    #[test]
    fn sarif_is_valid_against_the_oasis_schema() {
        assert_valid_sarif(&sarif_output(&sample()));
        assert_valid_sarif(&sarif_output(&Report::default()));
    }

    #[test]
    fn sarif_schema_validation_catches_mistakes() {
        // Guards the guard: a validator that accepts everything would make the test above vacuous.
        let mut log = sarif_output(&sample());
        log["runs"][0]["results"][0]["level"] = json!("fatal");
        let schema: Value =
            serde_json::from_str(include_str!("../../tests/data/sarif-schema-2.1.0.json"))
                .expect("schema");
        let validator = jsonschema::draft4::new(&schema).expect("schema compiles");
        assert!(!validator.is_valid(&log));
    }

    #[test]
    fn sarif_results_point_at_their_rules() {
        let log = sarif_output(&sample());
        assert_eq!(log["version"], "2.1.0");
        let run = &log["runs"][0];
        let driver = &run["tool"]["driver"];
        assert_eq!(driver["name"], "probelint");
        assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
        let rules = driver["rules"].as_array().expect("rules");
        assert_eq!(
            rules.len(),
            probelint_policies::registry().len() + 1,
            "built-ins plus one custom"
        );

        let startup = rules
            .iter()
            .find(|r| r["id"] == "gpu-startup-probe-missing")
            .expect("built-in");
        assert_eq!(startup["name"], "GpuStartupProbeMissing");
        assert_eq!(
            startup["helpUri"],
            "https://github.com/probelint/probelint/blob/main/docs/rules/gpu-startup-probe-missing.md"
        );
        assert_eq!(startup["defaultConfiguration"]["level"], "error");
        assert!(
            startup["help"]["markdown"]
                .as_str()
                .is_some_and(|m| m.contains("```yaml"))
        );

        let custom = rules.last().expect("custom rule last");
        assert_eq!(custom["id"], "team-image-pinned");
        assert_eq!(
            custom["shortDescription"]["text"],
            "image `worker:latest` is not pinned by digest"
        );
        assert!(custom.get("helpUri").is_none());

        let results = run["results"].as_array().expect("results");
        assert_eq!(
            results.len(),
            6,
            "suppressed findings are results too, with suppressions"
        );
        for result in results {
            let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
            assert_eq!(rules[index]["id"], result["ruleId"]);
        }

        let first = &results[0];
        assert_eq!(first["ruleId"], "team-image-pinned");
        assert_eq!(
            first["message"]["text"],
            "image `worker:latest` is not pinned by digest\nhelp: pin images by digest (image@sha256:...)"
        );
        let physical = &first["locations"][0]["physicalLocation"];
        assert_eq!(physical["artifactLocation"]["uri"], "deploy/custom.yaml");
        assert_eq!(
            physical["region"],
            json!({"startLine": 7, "startColumn": 18})
        );

        let levels: Vec<&str> = results.iter().filter_map(|r| r["level"].as_str()).collect();
        assert_eq!(
            levels,
            ["error", "error", "error", "warning", "note", "warning"]
        );

        let suppressions: Vec<&Value> = results
            .iter()
            .filter_map(|r| r.get("suppressions"))
            .collect();
        assert_eq!(
            suppressions,
            [
                &json!([{"kind": "inSource", "status": "accepted", "justification": "warm pool; see RUNBOOK-12"}]),
                &json!([{"kind": "external", "status": "accepted"}]),
            ]
        );

        let invocation = &run["invocations"][0];
        assert_eq!(invocation["executionSuccessful"], false);
        let notes = invocation["toolExecutionNotifications"]
            .as_array()
            .expect("notifications");
        assert_eq!(notes[0]["level"], "error");
        assert_eq!(
            notes[0]["message"]["text"],
            "did not find expected key while parsing a block mapping"
        );
        assert_eq!(
            notes[0]["locations"][0]["physicalLocation"]["region"],
            json!({"startLine": 3, "startColumn": 5})
        );
        assert_eq!(notes[1]["level"], "note");
    }

    #[test]
    fn sarif_fingerprints_are_stable_and_distinct() {
        let fingerprints = |report: &Report| -> Vec<String> {
            sarif_output(report)["runs"][0]["results"]
                .as_array()
                .expect("results")
                .iter()
                .map(|r| {
                    r["partialFingerprints"]["probelint/v1"]
                        .as_str()
                        .expect("fingerprint")
                        .to_owned()
                })
                .collect()
        };
        let before = fingerprints(&sample());
        let mut unique = before.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), before.len(), "{before:?}");

        // Lines move when someone edits above the finding; the alert must stay the same alert.
        let mut moved = sample();
        for f in &mut moved.findings {
            f.line += 10;
            f.column += 2;
        }
        assert_eq!(fingerprints(&moved), before);
    }

    #[test]
    fn sarif_clean_run_is_successful_and_empty() {
        let log = sarif_output(&Report {
            files: 1,
            objects: 1,
            ..Report::default()
        });
        let run = &log["runs"][0];
        assert_eq!(run["results"], json!([]));
        assert_eq!(run["invocations"][0], json!({"executionSuccessful": true}));
    }

    #[test]
    fn uris_are_relative_references_with_forward_slashes() {
        assert_eq!(uri("deploy/vllm.yaml"), "deploy/vllm.yaml");
        assert_eq!(uri("./deploy/vllm.yaml"), "deploy/vllm.yaml");
        assert_eq!(uri(r"deploy\vllm.yaml"), "deploy/vllm.yaml");
        assert_eq!(uri("my models/a b.yaml"), "my%20models/a%20b.yaml");
        assert_eq!(uri("x:y.yaml"), "x%3Ay.yaml");
        assert_eq!(uri("/srv/k8s/a.yaml"), "file:///srv/k8s/a.yaml");
        assert_eq!(uri(r"C:\k8s\a.yaml"), "file:///C:/k8s/a.yaml");
        assert_eq!(uri("-"), "stdin");
        assert_eq!(uri("modèle.yaml"), "mod%C3%A8le.yaml");
    }

    #[test]
    fn fingerprint_hash_is_pinned_and_length_prefixed() {
        // Pinned: a change here re-opens every alert on GitHub. Bump FINGERPRINT_KEY instead.
        assert_eq!(fnv1a_128(&[]), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_ne!(fnv1a_128(&["ab", "c"]), fnv1a_128(&["a", "bc"]));
    }

    #[test]
    fn rule_names_are_pascal_case() {
        assert_eq!(
            pascal_case("gpu-startup-probe-missing"),
            "GpuStartupProbeMissing"
        );
        assert_eq!(pascal_case("team/custom_rule"), "TeamCustomRule");
        assert_eq!(pascal_case("--"), "--");
    }
}
