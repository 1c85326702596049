//! Where a container's weights come from at start: downloaded (the Hugging Face Hub, NGC,
//! object storage), or read from a volume (a PVC, hostPath, an emptyDir an init container
//! filled, an image volume) or from the image itself.

use super::model::CommandLine;
use super::settings::{Bandwidth, Span};
use crate::model::fields::{get, pick};
use serde::Serialize;
use serde_json::Value;

/// Where the weights are read from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WeightSource {
    /// Downloaded from the Hugging Face Hub at container start.
    Hub,
    /// Downloaded from NGC at container start (NIM).
    Ngc,
    /// Downloaded from object storage at container start.
    ObjectStore {
        scheme: String,
    },
    /// Read from a PersistentVolumeClaim or a network volume.
    PersistentVolume {
        volume: String,
        claim: Option<String>,
    },
    HostPath {
        volume: String,
    },
    EmptyDir {
        volume: String,
        memory: bool,
    },
    ImageVolume {
        volume: String,
    },
    /// Part of the container image.
    Image,
}

impl WeightSource {
    /// MB/s the policy gives this source, at the fast and the slow end.
    pub fn bandwidth(&self, b: &Bandwidth) -> Span {
        match self {
            WeightSource::Hub => b.hub,
            WeightSource::Ngc => b.ngc,
            WeightSource::ObjectStore { .. } => b.object_store,
            WeightSource::PersistentVolume { .. } => b.persistent_volume,
            WeightSource::HostPath { .. } => b.host_path,
            WeightSource::EmptyDir { memory: true, .. } => b.memory,
            WeightSource::EmptyDir { .. }
            | WeightSource::ImageVolume { .. }
            | WeightSource::Image => b.node_disk,
        }
    }

    /// Whether the weights cross the network at every start.
    pub fn is_download(&self) -> bool {
        matches!(
            self,
            WeightSource::Hub | WeightSource::Ngc | WeightSource::ObjectStore { .. }
        )
    }
}

impl std::fmt::Display for WeightSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WeightSource::Hub => f.write_str("downloaded from the Hugging Face Hub"),
            WeightSource::Ngc => f.write_str("downloaded from NGC"),
            WeightSource::ObjectStore { scheme } => write!(f, "downloaded from {scheme}://"),
            WeightSource::PersistentVolume {
                claim: Some(claim), ..
            } => {
                write!(f, "read from PVC {claim:?}")
            }
            WeightSource::PersistentVolume { volume, .. } => {
                write!(f, "read from network volume {volume:?}")
            }
            WeightSource::HostPath { volume } => write!(f, "read from hostPath volume {volume:?}"),
            WeightSource::EmptyDir {
                volume,
                memory: true,
            } => {
                write!(f, "read from memory-backed emptyDir {volume:?}")
            }
            WeightSource::EmptyDir { volume, .. } => write!(f, "read from emptyDir {volume:?}"),
            WeightSource::ImageVolume { volume } => write!(f, "read from image volume {volume:?}"),
            WeightSource::Image => f.write_str("read from the container image"),
        }
    }
}

/// Where the weights come from, and the init container that downloads them first, if one does.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub source: WeightSource,
    /// An init container that fetches the weights before this container starts. Its download
    /// is not part of this container's load (but is part of the pod's time to Ready).
    pub fetched_by: Option<Fetch>,
}

/// An init container's download of the weights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fetch {
    pub container: String,
    /// Where it downloads from, when the manifest says.
    pub from: Option<WeightSource>,
}

fn fetch(container: impl Into<String>, from: Option<WeightSource>) -> Option<Fetch> {
    Some(Fetch {
        container: container.into(),
        from,
    })
}

/// The init container KServe injects to download a `storageUri` into `/mnt/models`
/// (`kserve/pkg/webhook/admission/pod/storage_initializer_injector.go`).
pub const KSERVE_STORAGE_INITIALIZER: &str = "storage-initializer";

