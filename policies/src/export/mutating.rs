//! MutatingAdmissionPolicies (`admissionregistration.k8s.io/v1`, GA in Kubernetes 1.36) for the
//! safe fixes whose result CEL can compute exactly as the engine's patch does.
//!
//! Exact, not one way round: where a policy mutates, the object after it is the object after the
//! engine's JSON Patch for that fix (once the apiserver has defaulted both); where CEL cannot
//! compute the engine's numbers it does not mutate at all. The numbers a fix writes rest on the
//! load's slow end, which only the engine can estimate, so the policies act only where the load
//! is declared (`probelint.io/model-load-seconds`, whole seconds) and the budget is arithmetic.
//! [`fix_coverage`] says which fixes are exported and why the others are not.

use super::cel::quote;
use super::{Container, Options, bound, scope};
use crate::catalog;
use crate::fix::probes::STARTUP_PERIOD_SECONDS;
use crate::model::annotations::LOAD_SECONDS_ANNOTATION;
use crate::policy::Policy;
use serde_json::{Value, json};

/// Whether and how one rule's fix is exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixCoverage {
    pub rule: &'static str,
    /// The MutatingAdmissionPolicy it becomes, if it is exported.
    pub policy: Option<String>,
    /// What the policy does, or why the fix is not exported.
    pub note: String,
}

const STARTUP: &str = "gpu-startup-probe-missing";
const BUDGET: &str = "startup-budget-too-short";

/// The kinds the mutations act on: those the engine judges for these rules. Jobs and CronJobs
/// are batch (no finding); a Pod's probes cannot change after it is created.
const RESOURCE_RULES: &[(&str, &[&str], &[&str])] = &[
    ("", &["pods"], &["CREATE"]),
    ("", &["replicationcontrollers"], &["CREATE", "UPDATE"]),
    (
        "apps",
        &["deployments", "statefulsets", "daemonsets", "replicasets"],
        &["CREATE", "UPDATE"],
    ),
];

/// The longest declared load, in digits, that the policies read: up to 999,999 s (11.5 days),
/// whose budget with any margin the policy allows (at most 10, i.e. × 11) fits an int32
/// failureThreshold, as the engine's fix requires.
const DECLARED_DIGITS: usize = 6;

/// Why the export says nothing about a fix, for the fixes it does not carry.
fn not_exported(rule: &str) -> &'static str {
    match rule {
        "liveness-restart-loop" => {
            "its fix is the startupProbe gpu-startup-probe-missing's policy adds (the same \
             operations), for the containers that policy covers"
        }
        "readiness-port-open" | "known-server-endpoint" => {
            "the ready endpoint is the one of the server the engine recognises, by command line \
             first (split as a shell does), then by image, with the port its flags or \
             environment set; not proven equal in CEL"
        }
        _ => {
            "its operations rest on evidence CEL does not compute (a command line split as a \
             shell does, the load estimate, other objects), so a policy could write a different \
             patch than the engine"
        }
    }
}

/// Every rule with a safe fix: whether the fix is exported under `policy`, and why not.
pub fn fix_coverage(policy: &Policy) -> Vec<FixCoverage> {
    let exported = fixes(policy);
    catalog::registry()
        .iter()
        .filter_map(|rule| {
            let meta = rule.meta();
            let fix = meta.fix.as_ref()?;
            if fix.applicability != crate::model::finding::Applicability::Safe {
                return None;
            }
            let id = meta.id;
            Some(match exported.iter().find(|f| f.rule == id) {
                Some(f) => FixCoverage {
                    rule: id,
                    policy: Some(f.name.clone()),
                    note: f.note.to_owned(),
                },
                None => FixCoverage {
                    rule: id,
                    policy: None,
                    note: match (id, unavailable(policy, id)) {
                        (STARTUP | BUDGET, Some(why)) => why,
                        _ => not_exported(id).to_owned(),
                    },
                },
            })
        })
        .collect()
}

