//! `probelint`: lint Kubernetes manifests for GPU model-serving probe mistakes. The command line
//! and its dispatch; each command lives in `probelint::commands`.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use probelint::commands::{self, EXIT_ERROR, audit, check, export, mutate, rules, simulate};
use probelint::error::Error;
use probelint_policies::Policy;
use std::io::Write;
use std::process::ExitCode;

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
    check: check::Args,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List every rule: id, default severity, summary.
    Rules,
    /// Explain a rule: why it matters, a bad and a good example, the fix.
    Explain(rules::ExplainArgs),
    /// Print manifests as the mutating webhook would return them (or, with --patch, the JSON
    /// Patch for each object).
    Mutate(mutate::Args),
    /// Predict what the kubelet does to each GPU container while its model loads: probe
    /// transitions, restarts and first-ready time.
    Simulate(simulate::Args),
    /// Lint the workloads a live cluster runs, each finding beside the restarts and probe
    /// failures it has already caused (reads the kubeconfig as kubectl does; list only).
    Audit(audit::Args),
    /// Print the rules that have a faithful CEL form as ValidatingAdmissionPolicies and
    /// bindings, for clusters with no webhook (--list: what is exported and why not).
    Export(export::Args),
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
    let result = match &cli.command {
        Some(Command::Rules) => rules::rules(),
        Some(Command::Explain(args)) => rules::explain(args),
        Some(Command::Mutate(args)) => mutate::run(args),
        Some(Command::Simulate(args)) => simulate::run(args),
        Some(Command::Audit(args)) => audit::run(args),
        Some(Command::Export(args)) => export::run(args),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "probelint",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
        Some(Command::Man) => clap_mangen::Man::new(Cli::command())
            .render(&mut std::io::stdout())
            .map(|()| 0)
            .map_err(Error::Man),
        Some(Command::Schema) => commands::schema::run(),
        None => check::run(&cli.check, &matches),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let _ = writeln!(anstream::stderr(), "probelint: error: {error}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
