//! What admission decides, on requests as the apiserver sends them. The webhook's fixture
//! reviews (webhook/tests) check the same decisions through the wire format.

use super::*;
use serde_json::json;

fn policy() -> Policy {
    Policy::builtin().expect("built-in policy")
}

fn request<'r>(
    operation: Operation,
    group: &'r str,
    kind: &'r str,
    username: &'r str,
) -> Request<'r> {
    Request {
        operation,
        group,
        kind,
        sub_resource: None,
        namespace: Some("serving"),
        username,
    }
}

/// A GPU Deployment with no probes: every mode has something to say about it.
fn gpu_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llama"}}, "template": {
            "metadata": {"labels": {"app": "llama"}},
            "spec": {"containers": [{
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.11.0",
                "args": ["--model", "meta-llama/Llama-3.1-70B-Instruct"],
                "ports": [{"containerPort": 8000}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}
            }]}
        }}
    })
}

fn with_owner(mut object: Value, kind: &str, name: &str) -> Value {
    object["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u", "controller": true
    }]);
    object
}

/// The judgement of a judged answer.
fn judged(answer: Answer) -> Judgement {
    match answer {
        Answer::Judged(judgement) => judgement,
        other => panic!("not judged: {other:?}"),
    }
}

const DEPLOYMENT_CONTROLLER: &str = "system:serviceaccount:kube-system:deployment-controller";

#[test]
fn who_sent_the_request_decides_whether_an_owner_is_a_controller() {
    let policy = policy();
    let settings = Settings::default();
    let replica_set = || {
        let mut rs = with_owner(gpu_deployment(), "Deployment", "llama");
        rs["kind"] = json!("ReplicaSet");
        rs
    };
    // From the Deployment controller: its ReplicaSet is left alone in every mode.
    for mode in [Mode::Validate, Mode::Warn, Mode::Mutate] {
        let answer = admit(
            request(
                Operation::Create,
                "apps",
                "ReplicaSet",
                DEPLOYMENT_CONTROLLER,
            ),
            Some(replica_set()),
            None,
            mode,
            &policy,
            &settings,
        );
        let Answer::Skipped { reason, opted_out } = answer else {
            panic!("{mode:?}: {answer:?}");
        };
        assert!(
            reason.starts_with("managed by Deployment llama: "),
            "{reason}"
        );
        assert!(!opted_out);
    }
    // The same object from a person claims nothing: judged, refused, and told why.
    let answer = admit(
        request(Operation::Create, "apps", "ReplicaSet", "alice"),
        Some(replica_set()),
        None,
        Mode::Validate,
        &policy,
        &settings,
    );
    let judgement = judged(answer);
    assert!(judgement.refuses && judgement.controller.is_none());
    assert!(
        !judgement.partition().0.is_empty(),
        "{:?}",
        judgement.findings
    );
    assert_eq!(
        judgement.notes,
        [
            "ownerReferences name Deployment llama as controller, but alice is no controller: judged as alice's"
        ]
    );
    // A Pod from a controller is judged but never refused.
    let mut pod = with_owner(gpu_deployment(), "ReplicaSet", "llama-5d8f");
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["spec"] = pod["spec"]["template"]["spec"].take();
    let answer = admit(
        request(
            Operation::Create,
            "",
            "Pod",
            "system:serviceaccount:kube-system:replicaset-controller",
        ),
        Some(pod),
        None,
        Mode::Validate,
        &policy,
        &settings,
    );
    let judgement = judged(answer);
    assert!(!judgement.refuses);
    assert_eq!(
        judgement.controller.as_deref(),
        Some("ReplicaSet llama-5d8f")
    );
    assert!(judgement.partition().0.is_empty());
    assert!(
        judgement
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error)
    );
    // An operator named in the settings is a controller too.
    let operator = "system:serviceaccount:kserve:kserve-controller-manager";
    let kserve = Settings {
        controllers: Controllers::with_operators([operator, " "]),
        ..Settings::default()
    };
    assert_eq!(
        kserve.controllers.operators().collect::<Vec<_>>(),
        [operator]
    );
    let answer = admit(
        request(Operation::Create, "apps", "ReplicaSet", operator),
        Some(replica_set()),
        None,
        Mode::Mutate,
        &policy,
        &kserve,
    );
    assert!(matches!(answer, Answer::Skipped { .. }), "{answer:?}");
}

