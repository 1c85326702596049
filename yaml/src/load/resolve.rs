//! Scalar resolution the way Kubernetes does it.
//!
//! kubectl and the apiserver read YAML through sigs.k8s.io/yaml, which decodes with go-yaml v2
//! (YAML 1.1 rules) into Go values and then marshals them to JSON. So `yes`, `on` and `y` are
//! booleans, `0644` is octal, `1_000` is an integer, `08` is the float 8, quoted scalars are
//! strings, and an explicit tag wins over the text. This module reproduces go-yaml v2's
//! `resolve()` (including Go's `strconv.ParseInt(s, 0, 64)` number syntax: `0x`, `0o`, `0b`
//! prefixes and leading-zero octal) and sigs.k8s.io/yaml's conversion of keys to strings.

use std::borrow::Cow;

use serde_json::{Number, Value};

/// The long form of `!!` (the YAML core tag prefix).
pub(super) const CORE_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// A resolved scalar, before it becomes a JSON value or a key.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    /// go-yaml returns `uint64` for integers above `i64::MAX`.
    UInt(u64),
    Float(f64),
    Str(String),
}

impl Scalar {
    fn kind(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "bool",
            Scalar::Int(_) | Scalar::UInt(_) => "int",
            Scalar::Float(_) => "float",
            Scalar::Str(_) => "str",
        }
    }
}

/// Resolves a scalar's text given how it was written.
///
/// `plain` is whether it was unquoted (plain style); `tag` is its full tag (`!!int` arrives as
/// `tag:yaml.org,2002:int`). Untagged non-plain scalars (quoted, `|`, `>`) are always strings.
/// The error is a message for an explicit tag the text does not satisfy. The text is taken by
/// value: the parser hands over an owned string per scalar, which becomes the JSON string
/// without another copy.
pub(super) fn resolve(
    text: Cow<'_, str>,
    plain: bool,
    tag: Option<&str>,
) -> Result<Scalar, String> {
    let Some(tag) = tag else {
        return Ok(if plain {
            implicit(text)
        } else {
            Scalar::Str(text.into_owned())
        });
    };
    // Non-core tags (`!`, `!foo`, `!<urn:x>`) are not resolvable in go-yaml: the text is kept.
    let Some(wanted) = tag.strip_prefix(CORE_TAG_PREFIX) else {
        return Ok(Scalar::Str(text.into_owned()));
    };
    match wanted {
        "str" => Ok(Scalar::Str(text.into_owned())),
        "binary" => decode_base64(&text)
            .map(|bytes| Scalar::Str(String::from_utf8_lossy(&bytes).into_owned()))
            .ok_or_else(|| "!!binary value contains invalid base64 data".to_owned()),
        // go-yaml keeps timestamps as their text when decoding into interface{}; Go's layout
        // check is not reproduced beyond its quick "YYYY-" test.
        "timestamp" if looks_like_timestamp(&text) => Ok(Scalar::Str(text.into_owned())),
        "null" | "bool" | "int" | "float" | "timestamp" => {
            let got = implicit(Cow::Borrowed(&text));
            match (&got, wanted) {
                (Scalar::Int(i), "float") => Ok(Scalar::Float(*i as f64)),
                (Scalar::UInt(u), "float") => Ok(Scalar::Float(*u as f64)),
                _ if got.kind() == wanted => Ok(got),
                _ => Err(format!(
                    "cannot decode !!{} `{text}` as a !!{wanted}",
                    got.kind()
                )),
            }
        }
        // `!!map`, `!!seq`, `!!merge`, unknown core tags: not resolvable, text kept.
        _ => Ok(Scalar::Str(text.into_owned())),
    }
}

/// go-yaml v2's `resolve("", text)` for a plain scalar.
fn implicit(text: Cow<'_, str>) -> Scalar {
    // go-yaml only looks further when the first byte hints at a non-string.
    let hint = match text.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => return Scalar::Str(text.into_owned()),
    };
    if let Some(known) = known_value(&text) {
        return known;
    }
    match hint {
        b'.' => {
            if let Some(f) = go_dot_float(&text) {
                return Scalar::Float(f);
            }
        }
        b'D' | b'S' => {
            let plain: Cow<'_, str> = if text.contains('_') {
                text.replace('_', "").into()
            } else {
                Cow::Borrowed(&text)
            };
            if let Some(i) = go_parse_int(&plain) {
                return Scalar::Int(i);
            }
            if let Some(u) = go_parse_uint(&plain) {
                return Scalar::UInt(u);
            }
            if is_yaml_style_float(&plain) {
                // Go's ParseFloat fails on overflow, and go-yaml then keeps the text.
                if let Some(f) = plain.parse::<f64>().ok().filter(|f| f.is_finite()) {
                    return Scalar::Float(f);
                }
            }
        }
        _ => {}
    }
    Scalar::Str(text.into_owned())
}

