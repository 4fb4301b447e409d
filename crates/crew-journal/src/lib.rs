//! The daemon's durable event log behind a small trait.
//!
//! Values are opaque bytes (the daemon stores JSON events); this crate knows nothing of crew's
//! domain types. [`SledJournal`] is the durable implementation, [`MemJournal`] an in-memory one
//! with the same semantics for other crates' unit tests.

mod acked;
mod aside;
mod db_lock;
mod error;
mod keys;
mod marker;
mod mem;
mod open;
mod seal;
mod sled_journal;
mod validate;

pub use error::JournalError;
pub use mem::MemJournal;
pub use sled_journal::{SledJournal, DEFAULT_CACHE_BYTES};

/// One event to append: its daemon-wide `seq`, the run it belongs to (if any) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub run: Option<String>,
    pub bytes: Vec<u8>,
}

/// The durable, append-only event log with a per-run index and one snapshot slot.
pub trait Journal: Send + Sync + 'static {
    /// Append entries (seqs strictly increasing, contiguous after [`Journal::last_seq`]) atomically
    /// and durably: returns only after fsync. One call = one group commit. An empty slice is a no-op.
    fn append(&self, entries: &[Entry]) -> Result<(), JournalError>;

    /// The highest seq ever acknowledged by `append`; 0 when nothing was ever appended.
    /// It never goes down, not even when the newest run is forgotten.
    fn last_seq(&self) -> u64;

    /// Entries with seq > `after`, in order, at most `limit`.
    fn read_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, JournalError>;

    /// One run's entries with seq > `after`, in order, at most `limit` (served by a per-run index
    /// that `append` maintains).
    fn read_run_after(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JournalError>;

    /// Store opaque state bytes valid as of `seq` (at most `last_seq()`); the latest write wins.
    fn write_snapshot(&self, seq: u64, bytes: &[u8]) -> Result<(), JournalError>;

    /// The latest snapshot, if any.
    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError>;

    /// Remove a run's entries and its index (team.forget / prune). Seq numbering stays intact for
    /// everything else: `last_seq()` does not go down. Forgetting an unknown run is a no-op.
    fn forget_run(&self, run: &str) -> Result<(), JournalError>;

    /// Bytes the journal occupies on disk (0 for in-memory journals).
    fn size_on_disk(&self) -> u64;
}
