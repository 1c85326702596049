//! `probelint schema`: the JSON Schema of the policy file, for editors and CI checks.

use crate::error::Error;

/// Prints the schema of `.probelint.yaml`.
///
/// # Errors
///
/// When standard output cannot be written.
pub fn run() -> Result<u8, Error> {
    let schema = probelint_policies::json_schema();
    super::print(&(serde_json::to_string_pretty(&schema)? + "\n"))?;
    Ok(0)
}
