//! From files to a [`Report`]: read and parse in parallel, evaluate every object together (so
//! that an HPA in one file sees the Deployment in another), then place each finding in its file.

use crate::inputs::{Input, describe_io, is_helm_template};
use crate::report::{InputError, LocatedFinding, Report, Skipped};
use crate::yaml::{self, Limits, Locations};
use probelint_policies::{Applicability, Policy, evaluate};
use rayon::prelude::*;
use serde_json::Value;
use std::io::Read;
use std::sync::Arc;

/// A source to lint: its name in output and its bytes (or why they could not be read).
pub struct Source {
    pub name: String,
    pub input: Input,
    pub bytes: Result<Vec<u8>, String>,
}

/// Reads an input, refusing files over the size limit before reading them.
pub fn read_input(input: &Input, limits: &Limits) -> Source {
    let name = input.display_name();
    let cap = limits.max_file_bytes as u64 + 1;
    let bytes = match input {
        Input::Stdin => {
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .take(cap)
                .read_to_end(&mut buf)
                .map(|_| buf)
                .map_err(|e| format!("cannot read standard input: {}", describe_io(&e)))
        }
        Input::File(path) => read_file(path, limits.max_file_bytes),
    };
    Source {
        name,
        input: input.clone(),
        bytes,
    }
}

/// Reads a regular file of at most `max` bytes. Anything else is refused before it is opened:
/// opening a named pipe without a writer would block the whole run forever, and a device may
/// never end. A file over the limit is refused by its size, without reading it; the `take` still
/// bounds a file that grows while it is read.
fn read_file(path: &std::path::Path, max: usize) -> Result<Vec<u8>, String> {
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
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max as u64 + 1).read_to_end(&mut buf))
        .map_err(|e| format!("cannot read file: {}", describe_io(&e)))?;
    Ok(buf)
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
        collect_objects(document.value, index, String::new(), line, &mut file);
    }
    file
}

/// Adds a document's Kubernetes objects: the document itself, or the items of a `List`.
fn collect_objects(
    value: Value,
    document: usize,
    prefix: String,
    line: usize,
    file: &mut ParsedFile,
) {
    let is_object = value.get("apiVersion").is_some_and(Value::is_string)
        && value.get("kind").is_some_and(Value::is_string);
    if !is_object {
        file.skipped.push(Skipped {
            file: file.name.clone(),
            reason: format!(
                "document at line {line} is not a Kubernetes object (no apiVersion/kind)"
            ),
        });
        return;
    }
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k == "List" || k.ends_with("List"))
        && value.get("items").is_some_and(Value::is_array);
    if !is_list {
        file.objects.push(FoundObject {
            value,
            document,
            prefix,
        });
        return;
    }
    let Value::Object(mut map) = value else {
        return;
    };
    if let Some(Value::Array(items)) = map.remove("items") {
        for (i, item) in items.into_iter().enumerate() {
            collect_objects(item, document, format!("{prefix}/items/{i}"), line, file);
        }
    }
}

/// Everything read and evaluated in one run, before it is turned into a [`Report`].
struct Evaluated {
    files: Vec<ParsedFile>,
    /// For each evaluated object (by `Finding::object_index`): its file and index in that file.
    origin: Vec<(usize, usize)>,
    findings: Vec<probelint_policies::Finding>,
    objects: usize,
}

fn evaluate_sources(sources: Vec<Source>, policy: &Policy, limits: &Limits) -> Evaluated {
    let mut files: Vec<ParsedFile> = sources
        .into_par_iter()
        .map(|s| parse_source(s, limits))
        .collect();
    let mut objects = Vec::new();
    let mut origin = Vec::new();
    for (file_index, file) in files.iter_mut().enumerate() {
        for (object_index, object) in file.objects.iter_mut().enumerate() {
            // Moved out for evaluation and put back after, so fixes can see the originals.
            objects.push(std::mem::take(&mut object.value));
            origin.push((file_index, object_index));
        }
    }
    let findings = evaluate(&objects, policy);
    for (value, &(file_index, object_index)) in objects.into_iter().zip(&origin) {
        files[file_index].objects[object_index].value = value;
    }
    Evaluated {
        objects: origin.len(),
        files,
        origin,
        findings,
    }
}

