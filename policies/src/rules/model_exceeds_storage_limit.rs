//! `model-exceeds-storage-limit`: the checkpoint a serving pod downloads at start is larger than
//! the local storage the kubelet lets it fill.

use super::rule::{Report, Rule, RuleMeta};
use crate::analysis::context::{Analysis, ContainerContext};
use crate::model::apiserver::quantity;
use crate::model::fields::{get, pick};
use crate::model::finding::Severity;
use crate::model::load::source::WeightSource;
use crate::model::load::{Estimate, gigabytes};
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "model-exceeds-storage-limit",
    severity: Severity::Error,
    summary: "The model a pod downloads at start is larger than the local storage it may fill",
    rationale: "A model server that downloads its weights at start writes the whole checkpoint to local \
storage: the container's own filesystem (the Hugging Face cache, when no volume holds it) or an emptyDir \
that an init container fills. The kubelet evicts a Pod whose container writes more than its \
`limits.ephemeral-storage`, or whose emptyDir holds more than its `sizeLimit` (kubernetes.io, \"Local \
ephemeral storage\" in Resource Management for Pods and Containers). The Pod that replaces it starts the \
download again and is evicted again: an eviction loop that never serves and pulls hundreds of gigabytes \
each time. The size is the model's parameters × the checkpoint's bytes per parameter \
(docs/load-time.md); where nothing states the precision, this is an error only when even a 4-bit \
checkpoint would not fit, and a warning when the usual 16-bit one would not.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/model-exceeds-storage-limit/bad.yaml"),
    good_example: include_str!("../../resources/rules/model-exceeds-storage-limit/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

/// The smallest checkpoint a model of unstated precision can plausibly be: 4-bit weights.
const SMALLEST_BYTES_PER_PARAMETER: f64 = 0.5;

/// Where a download lands, and the limit past which the kubelet evicts the Pod.
struct Landing {
    /// `downloads its model past its ephemeral-storage limit`.
    what: String,
    /// `no volume holds the Hugging Face cache`.
    place: String,
    /// `limits.ephemeral-storage: 500Gi`.
    limit: String,
    limit_bytes: f64,
    /// The field that sets the limit.
    pointer: String,
}

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.accelerated_containers() {
        if !cx.pod.serving {
            continue;
        }
        let Some(estimate) = cx.container.load.estimate() else {
            continue;
        };
        let Some(landing) = landing(&cx, estimate) else {
            continue;
        };
        // A download fetches the whole checkpoint, whatever share of it this pod then reads.
        let parameters = estimate.parameters.billions * 1e9;
        let precision = &estimate.precision;
        let likely = parameters * precision.bytes_per_parameter;
        if likely <= landing.limit_bytes {
            continue;
        }
        let smallest = if precision.is_assumed() {
            parameters * SMALLEST_BYTES_PER_PARAMETER
        } else {
            likely
        };
        let size = format!(
            "{} ({}B parameters × {} bytes, {}, {}, parameters from {})",
            gigabytes(likely),
            estimate.parameters.billions,
            precision.bytes_per_parameter,
            precision.name,
            precision.from,
            estimate.parameters.from
        );
        let verdict = if smallest > landing.limit_bytes {
            "the kubelet evicts the Pod when the download passes the limit, and the Pod that \
             replaces it downloads again: an eviction loop that never serves"
                .to_owned()
        } else {
            format!(
                "it fits only if the checkpoint is quantised well below 16 bits ({} at 4 bits); \
                 otherwise the kubelet evicts the Pod mid-download, and its replacement \
                 downloads again",
                gigabytes(smallest)
            )
        };
        // Where a quantised checkpoint would fit, the verdict rests on a guess: a warning.
        let ceiling = if smallest <= landing.limit_bytes {
            Severity::Warning
        } else {
            Severity::Error
        };
        report
            .container(&cx)
            .at(landing.pointer.clone())
            .message(format!(
                "{} {}: {} is {size}; {} is {}, and {}; {verdict}",
                cx.container.describe(),
                landing.what,
                estimate.model,
                landing.limit,
                gigabytes(landing.limit_bytes),
                landing.place,
            ))
            .help(format!(
                "raise the limit above {} (the checkpoint, plus what the server writes beside \
                 it), or keep the weights on a PersistentVolumeClaim or an image volume that \
                 is filled once, not on every start",
                gigabytes(likely)
            ))
            .at_most(ceiling)
            .load(&cx.container.load)
            .report();
    }
}

