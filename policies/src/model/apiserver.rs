//! What the apiserver makes of the fields the engine reads: how it decodes a JSON number into an
//! `int32`/`int64` field, and which ports and port names its validation lets through. Rules use
//! this to judge a manifest the way the apiserver will, and to stay silent where it would not
//! complain (a `periodSeconds: 0` is defaulted, not refused).
//!
//! Sources (kubernetes/kubernetes):
//! - `pkg/apis/core/v1/defaults.go`, `SetDefaults_Probe`: a probe's timeoutSeconds,
//!   periodSeconds, successThreshold and failureThreshold that are 0 become 1, 10, 1 and 3.
//! - `pkg/apis/core/validation/validation.go`: `validateProbe` (every timing field
//!   `ValidateNonnegativeField`, probe `terminationGracePeriodSeconds` > 0), `validateLivenessProbe`
//!   and `validateStartupProbe` (successThreshold must be 1), `validateReadinessProbe` (no
//!   terminationGracePeriodSeconds), `validateHandler` (exactly one handler),
//!   `validateHTTPGetAction`, `ValidatePortNumOrName`, `validateContainerPorts`.
//! - `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`: `IsValidPortNum`
//!   (1–65535) and `IsValidPortName` (IANA_SVC_NAME), whose messages are quoted below.
//!
//! Numbers: the apiserver decodes JSON with Go's `encoding/json` into typed fields, which refuses
//! a fraction, a value past the field's range, and any non-number. kubectl (like every Go client
//! that reads YAML through sigs.k8s.io/yaml) re-encodes an integral float such as `30.0` as `30`
//! before sending it, so an integral float counts as that integer here.

use serde_json::Value;
use std::fmt;

/// `must be greater than or equal to 0` (apimachinery's `IsNegativeErrorMsg`).
pub const NEGATIVE: &str = "must be greater than or equal to 0";
/// `IsValidPortNum`'s message.
pub const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// A resource quantity (`800Gi`, `500G`, `1.5Ti`, `2e12`, `1024`) in its base unit, as
/// apimachinery's `resource.ParseQuantity` reads it (`pkg/api/resource/quantity.go`): a decimal
/// number, then a binary suffix (`Ki`…`Ei`), a decimal one (`n`, `u`, `m`, `k`, `M`…`E`) or an
/// exponent (`e3`, `E6`). `None` for anything the apiserver would refuse.
pub fn quantity(value: &Value) -> Option<f64> {
    let text = match value {
        Value::Number(n) => return n.as_f64(),
        Value::String(s) => s.trim(),
        _ => return None,
    };
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            10f64.powi(digits.parse().ok()?)
        }
    };
    Some(number * scale).filter(|q| q.is_finite() && *q >= 0.0)
}

/// How a JSON value reads in a message: `a string`, `a map`.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// The integer types of Kubernetes fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    Int32,
    Int64,
}

impl IntType {
    fn range(self) -> (i64, i64) {
        match self {
            IntType::Int32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
            IntType::Int64 => (i64::MIN, i64::MAX),
        }
    }

    fn name(self) -> &'static str {
        match self {
            IntType::Int32 => "int32",
            IntType::Int64 => "int64",
        }
    }
}

/// Why the apiserver cannot decode a value into an integer field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undecodable {
    /// Not a number at all (`a string`, `a boolean`, ...).
    NotANumber(&'static str),
    /// A number with a fraction (`8080.5`).
    Fraction,
    /// A whole number past the field's type (`2147483648` for an int32, `1e300`).
    OutOfRange(IntType),
}

impl fmt::Display for Undecodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undecodable::NotANumber(kind) => write!(f, "is {kind}, not an integer"),
            Undecodable::Fraction => f.write_str("is not a whole number"),
            Undecodable::OutOfRange(t) => {
                let (lo, hi) = t.range();
                write!(
                    f,
                    "does not fit the field's type, {} ({lo} to {hi})",
                    t.name()
                )
            }
        }
    }
}

/// Why the apiserver refuses a probe timing field (all are int32s that must not be negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldProblem {
    Negative(i64),
    Undecodable(Undecodable),
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldProblem::Negative(_) => f.write_str(NEGATIVE),
            FieldProblem::Undecodable(why) => write!(f, "{why}"),
        }
    }
}

/// The integer the apiserver decodes from `value` into a field of type `ty`.
pub fn integer(value: &Value, ty: IntType) -> Result<i64, Undecodable> {
    let (lo, hi) = ty.range();
    let Value::Number(n) = value else {
        return Err(Undecodable::NotANumber(kind_of(value)));
    };
    if let Some(i) = n.as_i64() {
        return if (lo..=hi).contains(&i) {
            Ok(i)
        } else {
            Err(Undecodable::OutOfRange(ty))
        };
    }
    if n.is_u64() {
        // Above i64::MAX: past every Kubernetes integer type.
        return Err(Undecodable::OutOfRange(ty));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() != 0.0 || !f.is_finite() {
        return Err(Undecodable::Fraction);
    }
    // Compared as floats: `f as i64` saturates, which would let 1e300 through as i64::MAX.
    #[allow(clippy::cast_precision_loss)]
    if f < lo as f64 || f > hi as f64 {
        return Err(Undecodable::OutOfRange(ty));
    }
    #[allow(clippy::cast_possible_truncation)]
    Ok(f as i64)
}

/// The messages of `IsValidPortName` for `name`: empty when it is a valid IANA_SVC_NAME
/// (1–15 of a-z, 0-9 and `-`, at least one letter, no `-` at either end nor two in a row).
pub fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen");
    }
    errors
}

