//! `parse-only PATH...`: the linter's limit. Finds files, reads them and parses every document
//! exactly as `probelint PATH...` does (same discovery, same reads, same YAML layer, the same
//! rayon parallelism), then drops the result: no evaluation, no locating, no output.

use probelint::input::{self, read_input};
use probelint_yaml::load::{self as yaml, Limits};
use rayon::prelude::*;
use std::process::ExitCode;

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: parse-only PATH...");
        return ExitCode::from(2);
    }
    let limits = Limits::default();
    let excludes = match input::exclude_set(&[]) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("parse-only: {e}");
            return ExitCode::from(2);
        }
    };
    // As in lint/src/commands/check.rs and lint/src/check.rs: discover, then read and parse each input on
    // the rayon workers.
    let discovery = input::discover(&paths, &excludes);
    let (documents, errors) = discovery
        .inputs
        .par_iter()
        .map(|input| match read_input(input, &limits).bytes {
            Ok(bytes) => {
                let stream = yaml::parse_stream_partial(&bytes, &limits);
                (stream.documents.len(), usize::from(stream.error.is_some()))
            }
            Err(_) => (0, 1),
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    println!(
        "{} files, {documents} documents, {errors} errors",
        discovery.inputs.len()
    );
    if errors == 0 && discovery.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