/// Where this container's weights are downloaded to, when the manifest shows it and a limit
/// bounds that place: an emptyDir with a `sizeLimit` that an init container fills, or the
/// container's own filesystem under `limits.ephemeral-storage` when it downloads from the Hub
/// and no writable volume is mounted (one could hold the cache, wherever the server puts it).
fn landing(cx: &ContainerContext<'_, '_>, estimate: &Estimate) -> Option<Landing> {
    let volumes = get(cx.pod.value, "volumes").and_then(Value::as_array);
    match (&estimate.fetched_by, &estimate.source) {
        (
            Some(fetch),
            WeightSource::EmptyDir {
                volume,
                memory: false,
            },
        ) => {
            let (index, definition) = volumes?
                .iter()
                .enumerate()
                .find(|(_, v)| get(v, "name").and_then(Value::as_str) == Some(volume))?;
            let raw = get(definition, "emptyDir").and_then(|e| get(e, "sizeLimit"))?;
            Some(Landing {
                what: format!("is given a download larger than emptyDir {volume:?} may hold"),
                place: format!("init container {:?} fills it", fetch.container),
                limit: format!("sizeLimit: {}", shown(raw)),
                limit_bytes: quantity(raw)?,
                pointer: format!("{}/volumes/{index}/emptyDir/sizeLimit", cx.pod.pointer),
            })
        }
        (None, WeightSource::Hub) if !mounts_writable_volume(cx.container.value, volumes) => {
            let [resources] = pick(cx.container.value, ["resources"]);
            let raw = resources
                .and_then(|r| get(r, "limits"))
                .and_then(|l| get(l, "ephemeral-storage"))?;
            Some(Landing {
                what: "downloads its model past its ephemeral-storage limit".to_owned(),
                place: "no volume holds the Hugging Face cache: it lands in the container's own \
                        filesystem"
                    .to_owned(),
                limit: format!("limits.ephemeral-storage: {}", shown(raw)),
                limit_bytes: quantity(raw)?,
                pointer: format!(
                    "{}/resources/limits/ephemeral-storage",
                    cx.container.pointer
                ),
            })
        }
        _ => None,
    }
}

/// Whether the container mounts a volume it can write to (anything but a read-only mount, a
/// ConfigMap, Secret, projected or downward API volume, or a memory-backed emptyDir).
fn mounts_writable_volume(container: &Value, volumes: Option<&Vec<Value>>) -> bool {
    get(container, "volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|m| {
            if get(m, "readOnly").and_then(Value::as_bool) == Some(true) {
                return false;
            }
            let name = get(m, "name").and_then(Value::as_str);
            let Some(volume) = volumes
                .into_iter()
                .flatten()
                .find(|v| get(v, "name").and_then(Value::as_str) == name)
            else {
                // A mount of a volume the pod does not define: the apiserver refuses it.
                return false;
            };
            let read_only_kind = ["configMap", "secret", "projected", "downwardAPI"]
                .iter()
                .any(|k| get(volume, k).is_some());
            let memory = get(volume, "emptyDir")
                .and_then(|e| get(e, "medium"))
                .and_then(Value::as_str)
                == Some("Memory");
            !(read_only_kind || memory)
        })
}

