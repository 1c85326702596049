//! The `probelint` binary, run as users run it: files, directories, stdin, formats, exit codes.

mod common;

use common::{BAD_GPU, GOOD_GPU, array, install_script, json_stdout, probelint, text, write};
use serde_json::Value;
use std::fs;
use std::path::Path;

fn json_run(dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = probelint()
        .current_dir(dir)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let json = json_stdout(&out);
    (out.status.code().unwrap(), json)
}

#[test]
fn mixed_directory_reports_findings_with_lines_errors_and_skips_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "manifests/bad.yaml", BAD_GPU);
    write(dir.path(), "manifests/good.yaml", GOOD_GPU);
    write(
        dir.path(),
        "manifests/broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n",
    );
    write(
        dir.path(),
        "manifests/values.yaml",
        "replicaCount: 2\nimage: {tag: latest}\n",
    );
    write(dir.path(), "manifests/notes.txt", "not yaml at all: [");
    let (code, json) = json_run(dir.path(), &["manifests"]);
    assert_eq!(code, 2, "{json:#}");
    assert_eq!(json["version"], 1);
    let findings = array(&json, "findings");
    let startup = findings
        .iter()
        .find(|f| f["rule"] == "gpu-startup-probe-missing")
        .expect("startup finding");
    assert_eq!(startup["file"], "manifests/bad.yaml");
    assert_eq!(
        startup["line"], 9,
        "points at the container's `- name:` line"
    );
    assert_eq!(startup["column"], 9);
    assert_eq!(startup["container"], "vllm");
    assert_eq!(startup["pointer"], "/spec/template/spec/containers/0");
    assert_eq!(startup["object"]["kind"], "Deployment");
    assert_eq!(startup["object"]["name"], "llm");
    let tcp = findings
        .iter()
        .find(|f| f["rule"] == "readiness-port-open")
        .unwrap();
    assert_eq!(
        (tcp["line"].as_u64(), tcp["column"].as_u64()),
        (Some(15), Some(13))
    );
    assert!(
        findings
            .iter()
            .all(|f| f["file"] != "manifests/good.yaml" || f["severity"] != "error")
    );
    let errors = array(&json, "errors");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0]["file"], "manifests/broken.yaml");
    assert_eq!(errors[0]["line"], 4);
    assert!(
        array(&json, "skipped")
            .iter()
            .any(|s| s["file"] == "manifests/values.yaml")
    );
    assert_eq!(json["summary"]["files"], 4, "notes.txt is not a manifest");
    assert_eq!(json["summary"]["objects"], 2);
}

#[test]
fn exit_codes_follow_fail_on() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "good.yaml", GOOD_GPU);
    write(dir.path(), "bad.yaml", BAD_GPU);
    let run = |args: &[&str]| probelint().current_dir(dir.path()).args(args).assert();
    run(&["good.yaml"]).code(0);
    run(&["bad.yaml"]).code(1);
    // A warning alone: --fail-on decides. (A TGI server on CPU whose readiness is a port check.)
    let warn = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n    - name: web\n      image: ghcr.io/huggingface/text-embeddings-inference:cpu-1.5\n      readinessProbe: {tcpSocket: {port: 80}}\n";
    write(dir.path(), "warn.yaml", warn);
    run(&["warn.yaml"]).code(0);
    run(&["--fail-on", "warning", "warn.yaml"]).code(1);
    run(&["--fail-on", "bogus", "warn.yaml"]).code(2);
    run(&["missing.yaml"]).code(2);
}

#[test]
fn stdin_is_read_with_dash_and_named_dash() {
    let out = probelint()
        .args(["--format", "json", "-"])
        .write_stdin(BAD_GPU)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(array(&json, "findings").iter().all(|f| f["file"] == "-"));
}

#[test]
fn json_and_list_documents_are_linted() {
    let dir = tempfile::tempdir().unwrap();
    let list = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{}]}}",
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
  "spec": {"containers": [{"name": "m", "image": "vllm/vllm-openai:v0.10.1",
    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}"#
    );
    write(dir.path(), "list.json", &list);
    let (code, json) = json_run(dir.path(), &["list.json"]);
    assert_eq!(code, 1);
    let f = &json["findings"][0];
    assert_eq!(f["pointer"], "/spec/containers/0");
    assert_eq!(f["line"], 2, "located inside the List item");
}

