//! Hostile and broken input, end to end through the real `probelint` binary: every bad file gets
//! a clear error within a bounded time (and, where size is the attack, bounded memory), the
//! process survives, and the healthy files of the same run are still linted. Plus `--fix`
//! interrupted by SIGKILL, over and over: no file is ever left truncated or half-written.
//!
//! The YAML layer's own unit tests (`yaml/src/load/tests.rs`) pin the exact limits and
//! messages; these tests pin what a user running the CLI on a hostile repository sees.

mod common;

use common::{BAD_GPU, BIN, array, copy_tree, json_stdout, probelint_std, write};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs the binary with a wall-clock deadline: a hang is a test failure, not a stuck CI job.
/// Output goes to files (a pipe nobody reads while waiting would fill up and block the child).
fn run_bounded(mut cmd: Command, deadline: Duration) -> (Output, Duration) {
    let capture = tempfile::tempdir().expect("tempdir");
    let (out_path, err_path) = (capture.path().join("out"), capture.path().join("err"));
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).expect("stdout file"))
        .stderr(fs::File::create(&err_path).expect("stderr file"));
    let start = Instant::now();
    let mut child = cmd.spawn().expect("start probelint");
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "probelint still running after {deadline:?} (killed)\nstderr: {}",
                String::from_utf8_lossy(&fs::read(&err_path).unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    let output = Output {
        status,
        stdout: fs::read(&out_path).expect("stdout"),
        stderr: fs::read(&err_path).expect("stderr"),
    };
    (output, elapsed)
}

fn probelint(dir: &Path) -> Command {
    let mut cmd = probelint_std();
    cmd.current_dir(dir).args(["--format", "json"]);
    cmd
}

/// What one run said.
struct Run {
    code: i32,
    json: Value,
    elapsed: Duration,
}

