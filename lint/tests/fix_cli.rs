//! `probelint --fix`, `--fix --dry-run` and `probelint mutate`, run as users run them, and what a
//! fixed manifest does under `simulate`.

mod common;

use common::{BAD_GPU, GOOD_GPU, array, probelint, write};
use serde_json::Value;
use std::fs;

const BAD: &str = "# Served by the platform team.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm   # keep this name
  annotations:
    probelint.io/model-load-seconds: \"120\"
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          ports:
            - containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1

          # Port check only, for now.
          readinessProbe:
            tcpSocket:
              port: 8000
---
apiVersion: v1
kind: Service
metadata:
  name: llm
spec:
  ports: [{port: 80, targetPort: 8000}]
";

#[test]
fn fix_rewrites_in_place_keeping_everything_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.yaml");
    fs::write(&path, BAD).unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .args(["--fix", "--format", "json", "llm.yaml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fixed[gpu-startup-probe-missing]: llm.yaml:12:9"),
        "{stderr}"
    );
    assert!(stderr.contains("fixed[readiness-port-open]"), "{stderr}");
    let fixed = fs::read_to_string(&path).unwrap();
    // Every original line except the swapped handler survives, in order, byte-for-byte.
    let kept: Vec<&str> = BAD.lines().filter(|l| !l.contains("tcpSocket")).collect();
    let mut rest = fixed.lines();
    for line in &kept {
        assert!(
            rest.any(|l| l == *line),
            "line {line:?} lost or reordered:\n{fixed}"
        );
    }
    assert!(fixed.contains("# Port check only, for now."));
    assert!(fixed.contains("name: llm   # keep this name"));
    // What remains is reported, and no fixable finding is left.
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<&str> = array(&json, "findings")
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(
        !rules.contains(&"gpu-startup-probe-missing") && !rules.contains(&"readiness-port-open"),
        "{rules:?}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "only info findings remain: {rules:?}"
    );
    // Fixing again changes nothing.
    probelint()
        .current_dir(dir.path())
        .args(["--fix", "llm.yaml"])
        .assert()
        .code(0);
    assert_eq!(fs::read_to_string(&path).unwrap(), fixed);
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.yaml");
    fs::write(&path, BAD).unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .args(["--fix", "--dry-run", "llm.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "changes pending");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(
        diff.contains("--- a/llm.yaml") && diff.contains("+++ b/llm.yaml"),
        "{diff}"
    );
    assert!(
        diff.contains("+          startupProbe:") || diff.contains("+          startupProbe"),
        "{diff}"
    );
    assert!(diff.contains("-            tcpSocket:"), "{diff}");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        BAD,
        "dry run wrote the file"
    );
}

#[test]
fn fix_refuses_stdin_and_leaves_broken_files_alone() {
    probelint()
        .args(["--fix", "-"])
        .write_stdin(BAD)
        .assert()
        .code(2);
    let dir = tempfile::tempdir().unwrap();
    let broken = "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n";
    fs::write(dir.path().join("broken.yaml"), broken).unwrap();
    fs::write(dir.path().join("llm.yaml"), BAD).unwrap();
    probelint()
        .current_dir(dir.path())
        .args(["--fix", "."])
        .assert()
        .code(2);
    assert_eq!(
        fs::read_to_string(dir.path().join("broken.yaml")).unwrap(),
        broken
    );
    assert_ne!(
        fs::read_to_string(dir.path().join("llm.yaml")).unwrap(),
        BAD,
        "the good file is still fixed"
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        2,
        "no temporary files left behind: {leftovers:?}"
    );
}

#[test]
fn mutate_prints_manifests_and_patches() {
    let out = probelint()
        .args(["mutate", "-"])
        .write_stdin(BAD)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("probelint.io/mutated"), "{text}");
    assert!(text.contains("startupProbe"), "{text}");
    assert_eq!(
        text.matches("---\n").count(),
        2,
        "both objects printed: {text}"
    );
    let out = probelint()
        .args(["mutate", "--patch", "-"])
        .write_stdin(BAD)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops = json[0]["patch"].as_array().unwrap();
    assert!(
        ops.iter()
            .any(|op| op["path"] == "/spec/template/spec/containers/0/startupProbe")
    );
    assert_eq!(
        json[1]["patch"].as_array().unwrap().len(),
        0,
        "the Service needs nothing"
    );
    // The patch applies to the object and leaves no fixable finding.
    let docs = probelint_yaml::load::parse_stream(BAD.as_bytes(), &Default::default()).unwrap();
    let mut object = docs[0].value.clone();
    let patch: json_patch::Patch = serde_json::from_value(json[0]["patch"].clone()).unwrap();
    json_patch::patch(&mut object, &patch.0).unwrap();
    let left = probelint_policies::evaluate_one(&object, &probelint_policies::Policy::default());
    assert!(left.iter().all(|f| f.fix.is_none()), "{left:#?}");
}

