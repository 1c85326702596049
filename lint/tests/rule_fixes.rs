//! Every rule's fix, as `probelint --fix` writes it (clippy's `.fixed` files): each rule's
//! `bad.yaml`, and each `fires-*` fixture whose findings of its rule all carry a fix, under
//! `policies/resources/rules/<rule-id>/`, is fixed in place by the real binary in a scratch
//! directory, and the file it leaves is snapshotted. Where the rule declares a fix, linting the
//! fixed file again finds nothing more of that rule.

use probelint_policies::{Policy, RuleMeta, evaluate, registry};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn meta(id: &str) -> &'static RuleMeta {
    registry()
        .iter()
        .map(|r| r.meta())
        .find(|m| m.id == id)
        .unwrap_or_else(|| panic!("{id}: no rule has this id"))
}

/// The policy a rule's files are judged under, as a policy file: its example policy, or the
/// built-in one (a file all the same, so that no `.probelint.yaml` above the scratch directory
/// is picked up).
fn policy_text(meta: &RuleMeta) -> &'static str {
    meta.example_policy.unwrap_or("# the built-in policy\n")
}

fn probelint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_probelint"))
        .current_dir(dir)
        .args(["--color", "never", "--config", "policy.yaml"])
        .args(args)
        .output()
        .expect("probelint runs")
}

/// Whether the engine offers a fix for every finding of `rule` in `text` (and finds one).
fn every_finding_has_a_fix(text: &str, meta: &RuleMeta) -> bool {
    let docs = probelint_testkit::yaml::objects(text);
    let objects: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    let policy = Policy::with_user_yaml(policy_text(meta)).expect("example policy is valid");
    let of_rule: Vec<_> = evaluate(&objects, &policy)
        .into_iter()
        .filter(|f| f.rule == meta.id && !f.is_suppressed())
        .collect();
    !of_rule.is_empty() && of_rule.iter().all(|f| f.fix.is_some())
}

#[test]
fn every_rules_bad_example_and_fixable_fixtures_are_fixed_as_pinned() {
    insta::glob!("../../policies/resources/rules", "*/*.yaml", |path| {
        let folder = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy();
        let file = path.file_name().unwrap().to_string_lossy();
        let meta = meta(&folder);
        let text = std::fs::read_to_string(path).expect("fixture reads");
        // Advice (a display-only fix) is never written by --fix: nothing to pin.
        let advice_only = meta
            .fix
            .as_ref()
            .is_some_and(|f| f.applicability == probelint_policies::Applicability::DisplayOnly);
        if advice_only {
            return;
        }
        let fixable = meta.fix.is_some() && every_finding_has_a_fix(&text, meta);
        if !(file == "bad.yaml" || (file.starts_with("fires-") && fixable)) {
            return;
        }
        let dir = tempfile::tempdir().expect("scratch directory");
        std::fs::write(dir.path().join("policy.yaml"), policy_text(meta)).unwrap();
        std::fs::write(dir.path().join(&*file), &text).unwrap();

        // A rule whose fix is unsafe is fixed as a user asks for it: `--fix --unsafe-fixes`.
        let unsafe_fix = meta
            .fix
            .as_ref()
            .is_some_and(|f| f.applicability == probelint_policies::Applicability::Unsafe);
        if unsafe_fix {
            // `--fix` alone applies the other rules' safe fixes, never this one.
            let safe_only = probelint(dir.path(), &["--fix", &file]);
            assert!(
                !String::from_utf8_lossy(&safe_only.stderr)
                    .contains(&format!("fixed[{}]", meta.id)),
                "{folder}/{file}: --fix alone applied an unsafe fix"
            );
            let relint = probelint(dir.path(), &["-f", "json", &file]);
            assert!(
                String::from_utf8_lossy(&relint.stdout).contains(&format!("\"{}\"", meta.id)),
                "{folder}/{file}: --fix alone removed {}",
                meta.id
            );
        }
        let args: &[&str] = if unsafe_fix {
            &["--fix", "--unsafe-fixes", &file]
        } else {
            &["--fix", &file]
        };
        let fixed = probelint(dir.path(), args);
        let stderr = String::from_utf8_lossy(&fixed.stderr);
        assert!(
            matches!(fixed.status.code(), Some(0 | 1)),
            "{folder}/{file}: --fix failed: {stderr}"
        );
        let after = std::fs::read_to_string(dir.path().join(&*file)).expect("fixed file reads");
        if meta.fix.is_some() {
            assert!(
                stderr.contains(&format!("fixed[{}]", meta.id)),
                "{folder}/{file}: --fix did not fix {}: {stderr}",
                meta.id
            );
            let relint = probelint(dir.path(), &["-f", "json", &file]);
            let report: Value = serde_json::from_slice(&relint.stdout).unwrap_or_else(|e| {
                panic!(
                    "{folder}/{file}: JSON report: {e}: {}",
                    String::from_utf8_lossy(&relint.stderr)
                )
            });
            let remaining: Vec<&Value> = report["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .filter(|f| f["rule"] == meta.id)
                .collect();
            assert!(
                remaining.is_empty(),
                "{folder}/{file}: still fires {} after --fix: {remaining:#?}\n{after}",
                meta.id
            );
        }
        insta::assert_snapshot!("fixed", after);
    });
}
