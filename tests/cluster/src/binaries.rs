//! The control plane's binaries: built with `go build` from the modules pinned in
//! `tests/cluster/go/`, once per machine and version, into `<target>/k8s/<versions>/`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The Go module that pins `k8s.io/kubernetes` and its staging modules.
pub const KUBE_MODULE: &str = "go/kube";
/// The Go module that pins etcd.
pub const ETCD_MODULE: &str = "go/etcd";

/// Paths of the built binaries.
pub struct Binaries {
    pub apiserver: PathBuf,
    pub controller_manager: PathBuf,
    pub etcd: PathBuf,
    /// `v1.36.3`, from `go/kube/go.mod`.
    pub kube_version: String,
}

impl Binaries {
    /// The binaries for the pinned versions, built first when this machine has not built them.
    pub fn ensure() -> Result<Binaries, String> {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"));
        let kube_version = required_version(&source.join(KUBE_MODULE), "k8s.io/kubernetes")?;
        let etcd_version =
            required_version(&source.join(ETCD_MODULE), "go.etcd.io/etcd/server/v3")?;
        let cache = target_dir().join("k8s");
        // `BUILD_RECIPE` is part of the key: a change to how the binaries are built (flags,
        // stamped version) must not reuse binaries an older recipe left behind.
        let dir = cache.join(format!(
            "kube-{kube_version}-etcd-{etcd_version}-{BUILD_RECIPE}"
        ));
        let binaries = Binaries {
            apiserver: dir.join("kube-apiserver"),
            controller_manager: dir.join("kube-controller-manager"),
            etcd: dir.join("etcd"),
            kube_version: kube_version.clone(),
        };
        if binaries.all_present() {
            return Ok(binaries);
        }
        let _lock = build_lock(&cache, ".build.lock")?;
        if binaries.all_present() {
            return Ok(binaries);
        }
        super::require_tool("go", &["version"])?;
        let started = Instant::now();
        eprintln!(
            "probelint-cluster: building kube-apiserver and kube-controller-manager {kube_version} \
             and etcd {etcd_version} with Go (once per machine; a few minutes cold)…"
        );
        let staging = cache.join(format!(".building-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
        // A directory output (trailing `/`) names each binary after its package.
        go_build(
            &source.join(KUBE_MODULE),
            &format!("{}/", staging.display()),
            &version_ldflags(&kube_version),
            &[
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
            ],
        )?;
        go_build(
            &source.join(ETCD_MODULE),
            &staging.join("etcd").display().to_string(),
            "",
            &["go.etcd.io/etcd/server/v3"],
        )?;
        install_staged(&staging, &dir)?;
        eprintln!(
            "probelint-cluster: built in {:.0?} (cold build), cached in {}",
            started.elapsed(),
            dir.display()
        );
        Ok(binaries)
    }

    fn all_present(&self) -> bool {
        [&self.apiserver, &self.controller_manager, &self.etcd]
            .iter()
            .all(|p| p.is_file())
    }
}

/// The Go module that pins actionlint, the GitHub Actions workflow checker.
pub const ACTIONLINT_MODULE: &str = "go/actionlint";

/// actionlint at the version `go/actionlint/go.mod` pins, built first when this machine has not
/// built it, into `<target>/tools/actionlint-<version>/`.
pub fn actionlint() -> Result<PathBuf, String> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join(ACTIONLINT_MODULE);
    let version = required_version(&module, "github.com/rhysd/actionlint")?;
    let cache = target_dir().join("tools");
    let binary = cache
        .join(format!("actionlint-{version}"))
        .join("actionlint");
    if binary.is_file() {
        return Ok(binary);
    }
    let _lock = build_lock(&cache, ".actionlint.lock")?;
    if binary.is_file() {
        return Ok(binary);
    }
    super::require_tool("go", &["version"])?;
    eprintln!("probelint-cluster: building actionlint {version} with Go (once per machine)…");
    let staging = cache.join(format!(".actionlint-{}", std::process::id()));
    go_build(
        &module,
        &staging.display().to_string(),
        "",
        &["github.com/rhysd/actionlint/cmd/actionlint"],
    )?;
    let dir = binary.parent().unwrap_or(&cache);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    install_staged(&staging, &binary)?;
    Ok(binary)
}

/// The Go module that pins Prometheus, for `promtool`.
pub const PROMTOOL_MODULE: &str = "go/promtool";

/// promtool (Prometheus' rule checker and rule unit-test runner) at the version
/// `go/promtool/go.mod` pins, built first when this machine has not built it, into
/// `<target>/tools/promtool-<version>-nosd/`. The chart's alert tests run it on the rendered
/// PrometheusRule. Prometheus' module is tagged `v0.3MM.P` for Prometheus `3.MM.P`.
pub fn promtool() -> Result<PathBuf, String> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join(PROMTOOL_MODULE);
    let version = required_version(&module, "github.com/prometheus/prometheus")?;
    let cache = target_dir().join("tools");
    let binary = cache
        .join(format!("promtool-{version}-nosd"))
        .join("promtool");
    if binary.is_file() {
        return Ok(binary);
    }
    let _lock = build_lock(&cache, ".promtool.lock")?;
    if binary.is_file() {
        return Ok(binary);
    }
    super::require_tool("go", &["version"])?;
    let started = Instant::now();
    eprintln!(
        "probelint-cluster: building promtool (Prometheus {version}) with Go (once per machine; \
         a few minutes cold)…"
    );
    let staging = cache.join(format!(".promtool-{}", std::process::id()));
    // Stamped as Prometheus' own build does (promu), so `promtool --version` names the release;
    // `remove_all_sd` (Prometheus' build tag, plugins/) leaves out the service discoveries and
    // their cloud SDKs, which checking and testing rules never use.
    go_build_with(
        &module,
        &staging.display().to_string(),
        &format!(
            " -X github.com/prometheus/common/version.Version={}",
            prometheus_release(&version)
        ),
        &["github.com/prometheus/prometheus/cmd/promtool"],
        false,
        "remove_all_sd",
    )?;
    let dir = binary.parent().unwrap_or(&cache);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    install_staged(&staging, &binary)?;
    eprintln!(
        "probelint-cluster: built promtool in {:.0?}, cached in {}",
        started.elapsed(),
        dir.display()
    );
    Ok(binary)
}

