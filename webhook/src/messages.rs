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

/// The warnings of one finding: first what is wrong, in which container
/// (`error gpu-readiness-probe-missing in vllm: has no readinessProbe`), then what to change
/// (`  fix in vllm: add a readinessProbe: httpGet /health on the server's port (…)`), each line
/// within [`MAX_WARNING_CHARS`]. The change is never cut: one that does not fit goes on in
/// lines of its own (`  fix in vllm: …`). Each line names the container because the apiserver
/// drops a warning that repeats one already sent for the request (`filters/warning.go`,
/// `AddWarning`): two containers' identical changes must stay two lines. The denial message
/// and the audit annotation keep the full texts.
pub fn finding_warnings(f: &Finding) -> Vec<String> {
    let container = f.container.as_deref();
    let mut lines = vec![what_is_wrong(f, container)];
    if !f.help.trim().is_empty() {
        let head = match container {
            Some(c) => format!("  fix in {c}: "),
            None => "  fix: ".to_owned(),
        };
        lines.extend(continued(&head, &head, &f.help));
    }
    lines
}

/// The first line of a finding's warnings: severity, rule, container, then the message without
/// the `container "name" (why it is a GPU container)` it starts with when it fits; else its
/// part before the first `: ` (the fault, without its consequence); else the rule's summary.
fn what_is_wrong(f: &Finding, container: Option<&str>) -> String {
    let fits = |w: &String| w.chars().count() <= MAX_WARNING_CHARS && !w.contains(['\n', '\r']);
    let head = match container {
        Some(c) => format!("{} {} in {c}: ", f.severity, f.rule),
        None => format!("{} {}: ", f.severity, f.rule),
    };
    let message = container
        .map_or(f.message.as_str(), |c| without_container(&f.message, c))
        .trim();
    let full = format!("{head}{message}");
    if fits(&full) {
        return full;
    }
    if let Some((fault, _)) = message.split_once(": ") {
        let line = format!("{head}{fault}");
        if fits(&line) {
            return line;
        }
    }
    let Some(rule) = probelint_policies::find(&f.rule) else {
        return shorten(&full);
    };
    let summary = rule.meta().summary;
    let long = format!("{head}{summary}");
    if fits(&long) {
        return long;
    }
    // Summaries may end in a parenthesised detail, the first thing to go.
    match summary.rsplit_once(" (") {
        Some((first, _)) if summary.ends_with(')') && fits(&format!("{head}{first}")) => {
            format!("{head}{first}")
        }
        _ => shorten(&long),
    }
}

/// `message` without its leading `container "name"` and the parenthesis after it, which the
/// warning's head already says: `container "vllm" (requests nvidia.com/gpu) has no …` is
/// `has no …`. A message that does not start so (a custom rule's) is kept whole.
fn without_container<'m>(message: &'m str, container: &str) -> &'m str {
    let Some(rest) = message.strip_prefix(&format!("container {container:?}")) else {
        return message;
    };
    let rest = rest.trim_start_matches([':', ' ']);
    let Some(inner) = rest.strip_prefix('(') else {
        return rest;
    };
    let mut depth = 1;
    for (i, c) in inner.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return inner[i + 1..].trim_start_matches([':', ' ']);
                }
            }
            _ => {}
        }
    }
    rest
}

/// `first` then `text`, in as few lines of at most [`MAX_WARNING_CHARS`] as it needs, cut at
/// words and balanced (no last line of one word); each further line starts with `further` and
/// `…`. A word longer than a line is cut.
fn continued(first: &str, further: &str, text: &str) -> Vec<String> {
    let text = text.replace(['\n', '\r'], " ");
    // A container name is at most 63 characters in a core pod spec, but a custom resource's
    // may be anything: a continuation must leave room for the text.
    let further = if further.chars().count() > MAX_WARNING_CHARS / 2 {
        "  "
    } else {
        further
    };
    // The narrowest width that needs no more lines, found from the widest down on line counts
    // alone: only the chosen width's lines are built.
    let mut fewest = wrapped(first, further, &text, MAX_WARNING_CHARS, None);
    let mut best = MAX_WARNING_CHARS;
    for width in (MAX_WARNING_CHARS / 2..MAX_WARNING_CHARS).rev() {
        let lines = wrapped(first, further, &text, width, None);
        if lines > fewest {
            break;
        }
        (fewest, best) = (lines, width);
    }
    let mut lines = Vec::with_capacity(fewest);
    wrapped(first, further, &text, best, Some(&mut lines));
    lines
}

