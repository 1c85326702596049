//! Every format over one hand-built report that has a bit of everything: an error with a fix,
//! a warning, an info without container, suppressions from an annotation and from the policy
//! (without a reason), a custom rule in a file whose source is not at hand, an input error and
//! a skipped file.

use std::sync::Arc;

use probelint_policies::{
    Applicability, Finding, Fix, ObjectRef, Severity, Suppression, SuppressionSource,
};
use serde_json::{Value, json};

use super::{Format, Options, render};
use crate::report::{InputError, LocatedFinding, Report, Skipped};

const VLLM_YAML: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: ml
  annotations:
    probelint.io/ignore: liveness-restart-loop
    probelint.io/ignore-reason: "warm pool; see RUNBOOK-12"
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            limits:
              nvidia.com/gpu: 1
          livenessProbe:
            httpGet:
              path: /health
              port: 8000
          readinessProbe:
            tcpSocket:
              port: 8000
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: triton
spec:
  template:
    spec:
      containers:
        - name: triton
          image: nvcr.io/nvidia/tritonserver:24.08-py3
"#;

fn object(kind: &str, namespace: Option<&str>, name: Option<&str>) -> ObjectRef {
    ObjectRef {
        api_version: if kind == "Pod" { "v1" } else { "apps/v1" }.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
    }
}

struct At {
    file: &'static str,
    line: usize,
    column: usize,
}

fn at(file: &'static str, line: usize, column: usize) -> At {
    At { file, line, column }
}

#[allow(clippy::too_many_arguments)]
fn finding(
    at: At,
    rule: &str,
    severity: Severity,
    object: ObjectRef,
    container: Option<&str>,
    pointer: &str,
    message: &str,
    help: &str,
) -> LocatedFinding {
    LocatedFinding {
        finding: Finding {
            rule: rule.to_owned(),
            severity,
            message: message.to_owned(),
            help: help.to_owned(),
            object,
            object_index: 0,
            container: container.map(str::to_owned),
            pointer: pointer.to_owned(),
            suppressed: None,
            fix: None,
            load: None,
        },
        file: at.file.to_owned(),
        line: at.line,
        column: at.column,
    }
}

fn suppressed(
    mut located: LocatedFinding,
    source: SuppressionSource,
    reason: &str,
) -> LocatedFinding {
    located.finding.suppressed = Some(Suppression {
        source,
        reason: reason.to_owned(),
    });
    located
}

