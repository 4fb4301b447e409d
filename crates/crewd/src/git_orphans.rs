//! crew's git processes outliving a killed daemon. crewd's git calls end with it on any
//! ordinary exit (`kill_on_drop`), but a `kill -9` leaves them running, and one still writing a
//! checkout (an apply's, a worktree's) would race the next start's recovery of that very
//! checkout. So each carries `CREW_GIT_OWNER=<daemon instance>:<state dir>` in its environment
//! (and so does anything it starts: a filter, a helper), and the next daemon of the same state
//! dir ends them before its recovery touches any repository. The state dir's lock makes sure
//! that daemon is gone: what carries its mark is left over, never another live daemon's.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const ENV: &str = "CREW_GIT_OWNER";

/// How long the start-up waits for the processes it killed to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// This daemon process's mark: random, so a daemon that got its predecessor's pid (PID 1 of a
/// container restarted) still tells their processes apart.
fn instance() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("{:016x}", rand::random::<u64>()))
}

/// The variable every git process of this daemon gets.
pub fn tag(state_dir: &Path) -> (String, String) {
    (ENV.into(), value(instance(), state_dir))
}

fn value(instance: &str, state_dir: &Path) -> String {
    format!("{instance}:{}", state_dir.display())
}

/// The mark in a `/proc/<pid>/environ` (NUL-separated `K=V`): (instance, state dir).
fn owner(environ: &[u8]) -> Option<(&[u8], &[u8])> {
    let v = environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(format!("{ENV}=").as_bytes()))?;
    let at = v.iter().position(|b| *b == b':')?;
    Some((v.get(..at)?, v.get(at + 1..)?))
}

/// Whether a process left by another instance of the daemon of `state_dir`.
fn left_by_another(environ: &[u8], state_dir: &[u8]) -> bool {
    owner(environ).is_some_and(|(who, dir)| who != instance().as_bytes() && dir == state_dir)
}

/// A process's state letter (field 3 of its stat): `Z` for a zombie, which writes nothing.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 1..)?
        .trim_start()
        .chars()
        .next()
}

fn alive(pid: u32, start: u64) -> bool {
    crew_attempt::process::start_time(pid) == Some(start) && state(pid) != Some('Z')
}

/// Kill every process a previous daemon of `state_dir` left carrying its git mark, and wait
/// (at most `GONE_WITHIN`) until none runs: their pids. Blocking (reads `/proc`).
pub fn end_left(state_dir: &Path) -> Vec<u32> {
    let want = value("", state_dir);
    let want = want.as_bytes().get(1..).unwrap_or_default();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let left: Vec<(u32, u64)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            left_by_another(&environ, want)
                .then(|| Some((pid, crew_attempt::process::start_time(pid)?)))?
        })
        .collect();
    for &(pid, start) in &left {
        // The same process still (a pid reused meanwhile is left alone).
        if crew_attempt::process::start_time(pid) == Some(start) {
            let target = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let deadline = Instant::now() + GONE_WITHIN;
    while left.iter().any(|&(pid, start)| alive(pid, start)) {
        if Instant::now() >= deadline {
            tracing::warn!(
                pids = ?left,
                "git processes a previous daemon left are still running after SIGKILL"
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    left.into_iter().map(|(pid, _)| pid).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environ(vars: &[&str]) -> Vec<u8> {
        vars.join("\0").into_bytes()
    }

    /// Table: whose mark a process carries decides whether it is ended.
    #[test]
    fn only_another_instance_of_this_state_dir_is_ended() {
        let mine = format!("{ENV}={}", value(instance(), Path::new("/s/state")));
        let cases: &[(&[&str], bool)] = &[
            (&["PATH=/bin", "CREW_GIT_OWNER=00ff:/s/state"], true),
            (&["CREW_GIT_OWNER=00ff:/s/other"], false),
            (&["CREW_GIT_OWNER=00ff:/s/state/x"], false),
            (&[mine.as_str()], false),
            (&["PATH=/bin"], false),
            (&["CREW_GIT_OWNER=no-colon"], false),
            // A state dir with a colon in it.
            (&["CREW_GIT_OWNER=01:/a:b"], false),
            (&["XCREW_GIT_OWNER=00ff:/s/state"], false),
        ];
        for (vars, ended) in cases {
            assert_eq!(
                left_by_another(&environ(vars), b"/s/state"),
                *ended,
                "{vars:?}"
            );
        }
        assert!(left_by_another(
            &environ(&["CREW_GIT_OWNER=01:/a:b"]),
            b"/a:b"
        ));
    }

    /// A process carrying another instance's mark of this state dir is killed and waited for;
    /// one of another state dir is left running.
    #[test]
    fn a_left_process_is_killed_and_gone() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state_dir = dir.path().join("state");
        let spawn = |dir: &Path| {
            std::process::Command::new("sleep")
                .arg("60")
                .env(ENV, value("0123", dir))
                .spawn()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let mut ours = spawn(&state_dir);
        let mut theirs = spawn(&dir.path().join("other"));
        // Until the child has exec'd `sleep`, /proc shows this test's own environment.
        let tagged = |pid: u32| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| owner(&e).is_some())
        };
        while !(tagged(ours.id()) && tagged(theirs.id())) {
            std::thread::yield_now();
        }
        let ended = end_left(&state_dir);
        assert_eq!(ended, vec![ours.id()]);
        let status = ours.wait().unwrap_or_else(|e| panic!("{e}"));
        assert!(!status.success(), "killed, not ended by itself");
        assert!(theirs.try_wait().ok().flatten().is_none(), "left running");
        let _ = theirs.kill();
        let _ = theirs.wait();
    }
}
