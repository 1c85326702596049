//! Serving connections: hyper over tokio-rustls on the review port, plain TCP on the metrics
//! port, with the limits that keep any client from making the webhook stop answering the
//! apiserver or outgrow its memory limit.
//!
//! axum-server bounds only a connection's first request; after it a connection may idle or
//! trickle forever, and nothing caps how many there are. Here every connection is registered
//! with its port and watched by its own task, once a second:
//!
//! - a connection that has not sent a request [`FIRST_REQUEST_TIMEOUT`] after its handshake,
//!   or (HTTP/1.1) has begun a request head and not finished it [`HEADER_READ_TIMEOUT`] later,
//!   is closed: a trickling client counts as idle, its bytes buy it nothing;
//! - a connection idle (no request in flight) for [`IDLE_TIMEOUT`] is closed gracefully;
//! - a connection with an answer not delivered [`SEND_TIMEOUT`] after it was ready (a client
//!   that stopped reading, or advertises a zero HTTP/2 window, on one stream or all) is
//!   closed, which frees the answers it pinned;
//! - at the port's connection cap, a new connection evicts the connection idle the longest
//!   instead of being refused, else one whose handshake (or first request) has not come, and
//!   that has sent nothing or was accepted over [`FRESH_PROTECTED_FOR`] ago (a handshake in
//!   progress is not cut by newcomers before then),
//!   else one whose request body has sent nothing the server waits for in
//!   [`BODY_STALLED_AFTER`] (a client keeping one stalled request in flight holds no seat),
//!   else one whose answers do not move; only when every connection is busy with real work is
//!   the new one refused;
//! - seats are shared among client addresses: a source holding its share of the cap (the cap
//!   divided among the sources connected) evicts only its own connections, and a source under
//!   it may take the seat of a fresh connection of the source holding the most, so one client
//!   flooding handshakes cannot lock the others out.
//!
//! What a review holds in memory (its body while read and evaluated, its answer until sent) is
//! counted against one [`Budget`](crate::budget::Budget); a body that does not fit waits, and connections whose answers
//! have not moved for [`STUCK_AFTER`] are closed to make room.

use crate::budget::Relief;
use crate::reload::TlsConfig;
use crate::state::{AppState, DRAIN_TIMEOUT};
use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower_service::Service as _;

/// The apiserver closes a webhook connection it has not used for 90 s: its client transport
/// (client-go `transport.New` → `utilnet.SetTransportDefaults`, k8s.io/apimachinery
/// `pkg/util/net/http.go`) leaves `IdleConnTimeout` unset, so `SetOldTransportDefaults` copies
/// Go's `http.DefaultTransport` value, 90 s, which x/net/http2 also applies to HTTP/2
/// connections. Closing later than the client means we never close a connection just as the
/// apiserver picks it from its pool; the 10 s margin covers our 1 s watch and timer skew.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(100);
/// A connection must send its first request within this time of its handshake.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// An HTTP/1.1 request head must be complete within this time of its first byte, on every
/// request of a connection (hyper's own `header_read_timeout` starts when the previous answer
/// is written, which would make it an idle timeout far shorter than the apiserver's).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The TLS handshake must complete within this time (client-go gives it 10 s too).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// An answer not delivered this long after it was ready belongs to a client that does not
/// read: the apiserver reads every answer at once, and gives up on a review after its
/// `timeoutSeconds` (at most 30 s) anyway.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// When memory for reviews runs short, connections with an answer pending this long are closed
/// first.
pub const STUCK_AFTER: Duration = Duration::from_secs(1);
/// A request body the server is waiting on that has sent nothing for this long makes its
/// connection evictable at the cap, busy or not: the apiserver sends its bodies at once, and a
/// client that keeps one stalled request in flight must not hold its seat.
pub const BODY_STALLED_AFTER: Duration = Duration::from_secs(1);
/// A connection still in its TLS handshake, or not yet sent its first request, whose client has
/// sent something (its TLS client hello), is not evicted for this long after it was accepted: under churn at the cap, completed connections arriving
/// meanwhile must not cut the handshakes in progress (the apiserver completes its handshake and
/// sends its request within milliseconds). Past it, a handshake that has not finished holds no
/// seat at the cap; [`HANDSHAKE_TIMEOUT`] ends it anyway.
pub const FRESH_PROTECTED_FOR: Duration = Duration::from_secs(1);
/// Concurrent HTTP/2 streams per connection. The apiserver's Go client opens another
/// connection when a connection's streams are all in use (x/net/http2 without
/// `StrictMaxConcurrentStreams`), so a low number costs it nothing; hyper's default is 200.
pub const MAX_CONCURRENT_STREAMS: u32 = 32;
/// HTTP/2 header block limit (hyper's default is 16 MiB); an AdmissionReview request has a
/// handful of headers.
const MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;
/// HTTP/2 receive windows (hyper's defaults are 1 MiB each). What a client sends and no handler
/// reads yet (a body waiting for review memory) is buffered up to the connection window, on
/// every connection: 128 KiB still moves a review body at hundreds of MB/s over a cluster
/// network's round trip.
const CONNECTION_WINDOW: u32 = 128 * 1024;
const STREAM_WINDOW: u32 = 64 * 1024;
/// HTTP/1.1 read buffer (hyper's default is ~400 KiB, reached by a long request head): a head
/// is a few hundred bytes, and a body is read through it piece by piece.
const HTTP1_BUFFER: usize = 16 * 1024;
/// Answers are handed to hyper in pieces of this size, so that what a client does not read
/// stays in our (counted) answer rather than in hyper's write buffer.
const ANSWER_CHUNK: usize = 64 * 1024;
/// How long an evicted or idle connection may take to close gracefully before it is cut.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Answers a connection may have pending: hyper's stream limit, and one more for HTTP/1.1.
const ANSWER_SLOTS: usize = MAX_CONCURRENT_STREAMS as usize + 1;
/// How long a new connection may wait for room at the cap (`ADMIT_TRIES` × `ADMIT_RETRY`).
const ADMIT_TRIES: u32 = 20;
const ADMIT_RETRY: Duration = Duration::from_millis(5);
/// How often each connection's watch looks at it.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// Connections that were asked to close but have not yet gone may exceed the cap by this
/// fraction; past it new connections are refused, so eviction can never run the process out of
/// file descriptors.
const CLOSING_SLACK_DIVISOR: usize = 4;

