//! Replays every saved crash input of the `admission_review` fuzz target
//! (`tests/data/fuzz-regressions/`) and every one of its seeds (`fuzz/seeds/admission_review/`)
//! through the check the target runs (`fuzz/webhook_checks.rs`), so CI keeps them fixed
//! without libFuzzer. (`hostile.rs` sends the same inputs to the running server.)

#[path = "../../fuzz/webhook_checks.rs"]
mod checks;

use std::path::Path;

#[test]
fn fuzz_regressions_stay_fixed() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut replayed = 0;
    let mut failed = Vec::new();
    for dir in [
        manifest.join("tests/data/fuzz-regressions"),
        manifest.join("../fuzz/seeds/admission_review"),
    ] {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                continue;
            }
            let data = std::fs::read(&path).expect("read");
            replayed += 1;
            if std::panic::catch_unwind(|| checks::admission_review(&data)).is_err() {
                failed.push(path.display().to_string());
            }
        }
    }
    assert!(replayed >= 10, "only {replayed} inputs found");
    assert!(failed.is_empty(), "invariants broken by {failed:#?}");
}
