//! The real pre-commit, installed from PyPI into a virtualenv, runs this repository's hooks
//! (`.pre-commit-hooks.yaml`) the way a user's `.pre-commit-config.yaml` would: through
//! `pre-commit try-repo`, on a bad GPU manifest (the hook fails and names the finding), then on
//! the fixed manifest (it passes).
//!
//! `try-repo` is given a snapshot of this working tree (tracked files plus untracked files that
//! git does not ignore, committed into a scratch repository), not the checkout itself:
//! pre-commit clones a repository at a commit, and `try-repo` on a dirty checkout leaves out
//! untracked files, so the snapshot is what makes an uncommitted hook testable. On CI's clean
//! clone the snapshot is exactly the committed tree.
//!
//! Needs Python 3 (with `venv`), git, and PyPI (`pip install pre-commit==PRE_COMMIT_VERSION`,
//! cached under the cargo target directory), and the hook runs `cargo install`. These tests are
//! part of the ecosystem suite (tier 2): `#[ignore = "e2e: ..."]`, run with `-- --ignored`;
//! there a missing Python, git or PyPI fails them with what to install. `PYTHON` names another
//! interpreter than `python3`.
//!
//! The `probelint` hook builds a release probelint on its first run. The tests make that build
//! unoptimised (`CARGO_PROFILE_RELEASE_OPT_LEVEL=0`: 1–2 minutes on 2 busy cores instead of 4)
//! and point `CARGO_TARGET_DIR` at a directory kept under the target directory, so only the
//! first run on a machine compiles the dependencies; later runs rebuild the workspace crates
//! once (every `try-repo` is a fresh clone, so their sources look new to cargo), and the second
//! `try-repo` of a test reuses that binary (about 1 s).

#![cfg(unix)]

mod common;

use common::{BIN, UNPROBED_GPU, UNPROBED_GPU_FIXED, Venv, output, text, workspace_root};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

/// The pre-commit release the tests install; bump it deliberately.
const PRE_COMMIT_VERSION: &str = "4.7.0";

/// Kept between runs: the virtualenv and the hook's cargo target directory.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("pre-commit")
}

/// A command with a predictable environment: no git state inherited from an outer git hook,
/// no user or system git configuration, a fixed identity for the scratch commits.
fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for var in [
        "GIT_DIR",
        "GIT_INDEX_FILE",
        "GIT_WORK_TREE",
        "GIT_OBJECT_DIRECTORY",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "probelint tests")
        .env("GIT_AUTHOR_EMAIL", "tests@probelint.invalid")
        .env("GIT_COMMITTER_NAME", "probelint tests")
        .env("GIT_COMMITTER_EMAIL", "tests@probelint.invalid");
    cmd
}

fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        text(&out)
    );
    text(&out)
}

/// The virtualenv's python, with pre-commit `PRE_COMMIT_VERSION` installed; created once per
/// machine (per target directory) and reused while it still reports that version.
fn pre_commit_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        Venv {
            dir: cache_dir().join(format!("venv-{PRE_COMMIT_VERSION}")),
            packages: &[&format!("pre-commit=={PRE_COMMIT_VERSION}")],
            imports: &["pre_commit"],
            pip_args: &[],
            needed_by: "the pre-commit tests",
        }
        .python()
    })
}

/// Commits this working tree (tracked and untracked-but-not-ignored files, as they are on disk)
/// into a new repository at `dest`, for `pre-commit try-repo` to clone.
fn snapshot_repository(dest: &Path) {
    let root = workspace_root();
    let listing = output(
        command("git")
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .current_dir(root),
    );
    assert!(
        listing.status.success(),
        "`git ls-files` failed in {}: the pre-commit tests need the repository's git checkout\n{}",
        root.display(),
        text(&listing)
    );
    let mut copied = 0;
    for name in listing.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).expect("UTF-8 file names");
        let from = root.join(name);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = dest.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {name}: {e}"));
        copied += 1;
    }
    assert!(
        dest.join(".pre-commit-hooks.yaml").is_file(),
        "no .pre-commit-hooks.yaml at the root"
    );
    assert!(copied > 10, "only {copied} files in the snapshot");
    git(dest, &["init", "-q"]);
    git(dest, &["add", "-A"]);
    git(
        dest,
        &[
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "-m",
            "snapshot",
        ],
    );
}

fn git(dir: &Path, args: &[&str]) {
    run_ok(
        command("git").args(args).current_dir(dir),
        &format!("git {}", args.join(" ")),
    );
}

/// A user's repository with `manifest.yaml` staged.
fn user_repository(dir: &Path, manifest: &str) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("manifest.yaml"), manifest).unwrap();
    git(dir, &["add", "manifest.yaml"]);
}

