use super::*;

fn policy(user: Option<&str>) -> Policy {
    match user {
        Some(yaml) => Policy::with_user_yaml(yaml).expect("policy"),
        None => Policy::builtin().expect("built-in policy"),
    }
}

/// The default options, for the ValidatingAdmissionPolicies only.
fn validating() -> Options {
    Options {
        documents: Documents::Validating,
        ..Options::default()
    }
}

fn kinds(docs: &[Value]) -> Vec<(&str, &str)> {
    docs.iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap_or_default(),
                d["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

/// The expression of a policy's `failing` variable: the containers it reports.
fn failing(vap: &Value) -> &str {
    vap["spec"]["variables"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "failing"))
        .and_then(|v| v["expression"].as_str())
        .expect("a failing variable")
}

/// Every CEL expression in a document, with where it is.
fn expressions(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let spec = &doc["spec"];
    for key in ["matchConditions", "variables", "validations"] {
        for (i, item) in spec[key].as_array().into_iter().flatten().enumerate() {
            for field in ["expression", "messageExpression"] {
                if let Some(e) = item[field].as_str() {
                    out.push((format!("{key}[{i}].{field}"), e.to_owned()));
                }
            }
        }
    }
    out
}

/// Brackets balance and every string literal ends, outside string literals.
fn well_formed(expr: &str) -> Result<(), String> {
    let mut stack = Vec::new();
    let mut chars = expr.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\'' | '"' => loop {
                match chars.next() {
                    Some('\\') => {
                        chars.next();
                    }
                    Some(c) if c == ch => break,
                    Some(_) => {}
                    None => return Err("a string literal never ends".to_owned()),
                }
            },
            '(' | '[' | '{' => stack.push(ch),
            ')' | ']' | '}' => {
                let open = stack.pop();
                let want = match ch {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if open != Some(want) {
                    return Err(format!("{ch} closes {open:?}"));
                }
            }
            _ => {}
        }
    }
    match stack.is_empty() {
        true => Ok(()),
        false => Err(format!("unclosed {stack:?}")),
    }
}

#[test]
fn each_exported_part_is_a_policy_and_its_binding() {
    let docs = documents(&policy(None), &validating());
    assert_eq!(
        kinds(&docs),
        [
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-gpu-startup-probe-missing"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-gpu-startup-probe-missing"
            ),
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-gpu-startup-probe-missing-warning"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-gpu-startup-probe-missing-warning"
            ),
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-readiness-port-open"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-readiness-port-open"
            ),
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-readiness-port-open-warning"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-readiness-port-open-warning"
            ),
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-readiness-port-open-curl"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-readiness-port-open-curl"
            ),
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-readiness-port-open-curl-warning"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-readiness-port-open-curl-warning"
            ),
            (
                "ValidatingAdmissionPolicy",
                "probelint.io-known-server-endpoint-warning"
            ),
            (
                "ValidatingAdmissionPolicyBinding",
                "probelint.io-known-server-endpoint-warning"
            ),
            ("ValidatingAdmissionPolicy", GUARD),
            ("ValidatingAdmissionPolicyBinding", GUARD),
        ]
    );
    for pair in docs.chunks(2) {
        assert_eq!(pair[1]["spec"]["policyName"], pair[0]["metadata"]["name"]);
        assert_eq!(pair[0]["apiVersion"], "admissionregistration.k8s.io/v1");
    }
}

#[test]
fn every_expression_is_well_formed() {
    for doc in documents(&policy(None), &Options::default()) {
        for (at, expr) in expressions(&doc) {
            if let Err(why) = well_formed(&expr) {
                panic!("{} {at}: {why}\n{expr}", doc["metadata"]["name"]);
            }
        }
    }
}

#[test]
fn errors_deny_only_in_enforce_mode_and_warnings_never_deny() {
    let actions = |mode| {
        documents(
            &policy(None),
            &Options {
                mode,
                ..validating()
            },
        )
        .into_iter()
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .map(|d| {
            (
                d["metadata"]["name"].clone(),
                d["spec"]["validationActions"].clone(),
            )
        })
        .collect::<Vec<_>>()
    };
    let enforce = actions(Mode::Enforce);
    let action = |name: &str| {
        enforce
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| panic!("no binding {name}"))
    };
    assert_eq!(enforce.len(), 8);
    for deny in [
        "probelint.io-gpu-startup-probe-missing",
        "probelint.io-readiness-port-open",
        "probelint.io-readiness-port-open-curl",
    ] {
        assert_eq!(action(deny), json!(["Deny"]), "{deny}");
    }
    for warn in [
        "probelint.io-gpu-startup-probe-missing-warning",
        "probelint.io-readiness-port-open-warning",
        "probelint.io-readiness-port-open-curl-warning",
        "probelint.io-known-server-endpoint-warning",
        // The guard only says that an object may go unjudged.
        "probelint.io-too-large-to-judge",
    ] {
        assert_eq!(action(warn), json!(["Warn", "Audit"]), "{warn}");
    }
    for (name, a) in actions(Mode::Warn) {
        assert_eq!(a, json!(["Warn", "Audit"]), "{name}");
    }
}

