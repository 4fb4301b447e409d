//! Worker processes: spawning in their own process group, identifying them by pid AND start
//! time, signalling the whole group.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Start time of a process in clock ticks since boot (field 22 of /proc/<pid>/stat). With the
/// pid it identifies a process: a pid reused by another process has another start time.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The lifelines of the attempts this process holds under crew's init, by the pid crewd
/// knows them by (`GroupGuard`): a signal for one goes on its lifeline, so it reaches the
/// attempt's processes wherever they are — in a box, the group of that pid is bubblewrap's
/// alone, whose death would end the box without the signal reaching the program.
static LIFELINES: Mutex<BTreeMap<u32, crew_box::spawn::Signals>> = Mutex::new(BTreeMap::new());

fn lifelines() -> std::sync::MutexGuard<'static, BTreeMap<u32, crew_box::spawn::Signals>> {
    LIFELINES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Signal the worker's whole process group (agents spawn tools; those must stop too): on its
/// lifeline when it runs under crew's init (which passes the signal on), else to the group.
pub fn signal_group(pgid: u32, sig: Signal) {
    let line = lifelines().get(&pgid).cloned();
    if line.is_some_and(|l| l.send(sig as i32)) || pgid <= 1 {
        return;
    }
    if let Err(e) = killpg(Pid::from_raw(pgid as i32), sig) {
        if e != nix::errno::Errno::ESRCH {
            tracing::warn!(pgid, ?sig, error = %e, "cannot signal worker process group");
        }
    }
}

/// Kills the worker's process group when dropped: at the end of supervision (tools the agent
/// started go too), and on any early way out, a panic included. A worker under crew's init
/// (`crew_box`) is killed by cutting its lifeline: the init kills everything it holds, reaps
/// it and exits (a SIGKILL of the init would orphan what it holds).
pub struct GroupGuard {
    pub pgid: u32,
    lifeline: Option<crew_box::spawn::Lifeline>,
}

impl GroupGuard {
    pub fn new(pgid: u32, lifeline: Option<crew_box::spawn::Lifeline>) -> GroupGuard {
        if let Some(l) = &lifeline {
            lifelines().insert(pgid, l.signals());
        }
        GroupGuard { pgid, lifeline }
    }

    /// Ask the attempt to stop (SIGTERM): on its lifeline under crew's init (registered in
    /// `new`), which reaches processes in a box too, else to the group.
    pub fn terminate(&self) {
        signal_group(self.pgid, Signal::SIGTERM);
    }

    /// End every process of the attempt.
    pub fn kill(&mut self) {
        match self.lifeline.as_mut() {
            Some(l) => l.cut(),
            None => signal_group(self.pgid, Signal::SIGKILL),
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        if self.lifeline.is_some() {
            lifelines().remove(&self.pgid);
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

/// Environment variables every worker gets; the tools it starts inherit them.
pub const ENV_DAEMON_PID: &str = "CREW_DAEMON_PID";
pub const ENV_RUN_ID: &str = "CREW_RUN_ID";
pub const ENV_TASK_ID: &str = "CREW_TASK_ID";
pub const ENV_ATTEMPT: &str = "CREW_ATTEMPT";

/// A process carrying a worker's identity in its environment: a worker, or a tool it started
/// (possibly in a session of its own, out of reach of the group signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    pub pid: u32,
    pub start: u64,
    pub daemon_pid: Option<u32>,
    pub run_id: String,
    pub task_id: String,
    pub attempt: Option<u32>,
}

/// The worker identity in a `/proc/<pid>/environ` (NUL-separated `K=V`), if there is one.
fn parse_tag(pid: u32, start: u64, environ: &[u8]) -> Option<Tagged> {
    let (mut daemon_pid, mut run_id, mut task_id, mut attempt) = (None, None, None, None);
    for var in environ.split(|b| *b == 0) {
        let Ok(var) = std::str::from_utf8(var) else {
            continue;
        };
        let Some((k, v)) = var.split_once('=') else {
            continue;
        };
        match k {
            ENV_DAEMON_PID => daemon_pid = v.parse().ok(),
            ENV_RUN_ID => run_id = Some(v.to_string()),
            ENV_TASK_ID => task_id = Some(v.to_string()),
            ENV_ATTEMPT => attempt = v.parse().ok(),
            _ => {}
        }
    }
    Some(Tagged {
        pid,
        start,
        daemon_pid,
        run_id: run_id?,
        task_id: task_id?,
        attempt,
    })
}

/// Every process of this user that carries a worker identity. Processes that cannot be read
/// (another user's, gone meanwhile) are skipped.
pub fn tagged_processes() -> Vec<Tagged> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            parse_tag(pid, start_time(pid)?, &environ)
        })
        .collect()
}

