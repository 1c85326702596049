//! `parse-candidates PATH...`: YAML parsers side by side on the same manifests, in one run, on
//! one thread. For each `.yaml`/`.yml` file under PATH (read once, before timing):
//!
//! - `probelint-yaml`: our whole loader (saphyr-parser's events, the tree with spans, YAML 1.1
//!   resolution, the limits): what `parse-only` and the linter pay per byte;
//! - `saphyr-parser events`: the event stream our loader is built on, drained;
//! - `rlsp-yaml-parser events`: a candidate event stream (issue 24), drained;
//! - `rlsp-yaml-parser loader`: that crate's own tree with spans (YAML 1.2 core schema, aliases
//!   kept), a data point for what a tree costs on top of its events; it is not our tree.
//!
//! Event rows also say events per second: each parser's node and document events (stream
//! start/end and rlsp's comment events left out, so the two counts measure the same thing), as
//! counted once before timing.
//!
//! The four are interleaved round by round (this machine is noisy) and each figure is the
//! median of the rounds. A file a parser refuses is counted and named, not timed away: a
//! faster parser that refuses manifests kubectl reads is no candidate.

use probelint_yaml::load::{Limits, parse_stream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const ROUNDS: usize = 9;

/// A parser by name, a run of it over one text (whether it read the text), and for event
/// streams a count of the events it yields.
type Candidate = (&'static str, fn(&str) -> bool, Option<fn(&str) -> usize>);

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

    let candidates: [Candidate; 4] = [
        ("probelint-yaml (whole loader)", ours, None),
        ("saphyr-parser events", saphyr_events, Some(saphyr_count)),
        ("rlsp-yaml-parser events", rlsp_events, Some(rlsp_count)),
        ("rlsp-yaml-parser loader", rlsp_loader, None),
    ];
    let events: Vec<Option<usize>> = candidates
        .iter()
        .map(|(_, _, count)| count.map(|count| texts.iter().map(|(_, t)| count(t)).sum()))
        .collect();
    for (name, parse, _) in &candidates {
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
        for (i, (_, parse, _)) in candidates.iter().enumerate() {
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
    for (((name, _, _), secs), count) in candidates.iter().zip(&medians).zip(&events) {
        let rate = count.map_or_else(String::new, |n| {
            format!("  {:>6.2} M events/s ({n} events)", n as f64 / secs / 1e6)
        });
        println!(
            "  {name:<32} {:>8.2} ms  {:>7.1} MB/s  {:.2}x the whole loader's time{rate}",
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

fn rlsp_loader(text: &str) -> bool {
    std::hint::black_box(rlsp_yaml_parser::load(text)).is_ok()
}

/// Node and document events only: what a tree is built from.
fn saphyr_count(text: &str) -> usize {
    use saphyr_parser::Event;
    saphyr_parser::Parser::new_from_str(text)
        .map_while(Result::ok)
        .filter(|(e, _)| !matches!(e, Event::StreamStart | Event::StreamEnd | Event::Nothing))
        .count()
}

/// As [`saphyr_count`]: comment events, which saphyr does not emit, are left out.
fn rlsp_count(text: &str) -> usize {
    use rlsp_yaml_parser::Event;
    rlsp_yaml_parser::parse_events(text)
        .map_while(Result::ok)
        .filter(|(e, _)| {
            !matches!(
                e,
                Event::StreamStart | Event::StreamEnd | Event::Comment { .. }
            )
        })
        .count()
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
