//! `probelint-probe`: an exec probe. One decision, one line on stderr (the kubelet copies it into
//! the `Unhealthy` Event), exit 0 or 1. Plain HTTP/1.1 to the pod's own port over std's
//! TcpStream: no TLS, no async runtime, so the binary stays small and a probe costs one process.

use probelint_policies::{KNOWN_SERVERS, KnownServer};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

struct Args {
    kind: String,
    server: Option<&'static KnownServer>,
    host: String,
    port: Option<u16>,
    timeout: Duration,
    smoke: bool,
    interval: u64,
    cache: PathBuf,
    leader: Option<String>,
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let kind = argv.first().cloned().ok_or("usage: probelint-probe ready|live|startup|worker [--server ID] [--port N] [--timeout S] [--smoke] [--interval S] [--cache FILE] [--leader HOST:PORT]")?;
    if !["ready", "live", "startup", "worker"].contains(&kind.as_str()) {
        return Err(format!(
            "unknown subcommand `{kind}` (expected ready, live, startup or worker)"
        ));
    }
    let mut a = Args {
        kind,
        server: None,
        host: "127.0.0.1".into(),
        port: None,
        timeout: Duration::from_secs(3),
        smoke: false,
        interval: 60,
        cache: PathBuf::from("/tmp/probelint-probe.cache"),
        leader: None,
    };
    let mut it = argv[1..].iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => {
                let id = value()?;
                a.server = Some(KNOWN_SERVERS.iter().find(|s| s.id == id).ok_or_else(|| {
                    let ids: Vec<_> = KNOWN_SERVERS.iter().map(|s| s.id).collect();
                    format!("unknown server `{id}` (known: {})", ids.join(", "))
                })?);
            }
            "--host" => a.host = value()?,
            "--port" => a.port = Some(value()?.parse().map_err(|e| format!("--port: {e}"))?),
            "--timeout" => {
                a.timeout = Duration::from_secs_f64(
                    value()?.parse().map_err(|e| format!("--timeout: {e}"))?,
                )
            }
            "--interval" => {
                a.interval = value()?.parse().map_err(|e| format!("--interval: {e}"))?
            }
            "--cache" => a.cache = PathBuf::from(value()?),
            "--leader" => a.leader = Some(value()?),
            "--smoke" => a.smoke = true,
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    if a.kind != "worker" && a.server.is_none() {
        return Err(format!("{} needs --server", a.kind));
    }
    if a.kind == "worker" && a.leader.is_none() {
        return Err("worker needs --leader HOST:PORT".into());
    }
    Ok(a)
}

struct Response {
    status: u16,
    body: String,
}