#[test]
fn helm_templates_are_skipped_with_a_hint_but_valid_yaml_with_braces_is_linted() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "chart/Chart.yaml",
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    );
    write(
        dir.path(),
        "chart/templates/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
    );
    write(
        dir.path(),
        "loose.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels: {{ toYaml .Values.labels }}\n",
    );
    write(
        dir.path(),
        "runtime.yaml",
        "apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata: {name: rt}\nspec:\n  containers:\n    - name: kserve-container\n      args: [\"--model_name={{.Name}}\"]\n      resources: {limits: {nvidia.com/gpu: 1}}\n",
    );
    let (code, json) = json_run(dir.path(), &["."]);
    assert_eq!(code, 1, "{json:#}");
    let skipped = array(&json, "skipped");
    for file in ["chart/templates/deploy.yaml", "loose.yaml"] {
        let s = skipped
            .iter()
            .find(|s| s["file"] == file)
            .unwrap_or_else(|| panic!("{file} skipped: {json:#}"));
        assert!(
            s["reason"].as_str().unwrap().contains("helm template"),
            "{s}"
        );
    }
    assert!(array(&json, "errors").is_empty());
    assert!(
        array(&json, "findings")
            .iter()
            .any(|f| f["file"] == "runtime.yaml")
    );
}

