//! The node's binaries: the kubelet (from `go/kube`, so at the apiserver's version), and
//! containerd, its runc shim, `ctr`, runc, the CNI plugins and the sandbox's pause process (from
//! `go/node`), built once per machine and version into `<target>/k8s/node-<versions>/`.

use crate::binaries::{
    KUBE_MODULE, build_lock, go_build_with, required_version, target_dir, version_ldflags,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The Go module that pins containerd, runc and the CNI plugins (and holds `pause`).
pub const NODE_MODULE: &str = "go/node";

/// Revision of the node's build recipe, part of the cache key.
const NODE_RECIPE: &str = "n2";

/// Paths and versions of the node's binaries.
pub struct NodeBinaries {
    /// The directory that holds them all (containerd finds its shim and runc on `PATH` there).
    pub dir: PathBuf,
    pub kubelet: PathBuf,
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    pub runc: PathBuf,
    pub pause: PathBuf,
    /// `bridge`, `host-local` and `loopback`.
    pub cni_dir: PathBuf,
    pub kube_version: String,
    pub containerd_version: String,
    pub runc_version: String,
}

impl NodeBinaries {
    /// The binaries for the pinned versions, built first when this machine has not built them
    /// (about 2 minutes cold on 2 cores with the Kubernetes build cache warm from the control
    /// plane's build; the duration is printed).
    pub fn ensure() -> Result<NodeBinaries, String> {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"));
        let kube_version = required_version(&source.join(KUBE_MODULE), "k8s.io/kubernetes")?;
        let node_module = source.join(NODE_MODULE);
        let containerd_version =
            required_version(&node_module, "github.com/containerd/containerd/v2")?;
        let runc_version = required_version(&node_module, "github.com/opencontainers/runc")?;
        let cni_version = required_version(&node_module, "github.com/containernetworking/plugins")?;
        let cache = target_dir().join("k8s");
        let dir = cache.join(format!(
            "node-kube-{kube_version}-containerd-{containerd_version}-runc-{runc_version}-cni-\
             {cni_version}-{NODE_RECIPE}"
        ));
        let binaries = NodeBinaries {
            kubelet: dir.join("kubelet"),
            containerd: dir.join("containerd"),
            ctr: dir.join("ctr"),
            runc: dir.join("runc"),
            pause: dir.join("pause"),
            cni_dir: dir.join("cni"),
            dir: dir.clone(),
            kube_version: kube_version.clone(),
            containerd_version: containerd_version.clone(),
            runc_version: runc_version.clone(),
        };
        if binaries.all_present() {
            return Ok(binaries);
        }
        let _lock = build_lock(&cache, ".node-build.lock")?;
        if binaries.all_present() {
            return Ok(binaries);
        }
        crate::require_tool("go", &["version"])?;
        crate::require_tool("gcc", &["--version"]).map_err(|e| {
            format!("{e} (runc is built with cgo: its namespace setup is C that runs before Go)")
        })?;
        let started = Instant::now();
        eprintln!(
            "probelint-cluster: building the kubelet {kube_version}, containerd \
             {containerd_version}, runc {runc_version} and the CNI plugins {cni_version} with Go \
             (once per machine; a few minutes cold)…"
        );
        let staging = cache.join(format!(".building-node-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(staging.join("cni"))
            .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
        let out = |sub: &str| format!("{}/{sub}", staging.display());
        go_build_with(
            &source.join(KUBE_MODULE),
            &out(""),
            &version_ldflags(&kube_version),
            &["k8s.io/kubernetes/cmd/kubelet"],
            false,
            "",
        )?;
        // containerd reports the version it is stamped with to the kubelet (and `kubectl get
        // node -o wide` shows it): unstamped it says `2.x+unknown`.
        let stamp =
            format!(" -X github.com/containerd/containerd/v2/version.Version={containerd_version}");
        go_build_with(
            &node_module,
            &out(""),
            &stamp,
            &[
                "github.com/containerd/containerd/v2/cmd/containerd",
                "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
                "github.com/containerd/containerd/v2/cmd/ctr",
                "./pause",
            ],
            false,
            "",
        )?;
        go_build_with(
            &node_module,
            &out("cni/"),
            "",
            &[
                "github.com/containernetworking/plugins/plugins/main/bridge",
                "github.com/containernetworking/plugins/plugins/main/loopback",
                "github.com/containernetworking/plugins/plugins/ipam/host-local",
            ],
            false,
            "",
        )?;
        // With seccomp: the kubelet gives every pod sandbox the RuntimeDefault profile, and a
        // runc without it refuses ("seccomp: config provided but seccomp not supported").
        go_build_with(
            &node_module,
            &out("runc"),
            "",
            &["github.com/opencontainers/runc"],
            true,
            "seccomp",
        )?;
        crate::binaries::install_staged(&staging, &dir)?;
        eprintln!(
            "probelint-cluster: node binaries built in {:.0?} (cold build), cached in {}",
            started.elapsed(),
            dir.display()
        );
        Ok(binaries)
    }

    fn all_present(&self) -> bool {
        [
            &self.kubelet,
            &self.containerd,
            &self.dir.join("containerd-shim-runc-v2"),
            &self.ctr,
            &self.runc,
            &self.pause,
            &self.cni_dir.join("bridge"),
            &self.cni_dir.join("loopback"),
            &self.cni_dir.join("host-local"),
        ]
        .iter()
        .all(|p| p.is_file())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_module_pins_containerd_runc_and_the_cni_plugins() {
        let module = Path::new(env!("CARGO_MANIFEST_DIR")).join(NODE_MODULE);
        for (path, major) in [
            ("github.com/containerd/containerd/v2", "v2."),
            ("github.com/opencontainers/runc", "v1."),
            ("github.com/containernetworking/plugins", "v1."),
        ] {
            let version = required_version(&module, path).unwrap();
            assert!(version.starts_with(major), "{path} {version}");
        }
        // The kubelet is built from the same module as the apiserver, so at its version.
        let tools = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(KUBE_MODULE)
                .join("tools.go"),
        )
        .unwrap();
        assert!(
            tools.contains("\"k8s.io/kubernetes/cmd/kubelet\""),
            "{tools}"
        );
    }
}
