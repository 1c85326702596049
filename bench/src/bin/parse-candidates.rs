//! `parse-candidates PATH...`: YAML parsers side by side on the same manifests, in one run, on
//! one thread. For each `.yaml`/`.yml` file under PATH (read once, before timing):
//!
//! - `probelint-yaml`: our whole loader (saphyr-parser's events, the tree with spans, YAML 1.1
//!   resolution, the limits): what `parse-only` and the linter pay per byte;
//! - `saphyr-parser events`: the event stream our loader is built on, drained;
//! - `rlsp-yaml-parser events`: a candidate event stream (issue 24), drained.
//!
//! The three are interleaved round by round (this machine is noisy) and each figure is the
//! median of the rounds. A file a parser refuses is counted and named, not timed away: a
//! faster parser that refuses manifests kubectl reads is no candidate.

use probelint_yaml::load::{Limits, parse_stream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const ROUNDS: usize = 9;

/// A parser by name, and a run of it over one text: whether it read the text.
type Candidate = (&'static str, fn(&str) -> bool);

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: parse-candidates PATH...");
        return ExitCode::from(2);
    }
    let mut files = Vec::new();
    for path in &paths {
        if let Err(e) = collect(Path::new(path), &mut files) {
            eprintln!("parse-candidates: {path}: {e}");
            return ExitCode::from(2);
        }
    }
    files.sort();
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter_map(|f| std::fs::read_to_string(&f).ok().map(|t| (f, t)))
        .collect();
    let bytes: usize = texts.iter().map(|(_, t)| t.len()).sum();
    if texts.is_empty() {
        eprintln!("parse-candidates: no YAML files under {}", paths.join(" "));
        return ExitCode::from(2);
    }

    let candidates: [Candidate; 3] = [
        ("probelint-yaml (whole loader)", ours),
        ("saphyr-parser events", saphyr_events),
        ("rlsp-yaml-parser events", rlsp_events),
    ];
    for (name, parse) in &candidates {
        let refused: Vec<String> = texts
            .iter()
            .filter(|(_, t)| !parse(t))
            .map(|(f, _)| f.display().to_string())
            .collect();
        if !refused.is_empty() {
            println!(
                "{name}: refuses {} file(s): {}",
                refused.len(),
                refused.join(", ")
            );
        }
    }

    let mut seconds = vec![Vec::with_capacity(ROUNDS); candidates.len()];
    for _ in 0..ROUNDS {
        for (i, (_, parse)) in candidates.iter().enumerate() {
            let start = Instant::now();
            for (_, text) in &texts {
                std::hint::black_box(parse(std::hint::black_box(text)));
            }
            seconds[i].push(start.elapsed().as_secs_f64());
        }
    }
    let medians: Vec<f64> = seconds.iter_mut().map(|s| median(s)).collect();
    println!(
        "{} files, {:.2} MB, {ROUNDS} interleaved rounds, one thread, medians:",
        texts.len(),
        bytes as f64 / 1e6
    );
    for ((name, _), secs) in candidates.iter().zip(&medians) {
        println!(
            "  {name:<32} {:>8.2} ms  {:>7.1} MB/s  {:.2}x the whole loader's time",
            secs * 1e3,
            bytes as f64 / secs / 1e6,
            secs / medians[0]
        );
    }
    ExitCode::SUCCESS
}

fn ours(text: &str) -> bool {
    parse_stream(text.as_bytes(), &Limits::default()).is_ok()
}

fn saphyr_events(text: &str) -> bool {
    let mut parser = saphyr_parser::Parser::new_from_str(text);
    loop {
        match parser.next_event() {
            None | Some(Ok((saphyr_parser::Event::StreamEnd, _))) => return true,
            Some(Ok(event)) => {
                std::hint::black_box(event);
            }
            Some(Err(_)) => return false,
        }
    }
}

fn rlsp_events(text: &str) -> bool {
    for event in rlsp_yaml_parser::parse_events(text) {
        match event {
            Ok(event) => {
                std::hint::black_box(event);
            }
            Err(_) => return false,
        }
    }
    true
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            collect(&entry?.path(), files)?;
        }
    } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
        files.push(path.to_owned());
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
