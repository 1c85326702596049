//! `probelint-probe` on a real kubelet (v1.36, containerd 2.2): its image mounted into the
//! reference server's container as a Kubernetes image volume, exactly as probelint's fixes write
//! it with `probeHelper: {mode: imageVolume}`, and its `startup`, `ready` and `live` as the
//! container's exec probes. Two faults of the reference server, with requests sent to the pod
//! while it is Ready:
//! - hang: the worker stops; readiness drops, then `live` sees requests in flight and its
//!   progress counters flat for two windows, and the kubelet restarts the container once;
//! - busy: every forward pass is 20× slower but still finishes; readiness drops (latency), `live`
//!   sees its counters move and the kubelet never restarts it; beside it the same server with
//!   liveness on readiness's endpoint (`/readyz`), which the kubelet restarts.
//!
//! `probelint simulate`'s prediction for each stored Deployment is printed beside what the
//! kubelet did (it models the load, not the faults: a difference is what the fault did).
//!
//! The node suite (tier 3): ignored, and refused without `PROBELINT_NODE_SUITE=1
//! PROBELINT_HOST_IS_DISPOSABLE=1`. It needs `probelint-probe`, `probelint` and
//! `reference-server` built in the same target directory (`cargo test --workspace` builds them).

use probelint_kubelet_conformance::{
    Arm, Outcome, PROBE_HELPER_IMAGE, helper_exec, helper_mounts, helper_volumes,
    probe_helper_image, reference_image, run_with_volumes, table, timelines,
};
use serde_json::{Value, json};

/// When the reference server's fault starts, seconds after it begins serving.
const FAULT_AFTER: &str = "30";
/// `live`'s window and how many flat windows fail it: a wedged worker with work in flight is
/// failed 20 s after its last progress, then killed after the kubelet's 2 × 5 s.
const WINDOW: &str = "10";
const WINDOWS: &str = "2";

fn env(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

/// The helper's three probes on the reference server, whose paths and metrics are not in the
/// server table, so they are named as a user of such a server would name them.
fn helper_probes() -> Value {
    json!({
        "startupProbe": {
            "exec": helper_exec(&["startup", "--port", "8080", "--startup-path", "/startupz"]),
            "periodSeconds": 5, "timeoutSeconds": 4, "failureThreshold": 30,
        },
        "readinessProbe": {
            "exec": helper_exec(&[
                "ready", "--port", "8080", "--ready-path", "/readyz", "--smoke",
                "--smoke-path", "/v1/infer", "--smoke-body", "{}", "--interval", "60",
                "--cache", "/probelint-state/ready",
            ]),
            "periodSeconds": 5, "timeoutSeconds": 7, "failureThreshold": 3,
        },
        "livenessProbe": {
            "exec": helper_exec(&[
                "live", "--port", "8080", "--metric-work", "reference_queue_depth",
                "--metric-progress", "reference_smoke_total,reference_infer_requests_total{result=\"ok\"}",
                "--window", WINDOW, "--failure-threshold", WINDOWS,
                "--cache", "/probelint-state/live",
            ]),
            "periodSeconds": 5, "timeoutSeconds": 7, "failureThreshold": 2,
        },
        "volumeMounts": helper_mounts(),
    })
}

fn arms() -> Vec<Arm> {
    let arm = |scenario, arm, faults: &[(&'static str, &str)], probes, duration| Arm {
        scenario,
        arm,
        env: env(faults),
        probes,
        annotations: json!({}),
        mutated: false,
        load_seconds: 0.0,
        port_open_during_load: false,
        duration,
        traffic: true,
    };
    let slow: &[(&'static str, &str)] = &[
        ("REFERENCE_FAULT_SLOW_AFTER", FAULT_AFTER),
        ("REFERENCE_FAULT_SLOW_FACTOR", "20"),
    ];
    // Liveness on readiness's endpoint, as the busy-server reports have it.
    let shared = json!({
        "startupProbe": {"httpGet": {"path": "/startupz", "port": "http"}, "periodSeconds": 5, "failureThreshold": 30},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5, "failureThreshold": 3},
    });
    vec![
        // 105 s: the restarted container hangs again 30 s after it serves, and would be killed
        // again about 30 s later, after the window.
        arm(
            "helper-hang",
            "live",
            &[("REFERENCE_FAULT_HANG_AFTER", FAULT_AFTER)],
            helper_probes(),
            105.0,
        ),
        arm("helper-busy", "live", slow, helper_probes(), 120.0),
        arm("helper-busy", "shared-endpoint", slow, shared, 120.0),
    ]
}

fn find<'a>(outcomes: &'a [Outcome], id: &str) -> &'a Outcome {
    outcomes
        .iter()
        .find(|o| o.arm.id() == id)
        .unwrap_or_else(|| panic!("no outcome for {id}"))
}

