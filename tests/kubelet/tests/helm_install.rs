//! The chart installed the way users install it, on the real node: the webhook image built from
//! the tree (the release image's recipe, `scripts/build-images.sh`: the executable, as uid
//! 65532, in an otherwise empty root filesystem) imported into the node's containerd under the
//! reference the chart pulls by default, then the README's commands verbatim against the test
//! cluster: `helm install` of `charts/probelint` with default values (in-cluster: the Deployment,
//! the Service, Helm-generated certificates), `rollout status`, the smoke test in warn mode, the
//! `helm upgrade` to enforce and the smoke test refused, one replica deleted while applies go
//! on, and `helm uninstall`.
//!
//! The control plane runs kube-scheduler (the chart's pods name no node) and reaches the webhook
//! Service at its EndpointSlices' ready addresses (there is no kube-proxy for a ClusterIP):
//! `probelint_cluster::Options`. Helm is the CLI, built from `tests/cluster/go/helm`.
//!
//! The node suite (tier 3): root, and it changes this machine while it runs, so it is ignored
//! and refuses to start without `PROBELINT_NODE_SUITE=1 PROBELINT_HOST_IS_DISPOSABLE=1`.

use probelint_cluster::{Cluster, Image, Options};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// What the README installs: release `probelint` in namespace `probelint`.
const RELEASE: &str = "probelint";
const NAMESPACE: &str = "probelint";

