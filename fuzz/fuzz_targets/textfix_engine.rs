//! `probelint --fix` end to end on arbitrary manifest text, minus the file write: the engine's
//! fixes of every object, turned into text edits (`probelint::lint::plan_fixes`, which calls
//! `probelint::textfix::apply`). Never panics; a fixed text always parses into as many
//! documents as the original, and linting it again finds nothing more to fix.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelint::inputs::Input;
use probelint::lint::{Source, plan_fixes};
use probelint::yaml::{Limits, parse_stream};
use probelint_policies::Policy;
use std::path::PathBuf;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(|| Policy::builtin().expect("built-in policy"));

const LIMITS: Limits = Limits {
    max_file_bytes: 256 * 1024,
    max_documents: 64,
    max_depth: 64,
    max_nodes: 20_000,
};

fn source(bytes: Vec<u8>) -> Source {
    Source {
        name: "fuzz.yaml".to_owned(),
        input: Input::File(PathBuf::from("fuzz.yaml")),
        bytes: Ok(bytes),
    }
}

fuzz_target!(|data: &[u8]| {
    let (_report, plans) = plan_fixes(vec![source(data.to_vec())], &POLICY, &LIMITS);
    for plan in plans {
        let Ok(fixed) = plan.fixed else { continue };
        let before = parse_stream(data, &LIMITS).expect("only parsed files are fixed");
        let after = parse_stream(fixed.as_bytes(), &LIMITS)
            .unwrap_or_else(|e| panic!("the fixed text does not parse: {e}\n{fixed}"));
        assert_eq!(before.len(), after.len(), "documents lost or added\n{fixed}");
        assert!(!plan.fixed_findings.is_empty());
        // Fixing the fixed text again changes nothing.
        let (_, again) = plan_fixes(vec![source(fixed.clone().into_bytes())], &POLICY, &LIMITS);
        for plan in again {
            if let Ok(twice) = plan.fixed {
                assert_eq!(twice, fixed, "--fix is not idempotent");
            }
        }
    }
});
