//! The two HTTP servers: reviews (and probes) over TLS, metrics (and probes) in plain HTTP; the
//! guards around every review (content type, body limit, memory, timeout, panics); graceful
//! shutdown. Connections themselves are served and bounded by [`crate::listen`].

use crate::budget::{Reservation, Short};
use crate::cost::{self, Scanner, Shape};
use crate::listen::{Client, Limits, Port};
use crate::logtext::Text;
use crate::metrics::{CONTENT_TYPE, Metrics};
use crate::reload::TlsConfig;
use crate::review::{self, Decision, Mode, Outcome};
use crate::state::{AppState, DRAIN_TIMEOUT, REVIEW_MEMORY_BYTES};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::any::Any;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// An AdmissionReview carries the object and the old object, each up to the apiserver's 3 MB
/// request limit, plus the review's own fields.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
/// Well under the apiserver's default `timeoutSeconds` of 10: a review we cannot answer in time
/// gets our error, not the apiserver's timeout, and the failurePolicy decides.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The most memory one review may take while it is evaluated ([`Shape::review_bytes`]: its
/// body, what parsing builds, what the engine and the answer build from it). A review that
/// would take more is refused (413) before it is parsed. Three eighths of the review memory
/// budget: the worst accepted review fits one client's share of it ([`SOURCE_SHARE_DIVISOR`])
/// beside the bytes of that client's other bodies waiting meanwhile (each holds what it has
/// sent), so two of its reviews cannot wait on each other.
pub const MAX_REVIEW_MEMORY: usize = REVIEW_MEMORY_BYTES / 8 * 3;
/// A client (one source address) may hold at most this fraction of the review memory; its
/// bodies past it wait for its own reviews to finish.
pub const SOURCE_SHARE_DIVISOR: usize = 2;

/// Routes of the TLS port. Nothing else is served there.
pub fn tls_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/validate/warn", post(validate_warn))
        .route("/mutate", post(mutate))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), with_timeout))
        .with_state(state)
}

/// Routes of the plain-HTTP metrics port.
pub fn metrics_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .with_state(state)
}

/// How many connections each port holds at most, from the file descriptors the process may
/// open: the review port gets [`MAX_TLS_CONNECTIONS`] and the metrics port
/// [`MAX_METRICS_CONNECTIONS`] unless the limit is too low for both (plus the connections
/// still closing, a quarter more, and a reserve for files and the runtime).
pub fn connection_caps(fd_limit: u64) -> (usize, usize) {
    let usable = fd_limit.saturating_sub(64) as usize * 4 / 5;
    let metrics = MAX_METRICS_CONNECTIONS.min(usable / 16).max(1);
    let tls = MAX_TLS_CONNECTIONS
        .min(usable.saturating_sub(metrics))
        .max(1);
    (tls, metrics)
}

/// Connections the review port holds at most: far more than the apiserver opens (over HTTP/2,
/// one per apiserver and 32 concurrent reviews), few enough that their buffers (at most
/// ~200 KiB each: TLS records, HTTP/1.1 buffer, HTTP/2 window) stay within the memory limit
/// beside the reviews' own memory.
pub const MAX_TLS_CONNECTIONS: usize = 256;
/// Prometheus and the kubelet's probes need a handful.
pub const MAX_METRICS_CONNECTIONS: usize = 64;

/// Serves both ports until SIGTERM (or Ctrl-C), then stops accepting connections and waits up to
/// [`DRAIN_TIMEOUT`] for the reviews in flight.
pub async fn serve(
    listen: SocketAddr,
    metrics_listen: SocketAddr,
    tls: Arc<TlsConfig>,
    state: Arc<AppState>,
    caps: (usize, usize),
) -> std::io::Result<()> {
    let router = tls_router(state.clone());
    serve_router(listen, router, Some(metrics_listen), tls, state, caps).await
}

