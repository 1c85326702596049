//! The real `probelint` on manifests the apiserver would refuse (or accept, where a linter might
//! wrongly complain): each bad shape is a finding that says what and where, at its own line; a
//! probe field of 0, which the apiserver defaults, is neither an error nor simulated as 0.

mod common;

use common::{array, json_stdout, probelint, write};
use serde_json::Value;

/// A one-container Pod named `name` whose container has `body` (indented under the container).
fn pod(name: &str, body: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n    - name: m\n      image: x\n{body}"
    )
}

/// The cases: object name, YAML for it (the offending line ends in `# bad`), the rule, and what
/// the message must say.
fn cases() -> Vec<(String, String, &'static str, &'static str)> {
    let mut cases = Vec::new();
    let mut add = |name: &str, yaml: String, rule, want| {
        assert!(yaml.contains("# bad"), "{name}: mark the offending line");
        cases.push((name.to_owned(), yaml, rule, want));
    };
    let head =
        |name: &str| format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n");
    add(
        "containers-map",
        head("containers-map") + "  containers: # bad\n    vllm: {image: x}\n",
        "pod-spec-invalid",
        "spec.containers is a map, not a list of containers",
    );
    add(
        "containers-string",
        head("containers-string") + "  containers: vllm # bad\n",
        "pod-spec-invalid",
        "spec.containers is a string, not a list of containers",
    );
    add(
        "containers-null",
        head("containers-null") + "  containers: # bad\n",
        "pod-spec-invalid",
        "spec.containers is null: the apiserver requires at least one container",
    );
    add(
        "container-item",
        head("container-item") + "  containers:\n    - vllm # bad\n",
        "pod-spec-invalid",
        "spec.containers[0] is a string, not a container",
    );
    for (name, port, want) in [
        (
            "probe-port-true",
            "true",
            "readinessProbe.httpGet.port true is a boolean, not an integer",
        ),
        (
            "probe-port-fraction",
            "8080.5",
            "readinessProbe.httpGet.port 8080.5 is not a whole number",
        ),
        (
            "probe-port-null",
            "null",
            "readinessProbe.httpGet.port is missing (the apiserver reads it as 0)",
        ),
        (
            "probe-port-zero",
            "0",
            "readinessProbe.httpGet.port is 0: it must be between 1 and 65535",
        ),
        (
            "probe-port-negative",
            "-1",
            "readinessProbe.httpGet.port is -1: it must be between 1 and 65535",
        ),
        (
            "probe-port-big",
            "99999",
            "readinessProbe.httpGet.port is 99999: it must be between 1 and 65535",
        ),
        (
            "probe-port-quoted",
            "\"8080\"",
            "readinessProbe.httpGet.port is \"8080\", not a valid port name: must contain at least one letter",
        ),
    ] {
        let body = format!(
            "      ports: [{{containerPort: 8080}}]\n      readinessProbe:\n        httpGet:\n          path: /health\n          port: {port} # bad\n"
        );
        add(name, pod(name, &body), "pod-spec-invalid", want);
    }
    for (name, port, want) in [
        (
            "container-port-true",
            "true",
            "ports[0].containerPort true is a boolean, not an integer",
        ),
        (
            "container-port-fraction",
            "8080.5",
            "ports[0].containerPort 8080.5 is not a whole number",
        ),
        (
            "container-port-null",
            "null",
            "ports[0].containerPort is missing: the apiserver requires it",
        ),
        (
            "container-port-zero",
            "0",
            "ports[0].containerPort is missing: the apiserver requires it",
        ),
        (
            "container-port-negative",
            "-1",
            "ports[0].containerPort is -1: it must be between 1 and 65535",
        ),
        (
            "container-port-big",
            "99999",
            "ports[0].containerPort is 99999: it must be between 1 and 65535",
        ),
    ] {
        let body = format!("      ports:\n        - containerPort: {port} # bad\n");
        add(name, pod(name, &body), "pod-spec-invalid", want);
    }
    for (name, field, want) in [
        (
            "failure-threshold-past-int32",
            "failureThreshold: 2147483648",
            "livenessProbe.failureThreshold 2147483648 does not fit the field's type, int32",
        ),
        (
            "period-huge-float",
            "periodSeconds: 1e300",
            "livenessProbe.periodSeconds 1e+300 does not fit the field's type, int32",
        ),
        (
            "period-negative",
            "periodSeconds: -1",
            "livenessProbe.periodSeconds is -1: it must be greater than or equal to 0",
        ),
        (
            "timeout-quoted",
            "timeoutSeconds: \"5\"",
            "livenessProbe.timeoutSeconds \"5\" is a string, not an integer",
        ),
        (
            "liveness-success-two",
            "successThreshold: 2",
            "livenessProbe.successThreshold is 2: it must be 1 for a liveness probe",
        ),
    ] {
        let body = format!(
            "      livenessProbe:\n        tcpSocket: {{port: 8080}}\n        {field} # bad\n"
        );
        add(name, pod(name, &body), "probe-threshold-invalid", want);
    }
    cases
}

