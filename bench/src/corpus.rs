//! A deterministic synthetic corpus of Kubernetes manifests for GPU model serving.
//!
//! Every file is a function of `(seed, index)` only, so a corpus of 1,000 files is the first
//! 1,000 files of a corpus of 10,000 with the same seed, and a run on another machine lints the
//! same bytes. The mix is what a repository of serving manifests holds: GPU Deployments,
//! StatefulSets, LeaderWorkerSets, KServe InferenceServices and Jobs, CPU services beside them,
//! good, bad and missing probes, and multi-document files (a Deployment with its PDB and HPA).
//!
//! The file name says what is in it (`00042-gpu-deployment-tcp-readiness.yaml`), so a benchmark
//! can pick out one kind of file, e.g. the port-open readiness probes that Checkov passes.

use std::fmt::Write as _;
use std::path::Path;

/// SplitMix64: tiny, fast, and the same on every platform and every version of this crate.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// What the primary workload of a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    GpuDeployment,
    GpuStatefulSet,
    LeaderWorkerSet,
    InferenceService,
    GpuJob,
    CpuDeployment,
}

impl Kind {
    pub fn slug(self) -> &'static str {
        match self {
            Kind::GpuDeployment => "gpu-deployment",
            Kind::GpuStatefulSet => "gpu-statefulset",
            Kind::LeaderWorkerSet => "gpu-lws",
            Kind::InferenceService => "gpu-isvc",
            Kind::GpuJob => "gpu-job",
            Kind::CpuDeployment => "cpu-deployment",
        }
    }
}

/// How the probes of the main container are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probes {
    /// Startup budget covering the load, readiness on the server's ready endpoint, liveness on
    /// its live endpoint.
    Good,
    /// Liveness and readiness but no startupProbe: the restart storm.
    NoStartup,
    /// Good startup and liveness, readiness only opens the port (`tcpSocket`): passes Checkov's
    /// CKV_K8S_8 / CKV_K8S_9, sends traffic to a pod still loading.
    TcpReadiness,
    /// A startupProbe whose budget (3 × 10 s) is far below the model load time.
    ShortBudget,
    /// No probes at all.
    Missing,
}

impl Probes {
    pub fn slug(self) -> &'static str {
        match self {
            Probes::Good => "good",
            Probes::NoStartup => "no-startup",
            Probes::TcpReadiness => "tcp-readiness",
            Probes::ShortBudget => "short-budget",
            Probes::Missing => "no-probes",
        }
    }
}

/// A model server image with the endpoints it really serves.
struct Server {
    name: &'static str,
    image: &'static str,
    port: u16,
    live: &'static str,
    ready: &'static str,
    ready_timeout: u32,
    models: &'static [&'static str],
}

const SERVERS: &[Server] = &[
    Server {
        name: "vllm",
        image: "vllm/vllm-openai:v0.6.3",
        port: 8000,
        live: "/health",
        ready: "/health",
        ready_timeout: 2,
        models: &[
            "meta-llama/Meta-Llama-3-8B-Instruct",
            "meta-llama/Meta-Llama-3-70B-Instruct",
            "mistralai/Mistral-7B-Instruct-v0.3",
            "Qwen/Qwen2.5-32B-Instruct",
        ],
    },
    Server {
        name: "tgi",
        image: "ghcr.io/huggingface/text-generation-inference:2.4.0",
        port: 80,
        live: "/health",
        ready: "/health",
        ready_timeout: 2,
        models: &["google/gemma-2-9b-it", "bigcode/starcoder2-15b"],
    },
    Server {
        name: "triton",
        image: "nvcr.io/nvidia/tritonserver:24.08-py3",
        port: 8000,
        live: "/v2/health/live",
        ready: "/v2/health/ready",
        ready_timeout: 2,
        models: &["ensemble-llama", "resnet50-trt", "bert-large-onnx"],
    },
    Server {
        name: "sglang",
        image: "lmsysorg/sglang:v0.3.5-cu124",
        port: 30000,
        live: "/health",
        ready: "/health_generate",
        ready_timeout: 30,
        models: &[
            "deepseek-ai/DeepSeek-V2-Lite",
            "meta-llama/Llama-3.1-8B-Instruct",
        ],
    },
];

