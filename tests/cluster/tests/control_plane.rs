//! The test control plane behaves like a cluster's: a Deployment becomes a ReplicaSet and Pods
//! (which stay Pending: no scheduler, no kubelet), RBAC is enforced, and a server-side dry run
//! goes through the apiserver's validation.

use std::time::Duration;

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.invalid/web:1
";

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn a_deployment_becomes_a_replicaset_and_pending_pods() {
    let cluster = probelint_cluster::shared("a_deployment_becomes_a_replicaset_and_pending_pods");
    let ns = cluster.namespace("control-plane");
    let applied = cluster.apply(DEPLOYMENT, &["-n", &ns]);
    assert!(applied.status.success(), "{applied:?}");
    let pods = probelint_cluster::wait_for(
        "two pods of the Deployment",
        Duration::from_secs(60),
        || {
            let pods = cluster.get_json(&["-n", &ns, "get", "pods", "-l", "app=web"]);
            let items = pods["items"].as_array().cloned().unwrap_or_default();
            (items.len() == 2).then_some(items)
        },
    );
    for pod in &pods {
        assert_eq!(pod["status"]["phase"], "Pending", "{pod:#}");
        let owner = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ReplicaSet");
        assert_eq!(owner["controller"], true);
    }
    let replicasets = cluster.get_json(&["-n", &ns, "get", "replicasets"]);
    assert_eq!(replicasets["items"].as_array().map(Vec::len), Some(1));
    cluster
        .all_running()
        .expect("the control plane is still up");
}

#[test]
#[ignore = "e2e: a real control plane; needs Go and kubectl"]
fn rbac_is_enforced_and_dry_runs_are_validated() {
    let cluster = probelint_cluster::shared("rbac_is_enforced_and_dry_runs_are_validated");
    // The apiserver reports the pinned version (clients such as Helm check it).
    let version = cluster.get_json(&["version"]);
    assert_eq!(
        version["serverVersion"]["gitVersion"],
        cluster.version.as_str(),
        "{version}"
    );
    let ns = cluster.namespace("rbac");
    let can =
        cluster.kubectl_output(&["auth", "can-i", "create", "pods", "-n", &ns, "--as=nobody"]);
    assert_eq!(String::from_utf8_lossy(&can.stdout).trim(), "no");
    let admin = cluster.kubectl_output(&["auth", "can-i", "create", "pods", "-n", &ns]);
    assert_eq!(String::from_utf8_lossy(&admin.stdout).trim(), "yes");

    // The apiserver's own validation, not a local one: a probe with successThreshold 2 on a
    // liveness probe is refused.
    let invalid = DEPLOYMENT.replace(
        "          image: registry.invalid/web:1\n",
        "          image: registry.invalid/web:1\n          livenessProbe: {tcpSocket: {port: 80}, successThreshold: 2}\n",
    );
    let refused = cluster.apply(&invalid, &["-n", &ns, "--dry-run=server"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("successThreshold") && stderr.contains("must be 1"),
        "{stderr}"
    );
}