impl Run {
    fn error_for(&self, file: &str) -> String {
        array(&self.json, "errors")
            .iter()
            .find(|e| e["file"].as_str().is_some_and(|f| f.ends_with(file)))
            .and_then(|e| e["message"].as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no error for {file}: {:#}", self.json))
    }

    fn assert_still_linted(&self, file: &str) {
        assert!(
            array(&self.json, "findings")
                .iter()
                .any(|f| f["file"].as_str().is_some_and(|f| f.ends_with(file))
                    && f["rule"] == "gpu-startup-probe-missing"),
            "{file} was not linted: {:#}",
            self.json
        );
    }
}

fn lint(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = probelint(dir);
    cmd.args(args);
    let (out, elapsed) = run_bounded(cmd, Duration::from_secs(30));
    let code = out.status.code().unwrap_or_else(|| {
        panic!(
            "probelint died ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let json = json_stdout(&out);
    Run {
        code,
        json,
        elapsed,
    }
}

/// A directory holding `bad.yaml` (one known finding) and the hostile file `name`.
fn dir_with(name: &str, content: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    write(dir.path(), name, content);
    dir
}

/// Lints the directory, and the hostile file named explicitly next to the healthy one: both
/// ways must give `name` an error containing `expect`, with `bad.yaml` linted.
fn assert_refused(dir: &Path, name: &str, expect: &str) -> Duration {
    let mut slowest = Duration::ZERO;
    for args in [vec!["."], vec![name, "bad.yaml"]] {
        let run = lint(dir, &args);
        assert_eq!(run.code, 2, "exit 2 for input errors: {:#}", run.json);
        let message = run.error_for(name);
        assert!(
            message.contains(expect),
            "{name}: {message:?} should say {expect:?}"
        );
        run.assert_still_linted("bad.yaml");
        slowest = slowest.max(run.elapsed);
    }
    eprintln!("{name}: refused in {slowest:?}");
    slowest
}

#[test]
fn alias_bomb_is_refused_by_node_count() {
    let mut bomb = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (i, name) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().enumerate() {
        let prev = ["a", "b", "c", "d", "e", "f", "g", "h"][i];
        let items = vec![format!("*{prev}"); 9].join(", ");
        bomb.push_str(&format!("{name}: &{name} [{items}]\n"));
    }
    let dir = dir_with("bomb.yaml", bomb.as_bytes());
    assert_refused(dir.path(), "bomb.yaml", "nodes");
}

#[test]
fn hundred_thousand_deep_block_nesting_is_refused() {
    // Block sequences (`- - - ...`) and block mappings, each 100,000 levels.
    let seq = "- ".repeat(100_000) + "x\n";
    let dir = dir_with("deep-seq.yaml", seq.as_bytes());
    assert_refused(dir.path(), "deep-seq.yaml", "nested deeper");

    // Block mappings need one more column per level, so 100,000 levels would be a 5 GB file
    // (refused by size, tested below); 2,000 levels (2 MB) is already far past the limit.
    let mut map = String::new();
    for level in 0..2_000usize {
        map.push_str(&" ".repeat(level));
        map.push_str("k:\n");
    }
    map.push_str(&" ".repeat(2_000));
    map.push_str("v\n");
    let dir = dir_with("deep-map.yaml", map.as_bytes());
    assert_refused(dir.path(), "deep-map.yaml", "nested deeper");
}

#[test]
fn hundred_thousand_deep_flow_nesting_is_refused() {
    let seq = "[".repeat(100_000) + &"]".repeat(100_000) + "\n";
    let dir = dir_with("deep-flow.yaml", seq.as_bytes());
    assert_refused(dir.path(), "deep-flow.yaml", "nested deeper");

    let map = "{a: ".repeat(100_000) + "x" + &"}".repeat(100_000) + "\n";
    let dir = dir_with("deep-flow-map.yaml", map.as_bytes());
    assert_refused(dir.path(), "deep-flow-map.yaml", "nested deeper");

    // JSON is parsed by the same layer.
    let json = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
    let dir = dir_with("deep.json", json.as_bytes());
    assert_refused(dir.path(), "deep.json", "nested deeper");
}

/// Runs `command` under a data-segment limit (`ulimit -d`, KiB): an allocation past it aborts
/// the process, which the test then sees as a crash.
fn with_memory_limit(dir: &Path, kib: u64, args: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.current_dir(dir)
        .env_remove("NO_COLOR")
        .arg("-c")
        .arg(format!(
            "ulimit -d {kib} && exec \"$0\" --format json {args}"
        ));
    cmd.arg(BIN);
    cmd
}

#[test]
#[cfg(unix)]
fn a_200_mb_file_is_refused_by_its_size_without_reading_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    // Sparse: 200 MB long, nothing on disk, created in no time.
    let big = fs::File::create(dir.path().join("huge.yaml")).expect("create");
    big.set_len(200 * 1024 * 1024).expect("set_len");
    drop(big);
    assert_refused(dir.path(), "huge.yaml", "209715200 bytes, more than");
    // 40 MiB of heap for the whole run: reading the file (or even its first 32 MiB) would not fit.
    let (out, elapsed) = run_bounded(
        with_memory_limit(dir.path(), 40 * 1024, "."),
        Duration::from_secs(30),
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "crashed under a 40 MiB heap limit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        json["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("209715200 bytes")
    );
    eprintln!("huge.yaml under a 40 MiB heap limit: {elapsed:?}");
}

#[test]
#[cfg(unix)]
fn a_200_mb_stream_on_stdin_is_cut_at_the_limit() {
    // Standard input has no size to look at: it is read up to the limit plus one byte and no
    // further. The writer gets EPIPE when probelint exits; that is expected.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = with_memory_limit(dir.path(), 150 * 1024, "-");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let chunk = "a: 1\n".repeat(200 * 1024); // 1 MB of YAML text
        let mut written = 0usize;
        while written < 200 * 1024 * 1024 {
            if stdin.write_all(chunk.as_bytes()).is_err() {
                break;
            }
            written += chunk.len();
        }
        written
    });
    let out = child.wait_with_output().expect("wait");
    let elapsed = start.elapsed();
    let written = writer.join().expect("writer");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let message = json["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("byte limit"), "{message}");
    assert!(
        written < 200 * 1024 * 1024,
        "probelint read the whole stream"
    );
    eprintln!("200 MB on stdin: refused after {written} bytes in {elapsed:?}");
}

#[test]
fn hundred_thousand_documents_are_refused_at_the_document_limit() {
    let stream = "---\napiVersion: v1\nkind: ConfigMap\n".repeat(100_000);
    let dir = dir_with("many.yaml", stream.as_bytes());
    assert_refused(dir.path(), "many.yaml", "documents in one file");
}

#[test]
fn invalid_utf8_nul_bytes_and_binary_files_are_refused() {
    let dir = dir_with(
        "latin1.yaml",
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: caf\xe9}\n",
    );
    assert_refused(dir.path(), "latin1.yaml", "UTF-8");

    let dir = dir_with("nul.yaml", b"apiVersion: v1\nkind: Pod\x00\n");
    assert_refused(dir.path(), "nul.yaml", "NUL byte");

    // An ELF header, then pseudo-random bytes: what `git add` of a build output looks like.
    let mut binary = b"\x7fELF\x02\x01\x01\x00".to_vec();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..64 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        binary.push(x as u8);
    }
    let dir = dir_with("a.out.yaml", &binary);
    assert_refused(dir.path(), "a.out.yaml", "binary");
}

#[test]
fn a_duplicate_key_is_a_finding_at_the_value_read_and_tab_indentation_an_error() {
    // kubectl reads the last `name`, and so does probelint: the object is judged, and the
    // repeat is a warning at line 5, not a file that could not be read.
    let dir = dir_with(
        "dup.yaml",
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n",
    );
    let run = lint(dir.path(), &["."]);
    assert!(
        array(&run.json, "errors")
            .iter()
            .all(|e| e["file"] != "dup.yaml"),
        "{:#}",
        run.json
    );
    let finding = array(&run.json, "findings")
        .iter()
        .find(|f| f["file"] == "dup.yaml" && f["rule"] == "duplicate-key")
        .expect("a duplicate-key finding")
        .clone();
    assert_eq!(finding["line"], 5, "{finding}");
    assert_eq!(finding["severity"], "warning", "{finding}");
    assert_eq!(finding["object"]["name"], "b", "{finding}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap_or("")
            .contains("(line 4 and line 5): Kubernetes reads only the value at line 5"),
        "{finding}"
    );
    run.assert_still_linted("bad.yaml");

    let dir = dir_with(
        "tabs.yaml",
        b"apiVersion: v1\nkind: Pod\nmetadata:\n\tname: a\n",
    );
    assert_refused(dir.path(), "tabs.yaml", "tabs");
}

#[test]
#[cfg(unix)]
fn symlink_loops_are_reported_not_followed_forever() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    fs::create_dir(dir.path().join("sub")).expect("mkdir");
    // A directory loop, and a file symlink that points at itself.
    std::os::unix::fs::symlink("..", dir.path().join("sub/up")).expect("symlink");
    std::os::unix::fs::symlink("self.yaml", dir.path().join("self.yaml")).expect("symlink");
    let run = lint(dir.path(), &["."]);
    assert_eq!(run.code, 2, "{:#}", run.json);
    let errors = run.json["errors"].to_string();
    assert!(errors.contains("loop"), "{errors}");
    run.assert_still_linted("bad.yaml");
    // Exactly one copy of bad.yaml was linted: the loop was not walked into.
    assert_eq!(
        run.json["summary"]["objects"], 1,
        "{:#}",
        run.json["summary"]
    );

