use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::validate::{check_append, check_run, check_snapshot};
use crate::{Entry, Journal, JournalError};

/// An in-memory [`Journal`] with the same semantics as [`crate::SledJournal`] and no durability,
/// for unit tests of the crates built on the trait.
#[derive(Debug, Default)]
pub struct MemJournal {
    state: Mutex<MemState>,
}

#[derive(Debug, Default)]
struct MemState {
    last_seq: u64,
    log: BTreeMap<u64, Vec<u8>>,
    by_run: HashMap<String, BTreeSet<u64>>,
    snapshot: Option<(u64, Vec<u8>)>,
}

impl MemJournal {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, MemState> {
        // Every mutation below validates before it changes anything, so a panic elsewhere while
        // the lock was held cannot have left the state half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Journal for MemJournal {
    fn append(&self, entries: &[Entry]) -> Result<(), JournalError> {
        let mut state = self.state();
        let new_last = check_append(state.last_seq, entries)?;
        for entry in entries {
            state.log.insert(entry.seq, entry.bytes.clone());
            if let Some(run) = &entry.run {
                state
                    .by_run
                    .entry(run.clone())
                    .or_default()
                    .insert(entry.seq);
            }
        }
        state.last_seq = new_last;
        Ok(())
    }

    fn last_seq(&self) -> u64 {
        self.state().last_seq
    }

    fn read_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        let state = self.state();
        let Some(start) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        Ok(state
            .log
            .range(start..)
            .take(limit)
            .map(|(seq, bytes)| (*seq, bytes.clone()))
            .collect())
    }

    fn read_run_after(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        check_run(run)?;
        let state = self.state();
        let (Some(seqs), Some(start)) = (state.by_run.get(run), after.checked_add(1)) else {
            return Ok(Vec::new());
        };
        Ok(seqs
            .range(start..)
            .filter_map(|seq| state.log.get(seq).map(|bytes| (*seq, bytes.clone())))
            .take(limit)
            .collect())
    }

    fn write_snapshot(&self, seq: u64, bytes: &[u8]) -> Result<(), JournalError> {
        let mut state = self.state();
        check_snapshot(seq, state.last_seq)?;
        state.snapshot = Some((seq, bytes.to_vec()));
        Ok(())
    }

    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError> {
        Ok(self.state().snapshot.clone())
    }

    fn forget_run(&self, run: &str) -> Result<(), JournalError> {
        check_run(run)?;
        let mut state = self.state();
        if let Some(seqs) = state.by_run.remove(run) {
            for seq in seqs {
                state.log.remove(&seq);
            }
        }
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        0
    }
}
