//! probelint's rule engine.
//!
//! Takes Kubernetes objects as untyped JSON (so that broken manifests and unknown CRDs are still
//! linted) and a [`Policy`], and returns [`Finding`]s. It knows nothing of files, HTTP or
//! terminals: the CLI adds files and spans, the webhook adds AdmissionReview and TLS.

pub mod apiserver;
pub mod cross;
pub mod custom;
pub mod engine;
mod fields;
pub mod finding;
pub mod fix;
mod glob;
pub mod load;
pub mod operators;
pub mod pointer;
pub mod policy;
pub mod probe;
pub mod reach;
pub mod rules;
pub mod servers;
pub mod simulate;
mod text;
pub mod workload;

pub use cross::ObjectFacts;
pub use engine::{
    Analysis, ObjectEvaluation, evaluate, evaluate_cross, evaluate_object, evaluate_one,
};
pub use finding::{
    Applicability, Finding, Fix, ObjectRef, Severity, Suppression, SuppressionSource,
};
pub use policy::{DEFAULT_POLICY_YAML, Policy, PolicyError};
pub use rules::{Rule, RuleMeta, registry};
