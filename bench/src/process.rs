//! Running a command and measuring it: wall time and the child's own peak RSS (`wait4`), so
//! each run is measured alone, not the maximum over every child so far.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One run of a command.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub wall: Duration,
    /// Peak resident set size of the child, in KiB.
    pub max_rss_kib: u64,
    /// Exit code (`-1` when killed by a signal).
    pub code: i32,
}

/// Runs `program args` with stdin and stdout on `/dev/null`, stderr discarded, and waits for it.
pub fn run(program: &str, args: &[&str]) -> Result<Run, String> {
    let start = Instant::now();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env("NO_COLOR", "1")
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain data that wait4 fills in; `pid` is our own child, which
    // `std::process::Child` never waits for since we do not call `wait` on it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = loop {
        // SAFETY: valid pointers to locals, see above.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break r;
    };
    let wall = start.elapsed();
    if reaped != pid {
        return Err(format!(
            "wait4 on {program}: {}",
            std::io::Error::last_os_error()
        ));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok(Run {
        wall,
        max_rss_kib: usage.ru_maxrss.max(0) as u64,
        code,
    })
}

/// Runs a command and fails unless its exit code is one of `ok`; on failure, runs it once more
/// with its output captured, for the error message.
pub fn run_checked(program: &str, args: &[&str], ok: &[i32]) -> Result<Run, String> {
    let r = run(program, args)?;
    if ok.contains(&r.code) {
        return Ok(r);
    }
    let out = Command::new(program).args(args).output();
    let detail = match out {
        Ok(o) => String::from_utf8_lossy(&o.stderr)
            .chars()
            .take(2_000)
            .collect::<String>(),
        Err(e) => e.to_string(),
    };
    Err(format!(
        "{program} {} exited with {} (expected one of {ok:?}): {detail}",
        args.join(" "),
        r.code
    ))
}
