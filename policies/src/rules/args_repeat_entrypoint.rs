//! `args-repeat-entrypoint`: `args` repeat what the official image's entrypoint already runs,
//! and the server exits with a usage error before it loads anything.

use super::rule::{FixMeta, Report, Rule, RuleMeta};
use crate::analysis::context::Analysis;
use crate::fix::Change;
use crate::fix::patch::remove;
use crate::model::entrypoint;
use crate::model::finding::{Applicability, Severity};
use crate::model::pointer;
use serde_json::Value;

static META: RuleMeta = RuleMeta {
    id: "args-repeat-entrypoint",
    severity: Severity::Error,
    summary: "args repeat the image's entrypoint: the server exits with a usage error at start",
    rationale: "A container that sets no command runs its image's ENTRYPOINT with args appended. The \
official vLLM image (vllm/vllm-openai) already runs `vllm serve` (`python3 -m \
vllm.entrypoints.openai.api_server` in older releases), TGI's runs text-generation-launcher and \
llama.cpp's server tags run /app/llama-server. So `args: [serve, MODEL]` under the vLLM image runs \
`vllm serve serve MODEL`, which exits with `unrecognized arguments` before loading anything \
(vllm-project/vllm#37133; the older api_server rejects the word too, #22072): the pod goes into \
CrashLoopBackOff and never serves, whatever its probes say. Drop the repeated words from args, or set \
command to the whole command line. probelint knows the entrypoints of these official images only, each \
read from the image's Dockerfile (docs/load-time.md); an image built on top of one may set its own \
entrypoint and is not judged.",
    example_policy: None,
    bad_example: include_str!("../../resources/rules/args-repeat-entrypoint/bad.yaml"),
    good_example: include_str!("../../resources/rules/args-repeat-entrypoint/good.yaml"),
    fix: Some(FixMeta {
        applicability: Applicability::Unsafe,
        what: "Removes the repeated words from the start of args, so that the entrypoint runs once. \
Unsafe: it changes what the container runs, and an image pinned to a release with another entrypoint \
reads the remaining args differently.",
    }),
};

pub(crate) static RULE: Rule = Rule::object(&META, check);

fn check(analysis: &Analysis<'_>, report: &mut Report<'_>) {
    for cx in analysis.containers() {
        let container = cx.container;
        let Some(entry) = entrypoint::runs(container.value, container.image) else {
            continue;
        };
        let Some(args) = container.value.get("args").and_then(Value::as_array) else {
            continue;
        };
        let words: Vec<&str> = args.iter().map_while(Value::as_str).collect();
        let repeated = entry.repeated_words(&words);
        if repeated == 0 {
            continue;
        }
        let args_pointer = pointer::join(&container.pointer, "args");
        // The last repeated word first: each removal leaves the indices of the ones before it
        // as they were, read in sequence or against the original.
        let ops = (0..repeated)
            .rev()
            .map(|i| remove(pointer::join_index(&args_pointer, i)))
            .collect();
        let shown = &words[..repeated];
        let runs = entry
            .words
            .iter()
            .chain(words.iter())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let fix = Change::new(format!("remove {shown:?} from the start of args"), ops);
        report
            .container(&cx)
            .at(pointer::join(&args_pointer, "0"))
            .message(format!(
                "{}: with no command, {} runs its entrypoint {} before args, so args {shown:?} \
                 make it run `{}`: the server exits with a usage error before it loads anything",
                container.describe(),
                entry.repository,
                entry.described,
                shorten(&runs),
            ))
            .help(format!(
                "remove {shown:?} from args (the image's entrypoint already runs them), or set \
                 command to the whole command line (entrypoint and failure: {})",
                entry.source
            ))
            .fix(fix)
            .report();
    }
}

/// The command line as a message shows it: the first 120 characters.
fn shorten(line: &str) -> String {
    match line.char_indices().nth(120) {
        Some((at, _)) => format!("{} …", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::testing::findings_of;

    const ID: &str = "args-repeat-entrypoint";

    #[test]
    fn the_repeated_words_are_named_with_what_runs_and_the_fix_drops_them() {
        let f = &findings_of(super::META.bad_example, ID)[0];
        assert_eq!(f.severity, crate::Severity::Error);
        assert_eq!(f.pointer, "/spec/template/spec/containers/0/args/0");
        assert!(
            f.message
                .contains("make it run `vllm serve serve Qwen/Qwen2.5-7B-Instruct --port 8000`"),
            "{}",
            f.message
        );
        let fix = f.fix.as_ref().expect("a fix");
        assert_eq!(fix.applicability, crate::Applicability::Unsafe);
        let mut fixed = crate::rules::testing::objects(super::META.bad_example).remove(0);
        json_patch::patch(&mut fixed, &fix.patch).unwrap();
        assert_eq!(
            fixed["spec"]["template"]["spec"]["containers"][0]["args"],
            serde_json::json!(["Qwen/Qwen2.5-7B-Instruct", "--port", "8000"])
        );
        assert!(findings_of(&serde_json::to_string(&fixed).unwrap(), ID).is_empty());
    }

    #[test]
    fn the_estimate_reads_the_model_the_args_meant() {
        // `args: [serve, M]`: the load estimate reads M, as the fixed container would run it.
        let f = &findings_of(super::META.bad_example, "startup-budget-too-short");
        assert!(f.is_empty(), "{f:?}");
        let yaml = super::META
            .bad_example
            .replace("Qwen2.5-7B-Instruct", "Qwen2.5-72B-Instruct");
        let f = &findings_of(&yaml, "startup-budget-too-short")[0];
        assert!(
            f.message.contains("Qwen2.5-72B-Instruct: 72B parameters"),
            "{}",
            f.message
        );
    }
}
