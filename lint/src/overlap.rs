//! Refusing, before anything is written, to write a report over a file the run reads: `--output`
//! naming an input (directly, through a symlink or a hard link, or a file inside a directory
//! being linted), standard output redirected into one (`probelint x.yaml >> x.yaml`, as GNU
//! `cat` refuses `cat x >> x`), two reports into one file, or a report where no file can be.
//! Files are compared by device and inode, so no spelling of a path gets around it.

use crate::atomic::FileId;
use crate::error::OverwriteError;
use crate::input::{Input, display_path};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How a file is recognised: its device and inode; off Unix, its canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Id(FileId),
    Path(PathBuf),
}

fn key(path: &Path, meta: &std::fs::Metadata) -> Key {
    let id = FileId::of(meta);
    if id.is_known() {
        Key::Id(id)
    } else {
        Key::Path(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
    }
}

/// What the run is about to write to.
pub struct Writes<'a> {
    /// The option that names the outputs, for messages: `--output`, `--svg`.
    pub flag: &'static str,
    /// Every `--output FILE`.
    pub outputs: Vec<&'a Path>,
    /// Whether something (a report or `--dry-run`'s diff) goes to standard output.
    pub stdout: bool,
}

/// Checks `writes` against the files read: `inputs` and the policy file.
///
/// # Errors
///
/// A message naming the output and the file it would overwrite, or what else is wrong with the
/// output path (a directory, a missing directory).
pub fn check(
    writes: &Writes<'_>,
    inputs: &[Input],
    policy: Option<&Path>,
) -> Result<(), OverwriteError> {
    let mut targets: Vec<(String, Key)> = Vec::new();
    for output in &writes.outputs {
        let shown = display_path(output);
        match std::fs::metadata(output) {
            Ok(meta) if meta.is_dir() => {
                return Err(OverwriteError::Directory {
                    flag: writes.flag,
                    output: shown,
                });
            }
            Ok(meta) if meta.is_file() => {
                targets.push((format!("{} {shown}", writes.flag), key(output, &meta)));
            }
            // A device or a pipe (`/dev/null`, `/dev/stdout`) is written in place, not replaced.
            Ok(_) => {}
            Err(_) => {
                let parent = output
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                if !parent.is_dir() {
                    return Err(OverwriteError::NoDirectory {
                        flag: writes.flag,
                        output: shown,
                        dir: display_path(parent),
                    });
                }
                // A file that does not exist yet is no input; two reports may still name it.
                let name = output.file_name().map(PathBuf::from).unwrap_or_default();
                let dir = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
                targets.push((
                    format!("{} {shown}", writes.flag),
                    Key::Path(dir.join(name)),
                ));
            }
        }
    }
    if let Some(meta) = writes.stdout.then(stdout_file).flatten() {
        targets.push((
            "standard output".to_owned(),
            key(Path::new("/dev/stdout"), &meta),
        ));
    }
    for (i, (what, target)) in targets.iter().enumerate() {
        if let Some((other, _)) = targets[..i].iter().find(|(_, t)| t == target) {
            return Err(OverwriteError::SameReport {
                what: what.clone(),
                other: other.clone(),
            });
        }
    }
    if targets.is_empty() {
        return Ok(());
    }
    let read: HashMap<Key, String> = inputs
        .iter()
        .filter_map(|input| match input {
            Input::File(path) => Some(path.as_path()),
            Input::Stdin => None,
        })
        .chain(policy)
        .filter_map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((key(path, &meta), shown(path)))
        })
        .collect();
    for (what, target) in &targets {
        if let Some(input) = read.get(target) {
            return Err(if what == "standard output" {
                OverwriteError::StdoutIntoInput(input.clone())
            } else {
                OverwriteError::ReportOverInput {
                    what: what.clone(),
                    input: input.clone(),
                }
            });
        }
    }
    Ok(())
}

/// A path as the user would write it: relative to the current directory when under it (the
/// discovered policy file is found by an absolute path).
fn shown(path: &Path) -> String {
    let relative = std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf));
    display_path(relative.as_deref().unwrap_or(path))
}

/// Standard output's metadata when it is a regular file (a shell redirection); a terminal, a
/// pipe or `/dev/null` cannot be an input.
fn stdout_file() -> Option<std::fs::Metadata> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
        let meta = std::fs::File::from(fd).metadata().ok()?;
        meta.is_file().then_some(meta)
    }
    #[cfg(not(unix))]
    {
        None
    }
}
