//! `duplicate-key`: a key written twice in one YAML mapping.

use super::rule::{Rule, RuleMeta};
use crate::model::finding::{Finding, Severity};
use crate::policy::Policy;
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "duplicate-key",
    severity: Severity::Warning,
    summary: "A key is written twice in one mapping: Kubernetes reads only the last",
    rationale: "YAML forbids a key written twice in one mapping, but kubectl reads manifests with go-yaml \
(sigs.k8s.io/yaml), which keeps the value written last and sends the object: the Deployment runs with the \
second `image:`, and a reviewer reading the first one sees another workload than the cluster gets. A strict \
YAML reader refuses the file (sigs.k8s.io/yaml's `YAMLToJSONStrict`: \"key already set in map\"), so the \
same file fails in a tool that reads it strictly; whether `kubectl apply --validate=strict` refuses it was \
not checked against a real apiserver (docs/yaml.md). probelint reads the file \
as kubectl does (the last value, docs/yaml.md), judges that object, and reports each repeat at the value \
that wins. It is reported by the CLI, which reads the text; the webhook sees the object the apiserver \
decoded, where the first value is already gone.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/duplicate-key/bad.yaml"),
    good_example: include_str!("../../resources/rules/duplicate-key/good.yaml"),
    fix: None,
};

pub(crate) static RULE: Rule = Rule::reader(&META);

/// The finding for a key of `object` (the `index`th of its input) written more than once in one
/// mapping: `pointer` names the value read (the last), `lines` every line the key is written on,
/// in order. `None` where the policy turns the rule off.
pub fn finding(
    object: &Value,
    index: usize,
    pointer: &str,
    lines: &[usize],
    policy: &Policy,
) -> Option<Finding> {
    let key = pointer
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .replace("~1", "/")
        .replace("~0", "~");
    let (last, earlier) = lines.split_last()?;
    let earlier: Vec<String> = earlier.iter().map(usize::to_string).collect();
    let times = match lines.len() {
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    };
    crate::engine::reader_finding(
        META.id,
        object,
        index,
        pointer.to_owned(),
        format!(
            "`{key}` is written {times} in this mapping (line {} and line {last}): Kubernetes \
             reads only the value at line {last}, and a strict YAML reader (sigs.k8s.io/yaml \
             YAMLToJSONStrict) refuses the file",
            earlier.join(", line "),
        ),
        format!("remove the `{key}` you do not mean"),
        policy,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_finding_names_the_lines_and_the_one_kubernetes_reads() {
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let policy = crate::Policy::default();
        let f = super::finding(&object, 0, "/metadata/name", &[4, 5], &policy).expect("finding");
        assert_eq!(f.severity, crate::Severity::Warning);
        assert_eq!(f.object.kind, "Pod");
        assert_eq!(
            f.message,
            "`name` is written twice in this mapping (line 4 and line 5): Kubernetes reads only \
             the value at line 5, and a strict YAML reader (sigs.k8s.io/yaml YAMLToJSONStrict) \
             refuses the file"
        );
        let thrice = super::finding(&object, 0, "/metadata/a~1b", &[1, 2, 3], &policy).unwrap();
        assert!(
            thrice.message.starts_with(
                "`a/b` is written 3 times in this mapping (line 1, line 2 and line 3)"
            ),
            "{}",
            thrice.message
        );
        let off = crate::Policy::with_user_yaml("rules:\n  duplicate-key: off\n").unwrap();
        assert!(super::finding(&object, 0, "/metadata/name", &[4, 5], &off).is_none());
        // Exemptions apply as to any rule.
        let exempt = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"probelint.io/ignore": "duplicate-key", "probelint.io/ignore-reason": "generated"}}});
        let f = super::finding(&exempt, 0, "/metadata/name", &[4, 5], &policy).unwrap();
        assert!(f.is_suppressed());
        // Only a reader rule is built this way.
        assert!(
            crate::engine::reader_finding(
                "gpu-startup-probe-missing",
                &object,
                0,
                String::new(),
                String::new(),
                String::new(),
                &policy
            )
            .is_none()
        );
    }
}
