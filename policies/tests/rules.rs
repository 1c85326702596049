//! Every rule's examples and fixtures, as files: `resources/rules/<rule-id>/` holds the rule's
//! `bad.yaml` and `good.yaml` (the examples `probelint explain` prints) and fixtures named for
//! their verdict, `fires-<what>.yaml` and `silent-<what>.yaml`. Each file is judged under the
//! rule's example policy (the defaults, unless the rule needs an older cluster to show itself):
//! a `fires-` fixture or `bad.yaml` draws at least one unsuppressed finding of that folder's rule,
//! a `silent-` fixture or `good.yaml` none (suppressed or not), and `good.yaml` no error of any
//! rule. Every finding of every file is snapshotted as a user reads it (message, help, pointer,
//! fix and its JSON Patch), so the wording of every rule is pinned.

use probelint_policies::{Finding, Policy, RuleMeta, Severity, evaluate, registry};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn rules_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("resources/rules")
}

fn meta(id: &str) -> Option<&'static RuleMeta> {
    registry().iter().map(|r| r.meta()).find(|m| m.id == id)
}

/// The policy a rule's files are judged under: the one its examples are shown with.
fn policy_for(meta: &RuleMeta) -> Policy {
    match meta.example_policy {
        Some(p) => {
            Policy::with_user_yaml(p).unwrap_or_else(|e| panic!("{}: example policy: {e}", meta.id))
        }
        None => Policy::default(),
    }
}

fn lint(path: &Path, meta: &RuleMeta) -> Vec<Finding> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs = probelint_testkit::yaml::try_objects(&text).unwrap_or_else(|e| {
        panic!(
            "{}:{}:{}: not YAML: {}",
            path.display(),
            e.line,
            e.column,
            e.message
        )
    });
    let objects: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    let policy = policy_for(meta);
    let mut findings = evaluate(&objects, &policy);
    // What the CLI's reader adds: the keys written twice, which the objects no longer show.
    for (index, pointer, lines) in probelint_testkit::yaml::duplicate_keys(&text) {
        findings.extend(probelint_policies::duplicate_key_finding(
            &objects[index],
            index,
            &pointer,
            &lines,
            &policy,
        ));
    }
    findings
}

/// What a fixture's name says it shows.
#[derive(Debug, PartialEq)]
enum Verdict {
    Fires,
    Silent,
}

fn verdict(file_name: &str) -> Option<Verdict> {
    let named = |prefix: &str| {
        file_name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".yaml"))
            .is_some_and(|what| !what.is_empty())
    };
    match file_name {
        "bad.yaml" => Some(Verdict::Fires),
        "good.yaml" => Some(Verdict::Silent),
        _ if named("fires-") => Some(Verdict::Fires),
        _ if named("silent-") => Some(Verdict::Silent),
        _ => None,
    }
}

#[test]
fn every_rule_folder_is_a_rule_with_fixtures_that_fire_and_stay_silent() {
    let mut problems = Vec::new();
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(rules_dir()).expect("resources/rules") {
        let path = entry.expect("readable entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !path.is_dir() {
            problems.push(format!("{name}: not a rule folder"));
            continue;
        }
        if meta(&name).is_none() {
            problems.push(format!("{name}: no rule has this id"));
        }
        let (mut fires, mut silent) = (0, 0);
        for file in std::fs::read_dir(&path).expect("rule folder") {
            let file = file.expect("readable entry").file_name();
            let file = file.to_string_lossy();
            match verdict(&file) {
                Some(Verdict::Fires) => fires += 1,
                Some(Verdict::Silent) => silent += 1,
                None => problems.push(format!(
                    "{name}/{file}: name it bad.yaml, good.yaml, fires-<what>.yaml or silent-<what>.yaml"
                )),
            }
        }
        if fires == 0 || silent == 0 {
            problems.push(format!(
                "{name}: needs a file that fires and one that stays silent ({fires} fire, {silent} silent)"
            ));
        }
        folders.push(name);
    }
    for rule in registry() {
        let id = rule.meta().id;
        if !folders.iter().any(|f| f == id) {
            problems.push(format!("{id}: no folder resources/rules/{id}/"));
            continue;
        }
        // The files judged here must be the examples `probelint explain` prints.
        for (file, example) in [
            ("bad.yaml", rule.meta().bad_example),
            ("good.yaml", rule.meta().good_example),
        ] {
            let on_disk = std::fs::read_to_string(rules_dir().join(id).join(file));
            if on_disk.as_deref().ok() != Some(example) {
                problems.push(format!(
                    "{id}/{file} is not the rule's example: load it with include_str!"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_fixture_gets_the_verdict_its_name_says_and_its_findings_are_pinned() {
    insta::glob!("../resources/rules", "*/*.yaml", |path| {
        let folder = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy();
        let file = path.file_name().unwrap().to_string_lossy();
        let meta = meta(&folder).unwrap_or_else(|| panic!("{folder}: no rule has this id"));
        let findings = lint(path, meta);
        let of_rule: Vec<&Finding> = findings.iter().filter(|f| f.rule == meta.id).collect();
        match verdict(&file) {
            Some(Verdict::Fires) => assert!(
                of_rule.iter().any(|f| !f.is_suppressed()),
                "{folder}/{file} does not fire {}; findings: {findings:#?}",
                meta.id
            ),
            Some(Verdict::Silent) => assert!(
                of_rule.is_empty(),
                "{folder}/{file} fires {}: {of_rule:#?}",
                meta.id
            ),
            None => panic!("{folder}/{file}: not named for its verdict"),
        }
        // `probelint explain` and docs/rules/ print the good example as the thing to copy: it
        // draws nothing above info from any rule.
        if file == "good.yaml" {
            let flagged: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.severity != Severity::Info && !f.is_suppressed())
                .collect();
            assert!(
                flagged.is_empty(),
                "{folder}/good.yaml has errors or warnings: {flagged:#?}"
            );
        }
        let shown: Vec<Value> = findings.iter().map(as_read).collect();
        insta::assert_yaml_snapshot!("findings", shown);
    });
}

/// A finding as a user reads it, in the order they read it.
fn as_read(f: &Finding) -> Value {
    let mut shown = json!({
        "rule": f.rule,
        "severity": f.severity.as_str(),
        "object": f.object.to_string(),
        "container": f.container,
        "pointer": f.pointer,
        "message": f.message,
        "help": f.help,
    });
    if let Some(s) = &f.suppressed {
        shown["suppressed"] = json!(s.reason);
    }
    if let Some(fix) = &f.fix {
        shown["fix"] = json!({
            "description": fix.description,
            "patch": serde_json::to_value(&fix.patch).expect("a patch serialises"),
        });
    }
    shown
}
