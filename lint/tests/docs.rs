//! `docs/rules/` is generated from the rule registry; this test fails when it is stale.
//! Regenerate with: `UPDATE_DOCS=1 cargo test -p probelint --test docs`.

use std::path::Path;

fn expected() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut index = String::from(
        "# probelint rules\n\nGenerated from the rule registry (`probelint rules`); do not edit by hand.\n\n\
         | rule | default severity | fix | summary |\n|---|---|---|---|\n",
    );
    for rule in probelint_policies::registry() {
        let m = rule.meta();
        index.push_str(&format!(
            "| [`{id}`]({id}.md) | {} | {} | {} |\n",
            m.severity,
            if m.fix.is_some() { "yes" } else { "—" },
            m.summary,
            id = m.id
        ));
        files.push((
            format!("{}.md", m.id),
            probelint::commands::rules::render(m),
        ));
    }
    files.push(("README.md".to_owned(), index));
    files
}

#[test]
fn policy_schema_is_fresh_and_accepts_the_builtin_policy() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/policy.schema.json");
    let schema = probelint_policies::json_schema();
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).ok().as_deref(),
        Some(text.as_str()),
        "docs/policy.schema.json is stale; regenerate with: UPDATE_DOCS=1 cargo test -p probelint --test docs"
    );
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let builtin = probelint_yaml::load::parse_stream(
        probelint_policies::DEFAULT_POLICY_YAML.as_bytes(),
        &Default::default(),
    )
    .unwrap();
    assert!(
        validator.is_valid(&builtin[0].value),
        "built-in policy fails its own schema"
    );
    let typo = serde_json::json!({"modelLoadSecs": 10});
    assert!(
        !validator.is_valid(&typo),
        "unknown keys are refused by the schema too"
    );
    let bad_level = serde_json::json!({"rules": {"readiness-port-open": "loud"}});
    assert!(!validator.is_valid(&bad_level));
}

#[test]
fn rule_docs_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/rules");
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (name, text) in expected() {
        let path = dir.join(&name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    if !update {
        let known: Vec<String> = expected().into_iter().map(|(n, _)| n).collect();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if !known.contains(&name) {
                stale.push(format!("{name} (no such rule)"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "docs/rules is stale: {stale:?}\nregenerate with: UPDATE_DOCS=1 cargo test -p probelint --test docs"
    );
}

#[test]
fn the_readme_rule_table_lists_every_rule() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let missing: Vec<&str> = probelint_policies::registry()
        .iter()
        .map(|r| r.meta().id)
        .filter(|id| !readme.contains(&format!("| `{id}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's rule table lacks {missing:?}"
    );
}

/// The Markdown files of the repository, with the two user-facing YAML files that read as docs
/// (the pre-commit hooks and the GitHub Action); not `target/`, and not the vendored corpora
/// under `tests/corpus/` (their own READMEs name files of the projects they come from).
fn doc_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = vec![root.join(".pre-commit-hooks.yaml"), root.join("action.yml")];
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let vendored = dir == root.join("tests").join("corpus");
                if !name.starts_with('.') && name != "target" && !vendored {
                    dirs.push(path);
                }
            } else if name.ends_with(".md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// What a doc names in backticks and as the target of relative links.
fn named_paths(text: &str) -> (Vec<&str>, Vec<&str>) {
    let mut ticks = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 && !span.contains('\n') {
            ticks.push(span.trim());
        }
    }
    let mut links = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        if let Some(end) = rest.find(')') {
            links.push(&rest[..end]);
        }
    }
    (ticks, links)
}

/// A backticked span that reads as a path in this repository: one word, no placeholder or
/// glob, a `/`, and a first part that is a top-level directory (or `shared/`, the workspace
/// beside a checkout, which users do not have), with any `:line` or `::item` dropped.
fn repo_path<'a>(span: &'a str, tops: &[String]) -> Option<&'a str> {
    if span.contains(|c: char| c.is_whitespace() || "<>*{}$…|\\()=,'\"".contains(c)) {
        return None;
    }
    let span = span.split("::").next()?;
    let span = match span.rsplit_once(':') {
        Some((path, line)) if line.chars().all(|c| c.is_ascii_digit() || c == '-') => path,
        _ => span,
    };
    let span = span.trim_end_matches(['.', ';', ':']);
    let (first, _) = span.split_once('/')?;
    (first == "shared" || tops.iter().any(|t| t == first)).then_some(span)
}

/// Every repository file a doc names exists: a backticked path that starts with a top-level
/// directory (from the repository root, or from the doc's own directory, as a crate's README
/// names `tests/...`), and every relative link (from the doc's directory). A rename that leaves
/// a doc behind fails here instead of in a reader's hands.
#[test]
fn every_path_a_doc_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let tops: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    let docs = doc_files(root);
    assert!(docs.len() > 20, "found only {docs:?}");
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let here = doc.parent().unwrap();
        let shown = doc.strip_prefix(root).unwrap().display().to_string();
        let (ticks, links) = named_paths(&text);
        for path in ticks.into_iter().filter_map(|s| repo_path(s, &tops)) {
            checked += 1;
            if !root.join(path).exists() && !here.join(path).exists() {
                missing.push(format!("{shown}: `{path}`"));
            }
        }
        for link in links {
            let link = link.split('#').next().unwrap_or_default();
            let external = link.contains("://") || link.starts_with("mailto:");
            if link.is_empty() || external || link.contains(char::is_whitespace) {
                continue;
            }
            checked += 1;
            if !here.join(link).exists() {
                missing.push(format!("{shown}: ({link})"));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths checked: the scan finds nothing"
    );
    assert!(
        missing.is_empty(),
        "docs name files that do not exist:\n{}",
        missing.join("\n")
    );
}