/// [`serve`] with `router` on the TLS port in place of the review routes, and the metrics port
/// only when `metrics_listen` is given (the benchmarks' echo on the webhook's listener:
/// [`crate::run_router`]).
pub async fn serve_router(
    listen: SocketAddr,
    router: Router,
    metrics_listen: Option<SocketAddr>,
    tls: Arc<TlsConfig>,
    state: Arc<AppState>,
    caps: (usize, usize),
) -> std::io::Result<()> {
    let tls_listener = TcpListener::bind(listen).await?;
    let metrics_listener = match metrics_listen {
        Some(addr) => Some(TcpListener::bind(addr).await?),
        None => None,
    };
    let reviews = Port::new("tls", Limits::new(caps.0), Some(tls), router, state.clone());
    state.budget.relieve_with(&reviews);
    let mut ports = vec![(tls_listener, reviews.clone(), caps.0)];
    if let Some(listener) = metrics_listener {
        let metrics = Port::new(
            "metrics",
            Limits::new(caps.1),
            None,
            metrics_router(state.clone()),
            state.clone(),
        );
        ports.push((listener, metrics, caps.1));
    }
    for (listener, port, max_connections) in &ports {
        tracing::info!(
            addr = %listener.local_addr()?,
            port = port.name,
            max_connections = *max_connections,
            "listening"
        );
    }
    let (stop, _) = tokio::sync::watch::channel(false);
    let stopped = |stop: &tokio::sync::watch::Sender<bool>| {
        let mut rx = stop.subscribe();
        async move {
            let _ = rx.wait_for(|stopped| *stopped).await;
        }
    };
    let runs: Vec<_> = ports
        .into_iter()
        .map(|(listener, port, _)| tokio::spawn(port.run(listener, stopped(&stop), DRAIN_TIMEOUT)))
        .collect();
    shutdown_signal().await;
    tracing::info!(
        in_flight_connections = reviews.connection_count(),
        "shutting down: finishing the reviews in flight"
    );
    state.start_draining();
    let _ = stop.send(true);
    for run in runs {
        let _ = run.await;
    }
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

async fn validate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    handle_review(&state, Mode::Validate, request).await
}

async fn validate_warn(State(state): State<Arc<AppState>>, request: Request) -> Response {
    handle_review(&state, Mode::Warn, request).await
}

async fn mutate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    handle_review(&state, Mode::Mutate, request).await
}

/// One review: check, evaluate, count, log, answer.
async fn handle_review(state: &AppState, mode: Mode, request: Request) -> Response {
    let start = Instant::now();
    let endpoint = review::endpoint(mode);
    let (parts, body) = request.into_parts();
    let client = parts.extensions.get::<Client>().map(|client| client.0);
    let result = answer(state, mode, &parts.headers, client, body).await;
    let elapsed = start.elapsed();
    state
        .metrics
        .observe_latency(endpoint, elapsed.as_secs_f64());
    // Microsecond resolution: enough for a log line, and no float noise in it.
    let latency_ms = elapsed.as_micros() as f64 / 1000.0;
    match result {
        Ok((outcome, held)) => {
            record(&state.metrics, endpoint, &outcome);
            log_review(endpoint, &outcome, latency_ms);
            let json = outcome.review.to_json();
            // From here the answer counts for itself (`listen::Answer`).
            drop((outcome, held));
            // The JSON goes out as it is (a `Vec` becomes the body's `Bytes` without a copy).
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                json,
            )
                .into_response()
        }
        Err((status, message)) => {
            let decision = if status.is_server_error() {
                Decision::Error
            } else {
                Decision::Invalid
            };
            state.metrics.count_request(endpoint, decision.as_str());
            // The message may quote the request (an apiVersion, a JSON error's context).
            let message_text = Text(&message);
            if status.is_server_error() {
                tracing::error!(endpoint, status = status.as_u16(), message = %message_text, latency_ms, "review failed");
            } else {
                tracing::warn!(endpoint, status = status.as_u16(), message = %message_text, latency_ms, "review refused");
            }
            (status, format!("{message}\n")).into_response()
        }
    }
}

