//! A read-only view of a container probe with Kubernetes' defaults applied.

use crate::fields::pick;
use crate::text::shown;
use serde_json::Value;

/// The three probes a container can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// A probe's port: `port: 8080` or `port: http`. YAML `"8080"` is a name, as the apiserver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef<'a> {
    Number(i64),
    Name(&'a str),
    /// No port given (or not a number or string).
    Missing,
}

impl<'a> PortRef<'a> {
    fn from_value(value: Option<&'a Value>) -> Self {
        match value {
            Some(Value::Number(n)) => n.as_i64().map_or(PortRef::Missing, PortRef::Number),
            Some(Value::String(s)) => PortRef::Name(s),
            _ => PortRef::Missing,
        }
    }
}

impl std::fmt::Display for PortRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(s) => write!(f, "{s:?}"),
            PortRef::Missing => f.write_str("(none)"),
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

/// A probe timing field: what the manifest says, with Kubernetes' default when it says nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Default(i64),
    Set(i64),
    /// Present but not an integer (a string, a float, ...): the apiserver would reject it.
    Invalid,
}

impl Field {
    /// The effective value (for invalid fields, the default, so arithmetic stays meaningful).
    pub fn get(self, default: i64) -> i64 {
        match self {
            Field::Default(v) | Field::Set(v) => v,
            Field::Invalid => default,
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

/// Kubernetes' probe defaults.
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
        let field = |found: Option<&Value>, default: i64| match found {
            None | Some(Value::Null) => Field::Default(default),
            Some(v) => v.as_i64().map_or(Field::Invalid, Field::Set),
        };
        Probe {
            kind,
            pointer,
            value,
            handler: handler_of([http_get, tcp_socket, grpc, exec]),
            initial_delay_seconds: field(initial_delay, DEFAULT_INITIAL_DELAY),
            period_seconds: field(period, DEFAULT_PERIOD),
            timeout_seconds: field(timeout, DEFAULT_TIMEOUT),
            success_threshold: field(success, DEFAULT_SUCCESS_THRESHOLD),
            failure_threshold: field(failure, DEFAULT_FAILURE_THRESHOLD),
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

    /// How long the kubelet lets this probe fail from container start before acting:
    /// `initialDelaySeconds + failureThreshold × periodSeconds`.
    pub fn budget_seconds(&self) -> i64 {
        // Saturating: the fields are int32 in Kubernetes, but a manifest can hold any integer.
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
                port: PortRef::from_value(port),
                host: host.and_then(Value::as_str),
            }
        }
        1 => Handler::TcpSocket {
            port: PortRef::from_value(h.get("port")),
        },
        2 => {
            let [port, service] = pick(h, ["port", "service"]);
            Handler::Grpc {
                port: PortRef::from_value(port),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn quoted_port_is_a_name_and_string_thresholds_are_invalid() {
        let v = json!({"tcpSocket": {"port": "8080"}, "failureThreshold": "30", "initialDelaySeconds": 5});
        let p = Probe::from_value(ProbeKind::Readiness, "/p".into(), &v);
        assert_eq!(
            p.handler,
            Handler::TcpSocket {
                port: PortRef::Name("8080")
            }
        );
        assert_eq!(p.failure_threshold, Field::Invalid);
        assert_eq!(
            p.budget_arithmetic().to_string(),
            "35 s (5 s delay + 3 × 10 s)"
        );
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
