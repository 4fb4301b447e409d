//! Worker processes: spawning in their own process group, identifying them by pid AND start
//! time, signalling the whole group.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Start time of a process in clock ticks since boot (field 22 of /proc/<pid>/stat). With the
/// pid it identifies a process: a pid reused by another process has another start time.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Signal the worker's whole process group (agents spawn tools; those must stop too).
pub fn signal_group(pgid: u32, sig: Signal) {
    if pgid <= 1 {
        return;
    }
    if let Err(e) = killpg(Pid::from_raw(pgid as i32), sig) {
        if e != nix::errno::Errno::ESRCH {
            tracing::warn!(pgid, ?sig, error = %e, "cannot signal worker process group");
        }
    }
}

/// Kill a worker left by a previous daemon, but only if pid and start time still match.
pub fn kill_orphan(pid: u32, expected_start: u64) -> bool {
    match start_time(pid) {
        Some(st) if st == expected_start => {
            signal_group(pid, Signal::SIGKILL);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_readable_and_stable() {
        let me = std::process::id();
        let a = start_time(me).unwrap();
        assert_eq!(Some(a), start_time(me));
        assert!(
            !kill_orphan(me, a + 1),
            "a different start time must never be killed"
        );
    }
}