    let run = lint(dir.path(), &["self.yaml", "bad.yaml"]);
    assert_eq!(run.code, 2);
    assert!(!run.error_for("self.yaml").is_empty());
    run.assert_still_linted("bad.yaml");
}

#[test]
#[cfg(target_os = "linux")]
fn kernel_links_are_not_followed_by_a_walk() {
    // `/sys` has files that block and trees that never end; `/dev/zero` never ends either. A
    // walk meets each link, says so, and lints the rest.
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    std::os::unix::fs::symlink("/sys", dir.path().join("sys")).expect("symlink");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.yaml")).expect("symlink");
    std::os::unix::fs::symlink("/proc/self", dir.path().join("me")).expect("symlink");
    let run = lint(dir.path(), &["."]);
    assert_eq!(run.code, 2, "{:#}", run.json);
    for (name, into) in [("sys", "/sys"), ("zero.yaml", "/dev"), ("me", "/proc")] {
        assert!(
            run.error_for(name).contains(&format!(
                "a symbolic link into {into}, which a directory walk does not follow"
            )),
            "{name}: {:#}",
            run.json
        );
    }
    run.assert_still_linted("bad.yaml");
    assert_eq!(
        run.json["summary"]["objects"], 1,
        "{:#}",
        run.json["summary"]
    );
}

