//! `progress-deadline-too-short`: the controller gives up on a rollout before its pods can
//! have loaded their model.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use super::support::accuses_on;
use crate::analysis::context::Analysis;
use crate::analysis::object::Workload;
use crate::fix::Change;
use crate::fix::patch::{add, add_to_map, replace};
use crate::model::finding::{Applicability, Severity};
use crate::model::load::LoadTime;
use crate::model::pointer;
use serde_json::{Value, json};

/// Kubernetes' `progressDeadlineSeconds` default, and Knative's and KServe's.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i64 = 600;
/// Knative's per-revision progress deadline (`knative/serving:config/core/configmaps/deployment.yaml`).
pub const KNATIVE_PROGRESS_DEADLINE: &str = "serving.knative.dev/progress-deadline";
/// KubeRay's deadline for a RayService to initialise (`ray-operator/controllers/ray/utils/constant.go`).
pub const RAY_INITIALIZING_TIMEOUT: &str = "ray.io/initializing-timeout";

static META: RuleMeta = RuleMeta {
    id: "progress-deadline-too-short",
    severity: Severity::Warning,
    summary: "The controller's progress deadline is shorter than the time the pods need to load their model",
    rationale: "A startupProbe is not the only clock a slow model races. A Deployment (and an Argo \
Rollout) reports ProgressDeadlineExceeded when a new pod is not available within progressDeadlineSeconds \
(600 s by default): `kubectl rollout status`, Helm --wait, Argo CD and KServe's LLMInferenceService then \
report the rollout failed although its pods keep loading, and an Argo Rollout with progressDeadlineAbort \
aborts it. Knative (and KServe in serverless mode) fails the revision after its progress-deadline (600 s by \
default) and tears its pods down: the model never serves. KubeRay's ray.io/initializing-timeout puts a \
RayService that does not initialise in time into a terminal failure: it must be deleted and recreated. The \
time a pod needs is the download its init containers do, plus the model's load, plus the policy margin; \
the load is declared or estimated from the manifest (docs/load-time.md); with neither, the rule says \
nothing. Torn down or terminal is an error; reported failed is a warning. Seen by every front \
end: the deadline is in the object itself.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/progress-deadline-too-short/bad.yaml"),
    good_example: include_str!("../../resources/rules/progress-deadline-too-short/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Safe,
        what: "Raises the deadline to the time the pods need, rounded up to a whole minute, where the field \
is the user's: a Deployment's or Rollout's progressDeadlineSeconds, a Knative Service's \
serving.knative.dev/progress-deadline annotation, a RayService's ray.io/initializing-timeout. A longer \
deadline only delays when a stuck rollout is reported.",
    }),
};

/// The deadline an object runs under, and what happens when a load outlasts it.
struct Deadline {
    seconds: i64,
    /// `progressDeadlineSeconds 600 s (the default)`.
    described: String,
    consequence: &'static str,
    severity: Severity,
    pointer: String,
    /// How to raise it, when the field is the user's.
    raise: Option<Raise>,
}