async fn answer(
    state: &AppState,
    mode: Mode,
    headers: &HeaderMap,
    client: Option<IpAddr>,
    body: Body,
) -> Result<(Outcome, Reservation), (StatusCode, String)> {
    if let Err(got) = check_json(headers) {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("expected Content-Type: application/json (an AdmissionReview), got {got}"),
        ));
    }
    // Held until the evaluation ends: the body and what is built from it.
    let (body, reservation) =
        read_body(state, review::endpoint(mode), headers, client, body).await?;
    let policy = state.policy();
    let inline = body.len() <= INLINE_BODY_LIMIT;
    // The reservation goes with the evaluation and comes back with its outcome: a review past
    // its timeout is answered 503 but its evaluation runs on (it cannot be interrupted), and its
    // memory stays counted until the evaluation and the answer built from it are gone.
    let settings = state.settings.clone();
    let evaluate = move || {
        let outcome = review::admit_with(&body, mode, &policy, &settings);
        (outcome, reservation)
    };
    match guarded(inline, evaluate).await {
        Ok((Ok(outcome), held)) => Ok((outcome, held)),
        Ok((Err(error), _)) => Err((StatusCode::BAD_REQUEST, error.to_string())),
        Err(panic) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "internal error while evaluating the review ({panic}); this is a probelint bug, \
                 the webhook keeps serving and the webhook's failurePolicy decides this request"
            ),
        )),
    }
}

fn too_large() -> (StatusCode, String) {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the AdmissionReview is larger than the webhook's limit of {MAX_BODY_BYTES} bytes"),
    )
}

/// A request body that sends nothing for this long is refused (408). The apiserver sends its
/// body at once; a body that stalls while holding its share of the review memory would keep
/// that memory from everyone (and an HTTP/2 stream waiting for memory stops reading, which can
/// hold back the other streams of its connection).
pub const BODY_STALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads a request body of at most [`MAX_BODY_BYTES`], and reserves from the review memory
/// budget what evaluating it will take, as its bytes arrive: each piece is counted
/// ([`Scanner`]) and the reservation follows what the bytes so far will build once parsed and
/// evaluated ([`Shape::review_bytes`]), without waiting while it fits. When it does not fit, a
/// body with a Content-Length gives back all but the bytes it holds and waits for room for what
/// it has sent; one without is refused (503, or 429 when it is its client's share that is
/// spent). A review that would take more than [`MAX_REVIEW_MEMORY`] is refused (413) as soon as
/// its bytes say so, before it is parsed. The same 413 over HTTP/1.1 and HTTP/2, with or
/// without a Content-Length.
async fn read_body(
    state: &AppState,
    endpoint: &'static str,
    headers: &HeaderMap,
    client: Option<IpAddr>,
    mut body: Body,
) -> Result<(Bytes, Reservation), (StatusCode, String)> {
    let budget = &state.budget;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        state.metrics.count_refused(endpoint, "body_too_large");
        return Err(discard_then(body, too_large()).await);
    }
    let mut scanner = Scanner::default();
    let mut reservation = Reservation::new(budget.clone(), client);
    let mut first: Option<Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    loop {
        let Some(frame) = next_frame_within(&mut body, BODY_STALL_TIMEOUT).await else {
            state.metrics.count_refused(endpoint, "body_stalled");
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body stalled: no data for {} s",
                    BODY_STALL_TIMEOUT.as_secs()
                ),
            ));
        };
        let data = match frame {
            None => break,
            Some(Err(error)) => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {error}"),
                ));
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        let so_far = first.as_ref().map_or(0, Bytes::len) + joined.len();
        if so_far + data.len() > MAX_BODY_BYTES {
            drop((first, joined, reservation));
            state.metrics.count_refused(endpoint, "body_too_large");
            return Err(discard_then(body, too_large()).await);
        }
        // The memory is taken as the bytes arrive, from what they will build, never from what
        // a request only declares: heads that declare megabytes and send nothing hold nothing.
        // When the budget is spent, a body with a Content-Length waits for room for what it
        // sent (while it waits it holds only those bytes, and flow control holds the client
        // back); one without gives its share back at once, since bodies that each held part of
        // the budget while waiting for more would hold it all and get nowhere (the apiserver
        // always declares its bodies).
        let arrived = so_far + data.len();
        scanner.feed(&data);
        let shape = scanner.shape();
        if shape.review_bytes() > MAX_REVIEW_MEMORY {
            drop((first, joined, reservation));
            state.metrics.count_refused(endpoint, "too_costly");
            return Err(
                discard_then(body, (StatusCode::PAYLOAD_TOO_LARGE, too_costly(&shape))).await,
            );
        }
        let needed = shape.review_bytes().saturating_sub(reservation.bytes());
        let short = match needed {
            0 => None,
            needed => reservation.try_grow(needed).err(),
        };
        if let Some(short) = short {
            if declared.is_none() {
                drop((first, joined, reservation));
                return Err(match short {
                    Short::Budget => {
                        state.metrics.count_refused(endpoint, "memory");
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the webhook's memory for reviews in flight is spent; a request \
                             with a Content-Length waits for its turn, one without is refused"
                                .to_owned(),
                        )
                    }
                    Short::Source => {
                        state.metrics.count_refused(endpoint, "source_share");
                        (
                            StatusCode::TOO_MANY_REQUESTS,
                            format!(
                                "this client's reviews in flight hold its share of the webhook's \
                                 review memory ({} of {} bytes); a request with a Content-Length \
                                 waits for its turn, one without is refused",
                                budget.source_limit(),
                                budget.limit()
                            ),
                        )
                    }
                });
            }
            // While it waits it holds only the bytes it has.
            reservation.shrink_to(arrived);
            reservation.resize(shape.review_bytes()).await;
        }
        // A body that arrives in one piece (most do) is kept as it came, without a copy.
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            previous => {
                if let Some(previous) = previous {
                    let expected = declared.map_or(0, |n| n as usize).max(previous.len());
                    joined.reserve(expected.min(MAX_BODY_BYTES));
                    joined.extend_from_slice(&previous);
                }
                joined.extend_from_slice(&data);
            }
        }
    }
    let body = first.unwrap_or_else(|| Bytes::from(joined));
    Ok((body, reservation))
}

