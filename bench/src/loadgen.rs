//! An HTTPS load generator for loopback: HTTP/1.1 keep-alive connections over rustls, POSTing
//! AdmissionReview bodies in turn.
//!
//! * [`closed_loop`]: N connections, each sending its next request as soon as the previous
//!   answer is read. The completion rate is the server's maximum throughput (for this client).
//! * [`open_loop`]: requests issued at a fixed rate whatever the server does, taken by the first
//!   free connection of a pool. A request that waits for a free connection waits on the clock,
//!   so a slow server cannot hide its queue (no coordinated omission). Latency runs from when
//!   the generator issued the request to when the whole answer was read.
//!
//! Every answer must be `200` with a JSON object body; anything else, a transport error or a
//! request that never completes counts as an error.
//!
//! Both also count the CPU time the server process (when [`Target::server_pid`] names it) and
//! this process used from when the connections were up to the end, per answered request,
//! warm-up included: a figure the other load on the machine disturbs far less than a rate.

use crate::process::cpu_time;
use crate::stats::percentile_sorted;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};
use tokio_rustls::TlsConnector;

/// Where to send: a TLS endpoint on loopback and a path.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub path: String,
    pub tls: Arc<ClientConfig>,
    /// The process that serves it, whose CPU time is counted.
    pub server_pid: Option<u32>,
}

/// What one load run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// Requests completed inside the measurement window.
    pub completed: u64,
    pub errors: u64,
    pub seconds: f64,
    /// Completed requests per second.
    pub rate: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Requests answered without error over the whole run, warm-up included.
    pub served: u64,
    /// CPU time of the server process per served request, in µs (NaN when not known).
    pub server_cpu_us: f64,
    /// CPU time of the load generator (this process) per served request, in µs.
    pub client_cpu_us: f64,
}

/// CPU time of the server and of this process, read when the connections are up and again at
/// the end of a run.
struct CpuClock {
    server_pid: Option<u32>,
    server: Option<Duration>,
    client: Option<Duration>,
}

impl CpuClock {
    fn start(target: &Target) -> CpuClock {
        CpuClock {
            server_pid: target.server_pid,
            server: target.server_pid.and_then(cpu_time),
            client: cpu_time(std::process::id()),
        }
    }

    /// (server, client) µs of CPU per request over `served` requests.
    fn per_request(&self, served: u64) -> (f64, f64) {
        let per = |before: Option<Duration>, now: Option<Duration>| match (before, now) {
            (Some(b), Some(n)) if served > 0 => (n - b).as_secs_f64() * 1e6 / served as f64,
            _ => f64::NAN,
        };
        (
            per(self.server, self.server_pid.and_then(cpu_time)),
            per(self.client, cpu_time(std::process::id())),
        )
    }
}

type Sender = SendRequest<Full<Bytes>>;

/// Opens one keep-alive HTTP/1.1 connection over TLS.
pub async fn connect(target: &Target) -> Result<Sender, String> {
    let tcp = TcpStream::connect(target.addr)
        .await
        .map_err(|e| format!("connect {}: {e}", target.addr))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(target.tls.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {}: {e}", target.addr))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Sends one POST and reads the whole answer; `Ok` only for a 200 with a JSON object.
pub async fn post(sender: &mut Sender, path: &str, body: &Bytes) -> Result<Bytes, String> {
    sender
        .ready()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, "localhost")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body.clone()))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    if status != hyper::StatusCode::OK || bytes.first() != Some(&b'{') {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        ));
    }
    Ok(bytes)
}

struct Counts {
    completed: u64,
    errors: u64,
    seconds: f64,
    served: u64,
}

fn summarize(mut latencies_us: Vec<u32>, counts: Counts, cpu: &CpuClock) -> LoadResult {
    latencies_us.sort_unstable();
    let (server_cpu_us, client_cpu_us) = cpu.per_request(counts.served);
    LoadResult {
        completed: counts.completed,
        errors: counts.errors,
        seconds: counts.seconds,
        rate: counts.completed as f64 / counts.seconds,
        p50_us: percentile_sorted(&latencies_us, 50.0),
        p99_us: percentile_sorted(&latencies_us, 99.0),
        max_us: latencies_us.last().copied().unwrap_or(0).into(),
        served: counts.served,
        server_cpu_us,
        client_cpu_us,
    }
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u128::from(u32::MAX)) as u32
}

