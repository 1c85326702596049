use probelint::inputs;
use probelint::lint::{lint_sources, read_input};
use probelint::yaml::{self, Limits};
use rayon::prelude::*;
use std::time::Instant;

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    let limits = Limits::default();
    let t = Instant::now();
    let policy = probelint_policies::Policy::builtin().unwrap();
    eprintln!("policy {:?}", t.elapsed());
    let t = Instant::now();
    let ex = inputs::exclude_set(&[]).unwrap();
    let d = inputs::discover(&paths, &ex);
    eprintln!("discover {:?}", t.elapsed());
    let t = Instant::now();
    let sources: Vec<_> = d.inputs.iter().map(|i| read_input(i, &limits)).collect();
    eprintln!("read {:?}", t.elapsed());
    let t = Instant::now();
    let n: usize = sources
        .par_iter()
        .map(|s| {
            yaml::parse_stream_partial(s.bytes.as_ref().unwrap(), &limits)
                .documents
                .len()
        })
        .sum();
    eprintln!("parse only {:?} ({n} docs)", t.elapsed());
    let t = Instant::now();
    let docs: Vec<Vec<yaml::Document>> = sources
        .par_iter()
        .map(|s| yaml::parse_stream_partial(s.bytes.as_ref().unwrap(), &limits).documents)
        .collect();
    eprintln!("parse keep {:?}", t.elapsed());
    let t = Instant::now();
    let objects: Vec<serde_json::Value> = docs.into_iter().flatten().map(|d| d.value).collect();
    eprintln!("collect {:?}", t.elapsed());
    let t = Instant::now();
    let f = probelint_policies::evaluate(&objects, &policy);
    eprintln!("evaluate {:?} ({} findings)", t.elapsed(), f.len());
    let t = Instant::now();
    let f1: usize = objects
        .iter()
        .map(|o| probelint_policies::evaluate_one(o, &policy).len())
        .sum();
    eprintln!("evaluate_one each {:?} ({} findings)", t.elapsed(), f1);
    for chunk in [1usize, 10, 100, 1000, 10000, 100000] {
        let t = Instant::now();
        let n: usize = objects
            .chunks(chunk)
            .map(|c| probelint_policies::evaluate(c, &policy).len())
            .sum();
        eprintln!(
            "evaluate chunks of {chunk} {:?} ({n} findings)",
            t.elapsed()
        );
    }
    drop(objects);
    let t = Instant::now();
    let report = lint_sources(sources, &policy, &limits);
    eprintln!(
        "lint_sources {:?} ({} findings)",
        t.elapsed(),
        report.findings.len()
    );
    let t = Instant::now();
    let mut sink = std::io::sink();
    probelint::output::render(
        probelint::output::Format::Human,
        &report,
        &probelint::output::Options {
            color: false,
            verbose: false,
        },
        &mut sink,
    )
    .unwrap();
    eprintln!("render human {:?}", t.elapsed());
    let t = Instant::now();
    drop(report);
    eprintln!("drop {:?}", t.elapsed());
}