enum Raise {
    Field(String),
    /// An annotation in the map at these pointer tokens (which may not exist yet).
    Annotation {
        map: &'static [&'static str],
        key: &'static str,
    },
}

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    let policy = analysis.policy;
    for workload in &analysis.workloads {
        let Some(deadline) = deadline_of(workload) else {
            continue;
        };
        // The slowest serving accelerator container: its download and load, with margin.
        let zero = crate::model::load::Span::point(0.0);
        let slowest = workload
            .serving_accelerated_containers()
            .map(|c| {
                let fetch = c
                    .load
                    .fetch_seconds(&policy.model_load.bandwidth)
                    .unwrap_or(zero);
                (c, fetch)
            })
            .max_by(|a, b| (a.0.load.slow + a.1.slow).total_cmp(&(b.0.load.slow + b.1.slow)));
        let Some((container, fetch)) = slowest else {
            continue;
        };
        let load: &LoadTime = &container.load;
        if !accuses_on(load) {
            continue;
        }
        // An error only when even the fast end outlasts the deadline; the raise covers the slow
        // end with margin. The same cap as every budget: an absurd annotation ("1e300") must not
        // overflow.
        let needed = crate::model::budget::required_startup_seconds(
            fetch.slow + load.slow,
            policy.startup_margin,
        );
        // Silent once the deadline covers the slow end; the raise adds the margin.
        if deadline.seconds as f64 >= fetch.slow + load.slow {
            continue;
        }
        let fastest = fetch.fast + load.fast;
        let certain = (deadline.seconds as f64) < fastest;
        let fetch_text = if fetch.slow > 0.0 {
            format!(
                "{} downloading in an init container + ",
                crate::model::load::seconds_range(fetch.fast.ceil(), fetch.slow.ceil())
            )
        } else {
            String::new()
        };
        let when = match (certain, load.is_point() && fetch.is_point()) {
            (true, true) => String::new(),
            (true, false) => format!(" (even the fast end, {} s, outlasts it)", fastest.ceil()),
            (false, _) => format!(
                " (it covers the fast end, {} s, but not a slow start)",
                fastest.ceil()
            ),
        };
        // Rounded up to a whole minute; progressDeadlineSeconds is an int32, so a deadline it
        // cannot hold gets no fix (the finding stays).
        let raised = (needed.max(0) as u64).div_ceil(60).saturating_mul(60) as i64;
        let fix = deadline
            .raise
            .as_ref()
            .filter(|_| raised <= i64::from(i32::MAX))
            .map(|raise| raise_fix(workload, raise, raised));
        let severity = if certain {
            deadline.severity
        } else {
            deadline.severity.min(Severity::Warning)
        };
        report
            .object(workload)
            .at(deadline.pointer.clone())
            .message(format!(
                "{}: {} < the {needed} s its pods need to become Ready ({fetch_text}{} for \
                 container {:?}, + {} %){when}: {}",
                workload.object_ref,
                deadline.described,
                load.explained(),
                container.name,
                (policy.startup_margin * 100.0).round() as i64,
                deadline.consequence
            ))
            .help(match &deadline.raise {
                Some(_) => format!("raise the deadline to at least {raised} s"),
                None => "the deadline is the controller's: shorten the load (a faster volume, a \
                         smaller or quantised checkpoint) or tell whoever runs the controller"
                    .to_owned(),
            })
            .severity(severity)
            .fix(fix)
            .load(load)
            .report();
    }
}

