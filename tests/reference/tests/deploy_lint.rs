//! The Deployment manifests beside the Dockerfiles lint clean with probelint's own engine (the
//! built-in policy, no exemptions), their args are accepted by the real CLI, and the check has
//! teeth: the same manifests with a probe removed do not pass.

use clap::Parser;
use probelint_policies::{Finding, Policy, Severity, evaluate};
use probelint_reference::config::{Cli, Command};
use serde_json::Value;
use std::path::PathBuf;

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn load(name: &str) -> Vec<Value> {
    let path = deploy_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    probelint_testkit::yaml::try_objects(&text)
        .unwrap_or_else(|e| panic!("{}:{}:{}: {}", path.display(), e.line, e.column, e.message))
}

fn problems(objects: &[Value]) -> Vec<Finding> {
    let policy = Policy::builtin().expect("built-in policy");
    evaluate(objects, &policy)
        .into_iter()
        .filter(|f| f.severity >= Severity::Warning || f.is_suppressed())
        .collect()
}

fn server_container(objects: &[Value]) -> Value {
    objects[0]["spec"]["template"]["spec"]["containers"][0].clone()
}

#[test]
fn deploy_manifests_lint_clean() {
    let mut names: Vec<String> = std::fs::read_dir(deploy_dir())
        .expect("deploy dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert_eq!(names, ["reference-cpu.yaml", "reference-cuda.yaml"]);
    for name in &names {
        let objects = load(name);
        assert!(!objects.is_empty(), "{name}");
        let found = problems(&objects);
        assert!(found.is_empty(), "{name}: {found:#?}");
    }
}

#[test]
fn deploy_manifest_args_parse_with_the_real_cli() {
    for name in ["reference-cpu.yaml", "reference-cuda.yaml"] {
        let objects = load(name);
        let spec = &objects[0]["spec"]["template"]["spec"];
        let containers = spec["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(spec["containers"].as_array().into_iter().flatten());
        for container in containers {
            let args: Vec<&str> = container["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("string arg"))
                .collect();
            let cli = Cli::try_parse_from(
                std::iter::once("reference-server").chain(args.iter().copied()),
            )
            .unwrap_or_else(|e| panic!("{name}: {args:?}: {e}"));
            if let Command::Serve(serve) = cli.command {
                let port = container["ports"][0]["containerPort"]
                    .as_u64()
                    .expect("port");
                assert_eq!(
                    u64::from(serve.listen.port()),
                    port,
                    "{name}: --listen matches the declared port"
                );
            }
        }
    }
}

#[test]
fn the_lint_check_has_teeth() {
    // Without its startupProbe the GPU manifest must fail (it is recognised as a GPU workload).
    let mut objects = load("reference-cuda.yaml");
    let container = &mut objects[0]["spec"]["template"]["spec"]["containers"][0];
    container
        .as_object_mut()
        .expect("container")
        .remove("startupProbe");
    let found = problems(&objects);
    assert!(
        found.iter().any(|f| f.rule == "gpu-startup-probe-missing"),
        "{found:#?}"
    );
    // A tcpSocket readiness on the CPU manifest is caught too.
    let mut objects = load("reference-cpu.yaml");
    assert_eq!(
        server_container(&objects)["readinessProbe"]["httpGet"]["path"],
        "/readyz"
    );
    objects[0]["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] =
        serde_json::json!({ "tcpSocket": { "port": "http" } });
    let found = problems(&objects);
    assert!(
        found.iter().any(|f| f.rule == "readiness-port-open"),
        "{found:#?}"
    );
}
