//! The binaries the suite runs: the reference server and the webhook, from this workspace's
//! target directory (built by `cargo test --workspace`, or `cargo build -p ...`).

use std::path::PathBuf;

/// `target/<profile>/NAME` for the profile this test binary was built with.
pub fn workspace_binary(name: &str) -> PathBuf {
    // A test executable lives in target/<profile>/deps/; binaries one level up.
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .unwrap_or_default();
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build -p probelint-reference -p probelint-webhook` (or \
         `cargo test --workspace`, which builds them)",
        path.display()
    );
    path
}

/// The reference server binary.
pub fn reference_server() -> PathBuf {
    workspace_binary("reference-server")
}

/// The admission webhook binary.
pub fn webhook() -> PathBuf {
    workspace_binary("probelint-webhook")
}
