//! From files to a [`Report`]: each file is read, parsed, evaluated object by object and its
//! findings placed in it, in parallel; the few facts the cross-object rules need (so that an HPA
//! in one file sees the Deployment in another) are kept and judged once every file is done.

use crate::atomic::FileStamp;
use crate::inputs::{Input, describe_io, is_helm_template};
use crate::report::{InputError, LocatedFinding, Report, Skipped};
use crate::yaml::{self, Limits, Locations};
use probelint_policies::{Applicability, ObjectFacts, Policy, evaluate_cross, evaluate_object};
use rayon::prelude::*;
use serde_json::Value;
use std::io::Read;
use std::sync::Arc;

/// A source to lint: its name in output and its bytes (or why they could not be read).
pub struct Source {
    pub name: String,
    pub input: Input,
    pub bytes: Result<Vec<u8>, String>,
    /// What the file was when `bytes` were read (a file read from disk), so that `--fix` can
    /// tell whether it changed before replacing it.
    pub stamp: Option<FileStamp>,
}

/// Reads an input, refusing files over the size limit before reading them.
pub fn read_input(input: &Input, limits: &Limits) -> Source {
    let name = input.display_name();
    let (bytes, stamp) = match input {
        Input::Stdin => (
            match read_capped(std::io::stdin().lock(), limits.max_file_bytes, 0) {
                Ok(Some(bytes)) => Ok(bytes),
                Ok(None) => Err(format!(
                    "standard input is longer than the {}-byte limit",
                    limits.max_file_bytes
                )),
                Err(e) => Err(format!("cannot read standard input: {}", describe_io(&e))),
            },
            None,
        ),
        Input::File(path) => match read_file(path, limits.max_file_bytes) {
            Ok((bytes, stamp)) => (Ok(bytes), Some(stamp)),
            Err(e) => (Err(e), None),
        },
    };
    Source {
        name,
        input: input.clone(),
        bytes,
        stamp,
    }
}

/// Reads a regular file of at most `max` bytes. Anything else is refused before it is opened:
/// opening a named pipe without a writer would block the whole run forever, and a device may
/// never end. A file over the limit is refused by its size, without reading it; the `take` still
/// bounds a file that grows while it is read. The stamp is the open file's, taken after reading.
fn read_file(path: &std::path::Path, max: usize) -> Result<(Vec<u8>, FileStamp), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read file: {}", describe_io(&e)))?;
    if !meta.is_file() {
        return Err(format!(
            "not a regular file ({}); to lint a command's output, pipe it to `probelint -`",
            file_kind(&meta.file_type())
        ));
    }
    if meta.len() > max as u64 {
        return Err(format!(
            "the file is {} bytes, more than the {max}-byte limit",
            meta.len()
        ));
    }
    let read = std::fs::File::open(path).and_then(|mut f| {
        let bytes = read_capped(&mut f, max, meta.len() as usize)?;
        Ok((bytes, FileStamp::of(&f.metadata()?)))
    });
    match read {
        Ok((Some(bytes), stamp)) => Ok((bytes, stamp)),
        // It grew while it was read.
        Ok((None, _)) => Err(format!("the file is more than the {max}-byte limit")),
        Err(e) => Err(format!("cannot read file: {}", describe_io(&e))),
    }
}