#[test]
fn simulate_predicts_the_restart_storm_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.yaml");
    fs::write(&path, BAD.replace("\"120\"", "\"480\"").replace(
        "          # Port check only, for now.",
        "          livenessProbe:\n            httpGet: {path: /health, port: 8000}\n            initialDelaySeconds: 60\n          # Port check only, for now.",
    ))
    .unwrap();
    let run = |file: &std::path::Path| -> Value {
        let out = probelint()
            .args(["simulate", "--format", "json"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let before = run(&path);
    let c = &before["containers"][0];
    assert_eq!(c["container"], "vllm");
    assert_eq!(c["load_seconds"], 480.0);
    assert!(c["restarts"].as_u64().unwrap() >= 5, "{c:#}");
    assert!(
        c["ready_while_loading_seconds"].as_f64().unwrap() > 0.0,
        "tcp readiness: Ready while loading"
    );
    assert!(
        array(c, "transitions")
            .iter()
            .any(|t| t["event"].as_str().unwrap().starts_with("killed"))
    );
    // After --fix: no restart, Ready within one period of the load, never Ready while loading.
    probelint()
        .current_dir(dir.path())
        .args(["--fix", "llm.yaml"])
        .assert()
        .code(0);
    let after = run(&path);
    let c = &after["containers"][0];
    assert_eq!(c["restarts"], 0, "{c:#}");
    let ready = c["first_ready_seconds"].as_f64().unwrap();
    assert!((480.0..=490.0).contains(&ready), "{ready}");
    assert_eq!(c["ready_while_loading_seconds"], 0.0);
    // Human output says it in words.
    let out = probelint()
        .args(["simulate", "--load-seconds", "30"])
        .arg(&path)
        .output()
        .unwrap();
    // The fixed startup probe passes at its first tick after the 30 s load (ticks fall 0.5 s
    // before each 10 s period: 39.5 s); the pod sync that follows runs readiness at once
    // (prober_manager.go UpdatePodStatus), so Ready at 39.5 s too.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 restarts (restartCount), first Ready at 39.5 s"),
        "{text}"
    );
}

/// `--fix` checks again only the files it changed; the others keep their findings and the facts
/// the cross-object rules judge them by: a PDB in a file with no finding of its own still
/// covers the Deployment that was fixed, and an unchanged Deployment without one is still
/// reported, at its line.
#[test]
fn fix_checks_again_what_it_changed_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let replicated = |text: &str, app: &str| {
        text.replace("name: llm", &format!("name: {app}")).replace(
            "spec:\n  template:\n    spec:",
            &format!(
                "spec:\n  replicas: 3\n  template:\n    metadata:\n      labels: {{app: {app}}}\n    spec:"
            ),
        )
    };
    write(dir.path(), "deploy/llm.yaml", replicated(BAD_GPU, "llm"));
    write(
        dir.path(),
        "policy/pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: llm}\nspec: {maxUnavailable: 1, unhealthyPodEvictionPolicy: AlwaysAllow, selector: {matchLabels: {app: llm}}}\n",
    );
    write(dir.path(), "other/api.yaml", replicated(GOOD_GPU, "api"));
    let out = probelint()
        .current_dir(dir.path())
        .args(["--fix", "--format", "json", "."])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
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
    let fixed = fs::read_to_string(dir.path().join("deploy/llm.yaml")).unwrap();
    assert!(fixed.contains("startupProbe"), "{fixed}");
    assert_eq!(
        placed,
        [
            ("gpu-graceful-shutdown-missing", "deploy/llm.yaml", 12),
            ("gpu-serving-without-pdb", "other/api.yaml", 8),
        ],
        "{json:#}"
    );
    assert_eq!(json["summary"]["files"], 3, "{json:#}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.ends_with("Fixed 2 findings in 1 file\n"), "{stderr}");
}

/// What `--fix` reports is what checking the fixed files reports, also for a path given twice
/// (written once; the second name is an error, and both are counted as without `--fix`).
#[test]
fn the_report_after_fix_is_the_check_of_the_fixed_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", BAD_GPU);
    let run = |args: &[&str]| -> Value {
        let out = probelint()
            .current_dir(dir.path())
            .args(["-f", "json"])
            .args(args)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let fixed = run(&["--fix", "a.yaml", "a.yaml"]);
    let errors: Vec<&str> = array(&fixed, "errors")
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        errors,
        ["not fixed (file left unchanged): it is the same file as a.yaml, which was fixed"]
    );
    let checked = run(&["a.yaml", "a.yaml"]);
    assert_eq!(fixed["findings"], checked["findings"], "{fixed:#}");
    assert_eq!(fixed["summary"]["files"], 2);
    assert_eq!(fixed["summary"]["objects"], checked["summary"]["objects"]);
}