#[test]
#[ignore = "node suite: a real kubelet as root, changes this machine; PROBELINT_NODE_SUITE=1 PROBELINT_HOST_IS_DISPOSABLE=1"]
fn the_chart_installs_in_cluster_warns_enforces_survives_a_replica_loss_and_uninstalls() {
    let test = "the_chart_installs_in_cluster";
    probelint_cluster::node::require_node_suite(test);
    let helm = probelint_cluster::helm().unwrap_or_else(|e| panic!("{test}: helm: {e}"));
    let cluster = probelint_cluster::shared_with(
        test,
        Options {
            service_endpoints: true,
            scheduler: true,
        },
    );
    let node = probelint_cluster::node::start_for(test, cluster);
    let shell = Shell::new(cluster, &helm);

    // The release image, under the reference the chart's default values name.
    let chart =
        std::fs::read_to_string(probelint_testkit::repo_path("charts/probelint/Chart.yaml"))
            .expect("Chart.yaml");
    let app_version = probelint_testkit::yaml::objects(&chart)[0]["appVersion"]
        .as_str()
        .expect("Chart.yaml has an appVersion")
        .to_owned();
    let reference = format!("ghcr.io/probelint/probelint-webhook:{app_version}");
    import_release_image(
        &node,
        &reference,
        &probelint_kubelet_conformance::workspace_binary("probelint-webhook"),
    );

    // 1. The README's install, with the chart from the tree in place of its OCI reference (the
    // chart README: "From a clone: `charts/probelint` in place of the OCI reference").
    let readme =
        std::fs::read_to_string(probelint_testkit::repo_path("README.md")).expect("README");
    let install = command_at(&readme, "helm install probelint ").replace(
        "oci://ghcr.io/probelint/charts/probelint",
        "charts/probelint",
    );
    let installed = shell.run(&install);
    let notes = ok(&installed, &install);
    ok(
        &shell.run(&command_at(&readme, "kubectl -n probelint rollout status")),
        "rollout status",
    );

    // Two replicas Ready on the node, from the imported image, never pulled.
    let pods = webhook_pods(cluster);
    assert_eq!(pods.len(), 2, "{pods:#?}");
    for pod in &pods {
        assert_eq!(pod["spec"]["nodeName"], probelint_cluster::node::NODE_NAME);
        assert_eq!(pod["spec"]["containers"][0]["image"], reference.as_str());
        assert!(ready(pod), "{pod:#}");
        assert_eq!(
            pod["status"]["containerStatuses"][0]["restartCount"], 0,
            "{pod:#}"
        );
    }

    // Helm generated the certificates: a TLS Secret, and its CA in both webhook configurations
    // (the smoke test below proves the apiserver trusts what the pods serve).
    let secret = cluster.get_json(&["-n", NAMESPACE, "get", "secret", "probelint-tls"]);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(
            secret["data"][key].as_str().is_some_and(|v| !v.is_empty()),
            "the Secret has no {key}: {secret:#}"
        );
    }
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let configuration = cluster.get_json(&["get", kind, RELEASE]);
        let hook = &configuration["webhooks"][0];
        assert_eq!(
            hook["clientConfig"]["caBundle"], secret["data"]["ca.crt"],
            "{kind}"
        );
        assert_eq!(
            hook["clientConfig"]["service"]["name"], "probelint",
            "{kind}"
        );
        assert_eq!(hook["failurePolicy"], "Ignore", "{kind} in warn mode");
    }

    // 2. Warn mode: the README's smoke test, verbatim. The apiserver starts calling the new
    // configurations once its informer has them; until then (Ignore) the pod is admitted
    // without a word, so wait for the first warning.
    let smoke = smoke_command(&readme);
    let warned = probelint_cluster::wait_for(
        "the apiserver to call the in-cluster webhook",
        Duration::from_secs(60),
        || {
            let out = shell.run(&smoke);
            (out.status.success() && !warnings(&out).is_empty()).then_some(out)
        },
    );
    let printed = probelint_testkit::yaml::objects(&String::from_utf8_lossy(&warned.stdout));
    let startup = &printed[0]["spec"]["containers"][0]["startupProbe"];
    assert_eq!(startup["httpGet"]["path"], "/health", "{printed:#?}");
    let lines = warnings(&warned);
    for expected in [
        "probelint fixed gpu-startup-probe-missing in probelint-smoke-test",
        "error gpu-readiness-probe-missing in probelint-smoke-test",
        "info gpu-graceful-shutdown-missing in probelint-smoke-test",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(expected)),
            "no warning starts with {expected:?}: {lines:#?}"
        );
    }
    // The install's NOTES print the warnings word for word.
    for line in notes
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Warning: "))
    {
        assert!(
            lines.iter().any(|w| w == line),
            "the NOTES say {line:?}; kubectl printed {lines:#?}"
        );
    }

    // 3. The README's upgrade to enforce, verbatim; the certificate is kept.
    let upgrade = command_at(&readme, "helm upgrade probelint charts/probelint");
    ok(&shell.run(&upgrade), &upgrade);
    let after = cluster.get_json(&["-n", NAMESPACE, "get", "secret", "probelint-tls"]);
    assert_eq!(
        after["data"], secret["data"],
        "helm upgrade kept the certificate"
    );
    let refused = probelint_cluster::wait_for(
        "enforce mode to reach the apiserver",
        Duration::from_secs(60),
        || {
            let out = shell.run(&smoke);
            (!out.status.success()).then_some(out)
        },
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(
            "Error from server (Forbidden): admission webhook \"validate.probelint.io\" denied \
             the request: probelint found 1 error in Pod default/probelint-smoke-test:"
        ),
        "{stderr}"
    );

    // 4. One replica killed while applies go on: with failurePolicy Fail, an apply that no
    // replica answered would be refused ("failed calling webhook"), so every good Deployment
    // must be admitted and every bad one refused by the webhook itself.
    let ns = cluster.namespace("helm-install");
    let good = deployment("good", good_container());
    let bad = deployment(
        "bad",
        json!({"name": "server", "image": CUSTOM_IMAGE,
            "ports": [{"name": "http", "containerPort": 8080}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}),
    );
    let victim = pods[0]["metadata"]["name"]
        .as_str()
        .expect("a pod name")
        .to_owned();
    let stop = AtomicBool::new(false);
    let rounds = AtomicUsize::new(0);
    let applies = std::thread::scope(|scope| {
        let applier = scope.spawn(|| {
            let mut answered = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                answered.push((
                    cluster.apply(&good, &["-n", &ns, "--dry-run=server"]),
                    cluster.apply(&bad, &["-n", &ns, "--dry-run=server"]),
                ));
                rounds.fetch_add(1, Ordering::SeqCst);
            }
            answered
        });
        probelint_cluster::wait_for(
            "the first round of applies",
            Duration::from_secs(60),
            || (rounds.load(Ordering::SeqCst) > 0).then_some(()),
        );
        let before = rounds.load(Ordering::SeqCst);
        // Deleted at once (no grace period, as a crash or a lost node would take it), so that
        // only the other replica can answer: with one replica the apiserver then refuses
        // applies ("no endpoints available for service"; checked with `replicaCount=1`), while a
        // graceful delete was carried by the dying pod's preStop sleep and its fast replacement
        // even with one replica, and proved nothing about the second.
        ok(
            &cluster.kubectl_output(&[
                "-n",
                NAMESPACE,
                "delete",
                "pod",
                &victim,
                "--grace-period=0",
                "--force",
            ]),
            "kubectl delete pod",
        );
        probelint_cluster::wait_for(
            "a new replica Ready in place of the deleted one",
            Duration::from_secs(120),
            || {
                let pods = webhook_pods(cluster);
                (pods.len() == 2
                    && pods.iter().all(ready)
                    && pods
                        .iter()
                        .all(|p| p["metadata"]["name"] != victim.as_str()))
                .then_some(())
            },
        );
        // One more round once both replicas serve again.
        let replaced = rounds.load(Ordering::SeqCst);
        probelint_cluster::wait_for("a round of applies after", Duration::from_secs(60), || {
            (rounds.load(Ordering::SeqCst) > replaced).then_some(())
        });
        stop.store(true, Ordering::SeqCst);
        let answered = applier.join().expect("the applier thread");
        eprintln!(
            "{test}: {} rounds of applies in all, {} of them from `kubectl delete pod {victim}` \
             until its replacement was Ready",
            answered.len(),
            replaced - before
        );
        answered
    });
    let during = applies.len();
    for (i, (good, bad)) in applies.iter().enumerate() {
        assert!(
            good.status.success(),
            "round {i} of {during}: the good Deployment was refused while a replica was \
             replaced:\n{}",
            text(good)
        );
        let refusal = String::from_utf8_lossy(&bad.stderr);
        assert!(
            !bad.status.success()
                && refusal
                    .contains("admission webhook \"validate.probelint.io\" denied the request"),
            "round {i} of {during}: the bad Deployment was not refused by the webhook:\n{}",
            text(bad)
        );
    }

    // 5. `helm uninstall` leaves no webhook configuration: the smoke test is admitted as
    // written, with no warning and no startupProbe added.
    ok(
        &shell.run("helm uninstall probelint -n probelint --wait"),
        "helm uninstall",
    );
    for kind in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ] {
        let left = cluster.kubectl_ok(&["get", kind, "-o", "name"]);
        assert!(left.trim().is_empty(), "left behind: {left}");
    }
    let plain = probelint_cluster::wait_for(
        "the apiserver to stop calling the webhooks",
        Duration::from_secs(60),
        || {
            let out = shell.run(&smoke);
            (out.status.success() && warnings(&out).is_empty()).then_some(out)
        },
    );
    let printed = probelint_testkit::yaml::objects(&String::from_utf8_lossy(&plain.stdout));
    assert!(
        printed[0]["spec"]["containers"][0]["startupProbe"].is_null(),
        "{printed:#?}"
    );
    drop(node);
}

