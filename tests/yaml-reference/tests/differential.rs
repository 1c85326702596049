//! probelint-yaml reads every input as Kubernetes reads it: the same documents, the same JSON
//! values, and an error where, and only where, kubectl's decoder errors. The reference is the
//! real decoder (`go/main.go`, apimachinery + sigs.k8s.io/yaml), run as one process for all
//! inputs.
//!
//! Inputs: every manifest of the repository (the corpus, `examples/`, the rule and operator
//! fixtures, the fuzz seeds), generated mutations of each (line endings, BOM, `...`, tabs,
//! comments, duplicate keys, flow collections written by hand), every case of the vendored
//! yaml-test-suite (`yaml-test-suite/`), and shapes written here (YAML 1.1 scalars, tags,
//! anchors and merges, block scalars, separators).
//!
//! Where both refuse an input, the lines their errors name are compared too (the reference
//! turns go-yaml's line within kubectl's piece of the stream into the file's line).
//!
//! A disagreement that cannot be closed is listed in [`KNOWN`] (or [`KNOWN_LINES`]) with its
//! reason (and in `docs/yaml.md`); the test fails on any other disagreement, and on a known one
//! that no longer happens, so the lists stay exact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use probelint_yaml_reference::{Reference, disagreement, line_disagreement, ours};

/// Disagreements that stay, with why: each entry is a part of the names of the inputs it covers
/// (a shape and its mutations, a yaml-test-suite case). Each is listed in `docs/yaml.md` too.
const KNOWN: &[(&str, &str)] = &[
    (
        "shape: NEL and LS in text",
        "go-yaml reads NEL, LS and PS (U+0085, U+2028, U+2029) as line breaks, as YAML 1.1 \
         says, and folds them inside quoted scalars; saphyr-parser reads them as YAML 1.2 \
         does, as text",
    ),
    // YAML 1.2 syntax that go-yaml's older scanner refuses, where probelint reads it: kubectl
    // refuses these files, so no cluster runs what they say.
    ("yaml-test-suite: 3UYS ", YAML12_ESCAPE),
    ("yaml-test-suite: 2SXE ", ANCHOR_NAME),
    ("yaml-test-suite: 8XYN ", ANCHOR_NAME),
    ("yaml-test-suite: W5VH ", ANCHOR_NAME),
    ("yaml-test-suite: Y2GN ", ANCHOR_NAME),
    ("yaml-test-suite: 4MUZ/01 ", FLOW_KEY_LINES),
    ("yaml-test-suite: 4MUZ/02 ", FLOW_KEY_LINES),
    ("yaml-test-suite: 5MUD ", FLOW_KEY_LINES),
    ("yaml-test-suite: 9SA2 ", FLOW_KEY_LINES),
    ("yaml-test-suite: K3WX ", FLOW_KEY_LINES),
    ("yaml-test-suite: NJ66 ", FLOW_KEY_LINES),
    ("yaml-test-suite: VJP3/00 ", FLOW_KEY_LINES),
    ("yaml-test-suite: VJP3/01 ", FLOW_KEY_LINES),
    ("yaml-test-suite: WZ62 ", FLOW_KEY_LINES),
    ("yaml-test-suite: 58MP ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: 5T43 ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: DBG4 ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: HM87/00 ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: 4ABK ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: 652Z ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: HM87/01 ", FLOW_PLAIN_INDICATOR),
    ("yaml-test-suite: JR7V ", FLOW_PLAIN_INDICATOR),
    // YAML 1.2 errors go-yaml reads, where probelint refuses.
    ("yaml-test-suite: X4QW ", GLUED_COMMENT),
    ("yaml-test-suite: G5U8 ", FLOW_DASH),
    ("yaml-test-suite: YJV2 ", FLOW_DASH),
    (
        "yaml-test-suite: HRE5 ",
        "go-yaml reads `\\'` in a double-quoted scalar as `'`; YAML has no such escape, and \
         saphyr-parser refuses it",
    ),
    (
        "yaml-test-suite: U99R ",
        "go-yaml ends a tag at a `,` outside flow collections (`!!str, xxx` reads `xxx`); YAML \
         and saphyr-parser refuse the `,`",
    ),
    (
        "yaml-test-suite: 4H7K ",
        "go-yaml reads `[ a, b, c ] ]` and never sees the extra `]` after the document's root \
         node; saphyr-parser refuses it",
    ),
    (
        "yaml-test-suite: 3HFZ ",
        "go-yaml reads text after `...` on its line as a new piece of the stream and stops; \
         YAML and saphyr-parser refuse it",
    ),
    (
        "yaml-test-suite: S98Z ",
        "go-yaml reads a block scalar whose leading empty lines have more spaces than a later \
         comment line as empty; YAML and saphyr-parser refuse it",
    ),
    // A document that is one plain scalar: no object, which probelint reports as such either way.
    (
        "yaml-test-suite: BS4K ",
        "a document that is a plain scalar with a comment, then a second line: go-yaml reads \
         the first line and nothing more; YAML and saphyr-parser refuse it",
    ),
    (
        "yaml-test-suite: XLQ9 ",
        "a document that is a plain scalar, then a `%YAML` line at column 0: go-yaml reads it \
         as the scalar's second line, probelint as a directive that ends the document (as \
         go-yaml reads it after any other node)",
    ),
    (
        "yaml-test-suite: UT92 ",
        "a flow mapping whose second line starts with `%`: go-yaml refuses it as a directive; \
         YAML and saphyr-parser read text, and the `...` without a document after it fails \
         the stream later",
    ),
];

