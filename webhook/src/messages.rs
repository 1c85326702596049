//! What kubectl shows and the audit log keeps: the denial message, one short warning per
//! finding or fix, and the findings as an audit annotation.

use probelint_policies::AppliedFix;
use probelint_policies::{Finding, ObjectRef, Severity, Suppression};
use serde::Serialize;
use std::collections::BTreeMap;

/// Key of the audit annotation that lists the findings. The apiserver prefixes every key with
/// the webhook's name and a `/` (e.g. `validate.probelint.io/findings`) and drops keys that then
/// hold two slashes, so this key must not contain one.
pub const FINDINGS_AUDIT_KEY: &str = "findings";

/// Kubernetes asks admission warnings to stay under 120 characters: kubectl prints each on one
/// line after `Warning: `.
pub const MAX_WARNING_CHARS: usize = 119;

/// Findings a denial message spells out, and warnings a review carries: past them a person
/// reading kubectl's output learns nothing more (a workload with thousands of containers has
/// the same few rules broken in each), and writing them all cost more memory than the object
/// itself. The rest is counted in one line; the audit annotation keeps every finding.
pub const MAX_LISTED: usize = 50;

/// `warnings` cut to [`MAX_LISTED`], the rest counted in a last one.
pub fn at_most_listed(mut warnings: Vec<String>) -> Vec<String> {
    if warnings.len() > MAX_LISTED {
        let more = warnings.len() - (MAX_LISTED - 1);
        warnings.truncate(MAX_LISTED - 1);
        warnings.push(format!(
            "and {more} more like these (every finding is in the audit annotation {FINDINGS_AUDIT_KEY:?})"
        ));
    }
    warnings
}

/// `auditAnnotations`: the findings as compact JSON (suppressed ones included, with who
/// suppressed them and why), for the cluster's audit log.
pub fn audit_annotations(findings: &[Finding]) -> BTreeMap<String, String> {
    #[derive(Serialize)]
    struct AuditFinding<'a> {
        rule: &'a str,
        severity: Severity,
        #[serde(skip_serializing_if = "Option::is_none")]
        container: Option<&'a str>,
        pointer: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        suppressed: Option<&'a Suppression>,
    }
    let mut map = BTreeMap::new();
    if findings.is_empty() {
        return map;
    }
    let list: Vec<AuditFinding<'_>> = findings
        .iter()
        .map(|f| AuditFinding {
            rule: &f.rule,
            severity: f.severity,
            container: f.container.as_deref(),
            pointer: &f.pointer,
            suppressed: f.suppressed.as_ref(),
        })
        .collect();
    if let Ok(json) = serde_json::to_string(&list) {
        map.insert(FINDINGS_AUDIT_KEY.to_owned(), json);
    }
    map
}

/// The denial text, fit for kubectl: which object, then each violated rule with its container,
/// what is wrong and how to fix it.
pub fn denial_message(
    object: &ObjectRef,
    errors: &[&Finding],
    annotation_exemptions: bool,
) -> String {
    let count = match errors.len() {
        1 => "1 error".to_owned(),
        n => format!("{n} errors"),
    };
    let mut text = format!("probelint found {count} in {object}:");
    for f in errors.iter().take(MAX_LISTED) {
        // Built-in messages already start with `container "name"`; custom rules' may not.
        let container = f
            .container
            .as_deref()
            .filter(|c| !f.message.contains(&format!("container {c:?}")))
            .map(|c| format!(" (container {c:?})"))
            .unwrap_or_default();
        text.push_str(&format!(
            "\n- {}{container}: {}\n  fix: {}",
            f.rule, f.message, f.help
        ));
    }
    if errors.len() > MAX_LISTED {
        text.push_str(&format!(
            "\n- and {} more errors (every finding is in the audit annotation {FINDINGS_AUDIT_KEY:?}; \
             `probelint check` on the manifest lists them)",
            errors.len() - MAX_LISTED
        ));
    }
    if annotation_exemptions {
        text.push_str(
            "\nTo exempt this object from a rule, annotate it with probelint.io/ignore: \"<rule>\" \
             and probelint.io/ignore-reason: \"<why>\".",
        );
    }
    text
}