/// go-yaml v2's table of exact spellings (YAML 1.1 booleans, nulls, special floats).
fn known_value(text: &str) -> Option<Scalar> {
    Some(match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Scalar::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Scalar::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Scalar::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// Go's `strconv.ParseUint(s, 0, 64)`: `0x`/`0o`/`0b` prefixes (any case, with at least one
/// digit after them), a leading `0` meaning octal, otherwise decimal; no sign.
fn go_parse_uint(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let (base, digits) = match b {
        [] => return None,
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &b[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &b[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &b[2..]),
        [b'0', rest @ ..] => (8, rest),
        _ => (10, b),
    };
    digits.iter().try_fold(0u64, |n, &c| {
        let d = char::from(c).to_digit(16).filter(|&d| d < base)?;
        n.checked_mul(u64::from(base))?.checked_add(u64::from(d))
    })
}

/// Go's `strconv.ParseInt(s, 0, 64)`: an optional sign, then [`go_parse_uint`], in range.
fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = go_parse_uint(rest)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat` for text starting with `.` (go-yaml tries it on the raw text,
/// underscores included): `.` digits, optional exponent, underscores only between digits.
fn go_dot_float(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let mut i = 1;
    let mut mantissa_digits = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => mantissa_digits += 1,
            b'_' => {}
            _ => break,
        }
        i += 1;
    }
    if mantissa_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
            i += 1;
        }
        if !b[start..i].iter().any(u8::is_ascii_digit) {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    // Go's underscoreOK: every `_` sits between two digits.
    let underscores_ok = b.iter().enumerate().all(|(j, &c)| {
        c != b'_'
            || (j > 0 && b[j - 1].is_ascii_digit() && b.get(j + 1).is_some_and(u8::is_ascii_digit))
    });
    if !underscores_ok {
        return None;
    }
    text.replace('_', "")
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
}

/// go-yaml's quick test before trying timestamp layouts: four digits then `-`.
fn looks_like_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() > 4 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

/// Go's `base64.StdEncoding.DecodeString`, which skips `\r` and `\n` and requires padding.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    let clean: Vec<u8> = text.bytes().filter(|&c| c != b'\r' && c != b'\n').collect();
    if !clean.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    let quads = clean.len() / 4;
    for (q, quad) in clean.chunks_exact(4).enumerate() {
        let padding = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if padding > 2 || (padding > 0 && q + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - padding] {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * padding as u32;
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - padding]);
    }
    Some(out)
}

/// The JSON value Kubernetes ends up with: Go's `json.Marshal` writes integral floats without
/// a fraction (`10.0` becomes `10`), so those become integers here too; infinities and NaN
/// make `json.Marshal` fail, so they are an error (the message).
pub(super) fn to_json(scalar: Scalar) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::from(i),
        Scalar::UInt(u) => Value::from(u),
        Scalar::Str(s) => Value::String(s),
        Scalar::Float(f) => float_to_json(f)?,
    })
}

fn float_to_json(f: f64) -> Result<Value, String> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if !f.is_finite() {
        let name = if f.is_nan() { "NaN" } else { "infinity" };
        return Err(format!(
            "this YAML 1.1 float ({name}) has no JSON form, so Kubernetes rejects the \
             manifest; quote it if you meant a string"
        ));
    }
    if f.fract() == 0.0 && (-TWO_63..TWO_64).contains(&f) {
        // Go writes the float's shortest digits, padded with zeros (as Rust's `Display`
        // does), and that text reads back as an integer only when it fits one: -2^63 is
        // written -9223372036854776000, which does not.
        let text = f.to_string();
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = text.parse::<u64>() {
            return Ok(Value::from(u));
        }
    }
    Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
}

/// The JSON object key sigs.k8s.io/yaml makes of a resolved key; the error names what cannot
/// be a key.
pub(super) fn key_string(scalar: Scalar) -> Result<String, String> {
    match scalar {
        Scalar::Str(s) => Ok(s),
        Scalar::Bool(b) => Ok(b.to_string()),
        Scalar::Int(i) => Ok(i.to_string()),
        Scalar::Float(f) => Ok(go_format_float32(f)),
        Scalar::UInt(u) => Err(format!(
            "the key {u} is an integer above 2^63-1, which Kubernetes cannot use as a key; \
             quote it"
        )),
        Scalar::Null => Err(
            "a null key (`~`, `null` or nothing before `:`) cannot be a JSON object key; \
             quote it if you meant the text"
                .to_owned(),
        ),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`, which sigs.k8s.io/yaml uses for float keys,
/// with its `+Inf`/`-Inf`/`NaN` turned back into `.inf`/`-.inf`/`.nan`.
fn go_format_float32(f: f64) -> String {
    // Go formats the float32 nearest to the value, with the shortest digits that round-trip.
    #[allow(clippy::cast_possible_truncation)]
    let x = f as f32;
    if x.is_nan() {
        return ".nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    // Go switches to exponent form outside [1e-4, 1e6) for shortest formatting.
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(digits.len().min(1));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        out.push_str(&format!("e{sign}{:02}", exponent.unsigned_abs()));
    } else if exponent < 0 {
        // 0.000ddd: `-exponent - 1` zeros after the point.
        out.push_str("0.");
        for _ in 1..exponent.unsigned_abs() {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        // `exponent + 1` digits before the point, padded with zeros.
        let point = usize::try_from(exponent).unwrap_or(0) + 1;
        if point >= digits.len() {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
        } else {
            let (int, frac) = digits.split_at(point);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> Scalar {
        implicit(Cow::Borrowed(text))
    }

    #[test]
    fn go_parse_int_follows_go_base_prefixes() {
        assert_eq!(go_parse_int("0644"), Some(420));
        assert_eq!(go_parse_int("0o644"), Some(420));
        assert_eq!(go_parse_int("0O17"), Some(15));
        assert_eq!(go_parse_int("0x1F"), Some(31));
        assert_eq!(go_parse_int("-0x1F"), Some(-31));
        assert_eq!(go_parse_int("0b101"), Some(5));
        assert_eq!(go_parse_int("-0b101"), Some(-5));
        assert_eq!(go_parse_int("+42"), Some(42));
        assert_eq!(go_parse_int("0"), Some(0));
        assert_eq!(go_parse_int("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(go_parse_int("9223372036854775808"), None);
        assert_eq!(go_parse_int("0x"), None);
        assert_eq!(go_parse_int("08"), None);
        assert_eq!(go_parse_int("-"), None);
        assert_eq!(go_parse_int(""), None);
    }

    #[test]
    fn plain_scalars_resolve_like_go_yaml_v2() {
        assert_eq!(plain("08"), Scalar::Float(8.0));
        assert_eq!(plain("1_000"), Scalar::Int(1000));
        assert_eq!(plain("9223372036854775808"), Scalar::UInt(1 << 63));
        assert_eq!(
            plain("18446744073709551616"),
            Scalar::Float(18_446_744_073_709_551_616.0)
        );
        assert_eq!(plain("1e400"), Scalar::Str("1e400".into()));
        assert_eq!(plain("1."), Scalar::Float(1.0));
        assert_eq!(plain("-.5"), Scalar::Float(-0.5));
        assert_eq!(plain(".5"), Scalar::Float(0.5));
        assert_eq!(plain(".5_0"), Scalar::Float(0.5));
        assert_eq!(plain("._5"), Scalar::Str("._5".into()));
        assert_eq!(plain("."), Scalar::Str(".".into()));
        assert_eq!(plain(".iNf"), Scalar::Str(".iNf".into()));
        assert_eq!(plain("2001-12-14"), Scalar::Str("2001-12-14".into()));
        assert_eq!(plain("1:20"), Scalar::Str("1:20".into()));
        assert_eq!(plain("0x1G"), Scalar::Str("0x1G".into()));
        assert_eq!(plain("<<"), Scalar::Str("<<".into()));
        assert_eq!(plain("yES"), Scalar::Str("yES".into()));
        assert_eq!(plain("-"), Scalar::Str("-".into()));
    }

    #[test]
    fn float_keys_format_like_go_float32_g() {
        assert_eq!(go_format_float32(1.5), "1.5");
        assert_eq!(go_format_float32(1e6), "1e+06");
        assert_eq!(go_format_float32(100_000.0), "100000");
        assert_eq!(go_format_float32(0.0001), "0.0001");
        assert_eq!(go_format_float32(0.00001), "1e-05");
        assert_eq!(go_format_float32(0.1), "0.1");
        assert_eq!(go_format_float32(-2.0), "-2");
        assert_eq!(go_format_float32(0.0), "0");
        assert_eq!(go_format_float32(123_456_789.0), "1.2345679e+08");
        assert_eq!(go_format_float32(1e39), ".inf");
    }

    #[test]
    fn base64_decodes_like_go_std_encoding() {
        assert_eq!(decode_base64("aGVsbG8=").as_deref(), Some(&b"hello"[..]));
        assert_eq!(decode_base64("aGVs\nbG8h").as_deref(), Some(&b"hello!"[..]));
        assert_eq!(decode_base64("").as_deref(), Some(&b""[..]));
        assert_eq!(decode_base64("aGVsbG8"), None);
        assert_eq!(decode_base64("aG=sbG8="), None);
        assert_eq!(decode_base64("a$==").as_deref(), None);
    }
}
