//! sled's exclusive `flock` on its `db` file, seen from outside sled.
//!
//! sled locks `db` when it opens it and the lock goes with its file descriptor, which sled's
//! background threads release a moment after the last handle is dropped. Sealing the files
//! (`seal.rs`) must wait for that, as a file still open may still be written. And a handle that
//! can never write again but cannot be dropped either (`Writer::wedged` in `sled_journal.rs`)
//! would keep the lock forever, so a later open of the journal in this process could never
//! succeed: its lock is released by hand.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Waits until nobody holds a lock on `db` (at most `limit`), then runs `f` holding it, so that
/// no sled opens the files meanwhile. `false`: still locked after `limit`, or not there.
pub(crate) fn with_db_unlocked(db: &Path, limit: Duration, f: impl FnOnce()) -> bool {
    let Ok(file) = File::open(db) else {
        return false;
    };
    let deadline = Instant::now() + limit;
    loop {
        // SAFETY: flock only reads its arguments; the descriptor is open for this whole call.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if locked {
            f();
            // Closing the file releases the lock.
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Releases every lock this process holds on `db` through descriptors it cannot close: those
/// of a sled handle that is leaked because it can never finish its work. Only for that case:
/// the lock is what keeps two handles from writing the same files.
pub(crate) fn release_leaked_locks(db: &Path) {
    let Ok(meta) = std::fs::metadata(db) else {
        return;
    };
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for fd in fds.flatten() {
        let Some(fd) = fd.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: fstat writes into the zeroed stat buffer we own; a descriptor closed in the
        // meantime only makes it fail.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        let same = unsafe { libc::fstat(fd, &mut stat) } == 0
            && stat.st_dev == meta.dev()
            && stat.st_ino == meta.ino();
        if same {
            // SAFETY: flock only reads its arguments. The descriptor belongs to the leaked
            // handle, which never closes it, so the number cannot have been reused.
            unsafe { libc::flock(fd, libc::LOCK_UN) };
        }
    }
}