/// kube-scheduler at the apiserver's version (`go/kube`, the module the apiserver is built
/// from), built first when this machine has not built it, into
/// `<target>/k8s/scheduler-kube-<version>-<recipe>/`: a cache of its own, so that adding it left
/// the control plane's cache key (and its cold build) as it was. The node suite's in-cluster
/// install runs it: the chart's Deployment names no node, as users' never do.
pub fn kube_scheduler() -> Result<PathBuf, String> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join(KUBE_MODULE);
    let version = required_version(&module, "k8s.io/kubernetes")?;
    let cache = target_dir().join("k8s");
    let binary = cache
        .join(format!("scheduler-kube-{version}-{BUILD_RECIPE}"))
        .join("kube-scheduler");
    if binary.is_file() {
        return Ok(binary);
    }
    let _lock = build_lock(&cache, ".scheduler.lock")?;
    if binary.is_file() {
        return Ok(binary);
    }
    super::require_tool("go", &["version"])?;
    let started = Instant::now();
    eprintln!("probelint-cluster: building kube-scheduler {version} with Go (once per machine)…");
    let staging = cache.join(format!(".scheduler-{}", std::process::id()));
    go_build(
        &module,
        &staging.display().to_string(),
        &version_ldflags(&version),
        &["k8s.io/kubernetes/cmd/kube-scheduler"],
    )?;
    let dir = binary.parent().unwrap_or(&cache);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    install_staged(&staging, &binary)?;
    eprintln!(
        "probelint-cluster: built kube-scheduler in {:.0?}, cached in {}",
        started.elapsed(),
        dir.display()
    );
    Ok(binary)
}

/// The Go module that pins the Helm CLI.
pub const HELM_MODULE: &str = "go/helm";

/// The `helm` CLI at the version `go/helm/go.mod` pins, built first when this machine has not
/// built it, into `<target>/tools/helm-<version>/`, stamped with its version as Helm's own
/// Makefile does (`helm version` names the release).
pub fn helm() -> Result<PathBuf, String> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join(HELM_MODULE);
    let version = required_version(&module, "helm.sh/helm/v4")?;
    let cache = target_dir().join("tools");
    let binary = cache.join(format!("helm-{version}")).join("helm");
    if binary.is_file() {
        return Ok(binary);
    }
    let _lock = build_lock(&cache, ".helm.lock")?;
    if binary.is_file() {
        return Ok(binary);
    }
    super::require_tool("go", &["version"])?;
    let started = Instant::now();
    eprintln!(
        "probelint-cluster: building helm {version} with Go (once per machine; a few minutes \
         cold)…"
    );
    let staging = cache.join(format!(".helm-{}", std::process::id()));
    go_build(
        &module,
        &staging.display().to_string(),
        &format!(" -X helm.sh/helm/v4/internal/version.version={version}"),
        &["helm.sh/helm/v4/cmd/helm"],
    )?;
    let dir = binary.parent().unwrap_or(&cache);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    install_staged(&staging, &binary)?;
    eprintln!(
        "probelint-cluster: built helm in {:.0?}, cached in {}",
        started.elapsed(),
        dir.display()
    );
    Ok(binary)
}