/// Why the fixes of `rule` that could be exported are not under `policy`.
fn unavailable(policy: &Policy, rule: &str) -> Option<String> {
    if let Some(why) = super::skipped(policy, rule) {
        return Some(why);
    }
    if !policy.allow_annotation_exemptions {
        return Some(
            "allowAnnotationExemptions is false: the engine then keeps its estimate over a \
             declared load that is shorter, which CEL cannot compute"
                .to_owned(),
        );
    }
    if rule == STARTUP && policy.probe_helper.is_some() {
        return Some(
            "probeHelper is set: the fix then runs the helper, whose delivery (volumes, an init \
             container) is not exported"
                .to_owned(),
        );
    }
    None
}

/// One exported fix: one MutatingAdmissionPolicy.
struct Fix {
    name: String,
    rule: &'static str,
    note: &'static str,
    /// CEL: the `JSONPatch` operation for the container `c` at index `i` of
    /// `variables.spec.containers`.
    patch: String,
    /// CEL: the container `c` gets [`Self::patch`].
    when: String,
}

const STARTUP_NOTE: &str = "adds the engine's startupProbe (the liveness check copied, \
periodSeconds 10, the failureThreshold of the largest of the declared load × (1 + margin), the \
liveness and readiness budgets and modelLoad.startupFloorSeconds) to the containers \
gpu-startup-probe-missing's policies report, where probelint.io/model-load-seconds declares the \
load in whole seconds and the liveness probe is an httpGet, tcpSocket or grpc check; not where \
the load is estimated (the budget rests on its slow end), nor where the check comes from the \
readiness probe or the server's endpoint, nor for native sidecars";
const BUDGET_NOTE: &str = "raises startupProbe.failureThreshold as the engine's fix does \
(to cover the declared load × (1 + margin)) where probelint.io/model-load-seconds declares the \
load in whole seconds and the startup budget is shorter than it, on the containers whose serving \
the exported validating policies read; not where the load is estimated";

/// `body` with `name` bound to the value of `value`: a one-element list mapped once (the
/// admission policies' CEL has no `cel.bind`).
fn bind(value: &str, name: &str, body: &str) -> String {
    format!("[{value}].map({name}, {body})[0]")
}

/// CEL: `initialDelaySeconds + failureThreshold × periodSeconds` of the container's probe
/// `field`, the engine's `Probe::budget_seconds` (the apiserver has defaulted every field).
fn probe_budget(field: &str) -> String {
    format!(
        "(int(c.{field}.?initialDelaySeconds.orValue(0)) + int(c.{field}.?failureThreshold.orValue(3)) * int(c.{field}.?periodSeconds.orValue(10)))"
    )
}