/// A CI job pointed at a chart or an overlay must not pass while checking nothing: without
/// `--verbose`, stderr says how many templates and kustomizations were not linted and how to
/// lint them, and a run that linted nothing at all because of them fails (exit 2).
#[test]
fn unrendered_charts_and_kustomizations_are_reported_and_fail_a_run_that_linted_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "chart/Chart.yaml",
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    );
    write(dir.path(), "chart/values.yaml", "replicaCount: 2\n");
    for name in ["deploy", "service"] {
        write(
            dir.path(),
            &format!("chart/templates/{name}.yaml"),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
        );
    }
    write(
        dir.path(),
        "overlay/kustomization.yaml",
        "resources: [../base]\n",
    );
    write(dir.path(), "deploy/good.yaml", GOOD_GPU);
    let run = |args: &[&str]| {
        let out = probelint()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code().unwrap(), stdout, stderr)
    };

    let (code, stdout, stderr) = run(&["chart"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(!stdout.contains("No problems found"), "{stdout}");
    assert!(
        stderr.contains(
            "probelint: error: 2 Helm templates were not linted (chart): render the chart and \
             lint the output, e.g. `helm template RELEASE chart | probelint -`"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was linted"), "{stderr}");
    // The same in a machine format: the notice is on stderr, the report on stdout.
    let (code, stdout, stderr) = run(&["--format", "json", "chart"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("2 Helm templates were not linted"),
        "{stderr}"
    );
    serde_json::from_str::<Value>(&stdout).expect("a JSON report");

    let (code, _, stderr) = run(&["overlay"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "1 kustomization was not linted as rendered (overlay): lint what kustomize renders \
             with `probelint --kustomize overlay`"
        ),
        "{stderr}"
    );

    // Beside a manifest that was linted, the run keeps its own exit code, and still says it.
    let (alone, _, stderr) = run(&["deploy"]);
    assert!(!stderr.contains("not linted"), "{stderr}");
    let (code, stdout, stderr) = run(&["."]);
    assert_eq!(code, alone, "{stdout}{stderr}");
    assert!(
        stderr.contains("probelint: warning: 2 Helm templates were not linted (chart)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("probelint: warning: 1 kustomization was not linted as rendered"),
        "{stderr}"
    );
    assert!(!stderr.contains("nothing was linted"), "{stderr}");
}

/// A report written with `--output` is created as any program creates a file, 0666 less the
/// umask (a CI artifact or a shared directory must be able to read it); an existing one keeps
/// its mode.
#[cfg(unix)]
#[test]
fn output_files_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "deploy/good.yaml", GOOD_GPU);
    let mode = |name: &str| {
        fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    for (umask, report, expected) in [
        ("022", "report-022.json", 0o644),
        ("002", "report-002.json", 0o664),
        ("077", "report-077.json", 0o600),
    ] {
        let out = std::process::Command::new("sh")
            .current_dir(dir.path())
            .args(["-c", &format!("umask {umask} && exec \"$0\" \"$@\"")])
            .arg(common::BIN)
            .args(["--format", "json", "--output", report, "deploy"])
            .output()
            .unwrap();
        assert!(out.status.code().is_some_and(|c| c < 2), "{}", text(&out));
        assert_eq!(mode(report), expected, "umask {umask}");
    }
    fs::set_permissions(
        dir.path().join("report-022.json"),
        fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    probelint()
        .current_dir(dir.path())
        .args(["--format", "json", "--output", "report-022.json", "deploy"])
        .output()
        .unwrap();
    assert_eq!(
        mode("report-022.json"),
        0o640,
        "an existing report keeps its mode"
    );
}

/// The human summary is worded by outcome: a run where most files could not be read begins with
/// them, not with "No problems found", and a file `--fix` could not write is one that could not
/// be fixed, not one that could not be read.
#[cfg(unix)]
#[test]
fn the_summary_says_which_files_could_not_be_read_and_which_not_fixed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "read/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    for n in 1..=2 {
        write(
            dir.path(),
            &format!("read/broken-{n}.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n",
        );
    }
    let out = probelint()
        .current_dir(dir.path())
        .args(["--color", "never", "read"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().last().unwrap_or_default();
    assert_eq!(
        summary,
        "2 of 3 files could not be read; no problems found in the 1 object read"
    );

    write(dir.path(), "fix/bad.yaml", BAD_GPU);
    let bad = dir.path().join("fix/bad.yaml");
    fs::set_permissions(&bad, fs::Permissions::from_mode(0o444)).unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .args(["--color", "never", "--fix", "fix"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("read-only"), "{stdout}");
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("Found "))
        .unwrap_or_default();
    assert!(
        summary.ends_with("; 1 file could not be fixed") && !summary.contains("could not be read"),
        "{stdout}"
    );
}

/// A policy file's error points at the file by its path (as given), never at `<input>`.
#[test]
fn a_policy_error_names_the_policy_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "policies/team.yaml",
        "modelLoadSeconds: 600\nmodelLoadSecond: 600\n",
    );
    write(dir.path(), "good.yaml", GOOD_GPU);
    let out = probelint()
        .current_dir(dir.path())
        .args(["--config", "policies/team.yaml", "good.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--> policies/team.yaml:2:1"), "{stderr}");
    assert!(!stderr.contains("<input>"), "{stderr}");
}

/// A policy file with several mistakes gets all of them at once, each at its line and column,
/// not only the first one the reader stops at.
#[test]
fn every_problem_of_a_policy_file_is_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".probelint.yaml",
        "rules:\n  gpu-startup-probe-missing: eror\nmodelLoad:\n  bandwidthMBps: 300\nacceleratorResources: [nvidia.com/gpu]\n",
    );
    write(dir.path(), "good.yaml", GOOD_GPU);
    let out = probelint()
        .current_dir(dir.path())
        .arg("good.yaml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("3 problems in all"), "{stderr}");
    for line in [
        ".probelint.yaml:2:3: rules.gpu-startup-probe-missing: \"eror\" is not one of \"off\", \"info\", \"warning\", \"error\"",
        ".probelint.yaml:4:3: modelLoad.bandwidthMBps: unknown key \"bandwidthMBps\"",
        ".probelint.yaml:5:1: acceleratorResources: unknown key \"acceleratorResources\"",
    ] {
        assert!(stderr.contains(line), "{line}\n{stderr}");
    }
    // One mistake: the reader's own message, with its snippet, and no list.
    write(
        dir.path(),
        ".probelint.yaml",
        "rules:\n  gpu-startup-probe-missing: eror\n",
    );
    let out = probelint()
        .current_dir(dir.path())
        .arg("good.yaml")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains(".probelint.yaml:2:30\n"), "{stderr}");
    assert!(!stderr.contains("problems in all"), "{stderr}");
}

#[test]
fn gitignore_and_exclude_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".gitignore", "generated/\n");
    write(dir.path(), "generated/bad.yaml", BAD_GPU);
    write(dir.path(), "vendor/bad.yaml", BAD_GPU);
    write(dir.path(), "app/bad.yaml", BAD_GPU);
    let (_, json) = json_run(dir.path(), &["--exclude", "vendor/**", "."]);
    let files: std::collections::BTreeSet<_> = array(&json, "findings")
        .iter()
        .map(|f| f["file"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(files.into_iter().collect::<Vec<_>>(), ["app/bad.yaml"]);
}

#[test]
fn config_is_discovered_upwards_and_invalid_config_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".probelint.yaml",
        "rules:\n  gpu-startup-probe-missing: off\n  gpu-readiness-probe-missing: off\n  readiness-port-open: off\n  liveness-restart-loop: off\n",
    );
    write(dir.path(), "sub/bad.yaml", BAD_GPU);
    let (code, json) = json_run(&dir.path().join("sub"), &["bad.yaml"]);
    assert_eq!(code, 0, "{json:#}");
    write(dir.path(), "strict.yaml", "rules:\n  no-such-rule: error\n");
    let out = probelint()
        .current_dir(dir.path())
        .args(["--config", "strict.yaml", "sub/bad.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("strict.yaml") && err.contains("no-such-rule"),
        "{err}"
    );
}

#[test]
fn several_formats_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.yaml", BAD_GPU);
    let out = probelint()
        .current_dir(dir.path())
        .args([
            "--format",
            "sarif",
            "--output",
            "results.sarif",
            "--format",
            "github",
            "--format",
            "json",
            "--output",
            "r.json",
            "bad.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("::error file=bad.yaml,line=9"), "{stdout}");
    let sarif: Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("results.sarif")).unwrap())
            .unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let json: Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(json["version"], 1);
    // Two formats on stdout would interleave: refused.
    probelint()
        .current_dir(dir.path())
        .args(["-f", "json", "-f", "github", "bad.yaml"])
        .assert()
        .code(2);
}

