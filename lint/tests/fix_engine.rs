//! The engine's fixes written into manifest text by the YAML patcher (`probelint --fix` minus
//! the file handling): on a real deployment, on every file of the real corpus, and on a bundle of
//! many documents. The patcher's own tests (`yaml/src/patch/tests.rs`) build their operations by
//! hand; these use the rules' fixes, so they live with the crate that joins the two.

use json_patch::PatchOperation;
use probelint_testkit::text::changed_lines;
use probelint_yaml::load::{Document, Limits, parse_stream};
use probelint_yaml::patch::{ObjectPatch, apply};
use serde_json::Value;
use similar::TextDiff;

fn fix(text: &str, ops: &[PatchOperation]) -> String {
    let patch = ObjectPatch {
        document: 0,
        prefix: String::new(),
        ops,
    };
    match apply(text, &[patch], &Limits::default()) {
        Ok(out) => out,
        Err(e) => panic!("fix failed: {e}\n--- text:\n{text}"),
    }
}

#[test]
fn the_engine_fixes_a_real_deployment() {
    let text = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm   # OpenAI-compatible server
          image: vllm/vllm-openai:v0.6.0
          args: [\"--model\", \"meta-llama/Llama-3-8B\"]
          livenessProbe:
            httpGet:
              path: /health
              port: 8000
          readinessProbe:
            tcpSocket:
              port: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
";
    let docs = parse_stream(text.as_bytes(), &Limits::default()).unwrap_or_default();
    let object = docs.first().map(|d| d.value.clone()).unwrap_or_default();
    let mutation = probelint_policies::mutate(&object, &probelint_policies::Policy::default());
    assert!(
        !mutation.patch.0.is_empty(),
        "the engine has fixes for this"
    );
    let out = fix(text, &mutation.patch.0);
    let (removed, _) = changed_lines(text, &out);
    assert!(
        removed.iter().all(|&l| (16..=17).contains(&l)),
        "only the tcpSocket lines change:\n{}",
        TextDiff::from_lines(text, &out).unified_diff()
    );
    let fixed = parse_stream(out.as_bytes(), &Limits::default()).unwrap_or_default();
    let again = probelint_policies::mutate(
        &fixed.first().map(|d| d.value.clone()).unwrap_or_default(),
        &probelint_policies::Policy::default(),
    );
    assert!(again.patch.0.is_empty(), "fixed text needs no more fixes");
}

// ---------------------------------------------------------------------------------------------
// The real corpus

/// The objects of a document as the CLI sees them: the document, or the items of a `List`.
fn objects(value: &Value) -> Vec<(String, &Value)> {
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    match value.get("items").and_then(Value::as_array) {
        Some(items) if is_list => items
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("/items/{i}"), item))
            .collect(),
        _ => vec![(String::new(), value)],
    }
}

fn corpus_files() -> Vec<std::path::PathBuf> {
    probelint_testkit::corpus::real_manifests()
}

/// The 0-based lines of `text` that `op` may legitimately change: a replaced or removed node's
/// lines, from its key (or `-`) to the end of its value.
fn touched_lines(
    doc: &Document,
    text: &str,
    full_path: &str,
) -> Option<std::ops::RangeInclusive<usize>> {
    let loc = doc.locations.get(full_path)?;
    let start = loc.key.or(loc.item).map_or(loc.value.start, |s| s.start);
    let line = |offset: usize| text.get(..offset).map_or(0, |t| t.matches('\n').count());
    Some(line(start)..=line(loc.value.end.max(start + 1) - 1))
}

