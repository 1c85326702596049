//! Spawning the real `reference-server` binary and talking HTTP/1.1 to it over a raw
//! `TcpStream` (no client library: these tests need GET, POST and the status line, nothing more).

#![allow(dead_code)] // each test file uses a different subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// 1 s of manifest time = 50 ms: durations in the flags below read as manifest seconds.
pub const TIME_SCALE: &str = "0.05";
/// Small model: the debug-build forward pass stays well under a millisecond.
pub const PARAMS: u64 = 20_000;
pub const SEED: u64 = 11;

pub struct Server {
    child: Child,
    lines: Receiver<String>,
    log: PathBuf,
    pub addr: Option<SocketAddr>,
    _dir: tempfile::TempDir,
    pub model: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a fresh model into `dir`.
pub fn make_model(dir: &Path, seed: u64) -> PathBuf {
    let path = dir.join("model.safetensors");
    probelint_reference::model::make_model(PARAMS, seed, 4, 16, &path).expect("make model");
    path
}

/// Changes the model file before the server starts (to corrupt or remove it).
pub type Prepare<'a> = Box<dyn FnOnce(&Path) + 'a>;

pub struct Spawn<'a> {
    pub args: Vec<&'a str>,
    pub env: Vec<(&'a str, &'a str)>,
    pub listen: String,
    pub prepare: Option<Prepare<'a>>,
}

impl Default for Spawn<'_> {
    fn default() -> Self {
        Spawn {
            args: Vec::new(),
            env: Vec::new(),
            listen: "127.0.0.1:0".into(),
            prepare: None,
        }
    }
}

pub fn spawn(args: &[&str]) -> Server {
    spawn_with(Spawn {
        args: args.to_vec(),
        ..Spawn::default()
    })
}

pub fn spawn_with(opts: Spawn<'_>) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = make_model(dir.path(), SEED);
    if let Some(prepare) = opts.prepare {
        prepare(&model);
    }
    let log = dir.path().join("server.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reference-server"));
    cmd.arg("serve")
        .arg("--model")
        .arg(&model)
        .args(["--listen", &opts.listen, "--time-scale", TIME_SCALE])
        .args(&opts.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"));
    for (name, _) in std::env::vars() {
        if name.starts_with("REFERENCE_") {
            cmd.env_remove(name);
        }
    }
    cmd.envs(opts.env.iter().copied());
    let mut child = cmd.spawn().expect("spawn reference-server");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Server {
        child,
        lines,
        log,
        addr: None,
        _dir: dir,
        model,
    }
}

impl Server {
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the `listening on ADDR` line.
    pub fn listening(&mut self, timeout: Duration) -> SocketAddr {
        if let Some(addr) = self.addr {
            return addr;
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("listening on ") {
                        let addr: SocketAddr = addr.trim().parse().expect("address");
                        self.addr = Some(addr);
                        return addr;
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "server did not listen within {timeout:?}; log:\n{}",
                        self.log()
                    )
                }
            }
        }
    }

    /// Whether a `listening` line has been printed yet (without waiting).
    pub fn has_listened(&mut self) -> bool {
        while let Ok(line) = self.lines.try_recv() {
            if let Some(addr) = line.strip_prefix("listening on ") {
                self.addr = addr.trim().parse().ok();
            }
        }
        self.addr.is_some()
    }

    pub fn get(&mut self, path: &str) -> (u16, serde_json::Value) {
        let addr = self.listening(Duration::from_secs(20));
        let (status, body) =
            get(addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log()));
        (
            status,
            serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)),
        )
    }

    pub fn post(&mut self, path: &str, body: &str) -> (u16, serde_json::Value) {
        let addr = self.listening(Duration::from_secs(20));
        let (status, text) =
            post(addr, path, body).unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", self.log()));
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    }

    /// Polls `check` every 10 ms until it holds; panics with the server log after `timeout`.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&mut Self) -> bool,
    ) -> Duration {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if check(self) {
                return start.elapsed();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "timed out after {timeout:?} waiting for {what}; log:\n{}",
            self.log()
        );
    }

    pub fn status(&mut self, path: &str) -> u16 {
        self.get(path).0
    }

    pub fn wait_status(&mut self, path: &str, status: u16, timeout: Duration) -> Duration {
        self.wait_for(&format!("{path} -> {status}"), timeout, |s| {
            s.status(path) == status
        })
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "server still running after {timeout:?}; log:\n{}",
            self.log()
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

fn request(addr: SocketAddr, raw: &[u8]) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(raw)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end in {text:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    Ok((status, body.to_owned()))
}

pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    request(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

pub fn post(addr: SocketAddr, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    request(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

/// The names in a probe body's `failing` list.
pub fn failing(body: &serde_json::Value) -> Vec<String> {
    body["failing"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