const YAML12_ESCAPE: &str = "`\\/` is an escape of YAML 1.2 only: go-yaml refuses it (\"found \
    unknown escape character\"), saphyr-parser reads `/`";

const ANCHOR_NAME: &str = "go-yaml's anchor and alias names are letters, digits, `-` and `_` \
    only (it refuses or cuts the rest: `&a:` is `a`, then `:`); YAML 1.2 allows any character \
    but blanks and flow indicators, and saphyr-parser reads them";

const FLOW_KEY_LINES: &str = "an implicit key of a flow mapping on another line than its `:` \
    (or a quoted or plain key over two lines, or a key with no value but a tag): YAML 1.2 reads \
    it, go-yaml refuses it (\"did not find expected ',' or '}'\"); kubectl's JSON reading of a \
    stream that starts with `{` fails first in some";

const FLOW_PLAIN_INDICATOR: &str = "a plain scalar in a flow collection that starts with `:` or \
    `?`, or a `?` or `:` right after a plain key: YAML 1.2 reads text (`[:x]`, `{?foo: bar}`, \
    `{omitted value:,}`), go-yaml reads an indicator (a key `x` or `foo`, the key `omitted \
    value:`) or refuses it";

const GLUED_COMMENT: &str = "a `#` right after a block scalar's header (`block: >#c`): go-yaml \
    reads a comment, YAML says a comment needs a blank before it, and saphyr-parser refuses it. \
    The pre-pass inserts that blank after a closing quote or a flow indicator, which it scans \
    anyway; a block scalar's header would need it to scan files with neither";

const FLOW_DASH: &str = "a plain `-` in a flow sequence (`[-]`): go-yaml reads the string \
    `-`; YAML 1.2 and saphyr-parser refuse a plain scalar that starts with `-` before `,`, `]`";

