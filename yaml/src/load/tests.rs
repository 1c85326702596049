//! Behaviour of the YAML layer, named for what each test shows.

use std::time::{Duration, Instant};

use json_patch::jsonptr::Token;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn parse_ok(src: &str) -> Vec<Document> {
    match parse_stream(src.as_bytes(), &Limits::default()) {
        Ok(docs) => docs,
        Err(e) => panic!("unexpected error {e} for:\n{src}"),
    }
}

fn one(src: &str) -> Document {
    let mut docs = parse_ok(src);
    assert_eq!(docs.len(), 1, "expected one document in:\n{src}");
    docs.remove(0)
}

fn value(src: &str) -> Value {
    one(src).value
}

fn error(src: &str) -> YamlError {
    error_bytes(src.as_bytes(), &Limits::default())
}

fn error_bytes(src: &[u8], limits: &Limits) -> YamlError {
    match parse_stream(src, limits) {
        Ok(docs) => panic!("expected an error, got {} documents", docs.len()),
        Err(e) => e,
    }
}

/// Runs `f` on a thread with the usual 2 MiB stack, so that a test passing here would not
/// overflow a main thread either, and fails if it takes longer than `budget`.
fn on_small_stack<T: Send + 'static>(
    budget: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let started = Instant::now();
    let result = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(f)
        .expect("spawn test thread")
        .join()
        .expect("test thread panicked (stack overflow?)");
    let took = started.elapsed();
    assert!(took < budget, "took {took:?}, budget {budget:?}");
    result
}

// ---------------------------------------------------------------------------------------------
// YAML 1.1 scalars, as kubectl reads them

#[test]
fn yaml11_booleans_in_every_spelling_go_yaml_accepts() {
    for t in [
        "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE",
    ] {
        assert_eq!(value(&format!("v: {t}")), json!({"v": true}), "{t}");
    }
    for f in [
        "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE",
    ] {
        assert_eq!(value(&format!("v: {f}")), json!({"v": false}), "{f}");
    }
    for s in ["yES", "oN", "tRUE", "nO", "Yes please"] {
        assert_eq!(value(&format!("v: {s}")), json!({"v": s}), "{s}");
    }
}

#[test]
fn quoted_scalars_are_always_strings() {
    let v = value("a: \"8080\"\nb: 8080\nc: 'yes'\nd: \"null\"\ne: '0644'\nf: |\n  true\n");
    assert_eq!(
        v,
        json!({"a": "8080", "b": 8080, "c": "yes", "d": "null", "e": "0644", "f": "true\n"})
    );
}

#[test]
fn integers_follow_go_syntax_octal_hex_binary_underscores_signs() {
    let v = value(
        "octal: 0644\no: 0o17\nhex: 0x1F\nneg_hex: -0x1F\nbin: 0b101\nplus: +42\n\
         under: 1_000_000\nzero: 0\nbig: 9223372036854775808\nhuge: 18446744073709551616\n",
    );
    assert_eq!(v["octal"], json!(420));
    assert_eq!(v["o"], json!(15));
    assert_eq!(v["hex"], json!(31));
    assert_eq!(v["neg_hex"], json!(-31));
    assert_eq!(v["bin"], json!(5));
    assert_eq!(v["plus"], json!(42));
    assert_eq!(v["under"], json!(1_000_000));
    assert_eq!(v["zero"], json!(0));
    assert_eq!(v["big"], json!(9_223_372_036_854_775_808u64));
    assert_eq!(v["huge"].as_f64(), Some(18_446_744_073_709_551_616.0));
}

#[test]
fn floats_and_integral_floats_become_json_numbers_like_go_json_marshal() {
    let v = value("a: 1.5\nb: .5\nc: 1e3\nd: 10.0\ne: 08\nf: -2.5e-3\ng: 1e400\nh: 1:30\n");
    assert_eq!(v["a"], json!(1.5));
    assert_eq!(v["b"], json!(0.5));
    assert_eq!(v["c"], json!(1000));
    assert_eq!(v["d"], json!(10));
    assert!(v["d"].is_i64(), "10.0 reaches the apiserver as 10");
    assert_eq!(v["e"], json!(8));
    assert_eq!(v["f"], json!(-0.0025));
    assert_eq!(
        v["g"],
        json!("1e400"),
        "go-yaml keeps overflowing floats as text"
    );
    assert_eq!(v["h"], json!("1:30"), "no base-60 numbers");
}

#[test]
fn nulls_in_every_spelling_and_empty_values() {
    let v = value("a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: nUll\n");
    assert_eq!(
        v,
        json!({"a": null, "b": null, "c": null, "d": null, "e": null, "f": "nUll"})
    );
}

#[test]
fn infinity_and_nan_values_are_refused_because_json_has_none() {
    for text in [".inf", "-.Inf", "+.INF", ".nan", ".NaN"] {
        let e = error(&format!("replicas: {text}\n"));
        assert_eq!(e.kind, YamlErrorKind::InvalidValue, "{text}");
        assert_eq!((e.line, e.column), (1, 11));
    }
    assert_eq!(value("v: '.inf'\n"), json!({"v": ".inf"}));
}

#[test]
fn explicit_tags_win_over_the_text() {
    let v = value(
        "a: !!str 8080\nb: !!int \"12\"\nc: !!float 1\nd: !!bool \"yes\"\ne: !!null ''\n\
         f: !custom 42\ng: ! 7\nh: !!binary aGVsbG8=\ni: !<tag:yaml.org,2002:str> 5\n\
         j: !!float \"1.5\"\nk: !!timestamp 2001-12-14\n",
    );
    assert_eq!(
        v,
        json!({"a": "8080", "b": 12, "c": 1, "d": true, "e": null, "f": "42", "g": "7",
               "h": "hello", "i": "5", "j": 1.5, "k": "2001-12-14"})
    );
}

#[test]
fn explicit_tags_that_do_not_fit_the_text_are_errors() {
    let e = error("a: !!int abc\n");
    assert_eq!(e.kind, YamlErrorKind::InvalidValue);
    assert!(
        e.message.contains("cannot decode !!str `abc` as a !!int"),
        "{e}"
    );
    assert_eq!(error("a: !!bool 1\n").kind, YamlErrorKind::InvalidValue);
    assert_eq!(
        error("a: !!binary not*base64\n").kind,
        YamlErrorKind::InvalidValue
    );
}

#[test]
fn mapping_keys_become_strings_like_sigs_k8s_io_yaml() {
    let v = value("8080: a\nyes: b\n1.5: c\n0x10: d\nno: e\n1e6: f\n\"quoted\": g\n");
    let keys: Vec<&str> = v
        .as_object()
        .map_or(Vec::new(), |m| m.keys().map(String::as_str).collect());
    assert_eq!(
        keys,
        ["8080", "true", "1.5", "16", "false", "1e+06", "quoted"]
    );
    // The YAML 1.1 classic: a key named `y` (or `n`, `on`, ...) is a boolean.
    assert_eq!(
        value("point: {x: 1, y: 2}")["point"],
        json!({"x": 1, "true": 2})
    );
}

#[test]
fn null_collection_and_huge_keys_are_refused() {
    assert_eq!(error("~: a\n").kind, YamlErrorKind::InvalidKey);
    assert_eq!(error("? [a]\n: b\n").kind, YamlErrorKind::InvalidKey);
    assert_eq!(error("{a: 1}: b\n").kind, YamlErrorKind::InvalidKey);
    assert_eq!(
        error("18446744073709551615: a\n").kind,
        YamlErrorKind::InvalidKey
    );
}

