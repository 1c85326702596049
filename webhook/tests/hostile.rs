//! Hostile AdmissionReviews and hostile clients against the real `probelint-webhook` binary,
//! and the soak: continuous HTTPS load while certificates rotate and the policy is rewritten,
//! then SIGTERM.
//!
//! `webhook.rs` already covers a truncated body, a review without `request`, a body over the
//! limit (with Content-Length), wrong Content-Type, plaintext and TLS 1.1, client certificates,
//! rotation under load and SIGTERM with a review in flight. This file adds what those leave out;
//! after every hostile request the server must still answer a good one.
//!
//! The soak runs here in two sizes: `soak_30_seconds` in CI, and `soak` (ignored; 10 minutes by
//! default, configured by `SOAK_*` variables) from `tests/soak/soak.sh` on a release build.

mod support;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// HANG (the support module): how long a test waits for an answer before calling the server
// hung. What the server's own bound guarantees is checked by what it answers (a review or its
// own 503), not by the client's stopwatch.

/// `answer`, or a failure naming `what` after [`HANG`].
async fn in_time<T>(what: &str, answer: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG, answer)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer after {HANG:?}: the server hangs"))
}

// ---------------------------------------------------------------------------------------------
// A keep-alive HTTPS client: many requests on one connection, as the apiserver sends them.

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

struct Conn {
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    sender: Option<Sender>,
    /// The certificate the server presented on the current connection.
    peer: Option<Vec<u8>>,
    /// Connections opened so far.
    opened: u64,
}

struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Conn {
    fn new(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Conn {
        Conn {
            addr,
            config,
            sender: None,
            peer: None,
            opened: 0,
        }
    }

    async fn connect(&mut self) -> Result<(), Error> {
        let tcp = TcpStream::connect(self.addr).await?;
        tcp.set_nodelay(true)?;
        let tls = tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(rustls::pki_types::ServerName::try_from("localhost")?, tcp)
            .await?;
        self.peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec());
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
        tokio::spawn(connection);
        self.sender = Some(sender);
        self.opened += 1;
        Ok(())
    }

    /// POSTs JSON. Opens a connection when there is none (or the last one was closed).
    async fn post(&mut self, path: &str, body: Bytes) -> Result<Answer, Error> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            self.connect().await?;
        }
        let sender = self.sender.as_mut().expect("connected");
        let result = async {
            sender.ready().await?;
            let request = hyper::Request::builder()
                .method("POST")
                .uri(path)
                .header("host", "localhost")
                .header("content-type", "application/json")
                .body(Full::new(body))?;
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes().to_vec();
            Ok::<_, Error>(Answer { status, body })
        }
        .await;
        if result.is_err() {
            self.sender = None;
        }
        result
    }

    fn close(&mut self) {
        self.sender = None;
    }
}

fn good_review() -> Value {
    fixture_json("deny-gpu-deployment-without-probes")
}

/// A hostile body must get a well-formed answer: a 4xx with a message, or a 200 with an
/// AdmissionReview for the request's uid. Never a 5xx, never a dropped connection, never a
/// hang. Then a good review on the same connection must still be answered.
async fn assert_answered(conn: &mut Conn, what: &str, body: Vec<u8>) -> Answer {
    let answer = in_time(what, conn.post("/validate", Bytes::from(body)))
        .await
        .unwrap_or_else(|e| panic!("{what}: no answer: {e}"));
    match answer.status {
        200 => {
            let review: Value = serde_json::from_slice(&answer.body)
                .unwrap_or_else(|e| panic!("{what}: 200 but not JSON ({e}): {}", answer.text()));
            assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{what}");
            assert!(
                review["response"]["allowed"].is_boolean(),
                "{what}: {review}"
            );
            assert!(review["response"]["uid"].is_string(), "{what}: {review}");
        }
        400..=499 => assert!(
            answer.text().trim().len() > 10,
            "{what}: HTTP {} without a message",
            answer.status
        ),
        other => panic!("{what}: HTTP {other}: {}", answer.text()),
    }
    let next = conn
        .post("/validate", Bytes::from(fixture("allow-clean-gpu-pod")))
        .await
        .unwrap_or_else(|e| panic!("after {what}: the next review failed: {e}"));
    assert_eq!(next.status, 200, "after {what}: {}", next.text());
    answer
}

// ---------------------------------------------------------------------------------------------
// Hostile bodies

#[tokio::test]
async fn truncated_reviews_at_every_point_get_400() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let body = fixture("deny-gpu-deployment-without-probes");
    let cuts: Vec<usize> = (1..body.len()).step_by(97).collect();
    for &cut in &cuts {
        let answer =
            assert_answered(&mut conn, &format!("cut at {cut}"), body[..cut].to_vec()).await;
        assert_eq!(answer.status, 400, "cut at {cut}: {}", answer.text());
        assert!(answer.text().contains("not a valid"), "{}", answer.text());
    }
    assert_eq!(
        conn.opened, 1,
        "a 400 must not cost the client its connection"
    );
}

/// Every node of a real review, in turn, replaced by each JSON type it is not.
#[tokio::test]
async fn wrong_types_in_every_field_get_a_clear_answer() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let review = good_review();
    let mut pointers = Vec::new();
    let mut stack = vec![(String::new(), &review)];
    while let Some((pointer, node)) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (k, v) in map {
                    stack.push((
                        format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")),
                        v,
                    ));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    stack.push((format!("{pointer}/{i}"), v));
                }
            }
            _ => {}
        }
        if !pointer.is_empty() {
            pointers.push(pointer);
        }
    }
    let replacements = [
        json!(null),
        json!(7),
        json!(-1.5e300),
        json!("x"),
        json!(true),
        json!([]),
        json!({}),
        json!([{"a": null}]),
    ];
    let (mut refused, mut answered) = (0, 0);
    let start = Instant::now();
    for pointer in &pointers {
        let original = review.pointer(pointer).expect("pointer");
        for replacement in &replacements {
            if std::mem::discriminant(original) == std::mem::discriminant(replacement) {
                continue;
            }
            let mut hostile = review.clone();
            *hostile.pointer_mut(pointer).expect("pointer") = replacement.clone();
            let what = format!("{pointer} = {replacement}");
            let answer = assert_answered(
                &mut conn,
                &what,
                serde_json::to_vec(&hostile).expect("json"),
            )
            .await;
            if answer.status == 200 {
                answered += 1;
            } else {
                refused += 1;
            }
        }
    }
    eprintln!(
        "{} wrong-typed reviews ({} fields): {refused} refused with 4xx, {answered} answered, in {:?}",
        refused + answered,
        pointers.len(),
        start.elapsed()
    );
    assert!(refused > 50 && answered > 50, "{refused} {answered}");
}

#[tokio::test]
async fn odd_but_valid_json_and_other_review_versions_get_400_with_the_reason() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let mut v1beta1 = good_review();
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let mut v2 = good_review();
    v2["apiVersion"] = json!("admission.k8s.io/v2");
    let mut other_kind = good_review();
    other_kind["kind"] = json!("TokenReview");
    let mut no_api_version = good_review();
    no_api_version
        .as_object_mut()
        .expect("object")
        .remove("apiVersion");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "v1beta1",
            serde_json::to_vec(&v1beta1).expect("json"),
            "unsupported review type",
        ),
        (
            "v2",
            serde_json::to_vec(&v2).expect("json"),
            "unsupported review type",
        ),
        (
            "TokenReview",
            serde_json::to_vec(&other_kind).expect("json"),
            "unsupported review type",
        ),
        (
            "no apiVersion",
            serde_json::to_vec(&no_api_version).expect("json"),
            "apiVersion",
        ),
        ("empty body", Vec::new(), "not a valid"),
        ("null", b"null".to_vec(), "not a valid"),
        ("array", b"[1, 2]".to_vec(), "not a valid"),
        ("number", b"1e999999".to_vec(), "not a valid"),
        ("string", b"\"AdmissionReview\"".to_vec(), "not a valid"),
        ("whitespace", b" \n\t ".to_vec(), "not a valid"),
        (
            "trailing garbage",
            [fixture("allow-clean-gpu-pod"), b"}{".to_vec()].concat(),
            "not a valid",
        ),
        (
            "two reviews",
            [
                fixture("allow-clean-gpu-pod"),
                fixture("allow-clean-gpu-pod"),
            ]
            .concat(),
            "not a valid",
        ),
    ];
    for (what, body, expect) in cases {
        let answer = assert_answered(&mut conn, what, body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.text());
        assert!(answer.text().contains(expect), "{what}: {}", answer.text());
    }
}

#[tokio::test]
async fn non_utf8_bodies_and_lone_surrogates_get_400() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let good = fixture("deny-gpu-deployment-without-probes");
    let name = b"llama-3-70b";
    let at = good
        .windows(name.len())
        .position(|w| w == name)
        .expect("name in fixture");
    let mut latin1 = good.clone();
    latin1[at] = 0xe9; // a Latin-1 'é' inside a JSON string
    let mut nul = good.clone();
    nul[at] = 0; // a raw NUL inside a string: a control character, not allowed by JSON
    let utf16: Vec<u8> = String::from_utf8(good.clone())
        .expect("utf8")
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let mut surrogate = good_review();
    surrogate["request"]["object"]["metadata"]["name"] = json!("PLACEHOLDER");
    let surrogate = serde_json::to_string(&surrogate)
        .expect("json")
        .replace("PLACEHOLDER", "\\ud800")
        .into_bytes();
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(&good);
    for (what, body) in [
        ("Latin-1 byte", latin1),
        ("NUL byte", nul),
        ("UTF-16", utf16),
        ("lone surrogate", surrogate),
        ("BOM", bom),
        (
            "random bytes",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect(),
        ),
    ] {
        let answer = assert_answered(&mut conn, what, body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.text());
    }
}

/// serde_json stops at 128 levels: deeper nesting is a clean 400, never a stack overflow. Just
/// under the limit, the object is evaluated (and walked by the engine) like any other.
#[tokio::test]
async fn deeply_nested_json_is_refused_and_just_under_the_limit_is_evaluated() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let good = serde_json::to_string(&good_review()).expect("json");
    let nest = |depth: usize, open: &str, close: &str| -> Vec<u8> {
        let deep = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        good.replacen(
            "\"replicas\":1",
            &format!("\"replicas\":1,\"deep\":{deep}"),
            1,
        )
        .into_bytes()
    };
    for (what, body) in [
        ("100,000 arrays", nest(100_000, "[", "]")),
        ("100,000 objects", nest(100_000, "{\"a\":", "}")),
        ("1,000 arrays", nest(1_000, "[", "]")),
        ("129 arrays", nest(129, "[", "]")),
    ] {
        let answer = assert_answered(&mut conn, what, body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.text());
        assert!(
            answer.text().contains("recursion limit"),
            "{what}: {}",
            answer.text()
        );
    }
    // The review itself is 5 levels deep at `spec`: 120 more stays under 128.
    let answer = assert_answered(&mut conn, "120 arrays", nest(120, "[", "]")).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    // And nesting inside the pod spec, where the rules look.
    let mut review = good_review();
    let mut deep = json!("x");
    for _ in 0..115 {
        deep = json!({"nested": deep});
    }
    review["request"]["object"]["spec"]["template"]["spec"]["containers"][0]["env"] = json!([deep]);
    for path in ["/validate", "/mutate", "/validate/warn"] {
        let answer = conn
            .post(
                path,
                Bytes::from(serde_json::to_vec(&review).expect("json")),
            )
            .await
            .expect("answer");
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
    }
}

