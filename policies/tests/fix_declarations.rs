//! Every rule's declared fix ([`probelint_policies::FixMeta`]) against what its check attaches,
//! over the real corpus, the repository's examples and every rule's own examples. A finding takes
//! its fix's applicability from the declaration (the rule engine's `Draft::fix`), and in a debug
//! build, as tests run, a rule that attaches a fix it does not declare panics there; this runs
//! every rule over every manifest we have so that such a rule is found, and checks that every
//! declared fix is produced somewhere. `probelint --fix` and the mutating webhook apply only
//! safe fixes, so a declaration that lies would change what a cluster gets without
//! `probelint explain` saying so.

use probelint_policies::{Finding, Policy, evaluate, find};
use serde_json::Value;
use std::collections::BTreeMap;

fn check_declarations(findings: &[Finding], seen: &mut BTreeMap<String, usize>) {
    for finding in findings {
        let Some(rule) = find(&finding.rule) else {
            continue; // a custom rule: the policy's, with no fix
        };
        let meta = rule.meta();
        if meta.fix.is_some() && finding.fix.is_some() {
            *seen.entry(meta.id.to_owned()).or_default() += 1;
        }
    }
}

fn objects(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("manifest is UTF-8");
    probelint_testkit::yaml::try_objects(&text)
        .map(|docs| docs.into_iter().filter(Value::is_object).collect())
        .unwrap_or_default()
}

#[test]
fn every_fix_a_rule_attaches_is_the_fix_it_declares() {
    let policy = Policy::default();
    let mut seen = BTreeMap::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = probelint_testkit::corpus::real_manifests();
    files.extend(probelint_testkit::corpus::manifests_under(
        &root.join("examples"),
    ));
    for path in &files {
        check_declarations(&evaluate(&objects(path), &policy), &mut seen);
    }
    for rule in probelint_policies::registry() {
        let meta = rule.meta();
        let policy = match meta.example_policy {
            Some(text) => Policy::with_user_yaml(text).expect("example policy is valid"),
            None => Policy::default(),
        };
        for example in [meta.bad_example, meta.good_example] {
            let docs = probelint_testkit::yaml::objects(example);
            check_declarations(&evaluate(&docs, &policy), &mut seen);
        }
    }
    // Every declared fix was exercised, so the checks above were not vacuous.
    let declared: Vec<&str> = probelint_policies::registry()
        .iter()
        .filter(|r| r.meta().fix.is_some())
        .map(|r| r.meta().id)
        .collect();
    for id in declared {
        assert!(
            seen.contains_key(id),
            "{id} declares a fix that no manifest got; seen: {seen:?}"
        );
    }
}
