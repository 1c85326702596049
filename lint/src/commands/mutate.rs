//! `probelint mutate FILE|-`: what the mutating webhook would do to each object, for review.

use super::ConfigArgs;
use crate::error::Error;
use probelint_policies::ObjectRef;
use probelint_policies::{mutate, mutation_patch};
use probelint_yaml::load::Limits;
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A manifest file, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Print the JSON Patch per object instead of the mutated manifests.
    #[arg(long)]
    pub patch: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Runs the subcommand. Exit code 0 on success, whether or not anything changed.
///
/// # Errors
///
/// A policy that cannot be used, a file that cannot be read or parsed, and standard output
/// that cannot be written.
pub fn run(args: &Args) -> Result<u8, Error> {
    let policy = args.config.load()?;
    let limits = Limits::default();
    let (_, objects) = crate::load::one_manifest(&args.file, &limits)?;

    let mut out = String::new();
    let mut patches = Vec::new();
    for object in objects {
        let mutation = mutate(&object, &policy);
        // Exactly the patch the webhook's /mutate returns.
        let ops = mutation_patch(object.clone(), mutation.patch, &mutation.applied, &policy)
            .map_err(|e| Error::FixDoesNotApply(e.to_string()))?
            .patch
            .0;
        if args.patch {
            patches.push(json!({
                "object": ObjectRef::from_object(&object),
                "patch": ops,
            }));
            continue;
        }
        let mut mutated = object;
        json_patch::patch(&mut mutated, &ops).map_err(|e| Error::FixDoesNotApply(e.to_string()))?;
        let yaml = serde_saphyr::to_string(&mutated).map_err(|e| Error::Yaml(e.to_string()))?;
        out.push_str("---\n");
        out.push_str(&yaml);
        if !yaml.ends_with('\n') {
            out.push('\n');
        }
    }
    if args.patch {
        out = serde_json::to_string_pretty(&patches)? + "\n";
    }
    super::print(&out)?;
    Ok(0)
}