/// [`continued`] at lines of at most `width` characters, filled word by word: how many lines
/// it takes, and the lines themselves into `out` when given. Lengths are counted in
/// characters as the lines grow, so counting alone builds nothing.
fn wrapped(
    first: &str,
    further: &str,
    text: &str,
    width: usize,
    mut out: Option<&mut Vec<String>>,
) -> usize {
    // A continuation line starts with `further` and `…`.
    let continuation = further.chars().count() + 1;
    let mut count = 0;
    let mut line = String::new();
    if out.is_some() {
        line.push_str(first);
    }
    let mut chars = first.chars().count();
    let mut empty = true;
    for word in text.split_whitespace() {
        let word_chars = word.chars().count();
        if !empty && chars + 1 + word_chars > width {
            count += 1;
            if let Some(out) = out.as_deref_mut() {
                out.push(std::mem::replace(&mut line, format!("{further}…")));
            }
            chars = continuation;
            empty = true;
        }
        if out.is_some() {
            if !empty {
                line.push(' ');
            }
            line.push_str(word);
        }
        chars += usize::from(!empty) + word_chars;
        empty = false;
        while chars > MAX_WARNING_CHARS {
            // One word longer than a line: cut it, the rest on the next.
            count += 1;
            if let Some(out) = out.as_deref_mut() {
                let cut = line
                    .char_indices()
                    .nth(MAX_WARNING_CHARS)
                    .map_or(line.len(), |(at, _)| at);
                let rest = line.split_off(cut);
                out.push(std::mem::replace(&mut line, format!("{further}…{rest}")));
            }
            chars = continuation + (chars - MAX_WARNING_CHARS);
        }
    }
    if !empty || count == 0 {
        count += 1;
        if let Some(out) = out {
            out.push(line);
        }
    }
    count
}

/// The warnings of each finding ([`finding_warnings`]), for at most [`MAX_LISTED`] findings,
/// the rest counted in a last line.
pub fn findings_warnings<'f>(findings: impl ExactSizeIterator<Item = &'f Finding>) -> Vec<String> {
    let total = findings.len();
    let shown = if total > MAX_LISTED {
        MAX_LISTED - 1
    } else {
        total
    };
    let mut warnings: Vec<String> = findings.take(shown).flat_map(finding_warnings).collect();
    if total > shown {
        warnings.push(format!(
            "and {} more findings like these (every finding is in the audit annotation {FINDINGS_AUDIT_KEY:?})",
            total - shown
        ));
    }
    warnings
}

