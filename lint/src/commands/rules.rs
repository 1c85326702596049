//! `probelint rules`: every rule in a table; `probelint explain RULE`: a rule's documentation as
//! plain text (Markdown-flavoured, so the same text reads well in a terminal and in
//! `docs/rules/`).

use crate::error::{Error, UsageError};
use probelint_policies::RuleMeta;

/// `probelint explain`'s argument.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// The rule id, e.g. gpu-startup-probe-missing.
    pub rule: String,
}

/// Prints every rule: id, default severity, summary (and whether it has a fix).
///
/// # Errors
///
/// When standard output cannot be written.
pub fn rules() -> Result<u8, Error> {
    let width = probelint_policies::registry()
        .iter()
        .map(|r| r.meta().id.len())
        .max()
        .unwrap_or(0);
    let mut text = format!("{:width$}  {:8}  {}\n", "RULE", "SEVERITY", "SUMMARY");
    for rule in probelint_policies::registry() {
        let m = rule.meta();
        let fix = if m.fix.is_some() { " (fixable)" } else { "" };
        text.push_str(&format!(
            "{:width$}  {:8}  {}{fix}\n",
            m.id,
            m.severity.as_str(),
            m.summary
        ));
    }
    super::print(&text)?;
    Ok(0)
}

/// Prints a rule's documentation.
///
/// # Errors
///
/// An unknown rule id (naming a near one), or standard output that cannot be written.
pub fn explain(args: &ExplainArgs) -> Result<u8, Error> {
    let id = args.rule.as_str();
    let Some(rule) = probelint_policies::find(id) else {
        let near = probelint_policies::registry()
            .iter()
            .map(|r| r.meta().id)
            .find(|known| known.contains(id) || id.contains(*known));
        return Err(UsageError::UnknownRule {
            id: id.to_owned(),
            near,
        }
        .into());
    };
    super::print(&render(rule.meta()))?;
    Ok(0)
}

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
    out.push_str(meta.fix.as_ref().map_or(
        "No automatic fix: the right change depends on the server.",
        |fix| fix.what,
    ));
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
