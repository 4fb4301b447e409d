//! crew's git processes outliving a killed daemon. crewd's git calls end with it on any
//! ordinary exit (`kill_on_drop`), but a `kill -9` leaves them running, and one still writing a
//! checkout (an apply's, a worktree's) would race the next start's recovery of that very
//! checkout. So each carries `CREW_GIT_OWNER=<daemon instance>` in its environment (and so does
//! anything it starts: a filter, a helper), the instance a random id each daemon process
//! draws and records in its state dir (`git-owners`) before it runs any git. The next daemon
//! of that state dir — the state dir's lock makes sure the last one is gone — ends the
//! processes carrying a recorded id other than its own before its recovery touches any
//! repository. Only ids recorded there are ever acted on: another daemon's (another state
//! dir, a container's) are never this daemon's to end, whatever their paths.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const ENV: &str = "CREW_GIT_OWNER";

/// The file in the state dir naming the daemon instances whose git may still run.
const OWNERS_FILE: &str = "git-owners";
/// The most ids kept there (each start adds one and, once it has ended theirs, drops the rest).
const OWNERS_KEPT: usize = 16;

/// How long the start-up waits for the processes it killed to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(5);
/// Scans of `/proc`: a killed git may have started a child between a scan and its kill.
const SCANS: usize = 3;

/// This daemon process's mark: random, so a daemon that got its predecessor's pid (PID 1 of a
/// container restarted) still tells their processes apart.
fn instance() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("{:016x}", rand::random::<u64>()))
}

/// The variable every git process of this daemon gets.
pub fn tag() -> (String, String) {
    (ENV.into(), instance().into())
}

/// The mark in a `/proc/<pid>/environ` (NUL-separated `K=V`).
fn mark(environ: &[u8]) -> Option<&[u8]> {
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(format!("{ENV}=").as_bytes()))
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

/// The ids recorded in `state_dir`, this daemon's added (on disk before any git of its runs).
/// Blocking.
pub fn record(state_dir: &Path) -> Vec<String> {
    let path = state_dir.join(OWNERS_FILE);
    let before: Vec<String> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.len() <= 64 && *l != instance())
        .take(OWNERS_KEPT)
        .map(str::to_string)
        .collect();
    let mut all = before.clone();
    all.push(instance().to_string());
    if let Err(e) = write_owners(&path, &all) {
        tracing::warn!(error = %e, "cannot record this daemon's git mark");
    }
    before
}

/// Only this daemon's id left: the processes of the others were ended. Blocking.
pub fn forget_others(state_dir: &Path) {
    let path = state_dir.join(OWNERS_FILE);
    if let Err(e) = write_owners(&path, &[instance().to_string()]) {
        tracing::warn!(error = %e, "cannot record this daemon's git mark");
    }
}

fn write_owners(path: &Path, ids: &[String]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, ids.join("\n") + "\n")?;
    std::fs::rename(&tmp, path)
}

/// The processes carrying one of `owners` as their mark: (pid, start time), each read before
/// and after its environment, so a pid reused meanwhile is not taken for the process that had
/// it.
fn carrying(owners: &[String]) -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter_map(|pid| {
            let start = crew_attempt::process::start_time(pid)?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let m = mark(&environ)?;
            let ours = owners.iter().any(|o| o.as_bytes() == m);
            (ours && crew_attempt::process::start_time(pid) == Some(start)).then_some((pid, start))
        })
        .collect()
}

/// Kill every process carrying one of `owners` as its git mark, and wait (at most
/// `GONE_WITHIN`) until none runs: their pids. Blocking (reads `/proc`).
pub fn end_left(owners: &[String]) -> Vec<u32> {
    let mut ended = Vec::new();
    if owners.is_empty() {
        return ended;
    }
    for _ in 0..SCANS {
        let left = carrying(owners);
        if left.is_empty() {
            break;
        }
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
                tracing::warn!(pids = ?left, "git processes a previous daemon left still run after SIGKILL");
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        ended.extend(left.into_iter().map(|(pid, _)| pid));
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each start records its id after those before it; the ids of the others go once their
    /// processes were ended.
    #[test]
    fn the_ids_before_this_daemons_are_recorded_then_forgotten() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(record(dir.path()).is_empty(), "a new state dir");
        std::fs::write(dir.path().join(OWNERS_FILE), "00aa\n\n00bb\n").unwrap_or_default();
        assert_eq!(record(dir.path()), ["00aa", "00bb"]);
        let on_disk = std::fs::read_to_string(dir.path().join(OWNERS_FILE)).unwrap_or_default();
        assert_eq!(on_disk, format!("00aa\n00bb\n{}\n", instance()));
        forget_others(dir.path());
        let on_disk = std::fs::read_to_string(dir.path().join(OWNERS_FILE)).unwrap_or_default();
        assert_eq!(on_disk, format!("{}\n", instance()));
        // This daemon's own id is never among those to end.
        assert!(record(dir.path()).is_empty());
    }

    /// A process carrying a recorded id is killed and waited for; one carrying another id, or
    /// this daemon's own, is left running.
    #[test]
    fn a_process_of_a_recorded_id_is_killed_and_gone() {
        let spawn = |id: &str| {
            std::process::Command::new("sleep")
                .arg("60")
                .env(ENV, id)
                .spawn()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let old = format!("{:016x}", rand::random::<u64>());
        let mut left = spawn(&old);
        let mut other = spawn("another-daemons");
        let mut mine = spawn(instance());
        // Until the child has exec'd `sleep`, /proc shows this test's own environment.
        let marked = |pid: u32| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| mark(&e).is_some())
        };
        while ![left.id(), other.id(), mine.id()].into_iter().all(marked) {
            std::thread::yield_now();
        }
        assert_eq!(end_left(std::slice::from_ref(&old)), vec![left.id()]);
        let status = left.wait().unwrap_or_else(|e| panic!("{e}"));
        assert!(!status.success(), "killed, not ended by itself");
        for c in [&mut other, &mut mine] {
            assert!(c.try_wait().ok().flatten().is_none(), "left running");
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(end_left(&[]).is_empty());
    }
}