const CPU_IMAGES: &[(&str, &str, u16)] = &[
    ("gateway", "nginxinc/nginx-unprivileged:1.27", 8080),
    ("router", "ghcr.io/example/llm-router:2.3.1", 8080),
    ("frontend", "ghcr.io/example/chat-frontend:5.0.2", 3000),
    ("tokenizer", "ghcr.io/example/tokenizer-svc:0.9.0", 9000),
];

const LOAD_SECONDS: &[u32] = &[120, 240, 480, 900];
const GPU_RESOURCES: &[&str] = &["nvidia.com/gpu", "nvidia.com/gpu", "amd.com/gpu"];

/// Padding material: the environment a real serving container carries.
const ENV: &[(&str, &str)] = &[
    ("HF_HOME", "/models/cache"),
    ("HF_HUB_OFFLINE", "\"1\""),
    ("NCCL_DEBUG", "WARN"),
    ("NCCL_SOCKET_IFNAME", "eth0"),
    ("OMP_NUM_THREADS", "\"8\""),
    ("TOKENIZERS_PARALLELISM", "\"false\""),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
    ("LOG_LEVEL", "info"),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://otel-collector.observability:4317",
    ),
    ("OTEL_SERVICE_NAME", "model-serving"),
    ("MAX_BATCH_SIZE", "\"64\""),
    ("MAX_INPUT_LENGTH", "\"8192\""),
];

/// One generated file.
#[derive(Debug, Clone)]
pub struct File {
    pub name: String,
    pub text: String,
    pub kind: Kind,
    pub probes: Probes,
    pub documents: usize,
}

/// Generates file `index` of the corpus for `seed`.
pub fn file(seed: u64, index: usize) -> File {
    let mut rng = Rng::new(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    // Burn a few values so that neighbouring seeds diverge at once.
    for _ in 0..3 {
        rng.next_u64();
    }
    let kind = match rng.below(100) {
        0..=34 => Kind::GpuDeployment,
        35..=46 => Kind::GpuStatefulSet,
        47..=56 => Kind::LeaderWorkerSet,
        57..=66 => Kind::InferenceService,
        67..=76 => Kind::GpuJob,
        _ => Kind::CpuDeployment,
    };
    let probes = match kind {
        Kind::GpuJob => Probes::Missing,
        Kind::CpuDeployment => {
            if rng.chance(70) {
                Probes::Good
            } else {
                Probes::Missing
            }
        }
        _ => match rng.below(100) {
            0..=29 => Probes::Good,
            30..=49 => Probes::NoStartup,
            50..=69 => Probes::TcpReadiness,
            70..=84 => Probes::ShortBudget,
            _ => Probes::Missing,
        },
    };
    let target = 1_800 + rng.below(500);
    let mut g = Gen {
        rng,
        index,
        probes,
        target,
    };
    let (text, documents) = match kind {
        Kind::GpuDeployment => g.deployment(),
        Kind::GpuStatefulSet => g.statefulset(),
        Kind::LeaderWorkerSet => g.lws(),
        Kind::InferenceService => g.isvc(),
        Kind::GpuJob => g.job(),
        Kind::CpuDeployment => g.cpu_deployment(),
    };
    File {
        name: format!("{index:05}-{}-{}.yaml", kind.slug(), probes.slug()),
        text,
        kind,
        probes,
        documents,
    }
}

/// Writes files `0..count` into `dir` (created if needed). Returns the total bytes written.
pub fn write(dir: &Path, count: usize, seed: u64) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let mut bytes = 0;
    for index in 0..count {
        let f = file(seed, index);
        bytes += f.text.len() as u64;
        std::fs::write(dir.join(&f.name), f.text)?;
    }
    Ok(bytes)
}

struct Gen {
    rng: Rng,
    index: usize,
    probes: Probes,
    /// Target size of the file in bytes; environment variables pad up to it.
    target: usize,
}

/// `ENV_PLACEHOLDER` marks where the main container's environment goes, so padding can be sized
/// once the rest of the file is known.
const ENV_PLACEHOLDER: &str = "\u{0}ENV\u{0}";