#[test]
fn hostile_files_are_errors_and_the_rest_is_still_linted() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.yaml", BAD_GPU);
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    write(dir.path(), "bomb.yaml", bomb);
    write(dir.path(), "deep.yaml", "- ".repeat(100_000));
    fs::write(
        dir.path().join("latin1.yaml"),
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: caf\xe9}\n",
    )
    .unwrap();
    fs::write(dir.path().join("binary.yaml"), b"\x00\x01\x02\x03").unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("nowhere.yaml"),
            dir.path().join("dangling.yaml"),
        )
        .unwrap();
    }
    let (code, json) = json_run(dir.path(), &["."]);
    assert_eq!(code, 2);
    // The bomb and the deep file are refused by the loader's limits (nodes, depth), before
    // any expansion: the work is bounded by the limits, whatever the machine's speed.
    let message = |file: &str| {
        array(&json, "errors")
            .iter()
            .find(|e| e["file"] == file)
            .and_then(|e| e["message"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        message("bomb.yaml").contains("nodes"),
        "{}",
        message("bomb.yaml")
    );
    assert!(
        message("deep.yaml").contains("nested deeper"),
        "{}",
        message("deep.yaml")
    );
    let errors: Vec<String> = array(&json, "errors")
        .iter()
        .map(|e| e["file"].as_str().unwrap().to_owned())
        .collect();
    for file in ["bomb.yaml", "deep.yaml", "latin1.yaml", "binary.yaml"] {
        assert!(
            errors.iter().any(|e| e == file),
            "{file} missing from {errors:?}"
        );
    }
    #[cfg(unix)]
    assert!(
        errors
            .iter()
            .any(|e| e.contains("dangling") || e.contains("loop")),
        "{errors:?}"
    );
    assert!(
        array(&json, "findings")
            .iter()
            .any(|f| f["file"] == "bad.yaml")
    );
}

#[test]
fn rules_and_explain() {
    let out = probelint().arg("rules").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // A header, then one line per rule.
    let rules = probelint_policies::registry().len();
    assert_eq!(text.lines().count(), rules + 1, "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("gpu-startup-probe-missing "))
        .unwrap();
    assert_eq!(line.split_whitespace().nth(1), Some("error"), "{line}");
    let out = probelint()
        .args(["explain", "readiness-port-open"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("## Bad")
            && text.contains("tcpSocket")
            && text.contains("probelint.io/ignore")
    );
    probelint()
        .args(["explain", "startup-probe"])
        .assert()
        .code(2);
}

#[test]
fn version_names_the_builtin_policy_and_policy_default_prints_it() {
    let out = probelint().arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("probelint 0.") && text.contains("built-in policy 2026."),
        "{text}"
    );
    let out = probelint().arg("--policy-default").output().unwrap();
    let policy = String::from_utf8(out.stdout).unwrap();
    assert!(policy.contains("modelLoadSeconds: 300"), "{policy}");
    // The schema line resolves from wherever the user saves the file: a URL to the schema in
    // the repository, never a path relative to policies/.
    let first = policy.lines().next().unwrap_or_default();
    let url = first
        .strip_prefix("# yaml-language-server: $schema=")
        .unwrap_or_else(|| panic!("first line: {first}"));
    let in_repo = url
        .strip_prefix("https://raw.githubusercontent.com/probelint/probelint/main/")
        .unwrap_or_else(|| panic!("not a URL into the repository: {url}"));
    assert!(
        common::workspace_root().join(in_repo).is_file(),
        "{in_repo} does not exist"
    );
    assert_eq!(
        policy.matches("yaml-language-server").count(),
        1,
        "{policy}"
    );
    // Saved as a user's policy, it loads.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".probelint.yaml", &policy);
    write(dir.path(), "good.yaml", GOOD_GPU);
    let out = probelint()
        .current_dir(dir.path())
        .args(["--config", ".probelint.yaml", "good.yaml"])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        common::text(&out)
    );
}

#[test]
fn human_output_quotes_the_source_line() {
    let out = probelint()
        .args(["--color", "never", "-"])
        .write_stdin(BAD_GPU)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("error[gpu-startup-probe-missing]"), "{text}");
    assert!(text.contains("<stdin>:9:9"), "{text}");
    assert!(text.contains("- name: vllm"), "{text}");
    assert!(!text.contains('\u{1b}'), "no colour when not asked: {text}");
}

