//! `bench-run`: the measuring half of `bench/run.sh`. Each subcommand measures one thing side by
//! side with its baseline, interleaving the two so that a noisy neighbour hits both alike, and
//! writes the medians as JSON; `report` turns the JSON files into the table.

use clap::{Args, Parser, Subcommand};
use hyper::body::Bytes;
use probelint_bench::loadgen::{self, LoadResult, Target};
use probelint_bench::process::{self, Run};
use probelint_bench::stats::median;
use probelint_bench::{review, tls};
use probelint_testkit::net::free_ports;
use probelint_testkit::pki::{Ca, LOOPBACK};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Full lint against parse-only at each corpus size, and the single-file case.
    Lint(LintArgs),
    /// `--fix` and the human output on one file of more and more fixable containers.
    Fix(FixArgs),
    /// Times a command: median wall time over runs, peak RSS.
    Time(TimeArgs),
    /// Counts what probelint (JSON output) and Checkov (JSON output) report on the files whose
    /// name contains `--matching`.
    Findings(FindingsArgs),
    /// The webhook and the two echo servers (on the webhook's listener, on axum-server) under
    /// load on loopback.
    Webhook(WebhookArgs),
    /// Prints the table and writes the Markdown page.
    Report(ReportArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Cmd::Lint(a) => lint(&a),
        Cmd::Fix(a) => fix(&a),
        Cmd::Time(a) => time(&a),
        Cmd::Findings(a) => findings(&a),
        Cmd::Webhook(a) => webhook_bench(&a),
        Cmd::Report(a) => report(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-run: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write_json(path: &Path, value: &Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn count_manifests(dir: &Path) -> Result<usize, String> {
    Ok(std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        .count())
}

// ---------------------------------------------------------------------------------------------
// Linter

/// Runs `a` and `b` alternately, `runs` times each after one warm-up of each.
fn interleaved(
    a: (&str, &[&str]),
    b: (&str, &[&str]),
    runs: usize,
    warmup: usize,
    ok_a: &[i32],
    ok_b: &[i32],
) -> Result<(Vec<Run>, Vec<Run>), String> {
    for _ in 0..warmup {
        process::run_checked(a.0, a.1, ok_a)?;
        process::run_checked(b.0, b.1, ok_b)?;
    }
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for i in 0..runs {
        // Alternate which goes first, so neither always runs on a cache the other warmed.
        if i % 2 == 0 {
            ra.push(process::run_checked(a.0, a.1, ok_a)?);
            rb.push(process::run_checked(b.0, b.1, ok_b)?);
        } else {
            rb.push(process::run_checked(b.0, b.1, ok_b)?);
            ra.push(process::run_checked(a.0, a.1, ok_a)?);
        }
    }
    Ok((ra, rb))
}

fn walls_ms(runs: &[Run]) -> Vec<f64> {
    runs.iter().map(|r| ms(r.wall)).collect()
}

fn max_rss(runs: &[Run]) -> u64 {
    let v: Vec<f64> = runs.iter().map(|r| r.max_rss_kib as f64).collect();
    median(&v) as u64
}

#[derive(Args)]
struct LintArgs {
    #[arg(long)]
    probelint: String,
    #[arg(long)]
    parse_only: String,
    /// Corpus directories, smallest first.
    #[arg(long, required = true, num_args = 1..)]
    corpus: Vec<PathBuf>,
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// One small manifest for the pre-commit case.
    #[arg(long)]
    small: PathBuf,
    #[arg(long, default_value_t = 40)]
    small_runs: usize,
    #[arg(long)]
    out: PathBuf,
}

fn lint(a: &LintArgs) -> Result<(), String> {
    let LintArgs {
        probelint,
        parse_only,
        corpus,
        runs,
        small,
        small_runs,
        out,
    } = a;
    let (runs, small_runs) = (*runs, *small_runs);
    let lint_ok = [0, 1];
    // Process start-up: the same binary printing its version.
    let small_s = small.to_string_lossy().to_string();
    let (file_runs, version_runs) = interleaved(
        (probelint, &[small_s.as_str()]),
        (probelint, &["--version"]),
        small_runs,
        3,
        &lint_ok,
        &[0],
    )?;
    let file_ms = median(&walls_ms(&file_runs));
    let version_ms = median(&walls_ms(&version_runs));
    eprintln!(
        "  single file: probelint {} {file_ms:.2} ms, --version {version_ms:.2} ms ({:.2}x)",
        small.display(),
        file_ms / version_ms
    );
    let mut sizes = Vec::new();
    for dir in corpus {
        let files = count_manifests(dir)?;
        let d = dir.to_string_lossy().to_string();
        let (full, parse) = interleaved(
            (probelint, &[d.as_str()]),
            (parse_only, &[d.as_str()]),
            runs,
            1,
            &lint_ok,
            &[0],
        )?;
        let full_ms = median(&walls_ms(&full));
        let parse_ms = median(&walls_ms(&parse));
        let per_file_us = (full_ms - version_ms).max(0.0) * 1e3 / files as f64;
        let parse_per_file_us = (parse_ms).max(0.0) * 1e3 / files as f64;
        eprintln!(
            "  {files:>6} files: lint {full_ms:9.2} ms ({per_file_us:6.1} us/file after start-up), parse-only {parse_ms:9.2} ms, ratio {:.2}, RSS {} / {} KiB",
            full_ms / parse_ms,
            max_rss(&full),
            max_rss(&parse)
        );
        sizes.push(json!({
            "files": files,
            "lint_ms": full_ms,
            "parse_only_ms": parse_ms,
            "ratio": full_ms / parse_ms,
            "lint_us_per_file": per_file_us,
            "parse_only_us_per_file": parse_per_file_us,
            "lint_max_rss_kib": max_rss(&full),
            "parse_only_max_rss_kib": max_rss(&parse),
            "lint_runs_ms": walls_ms(&full),
            "parse_only_runs_ms": walls_ms(&parse),
        }));
    }
    write_json(
        out,
        &json!({
            "runs": runs,
            "small": {
                "file": small_s,
                "bytes": std::fs::metadata(small).map(|m| m.len()).unwrap_or(0),
                "runs": small_runs,
                "lint_ms": file_ms,
                "version_ms": version_ms,
                "ratio": file_ms / version_ms,
            },
            "sizes": sizes,
        }),
    )
}

#[derive(Args)]
struct FixArgs {
    #[arg(long)]
    probelint: String,
    /// Fixable GPU containers in the one file, smallest first.
    #[arg(long, value_delimiter = ',', default_value = "500,1000,2000,8000")]
    containers: Vec<usize>,
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[arg(long)]
    out: PathBuf,
}

/// For each size, interleaved: `probelint --fix --format json` on a fresh copy of the file, and
/// `probelint FILE` (human output, 2 findings per container), each minus `probelint
/// --version`. Flat per-container and per-finding times mean both grow linearly.
fn fix(a: &FixArgs) -> Result<(), String> {
    let dir =
        TempDir(std::env::temp_dir().join(format!("probelint-bench-fix-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).map_err(|e| e.to_string())?;
    let ok = [0, 1];
    let mut sizes = Vec::new();
    for &n in &a.containers {
        let original = dir.0.join(format!("pod-{n}.yaml"));
        std::fs::write(&original, probelint_bench::corpus::fixable_pod(n))
            .map_err(|e| e.to_string())?;
        sizes.push((n, original, dir.0.join(format!("fix-{n}.yaml"))));
    }
    let fresh = |original: &Path, work: &Path| {
        std::fs::copy(original, work)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let s = |p: &Path| p.to_string_lossy().into_owned();
    // Warm-up, and a check that --fix fixes every container.
    for (n, original, work) in &sizes {
        fresh(original, work)?;
        process::run_checked(&a.probelint, &["--fix", "--format", "json", &s(work)], &ok)?;
        let fixed = std::fs::read_to_string(work).map_err(|e| e.to_string())?;
        let probes = fixed.matches("startupProbe:").count();
        if probes != *n {
            return Err(format!(
                "--fix added {probes} startup probes to {n} containers"
            ));
        }
    }
    let mut version = Vec::new();
    let mut fix_ms: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    let mut human_ms: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    for round in 0..a.runs {
        version.push(ms(process::run_checked(
            &a.probelint,
            &["--version"],
            &[0],
        )?
        .wall));
        // Alternate the order, so no size always runs on a cache another warmed.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..sizes.len()).collect()
        } else {
            (0..sizes.len()).rev().collect()
        };
        for i in order {
            let (_, original, work) = &sizes[i];
            fresh(original, work)?;
            let run =
                process::run_checked(&a.probelint, &["--fix", "--format", "json", &s(work)], &ok)?;
            fix_ms[i].push(ms(run.wall));
            human_ms[i].push(ms(process::run_checked(
                &a.probelint,
                &[&s(original)],
                &ok,
            )?
            .wall));
        }
    }
    let version_ms = median(&version);
    let mut results = Vec::new();
    for (i, (n, _, _)) in sizes.iter().enumerate() {
        let (fix, human) = (median(&fix_ms[i]), median(&human_ms[i]));
        let findings = 2 * n;
        let per_container = (fix - version_ms).max(0.0) * 1e3 / *n as f64;
        let per_finding = (human - version_ms).max(0.0) * 1e3 / findings as f64;
        eprintln!(
            "  {n:>6} containers: --fix {fix:9.1} ms ({per_container:6.1} us/container), human output {human:8.1} ms ({per_finding:5.1} us/finding)"
        );
        results.push(json!({
            "containers": n,
            "findings": findings,
            "fix_ms": fix,
            "fix_us_per_container": per_container,
            "human_ms": human,
            "human_us_per_finding": per_finding,
            "fix_runs_ms": fix_ms[i],
            "human_runs_ms": human_ms[i],
        }));
    }
    write_json(
        &a.out,
        &json!({"runs": a.runs, "version_ms": version_ms, "sizes": results}),
    )
}

#[derive(Args)]
struct TimeArgs {
    #[arg(long)]
    name: String,
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[arg(long, default_value_t = 0)]
    warmup: usize,
    /// Exit codes that count as success.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    ok: Vec<i32>,
    /// Keep the standard output of the last run here.
    #[arg(long)]
    stdout: Option<PathBuf>,
    /// Give up on further runs once this many seconds have been spent (at least one run).
    #[arg(long, default_value_t = 600.0)]
    budget_s: f64,
    /// A baseline to time side by side: run after each run of the command...
    #[arg(long)]
    paired_program: Option<String>,
    /// ...with these arguments (repeat the option for each)...
    #[arg(long, allow_hyphen_values = true)]
    paired_arg: Vec<String>,
    /// ...this many times.
    #[arg(long, default_value_t = 3)]
    paired_runs: usize,
    /// Exit codes of the paired command that count as success.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    paired_ok: Vec<i32>,
    #[arg(long)]
    out: PathBuf,
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn time(a: &TimeArgs) -> Result<(), String> {
    let name = &a.name;
    let program = &a.command[0];
    let args: Vec<&str> = a.command[1..].iter().map(String::as_str).collect();
    let paired_args: Vec<&str> = a.paired_arg.iter().map(String::as_str).collect();
    for _ in 0..a.warmup {
        process::run_checked(program, &args, &a.ok)?;
    }
    if let Some(p) = &a.paired_program {
        process::run_checked(p, &paired_args, &a.paired_ok)?;
    }
    let started = Instant::now();
    let mut walls = Vec::new();
    let mut rss = Vec::new();
    let mut paired_walls = Vec::new();
    let runs = a.runs.max(1);
    let stdout = a.stdout.as_deref();
    for i in 0..runs {
        if i > 0 && started.elapsed().as_secs_f64() > a.budget_s {
            eprintln!("  {name}: time budget spent after {i} runs");
            break;
        }
        let r = match (i + 1 == runs, stdout) {
            (true, Some(path)) => run_to_file(program, &args, path, &a.ok)?,
            _ => process::run_checked(program, &args, &a.ok)?,
        };
        walls.push(r.wall.as_secs_f64());
        rss.push(r.max_rss_kib as f64);
        let mut line = format!("  {name}: run {} {:.3} s", i + 1, r.wall.as_secs_f64());
        if let Some(p) = &a.paired_program {
            let n = a.paired_runs;
            let mut these = Vec::new();
            for _ in 0..n {
                these.push(
                    process::run_checked(p, &paired_args, &a.paired_ok)?
                        .wall
                        .as_secs_f64(),
                );
            }
            let _ = write!(line, "; paired {:.3} s (median of {n})", median(&these));
            paired_walls.extend(these);
        }
        eprintln!("{line}");
    }
    if let Some(path) = stdout
        && !path.exists()
    {
        // The budget stopped the loop before the last run: keep one output anyway.
        run_to_file(program, &args, path, &a.ok)?;
    }
    let mut result = json!({
        "name": name,
        "command": a.command,
        "runs_s": walls,
        "median_s": median(&walls),
        "max_rss_kib": median(&rss),
    });
    if let Some(p) = &a.paired_program {
        result["paired_command"] = json!([p].into_iter().chain(&a.paired_arg).collect::<Vec<_>>());
        result["paired_runs_s"] = json!(paired_walls);
        result["paired_median_s"] = json!(median(&paired_walls));
    }
    write_json(&a.out, &result)
}

/// Like [`process::run_checked`] but with standard output written to `path`.
fn run_to_file(program: &str, args: &[&str], path: &Path, ok: &[i32]) -> Result<Run, String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let wall = start.elapsed();
    let code = status.code().unwrap_or(-1);
    if !ok.contains(&code) {
        return Err(format!("{program} {} exited with {code}", args.join(" ")));
    }
    Ok(Run {
        wall,
        max_rss_kib: 0,
        code,
    })
}

#[derive(Args)]
struct FindingsArgs {
    #[arg(long)]
    probelint_json: PathBuf,
    #[arg(long)]
    checkov_json: Option<PathBuf>,
    #[arg(long)]
    corpus: PathBuf,
    #[arg(long)]
    matching: String,
    #[arg(long)]
    out: PathBuf,
}

fn findings(a: &FindingsArgs) -> Result<(), String> {
    let FindingsArgs {
        probelint_json,
        checkov_json,
        corpus,
        matching,
        out,
    } = a;
    let matched: Vec<String> = std::fs::read_dir(corpus)
        .map_err(|e| format!("{}: {e}", corpus.display()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(matching))
        .collect();
    let is_matched = |path: &str| {
        let name = path.rsplit('/').next().unwrap_or(path);
        matched.iter().any(|m| m == name)
    };
    let lint = read_json(probelint_json)
        .ok_or_else(|| format!("{}: not probelint JSON", probelint_json.display()))?;
    let mut by_rule: BTreeMap<String, u64> = BTreeMap::new();
    let mut flagged_files = std::collections::BTreeSet::new();
    let mut total = 0u64;
    for f in lint["findings"].as_array().into_iter().flatten() {
        let file = f["file"].as_str().unwrap_or_default();
        if !is_matched(file) {
            continue;
        }
        total += 1;
        *by_rule
            .entry(f["rule"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
        if f["rule"] == "readiness-port-open" {
            flagged_files.insert(file.to_owned());
        }
    }
    let corpus_bytes: u64 = std::fs::read_dir(corpus)
        .map_err(|e| format!("{}: {e}", corpus.display()))?
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let mut result = json!({
        "corpus_files": count_manifests(corpus)?,
        "corpus_bytes": corpus_bytes,
        "probelint_json_bytes": std::fs::metadata(probelint_json).map(|m| m.len()).unwrap_or(0),
        "probelint_findings_whole_corpus": lint["findings"].as_array().map_or(0, Vec::len),
        "matching": matching,
        "files": matched.len(),
        "probelint_findings": total,
        "probelint_by_rule": by_rule,
        "probelint_readiness_port_open_files": flagged_files.len(),
    });
    if let Some(path) = checkov_json
        && let Some(ck) = read_json(path)
    {
        // One framework gives one object; several give a list of them.
        let reports: Vec<&Value> = match &ck {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        let (mut failed, mut passed) = (0u64, 0u64);
        let mut failed_all = 0u64;
        for r in reports {
            for (key, counter) in [
                ("failed_checks", &mut failed),
                ("passed_checks", &mut passed),
            ] {
                for c in r["results"][key].as_array().into_iter().flatten() {
                    if key == "failed_checks" {
                        failed_all += 1;
                    }
                    if is_matched(c["file_path"].as_str().unwrap_or_default()) {
                        *counter += 1;
                    }
                }
            }
        }
        result["checkov_failed"] = json!(failed);
        result["checkov_passed"] = json!(passed);
        result["checkov_failed_whole_corpus"] = json!(failed_all);
    }
    eprintln!("  findings on {matching} files: {result}");
    write_json(out, &result)
}

// ---------------------------------------------------------------------------------------------
// Webhook

/// The echo on the webhook's own listener (`echo-listener`): the yardstick of the targets.
const SAME_STACK: &str = "echo-listener";
/// The echo on axum-server (`echo-server`): the yardstick before `echo-listener`.
const AXUM: &str = "echo";

#[derive(Args)]
struct WebhookArgs {
    #[arg(long)]
    webhook: String,
    /// `echo-server`: the echo on axum-server.
    #[arg(long)]
    echo: String,
    /// `echo-listener`: the echo on the webhook's own listener and TLS.
    #[arg(long)]
    echo_listener: String,
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Seconds of warm-up before each measured window.
    #[arg(long = "warmup-s", default_value = "1", value_parser = seconds)]
    warmup: Duration,
    /// Seconds of the closed loop.
    #[arg(long = "closed-s", default_value = "4", value_parser = seconds)]
    closed: Duration,
    /// Seconds of the open loop, at each rate.
    #[arg(long = "open-s", default_value = "6", value_parser = seconds)]
    open: Duration,
    /// The open loop's rates, as fractions of the same-stack echo's (`echo-listener`'s) max
    /// throughput (comma-separated; 0.5 is the one the latency target is set at).
    #[arg(
        long = "open-fractions",
        value_delimiter = ',',
        default_value = "0.25,0.5,0.75"
    )]
    open_fractions: Vec<f64>,
    /// Connections of the closed loop.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Connection pool of the open loop.
    #[arg(long, default_value_t = 64)]
    open_connections: usize,
    /// Threads of the load generator's runtime.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    #[arg(long)]
    out: PathBuf,
}

fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    Duration::try_from_secs_f64(v).map_err(|e| format!("{s:?}: {e}"))
}

/// A server process killed when dropped, whatever happens to the benchmark.
struct Server {
    child: Child,
    name: &'static str,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails if any of the servers has exited.
fn all_alive(servers: &mut [Server]) -> Result<(), String> {
    for s in servers {
        match s.child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => return Err(format!("{} exited: {status}", s.name)),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn webhook_bench(args: &WebhookArgs) -> Result<(), String> {
    let dir =
        TempDir(std::env::temp_dir().join(format!("probelint-bench-tls-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).map_err(|e| e.to_string())?;
    let ca = Ca::new("probelint bench CA");
    let leaf = ca.server("probelint-bench", LOOPBACK);
    let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
    std::fs::write(&cert, &leaf.cert_pem).map_err(|e| e.to_string())?;
    std::fs::write(&key, &leaf.key_pem).map_err(|e| e.to_string())?;
    let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());

    // Bound, then released: the servers bind them a moment later (the webhook logs nowhere
    // here, so it cannot report a port of its own choosing).
    let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let [webhook_port, metrics_port, echo_port, listener_port] = free_ports();
    let (webhook_addr, metrics_addr, echo_addr, listener_addr) = (
        loopback(webhook_port),
        loopback(metrics_port),
        loopback(echo_port),
        loopback(listener_port),
    );
    let spawn = |program: &str, args: &[&str], name: &'static str| -> Result<Server, String> {
        // Logs go nowhere: they are formatted (the webhook logs one line per review at the
        // default level) but not stored.
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec. If
        // bench-run dies (a timeout, Ctrl-C), the kernel kills the server too: no server is
        // ever left listening on loopback.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        Ok(Server { child, name })
    };
    let webhook = spawn(
        &args.webhook,
        &[
            "--listen",
            &webhook_addr.to_string(),
            "--metrics-listen",
            &metrics_addr.to_string(),
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
        "probelint-webhook",
    )?;
    let echo = spawn(
        &args.echo,
        &[
            "--listen",
            &echo_addr.to_string(),
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
        "echo-server",
    )?;
    let listener = spawn(
        &args.echo_listener,
        &[
            "--listen",
            &listener_addr.to_string(),
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
        "echo-listener",
    )?;
    let (webhook_pid, echo_pid, listener_pid) =
        (webhook.child.id(), echo.child.id(), listener.child.id());
    let mut servers = [webhook, echo, listener];

    let runtime = if args.client_threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.client_threads)
            .enable_all()
            .build()
    }
    .map_err(|e| e.to_string())?;
    let client = tls::client_config(ca.pem.as_bytes())?;
    let target = |addr: SocketAddr, path: &str, pid: u32| Target {
        addr,
        path: path.to_owned(),
        tls: client.clone(),
        server_pid: Some(pid),
    };
    let targets = [
        (SAME_STACK, target(listener_addr, "/echo", listener_pid)),
        (AXUM, target(echo_addr, "/echo", echo_pid)),
        ("validate", target(webhook_addr, "/validate", webhook_pid)),
        ("mutate", target(webhook_addr, "/mutate", webhook_pid)),
    ];
    let bodies = review::bodies();
    let payloads: Arc<Vec<Bytes>> =
        Arc::new(bodies.iter().map(|b| Bytes::from(b.json.clone())).collect());

    let result = runtime.block_on(async {
        // Wait (bounded) for every server to answer.
        for (name, t) in &targets {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                all_alive(&mut servers)?;
                match loadgen::connect(t).await {
                    Ok(_) => break,
                    Err(e) if Instant::now() > deadline => {
                        return Err(format!("{name} did not come up: {e}"));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }
        let sanity = sanity_check(&targets, &bodies).await?;
        eprintln!("  responses: {sanity}");

        let closed = pass("closed loop", &targets, args.reps, &mut servers, async |t| {
            loadgen::closed_loop(t, payloads.clone(), args.connections, args.warmup, args.closed)
                .await
        })
        .await?;
        let median_rate =
            |runs: &[LoadResult]| median(&runs.iter().map(|r| r.rate).collect::<Vec<_>>());
        // Latency at fixed rates, fractions of the same-stack echo's max: one rate does not show
        // whether a p99 is the server's own or its queue's (at half the echo's max a slower
        // server is nearer its own limit than the echo is). Both echoes run at the same rates.
        let echo_max = median_rate(&closed[SAME_STACK]);
        let rates: Vec<(f64, f64)> = args
            .open_fractions
            .iter()
            .map(|&fraction| (fraction, (echo_max * fraction).max(1.0)))
            .collect();
        let open = open_passes(&targets, &rates, args.reps, &mut servers, async |t, rate| {
            let (pool, warmup) = (args.open_connections, args.warmup);
            loadgen::open_loop(t, payloads.clone(), rate, pool, warmup, args.open).await
        })
        .await?;
        let summary = |runs: &[LoadResult]| {
            let med = |get: fn(&LoadResult) -> f64| median(&runs.iter().map(get).collect::<Vec<_>>());
            json!({
                "rate": median_rate(runs),
                "p50_us": med(|r| r.p50_us),
                "p99_us": med(|r| r.p99_us),
                "max_us": runs.iter().map(|r| r.max_us).fold(0.0, f64::max),
                "errors": runs.iter().map(|r| r.errors).sum::<u64>(),
                "completed": runs.iter().map(|r| r.completed).sum::<u64>(),
                "server_cpu_us": med(|r| r.server_cpu_us),
                "client_cpu_us": med(|r| r.client_cpu_us),
                "runs_rate": runs.iter().map(|r| r.rate).collect::<Vec<_>>(),
                "runs_p99_us": runs.iter().map(|r| r.p99_us).collect::<Vec<_>>(),
                "runs_server_cpu_us": runs.iter().map(|r| r.server_cpu_us).collect::<Vec<_>>(),
            })
        };
        let by_target = |results: &BTreeMap<&'static str, Vec<LoadResult>>| {
            let mut map = serde_json::Map::new();
            for (name, _) in &targets {
                map.insert((*name).to_owned(), summary(&results[name]));
            }
            Value::Object(map)
        };
        let open_json: Vec<Value> = rates
            .iter()
            .zip(&open)
            .map(|((fraction, rate), results)| {
                json!({"fraction": fraction, "rate": rate, "servers": by_target(results)})
            })
            .collect();
        Ok::<Value, String>(json!({
            "reps": args.reps,
            "connections": args.connections,
            "open_connections": args.open_connections,
            "client_threads": args.client_threads,
            "warmup_s": args.warmup.as_secs_f64(),
            "closed_s": args.closed.as_secs_f64(),
            "open_s": args.open.as_secs_f64(),
            "bodies": bodies.iter().map(|b| json!({"name": b.name, "bytes": b.json.len()})).collect::<Vec<_>>(),
            "responses": sanity,
            "closed": by_target(&closed),
            "open_rates_of": SAME_STACK,
            "open_rates": open_json,
        }))
    });
    drop(servers);
    write_json(&args.out, &result?)
}

/// Runs `one` on every target, `reps` times, the targets interleaved; after each round, fails
/// if a server has exited.
async fn pass(
    label: &str,
    targets: &[(&'static str, Target)],
    reps: usize,
    servers: &mut [Server],
    one: impl AsyncFn(&Target) -> Result<LoadResult, String>,
) -> Result<BTreeMap<&'static str, Vec<LoadResult>>, String> {
    let mut results: BTreeMap<&'static str, Vec<LoadResult>> = BTreeMap::new();
    for rep in 1..=reps {
        for (name, t) in targets {
            let r = one(t).await?;
            log_run(label, rep, reps, name, &r);
            results.entry(name).or_default().push(r);
        }
        all_alive(servers)?;
    }
    Ok(results)
}

/// Runs `one` on every target at every rate, `reps` times: each repetition goes through the
/// rates and, at each, the targets in turn (so that a disturbance hits them alike); after each
/// repetition, fails if a server has exited. One map of results per rate, in `rates`' order.
async fn open_passes(
    targets: &[(&'static str, Target)],
    rates: &[(f64, f64)],
    reps: usize,
    servers: &mut [Server],
    one: impl AsyncFn(&Target, f64) -> Result<LoadResult, String>,
) -> Result<Vec<BTreeMap<&'static str, Vec<LoadResult>>>, String> {
    let mut results = vec![BTreeMap::new(); rates.len()];
    for rep in 1..=reps {
        for ((_, rate), at_rate) in rates.iter().zip(&mut results) {
            for (name, t) in targets {
                let r = one(t, *rate).await?;
                log_run(&format!("open loop at {rate:.0}/s"), rep, reps, name, &r);
                at_rate.entry(*name).or_insert_with(Vec::new).push(r);
            }
        }
        all_alive(servers)?;
    }
    Ok(results)
}

fn log_run(label: &str, rep: usize, reps: usize, name: &str, r: &LoadResult) {
    eprintln!(
        "  {label} {rep}/{reps} {name:>13}: {:8.0} req/s, p50 {:6.0} us, p99 {:6.0} us, max {:6.0} us, errors {}, CPU/request server {:5.1} us, client {:5.1} us",
        r.rate, r.p50_us, r.p99_us, r.max_us, r.errors, r.server_cpu_us, r.client_cpu_us
    );
}

/// Each endpoint answers each body as it should before anything is timed.
async fn sanity_check(
    targets: &[(&str, Target)],
    bodies: &[review::Body],
) -> Result<Value, String> {
    let mut seen = serde_json::Map::new();
    for (name, t) in targets {
        let mut sender = loadgen::connect(t).await?;
        for body in bodies {
            let bytes = Bytes::from(body.json.clone());
            let answer = loadgen::post(&mut sender, &t.path, &bytes).await?;
            let v: Value = serde_json::from_slice(&answer).map_err(|e| format!("{name}: {e}"))?;
            let sent: Value = serde_json::from_slice(&body.json).map_err(|e| e.to_string())?;
            let response = &v["response"];
            if response["uid"] != sent["request"]["uid"] {
                return Err(format!(
                    "{name} answered {} with the wrong uid: {v}",
                    body.name
                ));
            }
            let allowed = response["allowed"].as_bool().unwrap_or(false);
            let patched = response.get("patch").is_some_and(|p| !p.is_null());
            let expected = match (*name, body.name) {
                (SAME_STACK | AXUM, _) | (_, "gpu-deployment-clean") => allowed && !patched,
                ("validate", "gpu-deployment-with-findings") => !allowed,
                ("mutate", "gpu-pod-needs-mutation") => allowed && patched,
                _ => true,
            };
            if !expected {
                return Err(format!(
                    "{name} gave an unexpected answer to {}: {v}",
                    body.name
                ));
            }
            seen.insert(
                format!("{name} {}", body.name),
                json!(if !allowed {
                    "denied"
                } else if patched {
                    "patched"
                } else {
                    "allowed"
                }),
            );
        }
    }
    Ok(Value::Object(seen))
}

// ---------------------------------------------------------------------------------------------
// Report

#[derive(Args)]
struct ReportArgs {
    #[arg(long)]
    results: PathBuf,
    #[arg(long)]
    criterion: PathBuf,
    #[arg(long)]
    markdown: PathBuf,
    #[arg(long)]
    nproc: String,
    #[arg(long)]
    date: String,
    #[arg(long, default_value = "")]
    cpu: String,
    #[arg(long, default_value = "")]
    commit: String,
    #[arg(long, default_value = "")]
    seconds: String,
    #[arg(long, default_value = "")]
    notes: String,
}

struct Row {
    figure: String,
    value: String,
    baseline: String,
    ratio: String,
    target: String,
    verdict: &'static str,
}

fn verdict(ok: bool) -> &'static str {
    if ok { "pass" } else { "FAIL" }
}

fn fmt_ms(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} s", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.2} ms")
    }
}

fn fmt_us(v: f64) -> String {
    if v >= 10_000.0 {
        fmt_ms(v / 1e3)
    } else {
        format!("{v:.0} µs")
    }
}

/// `p99 (p50 …), N errors` of one latency summary.
fn latency(o: &Value) -> String {
    format!(
        "{} (p50 {}), {} errors",
        fmt_us(f(&o["p99_us"])),
        fmt_us(f(&o["p50_us"])),
        o["errors"]
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Criterion's median estimate for a benchmark id, in nanoseconds.
fn criterion_ns(dir: &Path, id: &str) -> Option<f64> {
    let v = read_json(&dir.join(id).join("new").join("estimates.json"))?;
    v["median"]["point_estimate"].as_f64()
}

fn report(a: &ReportArgs) -> Result<(), String> {
    let r = |name: &str| read_json(&a.results.join(name));
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    if let Some(lint) = r("lint.json") {
        let sizes = lint["sizes"].as_array().cloned().unwrap_or_default();
        for s in &sizes {
            let files = s["files"].as_u64().unwrap_or(0);
            let ratio = f(&s["ratio"]);
            let is_largest = Some(s) == sizes.last();
            rows.push(Row {
                figure: format!("lint {files} files (wall)"),
                value: fmt_ms(f(&s["lint_ms"])),
                baseline: format!("parse-only {}", fmt_ms(f(&s["parse_only_ms"]))),
                ratio: format!("{ratio:.2}x"),
                target: if is_largest {
                    "≤ 1.3x".into()
                } else {
                    "(info)".into()
                },
                verdict: if is_largest {
                    verdict(ratio <= 1.3)
                } else {
                    "info"
                },
            });
        }
        if let (Some(first), Some(last)) = (sizes.first(), sizes.last()) {
            let per: Vec<String> = sizes
                .iter()
                .map(|s| format!("{}: {:.1}", s["files"], f(&s["lint_us_per_file"])))
                .collect();
            // Growth is what matters: the largest corpus against the cheapest of the others
            // (the smallest alone is a few milliseconds after start-up, so noisy).
            let others = &sizes[..sizes.len() - 1];
            let reference = others
                .iter()
                .min_by(|a, b| f(&a["lint_us_per_file"]).total_cmp(&f(&b["lint_us_per_file"])))
                .unwrap_or(first);
            let ratio = f(&last["lint_us_per_file"]) / f(&reference["lint_us_per_file"]);
            rows.push(Row {
                figure: "lint µs/file (minus start-up)".into(),
                value: per.join(", "),
                baseline: format!("{} files", reference["files"]),
                ratio: format!("{ratio:.2}x"),
                target: format!("{} files ≤ 1.25x the cheaper smaller size", last["files"]),
                verdict: verdict(ratio <= 1.25),
            });
            let rss = |s: &Value, k: &str| s[k].as_f64().unwrap_or(0.0) / 1024.0;
            let growth_kib = (f(&last["lint_max_rss_kib"]) - f(&first["lint_max_rss_kib"]))
                / (f(&last["files"]) - f(&first["files"])).max(1.0);
            // What the run must keep: its findings (their JSON output is a fair measure of
            // the text they hold) and the text of the files, kept to quote source lines.
            let kept_kib = r("findings.json")
                .map(|fd| {
                    (f(&fd["probelint_json_bytes"]) + f(&fd["corpus_bytes"]))
                        / f(&fd["corpus_files"]).max(1.0)
                        / 1024.0
                })
                .unwrap_or(f64::NAN);
            let ratio = growth_kib / kept_kib;
            rows.push(Row {
                figure: format!("lint max RSS, {} files", last["files"]),
                value: format!(
                    "{:.1} MiB (+{growth_kib:.1} KiB/file)",
                    rss(last, "lint_max_rss_kib")
                ),
                baseline: format!(
                    "kept: findings + text {kept_kib:.1} KiB/file (parse-only {:.1} MiB)",
                    rss(last, "parse_only_max_rss_kib")
                ),
                ratio: format!("{ratio:.1}x"),
                target: "growth ≤ 2x what is kept".into(),
                verdict: verdict(ratio <= 2.0),
            });
            notes.push(format!(
                "Max RSS of the full lint: {} at {} files, i.e. {growth_kib:.1} KiB per extra file; parse-only: {:.1} MiB at {} files.",
                sizes
                    .iter()
                    .map(|s| format!("{:.1} MiB", rss(s, "lint_max_rss_kib")))
                    .collect::<Vec<_>>()
                    .join(" / "),
                sizes
                    .iter()
                    .map(|s| s["files"].to_string())
                    .collect::<Vec<_>>()
                    .join(" / "),
                rss(last, "parse_only_max_rss_kib"),
                last["files"],
            ));
        }
        let s = &lint["small"];
        let ratio = f(&s["ratio"]);
        rows.push(Row {
            figure: format!("single file ({} B), whole process", s["bytes"]),
            value: fmt_ms(f(&s["lint_ms"])),
            baseline: format!("--version {}", fmt_ms(f(&s["version_ms"]))),
            ratio: format!("{ratio:.2}x"),
            target: "< 2x".into(),
            verdict: verdict(ratio < 2.0),
        });
    }

    if let Some(fx) = r("fix.json") {
        let sizes = fx["sizes"].as_array().cloned().unwrap_or_default();
        for (figure, key, unit) in [
            (
                "--fix µs/container, one file (minus start-up)",
                "fix_us_per_container",
                "containers",
            ),
            (
                "human output µs/finding, one file (minus start-up)",
                "human_us_per_finding",
                "containers",
            ),
        ] {
            let (Some(first), Some(last)) = (sizes.first(), sizes.last()) else {
                continue;
            };
            let per: Vec<String> = sizes
                .iter()
                .map(|s| format!("{}: {:.1}", s["containers"], f(&s[key])))
                .collect();
            // As for the lint: the largest against the cheapest smaller size.
            let reference = sizes[..sizes.len() - 1]
                .iter()
                .min_by(|a, b| f(&a[key]).total_cmp(&f(&b[key])))
                .unwrap_or(first);
            let ratio = f(&last[key]) / f(&reference[key]);
            rows.push(Row {
                figure: figure.into(),
                value: per.join(", "),
                baseline: format!("{} {unit}", reference["containers"]),
                ratio: format!("{ratio:.2}x"),
                target: format!(
                    "{} {unit} ≤ 1.5x the cheaper smaller size",
                    last["containers"]
                ),
                verdict: verdict(ratio <= 1.5),
            });
        }
    }

    let lint_sizes = r("lint.json")
        .and_then(|l| l["sizes"].as_array().cloned())
        .unwrap_or_default();
    for n in [1000u64, 2000] {
        let Some(ck) = r(&format!("checkov-{n}.json")) else {
            continue;
        };
        let ours = ck
            .get("paired_median_s")
            .and_then(Value::as_f64)
            .map(|s| s * 1e3)
            .or_else(|| r(&format!("probelint-{n}.json")).map(|p| f(&p["median_s"]) * 1e3))
            .or_else(|| {
                lint_sizes
                    .iter()
                    .find(|s| s["files"].as_u64() == Some(n))
                    .map(|s| f(&s["lint_ms"]))
            });
        let Some(ours) = ours else { continue };
        let theirs = f(&ck["median_s"]) * 1e3;
        let ratio = theirs / ours;
        let runs = ck["runs_s"].as_array().map_or(0, Vec::len);
        rows.push(Row {
            figure: format!(
                "Checkov {n} files (CKV_K8S_8,9; {runs} run{})",
                if runs == 1 { "" } else { "s" }
            ),
            value: format!("probelint {}", fmt_ms(ours)),
            baseline: format!("Checkov {}", fmt_ms(theirs)),
            ratio: format!("{ratio:.0}x faster"),
            target: "≥ 200x".into(),
            verdict: verdict(ratio >= 200.0),
        });
    }
    if let Some(fd) = r("findings.json") {
        let files = fd["files"].as_u64().unwrap_or(0);
        let flagged = fd["probelint_readiness_port_open_files"]
            .as_u64()
            .unwrap_or(0);
        let ck_failed = fd.get("checkov_failed").and_then(Value::as_u64);
        let ck_passed = fd.get("checkov_passed").and_then(Value::as_u64);
        rows.push(Row {
            figure: format!("findings on the {files} tcpSocket-readiness files"),
            value: format!(
                "probelint {} ({flagged} files readiness-port-open)",
                fd["probelint_findings"]
            ),
            baseline: match (ck_failed, ck_passed) {
                (Some(failed), Some(passed)) => format!("Checkov {failed} failed, {passed} passed"),
                _ => "Checkov not run".into(),
            },
            ratio: "".into(),
            target: "probelint flags all, Checkov passes".into(),
            verdict: verdict(flagged == files && files > 0 && ck_failed.is_none_or(|c| c == 0)),
        });
    }

    if let Some(wh) = r("webhook.json") {
        // Two yardsticks: the echo on the webhook's own listener and TLS (the targets' since
        // it exists: against it the ratio is the judging alone), and the echo on axum-server
        // (the yardstick before it: against it the ratio mixes in the transport).
        let same_c = &wh["closed"][SAME_STACK];
        let axum_c = &wh["closed"][AXUM];
        let conns = &wh["connections"];
        for ep in ["validate", "mutate"] {
            let c = &wh["closed"][ep];
            let ratio = f(&c["rate"]) / f(&same_c["rate"]);
            rows.push(Row {
                figure: format!("webhook /{ep} max throughput ({conns} conns) vs same-stack echo"),
                value: format!("{:.0} req/s", f(&c["rate"])),
                baseline: format!("same-stack echo {:.0} req/s", f(&same_c["rate"])),
                ratio: format!("{ratio:.2}x"),
                target: "≥ 0.8x".into(),
                verdict: verdict(ratio >= 0.8),
            });
        }
        for ep in ["validate", "mutate"] {
            let c = &wh["closed"][ep];
            rows.push(Row {
                figure: format!(
                    "webhook /{ep} max throughput ({conns} conns) vs axum echo (old yardstick)"
                ),
                value: format!("{:.0} req/s", f(&c["rate"])),
                baseline: format!("axum echo {:.0} req/s", f(&axum_c["rate"])),
                ratio: format!("{:.2}x", f(&c["rate"]) / f(&axum_c["rate"])),
                target: "(context)".into(),
                verdict: "info",
            });
        }
        rows.push(Row {
            figure: format!(
                "same-stack echo max throughput ({conns} conns) vs axum echo (the transport)"
            ),
            value: format!("{:.0} req/s", f(&same_c["rate"])),
            baseline: format!("axum echo {:.0} req/s", f(&axum_c["rate"])),
            ratio: format!("{:.2}x", f(&same_c["rate"]) / f(&axum_c["rate"])),
            target: "(report)".into(),
            verdict: "info",
        });
        // CPU per request in the closed loop: what the throughput ratio comes from, and far
        // steadier than a rate when other work shares the machine.
        let (same_cpu, axum_cpu) = (f(&same_c["server_cpu_us"]), f(&axum_c["server_cpu_us"]));
        for ep in ["validate", "mutate"] {
            let ours = f(&wh["closed"][ep]["server_cpu_us"]);
            if ours.is_nan() || same_cpu.is_nan() {
                continue;
            }
            rows.push(Row {
                figure: format!("webhook /{ep} server CPU per request (closed loop) vs same-stack echo"),
                value: format!("{ours:.1} µs"),
                baseline: format!(
                    "same-stack echo {same_cpu:.1} µs, axum echo {axum_cpu:.1} µs (load generator {:.1} µs)",
                    f(&same_c["client_cpu_us"])
                ),
                ratio: format!("{:.2}x", ours / same_cpu),
                target: "(report)".into(),
                verdict: "info",
            });
        }
        if !same_cpu.is_nan() && !axum_cpu.is_nan() {
            rows.push(Row {
                figure: "same-stack echo server CPU per request (closed loop) vs axum echo (the transport)".into(),
                value: format!("{same_cpu:.1} µs"),
                baseline: format!("axum echo {axum_cpu:.1} µs"),
                ratio: format!("{:.2}x", same_cpu / axum_cpu),
                target: "(report)".into(),
                verdict: "info",
            });
        }
        // Latency at fixed rates, fractions of the same-stack echo's max (both echoes run at
        // them); the target is set at half.
        let passes: Vec<(&Value, f64, f64)> = wh["open_rates"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| (&r["servers"], f(&r["rate"]), f(&r["fraction"])))
            .collect();
        // Where each rate falls against each server's own max: past it, a p99 is only how long
        // the queue grew in the window.
        let shares: Vec<String> = [
            (SAME_STACK, "same-stack echo"),
            (AXUM, "axum echo"),
            ("validate", "validate"),
            ("mutate", "mutate"),
        ]
        .iter()
        .map(|(name, shown)| {
            let max = f(&wh["closed"][name]["rate"]);
            let each: Vec<String> = passes
                .iter()
                .map(|(_, rate, _)| format!("{:.0} %", rate / max * 100.0))
                .collect();
            format!("{shown} {}", each.join(" / "))
        })
        .collect();
        if !passes.is_empty() {
            notes.push(format!(
                "Webhook latency rates ({} req/s, fractions of the same-stack echo's max) as shares of each server's own max throughput (the closed loop's): {}.",
                passes
                    .iter()
                    .map(|(_, rate, _)| format!("{rate:.0}"))
                    .collect::<Vec<_>>()
                    .join(" / "),
                shares.join("; ")
            ));
        }
        for (servers, rate, fraction) in passes {
            let targeted = fraction == 0.5;
            let note = if targeted {
                String::new()
            } else {
                format!(" ({:.0} % of the same-stack echo's max)", fraction * 100.0)
            };
            let same = &servers[SAME_STACK];
            for ep in ["validate", "mutate"] {
                let o = &servers[ep];
                let ratio = f(&o["p99_us"]) / f(&same["p99_us"]);
                rows.push(Row {
                    figure: format!(
                        "webhook /{ep} p99 at {rate:.0} req/s{note} vs same-stack echo"
                    ),
                    value: latency(o),
                    baseline: format!("same-stack echo {}", latency(same)),
                    ratio: format!("{ratio:.2}x"),
                    target: if targeted {
                        "≤ 1.5x, 0 errors"
                    } else {
                        "(context)"
                    }
                    .into(),
                    verdict: if targeted {
                        verdict(ratio <= 1.5 && o["errors"].as_u64() == Some(0))
                    } else {
                        "info"
                    },
                });
            }
            if targeted {
                let axum = &servers[AXUM];
                for ep in ["validate", "mutate"] {
                    let o = &servers[ep];
                    rows.push(Row {
                        figure: format!(
                            "webhook /{ep} p99 at {rate:.0} req/s vs axum echo (old yardstick)"
                        ),
                        value: latency(o),
                        baseline: format!("axum echo {}", latency(axum)),
                        ratio: format!("{:.2}x", f(&o["p99_us"]) / f(&axum["p99_us"])),
                        target: "(context)".into(),
                        verdict: "info",
                    });
                }
            }
        }
    }

    for (figure, work, parse) in [
        (
            "engine: evaluate one GPU Deployment",
            "evaluate_gpu_deployment",
            "parse_gpu_deployment_json",
        ),
        (
            "engine: mutate one GPU Pod",
            "mutate_gpu_pod",
            "parse_gpu_pod_json",
        ),
    ] {
        let ns = |id: &str| criterion_ns(&a.criterion, &format!("engine/{id}"));
        if let (Some(w), Some(p)) = (ns(work), ns(parse)) {
            rows.push(Row {
                figure: figure.into(),
                value: format!("{w:.0} ns/object"),
                baseline: format!("serde_json parse {p:.0} ns"),
                ratio: format!("{:.2}x", w / p),
                target: "(report)".into(),
                verdict: "info",
            });
        }
    }

    // Plain text for the terminal.
    let headers = [
        "figure", "measured", "baseline", "ratio", "target", "result",
    ];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.figure.clone(),
                r.value.clone(),
                r.baseline.clone(),
                r.ratio.clone(),
                r.target.clone(),
                r.verdict.to_owned(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |c: &[String]| {
        c.iter()
            .zip(&widths)
            .map(|(s, w)| format!("{s}{}", " ".repeat(w - s.chars().count())))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!(
        "probelint benchmarks: {} cores (nproc), {}{}",
        a.nproc,
        a.date,
        if a.cpu.is_empty() {
            String::new()
        } else {
            format!(", {}", a.cpu)
        }
    );
    println!("{}", line(&headers.map(String::from)));
    for c in &cells {
        println!("{}", line(c));
    }
    for n in &notes {
        println!("{n}");
    }

    // Markdown for docs/benchmarks.md.
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "<!-- Generated by bench/run.sh; do not edit by hand. Rerun `bench/run.sh` to refresh. -->\n"
    );
    let _ = writeln!(
        md,
        "Measured on **{} cores** (`nproc`){}, {}{}{}. Every figure is a ratio of two things \
         measured side by side in the same run, each the median of several runs.\n",
        a.nproc,
        if a.cpu.is_empty() {
            String::new()
        } else {
            format!(" ({})", a.cpu)
        },
        a.date,
        if a.commit.is_empty() {
            String::new()
        } else {
            format!(", commit `{}`", a.commit)
        },
        if a.seconds.is_empty() {
            String::new()
        } else {
            format!("; the measurements took {}", a.seconds)
        },
    );
    let _ = writeln!(md, "| {} |", headers.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(6));
    for c in &cells {
        let escaped: Vec<String> = c.iter().map(|s| s.replace('|', "\\|")).collect();
        let _ = writeln!(md, "| {} |", escaped.join(" | "));
    }
    let _ = writeln!(md);
    for n in &notes {
        let _ = writeln!(md, "{n}\n");
    }
    if !a.notes.is_empty()
        && let Ok(extra) = std::fs::read_to_string(&a.notes)
    {
        md.push_str(&extra);
        if !extra.ends_with('\n') {
            md.push('\n');
        }
    }
    if let Some(parent) = a.markdown.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(&a.markdown, md).map_err(|e| format!("{}: {e}", a.markdown.display()))?;
    let failed = rows.iter().filter(|r| r.verdict == "FAIL").count();
    println!(
        "{} of {} targets met; written to {}",
        rows.iter().filter(|r| r.verdict == "pass").count(),
        rows.iter().filter(|r| r.verdict != "info").count(),
        a.markdown.display()
    );
    if failed > 0 {
        eprintln!("bench-run: {failed} target(s) missed");
    }
    Ok(())
}