fn fixes(policy: &Policy) -> Vec<Fix> {
    let c = Container::new(policy);
    let mut out = Vec::new();
    // The engine's `required_startup_seconds`: ⌈declared × (1 + margin)⌉, in the same double
    // arithmetic (the factor written with every digit it has), rounded up with integers.
    let needed = |body: &str| {
        bind(
            &format!(
                "double(variables.declared) * {:?}",
                1.0 + policy.startup_margin
            ),
            "x",
            &bind(
                "int(x)",
                "k",
                &bind("k + (double(k) < x ? 1 : 0)", "n", body),
            ),
        )
    };
    let serving = |rule: &str| {
        format!(
            "variables.servingPod && variables.declared >= 0 && {} && {} && {}",
            c.accelerated,
            c.not_ignored(rule),
            bound(&c.loads_model_at_start())
        )
    };
    if unavailable(policy, STARTUP).is_none() {
        // `StartupBudget::for_container` for a container with a liveness probe: the largest of
        // the load with margin, the liveness and readiness budgets and the floor; then
        // `threshold_for(needed, 10, 0)`.
        let p = STARTUP_PERIOD_SECONDS;
        let largest = format!(
            "[n, {}, has(c.readinessProbe) ? {} : 0, {}].max()",
            probe_budget("livenessProbe"),
            probe_budget("readinessProbe"),
            policy.model_load.startup_floor_seconds.ceil() as i64,
        );
        let probe = |field: &str| {
            format!(
                "Object.spec.containers.startupProbe{{{field}: c.livenessProbe.{field}, periodSeconds: {p}, failureThreshold: t, timeoutSeconds: c.livenessProbe.?timeoutSeconds.orValue(1)}}"
            )
        };
        let value = format!(
            "has(c.livenessProbe.httpGet) ? {} : has(c.livenessProbe.tcpSocket) ? {} : {}",
            probe("httpGet"),
            probe("tcpSocket"),
            probe("grpc")
        );
        let op = format!(
            "JSONPatch{{op: 'add', path: variables.path + string(i) + '/startupProbe', value: {value}}}"
        );
        out.push(Fix {
            name: format!("probelint.io-{STARTUP}-fix"),
            rule: STARTUP,
            note: STARTUP_NOTE,
            when: format!(
                "{} && !has(c.startupProbe) && has(c.livenessProbe) && (has(c.livenessProbe.httpGet) || has(c.livenessProbe.tcpSocket) || has(c.livenessProbe.grpc))",
                serving(STARTUP)
            ),
            patch: needed(&bind(
                &largest,
                "m",
                &bind(&format!("((m < {p} ? {p} : m) - 1) / {p} + 1"), "t", &op),
            )),
        });
    }
    if unavailable(policy, BUDGET).is_none() {
        // `raise_threshold(probe, needed)`: `threshold_for(needed, period, initialDelay)`. The
        // engine reports (and fixes) only a budget shorter than the load itself, a point here.
        let op = "JSONPatch{op: 'replace', path: variables.path + string(i) + '/startupProbe/failureThreshold', value: t}";
        let threshold = bind(
            "int(c.startupProbe.?periodSeconds.orValue(10))",
            "p",
            &bind(
                "n - int(c.startupProbe.?initialDelaySeconds.orValue(0))",
                "r",
                &bind("((r < p ? p : r) - 1) / p + 1", "t", op),
            ),
        );
        out.push(Fix {
            name: format!("probelint.io-{BUDGET}-fix"),
            rule: BUDGET,
            note: BUDGET_NOTE,
            when: format!(
                "{} && has(c.startupProbe) && int(c.startupProbe.?periodSeconds.orValue(10)) > 0 && int(c.startupProbe.?initialDelaySeconds.orValue(0)) >= 0 && {} < variables.declared",
                serving(BUDGET),
                probe_budget("startupProbe"),
            ),
            patch: needed(&threshold),
        });
    }
    out
}

/// The MutatingAdmissionPolicies and bindings, in the order they are applied.
pub(super) fn documents(policy: &Policy, options: &Options) -> Vec<Value> {
    let mut docs = Vec::new();
    for fix in fixes(policy) {
        docs.push(mutating_policy(&fix, policy, options));
        docs.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {
                "name": fix.name,
                "labels": {"app.kubernetes.io/managed-by": "probelint"},
            },
            "spec": {"policyName": fix.name},
        }));
    }
    docs
}

fn mutating_policy(fix: &Fix, policy: &Policy, options: &Options) -> Value {
    let mut variables = super::variables();
    let load = quote(LOAD_SECONDS_ANNOTATION);
    if let Some(list) = variables.as_array_mut() {
        // The engine reads the template's annotation, else the object's. Anything but whole
        // seconds written plainly (-1 here) is left to the engine: it also reads `600s`, `1e3`.
        list.push(json!({"name": "declared", "expression": bind(
            &format!("variables.templateAnnotations[?{load}].orValue(variables.objectAnnotations[?{load}].orValue(''))"),
            "a",
            &format!("a.matches('^(0|[1-9][0-9]{{0,{}}})$') ? int(a) : -1", DECLARED_DIGITS - 1),
        )}));
        list.push(json!({"name": "path", "expression": "object.kind == 'Pod' ? '/spec/containers/' : '/spec/template/spec/containers/'"}));
    }
    // One operation per container the engine fixes, in container order.
    let expression = format!(
        "variables.spec.containers.transformList(i, c, {}, {})",
        fix.when, fix.patch
    );
    let mut spec = scope(RESOURCE_RULES, options);
    spec["variables"] = variables;
    spec["mutations"] = json!([{
        "patchType": "JSONPatch",
        "jsonPatch": {"expression": expression},
    }]);
    // The fix reads only what a later mutation does not add: once is enough.
    spec["reinvocationPolicy"] = json!("Never");
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {
            "name": fix.name,
            "labels": {"app.kubernetes.io/managed-by": "probelint"},
            "annotations": {
                "probelint.io/rule": fix.rule,
                "probelint.io/policy-version": policy.version,
            },
        },
        "spec": spec,
    })
}