#[test]
fn lints_the_whole_real_corpus_without_crashing() {
    let corpus = probelint_testkit::corpus::real_dir();
    let out = probelint()
        .args(["--format", "json"])
        .arg(&corpus)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["summary"]["files"].as_u64().unwrap() >= 100);
    assert!(json["summary"]["objects"].as_u64().unwrap() >= 150);
    // Its verdicts (62 errors and 81 warnings when this was written; policies/tests/corpus.rs
    // pins each one): a run that lost most of them is broken, not cleaner.
    let count = |s: &str| json["summary"][s].as_u64().unwrap();
    assert!(
        count("errors") >= 50 && count("errors") + count("warnings") >= 120,
        "{:#}",
        json["summary"]
    );
    // Every finding carries a real position.
    for f in array(&json, "findings") {
        assert!(
            f["line"].as_u64().unwrap() >= 1 && f["column"].as_u64().unwrap() >= 1,
            "{f}"
        );
    }
}

#[test]
fn kustomize_without_a_renderer_is_a_clear_error_and_renders_with_one() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app/kustomization.yaml",
        "resources: [deploy.yaml]\n",
    );
    write(dir.path(), "app/deploy.yaml", BAD_GPU);
    // Walked without --kustomize, the kustomization is skipped with a hint that the overlay it
    // renders may differ, naming --kustomize.
    let (_, json) = json_run(dir.path(), &["app"]);
    let skipped = array(&json, "skipped");
    assert!(
        skipped.iter().any(|s| s["file"] == "app/kustomization.yaml"
            && s["reason"]
                .as_str()
                .is_some_and(|r| r.contains("may differ") && r.contains("--kustomize"))),
        "{skipped:#?}"
    );
    let empty_path = dir.path().join("bin");
    fs::create_dir_all(&empty_path).unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .env("PATH", &empty_path)
        .args(["--kustomize", "app"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out);
    assert!(
        err.contains("kubectl") && err.contains("kustomize"),
        "{err}"
    );
    // A stand-in `kustomize` that prints the resources, as `kustomize build` would.
    #[cfg(unix)]
    {
        // Installed by a child process, not written by this one (see `install_script`).
        install_script(
            "#!/bin/sh\n[ \"$1\" = build ] && cat \"$2/deploy.yaml\"\n",
            &empty_path.join("kustomize"),
        );
        let path = format!("{}:/usr/bin:/bin", empty_path.display());
        let out = probelint()
            .current_dir(dir.path())
            .env("PATH", &path)
            .args(["--kustomize", "--format", "json", "app"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            array(&json, "findings")
                .iter()
                .all(|f| f["file"] == "app (kustomize)"),
            "{json:#}"
        );
        // --fix cannot rewrite what kustomize rendered: it says so, fixes nothing there and
        // leaves its findings in the report.
        for dry_run in [false, true] {
            let out = probelint()
                .current_dir(dir.path())
                .env("PATH", &path)
                .args(["--kustomize", "--fix", "--format", "json", "app"])
                .args(dry_run.then_some("--dry-run"))
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "dry run {dry_run}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(" 0 findings in 0 files\n"), "{err}");
            // A dry run lists what remains, since it renders no report.
            assert_eq!(
                err.contains("remains error[gpu-startup-probe-missing]: app (kustomize):9:7:"),
                dry_run,
                "{err}"
            );
            assert_eq!(
                fs::read_to_string(dir.path().join("app/deploy.yaml")).unwrap(),
                BAD_GPU
            );
            if !dry_run {
                let json: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(
                    json["errors"][0]["message"],
                    "not fixed (file left unchanged): it is what kustomize renders from app; \
                     fix the files it is built from",
                    "{json:#}"
                );
                assert!(
                    array(&json, "findings")
                        .iter()
                        .any(|f| f["rule"] == "gpu-startup-probe-missing"),
                    "{json:#}"
                );
            }
        }
    }
}

/// Each file is evaluated on its own worker and its objects dropped; the relations between
/// files (a PDB or an HPA beside the Deployment it is about) must still be judged, and their
/// findings placed and quoted in the right file.
#[test]
fn objects_in_different_files_are_judged_together() {
    let dir = tempfile::tempdir().unwrap();
    let replicated = GOOD_GPU.replace(
        "spec:\n  template:\n    spec:",
        "spec:\n  replicas: 3\n  template:\n    metadata:\n      labels: {app: llm}\n    spec:",
    );
    write(dir.path(), "deploy/llm.yaml", &replicated);
    write(
        dir.path(),
        "scaling/hpa.yaml",
        "# scale on CPU\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: llm}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}\n  minReplicas: 2\n  maxReplicas: 4\n  metrics:\n    - type: Resource\n      resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}\n",
    );
    let (_, json) = json_run(dir.path(), &["."]);
    let placed: Vec<(&str, &str, u64)> = array(&json, "findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap(),
                f["file"].as_str().unwrap(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("gpu-serving-without-pdb", "deploy/llm.yaml", 8),
            ("hpa-cpu-metric-on-gpu-workload", "scaling/hpa.yaml", 9),
        ],
        "{json:#}"
    );

    // The human output quotes the lines, although neither file has a finding of its own.
    let out = probelint()
        .current_dir(dir.path())
        .args(["--color", "never", "."])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("replicas: 3"), "{text}");
    assert!(text.contains("metrics:"), "{text}");

    // A PDB in a third file covers the Deployment; an unrelated one in another namespace does not.
    write(
        dir.path(),
        "policy/pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: other, namespace: elsewhere}\nspec: {maxUnavailable: 1, selector: {matchLabels: {app: llm}}}\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: llm}\nspec: {maxUnavailable: 1, unhealthyPodEvictionPolicy: AlwaysAllow, selector: {matchLabels: {app: llm}}}\n",
    );
    let (_, json) = json_run(dir.path(), &["."]);
    let rules: Vec<&str> = array(&json, "findings")
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["hpa-cpu-metric-on-gpu-workload"], "{json:#}");
}