impl Gen {
    fn namespace(&mut self) -> String {
        format!("team-{:02}", self.rng.below(24))
    }

    fn load(&mut self) -> u32 {
        *self.rng.pick(LOAD_SECONDS)
    }

    fn server(&mut self) -> &'static Server {
        self.rng.pick(SERVERS)
    }

    /// Replaces the environment placeholder by enough variables to reach the target size.
    fn finish(&mut self, text: String, env_indent: usize) -> String {
        let pad = " ".repeat(env_indent);
        let mut env = String::new();
        let mut i = 0;
        let base = text.len() - ENV_PLACEHOLDER.len();
        // The usual variables first (rotated by index), then feature flags.
        while base + env.len() < self.target && i < 64 {
            if i < ENV.len() {
                let (name, value) = ENV[(i + self.index) % ENV.len()];
                let _ = writeln!(env, "{pad}- name: {name}\n{pad}  value: {value}");
            } else {
                let _ = writeln!(
                    env,
                    "{pad}- name: FEATURE_FLAG_{i:02}\n{pad}  value: \"{}\"",
                    self.rng.below(2) == 1
                );
            }
            i += 1;
        }
        if env.is_empty() {
            return text.replace(ENV_PLACEHOLDER, "");
        }
        text.replace(ENV_PLACEHOLDER, &format!("{}env:\n{env}", &pad[2..]))
    }

    /// Probes of a GPU serving container, indented for a container at `indent`.
    fn gpu_probes(&mut self, server: &Server, load: u32, indent: usize) -> String {
        let p = " ".repeat(indent);
        let port = "http";
        let startup_threshold = (load * 5 / 4).div_ceil(10) + 1;
        let startup = format!(
            "{p}startupProbe:\n{p}  httpGet:\n{p}    path: {live}\n{p}    port: {port}\n{p}  periodSeconds: 10\n{p}  failureThreshold: {startup_threshold}\n",
            live = server.live
        );
        let readiness = format!(
            "{p}readinessProbe:\n{p}  httpGet:\n{p}    path: {ready}\n{p}    port: {port}\n{p}  periodSeconds: 5\n{p}  timeoutSeconds: {t}\n",
            ready = server.ready,
            t = server.ready_timeout
        );
        let liveness = format!(
            "{p}livenessProbe:\n{p}  httpGet:\n{p}    path: {live}\n{p}    port: {port}\n{p}  periodSeconds: 10\n{p}  failureThreshold: 3\n",
            live = server.live
        );
        match self.probes {
            Probes::Good => format!("{startup}{readiness}{liveness}"),
            Probes::NoStartup => format!(
                "{readiness}{p}livenessProbe:\n{p}  httpGet:\n{p}    path: {live}\n{p}    port: {port}\n{p}  initialDelaySeconds: 60\n",
                live = server.live
            ),
            Probes::TcpReadiness => format!(
                "{startup}{p}readinessProbe:\n{p}  tcpSocket:\n{p}    port: {port}\n{p}  periodSeconds: 5\n{liveness}"
            ),
            Probes::ShortBudget => format!(
                "{p}startupProbe:\n{p}  httpGet:\n{p}    path: {live}\n{p}    port: {port}\n{p}  periodSeconds: 10\n{p}  failureThreshold: 3\n{readiness}{liveness}",
                live = server.live
            ),
            Probes::Missing => String::new(),
        }
    }

    /// A GPU serving container at `indent` (the `- name:` line's indentation).
    fn gpu_container(&mut self, server: &Server, load: u32, gpus: u32, indent: usize) -> String {
        let p = " ".repeat(indent);
        let model = *self.rng.pick(server.models);
        let resource = *self.rng.pick(GPU_RESOURCES);
        let memory = 32 * gpus.max(1);
        let probes = self.gpu_probes(server, load, indent + 2);
        let shutdown = if self.probes == Probes::Good {
            format!("{p}  lifecycle:\n{p}    preStop:\n{p}      sleep:\n{p}        seconds: 10\n")
        } else {
            String::new()
        };
        format!(
            "{p}- name: {name}\n{p}  image: {image}\n{p}  args: [\"--model\", \"{model}\", \"--port\", \"{port}\"]\n{p}  ports:\n{p}    - name: http\n{p}      containerPort: {port}\n{ENV_PLACEHOLDER}{p}  resources:\n{p}    requests:\n{p}      cpu: \"{cpu}\"\n{p}      memory: {memory}Gi\n{p}      {resource}: {gpus}\n{p}    limits:\n{p}      memory: {memory}Gi\n{p}      {resource}: {gpus}\n{p}  volumeMounts:\n{p}    - name: model-cache\n{p}      mountPath: /models/cache\n{p}    - name: dshm\n{p}      mountPath: /dev/shm\n{shutdown}{probes}",
            name = server.name,
            image = server.image,
            port = server.port,
            cpu = 4 * gpus.max(1),
        )
    }

    fn volumes(indent: usize) -> String {
        let p = " ".repeat(indent);
        format!(
            "{p}volumes:\n{p}  - name: model-cache\n{p}    persistentVolumeClaim:\n{p}      claimName: model-cache\n{p}  - name: dshm\n{p}    emptyDir:\n{p}      medium: Memory\n{p}      sizeLimit: 16Gi\n"
        )
    }

    /// `metadata:` with the name, namespace and the `app.kubernetes.io/name` label (the name).
    fn metadata(name: &str, namespace: &str) -> String {
        format!(
            "metadata:\n  name: {name}\n  namespace: {namespace}\n  labels:\n    app.kubernetes.io/name: {name}\n    app.kubernetes.io/part-of: model-serving\n"
        )
    }

    /// A pod template (`template:` at `indent`) with one GPU container.
    fn pod_template(
        &mut self,
        name: &str,
        server: &Server,
        load: u32,
        gpus: u32,
        indent: usize,
    ) -> String {
        let p = " ".repeat(indent);
        let grace = if self.probes == Probes::Good {
            format!("{p}    terminationGracePeriodSeconds: 120\n")
        } else {
            String::new()
        };
        let container = self.gpu_container(server, load, gpus, indent + 6);
        format!(
            "{p}template:\n{p}  metadata:\n{p}    labels:\n{p}      app.kubernetes.io/name: {name}\n{p}    annotations:\n{p}      probelint.io/model-load-seconds: \"{load}\"\n{p}  spec:\n{grace}{p}    nodeSelector:\n{p}      node.kubernetes.io/instance-type: gpu-a100-80gb\n{p}    containers:\n{container}{volumes}",
            volumes = Self::volumes(indent + 4)
        )
    }

    fn deployment(&mut self) -> (String, usize) {
        let server = self.server();
        let load = self.load();
        let gpus = 1 + self.rng.below(4) as u32;
        let ns = self.namespace();
        let name = format!("{}-{}", server.name, self.index);
        let multi = self.rng.chance(30);
        let replicas = if multi || self.rng.chance(40) {
            2 + self.rng.below(3)
        } else {
            1
        };
        let template = self.pod_template(&name, server, load, gpus, 2);
        let mut text = format!(
            "# {name}: {server} serving, generated for the probelint benchmarks\napiVersion: apps/v1\nkind: Deployment\n{meta}spec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n  strategy:\n    type: RollingUpdate\n    rollingUpdate:\n      maxUnavailable: 0\n      maxSurge: 1\n{template}",
            server = server.name,
            meta = Self::metadata(&name, &ns),
        );
        let mut documents = 1;
        if multi {
            let _ = write!(
                text,
                "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\n{meta}spec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n",
                meta = Self::metadata(&name, &ns)
            );
            let metric = if self.rng.chance(50) {
                "    - type: Resource\n      resource:\n        name: cpu\n        target:\n          type: Utilization\n          averageUtilization: 70\n"
            } else {
                "    - type: Pods\n      pods:\n        metric:\n          name: num_requests_waiting\n        target:\n          type: AverageValue\n          averageValue: \"4\"\n"
            };
            let _ = write!(
                text,
                "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n{meta}spec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: {name}\n  minReplicas: {replicas}\n  maxReplicas: 8\n  metrics:\n{metric}",
                meta = Self::metadata(&name, &ns)
            );
            documents += 2;
        }
        (self.finish(text, 12), documents)
    }

    fn statefulset(&mut self) -> (String, usize) {
        let server = self.server();
        let load = self.load();
        let gpus = 1 + self.rng.below(8) as u32;
        let ns = self.namespace();
        let name = format!("{}-sts-{}", server.name, self.index);
        let template = self.pod_template(&name, server, load, gpus, 2);
        let text = format!(
            "apiVersion: apps/v1\nkind: StatefulSet\n{meta}spec:\n  serviceName: {name}\n  replicas: 1\n  podManagementPolicy: Parallel\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n{template}",
            meta = Self::metadata(&name, &ns),
        );
        (self.finish(text, 12), 1)
    }

    fn lws(&mut self) -> (String, usize) {
        let server = &SERVERS[if self.rng.chance(50) { 0 } else { 3 }];
        let load = *self.rng.pick(&[480, 900]);
        let ns = self.namespace();
        let name = format!("{}-lws-{}", server.name, self.index);
        let leader = self.gpu_container(server, load, 8, 12);
        // Workers run the same image; their probes are usually left out.
        let worker = format!(
            "            - name: worker\n              image: {image}\n              args: [\"--headless\"]\n              resources:\n                limits:\n                  nvidia.com/gpu: 8\n",
            image = server.image
        );
        let text = format!(
            "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n{meta}spec:\n  replicas: 1\n  leaderWorkerTemplate:\n    size: 2\n    restartPolicy: RecreateGroupOnPodRestart\n    leaderTemplate:\n      metadata:\n        annotations:\n          probelint.io/model-load-seconds: \"{load}\"\n      spec:\n        containers:\n{leader}    workerTemplate:\n      metadata:\n        annotations:\n          probelint.io/model-load-seconds: \"{load}\"\n      spec:\n        containers:\n{worker}",
            meta = Self::metadata(&name, &ns),
        );
        (self.finish(text, 16), 1)
    }

    fn isvc(&mut self) -> (String, usize) {
        let server = &SERVERS[if self.rng.chance(50) { 0 } else { 1 }];
        let load = self.load();
        let ns = self.namespace();
        let name = format!("{}-isvc-{}", server.name, self.index);
        let container = self.gpu_container(server, load, 1, 6);
        let text = format!(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    probelint.io/model-load-seconds: \"{load}\"\n    serving.kserve.io/deploymentMode: RawDeployment\nspec:\n  predictor:\n    minReplicas: 1\n    maxReplicas: 4\n    containers:\n{container}"
        );
        (self.finish(text, 10), 1)
    }

    fn job(&mut self) -> (String, usize) {
        let server = self.server();
        let ns = self.namespace();
        let name = format!("eval-{}-{}", server.name, self.index);
        let model = *self.rng.pick(server.models);
        let text = format!(
            "apiVersion: batch/v1\nkind: Job\n{meta}spec:\n  backoffLimit: 2\n  ttlSecondsAfterFinished: 3600\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: eval\n          image: {image}\n          command: [\"python\", \"-m\", \"eval.harness\", \"--model\", \"{model}\"]\n{ENV_PLACEHOLDER}          resources:\n            limits:\n              nvidia.com/gpu: 1\n          volumeMounts:\n            - name: model-cache\n              mountPath: /models/cache\n{volumes}",
            meta = Self::metadata(&name, &ns),
            image = server.image,
            volumes = Self::volumes(6),
        );
        (self.finish(text, 12), 1)
    }

    fn cpu_deployment(&mut self) -> (String, usize) {
        let &(app, image, port) = self.rng.pick(CPU_IMAGES);
        let ns = self.namespace();
        let name = format!("{app}-{}", self.index);
        let probes = if self.probes == Probes::Good {
            "          readinessProbe:\n            httpGet:\n              path: /readyz\n              port: http\n          livenessProbe:\n            httpGet:\n              path: /livez\n              port: http\n"
        } else {
            ""
        };
        let mut text = format!(
            "apiVersion: apps/v1\nkind: Deployment\n{meta}spec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: {name}\n    spec:\n      containers:\n        - name: {app}\n          image: {image}\n          ports:\n            - name: http\n              containerPort: {port}\n{ENV_PLACEHOLDER}          resources:\n            requests:\n              cpu: 250m\n              memory: 256Mi\n{probes}",
            meta = Self::metadata(&name, &ns),
        );
        let mut documents = 1;
        if self.rng.chance(50) {
            let _ = write!(
                text,
                "---\napiVersion: v1\nkind: Service\n{meta}spec:\n  selector:\n    app.kubernetes.io/name: {name}\n  ports:\n    - name: http\n      port: 80\n      targetPort: http\n",
                meta = Self::metadata(&name, &ns)
            );
            documents += 1;
        }
        (self.finish(text, 12), documents)
    }
}

