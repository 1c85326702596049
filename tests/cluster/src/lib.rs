//! A real Kubernetes control plane for probelint's tests: `etcd`, `kube-apiserver` and
//! `kube-controller-manager`, built from their Go modules (pinned in `tests/cluster/go/`) and
//! started on loopback, the way controller-runtime's envtest does, plus the controller manager
//! so that Deployments create ReplicaSets and ReplicaSets create Pods. There is no scheduler and,
//! unless a test starts a [`Node`] (a real kubelet with containerd and runc, [`node`]), no
//! kubelet: pods stay `Pending`, but every one of them goes through admission.
//!
//! ```no_run
//! let cluster = probelint_cluster::shared("my_test");
//! let ns = cluster.namespace("my-test");
//! cluster.kubectl().args(["-n", &ns, "get", "pods"]).status().unwrap();
//! ```
//!
//! One control plane per test binary, started by the first test that asks for it
//! ([`shared`]); tests isolate themselves with a namespace each ([`Cluster::namespace`]). The
//! processes die with the test binary, however it ends (`PR_SET_PDEATHSIG`), so no run leaves
//! orphans behind, and each run's files (etcd data, certificates, logs) live under
//! `<target>/k8s-run/`, where the next run removes those of dead runs.
//!
//! Needs Go (the binaries are built once per machine and version, into `<target>/k8s/`, and
//! the cold build's duration is printed) and `kubectl`. The tests that use it are the cluster
//! suite (tier 2): each is `#[ignore = "e2e: ..."]`, so `cargo test --workspace` never starts a
//! control plane, and the cluster suite's command (the README's Tests section, `-- --ignored`)
//! runs them; there a missing tool fails the test with what to install.

mod binaries;
mod image;
pub mod node;
mod pki;
mod process;

use process::Component;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use binaries::{
    ACTIONLINT_MODULE, Binaries, ETCD_MODULE, HELM_MODULE, KUBE_MODULE, PROMTOOL_MODULE,
    actionlint, build_lock, go_build_with, helm, install_staged, kube_scheduler,
    prometheus_release, promtool, required_version, target_dir,
};
pub use image::{Image, multi_platform_archive};
pub use node::{Node, NodeError};
pub use pki::{Ca, Leaf};

/// How long the control plane may take to come up (a cold machine, two busy cores).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// A running control plane.
pub struct Cluster {
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// A kubeconfig for `system:masters` (the admin), with the cluster's CA.
    pub kubeconfig: PathBuf,
    /// The cluster CA (it signs the apiserver's serving certificate and the client certificates).
    pub ca: Ca,
    /// Where this run's files are: certificates, etcd data, each component's log.
    pub dir: PathBuf,
    /// The Kubernetes version of the components.
    pub version: String,
    components: Mutex<Vec<Component>>,
    namespaces: AtomicU32,
}

/// What a control plane runs beyond etcd, the apiserver and the controller manager's default
/// controllers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// What an in-cluster webhook needs with no kube-proxy in front of it: the apiserver calls a
    /// webhook Service at one of its ready endpoints (`--enable-aggregator-routing=true`: in
    /// Kubernetes 1.36 the webhook service resolver then reads the Service's EndpointSlices,
    /// `kube-aggregator/pkg/apiserver/resolvers.go`, rather than dialling its ClusterIP, which
    /// only kube-proxy would route), and the controller manager writes those EndpointSlices.
    pub service_endpoints: bool,
    /// Runs kube-scheduler ([`kube_scheduler`]), so that pods whose manifests name no node (a
    /// chart's Deployment) are bound to the test node as in a real cluster.
    pub scheduler: bool,
}

/// The control plane of this test binary, started on first use. Panics with the reason (and,
/// for a missing tool, what to install) when it cannot start: a test that asked for a cluster
/// never passes without one.
pub fn shared(test: &str) -> &'static Cluster {
    shared_with(test, Options::default())
}