#[test]
fn the_opt_out_label_is_honoured_only_where_the_policy_lets_objects_exempt_themselves() {
    let mut object = gpu_deployment();
    object["metadata"]["labels"] = json!({"probelint.io/ignore": "true"});
    let mut policy = policy();
    let answer = admit(
        request(Operation::Create, "apps", "Deployment", "alice"),
        Some(object.clone()),
        None,
        Mode::Validate,
        &policy,
        &Settings::default(),
    );
    assert!(
        matches!(&answer, Answer::Skipped { opted_out: true, reason } if reason == "opted out by the label probelint.io/ignore=true"),
        "{answer:?}"
    );
    policy.allow_annotation_exemptions = false;
    let answer = admit(
        request(Operation::Create, "apps", "Deployment", "alice"),
        Some(object),
        None,
        Mode::Validate,
        &policy,
        &Settings::default(),
    );
    let judgement = judged(answer);
    assert_eq!(judgement.notes.len(), 1);
    assert!(judgement.notes[0].starts_with("the label probelint.io/ignore=true is not honoured"));
}

#[test]
fn an_update_that_changes_no_pod_spec_is_left_alone_and_one_that_does_is_judged() {
    let policy = policy();
    let old = gpu_deployment();
    let mut scaled = old.clone();
    scaled["spec"]["replicas"] = json!(0);
    let mut restarted = old.clone();
    restarted["spec"]["template"]["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/restartedAt": "2026-12-03T10:00:00Z"});
    for new in [scaled, restarted] {
        for mode in [Mode::Validate, Mode::Mutate] {
            let answer = admit(
                request(Operation::Update, "apps", "Deployment", "alice"),
                Some(new.clone()),
                Some(&old),
                mode,
                &policy,
                &Settings::default(),
            );
            assert!(
                matches!(&answer, Answer::Skipped { reason, .. } if reason == UNCHANGED),
                "{answer:?}"
            );
        }
    }
    // The object's own load time changed, but its pod template lacks it: say so.
    let mut annotated = old.clone();
    annotated["metadata"]["annotations"] = json!({"probelint.io/model-load-seconds": "900"});
    let answer = admit(
        request(Operation::Update, "apps", "Deployment", "alice"),
        Some(annotated.clone()),
        Some(&old),
        Mode::Validate,
        &policy,
        &Settings::default(),
    );
    let Answer::Unreached(lines) = answer else {
        panic!("{answer:?}");
    };
    assert_eq!(
        lines,
        [
            "probelint.io/model-load-seconds does not reach this Deployment's Pods: set it in the pod template's annotations"
        ]
    );
    // Mutation has nothing to say about it.
    let answer = admit(
        request(Operation::Update, "apps", "Deployment", "alice"),
        Some(annotated),
        Some(&old),
        Mode::Mutate,
        &policy,
        &Settings::default(),
    );
    assert!(matches!(answer, Answer::Skipped { .. }), "{answer:?}");
    // A new image is judged, and fixed.
    let mut upgraded = old.clone();
    upgraded["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("vllm/vllm-openai:v0.12.0");
    let answer = admit(
        request(Operation::Update, "apps", "Deployment", "alice"),
        Some(upgraded),
        Some(&old),
        Mode::Mutate,
        &policy,
        &Settings::default(),
    );
    let Answer::Mutated(mutated) = answer else {
        panic!("{answer:?}");
    };
    assert!(!mutated.applied.is_empty());
    assert!(!mutated.patch.expect("applies").patch.0.is_empty());
}

#[test]
fn deletes_connects_subresources_and_requests_without_an_object_are_not_judged() {
    let policy = policy();
    let settings = Settings::default();
    let skipped = |request: Request<'_>, object: Option<Value>| match admit(
        request,
        object,
        None,
        Mode::Validate,
        &policy,
        &settings,
    ) {
        Answer::Skipped { reason, .. } => reason,
        other => panic!("{other:?}"),
    };
    let r = |op| request(op, "apps", "Deployment", "alice");
    assert_eq!(
        skipped(r(Operation::Delete), Some(gpu_deployment())),
        "DELETE is not checked"
    );
    assert_eq!(
        skipped(r(Operation::Connect), Some(gpu_deployment())),
        "CONNECT is not checked"
    );
    let scale = Request {
        sub_resource: Some("scale"),
        ..r(Operation::Update)
    };
    assert_eq!(
        skipped(scale, Some(gpu_deployment())),
        "subresource \"scale\" is not checked"
    );
    assert_eq!(
        skipped(r(Operation::Create), None),
        "the request carries no object"
    );
}

#[test]
fn updates_of_kinds_whose_pods_come_from_the_spec_they_were_created_with_are_judged_at_create() {
    for (group, kind, immutable) in [
        ("", "Pod", true),
        ("batch", "Job", true),
        ("jobset.x-k8s.io", "JobSet", true),
        ("ray.io", "RayJob", true),
        ("batch", "CronJob", false),
        ("apps", "Deployment", false),
        ("ray.io", "RayCluster", false),
        ("example.com", "Job", false),
        ("example.com", "Pod", false),
    ] {
        assert_eq!(
            judged_at_create(group, kind).is_some(),
            immutable,
            "{group} {kind}"
        );
    }
}

