//! End-to-end tests of `probelint-webhook`: the real binary on loopback ports, a test CA made
//! here, real TLS, real HTTP, AdmissionReview bodies shaped like the apiserver's
//! (`tests/fixtures/`).

mod support;

use base64_decode::decode as b64decode;
use probelint_policies::{Applicability, Policy};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A minimal base64 decoder, so that the tests check the wire format independently of the
/// encoder the server uses.
mod base64_decode {
    pub fn decode(text: &str) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut count = 0;
        let mut out = Vec::new();
        for c in text.bytes().filter(|&c| c != b'=') {
            let value = ALPHABET
                .iter()
                .position(|&a| a == c)
                .unwrap_or_else(|| panic!("not base64: {c}")) as u32;
            bits = (bits << 6) | value;
            count += 6;
            if count >= 8 {
                count -= 8;
                out.push((bits >> count) as u8);
                bits &= (1 << count) - 1;
            }
        }
        out
    }
}

fn warnings(review: &Value) -> Vec<String> {
    review["response"]["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn allows_a_clean_gpu_pod_and_echoes_the_uid() {
    let webhook = Webhook::start().await;
    let reply = webhook
        .post("/validate", &fixture("allow-clean-gpu-pod"))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        reply.json(),
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01", "allowed": true}
        })
    );
}

#[tokio::test]
async fn denies_a_gpu_deployment_without_startup_and_readiness_probes() {
    let webhook = Webhook::start().await;
    let review = webhook
        .review("/validate", "deny-gpu-deployment-without-probes")
        .await;
    let response = &review["response"];
    assert_eq!(response["uid"], "2d7e8f8a-0b7c-4b8e-8a55-5c2a0f1b9e02");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("probelint found 2 errors in Deployment inference/llama-3-70b:"),
        "{message}"
    );
    // One problem, one error: the missing startupProbe carries the liveness risk.
    assert!(!message.contains("liveness-restart-loop"), "{message}");
    for rule in ["gpu-startup-probe-missing", "gpu-readiness-probe-missing"] {
        assert!(
            message.contains(&format!("\n- {rule}: container \"vllm\" ")),
            "{rule} not named in:\n{message}"
        );
    }
    assert_eq!(message.matches("\n  fix: ").count(), 2, "{message}");
    let audit: Value = serde_json::from_str(
        response["auditAnnotations"]["findings"]
            .as_str()
            .expect("findings audit annotation"),
    )
    .expect("audit JSON");
    let rules: Vec<&str> = audit
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert!(rules.contains(&"gpu-startup-probe-missing"), "{audit}");
    assert!(
        audit
            .as_array()
            .expect("array")
            .iter()
            .all(|f| f["container"] == "vllm")
    );
}

#[tokio::test]
async fn warn_endpoint_never_denies_and_validate_passes_warnings_through() {
    let webhook = Webhook::start().await;
    let review = webhook
        .review("/validate/warn", "deny-gpu-deployment-without-probes")
        .await;
    assert_eq!(review["response"]["allowed"], true);
    assert!(review["response"].get("status").is_none());
    let list = warnings(&review);
    // Two findings, each its line of what is wrong and then the lines of what to change.
    let findings: Vec<&String> = list.iter().filter(|w| !w.starts_with("  ")).collect();
    assert_eq!(findings.len(), 2, "{list:?}");
    for warning in &list {
        assert!(warning.chars().count() < 120, "too long: {warning}");
        assert!(!warning.contains('\n'));
    }
    assert!(list[0].starts_with("error "), "{list:?}");
    assert!(review["response"]["auditAnnotations"]["findings"].is_string());

    let review = webhook
        .review("/validate", "warn-gpu-deployment-exec-probe")
        .await;
    assert_eq!(review["response"]["allowed"], true);
    let list = warnings(&review);
    // What is wrong, then what to change in that container.
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(
        list[0].starts_with("warning exec-probe-heavy in vllm: "),
        "{list:?}"
    );
    assert!(list[1].starts_with("  fix in vllm: "), "{list:?}");
}

#[tokio::test]
async fn mutate_without_changes_answers_the_exact_json() {
    let webhook = Webhook::start().await;
    let reply = webhook
        .post("/mutate", &fixture("allow-clean-gpu-pod"))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.text(),
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01","allowed":true}}"#
    );
}