/// `pre-commit try-repo REPO HOOK --files manifest.yaml` in `user`; returns the exit code and
/// everything printed.
fn try_repo(user: &Path, repo: &Path, hook: &str, path_prefix: Option<&Path>) -> (i32, String) {
    let mut cmd = command(pre_commit_python());
    cmd.args(["-m", "pre_commit", "try-repo"])
        .arg(repo)
        .args([hook, "--files", "manifest.yaml", "--color", "never"])
        .current_dir(user)
        .env("PRE_COMMIT_HOME", user.with_extension("pre-commit-home"))
        .env("CARGO_TARGET_DIR", cache_dir().join("cargo-target"))
        // What is under test is the hook, not the optimiser: an unoptimised release build
        // takes about a quarter of the time (pre-commit passes the environment through).
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
        .env_remove("PRE_COMMIT");
    // The cargo (and rustc) running these tests builds the hook too.
    let mut path: Vec<PathBuf> = path_prefix.into_iter().map(Path::to_path_buf).collect();
    if let Some(cargo_dir) = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .and_then(|c| c.parent().map(Path::to_path_buf))
    {
        path.push(cargo_dir);
    }
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    cmd.env("PATH", std::env::join_paths(path).unwrap());
    let started = Instant::now();
    let out = output(&mut cmd);
    let printed = text(&out);
    eprintln!(
        "pre-commit try-repo … {hook}: exit {:?} after {:.1?}\n{printed}",
        out.status.code(),
        started.elapsed()
    );
    (out.status.code().unwrap_or(-1), printed)
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("precommit-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// In `tmp`: a snapshot of this repository (`probelint/`) and a user's repository (`user/`)
/// with `UNPROBED_GPU` staged as `manifest.yaml`.
fn repositories(tmp: &Path) -> (PathBuf, PathBuf) {
    let repo = tmp.join("probelint");
    let user = tmp.join("user");
    snapshot_repository(&repo);
    user_repository(&user, UNPROBED_GPU);
    (repo, user)
}

#[test]
#[ignore = "e2e: real pre-commit and cargo install; needs Python 3, git and PyPI"]
fn pre_commit_hook_builds_probelint_and_fails_then_passes() {
    pre_commit_python();
    let tmp = scratch();
    let (repo, user) = repositories(tmp.path());
    // Binaries the hook installed for earlier snapshots (one per commit) are never used again;
    // the build artifacts next to them are what keeps this run incremental.
    let _ = std::fs::remove_dir_all(cache_dir().join("cargo-target").join("pre-commit-hook"));

    let (code, printed) = try_repo(&user, &repo, "probelint", None);
    assert_eq!(
        code, 1,
        "the hook must fail on a GPU container without probes:\n{printed}"
    );
    assert!(printed.contains("- hook id: probelint"), "{printed}");
    assert!(
        printed.contains("gpu-startup-probe-missing"),
        "the finding is printed:\n{printed}"
    );
    assert!(
        printed.contains("manifest.yaml:14:9"),
        "with its location:\n{printed}"
    );

    std::fs::write(user.join("manifest.yaml"), UNPROBED_GPU_FIXED).unwrap();
    git(&user, &["add", "manifest.yaml"]);
    let (code, printed) = try_repo(&user, &repo, "probelint", None);
    assert_eq!(code, 0, "the fixed manifest passes:\n{printed}");
    assert!(printed.contains("Passed"), "{printed}");
}

#[test]
#[ignore = "e2e: real pre-commit and cargo install; needs Python 3, git and PyPI"]
fn pre_commit_system_hook_runs_probelint_from_path() {
    pre_commit_python();
    let tmp = scratch();
    let (repo, user) = repositories(tmp.path());
    let bin_dir = Path::new(BIN).parent().unwrap();

    let (code, printed) = try_repo(&user, &repo, "probelint-system", Some(bin_dir));
    assert_eq!(
        code, 1,
        "the hook must fail on a GPU container without probes:\n{printed}"
    );
    assert!(printed.contains("gpu-startup-probe-missing"), "{printed}");

    std::fs::write(user.join("manifest.yaml"), UNPROBED_GPU_FIXED).unwrap();
    let (code, printed) = try_repo(&user, &repo, "probelint-system", Some(bin_dir));
    assert_eq!(code, 0, "the fixed manifest passes:\n{printed}");
    assert!(printed.contains("Passed"), "{printed}");
}

#[test]
#[ignore = "e2e: real pre-commit and cargo install; needs Python 3, git and PyPI"]
fn pre_commit_validates_the_hooks_manifest() {
    let manifest = workspace_root().join(".pre-commit-hooks.yaml");
    let printed = run_ok(
        command(pre_commit_python())
            .args(["-m", "pre_commit", "validate-manifest"])
            .arg(&manifest),
        "pre-commit validate-manifest .pre-commit-hooks.yaml",
    );
    assert!(
        !printed.contains("WARNING"),
        "pre-commit warns about the manifest:\n{printed}"
    );
}
