//! A node for the test control plane: a real kubelet, at the apiserver's version, running pods
//! through containerd and runc, with pod networking from the CNI bridge plugin. Pods are bound by
//! `nodeName` (there is no scheduler); their images are built here ([`crate::Image`]) and
//! imported into containerd, never pulled.
//!
//! ```no_run
//! probelint_cluster::node::require_node_suite("my_test"); // before the control plane starts
//! let cluster = probelint_cluster::shared("my_test");
//! let node = probelint_cluster::node::start_for("my_test", cluster);
//! ```
//!
//! The node suite (tier 3) changes this machine while it runs, so a node starts only when asked
//! for twice: `PROBELINT_NODE_SUITE=1` (this suite, by name) and `PROBELINT_HOST_IS_DISPOSABLE=1`
//! (this machine is a CI runner or a VM that is thrown away). Without either, [`Node::start`]
//! refuses before it touches anything ([`NodeError::Refused`]) and the test fails saying so.
//!
//! What this machine must allow, checked by [`environment`] before anything is built: root,
//! cgroups (v1 with the cpu, cpuacct, cpuset, memory and pids controllers, or v2), overlayfs,
//! the namespaces a container gets (mount, network, PID, UTS, IPC), bridge and veth links. The
//! kubelet runs with `failCgroupV1: false` and the cgroupfs driver (there is no systemd), under a
//! cgroup of its own (`/probelint-node-<pid>`); containerd uses the overlayfs snapshotter. When
//! one is missing the test fails with the call that failed (the suite was asked for).
//!
//! What a node changes on the machine while it runs, and puts back when it stops (or, after a
//! crash, when the next node starts), each recorded in the run's directory before it changes:
//! the kubelet sets `vm.overcommit_memory=1`, `vm.panic_on_oom=0`, `kernel.panic=10`,
//! `kernel.panic_on_oops=1` and two keyring limits (it has no setting that leaves them), the CNI
//! bridge plugin (`isGateway`) sets `net.ipv4.ip_forward=1`: their values before are restored;
//! a bridge `probelint0` with `10.244.213.1/24` (deleted), one cgroup tree in every hierarchy
//! (removed), mounts under the run's directory (detached), the network namespaces of its pods,
//! links in `/var/log/containers` (removed, and the directory too when the kubelet created it).
//! Everything else is under `<target>/k8s-node/`. One node at a time per target directory (a
//! lock), since the bridge and its subnet are one.

mod binaries;
mod cleanup;

pub use binaries::{NODE_MODULE, NodeBinaries};
pub use cleanup::SYSCTLS;

use crate::process::{self, Component};
use crate::{Cluster, Image};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Set to `1` to run the node suite: the tests that start a real kubelet as root.
pub const NODE_SUITE_VAR: &str = "PROBELINT_NODE_SUITE";

/// Set to `1` to say that this machine may be changed (a CI runner or a VM thrown away after):
/// the node suite's second switch. `CI=true` is not taken for it: self-hosted runners set it too.
pub const DISPOSABLE_VAR: &str = "PROBELINT_HOST_IS_DISPOSABLE";

/// The node's name (its Node object) and the name pods give as `spec.nodeName`.
pub const NODE_NAME: &str = "probelint-node";

/// The pods' subnet on the bridge (the bridge is the gateway, `.1`).
pub const POD_SUBNET: &str = "10.244.213.0/24";
pub(crate) const BRIDGE: &str = "probelint0";

/// The sandbox image: the pod's `pause` process, built from `go/node/pause`.
pub const PAUSE_IMAGE: &str = "probelint.test/pause:1";

/// How long the kubelet may take to register and report Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a node did not start.
#[derive(Debug)]
pub enum NodeError {
    /// This machine cannot run one: which step, which call, which error.
    Unsupported(String),
    /// It should have, and did not: a bug here or in the components (with their logs).
    Failed(String),
    /// Not asked for by both switches ([`NODE_SUITE_VAR`], [`DISPOSABLE_VAR`]): nothing was
    /// changed.
    Refused(String),
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeError::Unsupported(why) => write!(f, "this machine cannot run a kubelet: {why}"),
            NodeError::Failed(error) | NodeError::Refused(error) => f.write_str(error),
        }
    }
}