/// The 1-based number of the line holding `# bad` in the document that starts on `first_line`.
fn bad_line(doc: &str, first_line: usize) -> usize {
    first_line
        + doc
            .lines()
            .position(|l| l.contains("# bad"))
            .expect("a marked line")
}

#[test]
fn each_shape_the_apiserver_refuses_is_one_finding_at_its_line_with_the_reason() {
    let cases = cases();
    let mut text = String::new();
    let mut expected = Vec::new();
    let mut line = 1;
    for (name, yaml, rule, want) in &cases {
        expected.push((name.as_str(), bad_line(yaml, line), *rule, *want));
        text.push_str(yaml);
        text.push_str("---\n");
        line += yaml.lines().count() + 1;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "refused.yaml", &text);
    let out = probelint()
        .current_dir(dir.path())
        .args(["--format", "json", "refused.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "errors fail the run");
    let json = json_stdout(&out);
    assert!(array(&json, "errors").is_empty(), "{json:#}");
    let findings = array(&json, "findings");
    let shape_rules = [
        "pod-spec-invalid",
        "probe-threshold-invalid",
        "probe-port-undeclared",
    ];
    for (name, line, rule, want) in expected {
        let of_object: Vec<&Value> = findings
            .iter()
            .filter(|f| {
                f["object"]["name"] == name
                    && shape_rules.contains(&f["rule"].as_str().unwrap_or(""))
            })
            .collect();
        assert_eq!(
            of_object.len(),
            1,
            "{name}: exactly one finding: {of_object:#?}"
        );
        let f = of_object[0];
        assert_eq!(f["rule"], rule, "{name}: {f:#}");
        assert_eq!(f["severity"], "error", "{name}");
        assert_eq!(f["file"], "refused.yaml");
        assert_eq!(f["line"].as_u64(), Some(line as u64), "{name}: {f:#}");
        let message = f["message"].as_str().unwrap();
        assert!(message.contains(want), "{name}: {message}");
        assert!(
            !f["help"].as_str().unwrap_or("").is_empty(),
            "{name}: says what to do"
        );
    }

    // The terminal output names the file, line and column, and quotes the offending line.
    let out = probelint()
        .current_dir(dir.path())
        .args(["--color", "never", "refused.yaml"])
        .output()
        .unwrap();
    let human = String::from_utf8(out.stdout).unwrap();
    let (_, line, _, _) = expected_of(&cases, "probe-port-quoted");
    assert!(human.contains(&format!("refused.yaml:{line}:")), "{human}");
    assert!(human.contains("error[pod-spec-invalid]"), "{human}");
    assert!(human.contains("port: \"8080\" # bad"), "{human}");
    assert!(
        human.contains("write the port as a number, without quotes (port: 8080)"),
        "{human}"
    );
}

/// The case `name` with the line its `# bad` has in the joined file.
fn expected_of<'a>(
    cases: &'a [(String, String, &'static str, &'static str)],
    name: &str,
) -> (&'a str, usize, &'static str, &'static str) {
    let mut line = 1;
    for (n, yaml, rule, want) in cases {
        if n == name {
            return (n, bad_line(yaml, line), rule, want);
        }
        line += yaml.lines().count() + 1;
    }
    panic!("no case {name}")
}

/// A GPU pod with a startup probe that writes `fields` (none given: Kubernetes' defaults).
fn gpu_pod(fields: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: llm\n  annotations:\n    probelint.io/model-load-seconds: \"120\"\nspec:\n  containers:\n    - name: vllm\n      image: vllm/vllm-openai:v0.6.3\n      ports: [{{containerPort: 8000}}]\n      resources:\n        limits:\n          nvidia.com/gpu: 1\n      startupProbe:\n        httpGet: {{path: /health, port: 8000}}\n{fields}      readinessProbe:\n        httpGet: {{path: /health, port: 8000}}\n{fields}"
    )
}

