//! `probelint export` as a user runs it: YAML that parses back into the engine's documents,
//! and a `--list` table naming every rule.

use assert_cmd::Command;
use probelint_policies::export::{Mode, Options, documents};
use serde_json::Value;

fn probelint(dir: &std::path::Path) -> Command {
    let mut cmd = Command::cargo_bin("probelint").expect("binary");
    cmd.current_dir(dir).env("NO_COLOR", "1");
    cmd
}

#[test]
fn the_yaml_parses_back_into_the_policies_for_the_mode_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = probelint(dir.path())
        .args([
            "export",
            "--mode",
            "enforce",
            "--controller-service-account",
            "system:serviceaccount:ray-system:kuberay-operator",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let policy = probelint_policies::Policy::builtin().expect("policy");
    let want = documents(
        &policy,
        &Options {
            mode: Mode::Enforce,
            controller_users: vec!["system:serviceaccount:ray-system:kuberay-operator".into()],
            ..Options::default()
        },
    );
    assert_eq!(docs, want);
}

#[test]
fn a_policy_file_turns_a_rule_off_and_the_list_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join(".probelint.yaml"),
        "rules:\n  readiness-port-open: off\n",
    )
    .expect("write policy");
    let out = probelint(dir.path())
        .args(["export", "--list"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).expect("UTF-8");
    for id in probelint_policies::ids() {
        assert!(
            table.lines().any(|l| l.starts_with(id)),
            "{id} missing:\n{table}"
        );
    }
    let line = |id: &str| {
        table
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("gpu-startup-probe-missing").contains(" yes "),
        "{table}"
    );
    assert!(
        line("readiness-port-open").contains("turned off in the policy"),
        "{table}"
    );
    let guard = line(probelint_policies::export::GUARD);
    assert!(
        guard.contains(&format!(
            "more than {} characters",
            probelint_policies::export::guard_chars()
        )),
        "{table}"
    );
    let out = probelint(dir.path()).arg("export").output().expect("run");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(!text.contains("probelint.io-readiness-port-open"), "{text}");
}

#[test]
fn a_broken_policy_file_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(".probelint.yaml"), "rules: [\n").expect("write policy");
    let out = probelint(dir.path()).arg("export").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "half-written output");
    assert!(String::from_utf8_lossy(&out.stderr).contains(".probelint.yaml"));
}

#[test]
fn only_writes_the_validating_or_the_mutating_policies_and_the_list_names_each_fix() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kinds = |only: &str| -> Vec<String> {
        let out = probelint(dir.path())
            .args(["export", "--only", only])
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
        docs.iter()
            .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let mutating = kinds("mutating");
    assert!(!mutating.is_empty());
    assert!(
        mutating
            .iter()
            .all(|k| k.starts_with("MutatingAdmissionPolicy")),
        "{mutating:?}"
    );
    let validating = kinds("validating");
    assert!(
        validating
            .iter()
            .all(|k| k.starts_with("ValidatingAdmissionPolicy")),
        "{validating:?}"
    );
    let out = probelint(dir.path())
        .args(["export", "--list"])
        .output()
        .expect("run");
    let table = String::from_utf8(out.stdout).expect("UTF-8");
    let fixes = table
        .split_once("FIX OF")
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_else(|| panic!("no fix table:\n{table}"));
    for line in fixes.lines().skip(1).filter(|l| !l.is_empty()) {
        assert!(line.contains(" yes ") || line.contains(" no "), "{line}");
    }
    assert!(
        fixes
            .lines()
            .any(|l| l.starts_with("gpu-startup-probe-missing") && l.contains(" yes ")),
        "{fixes}"
    );
}
