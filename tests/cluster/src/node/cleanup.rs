//! What a node leaves on the machine, and how it is taken away: the kernel settings the kubelet
//! and the CNI bridge change, the cgroup tree its pods run in, `/var/log/containers`, the shims and containers that outlive containerd,
//! the mounts under the run's directory. Each run records what it will change before changing
//! it, so that a run that crashed is undone by the next one ([`reap_dead_runs`]).

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The settings the kubelet writes at start (`setupKernelTunables`, with
/// `protectKernelDefaults: false`; with `true` it refuses to start unless they already hold),
/// and the one the CNI bridge plugin turns on for a gateway bridge (`isGateway`).
pub const SYSCTLS: [&str; 7] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
];

/// Where the kubelet links each container's log (a fixed path), creating it when absent.
const CONTAINER_LOGS: &str = "/var/log/containers";

/// Writes `sysctls` (each setting's value now), `cgroup-root`, and whether
/// `/var/log/containers` existed (`container-logs-dir`) into the run's directory.
pub fn record(dir: &Path, cgroup_root: &str) -> Result<(), String> {
    let mut saved = String::new();
    for name in SYSCTLS {
        let path = Path::new("/proc/sys").join(name);
        let value = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        saved.push_str(&format!("{name} {}\n", value.trim()));
    }
    let logs_dir = if Path::new(CONTAINER_LOGS).exists() {
        "existed"
    } else {
        "created"
    };
    std::fs::write(dir.join("sysctls"), saved)
        .and_then(|()| std::fs::write(dir.join("cgroup-root"), cgroup_root))
        .and_then(|()| std::fs::write(dir.join("container-logs-dir"), logs_dir))
        .map_err(|e| format!("cannot write to {}: {e}", dir.display()))
}

/// Undoes the runs under `runs` whose test process is gone.
pub fn reap_dead_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| {
            pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
        }) {
            eprintln!(
                "probelint-cluster: cleaning up after a node run that did not stop ({})",
                entry.path().display()
            );
            undo(&entry.path());
        }
    }
}

