//! The journal writer: a plain thread that makes batches durable (group commit), then runs their
//! commit callbacks and publishes their events, in order.
//!
//! It is a thread, not a task, because sled's `flush` blocks (and `flush_async` can deadlock:
//! sled#1308). While the writer flushes, the actor keeps deciding; whatever piles up meanwhile
//! goes into the next flush, so many changes share one fsync.
//!
//! When a write fails (disk full, I/O error), the events stay queued in order and are written
//! when the journal works again; their callers are told it failed now. A failed write leaves the
//! sled handle unusable, reads included, and sled cannot even open a journal on a disk without
//! a little free space. So the writer keeps a reserve file next to the journal: after a failure
//! it deletes the reserve and reopens the journal at once, which keeps journal reads (events,
//! subscriptions, evicted runs) working while the disk stays full. It retries with a growing
//! pause, and writes again only once it could put the reserve back, i.e. once space returned.
//! Until a write succeeds, `shared.storage_error()` is set and the actor refuses new changes.

use crate::journal_slot::Closed;
use crate::shared::{Published, Shared};
use crew_core::run::{Event, EventBody, Snapshot};
use crew_journal::{Entry, Journal, JournalError, SledJournal};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub type CommitFn = Box<dyn FnOnce(Result<(), Arc<str>>) + Send>;

pub struct Batch {
    pub events: Vec<Event>,
    pub callbacks: Vec<CommitFn>,
    /// Serialized and written here, after the batch's events are durable: the actor only
    /// takes it (cheap, see `State::snapshot`).
    pub snapshot: Option<Box<Snapshot>>,
}

#[derive(Clone)]
pub struct WriterHandle {
    tx: mpsc::Sender<Batch>,
}

impl WriterHandle {
    pub fn send(&self, b: Batch) {
        if let Err(mpsc::SendError(b)) = self.tx.send(b) {
            for cb in b.callbacks {
                cb(Err(Arc::from("the journal writer has stopped")));
            }
        }
    }
}

pub fn spawn(shared: Arc<Shared>) -> (WriterHandle, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<Batch>();
    let join = std::thread::Builder::new()
        .name("crewd-journal".into())
        .spawn(move || Writer::new(shared).run(rx))
        .unwrap_or_else(|e| panic!("cannot start the journal writer thread: {e}"));
    (WriterHandle { tx }, join)
}

fn encode(ev: &Event) -> Entry {
    // `run.forgotten` is not indexed under its run: `forget_run` deletes the run's indexed
    // entries, and this one must survive so a replay from an older snapshot forgets the run too.
    let run = match ev.body {
        EventBody::RunForgotten {} => None,
        _ => ev.run_id.clone(),
    };
    Entry {
        seq: ev.seq,
        run,
        bytes: serde_json::to_vec(ev).unwrap_or_default(),
    }
}

/// Open the journal right after this process dropped its handle. sled releases the file lock
/// of a dropped handle from a background thread a moment later, so `Locked` here is our own
/// old handle: wait it out (bounded) instead of leaving journal reads failing until the next
/// retry. `reopen`, not `open`: the files are the ones this writer was writing, and on a full
/// disk there is no room to judge a copy of them first.
fn open_after_drop(shared: &Shared) -> Result<SledJournal, JournalError> {
    let cache = shared.config.journal_cache_mb << 20;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match SledJournal::reopen(&shared.journal_dir(), cache) {
            Err(JournalError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            other => return other,
        }
    }
}

/// Space kept free for reopening the journal after the disk filled up (`<state>/journal.reserve`).
const RESERVE_BYTES: usize = 1 << 20;

/// Pause before the first retry after a failure; doubled per failure up to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// What arrived from the actor since the last write.
#[derive(Default)]
struct Incoming {
    events: Vec<Event>,
    /// Callbacks of batches that carry events: they learn whether those became durable.
    with_events: Vec<CommitFn>,
    /// Callbacks of batches without events (reads): nothing of theirs needs writing, so they
    /// are answered even while older events wait for the disk.
    bare: Vec<CommitFn>,
    snapshot: Option<Box<Snapshot>>,
}

