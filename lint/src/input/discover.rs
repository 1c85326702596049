//! Which files to lint: paths from the command line, directories walked the way `git` sees them.

use crate::error::{ReadError, UsageError};
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::path::{Path, PathBuf};

/// One thing to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Standard input (`-`).
    Stdin,
    File(PathBuf),
}

impl Input {
    /// How the input is named in output: the path as given (forward slashes), or `-`.
    pub fn display_name(&self) -> String {
        match self {
            Input::Stdin => "-".to_owned(),
            Input::File(path) => display_path(path),
        }
    }
}

/// A path as users expect to read it: no leading `./`, forward slashes.
pub fn display_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    match text.strip_prefix("./") {
        Some(rest) if !rest.is_empty() => rest.to_owned(),
        _ => text,
    }
}

/// What discovery found: inputs to read, and paths that could not be used (with why).
#[derive(Debug, Default)]
pub struct Discovery {
    pub inputs: Vec<Input>,
    pub errors: Vec<(String, ReadError)>,
}

/// Whether a file name is a manifest by extension.
pub fn is_manifest_name(path: &Path) -> bool {
    matches!(
        path.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("yaml" | "yml" | "json")
    )
}

/// Builds the `--exclude` matcher. Each glob matches against the path as displayed and against
/// every trailing part of it, so `--exclude 'charts/**'` and `--exclude '*.generated.yaml'` both
/// work as users expect.
pub fn exclude_set(globs: &[String]) -> Result<GlobSet, UsageError> {
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let g = Glob::new(glob).map_err(|error| UsageError::Exclude {
            glob: glob.clone(),
            error,
        })?;
        builder.add(g);
    }
    builder.build().map_err(UsageError::Excludes)
}

fn excluded(set: &GlobSet, path: &Path) -> bool {
    if set.is_empty() {
        return false;
    }
    let shown = display_path(path);
    if set.is_match(&shown) {
        return true;
    }
    let mut rest = shown.as_str();
    while let Some((_, tail)) = rest.split_once('/') {
        if set.is_match(tail) {
            return true;
        }
        rest = tail;
    }
    false
}

/// Expands command-line paths. Files named explicitly are read whatever their extension (the
/// user asked for them); directories are walked recursively for `.yaml`/`.yml`/`.json`,
/// honouring `.gitignore`, `.ignore` and `--exclude`. Symlink loops and unreadable directories
/// become errors, never a hang.
pub fn discover(paths: &[String], excludes: &GlobSet) -> Discovery {
    let mut found = Discovery::default();
    for arg in paths {
        if arg == "-" {
            if !found.inputs.contains(&Input::Stdin) {
                found.inputs.push(Input::Stdin);
            }
            continue;
        }
        let path = PathBuf::from(arg);
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) => {
                found.errors.push((display_path(&path), ReadError::Path(e)));
                continue;
            }
        };
        if !meta.is_dir() {
            if !excluded(excludes, &path) {
                found.inputs.push(Input::File(path));
            }
            continue;
        }
        // Links into the kernel's file systems are not followed (`/sys` alone never ends):
        // each is reported where the walk met it.
        let kernel_links = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = kernel_links.clone();
        let walker = ignore::WalkBuilder::new(&path)
            .hidden(false)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(true)
            .require_git(false)
            .follow_links(true)
            .filter_entry(move |e| {
                if e.file_name() == ".git" {
                    return false;
                }
                match e.path_is_symlink().then(|| kernel_dir(e.path())).flatten() {
                    Some(dir) => {
                        seen.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((display_path(e.path()), dir));
                        false
                    }
                    None => true,
                }
            })
            .sort_by_file_path(|a, b| a.cmp(b))
            .build();
        for entry in walker {
            match entry {
                Ok(entry) => {
                    let p = entry.path();
                    if entry.file_type().is_some_and(|t| t.is_file())
                        && is_manifest_name(p)
                        && !excluded(excludes, p)
                    {
                        found.inputs.push(Input::File(p.to_path_buf()));
                    }
                }
                Err(e) => {
                    let (where_, why) = describe_walk_error(&e, &path);
                    found.errors.push((where_, why));
                }
            }
        }
        let links = std::mem::take(
            &mut *kernel_links
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        found.errors.extend(
            links
                .into_iter()
                .map(|(name, dir)| (name, ReadError::KernelLink(dir))),
        );
    }
    found
}

/// The kernel file system (`/proc`, `/sys`, `/dev`) a link resolves into, if any.
fn kernel_dir(link: &Path) -> Option<&'static str> {
    let target = std::fs::canonicalize(link).ok()?;
    ["/proc", "/sys", "/dev"]
        .into_iter()
        .find(|dir| target.starts_with(dir))
}

fn describe_walk_error(error: &ignore::Error, root: &Path) -> (String, ReadError) {
    match error {
        ignore::Error::WithPath { path, err } => {
            (display_path(path), ReadError::Walk(err.to_string()))
        }
        ignore::Error::WithDepth { err, .. } => describe_walk_error(err, root),
        ignore::Error::Loop { child, .. } => (display_path(child), ReadError::Loop),
        other => (display_path(root), ReadError::Walk(other.to_string())),
    }
}

/// An I/O error in words a user can act on.
pub fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => e.to_string(),
    }
}

/// The chart of a file that sits in a Helm chart's `templates/` directory: the directory
/// holding `Chart.yaml`, if it is in one.
pub fn helm_chart_of(path: &Path) -> Option<&Path> {
    path.ancestors().skip(1).find_map(|dir| {
        let chart = dir.parent()?;
        (dir.file_name().is_some_and(|n| n == "templates") && chart.join("Chart.yaml").is_file())
            .then_some(chart)
    })
}
