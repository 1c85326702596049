//! What the harness needs from a manifest: one container's env, ports and probe handlers. Probe
//! timings and the kill's timing come from the engine (`ProbeTiming::from_probe`,
//! `scenario_for_pod`), the same numbers `probelint simulate` runs with.

use probelint_policies::simulate::{KillTiming, ProbeTiming, scenario_for_pod};
use serde_json::Value;

/// A probe's check.
#[derive(Debug, Clone, PartialEq)]
pub enum Handler {
    /// `httpGet`; `port` is the container port it targets (names resolved against `ports`).
    Http {
        path: String,
        port: u16,
    },
    Tcp {
        port: u16,
    },
    Exec {
        command: Vec<String>,
    },
}

/// A probe: its check, and its timing in manifest seconds with Kubernetes' defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    pub handler: Handler,
    pub timing: ProbeTiming,
}

/// One container of a manifest, as the harness runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub name: String,
    /// `env` entries with literal values (the reference server takes its faults from these).
    pub env: Vec<(String, String)>,
    /// Declared container ports (number, optional name).
    pub ports: Vec<(u16, Option<String>)>,
    pub startup: Option<ProbeSpec>,
    pub readiness: Option<ProbeSpec>,
    pub liveness: Option<ProbeSpec>,
    /// Grace periods and the preStop hook's sleep, as the engine reads them.
    pub kill: KillTiming,
}

/// Why a manifest cannot be run.
#[derive(Debug)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

/// The pod spec of a Pod or of a workload's template.
fn pod_spec(object: &Value) -> Option<&Value> {
    object
        .pointer("/spec/template/spec")
        .or_else(|| object.get("spec").filter(|s| s.get("containers").is_some()))
}

fn resolve_port(value: Option<&Value>, ports: &[(u16, Option<String>)]) -> Result<u16, SpecError> {
    match value {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(|| SpecError(format!("port {n} is out of range"))),
        Some(Value::String(name)) => ports
            .iter()
            .find(|(_, n)| n.as_deref() == Some(name.as_str()))
            .map(|(p, _)| *p)
            .ok_or_else(|| SpecError(format!("named port {name:?} is not declared"))),
        _ => Err(SpecError("probe without a port".to_owned())),
    }
}

fn probe(
    container: &Value,
    field: &str,
    ports: &[(u16, Option<String>)],
    timing: Option<ProbeTiming>,
) -> Result<Option<ProbeSpec>, SpecError> {
    let Some(p) = container.get(field).filter(|p| p.is_object()) else {
        return Ok(None);
    };
    let handler = if let Some(h) = p.get("httpGet") {
        Handler::Http {
            path: h
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or("/")
                .to_owned(),
            port: resolve_port(h.get("port"), ports)?,
        }
    } else if let Some(h) = p.get("tcpSocket") {
        Handler::Tcp {
            port: resolve_port(h.get("port"), ports)?,
        }
    } else if let Some(h) = p.get("exec") {
        Handler::Exec {
            command: h
                .get("command")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        }
    } else {
        return Err(SpecError(format!(
            "{field} has no httpGet, tcpSocket or exec handler"
        )));
    };
    let timing =
        timing.ok_or_else(|| SpecError(format!("{field}: the engine sees no such probe")))?;
    Ok(Some(ProbeSpec { handler, timing }))
}

impl ContainerSpec {
    /// The container named `name` (or the first one) of a Pod or workload object.
    pub fn from_object(object: &Value, name: Option<&str>) -> Result<Self, SpecError> {
        let containers = pod_spec(object)
            .and_then(|s| s.get("containers"))
            .and_then(Value::as_array)
            .ok_or_else(|| SpecError("no pod spec with containers".to_owned()))?;
        let container = containers
            .iter()
            .find(|c| name.is_none_or(|n| c.get("name").and_then(Value::as_str) == Some(n)))
            .ok_or_else(|| SpecError(format!("no container {name:?}")))?;
        let ports: Vec<(u16, Option<String>)> = container
            .get("ports")
            .and_then(Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .filter_map(|p| {
                        let number = u16::try_from(p.get("containerPort")?.as_u64()?).ok()?;
                        Some((
                            number,
                            p.get("name").and_then(Value::as_str).map(str::to_owned),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let env = container
            .get("env")
            .and_then(Value::as_array)
            .map(|env| {
                env.iter()
                    .filter_map(|e| {
                        Some((
                            e.get("name")?.as_str()?.to_owned(),
                            e.get("value")?.as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let name = container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let policy = probelint_policies::Policy::default();
        let objects = std::slice::from_ref(object);
        let analysis = probelint_policies::Analysis::new(objects, &policy);
        let cx = analysis
            .containers()
            .find(|cx| *cx.container.name == *name)
            .ok_or_else(|| SpecError(format!("the engine finds no container {name:?}")))?;
        let engine = scenario_for_pod(cx.pod, cx.container, 0.0, 0.0);
        Ok(ContainerSpec {
            name,
            env,
            startup: probe(container, "startupProbe", &ports, engine.startup)?,
            readiness: probe(container, "readinessProbe", &ports, engine.readiness)?,
            liveness: probe(container, "livenessProbe", &ports, engine.liveness)?,
            kill: engine.kill,
            ports,
        })
    }

    /// The container port the server listens on: the first declared one, else 8080.
    pub fn serving_port(&self) -> u16 {
        self.ports.first().map_or(8080, |(p, _)| *p)
    }
}

/// Parses a one-object YAML manifest, as the CLI reads it (YAML 1.1).
pub fn parse_manifest(yaml: &str) -> Result<Value, SpecError> {
    let error = |line, column, message| SpecError(format!("manifest:{line}:{column}: {message}"));
    let mut documents = probelint_testkit::yaml::try_objects(yaml)
        .map_err(|e| error(e.line, e.column, e.message))?;
    match documents.len() {
        1 => Ok(documents.remove(0)),
        n => Err(SpecError(format!(
            "manifest: {n} documents, expected one object"
        ))),
    }
}
