//! The treatment: a manifest as the real `probelint-webhook` mutates it, over HTTPS
//! (`probelint_testkit::webhook` starts the binary and posts to it).

use base64::Engine;
use probelint_testkit::webhook::{Webhook, review_for};
use serde_json::Value;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Sends `object` to `/mutate` as a CREATE AdmissionReview and returns the mutated object.
pub fn mutate(webhook: &Webhook, object: &Value) -> Result<Value, Error> {
    let body = serde_json::to_vec(&review_for(object))?;
    let reply = webhook.post("/mutate", &body)?;
    if reply.status != 200 {
        return Err(format!("webhook answered {}: {}", reply.status, reply.text()).into());
    }
    let response = reply.json();
    let mut mutated = object.clone();
    if let Some(patch) = response.pointer("/response/patch").and_then(Value::as_str) {
        let bytes = base64::engine::general_purpose::STANDARD.decode(patch)?;
        let patch: json_patch::Patch = serde_json::from_slice(&bytes)?;
        json_patch::patch(&mut mutated, &patch.0)?;
    }
    Ok(mutated)
}
