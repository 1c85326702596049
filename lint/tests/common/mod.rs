//! What the integration tests share: the `probelint` binary as a command, files in a scratch
//! directory, the GPU manifests they lint, executables installed without ETXTBSY, and (from
//! `probelint-testkit`) the virtualenvs from PyPI that the pre-commit and Helm chart tests run in.
//!
//! Each `tests/*.rs` is its own crate with `mod common;`, and none of them uses all of this
//! module: what one test crate leaves unused is used by another, hence the `allow`.
#![allow(dead_code)]

use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// The probelint binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_probelint");

/// A vLLM Deployment of an 8B model on one GPU with TCP readiness and liveness and no
/// startupProbe: `gpu-startup-probe-missing` at 9:9 (the container; an error, since the 30 s
/// liveness kills even the fast end of the 36–500 s load) and `readiness-port-open` at 15:13 (the
/// `tcpSocket`).
pub const BAD_GPU: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          args:
            - --model=meta-llama/Llama-3.1-8B-Instruct
          resources: {limits: {nvidia.com/gpu: 1}}
          readinessProbe:
            tcpSocket:
              port: 8000
          livenessProbe:
            tcpSocket:
              port: 8000
";

/// `BAD_GPU` done right: a startup budget for its 120 s load and HTTP probes. No error.
pub const GOOD_GPU: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  annotations:
    probelint.io/model-load-seconds: \"120\"
spec:
  template:
    spec:
      terminationGracePeriodSeconds: 60
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet: {path: /health, port: 8000}
            failureThreshold: 15
          readinessProbe:
            httpGet: {path: /health, port: 8000}
";

/// A serving GPU container with no probes at all: fails `gpu-startup-probe-missing` (line 14 is
/// the container).
pub const UNPROBED_GPU: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  replicas: 1
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      containers:
        - name: server
          image: vllm/vllm-openai:v0.6.3
          resources:
            limits:
              nvidia.com/gpu: 1
";

/// `UNPROBED_GPU`, fixed: startup budget 400 s, readiness and liveness on vLLM's /health, a
/// drain on shutdown. No finding at all.
pub const UNPROBED_GPU_FIXED: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  replicas: 1
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      terminationGracePeriodSeconds: 120
      containers:
        - name: server
          image: vllm/vllm-openai:v0.6.3
          ports:
            - name: http
              containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
          lifecycle:
            preStop:
              sleep:
                seconds: 10
          startupProbe:
            httpGet: {path: /health, port: http}
            periodSeconds: 10
            failureThreshold: 40
          readinessProbe:
            httpGet: {path: /health, port: http}
            periodSeconds: 5
          livenessProbe:
            httpGet: {path: /health, port: http}
            periodSeconds: 10
            failureThreshold: 3
";

/// The repository root (the workspace that holds `lint/`).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("lint/ has a parent")
}

/// `probelint`, with no `NO_COLOR` inherited from the environment of the tests.
pub fn probelint_std() -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("NO_COLOR");
    cmd
}

/// [`probelint_std`] for `assert_cmd`'s assertions and `write_stdin`.
pub fn probelint() -> assert_cmd::Command {
    assert_cmd::Command::from_std(probelint_std())
}

/// Writes `dir/name`, creating the directories on the way.
pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().expect("a file in a directory")).expect("mkdir");
    fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Copies the directory `from` to `to`, recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The JSON on `out`'s stdout, or a failure that shows what was printed instead.
pub fn json_stdout(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The array `json[key]`, e.g. the `findings` of a report.
pub fn array<'a>(json: &'a Value, key: &str) -> &'a [Value] {
    json[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array `{key}` in {json:#}"))
}

/// Copies an executable in a child process. Writing it from this process would race the other
/// tests' threads: a thread that forks while the file is open for writing hands the write handle
/// to its child until that child execs, and executing the file meanwhile fails with ETXTBSY
/// ("Text file busy").
pub fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("sh")
        .arg("-c")
        .arg("cp \"$0\" \"$1\" && chmod 755 \"$1\"")
        .arg(from)
        .arg(to)
        .status()
        .expect("sh runs");
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

/// Installs `script` as the executable `to`: written to a scratch file by this process, then put
/// in place by [`copy_executable`], never written to `to` from here.
pub fn install_script(script: &str, to: &Path) {
    let source = tempfile::NamedTempFile::new().expect("temp file");
    fs::write(source.path(), script).expect("write the script");
    copy_executable(source.path(), to);
}

// Shared with the other crates' tests (each test crate uses some of them).
#[allow(unused_imports)]
pub use probelint_testkit::process::{output, text};
#[allow(unused_imports)]
pub use probelint_testkit::python::Venv;
