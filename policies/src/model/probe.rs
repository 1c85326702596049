//! A read-only view of a container probe with Kubernetes' defaults applied.

use crate::model::apiserver::{self, FieldProblem, IntType, Port, PortKind, PortProblem};
use crate::model::fields::pick;
use crate::model::text::shown;
use serde_json::Value;

/// The three probes a container can have. Ordered and serialized as the engine lists them
/// (`startup`, `readiness`, `liveness`): the one name of a probe kind in findings, timelines,
/// audit evidence and the simulated kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Startup,
        ProbeKind::Readiness,
        ProbeKind::Liveness,
    ];

    /// The container field holding the probe (`startupProbe`).
    pub fn field(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startupProbe",
            ProbeKind::Readiness => "readinessProbe",
            ProbeKind::Liveness => "livenessProbe",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Liveness => "liveness",
        }
    }

    /// The kind a kubelet Event names (`Startup probe failed: …`, `Liveness`, `Readiness`).
    pub fn from_event_word(word: &str) -> Option<ProbeKind> {
        match word {
            "Startup" => Some(ProbeKind::Startup),
            "Readiness" => Some(ProbeKind::Readiness),
            "Liveness" => Some(ProbeKind::Liveness),
            _ => None,
        }
    }
}

impl std::fmt::Display for ProbeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.noun())
    }
}

/// A probe's port: `port: 8080` or `port: http`, or a port the apiserver refuses. YAML `"8080"`
/// is a name, as the apiserver sees it, and not a valid one (a name needs a letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortRef<'a> {
    /// 1–65535.
    Number(i64),
    /// A valid port name, resolved among the container's declared ports.
    Name(&'a str),
    /// What the apiserver refuses: absent, out of range, not a number or name, a bad name.
    Invalid(PortProblem<'a>),
}

impl<'a> PortRef<'a> {
    fn from_value(value: Option<&'a Value>, kind: PortKind) -> Self {
        match apiserver::port(value, kind) {
            Ok(Port::Number(n)) => PortRef::Number(n),
            Ok(Port::Name(name)) => PortRef::Name(name),
            Err(problem) => PortRef::Invalid(problem),
        }
    }
}

impl std::fmt::Display for PortRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(s) => write!(f, "{s:?}"),
            PortRef::Invalid(PortProblem::Missing) => f.write_str("(none)"),
            PortRef::Invalid(PortProblem::BadName(s) | PortProblem::NameNotAllowed(s)) => {
                write!(f, "{s:?}")
            }
            PortRef::Invalid(PortProblem::OutOfRange(n)) => write!(f, "{n}"),
            PortRef::Invalid(PortProblem::Undecodable(v, _)) => write!(f, "{v}"),
        }
    }
}

/// What a probe does to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler<'a> {
    HttpGet {
        path: &'a str,
        port: PortRef<'a>,
        host: Option<&'a str>,
    },
    TcpSocket {
        port: PortRef<'a>,
    },
    Grpc {
        port: PortRef<'a>,
        service: Option<&'a str>,
    },
    Exec {
        command: Vec<String>,
    },
    /// No handler, or more than one (the apiserver rejects both).
    Invalid,
}

impl<'a> Handler<'a> {
    pub fn kind(&self) -> &'static str {
        match self {
            Handler::HttpGet { .. } => "httpGet",
            Handler::TcpSocket { .. } => "tcpSocket",
            Handler::Grpc { .. } => "grpc",
            Handler::Exec { .. } => "exec",
            Handler::Invalid => "invalid",
        }
    }

    pub fn port(&self) -> Option<&PortRef<'a>> {
        match self {
            Handler::HttpGet { port, .. }
            | Handler::TcpSocket { port }
            | Handler::Grpc { port, .. } => Some(port),
            Handler::Exec { .. } | Handler::Invalid => None,
        }
    }

    /// A short human description: `httpGet /health on port 8000`.
    pub fn describe(&self) -> impl std::fmt::Display + '_ {
        shown(move |f| match self {
            Handler::HttpGet { path, port, .. } => write!(f, "httpGet {path} on port {port}"),
            Handler::TcpSocket { port } => write!(f, "tcpSocket on port {port}"),
            Handler::Grpc { port, .. } => write!(f, "grpc on port {port}"),
            Handler::Exec { command } => {
                f.write_str("exec `")?;
                for (i, word) in command.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    f.write_str(word)?;
                }
                f.write_str("`")
            }
            Handler::Invalid => f.write_str("no valid handler"),
        })
    }

    /// The key under the probe that holds the handler (`httpGet`), for pointers.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Handler::Invalid => None,
            other => Some(other.kind()),
        }
    }
}

