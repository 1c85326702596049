//! The test node runs pods: the kubelet registers, reports Ready, and runs a pod bound to it by
//! `nodeName` with a locally built image, on an address from the node's pod subnet; and when it
//! stops, the machine is as it was: every kernel setting it changed, its cgroup tree, its
//! mounts, its bridge.
//!
//! The node suite (tier 3): root, and it changes this machine while it runs, so it is ignored
//! and refuses to start without `PROBELINT_NODE_SUITE=1 PROBELINT_HOST_IS_DISPOSABLE=1` (see
//! `probelint_cluster::node`).

use std::time::Duration;

#[test]
#[ignore = "node suite: a real kubelet as root, changes this machine; PROBELINT_NODE_SUITE=1 PROBELINT_HOST_IS_DISPOSABLE=1"]
fn the_kubelet_registers_and_runs_a_pod_from_a_local_image() {
    let test = "the_kubelet_registers_and_runs_a_pod_from_a_local_image";
    probelint_cluster::node::require_node_suite(test);
    let cluster = probelint_cluster::shared(test);
    let before = sysctls();
    let node = probelint_cluster::node::start_for(test, cluster);
    let ns = cluster.namespace("node");
    let pod = format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: sleeper}}
spec:
  nodeName: {}
  automountServiceAccountToken: false
  containers:
    - name: pause
      image: {}
      imagePullPolicy: Never
",
        probelint_cluster::node::NODE_NAME,
        probelint_cluster::node::PAUSE_IMAGE
    );
    let applied = cluster.apply(&pod, &["-n", &ns]);
    assert!(applied.status.success(), "{applied:?}");
    let running = probelint_cluster::wait_for("the pod to run", Duration::from_secs(90), || {
        let pod = cluster.get_json(&["-n", &ns, "get", "pod", "sleeper"]);
        (pod["status"]["phase"] == "Running").then_some(pod)
    });
    let ip = running["status"]["podIP"].as_str().unwrap_or_default();
    assert!(ip.starts_with("10.244.213."), "pod IP {ip}: {running:#}");
    let node_object = cluster.get_json(&["get", "node", probelint_cluster::node::NODE_NAME]);
    assert_eq!(
        node_object["status"]["nodeInfo"]["kubeletVersion"], cluster.version,
        "the kubelet is at the apiserver's version"
    );
    assert!(
        node_object["status"]["nodeInfo"]["containerRuntimeVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("containerd://")),
        "{:#}",
        node_object["status"]["nodeInfo"]
    );
    // What the node changed on the machine is undone when it stops. (It did change it: the
    // kubelet sets vm.overcommit_memory to 1 at start.)
    assert_eq!(
        sysctls()[0].1.trim(),
        "1",
        "the kubelet's overcommit setting"
    );
    let (dir, cgroup_root) = (node.dir.clone(), node.cgroup_root().to_owned());
    drop(node);
    assert_eq!(
        sysctls(),
        before,
        "the kernel settings the kubelet wrote are restored"
    );
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(dir.to_str().unwrap()),
        "a mount is left under {}",
        dir.display()
    );
    assert!(!dir.exists(), "{} is left", dir.display());
    let memory = std::path::Path::new("/sys/fs/cgroup/memory");
    let cgroup = if memory.is_dir() {
        memory.join(cgroup_root.trim_start_matches('/'))
    } else {
        std::path::Path::new("/sys/fs/cgroup").join(cgroup_root.trim_start_matches('/'))
    };
    assert!(!cgroup.exists(), "{} is left", cgroup.display());
    let bridge = std::path::Path::new("/sys/class/net/probelint0");
    assert!(!bridge.exists(), "the bridge is left");
}

/// The settings the kubelet and the CNI bridge write at start, by name (the first is
/// `vm/overcommit_memory`).
fn sysctls() -> Vec<(&'static str, String)> {
    probelint_cluster::node::SYSCTLS
        .iter()
        .map(|name| {
            let value = std::fs::read_to_string(format!("/proc/sys/{name}"))
                .unwrap_or_else(|e| panic!("read /proc/sys/{name}: {e}"));
            (*name, value)
        })
        .collect()
}