/// Applies the base64 JSON Patch of a mutate response to the request's object.
fn apply_patch(review: &Value, request_fixture: &str) -> Value {
    let response = &review["response"];
    assert_eq!(response["patchType"], "JSONPatch");
    let patch_text = b64decode(
        response["patch"]
            .as_str()
            .expect("patch is a base64 string"),
    );
    let patch: json_patch::Patch = serde_json::from_slice(&patch_text).expect("patch JSON");
    let mut object = fixture_json(request_fixture)["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).expect("the patch applies");
    object
}

#[tokio::test]
async fn mutate_patch_applies_and_leaves_no_fixable_finding() {
    let webhook = Webhook::start().await;
    let name = "deny-gpu-deployment-without-probes";
    let review = webhook.review("/mutate", name).await;
    assert_eq!(review["response"]["allowed"], true);
    assert!(
        !warnings(&review).is_empty(),
        "fixes are announced as warnings"
    );
    let object = apply_patch(&review, name);
    assert!(
        object["metadata"]["annotations"]["probelint.io/mutated"]
            .as_str()
            .is_some_and(|v| v.split(',').any(|e| e == "gpu-startup-probe-missing:vllm")),
        "{}",
        object["metadata"]
    );
    let policy = Policy::builtin().expect("policy");
    let after = probelint_policies::evaluate_one(&object, &policy);
    assert!(
        !after.iter().any(|f| f.rule == "gpu-startup-probe-missing"),
        "{after:#?}"
    );
    assert!(
        after.iter().all(|f| f
            .fix
            .as_ref()
            .is_none_or(|fix| fix.applicability != Applicability::Safe)),
        "a safe fix was left unapplied: {after:#?}"
    );

    // Re-validate the mutated object through the webhook: the startup rules are satisfied.
    let mut request = fixture_json(name);
    request["request"]["object"] = object;
    let body = serde_json::to_vec(&request).expect("json");
    let review = webhook.post("/validate", &body).await.json();
    let message = review["response"]["status"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(!message.contains("gpu-startup-probe-missing"), "{message}");
    assert!(!message.contains("liveness-restart-loop"), "{message}");

    // Mutating the mutated object changes nothing more.
    let review = webhook.post("/mutate", &body).await.json();
    assert!(review["response"].get("patch").is_none(), "{review}");
}

#[tokio::test]
async fn objects_and_operations_it_does_not_check_are_allowed() {
    let webhook = Webhook::start().await;
    for name in [
        "allow-configmap",
        "allow-delete-deployment",
        "allow-scale-subresource",
        "allow-update-labels-only",
    ] {
        for path in ["/validate", "/validate/warn", "/mutate"] {
            let review = webhook.review(path, name).await;
            let expected_uid = fixture_json(name)["request"]["uid"].clone();
            assert_eq!(
                review,
                json!({
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": expected_uid, "allowed": true}
                }),
                "{name} on {path}"
            );
        }
    }
    // An UPDATE that changes the pod template is checked.
    let review = webhook.review("/validate", "deny-update-new-image").await;
    assert_eq!(review["response"]["allowed"], false);
}

#[tokio::test]
async fn bad_requests_get_a_status_and_a_message_saying_what_is_wrong() {
    let webhook = Webhook::start().await;

    let reply = webhook.post("/validate", b"{\"apiVersion\": ").await;
    assert_eq!(reply.status, 400);
    assert!(
        reply
            .text()
            .contains("not a valid admission.k8s.io/v1 AdmissionReview"),
        "{}",
        reply.text()
    );

    let reply = webhook
        .post(
            "/validate",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        )
        .await;
    assert_eq!(reply.status, 400);
    assert!(reply.text().contains("no `request`"), "{}", reply.text());

    let mut big = fixture_json("allow-clean-gpu-pod");
    big["request"]["object"]["metadata"]["annotations"]["padding"] =
        Value::String("x".repeat(7 * 1024 * 1024));
    let reply = webhook
        .post("/validate", &serde_json::to_vec(&big).expect("json"))
        .await;
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert!(reply.text().contains("limit"), "{}", reply.text());

    let reply = https(
        webhook.addr,
        webhook.client(),
        "POST",
        "/validate",
        Some("application/x-www-form-urlencoded"),
        fixture("allow-clean-gpu-pod"),
    )
    .await
    .expect("request");
    assert_eq!(reply.status, 415);
    assert!(
        reply.text().contains("application/json"),
        "{}",
        reply.text()
    );

    let reply = https(
        webhook.addr,
        webhook.client(),
        "GET",
        "/metrics",
        None,
        Vec::new(),
    )
    .await
    .expect("request");
    assert_eq!(
        reply.status, 404,
        "the TLS port serves reviews and probes only"
    );
    let reply = https(
        webhook.addr,
        webhook.client(),
        "GET",
        "/validate",
        None,
        Vec::new(),
    )
    .await
    .expect("request");
    assert_eq!(reply.status, 405);

    // The server is still fine.
    let review = webhook.review("/validate", "allow-clean-gpu-pod").await;
    assert_eq!(review["response"]["allowed"], true);
}

#[tokio::test]
async fn probes_on_both_ports_and_metrics_on_the_plain_port() {
    let webhook = Webhook::start().await;
    for path in ["/livez", "/readyz"] {
        let reply = https(
            webhook.addr,
            webhook.client(),
            "GET",
            path,
            None,
            Vec::new(),
        )
        .await
        .expect("TLS probe");
        assert_eq!(reply.status, 200, "{path} on the TLS port");
        let reply = webhook.metrics_get(path).await.expect("plain probe");
        assert_eq!(reply.status, 200, "{path} on the metrics port");
    }
    let ready = webhook.metrics_get("/readyz").await.expect("readyz").text();
    assert!(ready.contains("policy: built-in"), "{ready}");

    webhook
        .review("/validate", "deny-gpu-deployment-without-probes")
        .await;
    webhook.review("/validate", "allow-clean-gpu-pod").await;
    webhook.post("/validate", b"nope").await;
    let metrics = webhook.metrics_get("/metrics").await.expect("metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/openmetrics-text")),
        "{:?}",
        metrics.content_type
    );
    let text = metrics.text();
    for expected in [
        r#"probelint_webhook_requests_total{endpoint="validate",decision="denied"} 1"#,
        r#"probelint_webhook_requests_total{endpoint="validate",decision="allowed"} 1"#,
        r#"probelint_webhook_requests_total{endpoint="validate",decision="invalid"} 1"#,
        r#"probelint_webhook_findings_total{rule="gpu-startup-probe-missing",severity="error",exempt="false"} 1"#,
        r#"probelint_webhook_request_duration_seconds_count{endpoint="validate"} 3"#,
    ] {
        assert!(text.contains(expected), "missing {expected} in\n{text}");
    }
}