impl Incoming {
    fn add(&mut self, b: Batch) {
        if b.events.is_empty() {
            self.bare.extend(b.callbacks);
        } else {
            self.events.extend(b.events);
            self.with_events.extend(b.callbacks);
        }
        if b.snapshot.is_some() {
            self.snapshot = b.snapshot;
        }
    }
}

struct Writer {
    shared: Arc<Shared>,
    /// Events not written yet because the journal failed; written first, in order.
    stuck: Vec<Event>,
    /// The newest snapshot that arrived while events were stuck.
    held_snapshot: Option<Box<Snapshot>>,
    /// The handle in the slot failed and must be replaced before the next write.
    needs_reopen: bool,
    /// The reserve file was given up for a reopen and is not back yet.
    reserve_used: bool,
    retry_at: Instant,
    pause: Duration,
    failures: u64,
}

impl Writer {
    fn new(shared: Arc<Shared>) -> Self {
        if let Err(e) = make_reserve(&shared) {
            tracing::warn!(error = %e, "cannot keep a reserve for a full disk");
        }
        Writer {
            shared,
            stuck: Vec::new(),
            held_snapshot: None,
            needs_reopen: false,
            reserve_used: false,
            retry_at: Instant::now(),
            pause: RETRY_FIRST,
            failures: 0,
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Batch>) {
        loop {
            let mut incoming = Incoming::default();
            let mut closing = false;
            // Something to retry: held events, or a reserve to put back before the journal
            // counts as working again.
            let retrying = !self.stuck.is_empty() || self.reserve_used;
            if !retrying {
                match rx.recv() {
                    Ok(b) => incoming.add(b),
                    Err(_) => return,
                }
            } else {
                let wait = self.retry_at.saturating_duration_since(Instant::now());
                match rx.recv_timeout(wait) {
                    Ok(b) => incoming.add(b),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => closing = true,
                }
            }
            while let Ok(b) = rx.try_recv() {
                incoming.add(b);
            }
            if retrying && !closing && Instant::now() < self.retry_at {
                self.hold(incoming);
                continue;
            }
            self.write(incoming);
            if closing {
                if !self.stuck.is_empty() {
                    tracing::error!(
                        pending = self.stuck.len(),
                        "stopping with changes the journal could not take; they were never acknowledged"
                    );
                }
                return;
            }
        }
    }

    /// The journal is known to be failing and it is not time to retry: queue the events, tell
    /// their callers now.
    fn hold(&mut self, incoming: Incoming) {
        let cause = self
            .shared
            .storage_error()
            .unwrap_or_else(|| Arc::from("the journal cannot write"));
        self.stuck.extend(incoming.events);
        if incoming.snapshot.is_some() {
            self.held_snapshot = incoming.snapshot;
        }
        for cb in incoming.with_events {
            run_callback(cb, Err(cause.clone()));
        }
        for cb in incoming.bare {
            run_callback(cb, Ok(()));
        }
    }

    fn write(&mut self, incoming: Incoming) {
        if self.reserve_used {
            match make_reserve(&self.shared) {
                Ok(()) => self.reserve_used = false,
                // Still full as long as the reserve does not fit again: writing held events now
                // would only poison the handle that serves reads. That holds with nothing held
                // too (the failed write turned out durable at the reopen): a batch without
                // events must not pass for a working journal, or new changes would be accepted
                // only to fail on the full disk.
                Err(e) => {
                    let e = JournalError::Io {
                        context: "waiting for free space".into(),
                        source: e,
                    };
                    self.failed(&e, incoming);
                    if self.needs_reopen {
                        // An earlier reopen failed (the handle was still in use, or others
                        // took the freed space): keep trying, for the reads.
                        let _ = self.reopen();
                    }
                    return;
                }
            }
        }
        if self.needs_reopen {
            if let Err(e) = self.reopen() {
                self.failed(&e, incoming);
                return;
            }
        }
        let mut events = std::mem::take(&mut self.stuck);
        events.extend(incoming.events);
        let snapshot = incoming.snapshot.or(self.held_snapshot.take());
        let entries: Vec<Entry> = events.iter().map(encode).collect();
        let res = if entries.is_empty() {
            Ok(())
        } else {
            self.shared.journal.append(&entries)
        };
        match res {
            Ok(()) => {
                if self.failures > 0 {
                    tracing::info!(
                        written = events.len(),
                        failures = self.failures,
                        "the journal writes again"
                    );
                }
                self.failures = 0;
                self.pause = RETRY_FIRST;
                self.shared.set_storage_error(None);
                self.published(&events, entries);
                for cb in incoming.with_events.into_iter().chain(incoming.bare) {
                    run_callback(cb, Ok(()));
                }
                if let Some(snapshot) = snapshot {
                    self.write_snapshot(&snapshot);
                }
            }
            Err(e) => {
                self.stuck = events;
                self.held_snapshot = snapshot;
                self.needs_reopen = poisons(&e);
                let callbacks = Incoming {
                    events: Vec::new(),
                    with_events: incoming.with_events,
                    bare: incoming.bare,
                    snapshot: None,
                };
                self.failed(&e, callbacks);
                if self.needs_reopen {
                    // At once, so that reads work again while the disk stays full (when sled
                    // can open it at all).
                    let _ = self.reopen();
                }
            }
        }
    }

    /// Best effort: a snapshot that cannot be made only means start-up replays more.
    fn write_snapshot(&mut self, snapshot: &Snapshot) {
        let _span = tracing::debug_span!("snapshot", seq = snapshot.last_seq()).entered();
        let bytes = match serde_json::to_vec(snapshot) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, "cannot serialize a snapshot; start-up will replay more");
                return;
            }
        };
        if let Err(e) = self
            .shared
            .journal
            .write_snapshot(snapshot.last_seq(), &bytes)
        {
            tracing::warn!(error = %e, "snapshot failed; start-up will replay more");
            self.needs_reopen = poisons(&e);
            if self.needs_reopen {
                let _ = self.reopen();
            }
        }
    }

    /// A write (or reopen) failed: `incoming`'s events must already be in `stuck`.
    fn failed(&mut self, e: &JournalError, incoming: Incoming) {
        self.stuck.extend(incoming.events);
        if incoming.snapshot.is_some() {
            self.held_snapshot = incoming.snapshot;
        }
        let msg: Arc<str> = Arc::from(e.to_string());
        self.failures += 1;
        // Once, then now and then: a full disk would otherwise fill the log too.
        if self.failures == 1 || self.failures.is_multiple_of(50) {
            tracing::error!(
                error = %msg,
                pending = self.stuck.len(),
                failures = self.failures,
                "journal write failed; changes are held and retried"
            );
        }
        self.shared.set_storage_error(Some(msg.clone()));
        for cb in incoming.with_events {
            run_callback(cb, Err(msg.clone()));
        }
        for cb in incoming.bare {
            run_callback(cb, Ok(()));
        }
        self.retry_at = Instant::now() + self.pause;
        self.pause = (self.pause * 2).min(RETRY_MAX);
    }

    /// Drop the failed handle and open the journal again. Events of the failed write that
    /// turn out to be durable after all are published and leave the queue.
    fn reopen(&mut self) -> Result<(), JournalError> {
        // Room for sled to open (it writes while opening); put back before the next write.
        match std::fs::remove_file(reserve_path(&self.shared)) {
            Ok(()) => self.reserve_used = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.reserve_used = true,
            Err(e) => tracing::warn!(error = %e, "cannot delete the disk reserve"),
        }
        let cause = self
            .shared
            .storage_error()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "an earlier write failed".into());
        let last = self.shared.journal.last_seq();
        retire(
            self.shared
                .journal_slot
                .replace(Arc::new(Closed::new(last, cause))),
            RETIRE_WAIT,
        );
        let journal = match open_after_drop(&self.shared) {
            Ok(j) => j,
            Err(e) => {
                if self.failures <= 1 || self.failures.is_multiple_of(50) {
                    tracing::warn!(error = %e, "cannot reopen the journal yet; journal reads fail until it can");
                }
                return Err(e);
            }
        };
        let durable = journal.last_seq();
        drop(self.shared.journal_slot.replace(Arc::new(journal)));
        self.needs_reopen = false;
        tracing::info!(last_seq = durable, "journal reopened");
        let done = self.stuck.iter().take_while(|e| e.seq <= durable).count();
        if done > 0 {
            let events: Vec<Event> = self.stuck.drain(..done).collect();
            let entries: Vec<Entry> = events.iter().map(encode).collect();
            self.published(&events, entries);
        }
        Ok(())
    }

    /// `events` are durable: advance the durable seq and tell subscribers.
    fn published(&self, events: &[Event], entries: Vec<Entry>) {
        if let Some(last) = events.last() {
            self.shared.set_durable(last.seq);
        }
        for (ev, entry) in events.iter().zip(entries) {
            self.shared.publish(Published {
                seq: ev.seq,
                run_id: ev.run_id.as_deref().map(Arc::from),
                json: Arc::from(String::from_utf8(entry.bytes).unwrap_or_default()),
            });
        }
    }
}

