//! AdmissionReview request bodies, as the apiserver sends them, for the webhook benchmarks.

use crate::corpus::samples;
use probelint_testkit::webhook::review_for;
use serde_json::{Value, json};

/// One request body and what it is.
#[derive(Debug, Clone)]
pub struct Body {
    pub name: &'static str,
    pub json: Vec<u8>,
}

/// Parses a one-document YAML sample with probelint's own loader.
pub fn object(yaml: &str) -> Value {
    let limits = probelint_yaml::load::Limits::default();
    let mut docs = probelint_yaml::load::parse_stream(yaml.as_bytes(), &limits)
        .unwrap_or_else(|e| panic!("built-in sample does not parse: {e}"));
    docs.remove(0).value
}

/// A `CREATE` AdmissionReview of `object`, as the apiserver sends it, with its own `uid`.
fn review(object: &Value, uid: &str) -> Value {
    let mut review = review_for(object);
    review["request"]["uid"] = json!(uid);
    review
}

/// The three bodies every endpoint receives in turn: a GPU Deployment with findings, a clean
/// one, and a GPU Pod that `/mutate` patches.
pub fn bodies() -> Vec<Body> {
    [
        (
            "gpu-deployment-with-findings",
            samples::GPU_DEPLOYMENT_BAD,
            "0b9c3f1e-1111-4c1a-9d7e-3c1a2b3c4d01",
        ),
        (
            "gpu-deployment-clean",
            samples::GPU_DEPLOYMENT_CLEAN,
            "0b9c3f1e-2222-4c1a-9d7e-3c1a2b3c4d02",
        ),
        (
            "gpu-pod-needs-mutation",
            samples::GPU_POD_NEEDS_MUTATION,
            "0b9c3f1e-3333-4c1a-9d7e-3c1a2b3c4d03",
        ),
    ]
    .into_iter()
    .map(|(name, yaml, uid)| Body {
        name,
        json: serde_json::to_vec(&review(&object(yaml), uid)).expect("JSON"),
    })
    .collect()
}

/// The echo server's answer: an allowed AdmissionReview for the request's uid.
pub fn echo_response(body: &[u8]) -> Result<Vec<u8>, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let uid = review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .ok_or("no request.uid")?;
    let answer = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true}
    });
    serde_json::to_vec(&answer).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_admission_reviews_and_the_echo_answers_their_uid() {
        for body in bodies() {
            let answer: Value =
                serde_json::from_slice(&echo_response(&body.json).expect("echo")).expect("JSON");
            let sent: Value = serde_json::from_slice(&body.json).expect("JSON");
            assert_eq!(answer["response"]["uid"], sent["request"]["uid"]);
            assert_eq!(answer["response"]["allowed"], true);
        }
    }
}
