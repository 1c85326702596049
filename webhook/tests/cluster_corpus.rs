//! Every workload of the real-world corpus (`tests/corpus/real/`), created through the chart's
//! mutating webhook in a real kube-apiserver that has the published CRDs of KServe, KubeRay and
//! LeaderWorkerSet (`tests/corpus/crds/`): the apiserver applies each JSON Patch the webhook
//! returns, validates the result against the built-in types or the project's own schema,
//! defaults and prunes it; no patch may make an object the apiserver accepts without the
//! webhook into one it refuses, and every value a patch writes must survive into what the
//! apiserver would store.
//!
//! A test binary of its own: the CRDs are cluster-wide, and a ClusterServingRuntime (cluster
//! scoped) reaches every webhook configuration in the cluster, whatever its namespaceSelector.

mod e2e;

use e2e::*;
use probelint_policies::Analysis;
use probelint_policies::Policy;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The kinds the chart sends to the mutating webhook (charts/probelint/templates/_helpers.tpl,
/// `probelint.webhookRules`) that the corpus has, or could have.
const WORKLOAD_KINDS: &[&str] = &[
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "LeaderWorkerSet",
    "InferenceService",
    "ServingRuntime",
    "ClusterServingRuntime",
    "LLMInferenceService",
    "RayService",
    "RayCluster",
    "RayJob",
];

/// The corpus' workloads, each renamed `c<n>-<name>` (so that a review, a result and an
/// object match by name) and without its namespace (they are created in the test's).
fn corpus_workloads() -> Vec<Value> {
    let mut workloads = Vec::new();
    for path in probelint_testkit::corpus::real_manifests() {
        let text = std::fs::read_to_string(&path).expect("a corpus file");
        // One corpus file is not YAML (a tab in an indentation, as upstream has it): no user
        // could apply it either.
        let Ok(docs) = probelint_testkit::yaml::try_objects(&text) else {
            eprintln!("not YAML, skipped: {}", path.display());
            continue;
        };
        for mut doc in docs {
            let kind = doc["kind"].as_str().unwrap_or("").to_owned();
            if !WORKLOAD_KINDS.contains(&kind.as_str()) {
                continue;
            }
            let metadata = doc["metadata"].as_object_mut().expect("metadata");
            metadata.remove("namespace");
            let name = metadata
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("unnamed");
            let renamed = format!("c{:03}-{name}", workloads.len());
            let renamed = renamed[..renamed.len().min(50)].trim_end_matches(['-', '.']);
            metadata.insert("name".into(), json!(renamed));
            workloads.push(doc);
        }
    }
    workloads
}

/// `kubectl create --dry-run=server` of every object in `namespace`: what the apiserver
/// returned for each object it accepted, by `Kind/name`, and what it said about the others.
fn dry_run_create(
    env: &Env,
    namespace: &str,
    objects: &[Value],
) -> (BTreeMap<String, Value>, String) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    // `--validate=warn`: an unknown field in an upstream manifest is the manifest's business;
    // everything else the apiserver checks still refuses the object.
    let out = kubectl_in(
        env.cluster,
        &[
            "-n",
            namespace,
            "create",
            "--dry-run=server",
            "--validate=warn",
            "-o",
            "json",
            "-f",
            "-",
        ],
        &list.to_string(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut accepted = BTreeMap::new();
    for object in serde_json::Deserializer::from_str(&stdout).into_iter::<Value>() {
        let object = object.expect("kubectl printed JSON objects");
        accepted.insert(key(&object), object);
    }
    (accepted, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}",
        object["kind"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// Whether `stored` holds everything `expected` does (objects key by key, arrays item by
/// item, other values equal): the apiserver may add defaults, never drop or change a value.
fn holds(stored: &Value, expected: &Value) -> bool {
    match (stored, expected) {
        (Value::Object(s), Value::Object(e)) => e
            .iter()
            .all(|(k, v)| s.get(k).is_some_and(|sv| holds(sv, v))),
        (Value::Array(s), Value::Array(e)) => {
            s.len() == e.len() && s.iter().zip(e).all(|(sv, ev)| holds(sv, ev))
        }
        (s, e) => s == e,
    }
}

fn install_crds(env: &Env) {
    // `create`, not `apply`: the largest CRDs are over the 256 KiB limit of the last-applied
    // annotation `apply` would add.
    let mut args = vec!["create".to_owned()];
    for crd in probelint_testkit::corpus::crds() {
        args.extend(["-f".to_owned(), crd.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(
        &env.cluster.kubectl_output(&args),
        "kubectl create of the CRDs",
    );
    // Polled rather than `kubectl wait`, which fails instead of waiting while a new CRD has no
    // conditions yet.
    wait_for(
        "the CRDs to be established",
        Duration::from_secs(120),
        || {
            items(env.cluster, &["get", "crd"])
                .iter()
                .all(|crd| {
                    crd["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Established" && c["status"] == "True")
                    })
                })
                .then_some(())
        },
    );
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn every_workload_of_the_real_corpus_is_mutated_and_accepted_by_the_real_apiserver() {
    let env = env("corpus_through_the_apiserver");
    install_crds(&env);
    let workloads = corpus_workloads();
    let policy = Policy::builtin().expect("the built-in policy");
    let accelerated: Vec<String> = workloads
        .iter()
        .filter(|o| {
            Analysis::single(o, 0, &policy)
                .accelerated_containers()
                .next()
                .is_some()
        })
        .map(key)
        .collect();
    assert!(
        accelerated.len() >= 70,
        "{} GPU workloads in the corpus",
        accelerated.len()
    );

    // Without the webhook first (a ClusterServingRuntime would reach it from any namespace):
    // what the apiserver accepts of the corpus as it is.
    let plain = env.cluster.namespace("corpus-plain");
    let (baseline, refused_alone) = dry_run_create(&env, &plain, &workloads);
    for line in refused_alone.lines().filter(|l| l.starts_with("Error")) {
        eprintln!("refused without the webhook (the manifest's own problem): {line}");
    }
    assert!(baseline.len() >= workloads.len() - 5, "{refused_alone}");

    // Then through the chart's webhooks (defaults: warn mode, mutation on), with a proxy in
    // front of the webhook that records each patch.
    let webhook = Webhook::prepare("corpus");
    let proxy = tls::Proxy::start(
        &Webhook::leaf(&webhook.ca, "proxy"),
        tls::Upstream::Webhook {
            port: webhook.port,
            ca_pem: webhook.ca.pem.clone(),
        },
    );
    let release = Release::install_to(
        &env,
        "corpus",
        Target {
            url: proxy.url(),
            ca_pem: webhook.ca.pem.clone(),
        },
        json!({}),
    );
    webhook.start(&release.policy());
    let ns = release.namespace_in_use("corpus", &webhook);
    let (mutated, stderr) = dry_run_create(&env, &ns, &workloads);

    // No object the apiserver accepts alone is refused once the webhook has changed it.
    let lost: Vec<&String> = baseline
        .keys()
        .filter(|k| !mutated.contains_key(*k))
        .collect();
    assert!(
        lost.is_empty(),
        "refused only after the webhook's patch: {lost:?}\n{}",
        stderr
            .lines()
            .filter(|l| l.starts_with("Error"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Every GPU workload went through the mutating webhook; every patch it returned was
    // applied, and every value it wrote is in what the apiserver would store.
    let mut patched = 0;
    let mut reviewed = Vec::new();
    for exchange in proxy.exchanges() {
        if !exchange.path.starts_with("/mutate") {
            continue;
        }
        let request = &exchange.request["request"];
        let object = &request["object"];
        reviewed.push(key(object));
        let response = &exchange.response["response"];
        assert_eq!(response["allowed"], true, "{exchange:#?}");
        let fixable = !probelint_policies::mutate(object, &policy)
            .patch
            .0
            .is_empty();
        let Some(encoded) = response["patch"].as_str() else {
            assert!(
                !fixable,
                "{}: the engine has safe fixes, the webhook sent no patch",
                key(object)
            );
            continue;
        };
        assert_eq!(response["patchType"], "JSONPatch");
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("the patch is base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON Patch");
        let mut expected = object.clone();
        json_patch::patch(&mut expected, &patch).expect("the patch applies to its object");
        let Some(stored) = mutated.get(&key(object)) else {
            continue; // refused on its own as well (checked above)
        };
        for operation in &patch.0 {
            let path = operation_path(operation);
            let want = expected.pointer(&path).unwrap_or(&Value::Null);
            let got = stored.pointer(&path).unwrap_or(&Value::Null);
            assert!(
                holds(got, want),
                "{}: the apiserver dropped or changed what the patch wrote at {path}:\n\
                 patched: {want:#}\nstored: {got:#}",
                key(object)
            );
        }
        patched += 1;
    }
    for workload in &accelerated {
        assert!(
            reviewed.contains(workload),
            "{workload} never reached the mutating webhook"
        );
    }
    assert!(patched >= 25, "only {patched} corpus objects were patched");
    // The CRDs' objects are sent to both webhooks (the chart's rules name their resources).
    for endpoint in ["/mutate", "/validate/warn"] {
        let kinds: std::collections::BTreeSet<String> = proxy
            .exchanges()
            .iter()
            .filter(|e| e.path.starts_with(&format!("{endpoint}?")))
            .filter_map(|e| {
                e.request["request"]["kind"]["kind"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        for kind in [
            "LeaderWorkerSet",
            "InferenceService",
            "LLMInferenceService",
            "ClusterServingRuntime",
            "RayService",
            "RayJob",
        ] {
            assert!(
                kinds.contains(kind),
                "no {kind} reached {endpoint}: {kinds:?}"
            );
        }
    }
    eprintln!(
        "{} corpus workloads ({} with accelerators), {} accepted by the apiserver on their own, \
         {patched} patched by the webhook and accepted with the patch",
        workloads.len(),
        accelerated.len(),
        baseline.len()
    );
}

/// The `path` of an add or replace operation (the only ones the webhook writes values with);
/// the parent's path for others.
fn operation_path(operation: &json_patch::PatchOperation) -> String {
    use json_patch::PatchOperation::*;
    let path = match operation {
        Add(op) => op.path.to_string(),
        Replace(op) => op.path.to_string(),
        Remove(op) => parent(&op.path.to_string()),
        Move(op) => op.path.to_string(),
        Copy(op) => op.path.to_string(),
        Test(op) => op.path.to_string(),
    };
    // An append (`/-`): the whole array is compared.
    match path.strip_suffix("/-") {
        Some(array) => array.to_owned(),
        None => path,
    }
}

fn parent(path: &str) -> String {
    path.rsplit_once('/')
        .map(|(p, _)| p.to_owned())
        .unwrap_or_default()
}
