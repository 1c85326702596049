//! `probelint-probe`: an exec probe. One decision, one line on stderr (the kubelet copies it into
//! the `Unhealthy` Event), exit 0 (pass), 1 (fail) or 2 (bad arguments). The server's paths and
//! port come from the engine's server table, so the probe and the linter never disagree; what the
//! probe adds per server (smoke requests, progress metrics, body semantics) is in `servers.rs`.

mod http;
mod progress;
mod prom;
mod servers;
mod state;

use http::{Target, snippet};
use probelint_policies::{KNOWN_SERVERS, KnownServer};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: probelint-probe install DIR | ready|live|startup|worker [--server ID] [--port N] \
[--host H] [--timeout S] [--model NAME] [--ready-path P] [--startup-path P] [--live-path P] \
[--smoke] [--smoke-path P] [--smoke-body JSON] [--interval S] [--cache FILE] \
[--by progress|endpoint|port] [--window S] [--failure-threshold N] [--metrics-path P] \
[--metric-work A,B] [--metric-progress C,D] [--leader HOST:PORT]";

#[derive(Clone, Copy, PartialEq, Debug)]
enum LiveBy {
    Progress,
    Endpoint,
    Port,
}

struct Args {
    kind: String,
    server: Option<&'static KnownServer>,
    host: String,
    port: u16,
    timeout: Duration,
    model: Option<String>,
    ready_path: Option<String>,
    startup_path: Option<String>,
    live_path: Option<String>,
    smoke: bool,
    smoke_path: Option<String>,
    smoke_body: Option<String>,
    interval: u64,
    cache: PathBuf,
    by: LiveBy,
    window: u64,
    failure_threshold: u32,
    metrics_path: String,
    metric_work: Vec<String>,
    metric_progress: Vec<String>,
    leader: Option<String>,
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let kind = argv.first().cloned().ok_or(USAGE)?;
    if !["ready", "live", "startup", "worker"].contains(&kind.as_str()) {
        return Err(format!(
            "unknown subcommand `{kind}` (expected ready, live, startup or worker)\n{USAGE}"
        ));
    }
    let mut server = None;
    let (mut host, mut port) = ("127.0.0.1".to_string(), None);
    let mut timeout = Duration::from_secs(3);
    let (mut model, mut ready_path, mut startup_path, mut live_path) = (None, None, None, None);
    let (mut smoke, mut smoke_path, mut smoke_body) = (false, None, None);
    let (mut interval, mut cache, mut by) = (60, None, None);
    let (mut window, mut failure_threshold) = (30, 2);
    let mut metrics_path = "/metrics".to_string();
    let (mut metric_work, mut metric_progress) = (Vec::new(), Vec::new());
    let mut leader = None;
    let list = |v: String| -> Vec<String> {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut it = argv[1..].iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => {
                let id = value()?;
                server = Some(KNOWN_SERVERS.iter().find(|s| s.id == id).ok_or_else(|| {
                    let ids: Vec<_> = KNOWN_SERVERS.iter().map(|s| s.id).collect();
                    format!("unknown server `{id}` (known: {})", ids.join(", "))
                })?);
            }
            "--host" => host = value()?,
            "--port" => port = Some(value()?.parse().map_err(|e| format!("--port: {e}"))?),
            "--timeout" => {
                let s: f64 = value()?.parse().map_err(|e| format!("--timeout: {e}"))?;
                timeout = Duration::try_from_secs_f64(s)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or("--timeout must be a positive number of seconds")?;
            }
            "--model" => model = Some(value()?),
            "--ready-path" => ready_path = Some(value()?),
            "--startup-path" => startup_path = Some(value()?),
            "--live-path" => live_path = Some(value()?),
            "--smoke" => smoke = true,
            "--smoke-path" => smoke_path = Some(value()?),
            "--smoke-body" => smoke_body = Some(value()?),
            "--interval" => interval = value()?.parse().map_err(|e| format!("--interval: {e}"))?,
            "--cache" => cache = Some(PathBuf::from(value()?)),
            "--by" => {
                by = Some(match value()?.as_str() {
                    "progress" => LiveBy::Progress,
                    "endpoint" => LiveBy::Endpoint,
                    "port" => LiveBy::Port,
                    other => {
                        return Err(format!(
                            "--by `{other}` (expected progress, endpoint or port)"
                        ));
                    }
                })
            }
            "--window" => {
                window = value()?.parse().map_err(|e| format!("--window: {e}"))?;
                if window == 0 {
                    return Err("--window must be at least 1 second".into());
                }
            }
            "--failure-threshold" => {
                failure_threshold = value()?
                    .parse()
                    .map_err(|e| format!("--failure-threshold: {e}"))?;
                if failure_threshold == 0 {
                    return Err("--failure-threshold must be at least 1".into());
                }
            }
            "--metrics-path" => metrics_path = value()?,
            "--metric-work" => metric_work = list(value()?),
            "--metric-progress" => metric_progress = list(value()?),
            "--leader" => leader = Some(value()?),
            other => return Err(format!("unknown flag `{other}`\n{USAGE}")),
        }
    }
    let server_id = server.map(|s| s.id).unwrap_or("");
    let path_given = match kind.as_str() {
        "ready" => ready_path.is_some(),
        "startup" => startup_path.is_some() || ready_path.is_some(),
        "live" => live_path.is_some() || !metric_progress.is_empty() || by == Some(LiveBy::Port),
        _ => true,
    };
    if server.is_none() && !path_given {
        return Err(format!(
            "{kind} needs --server, or the paths of a server the table does not know \
             (--ready-path, --startup-path, --live-path or --metric-progress)"
        ));
    }
    if kind == "worker" && leader.is_none() {
        return Err("worker needs --leader HOST:PORT".into());
    }
    if metric_work.is_empty() != metric_progress.is_empty() {
        return Err("--metric-work and --metric-progress go together".into());
    }
    if kind == "ready" && smoke && smoke_body.is_none() && servers::speaks_v2(server_id) {
        return Err(format!(
            "--smoke for {server_id} needs --smoke-body: a v2 inference request with the model's \
             own smallest input (and --model NAME for its path)"
        ));
    }
    if kind == "ready" && smoke && server.is_none() && smoke_path.is_none() {
        return Err("--smoke without --server needs --smoke-path (and --smoke-body)".into());
    }
    let known_progress = servers::progress_metrics(server_id).is_some();
    let by = by.unwrap_or(if known_progress || !metric_progress.is_empty() {
        LiveBy::Progress
    } else {
        LiveBy::Endpoint
    });
    if by == LiveBy::Progress && !known_progress && metric_progress.is_empty() {
        return Err(format!(
            "--by progress: no progress metrics are known for `{server_id}`; name them with \
             --metric-work and --metric-progress"
        ));
    }
    let default_cache = if kind == "live" {
        "/tmp/probelint-probe-live.state"
    } else {
        "/tmp/probelint-probe.cache"
    };
    Ok(Args {
        port: port.or(server.map(|s| s.default_port)).unwrap_or(8000),
        kind,
        server,
        host,
        timeout,
        model,
        ready_path,
        startup_path,
        live_path,
        smoke,
        smoke_path,
        smoke_body,
        interval,
        cache: cache.unwrap_or_else(|| PathBuf::from(default_cache)),
        by,
        window,
        failure_threshold,
        metrics_path,
        metric_work,
        metric_progress,
        leader,
    })
}