/// How long the writer waits for a failed handle to be dropped before it opens the journal
/// again (its file lock goes with it).
const RETIRE_WAIT: Duration = Duration::from_secs(2);

/// Drops a failed handle on a thread of its own and waits for that at most `wait`: sled's
/// drop flushes, and a handle that cannot come back must never stop the writer (SIGTERM, reads
/// and every later write depend on it). crew-journal leaks the handles sled could never finish
/// (`SledJournal`'s drop), releasing their lock, so this normally returns at once; if a drop
/// hangs anyway, its thread is all that is lost, and the reopen waits for the lock as usual.
fn retire(old: Arc<dyn Journal>, wait: Duration) {
    let (handle_tx, handle_rx) = mpsc::channel::<Arc<dyn Journal>>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("crewd-journal-retire".into())
        .spawn(move || {
            if let Ok(old) = handle_rx.recv() {
                drop(old);
            }
            let _ = done_tx.send(());
        });
    match spawned {
        Ok(_) => {
            if handle_tx.send(old).is_ok() {
                let _ = done_rx.recv_timeout(wait);
            }
        }
        Err(e) => {
            // Dropping it here could hang the writer; leaking it keeps its lock until exit.
            tracing::warn!(error = %e, "cannot start a thread to close the failed journal handle; leaking it");
            std::mem::forget(old);
        }
    }
}

