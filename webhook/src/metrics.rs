//! Prometheus metrics, served as OpenMetrics text on the plain-HTTP metrics port.
//!
//! What an operator needs to trust an admission webhook: how many reviews it answered and with
//! what decision (a spike of `denied` after a policy change is the first thing to look at), which
//! rules fire, how long a review takes (the apiserver gives up after `timeoutSeconds`),
//! whether certificate and policy reloads succeed (a failing reload is invisible otherwise until
//! the old certificate expires) and when the served certificate expires, and what the
//! connection limits are doing (a client that holds connections open, or stops reading, shows up
//! as closes by reason).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{OnceLock, PoisonError, RwLock};

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `validate`, `validate/warn` or `mutate`.
    pub endpoint: &'static str,
    /// See [`crate::review::Decision::as_str`].
    pub decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FindingLabels {
    pub rule: String,
    pub severity: &'static str,
    /// `true` when an annotation or a policy exemption suppressed the finding.
    pub exempt: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExemptionLabels {
    pub endpoint: &'static str,
    /// `label` (the object opted out), `annotation` or `policy` (a finding suppressed by one).
    pub source: &'static str,
    /// `request.userInfo.username`: who sent the exempted object; [`OTHER_USERS`] past
    /// [`MAX_EXEMPTION_USERS`] distinct ones.
    pub username: String,
}

/// Distinct usernames the exemption counter keeps a series for; the rest are counted together
/// as [`OTHER_USERS`], so that a cluster's many users cannot grow `/metrics` without bound.
pub const MAX_EXEMPTION_USERS: usize = 100;
/// The `username` of exemptions past [`MAX_EXEMPTION_USERS`] users.
pub const OTHER_USERS: &str = "(other users)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    pub endpoint: &'static str,
    /// `body_too_large` (413: over the body limit), `too_costly` (413: its shape would take more
    /// memory than a review may), `body_stalled` (408), `memory` (503: review memory spent),
    /// `source_share` (429: its client holds its share of review memory).
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success` or `failure`.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PortLabels {
    /// `tls` (reviews) or `metrics`.
    pub port: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloseLabels {
    pub port: &'static str,
    /// See [`crate::listen::CloseReason::as_str`].
    pub reason: &'static str,
}

type HistogramFamily = Family<EndpointLabels, Histogram, fn() -> Histogram>;

/// The `endpoint` labels of the review series (`other`: a timeout on another path).
const ENDPOINTS: [&str; 4] = ["validate", "validate/warn", "mutate", "other"];
/// The `decision` labels of the request counter.
const DECISIONS: [&str; 7] = [
    "allowed", "warned", "denied", "patched", "skipped", "invalid", "error",
];

/// One finding series of a rule: (severity, exempt, counter).
type FindingSeries = (&'static str, bool, Counter);

/// Every metric the webhook exports, registered once at startup.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub findings: Family<FindingLabels, Counter>,
    pub exemptions: Family<ExemptionLabels, Counter>,
    /// The usernames `exemptions` has a series for.
    exemption_users: std::sync::Mutex<std::collections::HashSet<String>>,
    pub latency: HistogramFamily,
    pub policy_reloads: Family<ResultLabels, Counter>,
    pub certificate_reloads: Family<ResultLabels, Counter>,
    certificate_expiry: Gauge,
    certificate_files_refused: Gauge,
    connections: Family<PortLabels, Gauge>,
    connections_closed: Family<CloseLabels, Counter>,
    refused: Family<RefusedLabels, Counter>,
    review_memory: Gauge,
    review_memory_limit: Gauge,
    /// Handles on the series every review updates, looked up in their family once and then
    /// kept: a family lookup hashes the labels under the family's lock (and a finding's rule
    /// name had to be copied into its labels first), several times per review. A series still
    /// appears on `/metrics` only once it has been counted.
    request_series: [[OnceLock<Counter>; DECISIONS.len()]; ENDPOINTS.len()],
    latency_series: [OnceLock<Histogram>; ENDPOINTS.len()],
    /// Per rule. Rules come from the policy, so this stays small.
    finding_series: RwLock<HashMap<String, Vec<FindingSeries>>>,
}

/// Review latency buckets: 0.25 ms to ~4 s. Evaluation takes well under a millisecond for a
/// normal object; the top buckets are there to show trouble long before the apiserver's timeout.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("probelint_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        let findings = Family::<FindingLabels, Counter>::default();
        let exemptions = Family::<ExemptionLabels, Counter>::default();
        registry.register(
            "exemptions",
            "Admission reviews exempted from some or all of their judgement, by endpoint, what \
             exempted them (label, annotation, policy) and who sent the object",
            exemptions.clone(),
        );
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let policy_reloads = Family::<ResultLabels, Counter>::default();
        let certificate_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "requests",
            "Admission reviews answered, by endpoint and decision",
            requests.clone(),
        );
        registry.register(
            "findings",
            "Findings reported in admission reviews, by rule and severity",
            findings.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from request to response, by endpoint",
            latency.clone(),
        );
        registry.register(
            "policy_reloads",
            "Policy file reloads, by result (a failure keeps the last good policy)",
            policy_reloads.clone(),
        );
        registry.register(
            "certificate_reloads",
            "TLS certificate reloads, by result (a failure keeps the certificate being served)",
            certificate_reloads.clone(),
        );
        let certificate_expiry = Gauge::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate, in seconds since the Unix epoch",
            certificate_expiry.clone(),
        );
        let certificate_files_refused = Gauge::default();
        registry.register(
            "certificate_files_refused",
            "1 while the certificate files on disk are refused (expired, not valid yet, or \
             broken) and the previous certificate is still served",
            certificate_files_refused.clone(),
        );
        let connections = Family::<PortLabels, Gauge>::default();
        registry.register(
            "connections",
            "Open connections, by port",
            connections.clone(),
        );
        let connections_closed = Family::<CloseLabels, Counter>::default();
        registry.register(
            "connections_closed",
            "Connections the webhook closed or refused, by port and reason (clients closing \
             their own connections are not counted)",
            connections_closed.clone(),
        );
        let refused = Family::<RefusedLabels, Counter>::default();
        registry.register(
            "reviews_refused",
            "Reviews refused before they were evaluated, by endpoint and reason (each is also \
             counted in requests_total as invalid or error)",
            refused.clone(),
        );
        let review_memory = Gauge::default();
        registry.register(
            "review_memory_bytes",
            "Bytes of request bodies and unsent answers of the reviews in flight",
            review_memory.clone(),
        );
        let review_memory_limit = Gauge::default();
        registry.register(
            "review_memory_limit_bytes",
            "Past this many review bytes in flight, bodies wait and connections whose answers \
             do not move are closed",
            review_memory_limit.clone(),
        );
        Metrics {
            registry,
            requests,
            findings,
            exemptions,
            exemption_users: Default::default(),
            latency,
            policy_reloads,
            certificate_reloads,
            certificate_expiry,
            certificate_files_refused,
            connections,
            connections_closed,
            refused,
            review_memory,
            review_memory_limit,
            request_series: Default::default(),
            latency_series: Default::default(),
            finding_series: RwLock::default(),
        }
    }

    /// Counts one review that `source` exempted, sent by `username`.
    pub fn count_exemption(&self, endpoint: &'static str, source: &'static str, username: &str) {
        let username = {
            let mut users = self
                .exemption_users
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if users.contains(username) {
                username.to_owned()
            } else if users.len() < MAX_EXEMPTION_USERS {
                users.insert(username.to_owned());
                username.to_owned()
            } else {
                OTHER_USERS.to_owned()
            }
        };
        self.exemptions
            .get_or_create(&ExemptionLabels {
                endpoint,
                source,
                username,
            })
            .inc();
    }

    /// Counts one answered (or refused) review.
    pub fn count_request(&self, endpoint: &'static str, decision: &'static str) {
        let labels = || RequestLabels { endpoint, decision };
        match (index(&ENDPOINTS, endpoint), index(&DECISIONS, decision)) {
            (Some(e), Some(d)) => self.request_series[e][d]
                .get_or_init(|| Counter::clone(&self.requests.get_or_create(&labels())))
                .inc(),
            _ => self.requests.get_or_create(&labels()).inc(),
        };
    }

    /// Records how long one review took.
    pub fn observe_latency(&self, endpoint: &'static str, seconds: f64) {
        let labels = || EndpointLabels { endpoint };
        match index(&ENDPOINTS, endpoint) {
            Some(e) => self.latency_series[e]
                .get_or_init(|| Histogram::clone(&self.latency.get_or_create(&labels())))
                .observe(seconds),
            None => self.latency.get_or_create(&labels()).observe(seconds),
        }
    }

    /// Counts one finding of a review.
    pub fn count_finding(&self, rule: &str, severity: &'static str, exempt: bool) {
        fn find<'a>(
            series: &'a [FindingSeries],
            severity: &str,
            exempt: bool,
        ) -> Option<&'a Counter> {
            series
                .iter()
                .find(|(s, e, _)| *s == severity && *e == exempt)
                .map(|(_, _, counter)| counter)
        }
        {
            let cache = self
                .finding_series
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(counter) = cache
                .get(rule)
                .and_then(|series| find(series, severity, exempt))
            {
                counter.inc();
                return;
            }
        }
        let mut cache = self
            .finding_series
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let series = cache.entry(rule.to_owned()).or_default();
        // Another thread may have added it between the two locks.
        if let Some(counter) = find(series, severity, exempt) {
            counter.inc();
            return;
        }
        let labels = FindingLabels {
            rule: rule.to_owned(),
            severity,
            exempt: if exempt { "true" } else { "false" },
        };
        let counter = Counter::clone(&self.findings.get_or_create(&labels));
        counter.inc();
        series.push((severity, exempt, counter));
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; an error here would be a bug in a metric's encoder,
        // and a partial page is still more useful to a scraper than none.
        if let Err(e) = encode(&mut text, &self.registry) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        text
    }

    pub fn set_certificate_expiry(&self, not_after: i64) {
        self.certificate_expiry.set(not_after);
    }

    pub fn set_certificate_files_refused(&self, refused: bool) {
        self.certificate_files_refused.set(i64::from(refused));
    }

    pub fn set_connections(&self, port: &'static str, open: i64) {
        self.connections
            .get_or_create(&PortLabels { port })
            .set(open);
    }

    pub fn count_closed(&self, port: &'static str, reason: &'static str) {
        self.connections_closed
            .get_or_create(&CloseLabels { port, reason })
            .inc();
    }

    /// Counts a review refused before its evaluation, for `reason` (see [`RefusedLabels`]).
    pub fn count_refused(&self, endpoint: &'static str, reason: &'static str) {
        self.refused
            .get_or_create(&RefusedLabels { endpoint, reason })
            .inc();
    }

    /// Sets the review-memory gauges; read when `/metrics` is scraped rather than on every
    /// change, so that no review pays for it.
    pub fn set_review_memory(&self, used: usize, limit: usize) {
        self.review_memory.set(used as i64);
        self.review_memory_limit.set(limit as i64);
    }

    pub fn reload(family: &Family<ResultLabels, Counter>, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        family.get_or_create(&ResultLabels { result }).inc();
    }
}

fn index(labels: &[&str], label: &str) -> Option<usize> {
    labels.iter().position(|l| *l == label)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_family_with_its_labels() {
        let m = Metrics::new();
        m.requests
            .get_or_create(&RequestLabels {
                endpoint: "validate",
                decision: "denied",
            })
            .inc();
        m.findings
            .get_or_create(&FindingLabels {
                rule: "gpu-startup-probe-missing".into(),
                severity: "error",
                exempt: "false",
            })
            .inc();
        m.latency
            .get_or_create(&EndpointLabels {
                endpoint: "validate",
            })
            .observe(0.001);
        Metrics::reload(&m.policy_reloads, false);
        Metrics::reload(&m.certificate_reloads, true);
        let text = m.encode();
        for expected in [
            r#"probelint_webhook_requests_total{endpoint="validate",decision="denied"} 1"#,
            r#"probelint_webhook_findings_total{rule="gpu-startup-probe-missing",severity="error",exempt="false"} 1"#,
            r#"probelint_webhook_request_duration_seconds_count{endpoint="validate"} 1"#,
            r#"probelint_webhook_policy_reloads_total{result="failure"} 1"#,
            r#"probelint_webhook_certificate_reloads_total{result="success"} 1"#,
        ] {
            assert!(text.contains(expected), "missing {expected} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn kept_handles_count_into_the_exported_series() {
        let m = Metrics::new();
        for _ in 0..3 {
            m.count_request("mutate", "patched");
            m.observe_latency("mutate", 0.002);
            m.count_finding("gpu-startup-probe-missing", "error", false);
        }
        m.count_finding("gpu-startup-probe-missing", "error", true);
        m.count_finding("my-custom-rule", "warning", false);
        // Labels outside the tables still count (straight into the family).
        m.count_request("somewhere", "else");
        m.observe_latency("somewhere", 0.5);
        let text = m.encode();
        for expected in [
            r#"probelint_webhook_requests_total{endpoint="mutate",decision="patched"} 3"#,
            r#"probelint_webhook_requests_total{endpoint="somewhere",decision="else"} 1"#,
            r#"probelint_webhook_request_duration_seconds_count{endpoint="mutate"} 3"#,
            r#"probelint_webhook_request_duration_seconds_count{endpoint="somewhere"} 1"#,
            r#"probelint_webhook_findings_total{rule="gpu-startup-probe-missing",severity="error",exempt="false"} 3"#,
            r#"probelint_webhook_findings_total{rule="gpu-startup-probe-missing",severity="error",exempt="true"} 1"#,
            r#"probelint_webhook_findings_total{rule="my-custom-rule",severity="warning",exempt="false"} 1"#,
        ] {
            assert!(text.contains(expected), "missing {expected} in\n{text}");
        }
        // Nothing is exported before it is counted.
        assert!(!text.contains(r#"decision="denied""#), "{text}");
    }
}
