//! `probelint audit`: check what a live cluster runs (the work is in `crate::audit`; this is
//! its command line and its report).

use super::{ColorChoice, ConfigArgs, FailOn, FormatArg, exit_code};
use crate::error::{Error, UsageError};
use crate::output::{Format, Options};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The kubeconfig file (default: KUBECONFIG, else ~/.kube/config, else the pod's service
    /// account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace to audit (default: the context's namespace).
    #[arg(
        long,
        short = 'n',
        value_name = "NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,
    /// Audit every namespace.
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,
    /// Only workloads whose labels match SELECTOR (as kubectl's -l).
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = FormatArg::Human)]
    pub format: FormatArg,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Lowest severity that makes the run fail (exit 1).
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub fail_on: FailOn,
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Seconds each request to the apiserver may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub request_timeout: u64,
    /// Seconds the whole audit may take, discovery to report; past them it stops and says so.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::audit::RUN_DEADLINE.as_secs())]
    pub deadline: u64,
    /// When to use colour in human output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Also list the kinds the cluster does not serve and the objects judged through their
    /// owner.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Draw each workload's timeline (scheduling, pulls, starts and kills, probe failures,
    /// Ready) beside simulate's prediction: as text in the human report and data in JSON; with
    /// FILE.svg, also as a picture.
    #[arg(long, value_name = "FILE.svg", num_args = 0..=1, require_equals = false)]
    pub timeline: Option<Option<PathBuf>>,
    /// What a GPU-hour costs, in your currency: turns the GPU-seconds lost to probe kills into
    /// money in the report.
    #[arg(long, value_name = "N")]
    pub gpu_hour_cost: Option<f64>,
}

/// Runs the command.
///
/// # Errors
///
/// Usage errors, a policy that cannot be used, a cluster that cannot be reached, and a report
/// that cannot be written; a kind that cannot be listed is reported and exits 2.
pub fn run(args: &Args) -> Result<u8, Error> {
    if args.request_timeout == 0 {
        return Err(UsageError::RequestTimeout.into());
    }
    if args.deadline == 0 {
        return Err(UsageError::Deadline.into());
    }
    if args
        .gpu_hour_cost
        .is_some_and(|c| !(c.is_finite() && c >= 0.0))
    {
        return Err(UsageError::GpuHourCost.into());
    }
    let picture = args.timeline.as_ref().and_then(Option::as_ref);
    if let (Some(svg), Some(output)) = (picture, &args.output)
        && (svg == output
            || std::fs::canonicalize(svg)
                .ok()
                .is_some_and(|s| std::fs::canonicalize(output).ok().is_some_and(|o| o == s)))
    {
        return Err(UsageError::TimelineIsOutput(crate::input::display_path(svg)).into());
    }
    let policy = args.config.load()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let request = crate::audit::Request {
        kubeconfig: args.kubeconfig.as_deref(),
        context: args.context.as_deref(),
        namespace: args.namespace.as_deref(),
        all_namespaces: args.all_namespaces,
        selector: args.selector.as_deref(),
        request_timeout: std::time::Duration::from_secs(args.request_timeout),
        deadline: std::time::Duration::from_secs(args.deadline),
        timeline: args.timeline.is_some(),
        gpu_hour_cost: args.gpu_hour_cost,
        now,
    };
    let audit = crate::audit::run(&request, &policy).map_err(Error::Audit)?;
    if let Some(svg) = picture {
        let text = crate::audit::timeline::svg(&audit).map_err(Error::Draw)?;
        crate::atomic::write(svg, text.as_bytes()).map_err(|error| Error::Picture {
            path: crate::input::display_path(svg),
            error,
        })?;
    }
    let options = Options {
        color: args.color.colors(args.output.is_some()),
        verbose: args.verbose,
    };
    let format = Format::from(args.format);
    let render = |out: &mut dyn Write| crate::audit::render::render(format, &audit, &options, out);
    match &args.output {
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            render(&mut out)
                .and_then(|()| out.flush())
                .map_err(Error::Output)?;
        }
        Some(path) => {
            crate::atomic::write_with(path, |out| render(out)).map_err(|error| Error::Report {
                path: crate::input::display_path(path),
                error,
            })?;
        }
    }
    // Errors (a kind that could not be listed) go to stderr too, where a CI log shows them
    // whatever the format; a human report on the terminal already ends with them.
    let shown = format == Format::Human && args.output.is_none();
    for e in audit.errors.iter().filter(|_| !shown) {
        let _ = writeln!(
            anstream::stderr(),
            "probelint: error: cannot list {}: {}",
            e.resource,
            e.message
        );
    }
    let threshold = args.fail_on.threshold();
    let failing = audit.active().any(|f| f.finding.severity >= threshold);
    Ok(exit_code(!audit.errors.is_empty(), failing))
}