/// A GPU Deployment and a GPU Pod for the webhook and engine benchmarks, as YAML.
pub mod samples {
    /// A vLLM Deployment with liveness and no startupProbe, port-open readiness: the webhook
    /// denies it.
    pub const GPU_DEPLOYMENT_BAD: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-3-70b
  namespace: inference
  labels:
    app: llama-3-70b
spec:
  replicas: 2
  selector:
    matchLabels:
      app: llama-3-70b
  template:
    metadata:
      labels:
        app: llama-3-70b
      annotations:
        probelint.io/model-load-seconds: "480"
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          args: ["--model", "meta-llama/Meta-Llama-3-70B-Instruct", "--tensor-parallel-size", "4"]
          ports:
            - name: http
              containerPort: 8000
          env:
            - name: HF_HOME
              value: /models/cache
            - name: NCCL_DEBUG
              value: WARN
          resources:
            limits:
              nvidia.com/gpu: 4
          volumeMounts:
            - name: model-cache
              mountPath: /models/cache
          livenessProbe:
            httpGet:
              path: /health
              port: http
            initialDelaySeconds: 60
          readinessProbe:
            tcpSocket:
              port: http
      volumes:
        - name: model-cache
          persistentVolumeClaim:
            claimName: model-cache
"#;

    /// The same Deployment done right: nothing to report.
    pub const GPU_DEPLOYMENT_CLEAN: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama-3-8b
  namespace: inference
  labels:
    app: llama-3-8b
spec:
  replicas: 1
  selector:
    matchLabels:
      app: llama-3-8b
  template:
    metadata:
      labels:
        app: llama-3-8b
      annotations:
        probelint.io/model-load-seconds: "240"
    spec:
      terminationGracePeriodSeconds: 120
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          args: ["--model", "meta-llama/Meta-Llama-3-8B-Instruct"]
          ports:
            - name: http
              containerPort: 8000
          env:
            - name: HF_HOME
              value: /models/cache
          resources:
            limits:
              nvidia.com/gpu: 1
          volumeMounts:
            - name: model-cache
              mountPath: /models/cache
          lifecycle:
            preStop:
              sleep:
                seconds: 10
          startupProbe:
            httpGet:
              path: /health
              port: http
            periodSeconds: 10
            failureThreshold: 31
          readinessProbe:
            httpGet:
              path: /health
              port: http
            periodSeconds: 5
          livenessProbe:
            httpGet:
              path: /health
              port: http
            periodSeconds: 10
            failureThreshold: 3
      volumes:
        - name: model-cache
          persistentVolumeClaim:
            claimName: model-cache
"#;

