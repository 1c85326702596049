//! probelint's rule engine.
//!
//! Takes Kubernetes objects as untyped JSON (so that broken manifests and unknown CRDs are still
//! linted) and a [`Policy`], and returns [`Finding`]s. It knows nothing of files, HTTP or
//! terminals: the CLI adds files and spans, the webhook adds AdmissionReview and TLS.
//!
//! Inside, the modules are layers that import only downwards:
//! `engine` / `mutate` / `catalog` → `rules` → `fix` → `analysis` → `policy` → `model`.
//! `reach` (what of a workload reaches its Pods) and `simulate` (the kubelet model) sit beside
//! the engine. What other crates use is re-exported here; the layers themselves are private.

pub mod admission;
mod analysis;
mod catalog;
mod engine;
pub mod export;
mod fix;
mod model;
mod mutate;
mod policy;
pub mod reach;
mod rules;
pub mod simulate;

pub use analysis::context::{Analysis, ContainerContext};
pub use analysis::facts::ObjectFacts;
pub use analysis::object::{Container, PodSpec, Workload};
pub use analysis::selector;
pub use catalog::{find, ids, json_schema, load_policy, policy_schema_problems, registry};
pub use engine::{ObjectEvaluation, evaluate, evaluate_cross, evaluate_object, evaluate_one};
pub use fix::probes::STARTUP_PERIOD_SECONDS;
pub use model::annotations::MUTATED_ANNOTATION;
pub use model::budget::required_startup_seconds;
pub use model::finding::{
    Applicability, Finding, Fix, ObjectRef, Severity, Suppression, SuppressionSource,
};
pub use model::load;
pub use model::probe::ProbeKind;
pub use model::servers::{KNOWN_SERVERS, KnownServer};
pub use mutate::{
    AppliedFix, Mutation, MutationPatch, annotation_ops, merge_fixes, mutate, mutation_patch,
};
pub use policy::error::PolicyError;
pub use policy::{DEFAULT_POLICY_YAML, KubernetesVersion, Policy};
pub use rules::duplicate_key::finding as duplicate_key_finding;
pub use rules::rule::{Check, FixMeta, Report, Rule, RuleMeta};