#[test]
fn the_policys_level_replaces_the_default_severity() {
    let p = policy(Some("rules:\n  gpu-startup-probe-missing: warning\n"));
    let docs = documents(&p, &validating());
    assert_eq!(
        docs[1]["spec"]["validationActions"],
        json!(["Warn", "Audit"])
    );
    assert_eq!(
        docs[0]["metadata"]["annotations"]["probelint.io/severity"],
        "warning"
    );
}

#[test]
fn a_rule_turned_off_or_exempted_in_the_policy_is_not_exported_and_says_why() {
    let p = policy(Some(
        "rules:\n  gpu-startup-probe-missing: off\n  known-server-endpoint: off\nexemptions:\n  - rules: [readiness-port-open]\n    namespaces: [dev]\n    reason: r\n",
    ));
    assert!(documents(&p, &validating()).is_empty());
    let c = coverage(&p);
    let note = |id: &str| c.iter().find(|c| c.rule == id).map(|c| c.note.clone());
    assert_eq!(note(STARTUP).as_deref(), Some("turned off in the policy"));
    assert!(note(PORT_OPEN).is_some_and(|n| n.contains("exemptions")));
}

#[test]
fn coverage_names_every_rule_once_and_gives_every_unexported_one_a_reason() {
    let c = coverage(&policy(None));
    let ids: Vec<&str> = c.iter().map(|c| c.rule).collect();
    assert_eq!(ids, crate::ids());
    for entry in &c {
        assert!(!entry.note.is_empty(), "{}", entry.rule);
    }
    let exported: Vec<&str> = c
        .iter()
        .filter(|c| !c.policies.is_empty())
        .map(|c| c.rule)
        .collect();
    assert_eq!(exported, [STARTUP, PORT_OPEN, "known-server-endpoint"]);
    let pdb = c
        .iter()
        .find(|c| c.rule == "gpu-serving-without-pdb")
        .unwrap();
    assert!(pdb.note.starts_with("cross-object"), "{}", pdb.note);
}