/// A vLLM Deployment serving Llama-3.1-70B from the Hub, liveness and no startupProbe.
const LLAMA_70B: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-70b
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          args: ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]
          resources:
            limits:
              nvidia.com/gpu: 4
          livenessProbe:
            httpGet: {path: /health, port: 8000}
            initialDelaySeconds: 120
          readinessProbe:
            httpGet: {path: /health, port: 8000}
"#;

#[test]
fn the_load_time_estimate_is_shown_in_every_format_and_used_by_simulate() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "llama.yaml", LLAMA_70B);
    let arithmetic = "≈ 160–2980 s (140 GB (Llama-3.1-70B-Instruct: 70B parameters × 2 bytes, \
                      bf16) downloaded from the Hugging Face Hub at 50–1000 MB/s = 140–2800 s + \
                      20–180 s vLLM start)";
    // Human output: the arithmetic, in the notes under the headline (wrapped to the width).
    let out = probelint()
        .current_dir(dir.path())
        .arg("llama.yaml")
        .output()
        .unwrap();
    let human = text(&out);
    let flat = human.split_whitespace().collect::<Vec<_>>().join(" ");
    for piece in [
        "= note: the slow end of load ≈ 160–2980 s + 25 %",
        "= note: 140 GB (Llama-3.1-70B-Instruct: 70B parameters × 2 bytes, bf16) downloaded from \
         the Hugging Face Hub at 50–1000 MB/s = 140–2800 s + 20–180 s vLLM start",
    ] {
        assert!(flat.contains(piece), "{piece}: {human}");
    }
    // The container's one error about its startupProbe carries the liveness risk.
    assert!(
        flat.contains("runs from container start and kills it mid-load"),
        "{human}"
    );
    assert!(
        human.contains("= serves a model: runs vLLM (the image's entrypoint)"),
        "{human}"
    );
    // JSON: the estimate's inputs as properties.
    let (code, json) = json_run(dir.path(), &["llama.yaml"]);
    assert_eq!(code, 1, "an estimated load is evidence: errors");
    let startup = array(&json, "findings")
        .iter()
        .find(|f| f["rule"] == "gpu-startup-probe-missing")
        .expect("gpu-startup-probe-missing");
    let load = &startup["load"];
    assert_eq!(load["fast_seconds"], 160.0);
    assert_eq!(load["slow_seconds"], 2980.0);
    assert_eq!(load["confidence"], "estimated");
    assert_eq!(
        load["estimate"]["model"],
        "meta-llama/Llama-3.1-70B-Instruct"
    );
    assert_eq!(load["estimate"]["parameters_billions"], 70.0);
    assert_eq!(load["estimate"]["bytes_per_parameter"], 2.0);
    assert_eq!(
        load["estimate"]["bandwidth_mb_per_second"],
        serde_json::json!({"fast": 1000.0, "slow": 50.0})
    );
    assert_eq!(
        load["estimate"]["start_seconds"],
        serde_json::json!({"fast": 20.0, "slow": 180.0})
    );
    assert_eq!(
        load["estimate"]["source"],
        "downloaded from the Hugging Face Hub"
    );
    // SARIF: the same in the result's properties.
    let out = probelint()
        .current_dir(dir.path())
        .args(["--format", "sarif", "llama.yaml"])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let result = results
        .iter()
        .find(|r| r["ruleId"] == "gpu-startup-probe-missing")
        .expect("result");
    assert_eq!(result["properties"]["load"]["confidence"], "estimated");
    assert_eq!(
        result["properties"]["evidence"],
        "runs vLLM (the image's entrypoint)"
    );
    // simulate: without --load-seconds it uses the estimate's slow end and says where it came
    // from.
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "llama.yaml"])
        .output()
        .unwrap();
    let timeline = text(&out);
    assert!(timeline.contains("(model load 2980 s,"), "{timeline}");
    assert!(
        timeline
            .contains("simulated at its slow end, 2980 s (--load-seconds 160 tries the fast end)"),
        "{timeline}"
    );
    assert!(
        timeline.contains(&format!("note: model load {arithmetic}")),
        "{timeline}"
    );
    // Without a model the load is unknown: no finding rests on the default, and the one finding
    // is the missing startupProbe, which says so and carries the load it could not estimate: a
    // warning, since its liveness outlasts vLLM's own start and no number says the load does.
    let unknown = LLAMA_70B.replace(
        r#"          args: ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]
"#,
        "",
    );
    write(dir.path(), "unknown.yaml", &unknown);
    let (_, json) = json_run(dir.path(), &["unknown.yaml"]);
    let findings = array(&json, "findings");
    assert!(
        !findings
            .iter()
            .any(|f| f["rule"] == "liveness-restart-loop")
    );
    let startup = findings
        .iter()
        .find(|f| f["rule"] == "gpu-startup-probe-missing")
        .expect("gpu-startup-probe-missing");
    assert_eq!(startup["severity"], "warning");
    assert_eq!(startup["evidence"], "runs vLLM (the image's entrypoint)");
    assert_eq!(startup["load"]["confidence"], "assumed");
    assert_eq!(
        startup["load"]["why"],
        "no model named in the container's command, args or env"
    );
}

