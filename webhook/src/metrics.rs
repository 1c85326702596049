//! Prometheus metrics, served as OpenMetrics text on the plain-HTTP metrics port.
//!
//! What an operator needs to trust an admission webhook: how many reviews it answered and with
//! what decision (a spike of `denied` after a policy change is the first thing to look at), which
//! rules fire, how long a review takes (the apiserver gives up after `timeoutSeconds`), and
//! whether certificate and policy reloads succeed (a failing reload is invisible otherwise until
//! the old certificate expires).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `validate`, `validate/warn` or `mutate`.
    pub endpoint: &'static str,
    /// See [`crate::review::Decision::as_str`], plus `invalid` (HTTP 4xx) and `error` (HTTP 5xx).
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
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success` or `failure`.
    pub result: &'static str,
}

type HistogramFamily = Family<EndpointLabels, Histogram, fn() -> Histogram>;

/// Every metric the webhook exports, registered once at startup.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub findings: Family<FindingLabels, Counter>,
    pub latency: HistogramFamily,
    pub policy_reloads: Family<ResultLabels, Counter>,
    pub certificate_reloads: Family<ResultLabels, Counter>,
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
        Metrics {
            registry,
            requests,
            findings,
            latency,
            policy_reloads,
            certificate_reloads,
        }
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

    pub fn reload(family: &Family<ResultLabels, Counter>, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        family.get_or_create(&ResultLabels { result }).inc();
    }
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
}
