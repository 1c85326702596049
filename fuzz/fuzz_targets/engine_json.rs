//! The rule engine on arbitrary JSON. What is checked: `fuzz/checks.rs`, `engine_json`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::engine_json(data));
