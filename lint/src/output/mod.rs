//! Output formats: one [`Report`], five renderings.
//!
//! Every format reads the same sorted [`Report`] and writes to any [`Write`], so the CLI
//! decides where output goes (stdout, a file for `--output`) and whether it is coloured; the
//! formats decide nothing about terminals. Each format lives in its own file:
//!
//! | format | for | file |
//! |---|---|---|
//! | [`Format::Human`] | people at a terminal: rustc-style snippets | `human.rs` |
//! | [`Format::Json`] | scripts: a stable, versioned contract | `json.rs` |
//! | [`Format::Sarif`] | GitHub code scanning and other SARIF viewers | `sarif.rs` |
//! | [`Format::Junit`] | CI test report tabs (GitLab, Jenkins, Azure) | `junit.rs` |
//! | [`Format::Github`] | GitHub Actions annotations on the pull request diff | `github.rs` |

use std::borrow::Cow;
use std::io::Write;

use probelint_policies::{Suppression, SuppressionSource};

use crate::report::{Report, Stage};

mod github;
mod human;
mod json;
mod junit;
mod load;
mod sarif;
mod shape;

#[cfg(test)]
mod sample;

/// Which rendering of the report to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Rustc-style diagnostics with source snippets, for people.
    Human,
    /// A versioned JSON document (`"version": 1`), for scripts.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning.
    Sarif,
    /// JUnit XML, for CI test report views.
    Junit,
    /// GitHub Actions workflow commands, for pull request annotations.
    Github,
}

/// How to render; only the human format reads these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Use ANSI colours. The caller decides (TTY detection, `--color`, `NO_COLOR`): a format
    /// never inspects the terminal itself, so the same report renders the same in tests.
    pub color: bool,
    /// Human format: list the files that were skipped, and why. Without it the summary only
    /// counts them, because a large repository skips many non-Kubernetes YAML files.
    pub verbose: bool,
}

/// Writes `report` in `format` to `out`.
///
/// The report should already be sorted ([`Report::sort`]); the formats keep its order, so
/// output is deterministic. Only I/O errors from `out` are returned: no input can make
/// rendering fail.
pub fn render(
    format: Format,
    report: &Report,
    options: &Options,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match format {
        Format::Human => human::render(report, options, out),
        Format::Json => json::render(report, out),
        Format::Sarif => sarif::render(report, out),
        Format::Junit => junit::render(report, out),
        Format::Github => github::render(report, out),
    }
}

/// A finding's message cut to the headline the human format shows (what is wrong, in which
/// container), at most `budget` characters: for one-line lists such as `--fix --dry-run`'s.
pub fn headline(message: &str, budget: usize) -> String {
    shape::message(message, budget.max(shape::MIN_HEADLINE)).headline
}

/// The path the report uses for standard input.
const STDIN: &str = "-";

/// A path as people read it: `<stdin>` for standard input, the path as given otherwise.
fn display_path(file: &str) -> &str {
    if file == STDIN { "<stdin>" } else { file }
}

/// A path as tools that resolve it against the repository root want it (SARIF, GitHub):
/// forward slashes (Windows runners report `deploy\vllm.yaml`) and no leading `./`, which
/// GitHub does not match against the files of a pull request.
fn repo_path(file: &str) -> Cow<'_, str> {
    let mut path: Cow<'_, str> = if file.contains('\\') {
        Cow::Owned(file.replace('\\', "/"))
    } else {
        Cow::Borrowed(file)
    };
    while let Some(rest) = path.strip_prefix("./") {
        path = Cow::Owned(rest.to_owned());
    }
    path
}

/// Makes text from a manifest safe to print on a terminal.
///
/// Messages quote user data (container names, images, annotation values) and a manifest can
/// contain escape sequences that would recolour, retitle or rewrite the user's terminal. Each
/// control or bidirectional-override character becomes U+FFFD, one character for one, so
/// character columns computed on the original text still point at the same place. Tabs stay:
/// they are legal in YAML comments and values, and the snippet renderer expands them.
pub(crate) fn sanitize(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        (c.is_control() && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    }
    if text.chars().any(unsafe_char) {
        Cow::Owned(
            text.chars()
                .map(|c| if unsafe_char(c) { '\u{FFFD}' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// `1 file`, `2 files`.
pub(crate) fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// How many distinct files had at least one error at `stage` (a multi-document file with two
/// bad documents is one file that could not be read).
fn failed_files(report: &Report, stage: Stage) -> usize {
    let mut files: Vec<&str> = report
        .errors
        .iter()
        .filter(|e| e.stage == stage)
        .map(|e| e.file.as_str())
        .collect();
    files.sort_unstable();
    files.dedup();
    files.len()
}

/// `("annotation", reason)`: who exempted a finding, and why, in the words the text formats
/// print. An empty reason says so and how to give one, because an exemption nobody can
/// explain is the kind that outlives its purpose.
fn suppression_parts(suppression: &Suppression) -> (&'static str, &str) {
    let (source, missing) = match suppression.source {
        SuppressionSource::Annotation => (
            "annotation",
            "no reason given; add a probelint.io/ignore-reason annotation",
        ),
        SuppressionSource::Policy => ("policy", "no reason given in the policy exemption"),
    };
    let reason = suppression.reason.trim();
    (source, if reason.is_empty() { missing } else { reason })
}
