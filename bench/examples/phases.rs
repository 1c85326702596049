//! Where the time of a lint goes: `cargo run --release -p probelint-bench --example phases -- DIR`.
//!
//! Times, in one process, the phases `probelint DIR` runs (discovery; reading, parsing,
//! evaluating and locating on the rayon workers; rendering) beside the parse-only baseline
//! (reading and parsing on the same workers, results dropped), several rounds interleaved. A
//! diagnostic for `bench/profile-notes.md`, not part of `bench/run.sh`.

use probelint::check::run as lint_sources;
use probelint::input as inputs;
use probelint::input::{Pending, read_input};
use probelint::output::{self, Format, Options};
use probelint_policies::Policy;
use probelint_yaml::load::{self as yaml, Limits};
use rayon::prelude::*;
use std::time::Instant;

fn main() -> Result<(), String> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        return Err("usage: phases DIR...".into());
    }
    let limits = Limits::default();
    let policy = Policy::builtin().map_err(|e| e.to_string())?;
    let lap = |what: &str, t: Instant| {
        eprintln!("{what:<52} {:>9.1} ms", t.elapsed().as_secs_f64() * 1e3)
    };
    let options = Options {
        color: false,
        verbose: false,
    };
    for round in 1..=3 {
        eprintln!("-- round {round}");
        let t = Instant::now();
        let excludes = inputs::exclude_set(&[]).map_err(|e| e.to_string())?;
        let found = inputs::discover(&paths, &excludes);
        lap("discover", t);

        let t = Instant::now();
        let documents: usize = found
            .inputs
            .par_iter()
            .map(|i| match read_input(i, &limits).bytes {
                Ok(b) => yaml::parse_stream_partial(&b, &limits).documents.len(),
                Err(_) => 0,
            })
            .sum();
        lap(
            &format!("parse-only: read + parse ({documents} documents)"),
            t,
        );

        let t = Instant::now();
        let pending: Vec<Pending> = found.inputs.into_iter().map(Pending::from).collect();
        let report = lint_sources(pending, &policy, &limits);
        lap(
            &format!(
                "lint_sources: read + parse + evaluate + locate ({})",
                report.findings.len()
            ),
            t,
        );
        for format in [Format::Human, Format::Json, Format::Sarif] {
            let t = Instant::now();
            let mut out = Vec::new();
            output::render(format, &report, &options, &mut out).map_err(|e| e.to_string())?;
            lap(&format!("render {format:?} ({} bytes)", out.len()), t);
        }
        let t = Instant::now();
        drop(report);
        lap("drop the report", t);
    }
    Ok(())
}