#[test]
#[ignore = "node suite: a real kubelet as root, changes this machine; PROBELINT_NODE_SUITE=1 PROBELINT_HOST_IS_DISPOSABLE=1"]
fn the_probe_helper_as_an_image_volume_restarts_a_hung_server_once_and_a_busy_one_never() {
    let test =
        "the_probe_helper_as_an_image_volume_restarts_a_hung_server_once_and_a_busy_one_never";
    probelint_cluster::node::require_node_suite(test);
    let cluster = probelint_cluster::shared(test);
    let node = probelint_cluster::node::start_for(test, cluster);
    let server = probelint_kubelet_conformance::workspace_binary("reference-server");
    let probe = probelint_kubelet_conformance::workspace_binary("probelint-probe");
    let probelint = probelint_kubelet_conformance::workspace_binary("probelint");
    let work = tempfile::tempdir().expect("a temporary directory");
    let image = reference_image(&server, work.path()).unwrap_or_else(|e| panic!("{e}"));
    node.import(&image).unwrap_or_else(|e| panic!("{e}"));
    let helper = probe_helper_image(&probe, &server).unwrap_or_else(|e| panic!("{e}"));
    node.import(&helper).unwrap_or_else(|e| panic!("{e}"));
    node.advertise(cluster, "nvidia.com/gpu", 16)
        .unwrap_or_else(|e| panic!("{e}"));

    let outcomes = run_with_volumes(
        cluster,
        &probelint,
        &arms(),
        &helper_volumes(PROBE_HELPER_IMAGE),
    );
    println!(
        "probelint-probe as an image volume on a real kubelet {} (containerd {}); times from the \
         container's first start; diff = model - real; simulate models the load, not the faults\n{}",
        node.binaries.kube_version,
        node.binaries.containerd_version,
        table(&outcomes)
    );
    println!("{}", timelines(&outcomes));

    let mut failed = Vec::new();
    let mut check = |holds: bool, what: String| {
        if !holds {
            failed.push(what);
        }
    };
    for o in &outcomes {
        check(
            o.applied
                .pointer("/spec/template/spec/volumes/0/image/reference")
                .and_then(Value::as_str)
                == Some(PROBE_HELPER_IMAGE),
            format!("{}: the apiserver stored no image volume", o.arm.id()),
        );
        // Ready at all means the kubelet mounted the image and ran the helper in it.
        check(
            o.observed.first_ready.is_some(),
            format!("{}: never Ready", o.arm.id()),
        );
    }
    let said = |o: &Outcome, what: &str| o.observed.timeline.iter().any(|(_, l)| l.contains(what));

    // Hang: readiness drops before the one kill, which `live` asks for as a wedge.
    let hang = find(&outcomes, "helper-hang-live");
    let ready_failed = hang.observed.first_failure.get("Readiness").copied();
    let first_kill = hang.observed.terminations.first().map(|(t, _)| *t);
    check(
        hang.observed.restarts == 1,
        format!("hang: {} restarts, not 1", hang.observed.restarts),
    );
    check(
        matches!((ready_failed, first_kill), (Some(r), Some(k)) if r < k && k > 30.0),
        format!("hang: first readiness failure {ready_failed:?}, first kill {first_kill:?}"),
    );
    check(
        said(hang, "not live: wedged"),
        "hang: no liveness Event says `not live: wedged`".to_owned(),
    );

    // Busy: readiness drops, liveness from progress never fails.
    let busy = find(&outcomes, "helper-busy-live");
    check(
        busy.observed.restarts == 0
            && busy.observed.unhealthy.liveness == 0
            && !busy.observed.not_ready.is_empty(),
        format!(
            "busy with the helper: {} restarts, liveness failures {}, NotReady at {:?}",
            busy.observed.restarts, busy.observed.unhealthy.liveness, busy.observed.not_ready
        ),
    );
    // The same busy server with liveness on readiness's endpoint is restarted.
    let control = find(&outcomes, "helper-busy-shared-endpoint");
    check(
        control.observed.restarts >= 1,
        format!(
            "busy with liveness on /readyz: {} restarts (the false restart did not happen)",
            control.observed.restarts
        ),
    );

    let kubelet_log = node.log_tail("kubelet");
    drop(node);
    assert!(
        failed.is_empty(),
        "on the real kubelet:\n  {}\n(the table and timelines are above; the kubelet's log \
         ends:\n{kubelet_log})",
        failed.join("\n  ")
    );
}
