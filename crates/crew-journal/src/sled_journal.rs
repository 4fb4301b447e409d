use std::collections::BTreeMap;
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::{Batch, IVec, Transactional};

use crate::keys::{
    decode_group, decode_seq, decode_snapshot, encode_group, encode_snapshot, group_key,
    group_key_seq, run_prefix, seq_key, META_EPOCH, META_LAST_SEQ, META_SNAPSHOT,
};
use crate::marker::{self, Marker};
use crate::open::{self, Opened};
use crate::validate::{check_append, check_run, check_snapshot};
use crate::{Entry, Journal, JournalError};

/// sled's page cache size when the caller has no better idea (sled's own default is 1 GiB).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// How many entries one `forget_run` transaction removes, so forgetting a huge run does not
/// build one huge in-memory write set.
const FORGET_CHUNK: usize = 4096;

/// The durable [`Journal`] on sled 0.34.7.
///
/// Every write is followed by one synchronous `Db::flush` (write + fsync) before it returns.
/// sled's periodic flusher is off: it would add nothing to durability, and with it off sled does
/// not write on its own schedule (e.g. while `open` is deciding that files are corrupt).
/// `flush_async` is never used (it can deadlock: sled#1308).
///
/// Failure model (e.g. ENOSPC, EIO): the error comes back as [`JournalError::Io`] with the OS
/// message, never as a panic. What sled is left in: its log writer records the first I/O error
/// as a "global error", and from then on every operation on that `Db` (writes, flushes, and reads
/// too) fails with a copy of it. The failed append may be applied in sled's memory but was not
/// made durable. So the journal poisons itself: later writes return [`JournalError::Poisoned`]
/// without touching sled, reads return sled's `Io` error, and the caller must drop the journal
/// and reopen it once space is back (opening on a still-full disk fails with `Io` too, and
/// changes nothing). Reopening recovers every acknowledged entry; the failed batch may or may not
/// be there, and as it was never acknowledged its seqs are simply the next ones to append
/// (`last_seq()` after reopening says where to continue). `tests/disk_full.rs` checks all this on
/// a full tmpfs.
pub struct SledJournal {
    path: PathBuf,
    db: sled::Db,
    /// Events and their per-run index (keys.rs).
    log: sled::Tree,
    meta: sled::Tree,
    /// The highest seq whose append returned Ok. Readers never look past it, so they only ever
    /// see durable entries.
    acked: AtomicU64,
    /// Serializes writers: validation, write and flush of one append happen under this lock.
    writer: Mutex<Writer>,
    /// The snapshot record `open` read to check it, handed to the first `read_snapshot` (which
    /// start-up does next) instead of reading a large value from sled twice. Taken by that
    /// read, and dropped by any write that could replace it.
    opened_snapshot: Mutex<Option<IVec>>,
}

struct Writer {
    /// What the marker file currently vouches for.
    marker: Marker,
    /// Durable count of snapshot and forget writes (`META_EPOCH`).
    epoch: u64,
    /// Set by the first failed write; the reason it failed.
    poisoned: Option<String>,
}