/// Stops what is left of the run in `dir` and puts the machine back as it was.
pub fn undo(dir: &Path) {
    // Shims (and the containers they hold) are daemons: they outlive containerd. Each names
    // this run's socket on its command line.
    kill_processes_mentioning(dir);
    if let Ok(root) = std::fs::read_to_string(dir.join("cgroup-root")) {
        remove_cgroup_tree(root.trim());
    }
    unmount_under(dir);
    remove_log_links_into(dir);
    if std::fs::read_to_string(dir.join("container-logs-dir")).is_ok_and(|s| s == "created") {
        // Only when empty: another kubelet may have started using it since.
        let _ = std::fs::remove_dir(CONTAINER_LOGS);
    }
    // The bridge would be reused by the next node; a machine without one is as it was.
    let _ = std::process::Command::new("ip")
        .args(["link", "delete", super::BRIDGE])
        .output();
    if let Ok(saved) = std::fs::read_to_string(dir.join("sysctls")) {
        for line in saved.lines() {
            if let Some((name, value)) = line.split_once(' ') {
                let _ = std::fs::write(Path::new("/proc/sys").join(name), value);
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(dir) {
        eprintln!(
            "probelint-cluster: cannot remove {} ({e}); the next node run tries again",
            dir.display()
        );
    }
}

/// The kubelet links each container's log from `/var/log/containers` into its `podLogsDir`,
/// which is under the run's directory.
fn remove_log_links_into(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(CONTAINER_LOGS) else {
        return;
    };
    for entry in entries.flatten() {
        if std::fs::read_link(entry.path()).is_ok_and(|target| target.starts_with(dir)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn kill_processes_mentioning(dir: &Path) {
    let needle = dir.as_os_str().as_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            // SAFETY: kill(2) on a process whose command line names this run's directory.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Every cgroup hierarchy mounted here: each v1 controller's, the named ones (`systemd`) and
/// the v2 one, from `/proc/self/mountinfo`.
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut paths: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount_point = left.split_whitespace().nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(mount_point))
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Kills every process in the tree `root` of each hierarchy, then removes its cgroups, deepest
/// first (a cgroup can be removed only once it has no process and no child).
fn remove_cgroup_tree(root: &str) {
    let relative = root.trim_start_matches('/');
    if relative.is_empty() {
        return;
    }
    for hierarchy in cgroup_hierarchies() {
        let top = hierarchy.join(relative);
        if !top.is_dir() {
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut dirs = Vec::new();
            collect_dirs(&top, &mut dirs);
            let mut alive = false;
            for dir in &dirs {
                for pid in std::fs::read_to_string(dir.join("cgroup.procs"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    alive = true;
                    // SAFETY: kill(2) on a process in this run's cgroup tree.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
            // Deepest first.
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for dir in &dirs {
                let _ = std::fs::remove_dir(dir);
            }
            if !top.exists() || (!alive && dirs.is_empty()) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), out);
            }
        }
    }
}

/// Detaches every mount at or under `dir` (overlay root filesystems, the kubelet's bind mount
/// of its root directory, volumes), deepest first.
fn unmount_under(dir: &Path) {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split_whitespace().nth(4))
        .map(unescape_mount_point)
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for point in points {
        let Ok(path) = std::ffi::CString::new(point.as_os_str().as_bytes()) else {
            continue;
        };
        // SAFETY: umount2(2) with a NUL-terminated path.
        unsafe {
            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// mountinfo writes a space, tab, newline and backslash in a path as `\040` etc.
fn unescape_mount_point(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(value) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&out))
}

/// Cgroups a kubelet can use: v2, or v1 with the controllers the kubelet requires mounted and
/// writable (a cgroup can be created in each).
pub fn check_cgroups() -> Result<(), String> {
    let hierarchies = cgroup_hierarchies();
    if hierarchies.is_empty() {
        return Err("no cgroup filesystem is mounted (/proc/self/mountinfo)".to_owned());
    }
    let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").is_file();
    let required: &[&str] = if unified {
        &[""]
    } else {
        &["cpu", "cpuacct", "cpuset", "memory", "pids"]
    };
    for controller in required {
        let hierarchy = if unified {
            PathBuf::from("/sys/fs/cgroup")
        } else {
            let found = hierarchies.iter().find(|h| {
                h.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.split(',').any(|c| c == *controller))
            });
            match found {
                Some(h) => h.clone(),
                None => {
                    return Err(format!(
                        "cgroup v1 without the {controller} controller mounted (the kubelet \
                         requires cpu, cpuacct, cpuset, memory and pids); mounted: {hierarchies:?}"
                    ));
                }
            }
        };
        let probe = hierarchy.join(format!("probelint-probe-{}", std::process::id()));
        std::fs::create_dir(&probe)
            .map_err(|e| format!("cgroups: mkdir {} failed: {e}", probe.display()))?;
        let _ = std::fs::remove_dir(&probe);
    }
    Ok(())
}

/// Whether a process may create the namespaces runc gives a container: a child (forked, so
/// that this process keeps its own) calls `unshare(2)` and exits with its errno.
pub fn check_namespaces() -> Result<(), String> {
    let flags = libc::CLONE_NEWNS
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC;
    // SAFETY: the child calls only async-signal-safe functions (unshare, _exit) before exiting.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: in the forked child; unshare(2) and _exit(2) are async-signal-safe.
        unsafe {
            let code = if libc::unshare(flags) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waitpid(2) on the child just forked.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
    }
    let code = libc::WEXITSTATUS(status);
    if libc::WIFEXITED(status) && code == 0 {
        Ok(())
    } else {
        Err(format!(
            "unshare(CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWPID|CLONE_NEWUTS|CLONE_NEWIPC) failed: {}",
            std::io::Error::from_raw_os_error(code)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_with_spaces_are_read_back() {
        assert_eq!(
            unescape_mount_point(r"/work/a\040b/c"),
            PathBuf::from("/work/a b/c")
        );
        assert_eq!(unescape_mount_point("/plain"), PathBuf::from("/plain"));
    }
}
