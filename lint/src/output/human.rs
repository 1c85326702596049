//! Rustc-style diagnostics for people (after ruff and clippy).
//!
//! Each active finding gets a titled snippet: the offending line with its number, the node
//! underlined and labelled with the object and container (a file often holds several
//! objects), then the rule's help. Suppressed findings follow in three lines each, so every
//! exemption stays visible in every run without burying the problems that still count.
//! Input errors come last, right above the summary, where the eye lands.

use std::io::{self, Write};

use annotate_snippets::renderer::Style;
use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};
use anstyle::{AnsiColor, Effects};
use probelint_policies::{Applicability, Finding, Severity};
use rayon::prelude::*;

use super::shape::{self, WIDTH};
use super::{Options, display_path, failed_files, plural, sanitize, suppression_parts};
use crate::report::Stage;
use crate::report::{LocatedFinding, Report, SourceLines};

const ERROR: Style = AnsiColor::BrightRed.on_default().effects(Effects::BOLD);
const DIM: Style = Style::new().effects(Effects::DIMMED);
const BOLD: Style = Style::new().effects(Effects::BOLD);

pub(super) fn render(report: &Report, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let paint = Paint(options.color);
    let renderer = if options.color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    // Rendering a snippet costs far more than writing it: render in parallel, write in order.
    let active: Vec<&LocatedFinding> = report
        .findings
        .iter()
        .filter(|f| !f.finding.is_suppressed())
        .collect();
    // Chunks bound the memory held by rendered text that is not yet written.
    let lines = report.source_lines();
    for chunk in active.chunks(2048) {
        let rendered: Vec<String> = chunk
            .par_iter()
            .with_min_len(64)
            .map(|located| renderer.render(&[finding_group(&lines, located)]))
            .collect();
        for text in rendered {
            writeln!(out, "{text}\n")?;
        }
    }
    // Suppressed findings are context, not problems: rendered plain, then dimmed whole (the
    // renderer's own styles cannot dim everything: it treats its "none" style as unstyled).
    for located in report.findings.iter().filter(|f| f.finding.is_suppressed()) {
        let text = Renderer::plain().render(&[suppressed_group(located)]);
        for line in text.lines() {
            writeln!(out, "{}", paint.apply(DIM, line))?;
        }
        writeln!(out)?;
    }

    if options.verbose && !report.skipped.is_empty() {
        for skipped in &report.skipped {
            writeln!(
                out,
                "{}: {}: {}",
                paint.apply(DIM, "skipped"),
                sanitize(display_path(&skipped.file)),
                sanitize(&skipped.reason)
            )?;
        }
        writeln!(out)?;
    }

    if !report.errors.is_empty() {
        for error in &report.errors {
            let place = match (error.line, error.column) {
                (Some(line), Some(column)) => format!(":{line}:{column}"),
                (Some(line), None) => format!(":{line}"),
                _ => String::new(),
            };
            writeln!(
                out,
                "{}: {}{place}: {}",
                paint.apply(ERROR, "error"),
                sanitize(display_path(&error.file)),
                sanitize(&error.message)
            )?;
        }
        writeln!(out)?;
    }

    writeln!(
        out,
        "{}",
        paint.apply(BOLD, &wrap_summary(&summary_line(report, options)))
    )?;
    if let Some(line) = fixable_line(report) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// `error[rule]: headline`, the snippet (or just the location when the source is not at
/// hand), then the message's evidence and arithmetic as `= note:` lines, what serves a model,
/// `= help:`, the fix when it says more than the help (else the help says how it is applied),
/// and the sources in one `= source:` line (see [`shape`]).
fn finding_group<'a>(lines: &SourceLines<'a>, located: &'a LocatedFinding) -> Group<'a> {
    let finding = &located.finding;
    // The title line is `severity[rule]: headline`: the headline gets what the width leaves.
    let prefix = format!("{}[{}]: ", level_name(finding.severity), finding.rule)
        .chars()
        .count();
    let budget = WIDTH.saturating_sub(prefix).max(shape::MIN_HEADLINE);
    let shaped = shape::message(&sanitize(&finding.message), budget);
    let mut sources = shaped.sources;
    let title = level(finding.severity)
        .primary_title(shaped.headline)
        .id(sanitize(&finding.rule));
    let path = sanitize(display_path(&located.file));
    let context = context_label(finding);

    let mut group = match lines.line(&located.file, located.line) {
        Some(line) => {
            let line = sanitize(line);
            let span = underline(&line, located.column);
            title.element(
                Snippet::source(line)
                    .line_start(located.line)
                    .path(path)
                    .annotation(AnnotationKind::Primary.span(span).label(context)),
            )
        }
        None => title
            .element(
                Origin::path(path)
                    .line(located.line)
                    .char_column(located.column),
            )
            .element(Level::NOTE.message(text(&format!("in {context}")))),
    };
    for note in &shaped.notes {
        group = group.element(Level::NOTE.message(text(note)));
    }
    if let Some(evidence) = &finding.evidence {
        group = group.element(
            Level::NOTE
                .with_name("serves a model")
                .message(text(&sanitize(evidence))),
        );
    }
    let help = shape::help(&sanitize(&finding.help), &mut sources);
    let fix = finding.fix.as_ref().map(|fix| {
        let how = match fix.applicability {
            Applicability::Safe => "`--fix` applies it",
            Applicability::Unsafe => "`--fix --unsafe-fixes` applies it",
            Applicability::DisplayOnly => "not applied automatically",
        };
        (shape::help(&sanitize(&fix.description), &mut sources), how)
    });
    match fix {
        Some((description, how)) if help.is_empty() || shape::same_advice(&help, &description) => {
            // One piece of advice: the longer wording, and how it is applied.
            let advice = if description.len() > help.len() {
                description
            } else {
                help
            };
            group = group.element(Level::HELP.message(text(&format!("{advice} ({how})"))));
        }
        fix => {
            if !help.is_empty() {
                group = group.element(Level::HELP.message(text(&help)));
            }
            if let Some((description, how)) = fix {
                group = group.element(
                    Level::NOTE
                        .with_name("fix")
                        .message(text(&format!("{description} ({how})"))),
                );
            }
        }
    }
    if !sources.is_empty() {
        group = group.element(
            Level::NOTE
                .with_name("source")
                .message(text(&sources.join("; "))),
        );
    }
    group
}

/// A note's text wrapped so that its lines, after the renderer's `   = note: ` and a gutter of
/// up to five digits, fit [`WIDTH`].
fn text(message: &str) -> String {
    shape::wrap(message, WIDTH - 24)
}

/// `suppressed[rule]: message`, where, and who exempted it and why.
fn suppressed_group(located: &LocatedFinding) -> Group<'_> {
    let finding = &located.finding;
    let title = Level::NOTE
        .with_name("suppressed")
        .primary_title(sanitize(&finding.message))
        .id(sanitize(&finding.rule));
    let origin = Origin::path(sanitize(display_path(&located.file)))
        .line(located.line)
        .char_column(located.column);
    let mut group = title.element(origin);
    if let Some(suppression) = &finding.suppressed {
        let (source, reason) = suppression_parts(suppression);
        group = group.element(
            Level::NOTE
                .with_name(format!("suppressed ({source})"))
                .message(sanitize(reason).into_owned()),
        );
    }
    group
}

