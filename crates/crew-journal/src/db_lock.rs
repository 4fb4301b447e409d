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
    // Listing /proc/self/fd takes a descriptor, which a process out of them (EMFILE, one way
    // to wedge sled) does not have: then every number up to the limit is tried instead.
    let fds: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(items) => items
            .flatten()
            .filter_map(|fd| fd.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => (0..descriptor_bound()).collect(),
    };
    for fd in fds {
        // SAFETY: fstat writes into the zeroed stat buffer we own; a descriptor that is not
        // open only makes it fail.
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

/// Descriptor numbers to try: the hard limit on open files, at most 65,536.
fn descriptor_bound() -> i32 {
    // SAFETY: getrlimit writes into the struct we own.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    let hard = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_max
    } else {
        0
    };
    i32::try_from(hard.clamp(1024, 65_536)).unwrap_or(65_536)
}

/// Takes the same exclusive lock sled takes on `db`, without waiting, so that no sled (of this
/// process or another) opens the files while it is held: `None` when someone holds it. The lock
/// goes with the returned file (it follows the file if it is renamed) and ends when it is dropped.
pub(crate) fn try_lock(db: &Path) -> std::io::Result<Option<File>> {
    let file = File::open(db)?;
    // SAFETY: flock only reads its arguments; the descriptor is open for this whole call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    let err = std::io::Error::last_os_error();
    if err.kind() == std::io::ErrorKind::WouldBlock {
        Ok(None)
    } else {
        Err(err)
    }
}