/// Inputs on which both fail, but probelint's error names another line than kubectl's, with
/// why; each entry is a part of the names it covers, as in [`KNOWN`].
const KNOWN_LINES: &[(&str, &str)] = &[
    (
        "(comment after every line)",
        "a comment after a plain scalar's first line ends it: saphyr-parser stops at that \
         comment (\"comment intercepting the multiline text\"), go-yaml at the next token that \
         cannot follow the scalar, on that line or the next",
    ),
    ("yaml-test-suite: BF9H ", "as `(comment after every line)`"),
    (
        "shape: brace continuing a sequence item (comment line",
        "a broken input that each reader stops on at another token: a comment line ends the \
         item's plain scalar, and go-yaml refuses the `{` below it where saphyr-parser opens a \
         flow mapping and refuses the `-` after it",
    ),
    (
        "shape: bracket continuing a plain scalar (comment line",
        "as `shape: brace continuing a sequence item (comment line`, with a `[`",
    ),
    ("shape: directive", DIRECTIVE_LINE),
    ("yaml-test-suite: 27NA ", DIRECTIVE_LINE),
    ("yaml-test-suite: 5TYM ", DIRECTIVE_LINE),
    ("yaml-test-suite: 6CK3 ", DIRECTIVE_LINE),
    ("yaml-test-suite: 6LVF ", DIRECTIVE_LINE),
    ("yaml-test-suite: C4HZ ", DIRECTIVE_LINE),
    ("yaml-test-suite: CC74 ", DIRECTIVE_LINE),
    ("yaml-test-suite: MUS6/", DIRECTIVE_LINE),
    ("yaml-test-suite: P76L ", DIRECTIVE_LINE),
    ("yaml-test-suite: QLJ7 ", DIRECTIVE_LINE),
    ("yaml-test-suite: U3C3 ", DIRECTIVE_LINE),
    ("yaml-test-suite: W4TN ", DIRECTIVE_LINE),
    ("yaml-test-suite: Z9M4 ", DIRECTIVE_LINE),
    (
        "yaml-test-suite: Y79Y/00",
        "a collection as a complex key (`? -`), then a tab after its `:`: saphyr-parser refuses \
         the key (no JSON object has one), go-yaml the tab on the next line",
    ),
];

const DIRECTIVE_LINE: &str = "kubectl cuts a `%YAML`/`%TAG` directive into a piece of its own \
    at the `---` after it; go-yaml's error is at the end of that piece (the `---` line, or the \
    blank line before it), probelint's at the directive, the line to remove";

#[test]
#[ignore = "e2e: needs Go (builds Kubernetes' YAML decoder from tests/yaml-reference/go)"]
fn probelint_reads_every_input_as_kubernetes_does() {
    let mut reference = Reference::start().unwrap_or_else(|e| panic!("{e}"));
    let mut found = BTreeMap::new();
    let mut lines = BTreeMap::new();
    let (mut count, mut both_failed, mut lines_compared) = (0usize, 0usize, 0usize);
    for_each_input(|name, input| {
        count += 1;
        let theirs = reference
            .decode(input)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = ours(input);
        let shown = || {
            if input.len() <= 2_000 {
                String::from_utf8_lossy(input).into_owned()
            } else {
                format!("({} bytes)", input.len())
            }
        };
        if let Some(difference) = disagreement(&ours, &theirs) {
            found.insert(name.to_owned(), format!("{}\n{difference}", shown()));
        } else if ours.error.is_some() {
            both_failed += 1;
            lines_compared += usize::from(theirs.error_line.is_some());
            if let Some(difference) = line_disagreement(&ours, &theirs) {
                lines.insert(name.to_owned(), format!("{}\n{difference}", shown()));
            }
        }
    });
    assert!(count > 1_000, "only {count} inputs");
    let mut report = String::new();
    unlisted(&found, KNOWN, "KNOWN", &mut report);
    unlisted(&lines, KNOWN_LINES, "KNOWN_LINES", &mut report);
    eprintln!(
        "{count} inputs; {} read differently, all listed in KNOWN ({} entries); {both_failed} \
         refused by both, {lines_compared} with a line named by Kubernetes, {} of them at another \
         line, all listed in KNOWN_LINES ({} entries)",
        found.len(),
        KNOWN.len(),
        lines.len(),
        KNOWN_LINES.len(),
    );
    assert!(
        report.is_empty(),
        "{} of {count} inputs read differently (KNOWN lists {}), {} of {lines_compared} errors at \
         another line (KNOWN_LINES lists {}):{report}",
        found.len(),
        KNOWN.len(),
        lines.len(),
        KNOWN_LINES.len(),
    );
}

/// Adds to `report` each difference in `found` that `known` does not cover, and each entry of
/// `known` that covers none (so the table stays exact).
fn unlisted(
    found: &BTreeMap<String, String>,
    known: &[(&str, &str)],
    table: &str,
    report: &mut String,
) {
    let listed = |name: &str| known.iter().any(|(part, _)| name.contains(part));
    for (name, difference) in found {
        if !listed(name) {
            report.push_str(&format!("\n== {name}\n{difference}\n"));
        }
    }
    for (part, _) in known {
        if !found.keys().any(|name| name.contains(part)) {
            report.push_str(&format!("\n== {part}: listed in {table}, but now agrees\n"));
        }
    }
}