fn level_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

fn level(severity: Severity) -> Level<'static> {
    match severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
        Severity::Info => Level::INFO,
    }
}

/// `Deployment ml/vllm, container `vllm``: which object a line belongs to, since one file
/// often holds many.
fn context_label(finding: &Finding) -> String {
    let object = sanitize(&finding.object.to_string()).into_owned();
    match &finding.container {
        Some(container) => format!("{object}, container `{}`", sanitize(container)),
        None => object,
    }
}

/// The byte range to underline: the token that starts at the 1-based character `column`: a
/// key without its `:`, a plain scalar without the flow punctuation after it, a quoted scalar
/// through its closing quote, the `{` or `[` that opens a flow collection, a `-`. A column
/// past the end of the line (a missing node "belongs" there) gives an empty range at the end,
/// which the renderer shows as one caret.
fn underline(line: &str, column: usize) -> std::ops::Range<usize> {
    let start = line
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(line.len(), |(byte, _)| byte);
    let rest = &line[start..];
    let len = match rest.chars().next() {
        None => 0,
        Some(open @ ('{' | '[')) => open.len_utf8(),
        Some(quote @ ('"' | '\'')) => closing_quote(rest, quote).unwrap_or(rest.len()),
        Some(_) => {
            let token = rest
                .find(char::is_whitespace)
                .map_or(rest, |end| &rest[..end]);
            let token = token.trim_end_matches([',', ']', '}']);
            let token = match token.strip_suffix(':') {
                Some(key) if !key.is_empty() => key,
                _ => token,
            };
            if token.is_empty() {
                rest.chars().next().map_or(0, char::len_utf8)
            } else {
                token.len()
            }
        }
    };
    start..start + len
}