fn deadline_of(w: &Workload<'_>) -> Option<Deadline> {
    let object = w.object;
    let group = w
        .object_ref
        .api_version
        .split('/')
        .next()
        .unwrap_or_default();
    let kind = w.object_ref.kind.as_str();
    match (group, kind) {
        ("apps", "Deployment") | ("argoproj.io", "Rollout") => {
            let set = object
                .pointer("/spec/progressDeadlineSeconds")
                .and_then(Value::as_i64);
            let abort = kind == "Rollout"
                && object.pointer("/spec/progressDeadlineAbort") == Some(&Value::Bool(true));
            Some(Deadline {
                seconds: set.unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS),
                described: match set {
                    Some(s) => format!("progressDeadlineSeconds {s} s"),
                    None => format!(
                        "progressDeadlineSeconds {DEFAULT_PROGRESS_DEADLINE_SECONDS} s (the default)"
                    ),
                },
                consequence: if abort {
                    "the Rollout is aborted (progressDeadlineAbort) while its pods are still loading"
                } else {
                    "every rollout is reported failed (ProgressDeadlineExceeded: kubectl rollout \
                     status, Helm --wait, Argo CD) while its pods are still loading"
                },
                severity: if abort {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                pointer: if set.is_some() {
                    "/spec/progressDeadlineSeconds".to_owned()
                } else {
                    "/spec".to_owned()
                },
                raise: Some(Raise::Field("/spec/progressDeadlineSeconds".to_owned())),
            })
        }
        ("serving.knative.dev", "Service") => {
            let map = "/spec/template/metadata/annotations";
            let written = object
                .pointer(map)
                .and_then(|a| a.get(KNATIVE_PROGRESS_DEADLINE))
                .and_then(Value::as_str);
            let seconds = match written {
                Some(text) => go_duration_seconds(text)?,
                None => DEFAULT_PROGRESS_DEADLINE_SECONDS,
            };
            Some(Deadline {
                seconds,
                described: match written {
                    Some(text) => format!("{KNATIVE_PROGRESS_DEADLINE} {text:?}"),
                    None => format!(
                        "Knative's progress deadline, {DEFAULT_PROGRESS_DEADLINE_SECONDS} s by default"
                    ),
                },
                consequence: "Knative fails the revision and tears its pods down: the model never serves",
                severity: Severity::Error,
                pointer: match written {
                    Some(_) => pointer::join(map, KNATIVE_PROGRESS_DEADLINE),
                    None => "/spec/template".to_owned(),
                },
                raise: Some(Raise::Annotation {
                    map: &["spec", "template", "metadata", "annotations"],
                    key: KNATIVE_PROGRESS_DEADLINE,
                }),
            })
        }
        ("serving.kserve.io", "InferenceService") => {
            let mode = object
                .pointer("/metadata/annotations/serving.kserve.io~1deploymentMode")
                .and_then(Value::as_str);
            let raw = matches!(mode, Some("RawDeployment" | "Standard"));
            let serverless = mode == Some("Serverless");
            Some(Deadline {
                seconds: DEFAULT_PROGRESS_DEADLINE_SECONDS,
                described: format!(
                    "the {DEFAULT_PROGRESS_DEADLINE_SECONDS} s progress deadline KServe runs it under"
                ),
                consequence: if raw {
                    "its Deployment (progressDeadlineSeconds set by the KServe controller) is \
                     reported failed while its pods are still loading"
                } else if serverless {
                    "Knative fails the revision and tears its pods down: the model never serves"
                } else {
                    "as a raw deployment it is reported failed while its pods load; in serverless \
                     mode Knative fails the revision and tears its pods down"
                },
                severity: if serverless {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                pointer: "/spec/predictor".to_owned(),
                raise: None,
            })
        }
        ("ray.io", "RayService") => {
            let text = w
                .annotations
                .and_then(|a| a.get(RAY_INITIALIZING_TIMEOUT))
                .and_then(Value::as_str)?;
            Some(Deadline {
                seconds: go_duration_seconds(text)?,
                described: format!("{RAY_INITIALIZING_TIMEOUT} {text:?}"),
                consequence: "the RayService enters a terminal failure and must be deleted and recreated",
                severity: Severity::Error,
                pointer: pointer::join("/metadata/annotations", RAY_INITIALIZING_TIMEOUT),
                raise: Some(Raise::Annotation {
                    map: &["metadata", "annotations"],
                    key: RAY_INITIALIZING_TIMEOUT,
                }),
            })
        }
        _ => None,
    }
}

fn raise_fix(w: &Workload<'_>, raise: &Raise, seconds: i64) -> Change {
    let (ops, what) = match raise {
        Raise::Field(path) => {
            let op = if w.object.pointer(path).is_some() {
                replace(path.clone(), json!(seconds))
            } else {
                add(path.clone(), json!(seconds))
            };
            (
                vec![op],
                format!(
                    "set {} to {seconds}",
                    path.rsplit('/').next().unwrap_or(path)
                ),
            )
        }
        Raise::Annotation { map, key } => {
            let value = json!(format!("{seconds}s"));
            let op = add_to_map(w.object, map, key, value);
            (
                vec![op],
                format!("set the annotation {key} to \"{seconds}s\""),
            )
        }
    };
    Change::new(what, ops)
}

/// Seconds in a Go duration (`600s`, `10m`, `1h30m`, `90`): what Knative and KubeRay parse.
pub(crate) fn go_duration_seconds(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(n) = text.parse::<i64>() {
        return Some(n);
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&e| e > 0)?;
        let number: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Some(total.floor() as i64)
}

#[cfg(test)]
mod tests {
    use super::go_duration_seconds;
    use crate::rules::testing::findings_of;

    const ID: &str = "progress-deadline-too-short";

    #[test]
    fn a_70b_model_behind_the_default_600_s_deadline() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.severity, crate::Severity::Warning);
        assert_eq!(f.pointer, "/spec");
        assert!(
            f.message.starts_with(
                "Deployment llama-70b: progressDeadlineSeconds 600 s (the default) < the 3725 s its \
                 pods need to become Ready (≈ 160–2980 s (140 GB"
            ),
            "{}",
            f.message
        );
        assert!(f.message.contains("reported failed"), "{}", f.message);
        // The deadline covers the fast end (160 s): a warning that says so, and a fix sized to
        // the slow end.
        assert!(
            f.message
                .contains("(it covers the fast end, 160 s, but not a slow start)"),
            "{}",
            f.message
        );
        let fix = f.fix.as_ref().expect("a fix");
        assert_eq!(
            serde_json::to_value(&fix.patch).unwrap(),
            serde_json::json!([{"op": "add", "path": "/spec/progressDeadlineSeconds", "value": 3780}])
        );
    }

    #[test]
    fn an_aborting_rollout_and_a_knative_revision_are_errors() {
        let rollout = include_str!(
            "../../resources/rules/progress-deadline-too-short/fires-argo-rollout-that-aborts.yaml"
        );
        let f = &findings_of(rollout, ID)[0];
        assert_eq!(f.severity, crate::Severity::Error);
        assert!(f.message.contains("aborted"), "{}", f.message);
        assert_eq!(f.pointer, "/spec/progressDeadlineSeconds");

        let knative = include_str!(
            "../../resources/rules/progress-deadline-too-short/fires-knative-progress-deadline.yaml"
        );
        let f = &findings_of(knative, ID)[0];
        assert_eq!(f.severity, crate::Severity::Error);
        assert!(f.message.contains("tears its pods down"), "{}", f.message);
        let fix = f.fix.as_ref().expect("a fix");
        assert_eq!(
            serde_json::to_value(&fix.patch).unwrap(),
            serde_json::json!([{"op": "add", "path": "/spec/template/metadata/annotations/serving.knative.dev~1progress-deadline", "value": "20520s"}])
        );
        // Without the annotation, the 600 s default: the fix adds the map.
        let bare = include_str!(
            "../../resources/rules/progress-deadline-too-short/fires-knative-default-progress-deadline.yaml"
        );
        let f = &findings_of(bare, ID)[0];
        assert_eq!(
            serde_json::to_value(&f.fix.as_ref().unwrap().patch).unwrap(),
            serde_json::json!([{"op": "add", "path": "/spec/template/metadata", "value": {"annotations": {"serving.knative.dev/progress-deadline": "20520s"}}}])
        );
    }

    #[test]
    fn a_guessed_load_accuses_nothing() {
        // An Argo Rollout that aborts, with no model named: the 300 s default is a guess, and
        // no finding rests on it. Named, a model whose fast end (830 s) outlasts the same
        // deadline is an error.
        let guess = include_str!(
            "../../resources/rules/progress-deadline-too-short/silent-aborting-rollout-on-the-default-load.yaml"
        );
        assert!(findings_of(guess, ID).is_empty());
        let named = guess.replace(
            "          image: vllm/vllm-openai:v0.10.1\n",
            "          image: vllm/vllm-openai:v0.10.1\n          args: [--model, meta-llama/Llama-3.1-405B-Instruct]\n",
        );
        let f = &findings_of(&named, ID)[0];
        assert_eq!(f.severity, crate::Severity::Error, "{}", f.message);
    }

    #[test]
    fn a_rayservice_initializing_timeout_is_terminal() {
        let ray = include_str!(
            "../../resources/rules/progress-deadline-too-short/fires-rayservice-initializing-timeout.yaml"
        );
        let f = &findings_of(ray, ID)[0];
        assert_eq!(f.severity, crate::Severity::Error);
        assert!(f.message.contains("terminal failure"), "{}", f.message);
        assert_eq!(
            f.pointer,
            "/metadata/annotations/ray.io~1initializing-timeout"
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_seconds("600s"), Some(600));
        assert_eq!(go_duration_seconds("10m"), Some(600));
        assert_eq!(go_duration_seconds("1h30m"), Some(5400));
        assert_eq!(go_duration_seconds("900"), Some(900));
        assert_eq!(go_duration_seconds("ten minutes"), None);
    }
}