/// [`shared`], started with `options`. One control plane per test binary: asking for it with
/// other options than it was started with panics.
pub fn shared_with(test: &str, options: Options) -> &'static Cluster {
    static CLUSTER: OnceLock<(Options, Result<Cluster, String>)> = OnceLock::new();
    let (started_with, cluster) =
        CLUSTER.get_or_init(|| (options, start_in_keeper_thread(options)));
    assert_eq!(
        *started_with, options,
        "{test}: this test binary's control plane was started with other options"
    );
    match cluster {
        Ok(cluster) => cluster,
        Err(error) => panic!("{test}: the test control plane could not start: {error}"),
    }
}

/// Starts the control plane from a thread that lives as long as the test binary:
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked a child ends, and each test runs on a
/// thread of its own that ends with the test.
fn start_in_keeper_thread(options: Options) -> Result<Cluster, String> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("probelint-cluster".into())
        .spawn(move || {
            let _ = send.send(Cluster::start(options));
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("cannot start the keeper thread: {e}"))?;
    receive
        .recv()
        .map_err(|_| "the keeper thread ended without an answer".to_owned())?
}

impl Cluster {
    fn start(options: Options) -> Result<Cluster, String> {
        require_tool("kubectl", &["version", "--client"])?;
        let binaries = Binaries::ensure()?;
        let scheduler = if options.scheduler {
            Some(kube_scheduler()?)
        } else {
            None
        };
        let started = Instant::now();
        let dir = process::run_dir()?;
        let ca = Ca::new("probelint-test-cluster-ca");
        let serving = ca.server(
            "kube-apiserver",
            &[
                "127.0.0.1",
                "localhost",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ],
        );
        let admin = ca.client("probelint-test-admin", Some("system:masters"));
        let service_accounts = pki::signing_key();
        let file = |name: &str, contents: &str| -> Result<PathBuf, String> {
            let path = dir.join(name);
            std::fs::write(&path, contents)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(path)
        };
        let ca_file = file("ca.crt", &ca.pem)?;
        let serving_cert = file("apiserver.crt", &serving.cert_pem)?;
        let serving_key = file("apiserver.key", &serving.key_pem)?;
        let admin_cert = file("admin.crt", &admin.cert_pem)?;
        let admin_key = file("admin.key", &admin.key_pem)?;
        let sa_key = file("service-accounts.key", &service_accounts.key_pem)?;
        let sa_pub = file("service-accounts.pub", &service_accounts.public_pem)?;

        let [etcd_client, etcd_peer, apiserver_port] = probelint_testkit::net::free_ports();
        let mut components = Vec::new();
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        components.push(Component::spawn(
            "etcd",
            &binaries.etcd,
            &dir,
            &[
                "--name=default",
                &format!("--data-dir={}", dir.join("etcd").display()),
                &format!("--listen-client-urls={etcd_url}"),
                &format!("--advertise-client-urls={etcd_url}"),
                &format!("--listen-peer-urls={peer_url}"),
                &format!("--initial-advertise-peer-urls={peer_url}"),
                &format!("--initial-cluster=default={peer_url}"),
                // The tests' data is thrown away: fsync only slows every write.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )?);
        process::wait_until(
            started,
            START_TIMEOUT,
            &mut components,
            "etcd /health",
            || process::http_get_ok(etcd_client, "/health"),
        )?;

        let server = format!("https://127.0.0.1:{apiserver_port}");
        components.push(Component::spawn(
            "kube-apiserver",
            &binaries.apiserver,
            &dir,
            &[
                &format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                &format!("--secure-port={apiserver_port}"),
                &format!("--tls-cert-file={}", serving_cert.display()),
                &format!("--tls-private-key-file={}", serving_key.display()),
                &format!("--client-ca-file={}", ca_file.display()),
                &format!("--service-account-key-file={}", sa_pub.display()),
                &format!("--service-account-signing-key-file={}", sa_key.display()),
                "--service-account-issuer=https://kubernetes.default.svc",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                // The loopback address cannot be an Endpoints address; nothing in the tests
                // reaches the apiserver through the `kubernetes` Service.
                "--endpoint-reconciler-type=none",
                // As clusters run (kubeadm, GKE, EKS): privileged containers allowed, so the
                // real-world manifests of device plugins and model servers that ask for it are
                // judged by admission, not refused by a flag no cluster sets.
                "--allow-privileged=true",
                &format!("--cert-dir={}", dir.join("apiserver-certs").display()),
                if options.service_endpoints {
                    "--enable-aggregator-routing=true"
                } else {
                    "--enable-aggregator-routing=false"
                },
            ],
        )?);
        let kubeconfig = file(
            "kubeconfig",
            &kubeconfig_text(&server, &ca_file, &admin_cert, &admin_key),
        )?;
        let kubectl = |args: &[&str]| {
            Command::new("kubectl")
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .args(args)
                .output()
        };
        process::wait_until(
            started,
            START_TIMEOUT,
            &mut components,
            "kube-apiserver /readyz",
            || kubectl(&["get", "--raw", "/readyz"]).is_ok_and(|o| o.status.success()),
        )?;

        let mut controllers = "deployment-controller,replicaset-controller,job-controller,\
             cronjob-controller,namespace-controller,garbage-collector-controller,\
             serviceaccount-controller,serviceaccount-token-controller,\
             root-ca-certificate-publisher-controller,\
             validatingadmissionpolicy-status-controller"
            .to_owned();
        if options.service_endpoints {
            controllers.push_str(",endpointslice-controller");
        }
        if options.scheduler {
            // A kubelet registers its Node tainted `node.kubernetes.io/not-ready:NoSchedule`;
            // this controller lifts the taint once the Node is Ready, as in any cluster. (Pods
            // bound by `nodeName` never meet the scheduler's taint check.)
            controllers.push_str(",node-lifecycle-controller");
        }
        components.push(Component::spawn(
            "kube-controller-manager",
            &binaries.controller_manager,
            &dir,
            &[
                &format!("--kubeconfig={}", kubeconfig.display()),
                // What turns a Deployment into ReplicaSets and Pods, a CronJob into Jobs into
                // Pods, cleans up namespaces, gives each namespace its `default`
                // ServiceAccount (without which the apiserver refuses every Pod) and its
                // `kube-root-ca.crt` ConfigMap (which every real namespace has), and writes
                // each ValidatingAdmissionPolicy's type checking into its status (with
                // `Options::service_endpoints`, also the Services' EndpointSlices).
                &format!("--controllers={controllers}"),
                "--leader-elect=false",
                // Each controller acts under its own service account, as kubeadm, GKE, EKS and
                // AKS run it: admission then sees `system:serviceaccount:kube-system:
                // replicaset-controller` create a Deployment's Pods, not the admin.
                "--use-service-account-credentials=true",
                "--secure-port=0",
                &format!("--service-account-private-key-file={}", sa_key.display()),
                &format!("--root-ca-file={}", ca_file.display()),
            ],
        )?);
        process::wait_until(
            started,
            START_TIMEOUT,
            &mut components,
            "the default ServiceAccount (kube-controller-manager running)",
            || {
                kubectl(&["-n", "default", "get", "serviceaccount", "default"])
                    .is_ok_and(|o| o.status.success())
            },
        )?;
        if let Some(scheduler) = scheduler {
            // Under its own identity, which the apiserver's bootstrap RBAC binds to the
            // system:kube-scheduler ClusterRole, as kubeadm runs it.
            let identity = ca.client("system:kube-scheduler", None);
            let cert = file("scheduler.crt", &identity.cert_pem)?;
            let key = file("scheduler.key", &identity.key_pem)?;
            let config = file(
                "scheduler.kubeconfig",
                &kubeconfig_text(&server, &ca_file, &cert, &key),
            )?;
            components.push(Component::spawn(
                "kube-scheduler",
                &scheduler,
                &dir,
                &[
                    &format!("--kubeconfig={}", config.display()),
                    "--leader-elect=false",
                    "--secure-port=0",
                ],
            )?);
        }
        eprintln!(
            "probelint-cluster: Kubernetes {} control plane up at {server} in {:.1?} (files in {})",
            binaries.kube_version,
            started.elapsed(),
            dir.display()
        );
        Ok(Cluster {
            server,
            kubeconfig,
            ca,
            dir,
            version: binaries.kube_version,
            components: Mutex::new(components),
            namespaces: AtomicU32::new(0),
        })
    }

    /// `kubectl` pointed at this cluster as its admin.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        cmd
    }

    /// Runs `kubectl ARGS` and returns its output, whatever its exit status.
    pub fn kubectl_output(&self, args: &[&str]) -> Output {
        self.kubectl()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"))
    }

    /// Runs `kubectl ARGS`, panicking with its output unless it succeeds; returns its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl_output(args);
        assert!(
            out.status.success(),
            "kubectl {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl ARGS -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl_ok(&all);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {text}"))
    }