#[test]
fn helm_templates_in_quotes_or_inside_plain_scalars_parse_normally() {
    let v = value(
        "image: \"{{ .Values.image }}\"\ntag: '{{ .Chart.AppVersion }}'\nname: app-{{ .Name }}\n",
    );
    assert_eq!(
        v,
        json!({"image": "{{ .Values.image }}", "tag": "{{ .Chart.AppVersion }}",
               "name": "app-{{ .Name }}"})
    );
    // Unquoted at the start of a value it is a flow mapping with a mapping key: refused with
    // a hint, not a panic.
    let e = error("image: {{ .Values.image }}\n");
    assert_eq!(e.kind, YamlErrorKind::InvalidKey);
    assert!(e.message.contains("template"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Anchors, aliases, merge keys, duplicates

#[test]
fn aliases_repeat_their_anchor() {
    let v = value(
        "base: &probe\n  httpGet: {path: /healthz, port: 8080}\n  periodSeconds: 10\n\
         liveness: *probe\nport: &p 8080\nother: *p\nlist: [&x 1, *x]\n",
    );
    assert_eq!(v["liveness"], v["base"]);
    assert_eq!(v["other"], json!(8080));
    assert_eq!(v["list"], json!([1, 1]));
}

#[test]
fn alias_of_a_scalar_can_be_a_key() {
    let v = value("a: &k name\n*k : value\n");
    assert_eq!(v, json!({"a": "name", "name": "value"}));
}

#[test]
fn merge_key_with_one_mapping_and_explicit_override() {
    let v = value(
        "defaults: &d\n  periodSeconds: 10\n  failureThreshold: 3\n\
         probe:\n  <<: *d\n  failureThreshold: 30\n",
    );
    assert_eq!(
        v["probe"],
        json!({"periodSeconds": 10, "failureThreshold": 30})
    );
}

#[test]
fn merge_key_with_a_list_earlier_maps_win() {
    let v = value("a: &a {p: 1, q: 1}\nb: &b {q: 2, r: 2}\nc:\n  <<: [*a, *b]\n  w: 0\n");
    assert_eq!(v["c"], json!({"q": 1, "r": 2, "p": 1, "w": 0}));
    let inline = value("c:\n  <<: [{p: 1}, {p: 2, q: 2}]\n");
    assert_eq!(inline["c"], json!({"p": 1, "q": 2}));
}

#[test]
fn merge_after_an_explicit_key_overrides_it_as_go_yaml_v2_does() {
    let v = value("d: &d {a: 2}\nm:\n  a: 1\n  <<: *d\n");
    assert_eq!(v["m"], json!({"a": 2}));
}

#[test]
fn quoted_merge_key_is_an_ordinary_key() {
    let v = value("d: &d {a: 2}\nm:\n  \"<<\": *d\n");
    assert_eq!(v["m"], json!({"<<": {"a": 2}}));
}

#[test]
fn merge_of_a_scalar_or_of_an_alias_to_a_sequence_is_refused() {
    assert_eq!(error("m:\n  <<: 1\n").kind, YamlErrorKind::InvalidMerge);
    assert_eq!(
        error("l: &l [{a: 1}]\nm:\n  <<: *l\n").kind,
        YamlErrorKind::InvalidMerge
    );
    let e = error("m:\n  <<: [{a: 1}, 2]\n");
    assert_eq!(e.kind, YamlErrorKind::InvalidMerge);
    assert_eq!(e.line, 2);
}

/// The repeats of one stream, as divergences.
fn repeats(src: &str) -> (Vec<Document>, Vec<YamlError>) {
    let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
    assert!(stream.error.is_none(), "{:?}", stream.error);
    (stream.documents, stream.divergences)
}

/// kubectl reads a repeated key as go-yaml does when not strict: the value written last, in
/// the Deployment it sends (kubernetes#99286, and the reference decoder's differential test).
#[test]
fn a_duplicate_key_is_read_as_kubectl_reads_it_and_reported_at_the_repeat() {
    let src = "metadata:\n  name: a\n  labels: {}\n  name: b\n";
    let (docs, divergences) = repeats(src);
    let [doc] = docs.as_slice() else {
        panic!("{docs:?}")
    };
    assert_eq!(doc.value, json!({"metadata": {"name": "b", "labels": {}}}));
    // Locations are those of what is read: the entry written last.
    let name = doc.locations.get("/metadata/name").expect("name");
    assert_eq!((name.value.line, name.value.column), (4, 9));
    assert_eq!(name.key.map(|k| k.line), Some(4));
    let [duplicate] = doc.duplicates.as_slice() else {
        panic!("{:?}", doc.duplicates)
    };
    assert_eq!(duplicate.pointer, "/metadata/name");
    assert_eq!((duplicate.first.line, duplicate.first.column), (2, 3));
    assert_eq!((duplicate.repeat.line, duplicate.repeat.column), (4, 3));
    assert_eq!(&src[duplicate.repeat.start..duplicate.repeat.end], "name");
    let [e] = divergences.as_slice() else {
        panic!("{divergences:?}")
    };
    assert_eq!(e.kind, YamlErrorKind::DuplicateKey);
    assert_eq!((e.line, e.column), (4, 3));
    assert!(e.message.contains("duplicate key \"name\""), "{e}");
    assert!(e.message.contains("first at line 2, column 3"), "{e}");
    assert!(e.message.contains("written last"), "{e}");
    // The all-or-nothing reading keeps it too: only the divergence says it.
    assert_eq!(parse_ok(src).len(), 1);
}

#[test]
fn duplicates_are_found_at_every_level_with_their_pointers() {
    let src = "a: 1\nspec:\n  containers:\n  - name: c\n    image: x\n    image: y\n    image: z\n\
               a: 2\nm: {k/1: 1, k/1: 2}\n";
    let (docs, divergences) = repeats(src);
    let doc = &docs[0];
    assert_eq!(doc.value["spec"]["containers"][0]["image"], json!("z"));
    assert_eq!(doc.value["a"], json!(2));
    assert_eq!(doc.value["m"], json!({"k/1": 2}));
    let found: Vec<(&str, usize, usize)> = doc
        .duplicates
        .iter()
        .map(|d| (d.pointer.as_str(), d.first.line, d.repeat.line))
        .collect();
    assert_eq!(
        found,
        [
            ("/spec/containers/0/image", 5, 6),
            ("/spec/containers/0/image", 5, 7),
            ("/a", 1, 8),
            ("/m/k~11", 9, 9),
        ]
    );
    let lines: Vec<usize> = divergences.iter().map(|e| e.line).collect();
    assert_eq!(lines, [6, 7, 8, 9]);
}

#[test]
fn keys_that_resolve_to_the_same_string_are_duplicates() {
    let (docs, divergences) = repeats("yes: a\ntrue: b\n");
    assert_eq!(docs[0].value, json!({"true": "b"}));
    assert_eq!((divergences[0].line, divergences[0].column), (2, 1));
    let (docs, divergences) = repeats("{\"a\": 1, \"a\": 2}");
    assert_eq!(docs[0].value, json!({"a": 2}));
    assert_eq!(divergences[0].kind, YamlErrorKind::DuplicateKey);
}

#[test]
fn repeated_explicit_key_is_a_duplicate_even_with_a_merge_between() {
    let (docs, divergences) = repeats("d: &d {a: 0}\nm:\n  a: 1\n  <<: *d\n  a: 3\n");
    assert_eq!(docs[0].value["m"], json!({"a": 3}));
    assert_eq!(divergences[0].kind, YamlErrorKind::DuplicateKey);
    assert_eq!((divergences[0].line, divergences[0].column), (5, 3));
    assert_eq!(docs[0].duplicates[0].first.line, 3);
}

/// Mappings past a dozen keys find their keys through a hash index instead of comparing them
/// one by one: keys, merges, duplicates and locations must come out the same either way.
#[test]
fn large_mappings_keep_keys_merges_duplicates_and_locations() {
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let mut src = String::from("d: &d {k3: merged, extra: merged}\nm:\n");
    for (i, key) in keys.iter().enumerate() {
        src.push_str(&format!("  {key}: {i}\n"));
        if i == 20 {
            src.push_str("  <<: *d\n");
        }
    }
    src.push_str("  k30: late\n");
    let (docs, divergences) = repeats(&src);
    let e = &divergences[0];
    assert_eq!(e.kind, YamlErrorKind::DuplicateKey);
    assert_eq!((e.line, e.column), (44, 3));
    assert!(e.message.contains("\"k30\""), "{e}");
    assert!(e.message.contains("line 34, column 3"), "{e}");
    assert_eq!(docs[0].value["m"]["k30"], json!("late"));
    let k30 = docs[0].locations.locate("/m/k30");
    assert_eq!(k30.line, 44);

    let src = src.replace("  k30: late\n", "  extra: explicit\n");
    let doc = one(&src);
    let m = doc.value["m"].as_object().expect("mapping");
    let order: Vec<&str> = m.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = keys.iter().map(String::as_str).collect();
    expected.insert(21, "extra");
    assert_eq!(order, expected, "a key keeps the place where it first came");
    assert_eq!(
        m["k3"],
        json!("merged"),
        "a merge after an explicit key overrides it"
    );
    assert_eq!(
        m["extra"],
        json!("explicit"),
        "an explicit key after a merge wins"
    );
    for (i, key) in keys.iter().enumerate() {
        let loc = doc.locations.get(&format!("/m/{key}")).expect("key");
        if key == "k3" {
            assert!(loc.shared, "k3's value is the merged one");
            continue;
        }
        let line = 3 + i + usize::from(i > 20);
        assert_eq!(
            loc.key.map(|k| (k.line, k.column)),
            Some((line, 3)),
            "{key}"
        );
        assert!(!loc.shared, "{key}");
    }
    let extra = doc.locations.get("/m/extra").expect("extra");
    assert_eq!(extra.key.map(|k| k.line), Some(44));
    assert!(!extra.shared);
}

#[test]
fn recursive_alias_is_refused() {
    let e = error("a: &x [1, *x]\n");
    assert_eq!(e.kind, YamlErrorKind::Alias);
    assert_eq!((e.line, e.column), (1, 11));
}

#[test]
fn aliases_do_not_reach_into_earlier_documents() {
    let stream = parse_stream_partial(b"a: &x 1\n---\nb: *x\n", &Limits::default());
    assert_eq!(stream.documents.len(), 1);
    let e = stream.error.expect("alias into the previous document");
    assert_eq!(e.kind, YamlErrorKind::Alias);
    assert_eq!(e.line, 3);
}

// ---------------------------------------------------------------------------------------------
// Limits and hostile input

#[test]
fn deep_block_sequence_is_refused_fast_without_overflowing_the_stack() {
    let e = on_small_stack(Duration::from_secs(2), || {
        let src = "- ".repeat(100_000) + "x\n";
        error(&src)
    });
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
    assert_eq!((e.line, e.column), (1, 513), "the 257th `-`");
}

#[test]
fn deep_flow_sequence_is_refused_fast_without_overflowing_the_stack() {
    let e = on_small_stack(Duration::from_secs(2), || {
        let src = "[".repeat(100_000) + &"]".repeat(100_000);
        error(&src)
    });
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
    let e = on_small_stack(Duration::from_secs(2), || {
        error(&("{a: ".repeat(100_000) + &"}".repeat(100_000)))
    });
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
}

#[test]
fn deep_block_mappings_are_refused_by_our_own_limit() {
    let limits = Limits {
        max_depth: 10,
        ..Limits::default()
    };
    let mut src = String::new();
    for depth in 0..20 {
        src.push_str(&" ".repeat(depth * 2));
        src.push_str("k:\n");
    }
    let e = error_bytes(src.as_bytes(), &limits);
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
    assert_eq!(e.line, 11);
    let e = error_bytes(&b"[".repeat(50), &limits);
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
}

#[test]
fn nesting_built_from_aliases_counts_towards_depth() {
    // Each anchor is 100 levels deep and the next one nests the previous alias 100 levels
    // down: no single part of the text is deep, the expanded value would be.
    let mut src = String::new();
    for i in 0..5 {
        let inner = if i == 0 {
            "x".to_owned()
        } else {
            format!("*a{}", i - 1)
        };
        src.push_str(&format!(
            "a{i}: &a{i} {}{inner}{}\n",
            "[".repeat(100),
            "]".repeat(100)
        ));
    }
    let e = error(&src);
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
    assert_eq!(e.line, 3, "the alias that would pass 256 levels");
}

#[test]
fn billion_laughs_is_refused_quickly() {
    let e = on_small_stack(Duration::from_secs(2), || {
        let mut src = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            src.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        error(&src)
    });
    assert_eq!(e.kind, YamlErrorKind::TooManyNodes);
    assert!(e.line <= 7, "stopped at line {}", e.line);
}

#[test]
fn aliases_of_one_long_string_are_bounded_by_bytes_not_only_nodes() {
    let limits = Limits {
        max_file_bytes: 64 * 1024,
        ..Limits::default()
    };
    let long = "x".repeat(10_000);
    let src = format!("a: &a {long}\nb: [{}]\n", vec!["*a"; 100].join(", "));
    let e = error_bytes(src.as_bytes(), &limits);
    assert_eq!(e.kind, YamlErrorKind::TooManyNodes);
    assert!(e.message.contains("bytes"), "{e}");
    let few = format!("a: &a {long}\nb: [*a, *a]\n");
    assert!(parse_stream(few.as_bytes(), &limits).is_ok());
}

#[test]
fn depth_limit_has_a_ceiling_so_values_stay_safe_to_walk() {
    let limits = Limits {
        max_depth: usize::MAX,
        ..Limits::default()
    };
    let e = on_small_stack(Duration::from_secs(2), move || {
        error_bytes(("- ".repeat(100_000) + "x").as_bytes(), &limits)
    });
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
    assert!(e.message.contains("1000"), "{e}");
}

#[test]
fn too_many_nodes_without_aliases() {
    let limits = Limits {
        max_nodes: 100,
        ..Limits::default()
    };
    let src = format!("[{}]", vec!["1"; 200].join(","));
    assert_eq!(
        error_bytes(src.as_bytes(), &limits).kind,
        YamlErrorKind::TooManyNodes
    );
}

#[test]
fn files_over_the_size_limit_are_refused_before_parsing() {
    let limits = Limits {
        max_file_bytes: 10,
        ..Limits::default()
    };
    // Not even valid YAML: the size check comes first.
    let e = error_bytes(b"a: [\n  b: \"unclosed\n", &limits);
    assert_eq!(e.kind, YamlErrorKind::TooLarge);
    assert_eq!(
        e.to_string(),
        "line 1, column 1: the file is 20 bytes, more than the 10-byte limit"
    );
    assert!(parse_stream(b"a: 1", &limits).is_ok());
}

#[test]
fn too_many_documents() {
    let limits = Limits {
        max_documents: 3,
        ..Limits::default()
    };
    let src = "---\na: 1\n".repeat(4);
    let e = error_bytes(src.as_bytes(), &limits);
    assert_eq!(e.kind, YamlErrorKind::TooManyDocuments);
    assert_eq!(e.line, 7);
}

#[test]
fn invalid_utf8_is_reported_with_its_line_and_column() {
    let e = error_bytes(b"a: 1\nb: caf\xe9\n", &Limits::default());
    assert_eq!(e.kind, YamlErrorKind::NotUtf8);
    assert_eq!((e.line, e.column, e.offset), (2, 7, 11));
    assert!(e.message.contains("0xe9"), "{e}");
}

#[test]
fn nul_bytes_mean_a_binary_file() {
    let e = error_bytes(b"a: 1\nb: x\0y\n", &Limits::default());
    assert_eq!(e.kind, YamlErrorKind::BinaryFile);
    assert_eq!((e.line, e.column, e.offset), (2, 5, 9));
}

#[test]
fn utf16_files_are_named_as_such() {
    let e = error_bytes(b"\xff\xfea\0:\0 \x001\0", &Limits::default());
    assert_eq!(e.kind, YamlErrorKind::NotUtf8);
    assert!(e.message.contains("UTF-16"), "{e}");
}

#[test]
fn tab_indentation_is_refused_with_its_position() {
    let e = error("metadata:\n\tname: x\n");
    assert_eq!(e.kind, YamlErrorKind::Syntax);
    assert_eq!(e.line, 2);
    assert!(e.message.contains("tab"), "{e}");
    assert!(e.to_string().starts_with("line 2, column "), "{e}");
}

#[test]
fn control_characters_are_a_syntax_error_without_a_tab_hint() {
    let e = error("a: 1\nb: x\u{7}y\n");
    assert_eq!(e.kind, YamlErrorKind::Syntax);
    assert_eq!((e.line, e.column, e.offset), (2, 5, 9));
    assert!(e.message.contains("U+0007"), "{e}");
    assert!(!e.message.contains("spaces, not tabs"), "{e}");
    assert_eq!(error("a: \u{7f}\n").kind, YamlErrorKind::Syntax);
    assert_eq!(error("a: \u{9b}\n").kind, YamlErrorKind::Syntax);
    assert_eq!(value("a: x\u{a0}y\n"), json!({"a": "x\u{a0}y"}));
}

#[test]
fn syntax_errors_carry_the_parser_position() {
    let e = error("a: \"unclosed\nb: 1\n");
    assert_eq!(e.kind, YamlErrorKind::Syntax);
    let e = error("a: [1, 2\nb: 3\n");
    assert_eq!(e.kind, YamlErrorKind::Syntax);
    let e = error("a: b: c\n");
    assert_eq!(e.kind, YamlErrorKind::Syntax);
    assert_eq!(e.line, 1);
}

// ---------------------------------------------------------------------------------------------
// Streams and documents

#[test]
fn multi_document_stream_skips_empty_and_comment_only_documents() {
    // (`--- null` on one line is refused, as kubectl refuses it: the null goes on its own line.)
    let src = "# leading comment\n---\napiVersion: v1\nkind: A\n---\n---\n# only a comment\n\
               ---\nnull\n---\nkind: B\n...\n---\nkind: C\n";
    let docs = parse_ok(src);
    let kinds: Vec<&Value> = docs.iter().map(|d| &d.value["kind"]).collect();
    assert_eq!(kinds, [&json!("A"), &json!("B"), &json!("C")]);
    let lines: Vec<usize> = docs.iter().map(|d| d.line).collect();
    assert_eq!(lines, [2, 10, 13]);
}

#[test]
fn implicit_first_document_starts_at_its_first_token() {
    let docs = parse_ok("# comment\n\nkind: A\n---\nkind: B\n");
    assert_eq!(docs[0].line, 3);
    assert_eq!(docs[1].line, 4);
}

#[test]
fn empty_file_and_whitespace_have_no_documents() {
    for src in [
        "",
        "\n\n",
        "# just a comment\n",
        "---\n",
        "---\n...\n",
        "\u{feff}",
    ] {
        assert!(parse_ok(src).is_empty(), "{src:?}");
    }
}

#[test]
fn bom_at_the_start_is_accepted_and_not_counted_as_a_column() {
    let doc = one("\u{feff}kind: Pod\nspec: {}\n");
    assert_eq!(doc.value["kind"], json!("Pod"));
    let kind = doc.locations.locate("/kind");
    assert_eq!((kind.line, kind.column, kind.start), (1, 1, 3));
}

#[test]
fn later_broken_document_keeps_the_earlier_ones() {
    let stream = parse_stream_partial(b"kind: A\n---\nkind: [\n", &Limits::default());
    assert_eq!(stream.documents.len(), 1);
    assert_eq!(stream.documents[0].value, json!({"kind": "A"}));
    assert_eq!(stream.error.map(|e| e.kind), Some(YamlErrorKind::Syntax));
    assert!(parse_stream(b"kind: A\n---\nkind: [\n", &Limits::default()).is_err());
}

#[test]
fn json_files_parse_through_the_same_layer_with_locations() {
    let src = "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\":\"Pod\",\n\t\"spec\": {\"containers\": \
               [{\"name\": \"a\", \"ports\": [80, 1.5, true, null]}]}\n}\n";
    let doc = one(src);
    assert_eq!(
        doc.value,
        json!({"apiVersion": "v1", "kind": "Pod",
               "spec": {"containers": [{"name": "a", "ports": [80, 1.5, true, null]}]}})
    );
    let kind = doc.locations.locate("/kind");
    assert_eq!((kind.line, kind.column), (3, 2));
    let name = doc.locations.get("/spec/containers/0/name").expect("name");
    let value_span = name.value;
    assert_eq!(&src[value_span.start..value_span.end], "\"a\"");
    let containers = doc.locations.get("/spec/containers").expect("containers");
    assert_eq!(
        src[containers.value.start..containers.value.end]
            .chars()
            .last(),
        Some(']')
    );
    assert_eq!(containers.item, None);
}

// ---------------------------------------------------------------------------------------------
// Locations

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  annotations:
    probelint.io/ignore: \"gpu-startup-probe-missing\"
    odd~key: x
spec:
  template:
    spec:
      containers:
        - name: server   # the model server
          image: vllm/vllm-openai:v0.6.0
          readinessProbe:
            tcpSocket:
              port: 8000
        -
          name: sidecar
";

#[test]
fn pointer_to_a_mapping_value_locates_its_key() {
    let doc = one(DEPLOYMENT);
    let probe = doc
        .locations
        .get("/spec/template/spec/containers/0/readinessProbe")
        .expect("probe");
    let key = probe.key.expect("key");
    assert_eq!((key.line, key.column), (14, 11));
    assert_eq!(&DEPLOYMENT[key.start..key.end], "readinessProbe");
    assert_eq!(probe.value.line, 15);
    assert_eq!(
        &DEPLOYMENT[probe.value.start..probe.value.end],
        "tcpSocket:\n              port: 8000"
    );
    assert_eq!(
        doc.locations
            .locate("/spec/template/spec/containers/0/readinessProbe"),
        key
    );
    assert!(!probe.shared);
}

#[test]
fn sequence_items_have_their_dash_and_missing_children_fall_back_to_it() {
    let doc = one(DEPLOYMENT);
    let first = doc
        .locations
        .get("/spec/template/spec/containers/0")
        .expect("item 0");
    let dash = first.item.expect("dash");
    assert_eq!((dash.line, dash.column), (12, 9));
    assert_eq!(&DEPLOYMENT[dash.start..dash.end], "-");
    assert_eq!(first.value.line, 12);
    assert_eq!(first.value.column, 11);
    // The second item's `-` is alone on its line.
    let second = doc
        .locations
        .get("/spec/template/spec/containers/1")
        .expect("item 1");
    assert_eq!(second.item.map(|d| (d.line, d.column)), Some((17, 9)));
    assert_eq!(second.value.line, 18);
    // A missing probe is shown on the container's `- ` line.
    let missing = doc
        .locations
        .locate("/spec/template/spec/containers/1/livenessProbe/httpGet");
    assert_eq!((missing.line, missing.column), (17, 9));
    assert_eq!(
        doc.locations
            .get("/spec/template/spec/containers/1/livenessProbe"),
        None
    );
    assert_eq!(doc.locations.get("/spec/template/spec/containers/2"), None);
    assert_eq!(doc.locations.get("/spec/template/spec/containers/01"), None);
    assert_eq!(doc.locations.get("/spec/template/spec/containers/-"), None);
}

#[test]
fn keys_with_slash_and_tilde_use_rfc6901_escapes() {
    let doc = one(DEPLOYMENT);
    assert_eq!(
        Token::new("probelint.io/ignore").encoded(),
        "probelint.io~1ignore"
    );
    let ignore = doc
        .locations
        .get("/metadata/annotations/probelint.io~1ignore")
        .expect("annotation");
    assert_eq!(ignore.key.map(|k| (k.line, k.column)), Some((6, 5)));
    let odd = doc
        .locations
        .get(&format!(
            "/metadata/annotations/{}",
            Token::new("odd~key").encoded()
        ))
        .expect("odd~key");
    assert_eq!(odd.key.map(|k| k.line), Some(7));
    assert_eq!(doc.locations.get("/metadata/annotations/odd~2key"), None);
    assert_eq!(doc.locations.get("metadata"), None, "pointers start with /");
}

#[test]
fn root_pointer_and_missing_top_level_key() {
    let doc = one(DEPLOYMENT);
    let root = doc.locations.get("").expect("root");
    assert_eq!(
        (root.value.line, root.value.column, root.value.start),
        (1, 1, 0)
    );
    let missing = doc.locations.locate("/status");
    assert_eq!((missing.line, missing.column), (1, 1));
}

#[test]
fn columns_count_characters_and_offsets_count_bytes() {
    let src = "metadata:\n  labels: {team: \"données\", \"név\": ☃}\n  name: x\n";
    let doc = one(src);
    let snowman = doc.locations.get("/metadata/labels/név").expect("név");
    let key = snowman.key.expect("key");
    // `  labels: {team: "données", "név": ☃}`: the key's quote is the 29th character, while
    // "données" took one byte more than its characters.
    assert_eq!((key.line, key.column), (2, 29));
    assert_eq!(key.start, src.find("\"név\"").unwrap_or_default());
    assert_eq!(&src[key.start..key.end], "\"név\"");
    assert_eq!(&src[snowman.value.start..snowman.value.end], "☃");
    assert_eq!(snowman.value.column, 36);
    let name = doc.locations.locate("/metadata/name");
    assert_eq!((name.line, name.column), (3, 3));
    assert_eq!(&src[name.start..name.end], "name");
}

#[test]
fn crlf_line_endings_keep_lines_and_offsets_right() {
    let src = "a: 1\r\nb:\r\n  c: d\r\n";
    let doc = one(src);
    let c = doc.locations.get("/b/c").expect("c");
    assert_eq!(c.key.map(|k| (k.line, k.column)), Some((3, 3)));
    assert_eq!(&src[c.value.start..c.value.end], "d");
}

#[test]
fn block_scalar_span_starts_at_its_indicator() {
    let src = "cmd: |-\n  python -m server\n  --port 8000\n\nnext: &a >\n  folded\n";
    let doc = one(src);
    let cmd = doc.locations.get("/cmd").expect("cmd");
    assert_eq!(
        &src[cmd.value.start..cmd.value.end],
        "|-\n  python -m server\n  --port 8000"
    );
    assert_eq!((cmd.value.line, cmd.value.column), (1, 6));
    let next = doc.locations.get("/next").expect("next");
    assert_eq!(&src[next.value.start..next.value.end], "&a >\n  folded");
}

#[test]
fn nested_and_indentless_sequences_find_each_dash() {
    let src = "a:\n- - x\n  - w\n-   # comment\n  z\nb: [1, [2]]\n";
    let doc = one(src);
    let dash = |p: &str| {
        doc.locations
            .get(p)
            .and_then(|l| l.item)
            .map(|d| (d.line, d.column))
    };
    assert_eq!(dash("/a/0"), Some((2, 1)));
    assert_eq!(dash("/a/0/0"), Some((2, 3)));
    assert_eq!(dash("/a/0/1"), Some((3, 3)));
    assert_eq!(dash("/a/1"), Some((4, 1)));
    assert_eq!(dash("/b/1"), None);
    assert_eq!(doc.value["a"], json!([["x", "w"], "z"]));
}

#[test]
fn empty_values_have_an_empty_span() {
    let src = "a:\nb:\n- \n- x\n";
    let doc = one(src);
    let a = doc.locations.get("/a").expect("a");
    assert_eq!(a.value.start, a.value.end);
    let item = doc.locations.get("/b/0").expect("item");
    assert_eq!(item.item.map(|d| (d.line, d.column)), Some((3, 1)));
}

#[test]
fn aliased_and_merged_nodes_point_at_their_source_and_say_they_are_shared() {
    let src = "probe: &p\n  path: /healthz\nc:\n  readinessProbe: *p\nd:\n  <<: *p\n  port: 80\n";
    let doc = one(src);
    let alias = doc.locations.get("/c/readinessProbe").expect("alias");
    assert!(alias.shared);
    assert_eq!(&src[alias.value.start..alias.value.end], "*p");
    assert_eq!(alias.key.map(|k| k.line), Some(4));
    let inside = doc.locations.get("/c/readinessProbe/path").expect("path");
    assert!(inside.shared);
    assert_eq!(inside.key.map(|k| k.line), Some(2));
    let merged = doc.locations.get("/d/path").expect("merged");
    assert!(merged.shared);
    assert_eq!(merged.key.map(|k| k.line), Some(2));
    let own = doc.locations.get("/d/port").expect("port");
    assert!(!own.shared);
    let anchored = doc.locations.get("/probe/path").expect("anchored");
    assert!(anchored.shared, "editing the anchor changes its aliases");
}

// ---------------------------------------------------------------------------------------------
// Never panics

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_stream_partial(&bytes, &Limits::default());
    }

    #[test]
    fn yaml_shaped_text_never_panics(
        text in "[-:?,\\[\\]{}&*!|>'\"#%@` \n\t\r~<.a-c0-9\u{e9}\u{feff}]{0,120}",
    ) {
        let stream = parse_stream_partial(text.as_bytes(), &Limits::default());
        for doc in &stream.documents {
            // Every location lookup stays inside the text.
            let span = doc.locations.locate("/a/0/b");
            prop_assert!(span.start <= span.end && span.end <= text.len());
        }
    }

    #[test]
    fn structured_yaml_never_panics_and_spans_stay_in_bounds(
        lines in proptest::collection::vec(
            ("[ ]{0,6}", "(- |\\? |: |)", "[a-c]{0,2}", "(: |:|)", "(&a |\\*a|<<|\\{|\\[|\\]|\\}|, |\\||>|'x'|\"y\"|yes|0x1F|~|)"),
            0..12,
        ),
    ) {
        let text: String = lines
            .iter()
            .map(|(indent, ind, key, colon, val)| format!("{indent}{ind}{key}{colon}{val}\n"))
            .collect();
        let stream = parse_stream_partial(text.as_bytes(), &Limits::default());
        for doc in &stream.documents {
            for pointer in ["", "/a", "/a/0", "/0", "/0/a", "/b/a"] {
                if let Some(loc) = doc.locations.get(pointer) {
                    prop_assert!(loc.value.start <= loc.value.end && loc.value.end <= text.len());
                    prop_assert!(text.is_char_boundary(loc.value.start));
                    prop_assert!(text.is_char_boundary(loc.value.end));
                }
            }
        }
    }
}

/// `--fix` edits inside flow collections by their brackets: a flow collection's span must end
/// just past its closing bracket, never run on over the blanks and comment after it (nor stop at
/// a bracket inside a quoted scalar or a comment).
#[test]
fn flow_collection_span_ends_at_its_closing_bracket() {
    let tricky =
        "a: {b: \"x} # y\", c: [1, {d: 2}], e: it's} # {z}\nf: [g, # ]\n  h]   # tail\nk: 1\n";
    for (src, pointer, want) in [
        ("p: {a: 1}  # c\n", "/p", "{a: 1}"),
        ("p: [1, 2]   \nq: 1\n", "/p", "[1, 2]"),
        ("p: {a: [x, y] }  # c\n", "/p/a", "[x, y]"),
        (tricky, "/a", "{b: \"x} # y\", c: [1, {d: 2}], e: it's}"),
        (tricky, "/a/c", "[1, {d: 2}]"),
        (tricky, "/f", "[g, # ]\n  h]"),
    ] {
        let doc = one(src);
        let span = doc.locations.get(pointer).expect("node").value;
        assert_eq!(&src[span.start..span.end], want, "{src:?} {pointer}");
    }
}

#[test]
fn a_stream_splits_where_kubectl_splits_it_with_every_position_kept() {
    // The comment after `---#` is not ASCII: the parser reads it blanked, character for
    // character, while byte offsets stay those of the file.
    let src = "kind: A\nx: |\n  keep\n---#é ü: |\n  kind: B\n  z: 1\n";
    let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
    assert!(stream.error.is_none(), "{:?}", stream.error);
    let values: Vec<&Value> = stream.documents.iter().map(|d| &d.value).collect();
    assert_eq!(
        values,
        [
            &json!({"kind": "A", "x": "keep\n"}),
            &json!({"kind": "B", "z": 1})
        ]
    );
    assert_eq!(stream.documents[1].line, 4);
    let y = stream.documents[1].locations.get("/z").expect("z").value;
    let at = src.find("1\n").expect("1");
    assert_eq!((y.line, y.column, y.start), (6, 6, at));
    let [divergence] = stream.divergences.as_slice() else {
        panic!("{:?}", stream.divergences)
    };
    assert_eq!(divergence.kind, YamlErrorKind::SeparatorDiffers);
    assert_eq!((divergence.line, divergence.column), (4, 4));
    // The all-or-nothing reading is kubectl's as well.
    assert_eq!(parse_ok(src).len(), 2);
}

#[test]
fn separators_both_readings_agree_on_are_not_divergences() {
    for sep in ["---", "--- ", "--- # note", "---\t", "---\t#x", "---\r"] {
        let src = format!("a: 1\n{sep}\nb: 2\n");
        let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
        assert!(stream.error.is_none(), "{sep:?}: {:?}", stream.error);
        assert_eq!(stream.documents.len(), 2, "{sep:?}");
        assert!(stream.divergences.is_empty(), "{sep:?}");
    }
    // kubectl trims any Unicode blank; YAML knows only spaces and tabs.
    for sep in ["---#", "---\u{a0}", "--- \u{a0}#", "---  #a\rb: 3"] {
        let src = format!("a: 1\n{sep}\nb: 2\n");
        let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
        assert!(stream.error.is_none(), "{sep:?}: {:?}", stream.error);
        assert_eq!(stream.documents.len(), 2, "{sep:?}");
        assert_eq!(stream.documents[1].value, json!({"b": 2}), "{sep:?}");
        assert_eq!(stream.divergences.len(), 1, "{sep:?}");
    }
    // A JSON stream is JSON to kubectl: never cut.
    let json_stream = "{\"a\":\n\"x\"}\n";
    assert_eq!(value(json_stream), json!({"a": "x"}));
}

#[test]
fn a_separator_with_content_is_refused_as_kubectl_refuses_it() {
    for sep in ["--- {b: 2}", "--- |", "---x", "----"] {
        let src = format!("a: 1\n---\nc: 1\n{sep}\nb: 2\n");
        let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
        let error = stream.error.expect("refused");
        assert_eq!(error.kind, YamlErrorKind::InvalidSeparator, "{sep:?}");
        assert_eq!((error.line, error.column), (4, 4), "{sep:?}");
        assert!(
            error.message.starts_with("kubectl refuses this file"),
            "{}",
            error.message
        );
        // kubectl refuses the line before it returns the document the line ends (`c: 1`);
        // what came before that is still read.
        assert_eq!(stream.documents.len(), 1, "{sep:?}");
        assert_eq!(stream.documents[0].value, json!({"a": 1}));
    }
    // Inside a flow collection the cut leaves open, the error is still the separator's.
    let error = error("a: [1,\n--- x\n2]\n");
    assert_eq!(error.kind, YamlErrorKind::InvalidSeparator);
}

/// `--fix` replaces a scalar's own bytes: a quoted scalar's span ends at its closing quote,
/// never over the blanks and comment after it (saphyr's own span runs on to the next token).
#[test]
fn a_quoted_scalar_span_ends_at_its_closing_quote() {
    for (src, pointer, want) in [
        ("a: \"x\" # c\n", "/a", "\"x\""),
        ("a: 'x'   # c\nb: 1\n", "/a", "'x'"),
        ("a: \"x\\\" # y\"  # c\n", "/a", "\"x\\\" # y\""),
        ("a: 'it''s # no'  # c\n", "/a", "'it''s # no'"),
        ("a: &q !!str \"x\"  # c\nb: *q\n", "/a", "&q !!str \"x\""),
        ("a: [\"x\" , 'y'  ]\n", "/a/0", "\"x\""),
        ("a: [\"x\" , 'y'  ]\n", "/a/1", "'y'"),
        ("a: \"one\n  two\"   # c\n", "/a", "\"one\n  two\""),
    ] {
        let doc = one(src);
        let span = doc.locations.get(pointer).expect("node").value;
        assert_eq!(&src[span.start..span.end], want, "{src:?} {pointer}");
    }
    let src = "\"k\"  : 1 # c\n";
    let doc = one(src);
    let key = doc.locations.get("/k").and_then(|l| l.key).expect("key");
    assert_eq!(&src[key.start..key.end], "\"k\"");
}

/// go-yaml, and so kubectl, does not check indentation inside flow collections and quoted
/// scalars: vendors publish vLLM manifests with the `]` at column 0. They read as kubectl
/// reads them, with every position the file's own.
#[test]
fn flow_collections_and_quoted_scalars_continue_at_any_column() {
    let src = "spec:\n  containers:\n  - name: c\n    args: [ \"vllm serve m --port 8000\"\n]\n    image: v\n";
    let doc = one(src);
    assert_eq!(
        doc.value["spec"]["containers"][0],
        json!({"name": "c", "args": ["vllm serve m --port 8000"], "image": "v"})
    );
    let args = doc.locations.get("/spec/containers/0/args").expect("args");
    assert_eq!(
        &src[args.value.start..args.value.end],
        "[ \"vllm serve m --port 8000\"\n]"
    );
    let image = doc
        .locations
        .get("/spec/containers/0/image")
        .expect("image");
    assert_eq!((image.value.line, image.value.column), (6, 12));
    assert_eq!(&src[image.value.start..image.value.end], "v");
    for (src, want) in [
        (
            "a:\n  b: [\"sh\", \"-c\",\n\"exec x\"]\n  c: 1\n",
            json!({"a": {"b": ["sh", "-c", "exec x"], "c": 1}}),
        ),
        (
            "a:\n  b: {x: 1,\n z: [2,\n3]}\n",
            json!({"a": {"b": {"x": 1, "z": [2, 3]}}}),
        ),
        ("a:\n  b: \"one\ntwo\"\n", json!({"a": {"b": "one two"}})),
        ("a:\n  b: 'one\n\ntwo'\n", json!({"a": {"b": "one\ntwo"}})),
        ("a:\n  b: [x\ny]\n", json!({"a": {"b": ["x y"]}})),
        ("a: [\n\tb,\n\tc\n]\n", json!({"a": ["b", "c"]})),
        // A comment that looks like an opening bracket opens nothing.
        ("a: x # [\nb: 1\n", json!({"a": "x", "b": 1})),
        ("a: b[1\nc: 2\n", json!({"a": "b[1", "c": 2})),
        // Nor does one that continues a plain scalar on the next line.
        (
            "a: some text\n  [not flow\nb: 1\n",
            json!({"a": "some text [not flow", "b": 1}),
        ),
        ("- item\n  {x\n- \"y\"\n", json!(["item {x", "y"])),
    ] {
        assert_eq!(value(src), want, "{src:?}");
    }
    // An error after inserted spaces is still at the file's own line and column.
    let e = error("a:\n  b: [x,\n]\n  c: d: e\n");
    assert_eq!(e.line, 4, "{e}");
}

/// `key:<TAB>value` is read by go-yaml (a tab is a blank there), and so here.
#[test]
fn a_tab_after_a_colon_separates_as_a_space_does() {
    let src = "a:\tb\nc:\t\t1\t# c\nd: {e:\tf}\n";
    let doc = one(src);
    assert_eq!(doc.value, json!({"a": "b", "c": 1, "d": {"e": "f"}}));
    let c = doc.locations.get("/c").expect("c").value;
    assert_eq!((c.line, c.column, &src[c.start..c.end]), (2, 5, "1"));
    // A tab inside a scalar stays one.
    assert_eq!(value("a: \"x:\ty\"\n")["a"], json!("x:\ty"));
    // Tabs as indentation are still refused, as go-yaml refuses them.
    assert_eq!(error("a:\n\tb: 1\n").kind, YamlErrorKind::Syntax);
}

/// kubectl cuts a stream at `---` lines only and reads the first document of each piece.
#[test]
fn kubectl_never_reads_a_document_after_a_document_end_marker() {
    let src = "a: 1\n...\nb: 2\n---\nc: 3\n";
    let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
    assert!(stream.error.is_none(), "{:?}", stream.error);
    let values: Vec<&Value> = stream.documents.iter().map(|d| &d.value).collect();
    assert_eq!(values, [&json!({"a": 1}), &json!({"c": 3})]);
    let [ignored] = stream.divergences.as_slice() else {
        panic!("{:?}", stream.divergences)
    };
    assert_eq!(ignored.kind, YamlErrorKind::AfterDocumentEnd);
    assert_eq!((ignored.line, ignored.column), (3, 1));
    // A `...` before any document of its piece, and a directive, make kubectl refuse the file.
    for (src, line) in [
        ("...\n", 1),
        ("a: 1\n---\n# c\n...\n", 4),
        ("%YAML 1.1\n---\na: 1\n", 1),
    ] {
        let stream = parse_stream_partial(src.as_bytes(), &Limits::default());
        let e = stream.error.expect("refused");
        assert!(e.message.starts_with("kubectl refuses this file"), "{e}");
        assert_eq!(e.line, line, "{src:?}");
    }
    // A `---` that opens its piece makes the `...` after it an empty document.
    assert!(parse_ok("---\n...\n---\n---\n...\n").is_empty());
}

/// Go writes an integral float by its shortest digits: -2^63 comes out as
/// -9223372036854776000, which Kubernetes reads back as a float, not as `i64::MIN`.
#[test]
fn integral_floats_read_back_as_go_writes_them() {
    let v = value("a: -9223372036854775809\nb: 1e18\nc: 1.0\n");
    assert!(v["a"].is_f64(), "{v}");
    assert_eq!(v["b"], json!(1_000_000_000_000_000_000_i64));
    assert_eq!(v["c"], json!(1));
}

/// The pre-pass that tolerates what go-yaml tolerates reads each line once, whatever the line
/// holds: one 100,000-deep line of JSON, or of quoted scalars, is refused as fast as any. (The
/// limit is a hang guard, not a timing: a quadratic pass over 100,000 items takes minutes, a
/// linear one well under a second even on a loaded machine.)
#[test]
fn the_pre_pass_stays_linear_on_hostile_lines() {
    let json = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
    let e = on_small_stack(Duration::from_secs(10), move || error(&json));
    assert_eq!(e.kind, YamlErrorKind::TooDeep);
    let quotes = "a: ".to_owned() + &"\"x\" ".repeat(100_000) + "\n";
    let e = on_small_stack(Duration::from_secs(10), move || error(&quotes));
    assert_eq!(e.kind, YamlErrorKind::Syntax);
    let brackets = "a: [\n".to_owned() + &"\"x\",\n".repeat(100_000) + "]\n";
    let doc = on_small_stack(Duration::from_secs(10), move || value(&brackets));
    assert_eq!(doc["a"].as_array().map(Vec::len), Some(100_000));
}

/// `kubectl get deploy -o json | jq -c '.items[]'` writes one JSON object per line, no `---`:
/// kubectl reads each as a document, and so does probelint, each at its own line and column.
#[test]
fn a_json_stream_is_read_as_kubectl_reads_it_with_each_value_at_its_place() {
    let src =
        "{\"kind\": \"A\", \"n\": 1.0}\n  {\"kind\": \"B\",\n   \"spec\": [1]}{\"kind\": \"C\"}\n";
    let docs = parse_ok(src);
    let values: Vec<&Value> = docs.iter().map(|d| &d.value).collect();
    // The bytes are what kubectl sends: `1.0` stays the JSON number 1.0.
    assert_eq!(
        values,
        [
            &json!({"kind": "A", "n": 1.0}),
            &json!({"kind": "B", "spec": [1]}),
            &json!({"kind": "C"})
        ]
    );
    assert_eq!(docs[1].line, 2);
    let item = docs[1].locations.locate("/spec/0");
    assert_eq!((item.line, item.column), (3, 13));
    assert_eq!(&src[item.start..item.end], "1");
    let kind = docs[2].locations.get("/kind").expect("located").value;
    assert_eq!((kind.line, kind.column), (3, 25));
    assert_eq!(&src[kind.start..kind.end], "\"C\"");
}

/// After one JSON value kubectl reads the rest as YAML; after two, nothing but JSON. A `...`
/// after one value is a YAML piece without a document, refused as any such piece is.
#[test]
fn a_json_stream_switches_to_yaml_only_after_its_first_value() {
    let stream = parse_stream_partial(b"{\"a\": 1}\nb: 2\n---\nc: 3\n", &Limits::default());
    assert!(stream.error.is_none(), "{:?}", stream.error);
    let values: Vec<&Value> = stream.documents.iter().map(|d| &d.value).collect();
    assert_eq!(
        values,
        [&json!({"a": 1}), &json!({"b": 2}), &json!({"c": 3})]
    );
    assert_eq!(stream.documents[2].line, 3);

    let stream = parse_stream_partial(b"{\"a\": 1}\n...\n", &Limits::default());
    assert_eq!(stream.documents.len(), 1);
    let e = stream.error.expect("refused");
    assert_eq!((e.line, e.column), (2, 1), "{e}");
    assert!(e.message.contains("looking for beginning of value"), "{e}");

    let stream = parse_stream_partial(b"{\"a\": 1}\n{\"b\": 2}\nc: 3\n", &Limits::default());
    assert_eq!(stream.documents.len(), 2);
    let e = stream.error.expect("refused");
    assert_eq!((e.line, e.column), (3, 1), "{e}");
    assert!(e.message.contains("invalid character 'c'"), "{e}");

    // A flow mapping that is not JSON is YAML from the start, as before.
    assert_eq!(value("{a: 1, b: [x]}\n"), json!({"a": 1, "b": ["x"]}));
}

/// Kubernetes fails on `.nan` or `.inf` when it writes the document as JSON, so only on a value
/// the document keeps: written under a key that is written again, it is never read.
#[test]
fn a_value_with_no_json_form_fails_only_where_kubectl_keeps_it() {
    let docs = parse_ok("a: .nan\nb: {c: [.inf]}\nb: 2\na: 1\n");
    assert_eq!(docs[0].value, json!({"a": 1, "b": 2}));
    assert_eq!(docs[0].duplicates.len(), 2);
    let e = error("x: 1\na: 1\nb: [.inf]\na: .nan\n");
    assert_eq!(e.kind, YamlErrorKind::InvalidValue);
    // The first value kept is the one reported, where it is written.
    assert_eq!((e.line, e.column), (3, 5), "{e}");
    let stream = parse_stream_partial(b"a: 1\n---\na: .nan\n", &Limits::default());
    assert_eq!(stream.documents.len(), 1);
    assert_eq!(stream.error.map(|e| e.line), Some(3));
}
/// go-yaml refuses a tab after a block sequence's `-`, and one that indents a line continuing a
/// plain scalar inside a flow collection: so does probelint, with kubectl's message, at the
/// tab's line, keeping the documents before it. Tabs elsewhere in flow collections are blanks.
#[test]
fn tabs_kubectl_refuses_are_refused_at_their_line() {
    for (src, line, column, says) in [
        (
            "a:\n-\tb\n",
            2,
            2,
            "found character that cannot start any token",
        ),
        (
            "x:\n  - \tb\n",
            2,
            5,
            "found character that cannot start any token",
        ),
        (
            "a: [x\n\tb]\n",
            2,
            1,
            "found a tab character that violates indentation",
        ),
        (
            "a: {x: y\n\tb: c}\n",
            2,
            1,
            "found a tab character that violates indentation",
        ),
        // In a sequence item's mapping, the block is the key's column, not the line's.
        (
            "- a: [x\n  \tb]\n",
            2,
            3,
            "found a tab character that violates indentation",
        ),
        (
            "k:\n  - a: [x\n    \tb]\n",
            3,
            5,
            "found a tab character that violates indentation",
        ),
        // A plain scalar's continuation, and a blank line after it, left of its block.
        (
            "a: b\n\tc\n",
            2,
            1,
            "found a tab character that violates indentation",
        ),
        (
            "a: b\na: c\n\td\n",
            3,
            1,
            "found a tab character that violates indentation",
        ),
        (
            "foo: 1\n\t\nbar: 2\n",
            2,
            1,
            "found a tab character that violates indentation",
        ),
        // A tab before a line's content, or on a blank line, anywhere else in the block context.
        (
            "foo:\n \tbar\n",
            2,
            2,
            "found character that cannot start any token",
        ),
        (
            " \t\nfoo: 1\n",
            1,
            2,
            "found character that cannot start any token",
        ),
        (
            "a: \"1\"\n\t\nb: 2\n",
            2,
            1,
            "found character that cannot start any token",
        ),
        (
            "\t[\n\t]\n",
            1,
            1,
            "found character that cannot start any token",
        ),
        // A tab where a block scalar's indentation is.
        (
            "foo: |-\n \tbar\n",
            2,
            2,
            "found a tab character where an indentation space is expected",
        ),
        (
            "foo: |\n\t\nbar: 1\n",
            2,
            1,
            "found a tab character where an indentation space is expected",
        ),
        (
            "foo: |\n  x\n \ty\n",
            3,
            2,
            "found a tab character where an indentation space is expected",
        ),
    ] {
        let e = error(src);
        assert_eq!((e.line, e.column), (line, column), "{src:?}: {e}");
        assert!(e.message.starts_with("kubectl refuses a tab"), "{e}");
        assert!(e.message.contains(says), "{e}");
    }
    let stream = parse_stream_partial(b"a: 1\n---\n- x\n-\ty\n", &Limits::default());
    assert_eq!(stream.documents.len(), 1);
    assert_eq!(stream.error.map(|e| e.line), Some(4));
    assert_eq!(value("a: [x,\n\tb]\n"), json!({"a": ["x", "b"]}));
    assert_eq!(value("a: [x\n \tb]\n"), json!({"a": ["x b"]}));
    assert_eq!(value("a: |\n  -\tb\n"), json!({"a": "-\tb\n"}));
    // Where go-yaml reads the tab as a blank: past the key's column, at a flow collection's
    // top level, past a plain scalar's block, inside a block scalar's content.
    assert_eq!(value("- a: [x\n   \tb]\n"), json!([{"a": ["x b"]}]));
    assert_eq!(value("[x\n\tb]\n"), json!(["x b"]));
    assert_eq!(value("a: 1\n  \t\nb: 2\n"), json!({"a": 1, "b": 2}));
    assert_eq!(value("foo: |\n  x\n  \ty\n"), json!({"foo": "x\n\ty\n"}));
    // The document the tab is in fails; the one before its `---` is read, even when the
    // parser stops later.
    let stream = parse_stream_partial(b"a: 1\n---\nb: 1\n\t\nc: [\n", &Limits::default());
    assert_eq!(stream.documents.len(), 1);
    assert_eq!(stream.error.map(|e| e.line), Some(4));
}

/// go-yaml ends a document at a `%YAML` or `%TAG` line, and kubectl reads one document between
/// `---` lines: the rest of that piece is never read, and probelint says so.
#[test]
fn a_directive_inside_a_piece_ends_what_kubectl_reads_of_it() {
    let stream = parse_stream_partial(
        b"---\na: 1\n%YAML 1.1\nb: x\n---\nb: 2\n",
        &Limits::default(),
    );
    assert!(stream.error.is_none(), "{:?}", stream.error);
    let values: Vec<&Value> = stream.documents.iter().map(|d| &d.value).collect();
    assert_eq!(values, [&json!({"a": 1}), &json!({"b": 2})]);
    let [unread] = stream.divergences.as_slice() else {
        panic!("{:?}", stream.divergences)
    };
    assert_eq!(
        (unread.kind, unread.line),
        (YamlErrorKind::AfterDocumentEnd, 3)
    );
    assert_eq!(
        parse_ok("---\n%YAML 1.1\n---\na: 1\n")[0].value,
        json!({"a": 1})
    );
}

/// kubectl reads one document between `---` lines: after a `---` (or a byte order mark, which
/// makes the stream YAML), `{"a": 1}` then `{"b": 2}` is the first object only.
#[test]
fn what_follows_a_pieces_first_document_is_never_read() {
    let stream = parse_stream_partial(
        b"---\n{\"a\": 1}\n{\"b\": 2}\n---\n[1]\n[2]\n---\nc: 3\n",
        &Limits::default(),
    );
    assert!(stream.error.is_none(), "{:?}", stream.error);
    let values: Vec<&Value> = stream.documents.iter().map(|d| &d.value).collect();
    assert_eq!(values, [&json!({"a": 1}), &json!([1]), &json!({"c": 3})]);
    let lines: Vec<(YamlErrorKind, usize)> = stream
        .divergences
        .iter()
        .map(|d| (d.kind, d.line))
        .collect();
    assert_eq!(
        lines,
        [
            (YamlErrorKind::AfterDocumentEnd, 3),
            (YamlErrorKind::AfterDocumentEnd, 6)
        ]
    );
    assert_eq!(
        value("a: [\r\n\tb,\r\n\tc\r\n]\r\n"),
        json!({"a": ["b", "c"]})
    );
}

/// go-yaml reads a `#` right after a closing quote or a flow indicator as a comment, where YAML
/// needs a blank before it: kubectl applies `key: "value"# c`, so probelint reads it too, with
/// every position the file's own.
#[test]
fn a_comment_glued_to_a_quote_or_a_bracket_is_read_as_kubectl_reads_it() {
    for (src, want) in [
        ("key: \"value\"# c\n", json!({"key": "value"})),
        ("a: ['x'#c\n  ]\n", json!({"a": ["x"]})),
        ("a: [ a, b, c, ]#invalid\n", json!({"a": ["a", "b", "c"]})),
        ("a: [ a, b, c,#x\n]\n", json!({"a": ["a", "b", "c"]})),
        ("a: {b: \"c\"}#x\nd: 1\n", json!({"a": {"b": "c"}, "d": 1})),
        ("a: [#x\n b]\n", json!({"a": ["b"]})),
        ("a: \"é\"# c\nb: \"ü\"#d\n", json!({"a": "é", "b": "ü"})),
    ] {
        assert_eq!(value(src), want, "{src:?}");
    }
    let src = "a: \"é\"# c\nb: \"ü\"#d\n";
    let doc = one(src);
    let b = doc.locations.get("/b").expect("b").value;
    assert_eq!(&src[b.start..b.end], "\"ü\"");
    assert_eq!((b.line, b.column), (2, 4));
    // A plain scalar keeps its `#`: go-yaml reads it as text too.
    assert_eq!(value("a: b#c\n"), json!({"a": "b#c"}));
}