/// A probe timing field as the apiserver stores it: what the manifest says, Kubernetes' default
/// when it says nothing (or, for the fields `SetDefaults_Probe` defaults, says 0), or why the
/// apiserver refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Absent or null.
    Default(i64),
    /// Written as 0, which the apiserver replaces with this default.
    Zero(i64),
    Set(i64),
    /// Negative or not decodable: the apiserver refuses the pod.
    Invalid(FieldProblem),
}

impl Field {
    /// The effective value (for invalid fields, the default, so arithmetic stays meaningful).
    pub fn get(self, default: i64) -> i64 {
        match self {
            Field::Default(v) | Field::Zero(v) | Field::Set(v) => v,
            Field::Invalid(_) => default,
        }
    }

    pub fn is_invalid(self) -> bool {
        matches!(self, Field::Invalid(_))
    }

    /// A timing field (int32, not negative) from its value; `zero_default` for the fields whose
    /// 0 the apiserver replaces with the default (all but initialDelaySeconds, whose default is 0).
    fn from_value(found: Option<&Value>, default: i64, zero_default: bool) -> Self {
        match found {
            None | Some(Value::Null) => Field::Default(default),
            Some(v) => match apiserver::integer(v, IntType::Int32) {
                Ok(0) if zero_default => Field::Zero(default),
                Ok(n) if n < 0 => Field::Invalid(FieldProblem::Negative(n)),
                Ok(n) => Field::Set(n),
                Err(why) => Field::Invalid(FieldProblem::Undecodable(why)),
            },
        }
    }
}

/// A probe on a container.
#[derive(Debug, Clone)]
pub struct Probe<'a> {
    pub kind: ProbeKind,
    /// Pointer to the probe (`.../containers/0/readinessProbe`).
    pub pointer: String,
    pub value: &'a Value,
    pub handler: Handler<'a>,
    pub initial_delay_seconds: Field,
    pub period_seconds: Field,
    pub timeout_seconds: Field,
    pub success_threshold: Field,
    pub failure_threshold: Field,
}

/// Kubernetes' probe defaults (`SetDefaults_Probe` in kubernetes/kubernetes
/// `pkg/apis/core/v1/defaults.go`; initialDelaySeconds is simply 0 when unset).
pub const DEFAULT_INITIAL_DELAY: i64 = 0;
pub const DEFAULT_PERIOD: i64 = 10;
pub const DEFAULT_TIMEOUT: i64 = 1;
pub const DEFAULT_SUCCESS_THRESHOLD: i64 = 1;
pub const DEFAULT_FAILURE_THRESHOLD: i64 = 3;

impl<'a> Probe<'a> {
    pub fn from_value(kind: ProbeKind, pointer: String, value: &'a Value) -> Self {
        let [
            initial_delay,
            period,
            timeout,
            success,
            failure,
            http_get,
            tcp_socket,
            grpc,
            exec,
        ] = pick(
            value,
            [
                "initialDelaySeconds",
                "periodSeconds",
                "timeoutSeconds",
                "successThreshold",
                "failureThreshold",
                "httpGet",
                "tcpSocket",
                "grpc",
                "exec",
            ],
        );
        Probe {
            kind,
            pointer,
            value,
            handler: handler_of([http_get, tcp_socket, grpc, exec]),
            initial_delay_seconds: Field::from_value(initial_delay, DEFAULT_INITIAL_DELAY, false),
            period_seconds: Field::from_value(period, DEFAULT_PERIOD, true),
            timeout_seconds: Field::from_value(timeout, DEFAULT_TIMEOUT, true),
            success_threshold: Field::from_value(success, DEFAULT_SUCCESS_THRESHOLD, true),
            failure_threshold: Field::from_value(failure, DEFAULT_FAILURE_THRESHOLD, true),
        }
    }

    pub fn initial_delay(&self) -> i64 {
        self.initial_delay_seconds.get(DEFAULT_INITIAL_DELAY)
    }
    pub fn period(&self) -> i64 {
        self.period_seconds.get(DEFAULT_PERIOD)
    }
    pub fn timeout(&self) -> i64 {
        self.timeout_seconds.get(DEFAULT_TIMEOUT)
    }
    pub fn failure_threshold(&self) -> i64 {
        self.failure_threshold.get(DEFAULT_FAILURE_THRESHOLD)
    }
    pub fn success_threshold(&self) -> i64 {
        self.success_threshold.get(DEFAULT_SUCCESS_THRESHOLD)
    }

