//! The control plane's processes: each in its own process group, killed with the test binary
//! (`PR_SET_PDEATHSIG`), logging to a file in the run's directory.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One running component.
pub struct Component {
    pub name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Component {
    /// Starts `binary args…`, logging stdout and stderr to `<dir>/<name>.log`.
    pub fn spawn(
        name: &'static str,
        binary: &Path,
        dir: &Path,
        args: &[&str],
    ) -> Result<Component, String> {
        Component::spawn_with_env(name, binary, dir, args, &[])
    }

    /// [`Component::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        name: &'static str,
        binary: &Path,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Component, String> {
        let log = dir.join(format!("{name}.log"));
        let out =
            File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
        let parent = std::process::id() as libc::pid_t;
        let mut command = Command::new(binary);
        command
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: only async-signal-safe calls between fork and exec (setpgid, prctl, getppid).
        unsafe {
            command.pre_exec(move || {
                // Its own process group, so that a Ctrl-C in the terminal reaches the tests, not
                // the control plane, and one kill stops the component with its children.
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Dies with the thread that started it (the keeper thread, which lives as long
                // as the test binary), however the test binary ends.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    // The test binary died between fork and prctl.
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        Ok(Component { name, child, log })
    }

    /// `Err` with the component's exit status and log tail when it is no longer running.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} exited ({status}); the end of its log ({}):\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 40)
            )),
            Err(e) => Err(format!("cannot check {}: {e}", self.name)),
        }
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        // SIGKILL to the whole group: the data is thrown away, nothing needs a clean stop.
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on a process group this process created.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Polls `ready` until it holds; fails early, with the log, when a component has exited, and
/// after `timeout` (counted from `started`) with every component's log tail.
pub fn wait_until(
    started: Instant,
    timeout: Duration,
    components: &mut [Component],
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    loop {
        for component in components.iter_mut() {
            component.check_running()?;
        }
        if ready() {
            return Ok(());
        }
        if started.elapsed() > timeout {
            let logs: String = components
                .iter()
                .map(|c| {
                    format!(
                        "\n--- {} ({}):\n{}",
                        c.name,
                        c.log.display(),
                        tail(&c.log, 20)
                    )
                })
                .collect();
            return Err(format!("{what} not ready within {timeout:?}{logs}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A fresh directory for this run under `<target>/k8s-run/`, after removing those of runs whose
/// process is gone.
pub fn run_dir() -> Result<PathBuf, String> {
    let root = crate::binaries::target_dir().join("k8s-run");
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    if let Ok(entries) = std::fs::read_dir(&root) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = root.join(format!("{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Whether `GET http://127.0.0.1:port/path` answers 200 (plain HTTP/1.0, for etcd's /health).
pub fn http_get_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
