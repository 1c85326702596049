//! One module per command: each owns its clap arguments (the struct it runs with) and returns
//! the exit code. What several commands share (the policy file, `--fail-on`, `--color`, the
//! report formats, the exit status) is declared here once.

pub mod audit;
pub mod check;
pub mod export;
pub mod fix;
pub mod mutate;
pub mod rules;
pub mod schema;
pub mod simulate;

use crate::error::Error;
use crate::output::Format;
use probelint_policies::{Policy, Severity};
use std::io::Write;
use std::path::PathBuf;

/// Exit code when findings reach `--fail-on`.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code for usage errors and input that could not be read or parsed.
pub const EXIT_ERROR: u8 = 2;

/// The exit status of a run: errors (input that could not be read, a report not written) before
/// findings at or above `--fail-on`.
#[must_use]
pub fn exit_code(errors: bool, failing: bool) -> u8 {
    if errors {
        EXIT_ERROR
    } else if failing {
        EXIT_FINDINGS
    } else {
        0
    }
}

/// `--config FILE`, for every command that reads the policy.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConfigArgs {
    /// Policy file (default: the nearest .probelint.yaml at or above the current directory).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ConfigArgs {
    /// The policy file in use: `--config FILE`, else the nearest `.probelint.yaml`.
    #[must_use]
    pub fn path(&self) -> Option<PathBuf> {
        crate::config::path(self.config.as_deref())
    }

    /// The policy: the built-in one, overridden by the policy file in use.
    ///
    /// # Errors
    ///
    /// When the policy file cannot be read or is not a valid policy.
    pub fn load(&self) -> Result<Policy, Error> {
        Ok(crate::config::load(self.path().as_deref())?)
    }
}

/// Lowest severity that makes the run fail.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Info,
}

impl FailOn {
    #[must_use]
    pub fn threshold(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }
}

/// When to colour human output.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to colour a report; `to_file` for one written with `--output`.
    #[must_use]
    pub fn colors(self, to_file: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            // https://no-color.org: any non-empty NO_COLOR turns automatic colour off.
            ColorChoice::Auto => {
                !to_file
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::IsTerminal::is_terminal(&std::io::stdout())
            }
        }
    }
}

/// The report formats on the command line (the output layer knows nothing of clap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
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

impl From<FormatArg> for Format {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Human => Format::Human,
            FormatArg::Json => Format::Json,
            FormatArg::Sarif => Format::Sarif,
            FormatArg::Junit => Format::Junit,
            FormatArg::Github => Format::Github,
        }
    }
}

/// Writes a command's whole output to standard output.
///
/// # Errors
///
/// When standard output cannot be written.
pub fn print(text: &str) -> Result<(), Error> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(Error::Output)
}
