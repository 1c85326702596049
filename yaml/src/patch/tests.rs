use super::*;
use probelint_testkit::patch::{add, remove, replace};
use probelint_testkit::text::changed_lines;
use proptest::prelude::*;
use serde_json::json;
use similar::TextDiff;

thread_local! {
    /// Units written in batches by this thread's `apply` calls (see `Region::batch`).
    pub(super) static BATCHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Pins a fixed text with an inline snapshot. insta trims the end of a snapshot and reads
/// `\r\n` as `\n`, so what it cannot see is asserted here: how the text ends (one `\n` unless
/// told otherwise; no trailing blanks, no extra blank line) and that it has no `\r`. The
/// line-ending tests compare whole strings instead.
macro_rules! assert_fixed {
    ($out:expr, @$snapshot:literal) => {
        assert_fixed!($out, ending "\n", @$snapshot)
    };
    ($out:expr, ending $end:literal, @$snapshot:literal) => {{
        let out: &str = &$out;
        assert_eq!(&out[out.trim_end().len()..], $end, "how the fixed text ends: {out:?}");
        assert!(!out.contains('\r'), "a CR in the fixed text: {out:?}");
        insta::assert_snapshot!(out, @$snapshot);
    }};
}

fn pointer(path: &str) -> PointerBuf {
    PointerBuf::parse(path).unwrap_or_else(|e| panic!("{path:?} is not a JSON Pointer: {e}"))
}

fn fix_at(
    text: &str,
    document: usize,
    prefix: &str,
    ops: &[PatchOperation],
) -> Result<String, TextFixError> {
    let patch = ObjectPatch {
        document,
        prefix: prefix.to_owned(),
        ops,
    };
    apply(text, &[patch], &Limits::default())
}

fn fix(text: &str, ops: &[PatchOperation]) -> String {
    match fix_at(text, 0, "", ops) {
        Ok(out) => out,
        Err(e) => panic!("fix failed: {e}\n--- text:\n{text}"),
    }
}

/// Every original line is still there, in order: the fix only inserted lines.
fn assert_only_inserted(before: &str, after: &str) {
    let (removed, added) = changed_lines(before, after);
    assert!(
        removed.is_empty(),
        "lines {removed:?} changed:\n{}",
        TextDiff::from_lines(before, after).unified_diff()
    );
    assert!(added > 0, "nothing was inserted");
}

const DEPLOYMENT: &str = "\
# vLLM on one GPU
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm   # keep in sync with the Service
spec:
  template:
    spec:
      containers:
        - name: server   # the model server
          image: vllm/vllm-openai:v0.6.0
          ports:
            - containerPort: 8000
          # readiness: just the port for now
          readinessProbe:
            tcpSocket:
              port: 8000
            periodSeconds: 5   # fast
          livenessProbe:
            httpGet: {path: /health, port: 8000}
          resources:
            limits:
              nvidia.com/gpu: 1 # one GPU

        # the sidecar below is optional
        - name: sidecar
          image: busybox
";

const CONTAINER: &str = "/spec/template/spec/containers/0";

#[test]
fn startup_probe_goes_after_the_last_key_of_the_container_with_comments_kept() {
    let probe = json!({"httpGet": {"path": "/health", "port": 8000},
                       "periodSeconds": 10, "failureThreshold": 38, "timeoutSeconds": 3});
    let out = fix(
        DEPLOYMENT,
        &[add(&format!("{CONTAINER}/startupProbe"), probe)],
    );
    assert_only_inserted(DEPLOYMENT, &out);
    assert_fixed!(out, @r"
        # vLLM on one GPU
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: vllm   # keep in sync with the Service
        spec:
          template:
            spec:
              containers:
                - name: server   # the model server
                  image: vllm/vllm-openai:v0.6.0
                  ports:
                    - containerPort: 8000
                  # readiness: just the port for now
                  readinessProbe:
                    tcpSocket:
                      port: 8000
                    periodSeconds: 5   # fast
                  livenessProbe:
                    httpGet: {path: /health, port: 8000}
                  resources:
                    limits:
                      nvidia.com/gpu: 1 # one GPU
                  startupProbe:
                    httpGet:
                      path: /health
                      port: 8000
                    periodSeconds: 10
                    failureThreshold: 38
                    timeoutSeconds: 3

                # the sidecar below is optional
                - name: sidecar
                  image: busybox
        ");
}

#[test]
fn replace_changes_only_the_scalar_and_keeps_its_comment() {
    let out = fix(
        DEPLOYMENT,
        &[replace(
            &format!("{CONTAINER}/readinessProbe/periodSeconds"),
            json!(10),
        )],
    );
    assert_fixed!(out, @r"
        # vLLM on one GPU
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: vllm   # keep in sync with the Service
        spec:
          template:
            spec:
              containers:
                - name: server   # the model server
                  image: vllm/vllm-openai:v0.6.0
                  ports:
                    - containerPort: 8000
                  # readiness: just the port for now
                  readinessProbe:
                    tcpSocket:
                      port: 8000
                    periodSeconds: 10   # fast
                  livenessProbe:
                    httpGet: {path: /health, port: 8000}
                  resources:
                    limits:
                      nvidia.com/gpu: 1 # one GPU

                # the sidecar below is optional
                - name: sidecar
                  image: busybox
        ");
    let (removed, added) = changed_lines(DEPLOYMENT, &out);
    assert_eq!((removed.len(), added), (1, 1));
}

#[test]
fn failure_threshold_is_replaced_or_added_in_a_startup_probe() {
    let text = "\
spec:
  containers:
  - name: tgi
    startupProbe:
      httpGet:
        path: /health
        port: http
      failureThreshold: 3 # the default; too short for a 70B model
      periodSeconds: 10
";
    let path = "/spec/containers/0/startupProbe/failureThreshold";
    let out = fix(text, &[replace(path, json!(60))]);
    assert_fixed!(out, @r"
        spec:
          containers:
          - name: tgi
            startupProbe:
              httpGet:
                path: /health
                port: http
              failureThreshold: 60 # the default; too short for a 70B model
              periodSeconds: 10
        ");
    let without = text.replace(
        "      failureThreshold: 3 # the default; too short for a 70B model\n",
        "",
    );
    let out = fix(&without, &[add(path, json!(60))]);
    // appended after periodSeconds, indented like it
    assert_fixed!(out, @r"
        spec:
          containers:
          - name: tgi
            startupProbe:
              httpGet:
                path: /health
                port: http
              periodSeconds: 10
              failureThreshold: 60
        ");
}

#[test]
fn tcp_socket_is_swapped_for_http_get_in_place() {
    let probe = format!("{CONTAINER}/readinessProbe");
    let out = fix(
        DEPLOYMENT,
        &[
            remove(&format!("{probe}/tcpSocket")),
            add(
                &format!("{probe}/httpGet"),
                json!({"path": "/health", "port": 8000}),
            ),
        ],
    );
    assert_fixed!(out, @r"
        # vLLM on one GPU
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: vllm   # keep in sync with the Service
        spec:
          template:
            spec:
              containers:
                - name: server   # the model server
                  image: vllm/vllm-openai:v0.6.0
                  ports:
                    - containerPort: 8000
                  # readiness: just the port for now
                  readinessProbe:
                    httpGet:
                      path: /health
                      port: 8000
                    periodSeconds: 5   # fast
                  livenessProbe:
                    httpGet: {path: /health, port: 8000}
                  resources:
                    limits:
                      nvidia.com/gpu: 1 # one GPU

                # the sidecar below is optional
                - name: sidecar
                  image: busybox
        ");
    // The only key of its mapping: the swap keeps the mapping from ever being empty.
    let text = "readinessProbe:\n  tcpSocket:\n    port: 80 # api\nother: 1\n";
    let out = fix(
        text,
        &[
            remove("/readinessProbe/tcpSocket"),
            add(
                "/readinessProbe/httpGet",
                json!({"path": "/ready", "port": 80}),
            ),
        ],
    );
    assert_fixed!(out, @r"
        readinessProbe:
          httpGet:
            path: /ready
            port: 80
        other: 1
        ");
}

#[test]
fn remove_then_add_of_the_same_key_rewrites_it_in_place() {
    let text = "p:\n  a: 1 # one\n  b: 2\n";
    let out = fix(text, &[remove("/p/a"), add("/p/a", json!({"x": 1}))]);
    assert_fixed!(out, @r"
        p:
          a:
            x: 1
          b: 2
        ");
}

#[test]
fn what_cannot_be_spliced_safely_is_refused_and_never_written() {
    // A keep-chomped block scalar owns the blank lines after it: inserting after it would
    // change the string, and the read-back notices.
    let text = "p:\n  script: |+\n    echo hi\n\nq: 1\n";
    let e = fix_at(text, 0, "", &[add("/p/x", json!(1))]);
    assert!(e.is_err_and(|e| e.reason.contains("read back")));
    // An item of a `- - x` nested sequence has no line of its own to add after.
    let e = fix_at("a:\n- - x\n  - y\n", 0, "", &[add("/a/0/-", json!("z"))]);
    assert!(e.is_err_and(|e| e.reason.contains("(`- - x`); add the item by hand")));
}

#[test]
fn remove_takes_the_entry_lines_and_its_comment_but_not_its_neighbours() {
    let out = fix(
        DEPLOYMENT,
        &[remove(&format!("{CONTAINER}/readinessProbe/periodSeconds"))],
    );
    assert_fixed!(out, @r"
        # vLLM on one GPU
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: vllm   # keep in sync with the Service
        spec:
          template:
            spec:
              containers:
                - name: server   # the model server
                  image: vllm/vllm-openai:v0.6.0
                  ports:
                    - containerPort: 8000
                  # readiness: just the port for now
                  readinessProbe:
                    tcpSocket:
                      port: 8000
                  livenessProbe:
                    httpGet: {path: /health, port: 8000}
                  resources:
                    limits:
                      nvidia.com/gpu: 1 # one GPU

                # the sidecar below is optional
                - name: sidecar
                  image: busybox
        ");
    let out = fix(
        DEPLOYMENT,
        &[remove(&format!("{CONTAINER}/readinessProbe"))],
    );
    // the comment line above the probe stays
    assert_fixed!(out, @r"
        # vLLM on one GPU
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: vllm   # keep in sync with the Service
        spec:
          template:
            spec:
              containers:
                - name: server   # the model server
                  image: vllm/vllm-openai:v0.6.0
                  ports:
                    - containerPort: 8000
                  # readiness: just the port for now
                  livenessProbe:
                    httpGet: {path: /health, port: 8000}
                  resources:
                    limits:
                      nvidia.com/gpu: 1 # one GPU

                # the sidecar below is optional
                - name: sidecar
                  image: busybox
        ");
    // The first key of a sequence item: the next key moves up after the `-`.
    let out = fix(DEPLOYMENT, &[remove(&format!("{CONTAINER}/name"))]);
    assert_fixed!(out, @r"
        # vLLM on one GPU
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: vllm   # keep in sync with the Service
        spec:
          template:
            spec:
              containers:
                - image: vllm/vllm-openai:v0.6.0
                  ports:
                    - containerPort: 8000
                  # readiness: just the port for now
                  readinessProbe:
                    tcpSocket:
                      port: 8000
                    periodSeconds: 5   # fast
                  livenessProbe:
                    httpGet: {path: /health, port: 8000}
                  resources:
                    limits:
                      nvidia.com/gpu: 1 # one GPU

                # the sidecar below is optional
                - name: sidecar
                  image: busybox
        ");
    // A flow mapping entry goes with one comma.
    let out = fix(
        DEPLOYMENT,
        &[remove(&format!("{CONTAINER}/livenessProbe/httpGet/path"))],
    );
    assert!(out.contains("httpGet: {port: 8000}\n"), "{out}");
    let out = fix(
        DEPLOYMENT,
        &[remove(&format!("{CONTAINER}/livenessProbe/httpGet/port"))],
    );
    assert!(out.contains("httpGet: {path: /health}\n"), "{out}");
}

#[test]
fn removing_the_last_entry_leaves_an_empty_collection() {
    let text = "metadata:   # about\n  # the name\n  name: x # n\nports:\n- containerPort: 80\nitems:\n- only: 1\n- b: 2\n";
    let out = fix(
        text,
        &[
            remove("/metadata/name"),
            remove("/ports/0"),
            remove("/items/0/only"),
        ],
    );
    assert_fixed!(out, @r"
        metadata: {}   # about
          # the name
        ports: []
        items:
        - {}
        - b: 2
        ");
    assert_fixed!(fix("a: 1\n", &[remove("/a")]), @"{}");
}

#[test]
fn empty_flow_collections_under_a_block_key_open_up_in_block_style() {
    let text = "metadata:\n  name: x\n  annotations: {}  # none yet\nspec:\n  ports: []\n";
    let out = fix(
        text,
        &[
            add("/metadata/annotations/probelint.io~1mutated", json!("a:b")),
            add("/spec/ports/-", json!({"containerPort": 80})),
        ],
    );
    assert_fixed!(out, @r"
        metadata:
          name: x
          annotations:  # none yet
            probelint.io/mutated: a:b
        spec:
          ports:
            - containerPort: 80
        ");
    // Inside flow style they stay flow.
    let out = fix("a: {b: {}}\n", &[add("/a/b/c", json!(1))]);
    assert_fixed!(out, @"a: {b: {c: 1}}");
}

#[test]
fn flow_style_probes_are_edited_in_flow_style() {
    let text = "\
spec:
  containers: [{name: a, image: 'ghcr.io/x:1', readinessProbe: {tcpSocket: {port: 80}}}]  # one line
";
    let probe = "/spec/containers/0/readinessProbe";
    let out = fix(
        text,
        &[
            remove(&format!("{probe}/tcpSocket")),
            add(
                &format!("{probe}/httpGet"),
                json!({"path": "/health", "port": 80}),
            ),
            add(&format!("{probe}/timeoutSeconds"), json!(10)),
        ],
    );
    assert_fixed!(out, @r"
        spec:
          containers: [{name: a, image: 'ghcr.io/x:1', readinessProbe: {httpGet: {path: /health, port: 80}, timeoutSeconds: 10}}]  # one line
        ");
    let out = fix(
        text,
        &[add(
            "/spec/containers/0/startupProbe",
            json!({"exec": {"command": ["cat", "/tmp/ready"]}, "failureThreshold": 30}),
        )],
    );
    assert!(
        out.contains(
            "readinessProbe: {tcpSocket: {port: 80}}, startupProbe: {exec: {command: [cat, \
             /tmp/ready]}, failureThreshold: 30}}]  # one line"
        ),
        "{out}"
    );
}

#[test]
fn json_files_stay_json() {
    let text = r#"{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "triton"},
  "spec": {
    "containers": [
      {
        "name": "triton",
        "readinessProbe": {"tcpSocket": {"port": 8000}}
      }
    ]
  }
}"#;
    let c = "/spec/containers/0";
    let out = fix(
        text,
        &[
            add(
                &format!("{c}/startupProbe"),
                json!({"httpGet": {"path": "/v2/health/live", "port": 8000}, "failureThreshold": 30}),
            ),
            remove(&format!("{c}/readinessProbe/tcpSocket")),
            add(
                &format!("{c}/readinessProbe/httpGet"),
                json!({"path": "/v2/health/ready", "port": 8000}),
            ),
            add(
                "/metadata/annotations",
                json!({"probelint.io/mutated": "on"}),
            ),
        ],
    );
    // Like the file, the fixed text has no final line break.
    assert_fixed!(out, ending "", @r#"
        {
          "apiVersion": "v1",
          "kind": "Pod",
          "metadata": {"name": "triton", "annotations": {"probelint.io/mutated": "on"}},
          "spec": {
            "containers": [
              {
                "name": "triton",
                "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": 8000}},
                "startupProbe": {
                  "httpGet": {
                    "path": "/v2/health/live",
                    "port": 8000
                  },
                  "failureThreshold": 30
                }
              }
            ]
          }
        }
        "#);
    let reread: Value = serde_json::from_str(&out).unwrap_or_default();
    assert_eq!(
        reread["spec"]["containers"][0]["startupProbe"]["failureThreshold"],
        30
    );
}

#[test]
fn list_items_are_addressed_through_their_prefix() {
    let text = "\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
- apiVersion: v1
  kind: Pod
  metadata:
    name: b
";
    let out = match fix_at(
        text,
        0,
        "/items/1",
        &[add(
            "/metadata/annotations",
            json!({"probelint.io/mutated": "x:y"}),
        )],
    ) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    };
    assert_fixed!(out, @r"
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Pod
          metadata: {name: a}
        - apiVersion: v1
          kind: Pod
          metadata:
            name: b
            annotations:
              probelint.io/mutated: x:y
        ");
}

#[test]
fn other_documents_stay_byte_identical() {
    let first = "# config first\napiVersion: v1\nkind: ConfigMap\ndata: {a: \"1\"}\n---\n# empty\n";
    let second =
        "---\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: x\n    image: y\n";
    let third = "---\n# trailing document\napiVersion: v1\nkind: Service\n";
    let text = format!("{first}{second}{third}");
    let out = match fix_at(
        &text,
        1,
        "",
        &[add("/spec/containers/0/imagePullPolicy", json!("Always"))],
    ) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    };
    assert!(out.starts_with(first));
    assert!(out.ends_with(third));
    assert_fixed!(out, @r#"
        # config first
        apiVersion: v1
        kind: ConfigMap
        data: {a: "1"}
        ---
        # empty
        ---
        apiVersion: v1
        kind: Pod
        spec:
          containers:
          - name: x
            image: y
            imagePullPolicy: Always
        ---
        # trailing document
        apiVersion: v1
        kind: Service
        "#);
    let wrong = fix_at(&text, 3, "", &[add("/a", json!(1))]);
    assert!(
        wrong.is_err_and(|e| e.reason.contains("3 document")),
        "a document that is not there"
    );
}

#[test]
fn crlf_files_get_crlf_lines_and_no_final_newline_is_kept() {
    let text = "spec:\r\n  probe:\r\n    tcpSocket:\r\n      port: 80\r\n  x: 1";
    let out = fix(
        text,
        &[
            remove("/spec/probe/tcpSocket"),
            add("/spec/probe/httpGet", json!({"path": "/h", "port": 80})),
            add("/spec/extra", json!({"a": [1, 2]})),
        ],
    );
    assert_eq!(
        out,
        "spec:\r\n  probe:\r\n    httpGet:\r\n      path: /h\r\n      port: 80\r\n  x: 1\r\n  \
         extra:\r\n    a:\r\n      - 1\r\n      - 2"
    );
    let out = fix("a: 1", &[add("/b", json!(2))]);
    assert_eq!(out, "a: 1\nb: 2");
}

#[test]
fn anchored_aliased_and_merged_nodes_are_refused() {
    let text = "\
probe: &probe
  tcpSocket:
    port: 80
spec:
  a:
    readinessProbe: *probe
  b:
    <<: *probe
    periodSeconds: 5
";
    for op in [
        add("/spec/a/readinessProbe/timeoutSeconds", json!(3)),
        remove("/spec/a/readinessProbe/tcpSocket"),
        replace("/spec/b/tcpSocket/port", json!(81)),
        remove("/spec/b/tcpSocket"),
        add("/probe/periodSeconds", json!(1)),
    ] {
        let result = fix_at(text, 0, "", std::slice::from_ref(&op));
        let Err(e) = result else {
            panic!("{op:?} was applied to shared text: {result:?}");
        };
        assert!(
            e.reason.contains("anchor") || e.reason.contains("merge"),
            "{e}"
        );
        assert!(e.to_string().contains("cannot apply"), "{e}");
    }
    // The mapping that merges is its own text: adding to it is fine.
    let out = fix(text, &[add("/spec/b/timeoutSeconds", json!(3))]);
    assert_fixed!(out, @r"
        probe: &probe
          tcpSocket:
            port: 80
        spec:
          a:
            readinessProbe: *probe
          b:
            <<: *probe
            periodSeconds: 5
            timeoutSeconds: 3
        ");
}

#[test]
fn strings_kubernetes_would_read_as_numbers_or_booleans_are_quoted() {
    let text = "metadata:\n  name: x\n";
    let out = fix(
        text,
        &[add(
            "/metadata/annotations",
            json!({"port": "8080", "enabled": "on", "yes": "no", "exp": "1e3",
                   "path": "/health", "note": "a: b #c", "empty": ""}),
        )],
    );
    assert_fixed!(out, @r#"
        metadata:
          name: x
          annotations:
            port: "8080"
            enabled: "on"
            "yes": "no"
            exp: "1e3"
            path: /health
            note: "a: b #c"
            empty: ""
        "#);
    let out = fix(text, &[replace("/metadata/name", json!("0644"))]);
    assert_fixed!(out, @r#"
        metadata:
          name: "0644"
        "#);
}

#[test]
fn indentless_sequences_stay_indentless() {
    let text = "\
spec:
  containers:
  - name: a
    args:
    - --port
    - \"8000\"
    livenessProbe:
      tcpSocket:
        port: 8000
";
    let out = fix(
        text,
        &[add(
            "/spec/containers/0/startupProbe",
            json!({"exec": {"command": ["sh", "-c", "test -f /ready"]}, "failureThreshold": 30}),
        )],
    );
    assert_only_inserted(text, &out);
    assert_fixed!(out, @r#"
        spec:
          containers:
          - name: a
            args:
            - --port
            - "8000"
            livenessProbe:
              tcpSocket:
                port: 8000
            startupProbe:
              exec:
                command:
                - sh
                - -c
                - test -f /ready
              failureThreshold: 30
        "#);
    let out = fix(
        text,
        &[add(
            "/spec/containers/-",
            json!({"name": "b", "image": "busybox"}),
        )],
    );
    assert_fixed!(out, @r#"
        spec:
          containers:
          - name: a
            args:
            - --port
            - "8000"
            livenessProbe:
              tcpSocket:
                port: 8000
          - name: b
            image: busybox
        "#);
    let out = fix(
        text,
        &[add("/spec/containers/0/args/1", json!("--host=0.0.0.0"))],
    );
    assert_fixed!(out, @r#"
        spec:
          containers:
          - name: a
            args:
            - --port
            - --host=0.0.0.0
            - "8000"
            livenessProbe:
              tcpSocket:
                port: 8000
        "#);
}

#[test]
fn four_space_files_get_four_space_insertions() {
    let text = "\
spec:
    containers:
        -   name: a
            livenessProbe:
                tcpSocket:
                    port: 80
";
    let out = fix(
        text,
        &[add(
            "/spec/containers/0/startupProbe",
            json!({"tcpSocket": {"port": 80}, "failureThreshold": 30}),
        )],
    );
    assert_fixed!(out, @r"
        spec:
            containers:
                -   name: a
                    livenessProbe:
                        tcpSocket:
                            port: 80
                    startupProbe:
                        tcpSocket:
                            port: 80
                        failureThreshold: 30
        ");
}

#[test]
fn insertion_goes_before_the_blank_lines_and_comments_of_the_next_sibling() {
    let text = "\
a:
  b: 1   # last key of a

# about c
c: 2
";
    let out = fix(text, &[add("/a/x", json!(true))]);
    assert_fixed!(out, @r"
        a:
          b: 1   # last key of a
          x: true

        # about c
        c: 2
        ");
}

#[test]
fn shapes_that_cannot_be_written_are_refused_cleanly() {
    // `readinessProbe:` with nothing after it is null: nothing can be added inside.
    let text = "spec:\n  readinessProbe:\n  name: x\n";
    let e = fix_at(
        text,
        0,
        "",
        &[add("/spec/readinessProbe/httpGet", json!({}))],
    );
    assert!(e.is_err_and(|e| e.reason.contains("`/spec/readinessProbe` is empty")));
    let e = fix_at(text, 0, "", &[replace("/spec/nope", json!(1))]);
    assert!(e.is_err_and(|e| e.reason.contains("does not apply")));
    // A file that does not parse.
    let e = fix_at("a: [", 0, "", &[add("/b", json!(1))]);
    assert!(e.is_err_and(|e| e.reason.contains("does not parse")));
    // The root itself.
    let e = fix_at("a: 1\n", 0, "", &[replace("", json!({}))]);
    assert!(e.is_err());
}

#[test]
fn null_values_can_be_replaced() {
    let text = "spec:\n  readinessProbe:\n  name: x\n";
    let out = fix(
        text,
        &[replace(
            "/spec/readinessProbe",
            json!({"httpGet": {"path": "/r", "port": 80}}),
        )],
    );
    assert_fixed!(out, @r"
        spec:
          readinessProbe:
            httpGet:
              path: /r
              port: 80
          name: x
        ");
    let out = fix(text, &[replace("/spec/readinessProbe", json!(3))]);
    assert_fixed!(out, @r"
        spec:
          readinessProbe: 3
          name: x
        ");
}

#[test]
fn replaced_collections_keep_their_style() {
    let text = "p: {tcpSocket: {port: 80}}  # flow\nq:\n  a: 1\n  b: [1]\nr: 1\n";
    let out = fix(
        text,
        &[
            replace("/p", json!({"httpGet": {"path": "/h", "port": 80}})),
            replace("/q", json!({"c": ["x"]})),
            replace("/r", json!({"s": 2})),
        ],
    );
    assert_fixed!(out, @r"
        p: {httpGet: {path: /h, port: 80}}  # flow
        q:
          c:
            - x
        r:
          s: 2
        ");
}

#[test]
fn move_copy_and_test_operations() {
    let text = "a:\n  b: 1\n  c: [x]\n";
    let ops = [
        PatchOperation::Test(TestOperation {
            path: pointer("/a/b"),
            value: json!(1),
        }),
        PatchOperation::Copy(CopyOperation {
            from: pointer("/a/b"),
            path: pointer("/a/d"),
        }),
        PatchOperation::Move(MoveOperation {
            from: pointer("/a/b"),
            path: pointer("/a/c/-"),
        }),
    ];
    let out = fix(text, &ops);
    assert_fixed!(out, @r"
        a:
          c: [x, 1]
          d: 1
        ");
    let failing = [PatchOperation::Test(TestOperation {
        path: pointer("/a/b"),
        value: json!(2),
    })];
    assert!(fix_at(text, 0, "", &failing).is_err());
}

// ---------------------------------------------------------------------------------------------
// Never panics; never returns text that reads back wrong

fn small_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        (-1000i64..100_000).prop_map(Value::from),
        "[a-z0-9 :#/\"'.-]{0,8}".prop_map(Value::from),
        Just(json!("on")),
        Just(json!("8080")),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}|yes|8080|a b", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const PATHS: &[&str] = &[
    "",
    "/metadata",
    "/metadata/name",
    "/metadata/annotations",
    "/metadata/annotations/x~1y",
    "/spec/template/spec/containers/0",
    "/spec/template/spec/containers/0/startupProbe",
    "/spec/template/spec/containers/0/readinessProbe",
    "/spec/template/spec/containers/0/readinessProbe/tcpSocket",
    "/spec/template/spec/containers/0/readinessProbe/httpGet",
    "/spec/template/spec/containers/0/readinessProbe/periodSeconds",
    "/spec/template/spec/containers/0/livenessProbe/httpGet/path",
    "/spec/template/spec/containers/0/ports/0",
    "/spec/template/spec/containers/0/ports/-",
    "/spec/template/spec/containers/1",
    "/spec/template/spec/containers/-",
    "/spec/template/spec/containers/2",
    "/nope/deeper",
];

fn op_strategy() -> impl Strategy<Value = PatchOperation> {
    let path = prop::sample::select(PATHS);
    prop_oneof![
        (path.clone(), small_value()).prop_map(|(p, v)| add(p, v)),
        (path.clone(), small_value()).prop_map(|(p, v)| replace(p, v)),
        path.prop_map(remove),
    ]
}

/// The same workload in flow style, with anchors, and as JSON.
const FLOW: &str = "\
metadata: {name: vllm, annotations: {}}  # flow
spec:
  template:
    spec:
      containers: [{name: a, readinessProbe: {tcpSocket: {port: 80}}, ports: [{containerPort: 80}]},
        {name: b, livenessProbe: &p {httpGet: {path: /health, port: 80}}, readinessProbe: *p}]
";

const JSON: &str = r#"{
	"metadata": {"name": "vllm"},
	"spec": {"template": {"spec": {"containers": [
		{"name": "a", "ports": [{"containerPort": 80}],
		 "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
		 "livenessProbe": {"httpGet": {"path": "/health", "port": 80}}}
	]}}}
}"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn apply_never_panics_and_success_reads_back_as_the_patch(
        ops in prop::collection::vec(op_strategy(), 1..4),
        manifest in prop::sample::select(&[DEPLOYMENT, FLOW, JSON][..]),
        crlf in any::<bool>(),
    ) {
        let text = if crlf { manifest.replace('\n', "\r\n") } else { manifest.to_owned() };
        if let Ok(out) = fix_at(&text, 0, "", &ops) {
            let docs = parse_stream(out.as_bytes(), &Limits::default());
            prop_assert!(docs.is_ok());
            let mut expected = parse_stream(text.as_bytes(), &Limits::default())
                .map(|d| d.into_iter().map(|d| d.value).collect::<Vec<_>>())
                .unwrap_or_default();
            if let Some(first) = expected.first_mut() {
                prop_assert!(json_patch::patch(first, &ops).is_ok());
            }
            let got: Vec<Value> = docs.unwrap_or_default().into_iter().map(|d| d.value).collect();
            prop_assert_eq!(got.len(), expected.len());
            for (g, e) in got.iter().zip(&expected) {
                prop_assert!(same_json(g, e));
            }
            if crlf {
                prop_assert!(!out.replace("\r\n", "").contains('\n'), "a bare LF in a CRLF file");
            }
        }
    }
}

#[test]
fn cr_only_files_keep_cr_line_endings() {
    // Classic Mac OS line endings: the YAML layer reads a lone `\r` as a line break, so must the
    // edits, and inserted lines must use it too.
    let text = "spec:\r  probe:\r    tcpSocket:\r      port: 80\r  x: 1 # keep\r";
    let out = fix(
        text,
        &[
            remove("/spec/probe/tcpSocket"),
            add("/spec/probe/httpGet", json!({"path": "/h", "port": 80})),
            add("/spec/extra", json!({"a": [1, 2]})),
        ],
    );
    assert_eq!(
        out,
        "spec:\r  probe:\r    httpGet:\r      path: /h\r      port: 80\r  x: 1 # keep\r  \
         extra:\r    a:\r      - 1\r      - 2\r"
    );
    let out = fix("a: 1\rb: 2", &[add("/c", json!(3))]);
    assert_eq!(out, "a: 1\rb: 2\rc: 3");
}

/// The objects of a document as the CLI sees them: the document, or the items of a `List`. (The
/// CLI's own expansion knows Kubernetes kinds; this crate knows only YAML, so the test keeps a
/// copy of the one rule it needs.)
fn list_items(value: &Value) -> Vec<(String, &Value)> {
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    match value.get("items").and_then(Value::as_array) {
        Some(items) if is_list => items
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("/items/{i}"), item))
            .collect(),
        _ => vec![(String::new(), value)],
    }
}

/// The operations the engine's safe fixes make of a pod's model-server containers (`probelint
/// mutate --patch` on these shapes): a startup probe where there is none, the readiness port
/// check swapped for the health endpoint (`remove` + `add`, one unit), a longer startup
/// budget. Written out here because this crate knows no rules; in the engine's order too
/// (containers by pointer, as text: `/10` before `/2`).
fn probe_fixes(object: &Value) -> Vec<PatchOperation> {
    let health = json!({"path": "/health", "port": 8000});
    let mut fixes: Vec<(String, Vec<PatchOperation>)> = Vec::new();
    let containers = object["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten();
    for (i, container) in containers.enumerate() {
        if !container["image"]
            .as_str()
            .is_some_and(|image| image.starts_with("vllm/"))
        {
            continue;
        }
        let at = format!("/spec/containers/{i}");
        let mut ops = Vec::new();
        if container.get("startupProbe").is_none() {
            ops.push(add(
                &format!("{at}/startupProbe"),
                json!({"httpGet": health, "periodSeconds": 10, "failureThreshold": 120}),
            ));
        } else if container["startupProbe"].get("failureThreshold").is_some() {
            ops.push(replace(
                &format!("{at}/startupProbe/failureThreshold"),
                json!(38),
            ));
        }
        if container["readinessProbe"].get("tcpSocket").is_some() {
            ops.push(remove(&format!("{at}/readinessProbe/tcpSocket")));
            ops.push(add(&format!("{at}/readinessProbe/httpGet"), health.clone()));
        }
        fixes.push((at, ops));
    }
    fixes.sort_by(|a, b| a.0.cmp(&b.0));
    fixes.into_iter().flat_map(|(_, ops)| ops).collect()
}

/// The operations of `ops` as [`Region::step`] takes them: one at a time, except a `remove`
/// directly followed by an `add` to the same mapping.
fn one_step_at_a_time(ops: &[PatchOperation]) -> Vec<&[PatchOperation]> {
    let parent =
        |op: &PatchOperation| view::split_pointer(op.path().as_str()).map(|(p, _)| p.to_owned());
    let mut steps = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let pair = matches!(ops[i], PatchOperation::Remove(_))
            && ops.get(i + 1).is_some_and(|n| {
                matches!(n, PatchOperation::Add(_)) && parent(n) == parent(&ops[i])
            });
        let n = if pair { 2 } else { 1 };
        steps.push(&ops[i..i + n]);
        i += n;
    }
    steps
}

/// A document with many fixable containers is written in a few batches of independent
/// operations (`schedule`), not one parse per operation; the text must be exactly what
/// applying the operations one step at a time, each in its own `apply`, gives.
#[test]
fn batched_operations_write_what_one_at_a_time_writes() {
    let styles = [
        "    - name: block-NAME   # a comment\n      image: vllm/vllm-openai:v0.6.3\n      \
         resources:\n        limits:\n          nvidia.com/gpu: 1\n      readinessProbe:\n        \
         tcpSocket:\n          port: 8000\n",
        "    - name: flow-NAME\n      image: vllm/vllm-openai:v0.6.3\n      resources: {limits: \
         {nvidia.com/gpu: 1}}\n      readinessProbe: {tcpSocket: {port: 8000}, periodSeconds: 5}\n\n",
        "    # before the item\n    - name: short-NAME\n      image: vllm/vllm-openai:v0.6.3\n      \
         resources: {limits: {nvidia.com/gpu: 1}}\n      startupProbe:\n        httpGet: {path: \
         /health, port: 8000}\n        failureThreshold: 3\n      readinessProbe:\n        \
         httpGet: {path: /health, port: 8000}\n",
        "    - name: sidecar-NAME\n      image: busybox\n",
    ];
    let mut pod =
        String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: llm\nspec:\n  containers:\n");
    for i in 0..40 {
        pod.push_str(&styles[i % styles.len()].replace("NAME", &i.to_string()));
    }
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        (0..30)
            .map(|i| {
                format!(
                    "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: p{i}}}\n    spec:\n      \
                     containers:\n        - name: c\n          image: vllm/vllm-openai:v0.6.3\n          \
                     resources: {{limits: {{nvidia.com/gpu: 1}}}}\n          readinessProbe:\n            \
                     tcpSocket: {{port: 8000}}\n"
                )
            })
            .collect::<String>()
    );
    for (text, newline) in [
        (pod.clone(), "\n"),
        (pod.replace('\n', "\r\n"), "\r\n"),
        (list, "\n"),
    ] {
        let docs = parse_stream(text.as_bytes(), &Limits::default()).unwrap_or_default();
        let mut patches: Vec<(String, Vec<PatchOperation>)> = Vec::new();
        for (prefix, object) in list_items(&docs[0].value) {
            patches.push((prefix, probe_fixes(object)));
        }
        let ops: usize = patches.iter().map(|(_, ops)| ops.len()).sum();
        assert!(ops >= 60, "{ops} operations");
        let object_patches: Vec<ObjectPatch<'_>> = patches
            .iter()
            .map(|(prefix, ops)| ObjectPatch {
                document: 0,
                prefix: prefix.clone(),
                ops,
            })
            .collect();
        BATCHED.with(|b| b.set(0));
        let batched = match apply(&text, &object_patches, &Limits::default()) {
            Ok(out) => out,
            Err(e) => panic!("{e}"),
        };
        let units = BATCHED.with(std::cell::Cell::get);
        // Each container's fixes are a startupProbe and a `remove` + `add` swap (two
        // operations, one unit): all of them in batches.
        assert!(
            units * 3 >= ops * 2,
            "only {units} units of {ops} operations were batched"
        );
        let mut stepped = text.clone();
        for (prefix, ops) in &patches {
            for step in one_step_at_a_time(ops) {
                stepped = match fix_at(&stepped, 0, prefix, step) {
                    Ok(out) => out,
                    Err(e) => panic!("{e}"),
                };
            }
        }
        if batched != stepped {
            panic!(
                "batched and one-at-a-time differ:\n{}",
                TextDiff::from_lines(&stepped, &batched).unified_diff()
            );
        }
        assert_ne!(batched, text);
        let breaks = batched.matches('\n').count();
        assert_eq!(
            batched.matches(newline).count(),
            breaks,
            "line endings kept"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The real corpus, with edits every object can take (the engine's own fixes over the corpus are
// in lint/tests/fix_engine.rs)

/// Every object of every real-world manifest gets a new annotation and a renamed
/// `metadata.name`: each file is either rewritten with only the touched lines changed, or refused
/// with an error that names the operation, and a refusal is the exception.
#[test]
fn every_object_of_the_real_corpus_takes_an_annotation_and_a_rename() {
    let files = probelint_testkit::corpus::real_manifests();
    assert!(files.len() >= 100, "corpus has {} files", files.len());
    let limits = Limits::default();
    let (mut edited, mut patched_objects, mut refused) = (0, 0, Vec::new());
    for path in &files {
        let name = path.display().to_string();
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok(docs) = parse_stream(text.as_bytes(), &limits) else {
            continue;
        };
        let mut patches: Vec<(usize, String, Vec<PatchOperation>)> = Vec::new();
        for (d, doc) in docs.iter().enumerate() {
            for (prefix, object) in list_items(&doc.value) {
                let Some(metadata) = object.get("metadata").and_then(Value::as_object) else {
                    continue;
                };
                let mut ops = Vec::new();
                match metadata.get("annotations") {
                    Some(Value::Object(_)) => ops.push(add(
                        "/metadata/annotations/probelint.io~1checked",
                        json!("yes"),
                    )),
                    None => ops.push(add(
                        "/metadata/annotations",
                        json!({"probelint.io/checked": "yes"}),
                    )),
                    Some(_) => {}
                }
                if let Some(old) = metadata.get("name").and_then(Value::as_str) {
                    ops.push(replace("/metadata/name", json!(format!("{old}-x"))));
                }
                if !ops.is_empty() {
                    patches.push((d, prefix, ops));
                }
            }
        }
        if patches.is_empty() {
            continue;
        }
        let object_patches: Vec<ObjectPatch<'_>> = patches
            .iter()
            .map(|(d, prefix, ops)| ObjectPatch {
                document: *d,
                prefix: prefix.clone(),
                ops,
            })
            .collect();
        let out = match apply(&text, &object_patches, &limits) {
            Ok(out) => out,
            Err(e) => {
                let message = e.to_string();
                assert!(
                    e.operation.is_some() && message.len() > 30,
                    "{name}: unclear error {message}"
                );
                refused.push(format!("{name}: {message}"));
                continue;
            }
        };
        edited += 1;
        patched_objects += patches.len();
        // The renamed lines change; everything else only gains lines.
        let names: Vec<usize> = patches
            .iter()
            .filter_map(|(d, prefix, _)| {
                let loc = docs
                    .get(*d)?
                    .locations
                    .get(&format!("{prefix}/metadata/name"))?;
                Some(text.get(..loc.value.start)?.matches('\n').count())
            })
            .collect();
        let (removed, added) = changed_lines(&text, &out);
        assert!(added > 0, "{name}: nothing was added");
        for line in removed {
            assert!(
                names.contains(&line),
                "{name}: line {} changed though only names are replaced:\n{}",
                line + 1,
                TextDiff::from_lines(text.as_str(), out.as_str()).unified_diff()
            );
        }
    }
    eprintln!(
        "corpus: {} files, {edited} edited ({patched_objects} objects), {} refused",
        files.len(),
        refused.len()
    );
    for refusal in &refused {
        eprintln!("  refused: {refusal}");
    }
    assert!(edited >= 100, "only {edited} files were edited");
    assert!(
        refused.len() * 20 <= edited,
        "{} files refused, {edited} edited",
        refused.len()
    );
}

/// A quoted scalar's span ends at its closing quote, so replacing it keeps the comment after
/// it, in block and in flow style.
#[test]
fn replacing_a_quoted_scalar_keeps_the_comment_after_it() {
    let text =
        "spec:\n  path: \"/health\" # the server's own probe\n  args: [\"--port\", '8000'  ] # c\n";
    let out = fix(
        text,
        &[
            replace("/spec/path", json!("/v1/models")),
            replace("/spec/args/1", json!("8080")),
        ],
    );
    assert_fixed!(out, @r#"
    spec:
      path: /v1/models # the server's own probe
      args: ["--port", "8080"  ] # c
    "#);
}

/// Files that only kubectl's leniency reads (a flow sequence closed at column 0, a tab after
/// `:`) are patched at the file's own offsets, and read back as the patched object.
#[test]
fn edits_land_in_files_read_with_go_yaml_leniency() {
    let text =
        "spec:\n  containers:\n  - name: c\n    args: [ \"vllm serve m\"\n]\n    image:\tv1\n";
    let out = fix(
        text,
        &[
            replace("/spec/containers/0/image", json!("v2")),
            add("/spec/containers/0/args/-", json!("--port=8000")),
        ],
    );
    assert_fixed!(out, @r#"
    spec:
      containers:
      - name: c
        args: [ "vllm serve m", --port=8000
    ]
        image:	v2
    "#);
}