/// The limits of one port.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub handshake_timeout: Duration,
    pub first_request_timeout: Duration,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub send_timeout: Duration,
}

impl Limits {
    pub fn new(max_connections: usize) -> Limits {
        Limits {
            max_connections,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            first_request_timeout: FIRST_REQUEST_TIMEOUT,
            header_read_timeout: HEADER_READ_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            send_timeout: SEND_TIMEOUT,
        }
    }
}

/// Milliseconds since the first call: the clock of every connection's timestamps (atomics hold
/// it; 0 means "not set", so it starts at 1).
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

fn ms(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Why the webhook closed a connection (the `reason` label of
/// `probelint_webhook_connections_closed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CloseReason {
    Idle = 1,
    FirstRequestTimeout,
    HeaderReadTimeout,
    SendTimeout,
    /// Evicted to make room for a new connection at the cap.
    Evicted,
    /// Closed because its pending answers held memory that reviews needed.
    Memory,
    HandshakeTimeout,
    HandshakeFailed,
    /// Refused at the cap: every connection had a request in flight.
    Refused,
    Shutdown,
}

impl CloseReason {
    pub const ALL: [CloseReason; 10] = [
        CloseReason::Idle,
        CloseReason::FirstRequestTimeout,
        CloseReason::HeaderReadTimeout,
        CloseReason::SendTimeout,
        CloseReason::Evicted,
        CloseReason::Memory,
        CloseReason::HandshakeTimeout,
        CloseReason::HandshakeFailed,
        CloseReason::Refused,
        CloseReason::Shutdown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Idle => "idle",
            CloseReason::FirstRequestTimeout => "first_request_timeout",
            CloseReason::HeaderReadTimeout => "header_read_timeout",
            CloseReason::SendTimeout => "send_timeout",
            CloseReason::Evicted => "evicted",
            CloseReason::Memory => "memory",
            CloseReason::HandshakeTimeout => "handshake_timeout",
            CloseReason::HandshakeFailed => "handshake_failed",
            CloseReason::Refused => "refused",
            CloseReason::Shutdown => "shutdown",
        }
    }

    fn from_u8(value: u8) -> Option<CloseReason> {
        CloseReason::ALL.into_iter().find(|r| *r as u8 == value)
    }
}

/// What the watch asks of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Keep,
    /// Finish the requests in flight, accept no more, then close.
    Graceful(CloseReason),
    /// Close now.
    Abort(CloseReason),
}

const ASK_NONE: u8 = 0;
const ASK_GRACEFUL: u8 = 1;
const ASK_ABORT: u8 = 2;

/// One connection's state, shared by its task, its requests and the port's registry. Only
/// atomics: a request touches a few of them and takes no lock.
pub struct Conn {
    id: u64,
    /// The client's address: connections from one address share its seats and review memory.
    source: IpAddr,
    /// When it was accepted.
    created: u64,
    /// Whether its client has sent anything yet (a TLS client hello, a request head).
    hello: AtomicBool,
    /// Whether it speaks HTTP/1.1 (ALPN, or the plain port): the header-read watch applies.
    http1: AtomicBool,
    served: AtomicBool,
    in_flight: AtomicU32,
    /// When `in_flight` last fell to 0 (or the connection was set up).
    idle_since: AtomicU64,
    /// HTTP/1.1: when the first byte of a request head arrived with no request in flight.
    head_started: AtomicU64,
    unsent_answers: AtomicU32,
    unsent_bytes: AtomicUsize,
    /// When each pending answer became ready (0: a free slot): a stream whose answer the client
    /// does not read is timed by itself, whatever the connection's other streams do. hyper
    /// keeps at most [`MAX_CONCURRENT_STREAMS`] answers of a connection alive at once.
    answer_since: [AtomicU64; ANSWER_SLOTS],
    ask: AtomicU8,
    ask_reason: AtomicU8,
    wake: Notify,
    /// Request bodies the server is waiting on (polled, nothing came), and since when one has
    /// been: set when the count rises from 0.
    body_waits: AtomicU32,
    body_wait_since: AtomicU64,
}

