//! Reading several fields of a JSON object in one pass.
//!
//! The workspace builds serde_json with `preserve_order` (the CLI keeps keys in file order), so
//! every `Value::get` hashes its key with SipHash before it looks. The objects the engine reads
//! most (a container, a probe, a pod spec) have a handful of keys, and it wants several of them:
//! one scan comparing keys costs a fraction of one hashed lookup per field.

use serde_json::{Map, Value};

/// Above this many keys a scan per object is no longer cheaper than hashing each wanted key (and
/// an adversarial object with thousands of keys must not make the scan quadratic).
pub(crate) const SCAN_LIMIT: usize = 24;

/// The values of `names` in `object`, in the order of `names`: `None` where a key is absent, and
/// everywhere when `object` is not a JSON object. The same answers as `names.map(|n| object.get(n))`.
pub(crate) fn pick<'a, const N: usize>(
    object: &'a Value,
    names: [&str; N],
) -> [Option<&'a Value>; N] {
    match object.as_object() {
        Some(map) => pick_in(map, names),
        None => [None; N],
    }
}

/// [`pick`] on a map.
pub(crate) fn pick_in<'a, const N: usize>(
    map: &'a Map<String, Value>,
    names: [&str; N],
) -> [Option<&'a Value>; N] {
    if map.len() > SCAN_LIMIT {
        return names.map(|name| map.get(name));
    }
    let mut found = [None; N];
    for (key, value) in map {
        if let Some(i) = names.iter().position(|name| name == key) {
            found[i] = Some(value);
        }
    }
    found
}

/// One field: `object.get(name)`, by a scan when the object is small.
pub(crate) fn get<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    let [found] = pick(object, [name]);
    found
}

/// The strings of a container's `command` then `args`, as written (a `sh -c` script is one).
pub fn command_words<'a>(command: Option<&'a Value>, args: Option<&'a Value>) -> Vec<&'a str> {
    [command, args]
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn picks_what_get_would_find_in_small_and_large_objects() {
        let small = json!({"b": 2, "a": 1, "c": null});
        assert_eq!(
            pick(&small, ["a", "c", "z"]),
            [Some(&json!(1)), Some(&Value::Null), None]
        );
        let large: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let large = Value::Object(large);
        assert_eq!(
            pick(&large, ["k7", "k99", "x"]),
            [Some(&json!(7)), Some(&json!(99)), None]
        );
        assert_eq!(pick(&json!([1, 2]), ["a"]), [None]);
    }
}
