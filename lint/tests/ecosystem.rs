//! The files other tools read from this repository — `action.yml` (GitHub Actions), the example
//! workflow `docs/github-actions/probelint.yml`, `.pre-commit-hooks.yaml` (pre-commit) and the
//! README's `.pre-commit-config.yaml` example that users copy —
//! validate against their published JSON Schemas (SchemaStore, vendored under
//! `tests/data/schemas/`), read by probelint's own YAML loader, plus the conventions the
//! schemas cannot express.

use probelint_yaml::load::{Limits, parse_stream};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The single YAML document in `path` (relative to the repository root).
fn load_yaml(path: &str) -> Value {
    let bytes = std::fs::read(repo_file(path)).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let mut docs =
        parse_stream(&bytes, &Limits::default()).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(docs.len(), 1, "{path} holds one YAML document");
    docs.remove(0).value
}

fn validator(schema_file: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/schemas")
        .join(schema_file);
    let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        schema["$schema"], "http://json-schema.org/draft-07/schema#",
        "{schema_file}"
    );
    jsonschema::draft7::options()
        .with_retriever(VendoredSchemas)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{schema_file} compiles: {e}"))
}

/// Resolves a schema's `$ref` to another SchemaStore schema from the vendored copies (the
/// pre-commit config schema refers to the hooks schema); never fetches anything.
struct VendoredSchemas;

impl jsonschema::Retrieve for VendoredSchemas {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let file = uri
            .as_str()
            .strip_prefix("https://json.schemastore.org/")
            .ok_or_else(|| format!("{uri} is not a vendored SchemaStore schema"))?;
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/schemas")
            .join(file);
        let bytes = std::fs::read(&path)
            .map_err(|e| format!("{uri}: vendored copy {} unreadable: {e}", path.display()))?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// Every schema violation, one per line, or "" when `instance` is valid.
fn violations(validator: &jsonschema::Validator, instance: &Value) -> String {
    validator
        .iter_errors(instance)
        .map(|e| format!("  at {}: {e}\n", e.instance_path()))
        .collect()
}

fn assert_valid(schema_file: &str, path: &str) -> Value {
    let instance = load_yaml(path);
    let errors = violations(&validator(schema_file), &instance);
    assert!(
        errors.is_empty(),
        "{path} violates {schema_file}:\n{errors}"
    );
    instance
}

fn assert_invalid(schema_file: &str, instance: &Value, why: &str) {
    assert!(
        !violations(&validator(schema_file), instance).is_empty(),
        "{schema_file} should refuse {why}"
    );
}

#[test]
fn action_yml_matches_the_github_action_schema() {
    let action = assert_valid("github-action.json", "action.yml");

    assert_eq!(action["runs"]["using"], "composite");
    for input in ["paths", "fail-on", "config", "sarif-file"] {
        let spec = &action["inputs"][input];
        assert!(
            spec["description"].is_string(),
            "input {input} is documented"
        );
        assert_eq!(spec["required"], false, "input {input} has a default");
    }
    assert_eq!(
        action["outputs"]["sarif-file"]["value"],
        "${{ steps.lint.outputs.sarif-file }}"
    );
    let steps = action["runs"]["steps"].as_array().unwrap();
    for step in steps {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        let name = &step["name"];
        assert!(
            step["shell"].is_string(),
            "composite run step {name} names its shell"
        );
        // Inputs reach scripts through `env:`, never pasted into the script text, where a
        // crafted value would run as shell code.
        assert!(
            !script.contains("${{"),
            "step {name} interpolates an expression into its script"
        );
    }
    let lint = steps
        .iter()
        .find(|s| s["id"] == "lint")
        .expect("a step with id `lint`");
    let script = lint["run"].as_str().unwrap();
    for flag in [
        "--format sarif --output",
        "--format github",
        "--fail-on",
        "--config",
    ] {
        assert!(script.contains(flag), "the lint step passes {flag}");
    }

    let mut broken = action.clone();
    broken["runs"].as_object_mut().unwrap().remove("using");
    assert_invalid("github-action.json", &broken, "runs without `using`");
    let mut broken = action;
    broken["runs"]["steps"][0]
        .as_object_mut()
        .unwrap()
        .remove("shell");
    assert_invalid(
        "github-action.json",
        &broken,
        "a composite run step without a shell",
    );
}

#[test]
fn example_workflow_matches_the_github_workflow_schema() {
    let workflow = assert_valid("github-workflow.json", "docs/github-actions/probelint.yml");

    assert!(
        workflow["on"].get("pull_request").is_some(),
        "runs on pull requests"
    );
    let job = &workflow["jobs"]["probelint"];
    assert_eq!(
        job["permissions"]["security-events"], "write",
        "upload-sarif needs it"
    );
    let steps = job["steps"].as_array().unwrap();
    let uses = |prefix: &str| {
        steps
            .iter()
            .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
            .unwrap_or_else(|| panic!("a step uses {prefix}"))
    };
    let lint = uses("probelint/probelint@");
    let upload = uses("github/codeql-action/upload-sarif@");
    assert_eq!(
        upload["with"]["sarif_file"], lint["with"]["sarif-file"],
        "uploads the report it wrote"
    );
    assert!(
        upload["if"]
            .as_str()
            .is_some_and(|c| c.contains("!cancelled()")),
        "the upload runs also when findings failed the lint step"
    );

    // Why the example quotes "on": read as YAML 1.1, a bare `on:` key is the boolean true, and
    // the workflow is then invalid.
    let bare = std::fs::read_to_string(repo_file("docs/github-actions/probelint.yml"))
        .unwrap()
        .replace("\"on\":", "on:");
    let bare = parse_stream(bare.as_bytes(), &Limits::default())
        .unwrap()
        .remove(0)
        .value;
    assert!(bare.get("true").is_some());
    assert_invalid(
        "github-workflow.json",
        &bare,
        "a workflow whose `on` was read as `true`",
    );
}

#[test]
fn pre_commit_hooks_match_the_pre_commit_hooks_schema() {
    let hooks = assert_valid("pre-commit-hooks.json", ".pre-commit-hooks.yaml");

    let hooks = hooks.as_array().expect("a list of hooks");
    let hook = |id: &str| {
        hooks
            .iter()
            .find(|h| h["id"] == id)
            .unwrap_or_else(|| panic!("a hook with id {id}"))
    };
    for id in ["probelint", "probelint-system"] {
        let h = hook(id);
        assert_ne!(h["pass_filenames"], false, "{id} passes the file names");
        assert_eq!(
            h["types_or"],
            serde_json::json!(["yaml", "json"]),
            "{id} gets YAML and JSON"
        );
        assert_eq!(h["require_serial"], true, "{id} sees all files in one run");
    }
    assert_eq!(hook("probelint-system")["language"], "system");
    assert_eq!(hook("probelint-system")["entry"], "probelint");

    // The built hook is a script run from pre-commit's checkout: it must exist and be
    // executable in git (pre-commit runs it directly).
    let built = hook("probelint");
    assert_eq!(built["language"], "script");
    let entry = built["entry"].as_str().unwrap();
    let script = repo_file(entry);
    assert!(script.is_file(), "{entry} exists");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert!(
            mode & 0o111 != 0,
            "{entry} is executable (mode {mode:o}); `git add --chmod=+x` it"
        );
    }
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(
        text.contains("cargo install --locked"),
        "{entry} builds with the committed Cargo.lock"
    );