/// The webhook's release image as `scripts/build-images.sh` writes it (`oci-image`: the
/// executable, with the shared libraries it loads here, at /usr/local/bin, run as 65532), for
/// the binary built beside this test, imported the way docs/install.md says for a node's
/// containerd: `ctr -n k8s.io images import --all-platforms`.
fn import_release_image(node: &probelint_cluster::Node, reference: &str, binary: &Path) {
    let at = "/usr/local/bin/probelint-webhook";
    let mut image = Image::new(reference);
    image
        .executable_with_libraries(binary, at)
        .unwrap_or_else(|e| panic!("{e}"))
        .entrypoint(&[at])
        .user("65532:65532")
        .label("org.opencontainers.image.title", "probelint-webhook");
    let archive = probelint_cluster::multi_platform_archive(reference, &[image])
        .unwrap_or_else(|e| panic!("{e}"));
    let file = node.dir.join("probelint-webhook.tar");
    std::fs::write(&file, archive).expect("write the image archive");
    let out = node
        .ctr()
        .args([
            "images",
            "import",
            "--all-platforms",
            "--snapshotter",
            "overlayfs",
        ])
        .arg(&file)
        .output()
        .expect("ctr");
    ok(&out, "ctr images import");
}

/// `sh -c` in the repository's root, as a user runs the README's commands from a clone: the
/// test cluster's kubeconfig, the built `helm` first on PATH, Helm's own files in a directory
/// of the test's.
struct Shell {
    kubeconfig: PathBuf,
    path: String,
    helm_home: tempfile::TempDir,
}

impl Shell {
    fn new(cluster: &Cluster, helm: &Path) -> Shell {
        let dir = helm.parent().expect("helm's directory");
        Shell {
            kubeconfig: cluster.kubeconfig.clone(),
            path: format!(
                "{}:{}",
                dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
            helm_home: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn run(&self, command: &str) -> Output {
        let home = self.helm_home.path();
        Command::new("sh")
            .args(["-c", command])
            .current_dir(probelint_testkit::repo_root())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .output()
            .unwrap_or_else(|e| panic!("sh -c {command}: {e}"))
    }
}

/// The command a document shows starting with `start`, with its continuation lines joined.
fn command_at(document: &str, start: &str) -> String {
    let mut lines = document
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with(start));
    let mut command = String::new();
    for line in lines.by_ref() {
        match line.strip_suffix('\\') {
            Some(head) => command.push_str(head),
            None => {
                command.push_str(line);
                break;
            }
        }
    }
    assert!(!command.is_empty(), "the README has no `{start}…` command");
    command
}

fn smoke_command(readme: &str) -> String {
    command_at(readme, "kubectl run probelint-smoke-test")
}

/// The webhook's pods that are not being deleted.
fn webhook_pods(cluster: &Cluster) -> Vec<Value> {
    cluster.get_json(&[
        "-n",
        NAMESPACE,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/instance=probelint",
    ])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// An image no policy knows: the webhook cannot fix what it lacks, so enforce mode refuses it.
const CUSTOM_IMAGE: &str = "registry.example/team/llm-server:1.4";

fn good_container() -> Value {
    json!({
        "name": "server",
        "image": CUSTOM_IMAGE,
        "ports": [{"name": "http", "containerPort": 8080}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        "startupProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "failureThreshold": 60},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
        "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}
    })
}

fn deployment(name: &str, container: Value) -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]}
            }
        }
    })
    .to_string()
}

fn warnings(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("Warning: "))
        .map(str::to_owned)
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        text(out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
