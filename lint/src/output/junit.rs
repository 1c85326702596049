//! JUnit XML for CI test report views (GitLab merge request widgets, Jenkins, Azure DevOps).
//!
//! One test suite, `probelint`. Each object with findings is one test case, named after the
//! object and classed under its file, so the report reads "Deployment ml/vllm in
//! deploy/vllm.yaml failed". JUnit allows one `<failure>` per test case, so an object's
//! errors and warnings become one failure: its message names the problems, its text lists
//! each with file:line:col and help. Objects with only info or suppressed findings pass,
//! with those findings in `system-out` so they stay visible. Each input error is a test case
//! with an `<error>`. The objects without findings are one passing test case, because the
//! report counts them but does not name them.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use probelint_policies::{ObjectRef, Severity};
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};

use super::{display_path, plural, suppression_parts};
use crate::report::{LocatedFinding, Report};

pub(super) fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let mut suite = TestSuite::new("probelint");

    // Grouped by file and object, in report order. Two documents with the same kind,
    // namespace and name in one file share a test case: harmless, and rare.
    let mut groups: Vec<(&str, &ObjectRef, Vec<&LocatedFinding>)> = Vec::new();
    let mut index: HashMap<(&str, &ObjectRef), usize> = HashMap::new();
    for located in &report.findings {
        let key = (located.file.as_str(), &*located.finding.object);
        let slot = *index.entry(key).or_insert_with(|| {
            groups.push((key.0, key.1, Vec::new()));
            groups.len() - 1
        });
        if let Some((_, _, findings)) = groups.get_mut(slot) {
            findings.push(located);
        }
    }
    for (file, object, findings) in &groups {
        suite.add_test_case(object_case(file, object, findings));
    }

    for error in &report.errors {
        let place = match (error.line, error.column) {
            (Some(line), Some(column)) => format!(":{line}:{column}"),
            (Some(line), None) => format!(":{line}"),
            _ => String::new(),
        };
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
        status
            .set_message(error.message.as_str())
            .set_type("input-error")
            .set_description(format!(
                "{}{place}: {}",
                display_path(&error.file),
                error.message
            ));
        // The position keeps two errors in one multi-document file two distinct test cases.
        let mut case = TestCase::new(format!("read {}{place}", display_path(&error.file)), status);
        case.set_classname(display_path(&error.file));
        suite.add_test_case(case);
    }

    let clean = report.objects.saturating_sub(groups.len());
    if clean > 0 {
        let mut case = TestCase::new(
            format!("{} without findings", plural(clean, "object", "objects")),
            TestCaseStatus::success(),
        );
        case.set_classname("probelint");
        suite.add_test_case(case);
    }

    let mut junit = quick_junit::Report::new("probelint");
    junit.add_test_suite(suite);
    junit.serialize(&mut *out).map_err(io::Error::other)
}

fn object_case(file: &str, object: &ObjectRef, findings: &[&LocatedFinding]) -> TestCase {
    let (failing, passing): (Vec<&LocatedFinding>, Vec<&LocatedFinding>) = findings
        .iter()
        .partition(|f| !f.finding.is_suppressed() && f.finding.severity >= Severity::Warning);

    let status = match failing.as_slice() {
        [] => TestCaseStatus::success(),
        [only] => failure(&only.finding.message, &only.finding.rule, &failing),
        [first, ..] => {
            let mut rules: Vec<&str> = failing.iter().map(|f| &*f.finding.rule).collect();
            rules.sort_unstable();
            rules.dedup();
            let more = plural(failing.len() - 1, "more problem", "more problems");
            failure(
                &format!("{} (and {more})", first.finding.message),
                &rules.join(","),
                &failing,
            )
        }
    };
    let mut case = TestCase::new(object.to_string(), status);
    case.set_classname(display_path(file));
    if !passing.is_empty() {
        case.set_system_out(describe(&passing));
    }
    case
}

fn failure(message: &str, ty: &str, findings: &[&LocatedFinding]) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
    status
        .set_message(message)
        .set_type(ty)
        .set_description(describe(findings));
    status
}

/// One paragraph per finding:
/// `deploy/vllm.yaml:24:11: error[rule]: message` / `  help: ...` / `  suppressed (...): ...`.
fn describe(findings: &[&LocatedFinding]) -> String {
    let mut text = String::new();
    for located in findings {
        let f = &located.finding;
        let _ = writeln!(
            text,
            "{}:{}:{}: {}[{}]: {}",
            display_path(&located.file),
            located.line,
            located.column,
            f.severity,
            f.rule,
            f.message
        );
        if let Some(container) = &f.container {
            let _ = writeln!(text, "  container: {container}");
        }
        if !f.help.is_empty() {
            let _ = writeln!(text, "  help: {}", f.help);
        }
        if let Some(suppression) = &f.suppressed {
            let (source, reason) = suppression_parts(suppression);
            let _ = writeln!(text, "  suppressed ({source}): {reason}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use crate::output::Format;
    use crate::output::sample::*;

    #[test]
    fn junit() {
        insta::assert_snapshot!(rendered(Format::Junit, &sample(), plain()));
    }

    #[test]
    fn junit_stays_well_formed_with_hostile_text() {
        let mut report = sample();
        report.findings[0].finding.message = "<b>&\"'\x1b[31m\x00]]>".to_owned();
        report.errors[0].file = "a<&>.yaml".to_owned();
        let xml = rendered(Format::Junit, &report, plain());
        let parsed =
            quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
        assert_eq!(parsed.test_suites[0].test_cases.len(), 5);
    }

    #[test]
    fn junit_has_a_case_per_object_and_per_input_error() {
        let xml = rendered(Format::Junit, &sample(), plain());
        assert!(xml.starts_with("<?xml"), "{xml}");
        let parsed =
            quick_junit::Report::deserialize_from_str(&xml).expect("well-formed JUnit XML");
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
            Some(
                "GPU container `vllm` has a livenessProbe but no startupProbe (and 1 more problem)"
            )
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
}
