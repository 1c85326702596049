//! `probelint --fix` (engine fixes as text edits) on arbitrary manifest text. What is checked: `fuzz/checks.rs`, `yaml_fix`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::yaml_fix(data));