    /// Applies `yaml` (from stdin) with extra `args`; returns the output, whatever its status.
    pub fn apply(&self, yaml: &str, args: &[&str]) -> Output {
        use std::io::Write as _;
        let mut child = self
            .kubectl()
            .args(["apply", "-f", "-"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"));
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(yaml.as_bytes())
            .expect("write to kubectl");
        child.wait_with_output().expect("kubectl output")
    }

    /// A new namespace for one test, `<prefix>-<n>`, created and with its `default`
    /// ServiceAccount in place (the apiserver refuses pods until it is).
    pub fn namespace(&self, prefix: &str) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::SeqCst);
        let name = format!("{prefix}-{n}");
        self.kubectl_ok(&["create", "namespace", &name]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self
            .kubectl_output(&["-n", &name, "get", "serviceaccount", "default"])
            .status
            .success()
        {
            assert!(
                Instant::now() < deadline,
                "namespace {name} got no default ServiceAccount within 30 s; \
                 kube-controller-manager log: {}",
                self.log_tail("kube-controller-manager")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        name
    }

    /// The last lines of a component's log, for failure messages.
    pub fn log_tail(&self, component: &str) -> String {
        process::tail(&self.dir.join(format!("{component}.log")), 40)
    }

    /// Whether every component is still running (a crash is reported by the tests' own
    /// messages; this lets a test assert the control plane survived what it did).
    pub fn all_running(&self) -> Result<(), String> {
        let mut components = self.components.lock().unwrap_or_else(|e| e.into_inner());
        for component in components.iter_mut() {
            component.check_running()?;
        }
        Ok(())
    }
}

fn kubeconfig_text(server: &str, ca: &Path, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: probelint-test\n  cluster:\n    \
         server: {server}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    \
         client-certificate: {}\n    client-key: {}\ncontexts:\n- name: probelint-test\n  \
         context:\n    cluster: probelint-test\n    user: admin\ncurrent-context: probelint-test\n",
        ca.display(),
        cert.display(),
        key.display()
    )
}

/// Fails with what to install when `tool` cannot run.
/// Runs `tool args` to check that it is installed; the error says what to install.
///
/// # Errors
///
/// The tool is missing or fails.
pub fn require_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(tool).args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`{tool} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!(
            "`{tool}` is needed by this tier-2 suite and cannot be run ({e}): install {}",
            match tool {
                "go" =>
                    "Go 1.26 or later (https://go.dev/dl/; the build also needs the Go module \
                         proxy)",
                "kubectl" => "kubectl (https://kubernetes.io/docs/tasks/tools/)",
                other => other,
            }
        )),
    }
}

/// Polls `done` every 200 ms until it returns `Some`, or panics after `timeout` with `what`:
/// what the tests wait on (controllers, informers) happens asynchronously in the cluster.
pub fn wait_for<T>(what: &str, timeout: Duration, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
