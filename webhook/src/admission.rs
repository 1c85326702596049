//! The `admission.k8s.io/v1` wire types: the request as the webhook reads it, the response and
//! the review it sends back. The methods carry kube-core's names (`Response::from(&request)`,
//! `deny`, `with_patch`, `into_review`), so the flow in `review.rs` reads like kube-rs's
//! admission controller example, and going back to kube-core touches this file only.
//!
//! Why not kube-core's own types:
//! - kube-core serialises `AdmissionResponse.patch` (a `Vec<u8>`) as an array of numbers, where
//!   the apiserver expects the base64 string the API documents (kube-rs issue #1781).
//! - Its `AdmissionReview` reads `apiVersion` and `kind` through `#[serde(flatten)]`, which makes
//!   serde buffer the whole body, and its object comes as a `DynamicObject` that must be turned
//!   back into the `serde_json::Value` the engine takes. What that cost is measured in
//!   `bench/profile-notes.md` ("Webhook").
//!
//! Requests are read once, straight into [`Request`]: the handful of fields the webhook uses,
//! with the object as a JSON map.

use base64::Engine as _;
use json_patch::Patch;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The only AdmissionReview version we speak (the webhook configuration's
/// `admissionReviewVersions: ["v1"]`).
pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

/// Why a body is not a review we can answer. Answered with HTTP 400 and this text (not with an
/// `allowed: false` review: without a readable uid the apiserver would reject that too, and the
/// webhook's failurePolicy is what should decide): the apiserver logs it, and a human with curl
/// reads it.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not a valid {API_VERSION} AdmissionReview: {0}")]
    Json(#[source] serde_json::Error),
    #[error(
        "unsupported review type {api_version:?} {kind:?}: probelint-webhook answers \
         {API_VERSION} {KIND} only; set admissionReviewVersions: [\"v1\"] in the webhook configuration"
    )]
    Type { api_version: String, kind: String },
    #[error(
        "the AdmissionReview has no `request`: the apiserver sends \
         {{\"apiVersion\": \"{API_VERSION}\", \"kind\": \"{KIND}\", \"request\": {{\"uid\": ..., \"object\": ...}}}}"
    )]
    MissingRequest,
}

/// The fields of an `admission.k8s.io/v1` AdmissionReview the webhook reads. Any other field
/// (`response`, unknown ones) is skipped without being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a> {
    #[serde(borrow)]
    api_version: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    request: Option<Request<'a>>,
}

/// The `request` of an AdmissionReview, as much of it as the webhook uses. The fields the API
/// requires are required here too (a review without `uid`, `kind`, `resource` or `operation` is
/// refused with a message naming the field); of `userInfo` only the username is read;
/// `options`, `requestKind` and the rest are skipped. Strings that are only looked at borrow
/// from the body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    pub uid: String,
    #[serde(borrow)]
    pub kind: GroupVersionKind<'a>,
    /// Not used by any decision; read so that a review without it is refused.
    #[serde(borrow)]
    pub resource: GroupVersionResource<'a>,
    #[serde(default, borrow)]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    /// Always a JSON object when present: anything else is refused while parsing.
    #[serde(default)]
    pub object: Option<Map<String, Value>>,
    #[serde(default)]
    pub old_object: Option<Map<String, Value>>,
    #[serde(default)]
    pub dry_run: bool,
    /// Who sent the request, as the apiserver authenticated it: the one word about who created
    /// an object that its author cannot write (`review::Controllers`).
    #[serde(default, deserialize_with = "lenient_user_info")]
    pub user_info: UserInfo,
}

/// A `userInfo` that is not an object with a string username is read as no user: such a
/// request is no controller's, and is judged as anyone's (an apiserver always sends one).
fn lenient_user_info<'de, D: serde::Deserializer<'de>>(d: D) -> Result<UserInfo, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Info(UserInfo),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Either::deserialize(d)? {
        Either::Info(info) => info,
        Either::Other(_) => UserInfo::default(),
    })
}

/// `request.userInfo`, the part the webhook reads.
#[derive(Debug, Default, Deserialize)]
pub struct UserInfo {
    /// `system:serviceaccount:<namespace>:<name>` for a service account; empty when the review
    /// does not say (it always does from an apiserver).
    #[serde(default)]
    pub username: String,
}

/// `request.kind`, e.g. `{"group": "apps", "version": "v1", "kind": "Deployment"}`.
#[derive(Debug, Deserialize)]
pub struct GroupVersionKind<'a> {
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// `request.resource`, e.g. `{"group": "apps", "version": "v1", "resource": "deployments"}`:
/// required by the API (and by kube-core before us), so a review without it is still refused.
#[derive(Debug, Deserialize)]
pub struct GroupVersionResource<'a> {
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    #[serde(borrow)]
    pub resource: Cow<'a, str>,
}

/// `request.operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Parses a request body: one pass, straight into what the webhook uses.
pub fn parse(body: &[u8]) -> Result<Request<'_>, ReviewError> {
    let review: ReviewIn<'_> = serde_json::from_slice(body).map_err(ReviewError::Json)?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(ReviewError::Type {
            api_version: review.api_version.into_owned(),
            kind: review.kind.into_owned(),
        });
    }
    review.request.ok_or(ReviewError::MissingRequest)
}

