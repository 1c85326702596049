//! What the handlers, the connections and the reloader share: the policy in force, the
//! health `/readyz` reports, the metrics and the review memory budget.

use crate::budget::Budget;
use crate::metrics::Metrics;
use crate::review::Settings;
use axum::http::StatusCode;
use probelint_policies::Policy;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// How long SIGTERM waits for in-flight reviews (each bounded by [`REQUEST_TIMEOUT`](crate::server::REQUEST_TIMEOUT)). Must stay
/// under the pod's `terminationGracePeriodSeconds` (30 by default).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of request bodies and unsent answers all reviews in flight may hold together (see
/// [`Budget`]), evaluations counted at what their shape costs ([`crate::cost::Shape::review_bytes`]). The chart's
/// memory limit is 256 MiB; the process itself takes ~20 MiB and its connections a few more.
pub const REVIEW_MEMORY_BYTES: usize = 128 * 1024 * 1024;
/// Shared by the handlers and the reloader.
pub struct AppState {
    policy: RwLock<Arc<Policy>>,
    health: Mutex<Health>,
    draining: AtomicBool,
    pub metrics: Metrics,
    pub budget: Arc<Budget>,
    /// What decides reviews beside the policy (fixed at startup).
    pub settings: Arc<Settings>,
}

/// What `/readyz` reports.
#[derive(Debug, Default)]
struct Health {
    policy_source: String,
    policy_version: String,
    policy_error: Option<String>,
    tls_error: Option<String>,
    /// When the served certificate expired, once it has.
    served_expired: Option<String>,
}

impl AppState {
    #[cfg(test)]
    pub fn new(policy: Policy) -> Self {
        Self::with_settings(policy, Settings::default())
    }

    pub fn with_settings(policy: Policy, settings: Settings) -> Self {
        AppState {
            policy: RwLock::new(Arc::new(policy)),
            health: Mutex::new(Health::default()),
            draining: AtomicBool::new(false),
            metrics: Metrics::new(),
            budget: Arc::new(Budget::new(
                REVIEW_MEMORY_BYTES,
                REVIEW_MEMORY_BYTES / crate::server::SOURCE_SHARE_DIVISOR,
            )),
            settings: Arc::new(settings),
        }
    }

    /// The policy to judge the next review by. Reviews in flight keep the one they started with.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn set_policy(&self, policy: Policy, source: String) {
        let version = policy.version.clone();
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
        let mut health = self.health();
        health.policy_source = source;
        health.policy_version = version;
        health.policy_error = None;
    }

    pub fn set_policy_error(&self, error: String) {
        self.health().policy_error = Some(error);
    }

    pub fn set_tls_error(&self, error: Option<String>) {
        self.health().tls_error = error;
    }

    pub fn set_served_certificate_expired(&self, at: Option<String>) {
        self.health().served_expired = at;
    }

    /// From SIGTERM on, `/readyz` fails, so that the Service stops sending reviews here.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `/readyz`: ready once the TLS material and a policy are loaded (both happen before the
    /// servers start) and until SIGTERM. A failed reload keeps serving the last good
    /// configuration, so it stays ready, and says so in the body.
    pub fn readiness(&self) -> (StatusCode, String) {
        if self.draining.load(Ordering::SeqCst) {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting down\n".to_owned(),
            );
        }
        let health = self.health();
        let mut text = String::from("ready\n");
        text.push_str(&format!(
            "policy: {} (policyVersion {})\n",
            health.policy_source, health.policy_version
        ));
        if let Some(error) = &health.policy_error {
            text.push_str(&format!(
                "policy reload failed, still serving the last good policy: {error}\n"
            ));
        }
        match &health.tls_error {
            None => text.push_str("tls: certificate loaded\n"),
            Some(error) => text.push_str(&format!(
                "tls: certificate reload failed, still serving the previous certificate: {error}\n"
            )),
        }
        if let Some(at) = &health.served_expired {
            text.push_str(&format!(
                "tls: THE SERVED CERTIFICATE EXPIRED at {at}: the apiserver refuses every \
                 handshake until a valid certificate is written\n"
            ));
        }
        (StatusCode::OK, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_reports_a_failed_policy_reload_and_draining() {
        let state = AppState::new(Policy::builtin().expect("built-in policy"));
        state.set_policy(
            Policy::builtin().expect("built-in policy"),
            "built-in".into(),
        );
        let (code, text) = state.readiness();
        assert_eq!(code, StatusCode::OK);
        assert!(
            text.starts_with("ready\npolicy: built-in (policyVersion "),
            "{text}"
        );
        state.set_policy_error("p.yaml: rules.nope: unknown rule".into());
        let (code, text) = state.readiness();
        assert_eq!(code, StatusCode::OK);
        assert!(
            text.contains("policy reload failed, still serving the last good policy: p.yaml"),
            "{text}"
        );
        state.start_draining();
        assert_eq!(state.readiness().0, StatusCode::SERVICE_UNAVAILABLE);
    }
}