/// A running node. Dropping it deletes its pods, stops the kubelet and containerd, and undoes
/// what [`Node::start`] changed on the machine.
pub struct Node {
    /// This run's files: containerd's root and state, the kubelet's root, logs, images.
    pub dir: PathBuf,
    pub binaries: NodeBinaries,
    socket: PathBuf,
    kubeconfig: PathBuf,
    cgroup_root: String,
    kubelet: Option<Component>,
    containerd: Option<Component>,
    _lock: File,
}

/// Why a node may not start on this machine now, unless both switches say it may.
pub fn permitted() -> Result<(), String> {
    permitted_by(|var| std::env::var(var).ok())
}

/// [`permitted`], with the environment read through `var`.
fn permitted_by(var: impl Fn(&str) -> Option<String>) -> Result<(), String> {
    let set = |name: &str| var(name).is_some_and(|v| v == "1");
    let command = "PROBELINT_NODE_SUITE=1 PROBELINT_HOST_IS_DISPOSABLE=1 cargo test --locked \
                   -p probelint-kubelet-conformance -- --ignored";
    if !set(NODE_SUITE_VAR) {
        return Err(format!(
            "refusing to start a kubelet: the node suite runs containerd, runc and a kubelet as \
             root and changes this machine while it runs (kernel settings, a bridge, cgroups, \
             mounts); it runs only when asked for by name, {NODE_SUITE_VAR}=1, on a disposable \
             machine: `{command}` (the README's Tests section says what it changes)"
        ));
    }
    if !set(DISPOSABLE_VAR) {
        return Err(format!(
            "refusing to start a kubelet: {NODE_SUITE_VAR}=1, but the node suite changes this \
             machine while it runs and this machine is not said to be disposable; on a CI \
             runner or a VM that is thrown away, set {DISPOSABLE_VAR}=1 as well: `{command}`"
        ));
    }
    Ok(())
}

/// Panics with [`permitted`]'s reason unless the node suite was asked for: called first, so
/// that a refused test starts no control plane either.
pub fn require_node_suite(test: &str) {
    if let Err(why) = permitted() {
        panic!("{test}: {why}");
    }
}

/// The node for `test`, on `cluster`. Panics with the reason when it does not start: refused
/// (a switch missing), unsupported (this machine cannot run a kubelet: the call that failed) or
/// failed. The node suite was asked for, so none of them is a skip.
pub fn start_for(test: &str, cluster: &Cluster) -> Node {
    match Node::start(cluster) {
        Ok(node) => node,
        Err(error) => panic!("{test}: the test node did not start: {error}"),
    }
}