/// Where `reference` (a Hub id, a path, a URI) is read from by `container` of `pod`.
/// `kserve_storage` is true for an InferenceService's `storageUri`, which KServe downloads
/// with its storage initializer (except `pvc://`, which it mounts).
pub fn locate(
    reference: &str,
    pod: &Value,
    container: &Value,
    line: &CommandLine,
    kserve_storage: bool,
) -> Located {
    let direct = |source| Located {
        source,
        fetched_by: None,
    };
    if let Some((scheme, rest)) = reference.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        let remote = match scheme.as_str() {
            "hf" => WeightSource::Hub,
            "ngc" => WeightSource::Ngc,
            "pvc" => {
                let claim = rest.split('/').next().unwrap_or(rest).to_owned();
                return direct(WeightSource::PersistentVolume {
                    volume: claim.clone(),
                    claim: Some(claim),
                });
            }
            // KServe's modelcar: the weights are an OCI image on the node.
            "oci" => return direct(WeightSource::Image),
            _ => WeightSource::ObjectStore { scheme },
        };
        if kserve_storage {
            return Located {
                source: WeightSource::EmptyDir {
                    volume: "kserve-provision-location".to_owned(),
                    memory: false,
                },
                fetched_by: fetch(KSERVE_STORAGE_INITIALIZER, Some(remote)),
            };
        }
        return direct(remote);
    }
    let mounts = Mounts::of(pod, container);
    if reference.starts_with('/') || reference.starts_with("./") || reference.starts_with('~') {
        let source = mounts.source_of(reference);
        // An emptyDir starts empty: an init container that mounts it is what fills it.
        let fetched_by = match source {
            WeightSource::EmptyDir { .. } => mounts
                .filled_by(reference, pod)
                .and_then(|init| fetch(init, None)),
            _ => None,
        };
        return Located { source, fetched_by };
    }
    // A Hub id. An init container that names it fetches it into a volume this container shares.
    if let Some((init, volume)) = init_fetching(reference, pod, &mounts) {
        return Located {
            source: volume,
            fetched_by: fetch(init, Some(WeightSource::Hub)),
        };
    }
    let offline = ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"].iter().any(|v| {
        line.env(v)
            .is_some_and(|x| matches!(x.trim(), "1" | "true" | "TRUE" | "True" | "yes"))
    });
    if offline {
        let cache = line
            .flag(&["--download-dir"])
            .map(|(_, dir)| dir.to_owned())
            .or_else(|| {
                [
                    "HF_HUB_CACHE",
                    "HUGGINGFACE_HUB_CACHE",
                    "HF_HOME",
                    "TRANSFORMERS_CACHE",
                ]
                .iter()
                .find_map(|v| line.env(v).map(str::to_owned))
            })
            .unwrap_or_else(|| "/root/.cache/huggingface".to_owned());
        return direct(mounts.source_of(&cache));
    }
    direct(WeightSource::Hub)
}

/// A container's volume mounts joined with the pod's volumes.
struct Mounts<'a> {
    /// (mountPath, volume name, volume definition)
    mounts: Vec<(&'a str, &'a str, Option<&'a Value>)>,
}

impl<'a> Mounts<'a> {
    fn of(pod: &'a Value, container: &'a Value) -> Self {
        let volumes = get(pod, "volumes").and_then(Value::as_array);
        let mounts = get(container, "volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| {
                let [name, path] = pick(m, ["name", "mountPath"]);
                let name = name?.as_str()?;
                let volume = volumes
                    .into_iter()
                    .flatten()
                    .find(|v| get(v, "name").and_then(Value::as_str) == Some(name));
                Some((path?.as_str()?, name, volume))
            })
            .collect();
        Mounts { mounts }
    }

    /// The mount whose path holds `path` (the deepest one).
    fn mount_of(&self, path: &str) -> Option<&(&'a str, &'a str, Option<&'a Value>)> {
        self.mounts
            .iter()
            .filter(|(mount, _, _)| {
                let mount = mount.trim_end_matches('/');
                path == mount || path.starts_with(&format!("{mount}/")) || mount.is_empty()
            })
            .max_by_key(|(mount, _, _)| mount.len())
    }

    fn source_of(&self, path: &str) -> WeightSource {
        match self.mount_of(path) {
            Some((_, name, volume)) => volume_source(name, *volume),
            None => WeightSource::Image,
        }
    }

    /// The init container that writes into the volume holding `path`, if one mounts it.
    fn filled_by(&self, path: &str, pod: &Value) -> Option<String> {
        let (_, name, _) = self.mount_of(path)?;
        init_containers_mounting(pod, name).next()
    }
}