    /// Whether every timing field is one the apiserver accepts. Rules that judge a probe's
    /// timing skip a probe that fails this: `probe-threshold-invalid` reports it, and arithmetic
    /// with a default in place of what the manifest says would contradict the manifest.
    pub fn timings_valid(&self) -> bool {
        ![
            self.initial_delay_seconds,
            self.period_seconds,
            self.timeout_seconds,
            self.success_threshold,
            self.failure_threshold,
        ]
        .iter()
        .any(|f| f.is_invalid())
    }

    /// How long the kubelet lets this probe fail from container start before acting:
    /// `initialDelaySeconds + failureThreshold × periodSeconds`.
    pub fn budget_seconds(&self) -> i64 {
        // Valid fields are int32s, whose product fits an i64; saturating keeps that obvious.
        let per_failures = self
            .failure_threshold()
            .max(0)
            .saturating_mul(self.period().max(0));
        self.initial_delay().max(0).saturating_add(per_failures)
    }

    /// `60 s (initialDelay 0 + 6 × 10 s)` — the arithmetic shown in messages.
    pub fn budget_arithmetic(&self) -> impl std::fmt::Display + '_ {
        shown(move |f| {
            let delay = self.initial_delay();
            if delay > 0 {
                write!(
                    f,
                    "{} s ({} s delay + {} × {} s)",
                    self.budget_seconds(),
                    delay,
                    self.failure_threshold(),
                    self.period()
                )
            } else {
                write!(
                    f,
                    "{} s ({} × {} s)",
                    self.budget_seconds(),
                    self.failure_threshold(),
                    self.period()
                )
            }
        })
    }
}

/// The handler of a probe from its `httpGet`, `tcpSocket`, `grpc` and `exec` fields: exactly one
/// of them must be set (present and not null).
fn handler_of<'a>(handlers: [Option<&'a Value>; 4]) -> Handler<'a> {
    let mut set = handlers
        .into_iter()
        .enumerate()
        .filter_map(|(i, h)| h.filter(|v| !v.is_null()).map(|h| (i, h)));
    let (Some((which, h)), None) = (set.next(), set.next()) else {
        return Handler::Invalid;
    };
    match which {
        0 => {
            let [path, port, host] = pick(h, ["path", "port", "host"]);
            Handler::HttpGet {
                path: path.and_then(Value::as_str).unwrap_or("/"),
                port: PortRef::from_value(port, PortKind::NumberOrName),
                host: host.and_then(Value::as_str),
            }
        }
        1 => Handler::TcpSocket {
            port: PortRef::from_value(crate::model::fields::get(h, "port"), PortKind::NumberOrName),
        },
        2 => {
            let [port, service] = pick(h, ["port", "service"]);
            Handler::Grpc {
                port: PortRef::from_value(port, PortKind::Number),
                service: service.and_then(Value::as_str),
            }
        }
        _ => Handler::Exec {
            command: h
                .get("command")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        },
    }
}

const SHELLS: &[&str] = &["sh", "bash", "dash", "ash", "zsh"];

/// Why an exec probe command is expensive (nvidia-smi, Python, a shell pipeline), if it is.
pub fn heavy_exec(command: &[String]) -> Option<&'static str> {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
    let program = command.first().map(|p| base(p)).unwrap_or_default();
    // probelint-probe (`probeHelper`) is a static binary that bounds its own cost: a few HTTP
    // calls, each under `--timeout`, and at most one smoke inference per `--interval`
    // (docs/probe-helper.md: about 1 ms of CPU and 2 MB per run). Its flags (`--smoke-body`
    // JSON, a `--model` name) may hold any word, so they are not read as a command line.
    if is_probe_helper(command) {
        return None;
    }
    let words: Vec<&str> = command.iter().flat_map(|a| a.split_whitespace()).collect();
    if words.iter().any(|w| base(w) == "nvidia-smi") {
        return Some("runs nvidia-smi (NVML initialisation on every probe)");
    }
    let is_python = |w: &str| {
        let b = base(w);
        b == "python" || b.starts_with("python3") || b == "python2"
    };
    if words.iter().any(|w| is_python(w)) {
        return Some("starts a Python interpreter on every probe");
    }
    if SHELLS.contains(&program.as_str()) && command.iter().skip(1).any(|a| a.contains('|')) {
        return Some("runs a shell pipeline (only the last command's failure counts)");
    }
    None
}