#[test]
fn every_fix_in_the_real_corpus_applies_or_is_refused_clearly() {
    let files = corpus_files();
    assert!(files.len() >= 100, "corpus has {} files", files.len());
    let policy = probelint_policies::Policy::default();
    let limits = Limits::default();
    let (mut parsed, mut with_fixes, mut fixed_files, mut objects_fixed, mut ops_total) =
        (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok(docs) = parse_stream(text.as_bytes(), &limits) else {
            continue;
        };
        parsed += 1;
        let mut patches: Vec<(usize, String, Vec<PatchOperation>)> = Vec::new();
        for (d, doc) in docs.iter().enumerate() {
            for (prefix, object) in objects(&doc.value) {
                if !object.is_object() {
                    continue;
                }
                let mutation = probelint_policies::mutate(object, &policy);
                if !mutation.patch.0.is_empty() {
                    patches.push((d, prefix, mutation.patch.0));
                }
            }
        }
        if patches.is_empty() {
            continue;
        }
        with_fixes += 1;
        let object_patches: Vec<ObjectPatch<'_>> = patches
            .iter()
            .map(|(d, prefix, ops)| ObjectPatch {
                document: *d,
                prefix: prefix.clone(),
                ops,
            })
            .collect();
        let out = match apply(&text, &object_patches, &limits) {
            Ok(out) => out,
            Err(e) => {
                let message = e.to_string();
                assert!(
                    e.operation.is_some() && message.len() > 30,
                    "{name}: unclear error {message}"
                );
                failures.push(format!("{name}: {message}"));
                continue;
            }
        };
        fixed_files += 1;
        objects_fixed += patches.len();
        ops_total += patches.iter().map(|(_, _, ops)| ops.len()).sum::<usize>();
        // Only the lines of replaced or removed nodes may change; everything else is kept.
        let allowed: Vec<_> = patches
            .iter()
            .flat_map(|(d, prefix, ops)| {
                ops.iter().filter_map(move |op| match op {
                    PatchOperation::Add(_) | PatchOperation::Test(_) => None,
                    _ => Some((*d, format!("{prefix}{}", op.path().as_str()))),
                })
            })
            .filter_map(|(d, p)| touched_lines(docs.get(d)?, &text, &p))
            .collect();
        if let Ok(dump) = std::env::var("SCRATCH_DUMP") {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(dump)
                .unwrap();
            let _ = writeln!(
                f,
                "=== {name}\n{}",
                TextDiff::from_lines(text.as_str(), out.as_str()).unified_diff()
            );
        }
        let (removed, added) = changed_lines(&text, &out);
        assert!(added > 0, "{name}: the fix changed nothing");
        for line in removed {
            assert!(
                allowed.iter().any(|r| r.contains(&line)),
                "{name}: line {} changed though no operation touches it:\n{}",
                line + 1,
                TextDiff::from_lines(text.as_str(), out.as_str()).unified_diff()
            );
        }
        // Linting the fixed text finds nothing more that a fix could fix.
        let Ok(new_docs) = parse_stream(out.as_bytes(), &limits) else {
            panic!("{name}: fixed text does not parse");
        };
        for doc in &new_docs {
            for (prefix, object) in objects(&doc.value) {
                let left: Vec<_> =
                    probelint_policies::evaluate(std::slice::from_ref(object), &policy)
                        .into_iter()
                        .filter(|f| {
                            !f.is_suppressed()
                                && f.fix.as_ref().is_some_and(|fix| {
                                    fix.applicability == probelint_policies::Applicability::Safe
                                })
                        })
                        .map(|f| format!("{} {}{}", f.rule, prefix, f.pointer))
                        .collect();
                assert!(
                    left.is_empty(),
                    "{name}: still fixable after --fix: {left:?}"
                );
            }
        }
    }
    eprintln!(
        "corpus: {} files, {parsed} parse, {with_fixes} have fixes, {fixed_files} fixed \
         ({objects_fixed} objects, {ops_total} operations), {} refused",
        files.len(),
        failures.len()
    );
    for failure in &failures {
        eprintln!("  refused: {failure}");
    }
    assert!(with_fixes >= 10, "the corpus should have fixable files");
    assert!(
        fixed_files * 10 >= with_fixes * 9,
        "only {fixed_files} of {with_fixes} fixable files were fixed"
    );
}

#[test]
fn many_documents_are_each_fixed_in_their_own_region() {
    let one = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  \
               template:\n    spec:\n      containers:\n      - name: a\n        image: \
               vllm/vllm-openai\n        readinessProbe:\n          tcpSocket:\n            \
               port: 8000\n        resources:\n          limits:\n            nvidia.com/gpu: 1\n";
    let text = format!("# bundle\n{}...\n", one.repeat(100));
    let docs = parse_stream(text.as_bytes(), &Limits::default()).unwrap_or_default();
    let policy = probelint_policies::Policy::default();
    let patches: Vec<_> = docs
        .iter()
        .map(|d| probelint_policies::mutate(&d.value, &policy).patch.0)
        .collect();
    let object_patches: Vec<_> = patches
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, _)| i % 3 != 1)
        .map(|(i, ops)| ObjectPatch {
            document: i,
            prefix: String::new(),
            ops,
        })
        .collect();
    let out = match apply(&text, &object_patches, &Limits::default()) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    };
    let fixed = parse_stream(out.as_bytes(), &Limits::default()).unwrap_or_default();
    assert_eq!(fixed.len(), 100);
    for (i, doc) in fixed.iter().enumerate() {
        let container = &doc.value["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container.get("startupProbe").is_some(),
            i % 3 != 1,
            "document {i}"
        );
    }
    assert!(out.starts_with("# bundle\n---\n") && out.ends_with("...\n"));
}