/// Kill a tagged process (and its group, if it leads one) if it is still the same process.
pub fn kill_tagged(t: &Tagged) -> bool {
    if start_time(t.pid) != Some(t.start) {
        return false;
    }
    let pid = Pid::from_raw(t.pid as i32);
    if nix::unistd::getpgid(Some(pid)).ok() == Some(pid) {
        signal_group(t.pid, Signal::SIGKILL);
    }
    nix::sys::signal::kill(pid, Signal::SIGKILL).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// crewd signals an attempt by its pid (its shutdown does); under crew's init the signal
    /// goes on the lifeline, and to the group again once the attempt is over.
    #[test]
    fn a_signal_by_pid_goes_on_the_attempts_lifeline() {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        let pgid = u32::MAX - 11;
        let lifeline = crew_box::spawn::Lifeline::new().unwrap();
        // SAFETY: a second handle on the read end, never closed (ManuallyDrop); the guard's
        // lifeline owns it and outlives every read below.
        let mut read =
            std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(lifeline.read_fd()) });
        let guard = GroupGuard::new(pgid, Some(lifeline));
        signal_group(pgid, Signal::SIGTERM);
        guard.terminate();
        let mut got = [0u8; 2];
        read.read_exact(&mut got).unwrap();
        assert_eq!(got, [Signal::SIGTERM as u8; 2]);
        drop(guard);
        assert!(
            !lifelines().contains_key(&pgid),
            "forgotten with its attempt"
        );
    }

    #[test]
    fn worker_identity_from_the_environment() {
        let env = |vars: &[&str]| vars.join("\0").into_bytes();
        // environ, then (daemon pid, run, task, attempt) when it is a worker's.
        type Want = Option<(Option<u32>, &'static str, &'static str, Option<u32>)>;
        let table: Vec<(Vec<u8>, Want)> = vec![
            (
                env(&[
                    "PATH=/bin",
                    "CREW_DAEMON_PID=42",
                    "CREW_RUN_ID=team_1",
                    "CREW_TASK_ID=01_a",
                    "CREW_ATTEMPT=2",
                ]),
                Some((Some(42), "team_1", "01_a", Some(2))),
            ),
            (
                env(&["CREW_RUN_ID=team_1", "CREW_TASK_ID=01_a"]),
                Some((None, "team_1", "01_a", None)),
            ),
            (env(&["CREW_RUN_ID=team_1"]), None),
            (env(&["PATH=/bin", "HOME=/h"]), None),
            (
                b"\xff\xfe\0CREW_TASK_ID=x\0CREW_RUN_ID=r".to_vec(),
                Some((None, "r", "x", None)),
            ),
            (Vec::new(), None),
        ];
        for (environ, want) in table {
            let got =
                parse_tag(7, 9, &environ).map(|t| (t.daemon_pid, t.run_id, t.task_id, t.attempt));
            let want = want.map(|(d, r, t, a)| (d, r.to_string(), t.to_string(), a));
            assert_eq!(got, want, "{}", String::from_utf8_lossy(&environ));
        }
    }

    #[test]
    fn a_tagged_process_is_found_and_killed_only_while_it_is_the_same() {
        let run = format!("team_test_{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(ENV_RUN_ID, &run)
            .env(ENV_TASK_ID, "01_a")
            .env(ENV_ATTEMPT, "3")
            .env(ENV_DAEMON_PID, "1")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until the child has exec'd `sleep`, /proc shows the test's own environment, untagged.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found: Vec<Tagged> = loop {
            let found: Vec<Tagged> = tagged_processes()
                .into_iter()
                .filter(|t| t.run_id == run)
                .collect();
            if !found.is_empty() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(found.len(), 1, "{found:?}");
        let t = &found[0];
        assert_eq!(
            (t.pid, t.task_id.as_str(), t.attempt, t.daemon_pid),
            (pid, "01_a", Some(3), Some(1))
        );
        let other = Tagged {
            start: t.start + 1,
            ..t.clone()
        };
        assert!(
            !kill_tagged(&other),
            "another start time must never be killed"
        );
        assert!(child.try_wait().unwrap().is_none());
        assert!(kill_tagged(t));
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
    }

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