/// Whether `name` is a valid port name ([`port_name_errors`] is empty), without collecting.
pub fn is_valid_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.contains("--")
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Why the apiserver refuses a port (a probe's `port`, a `containerPort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortProblem<'a> {
    /// Absent or null: the apiserver reads 0.
    Missing,
    /// A whole number outside 1–65535 (0 included).
    OutOfRange(i64),
    /// Not decodable as an integer (or, where names are allowed, a string).
    Undecodable(&'a Value, Undecodable),
    /// A string that is not a valid port name.
    BadName(&'a str),
    /// A string where only a number may go (`grpc.port` is an int32).
    NameNotAllowed(&'a str),
}

impl fmt::Display for PortProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortProblem::Missing => {
                write!(
                    f,
                    "is missing (the apiserver reads it as 0): it {PORT_RANGE}"
                )
            }
            PortProblem::OutOfRange(n) => write!(f, "is {n}: it {PORT_RANGE}"),
            PortProblem::Undecodable(value, why) => write!(f, "{value} {why}"),
            PortProblem::BadName(name) => {
                write!(f, "is {name:?}, not a valid port name: ")?;
                for (i, e) in port_name_errors(name).into_iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    f.write_str(e)?;
                }
                if name.trim().parse::<u16>().is_ok() {
                    f.write_str(" (in quotes, a number is a port name)")?;
                }
                Ok(())
            }
            PortProblem::NameNotAllowed(name) => write!(
                f,
                "is the string {name:?}: this port is an int32, so it cannot be a name"
            ),
        }
    }
}

impl PortProblem<'_> {
    /// What to write instead, for a finding's help.
    pub fn help(&self, field: &str) -> String {
        match self {
            PortProblem::BadName(name) | PortProblem::NameNotAllowed(name)
                if name.trim().parse::<u16>().is_ok_and(|n| n > 0) =>
            {
                format!(
                    "write the port as a number, without quotes ({field}: {})",
                    name.trim()
                )
            }
            PortProblem::NameNotAllowed(_) => {
                format!("set {field} to a port number (1–65535): it cannot be a name")
            }
            PortProblem::BadName(_) => format!(
                "use a port number (1–65535) or the name of a declared containerPort \
                 (lower-case letters, digits and '-', at most 15 characters) for {field}"
            ),
            _ => format!("set {field} to a port number (1–65535) or a declared port name"),
        }
    }
}

/// Whether names are allowed: `httpGet.port` and `tcpSocket.port` are IntOrString, `grpc.port`
/// and `containerPort` are int32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    NumberOrName,
    Number,
}

/// A port the apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port<'a> {
    /// 1–65535.
    Number(i64),
    /// A valid port name (IANA_SVC_NAME), which the kubelet resolves among the declared ports.
    Name(&'a str),
}

