//! One daemon per state directory: an exclusive `flock` on `<state>/crewd.lock`, holding our pid.

use anyhow::{bail, Context};
use nix::fcntl::{Flock, FlockArg};
use std::io::{Read, Seek, Write};
use std::path::Path;

pub struct StateLock {
    _lock: Flock<std::fs::File>,
}

pub fn acquire(state_dir: &Path) -> anyhow::Result<StateLock> {
    let path = state_dir.join("crewd.lock");
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
            Ok(StateLock { _lock: lock })
        }
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            bail!(
                "another crewd (pid {}) already owns the state directory {}",
                pid.trim()
                    .parse::<u32>()
                    .map(|p| p.to_string())
                    .unwrap_or_else(|_| "unknown".into()),
                state_dir.display()
            )
        }
    }
}