impl Node {
    /// Starts containerd and a kubelet registered with `cluster`, and waits until the Node is
    /// Ready. [`NodeError::Refused`] without both switches, before anything is checked or
    /// changed; [`NodeError::Unsupported`] says which call this machine refused.
    pub fn start(cluster: &Cluster) -> Result<Node, NodeError> {
        permitted().map_err(NodeError::Refused)?;
        environment().map_err(NodeError::Unsupported)?;
        let binaries = NodeBinaries::ensure().map_err(NodeError::Failed)?;
        let root = crate::binaries::target_dir().join("k8s-node");
        let runs = root.join("run");
        std::fs::create_dir_all(&runs)
            .map_err(|e| NodeError::Failed(format!("cannot create {}: {e}", runs.display())))?;
        let lock_path = root.join(".node.lock");
        let lock = File::create(&lock_path)
            .and_then(|f| f.lock().map(|()| f))
            .map_err(|e| NodeError::Failed(format!("cannot lock {}: {e}", lock_path.display())))?;
        cleanup::reap_dead_runs(&runs);

        let started = Instant::now();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = runs.join(format!("{}-{nanos}", std::process::id()));
        let cgroup_root = format!("/probelint-node-{}", std::process::id());
        let failed = |e: String| NodeError::Failed(e);
        std::fs::create_dir_all(&dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
        // Written before anything changes, so a crash later is undone by the next run.
        cleanup::record(&dir, &cgroup_root).map_err(failed)?;
        let mut node = Node {
            socket: dir.join("containerd.sock"),
            kubeconfig: dir.join("kubelet.kubeconfig"),
            dir,
            binaries,
            cgroup_root,
            kubelet: None,
            containerd: None,
            _lock: lock,
        };
        node.create_cgroup_root().map_err(NodeError::Unsupported)?;
        node.start_containerd().map_err(failed)?;
        let pause = pause_image(&node.binaries.pause).map_err(failed)?;
        node.import(&pause).map_err(failed)?;
        node.start_kubelet(cluster).map_err(failed)?;
        eprintln!(
            "probelint-cluster: node {NODE_NAME} Ready in {:.1?} (kubelet {}, containerd {}, runc \
             {}; files in {})",
            started.elapsed(),
            node.binaries.kube_version,
            node.binaries.containerd_version,
            node.binaries.runc_version,
            node.dir.display()
        );
        Ok(node)
    }

    /// Imports `image` into containerd's `k8s.io` namespace (the one the kubelet's CRI uses),
    /// unpacked for the overlayfs snapshotter; pods use it with `imagePullPolicy: Never`.
    pub fn import(&self, image: &Image) -> Result<(), String> {
        let archive = image.archive()?;
        let images = self.dir.join("images");
        std::fs::create_dir_all(&images)
            .map_err(|e| format!("cannot create {}: {e}", images.display()))?;
        let file = images.join(format!(
            "{}.tar",
            image
                .name
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        ));
        std::fs::write(&file, &archive)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let out = self
            .ctr()
            .args(["images", "import", "--snapshotter", "overlayfs"])
            .arg(&file)
            .output()
            .map_err(|e| format!("cannot run ctr: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ctr images import {} failed ({}): {}",
                file.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let _ = std::fs::remove_file(&file);
        Ok(())
    }

    /// The cgroup the kubelet puts its pods under (`/probelint-node-<pid>`).
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    /// `ctr` against this node's containerd, in the kubelet's namespace.
    pub fn ctr(&self) -> Command {
        let mut cmd = Command::new(&self.binaries.ctr);
        cmd.arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io"]);
        cmd
    }

    /// The last lines of `kubelet` or `containerd`'s log, for failure messages.
    pub fn log_tail(&self, component: &str) -> String {
        process::tail(&self.dir.join(format!("{component}.log")), 40)
    }

    /// Advertises `count` of the extended resource `resource` (`nvidia.com/gpu`) in the Node's
    /// status, as the Kubernetes documentation does for resources without a device plugin: the
    /// kubelet admits pods that request it, and no device is attached.
    pub fn advertise(&self, cluster: &Cluster, resource: &str, count: u32) -> Result<(), String> {
        let key = resource.replace('~', "~0").replace('/', "~1");
        let patch =
            format!(r#"[{{"op":"add","path":"/status/capacity/{key}","value":"{count}"}}]"#);
        let out = cluster.kubectl_output(&[
            "patch",
            "node",
            NODE_NAME,
            "--subresource=status",
            "--type=json",
            "-p",
            &patch,
        ]);
        if !out.status.success() {
            return Err(format!(
                "cannot advertise {resource} on {NODE_NAME}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        // The kubelet computes allocatable from capacity on its next status update.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let node = cluster.get_json(&["get", "node", NODE_NAME]);
            if node["status"]["allocatable"][resource].as_str() == Some(&count.to_string()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{NODE_NAME} does not list {resource} as allocatable after 60 s: {}",
                    node["status"]["allocatable"]
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn create_cgroup_root(&self) -> Result<(), String> {
        for hierarchy in cleanup::cgroup_hierarchies() {
            let path = hierarchy.join(self.cgroup_root.trim_start_matches('/'));
            std::fs::create_dir_all(&path)
                .map_err(|e| format!("cgroups: mkdir {} failed: {e}", path.display()))?;
            // A new cpuset cgroup has no CPUs and no memory nodes: nothing could run in it.
            if hierarchy.join("cpuset.cpus").is_file()
                && !hierarchy.join("cgroup.controllers").exists()
            {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let value = std::fs::read_to_string(hierarchy.join(file)).unwrap_or_default();
                    std::fs::write(path.join(file), value.trim()).map_err(|e| {
                        format!("cgroups: write {} failed: {e}", path.join(file).display())
                    })?;
                }
            }
        }
        Ok(())
    }

    fn start_containerd(&mut self) -> Result<(), String> {
        let dir = &self.dir;
        let cni_conf = dir.join("cni");
        std::fs::create_dir_all(&cni_conf)
            .map_err(|e| format!("cannot create {}: {e}", cni_conf.display()))?;
        // One bridge for the node, the pods' addresses from host-local; the bridge is the
        // gateway, so this machine reaches every pod at its IP (the tests do, as a Service's
        // endpoints would be reached).
        let cni = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "probelint-pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": true,
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "dataDir": dir.join("cni-ipam").display().to_string(),
                    },
                },
                {"type": "loopback"},
            ],
        });
        write(&cni_conf.join("10-probelint.conflist"), &cni.to_string())?;
        let config = format!(
            r#"version = 3
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

# NRI listens on a fixed path (/var/run/nri/nri.sock) that no test needs.
[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  # The kubelet gives the pod sandbox an oom_score_adj of -998; lowering it needs
  # CAP_SYS_RESOURCE, which some machines (this project's VMs) do not give even to root: runc
  # then fails "nsexec: failed to update /proc/self/oom_score_adj: Permission denied". Clamped
  # to containerd's own value instead; the pods' own values (BestEffort 1000, Burstable above
  # 0) are unchanged.
  restrict_oom_score_adj = true
  # The pods' network namespaces are bind-mounted under this run's state directory, not the
  # machine's /var/run/netns, so that whatever a stop leaves behind is found and unmounted.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "{runc}"
      Root = "{runc_root}"
      SystemdCgroup = false
"#,
            root = dir.join("containerd").display(),
            state = dir.join("containerd-state").display(),
            socket = self.socket.display(),
            cni_bin = self.binaries.cni_dir.display(),
            cni_conf = cni_conf.display(),
            runc = self.binaries.runc.display(),
            runc_root = dir.join("runc").display(),
        );
        let config_path = dir.join("containerd.toml");
        write(&config_path, &config)?;
        // containerd starts its shim (`containerd-shim-runc-v2`) from PATH.
        let path = format!(
            "{}:{}",
            self.binaries.dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut containerd = Component::spawn_with_env(
            "containerd",
            &self.binaries.containerd,
            dir,
            &["--config", &config_path.display().to_string()],
            &[("PATH", &path)],
        )?;
        let started = Instant::now();
        let ctr = self.binaries.ctr.clone();
        let socket = self.socket.clone();
        process::wait_until(
            started,
            Duration::from_secs(60),
            std::slice::from_mut(&mut containerd),
            "containerd's socket",
            || {
                Command::new(&ctr)
                    .arg("--address")
                    .arg(&socket)
                    .arg("version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            },
        )?;
        self.containerd = Some(containerd);
        Ok(())
    }

    fn start_kubelet(&mut self, cluster: &Cluster) -> Result<(), String> {
        let dir = self.dir.clone();
        // The kubelet's identity as the Node authorizer would know it; the test apiserver runs
        // RBAC only, so the group gets the `system:node` ClusterRole by a binding.
        let client = cluster
            .ca
            .client(&format!("system:node:{NODE_NAME}"), Some("system:nodes"));
        let serving = cluster
            .ca
            .server(NODE_NAME, &["127.0.0.1", "localhost", NODE_NAME]);
        write(&dir.join("kubelet-client.crt"), &client.cert_pem)?;
        write(&dir.join("kubelet-client.key"), &client.key_pem)?;
        write(&dir.join("kubelet.crt"), &serving.cert_pem)?;
        write(&dir.join("kubelet.key"), &serving.key_pem)?;
        write(&dir.join("ca.crt"), &cluster.ca.pem)?;
        write(
            &self.kubeconfig,
            &crate::kubeconfig_text(
                &cluster.server,
                &dir.join("ca.crt"),
                &dir.join("kubelet-client.crt"),
                &dir.join("kubelet-client.key"),
            ),
        )?;
        let binding = cluster.apply(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: probelint-test-nodes
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: 'system:node'}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:nodes'}
",
            &[],
        );
        if !binding.status.success() {
            return Err(format!(
                "cannot bind system:node to the node: {}",
                String::from_utf8_lossy(&binding.stderr)
            ));
        }
        let [port, healthz] = probelint_testkit::net::free_ports();
        let config = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1; Kubernetes 1.36 still runs on them when told to.
failCgroupV1: false
# No systemd: the kubelet and runc manage cgroups through the filesystem.
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
containerRuntimeEndpoint: unix://{socket}
address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
tlsCertFile: {dir}/kubelet.crt
tlsPrivateKeyFile: {dir}/kubelet.key
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {dir}/ca.crt}}
authorization: {{mode: AlwaysAllow}}
failSwapOn: false
# The pods need no DNS, and this machine's resolv.conf is not theirs.
resolvConf: ''
podLogsDir: {dir}/pod-logs
# A shared development disk is often fuller than a node's: the default thresholds (imagefs
# 15 % free) would evict the tests' pods for disk pressure, and image GC would delete their
# images, which no registry can give back. Absolute sizes: 1 % of a large shared disk is
# gigabytes the tests do not need.
evictionHard:
  memory.available: 50Mi
  nodefs.available: 200Mi
  nodefs.inodesFree: 1%
  imagefs.available: 200Mi
  imagefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
",
            cgroup_root = self.cgroup_root,
            socket = self.socket.display(),
            dir = dir.display(),
        );
        let config_path = dir.join("kubelet.yaml");
        write(&config_path, &config)?;
        let kubelet = Component::spawn(
            "kubelet",
            &self.binaries.kubelet,
            &dir,
            &[
                &format!("--config={}", config_path.display()),
                &format!("--kubeconfig={}", self.kubeconfig.display()),
                &format!("--root-dir={}", dir.join("kubelet").display()),
                &format!("--cert-dir={}", dir.join("kubelet-certs").display()),
                &format!("--hostname-override={NODE_NAME}"),
                "--v=2",
            ],
        )?;
        self.kubelet = Some(kubelet);
        let started = Instant::now();
        let deadline = started + READY_TIMEOUT;
        loop {
            if let Some(kubelet) = self.kubelet.as_mut() {
                kubelet.check_running()?;
            }
            if let Some(containerd) = self.containerd.as_mut() {
                containerd.check_running()?;
            }
            let out = cluster.kubectl_output(&["get", "node", NODE_NAME, "-o", "json"]);
            if out.status.success() {
                let node: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or_default();
                let ready = node["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "Ready");
                if ready.is_some_and(|c| c["status"] == "True") {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "node {NODE_NAME} registered but not Ready within {READY_TIMEOUT:?}: {}\n\
                         --- kubelet log:\n{}\n--- containerd log:\n{}",
                        ready.cloned().unwrap_or_default(),
                        self.log_tail("kubelet"),
                        self.log_tail("containerd")
                    ));
                }
            } else if Instant::now() > deadline {
                return Err(format!(
                    "the kubelet did not register node {NODE_NAME} within {READY_TIMEOUT:?}\n\
                     --- kubelet log:\n{}",
                    self.log_tail("kubelet")
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Pods first, through the kubelet, so that containerd tears down their sandboxes'
        // networks and namespaces; then the processes; then what is left on the machine.
        if let Some(kubelet) = self.kubelet.as_mut()
            && kubelet.check_running().is_ok()
        {
            let kubeconfig = format!("--kubeconfig={}", self.kubeconfig.display());
            let _ = Command::new("kubectl")
                .arg(&kubeconfig)
                .args(["delete", "pods", "--all-namespaces", "--field-selector"])
                .arg(format!("spec.nodeName={NODE_NAME}"))
                .args(["--grace-period=0", "--force", "--wait=false"])
                .output();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                let tasks = self.ctr().args(["tasks", "ls", "-q"]).output();
                if tasks.is_ok_and(|o| o.status.success() && o.stdout.trim_ascii().is_empty()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        drop(self.kubelet.take());
        drop(self.containerd.take());
        // The logs outlive the run (its directory goes): `<target>/k8s-node/last-run/`.
        if let Some(root) = self.dir.parent().and_then(Path::parent) {
            let keep = root.join("last-run");
            let _ = std::fs::remove_dir_all(&keep);
            if std::fs::create_dir_all(&keep).is_ok() {
                for name in [
                    "kubelet.log",
                    "containerd.log",
                    "kubelet.yaml",
                    "containerd.toml",
                ] {
                    let _ = std::fs::copy(self.dir.join(name), keep.join(name));
                }
            }
        }
        cleanup::undo(&self.dir);
    }
}

/// Checks what a node needs from this machine, without building anything: `Err` names the
/// first thing missing, with the call that failed and its error.
pub fn environment() -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("a kubelet with containerd needs Linux".to_owned());
    }
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("containerd and runc need root (geteuid() != 0)".to_owned());
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems")
        .map_err(|e| format!("read /proc/filesystems: {e}"))?;
    if !filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"))
    {
        return Err(
            "the kernel has no overlay filesystem (/proc/filesystems): containerd's \
                    overlayfs snapshotter cannot mount image layers"
                .to_owned(),
        );
    }
    cleanup::check_cgroups()?;
    cleanup::check_namespaces()?;
    // runc is built with cgo and libseccomp: the kubelet gives every pod sandbox the
    // RuntimeDefault seccomp profile, which a runc without seccomp refuses.
    let seccomp = Command::new("pkg-config")
        .args(["--exists", "libseccomp"])
        .status();
    if !seccomp.is_ok_and(|s| s.success()) {
        return Err(
            "libseccomp's headers are not installed (`pkg-config --exists libseccomp` fails): \
             runc is built with seccomp, which every pod sandbox uses; on Debian or Ubuntu \
             `apt-get install libseccomp-dev pkg-config gcc`"
                .to_owned(),
        );
    }
    if Command::new("gcc").arg("--version").output().is_err() {
        return Err("gcc is not installed: runc is built with cgo".to_owned());
    }
    Ok(())
}

/// The sandbox image: one static `pause` executable, run as the pod's first process.
fn pause_image(pause: &Path) -> Result<Image, String> {
    let mut image = Image::new(PAUSE_IMAGE);
    image.copy(pause, "/pause")?.entrypoint(&["/pause"]);
    Ok(image)
}

fn write(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<(), String> {
        permitted_by(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn a_node_starts_only_when_asked_by_name_on_a_disposable_machine() {
        let refused = with(&[]).unwrap_err();
        assert!(
            refused.contains("PROBELINT_NODE_SUITE=1") && refused.contains("changes this machine"),
            "{refused}"
        );
        // CI=true is not enough: a self-hosted runner sets it too.
        let on_ci = with(&[("PROBELINT_NODE_SUITE", "1"), ("CI", "true")]).unwrap_err();
        assert!(on_ci.contains("PROBELINT_HOST_IS_DISPOSABLE=1"), "{on_ci}");
        assert!(with(&[("PROBELINT_HOST_IS_DISPOSABLE", "1")]).is_err());
        assert!(
            with(&[
                ("PROBELINT_NODE_SUITE", "true"),
                ("PROBELINT_HOST_IS_DISPOSABLE", "1")
            ])
            .is_err(),
            "only `1` switches it on"
        );
        assert_eq!(
            with(&[
                ("PROBELINT_NODE_SUITE", "1"),
                ("PROBELINT_HOST_IS_DISPOSABLE", "1")
            ]),
            Ok(())
        );
    }
}