/// One warning per finding, on one short line: severity, rule and the finding's message when it
/// fits; otherwise the rule's one-line summary (a whole sentence beats a cut one) and the
/// container. The full text is in the denial message and the audit annotation.
pub fn finding_warning(f: &Finding) -> String {
    let fits = |w: &String| w.chars().count() <= MAX_WARNING_CHARS && !w.contains(['\n', '\r']);
    let full = format!("{} {}: {}", f.severity, f.rule, f.message);
    if fits(&full) {
        return full;
    }
    let Some(rule) = probelint_policies::find(&f.rule) else {
        return shorten(&full);
    };
    let container = f
        .container
        .as_deref()
        .map(|c| format!(" in {c}"))
        .unwrap_or_default();
    let summary = rule.meta().summary;
    let with_summary = |summary: &str| format!("{} {}{container}: {summary}", f.severity, f.rule);
    let long = with_summary(summary);
    if fits(&long) {
        return long;
    }
    // Summaries may end in a parenthesised detail, the first thing to go.
    match summary.rsplit_once(" (") {
        Some((head, _)) if summary.ends_with(')') && fits(&with_summary(head)) => {
            with_summary(head)
        }
        _ => shorten(&long),
    }
}

/// One warning per distinct change, so that whoever applied the object learns it was changed:
/// `probelint fixed gpu-startup-probe-missing, liveness-restart-loop in vllm: add a startupProbe…`
/// (one operation often fixes several rules).
pub fn fix_warnings(applied: &[AppliedFix]) -> Vec<String> {
    let mut groups: Vec<(Option<&str>, &str, Vec<&str>)> = Vec::new();
    // Index of each (container, description) in `groups`, which keeps the first-seen order.
    let mut index: std::collections::HashMap<(Option<&str>, &str), usize> = Default::default();
    for fix in applied {
        let (container, description) = (fix.container.as_deref(), fix.description.as_str());
        match index.get(&(container, description)) {
            Some(&i) => groups[i].2.push(&fix.rule),
            None => {
                index.insert((container, description), groups.len());
                groups.push((container, description, vec![&fix.rule]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(container, description, rules)| {
            let container = container.map(|c| format!(" in {c}")).unwrap_or_default();
            shorten(&format!(
                "probelint fixed {}{container}: {description}",
                rules.join(", ")
            ))
        })
        .collect()
}

/// One line of at most [`MAX_WARNING_CHARS`] characters, cut at a word where possible.
pub fn shorten(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    if text.chars().count() <= MAX_WARNING_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_WARNING_CHARS - 1).collect();
    let cut = match cut.rfind(' ') {
        Some(space) if space > cut.len() / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([' ', ',', ':', ';', '(']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(rule: &str, container: Option<&str>) -> AppliedFix {
        AppliedFix {
            rule: rule.into(),
            container: container.map(Into::into),
            description: "added a startupProbe".into(),
        }
    }

    #[test]
    fn fix_warnings_group_rules_fixed_by_one_change() {
        let fixes = [
            applied("gpu-startup-probe-missing", Some("vllm")),
            applied("liveness-restart-loop", Some("vllm")),
            applied("gpu-startup-probe-missing", Some("sidecar")),
        ];
        assert_eq!(
            fix_warnings(&fixes),
            [
                "probelint fixed gpu-startup-probe-missing, liveness-restart-loop in vllm: added a startupProbe",
                "probelint fixed gpu-startup-probe-missing in sidecar: added a startupProbe",
            ]
        );
    }

    #[test]
    fn shorten_cuts_at_a_word_and_stays_on_one_line() {
        let long = format!("error rule-x: {}", "word ".repeat(40));
        let short = shorten(&long);
        assert!(short.chars().count() <= MAX_WARNING_CHARS);
        assert!(short.ends_with("word…"), "{short}");
        assert_eq!(shorten("a\nb"), "a b");
        let unicode = "é".repeat(300);
        assert_eq!(shorten(&unicode).chars().count(), MAX_WARNING_CHARS);
    }
}
