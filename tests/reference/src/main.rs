//! `reference-server`: `make-model` writes a deterministic model, `serve` serves it.
//! Exit status: 0 after a clean shutdown, 1 when loading fails (`--on-load-error exit`) or the
//! port cannot be bound, 2 for a bad flag or environment value.

use clap::Parser;
use probelint_reference::config::{Cli, Command, ServeConfig};
use probelint_reference::{model, server};
use std::process::ExitCode;
use std::time::Duration;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour only on a terminal: container logs are read as plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // By default a failed log write is reported with eprintln!, which panics when stderr is
        // closed (a harness that stopped reading): the logging thread would die with it.
        .log_internal_errors(false)
        .with_env_filter(filter)
        .init();
    match cli.command {
        Command::MakeModel(args) => {
            match model::make_model(
                args.params,
                args.seed,
                args.layers,
                args.output_dim,
                &args.out,
            ) {
                Ok(expected) => {
                    let summary = serde_json::json!({
                        "model": args.out,
                        "expected": model::expected_path(&args.out),
                        "params": expected.params,
                        "bytes": expected.architecture.weight_bytes(),
                        "layers": expected.architecture.layers,
                        "output_checksum": expected.output_checksum,
                    });
                    println!("{summary}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve(args) => {
            let cfg = match ServeConfig::resolve(&args, &|name| std::env::var(name).ok()) {
                Ok(cfg) => cfg,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let result = runtime.block_on(server::serve(cfg));
            // The model thread may be hung on purpose: do not wait for anything.
            runtime.shutdown_timeout(Duration::from_millis(100));
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "exiting");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
