//! probelint CLI library: the pieces the `probelint` binary is built from, in the order a
//! manifest goes through them:
//!
//! `commands` (one per subcommand) → [`input`] (discover, kustomize, read within limits) →
//! [`load`] (parse, expand `List`s, objects with their places) → [`check`] (the engine's
//! findings placed in their files, then the cross-object rules) → `commands::fix` (with
//! `--fix`: plan, apply, write, check the changed files again) → [`output`] (one renderer per
//! format). [`error`] holds the errors, by kind.

pub mod atomic;
pub mod audit;
pub mod check;
pub mod commands;
pub mod config;
pub mod error;
pub mod input;
pub mod load;
pub mod output;
pub mod overlap;
pub mod report;
pub mod simulate_svg;
pub mod textfix;
pub mod yaml;

/// The paths `fuzz/checks.rs` (compiled into `tests/hostile.rs` too) and `textfix/tests.rs`
/// still use; they go when those move to `input::Source`, `commands::fix::plan` and
/// `load::objects_in`.
#[doc(hidden)]
pub mod inputs {
    pub use crate::input::Input;
}

/// See [`inputs`].
#[doc(hidden)]
pub mod lint {
    use crate::input::{Input, Origin};
    pub use crate::load::objects_in;

    /// A source in memory, named as before `input::Source`.
    pub struct Source {
        pub name: String,
        pub input: Input,
        pub bytes: Result<Vec<u8>, crate::error::ReadError>,
        pub stamp: Option<crate::atomic::FileStamp>,
    }

    /// The report of the files as read, and the plan of each file with safe fixes.
    pub fn plan_fixes(
        sources: Vec<Source>,
        policy: &probelint_policies::Policy,
        limits: &crate::yaml::Limits,
    ) -> (crate::report::Report, Vec<crate::commands::fix::FilePlan>) {
        let sources: Vec<crate::input::Source> = sources
            .into_iter()
            .map(|s| crate::input::Source {
                name: s.name,
                origin: Origin::from(&s.input),
                bytes: s.bytes,
                stamp: s.stamp,
            })
            .collect();
        let crate::commands::fix::Planned { files, plans } =
            crate::commands::fix::plan(sources, policy, limits);
        (crate::check::finish(files, policy), plans)
    }
}
