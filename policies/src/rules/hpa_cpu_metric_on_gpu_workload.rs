//! `hpa-cpu-metric-on-gpu-workload`: an HPA scales a GPU server on CPU or memory.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::facts::{GpuTargets, ObjectFacts, Role};
use crate::model::finding::Severity;

static META: RuleMeta = RuleMeta {
    id: "hpa-cpu-metric-on-gpu-workload",
    severity: Severity::Warning,
    summary: "A HorizontalPodAutoscaler scales a GPU workload on cpu/memory only",
    rationale: "A model server's CPU and memory barely move with load: the work is on the GPU, and the \
weights occupy the same memory whether the server is idle or saturated. An HPA on cpu or memory therefore \
never scales out when requests queue up (or scales on tokenizer noise). Scale on a serving metric — queue \
depth, requests in flight, KV-cache use, time to first token — through a Pods or External metric.",
    example_policy: None,
    bad_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          ports:
            - containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /health
              port: 8000
            failureThreshold: 15
          readinessProbe:
            httpGet:
              path: /health
              port: 8000
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: vllm
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: vllm
  minReplicas: 1
  maxReplicas: 4
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 80
"#,
    good_example: r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    metadata:
      annotations:
        probelint.io/model-load-seconds: "120"
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          ports:
            - containerPort: 8000
          resources:
            limits:
              nvidia.com/gpu: 1
          startupProbe:
            httpGet:
              path: /health
              port: 8000
            failureThreshold: 15
          readinessProbe:
            httpGet:
              path: /health
              port: 8000
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: vllm
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: vllm
  minReplicas: 1
  maxReplicas: 4
  metrics:
    - type: Pods
      pods:
        metric:
          name: vllm:num_requests_waiting
        target:
          type: AverageValue
          averageValue: "5"
"#,
    fix: None,
};

pub(crate) static RULE: Rule = Rule::relations(&META, check);

fn check(objects: &[ObjectFacts], report: &mut Report<'_>) {
    let targets = GpuTargets::new(objects);
    for hpa in objects {
        let Role::Autoscaler {
            cpu_or_memory_only: true,
            pointer,
            ..
        } = &hpa.role
        else {
            continue;
        };
        let Some(workload) = targets.of(hpa) else {
            continue;
        };
        report.cross(
            hpa,
            pointer,
            format!(
                "{} scales {} (a GPU workload) on cpu/memory only: GPU servers saturate long \
                 before their CPU does",
                hpa.object_ref, workload.object_ref
            ),
            "scale on a serving metric (queue depth, requests in flight, KV-cache use) with a Pods \
             or External metric"
                .to_owned(),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::fired;

    const ID: &str = "hpa-cpu-metric-on-gpu-workload";

    #[test]
    fn v1_hpa_and_hpa_without_metrics_use_cpu() {
        let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: m, resources: {limits: {nvidia.com/gpu: 1}}}]\n";
        let v1 = format!(
            "{deploy}---\napiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {{name: h}}\nspec:\n  scaleTargetRef: {{kind: Deployment, name: d}}\n  targetCPUUtilizationPercentage: 50\n"
        );
        assert_eq!(fired(&v1, ID), [(None, "/spec".to_owned())]);
        let other = v1.replace(
            "kind: Deployment, name: d}",
            "kind: Deployment, name: other}",
        );
        assert!(fired(&other, ID).is_empty(), "HPA of another workload");
    }

    #[test]
    fn cpu_workload_is_not_flagged() {
        let yaml = super::META
            .bad_example
            .replace("nvidia.com/gpu: 1", "cpu: 1");
        assert!(fired(&yaml, ID).is_empty());
    }
}