fn volume_source(name: &str, volume: Option<&Value>) -> WeightSource {
    let volume_name = name.to_owned();
    let Some(volume) = volume else {
        return WeightSource::Image;
    };
    if let Some(pvc) = get(volume, "persistentVolumeClaim") {
        return WeightSource::PersistentVolume {
            volume: volume_name,
            claim: get(pvc, "claimName")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
    }
    if get(volume, "hostPath").is_some() {
        return WeightSource::HostPath {
            volume: volume_name,
        };
    }
    if let Some(empty) = get(volume, "emptyDir") {
        let memory = get(empty, "medium").and_then(Value::as_str) == Some("Memory");
        return WeightSource::EmptyDir {
            volume: volume_name,
            memory,
        };
    }
    if get(volume, "image").is_some() {
        return WeightSource::ImageVolume {
            volume: volume_name,
        };
    }
    let network = [
        "nfs",
        "csi",
        "ephemeral",
        "iscsi",
        "cephfs",
        "glusterfs",
        "azureFile",
        "awsElasticBlockStore",
        "gcePersistentDisk",
    ];
    if network.iter().any(|k| get(volume, k).is_some()) {
        return WeightSource::PersistentVolume {
            volume: volume_name,
            claim: None,
        };
    }
    WeightSource::Image
}

/// Names of the init containers that mount volume `name`.
fn init_containers_mounting<'a>(
    pod: &'a Value,
    name: &'a str,
) -> impl Iterator<Item = String> + 'a {
    get(pod, "initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |c| {
            get(c, "volumeMounts")
                .and_then(Value::as_array)
                .is_some_and(|ms| {
                    ms.iter()
                        .any(|m| get(m, "name").and_then(Value::as_str) == Some(name))
                })
        })
        .map(|c| {
            get(c, "name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        })
}

/// Where vLLM reads the weights from with `--load-format tensorizer`: the `tensorizer_uri` of
/// `--model-loader-extra-config` (object storage such as `s3://…/model.tensors`, or a path on a
/// volume), not the Hub id or path the model is named by.
pub fn tensorizer(line: &CommandLine, pod: &Value, container: &Value) -> Option<WeightSource> {
    let (_, format) = line.flag(&["--load-format"])?;
    if format != "tensorizer" {
        return None;
    }
    // The JSON config arrives split into words (`{"tensorizer_uri":`, `"s3://…"}`): the URI is
    // the first value after the key, its quotes and braces trimmed.
    let at = line
        .words
        .iter()
        .position(|w| w.contains("tensorizer_uri"))?;
    let uri = line.words[at..]
        .iter()
        .flat_map(|w| w.split(['"', '\'', ',', '{', '}']))
        .skip_while(|part| !part.contains("tensorizer_uri"))
        .skip(1)
        .map(|part| part.trim_start_matches(':').trim())
        .find(|part| !part.is_empty())?;
    if let Some((scheme, _)) = uri.split_once("://") {
        return Some(WeightSource::ObjectStore {
            scheme: scheme.to_ascii_lowercase(),
        });
    }
    uri.starts_with('/')
        .then(|| Mounts::of(pod, container).source_of(uri))
}

/// What an init container downloads into the local path `path`: the model it names (a Hub id
/// after `download`, or an object-storage URI) and where from, when its command writes to `path`
/// or a directory above it (`hf download ID --local-dir /models/llama`, `huggingface-cli
/// download`, `aws s3 cp|sync s3://…/Llama-3.1-70B /models/…`, `gsutil -m cp -r gs://… /models`,
/// `gcloud storage cp`). The server's `--model /models/llama` names no size; the download does.
pub fn downloaded_into(path: &str, pod: &Value) -> Option<(String, String, WeightSource)> {
    let path = path.trim_end_matches('/');
    let inside = |dir: &str| {
        let dir = dir.trim_end_matches('/');
        !dir.is_empty() && (path == dir || path.starts_with(&format!("{dir}/")))
    };
    for init in get(pod, "initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let line = CommandLine::of(init);
        let words = &line.words;
        let name = get(init, "name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // The Hugging Face CLIs: `download ID ... --local-dir DIR`, as many as the script runs.
        let downloads: Vec<usize> = (1..words.len())
            .filter(|&i| {
                words[i] == "download"
                    && matches!(
                        words[i - 1].rsplit('/').next(),
                        Some("hf" | "huggingface-cli")
                    )
            })
            .collect();
        for (k, &at) in downloads.iter().enumerate() {
            let end = downloads.get(k + 1).copied().unwrap_or(words.len());
            let segment = &words[at + 1..end];
            let dir = segment
                .iter()
                .enumerate()
                .find_map(|(j, w)| match w.split_once('=') {
                    Some(("--local-dir", dir)) => Some(dir),
                    _ if w == "--local-dir" => segment.get(j + 1).map(String::as_str),
                    _ => None,
                });
            if let (Some(dir), Some(id)) = (dir, segment.iter().find(|w| !w.starts_with('-')))
                && inside(dir)
            {
                return Some((name, id.clone(), WeightSource::Hub));
            }
        }
        // AIBrix's downloader (`aibrix_download`, or `python -m aibrix.downloader`): a Hub id
        // or an object-storage URI after `--model-uri`, into `--local-dir` (its CLI,
        // vllm-project/aibrix python/aibrix/aibrix/downloader/__main__.py).
        let aibrix = words.iter().enumerate().any(|(i, w)| {
            w.rsplit('/').next() == Some("aibrix_download")
                || (w == "aibrix.downloader" && i > 0 && words[i - 1] == "-m")
        });
        if aibrix
            && let (Some(uri), Some(dir)) = (
                flag_value(words, "--model-uri"),
                flag_value(words, "--local-dir"),
            )
            && inside(dir)
        {
            let source = match uri.split_once("://") {
                Some((scheme, _)) => WeightSource::ObjectStore {
                    scheme: scheme.to_ascii_lowercase(),
                },
                None => WeightSource::Hub,
            };
            return Some((name, uri.trim_end_matches('/').to_owned(), source));
        }
        // A copy from object storage to a directory holding the path.
        let copies = words.iter().any(|w| {
            matches!(
                w.rsplit('/').next(),
                Some("aws" | "gsutil" | "gcloud" | "s5cmd" | "rclone" | "azcopy")
            )
        });
        if copies
            && words.iter().any(|w| w.starts_with('/') && inside(w))
            && let Some(uri) = words.iter().find(|w| w.contains("://"))
        {
            let scheme = uri
                .split_once("://")
                .map_or("", |(s, _)| s)
                .to_ascii_lowercase();
            return Some((name, uri.clone(), WeightSource::ObjectStore { scheme }));
        }
    }
    None
}

/// The value of a long flag, written `--flag VALUE` or `--flag=VALUE`.
fn flag_value<'w>(words: &'w [String], flag: &str) -> Option<&'w str> {
    words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.split_once('=') {
            Some((f, value)) if f == flag => Some(value),
            _ if w == flag => words.get(i + 1).map(String::as_str),
            _ => None,
        })
}

