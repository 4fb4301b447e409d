use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::{Batch, IVec, Transactional};

use crate::acked::AckedFile;
use crate::db_lock;
use crate::keys::{
    decode_group, decode_pack, decode_pack_key, decode_seq, decode_snapshot, encode_checked,
    encode_group, encode_packs, encode_snapshot, encode_unchecked, group_key, group_key_seq,
    pack_key, run_prefix, seq_key, EVENTS_END, META_EPOCH, META_LAST_SEQ, META_SNAPSHOT,
    PACKS_START,
};
use crate::marker::{self, Marker};
use crate::open::SLED_DB_FILE;
use crate::open::{self, Opened, Trust};
use crate::seal;
use crate::validate::{check_append, check_run, check_snapshot};
use crate::{Entry, Journal, JournalError};

/// sled's page cache size when the caller has no better idea (sled's own default is 1 GiB).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// Reads of the newest pack after each append, so sled's cache holds about what it was given
/// (`cache_capacity`) instead of several times that. sled 0.34's cache is 256 shards by page id,
/// and a shard applies its page accesses 64 at a time: only then does it page out what is over
/// its share (a 1 MiB cache gives each shard 4 KiB, less than one leaf, so it keeps one page).
/// The log tree grows at its right edge: a leaf there is accessed once per key written into it
/// (~9 times) until it splits and is never read again. So a shard applied its accesses only
/// about every 7th retired leaf of its own, and ~4 leaves per shard stayed in memory: 6.3 MB of
/// packs live after 10,000 tasks with a 1 MiB cache (heaptrack of crewd under `bench-memory`).
/// With 8 more reads per append a leaf gets ~80 accesses while it is the newest, so its shard
/// applies them and drops the previous leaf before the next one comes: 1.5 MB (64 reads did no
/// better). Each read is a lookup of a cached key (no disk, no copy), 8 per group commit.
/// `tests/cache_bound.rs` checks the effect.
const NEWEST_PACK_READS: usize = 8;

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
    /// Dropped by hand in `Drop`: before sealing the files, or never, when sled cannot let go.
    sled: ManuallyDrop<Sled>,
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

struct Sled {
    db: sled::Db,
    /// Events and their per-run index (keys.rs).
    log: sled::Tree,
    meta: sled::Tree,
}