impl Conn {
    fn new(id: u64, source: IpAddr, now: u64) -> Conn {
        Conn {
            id,
            source,
            created: now,
            hello: AtomicBool::new(false),
            http1: AtomicBool::new(true),
            served: AtomicBool::new(false),
            in_flight: AtomicU32::new(0),
            idle_since: AtomicU64::new(now),
            head_started: AtomicU64::new(0),
            unsent_answers: AtomicU32::new(0),
            unsent_bytes: AtomicUsize::new(0),
            answer_since: std::array::from_fn(|_| AtomicU64::new(0)),
            ask: AtomicU8::new(ASK_NONE),
            ask_reason: AtomicU8::new(0),
            wake: Notify::new(),
            body_waits: AtomicU32::new(0),
            body_wait_since: AtomicU64::new(0),
        }
    }

    fn body_waiting(&self, now: u64) {
        if self.body_waits.fetch_add(1, Ordering::AcqRel) == 0 {
            self.body_wait_since.store(now, Ordering::Release);
        }
    }

    fn body_moved(&self) {
        self.body_waits.fetch_sub(1, Ordering::AcqRel);
    }

    /// How long a request body the server waits on has sent nothing (0 when none waits).
    fn body_stalled_for(&self, now: u64) -> u64 {
        if self.body_waits.load(Ordering::Acquire) == 0 {
            return 0;
        }
        now.saturating_sub(self.body_wait_since.load(Ordering::Acquire))
    }

    /// Asks the connection's task to close it (an abort overrides a graceful request).
    fn ask(&self, kind: u8, reason: CloseReason) {
        let previous = self.ask.fetch_max(kind, Ordering::AcqRel);
        if previous < kind {
            self.ask_reason.store(reason as u8, Ordering::Release);
            self.wake.notify_one();
        }
    }

    fn closing(&self) -> bool {
        self.ask.load(Ordering::Acquire) != ASK_NONE
    }

