//! The vendored test corpora under `tests/corpus/`: real-world GPU serving manifests
//! (`real/`, provenance in `real/SOURCES.md`) and other linters' own fixtures (`peers/`,
//! provenance in `peers/README.md`).

use std::path::{Path, PathBuf};

/// Where the real-world corpus lives, relative to the repository root.
pub const REAL: &str = "tests/corpus/real";
/// Where the peers' fixtures live, relative to the repository root.
pub const PEERS: &str = "tests/corpus/peers";
/// Where the published CRDs of the serving projects live, relative to the repository root.
pub const CRDS: &str = "tests/corpus/crds";

/// The real-world corpus directory. Panics, naming the path, when it is not there.
pub fn real_dir() -> PathBuf {
    let dir = crate::repo_path(REAL);
    assert!(
        dir.join("SOURCES.md").is_file(),
        "the real-world corpus is missing: expected {} with its SOURCES.md. It is part of the \
         repository (`git checkout -- {REAL}` restores it); the corpus tests cannot run without it",
        dir.display()
    );
    dir
}

/// Every manifest (`.yaml`, `.yml`, `.json`) of the real-world corpus, sorted by path.
///
/// Checked against `SOURCES.md`: every file it lists must be present, and every manifest present
/// must be listed, so a test never runs on a silently shrunken (or unvetted) corpus.
pub fn real_manifests() -> Vec<PathBuf> {
    let dir = real_dir();
    let files = manifests_under(&dir);
    let sources = std::fs::read_to_string(dir.join("SOURCES.md"))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.join("SOURCES.md").display()));
    let listed = listed_files(&sources);
    let present: Vec<String> = files.iter().map(|p| relative(&dir, p)).collect::<Vec<_>>();
    let missing: Vec<&String> = listed.iter().filter(|f| !present.contains(f)).collect();
    assert!(
        missing.is_empty(),
        "{} file(s) listed in {}/SOURCES.md are missing from the checkout, e.g. {}: restore them \
         with `git checkout -- {REAL}`",
        missing.len(),
        REAL,
        missing[0]
    );
    let unlisted: Vec<&String> = present.iter().filter(|f| !listed.contains(f)).collect();
    assert!(
        unlisted.is_empty(),
        "{} manifest(s) under {REAL} have no row in its SOURCES.md (repo, path, commit, licence), \
         e.g. {}: add their provenance or remove them",
        unlisted.len(),
        unlisted[0]
    );
    files
}

/// The vendored CRDs (`tests/corpus/crds/*.yaml`), sorted, each checked against the table of
/// `crds/README.md` both ways, as [`real_manifests`] checks the corpus against SOURCES.md.
pub fn crds() -> Vec<PathBuf> {
    let dir = crate::repo_path(CRDS);
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_else(|e| {
        panic!(
            "cannot read {}/README.md ({e}): the vendored CRDs are part of the repository \
             (`git checkout -- {CRDS}` restores them)",
            dir.display()
        )
    });
    let listed = listed_files(&readme);
    let files = manifests_under(&dir);
    let present: Vec<String> = files.iter().map(|p| relative(&dir, p)).collect();
    for file in &listed {
        assert!(
            present.contains(file),
            "{CRDS}/{file} is listed in its README.md but missing: `git checkout -- {CRDS}`"
        );
    }
    for file in &present {
        assert!(
            listed.contains(file),
            "{CRDS}/{file} has no row in {CRDS}/README.md (repository, tag, commit, licence)"
        );
    }
    files
}

/// A file of the peers' fixtures, e.g. `peer("kube-score/pod-probes-both.yaml")`.
pub fn peer(relative_path: &str) -> String {
    let path = crate::repo_path(PEERS).join(relative_path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the peer fixture {}: {e}. It is vendored in the repository \
             (`git checkout -- {PEERS}` restores it; provenance in {PEERS}/README.md)",
            path.display()
        )
    })
}

/// Every `.yaml`, `.yml` and `.json` file under `dir`, sorted.
pub fn manifests_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                stack.push(path);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `path` relative to `dir`, with `/` separators.
fn relative(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The file names in the first column of SOURCES.md's table (`| `owner__repo/file.yaml` | ...`).
fn listed_files(sources: &str) -> Vec<String> {
    sources
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(file, _)| file.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendored_crd_has_its_provenance() {
        assert!(crds().len() >= 6);
    }

    #[test]
    fn the_vendored_corpus_is_complete_and_every_file_has_its_provenance() {
        let files = real_manifests();
        assert!(files.len() >= 100, "{} files", files.len());
    }

    #[test]
    fn sources_rows_are_read_from_the_first_column() {
        let table =
            "| file | repo |\n|---|---|\n| `a__b/c.yaml` | a/b |\n| `d__e/f.yml` | d/e |\nno row\n";
        assert_eq!(listed_files(table), ["a__b/c.yaml", "d__e/f.yml"]);
    }

    #[test]
    fn the_peer_fixtures_are_there() {
        assert!(peer("kube-score/pod-probes-both.yaml").contains("kind:"));
        assert!(peer("kube-linter/readiness-port.yml").contains("kind:"));
    }
}