/// The review we send back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: Response,
}

/// `AdmissionResponse` as the API documents it (`patch` is base64 text).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// The `metav1.Status` of a denial: the apiserver answers the client with `code` and shows
/// `message` after `admission webhook "..." denied the request: `.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub status: &'static str,
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl From<&Request<'_>> for Response {
    /// An allowing response that echoes the request's uid, as the apiserver requires.
    fn from(request: &Request<'_>) -> Self {
        Response {
            uid: request.uid.clone(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
        }
    }
}

impl Response {
    /// Refuses the request with `status`.
    pub fn deny(mut self, status: Status) -> Self {
        self.allowed = false;
        self.status = Some(status);
        self
    }

    /// Attaches a JSON Patch the way the API documents it: base64 of the patch's JSON text.
    pub fn with_patch(mut self, patch: &Patch) -> Self {
        let json = serde_json::to_vec(patch).unwrap_or_default();
        self.patch = Some(base64::engine::general_purpose::STANDARD.encode(json));
        self.patch_type = Some("JSONPatch");
        self
    }

    /// The review that carries this response.
    pub fn into_review(self) -> ReviewOut {
        ReviewOut {
            api_version: API_VERSION,
            kind: KIND,
            response: self,
        }
    }
}

impl ReviewOut {
    pub fn to_json(&self) -> Vec<u8> {
        // Sized up front (the text plus room for escapes), so that the buffer is not regrown
        // and copied on the way.
        let r = &self.response;
        let text = r.uid.len()
            + r.patch.as_ref().map_or(0, String::len)
            + r.status.as_ref().map_or(0, |s| s.message.len() + 64)
            + r.warnings.iter().map(|w| w.len() + 3).sum::<usize>()
            + r.audit_annotations
                .iter()
                .map(|(k, v)| k.len() + v.len() + 6)
                .sum::<usize>();
        let mut json = Vec::with_capacity(192 + text + text / 8);
        // Plain structs of strings, bools and maps with string keys: serialisation cannot fail.
        match serde_json::to_writer(&mut json, self) {
            Ok(()) => json,
            Err(_) => Vec::new(),
        }
    }
}

impl Status {
    /// A denial: HTTP 403, `Forbidden`.
    pub fn forbidden(message: String) -> Self {
        Status {
            status: "Failure",
            code: 403,
            reason: "Forbidden",
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{fixture, fixture_json};
    use serde_json::json;

    /// The parse error for the `allow-clean-gpu-pod` review after `edit`.
    fn refused(edit: impl FnOnce(&mut Value)) -> String {
        let mut review = fixture_json("allow-clean-gpu-pod");
        edit(&mut review);
        let body = serde_json::to_vec(&review).expect("json");
        parse(&body).expect_err("refused").to_string()
    }

    #[test]
    fn required_request_fields_are_named_when_missing_or_mistyped() {
        for (field, value, expect) in [
            ("uid", None, "missing field `uid`"),
            ("kind", None, "missing field `kind`"),
            ("resource", None, "missing field `resource`"),
            ("operation", None, "missing field `operation`"),
            ("operation", Some(json!("PATCH")), "unknown variant `PATCH`"),
            (
                "dryRun",
                Some(json!("yes")),
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                "name",
                Some(json!(null)),
                "invalid type: null, expected a string",
            ),
        ] {
            let err = refused(|review| {
                let request = review["request"].as_object_mut().expect("request");
                match value {
                    Some(value) => request.insert(field.into(), value),
                    None => request.remove(field),
                };
            });
            assert!(err.contains(expect), "{field}: {err}");
        }
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        let err = |body: &str| parse(body.as_bytes()).expect_err("must fail").to_string();
        assert!(err("{not json").contains("not a valid admission.k8s.io/v1 AdmissionReview"));
        let missing = err(r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#);
        assert!(missing.contains("has no `request`"), "{missing}");
        let v1beta1 = err(
            r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}"#,
        );
        assert!(v1beta1.contains("admissionReviewVersions"), "{v1beta1}");
        let no_uid = err(
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#,
        );
        assert!(no_uid.contains("uid"), "{no_uid}");
    }

    #[test]
    fn patch_is_a_base64_string_with_patch_type() {
        let body = fixture("allow-clean-gpu-pod");
        let request = parse(&body).expect("parses");
        let patch: Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}
        ]))
        .expect("patch");
        let review = Response::from(&request).with_patch(&patch).into_review();
        // base64 of [{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]
        assert_eq!(
            String::from_utf8(review.to_json()).expect("utf-8"),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01","allowed":true,"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7ImEiOiJiIn19XQ==","patchType":"JSONPatch"}}"#
        );
    }

    #[test]
    fn a_denial_carries_a_forbidden_status() {
        let body = fixture("allow-clean-gpu-pod");
        let request = parse(&body).expect("parses");
        let review = Response::from(&request)
            .deny(Status::forbidden("no".into()))
            .into_review();
        assert_eq!(
            String::from_utf8(review.to_json()).expect("utf-8"),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"7f0b2b3e-5c1a-4a59-9d0e-4f2f6f1c1a01","allowed":false,"status":{"status":"Failure","code":403,"reason":"Forbidden","message":"no"}}}"#
        );
    }
}
