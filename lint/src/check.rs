//! The check stage: each loaded file evaluated object by object and its findings placed in it,
//! in parallel; the few facts the cross-object rules need (so that an HPA in one file sees the
//! Deployment in another) are kept and judged once every file is done ([`finish`]).

use crate::input::{Origin, Pending};
use crate::load::{self, FoundObject, Loaded};
use crate::report::{InputError, LocatedFinding, Report, Skipped};
use probelint_policies::{ObjectFacts, Policy, evaluate_cross, evaluate_object};
use probelint_yaml::load::Limits;
use rayon::prelude::*;
use std::sync::Arc;

/// What the cross-object rules need of one object, with the place in its file where a finding
/// about it would point (located while the file's locations were at hand).
struct CrossEntry {
    facts: ObjectFacts,
    /// Each reportable pointer with its line and column; the document's start when none.
    places: Vec<(String, usize, usize)>,
}

/// One file, checked: everything the report needs of it, and nothing more. The objects and
/// their locations are dropped by the worker that parsed them, so memory follows the findings,
/// not the input.
pub struct Checked {
    name: String,
    origin: Origin,
    /// Kept when a finding (or a later cross-object finding, or `--fix`) may quote it.
    text: Option<Arc<str>>,
    /// Findings of the rules that judge each object by itself; `object_index` counts the
    /// objects of this file until [`finish`] makes it global.
    findings: Vec<LocatedFinding>,
    cross: Vec<CrossEntry>,
    objects: usize,
    errors: Vec<InputError>,
    skipped: Vec<Skipped>,
}

impl Checked {
    /// The file's name in output.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the file was read from.
    #[must_use]
    pub fn origin(&self) -> &Origin {
        &self.origin
    }
}

/// Which texts a checked file keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Texts {
    /// Only a text a finding may quote.
    Quoted,
    /// Every text (`--fix` edits them).
    All,
}

/// Evaluates a loaded file with every rule that judges an object by itself, and places each
/// finding in the file. `each` sees every object with its placed findings (`--fix` plans its
/// edits there) before the objects are dropped.
pub fn file(
    file: Loaded,
    policy: &Policy,
    texts: Texts,
    mut each: impl FnMut(&FoundObject, &[LocatedFinding]),
) -> Checked {
    let locate = |object: &FoundObject, pointer: &str| {
        file.locations[object.document].locate(&format!("{}{pointer}", object.prefix))
    };
    let place = |object: &FoundObject, finding: probelint_policies::Finding| {
        let span = locate(object, &finding.pointer);
        LocatedFinding {
            file: file.name.clone(),
            line: span.line,
            column: span.column,
            finding,
        }
    };
    let mut findings = Vec::new();
    let mut cross = Vec::new();
    for (index, object) in file.objects.iter().enumerate() {
        let evaluation = evaluate_object(&object.value, index, policy);
        if let Some(facts) = evaluation.facts {
            let mut places: Vec<(String, usize, usize)> = facts
                .reportable_pointers()
                .into_iter()
                .map(|p| {
                    let span = locate(object, &p);
                    (p, span.line, span.column)
                })
                .collect();
            if places.is_empty() {
                let span = file.locations[object.document].document_start();
                places.push((String::new(), span.line, span.column));
            }
            cross.push(CrossEntry { facts, places });
        }
        let start = findings.len();
        findings.extend(evaluation.findings.into_iter().map(|f| place(object, f)));
        for (pointer, lines) in &object.duplicate_keys {
            if let Some(f) = probelint_policies::duplicate_key_finding(
                &object.value,
                index,
                pointer,
                lines,
                policy,
            ) {
                findings.push(place(object, f));
            }
        }
        each(object, &findings[start..]);
    }
    let quoted = texts == Texts::All
        || !findings.is_empty()
        // A place with a pointer: a cross-object finding may quote its line.
        || cross
            .iter()
            .any(|c| c.places.iter().any(|(p, _, _)| !p.is_empty()));
    Checked {
        origin: file.origin,
        text: if quoted { file.text } else { None },
        objects: file.objects.len(),
        name: file.name,
        findings,
        cross,
        errors: file.errors,
        skipped: file.skipped,
    }
}

