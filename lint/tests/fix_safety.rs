//! No invocation of the CLI loses a file: a report never lands on a manifest, `--fix` never
//! overwrites an edit made while it runs, never rewrites a read-only file or takes one from its
//! owner, keeps every file's mode and line endings, and one file it cannot write does not stop
//! the others or the report. Run against the real `probelint` binary.
#![cfg(unix)]

mod common;

use common::{BAD_GPU, BIN, UNPROBED_GPU, array, json_stdout, probelint, write};
use serde_json::Value;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A user that owns nothing here, for files that belong to someone else.
const OTHER: u32 = 12345;

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// Whether this process may give files away (root, as the tests run here).
fn can_chown(dir: &Path) -> bool {
    let probe = dir.join(".chown-probe");
    fs::write(&probe, "").expect("write");
    let ok = std::os::unix::fs::chown(&probe, Some(OTHER), Some(OTHER)).is_ok();
    fs::remove_file(&probe).expect("rm");
    ok
}

/// Every file under `dir` (no directories), relative, sorted; temporary files included.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            } else {
                out.push(
                    path.strip_prefix(dir)
                        .expect("prefix")
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out.sort();
    out
}

/// The error the JSON report has for `file`, or "" when it has none.
fn error_for(json: &Value, file: &str) -> String {
    array(json, "errors")
        .iter()
        .filter(|e| e["file"] == file)
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("; ")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// ---------------------------------------------------------------------------------------------
// --output and standard output

#[test]
fn a_report_is_never_written_over_a_file_the_run_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "manifests/app.yaml", BAD_GPU);
    write(root, "manifests/deeper/gpu.yaml", UNPROBED_GPU);
    write(root, "other.yaml", BAD_GPU);
    std::os::unix::fs::symlink("manifests/app.yaml", root.join("link.yaml")).expect("symlink");
    fs::hard_link(root.join("manifests/app.yaml"), root.join("hard.json")).expect("hard link");
    write(root, ".probelint.yaml", "rules: {}\n");
    let policy = fs::read(root.join(".probelint.yaml")).expect("read");

    // (args, what the error names as the input)
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "manifests/app.yaml",
                "-f",
                "json",
                "-o",
                "manifests/app.yaml",
            ],
            "manifests/app.yaml",
        ),
        (
            &["other.yaml", "-f", "sarif", "-o", "./other.yaml"],
            "other.yaml",
        ),
        (
            &["manifests/app.yaml", "-f", "json", "-o", "link.yaml"],
            "manifests/app.yaml",
        ),
        (
            &["link.yaml", "-f", "json", "-o", "manifests/app.yaml"],
            "link.yaml",
        ),
        (
            &["manifests/app.yaml", "-f", "json", "-o", "hard.json"],
            "manifests/app.yaml",
        ),
        (
            &[
                "manifests",
                "-f",
                "junit",
                "-o",
                "manifests/deeper/gpu.yaml",
            ],
            "manifests/deeper/gpu.yaml",
        ),
        (
            &[
                "--fix",
                "manifests",
                "-f",
                "json",
                "-o",
                "manifests/app.yaml",
            ],
            "manifests/app.yaml",
        ),
        (
            &[
                "--fix",
                "manifests",
                "other.yaml",
                "-f",
                "json",
                "-o",
                "r.json",
                "-f",
                "sarif",
                "-o",
                "other.yaml",
            ],
            "other.yaml",
        ),
        (
            &["manifests", "-f", "json", "-o", ".probelint.yaml"],
            ".probelint.yaml",
        ),
    ];
    let before = listing(root);
    let originals: Vec<(String, Vec<u8>)> = before
        .iter()
        .map(|f| (f.clone(), fs::read(root.join(f)).expect("read")))
        .collect();
    for (args, input) in cases {
        let out = probelint()
            .current_dir(root)
            .args(*args)
            .output()
            .expect("run");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("the same file as {input}, which this run reads"))
                && err.contains("Nothing was written"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("fixed["), "{args:?} fixed something: {err}");
        for (file, bytes) in &originals {
            assert_eq!(
                &fs::read(root.join(file)).expect("read"),
                bytes,
                "{args:?} changed {file}"
            );
        }
        assert_eq!(listing(root), before, "{args:?} left a file behind");
    }
    assert_eq!(
        fs::read(root.join(".probelint.yaml")).expect("read"),
        policy
    );

    // Standard output redirected into an input (`probelint x.yaml >> x.yaml`).
    for args in [
        &["other.yaml"][..],
        &["--fix", "--dry-run", "other.yaml"],
        &["."],
    ] {
        let into = fs::OpenOptions::new()
            .append(true)
            .open(root.join("other.yaml"))
            .expect("open");
        let out = Command::new(BIN)
            .current_dir(root)
            .args(args)
            .stdout(into)
            .output()
            .expect("run");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("standard output is redirected into other.yaml"),
            "{args:?}: {err}"
        );
        assert_eq!(
            fs::read_to_string(root.join("other.yaml")).expect("read"),
            BAD_GPU
        );
    }

    // What is still allowed: a new file, a report next to the inputs, a device, twice.
    let out = probelint()
        .current_dir(root)
        .args([
            "manifests",
            "-f",
            "json",
            "-o",
            "report.json",
            "-f",
            "sarif",
            "-o",
            "/dev/null",
        ])
        .args(["-f", "junit", "-o", "/dev/null"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value =
        serde_json::from_slice(&fs::read(root.join("report.json")).expect("report")).expect("json");
    assert_eq!(report["summary"]["files"], 2);

    // Two reports into one file, a directory, a missing directory: refused up front too.
    for (args, says) in [
        (
            &[
                "manifests",
                "-f",
                "json",
                "-o",
                "r.json",
                "-f",
                "sarif",
                "-o",
                "./r.json",
            ][..],
            "are the same file",
        ),
        (
            &["manifests", "-f", "json", "-o", "manifests"],
            "is a directory",
        ),
        (
            &["--fix", "manifests", "-f", "json", "-o", "nowhere/r.json"],
            "does not exist",
        ),
    ] {
        let out = probelint()
            .current_dir(root)
            .args(args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(!root.join("r.json").exists());
        assert_eq!(
            fs::read_to_string(root.join("manifests/app.yaml")).expect("read"),
            BAD_GPU,
            "{args:?}: --fix ran before the output was refused"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Files --fix cannot write

/// `probelint --fix -f json -o REPORT .` in `dir`, as `uid` when given; the JSON report.
fn fix_as(dir: &Path, report: &Path, uid: Option<u32>) -> (Output, Value) {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir)
        .args(["--fix", "-f", "json", "-o"])
        .arg(report)
        .arg(".")
        .stdin(Stdio::null());
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let out = cmd.output().expect("run");
    let json = serde_json::from_slice(&fs::read(report).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", stderr(&out)));
    (out, json)
}

#[test]
fn one_file_that_cannot_be_written_does_not_stop_the_others_or_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    let out_dir = dir.path().join("out");
    fs::create_dir_all(&out_dir).expect("mkdir");
    chmod(dir.path(), 0o755);
    chmod(&out_dir, 0o777);
    write(&root, "a-good.yaml", BAD_GPU);
    write(&root, "read-only.yaml", BAD_GPU);
    write(&root, "read-only-dir/gpu.yaml", BAD_GPU);
    write(&root, "z-good.yaml", UNPROBED_GPU);
    chmod(&root.join("read-only.yaml"), 0o444);
    // With everything this user may not write, by the kernel's rules, when not root.
    let root_user = can_chown(&root);
    let unwritable: &[&str] = if root_user {
        write(&root, "theirs.yaml", BAD_GPU);
        write(&root, "shared.yaml", BAD_GPU);
        write(&root, "locked/gpu.yaml", BAD_GPU);
        for path in [
            root.clone(),
            root.join("a-good.yaml"),
            root.join("z-good.yaml"),
            root.join("read-only.yaml"),
            root.join("read-only-dir"),
            root.join("read-only-dir/gpu.yaml"),
            root.join("locked/gpu.yaml"),
        ] {
            std::os::unix::fs::chown(&path, Some(OTHER), Some(OTHER)).expect("chown");
        }
        // Root's: one the user may not write, one the user may write but not keep root's.
        chmod(&root.join("theirs.yaml"), 0o644);
        chmod(&root.join("shared.yaml"), 0o666);
        chmod(&root.join("locked"), 0o755);
        &["theirs.yaml", "shared.yaml", "locked/gpu.yaml"]
    } else {
        &[]
    };
    chmod(&root.join("read-only-dir"), 0o555);
    let report = out_dir.join("report.json");
    let (out, json) = fix_as(&root, &report, root_user.then_some(OTHER));
    chmod(&root.join("read-only-dir"), 0o755);
    let err = stderr(&out);

    assert_eq!(out.status.code(), Some(2), "{err}");
    for good in ["a-good.yaml", "z-good.yaml"] {
        assert!(
            err.contains(&format!("fixed[gpu-startup-probe-missing]: {good}")),
            "{err}"
        );
        assert_ne!(
            fs::read_to_string(root.join(good)).expect("read"),
            "",
            "{good}"
        );
        assert!(
            fs::read_to_string(root.join(good))
                .expect("read")
                .contains("startupProbe"),
            "{good} was not fixed"
        );
    }
    let mut refused = vec!["read-only.yaml", "read-only-dir/gpu.yaml"];
    refused.extend(unwritable);
    for file in &refused {
        assert_eq!(
            fs::read_to_string(root.join(file)).expect("read"),
            BAD_GPU,
            "{file} was rewritten"
        );
        let message = error_for(&json, file);
        assert!(
            message.starts_with("not fixed (file left unchanged): "),
            "{file}: {message:?}"
        );
        // What stays is reported too: the file's findings, from the text as it is.
        assert!(
            array(&json, "findings").iter().any(|f| f["file"] == *file),
            "{file}: no findings reported"
        );
    }
    let says = |file: &str, what: &str| {
        let message = error_for(&json, file);
        assert!(
            message.contains(what),
            "{file}: {message:?} should say {what:?}"
        );
    };
    says("read-only.yaml", "read-only (mode 0444)");
    says("read-only-dir/gpu.yaml", "read-only (mode 0555)");
    if root_user {
        says("theirs.yaml", "Permission denied (os error 13)");
        says("shared.yaml", "belongs to uid 0 gid 0");
        says("shared.yaml", "Operation not permitted (os error 1)");
        says("locked/gpu.yaml", "cannot create a temporary file in");
        says("locked/gpu.yaml", "Permission denied (os error 13)");
    }
    // The good files' remaining findings are there, and nothing was left behind.
    assert_eq!(
        json["summary"]["files"].as_u64(),
        Some(4 + unwritable.len() as u64)
    );
    assert!(
        !listing(&root).iter().any(|f| f.contains(".probelint-")),
        "{:?}",
        listing(&root)
    );
}

// ---------------------------------------------------------------------------------------------
// What --fix keeps

#[test]
fn fix_keeps_mode_owner_and_line_endings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "mode.yaml", UNPROBED_GPU);
    chmod(&root.join("mode.yaml"), 0o640);
    write(root, "owner.yaml", UNPROBED_GPU);
    let owned = can_chown(root);
    if owned {
        std::os::unix::fs::chown(root.join("owner.yaml"), Some(OTHER), Some(OTHER + 1))
            .expect("chown");
    }
    write(root, "cr.yaml", UNPROBED_GPU.replace('\n', "\r"));
    write(root, "crlf.yaml", UNPROBED_GPU.replace('\n', "\r\n"));
    write(root, "read-only.yaml", UNPROBED_GPU);
    chmod(&root.join("read-only.yaml"), 0o444);

    let out = probelint()
        .current_dir(root)
        .args(["--fix", "-f", "json", "."])
        .output()
        .expect("run");
    let json = json_stdout(&out);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "the read-only file: {err}");
    for file in ["mode.yaml", "owner.yaml", "cr.yaml", "crlf.yaml"] {
        assert!(
            err.contains(&format!("fixed[gpu-startup-probe-missing]: {file}:14:9")),
            "{file}: {err}"
        );
        assert_eq!(error_for(&json, file), "", "{file}");
        assert!(
            !array(&json, "findings")
                .iter()
                .any(|f| f["file"] == file && f["rule"] == "gpu-startup-probe-missing"),
            "{file} still lacks its startupProbe"
        );
    }
    let meta = |file: &str| fs::metadata(root.join(file)).expect("stat");
    assert_eq!(meta("mode.yaml").permissions().mode() & 0o7777, 0o640);
    if owned {
        assert_eq!(
            (meta("owner.yaml").uid(), meta("owner.yaml").gid()),
            (OTHER, OTHER + 1)
        );
    } else {
        eprintln!("not root: the owner part of this test needs to chown to uid {OTHER}");
    }
    let lf = fs::read_to_string(root.join("mode.yaml")).expect("read");
    assert_eq!(
        fs::read_to_string(root.join("owner.yaml")).expect("read"),
        lf
    );
    // Line endings: the same fix, with each file's own breaks and no other.
    let cr = fs::read_to_string(root.join("cr.yaml")).expect("read");
    assert!(!cr.contains('\n'), "a \\n in the CR-only file:\n{cr:?}");
    assert_eq!(cr.replace('\r', "\n"), lf);
    let crlf = fs::read_to_string(root.join("crlf.yaml")).expect("read");
    assert_eq!(
        crlf.matches("\r\n").count(),
        crlf.matches('\n').count(),
        "{crlf:?}"
    );
    assert_eq!(crlf.replace("\r\n", "\n"), lf);
    // Refused, not rewritten, and said so.
    assert_eq!(
        fs::read_to_string(root.join("read-only.yaml")).expect("read"),
        UNPROBED_GPU
    );
    assert!(error_for(&json, "read-only.yaml").contains("read-only (mode 0444)"));
    assert_eq!(meta("read-only.yaml").permissions().mode() & 0o7777, 0o444);

    // The human output quotes the right line of a CR-only file.
    write(root, "cr2.yaml", UNPROBED_GPU.replace('\n', "\r"));
    let out = probelint()
        .current_dir(root)
        .arg("cr2.yaml")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("14 |         - name: server"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// An edit made while --fix runs

/// A Pod with `n` fixable GPU containers: enough work for `--fix` that a file read at its start
/// is written a good while later.
fn many_containers(n: usize) -> String {
    let mut text =
        String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\nspec:\n  containers:\n");
    for i in 0..n {
        text.push_str(&format!(
            "    - name: c{i}\n      image: vllm/vllm-openai:v0.6.3\n      resources:\n        \
             limits:\n          nvidia.com/gpu: 1\n      readinessProbe:\n        tcpSocket:\n          \
             port: 8000\n"
        ));
    }
    text
}

#[derive(Debug, Clone, Copy)]
enum Edit {
    /// An editor writing into the file.
    Append,
    /// An editor saving by renaming a new file over it.
    Replace,
    Delete,
}

const EDITED: &str = "# edited while probelint ran\n";

fn edit(path: &Path, how: Edit) {
    match how {
        Edit::Append => {
            use std::io::Write;
            fs::OpenOptions::new()
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(EDITED.as_bytes()))
                .expect("append");
        }
        Edit::Replace => {
            let new = path.with_extension("saving");
            fs::write(&new, format!("{BAD_GPU}{EDITED}")).expect("write");
            fs::rename(&new, path).expect("rename");
        }
        Edit::Delete => fs::remove_file(path).expect("rm"),
    }
}

/// Runs `--fix` over `target.yaml` and a big file, and edits `target.yaml` as soon as probelint
/// has opened it to read it (inotify), so the edit lands while probelint is still working on the
/// big file, before it writes `target.yaml`. Returns whether probelint saw the edit and refused.
fn fix_while_editing(how: Edit, big: &str) -> bool {
    use notify::{EventKind, RecursiveMode, Watcher, event::AccessKind};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "big.yaml", big);
    write(root, "target.yaml", BAD_GPU);
    let target = root.join("target.yaml");
    let (opened, on_open) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && matches!(event.kind, EventKind::Access(AccessKind::Open(_)))
        {
            let _ = opened.send(());
        }
    })
    .expect("inotify");
    watcher
        .watch(&target, RecursiveMode::NonRecursive)
        .expect("watch");
    let report = root.join("report.txt");
    let child = Command::new(BIN)
        .current_dir(root)
        .args([
            "--fix",
            "-f",
            "json",
            "-o",
            "report.txt",
            "big.yaml",
            "target.yaml",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let edited = on_open
        .recv_timeout(std::time::Duration::from_secs(120))
        .is_ok();
    assert!(edited, "probelint never opened target.yaml");
    edit(&target, how);
    let out = child.wait_with_output().expect("wait");
    drop(watcher);
    let err = stderr(&out);
    let json: Value = serde_json::from_slice(&fs::read(&report).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no report ({e}): {err}"));

    // Whenever the edit landed, it is there now and the fix did not replace it.
    let now = fs::read_to_string(&target).ok();
    match how {
        Edit::Append => {
            let now = now.expect("target.yaml still exists");
            assert!(now.ends_with(EDITED), "{how:?}: the edit was lost:\n{now}");
        }
        Edit::Replace => {
            let now = now.expect("target.yaml still exists");
            assert_eq!(
                now,
                format!("{BAD_GPU}{EDITED}"),
                "{how:?}: the edit was lost"
            );
        }
        Edit::Delete => assert!(
            now.is_none(),
            "{how:?}: the deleted file came back:\n{now:?}"
        ),
    }
    // The big file is fixed whatever happened to the other.
    assert!(
        fs::read_to_string(root.join("big.yaml"))
            .expect("read")
            .contains("startupProbe"),
        "{how:?}: big.yaml not fixed: {err}"
    );
    let message = error_for(&json, "target.yaml");
    let refused = !message.is_empty();
    if refused {
        assert_eq!(out.status.code(), Some(2), "{err}");
        let why = match how {
            Edit::Delete => "no longer exists",
            Edit::Append | Edit::Replace => "changed on disk after probelint read it",
        };
        assert!(message.contains(why), "{how:?}: {message:?}");
        assert!(
            !err.contains("fixed[gpu-startup-probe-missing]: target.yaml"),
            "{err}"
        );
    }
    assert!(
        !listing(root).iter().any(|f| f.contains(".probelint-")),
        "{:?}",
        listing(root)
    );
    refused
}

/// A real race, made to land: the edit is made right after probelint opens the file (inotify),
/// while a big file keeps probelint from writing for a while. Whether it lands before the last
/// check is up to the scheduler, so each kind of edit is retried (bounded) until one did; every
/// run, whichever way it went, must keep the edit.
#[test]
#[cfg(target_os = "linux")]
fn an_edit_made_while_fix_runs_is_never_overwritten() {
    let big = many_containers(400);
    for how in [Edit::Append, Edit::Replace, Edit::Delete] {
        let attempts = 8;
        let hit = (0..attempts).any(|_| fix_while_editing(how, &big));
        assert!(
            hit,
            "{how:?}: in {attempts} runs the edit never landed while probelint ran"
        );
    }
}

/// Files to fix named twice (a symlink and its target) are written once, not refused as
/// changed by the first write.
#[test]
fn a_file_named_twice_is_fixed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "app.yaml", UNPROBED_GPU);
    std::os::unix::fs::symlink("app.yaml", root.join("link.yaml")).expect("symlink");
    let out = probelint()
        .current_dir(root)
        .args(["--fix", "-f", "json", "app.yaml", "link.yaml"])
        .output()
        .expect("run");
    let json = json_stdout(&out);
    assert!(
        error_for(&json, "link.yaml").contains("the same file as app.yaml, which was fixed"),
        "{json:#}"
    );
    let fixed = fs::read_to_string(root.join("app.yaml")).expect("read");
    assert_eq!(fixed.matches("startupProbe:").count(), 1, "{fixed}");
    assert!(
        fs::symlink_metadata(root.join("link.yaml"))
            .expect("stat")
            .is_symlink()
    );
}
