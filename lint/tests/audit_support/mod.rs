//! What the audit tests share: the real binary, kept away from the developer's own cluster, and
//! the GPU Deployment they audit.

use serde_json::{Value, json};
use std::process::{Command, Output};

pub const GPU_IMAGE: &str = "vllm/vllm-openai:v0.6.3";

pub fn probelint() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_probelint"));
    // Only what a test passes: never the developer's own cluster.
    cmd.env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("NO_COLOR", "1");
    cmd
}

pub fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A GPU vLLM Deployment whose only probe is a liveness probe: it kills the server while the
/// weights load (no startupProbe), and sends traffic to nothing (no readinessProbe).
pub fn liveness_only(name: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"team": "llm"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "vllm", "image": GPU_IMAGE,
                    "ports": [{"containerPort": 8000}],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                    "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                }]},
            },
        },
    })
}

/// Waits for `child` with wait4, for its own peak RSS (getrusage's children figure would count
/// every child this test has reaped, kubectl's included): its exit code (`None` when a signal
/// ended it) and peak RSS in KiB.
pub fn wait_with_peak_kib(child: std::process::Child) -> (Option<i32>, u64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only `status` and `usage`, both live for the call.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, usage.ru_maxrss as u64)
}
