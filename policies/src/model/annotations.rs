//! Every `probelint.io/*` annotation the engine reads or writes, in one place: users put these
//! keys in manifests, so each is part of the interface and none may change.

/// Object-level annotation listing exempted rule ids (comma-separated, or `all`).
pub const IGNORE_ANNOTATION: &str = "probelint.io/ignore";
/// Prefix of the per-container form: `probelint.io/ignore.<container-name>`.
pub const IGNORE_CONTAINER_PREFIX: &str = "probelint.io/ignore.";
/// Why the exemption exists.
pub const IGNORE_REASON_ANNOTATION: &str = "probelint.io/ignore-reason";
/// Annotation declaring the worst-case model load time, in seconds.
pub const LOAD_SECONDS_ANNOTATION: &str = "probelint.io/model-load-seconds";
/// Annotation the webhook writes on a mutated object: `rule:container` pairs, comma-separated.
pub const MUTATED_ANNOTATION: &str = "probelint.io/mutated";
/// What a container does at pod start, where the manifest does not show it: `server` (it serves
/// a model loaded at start), `batch` or `interactive` (it serves no model traffic; honoured only
/// where the policy honours annotation exemptions, since it silences findings).
pub const ROLE_ANNOTATION: &str = "probelint.io/role";