#[test]
#[cfg(target_os = "linux")]
fn unreadable_files_are_errors() {
    // Tests run as root here, where `chmod 000` does not stop a read. A symlink to
    // /proc/self/mem is unreadable for everyone: opening it works, reading offset 0 fails (EIO).
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    std::os::unix::fs::symlink("/proc/self/mem", dir.path().join("mem.yaml")).expect("symlink");
    let run = lint(dir.path(), &["mem.yaml", "bad.yaml"]);
    assert_eq!(run.code, 2, "{:#}", run.json);
    assert!(
        run.error_for("mem.yaml").contains("cannot read"),
        "{:#}",
        run.json
    );
    run.assert_still_linted("bad.yaml");
    // A directory walk does not even follow it (kernel_links_are_not_followed_by_a_walk).
    let run = lint(dir.path(), &["."]);
    assert!(
        run.error_for("mem.yaml")
            .contains("a symbolic link into /proc"),
        "{:#}",
        run.json
    );

    // And a file that is unreadable by permission, when the tests do not run as root.
    let locked = dir.path().join("locked.yaml");
    fs::write(&locked, BAD_GPU).expect("write");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).expect("chmod");
    if fs::read(&locked).is_err() {
        let run = lint(dir.path(), &["."]);
        assert!(run.error_for("locked.yaml").contains("permission denied"));
        run.assert_still_linted("bad.yaml");
    }
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o644)).expect("chmod");
}

#[test]
#[cfg(unix)]
fn named_pipes_and_sockets_never_block_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    // A FIFO that no one will ever write to: opening it for reading would block forever.
    let status = Command::new("mkfifo")
        .arg(dir.path().join("pipe.yaml"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let _socket =
        std::os::unix::net::UnixListener::bind(dir.path().join("sock.yaml")).expect("unix socket");

    // Walking a directory only reads regular files.
    let run = lint(dir.path(), &["."]);
    run.assert_still_linted("bad.yaml");
    assert_eq!(run.json["summary"]["files"], 1, "{:#}", run.json);

    // Named explicitly, they are refused with the reason and a way out.
    let run = lint(dir.path(), &["pipe.yaml", "sock.yaml", "bad.yaml"]);
    assert_eq!(run.code, 2, "{:#}", run.json);
    let pipe = run.error_for("pipe.yaml");
    assert!(
        pipe.contains("named pipe") && pipe.contains("probelint -"),
        "{pipe}"
    );
    assert!(run.error_for("sock.yaml").contains("socket"));
    run.assert_still_linted("bad.yaml");

    // `--fix` reads the same way.
    let mut cmd = probelint(dir.path());
    cmd.args(["--fix", "pipe.yaml", "bad.yaml"]);
    let (out, _) = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn everything_hostile_in_one_directory_in_one_bounded_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "bad.yaml", BAD_GPU);
    write(root, "nested/bad.yaml", BAD_GPU);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bomb.yaml", {
            let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
            for (n, p) in [
                ("b", "a"),
                ("c", "b"),
                ("d", "c"),
                ("e", "d"),
                ("f", "e"),
                ("g", "f"),
            ] {
                s.push_str(&format!(
                    "{n}: &{n} [{}]\n",
                    vec![format!("*{p}"); 10].join(", ")
                ));
            }
            s.into_bytes()
        }),
        ("deep.yaml", "- ".repeat(100_000).into_bytes()),
        ("flow.yaml", "[".repeat(100_000).into_bytes()),
        ("docs.yaml", "---\na: 1\n".repeat(100_000).into_bytes()),
        ("latin1.yaml", b"kind: caf\xe9\n".to_vec()),
        ("nul.json", b"{\"a\": \"\x00\"}".to_vec()),
        ("tabs.yaml", b"a:\n\tb: 1\n".to_vec()),
        (
            "truncated.json",
            b"{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"spec\": {".to_vec(),
        ),
        ("utf16.yaml", b"\xff\xfea\x00:\x00 \x001\x00".to_vec()),
    ];
    for (name, content) in &cases {
        fs::write(root.join(name), content).expect("write");
    }
    let huge = fs::File::create(root.join("huge.yaml")).expect("create");
    huge.set_len(200 * 1024 * 1024).expect("set_len");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(".", root.join("nested/loop")).expect("symlink");
        Command::new("mkfifo")
            .arg(root.join("fifo.yaml"))
            .status()
            .expect("mkfifo");
    }
    let run = lint(root, &["."]);
    assert_eq!(run.code, 2);
    for (name, _) in &cases {
        assert!(!run.error_for(name).is_empty());
    }
    assert!(!run.error_for("huge.yaml").is_empty());
    run.assert_still_linted("bad.yaml");
    run.assert_still_linted("nested/bad.yaml");
    eprintln!("all hostile files in one run: {:?}", run.elapsed);
}

