//! `probelint mutate FILE|-`: what the mutating webhook would do to each object, for review.

use crate::input::{Input, read_input};
use crate::yaml::Limits;
use probelint_policies::ObjectRef;
use probelint_policies::fix::{mutate, mutation_patch};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Runs the subcommand. Exit code 0 on success, whether or not anything changed.
pub fn run(file: &str, patch_only: bool, config: Option<&Path>) -> Result<u8, String> {
    let policy = crate::config::load_or_discover(config)?;
    let limits = Limits::default();
    let input = if file == "-" {
        Input::Stdin
    } else {
        Input::File(PathBuf::from(file))
    };
    let source = read_input(&input, &limits);
    let bytes = source.bytes.map_err(|e| format!("{}: {e}", source.name))?;
    let objects =
        crate::load::objects(&bytes, &limits).map_err(|e| format!("{}: {e}", source.name))?;

    let mut out = String::new();
    let mut patches = Vec::new();
    for object in objects {
        let mutation = mutate(&object, &policy);
        // Exactly the patch the webhook's /mutate returns.
        let ops = mutation_patch(object.clone(), mutation.patch, &mutation.applied, &policy)
            .map_err(|e| format!("internal error: a fix does not apply: {e}"))?
            .patch
            .0;
        if patch_only {
            patches.push(json!({
                "object": ObjectRef::from_object(&object),
                "patch": ops,
            }));
            continue;
        }
        let mut mutated = object;
        json_patch::patch(&mut mutated, &ops)
            .map_err(|e| format!("internal error: a fix does not apply: {e}"))?;
        let yaml =
            serde_saphyr::to_string(&mutated).map_err(|e| format!("cannot write YAML: {e}"))?;
        out.push_str("---\n");
        out.push_str(&yaml);
        if !yaml.ends_with('\n') {
            out.push('\n');
        }
    }
    if patch_only {
        out = serde_json::to_string_pretty(&patches).map_err(|e| e.to_string())? + "\n";
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(|e| format!("cannot write output: {e}"))?;
    Ok(0)
}
