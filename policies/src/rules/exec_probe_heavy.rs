//! `exec-probe-heavy`: an exec probe on a GPU container that starts a CUDA context or interpreter.

use super::{Report, Rule, RuleMeta};
use crate::engine::Analysis;
use crate::finding::Severity;
use crate::probe::Handler;

pub struct ExecProbeHeavy;

static META: RuleMeta = RuleMeta {
    id: "exec-probe-heavy",
    severity: Severity::Warning,
    summary: "An exec probe on a GPU container runs nvidia-smi, Python or a shell pipeline",
    rationale: "An exec probe forks a process in the container at every period. nvidia-smi initialises \
NVML and may take seconds on a busy GPU (and fails while the driver is wedged in ways that are not the \
server's fault); a Python interpreter costs hundreds of milliseconds and tens of MB, and importing torch \
creates a CUDA context that takes GPU memory from the model; a shell pipeline hides failures of all but \
its last command. Under load these probes time out, and a liveness probe then restarts a healthy server. \
Use the server's HTTP health endpoint instead.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/exec-probe-heavy/bad.yaml"),
    good_example: include_str!("../../resources/rules/exec-probe-heavy/good.yaml"),
    fix: None,
};

const SHELLS: &[&str] = &["sh", "bash", "dash", "ash", "zsh"];

/// Why a command is heavy, if it is.
pub(crate) fn heavy(command: &[String]) -> Option<&'static str> {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
    let program = command.first().map(|p| base(p)).unwrap_or_default();
    let words: Vec<&str> = command.iter().flat_map(|a| a.split_whitespace()).collect();
    if words.iter().any(|w| base(w) == "nvidia-smi") {
        return Some("runs nvidia-smi (NVML initialisation on every probe)");
    }
    let is_python = |w: &str| {
        let b = base(w);
        b == "python" || b.starts_with("python3") || b == "python2"
    };
    if words.iter().any(|w| is_python(w)) {
        return Some("starts a Python interpreter on every probe");
    }
    if SHELLS.contains(&program.as_str()) && command.iter().skip(1).any(|a| a.contains('|')) {
        return Some("runs a shell pipeline (only the last command's failure counts)");
    }
    None
}

impl Rule for ExecProbeHeavy {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check(&self, analysis: &Analysis<'_>, report: &mut Report<'_>) {
        for cx in analysis.accelerated_containers() {
            for probe in cx.container.probes() {
                let Handler::Exec { command } = &probe.handler else {
                    continue;
                };
                let Some(why) = heavy(command) else {
                    continue;
                };
                report.container(
                    &cx,
                    format!("{}/exec", probe.pointer),
                    format!(
                        "{}: {}Probe {why}: `{}`",
                        cx.container.describe(),
                        probe.kind.noun(),
                        command.join(" ")
                    ),
                    match cx.container.server {
                        Some(s) => format!(
                            "use httpGet {} on port {} instead",
                            s.live_path, s.default_port
                        ),
                        None => "use an httpGet probe on the server's health endpoint instead"
                            .to_owned(),
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::heavy;

    fn cmd(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn recognises_heavy_commands() {
        assert!(heavy(&cmd(&["nvidia-smi"])).is_some());
        assert!(heavy(&cmd(&["/usr/bin/python3", "-c", "import torch"])).is_some());
        assert!(heavy(&cmd(&["sh", "-c", "python3 /app/health.py"])).is_some());
        assert!(
            heavy(&cmd(&[
                "/bin/bash",
                "-c",
                "curl -s localhost:8080 | grep ok"
            ]))
            .is_some()
        );
        assert!(heavy(&cmd(&["cat", "/tmp/healthy"])).is_none());
        assert!(heavy(&cmd(&["curl", "-f", "localhost:8080/health"])).is_none());
    }
}