impl Args {
    fn target(&self) -> Target<'_> {
        Target {
            host: &self.host,
            port: self.port,
            timeout: self.timeout,
        }
    }

    fn server_id(&self) -> &'static str {
        self.server.map(|s| s.id).unwrap_or("")
    }

    fn get(&self, path: &str) -> Result<http::Response, String> {
        http::request(&self.target(), "GET", path, None)
    }

    /// GET that must answer 2xx; returns the body.
    fn get_ok(&self, path: &str) -> Result<String, String> {
        let r = self.get(path)?;
        if r.ok() {
            Ok(r.body)
        } else {
            Err(format!("GET {path}: HTTP {}{}", r.status, snippet(&r.body)))
        }
    }
}

/// The ready signal: the path's status, then what a 200 there can still hide.
fn ready_signal(a: &Args, path: &str) -> Result<String, String> {
    let body = a.get_ok(path)?;
    let mut said = format!("GET {path} answered");
    match a.server_id() {
        "dynamo-frontend" => {
            let m = servers::dynamo_health(&body).map_err(|e| format!("GET {path}: {e}"))?;
            said = format!("{said}; {m}");
        }
        "llama-cpp" => {
            let props = a.get("/props")?;
            if props.ok() && servers::is_llama_router(&props.body) {
                let models = a.get_ok("/models")?;
                let m = servers::llama_router_loaded(&models, a.model.as_deref())?;
                said = format!("{said}; {m}");
            }
        }
        id if servers::speaks_v2(id) => {
            if let Some(m) = &a.model {
                let p = format!("/v2/models/{m}/ready");
                a.get_ok(&p)?;
                said = format!("{said}; GET {p} answered");
            }
        }
        _ => {}
    }
    Ok(said)
}