    fn request_started(&self) {
        self.served.store(true, Ordering::Relaxed);
        self.head_started.store(0, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    fn request_finished(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since.store(now_ms(), Ordering::Relaxed);
        }
    }

    /// Counts an answer as waiting to be delivered; returns its slot.
    fn answer_waiting(&self, bytes: usize) -> Option<usize> {
        self.unsent_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.unsent_answers.fetch_add(1, Ordering::AcqRel);
        let now = now_ms();
        self.answer_since.iter().position(|slot| {
            slot.compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    fn answer_delivered(&self, bytes: usize, slot: Option<usize>) {
        if let Some(slot) = slot {
            self.answer_since[slot].store(0, Ordering::Release);
        }
        self.unsent_bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.unsent_answers.fetch_sub(1, Ordering::AcqRel);
    }

    /// How long the oldest pending answer has waited (0 when none is pending).
    fn stalled_for(&self, now: u64) -> u64 {
        if self.unsent_answers.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.answer_since
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .filter(|&since| since != 0)
            .min()
            .map_or(0, |oldest| now.saturating_sub(oldest))
    }

    /// Whether the connection holds nothing in flight: the kind eviction takes first.
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// What to do with the connection at `now`; `pressed`: reviews need more memory than the
    /// budget has.
    fn verdict(&self, limits: &Limits, now: u64, pressed: bool) -> Verdict {
        let reason = || {
            CloseReason::from_u8(self.ask_reason.load(Ordering::Acquire))
                .unwrap_or(CloseReason::Shutdown)
        };
        match self.ask.load(Ordering::Acquire) {
            ASK_ABORT => return Verdict::Abort(reason()),
            ASK_GRACEFUL => return Verdict::Graceful(reason()),
            _ => {}
        }
        let since = |t: &AtomicU64| now.saturating_sub(t.load(Ordering::Relaxed));
        let stalled = self.stalled_for(now);
        if stalled > ms(limits.send_timeout) {
            return Verdict::Abort(CloseReason::SendTimeout);
        }
        if pressed && stalled > ms(STUCK_AFTER) {
            return Verdict::Abort(CloseReason::Memory);
        }
        if !self.is_idle() {
            return Verdict::Keep;
        }
        let idle = since(&self.idle_since);
        if !self.served.load(Ordering::Relaxed) && idle > ms(limits.first_request_timeout) {
            return Verdict::Abort(CloseReason::FirstRequestTimeout);
        }
        let head = self.head_started.load(Ordering::Relaxed);
        if self.http1.load(Ordering::Relaxed)
            && head != 0
            && now.saturating_sub(head) > ms(limits.header_read_timeout)
        {
            return Verdict::Abort(CloseReason::HeaderReadTimeout);
        }
        if idle > ms(limits.idle_timeout) {
            return Verdict::Graceful(CloseReason::Idle);
        }
        Verdict::Keep
    }
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    conns: HashMap<u64, Arc<Conn>>,
    /// Open connections per client address.
    sources: HashMap<IpAddr, usize>,
}

/// Which connection goes first when a new one needs its seat: the lower class, then the lower
/// key (`None`: not to be evicted).
fn eviction_order(conn: &Conn, now: u64) -> Option<(u8, u64)> {
    if conn.closing() {
        return None;
    }
    if conn.is_idle() {
        if conn.served.load(Ordering::Relaxed) {
            // Idle after a request (or in the middle of the next head): the longest idle first.
            return Some((0, conn.idle_since.load(Ordering::Relaxed)));
        }
        // Still in its handshake, or not yet sent its first request. One whose client has
        // begun (a TLS client hello) is protected for a moment: a client connecting as others
        // churn must get to send its request. Then, or when it has sent nothing at all, the
        // oldest first.
        let fresh = conn.hello.load(Ordering::Relaxed)
            && now.saturating_sub(conn.created) <= ms(FRESH_PROTECTED_FOR);
        return (!fresh).then_some((1, conn.created));
    }
    // Busy only with a body its client does not send, then with answers it does not read.
    let body = conn.body_stalled_for(now);
    if body > ms(BODY_STALLED_AFTER) {
        return Some((2, u64::MAX - body));
    }
    let answers = conn.stalled_for(now);
    (answers > ms(STUCK_AFTER)).then_some((3, u64::MAX - answers))
}

/// One listening port and its connections.
pub struct Port {
    pub name: &'static str,
    limits: Limits,
    registry: Mutex<Registry>,
    tls: Option<Arc<TlsConfig>>,
    router: Router,
    state: Arc<AppState>,
    emptied: Notify,
}

impl Port {
    pub fn new(
        name: &'static str,
        limits: Limits,
        tls: Option<Arc<TlsConfig>>,
        router: Router,
        state: Arc<AppState>,
    ) -> Arc<Port> {
        Arc::new(Port {
            name,
            limits,
            registry: Mutex::default(),
            tls,
            router,
            state,
            emptied: Notify::new(),
        })
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn connection_count(&self) -> usize {
        self.registry().conns.len()
    }

    fn closed(&self, reason: CloseReason) {
        self.state.metrics.count_closed(self.name, reason.as_str());
    }

    /// Registers a new connection from `source`, making room at the port's cap by evicting one
    /// ([`eviction_order`]). A source holding its fair share of the seats (the cap divided among
    /// the sources connected) may only evict its own connections; one under it may also take a
    /// seat from a connection still in its handshake (or before its first request) of the
    /// source holding the most seats, when that source holds more than its share. `None`:
    /// every connection is busy with real work, fresh, or another source's within its share
    /// (or too many are still closing); refuse it.
    fn admit(&self, source: IpAddr) -> Option<Arc<Conn>> {
        self.admit_at(source, now_ms()).ok()
    }

    /// [`Port::admit`] at `now` (milliseconds of [`now_ms`]); `Err(true)`: refused only because
    /// too many connections are still closing (worth trying again in a moment).
    fn admit_at(&self, source: IpAddr, now: u64) -> Result<Arc<Conn>, bool> {
        let mut registry = self.registry();
        let max = self.limits.max_connections;
        let closing = if registry.conns.len() >= max {
            registry.conns.values().filter(|c| c.closing()).count()
        } else {
            0
        };
        if registry.conns.len() - closing >= max {
            if closing > max / CLOSING_SLACK_DIVISOR {
                return Err(true);
            }
            let mine = registry.sources.get(&source).copied().unwrap_or(0);
            let sources = registry.sources.len() + usize::from(mine == 0);
            let fair = (max / sources).max(1);
            let victim = registry
                .conns
                .values()
                .filter(|c| mine < fair || c.source == source)
                .filter_map(|c| eviction_order(c, now).map(|order| (order, c)))
                .min_by_key(|(order, _)| *order)
                .map(|(_, c)| c)
                .or_else(|| {
                    if mine >= fair {
                        return None;
                    }
                    let (&hog, &held) = registry
                        .sources
                        .iter()
                        .filter(|(s, _)| **s != source)
                        .max_by_key(|(_, held)| **held)?;
                    if held <= fair {
                        return None;
                    }
                    registry
                        .conns
                        .values()
                        .filter(|c| {
                            c.source == hog
                                && !c.closing()
                                && c.is_idle()
                                && !c.served.load(Ordering::Relaxed)
                        })
                        .min_by_key(|c| c.created)
                })
                .ok_or(false)?;
            let mid_request = !victim.served.load(Ordering::Relaxed)
                || victim.head_started.load(Ordering::Relaxed) != 0
                || !victim.is_idle();
            let kind = if mid_request { ASK_ABORT } else { ASK_GRACEFUL };
            victim.ask(kind, CloseReason::Evicted);
        }
        registry.next_id += 1;
        let id = registry.next_id;
        let conn = Arc::new(Conn::new(id, source, now));
        registry.conns.insert(id, conn.clone());
        *registry.sources.entry(source).or_default() += 1;
        self.state
            .metrics
            .set_connections(self.name, registry.conns.len() as i64);
        Ok(conn)
    }

    /// [`Port::admit`], retried for a moment while too many connections are still closing:
    /// the connections just asked to close (evicted) need their tasks to run before their
    /// descriptors are free. Meanwhile nothing else is accepted; new connections wait in the
    /// listen backlog. A connection refused for want of a seat is refused at once, so that a
    /// flood of them does not hold the connections queued behind it.
    async fn admit_soon(&self, source: IpAddr) -> Option<Arc<Conn>> {
        for _ in 0..ADMIT_TRIES {
            match self.admit_at(source, now_ms()) {
                Ok(conn) => return Some(conn),
                Err(false) => return None,
                Err(true) => tokio::time::sleep(ADMIT_RETRY).await,
            }
        }
        self.admit(source)
    }

    fn remove(&self, id: u64) {
        let mut registry = self.registry();
        if let Some(conn) = registry.conns.remove(&id)
            && let std::collections::hash_map::Entry::Occupied(mut held) =
                registry.sources.entry(conn.source)
        {
            *held.get_mut() -= 1;
            if *held.get() == 0 {
                held.remove();
            }
        }
        self.state
            .metrics
            .set_connections(self.name, registry.conns.len() as i64);
        if registry.conns.is_empty() {
            self.emptied.notify_waiters();
        }
    }

    /// Closes the connections whose pending answers have not moved for `stuck_after`: they hold
    /// memory that reviews need. Returns how many were asked to close.
    fn close_stuck(&self, stuck_after: Duration) -> usize {
        let now = now_ms();
        let registry = self.registry();
        let mut closed = 0;
        for conn in registry.conns.values() {
            if !conn.closing() && conn.stalled_for(now) > ms(stuck_after) {
                conn.ask(ASK_ABORT, CloseReason::Memory);
                closed += 1;
            }
        }
        closed
    }

    /// Accepts connections until `shutdown` resolves, then drains: every connection finishes
    /// its requests in flight (up to `drain`) and the function returns.
    pub async fn run(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                biased;
                () = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((tcp, peer)) => match self.admit_soon(peer.ip()).await {
                    Some(conn) => {
                        tokio::spawn(self.clone().connection(conn, tcp, peer));
                    }
                    None => {
                        self.closed(CloseReason::Refused);
                        tracing::warn!(
                            port = self.name,
                            %peer,
                            max_connections = self.limits.max_connections,
                            "connection refused: every connection has a request in flight"
                        );
                    }
                },
                Err(error) => {
                    // EMFILE and the like: back off instead of spinning on the listener.
                    tracing::warn!(port = self.name, %error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        drop(listener);
        let conns: Vec<Arc<Conn>> = self.registry().conns.values().cloned().collect();
        for conn in &conns {
            // Nothing to finish on a connection that never sent a request or is halfway through
            // a request head: those go at once, the rest finish what they started.
            let mid_head = conn.is_idle()
                && (!conn.served.load(Ordering::Relaxed)
                    || conn.head_started.load(Ordering::Relaxed) != 0);
            let kind = if mid_head { ASK_ABORT } else { ASK_GRACEFUL };
            conn.ask(kind, CloseReason::Shutdown);
        }
        drop(conns);
        let emptied = self.emptied.notified();
        tokio::pin!(emptied);
        emptied.as_mut().enable();
        if self.connection_count() > 0 {
            let _ = tokio::time::timeout(drain, emptied).await;
        }
    }

    async fn connection(self: Arc<Self>, conn: Arc<Conn>, tcp: TcpStream, peer: SocketAddr) {
        let _registered = Registered {
            port: &self,
            id: conn.id,
        };
        // Without TCP_NODELAY a new connection's handshake and first answer wait on Nagle and
        // the client's delayed ACK, 40 ms each time (the soak's p99 showed exactly that).
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => {
                self.serve(conn, tcp, false).await;
            }
            Some(tls) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
                let tcp = Watched {
                    inner: tcp,
                    conn: conn.clone(),
                    handshake: true,
                };
                let handshake =
                    tokio::time::timeout(self.limits.handshake_timeout, acceptor.accept(tcp));
                let stream = tokio::select! {
                    biased;
                    () = conn.wake.notified() => {
                        if let Verdict::Abort(reason) | Verdict::Graceful(reason) =
                            conn.verdict(&self.limits, now_ms(), self.state.budget.pressed())
                        {
                            self.closed(reason);
                        }
                        return;
                    }
                    result = handshake => match result {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            // Plain HTTP on the TLS port, unknown client certificates, scanners:
                            // the client gets a TLS alert; this is only worth a debug line.
                            self.closed(CloseReason::HandshakeFailed);
                            tracing::debug!(%peer, %error, "TLS connection refused");
                            return;
                        }
                        Err(_) => {
                            self.closed(CloseReason::HandshakeTimeout);
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    },
                };
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                conn.idle_since.store(now_ms(), Ordering::Relaxed);
                self.serve(conn, stream, h2).await;
            }
        }
    }

    async fn serve<IO>(&self, conn: Arc<Conn>, io: IO, h2: bool)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        conn.http1.store(!h2, Ordering::Relaxed);
        let service = Svc {
            router: self.router.clone(),
            conn: conn.clone(),
            state: self.state.clone(),
        };
        let io = TokioIo::new(Watched {
            inner: io,
            conn: conn.clone(),
            handshake: false,
        });
        if h2 {
            let mut builder = http2::Builder::new(TokioExecutor::new());
            builder
                .timer(TokioTimer::new())
                .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
                .max_header_list_size(MAX_HEADER_LIST_SIZE)
                .initial_connection_window_size(CONNECTION_WINDOW)
                .initial_stream_window_size(STREAM_WINDOW);
            self.watch(&conn, builder.serve_connection(io, service))
                .await;
        } else {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .max_buf_size(HTTP1_BUFFER)
                // Our watch times request heads from their first byte instead (see
                // HEADER_READ_TIMEOUT).
                .header_read_timeout(None);
            self.watch(&conn, builder.serve_connection(io, service))
                .await;
        }
    }

    /// Drives one connection and applies the watch's verdicts to it.
    async fn watch<C: Graceful>(&self, conn: &Conn, connection: C) {
        tokio::pin!(connection);
        let mut ticks = tokio::time::interval(WATCH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut cut_at: Option<Instant> = None;
        loop {
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(port = self.name, %error, "connection ended with an error");
                    }
                    return;
                }
                () = conn.wake.notified() => {}
                _ = ticks.tick() => {}
            }
            if cut_at.is_some_and(|at| Instant::now() >= at) {
                return;
            }
            // Closing, and its answers do not move: the client is not reading, there is nothing
            // to wait for.
            if cut_at.is_some() && conn.stalled_for(now_ms()) > ms(STUCK_AFTER) {
                return;
            }
            match conn.verdict(&self.limits, now_ms(), self.state.budget.pressed()) {
                Verdict::Keep => {}
                Verdict::Abort(reason) => {
                    self.closed(reason);
                    tracing::debug!(
                        port = self.name,
                        reason = reason.as_str(),
                        "connection closed"
                    );
                    return;
                }
                Verdict::Graceful(reason) if cut_at.is_none() => {
                    self.closed(reason);
                    connection.as_mut().start_graceful();
                    let grace = match reason {
                        CloseReason::Shutdown => DRAIN_TIMEOUT,
                        _ => CLOSE_GRACE,
                    };
                    cut_at = Some(Instant::now() + grace);
                }
                Verdict::Graceful(_) => {}
            }
        }
    }
}

impl Relief for Port {
    fn relieve(&self) {
        self.close_stuck(STUCK_AFTER);
    }
}

/// Removes a connection from its port's registry when its task ends, however it ends.
struct Registered<'a> {
    port: &'a Port,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.port.remove(self.id);
    }
}

