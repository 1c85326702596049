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

/// The CPU time (user + system, all threads) that process `pid` has used so far, from
/// `/proc/PID/stat`; `None` when it cannot be read (the process is gone, or not Linux).
/// Resolution: one clock tick (10 ms at the usual 100 Hz), so read it over seconds of work.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: fields are counted
    // after its closing parenthesis, where field 3 (the state) comes first.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / ticks as f64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_time_of_this_process_grows_with_work() {
        let before = cpu_time(std::process::id()).expect("own /proc/PID/stat");
        // Work until the clock moves (one tick of CPU), or give up after a long while.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after <= before && start.elapsed() < Duration::from_secs(30) {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            after = cpu_time(std::process::id()).expect("own /proc/PID/stat");
        }
        assert!(after > before, "{before:?} -> {after:?}");
        assert_eq!(cpu_time(u32::MAX), None);
    }
}