fn sample() -> Report {
    let vllm = || object("Deployment", Some("ml"), Some("vllm"));
    let triton = || object("StatefulSet", None, Some("triton"));
    let mut startup = finding(
        at("deploy/vllm.yaml", 18, 11),
        "gpu-startup-probe-missing",
        Severity::Error,
        vllm(),
        Some("vllm"),
        "/spec/template/spec/containers/0/livenessProbe",
        "GPU container `vllm` has a livenessProbe but no startupProbe",
        "add a startupProbe whose budget covers the model load (150 s)",
    );
    startup.finding.fix = Some(Fix {
        description: "add a startupProbe on /health with failureThreshold 15".to_owned(),
        applicability: Applicability::Safe,
        patch: Default::default(),
    });
    let mut report = Report {
        findings: vec![
            // Deliberately out of order: `sort` puts them right.
            finding(
                at("deploy/custom.yaml", 7, 18),
                "team-image-pinned",
                Severity::Error,
                object("Pod", None, None),
                Some("worker"),
                "/spec/containers/0/image",
                "image `worker:latest` is not pinned by digest",
                "pin images by digest (image@sha256:...)",
            ),
            finding(
                at("deploy/vllm.yaml", 23, 13),
                "readiness-port-open",
                Severity::Warning,
                vllm(),
                Some("vllm"),
                "/spec/template/spec/containers/0/readinessProbe/tcpSocket",
                "readinessProbe only checks that port 8000 is open",
                "use httpGet on vLLM's /health, port 8000",
            ),
            startup,
            suppressed(
                finding(
                    at("deploy/vllm.yaml", 18, 11),
                    "liveness-restart-loop",
                    Severity::Error,
                    vllm(),
                    Some("vllm"),
                    "/spec/template/spec/containers/0/livenessProbe",
                    "livenessProbe can kill `vllm` before its model is loaded",
                    "gate liveness behind a startupProbe",
                ),
                SuppressionSource::Annotation,
                "warm pool; see RUNBOOK-12",
            ),
            finding(
                at("deploy/vllm.yaml", 26, 1),
                "gpu-serving-without-pdb",
                Severity::Info,
                triton(),
                None,
                "",
                "no PodDisruptionBudget covers StatefulSet triton",
                "add a PodDisruptionBudget with maxUnavailable: 1",
            ),
            suppressed(
                finding(
                    at("deploy/vllm.yaml", 34, 11),
                    "readiness-timeout-too-short",
                    Severity::Warning,
                    triton(),
                    Some("triton"),
                    "/spec/template/spec/containers/0",
                    "readinessProbe timeout of 1 s is shorter than a busy inference",
                    "raise timeoutSeconds to at least 5",
                ),
                SuppressionSource::Policy,
                "",
            ),
        ],
        errors: vec![InputError {
            file: "broken.yaml".to_owned(),
            line: Some(3),
            column: Some(5),
            message: "did not find expected key while parsing a block mapping".to_owned(),
        }],
        skipped: vec![Skipped {
            file: "charts/values.yaml".to_owned(),
            reason: "no Kubernetes objects (no apiVersion and kind)".to_owned(),
        }],
        files: 4,
        objects: 5,
        sources: [("deploy/vllm.yaml".to_owned(), Arc::<str>::from(VLLM_YAML))].into(),
    };
    report.sort();
    report
}

fn rendered(format: Format, report: &Report, options: Options) -> String {
    let mut out = Vec::new();
    render(format, report, &options, &mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("every format writes UTF-8")
}

fn plain() -> Options {
    Options {
        color: false,
        verbose: false,
    }
}

// --- human -----------------------------------------------------------------------------

#[test]
fn human() {
    insta::assert_snapshot!(rendered(Format::Human, &sample(), plain()));
}

#[test]
fn human_verbose_lists_skipped_files() {
    let text = rendered(
        Format::Human,
        &sample(),
        Options {
            color: false,
            verbose: true,
        },
    );
    assert!(
        text.contains(
            "skipped: charts/values.yaml: no Kubernetes objects (no apiVersion and kind)\n"
        ),
        "{text}"
    );
    assert!(!text.contains("--verbose lists them"), "{text}");
    let quiet = rendered(Format::Human, &sample(), plain());
    assert!(!quiet.contains("skipped: charts/values.yaml"), "{quiet}");
}

#[test]
fn human_colour_only_when_asked() {
    assert!(!rendered(Format::Human, &sample(), plain()).contains('\x1b'));
    let coloured = rendered(
        Format::Human,
        &sample(),
        Options {
            color: true,
            verbose: false,
        },
    );
    assert!(coloured.contains("\x1b["), "{coloured}");
}

#[test]
fn human_never_passes_terminal_escapes_through() {
    let mut report = sample();
    let evil = "\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{202e}";
    report.findings[0].finding.message.push_str(evil);
    report.findings[0].finding.container = Some(format!("c{evil}"));
    report.errors[0].message.push_str(evil);
    report.skipped[0].reason.push_str(evil);
    report.sources.insert(
        "deploy/custom.yaml".to_owned(),
        Arc::from(format!("a\nb\nc\nd\ne\nf\n  image: {evil}\n")),
    );
    for color in [false, true] {
        let text = rendered(
            Format::Human,
            &report,
            Options {
                color,
                verbose: true,
            },
        );
        for bad in ['\x07', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(bad), "{bad:?} in {text}");
        }
        // With colour on, ESC appears only as the start of our own SGR sequences.
        assert!(
            !text.contains("\x1b]") && !text.contains("\x1b[2J"),
            "{text}"
        );
    }
}

