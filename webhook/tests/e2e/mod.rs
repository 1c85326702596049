//! The end-to-end harness: the real `probelint-webhook` binary on loopback, the chart installed
//! into the test control plane (`probelint-cluster`) with real Helm (`helm-sdkpy`), pointed at
//! the webhook through `webhook.external`, and `kubectl` against that apiserver.
//!
//! Webhook configurations are cluster-scoped and the tests of one binary share a control plane,
//! so every release is scoped to namespaces labelled `e2e.probelint.io/release=<release>` (the
//! chart's `webhook.namespaceSelectorExpressions`): tests run in parallel and never see each
//! other's webhooks. Each test runs its own webhook process, so its logs and metrics are its own.

#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod tls;

use probelint_cluster::{Ca, Cluster, Leaf};
use probelint_testkit::net::free_ports;
use probelint_testkit::secret::SecretDir;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The namespace label that puts a namespace in one release's scope.
pub const SCOPE_LABEL: &str = "e2e.probelint.io/release";

const BIN: &str = env!("CARGO_BIN_EXE_probelint-webhook");

/// What a test needs: the control plane, and Helm for those that install the chart.
pub struct Env {
    pub cluster: &'static Cluster,
}

impl Env {
    /// The python of the Helm virtualenv (installed from PyPI on first use).
    pub fn python(&self) -> &'static Path {
        probelint_testkit::python::helm_python(env!("CARGO_TARGET_TMPDIR"))
    }
}

/// The environment of a test that installs the chart: the control plane, and Helm from PyPI.
/// These are the cluster suite's tests (tier 2, `#[ignore = "e2e: ..."]`); a missing Go,
/// kubectl or Python fails them with what to install.
pub fn env(test: &str) -> Env {
    let env = cluster_env(test);
    env.python();
    env
}

/// The environment of a test that needs the control plane only (no Helm).
pub fn cluster_env(test: &str) -> Env {
    Env {
        cluster: probelint_cluster::shared(test),
    }
}