/// A quantity as written (`500Gi`, or a bare number).
fn shown(raw: &Value) -> String {
    match raw {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::model::finding::Severity;
    use crate::rules::testing::findings_of;

    const ID: &str = "model-exceeds-storage-limit";

    #[test]
    fn a_hub_download_beyond_the_containers_ephemeral_storage_is_an_eviction_loop() {
        let f = &findings_of(super::META.bad_example, ID);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(
            f.pointer,
            "/spec/template/spec/containers/0/resources/limits/ephemeral-storage"
        );
        // 405B at 1 byte (FP8 in the name) is 405 GB, beyond 300Gi: certain.
        assert_eq!(f.severity, Severity::Error, "{}", f.message);
        assert!(
            f.message.contains(
                "container \"vllm\" (requests nvidia.com/gpu) downloads its model past its \
                 ephemeral-storage limit: meta-llama/Llama-3.1-405B-Instruct-FP8 is 405 GB (405B \
                 parameters × 1 bytes, fp8"
            ),
            "{}",
            f.message
        );
        assert!(
            f.message.contains(
                "limits.ephemeral-storage: 300Gi is 322 GB, and no volume holds the Hugging Face \
                 cache: it lands in the container's own filesystem"
            ),
            "{}",
            f.message
        );
        assert!(f.message.contains("an eviction loop that never serves"));
        // An unstated precision: 810 GB at 16 bits, 203 GB at 4; beyond 500Gi only if it is
        // not quantised, a warning.
        let assumed = super::META
            .bad_example
            .replace("Llama-3.1-405B-Instruct-FP8\"", "Llama-3.1-405B-Instruct\"")
            .replace("ephemeral-storage: 300Gi", "ephemeral-storage: 500Gi");
        let f = &findings_of(&assumed, ID)[0];
        assert_eq!(f.severity, Severity::Warning, "{}", f.message);
        assert!(
            f.message.contains(
                "is 810 GB (405B parameters × 2 bytes, bf16, the usual 16-bit checkpoint (assumed)"
            ),
            "{}",
            f.message
        );
        assert!(f.message.contains("203 GB at 4 bits"), "{}", f.message);
        // Even a 4-bit checkpoint would not fit: an error on an unstated precision too.
        let tiny = assumed.replace("ephemeral-storage: 500Gi", "ephemeral-storage: 100Gi");
        assert_eq!(findings_of(&tiny, ID)[0].severity, Severity::Error);
        // Room for the checkpoint: silent.
        let roomy = assumed.replace("ephemeral-storage: 500Gi", "ephemeral-storage: 1Ti");
        assert!(findings_of(&roomy, ID).is_empty());
    }

    #[test]
    fn any_writable_volume_could_hold_the_cache_and_no_limit_means_no_finding() {
        assert!(findings_of(super::META.good_example, ID).is_empty());
        let cache = super::META.bad_example.replace(
            "          startupProbe:",
            "          volumeMounts: [{name: cache, mountPath: /data}]\n          startupProbe:",
        ) + "      volumes: [{name: cache, emptyDir: {}}]\n";
        assert!(findings_of(&cache, ID).is_empty());
        // A Secret or a memory-backed /dev/shm holds no cache.
        let shm = super::META.bad_example.replace(
            "          startupProbe:",
            "          volumeMounts: [{name: shm, mountPath: /dev/shm}, {name: token, mountPath: /secrets}]\n          startupProbe:",
        ) + "      volumes: [{name: shm, emptyDir: {medium: Memory}}, {name: token, secret: {secretName: hf}}]\n";
        assert_eq!(findings_of(&shm, ID).len(), 1);
        let unlimited = super::META
            .bad_example
            .replace("              ephemeral-storage: 300Gi\n", "");
        assert!(findings_of(&unlimited, ID).is_empty());
    }

    #[test]
    fn an_init_container_filling_an_emptydir_beyond_its_size_limit() {
        let yaml = "apiVersion: apps/v1
kind: Deployment
metadata: {name: qwen}
spec:
  template:
    spec:
      initContainers:
        - name: fetch
          image: python:3.12
          command: [hf, download, Qwen/Qwen2.5-72B-Instruct, --local-dir, /models/qwen]
          volumeMounts: [{name: models, mountPath: /models}]
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          args: [--model, /models/qwen]
          ports: [{containerPort: 8000}]
          resources: {limits: {nvidia.com/gpu: 4}}
          volumeMounts: [{name: models, mountPath: /models}]
          startupProbe: {httpGet: {path: /health, port: 8000}, failureThreshold: 360}
          readinessProbe: {httpGet: {path: /health, port: 8000}}
      volumes:
        - name: models
          emptyDir: {sizeLimit: 20Gi}
";
        let f = &findings_of(yaml, ID)[0];
        assert_eq!(
            f.pointer,
            "/spec/template/spec/volumes/0/emptyDir/sizeLimit"
        );
        assert_eq!(f.severity, Severity::Error, "{}", f.message);
        assert!(
            f.message.contains(
                "is given a download larger than emptyDir \"models\" may hold: \
                 Qwen/Qwen2.5-72B-Instruct is 144 GB"
            ) && f
                .message
                .contains("sizeLimit: 20Gi is 21 GB, and init container \"fetch\" fills it"),
            "{}",
            f.message
        );
        // 144 GB at 16 bits, 36 GB at 4: beyond 50Gi only if it is not quantised.
        let between = yaml.replace("sizeLimit: 20Gi", "sizeLimit: 50Gi");
        assert_eq!(findings_of(&between, ID)[0].severity, Severity::Warning);
        let roomy = yaml.replace("sizeLimit: 20Gi", "sizeLimit: 200Gi");
        assert!(findings_of(&roomy, ID).is_empty());
    }
}
