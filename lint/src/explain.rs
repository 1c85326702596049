//! `probelint explain RULE`: a rule's documentation as plain text (Markdown-flavoured, so the same
//! text reads well in a terminal and in `docs/rules/`).

use probelint_policies::RuleMeta;

/// Renders a rule's documentation.
pub fn render(meta: &RuleMeta) -> String {
    let mut out = format!(
        "# {}\n\n{}\n\nDefault severity: {}\n\n",
        meta.id, meta.summary, meta.severity
    );
    out.push_str("## Why this matters\n\n");
    out.push_str(meta.rationale);
    out.push_str("\n\n## Bad\n\n```yaml\n");
    out.push_str(meta.bad_example);
    out.push_str("```\n\n## Good\n\n```yaml\n");
    out.push_str(meta.good_example);
    out.push_str("```\n\n");
    if let Some(policy) = meta.example_policy {
        out.push_str("These examples are judged under this policy:\n\n```yaml\n");
        out.push_str(policy);
        out.push_str("```\n\n");
    }
    out.push_str("## Fix\n\n");
    out.push_str(
        meta.fix
            .unwrap_or("No automatic fix: the right change depends on the server."),
    );
    out.push_str(&format!(
        "\n\n## Ignoring\n\nOn the object or its pod template:\n\n```yaml\nmetadata:\n  annotations:\n    \
         probelint.io/ignore: \"{id}\"\n    probelint.io/ignore-reason: \"why this is fine here\"\n```\n\n\
         For one container: `probelint.io/ignore.<container-name>: \"{id}\"`. Or in `.probelint.yaml`:\n\n\
         ```yaml\nexemptions:\n  - rules: [{id}]\n    namespaces: [\"batch-*\"]\n    reason: \"why\"\n```\n\n\
         To turn the rule off: `rules: {{{id}: off}}` in `.probelint.yaml`.\n",
        id = meta.id
    ));
    out
}
