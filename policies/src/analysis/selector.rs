//! Label selectors, read once for every caller (the PDB and HPA rules, `probelint simulate`'s
//! drain, `probelint audit`'s pods of a workload) with the apiserver's meaning:
//! apimachinery's `metav1.LabelSelectorAsSelector`. A missing selector selects nothing; an empty
//! one (`{}`) selects everything (policy/v1 PodDisruptionBudgets: "an empty selector selects all
//! pods"); `matchLabels` and `matchExpressions` are ANDed; `In`/`NotIn` need values and
//! `Exists`/`DoesNotExist` take none. A selector the apiserver would refuse selects nothing here.

use serde_json::{Map, Value};

/// Whether `selector` (a `LabelSelector`, or `None` where the object has none) selects an object
/// with `labels` (its `metadata.labels`, or `None` where it has none).
pub fn selects(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return false;
    };
    let Some(requirements) = requirements(selector) else {
        return false;
    };
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    requirements.iter().all(|r| match r {
        Requirement::Equals(key, value) => label(key) == Some(*value),
        Requirement::In(key, values) => label(key).is_some_and(|v| values.contains(&v)),
        Requirement::NotIn(key, values) => label(key).is_none_or(|v| !values.contains(&v)),
        Requirement::Exists(key) => label(key).is_some(),
        Requirement::DoesNotExist(key) => label(key).is_none(),
    })
}

/// Whether `selector` has no requirement at all (`{}`): it selects everything. The apps kinds
/// refuse such a selector, so a caller matching pods to a workload can tell it apart.
pub fn is_empty(selector: &Value) -> bool {
    requirements(selector).is_some_and(|r| r.is_empty())
}

/// A selector's first `matchLabels` entry: a label every object it selects carries, by which
/// selectors and objects can be indexed. `None` for a selector of expressions only, which must
/// be checked against every object.
pub fn first_match_label(selector: &Value) -> Option<(&str, &str)> {
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .and_then(|m| m.iter().next())
        .and_then(|(k, v)| Some((k.as_str(), v.as_str()?)))
}

enum Requirement<'a> {
    Equals(&'a str, &'a str),
    In(&'a str, Vec<&'a str>),
    NotIn(&'a str, Vec<&'a str>),
    Exists(&'a str),
    DoesNotExist(&'a str),
}

/// The selector's requirements, or `None` where the apiserver would refuse it (a non-string
/// label value, an unknown operator, `In` without values, `Exists` with some).
fn requirements(selector: &Value) -> Option<Vec<Requirement<'_>>> {
    let selector = selector.as_object()?;
    let mut out = Vec::new();
    match selector.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (key, value) in labels {
                out.push(Requirement::Equals(key, value.as_str()?));
            }
        }
        Some(_) => return None,
    }
    match selector.get("matchExpressions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(expressions)) => {
            for e in expressions {
                let key = e.get("key")?.as_str()?;
                let values = match e.get("values") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(v)) => v.iter().map(Value::as_str).collect::<Option<_>>()?,
                    Some(_) => return None,
                };
                out.push(match (e.get("operator")?.as_str()?, values.is_empty()) {
                    ("In", false) => Requirement::In(key, values),
                    ("NotIn", false) => Requirement::NotIn(key, values),
                    ("Exists", true) => Requirement::Exists(key),
                    ("DoesNotExist", true) => Requirement::DoesNotExist(key),
                    _ => return None,
                });
            }
        }
        Some(_) => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The cases of apimachinery's `TestLabelSelectorAsSelector` and `labels.TestEverything`
    /// that a manifest can carry, plus the shapes the apiserver refuses.
    #[test]
    fn selectors_mean_what_the_apiserver_means() {
        let labels = json!({"app": "vllm", "tier": "gpu"});
        let labels = labels.as_object();
        let cases = [
            // A missing selector selects nothing; an empty one, everything.
            (None, false),
            (Some(json!(null)), false),
            (Some(json!({})), true),
            (Some(json!({"matchLabels": {}})), true),
            (Some(json!({"matchLabels": {"app": "vllm"}})), true),
            (Some(json!({"matchLabels": {"app": "tgi"}})), false),
            (
                Some(json!({"matchLabels": {"app": "vllm", "zone": "a"}})),
                false,
            ),
            (
                Some(
                    json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["tgi", "vllm"]}]}),
                ),
                true,
            ),
            (
                Some(
                    json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["vllm"]}]}),
                ),
                false,
            ),
            // NotIn selects an object that lacks the label.
            (
                Some(
                    json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
                ),
                true,
            ),
            (
                Some(json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]})),
                true,
            ),
            (
                Some(json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})),
                false,
            ),
            // Labels and expressions are ANDed.
            (
                Some(
                    json!({"matchLabels": {"app": "vllm"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["cpu"]}]}),
                ),
                false,
            ),
            // Refused by the apiserver: select nothing.
            (
                Some(json!({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]})),
                false,
            ),
            (
                Some(
                    json!({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["vllm"]}]}),
                ),
                false,
            ),
            (
                Some(
                    json!({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["vllm"]}]}),
                ),
                false,
            ),
            (Some(json!({"matchLabels": {"replicas": 1}})), false),
        ];
        for (selector, want) in cases {
            assert_eq!(
                selects(selector.as_ref(), labels),
                want,
                "{selector:?} on {labels:?}"
            );
        }
        // An object without labels: only an empty selector and negative requirements select it.
        assert!(selects(Some(&json!({})), None));
        assert!(selects(
            Some(&json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})),
            None
        ));
        assert!(!selects(
            Some(&json!({"matchLabels": {"app": "vllm"}})),
            None
        ));
        assert!(is_empty(&json!({})));
        assert!(!is_empty(&json!({"matchLabels": {"app": "vllm"}})));
        assert!(!is_empty(
            &json!({"matchExpressions": [{"key": "a", "operator": "Equals"}]})
        ));
    }
}
