//! HTTP: probes, inference, metrics, and the order of binding and loading.
//!
//! Probe and metrics handlers copy a pre-rendered [`Snapshot`] from a watch channel: they take no
//! lock the model thread holds and never wait on the model. `POST /v1/infer` is the only handler
//! that talks to the worker, through a bounded queue, with a timeout.

use crate::config::{OnLoadError, ServeConfig};
use crate::state::{Phase, ProbeAnswer, Shared, Snapshot, evaluate};
use crate::worker::{self, Job, JobResult};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use std::future::IntoFuture;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tracing::{info, warn};

/// Why `serve` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The load failed and `--on-load-error exit` is in effect (exit status 1).
    #[error("load failed: {0}")]
    Load(String),
    #[error("{0}")]
    Io(String),
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    snapshot: watch::Receiver<Arc<Snapshot>>,
    jobs: SyncSender<Job>,
    shared: Arc<Shared>,
    cfg: Arc<ServeConfig>,
}

/// The routes: `/startupz`, `/readyz`, `/livez`, `/metrics`, `POST /v1/infer`, and `/`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/startupz", get(startupz))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .route("/metrics", get(metrics))
        .route("/v1/infer", post(infer))
        .with_state(state)
}

fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn probe(answer: &ProbeAnswer) -> Response {
    let status = if answer.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(status, answer.body.clone())
}

async fn startupz(State(s): State<AppState>) -> Response {
    let snap = Arc::clone(&s.snapshot.borrow());
    probe(&snap.startup)
}

async fn readyz(State(s): State<AppState>) -> Response {
    let snap = Arc::clone(&s.snapshot.borrow());
    probe(&snap.ready)
}

async fn livez(State(s): State<AppState>) -> Response {
    let snap = Arc::clone(&s.snapshot.borrow());
    probe(&snap.live)
}

async fn metrics(State(s): State<AppState>) -> Response {
    let snap = Arc::clone(&s.snapshot.borrow());
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        snap.metrics.clone(),
    )
        .into_response()
}

async fn index(State(s): State<AppState>) -> Response {
    json_response(
        StatusCode::OK,
        json!({
            "server": "probelint reference-server",
            "version": env!("CARGO_PKG_VERSION"),
            "phase": s.shared.phase().as_str(),
            "endpoints": ["/startupz", "/readyz", "/livez", "/metrics", "POST /v1/infer"],
        })
        .to_string(),
    )
}

/// `POST /v1/infer` body. Without `input` (or with an empty body) the recorded fixed input runs
/// and the answer says whether the output matched: the conformance traffic generator needs no
/// knowledge of the model to send meaningful requests.
#[derive(Debug, Deserialize)]
struct InferRequest {
    #[serde(default)]
    input: Option<Vec<f32>>,
}

fn error(status: StatusCode, message: impl Into<String>, shared: &Shared) -> Response {
    json_response(
        status,
        json!({ "error": message.into(), "phase": shared.phase().as_str() }).to_string(),
    )
}

async fn infer(State(s): State<AppState>, body: Bytes) -> Response {
    let shared = &s.shared;
    let counters = &shared.counters;
    if shared.phase() != Phase::Serving {
        counters.infer_rejected.fetch_add(1, Ordering::Relaxed);
        return error(StatusCode::SERVICE_UNAVAILABLE, "model not loaded", shared);
    }
    let request = if body.iter().all(u8::is_ascii_whitespace) {
        InferRequest { input: None }
    } else {
        match serde_json::from_slice::<InferRequest>(&body) {
            Ok(r) => r,
            Err(e) => {
                counters.infer_bad_request.fetch_add(1, Ordering::Relaxed);
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("invalid JSON body: {e}"),
                    shared,
                );
            }
        }
    };
    if let Some(input) = &request.input {
        let dim = shared.input_dim.load(Ordering::Relaxed);
        let problem = if input.len() != dim {
            Some(format!(
                "input has {} values, the model takes {dim}",
                input.len()
            ))
        } else if input.iter().any(|v| !v.is_finite()) {
            Some("input values must be finite f32".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            counters.infer_bad_request.fetch_add(1, Ordering::Relaxed);
            return error(StatusCode::BAD_REQUEST, problem, shared);
        }
    }

    let (reply, answer) = oneshot::channel();
    shared.queue_depth.fetch_add(1, Ordering::Relaxed);
    let job = Job {
        input: request.input,
        enqueued: Instant::now(),
        reply,
    };
    if let Err(e) = s.jobs.try_send(job) {
        shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
        counters.infer_rejected.fetch_add(1, Ordering::Relaxed);
        let why = match e {
            TrySendError::Full(_) => "queue full",
            TrySendError::Disconnected(_) => "worker stopped",
        };
        return error(StatusCode::SERVICE_UNAVAILABLE, why, shared);
    }
    match tokio::time::timeout(s.cfg.request_timeout, answer).await {
        Ok(Ok(JobResult::Done {
            output,
            latency,
            queue_wait,
            matches_expected,
        })) => {
            counters.infer_ok.fetch_add(1, Ordering::Relaxed);
            json_response(
                StatusCode::OK,
                json!({
                    "output": output,
                    "matches_expected": matches_expected,
                    "latency_ms": latency.as_secs_f64() * 1e3,
                    "queue_ms": queue_wait.as_secs_f64() * 1e3,
                    "device": shared.device(),
                })
                .to_string(),
            )
        }
        Ok(Ok(JobResult::Failed(e))) => {
            counters.infer_error.fetch_add(1, Ordering::Relaxed);
            error(StatusCode::INTERNAL_SERVER_ERROR, e, shared)
        }
        Ok(Err(_)) => {
            counters.infer_error.fetch_add(1, Ordering::Relaxed);
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "worker dropped the request",
                shared,
            )
        }
        Err(_) => {
            counters.infer_timeout.fetch_add(1, Ordering::Relaxed);
            error(
                StatusCode::GATEWAY_TIMEOUT,
                "timed out waiting for the worker",
                shared,
            )
        }
    }
}