/// Closes the journal at shutdown, after the writer stopped: a journal closed cleanly seals its
/// files, so the next start checks them without copying them (crew-journal's `seal.rs`). Waits
/// (bounded) for readers still holding the handle, and drops it as `retire` does.
pub fn close_journal(shared: &Shared) {
    let last = shared.journal.last_seq();
    let old = shared
        .journal_slot
        .replace(Arc::new(Closed::new(last, "crewd is stopping".into())));
    let deadline = Instant::now() + Duration::from_secs(5);
    while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    retire(old, CLOSE_WAIT);
}

/// How long shutdown waits for the journal to close and seal its files (they are read once to
/// checksum them); past it crewd exits anyway and the next start judges a copy instead.
const CLOSE_WAIT: Duration = Duration::from_secs(60);

fn reserve_path(shared: &Shared) -> std::path::PathBuf {
    shared.state_dir.join("journal.reserve")
}

/// Create the reserve file if it is missing; a partial one is removed again.
fn make_reserve(shared: &Shared) -> std::io::Result<()> {
    use std::io::Write;
    let path = reserve_path(shared);
    if path.exists() {
        return Ok(());
    }
    let res = std::fs::File::create(&path).and_then(|mut f| {
        f.write_all(&vec![0u8; RESERVE_BYTES])?;
        f.sync_all()
    });
    if res.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    res
}

/// Errors after which the handle is unusable (crew-journal poisons itself on any failed write).
fn poisons(e: &JournalError) -> bool {
    matches!(
        e,
        JournalError::Io { .. } | JournalError::Poisoned { .. } | JournalError::Backend { .. }
    )
}

/// A callback that panics must not take the writer (and with it every later commit) down.
fn run_callback(cb: CommitFn, res: Result<(), Arc<str>>) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || cb(res))).is_err() {
        tracing::error!("a commit callback panicked");
    }
}
