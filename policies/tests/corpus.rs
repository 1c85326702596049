//! The engine over every real-world manifest in `tests/corpus/real/`: it never panics, and its
//! findings are stable (a snapshot a reviewer reads when rules change).

use probelint_policies::{Policy, evaluate};
use std::fmt::Write;
use std::path::PathBuf;

fn corpus_files() -> Vec<PathBuf> {
    probelint_testkit::corpus::real_manifests()
}

#[test]
fn engine_never_panics_and_findings_are_stable_on_the_real_corpus() {
    let files = corpus_files();
    assert!(files.len() >= 100, "corpus has {} files", files.len());
    let policy = Policy::default();
    let mut out = String::new();
    let mut total = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).expect("corpus file is UTF-8");
        // Read as the CLI reads it (YAML 1.1), so the engine judges the manifest users lint.
        let docs: Vec<serde_json::Value> = match probelint_testkit::yaml::try_objects(&text) {
            Ok(docs) => docs
                .into_iter()
                .filter(|d: &serde_json::Value| d.is_object())
                .collect(),
            Err(_) => {
                writeln!(out, "{name}: (does not parse)").unwrap();
                continue;
            }
        };
        let findings = evaluate(&docs, &policy);
        total += findings.len();
        writeln!(
            out,
            "{name}: {} objects, {} findings",
            docs.len(),
            findings.len()
        )
        .unwrap();
        for f in findings {
            // The load time a finding rests on, so that a reviewer sees which errors have evidence.
            let load = f
                .load
                .as_ref()
                .map(|l| format!(" [load {}]", l.short()))
                .unwrap_or_default();
            writeln!(
                out,
                "  {} {} {} {} {}{load}",
                f.severity,
                f.rule,
                f.object,
                f.container.as_deref().unwrap_or("-"),
                f.pointer
            )
            .unwrap();
        }
    }
    assert!(
        total > 100,
        "the corpus is full of real mistakes; found only {total}"
    );
    insta::assert_snapshot!(out);
}