/// The custom JSON Schema rules of a policy never fetch anything: `$ref`s to a URL (here a
/// listener on loopback that records connections) or a file are refused when the policy loads.
#[test]
fn custom_rule_schemas_never_fetch_remote_or_file_refs() {
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "bad.yaml", BAD_GPU);
    fs::write(dir.path().join("defs.json"), r#"{"type": "object"}"#).expect("write");
    let schemas = [
        format!("{{$ref: 'http://127.0.0.1:{port}/schema.json'}}"),
        format!("{{$schema: 'http://127.0.0.1:{port}/meta.json', type: object}}"),
        format!("{{$id: 'http://127.0.0.1:{port}/root.json', $ref: 'other.json'}}"),
        format!("{{properties: {{a: {{$ref: 'http://127.0.0.1:{port}/a.json#/x'}}}}}}"),
        "{$ref: 'defs.json'}".to_owned(),
        format!("{{$ref: 'file://{}/defs.json'}}", dir.path().display()),
    ];
    for schema in &schemas {
        let policy = format!(
            "customRules:\n  - id: no-fetch\n    severity: error\n    target: object\n    message: m\n    schema: {schema}\n"
        );
        fs::write(dir.path().join(".probelint.yaml"), policy).expect("write");
        let mut cmd = probelint(dir.path());
        cmd.arg("bad.yaml");
        let (out, _) = run_bounded(cmd, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(
            out.status.code(),
            Some(0),
            "{schema}: a schema with an unresolvable $ref was accepted"
        );
        assert!(
            stderr.contains("customRules[0].schema"),
            "{schema}: {stderr}"
        );
        assert!(
            listener.accept().is_err(),
            "{schema}: probelint connected to the URL in the schema"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// `--fix` interrupted

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// SIGKILLs `probelint --fix` at spread-out moments of its run over a copy of the real corpus,
/// again and again. After every kill each manifest is byte-for-byte either the original or the
/// complete fixed version (which parses); temporary files (left by a
/// kill between write and rename) never carry a manifest extension, so no later run reads them.
#[test]
#[cfg(unix)]
fn fix_killed_mid_run_never_leaves_a_half_written_file() {
    let corpus = probelint_testkit::corpus::real_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let original = work.path().join("original");
    copy_tree(&corpus, &original);
    let manifests: Vec<PathBuf> = files(&original)
        .into_iter()
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .map(|p| p.strip_prefix(&original).expect("prefix").to_path_buf())
        .collect();
    assert!(manifests.len() >= 100);

    // The complete result, from an uninterrupted run.
    let complete = work.path().join("complete");
    copy_tree(&original, &complete);
    let mut cmd = probelint(&complete);
    cmd.args(["--fix", "."]);
    let (_, full_run) = run_bounded(cmd, Duration::from_secs(60));
    let changed: Vec<&PathBuf> = manifests
        .iter()
        .filter(|m| fs::read(original.join(m)).ok() != fs::read(complete.join(m)).ok())
        .collect();
    assert!(changed.len() >= 10, "only {} files fixed", changed.len());
    // Every fixed file parses and lints.
    let run = lint(&complete, &["."]);
    assert!(run.json["summary"]["files"].as_u64().unwrap_or(0) >= 100);
    for error in array(&run.json, "errors") {
        let file = error["file"].as_str().unwrap_or("");
        assert!(
            !changed
                .iter()
                .any(|m| file.ends_with(&*m.to_string_lossy())),
            "a fixed file does not parse: {error}"
        );
    }

    const ITERATIONS: u32 = 24;
    let mut torn = 0;
    let mut partial_runs = 0;
    for i in 0..ITERATIONS {
        let scratch = work.path().join(format!("run{i}"));
        copy_tree(&original, &scratch);
        // Spread the kills over the whole run, startup included.
        let delay = full_run.mul_f64(f64::from(i) / f64::from(ITERATIONS - 4));
        let mut child = Command::new(BIN)
            .current_dir(&scratch)
            .args(["--format", "json", "--fix", "."])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let mut fixed_here = 0;
        for m in &manifests {
            let now = fs::read(scratch.join(m)).expect("the file still exists");
            let before = fs::read(original.join(m)).expect("original");
            let after = fs::read(complete.join(m)).expect("complete");
            if now == after && now != before {
                fixed_here += 1;
            } else if now != before {
                torn += 1;
                eprintln!(
                    "iteration {i}: {} is neither the original nor the fixed file ({} bytes, original {}, fixed {})",
                    m.display(),
                    now.len(),
                    before.len(),
                    after.len()
                );
            }
        }
        if fixed_here > 0 && fixed_here < changed.len() {
            partial_runs += 1;
        }
        // Leftover temporary files are hidden and never look like manifests.
        for leftover in files(&scratch) {
            let name = leftover.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with(".probelint-") {
                assert!(name.ends_with(".tmp"), "{name}");
            }
        }
        fs::remove_dir_all(&scratch).expect("cleanup");
    }
    assert_eq!(torn, 0, "files were left half-written");
    eprintln!(
        "--fix killed {ITERATIONS} times over {} files ({} fixed by a full run of {full_run:?}); \
         {partial_runs} kills landed while files were being written",
        manifests.len(),
        changed.len()
    );
}

// ---------------------------------------------------------------------------------------------
// Fuzz regressions

#[path = "../../fuzz/checks.rs"]
mod fuzz_checks;

/// Replays every saved fuzz crash input (`tests/data/fuzz-regressions/<target>/`) and every fuzz
/// seed (`fuzz/seeds/<target>/`) through the checks the fuzz targets run.
#[test]
fn fuzz_regressions_stay_fixed() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    type Check = fn(&[u8]);
    let targets: [(&str, Check); 4] = [
        ("yaml_parse", fuzz_checks::yaml_parse),
        ("engine_json", fuzz_checks::engine_json),
        ("yaml_fix", fuzz_checks::yaml_fix),
        ("yaml_patch", fuzz_checks::yaml_patch),
    ];
    let mut replayed = 0;
    let mut failed = Vec::new();
    for (target, check) in targets {
        for dir in [
            manifest.join("tests/data/fuzz-regressions").join(target),
            manifest.join("../fuzz/seeds").join(target),
        ] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.expect("entry").path();
                let data = fs::read(&path).expect("read");
                replayed += 1;
                if std::panic::catch_unwind(|| check(&data)).is_err() {
                    failed.push(path.display().to_string());
                }
            }
        }
    }
    assert!(replayed >= 20, "only {replayed} inputs found");
    assert!(failed.is_empty(), "invariants broken by {failed:#?}");
}
