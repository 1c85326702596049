//! `exec-probe-heavy`: an exec probe on a GPU container that starts a CUDA context or interpreter.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::model::finding::Severity;
use crate::model::probe::{Handler, heavy_exec};

static META: RuleMeta = RuleMeta {
    id: "exec-probe-heavy",
    severity: Severity::Warning,
    summary: "An exec probe on a GPU container runs nvidia-smi, Python or a shell pipeline",
    rationale: "An exec probe forks a process in the container at every period. nvidia-smi initialises \
NVML and may take seconds on a busy GPU (and fails while the driver is wedged in ways that are not the \
server's fault); a Python interpreter costs hundreds of milliseconds and tens of MB, and importing torch \
creates a CUDA context that takes GPU memory from the model; a shell pipeline hides failures of all but \
its last command. Under load these probes time out, and a liveness probe then restarts a healthy server. \
Use the server's HTTP health endpoint instead. `probelint-probe` (the `probeHelper` policy option, \
docs/probe-helper.md) is not heavy: a static binary that makes a few HTTP calls, each bounded by its own \
`--timeout`, and at most one smoke inference per `--interval`.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/exec-probe-heavy/bad.yaml"),
    good_example: include_str!("../../resources/rules/exec-probe-heavy/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        if !cx.container.gets_generic_checks(analysis.policy) {
            continue;
        }
        for probe in cx.container.probes() {
            let Handler::Exec { command } = &probe.handler else {
                continue;
            };
            let Some(why) = heavy_exec(command) else {
                continue;
            };
            report
                .container(&cx)
                .at(format!("{}/exec", probe.pointer))
                .message(format!(
                    "{}: {}Probe {why}: `{}`",
                    cx.container.describe(),
                    probe.kind.noun(),
                    command.join(" ")
                ))
                .help(match cx.container.server {
                    Some(s) => format!(
                        "use httpGet {} on port {} instead",
                        s.live_path, s.default_port
                    ),
                    None => {
                        "use an httpGet probe on the server's health endpoint instead".to_owned()
                    }
                })
                .report();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::probe::heavy_exec as heavy;

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