/// hyper's two connection types, closed the same way.
trait Graceful: Future<Output = hyper::Result<()>> {
    fn start_graceful(self: Pin<&mut Self>);
}

impl<I, S> Graceful for http1::Connection<I, S>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: http_body::Body + 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn start_graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, E> Graceful for http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: http_body::Body + 'static,
    <S::ResBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn start_graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

pin_project_lite::pin_project! {
    /// The connection's byte stream; notes when its client first sends, and (after the
    /// handshake) when an HTTP/1.1 request head begins.
    struct Watched<IO> {
        #[pin]
        inner: IO,
        conn: Arc<Conn>,
        // The TCP stream under the TLS handshake: only the first bytes are noted.
        handshake: bool,
    }
}

impl<IO: AsyncRead> AsyncRead for Watched<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let result = this.inner.poll_read(cx, buf);
        if buf.filled().len() > before && !this.conn.hello.load(Ordering::Relaxed) {
            this.conn.hello.store(true, Ordering::Relaxed);
        }
        if !*this.handshake
            && buf.filled().len() > before
            && this.conn.is_idle()
            && this.conn.head_started.load(Ordering::Relaxed) == 0
        {
            this.conn.head_started.store(now_ms(), Ordering::Relaxed);
        }
        result
    }
}