#[test]
fn human_summary_reads_naturally() {
    use super::human::summary_line;
    let clean = Report {
        files: 4,
        objects: 5,
        ..Report::default()
    };
    assert_eq!(
        summary_line(&clean, &plain()),
        "No problems found in 5 objects across 4 files"
    );

    let one = Report {
        files: 1,
        objects: 1,
        ..Report::default()
    };
    assert_eq!(
        summary_line(&one, &plain()),
        "No problems found in 1 object across 1 file"
    );

    let empty = Report {
        files: 2,
        ..Report::default()
    };
    assert_eq!(
        summary_line(&empty, &plain()),
        "No Kubernetes objects found in 2 files"
    );

    let mut single = one.clone();
    single.findings = sample()
        .findings
        .into_iter()
        .filter(|f| f.finding.rule == "readiness-port-open")
        .collect();
    assert_eq!(
        summary_line(&single, &plain()),
        "Found 1 warning in 1 object across 1 file"
    );

    assert_eq!(
        summary_line(&sample(), &plain()),
        "Found 2 errors, 1 warning and 1 info (2 suppressed) in 5 objects across 4 files; \
         1 file could not be read; 1 skipped (--verbose lists them)"
    );

    let mut only_suppressed = clean.clone();
    only_suppressed.findings = sample()
        .findings
        .into_iter()
        .filter(|f| f.finding.is_suppressed())
        .collect();
    assert_eq!(
        summary_line(&only_suppressed, &plain()),
        "No problems found in 5 objects across 4 files (2 suppressed)"
    );
}

#[test]
fn human_survives_any_position() {
    // Positions come from another module and may be off: past the end of a line, column 0,
    // an empty line, a line past the end of the file. None of it may panic or lose the finding.
    let source = "a: 1\n\n  key: \u{e9}t\u{e9}\t\u{1F600}x\n";
    let mut report = Report {
        files: 1,
        objects: 1,
        ..Report::default()
    };
    report
        .sources
        .insert("f.yaml".to_owned(), Arc::from(source));
    for (line, column) in [
        (1, 99),
        (1, 0),
        (2, 1),
        (3, 3),
        (3, 8),
        (3, 10),
        (9, 1),
        (0, 0),
    ] {
        report.findings = vec![finding(
            at("f.yaml", line, column),
            "r",
            Severity::Warning,
            object("Pod", None, Some("p")),
            None,
            "/x",
            "m",
            "h",
        )];
        let text = rendered(Format::Human, &report, plain());
        assert!(text.contains("warning[r]: m"), "{line}:{column}: {text}");
    }
}

// --- JSON ------------------------------------------------------------------------------

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
    let keys =
        |v: &Value| -> Vec<String> { v.as_object().expect("an object").keys().cloned().collect() };
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
        }],
        files: 1,
        ..Report::default()
    };
    let doc = json_output(&report);
    assert_eq!(doc["errors"][0]["line"], Value::Null);
    assert_eq!(doc["errors"][0]["column"], Value::Null);
    assert_eq!(doc["findings"], json!([]));
}

// --- SARIF -----------------------------------------------------------------------------

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

// --- GitHub ----------------------------------------------------------------------------

#[test]
fn github_annotations() {
    let text = rendered(Format::Github, &sample(), plain());
    let expected = "\
::error file=deploy/custom.yaml,line=7,col=18,title=team-image-pinned::image `worker:latest` is not pinned by digest%0Ahelp: pin images by digest (image@sha256:...)
::error file=deploy/vllm.yaml,line=18,col=11,title=gpu-startup-probe-missing::GPU container `vllm` has a livenessProbe but no startupProbe%0Ahelp: add a startupProbe whose budget covers the model load (150 s)
::warning file=deploy/vllm.yaml,line=23,col=13,title=readiness-port-open::readinessProbe only checks that port 8000 is open%0Ahelp: use httpGet on vLLM's /health, port 8000
::notice file=deploy/vllm.yaml,line=26,col=1,title=gpu-serving-without-pdb::no PodDisruptionBudget covers StatefulSet triton%0Ahelp: add a PodDisruptionBudget with maxUnavailable: 1
::error file=broken.yaml,line=3,col=5::did not find expected key while parsing a block mapping
";
    assert_eq!(text, expected);
}