#[test]
fn cross_object_findings_point_at_the_line_they_are_about() {
    // A Service named vllm, a vLLM Deployment, a PDB and an HPA in one file.
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cross-object-gpu.yaml"),
    )
    .unwrap();
    write(dir.path(), "serving.yaml", &text);
    let (code, json) = json_run(dir.path(), &["serving.yaml"]);
    assert_eq!(code, 1);
    let at = |rule: &str| {
        let f = array(&json, "findings")
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap_or_else(|| panic!("{rule} in {json:#}"))
            .clone();
        (f["line"].as_u64().unwrap() as usize, f)
    };
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    // The pod spec that keeps service links on, the PDB's minAvailable, the HPA's spec.
    let (line, f) = at("vllm-service-links");
    assert_eq!(line, line_of("    spec:"), "{f}");
    assert_eq!(f["severity"], "error");
    let (line, _) = at("pdb-blocks-gpu-drains");
    assert_eq!(line, line_of("minAvailable: 2"));
    let (line, f) = at("hpa-scale-up-outpaces-load");
    assert_eq!(line, line_of("scaleTargetRef") - 1, "{f}");
    assert_eq!(f["load"]["confidence"], "estimated");
}

#[test]
fn completions_man_page_and_schema() {
    for shell in ["bash", "zsh", "fish"] {
        let out = probelint().args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("fail-on"),
            "{shell}"
        );
    }
    let out = probelint().arg("man").output().unwrap();
    let man = String::from_utf8_lossy(&out.stdout);
    assert!(
        man.starts_with(".ie") || man.contains(".TH probelint"),
        "{man}"
    );
    let out = probelint().arg("schema").output().unwrap();
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schema["title"], "probelint policy (.probelint.yaml)");
}

/// An unprobed 4-GPU vLLM Pod, its lines indented by `indent` spaces.
fn gpu_pod(indent: usize) -> String {
    let pad = " ".repeat(indent);
    [
        "apiVersion: v1",
        "kind: Pod",
        "metadata:",
        "  name: llama",
        "spec:",
        "  containers:",
        "    - name: vllm",
        "      image: vllm/vllm-openai:v0.6.3",
        "      args: [--model, meta-llama/Meta-Llama-3-70B-Instruct, --tensor-parallel-size, \"4\"]",
        "      ports: [{containerPort: 8000}]",
        "      resources: {limits: {nvidia.com/gpu: 4}}",
    ]
    .iter()
    .map(|line| format!("{pad}{line}\n"))
    .collect()
}