/// An init container whose command names `model` and that shares a volume with the container:
/// it downloads the weights there before the server starts.
fn init_fetching(model: &str, pod: &Value, mounts: &Mounts<'_>) -> Option<(String, WeightSource)> {
    for init in get(pod, "initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !CommandLine::of(init).mentions(model) {
            continue;
        }
        let name = get(init, "name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let shared = get(init, "volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| get(m, "name").and_then(Value::as_str))
            .find_map(|v| mounts.mounts.iter().find(|(_, n, _)| *n == v));
        if let Some((_, volume, definition)) = shared {
            return Some((name.to_owned(), volume_source(volume, *definition)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(reference: &str, pod: Value) -> Located {
        let container = &pod["containers"][0];
        locate(
            reference,
            &pod,
            container,
            &CommandLine::of(container),
            false,
        )
    }

    #[test]
    fn hub_ids_download_unless_an_init_container_fetched_them() {
        let pod = json!({"containers": [{"name": "vllm"}]});
        assert_eq!(at("meta-llama/Llama-3.1-8B", pod).source, WeightSource::Hub);
        let pod = json!({
            "initContainers": [{"name": "download", "command": ["huggingface-cli", "download", "meta-llama/Llama-3.1-8B", "--local-dir", "/models"], "volumeMounts": [{"name": "models", "mountPath": "/models"}]}],
            "containers": [{"name": "vllm", "volumeMounts": [{"name": "models", "mountPath": "/root/.cache/huggingface"}]}],
            "volumes": [{"name": "models", "emptyDir": {}}]
        });
        let got = at("meta-llama/Llama-3.1-8B", pod);
        assert_eq!(
            got.source,
            WeightSource::EmptyDir {
                volume: "models".into(),
                memory: false
            }
        );
        assert_eq!(got.fetched_by, fetch("download", Some(WeightSource::Hub)));
    }

    #[test]
    fn paths_are_read_from_the_volume_that_holds_them() {
        let pod = json!({
            "containers": [{"name": "vllm", "volumeMounts": [
                {"name": "weights", "mountPath": "/data"},
                {"name": "shm", "mountPath": "/dev/shm"},
                {"name": "local", "mountPath": "/data/local"}
            ]}],
            "volumes": [
                {"name": "weights", "persistentVolumeClaim": {"claimName": "llama-70b"}},
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
                {"name": "local", "hostPath": {"path": "/mnt/nvme"}}
            ]
        });
        assert_eq!(
            at("/data/Llama-3.1-70B", pod.clone()).source,
            WeightSource::PersistentVolume {
                volume: "weights".into(),
                claim: Some("llama-70b".into())
            }
        );
        assert_eq!(
            at("/data/local/x", pod.clone()).source,
            WeightSource::HostPath {
                volume: "local".into()
            }
        );
        assert_eq!(at("/opt/models/x", pod).source, WeightSource::Image);
    }

    #[test]
    fn kserve_storage_uris() {
        let pod = json!({"containers": [{}]});
        let c = &pod["containers"][0];
        let line = CommandLine::of(c);
        let hf = locate("hf://meta-llama/Llama-3.1-8B", &pod, c, &line, true);
        assert_eq!(
            hf.fetched_by,
            fetch(KSERVE_STORAGE_INITIALIZER, Some(WeightSource::Hub))
        );
        let s3 = locate("s3://bucket/llama", &pod, c, &line, true);
        assert_eq!(
            s3.fetched_by.unwrap().from,
            Some(WeightSource::ObjectStore {
                scheme: "s3".into()
            })
        );
        let pvc = locate("pvc://models/llama", &pod, c, &line, true);
        assert_eq!(
            pvc.source,
            WeightSource::PersistentVolume {
                volume: "models".into(),
                claim: Some("models".into())
            }
        );
        assert_eq!(pvc.fetched_by, None);
    }

    #[test]
    fn offline_hub_reads_the_cache_volume() {
        let pod = json!({
            "containers": [{"env": [{"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "HF_HOME", "value": "/cache"}],
                            "volumeMounts": [{"name": "c", "mountPath": "/cache"}]}],
            "volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": "hf-cache"}}]
        });
        assert_eq!(
            at("Qwen/Qwen3-8B", pod).source,
            WeightSource::PersistentVolume {
                volume: "c".into(),
                claim: Some("hf-cache".into())
            }
        );
    }
}