/// Whether an exec command runs `probelint-probe` with one of its probe subcommands: a check
/// of the server's own ready, live or startup signal, never a port check.
pub fn is_probe_helper(command: &[String]) -> bool {
    let program = command.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    program == Some("probelint-probe")
        && command
            .get(1)
            .is_some_and(|sub| ["startup", "ready", "live", "worker"].contains(&sub.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_probe_helper_is_recognised_and_never_heavy() {
        let cmd = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A smoke body may say anything; the helper's flags are not a command line.
        let ready = cmd(&[
            "/probelint/bin/probelint-probe",
            "ready",
            "--server",
            "triton",
            "--smoke-body",
            "python | nvidia-smi",
        ]);
        assert!(is_probe_helper(&ready));
        assert_eq!(heavy_exec(&ready), None);
        assert!(!is_probe_helper(&cmd(&[
            "probelint-probe",
            "install",
            "/out"
        ])));
        assert!(!is_probe_helper(&cmd(&[
            "sh",
            "-c",
            "probelint-probe ready"
        ])));
    }

    #[test]
    fn defaults_give_a_thirty_second_budget() {
        let v = json!({"httpGet": {"path": "/health", "port": 8000}});
        let p = Probe::from_value(ProbeKind::Startup, "/p".into(), &v);
        assert_eq!(p.budget_seconds(), 30);
        assert_eq!(p.budget_arithmetic().to_string(), "30 s (3 × 10 s)");
        assert_eq!(
            p.handler,
            Handler::HttpGet {
                path: "/health",
                port: PortRef::Number(8000),
                host: None
            }
        );
    }

    #[test]
    fn quoted_port_is_an_invalid_name_and_string_thresholds_are_invalid() {
        let v = json!({"tcpSocket": {"port": "8080"}, "failureThreshold": "30", "initialDelaySeconds": 5});
        let p = Probe::from_value(ProbeKind::Readiness, "/p".into(), &v);
        assert_eq!(
            p.handler,
            Handler::TcpSocket {
                port: PortRef::Invalid(PortProblem::BadName("8080"))
            }
        );
        assert!(p.failure_threshold.is_invalid());
        assert!(!p.timings_valid());
        assert_eq!(
            p.budget_arithmetic().to_string(),
            "35 s (5 s delay + 3 × 10 s)"
        );
    }

    #[test]
    fn zero_fields_are_the_apiserver_defaults_and_zero_delay_is_just_zero() {
        let v = json!({"httpGet": {"path": "/h", "port": 8000}, "initialDelaySeconds": 0,
            "periodSeconds": 0, "timeoutSeconds": 0, "successThreshold": 0, "failureThreshold": 0});
        let p = Probe::from_value(ProbeKind::Startup, "/p".into(), &v);
        assert_eq!(p.initial_delay_seconds, Field::Set(0));
        assert_eq!(p.period_seconds, Field::Zero(DEFAULT_PERIOD));
        assert_eq!(p.timeout_seconds, Field::Zero(DEFAULT_TIMEOUT));
        assert_eq!(p.success_threshold, Field::Zero(DEFAULT_SUCCESS_THRESHOLD));
        assert_eq!(p.failure_threshold, Field::Zero(DEFAULT_FAILURE_THRESHOLD));
        assert!(p.timings_valid());
        assert_eq!((p.period(), p.timeout(), p.success_threshold()), (10, 1, 1));
        assert_eq!(p.budget_arithmetic().to_string(), "30 s (3 × 10 s)");
    }

    #[test]
    fn negative_and_out_of_int32_fields_are_invalid_and_budgets_use_defaults() {
        use crate::model::apiserver::{IntType, Undecodable};
        let v = json!({"exec": {"command": ["true"]}, "periodSeconds": -5,
            "failureThreshold": 2147483648u64, "initialDelaySeconds": 1e300, "timeoutSeconds": 2.0});
        let p = Probe::from_value(ProbeKind::Liveness, "/p".into(), &v);
        assert_eq!(p.period_seconds, Field::Invalid(FieldProblem::Negative(-5)));
        assert_eq!(
            p.failure_threshold,
            Field::Invalid(FieldProblem::Undecodable(Undecodable::OutOfRange(
                IntType::Int32
            )))
        );
        assert!(p.initial_delay_seconds.is_invalid());
        assert_eq!(p.timeout_seconds, Field::Set(2), "kubectl sends 2.0 as 2");
        assert_eq!(p.budget_seconds(), 30);
    }

    #[test]
    fn two_handlers_or_none_is_invalid() {
        let v = json!({"tcpSocket": {"port": 1}, "exec": {"command": ["true"]}});
        fn handler(v: &Value) -> Handler<'_> {
            Probe::from_value(ProbeKind::Liveness, "/p".into(), v).handler
        }
        assert_eq!(handler(&v), Handler::Invalid);
        assert_eq!(handler(&json!({"periodSeconds": 5})), Handler::Invalid);
    }
}