/// 10,000 GPU containers in one review (1.8 MB of compact JSON) would take ~130 MiB to judge
/// (measured: the engine's findings and the answer): refused with 413 before it is parsed,
/// with the arithmetic, and counted; 800 containers are answered on every endpoint, and the
/// connection serves the next review.
#[tokio::test]
async fn a_review_that_would_take_too_much_memory_is_refused_before_it_is_parsed() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let huge = big_review(10_000);
    let shape = probelint_webhook::cost::Shape::of(&huge);
    assert!(
        shape.review_bytes() > probelint_webhook::MAX_REVIEW_MEMORY,
        "{shape:?}"
    );
    for path in ["/validate", "/validate/warn", "/mutate"] {
        let answer = in_time(path, conn.post(path, Bytes::from(huge.clone())))
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(answer.status, 413, "{path}: {}", answer.text());
        let text = answer.text();
        for said in [
            "would take about",
            "MiB to evaluate, over the webhook's limit of 48.0 MiB per review",
            "objects × 4500 B",
        ] {
            assert!(text.contains(said), "{path}: {text}");
        }
    }
    let metrics = metrics_text(&webhook).await;
    for endpoint in ["validate", "validate/warn", "mutate"] {
        let name = format!(
            "probelint_webhook_reviews_refused_total{{endpoint=\"{endpoint}\",reason=\"too_costly\"}}"
        );
        assert_eq!(metric(&metrics, &name), 1, "{metrics}");
    }
    let body = big_review(800);
    for path in ["/validate", "/validate/warn", "/mutate"] {
        let answer = in_time(path, conn.post(path, Bytes::from(body.clone())))
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
        let review: Value = serde_json::from_slice(&answer.body).expect("JSON");
        let response = &review["response"];
        match path {
            "/validate" => assert_eq!(response["allowed"], false),
            "/mutate" => assert!(response["patch"].is_string()),
            _ => assert_eq!(response["allowed"], true),
        }
    }
    let next = conn
        .post("/validate", Bytes::from(fixture("allow-clean-gpu-pod")))
        .await
        .expect("next review");
    assert_eq!(next.status, 200);
}

