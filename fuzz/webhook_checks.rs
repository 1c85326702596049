//! What the `admission_review` fuzz target checks, shared with the webhook's test that replays
//! its saved crash inputs and seeds (`webhook/tests/fuzz.rs`). A file of its own beside
//! `checks.rs` because that one is compiled into the CLI's tests too, which must not depend on
//! the webhook.

use base64::Engine as _;
use probelint_policies::Policy;
use probelint_webhook::admission::API_VERSION;
use probelint_webhook::review::{Mode, admit};
use serde_json::Value;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(|| Policy::builtin().expect("built-in policy"));

/// The webhook's AdmissionReview handler on an arbitrary body, in all three modes: it never
/// panics; a refusal says why; an answer is valid JSON that echoes the request's uid; only
/// `/mutate` patches, and its base64 patch decodes and applies to the request's object.
pub fn admission_review(data: &[u8]) {
    for mode in [Mode::Validate, Mode::Warn, Mode::Mutate] {
        let outcome = match admit(data, mode, &POLICY) {
            Ok(outcome) => outcome,
            Err(error) => {
                assert!(!error.to_string().is_empty());
                return;
            }
        };
        let answer: Value =
            serde_json::from_slice(&outcome.review.to_json()).expect("the answer is JSON");
        assert_eq!(answer["apiVersion"], API_VERSION);
        // The webhook reads only the fields it needs; a body it answered but that is not a
        // plain JSON `Value` (a duplicate key) leaves nothing more to compare.
        let Ok(request) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        assert_eq!(answer["response"]["uid"], request["request"]["uid"]);
        if mode != Mode::Mutate {
            assert!(answer["response"].get("patch").is_none());
            continue;
        }
        let Some(patch) = answer["response"]["patch"].as_str() else {
            continue;
        };
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("the patch is base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON Patch");
        let mut object = request["request"]["object"].clone();
        if let Err(e) = json_patch::patch(&mut object, &patch.0) {
            panic!("the webhook's patch does not apply to the request's object: {e}\n{patch:#?}");
        }
    }
}
