//! The one loader: a source's bytes parsed into documents, `kind: List`s expanded into their
//! items, every object with the document it is in and its pointer there, so that a finding
//! about it can be placed in the file. `check`, `--fix`, `mutate` and `simulate` all read
//! manifests through it, so they agree on what a file holds.

use crate::atomic::FileStamp;
use crate::error::Error;
use crate::input::{Input, Origin, Source, display_path, helm_chart_of, read_input};
use crate::report::{InputError, SkipKind, Skipped, Stage};
use probelint_yaml::load::{self as yaml, Limits, Locations, YamlError};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// One Kubernetes object found in a file.
pub struct FoundObject {
    pub value: Value,
    /// Index into the file's documents' locations.
    pub document: usize,
    /// Pointer prefix of the object inside its document (`/items/3` inside a `List`).
    pub prefix: String,
    /// Each key written more than once in one of the object's mappings: the pointer (within the
    /// object) of the value read, the last, and every line the key is written on.
    pub duplicate_keys: Vec<(String, Vec<usize>)>,
}

/// A source, parsed: what the check stage needs of it.
pub struct Loaded {
    pub name: String,
    pub origin: Origin,
    pub stamp: Option<FileStamp>,
    /// The text, when it is text (kept for snippets and `--fix`).
    pub text: Option<Arc<str>>,
    /// Where each node of each document is written, by document.
    pub locations: Vec<Locations>,
    pub objects: Vec<FoundObject>,
    pub errors: Vec<InputError>,
    pub skipped: Vec<Skipped>,
}

const KUSTOMIZE_HINT: &str = "a kustomization: the overlay it renders may differ from the files \
     linted here (a patch can change or delete probes); lint it rendered with \
     `probelint --kustomize DIR`";

const HELM_HINT: &str =
    "Helm template: render it first, e.g. `helm template RELEASE CHART | probelint -`";

/// Parses a source for the linter: the healthy documents of a file whose later part is broken
/// are still checked (the break is an error), Helm templates are skipped with a hint, and a
/// document that is not a Kubernetes object is skipped with its line.
pub fn load(source: Source, limits: &Limits) -> Loaded {
    let mut file = Loaded {
        name: source.name,
        origin: source.origin,
        stamp: source.stamp,
        text: None,
        locations: Vec::new(),
        objects: Vec::new(),
        errors: Vec::new(),
        skipped: Vec::new(),
    };
    let bytes = match source.bytes {
        Ok(bytes) => bytes,
        Err(error) => {
            file.errors.push(InputError {
                file: file.name.clone(),
                line: None,
                column: None,
                message: error.to_string(),
                stage: Stage::Read,
            });
            return file;
        }
    };
    if let Origin::File(path) = &file.origin
        && let Some(chart) = helm_chart_of(path)
    {
        file.skipped.push(Skipped {
            file: file.name.clone(),
            reason: HELM_HINT.to_owned(),
            kind: SkipKind::HelmTemplate {
                chart: Some(display_path(chart)),
            },
        });
        return file;
    }
    if let Origin::File(path) = &file.origin
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| crate::input::kustomize::KUSTOMIZATION_NAMES.contains(&n))
    {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => display_path(dir),
            _ => ".".to_owned(),
        };
        file.skipped.push(Skipped {
            file: file.name.clone(),
            reason: KUSTOMIZE_HINT.to_owned(),
            kind: SkipKind::Kustomization { dir },
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
                kind: SkipKind::HelmTemplate { chart: None },
            });
            return file;
        }
        file.errors.push(InputError {
            file: file.name.clone(),
            line: Some(error.line),
            column: Some(error.column),
            message: error.message.clone(),
            stage: Stage::Read,
        });
    }
    // Read as kubectl reads them, and said: a reviewer reading the file as YAML sees other
    // documents than the cluster gets.
    // A key written twice is read as kubectl reads it (the last value) and reported as a
    // finding of the object (duplicate-key), not as a file that could not be read.
    for divergence in stream
        .divergences
        .iter()
        .filter(|d| d.kind != yaml::YamlErrorKind::DuplicateKey)
    {
        file.errors.push(InputError {
            file: file.name.clone(),
            line: Some(divergence.line),
            column: Some(divergence.column),
            message: divergence.message.clone(),
            stage: Stage::Read,
        });
    }
    // Keep the text for snippets only when it is text; the parser already said if it is not.
    file.text = String::from_utf8(bytes).ok().map(Arc::from);
    for (index, document) in stream.documents.into_iter().enumerate() {
        let line = document.line;
        file.locations.push(document.locations);
        let mut duplicates: Vec<(String, usize, Vec<usize>)> = Vec::new();
        for d in &document.duplicates {
            match duplicates
                .iter_mut()
                .find(|(p, first, _)| *p == d.pointer && *first == d.first.line)
            {
                Some((_, _, lines)) => lines.push(d.repeat.line),
                None => duplicates.push((
                    d.pointer.clone(),
                    d.first.line,
                    vec![d.first.line, d.repeat.line],
                )),
            }
        }
        for (prefix, object) in objects_in(document.value) {
            match object {
                Some(value) => file.objects.push(FoundObject {
                    duplicate_keys: duplicates
                        .iter()
                        .filter_map(|(p, _, lines)| {
                            let inner = p.strip_prefix(prefix.as_str())?;
                            (inner.is_empty() || inner.starts_with('/'))
                                .then(|| (inner.to_owned(), lines.clone()))
                        })
                        .collect(),
                    value,
                    document: index,
                    prefix,
                }),
                None => file.skipped.push(Skipped {
                    file: file.name.clone(),
                    reason: format!(
                        "document at line {line} is not a Kubernetes object (no apiVersion/kind)"
                    ),
                    kind: SkipKind::NotKubernetes,
                }),
            }
        }
    }
    file
}

/// The objects of a whole file, for the commands that take one file and fail on any problem in
/// it (`mutate`, `simulate`): every document must parse; documents that are not Kubernetes
/// objects are left out, `List`s give their items, as the webhook sees them one by one.
///
/// # Errors
///
/// The first parse error of the file, or the first line that kubectl reads as a document
/// separator where YAML does not (the two readings of the file differ).
pub fn objects(bytes: &[u8], limits: &Limits) -> Result<Vec<Value>, YamlError> {
    let stream = yaml::parse_stream_partial(bytes, limits);
    if let Some(error) = stream.error.or(stream.divergences.into_iter().next()) {
        return Err(error);
    }
    Ok(stream
        .documents
        .into_iter()
        .flat_map(|d| objects_in(d.value))
        .filter_map(|(_, object)| object)
        .collect())
}

/// The objects of the one manifest `mutate` and `simulate` read (`-` is standard input), with
/// the name it is shown by; a `kind: List` gives its items.
///
/// # Errors
///
/// A file that cannot be read, or that does not parse.
pub fn one_manifest(file: &str, limits: &Limits) -> Result<(String, Vec<Value>), Error> {
    let input = if file == "-" {
        Input::Stdin
    } else {
        Input::File(PathBuf::from(file))
    };
    let source = read_input(&input, limits);
    let name = source.name;
    let bytes = source.bytes.map_err(|error| Error::Read {
        name: name.clone(),
        error,
    })?;
    match objects(&bytes, limits) {
        Ok(objects) => Ok((name, objects)),
        Err(error) => Err(Error::Parse { name, error }),
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
