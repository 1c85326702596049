//! `probeHelper` in `.probelint.yaml`: `probelint --fix` and `probelint mutate` write
//! probelint-probe exec probes and the volumes that bring the binary, keeping the file's comments.

mod common;

use common::{array, probelint};
use serde_json::Value;
use std::fs;

const POLICY: &str = "# The helper, copied by an init container.
probeHelper:
  image: registry.example.com/probelint-probe:0.1.0
  mode: initContainer
";

const MANIFEST: &str = "# Served by the platform team.
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
          volumeMounts:
            - name: cache   # the weights
              mountPath: /root/.cache
          # Port check only, for now.
          readinessProbe:
            tcpSocket:
              port: 8000
      volumes:
        - name: cache
          emptyDir: {}
";

fn objects(text: &str) -> Vec<Value> {
    probelint_testkit::yaml::try_objects(text).expect("YAML")
}

#[test]
fn fix_writes_the_helpers_probes_and_keeps_the_comments() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(".probelint.yaml"), POLICY).unwrap();
    let path = dir.path().join("llm.yaml");
    fs::write(&path, MANIFEST).unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .args(["--fix", "--format", "json", "llm.yaml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("fixed[readiness-port-open]"), "{stderr}");
    assert!(
        stderr.contains("fixed[gpu-startup-probe-missing]"),
        "{stderr}"
    );
    let fixed = fs::read_to_string(&path).unwrap();
    for comment in [
        "# Served by the platform team.",
        "name: llm   # keep this name",
        "- name: cache   # the weights",
        "# Port check only, for now.",
    ] {
        assert!(fixed.contains(comment), "{comment:?} lost:\n{fixed}");
    }
    let doc = &objects(&fixed)[0];
    let pod = &doc["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let ready = c["readinessProbe"]["exec"]["command"].clone();
    assert_eq!(
        ready,
        serde_json::json!([
            "/probelint/bin/probelint-probe",
            "ready",
            "--server",
            "vllm",
            "--port",
            "8000",
            "--smoke",
            "--interval",
            "60",
            "--cache",
            "/probelint-state/ready"
        ]),
        "{fixed}"
    );
    assert_eq!(c["readinessProbe"]["timeoutSeconds"], 13, "{fixed}");
    assert_eq!(
        c["startupProbe"]["exec"]["command"][1], "startup",
        "{fixed}"
    );
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("not a list: {v}"))
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(&pod["volumes"]),
        ["cache", "probelint-probe", "probelint-probe-state"]
    );
    assert_eq!(
        names(&c["volumeMounts"]),
        ["cache", "probelint-probe", "probelint-probe-state"]
    );
    assert_eq!(pod["initContainers"][0]["args"][0], "install");
    // No fixable finding is left, and nothing speaks against the helper's probes.
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    for f in array(&json, "findings") {
        let rule = f["rule"].as_str().unwrap();
        assert!(
            !matches!(
                rule,
                "readiness-port-open" | "exec-probe-heavy" | "gpu-startup-probe-missing"
            ),
            "{f}"
        );
    }
    // Fixing again changes nothing.
    probelint()
        .current_dir(dir.path())
        .args(["--fix", "llm.yaml"])
        .assert()
        .code(0);
    assert_eq!(fs::read_to_string(&path).unwrap(), fixed);
}

#[test]
fn mutate_writes_the_helpers_probes_and_an_image_volume() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("policy.yaml"),
        "kubernetesVersion: '1.35'\nprobeHelper: {image: registry.example.com/probelint-probe:0.1.0, mode: imageVolume}\n",
    )
    .unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .args(["mutate", "--config", "policy.yaml", "-"])
        .write_stdin(MANIFEST)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let doc = &objects(&text)[0];
    let pod = &doc["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][1]["image"]["reference"], "registry.example.com/probelint-probe:0.1.0",
        "{text}"
    );
    assert!(pod.get("initContainers").is_none(), "{text}");
    let c = &pod["containers"][0];
    assert_eq!(c["volumeMounts"][1]["subPath"], "probelint", "{text}");
    assert_eq!(c["readinessProbe"]["exec"]["command"][1], "ready", "{text}");

    // An image volume on an older cluster is refused, saying why.
    fs::write(
        dir.path().join("old.yaml"),
        "kubernetesVersion: '1.33'\nprobeHelper: {image: x, mode: imageVolume}\n",
    )
    .unwrap();
    let out = probelint()
        .current_dir(dir.path())
        .args(["mutate", "--config", "old.yaml", "-"])
        .write_stdin(MANIFEST)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("probeHelper.mode") && stderr.contains("1.35"),
        "{stderr}"
    );
}