/// The serving certificate's files, as the kubelet mounts the Secret cert-manager writes.
fn tls_files(leaf: &Leaf) -> [(&'static str, &str); 2] {
    [("tls.crt", &leaf.cert_pem), ("tls.key", &leaf.key_pem)]
}

/// The real `probelint-webhook` on a loopback port, with a serving certificate for
/// `127.0.0.1` signed by a CA of its own (the chart's `webhook.external.caBundle`).
pub struct Webhook {
    pub name: String,
    pub port: u16,
    pub metrics_port: u16,
    /// The CA the apiserver must trust (`webhook.external.caBundle`).
    pub ca: Ca,
    pub certs: Mutex<SecretDir>,
    policy: PathBuf,
    logs: Arc<Mutex<Vec<Value>>>,
    child: Mutex<Option<Child>>,
    dir: tempfile::TempDir,
}

impl Webhook {
    /// Certificates and ports for a webhook named `name`; [`Release::install`] starts it.
    pub fn prepare(name: &str) -> Webhook {
        let dir = tempfile::Builder::new()
            .prefix(&format!("probelint-e2e-{name}-"))
            .tempdir()
            .expect("a temporary directory");
        let ca = Ca::new(&format!("probelint-e2e {name} webhook CA"));
        let certs = SecretDir::create(
            &dir.path().join("certs"),
            &tls_files(&Self::leaf(&ca, "v1")),
        );
        let [port, metrics_port] = free_ports();
        Webhook {
            name: name.to_owned(),
            port,
            metrics_port,
            ca,
            certs: Mutex::new(certs),
            policy: dir.path().join("policy.yaml"),
            logs: Arc::new(Mutex::new(Vec::new())),
            child: Mutex::new(None),
            dir,
        }
    }

    /// A serving certificate for `127.0.0.1` signed by `ca`.
    pub fn leaf(ca: &Ca, version: &str) -> Leaf {
        ca.server(&format!("probelint-webhook {version}"), &["127.0.0.1"])
    }

    /// `https://127.0.0.1:<port>`, for `webhook.external.url`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Starts the binary with `policy` as its `--policy` file; returns once it listens.
    pub fn start(&self, policy: &str) {
        std::fs::write(&self.policy, policy).expect("policy file");
        let certs = self.certs.lock().expect("certs").dir.clone();
        let mut command = Command::new(BIN);
        command
            .arg(format!("--listen=127.0.0.1:{}", self.port))
            .arg(format!("--metrics-listen=127.0.0.1:{}", self.metrics_port))
            .arg("--tls-cert")
            .arg(certs.join("tls.crt"))
            .arg("--tls-key")
            .arg(certs.join("tls.key"))
            .arg("--policy")
            .arg(&self.policy)
            .args(["--log-format", "json"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: prctl is async-signal-safe. The webhook dies with the test's thread, however
        // the test ends.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let listening = |w: &Webhook| w.logs_matching(|l| l["message"] == "listening").len();
        let before = listening(self);
        let mut child = command.spawn().expect("start probelint-webhook");
        let stdout = child.stdout.take().expect("stdout");
        let sink = self.logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(value) => sink.lock().expect("logs").push(value),
                    Err(_) => eprintln!("probelint-webhook (not JSON): {line}"),
                }
            }
        });
        *self.child.lock().expect("child") = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        // Two `listening` lines: the TLS port and the metrics port.
        while listening(self) < before + 2 {
            assert!(
                Instant::now() < deadline,
                "{}: probelint-webhook did not listen within 20 s; its log: {:#?}",
                self.name,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (a crash, an OOM kill, a node gone): connections are refused.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().expect("child").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<Value> {
        self.logs.lock().expect("logs").clone()
    }

    pub fn logs_matching(&self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.logs
            .lock()
            .expect("logs")
            .iter()
            .filter(|l| pred(l))
            .cloned()
            .collect()
    }

    /// The `review` log lines (one per AdmissionReview answered).
    pub fn reviews(&self) -> Vec<Value> {
        self.logs_matching(|l| l["message"] == "review")
    }

    /// The reviews of objects named `name` in `namespace`.
    pub fn reviews_of(&self, namespace: &str, name: &str) -> Vec<Value> {
        self.logs_matching(|l| {
            l["message"] == "review" && l["namespace"] == namespace && l["name"] == name
        })
    }

    /// Waits until a review of `namespace/name` on `endpoint` is logged, and returns it.
    pub fn wait_review(&self, namespace: &str, name: &str, endpoint: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) = self
                .reviews_of(namespace, name)
                .into_iter()
                .find(|l| l["endpoint"] == endpoint)
            {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "{}: no {endpoint} review of {namespace}/{name} within 30 s; reviews: {:#?}",
                self.name,
                self.reviews()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The reviews of `namespace/name` once there are at least `count` and no more have come
    /// for half a second (log lines reach the test through a pipe, a moment after the answer).
    pub fn settled_reviews_of(&self, namespace: &str, name: &str, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = self.reviews_of(namespace, name);
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.reviews_of(namespace, name);
            if now.len() != seen.len() {
                (seen, since) = (now, Instant::now());
            } else if seen.len() >= count && since.elapsed() >= Duration::from_millis(500) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "{}: {} reviews of {namespace}/{name} within 30 s, expected {count}: {seen:#?}",
                self.name,
                seen.len()
            );
        }
    }

    /// `GET /metrics` on the plain-HTTP port.
    pub fn metrics(&self) -> String {
        let mut stream =
            TcpStream::connect(("127.0.0.1", self.metrics_port)).expect("the metrics port");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .expect("request");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("response");
        text
    }

    /// The value of the metric line `series` (`name{labels}`), 0 when absent.
    pub fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }

    /// Points the webhook at a new serving certificate the way a Secret update does, and
    /// waits for it to reload.
    pub fn rotate_certificate(&self, leaf: &Leaf) {
        let reloaded = |w: &Webhook| {
            w.logs_matching(|l| l["message"] == "reloaded the TLS certificate")
                .len()
        };
        let before = reloaded(self);
        self.certs.lock().expect("certs").rotate(&tls_files(leaf));
        let deadline = Instant::now() + Duration::from_secs(20);
        while reloaded(self) == before {
            assert!(
                Instant::now() < deadline,
                "{}: the certificate swap was not reloaded within 20 s; log: {:#?}",
                self.name,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where the release's webhook configurations send the apiserver.
pub struct Target {
    pub url: String,
    pub ca_pem: String,
}

impl From<&Webhook> for Target {
    fn from(webhook: &Webhook) -> Target {
        Target {
            url: webhook.url(),
            ca_pem: webhook.ca.pem.clone(),
        }
    }
}

/// A release of the chart, installed by real Helm into the test cluster.
pub struct Release<'e> {
    pub env: &'e Env,
    pub name: String,
    /// The release namespace (never sent to the webhook).
    pub namespace: String,
    /// What `helm install` printed: the NOTES.
    pub notes: String,
}

impl<'e> Release<'e> {
    /// `helm install <name>` into a new namespace `<name>-system`, with `webhook.external`
    /// pointed at `webhook`, scoped to the namespaces labelled for it, and `values` on top;
    /// then starts `webhook` with the policy the chart put in its ConfigMap.
    pub fn install(env: &'e Env, name: &str, webhook: &Webhook, values: Value) -> Release<'e> {
        let release = Release::install_to(env, name, Target::from(webhook), values);
        webhook.start(&release.policy());
        release
    }

    /// `helm install` with the webhook configurations calling `target` (a proxy in front of
    /// the webhook, or nothing at all).
    pub fn install_to(env: &'e Env, name: &str, target: Target, values: Value) -> Release<'e> {
        let namespace = format!("{name}-system");
        env.cluster.kubectl_ok(&["create", "namespace", &namespace]);
        // The release namespace is labelled into scope too: only the chart's own exclusion
        // keeps it from the webhook.
        env.cluster.kubectl_ok(&[
            "label",
            "namespace",
            &namespace,
            &format!("{SCOPE_LABEL}={name}"),
        ]);
        let mut release = Release {
            env,
            name: name.to_owned(),
            namespace,
            notes: String::new(),
        };
        let mut all = json!({
            "webhook": {
                "external": {"url": target.url, "caBundle": target.ca_pem},
                "namespaceSelectorExpressions": [
                    {"key": SCOPE_LABEL, "operator": "In", "values": [name]}
                ]
            }
        });
        merge(&mut all, values);
        release.notes = release.helm("install", false, &all)["notes"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        release
    }

    /// `helm upgrade` with `values` (on top of the previous values with `reuse_values`, as
    /// `--reuse-values` does).
    pub fn upgrade(&mut self, values: Value, reuse_values: bool) -> Value {
        let out = self.helm("upgrade", reuse_values, &values);
        self.notes = out["notes"].as_str().unwrap_or("").to_owned();
        out
    }

    /// Values that keep this release pointed at `target` and scoped, plus `values`.
    pub fn values_for(&self, target: Target, values: Value) -> Value {
        let mut all = json!({
            "webhook": {
                "external": {"url": target.url, "caBundle": target.ca_pem},
                "namespaceSelectorExpressions": [
                    {"key": SCOPE_LABEL, "operator": "In", "values": [self.name]}
                ]
            }
        });
        merge(&mut all, values);
        all
    }

    fn helm(&self, action: &str, reuse_values: bool, values: &Value) -> Value {
        let script = probelint_testkit::repo_path("charts/probelint/tests/release.py");
        let mut command = Command::new(self.env.python());
        command
            .arg(&script)
            .arg(action)
            .arg(format!(
                "--kubeconfig={}",
                self.env.cluster.kubeconfig.display()
            ))
            .arg(format!("--namespace={}", self.namespace))
            .arg(format!("--release={}", self.name));
        if reuse_values {
            command.arg("--reuse-values");
        }
        let out = run_with_stdin(&mut command, &values.to_string());
        assert!(
            out.status.success(),
            "helm {action} {} failed ({}):\n{}",
            self.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "release.py printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// The policy the chart stored in its ConfigMap (what the in-cluster webhook is given).
    pub fn policy(&self) -> String {
        let map = self.env.cluster.get_json(&[
            "-n",
            &self.namespace,
            "get",
            "configmap",
            &format!("{}-probelint-policy", self.name),
        ]);
        map["data"]["policy.yaml"]
            .as_str()
            .expect("the policy ConfigMap has policy.yaml")
            .to_owned()
    }

    /// A new namespace in this release's scope.
    pub fn namespace(&self, prefix: &str) -> String {
        let ns = self.env.cluster.namespace(prefix);
        self.scope(&ns);
        ns
    }

    /// Waits until the apiserver calls `webhook` for `namespace` (it learns of new webhook
    /// configurations and namespace labels through informers, a moment after they change): a
    /// GPU Pod named `in-use-probe` is sent with a server-side dry run until both webhooks
    /// have reviewed it.
    pub fn wait_in_use(&self, webhook: &Webhook, namespace: &str) {
        let probe = pod(
            "in-use-probe",
            json!([gpu_container("vllm", "vllm/vllm-openai:v0.6.3", json!({}))]),
        );
        wait_for(
            &format!("the apiserver to call {} for {namespace}", webhook.name),
            Duration::from_secs(30),
            || {
                kubectl_in(
                    self.env.cluster,
                    &["-n", namespace, "apply", "--dry-run=server", "-f", "-"],
                    &probe.to_string(),
                );
                let reviews = webhook.reviews_of(namespace, "in-use-probe");
                let on = |e: &str| {
                    reviews
                        .iter()
                        .any(|r| r["endpoint"].as_str().is_some_and(|x| x.starts_with(e)))
                };
                (on("mutate") && on("validate")).then_some(())
            },
        );
    }

    /// A new namespace in this release's scope, once the apiserver calls `webhook` for it.
    pub fn namespace_in_use(&self, prefix: &str, webhook: &Webhook) -> String {
        let ns = self.namespace(prefix);
        self.wait_in_use(webhook, &ns);
        ns
    }

    /// Puts an existing namespace in this release's scope.
    pub fn scope(&self, namespace: &str) {
        self.env.cluster.kubectl_ok(&[
            "label",
            "namespace",
            namespace,
            "--overwrite",
            &format!("{SCOPE_LABEL}={}", self.name),
        ]);
    }

    /// The webhook configuration of `kind` (`validatingwebhookconfiguration`, ...).
    pub fn configuration(&self, kind: &str) -> Value {
        self.env
            .cluster
            .get_json(&["get", kind, &format!("{}-probelint", self.name)])
    }
}

/// Merges `patch` into `base` (objects key by key, anything else replaced).
pub fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, patch) => *base = patch,
    }
}

/// Runs `command` with `input` on its stdin.
pub fn run_with_stdin(command: &mut Command, input: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", command.get_program()));
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_owned();
    // Written from a thread: a large input could otherwise fill the pipe while the child
    // waits for us to read its output.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("output");
    let _ = writer.join();
    out
}

/// `kubectl ARGS` with `input` on stdin (`-f -`).
pub fn kubectl_in(cluster: &Cluster, args: &[&str], input: &str) -> Output {
    run_with_stdin(cluster.kubectl().args(args), input)
}

/// The `Warning: ` lines kubectl printed, without the prefix.
pub fn warnings(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("Warning: "))
        .map(str::to_owned)
        .collect()
}

/// stdout and stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that kubectl succeeded; returns its stdout.
pub fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        text(out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub use probelint_cluster::wait_for;

/// The `items` of `kubectl get ARGS -o json`.
pub fn items(cluster: &Cluster, args: &[&str]) -> Vec<Value> {
    cluster.get_json(args)["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A Deployment's ReplicaSets (by owner), sorted by name.
pub fn replicasets_of(cluster: &Cluster, namespace: &str, deployment: &str) -> Vec<Value> {
    let mut sets: Vec<Value> = items(cluster, &["-n", namespace, "get", "replicasets"])
        .into_iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o.iter().any(|r| r["name"] == deployment))
        })
        .collect();
    sets.sort_by_key(|rs| rs["metadata"]["name"].as_str().unwrap_or("").to_owned());
    sets
}

/// Plays the kubelet for `pod`: marks it Running and Ready through the status subresource (no
/// kubelet runs in the test cluster, and no webhook is registered for `pods/status`).
pub fn mark_ready(cluster: &Cluster, namespace: &str, pod: &str) {
    cluster.kubectl_ok(&[
        "-n",
        namespace,
        "patch",
        "pod",
        pod,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-01T00:00:00Z"}]}}"#,
    ]);
}

/// A GPU container spec (JSON) that serves on port 8080 (its declared port is the evidence that
/// it serves a model), `extra` merged in.
pub fn gpu_container(name: &str, image: &str, extra: Value) -> Value {
    let mut container = json!({
        "name": name,
        "image": image,
        "ports": [{"name": "http", "containerPort": 8080}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}
    });
    merge(&mut container, extra);
    container
}

/// A Deployment (JSON) of `containers`, `replicas` replicas, labels `app: <name>`.
pub fn deployment(name: &str, replicas: u32, containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers}
            }
        }
    })
}

/// A bare Pod (JSON) of `containers`.
pub fn pod(name: &str, containers: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": containers}
    })
}

/// Probes a serving container on port 8080 passes every error rule with.
pub fn good_probes() -> Value {
    json!({
        "ports": [{"name": "http", "containerPort": 8080}],
        "startupProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "failureThreshold": 60},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
        "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}
    })
}