#[tokio::test]
async fn logs_one_json_line_per_review() {
    let webhook = Webhook::start().await;
    webhook
        .review("/validate", "deny-gpu-deployment-without-probes")
        .await;
    let deadline = Instant::now() + HANG;
    let line = loop {
        let found = webhook.log_lines().into_iter().find(|l| {
            l["message"] == "review" && l["uid"] == "2d7e8f8a-0b7c-4b8e-8a55-5c2a0f1b9e02"
        });
        if let Some(line) = found {
            break line;
        }
        assert!(Instant::now() < deadline, "no review log line");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(line["kind"], "apps/v1/Deployment");
    assert_eq!(line["namespace"], "inference");
    assert_eq!(line["name"], "llama-3-70b");
    assert_eq!(line["operation"], "CREATE");
    assert_eq!(line["decision"], "denied");
    assert_eq!(line["endpoint"], "validate");
    assert!(
        line["rules"]
            .as_str()
            .is_some_and(|r| r.contains("gpu-startup-probe-missing")),
        "{line}"
    );
    assert!(line["latency_ms"].is_number(), "{line}");
}

#[tokio::test]
async fn plaintext_http_and_tls_below_1_2_are_refused() {
    let webhook = Webhook::start().await;

    let mut tcp = TcpStream::connect(webhook.addr).await.expect("connect");
    tcp.write_all(
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    )
    .await
    .expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer)).await;
    assert!(!answer.starts_with(b"HTTP/"), "plain HTTP was answered");

    // A TLS 1.1 ClientHello (rustls cannot speak 1.1, so it is written by hand): record
    // version 3.1, client_version 3.2, suites and a signature scheme the server supports (so that
    // only the version can be the reason to refuse), and no supported_versions extension.
    let mut hello = vec![0x03, 0x02];
    hello.extend([0x42; 32]); // random
    hello.push(0); // session id
    hello.extend([0x00, 0x08, 0xc0, 0x2b, 0xc0, 0x2f, 0xc0, 0x13, 0x00, 0x2f]); // cipher suites
    hello.extend([0x01, 0x00]); // compression: null
    hello.extend([0x00, 0x08, 0x00, 0x0d, 0x00, 0x04, 0x00, 0x02, 0x04, 0x03]); // ecdsa_p256_sha256
    let mut handshake = vec![0x01, 0x00, 0x00, hello.len() as u8];
    handshake.extend(hello);
    let mut record = vec![0x16, 0x03, 0x01, 0x00, handshake.len() as u8];
    record.extend(handshake);
    let mut tcp = TcpStream::connect(webhook.addr).await.expect("connect");
    tcp.write_all(&record).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer)).await;
    assert_ne!(
        answer.first(),
        Some(&0x16),
        "the server answered a TLS 1.1 hello: {answer:x?}"
    );
    if !answer.is_empty() {
        // An alert record: protocol_version (70).
        assert_eq!(answer[0], 0x15, "{answer:x?}");
        assert_eq!(answer.get(6), Some(&70), "{answer:x?}");
    }

    // TLS 1.2 and TLS 1.3 are both served.
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let config = client_config(&webhook.ca.pem, &[version], None);
        let reply = https(
            webhook.addr,
            config,
            "POST",
            "/validate",
            Some("application/json"),
            fixture("allow-clean-gpu-pod"),
        )
        .await
        .unwrap_or_else(|e| panic!("{version:?}: {e}"));
        assert_eq!(reply.status, 200);
    }
}

#[tokio::test]
async fn client_ca_mode_requires_a_client_certificate_from_that_ca() {
    let webhook = Webhook::start_with(Options {
        client_ca: true,
        ..Options::default()
    })
    .await;
    let post = |config| {
        https(
            webhook.addr,
            config,
            "POST",
            "/validate",
            Some("application/json"),
            fixture("allow-clean-gpu-pod"),
        )
    };
    let apiserver = webhook.ca.client("kube-apiserver", None);
    let reply = post(client_config(
        &webhook.ca.pem,
        ALL_VERSIONS,
        Some(&apiserver),
    ))
    .await
    .expect("with the apiserver's client certificate");
    assert_eq!(reply.status, 200);

    for versions in [ALL_VERSIONS, &[&rustls::version::TLS12][..]] {
        let anonymous = post(client_config(&webhook.ca.pem, versions, None)).await;
        assert!(anonymous.is_err(), "served without a client certificate");
        let stranger = Ca::new("someone else").client("intruder", None);
        let foreign = post(client_config(&webhook.ca.pem, versions, Some(&stranger))).await;
        assert!(
            foreign.is_err(),
            "served a client certificate from another CA"
        );
    }
}