/// One warning per distinct change, so that whoever applied the object learns it was changed:
/// `probelint fixed gpu-startup-probe-missing, liveness-restart-loop in vllm: add a startupProbe…`
/// (one operation often fixes several rules). A change that does not fit goes on in lines of
/// its own (`  fixed in vllm: …`), never cut.
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
        .flat_map(|(container, description, rules)| {
            let within = container.map(|c| format!(" in {c}")).unwrap_or_default();
            continued(
                &format!("probelint fixed {}{within}: ", rules.join(", ")),
                &format!("  fixed{within}: "),
                description,
            )
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

    /// Line counts decide the width without building lines: the count must be the number of
    /// lines built at every width, for short and long words, heads and continuations (a word
    /// longer than a line, a head longer than half of one), and the lines must hold the text.
    #[test]
    fn counted_lines_are_the_lines_built() {
        let long_word = "x".repeat(300);
        let long_head = format!("  fix in {}: ", "c".repeat(90));
        let texts = [
            String::new(),
            "one".to_owned(),
            "add a startupProbe on the server's health check with a budget beyond the slowest \
             plausible load: it holds liveness and readiness off until the model is loaded"
                .repeat(3),
            format!("before {long_word} after é ü {long_word}"),
        ];
        for text in &texts {
            for (first, further) in [("  fix: ", "  fix: "), (long_head.as_str(), "  ")] {
                for width in MAX_WARNING_CHARS / 2..=MAX_WARNING_CHARS {
                    let mut lines = Vec::new();
                    let counted = wrapped(first, further, text, width, None);
                    assert_eq!(
                        wrapped(first, further, text, width, Some(&mut lines)),
                        counted
                    );
                    assert_eq!(lines.len(), counted, "{first:?} {text:?} at {width}");
                    assert!(lines.iter().all(|l| l.chars().count() <= MAX_WARNING_CHARS));
                    let words: String = lines
                        .concat()
                        .replace(['…', ' '], "")
                        .replacen(&first.replace(' ', ""), "", 1)
                        .replace(&further.replace(' ', ""), "");
                    assert_eq!(words, text.replace(' ', ""), "{first:?} at {width}");
                }
            }
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

    fn finding(container: Option<&str>, message: &str, help: &str) -> Finding {
        Finding {
            rule: "gpu-readiness-probe-missing".into(),
            severity: Severity::Error,
            message: message.into(),
            help: help.to_owned().into(),
            object: ObjectRef {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: Some("p".into()),
            }
            .into(),
            object_index: 0,
            container: container.map(Into::into),
            pointer: "/spec/containers/0".into(),
            suppressed: None,
            fix: None,
            load: None,
            evidence: None,
        }
    }

    fn within_limit(lines: &[String]) {
        for line in lines {
            assert!(line.chars().count() <= MAX_WARNING_CHARS, "{line:?}");
            assert!(!line.contains(['\n', '\r']), "{line:?}");
        }
    }

    #[test]
    fn a_findings_warnings_say_what_is_wrong_in_which_container_then_the_whole_change() {
        let help = "add a readinessProbe: httpGet /v2/health/ready on the server's port (Triton \
                    serves it on 8000 by default), with periodSeconds 5 and failureThreshold 3, so \
                    that the pod leaves the Service's endpoints while the model reloads";
        let lines = finding_warnings(&finding(
            Some("triton"),
            "container \"triton\" (requests nvidia.com/gpu) has no readinessProbe: it receives \
             traffic before its model is loaded",
            help,
        ));
        within_limit(&lines);
        assert_eq!(
            lines[0],
            "error gpu-readiness-probe-missing in triton: has no readinessProbe: it receives \
             traffic before its model is loaded"
        );
        assert!(
            lines[1].starts_with("  fix in triton: add a readinessProbe"),
            "{lines:#?}"
        );
        assert!(lines.len() > 2, "{lines:#?}");
        assert!(lines[2].starts_with("  fix in triton: …"), "{lines:#?}");
        // Nothing of the change is cut: its words, in order, are the lines' words.
        let words: Vec<String> = lines[1..]
            .iter()
            .flat_map(|l| {
                l.trim_start_matches("  fix in triton: ")
                    .trim_start_matches('…')
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            words.join(" "),
            help.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }

    #[test]
    fn a_message_too_long_for_a_line_keeps_its_fault_and_drops_its_consequence() {
        let lines = finding_warnings(&finding(
            Some("probelint-smoke-test"),
            "container \"probelint-smoke-test\" (requests nvidia.com/gpu) has no readinessProbe: \
             it receives traffic before its model is loaded",
            "add a readinessProbe",
        ));
        assert_eq!(
            lines,
            [
                "error gpu-readiness-probe-missing in probelint-smoke-test: has no readinessProbe",
                "  fix in probelint-smoke-test: add a readinessProbe",
            ]
        );
        // A custom rule's message, which does not start with the container, is kept whole.
        let custom = finding_warnings(&finding(Some("vllm"), "no GPU memory limit", "set one"));
        assert_eq!(
            custom[0],
            "error gpu-readiness-probe-missing in vllm: no GPU memory limit"
        );
        assert_eq!(custom[1], "  fix in vllm: set one");
    }

    #[test]
    fn two_containers_with_the_same_change_get_lines_of_their_own() {
        // The apiserver drops a warning identical to one it already sent for the request.
        let help = "add lifecycle.preStop (e.g. sleep 10 s while endpoints update) and raise \
                    terminationGracePeriodSeconds to cover your longest generation";
        let mut lines = findings_warnings(
            [
                finding(
                    Some("leader"),
                    "container \"leader\" has no preStop hook",
                    help,
                ),
                finding(
                    Some("worker"),
                    "container \"worker\" has no preStop hook",
                    help,
                ),
            ]
            .iter(),
        );
        within_limit(&lines);
        let count = lines.len();
        lines.sort();
        lines.dedup();
        assert_eq!(lines.len(), count, "{lines:#?}");
    }

    #[test]
    fn warnings_end_even_for_names_and_words_longer_than_a_line() {
        let name = "c".repeat(300);
        let word = "w".repeat(500);
        let lines = finding_warnings(&finding(Some(&name), &word, &format!("do {word} now")));
        within_limit(&lines);
        assert!(lines.len() < 12, "{lines:#?}");
        let fixes = fix_warnings(&[AppliedFix {
            rule: "gpu-startup-probe-missing".into(),
            container: Some(name.clone()),
            description: word.clone(),
        }]);
        within_limit(&fixes);
    }

    #[test]
    fn a_fix_too_long_for_a_line_goes_on_in_lines_of_its_own() {
        let fixes = fix_warnings(&[AppliedFix {
            rule: "gpu-startup-probe-missing".into(),
            container: Some("probelint-smoke-test".into()),
            description: "add a startupProbe on vLLM's /health with failureThreshold 120 and \
                          periodSeconds 10 (1,200 s: the startup floor, above the estimated load)"
                .into(),
        }]);
        within_limit(&fixes);
        assert!(
            fixes[0].starts_with(
                "probelint fixed gpu-startup-probe-missing in probelint-smoke-test: add"
            ),
            "{fixes:#?}"
        );
        assert!(
            fixes[1].starts_with("  fixed in probelint-smoke-test: …"),
            "{fixes:#?}"
        );
        assert!(
            fixes
                .last()
                .is_some_and(|l| l.ends_with("above the estimated load)")),
            "{fixes:#?}"
        );
    }

    #[test]
    fn past_the_listed_findings_the_rest_are_counted() {
        let many: Vec<Finding> = (0..MAX_LISTED + 5)
            .map(|i| finding(Some(&format!("c{i}")), "container has a problem", "fix it"))
            .collect();
        let lines = findings_warnings(many.iter());
        assert_eq!(lines.len(), (MAX_LISTED - 1) * 2 + 1);
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                "and 6 more findings like these (every finding is in the audit annotation \"findings\")"
            )
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
