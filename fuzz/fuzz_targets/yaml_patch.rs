//! `probelint_yaml::patch::apply` with arbitrary operations on arbitrary text. What is checked: `fuzz/checks.rs`, `yaml_patch`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::yaml_patch(data));
