//! Runs `action.yml`'s steps the way the GitHub Actions runner runs a composite action, as far
//! as this action needs: `bash --noprofile --norc -eo pipefail` for `run` steps, `${{ … }}`
//! lookups in `env`/`with`/outputs, `if:` on a step output, `$GITHUB_OUTPUT`, `$GITHUB_PATH`,
//! and the first failing step failing the action. `actions/cache` is emulated (a hit restores
//! the binary; a miss restores nothing), and `cargo` is a stand-in that checks its arguments and
//! installs the probelint this test was built with: a real `cargo install --locked --path lint`
//! is what `tests/precommit.rs` runs through the pre-commit hook.
//!
//! Anything the mini-runner does not understand (another expression form, another action)
//! fails the test, so `action.yml` stays within what is checked here.

#![cfg(unix)]

mod common;

use common::{BIN, UNPROBED_GPU, copy_executable, copy_tree, install_script, workspace_root};
use probelint_yaml::load::{Limits, parse_stream};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Records its arguments; for `install … --root DIR` puts the probelint under test in DIR/bin.
const FAKE_CARGO: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$FAKE_CARGO_LOG"
[ "$1" = install ] || exit 101
root=
while [ $# -gt 0 ]; do
    if [ "$1" = --root ]; then root=$2; fi
    shift
done
[ -n "$root" ] || exit 101
mkdir -p "$root/bin" && cp "$PROBELINT_UNDER_TEST" "$root/bin/probelint"
"#;

fn action() -> Value {
    let bytes = std::fs::read(workspace_root().join("action.yml")).unwrap();
    parse_stream(&bytes, &Limits::default())
        .unwrap()
        .remove(0)
        .value
}

struct Run {
    /// Exit status of the failing step, 0 when every step passed.
    code: i32,
    /// stdout and stderr of every step that ran.
    log: String,
    /// The action's outputs.
    outputs: HashMap<String, String>,
    /// Step outputs, by step id.
    steps: HashMap<String, HashMap<String, String>>,
    /// Names of the steps that ran.
    ran: Vec<String>,
}

struct Runner {
    /// The job's working directory (`$GITHUB_WORKSPACE`), holding the manifests.
    workspace: PathBuf,
    /// Scratch: `$RUNNER_TEMP`, `$HOME`, the fake cargo.
    scratch: PathBuf,
    inputs: HashMap<String, String>,
    cache_hit: bool,
    /// Where the action is checked out (`github.action_path`); this repository by default.
    action_path: PathBuf,
}

impl Runner {
    fn new(workspace: &Path, scratch: &Path, cache_hit: bool) -> Runner {
        let action = action();
        let inputs = action["inputs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v["default"].as_str().unwrap_or("").to_owned()))
            .collect();
        Runner {
            workspace: workspace.to_path_buf(),
            scratch: scratch.to_path_buf(),
            inputs,
            cache_hit,
            action_path: workspace_root().to_path_buf(),
        }
    }

    fn input(mut self, name: &str, value: &str) -> Runner {
        assert!(
            self.inputs.contains_key(name),
            "action.yml has no input {name}"
        );
        self.inputs.insert(name.to_owned(), value.to_owned());
        self
    }

    fn lookup(&self, expr: &str, steps: &HashMap<String, HashMap<String, String>>) -> String {
        let parts: Vec<&str> = expr.split('.').collect();
        match parts.as_slice() {
            ["github", "action_path"] => self.action_path.display().to_string(),
            ["inputs", name] => self
                .inputs
                .get(*name)
                .unwrap_or_else(|| panic!("no input {name}"))
                .clone(),
            ["steps", id, "outputs", name] => steps
                .get(*id)
                .and_then(|o| o.get(*name))
                .cloned()
                .unwrap_or_default(),
            _ => panic!("the test runner does not evaluate `{expr}`"),
        }
    }

    fn interpolate(&self, text: &str, steps: &HashMap<String, HashMap<String, String>>) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${{") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find("}}").expect("closing }}") + start;
            out.push_str(&self.lookup(rest[start + 3..end].trim(), steps));
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    }

    /// `a != 'b'` or `a == 'b'`.
    fn condition(&self, cond: &str, steps: &HashMap<String, HashMap<String, String>>) -> bool {
        let (lhs, rhs, equal) = if let Some((l, r)) = cond.split_once("!=") {
            (l, r, false)
        } else if let Some((l, r)) = cond.split_once("==") {
            (l, r, true)
        } else {
            panic!("the test runner does not evaluate `if: {cond}`")
        };
        let literal = rhs
            .trim()
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''));
        let literal = literal.unwrap_or_else(|| panic!("`if: {cond}`: compare with a '…' literal"));
        (self.lookup(lhs.trim(), steps) == literal) == equal
    }

    fn run(&self) -> Run {
        let action = action();
        let temp = self.scratch.join("runner-temp");
        let home = self.scratch.join("home");
        std::fs::create_dir_all(&temp).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let mut github_path: Vec<PathBuf> = vec![self.scratch.join("fake-bin")];
        let mut run = Run {
            code: 0,
            log: String::new(),
            outputs: HashMap::new(),
            steps: HashMap::new(),
            ran: Vec::new(),
        };
        for (n, step) in action["runs"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let name = step["name"].as_str().unwrap_or("(unnamed)").to_owned();
            if let Some(cond) = step["if"].as_str()
                && !self.condition(cond, &run.steps)
            {
                continue;
            }
            run.ran.push(name.clone());
            let id = step["id"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or(format!("__{n}"));
            let mut outputs = HashMap::new();
            if let Some(uses) = step["uses"].as_str() {
                assert!(
                    uses.starts_with("actions/cache@"),
                    "the test runner only emulates actions/cache, not {uses}"
                );
                let path = self.interpolate(step["with"]["path"].as_str().unwrap(), &run.steps);
                let key = self.interpolate(step["with"]["key"].as_str().unwrap(), &run.steps);
                assert!(
                    Path::new(&path).is_absolute() && !key.is_empty(),
                    "cache path {path:?}, key {key:?}"
                );
                if self.cache_hit {
                    let bin = Path::new(&path).join("bin");
                    std::fs::create_dir_all(&bin).unwrap();
                    copy_executable(Path::new(BIN), &bin.join("probelint"));
                }
                outputs.insert("cache-hit".to_owned(), self.cache_hit.to_string());
                run.steps.insert(id, outputs);
                continue;
            }
            let script = step["run"].as_str().expect("a step has `uses` or `run`");
            assert_eq!(step["shell"], "bash", "step {name}");
            let script_file = temp.join(format!("step-{n}.sh"));
            std::fs::write(&script_file, script).unwrap();
            let output_file = temp.join(format!("output-{n}"));
            let path_file = temp.join(format!("path-{n}"));
            std::fs::write(&output_file, "").unwrap();
            std::fs::write(&path_file, "").unwrap();
            let mut path: Vec<PathBuf> = github_path.iter().rev().cloned().collect();
            path.extend(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            ));
            let mut cmd = Command::new("bash");
            cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
                .arg(&script_file)
                .current_dir(&self.workspace)
                .env("PATH", std::env::join_paths(path).unwrap())
                .env("HOME", &home)
                .env("GITHUB_ACTION_PATH", &self.action_path)
                .env("GITHUB_WORKSPACE", &self.workspace)
                .env("GITHUB_OUTPUT", &output_file)
                .env("GITHUB_PATH", &path_file)
                .env("RUNNER_OS", "Linux")
                .env("RUNNER_ARCH", "X64")
                .env("RUNNER_TEMP", &temp)
                .env("FAKE_CARGO_LOG", self.scratch.join("cargo.log"))
                .env("PROBELINT_UNDER_TEST", BIN)
                .env_remove("CARGO_TARGET_DIR");
            if let Some(env) = step["env"].as_object() {
                for (k, v) in env {
                    cmd.env(k, self.interpolate(v.as_str().unwrap(), &run.steps));
                }
            }
            let out = cmd.output().expect("bash runs");
            run.log.push_str(&format!(
                "--- step {name}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            for line in std::fs::read_to_string(&output_file).unwrap().lines() {
                assert!(
                    !line.contains("<<"),
                    "the test runner does not read multi-line outputs"
                );
                let (k, v) = line.split_once('=').expect("NAME=VALUE in $GITHUB_OUTPUT");
                outputs.insert(k.to_owned(), v.to_owned());
            }
            run.steps.insert(id, outputs);
            github_path.extend(
                std::fs::read_to_string(&path_file)
                    .unwrap()
                    .lines()
                    .map(PathBuf::from),
            );
            if !out.status.success() {
                run.code = out.status.code().unwrap_or(-1);
                break;
            }
        }
        for (name, spec) in action["outputs"].as_object().unwrap() {
            let value = self.interpolate(spec["value"].as_str().unwrap(), &run.steps);
            run.outputs.insert(name.clone(), value);
        }
        run
    }
}