#[test]
fn scope_is_the_charts_accelerators_namespaces_and_controllers() {
    let p = policy(Some("accelerators:\n  resources: [example.com/npu-*]\n"));
    let docs = documents(
        &p,
        &Options {
            controller_users: vec!["system:serviceaccount:kserve:kserve-controller-manager".into()],
            exclude_namespaces: vec!["ops".into()],
            ..validating()
        },
    );
    let vap = &docs[0];
    let fails = failing(vap);
    assert!(
        fails.contains("k.startsWith('example.com/npu-')"),
        "{fails}"
    );
    assert!(!fails.contains("nvidia.com/gpu"), "{fails}");
    let condition = vap["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(condition.starts_with("!(request.userInfo.username in ["));
    assert!(condition.contains("'system:serviceaccount:kserve:kserve-controller-manager'"));
    assert!(condition.contains("'system:serviceaccount:kube-system:replicaset-controller'"));
    assert_eq!(
        vap["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["ops"])
    );
}

#[test]
fn annotation_exemptions_are_read_only_where_the_policy_allows_them() {
    let has_ignore =
        |p: &Policy| failing(&documents(p, &validating())[0]).contains("probelint.io/ignore");
    assert!(has_ignore(&policy(None)));
    assert!(!has_ignore(&policy(Some(
        "allowAnnotationExemptions: false\n"
    ))));
}

#[test]
fn the_text_searched_for_markers_joins_image_and_command_line_by_a_character_no_marker_holds() {
    // `bound` searches `image + '\n' + line`: a marker holding a newline could match across
    // the two, where the engine searches each alone.
    for m in KNOWN_SERVERS
        .iter()
        .flat_map(|s| s.markers())
        .chain(counter_evidence_markers())
    {
        assert!(!m.contains('\n'), "{m:?}");
    }
}

#[test]
fn the_guard_warns_past_a_size_the_cost_arithmetic_allows_and_needs_no_server_table() {
    let docs = documents(&policy(None), &validating());
    let guard = docs
        .iter()
        .find(|d| d["metadata"]["name"] == GUARD)
        .expect("guard");
    // 10 × 500 000 / W characters: W is the markers' weight.
    assert_eq!(guard_chars(), 5_000_000 / marker_weight());
    assert!(
        (10_000..200_000).contains(&guard_chars()),
        "a realistic pod (16 containers × 40 arguments of 20 characters) is well inside: {}",
        guard_chars()
    );
    let expression = guard["spec"]["validations"][0]["expression"]
        .as_str()
        .unwrap();
    assert_eq!(expression, format!("variables.size <= {}", guard_chars()));
    let names: Vec<&str> = guard["spec"]["variables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(names, ["spec", "containers", "size"]);
    // Nothing is exported, nothing to guard.
    let off = policy(Some(
        "rules:\n  gpu-startup-probe-missing: off\n  readiness-port-open: off\n  known-server-endpoint: off\n",
    ));
    assert!(documents(&off, &validating()).is_empty());
}

#[test]
fn the_curl_options_the_export_lets_through_take_no_value_and_do_not_fail_on_an_error_status() {
    use crate::rules::readiness_port_open::curl_call;
    for option in CURL_PLAIN_OPTIONS {
        for command in [
            vec!["curl", option, "http://localhost:8000/health"],
            vec![
                "sh",
                "-c",
                &format!("curl {option} http://localhost:8000/health"),
            ],
        ] {
            let command: Vec<String> = command.iter().map(|w| (*w).to_owned()).collect();
            let call = curl_call(&command).unwrap_or_else(|| panic!("{command:?}: no curl"));
            assert_eq!(call.url, "http://localhost:8000/health", "{command:?}");
            assert!(!call.fails_on_error, "{command:?}");
        }
    }
}

fn mutating() -> Options {
    Options {
        documents: Documents::Mutating,
        ..Options::default()
    }
}

#[test]
fn each_exported_fix_is_a_mutating_policy_and_its_binding_on_the_kinds_the_engine_fixes() {
    let docs = documents(&policy(None), &mutating());
    assert_eq!(
        kinds(&docs),
        [
            (
                "MutatingAdmissionPolicy",
                "probelint.io-gpu-startup-probe-missing-fix"
            ),
            (
                "MutatingAdmissionPolicyBinding",
                "probelint.io-gpu-startup-probe-missing-fix"
            ),
            (
                "MutatingAdmissionPolicy",
                "probelint.io-startup-budget-too-short-fix"
            ),
            (
                "MutatingAdmissionPolicyBinding",
                "probelint.io-startup-budget-too-short-fix"
            ),
        ]
    );
    for pair in docs.chunks(2) {
        assert_eq!(pair[1]["spec"]["policyName"], pair[0]["metadata"]["name"]);
        let spec = &pair[0]["spec"];
        assert_eq!(spec["reinvocationPolicy"], "Never");
        assert_eq!(spec["failurePolicy"], "Ignore");
        assert_eq!(spec["mutations"][0]["patchType"], "JSONPatch");
        // Batch kinds get no such finding from the engine: never mutated.
        let rules = spec["matchConstraints"]["resourceRules"].to_string();
        assert!(!rules.contains("jobs"), "{rules}");
        let expression = spec["mutations"][0]["jsonPatch"]["expression"]
            .as_str()
            .expect("expression");
        if let Err(why) = well_formed(expression) {
            panic!("{why}\n{expression}");
        }
        // The controllers' objects are their controllers', as for the validating policies.
        assert!(
            spec["matchConditions"][0]["expression"]
                .as_str()
                .is_some_and(|e| e.contains("request.userInfo.username"))
        );
    }
    // The default output has both.
    let all = documents(&policy(None), &Options::default());
    assert_eq!(
        all.len(),
        documents(&policy(None), &validating()).len() + docs.len()
    );
}

#[test]
fn the_mutations_compute_the_engines_numbers_with_the_policys_margin_and_floor() {
    let expression = |p: &Policy| {
        documents(p, &mutating())[0]["spec"]["mutations"][0]["jsonPatch"]["expression"]
            .as_str()
            .expect("expression")
            .to_owned()
    };
    let builtin = expression(&policy(None));
    assert!(
        builtin.contains("double(variables.declared) * 1.25"),
        "{builtin}"
    );
    assert!(builtin.contains(", 1200].max()"), "{builtin}");
    let custom = expression(&policy(Some(
        "startupMargin: 0.1\nmodelLoad:\n  startupFloorSeconds: 900.5\n",
    )));
    // The factor as the engine computes it (1.0 + 0.1 is not 1.1 in doubles), the floor rounded up.
    assert!(
        custom.contains(&format!("* {:?}", 1.0 + 0.1_f64)),
        "{custom}"
    );
    assert!(custom.contains(", 901].max()"), "{custom}");
}

#[test]
fn fixes_whose_result_cel_cannot_compute_are_not_exported_and_say_why() {
    let c = fix_coverage(&policy(None));
    let exported: Vec<&str> = c
        .iter()
        .filter(|c| c.policy.is_some())
        .map(|c| c.rule)
        .collect();
    assert_eq!(exported, [STARTUP, "startup-budget-too-short"]);
    for entry in &c {
        assert!(!entry.note.is_empty(), "{}", entry.rule);
    }
    // Strict mode keeps the estimate over a short declared load; the helper's delivery is not
    // exported; a rule turned off has no fix.
    for (yaml, why) in [
        (
            "allowAnnotationExemptions: false\n",
            "allowAnnotationExemptions",
        ),
        (
            "rules:\n  gpu-startup-probe-missing: off\n  startup-budget-too-short: off\n",
            "turned off",
        ),
    ] {
        let p = policy(Some(yaml));
        assert!(documents(&p, &mutating()).is_empty(), "{yaml}");
        let c = fix_coverage(&p);
        assert!(
            c.iter()
                .filter(|c| c.rule == STARTUP)
                .all(|c| c.policy.is_none() && c.note.contains(why)),
            "{yaml}: {c:?}"
        );
    }
}
