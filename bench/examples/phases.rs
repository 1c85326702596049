//! Where the time of a lint goes: `cargo run --release -p probelint-bench --example phases -- DIR`.
//!
//! Times, in one process, the phases `probelint DIR` runs (discovery, reads, parsing, the
//! engine, locating and rendering) and two ways of running the engine, to tell the cost of the
//! rules from the cost of running them over the whole input at once. A diagnostic for
//! `bench/profile-notes.md`, not part of `bench/run.sh`.

use probelint::inputs;
use probelint::lint::{lint_sources, read_input};
use probelint::output::{self, Format, Options};
use probelint::yaml::{self, Limits};
use probelint_policies::Policy;
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
        eprintln!("{what:<44} {:>9.1} ms", t.elapsed().as_secs_f64() * 1e3)
    };

    let t = Instant::now();
    let excludes = inputs::exclude_set(&[])?;
    let found = inputs::discover(&paths, &excludes);
    lap("discover", t);
    let t = Instant::now();
    let sources: Vec<_> = found
        .inputs
        .iter()
        .map(|i| read_input(i, &limits))
        .collect();
    lap("read (sequential, as the CLI)", t);
    let bytes: Vec<&[u8]> = sources
        .iter()
        .filter_map(|s| s.bytes.as_deref().ok())
        .collect();

    let t = Instant::now();
    let documents: usize = bytes
        .par_iter()
        .map(|b| yaml::parse_stream_partial(b, &limits).documents.len())
        .sum();
    lap(&format!("parse and drop ({documents} documents)"), t);

    let t = Instant::now();
    let parsed: Vec<Vec<yaml::Document>> = bytes
        .par_iter()
        .map(|b| yaml::parse_stream_partial(b, &limits).documents)
        .collect();
    lap("parse and keep", t);
    let objects: Vec<serde_json::Value> = parsed.into_iter().flatten().map(|d| d.value).collect();

    let t = Instant::now();
    let all = probelint_policies::evaluate(&objects, &policy).len();
    lap(&format!("evaluate(all objects) ({all} findings)"), t);
    let t = Instant::now();
    let one: usize = objects
        .iter()
        .map(|o| probelint_policies::evaluate_one(o, &policy).len())
        .sum();
    lap(&format!("evaluate_one(each), sequential ({one})"), t);
    let t = Instant::now();
    let one_par: usize = objects
        .par_iter()
        .map(|o| probelint_policies::evaluate_one(o, &policy).len())
        .sum();
    lap(&format!("evaluate_one(each), rayon ({one_par})"), t);
    let t = Instant::now();
    drop(objects);
    lap("drop the objects (sequential)", t);

    let t = Instant::now();
    let report = lint_sources(sources, &policy, &limits);
    lap(
        &format!(
            "lint_sources: parse + evaluate + locate ({})",
            report.findings.len()
        ),
        t,
    );
    let t = Instant::now();
    let options = Options {
        color: false,
        verbose: false,
    };
    output::render(Format::Human, &report, &options, &mut std::io::sink())
        .map_err(|e| e.to_string())?;
    lap("render human output", t);
    Ok(())
}