/// The Prometheus release of its Go module's version: `v0.316.0` is `3.16.0` (Prometheus 3 is
/// tagged `v0.3MM.P` in Go, as its module path has no `/v3`).
pub fn prometheus_release(module_version: &str) -> String {
    let mut parts = module_version.trim_start_matches('v').splitn(3, '.');
    let (_, minor, patch) = (
        parts.next(),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    match minor.parse::<u32>() {
        Ok(m) if m >= 300 => format!("{}.{}.{patch}", m / 100, m % 100),
        _ => module_version.trim_start_matches('v').to_owned(),
    }
}

/// `go build -o out packages` in `module`. The modules come from the Go module proxy, checked
/// against the committed go.sum (`-mod=readonly`); the module cache is left writable
/// (`-modcacherw`) so that it can be cleaned like any cache.
fn go_build(module: &Path, out: &str, ldflags: &str, packages: &[&str]) -> Result<(), String> {
    go_build_with(module, out, ldflags, packages, false, "")
}

/// [`go_build`], with cgo when `cgo` (runc's `nsenter` is C, run before the Go runtime starts)
/// and the build tags `tags` (comma-separated, may be empty).
pub fn go_build_with(
    module: &Path,
    out: &str,
    ldflags: &str,
    packages: &[&str],
    cgo: bool,
    tags: &str,
) -> Result<(), String> {
    let output = Command::new("go")
        .current_dir(module)
        .env("GOFLAGS", "-mod=readonly -modcacherw -buildvcs=false")
        .env("CGO_ENABLED", if cgo { "1" } else { "0" })
        .args([
            "build",
            "-trimpath",
            &format!("-ldflags=-s -w{ldflags}"),
            &format!("-tags={tags}"),
            "-o",
            out,
        ])
        .args(packages)
        .output()
        .map_err(|e| format!("cannot run go: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`go build {}` in {} failed ({}):\n{}",
            packages.join(" "),
            module.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Revision of the build recipe, part of the cache key. 2: the Kubernetes version is stamped.
const BUILD_RECIPE: &str = "r2";

/// The `-X` flags that stamp the Kubernetes version into the binaries, as Kubernetes' own build
/// does (`hack/lib/version.sh`). Unstamped, the apiserver reports `v0.0.0-master`, and clients
/// that check the server's version refuse it (Helm: a chart's `kubeVersion: >=1.30.0-0`).
pub(crate) fn version_ldflags(version: &str) -> String {
    let mut parts = version.trim_start_matches('v').split('.');
    let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ]
    .iter()
    .map(|package| {
        format!(
            " -X {package}.gitVersion={version} -X {package}.gitMajor={major} \
                 -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        )
    })
    .collect()
}

/// The version `module`'s go.mod requires of `path` (`require path vX.Y.Z`).
pub fn required_version(module: &Path, path: &str) -> Result<String, String> {
    let go_mod = module.join("go.mod");
    let text = std::fs::read_to_string(&go_mod)
        .map_err(|e| format!("cannot read {}: {e}", go_mod.display()))?;
    text.lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .find_map(|line| {
            let (name, version) = line.split_once(' ')?;
            (name == path).then(|| version.split_whitespace().next().unwrap_or("").to_owned())
        })
        .filter(|v| v.starts_with('v'))
        .ok_or_else(|| format!("{} requires no version of {path}", go_mod.display()))
}

/// The cargo target directory the tests were built in: `CARGO_TARGET_DIR` when set, else the
/// ancestor of the running test binary (`<target>/debug/deps/<test>`).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|p| p.file_name().is_some_and(|n| n == "deps"))
                .and_then(|deps| deps.parent()?.parent().map(Path::to_path_buf))
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// Creates `cache` and takes the lock file `name` in it, held until the returned file is dropped.
/// Several test binaries may start at once: one builds, the others wait here, then find the
/// binaries present.
pub fn build_lock(cache: &Path, name: &str) -> Result<File, String> {
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let path = cache.join(name);
    let lock = File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(lock)
}

/// Puts a finished build where it is cached: `staging` (a directory, or one file) replaces
/// `target`, so that a build interrupted midway never leaves a half-written cache behind.
pub fn install_staged(staging: &Path, target: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(target);
    std::fs::rename(staging, target).map_err(|e| {
        format!(
            "cannot move {} to {}: {e}",
            staging.display(),
            target.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_versions_are_read_from_go_mod() {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"));
        let kube = required_version(&source.join(KUBE_MODULE), "k8s.io/kubernetes").unwrap();
        assert!(kube.starts_with("v1."), "{kube}");
        let etcd =
            required_version(&source.join(ETCD_MODULE), "go.etcd.io/etcd/server/v3").unwrap();
        assert!(etcd.starts_with("v3."), "{etcd}");
        // Prometheus 3.x is tagged v0.3MM.P in Go.
        let prometheus = required_version(
            &source.join(PROMTOOL_MODULE),
            "github.com/prometheus/prometheus",
        )
        .unwrap();
        assert!(prometheus.starts_with("v0.3"), "{prometheus}");
        assert_eq!(prometheus_release("v0.316.0"), "3.16.0");
        assert_eq!(prometheus_release("v0.305.12"), "3.5.12");
        // Every staging module is pinned to the matching v0 version, or `go build` would mix
        // Kubernetes versions.
        let go_mod = std::fs::read_to_string(source.join(KUBE_MODULE).join("go.mod")).unwrap();
        let staging = format!("v0.{}", kube.trim_start_matches("v1."));
        let replaces: Vec<&str> = go_mod.lines().filter(|l| l.contains(" => ")).collect();
        assert!(replaces.len() >= 30, "{replaces:?}");
        for line in replaces {
            assert!(
                line.trim_end().ends_with(&staging),
                "{line} is not {staging}"
            );
        }
    }
}
