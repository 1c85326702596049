//! The release's own files: the workflows and the action pass actionlint (tier 2: actionlint is
//! built with Go), and the release scripts agree with the tree (tier 1: bash only).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script(name: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("bash")
        .arg(root().join("scripts").join(name))
        .args(args)
        .output()
        .expect("bash runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A tag for the version the tree has is accepted (the crates, the chart and CHANGELOG.md agree);
/// a tag for another version is refused before anything is built, naming each disagreement.
#[test]
fn the_release_tag_must_agree_with_the_crates_the_chart_and_the_changelog() {
    let version = env!("CARGO_PKG_VERSION");
    let (ok, stdout, stderr) = script("release-version.sh", &[&format!("v{version}")]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), version);

    let (ok, _, stderr) = script("release-version.sh", &["v999.0.0"]);
    assert!(!ok);
    for part in [
        "the crates' version",
        "the chart's version",
        "the chart's appVersion",
        "CHANGELOG.md has no \"## [999.0.0]\" section",
    ] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
    let (ok, _, stderr) = script("release-version.sh", &["0.1"]);
    assert!(
        !ok && stderr.contains("is not vMAJOR.MINOR.PATCH"),
        "{stderr}"
    );

    // The release notes are the version's CHANGELOG section, without the next one.
    let (ok, notes, stderr) = script("changelog-section.sh", &[version]);
    assert!(ok, "{stderr}");
    assert!(
        !notes.trim().is_empty() && !notes.contains("## ["),
        "{notes}"
    );
}

/// Every workflow file, the example workflow of the docs, and `action.yml` (through a workflow
/// that uses it as `./`, which makes actionlint read and check the action's metadata and the
/// inputs given to it) pass actionlint. Where `shellcheck` is on PATH, actionlint also runs it
/// on every `run:` script.
#[test]
#[ignore = "e2e: actionlint, built with Go 1.24+ and the Go module proxy from tests/cluster/go/actionlint"]
fn workflows_and_the_action_pass_actionlint() {
    let actionlint = probelint_cluster::actionlint().unwrap_or_else(|e| panic!("{e}"));
    let root = root();
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [".github/workflows", "docs/github-actions"] {
        for entry in std::fs::read_dir(root.join(dir)).expect(dir).flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
                files.push(path);
            }
        }
    }
    assert!(
        files.iter().any(|f| f.ends_with("release.yml")),
        "the release workflow is checked: {files:?}"
    );

    // actionlint reads a local action only inside a project, which it finds by `.git`: a
    // scratch git repository holding the action as `./action.yml`.
    let repo = std::env::temp_dir().join(format!("probelint-actionlint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&repo);
    std::fs::create_dir_all(repo.join(".github/workflows")).unwrap();
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .expect("git is needed (the cluster suite needs it): install git");
    assert!(init.success(), "git init in {}", repo.display());
    std::fs::copy(root.join("action.yml"), repo.join("action.yml")).unwrap();
    let uses_action = repo.join(".github/workflows/uses-action.yml");
    std::fs::write(
        &uses_action,
        r#""on": pull_request
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
      - id: probelint
        uses: ./
        with:
          paths: deploy/
          fail-on: warning
          config: .probelint.yaml
          sarif-file: probelint.sarif
      - run: echo "${{ steps.probelint.outputs.sarif-file }}"
"#,
    )
    .unwrap();

    let run = |dir: &Path, files: &[PathBuf]| {
        let out = Command::new(&actionlint)
            .current_dir(dir)
            .arg("-no-color")
            .args(files)
            .output()
            .expect("actionlint runs");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, text) = run(&root, &files);
    assert!(ok, "actionlint on {files:?}:\n{text}");
    let (ok, text) = run(&repo, std::slice::from_ref(&uses_action));
    assert!(ok, "actionlint on a workflow using action.yml:\n{text}");

    // It bites: an input the action does not declare is an error.
    std::fs::write(
        &uses_action,
        std::fs::read_to_string(&uses_action).unwrap().replace(
            "fail-on: warning",
            "fail-on: warning\n          no-such-input: x",
        ),
    )
    .unwrap();
    let (ok, text) = run(&repo, std::slice::from_ref(&uses_action));
    let _ = std::fs::remove_dir_all(&repo);
    assert!(!ok && text.contains("no-such-input"), "{text}");
}
