//! The webhook and the chart end to end, as a cluster admin meets them: the chart installed by
//! real Helm into a real kube-apiserver (with the real controller manager), the real
//! `probelint-webhook` binary answering it, `kubectl` for everything a user does. Each behaviour
//! the README and the chart README promise is a test here.
//!
//! Every test installs its own release, scoped to its own namespaces (see `e2e/mod.rs`), and
//! runs its own webhook, so the tests run in parallel on one control plane.

mod e2e;

use e2e::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// An image no policy knows: the webhook cannot guess its health endpoints, so it cannot fix
/// what is missing and enforce mode must refuse it.
const CUSTOM_IMAGE: &str = "registry.example/team/llm-server:1.4";

fn yaml(value: &Value) -> String {
    value.to_string()
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn enforce_mode_refuses_a_gpu_deployment_without_probes_naming_rule_container_and_fix() {
    let env = env("enforce_mode_refuses");
    let webhook = Webhook::prepare("enforce");
    let release = Release::install(
        &env,
        "enforce",
        &webhook,
        json!({"webhook": {"mode": "enforce"}}),
    );
    let ns = release.namespace_in_use("enforce", &webhook);
    let cluster = env.cluster;

    let bad = deployment(
        "llm",
        1,
        json!([gpu_container("server", CUSTOM_IMAGE, json!({}))]),
    );
    let out = cluster.apply(&yaml(&bad), &["-n", &ns, "--dry-run=server"]);
    assert!(!out.status.success(), "admitted:\n{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        // Who refused it and what.
        &format!(
            "admission webhook \"validate.probelint.io\" denied the request: probelint found 1 error in Deployment {ns}/llm:"
        ),
        // The rule, the container, and the fix. (No liveness: nothing can kill the load, so the
        // missing startupProbe is a warning, not a reason to refuse.)
        "- gpu-readiness-probe-missing: container \"server\" (requests nvidia.com/gpu) has no readinessProbe",
        "  fix: add a readinessProbe",
        "To exempt this object from a rule, annotate it with probelint.io/ignore",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    let denied = webhook.wait_review(&ns, "llm", "validate");
    assert_eq!(denied["decision"], "denied", "{denied}");
    assert_eq!(denied["dry_run"], true, "{denied}");
    assert!(
        cluster
            .kubectl_output(&["-n", &ns, "get", "deployment", "llm"])
            .status
            .code()
            != Some(0)
    );

    // The same Deployment with probes is admitted, for real, and stored.
    let good = deployment(
        "llm",
        1,
        json!([gpu_container("server", CUSTOM_IMAGE, good_probes())]),
    );
    let out = cluster.apply(&yaml(&good), &["-n", &ns]);
    let stdout = ok(&out, "kubectl apply of the good Deployment");
    assert!(stdout.contains("deployment.apps/llm created"), "{stdout}");
    let stored = cluster.get_json(&["-n", &ns, "get", "deployment", "llm"]);
    assert_eq!(
        stored["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"],
        "/ready"
    );
    // Four reviews of it: the refused dry run and the create, each by both webhooks.
    let admitted = webhook
        .settled_reviews_of(&ns, "llm", 4)
        .into_iter()
        .filter(|r| r["endpoint"] == "validate" && r["dry_run"] == false)
        .collect::<Vec<_>>();
    assert_eq!(admitted.len(), 1, "{admitted:#?}");
    assert_ne!(admitted[0]["decision"], "denied");
}

/// The smoke test's command line, as a document prints it: the `kubectl run
/// probelint-smoke-test` line and its continuation lines.
fn smoke_command(document: &str, what: &str) -> String {
    let mut lines = document
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("kubectl run probelint-smoke-test"));
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
    assert!(
        !command.is_empty(),
        "{what} has no `kubectl run probelint-smoke-test` command"
    );
    command
}

/// Runs a documented command line verbatim with `sh`, against the test cluster.
fn run_documented(env: &Env, command: &str) -> std::process::Output {
    std::process::Command::new("sh")
        .args(["-c", command])
        .env("KUBECONFIG", &env.cluster.kubeconfig)
        .output()
        .expect("sh")
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn warn_mode_admits_with_one_warning_per_finding_and_the_documented_smoke_test_prints_what_it_says()
{
    let env = env("warn_mode");
    let webhook = Webhook::prepare("warn");
    // The chart's defaults: warn mode, mutation on.
    let mut release = Release::install(&env, "warn", &webhook, json!({}));
    // The smoke test runs in `default` (the README's command names no namespace; the chart's
    // says `--namespace default`): only this test puts `default` in its scope.
    release.scope("default");
    release.wait_in_use(&webhook, "default");
    let readme =
        std::fs::read_to_string(probelint_testkit::repo_path("README.md")).expect("README");
    let chart_readme =
        std::fs::read_to_string(probelint_testkit::repo_path("charts/probelint/README.md"))
            .expect("chart README");
    let commands = [
        ("README.md", smoke_command(&readme, "README.md")),
        (
            "charts/probelint/README.md",
            smoke_command(&chart_readme, "the chart README"),
        ),
        (
            "the install NOTES",
            smoke_command(&release.notes, "the NOTES"),
        ),
    ];
    for (source, command) in &commands {
        let out = run_documented(&env, command);
        let stdout = ok(&out, &format!("the smoke test of {source}: {command}"));
        let warnings = warnings(&out);
        // The NOTES print the warnings word for word.
        for line in release
            .notes
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Warning: "))
        {
            assert!(
                warnings.iter().any(|w| w == line),
                "the NOTES say {line:?}; kubectl printed {warnings:#?}"
            );
        }
        // What the documents say kubectl prints: the fix the mutating webhook made, then for
        // each finding of the validating webhook what is wrong, followed by what to change in
        // that container (the indented lines).
        for (i, line) in warnings.iter().enumerate() {
            if line.starts_with("error ") || line.starts_with("info ") {
                assert!(
                    warnings
                        .get(i + 1)
                        .is_some_and(|next| next.starts_with("  fix in probelint-smoke-test: ")),
                    "{source}: no change follows {line:?}: {warnings:#?}"
                );
            }
        }
        assert_eq!(
            warnings
                .iter()
                .filter(|w| !w.starts_with("  "))
                .map(|w| w.split(':').next().unwrap_or("").to_owned())
                .collect::<Vec<_>>(),
            [
                "probelint fixed gpu-startup-probe-missing in probelint-smoke-test",
                "error gpu-readiness-probe-missing in probelint-smoke-test",
                "info gpu-graceful-shutdown-missing in probelint-smoke-test",
            ],
            "{source}: {warnings:#?}"
        );
        let printed: Value = serde_saphyr::from_str(&stdout).expect("kubectl printed YAML");
        assert_eq!(
            printed["metadata"]["annotations"]["probelint.io/mutated"],
            "gpu-startup-probe-missing:probelint-smoke-test",
            "{source}"
        );
        let startup = &printed["spec"]["containers"][0]["startupProbe"];
        assert_eq!(
            startup["httpGet"]["path"], "/health",
            "{source}: {printed:#}"
        );
        assert_eq!(startup["httpGet"]["port"], 8000, "{source}: {printed:#}");
    }
    // One warning per finding: the validating webhook's findings are the lines after the fix.
    let validated = webhook.wait_review("default", "probelint-smoke-test", "validate/warn");
    assert_eq!(validated["decision"], "warned");
    assert_eq!(
        validated["rules"], "gpu-readiness-probe-missing,gpu-graceful-shutdown-missing",
        "{validated}"
    );

    // A Deployment with more findings: admitted, still one line per finding.
    let ns = release.namespace_in_use("warn", &webhook);
    let bad = deployment(
        "two",
        1,
        json!([
            gpu_container("a", CUSTOM_IMAGE, json!({})),
            gpu_container(
                "b",
                CUSTOM_IMAGE,
                json!({"ports": [{"name": "http-b", "containerPort": 8081}],
                    "livenessProbe": {"exec": {"command": ["nvidia-smi"]}}})
            )
        ]),
    );
    let out = cluster_apply(&env, &bad, &ns, &[]);
    ok(&out, "kubectl apply in warn mode");
    let review = webhook.wait_review(&ns, "two", "validate/warn");
    let lines = warnings(&out);
    let from_validation: Vec<&String> = lines
        .iter()
        .filter(|w| !w.starts_with("probelint ") && !w.starts_with("  "))
        .collect();
    assert!(from_validation.len() >= 4, "{lines:#?}");
    for line in &from_validation {
        let rule = line.split_whitespace().nth(1).unwrap_or("");
        assert!(
            review["rules"]
                .as_str()
                .unwrap_or("")
                .split(',')
                .any(|r| r == rule),
            "{line} is not a finding of {review}"
        );
    }
    assert!(
        env.cluster
            .kubectl_output(&["-n", &ns, "get", "deployment", "two"])
            .status
            .success()
    );

    // The README's second step: `helm upgrade ... --reuse-values --set webhook.mode=enforce`.
    release.upgrade(json!({"webhook": {"mode": "enforce"}}), true);
    let out = wait_for(
        "enforce mode to reach the apiserver",
        Duration::from_secs(30),
        || {
            let out = run_documented(&env, &commands[0].1);
            (!out.status.success()).then_some(out)
        },
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "Error from server (Forbidden): admission webhook \"validate.probelint.io\" denied the request: \
         probelint found 1 error in Pod default/probelint-smoke-test:",
        "- gpu-readiness-probe-missing: container \"probelint-smoke-test\" (requests nvidia.com/gpu) has no readinessProbe",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    // What the enforce-mode NOTES say it prints (the first line wrapped in two, the last one
    // cut with "..."), as printed.
    let notes: Vec<&str> = release.notes.lines().map(str::trim).collect();
    let error = notes
        .iter()
        .position(|l| l.starts_with("Error from server"))
        .expect("the enforce-mode NOTES show the refusal");
    let first = format!("{} {}", notes[error], notes[error + 1]);
    let finding = notes[error + 2].trim_end_matches(" ...");
    for line in [first.as_str(), finding] {
        assert!(
            stderr.contains(line),
            "the NOTES say {line:?}; kubectl printed:\n{stderr}"
        );
    }
}

fn cluster_apply(env: &Env, object: &Value, ns: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    env.cluster.apply(&yaml(object), &all)
}

/// vLLM, requesting a GPU, with no probes: the mutating webhook knows its health endpoint.
fn vllm(name: &str) -> Value {
    gpu_container(
        name,
        "vllm/vllm-openai:v0.6.3",
        json!({"ports": [{"name": "http", "containerPort": 8000}]}),
    )
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn the_apiserver_applies_the_mutation_validates_it_and_stores_it() {
    let env = env("mutation_is_stored");
    let cluster = env.cluster;
    let webhook = Webhook::prepare("mutate");
    let release = Release::install(&env, "mutate", &webhook, json!({}));
    let ns = release.namespace_in_use("mutate", &webhook);

    // A Deployment, for real: the stored template has the startupProbe the webhook added.
    ok(
        &cluster_apply(
            &env,
            &deployment("vllm", 2, json!([vllm("vllm")])),
            &ns,
            &[],
        ),
        "apply",
    );
    let stored = cluster.get_json(&["-n", &ns, "get", "deployment", "vllm"]);
    let template = &stored["spec"]["template"];
    let startup = &template["spec"]["containers"][0]["startupProbe"];
    assert_eq!(startup["httpGet"]["path"], "/health", "{stored:#}");
    assert_eq!(startup["httpGet"]["port"], "http", "{stored:#}");
    // The apiserver's own defaults were applied to what the webhook added: it was validated.
    assert_eq!(startup["timeoutSeconds"], 1, "{stored:#}");
    assert_eq!(startup["successThreshold"], 1, "{stored:#}");
    assert!(
        stored["metadata"]["annotations"]["probelint.io/mutated"]
            .as_str()
            .is_some_and(|m| m.contains("gpu-startup-probe-missing:vllm")),
        "{stored:#}"
    );
    assert_eq!(
        webhook.wait_review(&ns, "vllm", "mutate")["decision"],
        "patched"
    );

    // Its ReplicaSet and Pods carry it; the Pods went through the mutating webhook with
    // nothing left to fix, and one ReplicaSet is all the Deployment controller made.
    let pods = wait_for("the Deployment's two Pods", Duration::from_secs(60), || {
        let pods = items(cluster, &["-n", &ns, "get", "pods", "-l", "app=vllm"]);
        (pods.len() == 2).then_some(pods)
    });
    for pod in &pods {
        assert_eq!(
            pod["spec"]["containers"][0]["startupProbe"]["httpGet"]["path"],
            "/health"
        );
    }
    // A controller's Pod has no name yet when the mutating webhook sees it (the apiserver
    // makes one from `generateName` afterwards), so its review is logged with an empty name.
    let pod_reviews = webhook.settled_reviews_of(&ns, "", 2);
    assert_eq!(pod_reviews.len(), 2, "{pod_reviews:#?}");
    for review in &pod_reviews {
        assert_eq!(
            (&review["kind"], &review["endpoint"]),
            (&json!("v1/Pod"), &json!("mutate"))
        );
        assert_eq!(
            review["decision"], "allowed",
            "nothing left to fix: {review}"
        );
    }
    assert_eq!(replicasets_of(cluster, &ns, "vllm").len(), 1);

    // A bare Pod, for real: stored with the probe.
    ok(
        &cluster_apply(&env, &pod("bare", json!([vllm("vllm")])), &ns, &[]),
        "apply the Pod",
    );
    let stored = cluster.get_json(&["-n", &ns, "get", "pod", "bare"]);
    assert_eq!(
        stored["spec"]["containers"][0]["startupProbe"]["httpGet"]["path"],
        "/health"
    );
    assert_eq!(
        stored["spec"]["containers"][0]["startupProbe"]["httpGet"]["port"],
        "http"
    );
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn out_of_scope_objects_never_reach_the_webhook() {
    let env = env("scope");
    let cluster = env.cluster;
    let webhook = Webhook::prepare("scope");
    let release = Release::install(
        &env,
        "scope",
        &webhook,
        json!({"webhook": {"acceleratorsOnly": {"enabled": true}}}),
    );
    let opted_out = release.namespace("scope-optout");
    cluster.kubectl_ok(&["label", "namespace", &opted_out, "probelint.io/ignore=true"]);
    // kube-system in this release's scope, so that only the chart's own exclusion keeps it out.
    release.scope("kube-system");
    // Labelled last: the apiserver learns of namespace labels in order, so once it calls the
    // webhook for this one it knows the labels above too.
    let ns = release.namespace_in_use("scope", &webhook);
    let requests_total = |webhook: &Webhook| -> f64 {
        webhook
            .metrics()
            .lines()
            .filter(|l| l.starts_with("probelint_webhook_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let cpu =
        json!([{"name": "web", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}]);
    let gpu = json!([vllm("vllm")]);

    let create = |object: &Value, ns: &str, dry_run: bool| {
        let args: &[&str] = if dry_run { &["--dry-run=server"] } else { &[] };
        ok(
            &cluster_apply(&env, object, ns, args),
            &format!("apply {object} in {ns}"),
        );
    };
    // A CPU-only Pod and Deployment (for real: its ReplicaSet's Pods are created too).
    create(&pod("cpu-pod", cpu.clone()), &ns, false);
    create(&deployment("cpu-deploy", 1, cpu.clone()), &ns, false);
    wait_for("the CPU Deployment's Pod", Duration::from_secs(60), || {
        (items(cluster, &["-n", &ns, "get", "pods", "-l", "app=cpu-deploy"]).len() == 1)
            .then_some(())
    });
    // GPU objects where the chart never sends them.
    create(&pod("gpu-in-kube-system", gpu.clone()), "kube-system", true);
    create(
        &pod("gpu-in-release-ns", gpu.clone()),
        &release.namespace,
        true,
    );
    create(&pod("gpu-in-opted-out-ns", gpu.clone()), &opted_out, true);
    // An object's own opt-out label is the webhook's to honour (the policy allows it here):
    // sent, allowed unevaluated, and logged with who sent it.
    let mut labelled = pod("gpu-opted-out", gpu.clone());
    labelled["metadata"]["labels"] = json!({"probelint.io/ignore": "true"});
    create(&labelled, &ns, true);
    // Last, a GPU Pod in scope: once its reviews are in, every request before it has been
    // answered, so what is absent was never sent.
    create(&pod("gpu-in-scope", gpu.clone()), &ns, true);
    webhook.wait_review(&ns, "gpu-in-scope", "mutate");
    webhook.wait_review(&ns, "gpu-in-scope", "validate/warn");

    // (The in-use probe of the namespace may have been sent once more before its first
    // reviews were read.)
    let all = webhook.reviews();
    let reviews: Vec<&Value> = all
        .iter()
        .filter(|r| r["name"] != "in-use-probe" && r["name"] != "gpu-opted-out")
        .collect();
    let names: Vec<&str> = reviews.iter().filter_map(|r| r["name"].as_str()).collect();
    assert!(
        names.iter().all(|n| *n == "gpu-in-scope"),
        "only the GPU Pods in scope reach the webhook; it was sent: {reviews:#?}"
    );
    assert_eq!(reviews.len(), 2, "{reviews:#?}");
    let opted: Vec<&Value> = all
        .iter()
        .filter(|r| r["name"] == "gpu-opted-out")
        .collect();
    assert_eq!(opted.len(), 2, "{opted:#?}");
    for review in opted {
        assert_eq!(review["decision"], "skipped", "{review}");
        assert_eq!(review["exempted_by"], "label", "{review}");
        assert!(
            review["user"].as_str().is_some_and(|u| !u.is_empty()),
            "{review}"
        );
    }
    // Its metrics say the same: a request counted for each review logged, nothing else.
    assert_eq!(
        requests_total(&webhook),
        all.len() as f64,
        "{}",
        webhook.metrics()
    );
}

/// How long the ReplicaSets of a Deployment are watched for a stream: the stream of
/// kubernetes/kubernetes#57167 makes a ReplicaSet per sync, within a second of the previous.
const NO_STREAM_WATCH: Duration = Duration::from_secs(30);

/// Watches `deployment`'s ReplicaSets for `NO_STREAM_WATCH`: panics as soon as there are more
/// than `expected`. Returns them.
fn watch_replicasets(env: &Env, ns: &str, deployment: &str, expected: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let sets = replicasets_of(env.cluster, ns, deployment);
        let names: Vec<&str> = sets
            .iter()
            .filter_map(|s| s["metadata"]["name"].as_str())
            .collect();
        assert!(
            sets.len() <= expected,
            "{deployment}: {} ReplicaSets after {:.0?}, expected {expected}: {names:?}",
            sets.len(),
            started.elapsed()
        );
        if started.elapsed() >= NO_STREAM_WATCH && sets.len() == expected {
            return sets;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn pods_of(env: &Env, ns: &str, app: &str) -> Vec<Value> {
    items(
        env.cluster,
        &["-n", ns, "get", "pods", "-l", &format!("app={app}")],
    )
}

fn template_hash(object: &Value) -> String {
    object["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn a_deployment_older_than_the_webhook_scales_and_restarts_with_one_replicaset_per_template() {
    let env = env("preexisting_deployment");
    let cluster = env.cluster;
    // The Deployment exists before the webhook: no startupProbe in its template.
    let ns = cluster.namespace("preexisting");
    let old = deployment("vllm", 1, json!([vllm("vllm")]));
    ok(
        &cluster_apply(&env, &old, &ns, &[]),
        "apply before the install",
    );
    wait_for("its first Pod", Duration::from_secs(60), || {
        (pods_of(&env, &ns, "vllm").len() == 1).then_some(())
    });

    // Then the chart, with its defaults (warn mode, mutation on), and the namespace in scope.
    let webhook = Webhook::prepare("preexisting");
    let release = Release::install(&env, "preexisting", &webhook, json!({}));
    release.scope(&ns);
    wait_for(
        "the webhook to see the namespace",
        Duration::from_secs(30),
        || {
            ok(
                &cluster_apply(
                    &env,
                    &pod("probe", json!([vllm("vllm")])),
                    &ns,
                    &["--dry-run=server"],
                ),
                "probe",
            );
            (!webhook.reviews_of(&ns, "probe").is_empty()).then_some(())
        },
    );

    // Scaled as an HPA does (the scale subresource), then by an UPDATE of the Deployment that
    // changes only `replicas` (what `kubectl apply` of a new replica count sends).
    cluster.kubectl_ok(&["-n", &ns, "scale", "deployment/vllm", "--replicas=3"]);
    let mut four = old.clone();
    four["spec"]["replicas"] = json!(4);
    ok(&cluster_apply(&env, &four, &ns, &[]), "apply replicas: 4");
    let pods = wait_for("four Pods", Duration::from_secs(60), || {
        let pods = pods_of(&env, &ns, "vllm");
        (pods.len() == 4).then_some(pods)
    });
    let sets = replicasets_of(cluster, &ns, "vllm");
    assert_eq!(sets.len(), 1, "{sets:#?}");
    assert_eq!(sets[0]["spec"]["replicas"], 4);
    // The Deployment's template was left alone (no unrequested rolling restart) ...
    let stored = cluster.get_json(&["-n", &ns, "get", "deployment", "vllm"]);
    assert!(
        stored["spec"]["template"]["spec"]["containers"][0]
            .get("startupProbe")
            .is_none(),
        "{stored:#}"
    );
    let update = wait_for(
        "the replicas UPDATE at the mutating webhook",
        Duration::from_secs(10),
        || {
            webhook
                .reviews_of(&ns, "vllm")
                .into_iter()
                .find(|r| r["operation"] == "UPDATE" && r["endpoint"] == "mutate")
        },
    );
    assert_ne!(update["decision"], "patched", "{update}");
    // ... and the new Pods got the fix at CREATE, the one that predates the webhook did not.
    let with_probe = pods
        .iter()
        .filter(|p| p["spec"]["containers"][0].get("startupProbe").is_some())
        .count();
    assert_eq!(with_probe, 3, "{pods:#?}");

    // `kubectl rollout restart` changes only the restartedAt annotation: one new ReplicaSet,
    // and the template still has no probe added by the webhook. The watch that follows also
    // covers the scaling above: a stream would have started from either.
    cluster.kubectl_ok(&["-n", &ns, "rollout", "restart", "deployment/vllm"]);
    let sets = watch_replicasets(&env, &ns, "vllm", 2);
    let stored = cluster.get_json(&["-n", &ns, "get", "deployment", "vllm"]);
    assert!(
        stored["spec"]["template"]["spec"]["containers"][0]
            .get("startupProbe")
            .is_none(),
        "{stored:#}"
    );
    for set in &sets {
        assert!(
            set["spec"]["template"]["spec"]["containers"][0]
                .get("startupProbe")
                .is_none(),
            "{set:#}"
        );
    }
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn enforce_mode_never_blocks_scaling_exempt_workloads_or_the_rollout_that_fixes_a_deployment() {
    let env = env("enforce_controllers");
    let cluster = env.cluster;
    // A bad GPU Deployment from before the webhook (unknown server, no probes at all).
    let ns = cluster.namespace("rollout");
    let bad = deployment(
        "llm",
        2,
        json!([gpu_container("server", CUSTOM_IMAGE, json!({}))]),
    );
    ok(
        &cluster_apply(&env, &bad, &ns, &[]),
        "apply before the install",
    );
    wait_for("its two Pods", Duration::from_secs(60), || {
        (pods_of(&env, &ns, "llm").len() == 2).then_some(())
    });

    let webhook = Webhook::prepare("rollout");
    let release = Release::install(
        &env,
        "rollout",
        &webhook,
        json!({"webhook": {"mode": "enforce"}}),
    );
    release.scope(&ns);
    wait_for(
        "the webhook to see the namespace",
        Duration::from_secs(30),
        || {
            let out = cluster_apply(&env, &bad, &ns, &["--dry-run=server", "--overwrite"]);
            let mut changed = bad.clone();
            changed["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!("registry.example/team/llm-server:1.5");
            let refused = !cluster_apply(&env, &changed, &ns, &["--dry-run=server"])
                .status
                .success();
            (out.status.success() && refused).then_some(())
        },
    );

    // `replicas: 0` to stop a bad workload, and back, as apply (an UPDATE of the Deployment)
    // and as `kubectl scale`: admitted, and the ReplicaSet follows.
    let mut stopped = bad.clone();
    stopped["spec"]["replicas"] = json!(0);
    let out = cluster_apply(&env, &stopped, &ns, &[]);
    ok(&out, "apply replicas: 0 in enforce mode");
    wait_for("the Pods to go", Duration::from_secs(60), || {
        pods_of(&env, &ns, "llm").is_empty().then_some(())
    });
    cluster.kubectl_ok(&["-n", &ns, "scale", "deployment/llm", "--replicas=2"]);
    wait_for("two Pods again", Duration::from_secs(60), || {
        (pods_of(&env, &ns, "llm").len() == 2).then_some(())
    });

    // The first change to its template that is still bad is refused ...
    let mut still_bad = bad.clone();
    still_bad["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example/team/llm-server:1.5");
    let out = cluster_apply(&env, &still_bad, &ns, &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("gpu-readiness-probe-missing"),
        "{}",
        text(&out)
    );

    // An ownerReference claims nothing: a new Deployment and a bare Pod naming the namespace's
    // kube-root-ca.crt ConfigMap (which anyone may read) as their controller are a person's,
    // and refused like any other.
    let uid = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "configmap",
        "kube-root-ca.crt",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let owner = json!([{
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "kube-root-ca.crt",
        "uid": uid.trim(),
        "controller": true
    }]);
    let mut claimed = deployment(
        "claimed",
        1,
        json!([gpu_container("server", CUSTOM_IMAGE, json!({}))]),
    );
    claimed["metadata"]["ownerReferences"] = owner.clone();
    let mut claimed_pod = pod(
        "claimed-pod",
        json!([gpu_container("server", CUSTOM_IMAGE, json!({}))]),
    );
    claimed_pod["metadata"]["ownerReferences"] = owner;
    for object in [&claimed, &claimed_pod] {
        let out = cluster_apply(&env, object, &ns, &["--dry-run=server"]);
        assert!(!out.status.success(), "admitted: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("gpu-readiness-probe-missing") && stderr.contains("is no controller"),
            "{}",
            text(&out)
        );
    }

    // ... the one that fixes it is admitted, and its rollout completes: a new ReplicaSet with
    // its Pods (created through the mutating webhook), the old one scaled down to zero. There
    // is no kubelet, so the test plays its part: it marks the new Pods Ready (through the
    // status subresource), which is what lets the Deployment controller scale the old
    // ReplicaSet down (maxUnavailable is 0 for 2 replicas at the default 25 %).
    let old_hash = template_hash(&replicasets_of(cluster, &ns, "llm")[0]);
    let mut fixed = bad.clone();
    fixed["spec"]["template"]["spec"]["containers"][0] =
        gpu_container("server", CUSTOM_IMAGE, good_probes());
    ok(
        &cluster_apply(&env, &fixed, &ns, &[]),
        "apply the fix in enforce mode",
    );
    wait_for("the rollout to complete", Duration::from_secs(90), || {
        for p in pods_of(&env, &ns, "llm") {
            let ready = p["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            if template_hash(&p) != old_hash && !ready {
                mark_ready(cluster, &ns, p["metadata"]["name"].as_str().unwrap_or(""));
            }
        }
        let status = cluster.kubectl_output(&[
            "-n",
            &ns,
            "rollout",
            "status",
            "deployment/llm",
            "--timeout=1s",
        ]);
        status.status.success().then_some(())
    });
    let sets = replicasets_of(cluster, &ns, "llm");
    assert_eq!(sets.len(), 2, "{sets:#?}");
    for set in &sets {
        let expected = if template_hash(set) == old_hash { 0 } else { 2 };
        assert_eq!(set["spec"]["replicas"], expected, "{set:#}");
        assert_eq!(
            set["status"]["replicas"].as_u64().unwrap_or(0),
            expected,
            "{set:#}"
        );
    }
    let pods = pods_of(&env, &ns, "llm");
    assert_eq!(pods.len(), 2, "{pods:#?}");
    assert!(pods.iter().all(|p| template_hash(p) != old_hash));

    // A Deployment exempted by annotation on its metadata (the README's example): admitted,
    // the mutating webhook copies the exemption into its template, and its Pods are created.
    let mut exempt = deployment(
        "exempt",
        2,
        json!([gpu_container("server", CUSTOM_IMAGE, json!({}))]),
    );
    exempt["metadata"]["annotations"] = json!({
        "probelint.io/ignore": "all",
        "probelint.io/ignore-reason": "load test, no traffic"
    });
    ok(
        &cluster_apply(&env, &exempt, &ns, &[]),
        "apply the exempted Deployment in enforce mode",
    );
    let pods = wait_for(
        "the exempted Deployment's two Pods",
        Duration::from_secs(60),
        || {
            let pods = pods_of(&env, &ns, "exempt");
            (pods.len() == 2).then_some(pods)
        },
    );
    for p in &pods {
        assert_eq!(
            p["metadata"]["annotations"]["probelint.io/ignore"], "all",
            "{p:#}"
        );
    }
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn updates_of_pods_and_jobs_are_admitted_with_no_patch_the_apiserver_refuses() {
    let env = env("updates");
    let cluster = env.cluster;
    // A bad GPU Pod, held by a scheduling gate (as Kueue holds one), and a suspended bad GPU
    // Job, both from before the webhook.
    let ns = cluster.namespace("updates");
    let mut gated = pod(
        "gated",
        json!([gpu_container("server", CUSTOM_IMAGE, json!({}))]),
    );
    gated["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
    ok(
        &cluster_apply(&env, &gated, &ns, &[]),
        "apply the gated Pod",
    );
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "eval"},
        "spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [gpu_container("eval", CUSTOM_IMAGE, json!({}))]
            }}
        }
    });
    ok(
        &cluster_apply(&env, &job, &ns, &[]),
        "apply the suspended Job",
    );

    // Enforce mode, and the UPDATEs of Pods and Jobs sent to the webhook too (the chart sends
    // only their CREATEs): what is tested is the webhook's own answer to them, which the
    // apiserver applies (a patch of a Pod's spec or a Job's template would be refused).
    let webhook = Webhook::prepare("updates");
    let extra = json!([
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"], "scope": "Namespaced"},
        {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["jobs"], "scope": "Namespaced"}
    ]);
    let release = Release::install(
        &env,
        "updates",
        &webhook,
        json!({"webhook": {"mode": "enforce", "extraRules": extra}}),
    );
    release.scope(&ns);
    wait_for(
        "the webhook to see the Pod's UPDATEs",
        Duration::from_secs(30),
        || {
            cluster.kubectl_ok(&[
                "-n",
                &ns,
                "label",
                "pod",
                "gated",
                "--overwrite",
                "team=serving",
            ]);
            (webhook.reviews_of(&ns, "gated").len() >= 2).then_some(())
        },
    );

    let before = webhook.settled_reviews_of(&ns, "gated", 2).len();
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "set",
        "image",
        "pod/gated",
        "server=registry.example/team/llm-server:1.5",
    ]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#,
    ]);
    let stored = cluster.get_json(&["-n", &ns, "get", "pod", "gated"]);
    assert_eq!(
        stored["spec"]["containers"][0]["image"],
        "registry.example/team/llm-server:1.5"
    );
    assert!(
        stored["spec"].get("schedulingGates").is_none(),
        "{stored:#}"
    );
    assert!(
        stored["metadata"]["annotations"]
            .get("probelint.io/mutated")
            .is_none(),
        "{stored:#}"
    );
    // Each UPDATE reached both webhooks, and neither denied or patched it.
    let reviews = webhook.settled_reviews_of(&ns, "gated", before + 4);
    assert_eq!(reviews.len(), before + 4, "{reviews:#?}");
    for review in &reviews {
        assert_eq!(review["operation"], "UPDATE");
        assert!(
            review["decision"] != "denied" && review["decision"] != "patched",
            "{review}"
        );
    }

    // Unsuspending the Job (what Kueue does to admit it): admitted, and the Job controller
    // creates its Pod.
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "job",
        "eval",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    let unsuspend = webhook.settled_reviews_of(&ns, "eval", 2);
    assert_eq!(unsuspend.len(), 2, "{unsuspend:#?}");
    for review in unsuspend {
        assert_eq!(review["operation"], "UPDATE");
        assert!(
            review["decision"] != "denied" && review["decision"] != "patched",
            "{review}"
        );
    }
    wait_for("the Job's Pod", Duration::from_secs(60), || {
        (!items(
            cluster,
            &[
                "-n",
                &ns,
                "get",
                "pods",
                "-l",
                "batch.kubernetes.io/job-name=eval",
            ],
        )
        .is_empty())
        .then_some(())
    });
}

fn cpu_deployment(name: &str) -> Value {
    deployment(
        name,
        1,
        json!([{"name": "web", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}]),
    )
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn with_the_webhook_down_what_people_apply_is_refused_and_running_workloads_still_scale() {
    let env = env("webhook_down");
    let cluster = env.cluster;
    // Enforce mode with the chart's defaults: every workload is sent, validation fails closed.
    let webhook = Webhook::prepare("down");
    let release = Release::install(
        &env,
        "down",
        &webhook,
        json!({"webhook": {"mode": "enforce"}}),
    );
    let ns = release.namespace_in_use("down", &webhook);
    // acceleratorsOnly: CPU workloads never wait on the webhook.
    let accel_webhook = Webhook::prepare("down-accel");
    let accel = Release::install(
        &env,
        "down-accel",
        &accel_webhook,
        json!({"webhook": {"mode": "enforce", "acceleratorsOnly": {"enabled": true}}}),
    );
    let accel_ns = accel.namespace_in_use("down-accel", &accel_webhook);
    // Warn mode (the chart's default) fails open: a webhook that is down blocks nothing.
    let warn_webhook = Webhook::prepare("down-warn");
    let warn = Release::install(&env, "down-warn", &warn_webhook, json!({}));
    let warn_ns = warn.namespace_in_use("down-warn", &warn_webhook);
    // A GPU Deployment admitted while the webhook was up (it passes every error rule: enforce).
    let clean = json!([gpu_container("server", CUSTOM_IMAGE, good_probes())]);
    ok(
        &cluster_apply(&env, &deployment("running", 1, clean.clone()), &ns, &[]),
        "apply while up",
    );
    wait_for("its Pod", Duration::from_secs(60), || {
        (pods_of(&env, &ns, "running").len() == 1).then_some(())
    });

    webhook.stop();
    accel_webhook.stop();
    warn_webhook.stop();
    ok(
        &cluster_apply(
            &env,
            &pod("gpu", json!([vllm("vllm")])),
            &warn_ns,
            &["--dry-run=server"],
        ),
        "a GPU Pod in warn mode with the webhook down",
    );

    let refused = |out: &std::process::Output, ns: &str| {
        assert!(
            !out.status.success(),
            "admitted in {ns} with the webhook down:\n{}",
            text(out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("failed calling webhook \"validate.probelint.io\"")
                && stderr.contains("connection refused"),
            "{stderr}"
        );
    };
    for ns in [&ns, &accel_ns] {
        refused(
            &cluster_apply(
                &env,
                &deployment("gpu", 1, json!([vllm("vllm")])),
                ns,
                &["--dry-run=server"],
            ),
            ns,
        );
        refused(
            &cluster_apply(
                &env,
                &pod("gpu", json!([vllm("vllm")])),
                ns,
                &["--dry-run=server"],
            ),
            ns,
        );
    }
    // With the defaults a CPU workload is refused too (the chart README's failurePolicy table:
    // every matching object); with acceleratorsOnly it is admitted.
    refused(
        &cluster_apply(&env, &cpu_deployment("cpu"), &ns, &["--dry-run=server"]),
        &ns,
    );
    ok(
        &cluster_apply(&env, &cpu_deployment("cpu"), &accel_ns, &[]),
        "a CPU Deployment with acceleratorsOnly",
    );
    wait_for("the CPU Deployment's Pod", Duration::from_secs(60), || {
        (pods_of(&env, &accel_ns, "cpu").len() == 1).then_some(())
    });
    // What controllers create never waits on the validating webhook, and mutation fails open:
    // the running GPU Deployment still scales, its new Pod is created.
    cluster.kubectl_ok(&["-n", &ns, "scale", "deployment/running", "--replicas=2"]);
    wait_for("the scaled-up Pod", Duration::from_secs(60), || {
        (pods_of(&env, &ns, "running").len() == 2).then_some(())
    });
    // Back up, a GPU object that passes is admitted again.
    webhook.start(&release.policy());
    ok(
        &cluster_apply(&env, &pod("gpu", clean), &ns, &["--dry-run=server"]),
        "webhook back",
    );
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn a_slow_webhook_is_cut_off_at_the_charts_timeout_and_the_message_says_so() {
    let env = env("webhook_slow");
    let webhook = Webhook::prepare("slow");
    // The apiserver calls a proxy in front of the webhook that can hold each review back.
    let proxy = tls::Proxy::start(
        &Webhook::leaf(&webhook.ca, "proxy"),
        tls::Upstream::Webhook {
            port: webhook.port,
            ca_pem: webhook.ca.pem.clone(),
        },
    );
    let release = Release::install_to(
        &env,
        "slow",
        Target {
            url: proxy.url(),
            ca_pem: webhook.ca.pem.clone(),
        },
        json!({"webhook": {"mode": "enforce", "timeoutSeconds": 2}}),
    );
    webhook.start(&release.policy());
    let ns = release.namespace_in_use("slow", &webhook);
    // Enforce mode fails closed; the pods pass every error rule, so only a timeout refuses one.
    ok(
        &cluster_apply(
            &env,
            &pod(
                "fast",
                json!([gpu_container("server", CUSTOM_IMAGE, good_probes())]),
            ),
            &ns,
            &["--dry-run=server"],
        ),
        "through the proxy",
    );
    assert_eq!(webhook.settled_reviews_of(&ns, "fast", 2).len(), 2);

    // Three seconds per review, against a timeout of two.
    proxy.set_delay(Duration::from_secs(3));
    let out = cluster_apply(
        &env,
        &pod(
            "slow",
            json!([gpu_container("server", CUSTOM_IMAGE, good_probes())]),
        ),
        &ns,
        &["--dry-run=server"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("failed calling webhook \"validate.probelint.io\"")
            && stderr.contains("/validate?timeout=2s")
            && stderr.contains("context deadline exceeded"),
        "{stderr}"
    );
    // The mutating webhook timed out as well, and its failurePolicy Ignore let the request go
    // on to validation (which refused it): kubectl says nothing of it, the apiserver's log does.
    proxy.set_delay(Duration::ZERO);
    ok(
        &cluster_apply(
            &env,
            &pod(
                "again",
                json!([gpu_container("server", CUSTOM_IMAGE, good_probes())]),
            ),
            &ns,
            &["--dry-run=server"],
        ),
        "fast again",
    );
}

#[test]
#[ignore = "e2e: a real control plane and real Helm; needs Go, kubectl, Python 3 and PyPI"]
fn the_serving_certificate_and_ca_bundle_rotate_while_objects_are_admitted_without_one_failure() {
    let env = env("rotation");
    let cluster = env.cluster;
    let webhook = Webhook::prepare("rotation");
    let mut release = Release::install(&env, "rotation", &webhook, json!({}));
    let ns = release.namespace_in_use("rotation", &webhook);
    let old_ca = webhook.ca.pem.clone();
    let new_ca = probelint_cluster::Ca::new("probelint-e2e rotation webhook CA 2");

    // Objects are created all along, each through both webhooks. Warn mode fails open, so an
    // object admitted after a handshake the apiserver could not verify has no review in the
    // webhook's log: every admitted object must have one (checked below).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let admitted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let creator = {
        let (stop, admitted, ns) = (stop.clone(), admitted.clone(), ns.clone());
        let kubeconfig = cluster.kubeconfig.clone();
        std::thread::spawn(move || {
            let (mut failures, mut names) = (Vec::new(), Vec::new());
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let object = pod(&format!("during-{n}"), json!([vllm("vllm")]));
                let out = run_with_stdin(
                    std::process::Command::new("kubectl")
                        .arg(format!("--kubeconfig={}", kubeconfig.display()))
                        .args(["-n", &ns, "apply", "--dry-run=server", "-f", "-"]),
                    &object.to_string(),
                );
                if out.status.success() {
                    names.push(format!("during-{n}"));
                    admitted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                } else {
                    failures.push(text(&out));
                }
                n += 1;
            }
            (failures, names)
        })
    };
    let admitted_more = |what: &str, count: usize| {
        let start = admitted.load(std::sync::atomic::Ordering::SeqCst);
        wait_for(what, Duration::from_secs(60), || {
            (admitted.load(std::sync::atomic::Ordering::SeqCst) >= start + count).then_some(())
        });
    };
    // Waits until the apiserver calls the webhook with the configurations of the latest
    // upgrade: each upgrade also widens the scope to one more namespace, and a review from
    // there comes only through the new configurations (the caBundle is in the same object).
    let upgraded_in_use = |generation: &str| {
        let probe = env.cluster.namespace(&format!("rotation-{generation}"));
        env.cluster.kubectl_ok(&[
            "label",
            "namespace",
            &probe,
            &format!("{SCOPE_LABEL}={generation}"),
        ]);
        wait_for(
            "the upgraded configurations in use",
            Duration::from_secs(60),
            || {
                ok(
                    &cluster_apply(
                        &env,
                        &pod("probe", json!([vllm("vllm")])),
                        &probe,
                        &["--dry-run=server"],
                    ),
                    "probe",
                );
                let endpoints: Vec<Value> = webhook
                    .reviews_of(&probe, "probe")
                    .iter()
                    .map(|r| r["endpoint"].clone())
                    .collect();
                (endpoints.contains(&json!("mutate"))
                    && endpoints.contains(&json!("validate/warn")))
                .then_some(())
            },
        );
    };
    let scope = |generation: &str| json!([{"key": SCOPE_LABEL, "operator": "In", "values": ["rotation", generation]}]);
    admitted_more("admissions before the rotation", 3);

    // 1. helm upgrade: the caBundle trusts the new CA and the old one.
    release.upgrade(
        json!({"webhook": {
            "external": {"caBundle": format!("{}{}", new_ca.pem, old_ca)},
            "namespaceSelectorExpressions": scope("v2")
        }}),
        true,
    );
    upgraded_in_use("v2");
    admitted_more("admissions with both CAs trusted", 3);
    // 2. The Secret is renewed: the mounted files swap, the webhook reloads them.
    webhook.rotate_certificate(&Webhook::leaf(&new_ca, "v2"));
    admitted_more("admissions after the certificate swap", 3);
    // 3. helm upgrade: only the new CA.
    release.upgrade(
        json!({"webhook": {
            "external": {"caBundle": new_ca.pem.clone()},
            "namespaceSelectorExpressions": scope("v3")
        }}),
        true,
    );
    upgraded_in_use("v3");
    admitted_more("admissions with only the new CA trusted", 3);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (failures, names) = creator.join().expect("the creating thread");
    assert!(
        failures.is_empty(),
        "{} admissions failed during the rotation: {failures:#?}",
        failures.len()
    );
    // The objects were created one after another: once the last one's review is logged, every
    // earlier one's is.
    if let Some(last) = names.last() {
        webhook.wait_review(&ns, last, "validate/warn");
    }
    let reviewed: std::collections::HashSet<String> = webhook
        .reviews()
        .iter()
        .filter(|r| r["namespace"] == ns.as_str() && r["endpoint"] == "validate/warn")
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    let unreviewed: Vec<&String> = names.iter().filter(|n| !reviewed.contains(*n)).collect();
    assert!(
        unreviewed.is_empty(),
        "{} of {} objects were admitted without a review (the apiserver could not reach the \
         webhook and failed open): {unreviewed:?}",
        unreviewed.len(),
        names.len()
    );

    // The webhook serves the new certificate (the old CA no longer verifies it), and the
    // apiserver trusts only the new CA.
    let review = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"operation":"CREATE","userInfo":{},"object":{}}}"#;
    assert!(tls::post(webhook.port, &new_ca.pem, "/validate", review.as_bytes()).is_ok());
    assert!(tls::post(webhook.port, &old_ca, "/validate", review.as_bytes()).is_err());
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let bundle = release.configuration(kind)["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_default();
        use base64::Engine as _;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .expect("base64");
        assert_eq!(
            String::from_utf8_lossy(&pem).trim(),
            new_ca.pem.trim(),
            "{kind}"
        );
    }
}
