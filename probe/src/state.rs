//! The one line a probe keeps between runs (each run is a new process), in a file under an
//! emptyDir or `/tmp`. Written to a sibling and renamed, so a probe killed mid-write leaves the
//! old line whole; a missing or unreadable file reads as "no history".

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Returns a warning to log when the file cannot be written (the decision still stands).
pub fn write(path: &Path, line: &str) -> Option<String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{line}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .err()
        .map(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