/// The byte length of a quoted scalar at the start of `text`, quotes included, if it closes
/// on this line. Inside `"..."` a backslash escapes the next character; inside `'...'` a
/// doubled quote is a literal quote.
fn closing_quote(text: &str, quote: char) -> Option<usize> {
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if quote == '"' && c == '\\' {
            chars.next();
        } else if c == quote {
            if quote == '\'' && chars.peek().is_some_and(|&(_, next)| next == '\'') {
                chars.next();
            } else {
                return Some(i + c.len_utf8());
            }
        }
    }
    None
}

/// `Found 3 errors, 1 warning and 2 info (1 suppressed) in 5 objects across 4 files; 1 file
/// could not be read`. Zero counts are left out so that the line says what matters; with no
/// objects at all it says so, since "no problems" would then mean nothing was checked. Worded
/// by outcome: a run with files that could not be read and nothing found begins with them
/// (`8 of 9 files could not be read; no problems found in the 1 object read`), never with
/// "No problems found".
pub(super) fn summary_line(report: &Report, options: &Options) -> String {
    let summary = report.summary();
    let scope = format!(
        "in {} across {}",
        plural(report.objects, "object", "objects"),
        plural(report.files, "file", "files")
    );
    // The suppressed count follows the problem counts it qualifies ("Found 2 errors
    // (1 suppressed) in ..."); on a clean run it closes the sentence instead.
    let suppressed = match summary.suppressed {
        0 => String::new(),
        n => format!(" ({n} suppressed)"),
    };
    let mut counts = Vec::new();
    if summary.errors > 0 {
        counts.push(plural(summary.errors, "error", "errors"));
    }
    if summary.warnings > 0 {
        counts.push(plural(summary.warnings, "warning", "warnings"));
    }
    if summary.infos > 0 {
        counts.push(format!("{} info", summary.infos));
    }
    let counts = match counts.split_last() {
        None => None,
        Some((last, [])) => Some(last.clone()),
        Some((last, rest)) => Some(format!("{} and {last}", rest.join(", "))),
    };
    let unreadable = failed_files(report, Stage::Read);
    let unreadable_part = || {
        let files = if unreadable >= report.files {
            plural(unreadable, "file", "files")
        } else {
            format!("{unreadable} of {}", plural(report.files, "file", "files"))
        };
        format!("{files} could not be read")
    };
    let mut line = match counts {
        Some(counts) => {
            let mut line = format!("Found {counts}{suppressed} {scope}");
            if unreadable > 0 {
                line.push_str(&format!(
                    "; {} could not be read",
                    plural(unreadable, "file", "files")
                ));
            }
            line
        }
        None if unreadable > 0 => {
            let mut line = unreadable_part();
            if report.objects > 0 {
                line.push_str(&format!(
                    "; no problems found in the {} read{suppressed}",
                    plural(report.objects, "object", "objects")
                ));
            } else if unreadable < report.files {
                line.push_str("; no Kubernetes objects found in the others");
            }
            line
        }
        None if report.objects == 0 => format!(
            "No Kubernetes objects found in {}",
            plural(report.files, "file", "files")
        ),
        None => format!("No problems found {scope}{suppressed}"),
    };
    let unfixed = failed_files(report, Stage::Fix);
    if unfixed > 0 {
        line.push_str(&format!(
            "; {} could not be fixed",
            plural(unfixed, "file", "files")
        ));
    }
    if !report.skipped.is_empty() {
        line.push_str(&format!("; {} skipped", report.skipped.len()));
        if !options.verbose {
            line.push_str(" (--verbose lists them)");
        }
    }
    line
}

/// The summary on lines of at most [`WIDTH`] characters, broken after its `; `, continuation
/// lines indented.
fn wrap_summary(line: &str) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_owned();
    }
    let mut out = String::new();
    let mut current = String::new();
    for part in line.split_inclusive("; ") {
        if !current.is_empty() && current.chars().count() + part.chars().count() > WIDTH {
            out.push_str(current.trim_end());
            out.push('\n');
            current = "  ".to_owned();
        }
        current.push_str(part);
    }
    out.push_str(&current);
    out
}

