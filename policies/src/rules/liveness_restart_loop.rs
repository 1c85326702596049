//! `liveness-restart-loop`: liveness without a startupProbe kills the server before it has loaded.

use super::{Report, Rule, RuleMeta, secs};
use crate::engine::Analysis;
use crate::finding::Severity;
use crate::probe::ProbeKind;

pub struct LivenessRestartLoop;

static META: RuleMeta = RuleMeta {
    id: "liveness-restart-loop",
    severity: Severity::Error,
    summary: "Liveness kills the container before its model can load (no startupProbe)",
    rationale: "Without a startupProbe, liveness runs from container start. If its tolerance \
(initialDelaySeconds + failureThreshold × periodSeconds) is shorter than the model load time, the kubelet \
kills the server mid-load, every time: a restart loop that never serves, burns GPU time and, with many \
replicas reloading weights at once, can saturate the node's disk and network. Add a startupProbe (which \
gates liveness until the model is loaded) rather than stretching initialDelaySeconds, which also delays \
detection of real hangs.",
    example_policy: None,
    bad_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.4.1-cu124
          ports:
            - containerPort: 30000
          resources:
            limits:
              nvidia.com/gpu: 1
          livenessProbe:
            httpGet:
              path: /health
              port: 30000
            initialDelaySeconds: 30
          readinessProbe:
            httpGet:
              path: /health_generate
              port: 30000
            timeoutSeconds: 10
"#,
    good_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: sglang
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: sglang
          image: lmsysorg/sglang:v0.4.1-cu124
          ports:
            - containerPort: 30000
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /health
              port: 30000
            failureThreshold: 15
          livenessProbe:
            httpGet:
              path: /health
              port: 30000
          readinessProbe:
            httpGet:
              path: /health_generate
              port: 30000
            timeoutSeconds: 10
"#,
    fix: Some(
        "Fixed by the startupProbe that gpu-startup-probe-missing adds; liveness stays as written.",
    ),
};

impl Rule for LivenessRestartLoop {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check(&self, analysis: &Analysis<'_>, report: &mut Report<'_>) {
        for cx in analysis.accelerated_containers() {
            if cx.container.probe(ProbeKind::Startup).is_some() {
                continue;
            }
            // A liveness probe with a rejected timing is probe-threshold-invalid's to report: its
            // budget with defaults in place would contradict the manifest.
            let Some(liveness) = cx
                .container
                .probe(ProbeKind::Liveness)
                .filter(|p| p.timings_valid())
            else {
                continue;
            };
            let load = cx.pod.load_seconds;
            if liveness.budget_seconds() as f64 >= load {
                continue;
            }
            let fix = crate::fix::add_startup_probe(&cx, analysis.policy);
            report.container(
                &cx,
                liveness.pointer.clone(),
                format!(
                    "{}: liveness tolerates {} but the model takes {} to load, and there is no \
                     startupProbe: the kubelet will kill it mid-load, forever",
                    cx.container.describe(),
                    liveness.budget_arithmetic(),
                    secs(load)
                ),
                "add a startupProbe sized to the load time (it gates liveness until the model is \
                 loaded); keep liveness quick to catch real hangs"
                    .to_owned(),
            )
            .fix = fix;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::{findings_of, fired};

    const ID: &str = "liveness-restart-loop";

    #[test]
    fn message_compares_tolerance_and_load() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert!(
            f.message.contains("60 s (30 s delay + 3 × 10 s)"),
            "{}",
            f.message
        );
        assert!(f.message.contains("120 s to load"), "{}", f.message);
        assert_eq!(f.pointer, "/spec/template/spec/containers/0/livenessProbe");
    }

    #[test]
    fn a_long_enough_initial_delay_is_not_a_loop() {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {probelint.io/model-load-seconds: '60'}}\nspec:\n  containers:\n    - name: m\n      resources: {limits: {nvidia.com/gpu: 1}}\n      livenessProbe:\n        httpGet: {path: /health, port: 8000}\n        initialDelaySeconds: 40\n";
        assert!(fired(pod, ID).is_empty(), "40 + 30 ≥ 60");
    }

    #[test]
    fn fires_in_batch_jobs_too() {
        let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: m\n          resources: {limits: {nvidia.com/gpu: 1}}\n          livenessProbe: {exec: {command: [cat, /tmp/alive]}}\n";
        assert_eq!(fired(job, ID).len(), 1);
    }
}
