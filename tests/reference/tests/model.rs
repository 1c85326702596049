//! The model file: deterministic generation, the forward pass against the recorded output, and
//! the smoke comparison catching corrupted or wrong weights.

use probelint_reference::kernel::Mlp;
use probelint_reference::kernel::cpu::CpuKernel;
use probelint_reference::model::{self, Expected, ModelFile};
use std::path::Path;

const PARAMS: u64 = 20_000;

fn cpu_output(weights: &Path, input: &[f32]) -> Vec<f32> {
    let bytes = std::fs::read(weights).expect("read weights");
    let file = ModelFile::parse(&bytes).expect("parse");
    let mut kernel = CpuKernel::new();
    let mlp = Mlp::upload(&mut kernel, &file).expect("upload");
    mlp.forward(&mut kernel, input).expect("forward")
}

#[test]
fn make_model_is_deterministic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.safetensors");
    let b = dir.path().join("sub/b.safetensors");
    let c = dir.path().join("c.safetensors");
    let ea = model::make_model(PARAMS, 7, 4, 16, &a).expect("make a");
    let eb = model::make_model(PARAMS, 7, 4, 16, &b).expect("make b");
    model::make_model(PARAMS, 8, 4, 16, &c).expect("make c");
    let read = |p: &Path| std::fs::read(p).expect("read");
    assert_eq!(read(&a), read(&b), "same seed, same bytes");
    assert_eq!(
        read(&model::expected_path(&a)),
        read(&model::expected_path(&b)),
        "same seed, same expected output"
    );
    assert_eq!(ea.output_checksum, eb.output_checksum);
    assert_ne!(read(&a), read(&c), "another seed, other weights");
    assert!(ea.params <= PARAMS);
    // Header plus data, and the data is exactly the parameters as f32.
    let len = read(&a).len() as u64;
    assert!(len > ea.architecture.weight_bytes() && len < ea.architecture.weight_bytes() + 4096);
}

#[test]
fn forward_pass_matches_recorded_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.safetensors");
    model::make_model(PARAMS, 1, 4, 16, &path).expect("make");
    let expected = Expected::read(&model::expected_path(&path)).expect("expected");
    assert_eq!(expected.output.len(), 16);
    // The recorded output is not trivial: a broken generator writing zeros would pass otherwise.
    assert!(
        expected.output.iter().any(|v| v.abs() > 1e-2),
        "{:?}",
        expected.output
    );

    let output = cpu_output(&path, &expected.input);
    let cmp = expected.compare(&output);
    assert!(cmp.ok, "max abs error {}", cmp.max_abs_error);
    assert!(cmp.max_abs_error < 1e-4);

    // Any input, not just the recorded one: the f32 kernel agrees with the f64 reference.
    let other: Vec<f32> = (0..expected.input.len())
        .map(|i| (i as f32 * 0.7).sin())
        .collect();
    let reference = model::reference_forward(1, &expected.architecture, &other);
    let got = cpu_output(&path, &other);
    for (g, r) in got.iter().zip(&reference) {
        assert!((g - r).abs() < 1e-4, "{g} vs {r}");
    }
    let file_bytes = std::fs::read(&path).expect("read");
    let file = ModelFile::parse(&file_bytes).expect("parse");
    assert_eq!(file.architecture, expected.architecture);
    assert_eq!(file.metadata.as_ref().map(|m| m.seed), Some(1));
}

#[test]
fn corrupted_weights_fail_the_smoke_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.safetensors");
    model::make_model(PARAMS, 3, 4, 16, &path).expect("make");
    let expected = Expected::read(&model::expected_path(&path)).expect("expected");
    let mut bytes = std::fs::read(&path).expect("read");
    // Overwrite 64 bytes in the middle of the data (past the header) with 0xFF: NaNs.
    let middle = bytes.len() / 2;
    bytes[middle..middle + 64].fill(0xff);
    std::fs::write(&path, &bytes).expect("write");
    let cmp = expected.compare(&cpu_output(&path, &expected.input));
    assert!(!cmp.ok);

    // Zeroed instead of NaN: still caught, because every weight matters to the output.
    model::make_model(PARAMS, 3, 4, 16, &path).expect("make");
    let mut bytes = std::fs::read(&path).expect("read");
    let len = bytes.len();
    bytes[len - 4096..len - 4096 + 256].fill(0);
    std::fs::write(&path, &bytes).expect("write");
    assert!(!expected.compare(&cpu_output(&path, &expected.input)).ok);
}

#[test]
fn wrong_model_fails_the_smoke_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let right = dir.path().join("right.safetensors");
    let wrong = dir.path().join("wrong.safetensors");
    model::make_model(PARAMS, 1, 4, 16, &right).expect("make");
    model::make_model(PARAMS, 2, 4, 16, &wrong).expect("make");
    let expected = Expected::read(&model::expected_path(&right)).expect("expected");
    assert!(!expected.compare(&cpu_output(&wrong, &expected.input)).ok);
}

#[test]
fn truncated_file_does_not_parse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.safetensors");
    model::make_model(PARAMS, 1, 4, 16, &path).expect("make");
    let bytes = std::fs::read(&path).expect("read");
    assert!(ModelFile::parse(&bytes[..bytes.len() - 1]).is_err());
    assert!(ModelFile::parse(&bytes[..4]).is_err());
    assert!(ModelFile::parse(b"not a model at all").is_err());
}