const NOTES: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  a: b\n";

/// The ways a stream splits for kubectl (apimachinery's `YAMLReader`: a line starting with
/// `---`, then only blanks or a comment) where a YAML reading sees something else, or nothing
/// suspicious: (name, file, whether the two readings differ). In each, the second document as
/// kubectl reads it is the unprobed GPU Pod (in a List for one).
fn kubectl_streams() -> Vec<(&'static str, String, bool)> {
    let hidden = |pod: String| format!("{NOTES}---#: |\n{pod}");
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: a}}}}\n---#: |\n  apiVersion: v1\n  kind: List\n  items:\n{}",
        gpu_pod(4).replacen("    apiVersion", "  - apiVersion", 1)
    );
    let json_pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"llama"},"spec":{"containers":[{"name":"vllm","image":"vllm/vllm-openai:v0.6.3","ports":[{"containerPort":8000}],"resources":{"limits":{"nvidia.com/gpu":4}}}]}}"#;
    vec![
        ("---#", hidden(gpu_pod(2)), true),
        (
            "---# with CRLF",
            hidden(gpu_pod(2)).replace('\n', "\r\n"),
            true,
        ),
        (
            "--- #comment",
            format!("{NOTES}--- #comment\n{}", gpu_pod(0)),
            false,
        ),
        ("---<tab>", format!("{NOTES}---\t\n{}", gpu_pod(0)), false),
        ("inside a List", list, true),
        (
            "at the end of the file",
            hidden(gpu_pod(2)).trim_end().to_owned(),
            true,
        ),
        (
            "a document-level scalar",
            format!("---#\n{json_pod}\n"),
            true,
        ),
    ]
}

#[test]
fn a_stream_is_split_as_kubectl_splits_it_and_a_different_yaml_reading_is_an_error() {
    for (name, text, differs) in kubectl_streams() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "stream.yaml", &text);
        let (code, json) = json_run(dir.path(), &["stream.yaml"]);
        let findings = array(&json, "findings");
        let startup = findings
            .iter()
            .find(|f| f["rule"] == "gpu-startup-probe-missing" && f["object"]["kind"] == "Pod")
            .unwrap_or_else(|| panic!("{name}: the GPU Pod is not linted: {json:#}"));
        assert_eq!(startup["object"]["name"], "llama", "{name}");
        // Where the container is written, in the file as it is.
        let (line, column) = text
            .lines()
            .enumerate()
            .find_map(|(i, l)| {
                let at = l
                    .find("- name: vllm")
                    .or_else(|| l.find(r#"{"name":"vllm""#))?;
                Some((i + 1, l[..at].chars().count() + 1))
            })
            .expect("the container");
        assert_eq!(
            (startup["line"].as_u64(), startup["column"].as_u64()),
            (Some(line as u64), Some(column as u64)),
            "{name}: {startup:#}"
        );
        let errors = array(&json, "errors");
        if differs {
            assert_eq!(code, 2, "{name}: {json:#}");
            let separator = text
                .lines()
                .position(|l| l.starts_with("---#"))
                .expect("separator")
                + 1;
            assert_eq!(errors.len(), 1, "{name}: {errors:#?}");
            assert_eq!(errors[0]["line"], separator as u64, "{name}");
            assert_eq!(errors[0]["column"], 4, "{name}");
            assert!(
                errors[0]["message"].as_str().is_some_and(|m| m.starts_with(
                    "kubectl reads this line as a document separator, where YAML reads it as text"
                )),
                "{name}: {errors:#?}"
            );
        } else {
            assert_eq!(code, 1, "{name}: {json:#}");
            assert!(errors.is_empty(), "{name}: {errors:#?}");
        }
    }
}

#[test]
fn a_separator_kubectl_refuses_is_an_error_and_mutate_refuses_a_divergent_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "refused.yaml",
        format!(
            "{NOTES}--- {{apiVersion: v1, kind: ConfigMap}}\n{}",
            gpu_pod(0)
        ),
    );
    let (code, json) = json_run(dir.path(), &["refused.yaml"]);
    assert_eq!(code, 2, "{json:#}");
    let errors = array(&json, "errors");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0]["line"], 7);
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("kubectl refuses this file")),
        "{errors:#?}"
    );
    // mutate and simulate read one manifest and fail on any problem in it: a file whose two
    // readings differ is one.
    let (_, hidden, _) = &kubectl_streams()[0];
    write(dir.path(), "hidden.yaml", hidden);
    let out = probelint()
        .current_dir(dir.path())
        .args(["mutate", "hidden.yaml"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("kubectl reads this line as a document separator"),
        "{}",
        text(&out)
    );
}