fn into_report(evaluated: Evaluated) -> Report {
    let Evaluated {
        files,
        origin,
        findings,
        objects,
    } = evaluated;
    let mut report = Report {
        files: files.len(),
        objects,
        ..Report::default()
    };
    for finding in findings {
        let Some(&(file_index, object_index)) = origin.get(finding.object_index) else {
            continue;
        };
        let file = &files[file_index];
        let object = &file.objects[object_index];
        let span = file.locations[object.document]
            .locate(&format!("{}{}", object.prefix, finding.pointer));
        report.findings.push(LocatedFinding {
            file: file.name.clone(),
            line: span.line,
            column: span.column,
            finding,
        });
    }
    for file in files {
        report.errors.extend(file.errors);
        report.skipped.extend(file.skipped);
        if let Some(text) = file.text {
            report.sources.insert(file.name, text);
        }
    }
    report.sort();
    report
}

/// Lints sources with a policy. Parsing runs in parallel; output order is deterministic.
pub fn lint_sources(sources: Vec<Source>, policy: &Policy, limits: &Limits) -> Report {
    into_report(evaluate_sources(sources, policy, limits))
}

/// What `--fix` did to one file.
#[derive(Debug)]
pub struct FileFix {
    pub name: String,
    pub path: Option<std::path::PathBuf>,
    pub original: Arc<str>,
    /// The fixed text, or why the file could not be fixed (it is then left untouched).
    pub fixed: Result<String, String>,
    /// The findings the new text fixes, located in the original file.
    pub fixed_findings: Vec<LocatedFinding>,
}

/// Computes the safe fixes of every file as text edits that keep everything else byte-for-byte.
/// Returns the report of the original files and one [`FileFix`] per file that has fixes.
pub fn plan_fixes(
    sources: Vec<Source>,
    policy: &Policy,
    limits: &Limits,
) -> (Report, Vec<FileFix>) {
    let evaluated = evaluate_sources(sources, policy, limits);
    let mut plans = Vec::new();
    for (file_index, file) in evaluated.files.iter().enumerate() {
        let Some(text) = &file.text else { continue };
        let path = match &file.input {
            Input::File(path) => Some(path.clone()),
            Input::Stdin => None,
        };
        let mut patches = Vec::new();
        let mut fixed_findings = Vec::new();
        for (object_index, object) in file.objects.iter().enumerate() {
            let findings: Vec<_> = evaluated
                .findings
                .iter()
                .filter(|f| {
                    evaluated.origin.get(f.object_index) == Some(&(file_index, object_index))
                })
                .cloned()
                .collect();
            let (patch, applied) =
                probelint_policies::fix::merge_fixes(&findings, Applicability::Safe);
            if patch.0.is_empty() {
                continue;
            }
            for f in findings.iter().filter(|f| {
                applied
                    .iter()
                    .any(|a| a.rule == f.rule && a.container == f.container)
            }) {
                let span = file.locations[object.document]
                    .locate(&format!("{}{}", object.prefix, f.pointer));
                fixed_findings.push(LocatedFinding {
                    file: file.name.clone(),
                    line: span.line,
                    column: span.column,
                    finding: f.clone(),
                });
            }
            patches.push((object.document, object.prefix.clone(), patch.0));
        }
        if patches.is_empty() {
            continue;
        }
        let object_patches: Vec<crate::textfix::ObjectPatch<'_>> = patches
            .iter()
            .map(|(document, prefix, ops)| crate::textfix::ObjectPatch {
                document: *document,
                prefix: prefix.clone(),
                ops,
            })
            .collect();
        let fixed = crate::textfix::apply(text, &object_patches, limits).map_err(|e| e.to_string());
        plans.push(FileFix {
            name: file.name.clone(),
            path,
            original: text.clone(),
            fixed,
            fixed_findings,
        });
    }
    (into_report(evaluated), plans)
}
