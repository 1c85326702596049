//! `probelint`: lint Kubernetes manifests for GPU model-serving probe mistakes.

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use probelint::commands::fix;
use probelint::input::{self as inputs, Origin, Pending, Source};
use probelint::output::{self, Format};
use probelint::yaml::Limits;
use probelint_policies::{DEFAULT_POLICY_YAML, Policy, Severity};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code when findings reach `--fail-on`.
const EXIT_FINDINGS: u8 = 1;
/// Exit code for usage errors and input that could not be read or parsed.
const EXIT_ERROR: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "probelint",
    version = VERSION.as_str(),
    about = "Lint Kubernetes manifests for GPU model-serving probe mistakes",
    long_about = "Lint Kubernetes manifests for GPU model-serving probe mistakes: missing startup \
probes that cause restart storms while weights load, port-open readiness that sends traffic to pods \
that cannot infer, and more. Files and directories are read recursively (.yaml, .yml, .json); `-` \
reads standard input.",
    after_help = "Exit status: 0 clean, 1 findings at or above --fail-on, 2 usage or input errors.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    lint: LintArgs,
}

#[derive(clap::Args, Debug)]
struct LintArgs {
    /// Files or directories to lint; `-` for standard input.
    #[arg(value_name = "PATH")]
    paths: Vec<String>,

    /// Output format; repeat to write several (pair each with --output).
    #[arg(long, short = 'f', value_enum, action = ArgAction::Append)]
    format: Vec<Format>,

    /// Write the preceding --format to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE", action = ArgAction::Append)]
    output: Vec<PathBuf>,

    /// Lowest severity that makes the run fail (exit 1).
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,

    /// Skip paths matching GLOB (repeatable), e.g. 'charts/**'.
    #[arg(long, value_name = "GLOB", action = ArgAction::Append)]
    exclude: Vec<String>,

    /// Policy file (default: the nearest .probelint.yaml at or above the current directory).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Print the built-in policy and exit.
    #[arg(long)]
    policy_default: bool,

    /// Render directories that contain kustomization.yaml with `kubectl kustomize` (or
    /// `kustomize build`) and lint the result.
    #[arg(long)]
    kustomize: bool,

    /// When to use colour in human output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,

    /// Also list skipped documents and files.
    #[arg(long, short = 'v')]
    verbose: bool,

    /// Apply safe fixes in place, keeping comments, key order and formatting; then report what
    /// remains.
    #[arg(long)]
    fix: bool,

    /// With --fix: show the changes as a unified diff instead of writing them.
    #[arg(long, requires = "fix")]
    dry_run: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List every rule: id, default severity, summary.
    Rules,
    /// Explain a rule: why it matters, a bad and a good example, the fix.
    Explain {
        /// The rule id, e.g. gpu-startup-probe-missing.
        rule: String,
    },
    /// Print manifests as the mutating webhook would return them (or, with --patch, the JSON
    /// Patch for each object).
    Mutate {
        /// A manifest file, or `-` for standard input.
        #[arg(value_name = "FILE")]
        file: String,
        /// Print the JSON Patch per object instead of the mutated manifests.
        #[arg(long)]
        patch: bool,
        /// Policy file (default: the nearest .probelint.yaml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Predict what the kubelet does to each GPU container while its model loads: probe
    /// transitions, restarts and first-ready time.
    Simulate {
        /// A manifest file, or `-` for standard input.
        #[arg(value_name = "FILE")]
        file: String,
        /// Model load time (default: probelint.io/model-load-seconds, else the policy's).
        #[arg(long, value_name = "SECONDS")]
        load_seconds: Option<f64>,
        /// Simulate this container (default: every accelerator container).
        #[arg(long, value_name = "NAME")]
        container: Option<String>,
        /// Cluster time to simulate, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 1800.0)]
        duration: f64,
        /// The server binds its port only after loading (default: it accepts TCP while loading).
        #[arg(long)]
        port_opens_after_load: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = SimulateFormat::Human)]
        format: SimulateFormat,
        /// Policy file (default: the nearest .probelint.yaml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        model: probelint::simulate::ModelArgs,
    },
    /// Lint the workloads a live cluster runs, each finding beside the restarts and probe
    /// failures it has already caused (reads the kubeconfig as kubectl does; list only).
    Audit(AuditArgs),
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
    /// Print the JSON Schema of the policy file (.probelint.yaml).
    Schema,
}

