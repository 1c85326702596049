//! `probelint PATH...`, the default command: check files (or, with `--fix`, fix them first)
//! and write the report in each format asked for.

use super::{ColorChoice, ConfigArgs, FailOn, FormatArg, exit_code};
use crate::commands::fix;
use crate::error::{Error, UsageError};
use crate::input::{self, Origin, Pending, Source};
use crate::output::{self, Format};
use crate::report::{Report, SkipKind};
use clap::ArgAction;
use probelint_policies::DEFAULT_POLICY_YAML;
use probelint_yaml::load::Limits;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files or directories to lint; `-` for standard input.
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,

    /// Output format; repeat to write several (pair each with --output).
    #[arg(long, short = 'f', value_enum, action = ArgAction::Append)]
    pub format: Vec<FormatArg>,

    /// Write the preceding --format to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE", action = ArgAction::Append)]
    pub output: Vec<PathBuf>,

    /// Lowest severity that makes the run fail (exit 1).
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub fail_on: FailOn,

    /// Skip paths matching GLOB (repeatable), e.g. 'charts/**'.
    #[arg(long, value_name = "GLOB", action = ArgAction::Append)]
    pub exclude: Vec<String>,

    #[command(flatten)]
    pub config: ConfigArgs,

    /// Print the built-in policy and exit.
    #[arg(long)]
    pub policy_default: bool,

    /// Render directories that contain kustomization.yaml with `kubectl kustomize` (or
    /// `kustomize build`) and lint the result.
    #[arg(long)]
    pub kustomize: bool,

    /// When to use colour in human output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    /// Also list skipped documents and files.
    #[arg(long, short = 'v')]
    pub verbose: bool,

    /// Apply safe fixes in place, keeping comments, key order and formatting; then report what
    /// remains.
    #[arg(long)]
    pub fix: bool,

    /// With --fix: show the changes as a unified diff instead of writing them.
    #[arg(long, requires = "fix")]
    pub dry_run: bool,

    /// With --fix: also apply unsafe fixes (ones that change what a container runs, such as
    /// args-repeat-entrypoint's), which the mutating webhook never applies.
    #[arg(long, requires = "fix")]
    pub unsafe_fixes: bool,
}

/// Pairs each `--output` with the `--format` written before it; formats without one go to
/// stdout. `matches` gives the positions of the options on the command line.
fn destinations(
    args: &Args,
    matches: &clap::ArgMatches,
) -> Result<Vec<(Format, Option<PathBuf>)>, UsageError> {
    let format_at: Vec<usize> = matches
        .indices_of("format")
        .map(Iterator::collect)
        .unwrap_or_default();
    let output_at: Vec<usize> = matches
        .indices_of("output")
        .map(Iterator::collect)
        .unwrap_or_default();
    let mut pairs: Vec<(Format, Option<PathBuf>)> = args
        .format
        .iter()
        .map(|f| (Format::from(*f), None))
        .collect();
    if pairs.is_empty() {
        pairs.push((Format::Human, None));
    }
    for (output, at) in args.output.iter().zip(output_at) {
        // The last --format before this --output; an --output before any --format applies to
        // the default (human) format.
        let slot = format_at.iter().rposition(|f| *f < at).unwrap_or(0);
        if pairs[slot].1.is_some() {
            return Err(UsageError::OutputWithoutFormat(
                output.display().to_string(),
            ));
        }
        pairs[slot].1 = Some(output.clone());
    }
    if pairs.iter().filter(|(_, o)| o.is_none()).count() > 1 {
        return Err(UsageError::SeveralToStdout);
    }
    Ok(pairs)
}

/// Runs the command.
///
/// # Errors
///
/// Usage errors, a policy that cannot be used, a report that would overwrite an input, and
/// standard output that cannot be written; a file of the run that cannot be read is an error in
/// the report instead (exit 2).
pub fn run(args: &Args, matches: &clap::ArgMatches) -> Result<u8, Error> {
    if args.policy_default {
        print!("{}", policy_default());
        return Ok(0);
    }
    let destinations = destinations(args, matches)?;
    if args.paths.is_empty() {
        return Err(UsageError::NoPaths.into());
    }
    if args.fix && args.paths.iter().any(|p| p == "-") {
        return Err(UsageError::FixStdin.into());
    }
    let policy_path = args.config.path();
    let policy = crate::config::load(policy_path.as_deref())?;
    let excludes = input::exclude_set(&args.exclude)?;
    let limits = Limits::default();

    let mut sources: Vec<Pending> = Vec::new();
    let mut paths = args.paths.clone();
    if args.kustomize {
        let (rendered, rest) = input::kustomize::render_all(&paths)?;
        sources.extend(rendered.into_iter().map(Pending::from));
        paths = rest;
    }
    let discovery = input::discover(&paths, &excludes);
    // Before anything is read or written: no report may land on a file this run reads.
    let writes = crate::overlap::Writes {
        flag: "--output",
        outputs: destinations
            .iter()
            .filter_map(|(_, o)| o.as_deref())
            .collect(),
        stdout: args.dry_run || destinations.iter().any(|(_, o)| o.is_none()),
    };
    crate::overlap::check(&writes, &discovery.inputs, policy_path.as_deref())?;
    // Read by the workers that parse them.
    sources.extend(discovery.inputs.into_iter().map(Pending::from));
    sources.extend(discovery.errors.into_iter().map(|(name, why)| {
        Pending::from(Source {
            origin: Origin::File(PathBuf::from(&name)),
            name,
            bytes: Err(why),
            stamp: None,
        })
    }));

    let report = if args.fix {
        let at_least = if args.unsafe_fixes {
            probelint_policies::Applicability::Unsafe
        } else {
            probelint_policies::Applicability::Safe
        };
        let planned = fix::plan(sources, &policy, &limits, at_least);
        let fixed = fix::apply(planned, args.dry_run, &policy, &limits);
        fixed
            .print(&mut std::io::stdout().lock(), &mut anstream::stderr())
            .map_err(Error::Diff)?;
        if args.dry_run {
            let nothing_linted = report_unrendered(&fixed.report);
            // Like `ruff --diff`: the diff is the output; exit 1 when something would change.
            return Ok(exit_code(
                !fixed.report.errors.is_empty() || nothing_linted,
                fixed.files_changed() > 0,
            ));
        }
        fixed.report
    } else {
        crate::check::run(sources, &policy, &limits)
    };

    // A report that cannot be written does not stop the others.
    let mut unwritten = false;
    for (format, path) in &destinations {
        let options = output::Options {
            color: args.color.colors(path.is_some()),
            verbose: args.verbose,
        };
        match path {
            None => {
                let stdout = std::io::stdout();
                let mut out = stdout.lock();
                output::render(*format, &report, &options, &mut out)
                    .and_then(|()| out.flush())
                    .map_err(Error::Output)?;
            }
            Some(path) => {
                let written = crate::atomic::write_with(path, |out| {
                    output::render(*format, &report, &options, out)
                });
                if let Err(e) = written {
                    unwritten = true;
                    let _ = writeln!(
                        anstream::stderr(),
                        "probelint: error: cannot write the {} report to {}: {e}",
                        format!("{format:?}").to_lowercase(),
                        input::display_path(path)
                    );
                }
            }
        }
    }

    let nothing_linted = report_unrendered(&report);
    let threshold = args.fail_on.threshold();
    let failing = report
        .findings
        .iter()
        .any(|f| !f.finding.is_suppressed() && f.finding.severity >= threshold);
    Ok(exit_code(
        !report.errors.is_empty() || unwritten || nothing_linted,
        failing,
    ))
}