#[test]
fn zero_probe_fields_are_the_apiserver_defaults_in_lint_and_in_simulate() {
    let zeros = "        periodSeconds: 0\n        timeoutSeconds: 0\n        successThreshold: 0\n        failureThreshold: 0\n        initialDelaySeconds: 0\n";
    let defaults = "        periodSeconds: 10\n        timeoutSeconds: 1\n        successThreshold: 1\n        failureThreshold: 3\n";
    // YAML 1.1 as kubectl reads it: hex, an integral float: the same numbers.
    let spelled =
        "        periodSeconds: 0xA\n        timeoutSeconds: 1.0\n        failureThreshold: 3\n";
    let dir = tempfile::tempdir().unwrap();
    let mut rules_of = Vec::new();
    let mut timelines = Vec::new();
    for (name, fields) in [
        ("zeros", zeros),
        ("defaults", defaults),
        ("absent", ""),
        ("spelled", spelled),
    ] {
        let file = format!("{name}.yaml");
        write(dir.path(), &file, gpu_pod(fields));
        let out = probelint()
            .current_dir(dir.path())
            .args(["--format", "json", &file])
            .output()
            .unwrap();
        let json = json_stdout(&out);
        let mut rules: Vec<String> = array(&json, "findings")
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f["rule"].as_str().unwrap(),
                    f["message"].as_str().unwrap()
                )
            })
            .collect();
        rules.sort();
        assert!(
            !rules
                .iter()
                .any(|r| r.starts_with("probe-threshold-invalid")
                    || r.starts_with("pod-spec-invalid")),
            "{name}: a 0 is defaulted, not refused: {rules:#?}"
        );
        rules_of.push((name, rules));
        let out = probelint()
            .current_dir(dir.path())
            .args(["simulate", "--format", "json", &file])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json = json_stdout(&out);
        timelines.push((name, json["containers"][0].clone()));
    }
    for (name, rules) in &rules_of[1..] {
        assert_eq!(rules, &rules_of[0].1, "{name} is judged as the zeros are");
    }
    // 3 × 10 s of startup budget for a 120 s load: the kubelet kills it, again and again.
    let zeros = &timelines[0].1;
    assert!(zeros["restarts"].as_u64().unwrap() > 0, "{zeros:#}");
    let killed = zeros["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["event"].as_str().unwrap_or("").starts_with("killed"))
        .expect("a kill");
    assert_eq!(
        killed["t"], 29.5,
        "startup runs at 9.5, 19.5, 29.5 s (period 10, threshold 3; the node's workers tick \
         0.5 s before each period)"
    );
    for (name, timeline) in &timelines[1..] {
        for key in [
            "restarts",
            "first_ready_seconds",
            "ready_while_loading_seconds",
            "transitions",
        ] {
            assert_eq!(
                timeline[key], zeros[key],
                "{name} simulates as the zeros do ({key})"
            );
        }
    }
    // The timeline says where the 10 s period came from.
    let notes: Vec<&str> = array(zeros, "assumptions")
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.contains(&"startupProbe.periodSeconds: 0 runs as 10, the apiserver's default"),
        "{notes:#?}"
    );
    assert!(
        array(&timelines[1].1, "assumptions").is_empty(),
        "nothing assumed for the defaults"
    );
    let out = probelint()
        .current_dir(dir.path())
        .args(["simulate", "zeros.yaml"])
        .output()
        .unwrap();
    let human = String::from_utf8(out.stdout).unwrap();
    assert!(
        human.contains(
            "  note: startupProbe.failureThreshold: 0 runs as 3, the apiserver's default"
        ),
        "{human}"
    );
}
