//! The worked Deployment in `docs/probe-helper.md` is what it says: it lints clean with the
//! engine's built-in policy, and every probe command in it is one the real binary accepts.

use probelint_policies::{Policy, evaluate};
use serde_json::Value;
use std::process::Command;

fn example() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/probe-helper.md");
    let text = std::fs::read_to_string(path).expect("docs/probe-helper.md");
    let start = text
        .find("```yaml\napiVersion: apps/v1")
        .expect("the worked example")
        + "```yaml\n".len();
    let end = start + text[start..].find("```").expect("end of the example");
    probelint_testkit::yaml::objects(&text[start..end])
}

#[test]
fn the_worked_example_lints_clean() {
    let objects = example();
    assert_eq!(objects.len(), 2, "a Deployment and its PodDisruptionBudget");
    let policy = Policy::builtin().expect("built-in policy");
    let found = evaluate(&objects, &policy);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn every_probe_in_the_worked_example_runs_and_fails_only_for_want_of_a_server() {
    let objects = example();
    let container = &objects[0]["spec"]["template"]["spec"]["containers"][0];
    let mut seen = 0;
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let argv: Vec<&str> = container[probe]["exec"]["command"]
            .as_array()
            .unwrap_or_else(|| panic!("{probe} is an exec probe"))
            .iter()
            .map(|a| a.as_str().expect("a string"))
            .collect();
        assert_eq!(argv[0], "/probelint/bin/probelint-probe", "{probe}");
        // Port 1 on loopback: nothing listens, so a valid command fails (1), a bad one is 2.
        let dir = std::env::temp_dir().join(format!("probelint-probe-doc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let args: Vec<String> = argv[1..]
            .iter()
            .map(|a| match *a {
                "8000" => "1".to_string(),
                p if p.starts_with("/probe-state/") => dir.join(&p[13..]).display().to_string(),
                other => other.to_string(),
            })
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_probelint-probe"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{probe}: {err}");
        assert!(err.starts_with("not "), "{probe}: {err}");
        seen += 1;
    }
    assert_eq!(seen, 3);
}