/// The policy schema where an editor can fetch it: the repository's `docs/policy.schema.json`,
/// as the README gives it.
pub const POLICY_SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/probelint/probelint/main/docs/policy.schema.json";

/// The built-in policy as `--policy-default` prints it, to start a `.probelint.yaml` from. Its
/// `yaml-language-server` line names the schema relative to `policies/` in the repository,
/// which resolves nowhere beside a user's file: it names the URL instead.
fn policy_default() -> String {
    const MODELINE: &str = "# yaml-language-server: $schema=";
    let body = match DEFAULT_POLICY_YAML.split_once('\n') {
        Some((first, rest)) if first.starts_with(MODELINE) => rest,
        _ => DEFAULT_POLICY_YAML,
    };
    format!("{MODELINE}{POLICY_SCHEMA_URL}\n{body}")
}

/// At most this many charts or directories are named in a line; the rest are counted.
const NAMED: usize = 3;

/// Says on standard error, whatever the format and without `--verbose`, how many Helm templates
/// and kustomizations were not linted and how to lint them: a run pointed at an unrendered chart
/// must not look like a clean one. Returns whether nothing at all was linted because of them (no
/// object, no input error): that run fails (exit 2), or a CI job on a chart would pass forever.
fn report_unrendered(report: &Report) -> bool {
    let lines = unrendered_lines(report);
    if lines.is_empty() {
        return false;
    }
    let nothing_linted = report.objects == 0 && report.errors.is_empty();
    let mut err = anstream::stderr();
    let level = if nothing_linted { "error" } else { "warning" };
    for line in &lines {
        let _ = writeln!(err, "probelint: {level}: {line}");
    }
    if nothing_linted {
        let _ = writeln!(
            err,
            "probelint: error: nothing was linted: every manifest found needs rendering first"
        );
    }
    nothing_linted
}

/// One line per kind of input that needs rendering, with how to lint it.
fn unrendered_lines(report: &Report) -> Vec<String> {
    let mut templates = 0;
    let mut charts: Vec<&str> = Vec::new();
    let mut unknown_chart = false;
    let mut dirs: Vec<&str> = Vec::new();
    for skipped in &report.skipped {
        match &skipped.kind {
            SkipKind::NotKubernetes => {}
            SkipKind::HelmTemplate { chart } => {
                templates += 1;
                match chart {
                    Some(chart) => charts.push(chart),
                    None => unknown_chart = true,
                }
            }
            SkipKind::Kustomization { dir } => dirs.push(dir),
        }
    }
    charts.sort_unstable();
    charts.dedup();
    dirs.sort_unstable();
    dirs.dedup();
    let mut lines = Vec::new();
    if templates > 0 {
        let chart = match (charts.as_slice(), unknown_chart) {
            ([one], false) => *one,
            _ => "CHART",
        };
        let place = if charts.is_empty() {
            String::new()
        } else {
            format!(" ({})", named(&charts))
        };
        lines.push(format!(
            "{} not linted{place}: render the chart and lint the output, e.g. \
             `helm template RELEASE {chart} | probelint -`",
            output::plural(templates, "Helm template was", "Helm templates were"),
        ));
    }
    if !dirs.is_empty() {
        let args = if dirs.len() <= NAMED {
            dirs.join(" ")
        } else {
            "DIR...".to_owned()
        };
        lines.push(format!(
            "{} not linted as rendered ({}): lint what kustomize renders with \
             `probelint --kustomize {args}`",
            output::plural(dirs.len(), "kustomization was", "kustomizations were"),
            named(&dirs),
        ));
    }
    lines
}

/// `a, b, c` or `a, b, c and 2 more`.
fn named(items: &[&str]) -> String {
    let shown = items[..items.len().min(NAMED)].join(", ");
    match items.len().saturating_sub(NAMED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}