/// The 413 of a review whose shape would take more than [`MAX_REVIEW_MEMORY`] to evaluate,
/// with the arithmetic.
fn too_costly(shape: &Shape) -> String {
    format!(
        "the AdmissionReview would take about {} MiB to evaluate, over the webhook's limit of {} \
         MiB per review: its {} bytes (so far) hold {} values × {} B + {} objects × {} B + {} \
         object members × {} B + {} strings × {} B + {} string bytes, plus the body itself (what \
         parsing and judging each takes, measured in docs/reliability.md)",
        mib(shape.review_bytes()),
        mib(MAX_REVIEW_MEMORY),
        shape.bytes,
        shape.values(),
        cost::BYTES_PER_VALUE,
        shape.objects,
        cost::BYTES_PER_OBJECT,
        shape.members,
        cost::BYTES_PER_MEMBER,
        shape.strings,
        cost::BYTES_PER_STRING,
        shape.string_bytes,
    )
}

fn mib(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// The body's next frame, or `None` when none comes within `limit`. A frame that is already
/// there (most bodies arrive with their headers) is taken without arming a timer.
async fn next_frame_within(
    body: &mut Body,
    limit: Duration,
) -> Option<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
    let frame = std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut *body), cx));
    let mut frame = std::pin::pin!(frame);
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(frame.as_mut().poll(cx))).await;
    match first {
        std::task::Poll::Ready(frame) => Some(frame),
        std::task::Poll::Pending => tokio::time::timeout(limit, frame).await.ok(),
    }
}

/// Reads and drops the rest of a refused body (up to [`MAX_BODY_BYTES`] more; the review timeout
/// bounds the time), then returns `error`. A client still sending when the answer comes would
/// otherwise see its upload fail (HTTP/1.1: a reset connection; HTTP/2: a reset stream) instead
/// of reading the 413.
async fn discard_then(mut body: Body, error: (StatusCode, String)) -> (StatusCode, String) {
    let mut discarded = 0;
    while discarded <= MAX_BODY_BYTES {
        let frame =
            std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut body), cx)).await;
        match frame {
            Some(Ok(frame)) => discarded += frame.data_ref().map_or(0, Bytes::len),
            None | Some(Err(_)) => break,
        }
    }
    error
}

/// A review whose body is not declared JSON (answered 415). Displays as what it declared, after
/// `expected Content-Type: application/json (an AdmissionReview), got `.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum NotJson {
    #[error("no Content-Type")]
    Missing,
    /// The `Content-Type` header as sent (empty when it is not visible ASCII).
    #[error("{0:?}")]
    Declared(String),
}