/// `2 fixable with --fix (1 more with --fix --unsafe-fixes)`, when any are.
fn fixable_line(report: &Report) -> Option<String> {
    let (mut safe, mut unsafe_) = (0, 0);
    for located in report
        .findings
        .iter()
        .filter(|f| !f.finding.is_suppressed())
    {
        match located.finding.fix.as_ref().map(|fix| fix.applicability) {
            Some(Applicability::Safe) => safe += 1,
            Some(Applicability::Unsafe) => unsafe_ += 1,
            _ => {}
        }
    }
    match (safe, unsafe_) {
        (0, 0) => None,
        (safe, 0) => Some(format!("{safe} fixable with `--fix`")),
        (0, unsafe_) => Some(format!("{unsafe_} fixable with `--fix --unsafe-fixes`")),
        (safe, unsafe_) => Some(format!(
            "{safe} fixable with `--fix` ({unsafe_} more with `--fix --unsafe-fixes`)"
        )),
    }
}

/// Styles text only when colour is on.
#[derive(Clone, Copy)]
struct Paint(bool);

impl Paint {
    fn apply(self, style: Style, text: &str) -> String {
        if self.0 {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::underline;
    use crate::output::sample::*;
    use crate::output::{Format, Options};
    use crate::report::{Report, Stage};
    use probelint_policies::Severity;

    use std::sync::Arc;

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
        report.findings[0].finding.container = Some(format!("c{evil}").into());
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
        use super::summary_line;
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

        // Worded by outcome: files that could not be read come first, and "could not be read"
        // is said only of those; a file --fix could not write was read.
        let error = |file: &str, stage| crate::report::InputError {
            file: file.to_owned(),
            line: None,
            column: None,
            message: "m".to_owned(),
            stage,
        };
        let mostly_unread = Report {
            files: 9,
            objects: 1,
            errors: (1..9)
                .map(|n| error(&format!("f{n}.yaml"), Stage::Read))
                .collect(),
            ..Report::default()
        };
        assert_eq!(
            summary_line(&mostly_unread, &plain()),
            "8 of 9 files could not be read; no problems found in the 1 object read"
        );
        let none_read = Report {
            files: 2,
            errors: vec![error("a.yaml", Stage::Read), error("b.yaml", Stage::Read)],
            ..Report::default()
        };
        assert_eq!(
            summary_line(&none_read, &plain()),
            "2 files could not be read"
        );
        let one_unread = Report {
            files: 2,
            errors: vec![error("a.yaml", Stage::Read)],
            ..Report::default()
        };
        assert_eq!(
            summary_line(&one_unread, &plain()),
            "1 of 2 files could not be read; no Kubernetes objects found in the others"
        );
        let mut unfixed = single.clone();
        unfixed.errors = vec![error("a.yaml", Stage::Fix)];
        assert_eq!(
            summary_line(&unfixed, &plain()),
            "Found 1 warning in 1 object across 1 file; 1 file could not be fixed"
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

    #[test]
    fn underline_covers_the_token_at_the_column() {
        let line = "  readinessProbe: {tcpSocket: {port: 8000}}";
        assert_eq!(&line[underline(line, 3)], "readinessProbe");
        assert_eq!(&line[underline(line, 19)], "{");
        assert_eq!(&line[underline(line, 38)], "8000");
        let line = r#"  path: "/v2/health ready" # x"#;
        assert_eq!(&line[underline(line, 9)], r#""/v2/health ready""#);
        let line = r#"  a: "esc \" q" 'it''s' 'open"#;
        assert_eq!(&line[underline(line, 6)], r#""esc \" q""#);
        assert_eq!(&line[underline(line, 17)], "'it''s'");
        assert_eq!(&line[underline(line, 25)], "'open");
        let line = "    - name: vllm";
        assert_eq!(&line[underline(line, 5)], "-");
        assert_eq!(&line[underline(line, 13)], "vllm");
        // Characters, not bytes.
        let line = "é: ü";
        assert_eq!(&line[underline(line, 4)], "ü");
        // Past the end: an empty span after the last character.
        assert_eq!(underline(line, 40), line.len()..line.len());
        assert_eq!(&line[underline(line, 0)], "é");
        assert_eq!(&"key:"[underline("key:", 1)], "key");
        assert_eq!(&":"[underline(":", 1)], ":");
    }
}