fn smoke_request(a: &Args) -> (String, String) {
    let id = a.server_id();
    let (path, body) = servers::smoke_request(id, a.model.as_deref()).unwrap_or_else(|| {
        let model = a.model.as_deref().unwrap_or("model");
        (format!("/v2/models/{model}/infer"), String::new())
    });
    (
        a.smoke_path.clone().unwrap_or(path),
        a.smoke_body
            .clone()
            .unwrap_or(if body.is_empty() { "{}".into() } else { body }),
    )
}

/// Cache line: `<unix time> <ok|fail> <consecutive failures> <message>`.
fn smoke(a: &Args) -> Result<String, String> {
    let parsed = state::read(&a.cache).and_then(|c| {
        let mut p = c.splitn(4, ' ');
        Some((
            p.next()?.parse::<u64>().ok()?,
            p.next()? == "ok",
            p.next()?.parse::<u32>().ok()?,
            p.next().unwrap_or("").trim().to_string(),
        ))
    });
    let t = state::now();
    if let Some((at, ok, fails, msg)) = &parsed
        && t.saturating_sub(*at) < a.interval
    {
        let age = t.saturating_sub(*at);
        return if *ok {
            Ok(format!("smoke inference passed {age} s ago"))
        } else {
            Err(format!(
                "smoke inference failed {fails} in a row ({msg}) {age} s ago"
            ))
        };
    }
    // vLLM's sleep state, where exposed (VLLM_SERVER_DEV_MODE=1): an inference would wake it.
    if a.server_id() == "vllm"
        && let Ok(r) = a.get("/is_sleeping")
        && r.status == 200
        && r.body.contains("true")
    {
        return Ok("engine is sleeping: no smoke inference sent (it would wake it)".into());
    }
    // The same state without dev mode, where the metrics carry it.
    if a.server_id() == "vllm"
        && let Ok(r) = a.get(&a.metrics_path)
        && r.ok()
        && prom::sum(&r.body, servers::VLLM_AWAKE) == Some(0.0)
    {
        return Ok(format!(
            "engine is sleeping ({} is 0): no smoke inference sent (it would wake it)",
            servers::VLLM_AWAKE
        ));
    }
    let (path, body) = smoke_request(a);
    let result = http::request(&a.target(), "POST", &path, Some(&body)).and_then(|r| {
        if r.ok() {
            Ok(())
        } else {
            Err(format!("HTTP {}{}", r.status, snippet(&r.body)))
        }
    });
    let prev_fails = parsed.map(|p| if p.1 { 0 } else { p.2 }).unwrap_or(0);
    let line = match &result {
        Ok(()) => format!("{t} ok 0 "),
        Err(e) => format!("{t} fail {} {e}", prev_fails + 1),
    };
    if let Some(w) = state::write(&a.cache, &line) {
        eprintln!("warning: {w}");
    }
    match result {
        Ok(()) => Ok("smoke inference passed just now".into()),
        Err(e) => Err(format!(
            "smoke inference failed {} in a row ({e}) just now",
            prev_fails + 1
        )),
    }
}

fn live_path(a: &Args) -> String {
    a.live_path.clone().unwrap_or_else(|| {
        a.server
            .map(|s| servers::cheap_live_path(s.id, s.live_path))
            .unwrap_or("/")
            .to_string()
    })
}

fn live_by_endpoint(a: &Args) -> Result<String, String> {
    let path = live_path(a);
    a.get_ok(&path)?;
    Ok(format!("GET {path} answered"))
}

