//! The human format as a person reads it, for every rule: each rule's `bad.yaml` linted by the
//! real binary and its output snapshotted (`snapshots/human_output__human@<rule>.snap`), and
//! every finding of every `fires-*` fixture held to the width: a headline that says what is
//! wrong within [`WIDTH`] characters, and no line of the output longer than that, except the
//! lines that quote the user's file (`NN | …`) and the caret line under them, whose length is
//! the file's indentation plus the object's name.

use std::path::Path;
use std::process::Command;

const WIDTH: usize = 120;

fn lint(path: &Path) -> String {
    let rule = path
        .parent()
        .and_then(Path::file_name)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let meta = probelint_policies::registry()
        .iter()
        .map(|r| r.meta())
        .find(|m| m.id == rule)
        .unwrap_or_else(|| panic!("{rule}: no rule has this id"));
    let dir = tempfile::tempdir().expect("scratch directory");
    let policy = meta.example_policy.unwrap_or("# the built-in policy\n");
    std::fs::write(dir.path().join("policy.yaml"), policy).unwrap();
    let file = format!("{rule}.yaml");
    std::fs::copy(path, dir.path().join(&file)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_probelint"))
        .current_dir(dir.path())
        .env_remove("NO_COLOR")
        .args(["--color", "never", "--config", "policy.yaml", &file])
        .output()
        .expect("probelint runs");
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// A line that quotes the linted file, or the carets and label under such a line.
fn quotes_the_file(line: &str) -> bool {
    let trimmed = line.trim_start();
    let number = trimmed
        .split_once(" |")
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    let carets = trimmed
        .strip_prefix('|')
        .is_some_and(|rest| rest.trim_start().starts_with(['^', '-']));
    number || carets
}

/// The lines of `text` longer than [`WIDTH`], quoted source aside.
fn too_wide(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !quotes_the_file(l) && l.chars().count() > WIDTH)
        .map(|l| format!("{} chars: {l}", l.chars().count()))
        .collect()
}

#[test]
fn every_rules_bad_example_reads_at_a_glance() {
    insta::glob!("../../policies/resources/rules", "*/bad.yaml", |path| {
        let text = lint(path);
        let wide = too_wide(&text);
        assert!(wide.is_empty(), "{}:\n{}", path.display(), wide.join("\n"));
        insta::assert_snapshot!("human", text);
    });
}

#[test]
fn every_finding_of_every_fixture_fits_the_width() {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/resources/rules");
    let mut checked = 0;
    let mut wide = Vec::new();
    for rule in std::fs::read_dir(&rules).unwrap().flatten() {
        for file in std::fs::read_dir(rule.path()).unwrap().flatten() {
            let path = file.path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".yaml") || name == "good.yaml" || name.starts_with("silent-") {
                continue;
            }
            let text = lint(&path);
            let titles = text
                .lines()
                .filter(|l| l.starts_with(['e', 'w', 'i']) && l.contains("]: "))
                .count();
            checked += titles;
            wide.extend(
                too_wide(&text)
                    .into_iter()
                    .map(|l| format!("{}: {l}", path.display())),
            );
        }
    }
    assert!(checked > 100, "only {checked} findings rendered");
    assert!(wide.is_empty(), "{}", wide.join("\n"));
}

#[test]
fn the_width_check_bites() {
    assert_eq!(too_wide(&"x".repeat(WIDTH)).len(), 0);
    assert_eq!(too_wide(&"x ".repeat(WIDTH)).len(), 1);
    let quoted = format!("18 | {}\n   |   ^^^ {}", "y".repeat(200), "z".repeat(200));
    assert!(too_wide(&quoted).is_empty());
}
