//! `--kustomize`: render kustomization directories with the user's own tool, then lint the result.

use super::discover::display_path;
use super::read::{Origin, Source};
use crate::error::{KustomizeError, ReadError, UsageError};
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const KUSTOMIZATION_NAMES: &[&str] =
    &["kustomization.yaml", "kustomization.yml", "Kustomization"];

fn is_kustomization_dir(path: &Path) -> bool {
    path.is_dir() && KUSTOMIZATION_NAMES.iter().any(|n| path.join(n).is_file())
}

/// The renderers tried, in order: `kubectl kustomize DIR`, then `kustomize build DIR`.
fn render(dir: &Path) -> Result<Vec<u8>, KustomizeError> {
    let candidates: [(&str, &[&str]); 2] = [("kubectl", &["kustomize"]), ("kustomize", &["build"])];
    let mut missing = Vec::new();
    for (program, args) in candidates {
        match Command::new(program).args(args).arg(dir).output() {
            Ok(out) if out.status.success() => return Ok(out.stdout),
            Ok(out) => {
                return Err(KustomizeError::Failed {
                    command: format!("{program} {} {}", args.join(" "), display_path(dir)),
                    stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(program),
            Err(error) => return Err(KustomizeError::Spawn { program, error }),
        }
    }
    Err(KustomizeError::NoRenderer(missing))
}

/// Renders every path argument that is a kustomization directory. Returns the rendered sources
/// and the remaining paths (linted as usual). A directory that fails to render is an error for
/// that directory only; the others are still linted.
pub fn render_all(paths: &[String]) -> Result<(Vec<Source>, Vec<String>), UsageError> {
    let mut sources = Vec::new();
    let mut rest = Vec::new();
    for path in paths {
        let dir = PathBuf::from(path);
        if !is_kustomization_dir(&dir) {
            rest.push(path.clone());
            continue;
        }
        let name = format!("{} (kustomize)", display_path(&dir));
        sources.push(Source {
            name,
            bytes: render(&dir).map_err(ReadError::from),
            origin: Origin::Rendered { dir },
            stamp: None,
        });
    }
    if sources.is_empty() {
        return Err(UsageError::NoKustomization);
    }
    Ok((sources, rest))
}