fn http(a: &Args, method: &str, path: &str, body: Option<&str>) -> Result<Response, String> {
    let port = a.port.or(a.server.map(|s| s.default_port)).unwrap_or(8000);
    let addr = (a.host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{port}: {e}", a.host))?
        .next()
        .ok_or("no address")?;
    let mut s =
        TcpStream::connect_timeout(&addr, a.timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(a.timeout)).ok();
    s.set_write_timeout(Some(a.timeout)).ok();
    let b = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        a.host,
        b.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let mut raw = Vec::new();
    s.take(1 << 20)
        .read_to_end(&mut raw)
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(format!("{method} {path}: no HTTP status in the answer"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok(Response { status, body })
}

fn get_ok(a: &Args, path: &str) -> Result<(), String> {
    let r = http(a, "GET", path, None)?;
    if (200..300).contains(&r.status) {
        Ok(())
    } else {
        Err(format!(
            "GET {path}: HTTP {} {}",
            r.status,
            snippet(&r.body)
        ))
    }
}

fn snippet(body: &str) -> String {
    let t: String = body.trim().chars().take(60).collect();
    if t.is_empty() {
        String::new()
    } else {
        format!("{t:?}")
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The smoke inference for a server's own API: one token, greedy.
fn smoke_request(s: &KnownServer) -> (&'static str, &'static str) {
    match s.id {
        "tgi" => (
            "/generate",
            r#"{"inputs":"1","parameters":{"max_new_tokens":1,"do_sample":false}}"#,
        ),
        "triton" | "kserve" => ("/v2/models/model/infer", r#"{"inputs":[]}"#),
        _ => (
            "/v1/completions",
            r#"{"prompt":"1","max_tokens":1,"temperature":0}"#,
        ),
    }
}

/// Cache line: `<unix time> <ok|fail> <consecutive failures> <message>`.
fn smoke(a: &Args, s: &KnownServer) -> Result<String, String> {
    let cached = std::fs::read_to_string(&a.cache).ok();
    let parsed = cached.as_deref().and_then(|c| {
        let mut p = c.splitn(4, ' ');
        Some((
            p.next()?.parse::<u64>().ok()?,
            p.next()? == "ok",
            p.next()?.parse::<u32>().ok()?,
            p.next().unwrap_or("").trim().to_string(),
        ))
    });
    let t = now();
    if let Some((at, ok, fails, msg)) = &parsed
        && t.saturating_sub(*at) < a.interval
    {
        let age = t - at;
        return if *ok {
            Ok(format!("smoke inference passed {age} s ago"))
        } else {
            Err(format!(
                "smoke inference failed {fails} in a row ({msg}) {age} s ago"
            ))
        };
    }
    if s.id == "vllm"
        && let Ok(r) = http(a, "GET", "/is_sleeping", None)
        && r.status == 200
        && r.body.contains("true")
    {
        return Ok("engine is sleeping: no smoke inference sent (it would wake it)".into());
    }
    let (path, body) = smoke_request(s);
    let result = http(a, "POST", path, Some(body)).and_then(|r| {
        if (200..300).contains(&r.status) {
            Ok(())
        } else {
            Err(format!("HTTP {} {}", r.status, snippet(&r.body)))
        }
    });
    let prev_fails = parsed.map(|p| if p.1 { 0 } else { p.2 }).unwrap_or(0);
    let line = match &result {
        Ok(()) => format!("{t} ok 0 \n"),
        Err(e) => format!("{t} fail {} {e}\n", prev_fails + 1),
    };
    // Written to a sibling then renamed, so a probe killed mid-write leaves the old cache whole.
    let tmp = a.cache.with_extension("tmp");
    if std::fs::write(&tmp, line)
        .and_then(|()| std::fs::rename(&tmp, &a.cache))
        .is_err()
    {
        eprintln!("warning: cannot write cache {}", a.cache.display());
    }
    match result {
        Ok(()) => Ok("smoke inference passed just now".into()),
        Err(e) => Err(format!(
            "smoke inference failed {} in a row ({e}) just now",
            prev_fails + 1
        )),
    }
}

fn decide(a: &Args) -> Result<String, String> {
    match a.kind.as_str() {
        "worker" => {
            let l = a.leader.as_deref().unwrap_or_default();
            let addr = l
                .to_socket_addrs()
                .map_err(|e| format!("leader {l}: {e}"))?
                .next()
                .ok_or(format!("leader {l}: no address"))?;
            TcpStream::connect_timeout(&addr, a.timeout)
                .map_err(|e| format!("leader {l} unreachable: {e}"))?;
            Ok(format!("leader {l} reachable"))
        }
        "live" => {
            let s = a.server.expect("checked in parse");
            get_ok(a, s.live_path)?;
            Ok(format!("GET {} answered", s.live_path))
        }
        _ => {
            let s = a.server.expect("checked in parse");
            get_ok(a, s.ready_path)?;
            if a.kind == "ready" && a.smoke && !s.ready_runs_generation {
                let m = smoke(a, s)?;
                return Ok(format!("GET {} answered; {m}", s.ready_path));
            }
            Ok(format!("GET {} answered", s.ready_path))
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let a = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("probelint-probe: {e}");
            return ExitCode::from(2);
        }
    };
    let label = match a.kind.as_str() {
        "ready" => "ready",
        "live" => "live",
        "startup" => "started",
        _ => "worker ok",
    };
    match decide(&a) {
        Ok(m) => {
            eprintln!("{label}: {m}");
            ExitCode::SUCCESS
        }
        Err(m) => {
            eprintln!("not {label}: {m}");
            ExitCode::FAILURE
        }
    }
}
