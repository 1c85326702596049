//! `gen-corpus --files N --seed S --out DIR`: writes N synthetic manifests into DIR.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write a deterministic corpus of synthetic GPU-serving manifests (~2 KB each).
#[derive(Parser)]
struct Args {
    /// Number of files.
    #[arg(long)]
    files: usize,
    /// Seed: the same seed gives the same bytes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory; created if missing, and must be empty.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Ok(mut entries) = std::fs::read_dir(&args.out)
        && entries.next().is_some()
    {
        eprintln!(
            "gen-corpus: {} is not empty; give a new or empty directory",
            args.out.display()
        );
        return ExitCode::from(2);
    }
    match probelint_bench::corpus::write(&args.out, args.files, args.seed) {
        Ok(bytes) => {
            println!(
                "{} files, {} bytes ({} bytes/file) in {}",
                args.files,
                bytes,
                bytes / args.files.max(1) as u64,
                args.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-corpus: {}: {e}", args.out.display());
            ExitCode::FAILURE
        }
    }
}
