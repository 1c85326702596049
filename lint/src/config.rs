//! The user policy: `--config FILE`, or `.probelint.yaml` found by walking up from the current
//! directory (the way `.editorconfig`, ruff and kube-linter find theirs).

use crate::error::ConfigError;
use probelint_policies::{Policy, PolicyError};
use std::path::{Path, PathBuf};

/// The names a policy file may have, in the order they are looked for.
pub const CONFIG_NAMES: &[&str] = &[".probelint.yaml", ".probelint.yml"];

/// Finds the nearest policy file at or above `start`.
pub fn discover(start: &Path) -> Option<PathBuf> {
    start.ancestors().find_map(|dir| {
        CONFIG_NAMES
            .iter()
            .map(|name| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Loads the policy: the built-in one, overridden by `path` when given.
pub fn load(path: Option<&Path>) -> Result<Policy, ConfigError> {
    let Some(path) = path else {
        return Policy::builtin().map_err(ConfigError::Builtin);
    };
    let shown = crate::input::display_path(path);
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: shown.clone(),
        error,
    })?;
    Policy::with_user_yaml(&text).map_err(|error| {
        // The YAML layer knows no file name and calls the text `<input>` in its snippet's
        // `-->` line: name the file there, so that an editor or a terminal can open it.
        let error = match error {
            PolicyError::Parse(message) => {
                let mut message = message.replace("--> <input>:", &format!("--> {shown}:"));
                let problems = schema_problems(&text);
                // The reader stops at its first problem; a file with several gets them all at
                // once, so that fixing one does not just reveal the next.
                if problems.len() > 1 {
                    message.push_str(&format!(
                        "\n{} problems in all, by the policy's schema (probelint schema):",
                        problems.len()
                    ));
                    for problem in problems {
                        message.push_str(&format!("\n  {shown}:{problem}"));
                    }
                }
                PolicyError::Parse(message)
            }
            other => other,
        };
        ConfigError::Invalid { path: shown, error }
    })
}

/// What the policy file's JSON Schema finds wrong in `text`, each as `line:column: where: what`,
/// in file order; empty when the text is not YAML (the reader's own error says where) or has
/// nothing the schema refuses.
fn schema_problems(text: &str) -> Vec<String> {
    let Ok(documents) = probelint_yaml::load::parse_stream(
        text.as_bytes(),
        &probelint_yaml::load::Limits::default(),
    ) else {
        return Vec::new();
    };
    let Some(document) = documents.first() else {
        return Vec::new();
    };
    let mut problems: Vec<(usize, usize, String)> =
        probelint_policies::policy_schema_problems(&document.value)
            .into_iter()
            .map(|(pointer, what)| {
                let at = document.locations.locate(&pointer);
                let key = match pointer.strip_prefix('/') {
                    None => "the policy".to_owned(),
                    Some(path) => path.replace('/', ".").replace("~1", "/").replace("~0", "~"),
                };
                (at.line, at.column, format!("{key}: {what}"))
            })
            .collect();
    problems.sort();
    problems.dedup();
    problems
        .into_iter()
        .map(|(line, column, what)| format!("{line}:{column}: {what}"))
        .collect()
}

/// The policy file in use: `--config FILE` when given, else the nearest `.probelint.yaml` above
/// the current directory.
pub fn path(explicit: Option<&Path>) -> Option<PathBuf> {
    match explicit {
        Some(path) => Some(path.to_path_buf()),
        None => std::env::current_dir().ok().and_then(|d| discover(&d)),
    }
}