struct Writer {
    /// Where every acknowledged write is recorded (`acked.rs`).
    acked_file: Option<AckedFile>,
    /// A write failed without sled recording a global error (it does for failed log writes,
    /// `is_global_error`): the failure was in a reservation of sled's write buffer (creating a
    /// blob file: EMFILE, EROFS, ENOSPC), which sled never gives back, so any flush of this
    /// handle, its drop's included, waits forever.
    wedged: bool,
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
    /// Nothing writes to the files before they are judged sound: a journal closed cleanly is
    /// checked against the seal it left (every file's length and CRC-32, `seal.rs`), any other
    /// is judged on a copy that takes the journal's path while the original is set aside next
    /// to it, and that stays as the journal when sound (`aside.rs`; it needs as much free space
    /// as the journal occupies). After a `Corrupt` result this process keeps the directory locked:
    /// sled's handle is leaked rather than dropped, because dropping it would flush into the
    /// files being reported.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<Self, JournalError> {
        Self::open_trusting(dir, cache_bytes, Trust::Judge)
    }

    /// Opens the journal again after a handle of this process failed a write and was dropped:
    /// the files are the ones this process wrote, so they are opened in place without judging a
    /// copy first (on a full disk there is no room for one), and judged after sled's recovery
    /// with the same checks as [`SledJournal::open`].
    pub fn reopen(dir: &Path, cache_bytes: u64) -> Result<Self, JournalError> {
        Self::open_trusting(dir, cache_bytes, Trust::OwnFiles)
    }

    fn open_trusting(dir: &Path, cache_bytes: u64, trust: Trust) -> Result<Self, JournalError> {
        let Opened {
            db,
            log,
            meta,
            state,
            snapshot,
            acked,
        } = open::open(dir, cache_bytes, trust)?;
        Ok(Self {
            path: dir.to_path_buf(),
            sled: ManuallyDrop::new(Sled { db, log, meta }),
            acked: AtomicU64::new(state.acked),
            writer: Mutex::new(Writer {
                acked_file: acked,
                wedged: false,
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

    /// See [`NEWEST_PACK_READS`]. Only the accesses matter: a failed read changes nothing here
    /// (the next append or read reports sled's error).
    fn touch_newest_pack(&self, first_seq: u64) {
        let key = pack_key(first_seq);
        for _ in 0..NEWEST_PACK_READS {
            let _ = catch_unwind(AssertUnwindSafe(|| self.sled.log.get(&key[..])));
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
        let result = match catch_unwind(AssertUnwindSafe(op)) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => {
                writer.wedged = !is_global_error(&err);
                Err(open::map_sled_error(&self.path, context, err))
            }
            Err(panic) => {
                writer.wedged = true;
                Err(JournalError::Backend {
                    context: context.to_owned(),
                    detail: format!("sled panicked: {}", open::panic_message(&*panic)),
                })
            }
        };
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

    /// Records what is durable now in the acked file (best effort, like the marker).
    fn record_acked(&self, writer: &mut Writer) {
        let current = Marker {
            acked: self.acked(),
            epoch: writer.epoch,
        };
        if let Some(file) = writer.acked_file.as_mut() {
            if file.record(current).is_err() {
                writer.acked_file = None;
            }
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
            let iter = self.sled.log.range(range);
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

    /// The pack whose key is the greatest at or below `seq`: the only one that can hold it.
    fn pack_holding(&self, seq: u64) -> Result<Option<(IVec, IVec)>, JournalError> {
        self.guarded("reading the log", || {
            self.sled
                .log
                .range(pack_key(0)..=pack_key(seq))
                .next_back()
                .transpose()
        })
    }

    fn decode_pack(&self, key: &[u8], value: &IVec) -> Result<Pack, JournalError> {
        let first = decode_pack_key(key)
            .ok_or_else(|| self.corrupt(format!("malformed event pack key {key:?}")))?;
        let pack = decode_pack(value, first).map_err(|why| {
            self.corrupt(format!("the event pack at seq {first} is damaged: {why}"))
        })?;
        Ok(Pack {
            first,
            last: pack.last,
            checked: pack.checked,
            value: value.clone(),
            entries: pack.entries,
        })
    }

    /// Where entry `seq` is stored, if it is still there; `cache` keeps the last pack read, as
    /// consecutive lookups mostly fall into the same one.
    fn locate(&self, seq: u64, cache: &mut Option<Pack>) -> Result<Option<Place>, JournalError> {
        let covers = |pack: &Pack| pack.first <= seq && seq <= pack.last();
        if !cache.as_ref().is_some_and(covers) {
            *cache = match self.pack_holding(seq)? {
                Some((key, value)) => Some(self.decode_pack(&key, &value)?),
                None => None,
            };
        }
        if let Some(pack) = cache.as_ref().filter(|pack| covers(pack)) {
            return Ok(pack.find(seq).map(|_| Place::Packed(pack.first)));
        }
        // Not in any pack: a legacy key, older than every pack, or gone.
        let legacy = self.guarded("reading the log", || {
            self.sled.log.contains_key(seq_key(seq))
        })?;
        Ok(legacy.then_some(Place::Legacy))
    }

    /// The bytes of entry `seq`, if it is still there.
    fn entry(&self, seq: u64, cache: &mut Option<Pack>) -> Result<Option<Vec<u8>>, JournalError> {
        match self.locate(seq, cache)? {
            Some(Place::Packed(_)) => Ok(cache
                .as_ref()
                .and_then(|pack| pack.find(seq))
                .map(<[u8]>::to_vec)),
            Some(Place::Legacy) => Ok(self
                .guarded("reading the log", || self.sled.log.get(seq_key(seq)))?
                .map(|value| value.to_vec())),
            None => Ok(None),
        }
    }

    /// Splits forgetting a run into transactions of about [`FORGET_CHUNK`] entries, each
    /// removing some of the run's index groups with their entries, so an interrupted forget
    /// leaves no index group naming removed entries. A pack holds the entries of one append,
    /// hence of at most one index group of the run: it is rewritten, without the run's entries,
    /// in the transaction that removes that group. Called under the writer lock: nothing
    /// changes the log meanwhile.
    fn plan_forget(&self, groups: Vec<(IVec, Vec<u64>)>) -> Result<Vec<ForgetChunk>, JournalError> {
        let mut gone: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut packs: BTreeMap<u64, Pack> = BTreeMap::new();
        let mut placed: Vec<(IVec, Vec<(u64, Place)>)> = Vec::with_capacity(groups.len());
        let mut cache = None;
        for (key, seqs) in groups {
            let mut places = Vec::with_capacity(seqs.len());
            for seq in seqs {
                let Some(place) = self.locate(seq, &mut cache)? else {
                    continue;
                };
                if let (Place::Packed(first), Some(pack)) = (place, cache.as_ref()) {
                    gone.entry(first).or_default().push(seq);
                    packs.entry(first).or_insert_with(|| pack.clone());
                }
                places.push((seq, place));
            }
            placed.push((key, places));
        }
        let mut chunks = vec![ForgetChunk::default()];
        for (key, places) in placed {
            if chunks
                .last()
                .is_some_and(|chunk| chunk.entries >= FORGET_CHUNK)
            {
                chunks.push(ForgetChunk::default());
            }
            let Some(chunk) = chunks.last_mut() else {
                break;
            };
            chunk.index_keys.push(key);
            chunk.entries += places.len().max(1);
            for (seq, place) in places {
                match place {
                    Place::Legacy => chunk.legacy.push(seq),
                    Place::Packed(first) => {
                        if let (Some(pack), Some(removed)) =
                            (packs.remove(&first), gone.get(&first))
                        {
                            let kept: Vec<(u64, &[u8])> = pack
                                .iter()
                                .filter(|(seq, _)| removed.binary_search(seq).is_err())
                                .collect();
                            // A checked pack stays, empty if need be, so the packs still tile
                            // the seqs; an unchecked one goes when nothing is left in it.
                            let value = if pack.checked {
                                Some(encode_checked(pack.first, pack.last, kept))
                            } else {
                                (!kept.is_empty()).then(|| encode_unchecked(kept))
                            };
                            chunk.packs.push((first, value));
                        }
                    }
                }
            }
        }
        Ok(chunks)
    }
}

/// Whether a failed write's error is sled's global error: sled records the first failure of a
/// log write (done on its IO threads) and hands every later caller a copy made with
/// `io::Error::new(kind, format!("{original:?}"))`, so it carries no OS error code. A handle in
/// that state fails every call at once, its drop included. Any other failure (an OS error
/// returned in the caller's thread: sled creating a blob file) may have left a reservation in
/// sled's write buffer, and the handle counts as wedged (`Writer::wedged`); mistaking a
/// global error for that only leaks a handle that could have been dropped.
fn is_global_error(err: &sled::Error) -> bool {
    matches!(err, sled::Error::Io(io) if io.raw_os_error().is_none() && io.to_string().starts_with("Os {"))
}

/// One decoded event pack.
#[derive(Clone)]
struct Pack {
    first: u64,
    /// The last seq it covers (keys.rs, `DecodedPack::last`).
    last: u64,
    checked: bool,
    value: IVec,
    /// (seq, byte range in `value`), non-empty and in seq order.
    entries: Vec<(u64, std::ops::Range<usize>)>,
}

impl Pack {
    fn last(&self) -> u64 {
        self.last
    }

    /// Checked packs tile the seqs: each starts right after the one before it, and none follows
    /// an unchecked one (those are older). Anything else means packs are missing.
    fn follows(&self, before: &Pack) -> Result<(), String> {
        match (before.checked, self.checked) {
            (true, false) => Err(format!(
                "an event pack without checksum (seq {}) follows checked ones",
                self.first
            )),
            (true, true) if before.last.checked_add(1) != Some(self.first) => Err(format!(
                "event packs are missing: the one at seq {} ends at {}, the next starts at {}",
                before.first, before.last, self.first
            )),
            _ => Ok(()),
        }
    }

    fn find(&self, seq: u64) -> Option<&[u8]> {
        let at = self.entries.binary_search_by_key(&seq, |(s, _)| *s).ok()?;
        self.entries
            .get(at)
            .and_then(|(_, range)| self.value.get(range.clone()))
    }

    fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.entries
            .iter()
            .filter_map(|(seq, range)| Some((*seq, self.value.get(range.clone())?)))
    }
}

/// Where one entry lives in the `log` tree.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    /// In the pack with this first seq.
    Packed(u64),
    /// Under its own seq key (journals written before packing).
    Legacy,
}

/// What one `forget_run` transaction writes.
#[derive(Default)]
struct ForgetChunk {
    index_keys: Vec<IVec>,
    legacy: Vec<u64>,
    /// Packs rewritten without the run's entries (`None`: nothing left, removed).
    packs: Vec<(u64, Option<Vec<u8>>)>,
    entries: usize,
}

/// One append as one batch: the entries in packs and, per run they name, one index group.
/// An append's sled batch, and the first seq of its newest pack.
fn append_batch(entries: &[Entry]) -> (Batch, u64) {
    let mut batch = Batch::default();
    let mut newest = 0;
    let mut runs: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (first, value) in encode_packs(entries) {
        newest = first;
        batch.insert(&pack_key(first)[..], value);
    }
    for entry in entries {
        if let Some(run) = &entry.run {
            runs.entry(run.as_str()).or_default().push(entry.seq);
        }
    }
    for (run, seqs) in runs {
        if let Some(first) = seqs.first() {
            batch.insert(group_key(&run_prefix(run), *first), encode_group(&seqs));
        }
    }
    (batch, newest)
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
        let (batch, newest_pack) = append_batch(entries);
        self.write_guarded(&mut writer, "appending", || {
            self.sled.log.apply_batch(batch)?;
            self.sled.db.flush()?;
            Ok(())
        })?;
        self.touch_newest_pack(newest_pack);
        self.acked.store(new_last, Ordering::Release);
        self.record_acked(&mut writer);
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
        let legacy = self.guarded("reading the log", || {
            self.sled
                .log
                .range(&seq_key(after + 1)[..]..&PACKS_START[..])
                .take(limit)
                .collect::<sled::Result<Vec<_>>>()
        })?;
        let mut out = Vec::new();
        for (key, value) in legacy {
            let seq = decode_seq(&key)
                .ok_or_else(|| self.corrupt(format!("log key of {} bytes", key.len())))?;
            if seq <= acked {
                out.push((seq, value.to_vec()));
            }
        }
        // Packs from the one that may hold `after + 1` on.
        let start = match self.pack_holding(after + 1)? {
            Some((key, _)) => key.to_vec(),
            None => PACKS_START.to_vec(),
        };
        let mut packs = self.sled.log.range(start..EVENTS_END.to_vec());
        let mut before: Option<Pack> = None;
        while out.len() < limit {
            let Some(item) = self.guarded("reading the log", || packs.next().transpose())? else {
                break;
            };
            let (key, value) = item;
            let pack = self.decode_pack(&key, &value)?;
            // Past `acked` is what a failed append may have left in sled's memory.
            if pack.first > acked {
                break;
            }
            if let Some(before) = &before {
                pack.follows(before)
                    .map_err(|detail| self.corrupt(detail))?;
            }
            let pack = before.insert(pack);
            for (seq, bytes) in pack.iter() {
                if seq > acked || out.len() == limit {
                    return Ok(out);
                }
                if seq > after {
                    out.push((seq, bytes.to_vec()));
                }
            }
        }
        Ok(out)
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
        let mut cache = None;
        for seq in seqs {
            // A concurrent forget_run may have removed the entry since the index was read.
            if let Some(bytes) = self.entry(seq, &mut cache)? {
                out.push((seq, bytes));
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
            self.sled.meta.apply_batch(batch)?;
            self.sled.db.flush()?;
            Ok(())
        })?;
        writer.epoch = epoch;
        self.record_acked(&mut writer);
        self.update_marker(&mut writer);
        Ok(())
    }

    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError> {
        // Only snapshot writes replace the record, and they drop the copy first: a copy still
        // here is the current record.
        let value = match self.take_opened_snapshot() {
            Some(value) => value,
            None => {
                match self.guarded("reading the snapshot", || self.sled.meta.get(META_SNAPSHOT))? {
                    Some(value) => value,
                    None => return Ok(None),
                }
            }
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
        let chunks = self.plan_forget(groups)?;
        let last_seq = seq_key(self.acked());
        let epoch = writer.epoch + 1;
        self.write_guarded(&mut writer, "forgetting a run", || {
            for chunk in &chunks {
                (&self.sled.log, &self.sled.meta)
                    .transaction(|(log, meta)| {
                        // Recorded with the removal, so removing the newest entries never lowers
                        // last_seq after a reopen.
                        meta.insert(META_LAST_SEQ, &last_seq[..])?;
                        meta.insert(META_EPOCH, &seq_key(epoch)[..])?;
                        for key in &chunk.index_keys {
                            log.remove(key.clone())?;
                        }
                        for seq in &chunk.legacy {
                            log.remove(&seq_key(*seq)[..])?;
                        }
                        for (first, value) in &chunk.packs {
                            let key = pack_key(*first);
                            match value {
                                Some(value) => log.insert(&key[..], value.as_slice())?,
                                None => log.remove(&key[..])?,
                            };
                        }
                        Ok::<(), ConflictableTransactionError<()>>(())
                    })
                    .map_err(storage_error)?;
            }
            self.sled.db.flush()?;
            Ok(())
        })?;
        writer.epoch = epoch;
        self.record_acked(&mut writer);
        self.update_marker(&mut writer);
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        self.guarded("measuring size", || self.sled.db.size_on_disk())
            .unwrap_or(0)
    }
}

/// How long a clean close waits for sled to let go of its files before sealing them.
const SEAL_WAIT: Duration = Duration::from_secs(5);

/// How long a wedged handle's writes already handed to sled's IO threads get to land before
/// its lock is released.
const WEDGED_GRACE: Duration = Duration::from_millis(200);

impl Drop for SledJournal {
    fn drop(&mut self) {
        let mut writer = self.writer();
        if writer.wedged {
            // Dropping sled would flush and wait forever (see `Writer::wedged`). Leaked, it never
            // writes again: nothing calls it, its flusher is off, and the flush it waits for can
            // never start. Its lock goes, so the journal can be opened again.
            drop(writer);
            std::thread::sleep(WEDGED_GRACE);
            db_lock::release_leaked_locks(&self.path.join(SLED_DB_FILE));
            return;
        }
        self.update_marker(&mut writer);
        let clean = writer.poisoned.is_none();
        let state = Marker {
            acked: self.acked(),
            epoch: writer.epoch,
        };
        drop(writer);
        // SAFETY: `self.sled` is not used again: this is the end of `drop`, and nothing below
        // touches it.
        drop(unsafe { ManuallyDrop::take(&mut self.sled) });
        if clean {
            // Best effort: without a seal the next open judges a copy, which is only slower.
            let path = &self.path;
            db_lock::with_db_unlocked(&path.join(SLED_DB_FILE), SEAL_WAIT, || {
                let _ = seal::write(path, state);
            });
        }
    }
}
