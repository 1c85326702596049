//! The analysis layer: what the engine knows of each object before any rule runs. The pod specs
//! and containers inside each kind ([`object`], found where the kind's [`layout`] says), with
//! their probes, ports, accelerators, server and load time parsed once; the few facts of each
//! object that cross-object rules need ([`facts`]); and the context rules are handed
//! ([`context`]).

pub mod context;
pub mod facts;
pub mod layout;
pub mod object;
pub mod selector;
pub mod serving;
