//! The webhook's AdmissionReview handler on arbitrary bodies. What is checked:
//! `fuzz/webhook_checks.rs`, `admission_review`.
#![no_main]

#[path = "../webhook_checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::admission_review(data));
