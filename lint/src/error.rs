//! The errors of the CLI, by kind. Each displays as the sentence a user reads after
//! `probelint: error: ` (or, for a file of the run, after its name in the report).

use crate::audit::AuditError;
use crate::simulate_svg::DrawError;
use probelint_yaml::load::YamlError;
use probelint_yaml::patch::TextFixError;
use std::io;

/// Why a command stopped: printed as `probelint: error: {self}`, exit status 2.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Overwrite(#[from] OverwriteError),
    /// The one file a command reads (`mutate`, `simulate`) cannot be read.
    #[error("{name}: {error}")]
    Read { name: String, error: ReadError },
    /// The one file a command reads does not parse.
    #[error("{name}: {error}")]
    Parse { name: String, error: YamlError },
    /// The file holds nothing the command can work on.
    #[error("{name}: {what}")]
    Nothing { name: String, what: String },
    /// `simulate --scenario` asks for what the workload cannot do.
    #[error("{0}")]
    Scenario(String),
    #[error("cannot write output: {0}")]
    Output(io::Error),
    #[error("cannot write the diff: {0}")]
    Diff(io::Error),
    #[error("cannot write the man page: {0}")]
    Man(io::Error),
    #[error("cannot write the report to {path}: {error}")]
    Report { path: String, error: io::Error },
    #[error("cannot write YAML: {0}")]
    Yaml(String),
    #[error("cannot draw the timeline: {0}")]
    Draw(#[from] DrawError),
    #[error("{path}: cannot write the picture: {error}")]
    Picture { path: String, error: io::Error },
    /// A fix of the engine that does not apply to the object it was made for: a bug.
    #[error("internal error: a fix does not apply: {0}")]
    FixDoesNotApply(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `probelint audit` could not start or list (its own messages).
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// A command line that asks for something impossible.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("no paths given (try `probelint manifests/`, or `-` for standard input)")]
    NoPaths,
    #[error("--fix rewrites files and cannot rewrite standard input; use `probelint mutate -`")]
    FixStdin,
    #[error(
        "--output {0} has no --format of its own before it (each --output follows its --format)"
    )]
    OutputWithoutFormat(String),
    #[error("several --format options write to standard output; give all but one an --output FILE")]
    SeveralToStdout,
    #[error("--exclude {glob:?}: {error}")]
    Exclude { glob: String, error: globset::Error },
    #[error("--exclude: {0}")]
    Excludes(globset::Error),
    #[error("--kustomize: none of the given paths is a directory with a kustomization.yaml")]
    NoKustomization,
    #[error("--request-timeout must be at least 1 second")]
    RequestTimeout,
    #[error("--deadline must be at least 1 second")]
    Deadline,
    #[error("--duration must be a positive number of seconds")]
    Duration,
    #[error("{0} must be a number of seconds ≥ 0")]
    Seconds(&'static str),
    #[error("--max-container-restart-period must be 1 to 300 seconds")]
    MaxRestartPeriod,
    #[error("--gpu-hour-cost must be a number ≥ 0 (your currency per GPU-hour)")]
    GpuHourCost,
    #[error("--timeline {0} is also the report's --output; give the picture its own file")]
    TimelineIsOutput(String),
    #[error("unknown rule {id:?}{}; `probelint rules` lists them", hint(.near))]
    UnknownRule {
        id: String,
        near: Option<&'static str>,
    },
}

fn hint(near: &Option<&'static str>) -> String {
    near.map(|n| format!(" (did you mean {n}?)"))
        .unwrap_or_default()
}

/// The policy cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("built-in policy: {0}")]
    Builtin(probelint_policies::PolicyError),
    #[error("{path}: cannot read policy file: {}", crate::input::describe_io(.error))]
    Read { path: String, error: io::Error },
    #[error("{path}: invalid policy: {error}")]
    Invalid {
        path: String,
        error: probelint_policies::PolicyError,
    },
}

/// A report would land on a file the run reads, or where no file can be (checked before
/// anything is read or written).
#[derive(Debug, thiserror::Error)]
pub enum OverwriteError {
    #[error("{flag} {output} is a directory; name a file to write the report to")]
    Directory { flag: &'static str, output: String },
    #[error("{flag} {output}: the directory {dir} does not exist")]
    NoDirectory {
        flag: &'static str,
        output: String,
        dir: String,
    },
    #[error("{what} and {other} are the same file; each report needs a file of its own")]
    SameReport { what: String, other: String },
    #[error(
        "standard output is redirected into {0}, which this run reads: the report would be \
         written into it. Nothing was written; redirect it to another file"
    )]
    StdoutIntoInput(String),
    #[error(
        "{what} is the same file as {input}, which this run reads: the report would replace \
         it. Nothing was written; write the report to another file"
    )]
    ReportOverInput { what: String, input: String },
}

/// Why a path or an input cannot be read; reported against that file, the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A path on the command line that cannot be used (no such file, permission denied).
    #[error("{}", crate::input::describe_io(.0))]
    Path(io::Error),
    /// A directory walk error (`ignore` says what and where).
    #[error("{0}")]
    Walk(String),
    #[error("symbolic link loop; not followed")]
    Loop,
    /// A walked link into the kernel's file systems, whose files never end or block.
    #[error(
        "a symbolic link into {0}, which a directory walk does not follow (its files can block \
         or never end); name the file itself to read it"
    )]
    KernelLink(&'static str),
    #[error("cannot read file: {}", crate::input::describe_io(.0))]
    File(io::Error),
    #[error("not a regular file ({0}); to lint a command's output, pipe it to `probelint -`")]
    NotAFile(&'static str),
    #[error("the file is {size} bytes, more than the {max}-byte limit")]
    TooLarge { size: u64, max: usize },
    /// It grew past the limit while it was read.
    #[error("the file is more than the {0}-byte limit")]
    Grew(usize),
    #[error("standard input is longer than the {0}-byte limit")]
    StdinTooLong(usize),
    #[error("cannot read standard input: {}", crate::input::describe_io(.0))]
    Stdin(io::Error),
    #[error(transparent)]
    Kustomize(#[from] KustomizeError),
}

/// `--kustomize` could not render a directory.
#[derive(Debug, thiserror::Error)]
pub enum KustomizeError {
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("cannot run {program}: {error}")]
    Spawn {
        program: &'static str,
        error: io::Error,
    },
    #[error(
        "--kustomize needs `kubectl` or `kustomize` on PATH (neither {} found); install one, or \
         render yourself: `kubectl kustomize DIR | probelint -`",
        .0.join(" nor ")
    )]
    NoRenderer(Vec<&'static str>),
}

/// Why `--fix` left a file as it is (reported as `not fixed (file left unchanged): {self}`).
#[derive(Debug, thiserror::Error)]
pub enum NotFixed {
    #[error(transparent)]
    Text(#[from] TextFixError),
    #[error("it is the same file as {first}, which was fixed")]
    SameFile { first: String },
    /// `--kustomize` output: there is no file to rewrite.
    #[error("it is what kustomize renders from {dir}; fix the files it is built from")]
    Rendered { dir: String },
    #[error(transparent)]
    Write(io::Error),
}