/// The chart's memory limit (`resources.limits.memory` in the chart's values), in bytes.
fn chart_memory_limit() -> u64 {
    let path = format!(
        "{}/../charts/probelint/values.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let limits = text
        .split("\nresources:\n")
        .nth(1)
        .and_then(|rest| rest.split("  limits:\n").nth(1))
        .unwrap_or_else(|| panic!("{path}: no resources.limits"));
    let memory = limits
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{path}: no resources.limits.memory"));
    let mib: u64 = memory
        .strip_suffix("Mi")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{path}: memory limit {memory:?} is not in Mi"));
    mib * 1024 * 1024
}

/// `build(n)` for the largest `n` (up to 20,000) whose review the webhook accepts: what it
/// would cost is at most [`probelint_webhook::MAX_REVIEW_MEMORY`].
fn largest_accepted(build: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let fits = |body: &[u8]| {
        probelint_webhook::cost::Shape::of(body).review_bytes()
            <= probelint_webhook::MAX_REVIEW_MEMORY
    };
    let (mut low, mut high) = (1usize, 20_000usize);
    while low + 1 < high {
        let mid = (low + high) / 2;
        if fits(&build(mid)) {
            low = mid;
        } else {
            high = mid;
        }
    }
    build(low)
}

/// GPU containers with the fewest bytes one can take (the engine's findings cost the most per
/// byte there), as many as fit under the per-review limit.
fn worst_accepted_review() -> Vec<u8> {
    let one = |i: usize| {
        json!({"name": format!("c{i}"), "image": "vllm/vllm-openai",
            "resources": {"limits": {"nvidia.com/gpu": 1}}})
    };
    largest_accepted(|n| {
        let mut review = good_review();
        review["request"]["object"]["spec"]["template"]["spec"]["containers"] =
            Value::Array((0..n).map(one).collect());
        serde_json::to_vec(&review).expect("json")
    })
}

/// The most expensive reviews the webhook accepts, as many at once as its review memory holds
/// (two clients, two each), keep the webhook's peak RSS under the chart's memory limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worst_accepted_reviews_at_once_fit_the_charts_memory_limit() {
    let webhook = Arc::new(Webhook::start().await);
    let pid = webhook.pid();
    let limit = chart_memory_limit();
    let body = Bytes::from(worst_accepted_review());
    let shape = probelint_webhook::cost::Shape::of(&body);
    let mut clients = Vec::new();
    for source in [
        std::net::Ipv4Addr::LOCALHOST,
        std::net::Ipv4Addr::new(127, 0, 0, 2),
    ] {
        for _ in 0..2 {
            let (webhook, body) = (webhook.clone(), body.clone());
            clients.push(tokio::spawn(async move {
                let tcp = connect_from(source, webhook.addr).await.expect("connect");
                let tls = tokio_rustls::TlsConnector::from(webhook.client())
                    .connect(
                        rustls::pki_types::ServerName::try_from("localhost").expect("name"),
                        tcp,
                    )
                    .await
                    .expect("handshake");
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                        .await
                        .expect("HTTP/1.1");
                tokio::spawn(connection);
                let request = hyper::Request::builder()
                    .method("POST")
                    .uri("/validate")
                    .header("host", "localhost")
                    .header("content-type", "application/json")
                    .body(Full::new(body))
                    .expect("request");
                let response = sender.send_request(request).await.expect("answer");
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .expect("body")
                    .to_bytes();
                if status != 200 {
                    eprintln!("HTTP {status}: {}", String::from_utf8_lossy(&body));
                }
                status
            }));
        }
    }
    let mut statuses = Vec::new();
    for client in clients {
        statuses.push(in_time("a costly review", client).await.expect("client"));
    }
    // A review past its 5 s (a loaded machine) is answered 503 but its evaluation runs on,
    // holding its memory: the peak is read once every evaluation has given it back.
    in_time("the evaluations end", async {
        while metric(
            &metrics_text(&webhook).await,
            "probelint_webhook_review_memory_bytes",
        ) > 0
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let peak = proc_status(pid, "VmHWM:").expect("VmHWM") * 1024;
    eprintln!(
        "4 reviews of {} bytes (estimated {:.1} MiB each): HTTP {statuses:?}; peak RSS {:.1} MiB \
         of the chart's {} MiB",
        shape.bytes,
        shape.review_bytes() as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        limit / 1048576
    );
    // Each is answered, or given the server's own 503 when the machine is too slow for 5 s.
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert!(
        peak < limit,
        "peak RSS {peak} B over the chart's memory limit of {limit} B"
    );
}

/// Saved fuzz crash inputs of the `admission_review` target (`tests/data/fuzz-regressions/`)
/// and its seeds, against the real server: a well-formed answer on every endpoint.
#[tokio::test]
async fn fuzz_regressions_and_seeds_are_answered() {
    let webhook = Webhook::start().await;
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut replayed = 0;
    for dir in [
        manifest.join("tests/data/fuzz-regressions"),
        manifest.join("../fuzz/seeds/admission_review"),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                continue;
            }
            let body = std::fs::read(&path).expect("read");
            let what = path.display().to_string();
            assert_answered(&mut conn, &what, body.clone()).await;
            for endpoint in ["/mutate", "/validate/warn"] {
                let answer = conn
                    .post(endpoint, Bytes::from(body.clone()))
                    .await
                    .unwrap_or_else(|e| panic!("{what} on {endpoint}: {e}"));
                assert!(
                    answer.status < 500,
                    "{what} on {endpoint}: {}",
                    answer.text()
                );
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 10, "only {replayed} inputs");
}

// ---------------------------------------------------------------------------------------------
// Hostile clients

/// Opens TLS to the webhook and returns the raw stream.
async fn raw_tls(webhook: &Webhook) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(webhook.addr).await.expect("connect");
    tokio_rustls::TlsConnector::from(webhook.client())
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("handshake")
}

async fn read_head(stream: &mut (impl AsyncReadExt + Unpin), within: Duration) -> String {
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The body limit holds without a Content-Length too (chunked upload): the server stops reading
/// at 7 MiB and answers 413.
#[tokio::test]
async fn a_chunked_body_over_the_limit_gets_413() {
    let webhook = Webhook::start().await;
    let mut tls = raw_tls(&webhook).await;
    tls.write_all(
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await
    .expect("head");
    let chunk = vec![b' '; 1024 * 1024];
    let mut sent = 0;
    for _ in 0..16 {
        let head = format!("{:x}\r\n", chunk.len());
        let ok = tls.write_all(head.as_bytes()).await.is_ok()
            && tls.write_all(&chunk).await.is_ok()
            && tls.write_all(b"\r\n").await.is_ok();
        if !ok {
            break;
        }
        sent += 1;
    }
    let _ = tls.write_all(b"0\r\n\r\n").await;
    let head = read_head(&mut tls, Duration::from_secs(5)).await;
    assert!(
        head.starts_with("HTTP/1.1 413"),
        "after {sent} MiB: {head:?}"
    );
    let reply = webhook.review("/validate", "allow-clean-gpu-pod").await;
    assert_eq!(reply["response"]["allowed"], true);
}

/// A client that sends its headers and then trickles the body is cut off by the review timeout
/// (503), and is no obstacle to anyone else meanwhile. A client that claims a body it never
/// sends gets 408 once its body has stalled for 2 s.
#[tokio::test]
async fn slow_and_lying_clients_time_out_without_blocking_others() {
    let webhook = Webhook::start().await;
    let body = fixture("allow-clean-gpu-pod");
    let mut slow = raw_tls(&webhook).await;
    slow.write_all(
        format!(
            "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .expect("head");
    let mut liar = raw_tls(&webhook).await;
    liar.write_all(
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{",
    )
    .await
    .expect("head");
    let start = Instant::now();
    let trickle = tokio::spawn(async move {
        for byte in body.iter().take(60) {
            if slow.write_all(&[*byte]).await.is_err() {
                break;
            }
            let _ = slow.flush().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        read_head(&mut slow, Duration::from_secs(10)).await
    });
    // Meanwhile others are served: all ten while the slow client is still connected (the
    // server cuts it only at its 5 s body deadline), so none of them waited for it.
    let mut conn = Conn::new(webhook.addr, webhook.client());
    for _ in 0..10 {
        let answer = in_time(
            "a review beside a slow client",
            conn.post("/validate", Bytes::from(fixture("allow-clean-gpu-pod"))),
        )
        .await
        .expect("served while a slow client is connected");
        assert_eq!(answer.status, 200);
    }
    assert!(
        !trickle.is_finished(),
        "the slow client was answered before ten small reviews beside it: they waited for it"
    );
    let head = trickle.await.expect("trickle");
    assert!(head.starts_with("HTTP/1.1 503"), "{head:?}");
    // Cut by the body deadline, not before it (a loaded machine only makes this later; the
    // trickle's own 10 s read bounds it).
    let elapsed = start.elapsed();
    eprintln!("the slow client was cut after {elapsed:?}");
    assert!(
        elapsed >= Duration::from_secs(4),
        "the slow client was cut after {elapsed:?}, before the 5 s body deadline"
    );
    let head = read_head(&mut liar, Duration::from_secs(5)).await;
    assert!(head.starts_with("HTTP/1.1 408"), "{head:?}");
}

/// Heads that declare a large body and then send one byte hold no more review memory than
/// that byte costs: it is taken as bytes arrive, not from the Content-Length. Eight heads of
/// 5 MB each declare seven times the budget (5 MB × 25 each); a real review sent meanwhile is
/// answered, and each liar gets its 408 when its body has stalled. (The timeouts here only stop
/// a hung test.)
#[tokio::test]
async fn heads_declaring_a_body_they_never_send_hold_no_review_memory() {
    const LIARS: usize = 8;
    let webhook = Webhook::start().await;
    let mut liars = Vec::new();
    for _ in 0..LIARS {
        let mut liar = raw_tls(&webhook).await;
        liar.write_all(
            b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{",
        )
        .await
        .expect("head");
        liar.flush().await.expect("flush");
        liars.push(liar);
    }
    // Until every liar's byte is counted (25 bytes each: the byte and its evaluation's share).
    let held = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let held = metric(
                &metrics_text(&webhook).await,
                "probelint_webhook_review_memory_bytes",
            );
            if held >= LIARS as u64 * 25 {
                return held;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the liars' heads are read");
    assert!(
        held < 1024 * 1024,
        "{LIARS} heads that sent one byte each hold {held} bytes of review memory"
    );
    let mut conn = Conn::new(webhook.addr, webhook.client());
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        conn.post("/validate", Bytes::from(fixture("allow-clean-gpu-pod"))),
    )
    .await
    .expect("not hung")
    .expect("served while the liars wait");
    assert_eq!(answer.status, 200);
    for mut liar in liars {
        let head = read_head(&mut liar, Duration::from_secs(10)).await;
        assert!(head.starts_with("HTTP/1.1 408"), "{head:?}");
    }
}

/// Garbage instead of a TLS handshake, a handshake abandoned halfway, and a hundred idle
/// connections: the server stays up and serves the next client.
#[tokio::test]
async fn garbage_and_idle_connections_do_not_take_the_server_down() {
    let webhook = Webhook::start().await;
    for garbage in [
        vec![0u8; 64 * 1024],
        (0..64 * 1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect(),
        b"\x16\x03\x01\xff\xff".to_vec(), // a TLS record header promising 64 KB, then nothing
        b"GET / HTTP/1.0\r\n\r\n".to_vec(),
    ] {
        let mut tcp = TcpStream::connect(webhook.addr).await.expect("connect");
        let _ = tcp.write_all(&garbage).await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut sink)).await;
    }
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(TcpStream::connect(webhook.addr).await.expect("connect"));
    }
    let review = in_time(
        "a review beside 100 idle connections",
        webhook.review("/validate", "allow-clean-gpu-pod"),
    )
    .await;
    assert_eq!(review["response"]["allowed"], true);
    // Answered while the idle connections are still open: it did not wait for the server to
    // give up on them.
    let mut byte = [0u8; 1];
    for conn in &idle {
        match conn.try_read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("an idle connection was closed before the review: {other:?}"),
        }
    }
    drop(idle);
    let ready = webhook.metrics_get("/readyz").await.expect("readyz");
    assert_eq!(ready.status, 200);
}

/// The plain-HTTP metrics port serves metrics and probes only: no admission endpoint there,
/// so nothing reaches the engine without TLS.
#[tokio::test]
async fn the_metrics_port_serves_no_admission_endpoint() {
    let webhook = Webhook::start().await;
    for path in ["/validate", "/validate/warn", "/mutate"] {
        let mut tcp = TcpStream::connect(webhook.metrics_addr)
            .await
            .expect("connect");
        let body = fixture("deny-gpu-deployment-without-probes");
        tcp.write_all(
            format!(
                "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .expect("head");
        tcp.write_all(&body).await.expect("body");
        let head = read_head(&mut tcp, Duration::from_secs(5)).await;
        assert!(
            head.starts_with("HTTP/1.1 404") || head.starts_with("HTTP/1.1 405"),
            "{path} on the metrics port: {head:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile connections: clients that hold connections, trickle, or stop reading (issue 14)

/// Lets this test process open the sockets its hostile clients need.
fn raise_own_fd_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let want = limit.maximum.map_or(8192, |hard| hard.min(8192));
    if limit.current.is_some_and(|soft| soft < want) {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want),
                maximum: limit.maximum,
            },
        );
    }
}

/// `(soft, hard)` of "Max open files" in `/proc/<pid>/limits`.
fn open_file_limits(pid: u32) -> (String, String) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let fields: Vec<&str> = line["Max open files".len()..].split_whitespace().collect();
    (fields[0].to_owned(), fields[1].to_owned())
}

async fn metrics_text(webhook: &Webhook) -> String {
    webhook
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text()
}

fn closed_count(metrics: &str, port: &str, reason: &str) -> u64 {
    metric(
        metrics,
        &format!(
            "probelint_webhook_connections_closed_total{{port=\"{port}\",reason=\"{reason}\"}}"
        ),
    )
}

/// Sends one complete request on a raw HTTP/1.1 stream and reads its answer's head.
async fn one_request(
    stream: &mut (impl AsyncReadExt + AsyncWriteExt + Unpin),
    path: &str,
) -> String {
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .expect("request");
    read_head(stream, Duration::from_secs(5)).await
}

/// Writes a request head one byte every `every`, until the server closes the connection (or
/// `within` passes). Returns how long the server let it trickle.
async fn trickle_until_closed<S>(stream: S, every: Duration, within: Duration) -> Option<Duration>
where
    S: AsyncReadExt + AsyncWriteExt + Unpin,
{
    let (mut read, mut write) = tokio::io::split(stream);
    let start = Instant::now();
    let head = b"POST /validate HTTP/1.1\r\nHost: localhost\r\nX-Trickle: ".repeat(4);
    let writer = async {
        for byte in head.iter().cycle() {
            if write.write_all(&[*byte]).await.is_err() || write.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(every).await;
        }
    };
    let reader = async {
        let mut buf = [0u8; 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let closed = tokio::time::timeout(within, async {
        tokio::select! {
            () = writer => {}
            () = reader => {}
        }
    })
    .await;
    closed.is_ok().then(|| start.elapsed())
}

/// 1.4 times as many connections as the webhook's cap — idle TCP, idle TLS, keep-alive after one
/// review, trickling a request head after one review — and a reviewer is still served: the
/// longest-idle connections are evicted to make room, and the webhook's descriptors stay under
/// its cap. It starts under the soft limit of 256 open files under which 242 idle connections
/// used to lock every reviewer out, and raises it to the hard limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_evicted_idle_first_and_never_lock_out_a_reviewer() {
    raise_own_fd_limit();
    let webhook = Webhook::start_with(Options {
        nofile: Some((256, 1024)),
        ..Options::default()
    })
    .await;
    let pid = webhook.pid();
    assert_eq!(
        open_file_limits(pid),
        ("1024".to_owned(), "1024".to_owned()),
        "the soft limit is raised to the hard one"
    );
    let raised = webhook
        .log_lines()
        .into_iter()
        .find(|l| l["message"] == "raised the open file limit to its hard limit")
        .expect("the raise is logged");
    assert_eq!(
        (raised["soft_before"].as_str(), raised["soft"].as_str()),
        (Some("256"), Some("1024"))
    );
    let cap = webhook.max_connections;
    assert_eq!(cap, 256);

    let hostile = cap * 7 / 5;
    let mut held = Vec::new();
    let mut tricklers = Vec::new();
    let start = Instant::now();
    for i in 0..hostile {
        match i % 4 {
            0 => held.push(
                Box::new(TcpStream::connect(webhook.addr).await.expect("connect"))
                    as Box<dyn std::any::Any + Send>,
            ),
            1 => held.push(Box::new(raw_tls(&webhook).await)),
            2 => {
                let mut tls = raw_tls(&webhook).await;
                let head = one_request(&mut tls, "/livez").await;
                assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
                held.push(Box::new(tls));
            }
            _ => {
                let mut tls = raw_tls(&webhook).await;
                let head = one_request(&mut tls, "/livez").await;
                assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
                tricklers.push(tokio::spawn(trickle_until_closed(
                    tls,
                    Duration::from_millis(500),
                    Duration::from_secs(30),
                )));
            }
        }
    }
    let opened_in = start.elapsed();
    let fds_under_attack = open_fds(pid).expect("fds");
    // A reviewer on new connections, and one keeping its connection.
    for _ in 0..5 {
        let review = webhook.review("/validate", "allow-clean-gpu-pod").await;
        assert_eq!(review["response"]["allowed"], true);
    }
    let mut conn = Conn::new(webhook.addr, webhook.client());
    for _ in 0..5 {
        let answer = conn
            .post("/validate", Bytes::from(fixture("allow-clean-gpu-pod")))
            .await
            .expect("served past the cap");
        assert_eq!(answer.status, 200);
    }
    assert_eq!(conn.opened, 1);
    let metrics = metrics_text(&webhook).await;
    let evicted = closed_count(&metrics, "tls", "evicted");
    eprintln!(
        "{hostile} hostile connections (cap {cap}) opened in {opened_in:?}: {fds_under_attack} fds \
         open in the webhook, {evicted} evicted, 10 reviews served"
    );
    assert!(
        evicted as usize >= hostile - cap,
        "{evicted} evicted of {hostile} over a cap of {cap}"
    );
    assert!(
        fds_under_attack < (cap + cap / 4 + 32) as u64,
        "{fds_under_attack} fds: the cap bounds the webhook's connections"
    );
    assert_eq!(closed_count(&metrics, "tls", "refused"), 0, "{metrics}");

    // The metrics port has a cap of its own: Prometheus still scrapes past it.
    let metrics_cap = webhook.max_metrics_connections;
    let mut idle_metrics = Vec::new();
    for _ in 0..metrics_cap * 2 {
        idle_metrics.push(
            TcpStream::connect(webhook.metrics_addr)
                .await
                .expect("connect"),
        );
    }
    let scrape = webhook
        .metrics_get("/metrics")
        .await
        .expect("scrape past the cap");
    assert_eq!(scrape.status, 200);
    drop((held, idle_metrics));
    for trickler in tricklers {
        trickler.await.expect("trickler");
    }
}

/// A TCP connection to the webhook from `source` (another loopback address is another client).
async fn connect_from(source: std::net::Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(addr).await
}

/// Streams [`Hog::StalledStreams`] clients have opened, in this test binary.
static STALLED_STREAMS: AtomicU64 = AtomicU64::new(0);

/// The kinds of connection a flooding client holds seats with, doing no work.
#[derive(Debug, Clone, Copy)]
enum Hog {
    /// TCP only: the handshake never starts.
    NoHandshake,
    /// The first five bytes of a TLS record, then nothing: a handshake that never finishes.
    HalfHandshake,
    /// TLS, then no request.
    NoRequest,
    /// A request head declaring a 5 MB body, one byte of it, then nothing.
    StalledBody,
    /// HTTP/2: as many streams as the server allows, each declaring a 5 MB review and sending
    /// one byte of it, then nothing; the connection itself stays live (h2 answers pings).
    StalledStreams,
}

/// Holds one `kind` of connection from `source`, and opens the next as soon as the webhook
/// closes it (after `pause`), until `stop`. Returns how many it opened.
async fn hog(
    kind: Hog,
    source: std::net::Ipv4Addr,
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
    pause: Duration,
) -> u64 {
    let mut opened = 0;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut tcp) = connect_from(source, addr).await else {
            tokio::time::sleep(pause).await;
            continue;
        };
        opened += 1;
        let mut buf = [0u8; 1024];
        let hold = async {
            match kind {
                Hog::StalledStreams => {
                    let _ = tcp.set_nodelay(true);
                    let mut h2_config = (*client).clone();
                    h2_config.alpn_protocols = vec![b"h2".to_vec()];
                    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
                    let Ok(tls) = tokio_rustls::TlsConnector::from(Arc::new(h2_config))
                        .connect(name, tcp)
                        .await
                    else {
                        return;
                    };
                    let Ok((mut client, connection)) = h2::client::handshake(tls).await else {
                        return;
                    };
                    let connection = tokio::spawn(connection);
                    let mut streams = Vec::new();
                    for _ in 0..64 {
                        let Ok(ready) = client.clone().ready().await else {
                            break;
                        };
                        client = ready;
                        let request = hyper::Request::builder()
                            .method("POST")
                            .uri("https://localhost/validate")
                            .header("content-type", "application/json")
                            .header("content-length", "5000000")
                            .body(())
                            .expect("request");
                        let Ok((response, mut body)) = client.send_request(request, false) else {
                            break;
                        };
                        if body.send_data(Bytes::from_static(b"{"), false).is_ok() {
                            STALLED_STREAMS.fetch_add(1, Ordering::Relaxed);
                        }
                        streams.push((response, body));
                    }
                    // Until the webhook closes the connection.
                    let _ = connection.await;
                    drop(streams);
                }
                Hog::NoHandshake => {
                    let _ = tcp.read(&mut buf).await;
                }
                Hog::HalfHandshake => {
                    if tcp.write_all(b"\x16\x03\x01\x02\x00").await.is_ok() {
                        let _ = tcp.read(&mut buf).await;
                    }
                }
                Hog::NoRequest | Hog::StalledBody => {
                    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
                    let Ok(mut tls) = tokio_rustls::TlsConnector::from(client.clone())
                        .connect(name, tcp)
                        .await
                    else {
                        return;
                    };
                    if matches!(kind, Hog::StalledBody) {
                        let head = b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{";
                        if tls.write_all(head).await.is_err() || tls.flush().await.is_err() {
                            return;
                        }
                    }
                    // Until the webhook closes it (an answer, then EOF).
                    while let Ok(n) = tls.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                }
            }
        };
        tokio::select! {
            () = hold => {}
            () = async {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            } => {}
        }
        tokio::time::sleep(pause).await;
    }
    opened
}

/// Half again as many hogs as the webhook has seats, from 127.0.0.2, of `kinds` in turn, each
/// reopening its connection 100 ms after the webhook closes it until the flood is stopped;
/// returns once the flood holds every seat.
async fn flood(webhook: &Webhook, kinds: &[Hog]) -> Flood {
    let source = std::net::Ipv4Addr::new(127, 0, 0, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let cap = webhook.max_connections;
    let hogs = (0..cap * 3 / 2)
        .map(|i| {
            tokio::spawn(hog(
                kinds[i % kinds.len()],
                source,
                webhook.addr,
                webhook.client(),
                stop.clone(),
                Duration::from_millis(100),
            ))
        })
        .collect();
    in_time("the flood fills the cap", async {
        loop {
            let open = metric(
                &metrics_text(webhook).await,
                "probelint_webhook_connections{port=\"tls\"}",
            );
            if open as usize >= cap {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    Flood { stop, hogs }
}

/// A running [`flood`].
struct Flood {
    stop: Arc<AtomicBool>,
    hogs: Vec<tokio::task::JoinHandle<u64>>,
}

impl Flood {
    /// Stops every hog; how many connections they opened in all.
    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let mut opened = 0;
        for hog in self.hogs {
            opened += hog.await.expect("hog");
        }
        opened
    }
}

/// One client floods the webhook at its default cap (256) with half again as many connections
/// as there are seats, of every kind that holds a seat without working (handshakes never
/// started or never finished, TLS without a request, bodies that stall), each reopened as soon
/// as the webhook closes it; another client (another loopback address) opens a new TLS
/// connection for each of its reviews, as a restarted apiserver would, and every review is
/// answered. The flood holds no more than its share of the seats once the other client is
/// there, and its handshakes are cut at the cap once they are late.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_from_one_client_at_the_default_cap_leaves_another_client_served() {
    raise_own_fd_limit();
    let webhook = Webhook::start().await;
    let cap = webhook.max_connections;
    assert_eq!(cap, 256, "the default cap");
    let kinds = [
        Hog::NoHandshake,
        Hog::HalfHandshake,
        Hog::NoRequest,
        Hog::StalledBody,
    ];
    let flooding = flood(&webhook, &kinds).await;
    const REVIEWS: usize = 40;
    let latencies = reviews_on_fresh_connections(&webhook, REVIEWS).await;
    let metrics = metrics_text(&webhook).await;
    let opened = flooding.stop().await;
    let within_1s = latencies.iter().filter(|&&l| l <= 1.0).count();
    let evicted = closed_count(&metrics, "tls", "evicted");
    let refused = closed_count(&metrics, "tls", "refused");
    eprintln!(
        "flood of {} connections at a cap of {cap} ({opened} opened in all, {evicted} evicted, \
         {refused} refused): {REVIEWS} reviews answered, {within_1s} within 1 s, p50 {:.0} ms, \
         max {:.0} ms",
        cap * 3 / 2,
        percentile(&latencies, 50.0) * 1000.0,
        latencies.last().copied().unwrap_or(0.0) * 1000.0,
    );
    assert!(evicted > 0, "the flood's connections made room: {metrics}");
}

/// Handshakes of [`reviews_on_fresh_connections`] that the webhook reset and that a second
/// connection then got through (a known gap, docs/reliability.md: at the cap, under a flood of
/// HTTP/2 connections whose streams are all in flight, a new client's connection is now and then
/// closed before its handshake).
static RESET_HANDSHAKES: AtomicUsize = AtomicUsize::new(0);

/// `count` reviews from 127.0.0.1, each on a new TLS connection (as a restarted apiserver
/// opens them), each answered 200: their latencies in seconds, sorted. A handshake the webhook
/// resets is tried once more on a new connection (counted in [`RESET_HANDSHAKES`]); a second
/// reset fails the test.
async fn reviews_on_fresh_connections(webhook: &Webhook, count: usize) -> Vec<f64> {
    let mut latencies = Vec::new();
    for i in 0..count {
        let start = Instant::now();
        let answer = in_time("a review during the flood", async {
            let mut attempt = 0;
            let tls = loop {
                let tcp = connect_from(std::net::Ipv4Addr::LOCALHOST, webhook.addr)
                    .await
                    .expect("connect");
                let tls = tokio_rustls::TlsConnector::from(webhook.client())
                    .connect(
                        rustls::pki_types::ServerName::try_from("localhost").expect("name"),
                        tcp,
                    )
                    .await;
                match tls {
                    Ok(tls) => break tls,
                    Err(e) if attempt == 0 => {
                        eprintln!("review {i}: handshake reset ({e}); once more");
                        RESET_HANDSHAKES.fetch_add(1, Ordering::Relaxed);
                        attempt += 1;
                    }
                    Err(e) => panic!("review {i}: handshake, twice: {e}"),
                }
            };
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .expect("HTTP/1.1");
            tokio::spawn(connection);
            let request = hyper::Request::builder()
                .method("POST")
                .uri("/validate")
                .header("host", "localhost")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(fixture("allow-clean-gpu-pod"))))
                .expect("request");
            let response = sender
                .send_request(request)
                .await
                .unwrap_or_else(|e| panic!("review {i}: {e}"));
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            (status, body)
        })
        .await;
        assert_eq!(
            answer.0,
            200,
            "review {i}: {}",
            String::from_utf8_lossy(&answer.1)
        );
        latencies.push(start.elapsed().as_secs_f64());
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

/// HTTP/2 clients at the default cap, half again as many connections as seats, each holding as
/// many streams as the server allows with a review body that stalls after one byte: the
/// connections are live (HTTP/2 keeps them so) and every stream is "in flight", yet another
/// client's reviews on fresh connections are all answered before the apiserver would give up on
/// them (the chart's `timeoutSeconds`, 5 s; on an idle 2-core machine all within 1 s, which the
/// test prints but does not require: a loaded machine delays the odd handshake past it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_http2_streams_at_the_default_cap_leave_another_client_served() {
    raise_own_fd_limit();
    let webhook = Webhook::start().await;
    let cap = webhook.max_connections;
    assert_eq!(cap, 256, "the default cap");
    let flooding = flood(&webhook, &[Hog::StalledStreams]).await;
    const REVIEWS: usize = 30;
    let latencies = reviews_on_fresh_connections(&webhook, REVIEWS).await;
    let metrics = metrics_text(&webhook).await;
    let opened = flooding.stop().await;
    let within_1s = latencies.iter().filter(|&&l| l <= 1.0).count();
    let streams = STALLED_STREAMS.load(Ordering::Relaxed);
    eprintln!(
        "{} HTTP/2 connections of stalled streams at a cap of {cap} ({opened} opened in all, \
         {streams} streams, {} evicted): {REVIEWS} reviews answered ({} after a reset handshake), \
         {within_1s} within 1 s, p50 \
         {:.0} ms, max {:.0} ms",
        cap * 3 / 2,
        closed_count(&metrics, "tls", "evicted"),
        RESET_HANDSHAKES.load(Ordering::Relaxed),
        percentile(&latencies, 50.0) * 1000.0,
        latencies.last().copied().unwrap_or(0.0) * 1000.0,
    );
    assert!(streams as usize > cap, "the flood opened {streams} streams");
    const APISERVER_TIMEOUT_S: f64 = 5.0;
    assert!(
        latencies.iter().all(|&l| l < APISERVER_TIMEOUT_S),
        "latencies {latencies:?}"
    );
}

/// After one request, a connection that trickles the next request head is closed once the head
/// has taken 10 s (hyper's own timeout only covered a connection's first request), on both ports;
/// the bytes it trickles buy it nothing.
#[tokio::test]
async fn a_connection_trickling_headers_after_its_first_request_is_closed_on_both_ports() {
    let webhook = Webhook::start().await;
    let mut tls = raw_tls(&webhook).await;
    assert!(
        one_request(&mut tls, "/livez")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let mut plain = TcpStream::connect(webhook.metrics_addr)
        .await
        .expect("connect");
    assert!(
        one_request(&mut plain, "/livez")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let every = Duration::from_millis(200);
    let within = Duration::from_secs(30);
    let (tls_closed, plain_closed) = tokio::join!(
        trickle_until_closed(tls, every, within),
        trickle_until_closed(plain, every, within)
    );
    let tls_closed = tls_closed.expect("the TLS connection is closed");
    let plain_closed = plain_closed.expect("the metrics connection is closed");
    eprintln!(
        "trickling connections closed after {tls_closed:?} (TLS), {plain_closed:?} (metrics)"
    );
    // Closed by the header timeout (10 s from the first byte), not by the idle one (100 s):
    // the metrics below name the reason (and `within`, 30 s, is far below 100 s).
    let metrics = metrics_text(&webhook).await;
    assert_eq!(
        closed_count(&metrics, "tls", "header_read_timeout"),
        1,
        "{metrics}"
    );
    assert_eq!(
        closed_count(&metrics, "metrics", "header_read_timeout"),
        1,
        "{metrics}"
    );
    let review = webhook.review("/validate", "allow-clean-gpu-pod").await;
    assert_eq!(review["response"]["allowed"], true);
}

/// A client config speaking only HTTP/2.
fn h2_client(webhook: &Webhook) -> Arc<rustls::ClientConfig> {
    let mut config = (*client_config(&webhook.ca.pem, ALL_VERSIONS, None)).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

async fn h2_connect(
    webhook: &Webhook,
    builder: &h2::client::Builder,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(webhook.addr).await.expect("connect");
    // As Go's client does: without it each window update waits on a delayed ACK.
    tcp.set_nodelay(true).expect("nodelay");
    let tls = tokio_rustls::TlsConnector::from(h2_client(webhook))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (client, connection) = builder.handshake(tls).await.expect("h2 handshake");
    (client, tokio::spawn(connection))
}

/// A Deployment review with `containers` GPU containers and no probes: a ~200-byte-per-container
/// body whose /validate denial is about 7 times larger.
fn big_review(containers: usize) -> Vec<u8> {
    let mut review = good_review();
    let template = review["request"]["object"]["spec"]["template"]["spec"]["containers"][0].clone();
    let list: Vec<Value> = (0..containers)
        .map(|i| {
            let mut c = template.clone();
            c["name"] = json!(format!("c{i}"));
            c
        })
        .collect();
    review["request"]["object"]["spec"]["template"]["spec"]["containers"] = json!(list);
    serde_json::to_vec(&review).expect("json")
}

/// What one zero-window attacker achieved.
#[derive(Debug)]
struct Attack {
    /// Streams the server answered (headers only: the window lets no body through).
    answered: usize,
    closed_by_server: bool,
}

/// One HTTP/2 connection that advertises a zero stream window (the server can send headers but
/// no answer bytes), opens up to `streams` streams each uploading `body` to /validate, and never
/// reads: every answer the server builds waits in memory. Holds everything until the server
/// closes the connection (at most `hold`).
async fn zero_window_attack(
    webhook: &Webhook,
    body: Bytes,
    declared: bool,
    streams: usize,
    hold: Duration,
) -> Attack {
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(0);
    let (mut client, connection) = h2_connect(webhook, &builder).await;
    let mut kept = Vec::new();
    for _ in 0..streams {
        // Past the server's 32 concurrent streams h2 queues the rest on the client side.
        client = match tokio::time::timeout(Duration::from_secs(2), client.clone().ready()).await {
            Ok(Ok(client)) => client,
            _ => break,
        };
        let mut request = hyper::Request::builder()
            .method("POST")
            .uri(format!(
                "https://localhost:{}/validate",
                webhook.addr.port()
            ))
            .header("content-type", "application/json");
        if declared {
            request = request.header("content-length", body.len());
        }
        let request = request.body(()).expect("request");
        let Ok((response, mut send)) = client.send_request(request, false) else {
            break;
        };
        if send.send_data(body.clone(), true).is_err() {
            break;
        }
        kept.push((response, send));
    }
    let closed = tokio::time::timeout(hold, connection).await.is_ok();
    // Streams past the server's limit never reach it (h2 queues them, or the server refuses
    // them): only the streams it took can have an answer.
    let mut answered = 0;
    for (response, _) in kept {
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(10), response).await {
            answered += 1;
        }
    }
    Attack {
        answered,
        closed_by_server: closed,
    }
}

/// Three HTTP/2 connections with a zero window, each trying 200 streams of the largest accepted
/// review of GPU containers (~2,900: a ~0.5 MB body, a ~4 MB denial): before, each answer stayed in memory for as long as
/// the client liked (200 streams held ~300 MiB, over the chart's 256 MiB limit). Now a
/// connection gets 32 streams, what reviews hold is budgeted, and connections whose answers do
/// not move are closed; RSS stays far below the limit and a reviewer is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zero_window_http2_clients_with_many_large_streams_cannot_pin_memory() {
    let webhook = Webhook::start().await;
    let pid = webhook.pid();
    let body = Bytes::from(largest_accepted(big_review));
    // One big review answered normally first, so that the baseline includes its allocations.
    let warm = webhook.post("/validate", &body).await;
    assert!(warm.status == 200 || warm.status == 503, "{}", warm.status);
    // Its evaluation thread exits after a second idle, and gives its memory back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_before_kb = proc_status(pid, "VmRSS:").expect("rss");
    let fds_before = open_fds(pid).expect("fds");

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let stop = stop.clone();
        async move {
            let (mut rss_max, mut fds_max) = (0, 0);
            let t0 = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let rss = proc_status(pid, "VmRSS:").unwrap_or(0);
                rss_max = rss_max.max(rss);
                fds_max = fds_max.max(open_fds(pid).unwrap_or(0));
                if std::env::var_os("DEBUG_ATTACK").is_some() {
                    eprintln!("{:.1}s rss {} MiB", t0.elapsed().as_secs_f64(), rss / 1024);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (rss_max, fds_max)
        }
    });
    let webhook = Arc::new(webhook);
    // Two send 800-container reviews (0.5 MB; a 1.1 MB denial each) and declare their
    // length, as the apiserver does; one sends the largest accepted ones without a length.
    let medium = Bytes::from(big_review(800));
    let attackers: Vec<_> = [(true, &medium), (true, &medium), (false, &body)]
        .into_iter()
        .map(|(declared, body)| {
            let (webhook, body) = (webhook.clone(), body.clone());
            tokio::spawn(async move {
                zero_window_attack(&webhook, body, declared, 200, Duration::from_secs(40)).await
            })
        })
        .collect();
    // A reviewer meanwhile, on HTTP/2 with a Content-Length as the apiserver: five reviews, each
    // answered (within the hang timeout), while the attack still runs. Counted, not timed: how
    // many fit in a window of seconds depends on the machine's load.
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(1 << 20);
    let mut served = 0;
    // Reviews answered while an attacker was still connected: how many depends on how fast the
    // webhook cuts the attackers, so the test asks for one, not for all five.
    let mut served_during_attack = 0;
    let good = Bytes::from(fixture("allow-clean-gpu-pod"));
    while served < 5 {
        let (client, _connection) = h2_connect(&webhook, &builder).await;
        let mut client = client.ready().await.expect("ready");
        let request = hyper::Request::builder()
            .method("POST")
            .uri(format!(
                "https://localhost:{}/validate",
                webhook.addr.port()
            ))
            .header("content-type", "application/json")
            .header("content-length", good.len())
            .body(())
            .expect("request");
        let (response, mut send) = client.send_request(request, false).expect("stream");
        send.send_data(good.clone(), true).expect("body");
        let response = tokio::time::timeout(HANG, response)
            .await
            .expect("answered in time")
            .expect("answer");
        assert_eq!(response.status(), 200);
        let mut answer = response.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = answer.data().await {
            let chunk = chunk.expect("chunk");
            let _ = answer.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        let review: Value = serde_json::from_slice(&bytes).expect("review");
        assert_eq!(review["response"]["allowed"], true);
        served += 1;
        if attackers.iter().any(|a| !a.is_finished()) {
            served_during_attack += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut attacks = Vec::new();
    for attacker in attackers {
        attacks.push(attacker.await.expect("attacker"));
    }
    stop.store(true, Ordering::Relaxed);
    let (rss_max_kb, fds_max) = sampler.await.expect("sampler");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after_kb = proc_status(pid, "VmRSS:").expect("rss");
    let metrics = metrics_text(&webhook).await;
    let (stuck, send_timeout) = (
        closed_count(&metrics, "tls", "memory"),
        closed_count(&metrics, "tls", "send_timeout"),
    );
    eprintln!(
        "zero-window attack, 3 connections x 200 streams of {} KB: {attacks:?}; RSS before {:.1} \
         MiB, max {:.1} MiB, after {:.1} MiB; fds before {fds_before}, max {fds_max}; closed for \
         memory {stuck}, for send timeout {send_timeout}; {served} reviews served, \
         {served_during_attack} of them while it ran",
        body.len() / 1024,
        rss_before_kb as f64 / 1024.0,
        rss_max_kb as f64 / 1024.0,
        rss_after_kb as f64 / 1024.0,
    );
    for attack in &attacks {
        assert!(
            attack.answered <= 32,
            "{attack:?}: 32 streams per connection"
        );
        assert!(
            attack.closed_by_server,
            "{attack:?}: the server closes the connection"
        );
    }
    assert_eq!(stuck + send_timeout, 3, "{metrics}");
    // The chart's limit is 256 MiB; the webhook stays well under it.
    assert!(
        rss_max_kb < 192 * 1024,
        "RSS reached {} MiB under the attack",
        rss_max_kb / 1024
    );
    assert!(
        served_during_attack >= 1,
        "no review was answered while the attack ran"
    );
    let review = webhook.review("/validate", "allow-clean-gpu-pod").await;
    assert_eq!(review["response"]["allowed"], true);
}

/// One HTTP/2 stream whose answer the client never reads, on a connection whose other streams
/// are read at once: the answer is timed by itself (10 s), and the connection is closed although
/// it keeps delivering the others.
#[tokio::test]
async fn an_unread_stream_is_timed_by_itself_on_a_busy_connection() {
    let webhook = Webhook::start().await;
    let mut builder = h2::client::Builder::new();
    // A large connection window: the unread stream holds only its own 64 KiB.
    builder
        .initial_window_size(64 * 1024)
        .initial_connection_window_size(16 << 20);
    let (client, connection) = h2_connect(&webhook, &builder).await;
    let post = |body: &Bytes| {
        hyper::Request::builder()
            .method("POST")
            .uri(format!(
                "https://localhost:{}/validate",
                webhook.addr.port()
            ))
            .header("content-type", "application/json")
            .header("content-length", body.len())
            .body(())
            .expect("request")
    };
    // An 800-container review: its 1.1 MB denial cannot pass a 64 KiB window never released.
    let big = Bytes::from(big_review(800));
    let mut client = client.ready().await.expect("ready");
    let (unread, mut send) = client.send_request(post(&big), false).expect("stream");
    send.send_data(big, true).expect("body");
    let unread = unread.await.expect("the answer's headers");
    assert_eq!(unread.status(), 200);
    let small = Bytes::from(fixture("allow-clean-gpu-pod"));
    let start = Instant::now();
    let mut served = 0;
    let closed_after = loop {
        if connection.is_finished() {
            break start.elapsed();
        }
        assert!(start.elapsed() < HANG, "the connection was never closed");
        let Ok(ready) = client.clone().ready().await else {
            break start.elapsed();
        };
        client = ready;
        let Ok((response, mut send)) = client.send_request(post(&small), false) else {
            break start.elapsed();
        };
        if send.send_data(small.clone(), true).is_err() {
            break start.elapsed();
        }
        let Ok(response) = response.await else {
            break start.elapsed();
        };
        let mut body = response.into_body();
        while let Some(Ok(chunk)) = body.data().await {
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        served += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    drop(unread);
    eprintln!("closed after {closed_after:?}, {served} other reviews answered on it meanwhile");
    // Answers on the same connection while the unread one waits (how many fit before its 10 s
    // send timeout depends on the machine's load, so it is printed above, not asserted).
    assert!(served >= 1, "{served}: the other streams were answered");
    let metrics = metrics_text(&webhook).await;
    assert_eq!(
        closed_count(&metrics, "tls", "send_timeout"),
        1,
        "{metrics}"
    );
}

/// A body over the limit gets the same 413 and message over HTTP/2 (what the apiserver speaks)
/// as over HTTP/1.1, declared by Content-Length or not, and the connection goes on serving.
#[tokio::test]
async fn a_body_over_the_limit_gets_413_over_http2_too() {
    let webhook = Webhook::start().await;
    let mut big = fixture_json("allow-clean-gpu-pod");
    big["request"]["object"]["metadata"]["annotations"]["padding"] =
        Value::String("x".repeat(7 * 1024 * 1024));
    let big = Bytes::from(serde_json::to_vec(&big).expect("json"));
    let over_http1 = webhook.post("/validate", &big).await;
    assert_eq!(over_http1.status, 413);

    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(1 << 20);
    let (mut client, _connection) = h2_connect(&webhook, &builder).await;
    for declared in [true, false] {
        client = client.ready().await.expect("ready");
        let mut request = hyper::Request::builder()
            .method("POST")
            .uri(format!(
                "https://localhost:{}/validate",
                webhook.addr.port()
            ))
            .header("content-type", "application/json");
        if declared {
            request = request.header("content-length", big.len());
        }
        let (response, mut send) = client
            .send_request(request.body(()).expect("request"), false)
            .expect("stream");
        // Uploaded as the window allows, while the answer is awaited (as Go's client does).
        let upload = {
            let big = big.clone();
            tokio::spawn(async move {
                let mut rest = big;
                while !rest.is_empty() {
                    send.reserve_capacity(rest.len().min(1 << 20));
                    match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                        Some(Ok(n)) if n > 0 => {
                            let piece = rest.split_to(n.min(rest.len()));
                            if send.send_data(piece, rest.is_empty()).is_err() {
                                return;
                            }
                        }
                        Some(Ok(_)) => {}
                        _ => return,
                    }
                }
            })
        };
        let response = tokio::time::timeout(HANG, response)
            .await
            .expect("answered in time")
            .unwrap_or_else(|e| panic!("declared {declared}: no answer but {e}"));
        assert_eq!(response.status(), 413, "declared {declared}");
        let mut body = response.into_body();
        let mut text = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap_or_else(|e| panic!("declared {declared}: {e}"));
            let _ = body.flow_control().release_capacity(chunk.len());
            text.extend_from_slice(&chunk);
        }
        assert_eq!(
            String::from_utf8_lossy(&text),
            over_http1.text(),
            "the same message over both protocols"
        );
        upload.abort();
    }
    // The same connection serves the next review.
    let mut client = client.ready().await.expect("ready");
    let request = hyper::Request::builder()
        .method("POST")
        .uri(format!(
            "https://localhost:{}/validate",
            webhook.addr.port()
        ))
        .header("content-type", "application/json")
        .body(())
        .expect("request");
    let (response, mut send) = client.send_request(request, false).expect("stream");
    send.send_data(Bytes::from(fixture("allow-clean-gpu-pod")), true)
        .expect("body");
    assert_eq!(response.await.expect("answer").status(), 200);
}

/// A certificate rotated in that has expired, or is not valid yet, is refused: the previous one
/// stays served, the logs say so at error level, `/readyz` stays ready and says why, the failure
/// is counted and `certificate_files_refused` is 1. A valid one is then served, and the expiry
/// gauge follows the served certificate. A not-yet-valid certificate is served, without a file
/// change, once its time comes.
#[tokio::test]
async fn certificates_outside_their_validity_are_never_swapped_in() {
    let mut webhook = Webhook::start().await;
    let ca = webhook.ca.pem.clone();
    let v1 = webhook.server_leaf.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let day = 86_400;
    let expired = webhook
        .ca
        .server_valid("expired", LOOPBACK, now - 30 * day, now - day);
    let future = webhook
        .ca
        .server_valid("not valid yet", LOOPBACK, now + 30 * day, now + 60 * day);
    let served_with = |webhook: &Webhook| {
        let webhook_addr = webhook.addr;
        let client = webhook.client();
        async move {
            https(
                webhook_addr,
                client,
                "POST",
                "/validate",
                Some("application/json"),
                fixture("allow-clean-gpu-pod"),
            )
            .await
            .expect("review")
            .peer_cert
        }
    };
    let metrics = metrics_text(&webhook).await;
    let gauge = |metrics: &str, name: &str| metric(metrics, &format!("probelint_webhook_{name}"));
    assert!(
        gauge(&metrics, "certificate_expiry_timestamp_seconds") > now as u64,
        "{metrics}"
    );
    assert_eq!(gauge(&metrics, "certificate_files_refused"), 0);

    for (what, leaf, expect) in [
        ("expired", &expired, "the certificate expired at"),
        ("not valid yet", &future, "the certificate is not valid yet"),
    ] {
        webhook.certs.rotate(&[
            ("tls.crt", &leaf.cert_pem),
            ("tls.key", &leaf.key_pem),
            ("ca.crt", &ca),
        ]);
        let ready = webhook.readyz_saying(expect).await;
        assert_eq!(ready.status, 200, "{what}: still ready, the old pair works");
        assert!(
            ready
                .text()
                .contains("still serving the previous certificate"),
            "{what}: {}",
            ready.text()
        );
        assert_eq!(
            served_with(&webhook).await,
            Some(v1.der()),
            "{what}: the old pair is served"
        );
        let metrics = metrics_text(&webhook).await;
        assert_eq!(gauge(&metrics, "certificate_files_refused"), 1, "{what}");
        let deadline = Instant::now() + HANG;
        while !webhook.log_lines().into_iter().any(|l| {
            l["level"] == "ERROR"
                && l["message"] == "TLS reload refused; still serving the previous certificate"
                && l["error"].as_str().is_some_and(|e| e.contains(expect))
        }) {
            assert!(
                Instant::now() < deadline,
                "{what}: an error log line says why"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let metrics = metrics_text(&webhook).await;
    assert!(
        metric(
            &metrics,
            "probelint_webhook_certificate_reloads_total{result=\"failure\"}"
        ) >= 2,
        "{metrics}"
    );

    // A valid one is served, and the expiry gauge is its notAfter.
    let not_after = now + 90 * day;
    let v2 = webhook
        .ca
        .server_valid("v2", LOOPBACK, now - day, not_after);
    webhook.certs.rotate(&[
        ("tls.crt", &v2.cert_pem),
        ("tls.key", &v2.key_pem),
        ("ca.crt", &ca),
    ]);
    webhook.readyz_saying("tls: certificate loaded").await;
    assert_eq!(served_with(&webhook).await, Some(v2.der()));
    let metrics = metrics_text(&webhook).await;
    assert_eq!(
        gauge(&metrics, "certificate_expiry_timestamp_seconds"),
        not_after as u64,
        "{metrics}"
    );
    assert_eq!(gauge(&metrics, "certificate_files_refused"), 0);

    // Valid in 3 s (a clock a little behind the issuer's): refused now, served then, with no
    // file event in between.
    let soon = webhook.ca.server_valid("v3", LOOPBACK, now + 3, not_after);
    webhook.certs.rotate(&[
        ("tls.crt", &soon.cert_pem),
        ("tls.key", &soon.key_pem),
        ("ca.crt", &ca),
    ]);
    webhook.readyz_saying("not valid yet").await;
    let deadline = Instant::now() + Duration::from_secs(40);
    while served_with(&webhook).await != Some(soon.der()) {
        assert!(
            Instant::now() < deadline,
            "the certificate was never served once valid"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    webhook.readyz_saying("tls: certificate loaded").await;
}

/// The served certificate expiring with no valid one on disk is said loudly: an error log line
/// and `/readyz` (still ready: nothing better can be served), and the expiry gauge shows it was
/// coming.
#[tokio::test]
async fn the_served_certificate_expiring_is_reported() {
    let mut webhook = Webhook::start().await;
    let ca = webhook.ca.pem.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let short = webhook
        .ca
        .server_valid("short-lived", LOOPBACK, now - 60, now + 3);
    webhook.certs.rotate(&[
        ("tls.crt", &short.cert_pem),
        ("tls.key", &short.key_pem),
        ("ca.crt", &ca),
    ]);
    let deadline = Instant::now() + HANG;
    loop {
        let metrics = metrics_text(&webhook).await;
        let expiry = metric(
            &metrics,
            "probelint_webhook_certificate_expiry_timestamp_seconds",
        );
        if expiry == (now + 3) as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the short-lived certificate was not loaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    // The watch looks at the served certificate on every pass; SIGHUP makes one now.
    webhook.hangup();
    let ready = webhook
        .readyz_saying("THE SERVED CERTIFICATE EXPIRED")
        .await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    // The log line comes through the stdout pipe: give the reader a moment.
    let deadline = Instant::now() + HANG;
    while !webhook.log_lines().into_iter().any(|l| {
        l["level"] == "ERROR"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("the served TLS certificate has expired"))
    }) {
        assert!(
            Instant::now() < deadline,
            "an error log line says the served certificate expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A renewed certificate clears it.
    let renewed = webhook.ca.server("renewed", LOOPBACK);
    webhook.certs.rotate(&[
        ("tls.crt", &renewed.cert_pem),
        ("tls.key", &renewed.key_pem),
        ("ca.crt", &ca),
    ]);
    let deadline = Instant::now() + HANG;
    loop {
        let ready = webhook.metrics_get("/readyz").await.expect("readyz").text();
        if !ready.contains("EXPIRED") {
            assert!(ready.contains("tls: certificate loaded"), "{ready}");
            break;
        }
        assert!(Instant::now() < deadline, "still reported expired: {ready}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// At startup there is no previous pair to fall back on: an expired or not-yet-valid
/// certificate stops the webhook with a message saying so.
#[test]
fn an_expired_or_not_yet_valid_certificate_at_startup_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("startup CA");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    for (leaf, expect) in [
        (
            ca.server_valid("old", LOOPBACK, now - 7200, now - 3600),
            "the certificate expired at",
        ),
        (
            ca.server_valid("new", LOOPBACK, now + 3600, now + 7200),
            "the certificate is not valid yet",
        ),
    ] {
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, &leaf.cert_pem).expect("cert");
        std::fs::write(&key, &leaf.key_pem).expect("key");
        let out = std::process::Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .output()
            .expect("run");
        let log = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{log}");
        assert!(
            log.contains(expect)
                && log.contains("tls.crt")
                && log.contains("refusing to start without a valid certificate"),
            "{log}"
        );
    }
}

/// With `--log-format text`, a uid, name or namespace holding line breaks or terminal controls
/// cannot forge a log line: what the real binary prints has one line per review, with the
/// request's text escaped. With `--log-format json` the same values come out exactly.
#[tokio::test]
async fn request_text_cannot_forge_log_lines() {
    let forged = "2026-11-30T00:00:00.000000Z  INFO review uid=forged decision=allowed";
    let mut review = good_review();
    review["request"]["uid"] = json!(format!("u-1\n{forged}"));
    review["request"]["name"] = json!(format!("llama\r\n{forged}"));
    review["request"]["object"]["metadata"]["name"] = json!(format!("llama\r\n{forged}"));
    review["request"]["namespace"] = json!("ns\u{1b}[2K\u{2028}x\\ny");
    review["request"]["object"]["metadata"]["namespace"] = json!("ns\u{1b}[2K\u{2028}x\\ny");
    let body = serde_json::to_vec(&review).expect("json");

    let webhook = Webhook::start_with(Options {
        text_logs: true,
        ..Options::default()
    })
    .await;
    let reply = webhook.post("/validate", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let deadline = Instant::now() + HANG;
    let lines = loop {
        let lines = webhook.text_logs.lock().expect("logs").clone();
        if lines.iter().any(|l| l.contains(" review ")) {
            break lines;
        }
        assert!(Instant::now() < deadline, "no review line in {lines:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let reviews: Vec<&String> = lines.iter().filter(|l| l.contains(" review ")).collect();
    assert_eq!(reviews.len(), 1, "one line per review: {lines:#?}");
    assert!(
        !lines.iter().any(|l| l.starts_with("2026-11-30T00:00:00")),
        "a forged line: {lines:#?}"
    );
    let line = reviews[0];
    for expected in [
        r"u-1\n2026-11-30T00:00:00.000000Z  INFO review uid=forged",
        r"llama\r\n2026-11-30",
        r"ns\u{1b}[2K\u{2028}x\\ny",
    ] {
        assert!(line.contains(expected), "{expected} in {line}");
    }
    assert!(!line.contains('\u{1b}') && !line.contains('\r'), "{line:?}");
    drop(webhook);

    let webhook = Webhook::start().await;
    let reply = webhook.post("/validate", &body).await;
    assert_eq!(reply.status, 200);
    let deadline = Instant::now() + HANG;
    let logged = loop {
        if let Some(line) = webhook
            .log_lines()
            .into_iter()
            .find(|l| l["message"] == "review")
        {
            break line;
        }
        assert!(Instant::now() < deadline, "no review line");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        logged["uid"], review["request"]["uid"],
        "JSON keeps the exact value"
    );
    assert_eq!(logged["namespace"], review["request"]["namespace"]);
}

// ---------------------------------------------------------------------------------------------
// Soak

/// How a soak runs. `ci()` for the 30-second version; `from_env()` for `tests/soak/soak.sh`.
#[derive(Debug, Clone)]
struct SoakConfig {
    duration: Duration,
    rotate_every: Duration,
    policy_every: Duration,
    /// RSS is compared between the end of this warm-up and the end of the load.
    warmup: Duration,
    /// Width of a latency bucket in the report.
    bucket: Duration,
    /// Clients reusing one connection (as the apiserver does) ...
    keepalive_clients: usize,
    /// ... and clients opening a new connection (a new TLS handshake) for every review.
    fresh_clients: usize,
    /// Hostile clients beside them, each reconnecting whenever the webhook closes it: idle
    /// connections (half raw TCP, half TLS after one request), clients trickling a request head
    /// after one request, and HTTP/2 clients with a zero window opening 32 streams.
    idle_clients: usize,
    trickling_clients: usize,
    zero_window_clients: usize,
    report: Option<std::path::PathBuf>,
}

impl SoakConfig {
    fn ci() -> SoakConfig {
        SoakConfig {
            duration: Duration::from_secs(30),
            rotate_every: Duration::from_secs(3),
            policy_every: Duration::from_millis(4500),
            warmup: Duration::from_secs(8),
            bucket: Duration::from_secs(10),
            keepalive_clients: 2,
            fresh_clients: 2,
            idle_clients: 24,
            trickling_clients: 4,
            zero_window_clients: 2,
            report: None,
        }
    }

    fn from_env() -> SoakConfig {
        let secs = |name: &str, default: f64| {
            Duration::from_secs_f64(
                std::env::var(name)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(default),
            )
        };
        let count = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let duration = secs("SOAK_SECONDS", 600.0);
        SoakConfig {
            duration,
            rotate_every: secs("SOAK_ROTATE_SECONDS", 30.0),
            policy_every: secs("SOAK_POLICY_SECONDS", 45.0),
            warmup: secs(
                "SOAK_WARMUP_SECONDS",
                (duration.as_secs_f64() / 10.0).min(60.0),
            ),
            bucket: secs("SOAK_BUCKET_SECONDS", 60.0),
            keepalive_clients: count("SOAK_KEEPALIVE_CLIENTS", 4),
            fresh_clients: count("SOAK_FRESH_CLIENTS", 4),
            idle_clients: count("SOAK_IDLE_CLIENTS", 64),
            trickling_clients: count("SOAK_TRICKLING_CLIENTS", 8),
            zero_window_clients: count("SOAK_ZERO_WINDOW_CLIENTS", 4),
            report: std::env::var_os("SOAK_REPORT").map(Into::into),
        }
    }
}

/// One request of the soak.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Seconds since the load started.
    start: f64,
    end: f64,
    latency_ms: f64,
    ok: bool,
}

const VALID_POLICY_A: &str = "# soak: valid A\nrules:\n  gpu-startup-probe-missing: warning\n";
const VALID_POLICY_B: &str = "# soak: valid B\nrules:\n  readiness-port-open: info\n";
const INVALID_POLICY: &str = "# soak: invalid\nrules:\n  no-such-rule: error\n";

fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

fn open_fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What a soak measured.
#[derive(Debug)]
struct SoakReport {
    sent: usize,
    ok: usize,
    failed_before_sigterm: usize,
    failed_after_sigterm: usize,
    rss_first_kb: u64,
    rss_warm_kb: u64,
    rss_end_kb: u64,
    rss_max_kb: u64,
    fds_warm: u64,
    fds_end: u64,
    rotations: u64,
    cert_reloads_ok: u64,
    cert_reloads_failed: u64,
    certs_served: usize,
    policy_valid_writes: u64,
    policy_invalid_writes: u64,
    policy_reloads_ok: u64,
    policy_reloads_failed: u64,
    alive_after_sighup: bool,
    exit_code: Option<i32>,
    exit_after_sigterm: Duration,
    table: String,
    hostile_clients: usize,
    /// How many times the webhook closed a hostile client's connection.
    hostile_closed: u64,
    /// `reason=count` of `probelint_webhook_connections_closed_total` before SIGTERM.
    closed_by_reason: String,
}

/// Starts the soak's hostile clients (see [`SoakConfig`]); each returns how many times the
/// webhook closed its connection.
fn spawn_hostile_clients(
    webhook: &Webhook,
    config: &SoakConfig,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    let addr = webhook.addr;
    let h1 = webhook.client();
    let h2 = h2_client(webhook);
    let port = webhook.addr.port();
    let stopped = {
        let stop = stop.clone();
        move || stop.load(Ordering::Relaxed)
    };
    // Waits until the server closes `stream` (reads 0 or fails) or the soak stops; true if the
    // server closed it.
    async fn closed_by_server<S: AsyncReadExt + Unpin>(
        stream: &mut S,
        stopped: &(impl Fn() -> bool + Sync),
    ) -> bool {
        let mut buf = [0u8; 4096];
        while !stopped() {
            let read = tokio::time::timeout(Duration::from_millis(250), stream.read(&mut buf));
            if let Ok(Ok(0) | Err(_)) = read.await {
                return true;
            }
        }
        false
    }
    async fn tls(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> Option<tokio_rustls::client::TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(addr).await.ok()?;
        tokio_rustls::TlsConnector::from(config)
            .connect(
                rustls::pki_types::ServerName::try_from("localhost").expect("name"),
                tcp,
            )
            .await
            .ok()
    }
    let mut tasks = Vec::new();
    for i in 0..config.idle_clients {
        let (h1, stopped) = (h1.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            let mut closed = 0;
            while !stopped() {
                // A refused connection (after SIGTERM) is not a close: wait and try again.
                let gone = if i % 2 == 0 {
                    match TcpStream::connect(addr).await {
                        Ok(mut tcp) => Some(closed_by_server(&mut tcp, &stopped).await),
                        Err(_) => None,
                    }
                } else {
                    match tls(addr, h1.clone()).await {
                        Some(mut stream) => {
                            one_request(&mut stream, "/livez").await;
                            Some(closed_by_server(&mut stream, &stopped).await)
                        }
                        None => None,
                    }
                };
                closed += u64::from(gone == Some(true));
                if gone != Some(false) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            closed
        }));
    }
    for _ in 0..config.trickling_clients {
        let (h1, stopped) = (h1.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            let mut closed = 0;
            while !stopped() {
                let Some(mut stream) = tls(addr, h1.clone()).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                one_request(&mut stream, "/livez").await;
                let stop_at = Duration::from_secs(3600);
                let run = trickle_until_closed(stream, Duration::from_millis(500), stop_at);
                tokio::pin!(run);
                let gone = loop {
                    tokio::select! {
                        result = &mut run => break result.is_some(),
                        () = tokio::time::sleep(Duration::from_millis(250)) => {
                            if stopped() { break false; }
                        }
                    }
                };
                closed += u64::from(gone);
            }
            closed
        }));
    }
    for _ in 0..config.zero_window_clients {
        let (h2, stopped) = (h2.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            let body = Bytes::from(fixture("deny-gpu-deployment-without-probes"));
            let mut closed = 0;
            while !stopped() {
                let Some(stream) = tls(addr, h2.clone()).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let mut builder = h2::client::Builder::new();
                builder.initial_window_size(0);
                let Ok((mut client, connection)) = builder.handshake::<_, Bytes>(stream).await
                else {
                    continue;
                };
                let connection = tokio::spawn(connection);
                let mut kept = Vec::new();
                for _ in 0..32 {
                    let Ok(Ok(ready)) =
                        tokio::time::timeout(Duration::from_secs(1), client.clone().ready()).await
                    else {
                        break;
                    };
                    client = ready;
                    let request = hyper::Request::builder()
                        .method("POST")
                        .uri(format!("https://localhost:{port}/validate"))
                        .header("content-type", "application/json")
                        .header("content-length", body.len())
                        .body(())
                        .expect("request");
                    let Ok((response, mut send)) = client.send_request(request, false) else {
                        break;
                    };
                    let _ = send.send_data(body.clone(), true);
                    kept.push((response, send));
                }
                tokio::pin!(connection);
                let gone = loop {
                    tokio::select! {
                        _ = &mut connection => break true,
                        () = tokio::time::sleep(Duration::from_millis(250)) => {
                            if stopped() { break false; }
                        }
                    }
                };
                drop(kept);
                closed += u64::from(gone);
            }
            closed
        }));
    }
    tasks
}

async fn run_soak(config: SoakConfig) -> SoakReport {
    let mut webhook = Webhook::start_with(Options {
        policy: Some(VALID_POLICY_A.to_owned()),
        ..Options::default()
    })
    .await;
    let pid = webhook.pid();
    let rss_first_kb = proc_status(pid, "VmRSS:").unwrap_or(0);
    let bodies: Arc<Vec<(&'static str, Bytes)>> = Arc::new(vec![
        (
            "/validate",
            Bytes::from(fixture("deny-gpu-deployment-without-probes")),
        ),
        ("/validate", Bytes::from(fixture("allow-clean-gpu-pod"))),
        (
            "/mutate",
            Bytes::from(fixture("deny-gpu-deployment-without-probes")),
        ),
        (
            "/validate/warn",
            Bytes::from(fixture("warn-gpu-deployment-exec-probe")),
        ),
        ("/validate", Bytes::from(fixture("deny-update-new-image"))),
    ]);
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::new(Mutex::new(Vec::new()));
    let certs_seen: Arc<Mutex<std::collections::HashSet<Vec<u8>>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();

    let mut clients = Vec::new();
    for i in 0..config.keepalive_clients + config.fresh_clients {
        let fresh = i >= config.keepalive_clients;
        let mut conn = Conn::new(webhook.addr, webhook.client());
        let (bodies, samples, certs_seen, stop, counter) = (
            bodies.clone(),
            samples.clone(),
            certs_seen.clone(),
            stop.clone(),
            counter.clone(),
        );
        clients.push(tokio::spawn(async move {
            let mut local = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let n = counter.fetch_add(1, Ordering::Relaxed) as usize;
                let (path, body) = &bodies[n % bodies.len()];
                let start = t0.elapsed();
                let result = conn.post(path, body.clone()).await;
                let end = t0.elapsed();
                let ok = match &result {
                    Ok(answer) if answer.status == 200 => {
                        serde_json::from_slice::<Value>(&answer.body)
                            .is_ok_and(|r| r["response"]["uid"].is_string())
                    }
                    Ok(answer) => {
                        eprintln!(
                            "soak: {path}: HTTP {} at {:.1}s: {}",
                            answer.status,
                            end.as_secs_f64(),
                            answer.text()
                        );
                        false
                    }
                    Err(e) => {
                        if !stop.load(Ordering::Relaxed) {
                            eprintln!("soak: {path}: {e} at {:.1}s", end.as_secs_f64());
                        }
                        false
                    }
                };
                if fresh {
                    if let Some(peer) = conn.peer.take() {
                        certs_seen.lock().expect("certs").insert(peer);
                    }
                    conn.close();
                }
                local.push(Sample {
                    start: start.as_secs_f64(),
                    end: end.as_secs_f64(),
                    latency_ms: (end - start).as_secs_f64() * 1000.0,
                    ok,
                });
                if !ok {
                    // Do not spin on a closed listener after SIGTERM.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if local.len() >= 1024 {
                    samples.lock().expect("samples").append(&mut local);
                }
            }
            samples.lock().expect("samples").append(&mut local);
        }));
    }

    // RSS and file descriptors, once a second. The harness keeps every log line the webhook
    // prints (one per review) for tests that read them; this one does not, and hundreds of
    // thousands of them would be the test's own memory growing, so they are dropped as they come.
    let rss_samples: Arc<Mutex<Vec<(f64, u64, u64)>>> = Arc::default();
    let hostile = spawn_hostile_clients(&webhook, &config, stop.clone());

    let sampler = {
        let (rss_samples, stop, logs) = (rss_samples.clone(), stop.clone(), webhook.logs.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                logs.lock().expect("logs").clear();
                if let (Some(rss), Some(fds)) = (proc_status(pid, "VmRSS:"), open_fds(pid)) {
                    rss_samples
                        .lock()
                        .expect("rss")
                        .push((t0.elapsed().as_secs_f64(), rss, fds));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    // Faults: certificate rotation (the kubelet's `..data` swap) and policy rewrites.
    let (mut rotations, mut valid_writes, mut invalid_writes) = (0u64, 0u64, 0u64);
    let mut next_rotation = config.rotate_every;
    let mut next_policy = config.policy_every;
    let mut rss_warm = None;
    loop {
        let now = t0.elapsed();
        if now >= config.duration {
            break;
        }
        if rss_warm.is_none() && now >= config.warmup {
            rss_warm = Some((
                proc_status(pid, "VmRSS:").unwrap_or(0),
                open_fds(pid).unwrap_or(0),
            ));
        }
        if now >= next_rotation {
            rotations += 1;
            let leaf = webhook
                .ca
                .server(&format!("probelint-webhook soak {rotations}"), LOOPBACK);
            let ca = webhook.ca.pem.clone();
            webhook.certs.rotate(&[
                ("tls.crt", &leaf.cert_pem),
                ("tls.key", &leaf.key_pem),
                ("ca.crt", &ca),
            ]);
            next_rotation += config.rotate_every;
        }
        if now >= next_policy {
            let k = valid_writes + invalid_writes;
            let text = if k % 2 == 0 {
                invalid_writes += 1;
                INVALID_POLICY
            } else {
                valid_writes += 1;
                if (k / 2) % 2 == 0 {
                    VALID_POLICY_B
                } else {
                    VALID_POLICY_A
                }
            };
            write_atomically(&webhook.policy_path, text);
            next_policy += config.policy_every;
        }
        let wake = next_rotation
            .min(next_policy)
            .min(config.duration)
            .min(config.warmup.max(now));
        tokio::time::sleep(
            wake.saturating_sub(t0.elapsed())
                .max(Duration::from_millis(10)),
        )
        .await;
    }
    let (rss_warm_kb, fds_warm) = rss_warm.unwrap_or((rss_first_kb, 0));
    // Let the last reload settle, then read the counters while the load still runs.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let rss_end_kb = proc_status(pid, "VmRSS:").unwrap_or(0);
    let fds_end = open_fds(pid).unwrap_or(0);
    let metrics = webhook
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text();

    // SIGHUP re-reads the files and changes nothing else: the load goes on without a failure.
    webhook.hangup();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let alive_after_sighup = webhook
        .metrics_get("/livez")
        .await
        .is_ok_and(|r| r.status == 200);

    // SIGTERM with the load still running.
    let sigterm_at = t0.elapsed().as_secs_f64();
    webhook.terminate();
    let term_start = Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        let status = webhook.wait_exit(Duration::from_secs(20));
        (status, webhook)
    })
    .await
    .expect("wait");
    let exit_after_sigterm = term_start.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.await.expect("client");
    }
    let mut hostile_closed = 0;
    for client in hostile {
        hostile_closed += client.await.expect("hostile client");
    }
    sampler.await.expect("sampler");
    let (status, _webhook) = status;

    let samples = std::mem::take(&mut *samples.lock().expect("samples"));
    let rss_max_kb = rss_samples
        .lock()
        .expect("rss")
        .iter()
        .map(|s| s.1)
        .max()
        .unwrap_or(0);
    let failed_before_sigterm = samples
        .iter()
        .filter(|s| !s.ok && s.end < sigterm_at)
        .count();
    let failed_after_sigterm = samples
        .iter()
        .filter(|s| !s.ok && s.end >= sigterm_at)
        .count();

    // Per-bucket table.
    let mut buckets: BTreeMap<u64, Vec<&Sample>> = BTreeMap::new();
    let width = config.bucket.as_secs_f64();
    for s in &samples {
        buckets.entry((s.start / width) as u64).or_default().push(s);
    }
    let unit = if width >= 60.0 { "min" } else { "s" };
    let mut table = String::from(
        "| window | requests | failed | req/s | p50 ms | p99 ms | max ms | RSS MiB (end of window) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let rss = rss_samples.lock().expect("rss").clone();
    for (bucket, list) in &buckets {
        let from = *bucket as f64 * width;
        let to = from + width;
        let mut latencies: Vec<f64> = list.iter().filter(|s| s.ok).map(|s| s.latency_ms).collect();
        latencies.sort_by(f64::total_cmp);
        let failed = list.iter().filter(|s| !s.ok).count();
        let rss_at = rss
            .iter()
            .rfind(|s| s.0 <= to)
            .map_or(0.0, |s| s.1 as f64 / 1024.0);
        let label = if unit == "min" {
            format!("{}-{} min", from / 60.0, to / 60.0)
        } else {
            format!("{from:.0}-{to:.0} s")
        };
        let span = (to.min(sigterm_at) - from).max(1e-3);
        table.push_str(&format!(
            "| {label}{} | {} | {failed} | {:.0} | {:.1} | {:.1} | {:.1} | {rss_at:.1} |\n",
            if to > sigterm_at { " (SIGTERM)" } else { "" },
            list.len(),
            list.len() as f64 / span,
            percentile(&latencies, 50.0),
            percentile(&latencies, 99.0),
            latencies.last().copied().unwrap_or(f64::NAN),
        ));
    }

    let report = SoakReport {
        sent: samples.len(),
        ok: samples.iter().filter(|s| s.ok).count(),
        failed_before_sigterm,
        failed_after_sigterm,
        rss_first_kb,
        rss_warm_kb,
        rss_end_kb,
        rss_max_kb,
        fds_warm,
        fds_end,
        rotations,
        cert_reloads_ok: metric(
            &metrics,
            "probelint_webhook_certificate_reloads_total{result=\"success\"}",
        ),
        cert_reloads_failed: metric(
            &metrics,
            "probelint_webhook_certificate_reloads_total{result=\"failure\"}",
        ),
        certs_served: certs_seen.lock().expect("certs").len(),
        policy_valid_writes: valid_writes,
        policy_invalid_writes: invalid_writes,
        policy_reloads_ok: metric(
            &metrics,
            "probelint_webhook_policy_reloads_total{result=\"success\"}",
        ),
        policy_reloads_failed: metric(
            &metrics,
            "probelint_webhook_policy_reloads_total{result=\"failure\"}",
        ),
        alive_after_sighup,
        exit_code: status.code(),
        exit_after_sigterm,
        table,
        hostile_clients: config.idle_clients
            + config.trickling_clients
            + config.zero_window_clients,
        hostile_closed,
        closed_by_reason: metrics
            .lines()
            .filter_map(|l| l.strip_prefix("probelint_webhook_connections_closed_total{"))
            .map(|l| {
                l.replace("\"} ", "=")
                    .replace("port=\"", "")
                    .replace("\",reason=\"", " ")
            })
            .collect::<Vec<_>>()
            .join(", "),
    };
    let summary = format!(
        "soak: {:?} of load, {} + {} clients (keep-alive + new connection per review)\n\n{}\n\
         | total | value |\n|---|---:|\n\
         | requests sent | {} |\n| failed before SIGTERM | {} |\n| failed after SIGTERM (listener closed) | {} |\n\
         | RSS at start / after warm-up ({:?}) / end / max, MiB | {:.1} / {:.1} / {:.1} / {:.1} |\n\
         | RSS growth after warm-up | {:+.1} % |\n| open fds after warm-up / end | {} / {} |\n\
         | certificate rotations / reloads ok / failed / distinct certificates served | {} / {} / {} / {} |\n\
         | policy writes valid / invalid; reloads ok / failed | {} / {}; {} / {} |\n\
         | serving after SIGHUP | {} |\n\
         | exit code after SIGTERM / time to exit | {:?} / {:.2} s |\n\
         | hostile clients (idle / trickling / zero-window HTTP/2) | {} / {} / {} |\n\
         | hostile connections closed by the webhook | {} |\n\
         | connections closed, by port and reason (before SIGTERM) | {} |\n",
        config.duration,
        config.keepalive_clients,
        config.fresh_clients,
        report.table,
        report.sent,
        report.failed_before_sigterm,
        report.failed_after_sigterm,
        config.warmup,
        report.rss_first_kb as f64 / 1024.0,
        report.rss_warm_kb as f64 / 1024.0,
        report.rss_end_kb as f64 / 1024.0,
        report.rss_max_kb as f64 / 1024.0,
        (report.rss_end_kb as f64 / report.rss_warm_kb.max(1) as f64 - 1.0) * 100.0,
        report.fds_warm,
        report.fds_end,
        report.rotations,
        report.cert_reloads_ok,
        report.cert_reloads_failed,
        report.certs_served,
        report.policy_valid_writes,
        report.policy_invalid_writes,
        report.policy_reloads_ok,
        report.policy_reloads_failed,
        report.alive_after_sighup,
        report.exit_code,
        report.exit_after_sigterm.as_secs_f64(),
        config.idle_clients,
        config.trickling_clients,
        config.zero_window_clients,
        report.hostile_closed,
        report.closed_by_reason,
    );
    println!("{summary}");
    if let Some(path) = &config.report {
        std::fs::write(path, &summary).expect("write the soak report");
    }
    report
}

fn check_soak(report: &SoakReport) {
    if report.hostile_clients > 0 {
        // The tricklers and zero-window clients are cut within about 10 s each.
        assert!(
            report.hostile_closed > 0,
            "the webhook closed none of the hostile clients' connections"
        );
    }
    assert!(report.sent >= 100, "only {} requests", report.sent);
    assert_eq!(
        report.failed_before_sigterm, 0,
        "requests failed under load"
    );
    assert!(report.ok + report.failed_after_sigterm == report.sent);
    assert!(
        report.rss_end_kb as f64 <= report.rss_warm_kb as f64 * 1.10,
        "RSS grew from {} KiB to {} KiB",
        report.rss_warm_kb,
        report.rss_end_kb
    );
    assert!(
        report.fds_end <= report.fds_warm + 16,
        "fds {} -> {}",
        report.fds_warm,
        report.fds_end
    );
    assert!(report.rotations >= 2);
    assert_eq!(
        report.cert_reloads_ok, report.rotations,
        "one reload per rotation"
    );
    assert_eq!(report.cert_reloads_failed, 0);
    assert!(
        report.certs_served as u64 >= report.rotations,
        "rotated certificates were not served"
    );
    assert_eq!(report.policy_reloads_ok, report.policy_valid_writes);
    assert_eq!(report.policy_reloads_failed, report.policy_invalid_writes);
    assert!(report.alive_after_sighup, "SIGHUP took the webhook down");
    // It exited (wait_exit fails a webhook that hangs) and cleanly; how fast is printed above.
    assert_eq!(report.exit_code, Some(0), "exit after SIGTERM");
}

/// The CI soak: 30 s of load from 4 clients while the certificate rotates every 3 s and the
/// policy is rewritten every 4.5 s (valid and invalid in turn), then SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_30_seconds() {
    let report = run_soak(SoakConfig::ci()).await;
    check_soak(&report);
}

/// The full soak (`tests/soak/soak.sh`): 10 minutes by default; `SOAK_*` variables configure it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "minutes long: run through tests/soak/soak.sh"]
async fn soak() {
    let report = run_soak(SoakConfig::from_env()).await;
    check_soak(&report);
}