/// `Ok` when the request declares JSON (`application/json`, any parameters); otherwise the
/// content type it declared, for the error message.
fn check_json(headers: &HeaderMap) -> Result<(), NotJson> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Err(NotJson::Missing);
    };
    let text = value.to_str().unwrap_or("");
    let media_type = text.split(';').next().unwrap_or("").trim();
    if media_type.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(NotJson::Declared(text.to_owned()))
    }
}

/// Reviews up to this size are evaluated on the async thread that received them: they take tens
/// of microseconds, less than the hand-off to the blocking pool, which cost a quarter of the
/// CPU under load (bench/profile-notes.md). Bigger ones go to the blocking pool, so that one
/// huge object cannot stall the other connections of its thread.
pub const INLINE_BODY_LIMIT: usize = 256 * 1024;

/// An evaluation that did not return (answered 500, in parentheses after `internal error while
/// evaluating the review`).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvaluationError {
    /// The evaluation panicked, with this message: a probelint bug.
    #[error("panic: {0}")]
    Panic(String),
    /// The blocking pool dropped the evaluation before it ran (the runtime is shutting down).
    #[error("the evaluation was cancelled")]
    Cancelled,
}

/// Runs the evaluation and turns a panic into an error, so that no input can take the server
/// down (a panic would otherwise only kill one connection's task, silently). `inline` work runs
/// here; the rest off the async threads.
pub async fn guarded<T, F>(inline: bool, work: F) -> Result<T, EvaluationError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    if inline {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .map_err(|payload| EvaluationError::Panic(panic_text(payload.as_ref())));
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| match error.try_into_panic() {
            Ok(payload) => EvaluationError::Panic(panic_text(payload.as_ref())),
            Err(_) => EvaluationError::Cancelled,
        })
}

fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
        .to_owned()
}

fn record(metrics: &Metrics, endpoint: &'static str, outcome: &Outcome) {
    metrics.count_request(endpoint, outcome.decision.as_str());
    for source in outcome.exemptions() {
        metrics.count_exemption(endpoint, source, &outcome.summary.username);
    }
    for finding in &outcome.findings {
        metrics.count_finding(
            &finding.rule,
            finding.severity.as_str(),
            finding.is_suppressed(),
        );
    }
}

/// The one log line per review. Its fields are only evaluated when the line is enabled (the
/// `tracing` macros check the level first), and then written straight into the log line:
/// the rule lists are not joined into strings of their own.
fn log_review(endpoint: &'static str, outcome: &Outcome, latency_ms: f64) {
    let s = &outcome.summary;
    let reason = match &outcome.decision {
        Decision::Skipped(reason) => reason.as_str(),
        _ => "",
    };
    // Everything here but the decision and the rules comes from the request: see `logtext`.
    tracing::info!(
        uid = %Text(&s.uid),
        kind = %Text(&s.kind),
        namespace = %Text(s.namespace.as_deref().unwrap_or("")),
        name = %Text(&s.name),
        operation = s.operation,
        dry_run = s.dry_run,
        user = %Text(&s.username),
        endpoint,
        decision = outcome.decision.as_str(),
        reason = %Text(reason),
        rules = %RuleList { findings: &outcome.findings, suppressed: false },
        exempt_rules = %RuleList { findings: &outcome.findings, suppressed: true },
        exempted_by = %outcome.exemptions().join(","),
        latency_ms,
        "review"
    );
    if let Some(error) = &outcome.internal_error {
        tracing::error!(uid = %Text(&s.uid), endpoint, error = %Text(error), "engine error");
    }
}

/// The rules of the (un)suppressed findings, comma-separated; a rule that several findings in a
/// row share (one per container) is written once.
struct RuleList<'a> {
    findings: &'a [probelint_policies::Finding],
    suppressed: bool,
}

impl std::fmt::Display for RuleList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut last: Option<&str> = None;
        for rule in self
            .findings
            .iter()
            .filter(|finding| finding.is_suppressed() == self.suppressed)
            .map(|finding| &*finding.rule)
        {
            if last == Some(rule) {
                continue;
            }
            if last.is_some() {
                f.write_str(",")?;
            }
            f.write_str(rule)?;
            last = Some(rule);
        }
        Ok(())
    }
}