#[test]
fn github_escapes_data_and_properties() {
    let report = Report {
        findings: vec![finding(
            at(r".\odd,dir\a:b%.yaml", 2, 3),
            "custom:rule,x",
            Severity::Warning,
            object("Pod", None, Some("p")),
            None,
            "/spec",
            "100% broken\r\n::error::injected",
            "",
        )],
        errors: vec![InputError {
            file: "-".to_owned(),
            line: None,
            column: None,
            message: "stdin is not UTF-8".to_owned(),
        }],
        ..Report::default()
    };
    let text = rendered(Format::Github, &report, plain());
    assert_eq!(
        text,
        "::warning file=odd%2Cdir/a%3Ab%25.yaml,line=2,col=3,title=custom%3Arule%2Cx::100%25 broken%0D%0A::error::injected\n\
         ::error::stdin is not UTF-8\n"
    );
    assert_eq!(
        text.lines().count(),
        2,
        "a message can never start a new command"
    );
}

// --- JUnit -----------------------------------------------------------------------------

#[test]
fn junit_stays_well_formed_with_hostile_text() {
    let mut report = sample();
    report.findings[0].finding.message = "<b>&\"'\x1b[31m\x00]]>".to_owned();
    report.errors[0].file = "a<&>.yaml".to_owned();
    let xml = rendered(Format::Junit, &report, plain());
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
    assert_eq!(parsed.test_suites[0].test_cases.len(), 5);
}

#[test]
fn junit_has_a_case_per_object_and_per_input_error() {
    let xml = rendered(Format::Junit, &sample(), plain());
    assert!(xml.starts_with("<?xml"), "{xml}");
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
    assert_eq!(parsed.test_suites.len(), 1);
    let suite = &parsed.test_suites[0];
    assert_eq!(suite.name.as_str(), "probelint");

    let names: Vec<(&str, &str)> = suite
        .test_cases
        .iter()
        .map(|c| {
            (
                c.classname.as_ref().map_or("", |n| n.as_str()),
                c.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("deploy/custom.yaml", "Pod (unnamed)"),
            ("deploy/vllm.yaml", "Deployment ml/vllm"),
            ("deploy/vllm.yaml", "StatefulSet triton"),
            ("broken.yaml", "read broken.yaml:3:5"),
            ("probelint", "2 objects without findings"),
        ]
    );
    assert_eq!(
        suite.failures, 2,
        "Pod and Deployment fail; the StatefulSet has only info and suppressed"
    );
    assert_eq!(suite.errors, 1);

    let deployment = &suite.test_cases[1];
    let quick_junit::TestCaseStatus::NonSuccess {
        kind,
        message,
        ty,
        description,
        ..
    } = &deployment.status
    else {
        panic!("the Deployment should fail: {deployment:?}");
    };
    assert_eq!(*kind, quick_junit::NonSuccessKind::Failure);
    assert_eq!(
        message.as_ref().map(|m| m.as_str()),
        Some("GPU container `vllm` has a livenessProbe but no startupProbe (and 1 more problem)")
    );
    assert_eq!(
        ty.as_ref().map(|t| t.as_str()),
        Some("gpu-startup-probe-missing,readiness-port-open")
    );
    let description = description.as_ref().map_or("", |d| d.as_str());
    assert!(
        description.contains("deploy/vllm.yaml:18:11: error[gpu-startup-probe-missing]"),
        "{description}"
    );
    assert!(
        description.contains("  help: use httpGet on vLLM's /health, port 8000"),
        "{description}"
    );
    assert!(
        !description.contains("liveness-restart-loop"),
        "suppressed findings do not fail: {description}"
    );
    let out = deployment.system_out.as_ref().map_or("", |o| o.as_str());
    assert!(
        out.contains("suppressed (annotation): warm pool; see RUNBOOK-12"),
        "{out}"
    );
}