/// A port as the apiserver validates it: the number or the name, or why it refuses it.
pub fn port(value: Option<&Value>, kind: PortKind) -> Result<Port<'_>, PortProblem<'_>> {
    let value = match value {
        None | Some(Value::Null) => return Err(PortProblem::Missing),
        Some(v) => v,
    };
    if let Value::String(name) = value {
        return match kind {
            PortKind::Number => Err(PortProblem::NameNotAllowed(name)),
            PortKind::NumberOrName if is_valid_port_name(name) => Ok(Port::Name(name)),
            PortKind::NumberOrName => Err(PortProblem::BadName(name)),
        };
    }
    match integer(value, IntType::Int32) {
        Ok(n) if (1..=65535).contains(&n) => Ok(Port::Number(n)),
        Ok(n) => Err(PortProblem::OutOfRange(n)),
        Err(why) => Err(PortProblem::Undecodable(value, why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_decode_as_go_decodes_them_into_typed_fields() {
        let i32_ = IntType::Int32;
        assert_eq!(integer(&json!(30), i32_), Ok(30));
        assert_eq!(integer(&json!(-5), i32_), Ok(-5));
        assert_eq!(integer(&json!(2147483647), i32_), Ok(i64::from(i32::MAX)));
        assert_eq!(
            integer(&json!(30.0), i32_),
            Ok(30),
            "kubectl sends 30.0 as 30"
        );
        assert_eq!(
            integer(&json!(2147483648i64), i32_),
            Err(Undecodable::OutOfRange(i32_))
        );
        assert_eq!(
            integer(&json!(-2147483649i64), i32_),
            Err(Undecodable::OutOfRange(i32_))
        );
        assert_eq!(
            integer(&json!(u64::MAX), IntType::Int64),
            Err(Undecodable::OutOfRange(IntType::Int64))
        );
        assert_eq!(
            integer(&json!(1e300), IntType::Int64),
            Err(Undecodable::OutOfRange(IntType::Int64))
        );
        assert_eq!(integer(&json!(8080.5), i32_), Err(Undecodable::Fraction));
        assert_eq!(
            integer(&json!("30"), i32_),
            Err(Undecodable::NotANumber("a string"))
        );
        assert_eq!(
            integer(&json!(true), i32_),
            Err(Undecodable::NotANumber("a boolean"))
        );
        assert_eq!(
            Undecodable::OutOfRange(i32_).to_string(),
            "does not fit the field's type, int32 (-2147483648 to 2147483647)"
        );
    }

    #[test]
    fn port_names_follow_is_valid_port_name() {
        for ok in [
            "http",
            "metrics",
            "h2c",
            "a-b-c",
            "p8080",
            "abcdefghijklmno",
        ] {
            assert!(port_name_errors(ok).is_empty(), "{ok}");
            assert!(is_valid_port_name(ok), "{ok}");
        }
        for (bad, first) in [
            ("8080", "must contain at least one letter (a-z)"),
            (
                "HTTP",
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ),
            (
                "my_port",
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ),
            ("abcdefghijklmnop", "must be no more than 15 characters"),
            ("a--b", "must not contain consecutive hyphens"),
            ("-http", "must not begin or end with a hyphen"),
            ("http-", "must not begin or end with a hyphen"),
            (
                "",
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ),
        ] {
            assert_eq!(port_name_errors(bad).first(), Some(&first), "{bad}");
            assert!(!is_valid_port_name(bad), "{bad}");
        }
    }

    #[test]
    fn ports_are_a_number_in_range_or_a_valid_name() {
        let any = PortKind::NumberOrName;
        assert_eq!(port(Some(&json!(8080)), any), Ok(Port::Number(8080)));
        assert_eq!(port(Some(&json!(8080.0)), any), Ok(Port::Number(8080)));
        assert_eq!(port(Some(&json!("http")), any), Ok(Port::Name("http")));
        assert_eq!(port(None, any), Err(PortProblem::Missing));
        assert_eq!(port(Some(&Value::Null), any), Err(PortProblem::Missing));
        assert_eq!(port(Some(&json!(0)), any), Err(PortProblem::OutOfRange(0)));
        assert_eq!(
            port(Some(&json!(-1)), any),
            Err(PortProblem::OutOfRange(-1))
        );
        assert_eq!(
            port(Some(&json!(99999)), any),
            Err(PortProblem::OutOfRange(99999))
        );
        let t = json!(true);
        assert_eq!(
            port(Some(&t), any),
            Err(PortProblem::Undecodable(
                &t,
                Undecodable::NotANumber("a boolean")
            ))
        );
        let frac = json!(8080.5);
        assert_eq!(
            port(Some(&frac), any),
            Err(PortProblem::Undecodable(&frac, Undecodable::Fraction))
        );
        assert_eq!(
            port(Some(&json!("8080")), any),
            Err(PortProblem::BadName("8080"))
        );
        assert_eq!(
            port(Some(&json!("8080")), PortKind::Number),
            Err(PortProblem::NameNotAllowed("8080"))
        );
    }

    #[test]
    fn port_problems_read_as_the_apiserver_reasons() {
        assert_eq!(
            PortProblem::OutOfRange(99999).to_string(),
            "is 99999: it must be between 1 and 65535, inclusive"
        );
        assert_eq!(
            PortProblem::BadName("8080").to_string(),
            "is \"8080\", not a valid port name: must contain at least one letter (a-z) \
             (in quotes, a number is a port name)"
        );
        assert_eq!(
            PortProblem::BadName("HTTP_").to_string(),
            "is \"HTTP_\", not a valid port name: must contain only alpha-numeric characters \
             (a-z, 0-9), and hyphens (-); must contain at least one letter (a-z)"
        );
        assert_eq!(
            PortProblem::BadName("8080").help("port"),
            "write the port as a number, without quotes (port: 8080)"
        );
    }

    #[test]
    fn quantities_read_as_the_apiserver_reads_them() {
        let q = |v: Value| super::quantity(&v);
        assert_eq!(q(json!("800Gi")), Some(800.0 * 1024f64.powi(3)));
        assert_eq!(q(json!("500G")), Some(500e9));
        assert_eq!(q(json!("1.5Ti")), Some(1.5 * 1024f64.powi(4)));
        assert_eq!(q(json!("2e12")), Some(2e12));
        assert_eq!(q(json!("100m")), Some(0.1));
        assert_eq!(q(json!(1024)), Some(1024.0));
        assert_eq!(q(json!("1024")), Some(1024.0));
        for refused in [
            json!("lots"),
            json!("10GB"),
            json!("Gi"),
            json!(null),
            json!("-1Gi"),
        ] {
            assert_eq!(q(refused.clone()), None, "{refused}");
        }
    }
}