    /// A Triton Pod with liveness but no startupProbe: `/mutate` adds one.
    pub const GPU_POD_NEEDS_MUTATION: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: triton-0
  namespace: inference
  labels:
    app: triton
  annotations:
    probelint.io/model-load-seconds: "300"
spec:
  containers:
    - name: triton
      image: nvcr.io/nvidia/tritonserver:24.08-py3
      args: ["tritonserver", "--model-repository=/models"]
      ports:
        - name: http
          containerPort: 8000
        - name: grpc
          containerPort: 8001
      resources:
        limits:
          nvidia.com/gpu: 1
      livenessProbe:
        httpGet:
          path: /v2/health/live
          port: http
      readinessProbe:
        httpGet:
          path: /v2/health/ready
          port: http
"#;
}

/// One Pod with `containers` GPU containers (vLLM) that have only a port-open readiness probe:
/// each gets a startupProbe and an HTTP readiness probe from `--fix`, so the file has
/// 2 × `containers` findings and as many fixes, all in one document. For the benchmark of
/// `--fix` and of the human output as the fixes and findings per file grow.
pub fn fixable_pod(containers: usize) -> String {
    let mut text = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: many-gpus\nspec:\n  containers:\n",
    );
    for i in 0..containers {
        let _ = write!(
            text,
            "    - name: vllm-{i}\n      image: vllm/vllm-openai:v0.6.3\n      resources:\n        \
             limits:\n          nvidia.com/gpu: 1\n      readinessProbe:\n        tcpSocket:\n          \
             port: 8000\n"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a: a hash that, unlike std's, is the same in every Rust version.
    fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
        bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    /// docs/benchmarks.md was measured on these bytes: a change to the generator must be
    /// deliberate (update the pins, rerun `bench/run.sh`).
    #[test]
    fn the_benchmark_corpus_is_pinned() {
        let files: Vec<File> = (0..1_000).map(|i| file(1, i)).collect();
        assert_eq!(files[0].name, "00000-gpu-statefulset-tcp-readiness.yaml");
        assert_eq!(files.iter().map(|f| f.text.len()).sum::<usize>(), 2_166_531);
        let hash = fnv1a(
            files
                .iter()
                .flat_map(|f| f.name.bytes().chain(f.text.bytes())),
        );
        assert_eq!(hash, 0xdb81_d627_21e5_ba71, "{hash:#x}");
        // Neighbouring seeds diverge.
        assert!((0..200).all(|i| file(2, i).text != files[i].text));
    }

    #[test]
    fn write_writes_each_file_under_its_name_and_returns_the_total() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes = write(dir.path(), 40, 42).expect("write");
        assert_eq!(std::fs::read_dir(dir.path()).expect("read_dir").count(), 40);
        let mut total = 0;
        for i in 0..40 {
            let f = file(42, i);
            let written = std::fs::read(dir.path().join(&f.name)).expect("read");
            assert_eq!(written, f.text.as_bytes());
            total += written.len() as u64;
        }
        assert_eq!(bytes, total);
    }

    #[test]
    fn the_mix_covers_every_kind_and_probe_style_and_files_are_about_2_kb() {
        let files: Vec<File> = (0..1_000).map(|i| file(1, i)).collect();
        for kind in [
            Kind::GpuDeployment,
            Kind::GpuStatefulSet,
            Kind::LeaderWorkerSet,
            Kind::InferenceService,
            Kind::GpuJob,
            Kind::CpuDeployment,
        ] {
            assert!(files.iter().any(|f| f.kind == kind), "{kind:?}");
        }
        for probes in [
            Probes::Good,
            Probes::NoStartup,
            Probes::TcpReadiness,
            Probes::ShortBudget,
            Probes::Missing,
        ] {
            assert!(files.iter().any(|f| f.probes == probes), "{probes:?}");
        }
        assert!(files.iter().any(|f| f.documents > 1));
        let mean = files.iter().map(|f| f.text.len()).sum::<usize>() / files.len();
        assert!((1_700..=2_600).contains(&mean), "mean size {mean}");
    }

    #[test]
    fn every_file_and_sample_is_valid_yaml_with_kubernetes_objects() {
        let limits = probelint_yaml::load::Limits::default();
        let samples = [
            samples::GPU_DEPLOYMENT_BAD,
            samples::GPU_DEPLOYMENT_CLEAN,
            samples::GPU_POD_NEEDS_MUTATION,
        ];
        let files: Vec<String> = (0..300).map(|i| file(3, i).text).collect();
        for text in samples
            .iter()
            .copied()
            .chain(files.iter().map(String::as_str))
        {
            let docs = probelint_yaml::load::parse_stream(text.as_bytes(), &limits)
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert!(!docs.is_empty());
            for d in docs {
                assert!(d.value.get("kind").is_some_and(|k| k.is_string()), "{text}");
            }
        }
    }
}
