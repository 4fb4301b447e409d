//! Opening a journal directory again right after a handle was dropped, as the journal and as
//! raw sled, and rewriting it in the layout older journals had.

use std::path::Path;
use std::time::{Duration, Instant};

use crew_journal::{JournalError, SledJournal, DEFAULT_CACHE_BYTES};

/// How long sled may take to release the file lock of a dropped handle.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Opens the journal, waiting out the lock of a handle the test just dropped: sled releases its
/// file lock from a background thread, a moment after the drop.
pub fn open_journal(dir: &Path) -> Result<SledJournal, JournalError> {
    retry_locked(|| SledJournal::open(dir, DEFAULT_CACHE_BYTES))
}

/// The same with `SledJournal::reopen` (a journal this process was writing until it failed).
pub fn reopen_journal(dir: &Path) -> Result<SledJournal, JournalError> {
    retry_locked(|| SledJournal::reopen(dir, DEFAULT_CACHE_BYTES))
}

fn retry_locked(
    open: impl Fn() -> Result<SledJournal, JournalError>,
) -> Result<SledJournal, JournalError> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match open() {
            Err(JournalError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            other => return other,
        }
    }
}

/// The journal's sled database opened directly, waiting out the lock the same way.
pub fn raw_sled(dir: &Path) -> sled::Db {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match sled::open(dir) {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10))
            }
            other => return other.expect("raw sled"),
        }
    }
}

/// Rewrites every event pack (keys tagged 0xFE) as one key per event, the layout of journals
/// written before packing. Returns how many packs it rewrote; none is left.
pub fn unpack_all(dir: &Path) -> usize {
    let db = raw_sled(dir);
    let log = db.open_tree("log").expect("log tree");
    let packs: Vec<_> = log
        .range(&[0xFEu8][..]..&[0xFFu8][..])
        .map(|item| item.expect("pack"))
        .collect();
    for (key, value) in &packs {
        // A checked pack starts with 0xFF, its last seq and a CRC-32 (13 bytes).
        let mut rest = if value.first() == Some(&0xFF) {
            &value[13..]
        } else {
            &value[..]
        };
        while !rest.is_empty() {
            let seq = u64::from_be_bytes(rest[..8].try_into().expect("seq"));
            let len = u32::from_be_bytes(rest[8..12].try_into().expect("len")) as usize;
            log.insert(seq.to_be_bytes(), &rest[12..12 + len])
                .expect("insert");
            rest = &rest[12 + len..];
        }
        log.remove(key).expect("remove");
    }
    assert_eq!(log.range(&[0xFEu8][..]..&[0xFFu8][..]).count(), 0);
    db.flush().expect("flush");
    packs.len()
}
