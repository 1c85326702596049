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