fn live_by_progress(a: &Args) -> Result<String, String> {
    let known = servers::progress_metrics(a.server_id());
    let (work, prog): (Vec<&str>, Vec<&str>) = if a.metric_progress.is_empty() {
        let k = known.expect("checked in parse");
        (k.work.to_vec(), k.progress.to_vec())
    } else {
        (
            a.metric_work.iter().map(String::as_str).collect(),
            a.metric_progress.iter().map(String::as_str).collect(),
        )
    };
    let r = a.get(&a.metrics_path)?;
    let sample = if r.ok() {
        progress::sample(&r.body, &work, &prog)
    } else {
        Err(format!("GET {}: HTTP {}", a.metrics_path, r.status))
    };
    let sample = match sample {
        Ok(s) => s,
        // Metrics off or renamed: say so and fall back to the cheap path, never accuse.
        Err(why) => {
            let fallback = live_by_endpoint(a);
            let note = format!("cannot judge progress ({why})");
            return fallback
                .map(|m| format!("{m}; {note}"))
                .map_err(|m| format!("{m}; {note}"));
        }
    };
    let names = prog.join("+");
    let rules = progress::Rules {
        window: a.window,
        threshold: a.failure_threshold,
    };
    let prev = state::read(&a.cache).and_then(|l| progress::State::parse(&l));
    let (verdict, next) = progress::judge(prev, state::now(), &sample, &rules, &names);
    if prev != Some(next)
        && let Some(w) = state::write(&a.cache, &next.line())
    {
        eprintln!("warning: {w}");
    }
    verdict.map_err(|e| match known {
        Some(k) => format!("{e}; these counters advance {} ({})", k.advances, k.source),
        None => e,
    })
}

fn connect(addr: &str, timeout: Duration) -> Result<(), String> {
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or(format!("{addr}: no address"))?;
    TcpStream::connect_timeout(&sock, timeout)
        .map(drop)
        .map_err(|e| format!("{addr} unreachable: {e}"))
}

fn decide(a: &Args) -> Result<String, String> {
    match a.kind.as_str() {
        "worker" => {
            let l = a.leader.as_deref().unwrap_or_default();
            connect(l, a.timeout).map_err(|e| format!("leader {e}"))?;
            Ok(format!("leader {l} reachable"))
        }
        "live" => match a.by {
            LiveBy::Progress => live_by_progress(a),
            LiveBy::Endpoint => live_by_endpoint(a),
            LiveBy::Port => {
                let addr = format!("{}:{}", a.host, a.port);
                connect(&addr, a.timeout)?;
                Ok(format!("port {} open", a.port))
            }
        },
        "startup" => {
            let path = a
                .startup_path
                .clone()
                .or(a.ready_path.clone())
                .or(a.server.map(|s| s.ready_path.to_string()))
                .unwrap_or_default();
            ready_signal(a, &path)
        }
        _ => {
            let table_path = a.server.map(|s| s.ready_path);
            let path = a
                .ready_path
                .clone()
                .or(table_path.map(str::to_string))
                .unwrap_or_default();
            let said = ready_signal(a, &path)?;
            // Where the ready path itself generates (SGLang's /health_generate), it is the smoke.
            let generates = a.server.is_some_and(|s| s.ready_runs_generation)
                && table_path == Some(path.as_str());
            if a.smoke && !generates {
                let m = smoke(a)?;
                return Ok(format!("{said}; {m}"));
            }
            Ok(said)
        }
    }
}

/// `install DIR`: copies this binary to `DIR/probelint-probe` (an init container's job, in an
/// image that has no shell or `cp`). Written beside and renamed, so a restarted init container
/// never leaves a half-copied binary for the probes to exec.
fn install(dir: &str) -> Result<String, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let dest = std::path::Path::new(dir).join("probelint-probe");
    let tmp = dest.with_extension("tmp");
    std::fs::copy(&me, &tmp)
        .and_then(|_| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        })
        .and_then(|()| std::fs::rename(&tmp, &dest))
        .map_err(|e| format!("cannot install into {dir}: {e}"))?;
    Ok(format!("installed {}", dest.display()))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("install") {
        let Some(dir) = argv.get(1).filter(|_| argv.len() == 2) else {
            eprintln!("probelint-probe: usage: probelint-probe install DIR");
            return ExitCode::from(2);
        };
        return match install(dir) {
            Ok(m) => {
                eprintln!("{m}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("probelint-probe: {e}");
                ExitCode::FAILURE
            }
        };
    }
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