#[tokio::test]
async fn certificate_rotation_under_continuous_requests_fails_no_request() {
    let mut webhook = Webhook::start().await;
    let v1 = webhook.server_leaf.der();
    let body = Arc::new(fixture("allow-clean-gpu-pod"));
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for _ in 0..3 {
        let (addr, config) = (webhook.addr, webhook.client());
        let (body, stop, failures, served) =
            (body.clone(), stop.clone(), failures.clone(), served.clone());
        clients.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut count = 0;
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline && count < 5000 {
                count += 1;
                let result = https(
                    addr,
                    config.clone(),
                    "POST",
                    "/validate",
                    Some("application/json"),
                    body.to_vec(),
                )
                .await;
                match result {
                    Ok(reply) if reply.status == 200 => {
                        served.lock().expect("served").push(reply.peer_cert)
                    }
                    Ok(reply) => {
                        eprintln!("HTTP {}: {}", reply.status, reply.text());
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        eprintln!("request failed: {e}");
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }

    let wait_for = |cert: rustls::pki_types::CertificateDer<'static>| {
        let served = served.clone();
        async move {
            let deadline = Instant::now() + HANG;
            loop {
                if served
                    .lock()
                    .expect("served")
                    .last()
                    .is_some_and(|c| c.as_ref() == Some(&cert))
                {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "the new certificate was never served"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_for(v1).await;
    let mut latest = webhook.server_leaf.clone();
    for generation in 2..=3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        latest = webhook
            .ca
            .server(&format!("probelint-webhook v{generation}"), LOOPBACK);
        let ca = webhook.ca.pem.clone();
        webhook.certs.rotate(&[
            ("tls.crt", &latest.cert_pem),
            ("tls.key", &latest.key_pem),
            ("ca.crt", &ca),
        ]);
        wait_for(latest.der()).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.await.expect("client task");
    }

    let served = std::mem::take(&mut *served.lock().expect("served"));
    assert_eq!(
        failures.load(Ordering::SeqCst),
        0,
        "requests failed during rotation"
    );
    assert!(served.len() >= 20, "only {} requests ran", served.len());
    assert_eq!(served.last().cloned().flatten(), Some(latest.der()));
    let metrics = webhook
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text();
    assert!(
        metrics.contains(r#"probelint_webhook_certificate_reloads_total{result="success"} 2"#),
        "{metrics}"
    );
    assert!(
        !metrics.contains(r#"certificate_reloads_total{result="failure"}"#),
        "{metrics}"
    );
    webhook.terminate();
    assert!(webhook.wait_exit(Duration::from_secs(10)).success());
}

#[tokio::test]
async fn policy_reload_applies_a_good_policy_and_keeps_it_when_the_next_is_bad() {
    let webhook = Webhook::start_with(Options {
        policy: Some("# empty: the built-in policy\n".to_owned()),
        ..Options::default()
    })
    .await;
    let rule = "gpu-startup-probe-missing";
    let names_rule = |review: &Value| {
        review["response"]["status"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(rule)
    };
    let name = "deny-gpu-deployment-without-probes";
    assert!(names_rule(&webhook.review("/validate", name).await));

    write_atomically(&webhook.policy_path, &format!("rules:\n  {rule}: off\n"));
    let deadline = Instant::now() + HANG;
    while names_rule(&webhook.review("/validate", name).await) {
        assert!(
            Instant::now() < deadline,
            "the new policy was never applied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    write_atomically(&webhook.policy_path, "rules:\n  no-such-rule: error\n");
    let ready = webhook.readyz_saying("policy reload failed").await;
    assert_eq!(
        ready.status, 200,
        "still ready: the last good policy is served"
    );
    assert!(ready.text().contains("no-such-rule"), "{}", ready.text());
    let review = webhook.review("/validate", name).await;
    assert!(
        !names_rule(&review),
        "the last good policy (rule off) still applies"
    );
    assert_eq!(
        review["response"]["allowed"], false,
        "the other errors still deny"
    );

    let metrics = webhook
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text();
    assert!(
        metrics.contains(r#"probelint_webhook_policy_reloads_total{result="success"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"probelint_webhook_policy_reloads_total{result="failure"} 1"#),
        "{metrics}"
    );
}

/// README: "SIGHUP re-reads the certificate and the policy at once". The policy here is a symlink
/// to a file in a directory the webhook does not watch, so only the signal (or the 30 s backstop)
/// can make it see the new text.
#[tokio::test]
async fn sighup_rereads_a_policy_the_watcher_cannot_see_change() {
    let webhook = Webhook::start_with(Options {
        policy: Some("# empty: the built-in policy\n".to_owned()),
        ..Options::default()
    })
    .await;
    let outside = webhook.dir.path().join("unwatched");
    std::fs::create_dir(&outside).expect("dir");
    let target = outside.join("policy.yaml");
    std::fs::write(&target, "# empty: the built-in policy\n").expect("policy");
    let link = webhook.policy_path.with_extension("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    std::fs::rename(&link, &webhook.policy_path).expect("swap in the symlink");

    let rule = "gpu-startup-probe-missing";
    let name = "deny-gpu-deployment-without-probes";
    let names_rule = |review: &Value| {
        review["response"]["status"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(rule)
    };
    // Let the swap's own reload (same text, so no change) settle, then edit the target.
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::write(&target, format!("rules:\n  {rule}: off\n")).expect("policy");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        names_rule(&webhook.review("/validate", name).await),
        "the watcher saw a change in a directory it does not watch: this test proves nothing"
    );

    webhook.hangup();
    let deadline = Instant::now() + HANG;
    while names_rule(&webhook.review("/validate", name).await) {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not re-read the policy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        webhook.log_lines().iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("SIGHUP"))),
        "no SIGHUP log line"
    );
    assert_eq!(
        webhook.metrics_get("/livez").await.expect("livez").status,
        200
    );
}

#[tokio::test]
async fn sigterm_finishes_the_review_in_flight_and_exits_zero() {
    let mut webhook = Webhook::start().await;
    let body = fixture("deny-gpu-deployment-without-probes");
    let tcp = TcpStream::connect(webhook.addr).await.expect("connect");
    let mut tls = tokio_rustls::TlsConnector::from(webhook.client())
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("handshake");
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (first, rest) = body.split_at(body.len() / 2);
    tls.write_all(head.as_bytes()).await.expect("headers");
    tls.write_all(first).await.expect("first half");
    tls.flush().await.expect("flush");
    // Let the server read the headers: a connection that has not started a request is idle,
    // and graceful shutdown closes idle connections at once.
    tokio::time::sleep(Duration::from_millis(300)).await;

    webhook.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        webhook.metrics_get("/readyz").await.is_err()
            || TcpStream::connect(webhook.addr).await.is_err(),
        "new connections are not accepted while draining"
    );

    tls.write_all(rest).await.expect("second half");
    tls.flush().await.expect("flush");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 8192];
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            if let Some(end) = find(&answer, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&answer[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if answer.len() >= end + 4 + length {
                    break;
                }
            }
        }
    })
    .await
    .expect("the response arrives");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains(r#""allowed":false"#), "{text}");

    let status = webhook.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{status:?}");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn bad_startup_configuration_exits_nonzero_and_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("startup CA");
    let leaf = ca.server("webhook", LOOPBACK);
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, &leaf.cert_pem).expect("cert");
    std::fs::write(&key, &leaf.key_pem).expect("key");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "rules:\n  no-such-rule: error\n").expect("policy");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("run")
    };

    let out = run(&[
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
        "--policy".as_ref(),
        policy.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("policy.yaml") && log.contains("no-such-rule"),
        "{log}"
    );

    let missing = dir.path().join("missing.key");
    let out = run(&[
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        missing.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("missing.key"), "{log}");

    // A key that does not belong to the certificate.
    let other = ca.server("other", LOOPBACK);
    std::fs::write(&key, &other.key_pem).expect("key");
    let out = run(&[
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test]
async fn a_broken_certificate_update_keeps_the_served_certificate() {
    let mut webhook = Webhook::start().await;
    let v1 = webhook.server_leaf.clone();
    let v2 = webhook.ca.server("probelint-webhook v2", LOOPBACK);
    let stranger = webhook.ca.server("someone else's key", LOOPBACK);
    let ca = webhook.ca.pem.clone();
    // A new certificate next to a key that is not its own.
    webhook.certs.rotate(&[
        ("tls.crt", &v2.cert_pem),
        ("tls.key", &stranger.key_pem),
        ("ca.crt", &ca),
    ]);
    let ready = webhook.readyz_saying("certificate reload failed").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    let reply = webhook
        .post("/validate", &fixture("allow-clean-gpu-pod"))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.peer_cert,
        Some(v1.der()),
        "the previous certificate is still served"
    );
    let metrics = webhook
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text();
    assert!(
        metrics.contains(r#"probelint_webhook_certificate_reloads_total{result="failure"}"#),
        "{metrics}"
    );

    // The matching pair arrives: served, and /readyz is clean again.
    webhook.certs.rotate(&[
        ("tls.crt", &v2.cert_pem),
        ("tls.key", &v2.key_pem),
        ("ca.crt", &ca),
    ]);
    let deadline = Instant::now() + HANG;
    loop {
        let reply = webhook
            .post("/validate", &fixture("allow-clean-gpu-pod"))
            .await;
        if reply.peer_cert == Some(v2.der()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the repaired certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ready = webhook.metrics_get("/readyz").await.expect("readyz").text();
    assert!(ready.contains("tls: certificate loaded"), "{ready}");
}

#[tokio::test]
async fn http2_clients_are_served() {
    // The apiserver negotiates HTTP/2 by ALPN when the webhook offers it.
    let webhook = Webhook::start().await;
    let mut config = (*client_config(&webhook.ca.pem, ALL_VERSIONS, None)).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(webhook.addr).await.expect("connect");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(connection);
    for _ in 0..3 {
        let request = hyper::Request::builder()
            .method("POST")
            .uri(format!(
                "https://localhost:{}/validate",
                webhook.addr.port()
            ))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(hyper::body::Bytes::from(
                fixture("deny-gpu-deployment-without-probes"),
            )))
            .expect("request");
        let response = sender.send_request(request).await.expect("response");
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), hyper::Version::HTTP_2);
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("body")
            .to_bytes();
        let review: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(review["response"]["allowed"], false);
    }
}

// --- The cluster's own controllers --------------------------------------------------------
//
// Reviews shaped as the apiserver sends them for what controllers do all day: the Deployment
// controller creating and scaling ReplicaSets, the ReplicaSet controller creating Pods, Kueue
// admitting queued Pods and Jobs, an HPA scaling. None of them may be patched in a way the
// apiserver refuses or the controller undoes, nor refused where that blocks scaling.

/// The answer that lets a request through untouched, with nothing to say.
fn untouched(name: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": fixture_json(name)["request"]["uid"], "allowed": true}
    })
}

/// The review with `edit` applied.
fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut review = fixture_json(name);
    edit(&mut review);
    serde_json::to_vec(&review).expect("json")
}

/// Waits for the review log line of `uid` (the log is written after the answer).
async fn review_log(webhook: &Webhook, uid: &Value) -> Value {
    let deadline = Instant::now() + HANG;
    loop {
        if let Some(line) = webhook
            .log_lines()
            .into_iter()
            .find(|l| l["message"] == "review" && l["uid"] == *uid)
        {
            return line;
        }
        assert!(Instant::now() < deadline, "no review log line for {uid}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_deployment_controllers_replicasets_are_neither_patched_nor_refused() {
    let webhook = Webhook::start().await;
    for name in [
        "allow-replicaset-create-by-deployment-controller",
        "allow-replicaset-scale-by-deployment-controller",
    ] {
        for path in ["/mutate", "/validate", "/validate/warn"] {
            assert_eq!(
                webhook.review(path, name).await,
                untouched(name),
                "{name} on {path}"
            );
        }
        let line = review_log(&webhook, &fixture_json(name)["request"]["uid"]).await;
        assert_eq!(line["decision"], "skipped", "{line}");
        assert!(
            line["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("managed by Deployment llama-3-70b: ")),
            "{line}"
        );
    }
    // The same ReplicaSet without its owner is what someone applied: it is fixed, and refused.
    let alone = edited("allow-replicaset-create-by-deployment-controller", |r| {
        r["request"]["object"]["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("ownerReferences");
    });
    let review = webhook.post("/mutate", &alone).await.json();
    assert!(review["response"]["patch"].is_string(), "{review}");
    let review = webhook.post("/validate", &alone).await.json();
    assert_eq!(review["response"]["allowed"], false, "{review}");
}

#[tokio::test]
async fn replicas_only_updates_of_a_bad_deployment_are_admitted_unpatched() {
    let webhook = Webhook::start().await;
    for name in [
        "allow-deployment-replicas-update",
        "allow-deployment-scale-to-zero",
        "allow-scale-subresource",
    ] {
        for path in ["/validate", "/mutate"] {
            assert_eq!(
                webhook.review(path, name).await,
                untouched(name),
                "{name} on {path}"
            );
        }
    }
    // The template they keep is one that a CREATE is refused for, and patched.
    let create = edited("allow-deployment-replicas-update", |r| {
        r["request"]["operation"] = json!("CREATE");
        r["request"]["oldObject"] = Value::Null;
    });
    let review = webhook.post("/validate", &create).await.json();
    assert_eq!(review["response"]["allowed"], false, "{review}");
    let review = webhook.post("/mutate", &create).await.json();
    assert!(review["response"]["patch"].is_string(), "{review}");
}

#[tokio::test]
async fn an_image_update_of_a_bad_deployment_is_judged_and_patched() {
    let webhook = Webhook::start().await;
    let name = "deny-update-new-image";
    let review = webhook.review("/validate", name).await;
    assert_eq!(review["response"]["allowed"], false);
    let review = webhook.review("/mutate", name).await;
    let object = apply_patch(&review, name);
    let container = &object["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "vllm/vllm-openai:v0.6.4");
    assert_eq!(container["startupProbe"]["httpGet"]["path"], "/health");
    let mut mutated = fixture_json(name);
    mutated["request"]["object"] = object;
    let review = webhook
        .post("/validate", &serde_json::to_vec(&mutated).expect("json"))
        .await
        .json();
    let message = review["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(!message.contains("gpu-startup-probe-missing"), "{message}");
}

#[tokio::test]
async fn pod_and_job_updates_from_kueue_and_kubectl_get_no_patch_and_are_admitted() {
    let webhook = Webhook::start().await;
    for name in [
        "allow-pod-ungate-by-kueue",
        "allow-pod-set-image",
        "allow-job-unsuspend-by-kueue",
    ] {
        for path in ["/mutate", "/validate", "/validate/warn"] {
            assert_eq!(
                webhook.review(path, name).await,
                untouched(name),
                "{name} on {path}"
            );
        }
        // Created like this, the object would have been patched: what protects it is the
        // operation.
        let create = edited(name, |r| {
            r["request"]["operation"] = json!("CREATE");
            r["request"]["oldObject"] = Value::Null;
        });
        let review = webhook.post("/mutate", &create).await.json();
        assert!(review["response"]["patch"].is_string(), "{name}: {review}");
    }
}

#[tokio::test]
async fn the_pods_a_replicaset_creates_are_fixed_and_never_refused() {
    let webhook = Webhook::start().await;
    let name = "warn-pod-created-by-replicaset";
    let review = webhook.review("/validate", name).await;
    assert_eq!(review["response"]["allowed"], true, "{review}");
    let list = warnings(&review);
    assert!(list[0].starts_with("error "), "{list:?}");
    assert_eq!(
        list.last().map(String::as_str),
        Some(
            "not refused: probelint never refuses the Pods a controller (ReplicaSet llama-3-70b-5d8f7c9b4) creates"
        )
    );
    assert!(review["response"]["auditAnnotations"]["findings"].is_string());
    let review = webhook.review("/mutate", name).await;
    let pod = apply_patch(&review, name);
    assert_eq!(
        pod["spec"]["containers"][0]["startupProbe"]["httpGet"]["path"],
        "/health"
    );
}

#[tokio::test]
async fn the_pods_of_an_exempted_deployment_are_admitted_unchanged_in_enforce_mode() {
    // Exempted by annotation: the mutating webhook copied it from the Deployment into the
    // template, so its ReplicaSet's Pods carry it.
    let webhook = Webhook::start().await;
    let name = "allow-pod-of-exempted-deployment";
    for path in ["/validate", "/mutate"] {
        let review = webhook.review(path, name).await;
        let response = &review["response"];
        assert_eq!(response["allowed"], true, "{path}: {review}");
        assert!(response.get("patch").is_none(), "{path}: {review}");
        assert!(warnings(&review).is_empty(), "{path}: {review}");
        let audit: Value = serde_json::from_str(
            response["auditAnnotations"]["findings"]
                .as_str()
                .expect("audited"),
        )
        .expect("audit JSON");
        assert!(
            audit
                .as_array()
                .is_some_and(|a| !a.is_empty()
                    && a.iter().all(|f| f["suppressed"]["source"] == "annotation")),
            "{audit}"
        );
    }

    // Exempted by a policy exemption naming the Deployment: its Pods are traced to it through
    // their ReplicaSet.
    let webhook = Webhook::start_with(Options {
        policy: Some(
            "exemptions:\n  - rules: [all]\n    kinds: [Deployment]\n    names: [llama-3-70b]\n    reason: load test, scaled to zero after the run\n"
                .to_owned(),
        ),
        ..Options::default()
    })
    .await;
    let name = "warn-pod-created-by-replicaset";
    let review = webhook.review("/validate", name).await;
    assert_eq!(review["response"]["allowed"], true);
    assert!(warnings(&review).is_empty(), "{review}");
    assert!(
        review["response"]["auditAnnotations"]["findings"]
            .as_str()
            .is_some_and(|a| a.contains(
                r#""source":"policy","reason":"load test, scaled to zero after the run""#
            )),
        "{review}"
    );
    let review = webhook.review("/mutate", name).await;
    assert!(review["response"].get("patch").is_none(), "{review}");
    // A Pod of another Deployment is not exempt.
    let other = edited(name, |r| {
        let metadata = &mut r["request"]["object"]["metadata"];
        metadata["ownerReferences"][0]["name"] = json!("mistral-7b-5d8f7c9b4");
        metadata["generateName"] = json!("mistral-7b-5d8f7c9b4-");
    });
    let review = webhook.post("/mutate", &other).await.json();
    assert!(review["response"]["patch"].is_string(), "{review}");
}

#[tokio::test]
async fn an_exemption_on_the_deployments_metadata_alone_is_warned_about_and_carried_to_the_pods() {
    let webhook = Webhook::start().await;
    let name = "warn-deployment-exemption-not-on-template";
    // What the validating webhook sees when nothing copied it (mutation off, podsOnly).
    let review = webhook.review("/validate", name).await;
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(
        warnings(&review),
        [
            "probelint.io/ignore does not reach this Deployment's Pods: set it in the pod template's annotations"
        ]
    );
    // The mutating webhook copies it into the template, and says so.
    let review = webhook.review("/mutate", name).await;
    assert_eq!(
        warnings(&review),
        [
            "probelint copied probelint.io/ignore, probelint.io/ignore-reason into the pod template, so that its Pods carry it"
        ]
    );
    let object = apply_patch(&review, name);
    let template = &object["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(template["probelint.io/ignore"], "all");
    assert_eq!(
        template["probelint.io/ignore-reason"],
        "load test, scaled to zero after the run"
    );
    let mut mutated = fixture_json(name);
    mutated["request"]["object"] = object;
    let review = webhook
        .post("/validate", &serde_json::to_vec(&mutated).expect("json"))
        .await
        .json();
    assert_eq!(review["response"]["allowed"], true);
    assert!(warnings(&review).is_empty(), "{review}");
}

/// What the other suites start the webhook with (`probelint_testkit::webhook`): the real binary
/// on ports of its own choosing, real TLS, a review as `kubectl apply` sends it.
#[test]
fn the_testkit_webhook_answers_a_review_of_any_object_for_its_uid() {
    use probelint_testkit::webhook::{REVIEW_UID, review_for, start};
    let webhook = start(std::path::Path::new(BIN));
    let object = fixture_json("deny-gpu-deployment-without-probes")["request"]["object"].clone();
    let body = serde_json::to_vec(&review_for(&object)).expect("json");
    let reply = webhook.post("/validate", &body).expect("answered");
    assert_eq!(reply.status, 200, "{}", reply.text());
    let review = reply.json();
    assert_eq!(review["response"]["uid"], REVIEW_UID);
    assert_eq!(review["response"]["allowed"], false, "{review}");
    let bad = webhook.post("/validate", b"{").expect("answered");
    assert_eq!(bad.status, 400);
    assert!(
        bad.text()
            .contains("not a valid admission.k8s.io/v1 AdmissionReview"),
        "{}",
        bad.text()
    );
    assert!(
        webhook
            .logs()
            .iter()
            .any(|line| line.contains(r#""message":"review""#)),
        "{:#?}",
        webhook.logs()
    );
}

/// A Deployment with the ownerReference anyone may write (the `kube-root-ca.crt` ConfigMap of
/// every namespace), sent by `username`.
fn claiming_an_owner(username: &str) -> Vec<u8> {
    edited("deny-gpu-deployment-without-probes", |r| {
        r["request"]["object"]["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "kube-root-ca.crt",
            "uid": "0b6f8e0c-7f0e-4d1e-9a39-2f2b4c1d5e6f",
            "controller": true
        }]);
        r["request"]["userInfo"] =
            json!({"username": username, "groups": ["system:authenticated"]});
    })
}

#[tokio::test]
async fn an_owner_is_a_controllers_only_when_a_configured_controller_sends_it() {
    let operator = "system:serviceaccount:kserve:kserve-controller-manager";
    let webhook = Webhook::start_with(Options {
        args: vec![format!("--controller-service-account={operator}")],
        ..Options::default()
    })
    .await;
    // A person's object with a fabricated owner is refused in enforce mode, and patched.
    let review = webhook
        .post("/validate", &claiming_an_owner("alice"))
        .await
        .json();
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert!(
        warnings(&review)
            .iter()
            .any(|w| w.contains("but alice is no controller")),
        "{review}"
    );
    let review = webhook
        .post("/mutate", &claiming_an_owner("alice"))
        .await
        .json();
    assert!(review["response"]["patch"].is_string(), "{review}");
    // The same from a built-in controller or the configured operator: left to its controller.
    for username in [
        "system:serviceaccount:kube-system:replicaset-controller",
        operator,
    ] {
        for path in ["/validate", "/mutate"] {
            let review = webhook
                .post(path, &claiming_an_owner(username))
                .await
                .json();
            assert_eq!(
                review["response"]["allowed"], true,
                "{username} {path}: {review}"
            );
            assert!(
                review["response"].get("patch").is_none(),
                "{username} {path}: {review}"
            );
        }
    }
}

#[tokio::test]
async fn an_opt_out_label_is_logged_and_counted_with_who_sent_it() {
    let labelled = edited("deny-gpu-deployment-without-probes", |r| {
        r["request"]["object"]["metadata"]["labels"]["probelint.io/ignore"] = json!("true");
        r["request"]["userInfo"] = json!({"username": "alice"});
    });
    let webhook = Webhook::start().await;
    let review = webhook.post("/validate", &labelled).await.json();
    assert_eq!(review["response"]["allowed"], true, "{review}");
    let line = review_log(&webhook, &review["response"]["uid"]).await;
    assert_eq!(line["decision"], "skipped", "{line}");
    assert_eq!(line["user"], "alice", "{line}");
    assert_eq!(line["exempted_by"], "label", "{line}");
    let text = webhook
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text();
    let expected = r#"probelint_webhook_exemptions_total{endpoint="validate",source="label",username="alice"} 1"#;
    assert!(text.contains(expected), "missing {expected} in\n{text}");

    // Strict mode: the label is not honoured, nothing is counted.
    let strict = Webhook::start_with(Options {
        policy: Some("allowAnnotationExemptions: false\n".to_owned()),
        ..Options::default()
    })
    .await;
    let review = strict.post("/validate", &labelled).await.json();
    assert_eq!(review["response"]["allowed"], false, "{review}");
    let text = strict
        .metrics_get("/metrics")
        .await
        .expect("metrics")
        .text();
    assert!(
        !text.contains("probelint_webhook_exemptions_total{"),
        "{text}"
    );
}