impl<IO: AsyncWrite> AsyncWrite for Watched<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The address of the client that sent a request (a request extension): its reviews share one
/// part of the review memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client(pub IpAddr);

/// The router, as hyper calls it for each request of one connection.
#[derive(Clone)]
struct Svc {
    router: Router,
    conn: Arc<Conn>,
    state: Arc<AppState>,
}

impl hyper::service::Service<Request<Incoming>> for Svc {
    type Response = Response<Answer>;
    type Error = Infallible;
    type Future = SvcFuture;

    fn call(&self, mut request: Request<Incoming>) -> SvcFuture {
        self.conn.request_started();
        let conn = self.conn.clone();
        request.extensions_mut().insert(Client(self.conn.source));
        let request = request.map(|body| {
            Body::new(WatchedBody {
                inner: body,
                conn,
                waiting: false,
            })
        });
        SvcFuture {
            inner: self.router.clone().call(request),
            in_flight: Some(InFlight {
                conn: self.conn.clone(),
                state: self.state.clone(),
            }),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request body that tells its connection while the server waits on it and nothing comes
    /// ([`Conn::body_stalled_for`]).
    struct WatchedBody {
        #[pin]
        inner: Incoming,
        conn: Arc<Conn>,
        waiting: bool,
    }

    impl PinnedDrop for WatchedBody {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.waiting {
                this.conn.body_moved();
            }
        }
    }
}

impl http_body::Body for WatchedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        match (&polled, *this.waiting) {
            (Poll::Pending, false) => {
                *this.waiting = true;
                this.conn.body_waiting(now_ms());
            }
            (Poll::Ready(_), true) => {
                *this.waiting = false;
                this.conn.body_moved();
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request counted as in flight on its connection until its answer is delivered or dropped.
struct InFlight {
    conn: Arc<Conn>,
    state: Arc<AppState>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn.request_finished();
    }
}

pin_project_lite::pin_project! {
    struct SvcFuture {
        #[pin]
        inner: axum::routing::future::RouteFuture<Infallible>,
        in_flight: Option<InFlight>,
    }
}

impl Future for SvcFuture {
    type Output = Result<Response<Answer>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = std::task::ready!(this.inner.poll(cx));
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(response.map(|body| Answer::new(body, in_flight))))
    }
}

/// An answer body: counted against the memory budget and its connection's unsent answers until
/// delivered, and handed to hyper [`ANSWER_CHUNK`] bytes at a time.
pub struct Answer {
    inner: Body,
    rest: Bytes,
    account: Option<Account>,
}

