//! The YAML layer on arbitrary bytes. What is checked: `fuzz/checks.rs`, `yaml_parse`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::yaml_parse(data));