    let mut broken = hooks[0].clone();
    broken.as_object_mut().unwrap().remove("entry");
    assert_invalid(
        "pre-commit-hooks.json",
        &Value::Array(vec![broken]),
        "a hook without an entry",
    );
}

/// The `.pre-commit-config.yaml` that the README tells users to add is one pre-commit accepts,
/// and it names a hook this repository defines.
#[test]
fn the_readme_pre_commit_config_matches_the_pre_commit_config_schema() {
    let readme = std::fs::read_to_string(repo_file("README.md")).expect("README.md");
    let section = readme
        .split("## pre-commit")
        .nth(1)
        .expect("the README has a pre-commit section");
    let example = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the pre-commit section starts with a YAML example");
    let mut docs = parse_stream(example.as_bytes(), &Limits::default())
        .unwrap_or_else(|e| panic!("the README's pre-commit example: {e}"));
    let config = docs.remove(0).value;
    let errors = violations(&validator("pre-commit-config.json"), &config);
    assert!(
        errors.is_empty(),
        "the README's .pre-commit-config.yaml violates pre-commit-config.json:\n{errors}"
    );
    let hook_ids: Vec<Value> = load_yaml(".pre-commit-hooks.yaml")
        .as_array()
        .expect("a list of hooks")
        .iter()
        .map(|h| h["id"].clone())
        .collect();
    let used = &config["repos"][0]["hooks"][0]["id"];
    assert!(hook_ids.contains(used), "{used} is one of {hook_ids:?}");

    let mut broken = config.clone();
    broken["repos"][0]["rev"] = serde_json::json!(1);
    assert_invalid(
        "pre-commit-config.json",
        &broken,
        "a rev that is not a string",
    );
}
