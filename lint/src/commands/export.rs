//! `probelint export`: the per-object rules that have a faithful CEL form, as
//! ValidatingAdmissionPolicies, and the safe fixes CEL computes exactly, as
//! MutatingAdmissionPolicies, with their bindings, for `kubectl apply -f -`; `--list` says which
//! rules and fixes are exported and why the others are not (docs/native-admission.md).

use crate::error::Error;
use probelint_policies::export::{self, Documents, Mode, Options};

/// `probelint export`'s arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub config: super::ConfigArgs,

    /// What an error finding does: `enforce` denies the request, `warn` only warns (warnings
    /// always only warn).
    #[arg(long, value_enum, default_value = "warn")]
    pub mode: ModeArg,

    /// Print which rules and fixes are exported, which are not and why, instead of the
    /// policies.
    #[arg(long)]
    pub list: bool,

    /// Write only the ValidatingAdmissionPolicies (`validating`) or only the
    /// MutatingAdmissionPolicies (`mutating`, Kubernetes 1.36 or later); both by default.
    #[arg(long, value_enum, value_name = "KIND")]
    pub only: Option<OnlyArg>,

    /// A username whose objects with a controller ownerReference are a controller's (an
    /// operator's service account, `system:serviceaccount:<namespace>:<name>`); repeatable. The
    /// controllers of kube-controller-manager are always trusted.
    #[arg(long = "controller-service-account", value_name = "USER")]
    pub controller_users: Vec<String>,

    /// A namespace the policies never judge; repeatable (default: kube-system, kube-node-lease).
    #[arg(long = "exclude-namespace", value_name = "NAMESPACE")]
    pub exclude_namespaces: Vec<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnlyArg {
    Validating,
    Mutating,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Warn,
    Enforce,
}

/// Prints the policies (or, with `--list`, the table).
///
/// # Errors
///
/// A policy file that cannot be read, or output that cannot be written.
pub fn run(args: &Args) -> Result<u8, Error> {
    let policy = args.config.load()?;
    if args.list {
        super::print(&table(
            &export::coverage(&policy),
            &export::fix_coverage(&policy),
        ))?;
        return Ok(0);
    }
    let mut options = Options {
        mode: match args.mode {
            ModeArg::Warn => Mode::Warn,
            ModeArg::Enforce => Mode::Enforce,
        },
        controller_users: args.controller_users.clone(),
        documents: match args.only {
            None => Documents::All,
            Some(OnlyArg::Validating) => Documents::Validating,
            Some(OnlyArg::Mutating) => Documents::Mutating,
        },
        ..Options::default()
    };
    if !args.exclude_namespaces.is_empty() {
        options.exclude_namespaces = args.exclude_namespaces.clone();
    }
    let docs = export::documents(&policy, &options);
    let yaml = serde_saphyr::to_string_multiple(&docs).map_err(|e| Error::Yaml(e.to_string()))?;
    super::print(&format!(
        "# probelint export (policy {}, mode {}): `probelint export --list` says what is \
         exported and what is not.\n{yaml}",
        policy.version,
        match options.mode {
            Mode::Warn => "warn",
            Mode::Enforce => "enforce",
        }
    ))?;
    Ok(0)
}

/// RULE, EXPORTED, and what is exported or why not; then the same for the fixes.
fn table(coverage: &[export::Coverage], fixes: &[export::FixCoverage]) -> String {
    let width = coverage.iter().map(|c| c.rule.len()).max().unwrap_or(4);
    let mut out = format!(
        "{:width$}  {:8}  {}\n",
        "RULE", "EXPORTED", "WHAT / WHY NOT"
    );
    for c in coverage {
        let exported = if c.policies.is_empty() { "no" } else { "yes" };
        out.push_str(&format!("{:width$}  {exported:8}  {}\n", c.rule, c.note));
    }
    out.push_str(&format!(
        "\n{} warns (never denies) where an object's images and command lines count more than \
         {} characters: past that the policies may go over the apiserver's CEL cost budget, and \
         failurePolicy Ignore admits the object unjudged (docs/native-admission.md)\n",
        export::GUARD,
        export::guard_chars()
    ));
    let width = fixes.iter().map(|c| c.rule.len()).max().unwrap_or(4).max(8);
    out.push_str(&format!(
        "\n{:width$}  {:8}  {}\n",
        "FIX OF", "EXPORTED", "WHAT / WHY NOT (MutatingAdmissionPolicy, Kubernetes 1.36+)"
    ));
    for c in fixes {
        let exported = if c.policy.is_some() { "yes" } else { "no" };
        out.push_str(&format!("{:width$}  {exported:8}  {}\n", c.rule, c.note));
    }
    out
}