impl Writer {
    fn check_usable(&self) -> Result<(), JournalError> {
        match &self.poisoned {
            Some(cause) => Err(JournalError::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for SledJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledJournal")
            .field("path", &self.path)
            .field("last_seq", &self.last_seq())
            .finish_non_exhaustive()
    }
}

impl SledJournal {
    /// Opens (or creates) the journal in `dir` with a sled page cache of `cache_bytes`
    /// ([`DEFAULT_CACHE_BYTES`] is a good default).
    ///
    /// Refuses with [`JournalError::Corrupt`], without deleting or repairing anything, when the
    /// directory holds something that is not a crew journal, when sled reports corruption or
    /// panics while recovering, and when sled comes back with less than was acknowledged before
    /// (see the marker module). Returns [`JournalError::Locked`] when it is already open.
    ///
    /// After a `Corrupt` result this process keeps the directory locked: sled's handle is leaked
    /// rather than dropped, because dropping it would flush into the files being reported.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<Self, JournalError> {
        let Opened {
            db,
            log,
            meta,
            state,
            snapshot,
        } = open::open(dir, cache_bytes)?;
        Ok(Self {
            path: dir.to_path_buf(),
            db,
            log,
            meta,
            acked: AtomicU64::new(state.acked),
            writer: Mutex::new(Writer {
                marker: state,
                epoch: state.epoch,
                poisoned: None,
            }),
            opened_snapshot: Mutex::new(snapshot),
        })
    }

    fn take_opened_snapshot(&self) -> Option<IVec> {
        self.opened_snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The directory the journal lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock is caught inside `guarded` and poisons the journal
        // explicitly; the mutex's own poison flag adds nothing.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// Runs a sled operation, turning its errors and panics into [`JournalError`]s.
    fn guarded<T>(
        &self,
        context: &str,
        op: impl FnOnce() -> sled::Result<T>,
    ) -> Result<T, JournalError> {
        match catch_unwind(AssertUnwindSafe(op)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(open::map_sled_error(&self.path, context, err)),
            Err(panic) => Err(JournalError::Backend {
                context: context.to_owned(),
                detail: format!("sled panicked: {}", open::panic_message(&*panic)),
            }),
        }
    }

    /// Runs a write and poisons the journal if it fails: after a failed write or flush neither
    /// sled nor the disk is in a known state.
    fn write_guarded(
        &self,
        writer: &mut Writer,
        context: &str,
        op: impl FnOnce() -> sled::Result<()>,
    ) -> Result<(), JournalError> {
        let result = self.guarded(context, op);
        if let Err(err) = &result {
            writer.poisoned = Some(err.to_string());
        }
        result
    }

    fn corrupt(&self, detail: String) -> JournalError {
        JournalError::Corrupt {
            path: self.path.clone(),
            detail,
        }
    }

    /// Brings the marker up to what is durable now.
    fn update_marker(&self, writer: &mut Writer) {
        let current = Marker {
            acked: self.acked(),
            epoch: writer.epoch,
        };
        // Best effort: the writes are already durable, and a stale marker only weakens the
        // check at the next open, it never makes a good journal look corrupt.
        if writer.poisoned.is_none()
            && current != writer.marker
            && marker::write(&self.path, current).is_ok()
        {
            writer.marker = current;
        }
    }

    /// The index groups of one run, in seq order.
    fn run_groups(
        &self,
        run: &str,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        reverse: bool,
        max_groups: usize,
    ) -> Result<Vec<(IVec, Vec<u64>)>, JournalError> {
        let prefix = run_prefix(run);
        let items = self.guarded("reading the run index", || {
            let iter = self.log.range(range);
            if reverse {
                iter.rev()
                    .take(max_groups)
                    .collect::<sled::Result<Vec<_>>>()
            } else {
                iter.take(max_groups).collect::<sled::Result<Vec<_>>>()
            }
        })?;
        items
            .into_iter()
            .map(|(key, value)| {
                group_key_seq(&key, &prefix)
                    .and_then(|first| decode_group(&value, first))
                    .map(|seqs| (key, seqs))
                    .ok_or_else(|| self.corrupt(format!("malformed run index entry for {run:?}")))
            })
            .collect()
    }
}

/// One append as one batch: the entries and, per run they name, one index group.
fn append_batch(entries: &[Entry]) -> Batch {
    let mut batch = Batch::default();
    let mut runs: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for entry in entries {
        batch.insert(&seq_key(entry.seq)[..], entry.bytes.as_slice());
        if let Some(run) = &entry.run {
            runs.entry(run.as_str()).or_default().push(entry.seq);
        }
    }
    for (run, seqs) in runs {
        if let Some(first) = seqs.first() {
            batch.insert(group_key(&run_prefix(run), *first), encode_group(&seqs));
        }
    }
    batch
}

fn storage_error(err: TransactionError<()>) -> sled::Error {
    match err {
        TransactionError::Storage(err) => err,
        TransactionError::Abort(()) => {
            sled::Error::ReportableBug("journal transaction aborted without a reason".into())
        }
    }
}

impl Journal for SledJournal {
    fn append(&self, entries: &[Entry]) -> Result<(), JournalError> {
        let mut writer = self.writer();
        writer.check_usable()?;
        let new_last = check_append(self.acked(), entries)?;
        if entries.is_empty() {
            return Ok(());
        }
        // The index must never disagree with the log after a crash: both are in one tree, and
        // sled applies one batch atomically.
        let batch = append_batch(entries);
        self.write_guarded(&mut writer, "appending", || {
            self.log.apply_batch(batch)?;
            self.db.flush()?;
            Ok(())
        })?;
        self.acked.store(new_last, Ordering::Release);
        if writer.marker.acked == 0 {
            // The first entries of an empty journal: from now on sled must never come back empty.
            self.update_marker(&mut writer);
        }
        Ok(())
    }

    fn last_seq(&self) -> u64 {
        self.acked()
    }

    fn read_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        let acked = self.acked();
        if after >= acked || limit == 0 {
            return Ok(Vec::new());
        }
        let items = self.guarded("reading the log", || {
            self.log
                .range(seq_key(after + 1)..=seq_key(acked))
                .take(limit)
                .collect::<sled::Result<Vec<_>>>()
        })?;
        items
            .into_iter()
            .map(|(key, value)| match decode_seq(&key) {
                Some(seq) => Ok((seq, value.to_vec())),
                None => Err(self.corrupt(format!("log key of {} bytes", key.len()))),
            })
            .collect()
    }

    fn read_run_after(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        check_run(run)?;
        let acked = self.acked();
        if after >= acked || limit == 0 {
            return Ok(Vec::new());
        }
        let prefix = run_prefix(run);
        let after_key = group_key(&prefix, after);
        // The group starting at or before `after` may still hold later seqs.
        let straddling = self.run_groups(
            run,
            (
                Bound::Included(group_key(&prefix, 0)),
                Bound::Included(after_key.clone()),
            ),
            true,
            1,
        )?;
        let later = self.run_groups(
            run,
            (
                Bound::Excluded(after_key),
                Bound::Included(group_key(&prefix, acked)),
            ),
            false,
            limit,
        )?;
        let seqs = straddling
            .into_iter()
            .chain(later)
            .flat_map(|(_, seqs)| seqs)
            .filter(|seq| *seq > after && *seq <= acked)
            .take(limit);
        let mut out = Vec::new();
        for seq in seqs {
            // A concurrent forget_run may have removed the entry since the index was read.
            if let Some(value) = self.guarded("reading the log", || self.log.get(seq_key(seq)))? {
                out.push((seq, value.to_vec()));
            }
        }
        Ok(out)
    }

    fn write_snapshot(&self, seq: u64, bytes: &[u8]) -> Result<(), JournalError> {
        let mut writer = self.writer();
        writer.check_usable()?;
        let acked = self.acked();
        check_snapshot(seq, acked)?;
        let epoch = writer.epoch + 1;
        self.take_opened_snapshot();
        let mut batch = Batch::default();
        batch.insert(META_SNAPSHOT, encode_snapshot(seq, bytes));
        batch.insert(META_EPOCH, &seq_key(epoch)[..]);
        self.write_guarded(&mut writer, "writing a snapshot", || {
            self.meta.apply_batch(batch)?;
            self.db.flush()?;
            Ok(())
        })?;
        writer.epoch = epoch;
        self.update_marker(&mut writer);
        Ok(())
    }

    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError> {
        // Only snapshot writes replace the record, and they drop the copy first: a copy still
        // here is the current record.
        let value = match self.take_opened_snapshot() {
            Some(value) => value,
            None => match self.guarded("reading the snapshot", || self.meta.get(META_SNAPSHOT))? {
                Some(value) => value,
                None => return Ok(None),
            },
        };
        match decode_snapshot(&value) {
            Some((seq, bytes)) => Ok(Some((seq, bytes.to_vec()))),
            None => Err(self.corrupt("malformed snapshot record".into())),
        }
    }

    fn forget_run(&self, run: &str) -> Result<(), JournalError> {
        check_run(run)?;
        let mut writer = self.writer();
        writer.check_usable()?;
        let prefix = run_prefix(run);
        let groups = self.run_groups(
            run,
            (
                Bound::Included(group_key(&prefix, 0)),
                Bound::Included(group_key(&prefix, u64::MAX)),
            ),
            false,
            usize::MAX,
        )?;
        if groups.is_empty() {
            return Ok(());
        }
        let last_seq = seq_key(self.acked());
        let epoch = writer.epoch + 1;
        let mut chunks: Vec<Vec<(IVec, Vec<u64>)>> = vec![Vec::new()];
        let mut in_chunk = 0;
        for group in groups {
            if in_chunk >= FORGET_CHUNK {
                chunks.push(Vec::new());
                in_chunk = 0;
            }
            in_chunk += group.1.len();
            if let Some(chunk) = chunks.last_mut() {
                chunk.push(group);
            }
        }
        self.write_guarded(&mut writer, "forgetting a run", || {
            for chunk in &chunks {
                (&self.log, &self.meta)
                    .transaction(|(log, meta)| {
                        // Recorded with the removal, so removing the newest entries never lowers
                        // last_seq after a reopen.
                        meta.insert(META_LAST_SEQ, &last_seq[..])?;
                        meta.insert(META_EPOCH, &seq_key(epoch)[..])?;
                        for (key, seqs) in chunk {
                            log.remove(key.clone())?;
                            for seq in seqs {
                                log.remove(&seq_key(*seq)[..])?;
                            }
                        }
                        Ok::<(), ConflictableTransactionError<()>>(())
                    })
                    .map_err(storage_error)?;
            }
            self.db.flush()?;
            Ok(())
        })?;
        writer.epoch = epoch;
        self.update_marker(&mut writer);
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        self.guarded("measuring size", || self.db.size_on_disk())
            .unwrap_or(0)
    }
}

impl Drop for SledJournal {
    fn drop(&mut self) {
        let mut writer = self.writer();
        self.update_marker(&mut writer);
    }
}