#[test]
fn the_namespace_of_the_request_reaches_an_object_that_lacks_one() {
    let answer = admit(
        request(Operation::Create, "apps", "Deployment", "alice"),
        Some(gpu_deployment()),
        None,
        Mode::Validate,
        &policy(),
        &Settings::default(),
    );
    let judgement = judged(answer);
    assert_eq!(judgement.object.namespace.as_deref(), Some("serving"));
    assert!(
        judgement
            .findings
            .iter()
            .all(|f| f.object.namespace.as_deref() == Some("serving"))
    );
}

#[test]
fn a_review_analyses_each_object_once() {
    let policy = policy();
    let old = gpu_deployment();
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("vllm/vllm-openai:v0.12.0");
    for (mode, old, want) in [
        // The new object once, the old once; the verdict and the patch reuse the first.
        (Mode::Validate, Some(&old), 2),
        (Mode::Warn, Some(&old), 2),
        // (The propagation of annotations would read the patched object once more, where the
        // object had probelint annotations to copy into its templates.)
        (Mode::Mutate, Some(&old), 2),
        (Mode::Validate, None, 1),
    ] {
        let before = crate::analysis::object::analyses();
        let answer = admit(
            request(Operation::Update, "apps", "Deployment", "alice"),
            Some(new.clone()),
            old,
            mode,
            &policy,
            &Settings::default(),
        );
        assert!(
            matches!(answer, Answer::Judged(_) | Answer::Mutated(_)),
            "{answer:?}"
        );
        assert_eq!(
            crate::analysis::object::analyses() - before,
            want,
            "{mode:?}"
        );
    }
}

#[test]
fn pod_specs_changed_compares_every_template_and_only_what_makes_the_pods() {
    let policy = policy();
    let changed = |old: &Value, edit: &dyn Fn(&mut Value)| {
        let mut new = old.clone();
        edit(&mut new);
        pod_specs_changed(
            &Workload::analyse(0, &new, &policy),
            &Workload::analyse(0, old, &policy),
        )
    };
    let pod = |image: &str| json!({"containers": [{"name": "vllm", "image": image}]});
    let lws = json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {
            "size": 4,
            "leaderTemplate": {"spec": pod("vllm:1")},
            "workerTemplate": {"spec": pod("vllm:1")}
        }}
    });
    assert!(!changed(&lws, &|o| o["spec"]["replicas"] = json!(3)));
    assert!(!changed(
        &lws,
        &|o| o["spec"]["leaderWorkerTemplate"]["size"] = json!(8)
    ));
    assert!(changed(&lws, &|o| {
        o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] =
            json!("vllm:2")
    }));
    assert!(changed(&lws, &|o| {
        o["spec"]["leaderWorkerTemplate"]
            .as_object_mut()
            .expect("lws")
            .remove("leaderTemplate");
    }));
    let ray = json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray"},
        "spec": {
            "headGroupSpec": {"template": {"spec": pod("ray:1")}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 8, "template": {"spec": pod("ray:1")}}]
        }
    });
    // The Ray autoscaler writes replicas and workersToDelete.
    assert!(!changed(&ray, &|o| {
        o["spec"]["workerGroupSpecs"][0]["replicas"] = json!(4);
        o["spec"]["workerGroupSpecs"][0]["scaleStrategy"] =
            json!({"workersToDelete": ["ray-gpu-x"]});
    }));
    assert!(changed(&ray, &|o| {
        let group = o["spec"]["workerGroupSpecs"][0].clone();
        o["spec"]["workerGroupSpecs"]
            .as_array_mut()
            .expect("groups")
            .push(group);
    }));
    let isvc = json!({
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "isvc"},
        "spec": {"predictor": {
            "minReplicas": 1,
            "maxReplicas": 2,
            "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://meta-llama/a"},
            "containers": []
        }}
    });
    assert!(!changed(&isvc, &|o| {
        o["spec"]["predictor"]["minReplicas"] = json!(2);
        o["spec"]["predictor"]["maxReplicas"] = json!(6);
        o["spec"]["predictor"]["canaryTrafficPercent"] = json!(10);
    }));
    assert!(changed(&isvc, &|o| {
        o["spec"]["predictor"]["model"]["storageUri"] = json!("hf://meta-llama/b")
    }));
    assert!(changed(&isvc, &|o| {
        o["spec"]["predictor"]["annotations"] = json!({"probelint.io/model-load-seconds": "900"})
    }));
    assert!(!changed(&isvc, &|o| {
        o["spec"]["predictor"]["annotations"] = json!({"team": "a"})
    }));
    // Objects without pod specs never change any.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
    assert!(!changed(&cm, &|o| o["data"]["a"] = json!("2")));
}