/// Reads at most `max` bytes; `None` when there is more. The byte past the limit is read on
/// its own, so the buffer never grows past `max` (a stream one byte too long would otherwise
/// double it). `expected` (a file's size) sizes the buffer up front.
fn read_capped(
    mut reader: impl Read,
    max: usize,
    expected: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(expected.min(max))
        .map_err(|_| std::io::ErrorKind::OutOfMemory)?;
    (&mut reader).take(max as u64).read_to_end(&mut buf)?;
    if buf.len() < max {
        return Ok(Some(buf));
    }
    let mut one = [0u8; 1];
    loop {
        match reader.read(&mut one) {
            Ok(0) => return Ok(Some(buf)),
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Something to lint: a source already in memory, or an input still to be read (read by the
/// worker that parses it, so reading is as parallel as parsing).
pub enum Pending {
    Source(Source),
    Input(Input),
}

impl From<Source> for Pending {
    fn from(source: Source) -> Self {
        Pending::Source(source)
    }
}

impl From<Input> for Pending {
    fn from(input: Input) -> Self {
        Pending::Input(input)
    }
}

impl Pending {
    fn read(self, limits: &Limits) -> Source {
        match self {
            Pending::Source(source) => source,
            Pending::Input(input) => read_input(&input, limits),
        }
    }
}

/// One Kubernetes object found in a file.
struct FoundObject {
    value: Value,
    /// Index into the file's documents' locations.
    document: usize,
    /// Pointer prefix of the object inside its document (`/items/3` inside a `List`).
    prefix: String,
}

/// A parsed file, before evaluation.
struct ParsedFile {
    name: String,
    input: Input,
    stamp: Option<FileStamp>,
    text: Option<Arc<str>>,
    locations: Vec<Locations>,
    objects: Vec<FoundObject>,
    errors: Vec<InputError>,
    skipped: Vec<Skipped>,
}

const HELM_HINT: &str =
    "Helm template: render it first, e.g. `helm template RELEASE CHART | probelint -`";

fn parse_source(source: Source, limits: &Limits) -> ParsedFile {
    let mut file = ParsedFile {
        name: source.name,
        input: source.input.clone(),
        stamp: source.stamp,
        text: None,
        locations: Vec::new(),
        objects: Vec::new(),
        errors: Vec::new(),
        skipped: Vec::new(),
    };
    let bytes = match source.bytes {
        Ok(bytes) => bytes,
        Err(message) => {
            file.errors.push(InputError {
                file: file.name.clone(),
                line: None,
                column: None,
                message,
            });
            return file;
        }
    };
    if let Input::File(path) = &source.input
        && is_helm_template(path)
    {
        file.skipped.push(Skipped {
            file: file.name.clone(),
            reason: HELM_HINT.to_owned(),
        });
        return file;
    }
    let stream = yaml::parse_stream_partial(&bytes, limits);
    if let Some(error) = &stream.error {
        let templated = std::str::from_utf8(&bytes).is_ok_and(|t| t.contains("{{"));
        if templated {
            file.skipped.push(Skipped {
                file: file.name.clone(),
                reason: format!("{HELM_HINT} (not valid YAML: {error})"),
            });
            return file;
        }
        file.errors.push(InputError {
            file: file.name.clone(),
            line: Some(error.line),
            column: Some(error.column),
            message: error.message.clone(),
        });
    }
    // Keep the text for snippets only when it is text; the parser already said if it is not.
    file.text = String::from_utf8(bytes).ok().map(Arc::from);
    for (index, document) in stream.documents.into_iter().enumerate() {
        let line = document.line;
        file.locations.push(document.locations);
        collect_objects(document.value, index, line, &mut file);
    }
    file
}

/// Adds a document's Kubernetes objects: the document itself, or the items of a `List`.
fn collect_objects(value: Value, document: usize, line: usize, file: &mut ParsedFile) {
    for (prefix, object) in objects_in(value) {
        match object {
            Some(value) => file.objects.push(FoundObject {
                value,
                document,
                prefix,
            }),
            None => file.skipped.push(Skipped {
                file: file.name.clone(),
                reason: format!(
                    "document at line {line} is not a Kubernetes object (no apiVersion/kind)"
                ),
            }),
        }
    }
}

/// The Kubernetes objects of a parsed document, in order: the document itself, or the items of
/// a `List` (nested lists too), each with its pointer prefix in the document (`/items/3`).
/// `None` stands for a document or item that is not an object (no string apiVersion and kind).
pub fn objects_in(document: Value) -> Vec<(String, Option<Value>)> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), document)];
    while let Some((prefix, value)) = stack.pop() {
        let kind = value.get("kind").and_then(Value::as_str);
        if !(value.get("apiVersion").is_some_and(Value::is_string) && kind.is_some()) {
            out.push((prefix, None));
            continue;
        }
        let is_list = kind.is_some_and(|k| k.ends_with("List"))
            && value.get("items").is_some_and(Value::is_array);
        match (is_list, value) {
            (true, Value::Object(mut map)) => {
                if let Some(Value::Array(items)) = map.remove("items") {
                    let at = stack.len();
                    stack.extend(
                        items
                            .into_iter()
                            .enumerate()
                            .map(|(i, item)| (format!("{prefix}/items/{i}"), item)),
                    );
                    // Popped from the end: reverse so items come out in file order.
                    stack[at..].reverse();
                }
            }
            (_, value) => out.push((prefix, Some(value))),
        }
    }
    out
}

/// What the cross-object rules need of one object, with the place in its file where a finding
/// about it would point (located while the file's locations were at hand).
struct CrossEntry {
    facts: ObjectFacts,
    /// Each reportable pointer with its line and column; the document's start when none.
    places: Vec<(String, usize, usize)>,
}

/// One file, evaluated: everything the report needs of it, and nothing more. The objects and
/// their locations are dropped by the worker that parsed them, so memory follows the findings,
/// not the input.
struct FileResult {
    name: String,
    /// Kept when a finding (or a later cross-object finding, or `--fix`) may quote it.
    text: Option<Arc<str>>,
    /// Findings of the rules that judge each object by itself; `object_index` counts the
    /// objects of this file until [`finish`] makes it global.
    findings: Vec<LocatedFinding>,
    cross: Vec<CrossEntry>,
    objects: usize,
    errors: Vec<InputError>,
    skipped: Vec<Skipped>,
    fix: Option<FileFix>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Lint,
    /// Also plan `--fix`'s text edits (and keep every text: the fixed files are re-linted
    /// together with the others).
    Fix,
}