/// Judges the relations between the objects of every file (an HPA in one file scaling the
/// Deployment in another) and builds the sorted report. Objects are numbered in the order of
/// `files`, as [`probelint_policies::evaluate`] numbers the objects of one input.
pub fn finish(files: Vec<Checked>, policy: &Policy) -> Report {
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    let mut facts = Vec::new();
    let mut places = Vec::new();
    for mut file in files {
        let offset = report.objects;
        report.objects += file.objects;
        for mut located in file.findings {
            located.finding.object_index += offset;
            report.findings.push(located);
        }
        for mut entry in file.cross.drain(..) {
            entry.facts.index += offset;
            places.push((file.name.clone(), entry.places));
            facts.push(entry.facts);
        }
        report.errors.extend(file.errors);
        report.skipped.extend(file.skipped);
        if let Some(text) = file.text {
            report.sources.insert(file.name, text);
        }
    }
    for finding in evaluate_cross(&facts, policy) {
        // Indices grow with the files, so `facts` is sorted by them.
        let Ok(at) = facts.binary_search_by_key(&finding.object_index, |f| f.index) else {
            continue;
        };
        let (file, spots) = &places[at];
        let (_, line, column) = spots
            .iter()
            .find(|(p, _, _)| *p == finding.pointer)
            .unwrap_or(&spots[0]);
        let (file, line, column) = (file.clone(), *line, *column);
        report.findings.push(LocatedFinding {
            file,
            line,
            column,
            finding,
        });
    }
    report.sort();
    report
}

/// Checks sources with a policy: reading, parsing and evaluation run in parallel; the report's
/// order is deterministic.
pub fn run<S: Into<Pending> + Send>(sources: Vec<S>, policy: &Policy, limits: &Limits) -> Report {
    let files: Vec<Checked> = sources
        .into_par_iter()
        .map(|s| {
            let loaded = load::load(s.into().read(limits), limits);
            file(loaded, policy, Texts::Quoted, |_, _| {})
        })
        .collect();
    finish(files, policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Source;

    fn source(name: &str, text: &str) -> Source {
        Source::in_memory(name, text.as_bytes().to_vec())
    }

    const GPU: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llm}\nspec:\n  replicas: REPLICAS\n  template:\n    metadata: {labels: {app: llm}}\n    spec:\n      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.6.3\n          resources: {limits: {nvidia.com/gpu: 1}}\n";
    const SERVICE: &str =
        "apiVersion: v1\nkind: Service\nmetadata: {name: llm}\nspec: {ports: [{port: 80}]}\n";

    /// Memory follows the findings: a file's text is kept only when a finding may quote it,
    /// including a cross-object finding decided after the file was dropped; `--fix` keeps all.
    #[test]
    fn texts_are_kept_only_where_a_finding_may_quote_them() {
        let policy = Policy::default();
        let limits = Limits::default();
        let sources = || {
            vec![
                source("gpu.yaml", &GPU.replace("REPLICAS", "1")),
                source("service.yaml", SERVICE),
                source("replicated.yaml", &GPU.replace("REPLICAS", "3")),
            ]
        };
        let report = run(sources(), &policy, &limits);
        let kept: Vec<&str> = report.sources.keys().map(String::as_str).collect();
        assert_eq!(kept, ["gpu.yaml", "replicated.yaml"]);
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.file == "replicated.yaml" && f.finding.rule == "gpu-serving-without-pdb")
        );
        let all: Vec<Checked> = sources()
            .into_iter()
            .map(|s| file(load::load(s, &limits), &policy, Texts::All, |_, _| {}))
            .collect();
        assert_eq!(finish(all, &policy).sources.len(), 3);
    }
}