#[derive(clap::Args, Debug)]
struct AuditArgs {
    /// The kubeconfig file (default: KUBECONFIG, else ~/.kube/config, else the pod's service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// The namespace to audit (default: the context's namespace).
    #[arg(
        long,
        short = 'n',
        value_name = "NAMESPACE",
        conflicts_with = "all_namespaces"
    )]
    namespace: Option<String>,
    /// Audit every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// Only workloads whose labels match SELECTOR (as kubectl's -l).
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    selector: Option<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Lowest severity that makes the run fail (exit 1).
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    /// Policy file (default: the nearest .probelint.yaml at or above the current directory).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Seconds each request to the apiserver may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    request_timeout: u64,
    /// When to use colour in human output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Also list the kinds the cluster does not serve and the objects judged through their
    /// owner.
    #[arg(long, short = 'v')]
    verbose: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum SimulateFormat {
    Human,
    Json,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum FailOn {
    Error,
    Warning,
    Info,
}

impl FailOn {
    fn threshold(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// `0.1.0 (built-in policy 2026.11.0)`: which rules a CI log was produced with.
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let policy = Policy::builtin()
        .map(|p| p.version)
        .unwrap_or_else(|_| "invalid".to_owned());
    format!("{} (built-in policy {policy})", env!("CARGO_PKG_VERSION"))
});

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Some(Command::Rules) => print_rules(),
        Some(Command::Explain { rule }) => explain(&rule),
        Some(Command::Mutate {
            file,
            patch,
            config,
        }) => probelint::mutate::run(&file, patch, config.as_deref()),
        Some(Command::Simulate {
            file,
            load_seconds,
            container,
            duration,
            port_opens_after_load,
            format,
            config,
            model,
        }) => probelint::simulate::run(&probelint::simulate::Request {
            file: &file,
            load_seconds,
            container: container.as_deref(),
            duration,
            json: format == SimulateFormat::Json,
            port_opens_after_load,
            config: config.as_deref(),
            model: &model,
        }),
        Some(Command::Audit(args)) => run_audit(&args),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "probelint",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
        Some(Command::Man) => clap_mangen::Man::new(Cli::command())
            .render(&mut std::io::stdout())
            .map(|()| 0)
            .map_err(|e| format!("cannot write the man page: {e}")),
        Some(Command::Schema) => {
            let schema = probelint_policies::policy::json_schema();
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(0)
        }
        None => run_lint(&cli.lint, &matches),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            let _ = writeln!(anstream::stderr(), "probelint: error: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Pairs each `--output` with the `--format` written before it; formats without one go to stdout.
fn destinations(
    args: &LintArgs,
    matches: &clap::ArgMatches,
) -> Result<Vec<(Format, Option<PathBuf>)>, String> {
    let format_at: Vec<usize> = matches
        .indices_of("format")
        .map(Iterator::collect)
        .unwrap_or_default();
    let output_at: Vec<usize> = matches
        .indices_of("output")
        .map(Iterator::collect)
        .unwrap_or_default();
    let mut pairs: Vec<(Format, Option<PathBuf>)> =
        args.format.iter().map(|f| (*f, None)).collect();
    if pairs.is_empty() {
        pairs.push((Format::Human, None));
    }
    for (output, at) in args.output.iter().zip(output_at) {
        // The last --format before this --output; an --output before any --format applies to
        // the default (human) format.
        let slot = format_at.iter().rposition(|f| *f < at).unwrap_or(0);
        if pairs[slot].1.is_some() {
            return Err(format!(
                "--output {} has no --format of its own before it (each --output follows its --format)",
                output.display()
            ));
        }
        pairs[slot].1 = Some(output.clone());
    }
    if pairs.iter().filter(|(_, o)| o.is_none()).count() > 1 {
        return Err(
            "several --format options write to standard output; give all but one an --output FILE"
                .to_owned(),
        );
    }
    Ok(pairs)
}

fn run_lint(args: &LintArgs, matches: &clap::ArgMatches) -> Result<u8, String> {
    if args.policy_default {
        print!("{DEFAULT_POLICY_YAML}");
        return Ok(0);
    }
    let destinations = destinations(args, matches)?;
    if args.paths.is_empty() {
        return Err(
            "no paths given (try `probelint manifests/`, or `-` for standard input)".to_owned(),
        );
    }
    if args.fix && args.paths.iter().any(|p| p == "-") {
        return Err(
            "--fix rewrites files and cannot rewrite standard input; use `probelint mutate -`"
                .to_owned(),
        );
    }
    let policy_path = probelint::config::path(args.config.as_deref());
    let policy = probelint::config::load(policy_path.as_deref())?;
    let excludes = inputs::exclude_set(&args.exclude)?;
    let limits = Limits::default();

    let mut sources: Vec<Pending> = Vec::new();
    let mut paths = args.paths.clone();
    if args.kustomize {
        let (rendered, rest) = probelint::input::kustomize::render_all(&paths)?;
        sources.extend(rendered.into_iter().map(Pending::from));
        paths = rest;
    }
    let discovery = inputs::discover(&paths, &excludes);
    // Before anything is read or written: no report may land on a file this run reads.
    let writes = probelint::overlap::Writes {
        outputs: destinations
            .iter()
            .filter_map(|(_, o)| o.as_deref())
            .collect(),
        stdout: args.dry_run || destinations.iter().any(|(_, o)| o.is_none()),
    };
    probelint::overlap::check(&writes, &discovery.inputs, policy_path.as_deref())?;
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
        let planned = fix::plan(sources, &policy, &limits);
        let fixed = fix::apply(planned, args.dry_run, &policy, &limits);
        fixed
            .print(&mut std::io::stdout().lock(), &mut anstream::stderr())
            .map_err(|e| format!("cannot write the diff: {e}"))?;
        if args.dry_run {
            // Like `ruff --diff`: the diff is the output; exit 1 when something would change.
            return Ok(if !fixed.report.errors.is_empty() {
                EXIT_ERROR
            } else if fixed.files_changed() > 0 {
                EXIT_FINDINGS
            } else {
                0
            });
        }
        fixed.report
    } else {
        probelint::check::run(sources, &policy, &limits)
    };

    // A report that cannot be written does not stop the others.
    let mut unwritten = false;
    for (format, path) in &destinations {
        let color = match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            // https://no-color.org: any non-empty NO_COLOR turns automatic colour off.
            ColorChoice::Auto => {
                path.is_none()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::IsTerminal::is_terminal(&std::io::stdout())
            }
        };
        let options = output::Options {
            color,
            verbose: args.verbose,
        };
        match path {
            None => {
                let stdout = std::io::stdout();
                let mut out = stdout.lock();
                output::render(*format, &report, &options, &mut out)
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("cannot write output: {e}"))?;
            }
            Some(path) => {
                let written = probelint::atomic::write_with(path, |out| {
                    output::render(*format, &report, &options, out)
                });
                if let Err(e) = written {
                    unwritten = true;
                    let _ = writeln!(
                        anstream::stderr(),
                        "probelint: error: cannot write the {} report to {}: {e}",
                        format!("{format:?}").to_lowercase(),
                        inputs::display_path(path)
                    );
                }
            }
        }
    }

    let threshold = args.fail_on.threshold();
    let failing = report
        .findings
        .iter()
        .any(|f| !f.finding.is_suppressed() && f.finding.severity >= threshold);
    Ok(if !report.errors.is_empty() || unwritten {
        EXIT_ERROR
    } else if failing {
        EXIT_FINDINGS
    } else {
        0
    })
}