fn evaluate_file(file: ParsedFile, policy: &Policy, limits: &Limits, mode: Mode) -> FileResult {
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
    let mut patches = Vec::new();
    let mut fixed_findings = Vec::new();
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
        let planned = (mode == Mode::Fix && file.text.is_some())
            .then(|| {
                probelint_policies::fix::merge_fixes(&evaluation.findings, Applicability::Safe)
            })
            .filter(|(patch, _)| !patch.0.is_empty());
        let start = findings.len();
        findings.extend(evaluation.findings.into_iter().map(|f| place(object, f)));
        if let Some((patch, applied)) = planned {
            patches.push((object.document, object.prefix.clone(), patch.0));
            // A set, not a scan of `applied` per finding: an object with thousands of fixable
            // containers has thousands of each.
            let applied: std::collections::HashSet<(&str, Option<&str>)> = applied
                .iter()
                .map(|a| (a.rule.as_str(), a.container.as_deref()))
                .collect();
            fixed_findings.extend(
                findings[start..]
                    .iter()
                    .filter(|l| {
                        applied.contains(&(l.finding.rule.as_str(), l.finding.container.as_deref()))
                    })
                    .cloned(),
            );
        }
    }
    let fix = match (&file.text, patches.is_empty()) {
        (Some(text), false) => {
            let object_patches: Vec<crate::textfix::ObjectPatch<'_>> = patches
                .iter()
                .map(|(document, prefix, ops)| crate::textfix::ObjectPatch {
                    document: *document,
                    prefix: prefix.clone(),
                    ops,
                })
                .collect();
            Some(FileFix {
                name: file.name.clone(),
                path: match &file.input {
                    Input::File(path) => Some(path.clone()),
                    Input::Stdin => None,
                },
                original: text.clone(),
                stamp: file.stamp,
                fixed: crate::textfix::apply(text, &object_patches, limits)
                    .map_err(|e| e.to_string()),
                fixed_findings,
            })
        }
        _ => None,
    };
    let quoted = mode == Mode::Fix
        || !findings.is_empty()
        // A place with a pointer: a cross-object finding may quote its line.
        || cross
            .iter()
            .any(|c| c.places.iter().any(|(p, _, _)| !p.is_empty()));
    FileResult {
        text: if quoted { file.text } else { None },
        objects: file.objects.len(),
        name: file.name,
        findings,
        cross,
        errors: file.errors,
        skipped: file.skipped,
        fix,
    }
}

/// Reads, parses and evaluates every file in parallel, then judges the relations between
/// objects (an HPA in one file scaling the Deployment in another) and builds the report.
fn run<S: Into<Pending> + Send>(
    sources: Vec<S>,
    policy: &Policy,
    limits: &Limits,
    mode: Mode,
) -> (Report, Vec<FileFix>) {
    let files: Vec<FileResult> = sources
        .into_par_iter()
        .map(|s| {
            let parsed = parse_source(s.into().read(limits), limits);
            evaluate_file(parsed, policy, limits, mode)
        })
        .collect();
    finish(files, policy)
}

fn finish(files: Vec<FileResult>, policy: &Policy) -> (Report, Vec<FileFix>) {
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    // Object indices become positions in the whole input, as `evaluate` numbers them.
    let mut facts = Vec::new();
    let mut places = Vec::new();
    let mut fixes = Vec::new();
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
        fixes.extend(file.fix);
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
    (report, fixes)
}

/// Lints sources with a policy. Reading, parsing and evaluation run in parallel; output order is
/// deterministic.
pub fn lint_sources<S: Into<Pending> + Send>(
    sources: Vec<S>,
    policy: &Policy,
    limits: &Limits,
) -> Report {
    run(sources, policy, limits, Mode::Lint).0
}

/// What `--fix` did to one file.
#[derive(Debug)]
pub struct FileFix {
    pub name: String,
    pub path: Option<std::path::PathBuf>,
    pub original: Arc<str>,
    /// What the file was when `original` was read.
    pub stamp: Option<FileStamp>,
    /// The fixed text, or why the file could not be fixed (it is then left untouched).
    pub fixed: Result<String, String>,
    /// The findings the new text fixes, located in the original file.
    pub fixed_findings: Vec<LocatedFinding>,
}

/// Computes the safe fixes of every file as text edits that keep everything else byte-for-byte.
/// Returns the report of the original files and one [`FileFix`] per file that has fixes.
pub fn plan_fixes<S: Into<Pending> + Send>(
    sources: Vec<S>,
    policy: &Policy,
    limits: &Limits,
) -> (Report, Vec<FileFix>) {
    run(sources, policy, limits, Mode::Fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str, text: &str) -> Source {
        Source {
            name: name.to_owned(),
            input: Input::File(name.into()),
            bytes: Ok(text.as_bytes().to_vec()),
            stamp: None,
        }
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
        let report = lint_sources(sources(), &policy, &limits);
        let kept: Vec<&str> = report.sources.keys().map(String::as_str).collect();
        assert_eq!(kept, ["gpu.yaml", "replicated.yaml"]);
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.file == "replicated.yaml" && f.finding.rule == "gpu-serving-without-pdb")
        );
        let (report, _) = plan_fixes(sources(), &policy, &limits);
        assert_eq!(report.sources.len(), 3);
    }
}
