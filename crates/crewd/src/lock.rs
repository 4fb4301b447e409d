//! One daemon per state directory: an exclusive `flock` on `<state>/crewd.lock`, holding our pid.

use anyhow::{bail, Context};
use nix::fcntl::{Flock, FlockArg};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

pub struct StateLock {
    _lock: Flock<std::fs::File>,
}

/// How long a lock whose owner is gone may still be held. Seen under load: a restart right
/// after `kill -9` (the killed crewd already reaped) found the lock still held, about once in
/// ten. Which process held it was not caught; the likely one is a child the killed crewd was
/// starting, which holds a copy of its descriptors until its `exec` closes them. A restart
/// (systemd's, a user's) waits for that instead of failing; a live owner still fails at once.
const GONE_OWNER_GRACE: Duration = Duration::from_secs(5);

pub fn acquire(state_dir: &Path) -> anyhow::Result<StateLock> {
    let path = state_dir.join("crewd.lock");
    let deadline = Instant::now() + GONE_OWNER_GRACE;
    loop {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                lock.set_len(0)?;
                lock.rewind()?;
                write!(lock, "{}", std::process::id())?;
                lock.sync_all()?;
                return Ok(StateLock { _lock: lock });
            }
            Err((mut file, _)) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let owner = pid.trim().parse::<u32>().ok();
                let gone = owner.is_some_and(|p| !alive(p));
                if gone && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                let who = owner.map_or_else(|| "unknown".into(), |p| p.to_string());
                if gone {
                    bail!(
                        "the state directory {} is still locked {}s after its crewd (pid {who}) ended: a process it started holds the lock",
                        state_dir.display(),
                        GONE_OWNER_GRACE.as_secs()
                    )
                }
                bail!(
                    "another crewd (pid {who}) already owns the state directory {}",
                    state_dir.display()
                )
            }
        }
    }
}

/// A process with this pid exists (ours to signal or not).
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e != nix::errno::Errno::ESRCH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock held by a process that outlives the crewd whose pid the file names (a child
    /// that has not yet exec'd): acquired once it lets go, not refused.
    #[test]
    fn a_lock_left_by_a_gone_crewd_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crewd.lock");
        // A pid that is gone: a child that has been waited for.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        std::fs::write(&path, dead.to_string()).unwrap();
        let held = std::fs::File::open(&path).unwrap();
        let held = Flock::lock(held, FlockArg::LockExclusiveNonblock).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        });
        let lock = acquire(dir.path()).expect("waited for the lock");
        release.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::process::id().to_string()
        );
        drop(lock);
    }

    /// A live owner: refused at once, naming it.
    #[test]
    fn a_live_owner_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).unwrap();
        let start = Instant::now();
        let e = acquire(dir.path()).err().unwrap().to_string();
        assert!(start.elapsed() < Duration::from_secs(1), "{e}");
        assert!(
            e.contains(&format!("another crewd (pid {})", std::process::id())),
            "{e}"
        );
        drop(first);
    }
}