/// The vendored yaml-test-suite (`yaml-test-suite/`, its release data-2022-01-17): each case's
/// `in.yaml`, named by its id and title. Every case is there, or the test says which is not.
fn suite_cases() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("yaml-test-suite");
    let mut inputs = Vec::new();
    walk_suite(&root, &root, &mut inputs);
    inputs.sort();
    assert_eq!(
        inputs.len(),
        SUITE_CASES,
        "{}: expected the {SUITE_CASES} cases of yaml-test-suite data-2022-01-17",
        root.display()
    );
    inputs
}

/// The cases (an `in.yaml` each) in yaml-test-suite's release data-2022-01-17.
const SUITE_CASES: usize = 402;

fn walk_suite(root: &Path, dir: &Path, inputs: &mut Vec<(String, Vec<u8>)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk_suite(root, &path, inputs);
        } else if path.file_name().is_some_and(|n| n == "in.yaml") {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let title = std::fs::read_to_string(dir.join("===")).unwrap_or_default();
            let id = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
            inputs.push((format!("yaml-test-suite: {id} ({})", title.trim()), bytes));
        }
    }
}

/// Files above this size get only the whole-file mutations, not one per line.
const PER_LINE_MUTATIONS_UP_TO: usize = 64 * 1024;

/// Calls `check` with every input and its name: the repository's manifests, their mutations,
/// and the written shapes.
fn for_each_input(mut check: impl FnMut(&str, &[u8])) {
    for path in manifests() {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let name = path
            .strip_prefix(probelint_testkit::repo_root())
            .unwrap_or(&path)
            .display()
            .to_string();
        check(&name, &bytes);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let per_line = text.len() <= PER_LINE_MUTATIONS_UP_TO;
            for (mutation, mutated) in mutations(text, per_line) {
                check(&format!("{name} ({mutation})"), mutated.as_bytes());
            }
        }
    }
    for (name, bytes) in suite_cases() {
        check(&name, &bytes);
    }
    for (name, text) in SHAPES {
        check(&format!("shape: {name}"), text.as_bytes());
        for (mutation, mutated) in mutations(text, true) {
            check(&format!("shape: {name} ({mutation})"), mutated.as_bytes());
        }
    }
}

/// The YAML and JSON files of the repository that are manifests or parser inputs.
fn manifests() -> Vec<PathBuf> {
    let root = probelint_testkit::repo_root();
    let mut found = Vec::new();
    for dir in [
        "tests/corpus",
        "examples",
        "policies/resources",
        "fuzz/seeds/yaml_parse",
        "webhook/tests/fixtures",
    ] {
        walk(&root.join(dir), &mut found);
    }
    found.sort();
    found
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, found);
        } else if dir.ends_with("yaml_parse")
            || path
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            found.push(path);
        }
    }
}