struct Account {
    bytes: usize,
    slot: Option<usize>,
    in_flight: InFlight,
}

impl Drop for Account {
    fn drop(&mut self) {
        self.in_flight.conn.answer_delivered(self.bytes, self.slot);
        self.in_flight.state.budget.give(self.bytes, None);
    }
}

impl Answer {
    fn new(inner: Body, in_flight: Option<InFlight>) -> Answer {
        let account = in_flight.map(|in_flight| {
            let bytes = http_body::Body::size_hint(&inner).lower() as usize;
            let slot = in_flight.conn.answer_waiting(bytes);
            in_flight.state.budget.take_anyway(bytes);
            Account {
                bytes,
                slot,
                in_flight,
            }
        });
        Answer {
            inner,
            rest: Bytes::new(),
            account,
        }
    }

    fn next_piece(&mut self) -> Bytes {
        if self.rest.len() > ANSWER_CHUNK {
            self.rest.split_to(ANSWER_CHUNK)
        } else {
            std::mem::take(&mut self.rest)
        }
    }
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if !this.rest.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(this.next_piece()))));
        }
        match std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    this.rest = data;
                    Poll::Ready(Some(Ok(Frame::data(this.next_piece()))))
                }
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            Some(Err(error)) => Poll::Ready(Some(Err(error))),
            None => {
                // Delivered (hyper holds at most its write buffer of it now).
                this.account = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        // An answer dropped unsent (the stream was reset, the connection closed) frees its
        // share the same way; `Account` does the bookkeeping.
        self.account.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    fn limits() -> Limits {
        Limits::new(4)
    }

    fn port_of(cap: usize) -> Arc<Port> {
        let state = Arc::new(AppState::new(
            probelint_policies::Policy::builtin().expect("built-in policy"),
        ));
        Port::new("tls", Limits::new(cap), None, Router::new(), state)
    }

    #[test]
    fn handshakes_in_progress_are_not_cut_by_newcomers_until_they_are_late() {
        let port = port_of(3);
        let t = now_ms();
        let kept_alive = port.admit_at(LOCAL, t).expect("a seat");
        kept_alive.request_started();
        kept_alive.request_finished();
        let shaking = [
            port.admit_at(LOCAL, t + 10).expect("a seat"),
            port.admit_at(LOCAL, t + 20).expect("a seat"),
        ];
        for conn in &shaking {
            conn.hello.store(true, Ordering::Relaxed);
        }
        // At the cap, the connection idle after its request goes, not the handshakes.
        let third = port.admit_at(LOCAL, t + 30).expect("room made");
        third.hello.store(true, Ordering::Relaxed);
        assert!(kept_alive.closing());
        assert!(shaking.iter().all(|c| !c.closing()));
        // Only fresh handshakes left: the newcomer is refused rather than cut one.
        port.remove(kept_alive.id);
        assert!(
            port.admit_at(LOCAL, t + 500).is_err(),
            "fresh ones are kept"
        );
        assert!(shaking.iter().chain([&third]).all(|c| !c.closing()));
        // A handshake not finished FRESH_PROTECTED_FOR after it began holds no seat.
        let late = t + 10 + ms(FRESH_PROTECTED_FOR) + 1;
        assert!(port.admit_at(LOCAL, late).is_ok());
        assert!(shaking[0].closing() && !shaking[1].closing() && !third.closing());
    }

    #[test]
    fn a_source_flooding_fresh_connections_leaves_room_for_another_source() {
        let port = port_of(4);
        let t = now_ms();
        let flood: Vec<Arc<Conn>> = (0..4)
            .map(|i| port.admit_at(OTHER, t + i).expect("a seat"))
            .collect();
        for conn in &flood {
            conn.hello.store(true, Ordering::Relaxed);
        }
        // The flood's next connection finds only its own fresh ones: refused.
        assert!(port.admit_at(OTHER, t + 10).is_err());
        // Another client's connection takes the seat of the flood's oldest.
        let reviewer = port
            .admit_at(LOCAL, t + 10)
            .expect("a seat for another source");
        assert!(flood[0].closing());
        assert!(flood[1..].iter().all(|c| !c.closing()));
        port.remove(flood[0].id);
        // Under its share (1 of the 2 seats each source has), the reviewer's source takes
        // another fresh seat of the flood's; then each holds 2, and a source at its share
        // evicts only its own connections: not the reviewer's, even with its body stalled.
        reviewer.request_started();
        let second = port.admit_at(LOCAL, t + 20).expect("under its share");
        second.hello.store(true, Ordering::Relaxed);
        assert!(flood[1].closing());
        port.remove(flood[1].id);
        second.request_started();
        reviewer.body_waiting(t + 20);
        let much_later = t + 20 + ms(BODY_STALLED_AFTER) + ms(FRESH_PROTECTED_FOR) + 10;
        let flooded = port
            .admit_at(OTHER, much_later)
            .expect("its own late handshakes go");
        assert!(!reviewer.closing() && !second.closing());
        assert!(flood[2].closing());
        drop(flooded);
    }

    #[test]
    fn at_the_cap_a_connection_busy_only_with_a_stalled_body_is_evicted() {
        let port = || {
            let state = Arc::new(AppState::new(
                probelint_policies::Policy::builtin().expect("built-in policy"),
            ));
            Port::new("tls", Limits::new(3), None, Router::new(), state)
        };
        let busy = |port: &Port| -> Vec<Arc<Conn>> {
            (0..3)
                .map(|_| {
                    let conn = port.admit(LOCAL).expect("a seat");
                    conn.request_started();
                    conn
                })
                .collect()
        };
        let t = now_ms();
        let later = t + ms(BODY_STALLED_AFTER) + 500;
        // All three busy: one evaluating (its body came whole), two waiting on their bodies,
        // one of them for longer than BODY_STALLED_AFTER.
        let stalled = port();
        let conns = busy(&stalled);
        conns[2].body_waiting(t);
        conns[1].body_waiting(t + 1_000);
        assert!(
            stalled.admit_at(LOCAL, later).is_ok(),
            "a stalled body holds no seat"
        );
        assert!(conns[2].closing(), "the stalled one is evicted");
        assert!(!conns[0].closing() && !conns[1].closing());
        // No body stalled long enough, or its body moved again: every busy seat is kept, and
        // the newcomer is refused.
        let moving = port();
        let conns = busy(&moving);
        conns[1].body_waiting(t + 1_000);
        conns[2].body_waiting(t);
        conns[2].body_moved();
        assert!(
            moving.admit_at(LOCAL, later).is_err(),
            "busy connections are kept"
        );
        assert!(conns.iter().all(|c| !c.closing()));
    }

    #[test]
    fn a_connection_that_never_asks_is_closed_after_the_first_request_timeout() {
        let conn = Conn::new(1, LOCAL, now_ms());
        let start = conn.idle_since.load(Ordering::Relaxed);
        assert_eq!(conn.verdict(&limits(), start + 9_000, false), Verdict::Keep);
        assert_eq!(
            conn.verdict(&limits(), start + 10_001, false),
            Verdict::Abort(CloseReason::FirstRequestTimeout)
        );
    }

    #[test]
    fn every_request_head_is_timed_from_its_first_byte_and_idle_is_not() {
        let conn = Conn::new(1, LOCAL, now_ms());
        conn.request_started();
        conn.request_finished();
        let idle = conn.idle_since.load(Ordering::Relaxed);
        // Idle without a byte: kept until the idle timeout, then closed gracefully.
        assert_eq!(conn.verdict(&limits(), idle + 99_000, false), Verdict::Keep);
        assert_eq!(
            conn.verdict(&limits(), idle + 100_001, false),
            Verdict::Graceful(CloseReason::Idle)
        );
        // A head begun and not finished: cut 10 s after its first byte.
        conn.head_started.store(idle + 50_000, Ordering::Relaxed);
        assert_eq!(conn.verdict(&limits(), idle + 59_000, false), Verdict::Keep);
        assert_eq!(
            conn.verdict(&limits(), idle + 60_001, false),
            Verdict::Abort(CloseReason::HeaderReadTimeout)
        );
        // HTTP/2 frames (pings) between requests are no request head.
        conn.http1.store(false, Ordering::Relaxed);
        assert_eq!(conn.verdict(&limits(), idle + 60_001, false), Verdict::Keep);
    }

    #[test]
    fn answers_that_do_not_move_close_the_connection_and_busy_ones_are_kept() {
        let conn = Conn::new(1, LOCAL, now_ms());
        conn.request_started();
        let t = now_ms();
        assert_eq!(
            conn.verdict(&limits(), t + 60_000, false),
            Verdict::Keep,
            "a long review"
        );
        let stuck = conn.answer_waiting(1000);
        let t = conn.answer_since[stuck.expect("a slot")].load(Ordering::Relaxed);
        // Other answers delivered meanwhile do not excuse the stuck one.
        for _ in 0..100 {
            let slot = conn.answer_waiting(10);
            conn.answer_delivered(10, slot);
        }
        assert_eq!(conn.verdict(&limits(), t + 9_000, false), Verdict::Keep);
        assert_eq!(
            conn.verdict(&limits(), t + 10_001, false),
            Verdict::Abort(CloseReason::SendTimeout)
        );
        // Under memory pressure an answer pending for a second is enough.
        assert_eq!(conn.verdict(&limits(), t + 900, true), Verdict::Keep);
        assert_eq!(
            conn.verdict(&limits(), t + 1_001, true),
            Verdict::Abort(CloseReason::Memory)
        );
        conn.answer_delivered(1000, stuck);
        conn.request_finished();
        assert_eq!(conn.unsent_bytes.load(Ordering::Relaxed), 0);
        assert_eq!(conn.stalled_for(t + 60_000), 0);
    }

    #[test]
    fn a_request_to_close_wins_and_an_abort_overrides_a_graceful_one() {
        let conn = Conn::new(1, LOCAL, now_ms());
        conn.ask(ASK_GRACEFUL, CloseReason::Shutdown);
        assert_eq!(
            conn.verdict(&limits(), now_ms(), false),
            Verdict::Graceful(CloseReason::Shutdown)
        );
        conn.ask(ASK_ABORT, CloseReason::Memory);
        conn.ask(ASK_GRACEFUL, CloseReason::Idle);
        assert_eq!(
            conn.verdict(&limits(), now_ms(), false),
            Verdict::Abort(CloseReason::Memory)
        );
    }
}
