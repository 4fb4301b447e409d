//! The journal handle the whole daemon reads and writes through.
//!
//! After a write fails (disk full, I/O error) sled fails every later operation of that handle,
//! reads included, and crew-journal refuses writes on it (`Poisoned`). The only way back is to
//! drop the handle and open the journal again, which sled refuses while any clone of the old
//! handle is alive. So nobody keeps a handle: readers borrow the current one for one call, and
//! the writer swaps in a fresh one (`writer.rs`) after a failure.

use crew_journal::{Entry, Journal, JournalError};
use std::sync::{Arc, RwLock};

pub struct JournalSlot {
    current: RwLock<Arc<dyn Journal>>,
}

impl JournalSlot {
    pub fn new(journal: Arc<dyn Journal>) -> Self {
        JournalSlot {
            current: RwLock::new(journal),
        }
    }

    fn current(&self) -> Arc<dyn Journal> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Put `journal` in place; returns the previous handle (drop it to release the files).
    pub fn replace(&self, journal: Arc<dyn Journal>) -> Arc<dyn Journal> {
        let mut g = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        std::mem::replace(&mut *g, journal)
    }
}

impl Journal for JournalSlot {
    fn append(&self, entries: &[Entry]) -> Result<(), JournalError> {
        self.current().append(entries)
    }
    fn last_seq(&self) -> u64 {
        self.current().last_seq()
    }
    fn read_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        self.current().read_after(after, limit)
    }
    fn read_run_after(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        self.current().read_run_after(run, after, limit)
    }
    fn write_snapshot(&self, seq: u64, bytes: &[u8]) -> Result<(), JournalError> {
        self.current().write_snapshot(seq, bytes)
    }
    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError> {
        self.current().read_snapshot()
    }
    fn forget_run(&self, run: &str) -> Result<(), JournalError> {
        self.current().forget_run(run)
    }
    fn size_on_disk(&self) -> u64 {
        self.current().size_on_disk()
    }
}

/// Stands in the slot while the journal is closed between a failure and a successful reopen:
/// every operation fails with the reason.
pub struct Closed {
    last_seq: u64,
    cause: String,
}

impl Closed {
    pub fn new(last_seq: u64, cause: String) -> Self {
        Closed { last_seq, cause }
    }

    fn err(&self, context: &str) -> JournalError {
        JournalError::Io {
            context: context.into(),
            source: std::io::Error::other(format!(
                "the journal is closed until it can be reopened after a write failure ({})",
                self.cause
            )),
        }
    }
}

impl Journal for Closed {
    fn append(&self, _: &[Entry]) -> Result<(), JournalError> {
        Err(JournalError::Poisoned {
            cause: self.cause.clone(),
        })
    }
    fn last_seq(&self) -> u64 {
        self.last_seq
    }
    fn read_after(&self, _: u64, _: usize) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        Err(self.err("reading the log"))
    }
    fn read_run_after(
        &self,
        _: &str,
        _: u64,
        _: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        Err(self.err("reading the run index"))
    }
    fn write_snapshot(&self, _: u64, _: &[u8]) -> Result<(), JournalError> {
        Err(JournalError::Poisoned {
            cause: self.cause.clone(),
        })
    }
    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError> {
        Err(self.err("reading the snapshot"))
    }
    fn forget_run(&self, _: &str) -> Result<(), JournalError> {
        Err(JournalError::Poisoned {
            cause: self.cause.clone(),
        })
    }
    fn size_on_disk(&self) -> u64 {
        0
    }
}