/// Recomputes the probe answers every `--refresh-interval`.
async fn refresh(shared: Arc<Shared>, cfg: Arc<ServeConfig>, tx: watch::Sender<Arc<Snapshot>>) {
    let mut tick = tokio::time::interval(cfg.refresh_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        tx.send_replace(Arc::new(evaluate(&shared, &cfg)));
    }
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

async fn wait_phase(rx: &mut watch::Receiver<Phase>, done: impl Fn(Phase) -> bool) {
    // `is_err` drops the borrow guard at once: it must not live across an await.
    if rx.wait_for(|p| done(*p)).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn wait_true(mut rx: watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Runs the server until SIGTERM, or until a load failure under `--on-load-error exit`.
///
/// By default the port is bound only once loading has finished: until then connections are
/// refused, which every probe type reads as a failure. `--bind-before-load` binds first and
/// answers 503 while loading, as llama.cpp does — harmless for HTTP probes on `/readyz`, but a
/// `tcpSocket` readiness probe then passes while the model cannot infer.
pub async fn serve(cfg: ServeConfig) -> Result<(), ServeError> {
    let cfg = Arc::new(cfg);
    let shared = Arc::new(Shared::new());
    let (snapshot_tx, snapshot_rx) = watch::channel(Arc::new(evaluate(&shared, &cfg)));
    tokio::spawn(refresh(Arc::clone(&shared), Arc::clone(&cfg), snapshot_tx));

    let (jobs, job_rx) = std::sync::mpsc::sync_channel(cfg.queue_capacity);
    worker::spawn(Arc::clone(&cfg), Arc::clone(&shared), job_rx)
        .map_err(|e| ServeError::Io(format!("cannot start the model thread: {e}")))?;
    let exit_on_failure = cfg.faults.on_load_error == OnLoadError::Exit;
    let load_failure = |shared: &Shared| {
        ServeError::Load(
            shared
                .load_error()
                .unwrap_or_else(|| "unknown error".into()),
        )
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut phase = shared.subscribe_phase();
            tokio::select! {
                _ = shutdown_signal() => {}
                _ = wait_phase(&mut phase, |p| p == Phase::Failed), if exit_on_failure => {}
            }
            stop_tx.send_replace(true);
            info!("stopping");
        });
    }

    if !cfg.faults.bind_before_load {
        let mut phase = shared.subscribe_phase();
        tokio::select! {
            _ = wait_phase(&mut phase, |p| p != Phase::Loading) => {}
            _ = wait_true(stop_rx.clone()) => {}
        }
        if shared.phase() == Phase::Loading {
            return Ok(()); // stopped by a signal while loading
        }
        if exit_on_failure && shared.phase() == Phase::Failed {
            return Err(load_failure(&shared));
        }
    }

    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| ServeError::Io(format!("cannot listen on {}: {e}", cfg.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Io(e.to_string()))?;
    // On stdout, one line, so that a harness that asked for port 0 can find the port. Write
    // errors are ignored (println! would panic if the harness closed the pipe).
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {addr}").and_then(|()| out.flush());
    }
    info!(%addr, phase = shared.phase().as_str(), "listening");

    let app = router(AppState {
        snapshot: snapshot_rx,
        jobs,
        shared: Arc::clone(&shared),
        cfg: Arc::clone(&cfg),
    });
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(wait_true(stop_rx.clone()))
        .into_future();
    let grace = cfg.shutdown_grace;
    let forced = async move {
        wait_true(stop_rx).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = server => result.map_err(|e| ServeError::Io(e.to_string()))?,
        _ = forced => warn!("connections did not drain in time"),
    }
    if exit_on_failure && shared.phase() == Phase::Failed {
        return Err(load_failure(&shared));
    }
    Ok(())
}
