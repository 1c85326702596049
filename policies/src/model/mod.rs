//! The bottom layer: what every other layer speaks in. Findings and fixes, the annotation keys,
//! probes as the apiserver reads them, the model servers probelint knows and their images'
//! entrypoints, the load-time
//! estimate, the budget arithmetic and JSON Pointers. Nothing here knows of policies, analysis,
//! rules or the engine.

pub mod annotations;
pub mod apiserver;
pub mod budget;
pub mod entrypoint;
pub(crate) mod fields;
pub mod finding;
pub(crate) mod glob;
pub mod load;
pub mod pointer;
pub mod probe;
pub mod servers;
pub(crate) mod text;