/// Maximum throughput: `connections` connections in a closed loop for `warmup + duration`;
/// only answers completed during the last `duration` count.
pub async fn closed_loop(
    target: &Target,
    bodies: Arc<Vec<Bytes>>,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult, String> {
    let mut senders = Vec::with_capacity(connections);
    for _ in 0..connections {
        senders.push(connect(target).await?);
    }
    let cpu = CpuClock::start(target);
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (c, mut sender) in senders.into_iter().enumerate() {
        let bodies = bodies.clone();
        let target = target.clone();
        let errors = errors.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let (mut completed, mut served) = (0u64, 0u64);
            let mut i = c;
            loop {
                let sent = Instant::now();
                if sent >= end {
                    break;
                }
                let body = &bodies[i % bodies.len()];
                i += 1;
                let result = tokio::time::timeout(
                    Duration::from_secs(10),
                    post(&mut sender, &target.path, body),
                )
                .await;
                let done = Instant::now();
                match result {
                    Ok(Ok(_)) => {
                        served += 1;
                        if done >= measure_from && done < end {
                            completed += 1;
                            latencies.push(micros(done - sent));
                        }
                    }
                    _ => {
                        if done >= measure_from {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                        // A failed connection is replaced, as a real client would.
                        match connect(&target).await {
                            Ok(s) => sender = s,
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                    }
                }
            }
            (latencies, completed, served)
        }));
    }
    let mut latencies = Vec::new();
    let (mut completed, mut served) = (0, 0);
    for t in tasks {
        let (l, c, s) = t.await.map_err(|e| e.to_string())?;
        latencies.extend(l);
        completed += c;
        served += s;
    }
    let counts = Counts {
        completed,
        errors: errors.load(Ordering::Relaxed),
        seconds: duration.as_secs_f64(),
        served,
    };
    Ok(summarize(latencies, counts, &cpu))
}

struct Ticket {
    seq: u64,
    issued: Instant,
}

/// Fixed-rate load: `rate` requests per second for `warmup + duration` over a pool of
/// `connections` connections; only requests issued during the last `duration` count.
pub async fn open_loop(
    target: &Target,
    bodies: Arc<Vec<Bytes>>,
    rate: f64,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<LoadResult, String> {
    let mut senders = Vec::with_capacity(connections);
    for _ in 0..connections {
        senders.push(connect(target).await?);
    }
    let cpu = CpuClock::start(target);
    let (tx, rx) = mpsc::unbounded_channel::<Ticket>();
    let rx = Arc::new(Mutex::new(rx));
    let served = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let measure_from = start + warmup;
    let total = ((warmup + duration).as_secs_f64() * rate).round() as u64;
    let errors = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for mut sender in senders {
        let (rx, bodies, target, errors, served) = (
            rx.clone(),
            bodies.clone(),
            target.clone(),
            errors.clone(),
            served.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let ticket = { rx.lock().await.recv().await };
                let Some(ticket) = ticket else { break };
                let body = &bodies[(ticket.seq % bodies.len() as u64) as usize];
                let result = tokio::time::timeout(
                    Duration::from_secs(10),
                    post(&mut sender, &target.path, body),
                )
                .await;
                let measured = ticket.issued >= measure_from;
                match result {
                    Ok(Ok(_)) => {
                        served.fetch_add(1, Ordering::Relaxed);
                        if measured {
                            latencies.push(micros(ticket.issued.elapsed()));
                        }
                    }
                    _ => {
                        if measured {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                        match connect(&target).await {
                            Ok(s) => sender = s,
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                    }
                }
            }
            latencies
        }));
    }
    // The dispatcher: the timer ticks every millisecond at best, so each tick issues every
    // request that has come due since the last one.
    let mut sent = 0u64;
    let mut measured_issued = 0u64;
    while sent < total {
        let due = ((start.elapsed().as_secs_f64() * rate) as u64 + 1).min(total);
        while sent < due {
            let issued = Instant::now();
            if issued >= measure_from {
                measured_issued += 1;
            }
            let _ = tx.send(Ticket { seq: sent, issued });
            sent += 1;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    drop(tx);
    let mut latencies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    for w in workers {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, w).await {
            Ok(Ok(l)) => latencies.extend(l),
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => {} // still waiting on a hung request: counted below as not completed
        }
    }
    let completed = latencies.len() as u64;
    let errors = errors.load(Ordering::Relaxed);
    // Requests issued in the window that neither completed nor failed never came back.
    let lost = measured_issued.saturating_sub(completed + errors);
    let counts = Counts {
        completed,
        errors: errors + lost,
        seconds: duration.as_secs_f64(),
        served: served.load(Ordering::Relaxed),
    };
    Ok(summarize(latencies, counts, &cpu))
}