/// Variants of `text` that people (or their tools) write, each named.
fn mutations(text: &str, per_line: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    out.push((
        "CRLF".into(),
        text.replace("\r\n", "\n").replace('\n', "\r\n"),
    ));
    out.push(("BOM".into(), format!("\u{feff}{text}")));
    out.push(("trailing ...".into(), format!("{text}\n...\n")));
    out.push(("leading ---".into(), format!("---\n{text}")));
    out.push((
        "trailing blanks".into(),
        lines.iter().map(|l| format!("{l}  \n")).collect(),
    ));
    out.push((
        "tab after every `: `".into(),
        lines
            .iter()
            .map(|l| format!("{}\n", l.replacen(": ", ":\t", 1)))
            .collect(),
    ));
    out.push((
        "comment after every line".into(),
        lines.iter().map(|l| format!("{l} # c\n")).collect(),
    ));
    out.push((
        "comment line at column 0 between lines".into(),
        lines.iter().map(|l| format!("{l}\n# c\n")).collect(),
    ));
    out.push((
        "comment line indented between lines".into(),
        lines.iter().map(|l| format!("{l}\n      # c\n")).collect(),
    ));
    out.push((
        "blank line between lines".into(),
        lines.iter().map(|l| format!("{l}\n\n")).collect(),
    ));
    if !per_line {
        return out;
    }
    // A duplicated `key: value` line at every level (one mutation per line, at most 40 a file).
    let mut duplicated = 0;
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start().trim_start_matches("- ");
        let Some((key, value)) = trimmed.split_once(": ") else {
            continue;
        };
        let simple_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        if !simple_key || value.trim().is_empty() || line.trim_start().starts_with("- ") {
            continue;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut copy: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        copy.insert(i + 1, format!("{indent}{key}: duplicated-{i}"));
        out.push((format!("line {} duplicated", i + 1), copy.join("\n") + "\n"));
        duplicated += 1;
        if duplicated == 40 {
            break;
        }
    }
    // Flow sequences written by hand: `key: [` ... `]` with the items and the closing bracket
    // at, left of, or right of the key's column (at most 10 sequences a file).
    let mut flows = 0;
    for (i, line) in lines.iter().enumerate() {
        if flows == 10 {
            break;
        }
        let trimmed = line.trim_start();
        let Some(key) = trimmed.strip_suffix(':') else {
            continue;
        };
        let Some(next) = lines.get(i + 1) else {
            continue;
        };
        let item_indent = next.len() - next.trim_start().len();
        if !next.trim_start().starts_with("- ") || key.is_empty() || key.contains(' ') {
            continue;
        }
        let items: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| {
                l.len() - l.trim_start().len() == item_indent && l.trim_start().starts_with("- ")
            })
            .map(|l| l.trim_start().trim_start_matches("- "))
            .collect();
        let scalars = items
            .iter()
            .all(|s| !s.contains(": ") && !s.starts_with(['[', '{', '|', '>', '&', '*', '!']));
        if !scalars {
            continue;
        }
        flows += 1;
        let indent = &line[..line.len() - trimmed.len()];
        let rest = &lines[i + 1 + items.len()..];
        let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
        for (shape, flow) in [
            (
                "`]` at column 0",
                format!("{indent}{key}: [{}\n]", quoted.join(", ")),
            ),
            (
                "`]` at the key's column",
                format!("{indent}{key}: [{}\n{indent}]", quoted.join(", ")),
            ),
            (
                "items at column 0",
                format!("{indent}{key}: [\n{}\n{indent}  ]", quoted.join(",\n")),
            ),
            (
                "items at the key's column",
                format!(
                    "{indent}{key}: [\n{}\n{indent}]",
                    quoted
                        .iter()
                        .map(|q| format!("{indent}{q}"))
                        .collect::<Vec<_>>()
                        .join(",\n")
                ),
            ),
            (
                "indented items, trailing comma",
                format!(
                    "{indent}{key}: [\n{}\n{indent}]",
                    quoted
                        .iter()
                        .map(|q| format!("{indent}    {q},"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            ),
            (
                "tab-indented items",
                format!(
                    "{indent}{key}: [\n{}\n{indent}]",
                    quoted
                        .iter()
                        .map(|q| format!("\t{q}"))
                        .collect::<Vec<_>>()
                        .join(",\n")
                ),
            ),
        ] {
            let mut copy: Vec<String> = lines[..i].iter().map(|l| (*l).to_owned()).collect();
            copy.push(flow);
            copy.extend(rest.iter().map(|l| (*l).to_owned()));
            out.push((
                format!("line {}: flow sequence, {shape}", i + 1),
                copy.join("\n") + "\n",
            ));
        }
    }
    out
}

/// `s` as a double-quoted YAML scalar.
fn quote(s: &str) -> String {
    let s = s.trim();
    if s.starts_with('"') && s.ends_with('"') && s.len() >= 2 {
        return s.to_owned();
    }
    let unquoted = s
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .map_or_else(|| s.to_owned(), |s| s.replace("''", "'"));
    serde_json::Value::String(unquoted).to_string()
}

/// Inputs written here: the shapes kubectl users write, and the YAML 1.1 reading of scalars.
const SHAPES: &[(&str, &str)] = &[
    (
        "pod",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    app: x\nspec:\n  containers:\n  - name: c\n    image: vllm/vllm-openai:v0.9.0\n    args:\n    - --model\n    - m\n    ports:\n    - containerPort: 8000\n",
    ),
    (
        "yaml 1.1 booleans",
        "a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Yes\nh: NO\ni: True\nj: FALSE\nk: On\nl: Y\nm: N\nn: tRue\n",
    ),
    (
        "yaml 1.1 booleans as keys",
        "yes: 1\nno: 2\non: 3\noff: 4\ny: 5\nn: 6\n",
    ),
    (
        "numbers",
        "a: 0644\nb: 0o644\nc: 0x1F\nd: 1_000\ne: 1e3\nf: .5\ng: +1\nh: -0\ni: 0b101\nj: 1:30\nk: 1.0\nl: -1.5e-3\nm: 0.\nn: 08\no: 0x_1F\np: 9223372036854775807\nq: 9223372036854775808\nr: 18446744073709551616\ns: -9223372036854775809\nt: 1e400\nu: 0xFFFFFFFFFFFFFFFF\n",
    ),
    ("number keys", "1: a\n0644: b\n1.5: c\n0x10: d\n1e3: e\n"),
    (
        "nulls",
        "a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: \"\"\ng: ''\n",
    ),
    ("special floats", "a: .inf\n"),
    ("nan", "a: .nan\n"),
    (
        "timestamps",
        "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 2001-12-14 21:59:43.10 -5\nd: \"2001-12-14\"\n",
    ),
    (
        "tags",
        "a: !!str 123\nb: !!int \"3\"\nc: !!float 1\nd: !!bool yes\ne: !!null ''\nf: !!binary aGVsbG8=\ng: !custom x\nh: ! 12\ni: !!str yes\n",
    ),
    ("bad int tag", "a: !!int abc\n"),
    (
        "quoted scalars",
        "a: \"yes\"\nb: '0644'\nc: \"a\\tb\\u00e9\"\nd: 'it''s'\ne: \"multi\n  line\"\nf: 'multi\n\n  line'\n",
    ),
    (
        "block scalars",
        "a: |\n  one\n  two\nb: >\n  folded\n  text\n\n  para\nc: |-\n  strip\nd: |+\n  keep\n\ne: >2\n    indented\nf: |\n  trailing\n\n\ng: end\n",
    ),
    ("plain multi-line", "a: one\n  two\n  three\nb: x\n"),
    (
        "anchors and merge",
        "base: &b\n  x: 1\n  y: 2\nother:\n  <<: *b\n  y: 3\nlist:\n  <<: [*b, {z: 4}]\nalias: *b\n",
    ),
    (
        "merge after explicit key",
        "base: &b\n  x: 1\nm:\n  x: 0\n  <<: *b\n",
    ),
    (
        "merge of a sequence of mappings",
        "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc:\n  <<: [*a, *b]\n",
    ),
    ("merge of a scalar", "a: &a 1\nb:\n  <<: *a\n"),
    ("quoted merge key", "a:\n  \"<<\": {x: 1}\n"),
    ("anchor on a scalar key", "&k a: 1\nb: *k\n"),
    ("alias as key", "x: &k a\n*k : 2\n"),
    ("recursive alias", "a: &a [*a]\n"),
    ("alias across documents", "a: &a 1\n---\nb: *a\n"),
    ("undefined alias", "a: *nope\n"),
    (
        "documents",
        "---\na: 1\n---\n---\nnull\n---\nb: 2\n...\n---\nc: 3\n",
    ),
    ("separator with comment", "a: 1\n--- # next\nb: 2\n"),
    ("separator glued comment", "a: 1\n---#next\nb: 2\n"),
    ("separator with content", "a: 1\n--- b: 2\n"),
    ("separator then scalar", "a: 1\n--- text\n"),
    ("document end then more", "a: 1\n...\nb: 2\n"),
    ("document end glued", "a: 1\n...#x\nb: 2\n"),
    ("directive", "%YAML 1.1\n---\na: 1\n"),
    ("bare scalar document", "hello\n"),
    ("bare list document", "- a\n- b\n"),
    ("only comments", "# nothing\n"),
    ("empty", ""),
    ("only ---", "---\n"),
    ("json object", "{\"a\": 1, \"b\": [true, null, 1.5]}\n"),
    ("json stream", "{\"a\": 1}\n{\"b\": 2}\n"),
    ("json then yaml", "{\"a\": 1}\nb: 2\n"),
    ("json with duplicate", "{\"a\": 1, \"a\": 2}\n"),
    ("json list", "[{\"a\": 1}]\n"),
    ("flow mapping", "a: {x: 1, y: [1, 2], z: {w: v}}\n"),
    (
        "flow sequence closing at column 0",
        "spec:\n  containers:\n  - name: c\n    args: [ \"vllm serve m --port 8000\"\n]\n",
    ),
    (
        "flow sequence continuation at column 0",
        "spec:\n  containers:\n  - name: c\n    command: [\"sh\", \"-c\",\n\"exec vllm serve m\"]\n",
    ),
    (
        "flow mapping closing at column 0",
        "metadata:\n  labels: {a: b,\n}\n",
    ),
    (
        "flow mapping continuation left of key",
        "metadata:\n  labels: {a: b,\n c: d}\n",
    ),
    (
        "flow in sequence item, continuation at dash",
        "args:\n- [a,\n- b]\n",
    ),
    (
        "bracket continuing a plain scalar",
        "a: some text\n  [not flow\nb: 1\n- item\n",
    ),
    (
        "brace continuing a sequence item",
        "- item\n  {x\n- \"y\"\n",
    ),
    ("tab after colon", "a:\tb\nc:\t\t1\n"),
    ("tab after colon then comment", "a:\tb\t# c\n"),
    ("tab after dash", "a:\n-\tb\n"),
    ("tab in flow", "a: [b,\tc]\nd: {e:\tf}\n"),
    ("tab before flow item on new line", "a: [\n\tb,\n\tc\n]\n"),
    ("tab indentation", "a:\n\tb: 1\n"),
    ("tab before comment", "a: b\t# c\n"),
    ("tab inside plain scalar", "a: b\tc\n"),
    ("tab-indented continuation", "a: b\n\tc\n"),
    ("tab after key before block scalar", "a:\t|\n  x\n"),
    ("duplicate top-level key", "a: 1\na: 2\n"),
    (
        "duplicate key in a pod spec",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: a\n    image: b\n",
    ),
    (
        "duplicate mapping key",
        "spec:\n  template:\n    metadata: {}\n    metadata:\n      labels: {a: b}\n",
    ),
    ("duplicate key in flow", "a: {x: 1, x: 2}\n"),
    (
        "duplicate after YAML 1.1 resolution",
        "a:\n  yes: 1\n  true: 2\n",
    ),
    ("duplicate via number keys", "a:\n  1: x\n  0x1: y\n"),
    ("duplicate quoted and plain", "a:\n  x: 1\n  \"x\": 2\n"),
    (
        "duplicate merged then explicit",
        "b: &b {x: 1}\na:\n  <<: *b\n  x: 2\n  x: 3\n",
    ),
    ("null key", "~: 1\n"),
    ("collection key", "? [a]\n: 1\n"),
    ("complex key plain", "? a\n: 1\n"),
    ("helm template", "a: {{ .Values.x }}\n"),
    ("comment without space", "a: b#c\nd: e #f\n"),
    ("colon in plain", "a: b:c\nurl: http://x:80/y\n"),
    ("indentation error", "a:\n  b: 1\n c: 2\n"),
    ("unclosed quote", "a: \"x\n"),
    ("unclosed flow", "a: [x\n"),
    (
        "deep nesting",
        "a:\n  b:\n    c:\n      d:\n        e:\n          f:\n            g:\n              h: 1\n",
    ),
    (
        "long scalar",
        "a: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
    ),
    ("CR only line ends", "a: 1\rb: 2\r"),
    ("NEL and LS in text", "a: \"x\u{85}y\u{2028}z\"\n"),
    ("non-breaking space after colon", "a:\u{a0}b\n"),
    ("unicode key", "ключ: значение\n"),
    ("explicit document with tag", "--- !!map\na: 1\n"),
    ("indentless sequence", "a:\n- 1\n- 2\nb: 3\n"),
    ("sequence of mappings", "- a: 1\n  b: 2\n- c: 3\n"),
    ("empty flow", "a: []\nb: {}\n"),
    ("empty values", "a:\nb: \nc: []\n"),
    ("question mark plain", "a: ?x\nb: -x\nc: :x\n"),
    ("at and backtick", "a: @x\n"),
    ("percent plain", "a: %x\n"),
];