/// Bounds every request on the TLS port, body upload included.
async fn with_timeout(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let endpoint = match request.uri().path() {
        "/validate" => "validate",
        "/validate/warn" => "validate/warn",
        "/mutate" => "mutate",
        _ => "other",
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            state
                .metrics
                .count_request(endpoint, Decision::Error.as_str());
            tracing::error!(
                endpoint,
                timeout_s = REQUEST_TIMEOUT.as_secs(),
                "review timed out"
            );
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the review did not complete within {} s\n",
                    REQUEST_TIMEOUT.as_secs()
                ),
            )
                .into_response()
        }
    }
}

/// `/livez`: the process can answer HTTP. Deliberately checks nothing else: a liveness probe
/// that fails on a bad reload would restart the webhook into the same bad files.
async fn livez() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, String) {
    state.readiness()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    state
        .metrics
        .set_review_memory(state.budget.used(), state.budget.limit());
    let mut response = state.metrics.encode().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

async fn not_found() -> (StatusCode, &'static str) {
    (
        StatusCode::NOT_FOUND,
        "not found: this port serves POST /validate, /validate/warn, /mutate and GET /livez, /readyz\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_error_and_the_next_call_still_works() {
        // Both paths: inline (small reviews) and on the blocking pool (big ones).
        for inline in [true, false] {
            let err = guarded(inline, || -> u32 { panic!("rule exploded") })
                .await
                .expect_err("the panic is caught");
            assert_eq!(err.to_string(), "panic: rule exploded");
            let err = guarded(inline, || -> u32 {
                panic!("{}", String::from("formatted"))
            })
            .await
            .expect_err("the panic is caught");
            assert_eq!(err.to_string(), "panic: formatted");
            assert_eq!(guarded(inline, || 7).await, Ok(7));
        }
    }

    #[test]
    fn rule_lists_are_written_comma_separated_without_repeats() {
        // Three findings from the engine, one of them suppressed by annotation (the liveness
        // risk, reported as its own rule where gpu-startup-probe-missing is off).
        let review = crate::testing::fixture_json("deny-gpu-deployment-without-probes");
        let mut object = review["request"]["object"].clone();
        object["metadata"]["annotations"] = serde_json::json!({
            "probelint.io/ignore": "liveness-restart-loop",
            "probelint.io/ignore-reason": "test"
        });
        let policy = probelint_policies::Policy::builtin().expect("built-in policy");
        let mut engine = probelint_policies::evaluate_one(&object, &policy);
        engine.sort_by(|a, b| a.rule.cmp(&b.rule));
        let [ready, start] = &engine[..] else {
            panic!("{engine:#?}")
        };
        let alone = probelint_policies::Policy::with_user_yaml(
            "rules:\n  gpu-startup-probe-missing: off\n",
        )
        .expect("policy");
        let engine_alone = probelint_policies::evaluate_one(&object, &alone);
        let loop_ = engine_alone
            .iter()
            .find(|f| f.rule == "liveness-restart-loop")
            .unwrap_or_else(|| panic!("{engine_alone:#?}"));
        assert!(loop_.is_suppressed() && !ready.is_suppressed() && !start.is_suppressed());
        let findings = [
            ready.clone(),
            ready.clone(),
            loop_.clone(),
            start.clone(),
            ready.clone(),
        ];
        let list = |suppressed| {
            RuleList {
                findings: &findings,
                suppressed,
            }
            .to_string()
        };
        assert_eq!(
            list(false),
            "gpu-readiness-probe-missing,gpu-startup-probe-missing,gpu-readiness-probe-missing"
        );
        assert_eq!(list(true), "liveness-restart-loop");
        assert_eq!(
            RuleList {
                findings: &[],
                suppressed: false
            }
            .to_string(),
            ""
        );
    }

    #[test]
    fn content_type_must_be_json() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            check_json(&headers)
        };
        assert_eq!(with("application/json"), Ok(()));
        assert_eq!(with("Application/JSON; charset=utf-8"), Ok(()));
        let refused = with("application/x-www-form-urlencoded").expect_err("not JSON");
        assert_eq!(refused.to_string(), "\"application/x-www-form-urlencoded\"");
        let missing = check_json(&HeaderMap::new()).expect_err("no Content-Type");
        assert_eq!(missing.to_string(), "no Content-Type");
    }
}
