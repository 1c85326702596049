//! Engine microbenchmarks: evaluating one GPU Deployment (what `/validate` asks of the engine)
//! and mutating one GPU Pod (what `/mutate` asks), each beside its baseline: parsing the same
//! object's JSON with serde_json, the least any consumer of the object pays. Two finer ones
//! split the evaluation: the analysis alone (finding pod specs, containers and probes), and a
//! clean Deployment (every rule runs, nothing is reported: no messages, no fixes).

use criterion::{Criterion, criterion_group, criterion_main};
use probelint_bench::corpus::samples;
use probelint_bench::review::object;
use probelint_policies::Policy;
use probelint_policies::Workload;
use std::hint::black_box;

fn engine(c: &mut Criterion) {
    let policy = Policy::builtin().expect("built-in policy");
    let deployment = object(samples::GPU_DEPLOYMENT_BAD);
    let deployment_json = serde_json::to_vec(&deployment).expect("JSON");
    let pod = object(samples::GPU_POD_NEEDS_MUTATION);
    let pod_json = serde_json::to_vec(&pod).expect("JSON");
    let clean = object(samples::GPU_DEPLOYMENT_CLEAN);
    assert!(
        probelint_policies::evaluate_one(&clean, &policy)
            .iter()
            .all(|f| f.is_suppressed()),
        "the clean sample has findings"
    );
    assert!(!probelint_policies::evaluate_one(&deployment, &policy).is_empty());
    assert!(!probelint_policies::mutate(&pod, &policy).patch.0.is_empty());

    let mut g = c.benchmark_group("engine");
    g.bench_function("evaluate_gpu_deployment", |b| {
        b.iter(|| probelint_policies::evaluate_one(black_box(&deployment), &policy))
    });
    g.bench_function("parse_gpu_deployment_json", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&deployment_json)))
    });
    g.bench_function("mutate_gpu_pod", |b| {
        b.iter(|| probelint_policies::mutate(black_box(&pod), &policy))
    });
    g.bench_function("parse_gpu_pod_json", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&pod_json)))
    });
    g.bench_function("analyse_gpu_deployment", |b| {
        b.iter(|| Workload::analyse(0, black_box(&deployment), &policy))
    });
    g.bench_function("evaluate_clean_gpu_deployment", |b| {
        b.iter(|| probelint_policies::evaluate_one(black_box(&clean), &policy))
    });
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