fn run_audit(args: &AuditArgs) -> Result<u8, String> {
    if args.request_timeout == 0 {
        return Err("--request-timeout must be at least 1 second".to_owned());
    }
    let policy_path = probelint::config::path(args.config.as_deref());
    let policy = probelint::config::load(policy_path.as_deref())?;
    let request = probelint::audit::Request {
        kubeconfig: args.kubeconfig.as_deref(),
        context: args.context.as_deref(),
        namespace: args.namespace.as_deref(),
        all_namespaces: args.all_namespaces,
        selector: args.selector.as_deref(),
        request_timeout: std::time::Duration::from_secs(args.request_timeout),
    };
    let audit = probelint::audit::run(&request, &policy)?;
    let options = output::Options {
        color: match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                args.output.is_none()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::IsTerminal::is_terminal(&std::io::stdout())
            }
        },
        verbose: args.verbose,
    };
    let render =
        |out: &mut dyn Write| probelint::audit::render::render(args.format, &audit, &options, out);
    match &args.output {
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            render(&mut out)
                .and_then(|()| out.flush())
                .map_err(|e| format!("cannot write output: {e}"))?;
        }
        Some(path) => probelint::atomic::write_with(path, |out| render(out)).map_err(|e| {
            format!(
                "cannot write the report to {}: {e}",
                inputs::display_path(path)
            )
        })?,
    }
    // Errors (a kind that could not be listed) go to stderr too, where a CI log shows them
    // whatever the format; a human report on the terminal already ends with them.
    let shown = args.format == Format::Human && args.output.is_none();
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
    Ok(if !audit.errors.is_empty() {
        EXIT_ERROR
    } else if failing {
        EXIT_FINDINGS
    } else {
        0
    })
}

fn print_rules() -> Result<u8, String> {
    let mut out = std::io::stdout().lock();
    let width = probelint_policies::registry()
        .iter()
        .map(|r| r.meta().id.len())
        .max()
        .unwrap_or(0);
    let mut text = format!("{:width$}  {:8}  {}\n", "RULE", "SEVERITY", "SUMMARY");
    for rule in probelint_policies::registry() {
        let m = rule.meta();
        let fix = if m.fix.is_some() { " (fixable)" } else { "" };
        text.push_str(&format!(
            "{:width$}  {:8}  {}{fix}\n",
            m.id,
            m.severity.as_str(),
            m.summary
        ));
    }
    out.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    Ok(0)
}

fn explain(id: &str) -> Result<u8, String> {
    let Some(rule) = probelint_policies::rules::find(id) else {
        let ids: Vec<&str> = probelint_policies::registry()
            .iter()
            .map(|r| r.meta().id)
            .collect();
        let near = ids
            .iter()
            .find(|known| known.contains(id) || id.contains(**known));
        let hint = near
            .map(|n| format!(" (did you mean {n}?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown rule {id:?}{hint}; `probelint rules` lists them"
        ));
    };
    let text = probelint::explain::render(rule.meta());
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(0)
}
