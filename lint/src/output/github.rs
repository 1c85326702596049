//! GitHub Actions workflow commands: each finding becomes an annotation on the pull request
//! diff, at its line.
//!
//! ```text
//! ::error file=deploy/vllm.yaml,line=24,col=11,title=gpu-startup-probe-missing::MESSAGE
//! ```
//!
//! Warnings become `::warning`, info `::notice`. Suppressed findings are left out: an
//! annotation asks someone to act, and an exemption says nobody needs to. Nothing else is
//! printed, so the output can be piped or mixed with other steps' commands.

use std::borrow::Cow;
use std::io::{self, Write};

use probelint_policies::Severity;

use super::{STDIN, repo_path};
use crate::report::Report;

pub(super) fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for located in report
        .findings
        .iter()
        .filter(|f| !f.finding.is_suppressed())
    {
        let finding = &located.finding;
        let command = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut message = finding.message.clone();
        if !finding.help.is_empty() {
            message.push_str("\nhelp: ");
            message.push_str(&finding.help);
        }
        write_command(
            out,
            command,
            &located.file,
            Some(located.line),
            Some(located.column),
            Some(&finding.rule),
            &message,
        )?;
    }
    for error in &report.errors {
        write_command(
            out,
            "error",
            &error.file,
            error.line,
            error.column,
            None,
            &error.message,
        )?;
    }
    Ok(())
}

fn write_command(
    out: &mut dyn Write,
    command: &str,
    file: &str,
    line: Option<usize>,
    column: Option<usize>,
    title: Option<&str>,
    message: &str,
) -> io::Result<()> {
    let mut properties = Vec::new();
    // Standard input has no file in the repository: the annotation goes on the run instead.
    if file != STDIN {
        properties.push(format!("file={}", escape_property(&repo_path(file))));
        if let Some(line) = line {
            properties.push(format!("line={line}"));
            if let Some(column) = column {
                properties.push(format!("col={column}"));
            }
        }
    }
    if let Some(title) = title {
        properties.push(format!("title={}", escape_property(title)));
    }
    let separator = if properties.is_empty() { "" } else { " " };
    writeln!(
        out,
        "::{command}{separator}{}::{}",
        properties.join(","),
        escape_data(message)
    )
}

/// Escapes a command's message (GitHub's `escapeData`): `%`, CR and LF. A newline must not
/// end the command early, and `%0A` renders as a line break in the annotation.
fn escape_data(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Escapes a property value (GitHub's `escapeProperty`): also `:` and `,`, which would
/// otherwise end the value or the property list.
fn escape_property(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, property: bool) -> Cow<'_, str> {
    let special = |c: char| matches!(c, '%' | '\r' | '\n') || (property && matches!(c, ':' | ','));
    if !text.contains(special) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            ':' if property => out.push_str("%3A"),
            ',' if property => out.push_str("%2C"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Format;
    use crate::output::sample::*;
    use crate::report::{InputError, Report};
    use probelint_policies::Severity;

    #[test]
    fn github_annotations() {
        insta::assert_snapshot!(rendered(Format::Github, &sample(), plain()));
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
                stage: crate::report::Stage::Read,
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

    #[test]
    fn escaping_follows_the_actions_toolkit() {
        assert_eq!(
            escape_data("50% done\r\nnext: a,b"),
            "50%25 done%0D%0Anext: a,b"
        );
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert!(matches!(escape_data("plain"), Cow::Borrowed("plain")));
    }
}
