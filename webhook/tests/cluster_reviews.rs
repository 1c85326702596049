//! The AdmissionReviews a real kube-apiserver sends, against the fixtures the other webhook
//! tests use (`tests/fixtures/`): each fixture's situation is played in a real cluster (the
//! same object, created, updated, scaled or deleted by the same kind of actor: a person with
//! kubectl, Kueue, the HPA, the Deployment and ReplicaSet controllers), the apiserver's review
//! is captured on its way to the webhooks, and then
//!
//! - it has the fields the fixture has, and the fixture has the fields it has;
//! - the real webhook answers it exactly as it answers the fixture, on every endpoint
//!   (allowed or not, message, warnings, audit annotations, patch).
//!
//! A binary of its own: the capturing webhook configurations send every operation on these
//! kinds in the fixtures' namespace, which no other test should meet.

mod e2e;

use base64::Engine as _;
use e2e::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const NAMESPACE: &str = "inference";
const KUEUE: &str = "system:serviceaccount:kueue-system:kueue-controller-manager";
const HPA: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What the situations need: kubectl as the admin or as another actor.
struct Cluster<'a> {
    env: &'a Env,
}

impl Cluster<'_> {
    fn kubectl(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", NAMESPACE];
        all.extend_from_slice(args);
        self.env.cluster.kubectl_ok(&all)
    }

    /// `kubectl apply` of an object as the fixture has it (what a person does), without the
    /// fields only the apiserver sets.
    fn apply(&self, object: &Value) {
        let mut object = object.clone();
        let metadata = object["metadata"].as_object_mut().expect("metadata");
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            metadata.remove(field);
        }
        if let Some(object) = object.as_object_mut() {
            object.remove("status");
        }
        if object["kind"] == "Job" {
            // The selector and the labels that tie a Job to its Pods are the apiserver's.
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.remove("selector");
            }
            if let Some(labels) = object["spec"]["template"]["metadata"]["labels"].as_object_mut() {
                for generated in [
                    "controller-uid",
                    "batch.kubernetes.io/controller-uid",
                    "job-name",
                    "batch.kubernetes.io/job-name",
                ] {
                    labels.remove(generated);
                }
            }
        }
        let out = kubectl_in(
            self.env.cluster,
            &["-n", NAMESPACE, "apply", "-f", "-"],
            &object.to_string(),
        );
        ok(
            &out,
            &format!("kubectl apply of {}", object["metadata"]["name"]),
        );
    }

    fn delete(&self, kind: &str, name: &str) {
        self.kubectl(&["delete", kind, name, "--ignore-not-found", "--wait=true"]);
    }

    /// A JSON merge patch of `new` over `old` (spec and labels), sent as `user` with
    /// `manager`, as Kueue sends its admissions.
    fn patch_as(
        &self,
        kind: &str,
        name: &str,
        old: &Value,
        new: &Value,
        user: &str,
        manager: &str,
    ) {
        let patch = json!({
            "metadata": {"labels": merge_diff(&old["metadata"]["labels"], &new["metadata"]["labels"])},
            "spec": merge_diff(&old["spec"], &new["spec"]),
        });
        self.kubectl(&[
            "patch",
            kind,
            name,
            "--type=merge",
            &format!("--as={user}"),
            &format!("--field-manager={manager}"),
            "-p",
            &patch.to_string(),
        ]);
    }

    /// A Deployment made from an owned object's pod template (and labels), to have the
    /// controllers create what the fixture shows.
    fn deployment_from(&self, name: &str, template_metadata: &Value, spec: &Value, replicas: u32) {
        let mut labels = template_metadata["labels"].clone();
        if let Some(labels) = labels.as_object_mut() {
            labels.remove("pod-template-hash");
        }
        let mut metadata = json!({"labels": labels.clone()});
        if let Some(annotations) = template_metadata.get("annotations") {
            metadata["annotations"] = annotations.clone();
        }
        let mut spec = spec.clone();
        // What the apiserver and the ServiceAccount admission added to the Pod, not part of a
        // template a person writes.
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("volumes");
            spec.remove("serviceAccount");
            spec.remove("nodeName");
            if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
                for c in containers {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("volumeMounts");
                    }
                }
            }
        }
        self.apply(&json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels.clone()},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": metadata, "spec": spec}
            }
        }));
    }
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`.
fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = serde_json::Map::new();
            for (key, value) in n {
                match o.get(key) {
                    Some(before) if before == value => {}
                    Some(before) => {
                        patch.insert(key.clone(), merge_diff(before, value));
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        (_, new) => new.clone(),
    }
}

/// Plays the situation of fixture `name` in the cluster.
fn play(cluster: &Cluster, name: &str, wait: &dyn Fn(&str)) {
    let request = fixture(name)["request"].clone();
    let (object, old) = (&request["object"], &request["oldObject"]);
    let deployment = "llama-3-70b";
    match name {
        "allow-clean-gpu-pod"
        | "allow-configmap"
        | "warn-gpu-deployment-exec-probe"
        | "warn-deployment-exemption-not-on-template" => cluster.apply(object),
        "deny-gpu-deployment-without-probes" => {
            cluster.delete("deployment", deployment);
            cluster.apply(object);
        }
        "allow-deployment-replicas-update"
        | "allow-update-labels-only"
        | "deny-update-new-image" => {
            cluster.delete("deployment", deployment);
            cluster.apply(old);
            cluster.apply(object);
        }
        "allow-deployment-scale-to-zero" => {
            cluster.delete("deployment", deployment);
            cluster.apply(old);
            cluster.kubectl(&[
                "patch",
                "deployment",
                deployment,
                "--type=merge",
                "--field-manager=kubectl-edit",
                "-p",
                r#"{"spec":{"replicas":0}}"#,
            ]);
        }
        "allow-delete-deployment" => {
            cluster.delete("deployment", deployment);
            cluster.apply(old);
            cluster.kubectl(&["delete", "deployment", deployment, "--wait=true"]);
        }
        "allow-scale-subresource" => {
            cluster.delete("deployment", deployment);
            let mut one =
                fixture("allow-deployment-replicas-update")["request"]["oldObject"].clone();
            one["spec"]["replicas"] = json!(1);
            cluster.apply(&one);
            cluster.kubectl(&[
                "scale",
                "deployment",
                deployment,
                "--replicas=3",
                &format!("--as={HPA}"),
            ]);
        }
        "allow-pod-set-image" => {
            let pod = old["metadata"]["name"].as_str().expect("name");
            cluster.delete("pod", pod);
            cluster.apply(old);
            let image = object["spec"]["containers"][0]["image"]
                .as_str()
                .expect("image");
            cluster.kubectl(&[
                "set",
                "image",
                &format!("pod/{pod}"),
                &format!("vllm={image}"),
            ]);
        }
        "allow-pod-ungate-by-kueue" => {
            let pod = old["metadata"]["name"].as_str().expect("name");
            cluster.delete("pod", pod);
            cluster.apply(old);
            cluster.patch_as("pod", pod, old, object, KUEUE, "kueue-admission");
        }
        "allow-job-unsuspend-by-kueue" => {
            let job = old["metadata"]["name"].as_str().expect("name");
            cluster.delete("job", job);
            cluster.apply(old);
            cluster.patch_as("job", job, old, object, KUEUE, "kueue-admission");
        }
        "allow-replicaset-create-by-deployment-controller" | "warn-pod-created-by-replicaset" => {
            cluster.delete("deployment", deployment);
            let template = &fixture("allow-replicaset-create-by-deployment-controller")["request"]
                ["object"]["spec"]["template"];
            cluster.deployment_from(deployment, &template["metadata"], &template["spec"], 1);
            wait(deployment);
        }
        "allow-replicaset-scale-by-deployment-controller" => {
            cluster.kubectl(&["scale", "deployment", deployment, "--replicas=2"]);
            wait(deployment);
        }
        "allow-pod-of-exempted-deployment" => {
            cluster.delete("deployment", deployment);
            cluster.deployment_from(deployment, &object["metadata"], &object["spec"], 1);
            wait(deployment);
        }
        other => panic!("no situation for the fixture {other}: add one"),
    }
}

/// Whether `captured` is the apiserver's review of the fixture's situation: the same
/// operation on the same kind (and subresource) of the same object, or, for what a controller
/// creates, of an object of the same owner.
fn same_situation(fixture: &Value, captured: &Value) -> bool {
    let (f, c) = (&fixture["request"], &captured["request"]);
    let owner = |r: &Value| {
        let o = if r["object"].is_object() {
            &r["object"]
        } else {
            &r["oldObject"]
        };
        o["metadata"]["ownerReferences"][0]["kind"]
            .as_str()
            .map(|k| {
                let name = o["metadata"]["ownerReferences"][0]["name"]
                    .as_str()
                    .unwrap_or("");
                // The ReplicaSet's name carries a hash the apiserver computes from the template.
                let name = if k == "ReplicaSet" {
                    name.rsplit_once('-').map_or(name, |(n, _)| n)
                } else {
                    name
                };
                format!("{k}/{name}")
            })
    };
    f["operation"] == c["operation"]
        && f["kind"] == c["kind"]
        && f["subResource"] == c["subResource"]
        && f["namespace"] == c["namespace"]
        && match owner(f) {
            Some(expected) => owner(c).as_deref() == Some(expected.as_str()),
            None => f["name"] == c["name"] && owner(c).is_none(),
        }
}

/// The field names of a request, one level down into the structs (kind, resource, ...).
/// Of `userInfo` only `username` and `groups`: `uid` and `extra` depend on the authenticator
/// (a client certificate has an `extra` credential id and no uid, an EKS user both, an
/// impersonated user neither).
fn shape(request: &Value) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    for (key, value) in request.as_object().into_iter().flatten() {
        fields.insert(key.clone());
        let inner: Vec<&String> = value
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        match key.as_str() {
            "kind" | "resource" | "requestKind" | "requestResource" | "options" => {
                fields.extend(inner.iter().map(|k| format!("{key}.{k}")));
            }
            "userInfo" => fields.extend(
                inner
                    .iter()
                    .filter(|k| matches!(k.as_str(), "username" | "groups"))
                    .map(|k| format!("{key}.{k}")),
            ),
            _ => {}
        }
    }
    fields
}

/// The review with the names the apiserver derived from a template hash (a ReplicaSet
/// `<deployment>-<hash>`, its Pods' `generateName` and `pod-template-hash`) replaced by the
/// fixture's made-up hash: the rest must be answered identically.
fn with_fixture_hash(fixture: &Value, captured: &Value) -> Value {
    let hash = |review: &Value| {
        let r = &review["request"];
        let o = if r["object"].is_object() {
            &r["object"]
        } else {
            &r["oldObject"]
        };
        o["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .map(str::to_owned)
    };
    match (hash(fixture), hash(captured)) {
        (Some(want), Some(got)) => {
            serde_json::from_str(&captured.to_string().replace(&got, &want)).expect("JSON")
        }
        _ => captured.clone(),
    }
}

/// The webhook's answer, without the uid (the fixture's and the apiserver's differ), with the
/// patch decoded.
fn answer(webhook: &Webhook, endpoint: &str, review: &Value) -> Value {
    let (status, body) = tls::post(
        webhook.port,
        &webhook.ca.pem,
        endpoint,
        review.to_string().as_bytes(),
    )
    .expect("the webhook answers");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let mut answer: Value = serde_json::from_slice(&body).expect("an AdmissionReview");
    let response = answer["response"].as_object_mut().expect("a response");
    response.remove("uid");
    if let Some(patch) = response.get("patch").and_then(Value::as_str) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64");
        response.insert(
            "patch".into(),
            serde_json::from_slice(&bytes).expect("a JSON Patch"),
        );
    }
    answer
}

const FIXTURES: &[&str] = &[
    "allow-clean-gpu-pod",
    "allow-configmap",
    "deny-gpu-deployment-without-probes",
    "warn-gpu-deployment-exec-probe",
    "warn-deployment-exemption-not-on-template",
    "allow-deployment-replicas-update",
    "allow-update-labels-only",
    "deny-update-new-image",
    "allow-deployment-scale-to-zero",
    "allow-delete-deployment",
    "allow-scale-subresource",
    "allow-pod-set-image",
    "allow-pod-ungate-by-kueue",
    "allow-job-unsuspend-by-kueue",
    "allow-replicaset-create-by-deployment-controller",
    "warn-pod-created-by-replicaset",
    "allow-replicaset-scale-by-deployment-controller",
    "allow-pod-of-exempted-deployment",
];

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn the_apiservers_reviews_have_the_fixtures_fields_and_get_the_fixtures_answers() {
    let env = cluster_env("reviews_like_the_fixtures");
    // Every fixture has a situation here.
    let on_disk: BTreeSet<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"))
            .expect("fixtures")
            .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_owned))
            .collect();
    let played: BTreeSet<String> = FIXTURES.iter().map(|f| (*f).to_owned()).collect();
    assert_eq!(
        on_disk, played,
        "a fixture without a situation (or one listed that is gone)"
    );

    let ca = probelint_cluster::Ca::new("probelint-e2e capture CA");
    let proxy = tls::Proxy::start(&Webhook::leaf(&ca, "capture"), tls::Upstream::AllowAll);
    let cluster = env.cluster;
    cluster.kubectl_ok(&["create", "namespace", NAMESPACE]);
    cluster.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "capture-actors",
        "--clusterrole=cluster-admin",
        "--serviceaccount=kueue-system:kueue-controller-manager",
        "--serviceaccount=kube-system:horizontal-pod-autoscaler",
    ]);
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || {
            cluster
                .kubectl_output(&["-n", NAMESPACE, "get", "serviceaccount", "default"])
                .status
                .success()
                .then_some(())
        },
    );
    // Capturing webhooks for every operation on the fixtures' kinds, answered by the proxy
    // (allowed, unchanged), so that every situation plays out whatever the webhook would say.
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca.pem);
    let hook = |path: &str| {
        json!({
            "name": format!("capture{}.probelint.io", path.replace('/', "-")),
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {"url": format!("{}{path}", proxy.url()), "caBundle": bundle},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
            "rules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods", "configmaps"]},
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["*"],
                 "resources": ["deployments", "deployments/scale", "replicasets"]},
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["*"], "resources": ["jobs"]}
            ]
        })
    };
    for (kind, path) in [
        ("ValidatingWebhookConfiguration", "/validate"),
        ("MutatingWebhookConfiguration", "/mutate"),
    ] {
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": format!("capture{}", path.replace('/', "-"))},
            "webhooks": [hook(path)]
        });
        ok(
            &kubectl_in(cluster, &["apply", "-f", "-"], &config.to_string()),
            "the capturing webhooks",
        );
    }
    wait_for(
        "the capturing webhooks in use",
        Duration::from_secs(30),
        || {
            let probe =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}});
            ok(
                &kubectl_in(
                    cluster,
                    &["-n", NAMESPACE, "apply", "--dry-run=server", "-f", "-"],
                    &probe.to_string(),
                ),
                "probe",
            );
            (proxy.exchanges().len() >= 2).then_some(())
        },
    );

    let actors = Cluster { env: &env };
    // Controllers act after the command returns: wait for the Deployment's latest ReplicaSet
    // and its Pods to settle.
    let settle = |deployment: &str| {
        wait_for("the controllers", Duration::from_secs(60), || {
            let d = cluster.get_json(&["-n", NAMESPACE, "get", "deployment", deployment]);
            let want = d["spec"]["replicas"].as_u64().unwrap_or(0);
            let pods = items(
                cluster,
                &[
                    "-n",
                    NAMESPACE,
                    "get",
                    "pods",
                    "-l",
                    &format!("app={deployment}"),
                ],
            );
            (d["status"]["replicas"].as_u64() == Some(want) && pods.len() as u64 == want)
                .then_some(())
        });
    };
    let webhook = Webhook::prepare("answers");
    webhook.start("{}\n");
    let mut problems = Vec::new();
    let dump = std::env::var_os("PROBELINT_DUMP_REVIEWS").map(std::path::PathBuf::from);
    for name in FIXTURES {
        let before = proxy.exchanges().len();
        play(&actors, name, &settle);
        let fixture = fixture(name);
        let captured: Vec<tls::Exchange> = proxy.exchanges()[before..]
            .iter()
            .filter(|e| same_situation(&fixture, &e.request))
            .cloned()
            .collect();
        for (phase, endpoints) in [
            ("/mutate", &["/mutate"][..]),
            ("/validate", &["/validate", "/validate/warn"][..]),
        ] {
            let Some(real) = captured
                .iter()
                .rev()
                .find(|e| e.path.starts_with(&format!("{phase}?")))
            else {
                problems.push(format!(
                    "{name}: the apiserver sent no such review to {phase}"
                ));
                continue;
            };
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).expect("dump dir");
                let file = dir.join(format!("{name}{}.json", phase.replace('/', ".")));
                std::fs::write(
                    file,
                    serde_json::to_string_pretty(&real.request).expect("JSON"),
                )
                .expect("dump");
            }
            let want = shape(&fixture["request"]);
            let mut got = shape(&real.request["request"]);
            if phase == "/validate"
                && fixture["request"]["object"]["metadata"]["generateName"].is_string()
            {
                // The apiserver names a `generateName` object between the two phases.
                got.remove("name");
            }
            if want != got {
                problems.push(format!(
                    "{name} ({phase} phase): fields only in the fixture {:?}, only in the apiserver's {:?}",
                    want.difference(&got).collect::<Vec<_>>(),
                    got.difference(&want).collect::<Vec<_>>()
                ));
            }
            for endpoint in endpoints {
                let from_fixture = answer(&webhook, endpoint, &fixture);
                let from_real = answer(
                    &webhook,
                    endpoint,
                    &with_fixture_hash(&fixture, &real.request),
                );
                if from_fixture != from_real {
                    problems.push(format!(
                        "{name} on {endpoint}: the fixture is answered\n{from_fixture:#}\nthe apiserver's review\n{from_real:#}"
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}