/// A workspace with `deploy/bad.yaml`, `deploy/fine.yaml` (no GPU) and a non-Kubernetes file.
fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("action-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let workspace = tmp.path().join("workspace");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(workspace.join("deploy")).unwrap();
    std::fs::create_dir_all(scratch.join("fake-bin")).unwrap();
    std::fs::write(workspace.join("deploy/bad.yaml"), UNPROBED_GPU).unwrap();
    std::fs::write(
        workspace.join("deploy/fine.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n",
    )
    .unwrap();
    std::fs::write(workspace.join("values.yaml"), "replicas: 2\n").unwrap();
    install_script(FAKE_CARGO, &scratch.join("fake-bin/cargo"));
    (tmp, workspace, scratch)
}

#[test]
fn cache_miss_builds_then_lints_to_sarif_and_annotations() {
    let (_tmp, workspace, scratch) = workspace();
    let run = Runner::new(&workspace, &scratch, false)
        .input("paths", "deploy")
        .run();

    assert_eq!(run.code, 1, "findings fail the action:\n{}", run.log);
    assert_eq!(
        run.ran,
        [
            "Locate the probelint build",
            "Restore the probelint binary",
            "Build probelint",
            "Run probelint"
        ]
    );
    let build = &run.steps["build"];
    let key = &build["key"];
    let hash = key
        .strip_prefix("probelint-Linux-X64-")
        .unwrap_or_else(|| panic!("key {key}"));
    assert!(
        hash.len() == 20 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "key {key}"
    );
    let root = &build["root"];
    assert!(
        root.ends_with(hash),
        "install root {root} is per source hash"
    );

    let cargo = std::fs::read_to_string(scratch.join("cargo.log")).unwrap();
    let expected = format!(
        "install --locked --path {}/lint --root {root} --target-dir {}/runner-temp/probelint-target\n",
        workspace_root().display(),
        scratch.display()
    );
    assert_eq!(cargo, expected);

    assert!(
        run.log.contains(
            "::error file=deploy/bad.yaml,line=14,col=9,title=gpu-readiness-probe-missing::"
        ),
        "GitHub annotations on stdout:\n{}",
        run.log
    );
    assert_eq!(run.outputs["sarif-file"], "results.sarif");
    let sarif: Value =
        serde_json::from_slice(&std::fs::read(workspace.join("results.sarif")).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let startup = results
        .iter()
        .find(|r| r["ruleId"] == "gpu-startup-probe-missing")
        .expect("the finding is in the SARIF");
    assert_eq!(
        startup["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "deploy/bad.yaml"
    );
}

#[test]
fn cache_hit_skips_the_build_and_passes_inputs_through() {
    let (_tmp, workspace, scratch) = workspace();
    std::fs::write(
        workspace.join("policy.yaml"),
        "rules:\n  gpu-startup-probe-missing: \"off\"\n  gpu-readiness-probe-missing: \"off\"\n",
    )
    .unwrap();
    // Several paths, on lines and with runs of spaces; a `*` stays literal.
    let paths = "deploy/bad.yaml   values.yaml\n  deploy/fine.yaml\n";
    let run = Runner::new(&workspace, &scratch, true)
        .input("paths", paths)
        .input("config", "policy.yaml")
        .input("sarif-file", "probelint.sarif")
        .run();
    assert_eq!(
        run.code, 0,
        "the policy turns both errors off:\n{}",
        run.log
    );
    assert!(
        !run.ran.iter().any(|s| s == "Build probelint"),
        "a cache hit builds nothing: {:?}",
        run.ran
    );
    assert!(!scratch.join("cargo.log").exists(), "cargo was not run");
    assert!(
        run.log.contains("::notice file=deploy/bad.yaml"),
        "the info finding remains:\n{}",
        run.log
    );
    assert_eq!(run.outputs["sarif-file"], "probelint.sarif");
    assert!(workspace.join("probelint.sarif").is_file());

    // --fail-on reaches probelint: the remaining info finding now fails the action.
    let run = Runner::new(&workspace, &scratch, true)
        .input("paths", paths)
        .input("config", "policy.yaml")
        .input("fail-on", "info")
        .run();
    assert_eq!(run.code, 1, "{}", run.log);

    // Paths are never globbed by the shell.
    let run = Runner::new(&workspace, &scratch, true)
        .input("paths", "deploy/*.yaml")
        .run();
    assert_eq!(
        run.code, 2,
        "a literal `deploy/*.yaml` is no file:\n{}",
        run.log
    );
}

/// Copies what the action hashes (and a test file, which it must not) to `dest`.
fn copy_sources(dest: &Path) {
    let root = workspace_root();
    std::fs::create_dir_all(dest).unwrap();
    for file in ["Cargo.toml", "Cargo.lock"] {
        std::fs::copy(root.join(file), dest.join(file)).unwrap();
    }
    copy_tree(&root.join("policies/src"), &dest.join("policies/src"));
    copy_tree(&root.join("lint/src"), &dest.join("lint/src"));
    std::fs::copy(root.join("lint/Cargo.toml"), dest.join("lint/Cargo.toml")).unwrap();
    std::fs::create_dir_all(dest.join("lint/tests")).unwrap();
    std::fs::write(dest.join("lint/tests/t.rs"), "").unwrap();
}

#[test]
fn the_build_key_follows_the_sources() {
    let (tmp, workspace, scratch) = workspace();
    let action_path = tmp.path().join("action");
    copy_sources(&action_path);
    let key = || {
        let mut runner = Runner::new(&workspace, &scratch, true);
        runner.action_path = action_path.clone();
        let run = runner.run();
        assert!(
            !run.log.contains("sha256sum: "),
            "hashing printed an error:\n{}",
            run.log
        );
        run.steps["build"]["key"].clone()
    };
    let first = key();
    assert_eq!(key(), first, "deterministic");
    std::fs::write(
        action_path.join("lint/tests/t.rs"),
        "// tests are not in the binary\n",
    )
    .unwrap();
    assert_eq!(key(), first, "a test changed");
    let main = action_path.join("lint/src/main.rs");
    let mut source = std::fs::read_to_string(&main).unwrap();
    source.push_str("// changed\n");
    std::fs::write(&main, source).unwrap();
    assert_ne!(key(), first, "the CLI's source changed");
}
