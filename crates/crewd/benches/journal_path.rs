//! Issue 3 benchmark (not a test: it prints figures): durable events per second through the
//! daemon's journal path, against a raw sled `apply_batch` + `flush` loop on the same disk
//! (targets: ≥ 0.7 of raw and ≥ 100,000 events/s).
//!
//! The journal path is crewd's own code from the actor's hand-off on: `writer::spawn`'s thread
//! (group commit of whatever piled up, JSON encoding of each `Event`, `SledJournal::append` with
//! its per-run index, the durable-seq update, publishing to the event bus, one commit callback
//! per batch). A producer thread plays the actor: it numbers `task.steered` events and hands
//! them over `--per-turn` at a time (one batch and one callback per actor turn; a `team.steer`
//! call is one turn of one event), keeping at most `--in-flight` events unacknowledged, as
//! that many waiting callers would. An event counts once its callback says it is durable.
//! What this leaves out is the JSON-RPC transport in front of the actor:
//! `target/release/bench-journal` measures the same events end to end over the socket.
//!
//! The raw loop writes values of the encoded events' size in batches of `--in-flight` (the most
//! one flush of the daemon could group). The two alternate in slices so both see the same disk.
//! The state lives in `CREW_BENCH_DIR` (else cargo's target tmp dir): put it on the disk whose
//! figures you want.
//!
//! `cargo bench -p crewd --bench journal_path -- [--in-flight 1024] [--per-turn 1] [--secs 6]`

use chrono::Utc;
use crew_core::run::{Delivery, Event, EventBody};
use crew_journal::{Entry, Journal, JournalError, SledJournal};
use crewd::config::Config;
use crewd::shared::Shared;
use crewd::writer::{self, Batch, CommitFn, WriterHandle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const RATIO_TARGET: f64 = 0.7;
const RATE_TARGET: f64 = 100_000.0;
const SLICES: u32 = 6;

struct Args {
    in_flight: u64,
    per_turn: u64,
    secs: u64,
}

fn parse_args() -> Args {
    let mut args = Args {
        in_flight: 1024,
        per_turn: 1,
        secs: 6,
    };
    // cargo bench passes `--bench`; anything else is ours.
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or_else(|| panic!("{flag} needs a positive number"));
        match flag.as_str() {
            "--in-flight" => args.in_flight = value,
            "--per-turn" => args.per_turn = value,
            "--secs" => args.secs = value,
            other => panic!("unknown flag {other}"),
        }
    }
    args.per_turn = args.per_turn.min(args.in_flight);
    args
}

/// The journal crewd opens, counting its group commits.
struct Counted {
    inner: SledJournal,
    appends: AtomicU64,
}

impl Journal for Counted {
    fn append(&self, entries: &[Entry]) -> Result<(), JournalError> {
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.inner.append(entries)
    }
    fn last_seq(&self) -> u64 {
        self.inner.last_seq()
    }
    fn read_after(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        self.inner.read_after(after, limit)
    }
    fn read_run_after(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        self.inner.read_run_after(run, after, limit)
    }
    fn write_snapshot(&self, seq: u64, bytes: &[u8]) -> Result<(), JournalError> {
        self.inner.write_snapshot(seq, bytes)
    }
    fn read_snapshot(&self) -> Result<Option<(u64, Vec<u8>)>, JournalError> {
        self.inner.read_snapshot()
    }
    fn forget_run(&self, run: &str) -> Result<(), JournalError> {
        self.inner.forget_run(run)
    }
    fn size_on_disk(&self) -> u64 {
        self.inner.size_on_disk()
    }
}

fn steered(seq: u64) -> Event {
    Event {
        seq,
        run_seq: seq,
        time: Utc::now(),
        run_id: Some("r-20261130-bench-0001".into()),
        task_id: Some("t-0002-second".into()),
        message: None,
        body: EventBody::TaskSteered {
            message: "bench steer: keep going".into(),
            delivered: Delivery::Queued,
        },
    }
}

/// Events handed over and not yet durable, and how many became durable.
#[derive(Default)]
struct Window {
    open: Mutex<u64>,
    changed: Condvar,
    durable: AtomicU64,
    failed: AtomicU64,
}

impl Window {
    /// Panics when nothing became durable for a minute: the writer has stopped (a callback it
    /// dropped would otherwise keep this waiting forever).
    fn wait_below(&self, limit: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while *open >= limit {
            let (guard, waited) = self
                .changed
                .wait_timeout(open, Duration::from_secs(60))
                .unwrap_or_else(|e| e.into_inner());
            open = guard;
            if waited.timed_out() {
                panic!("no event became durable for 60 s ({} in flight)", *open);
            }
        }
    }

    fn add(&self, n: u64) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) += n;
    }

    fn done(&self, n: u64, ok: bool) {
        let counter = if ok { &self.durable } else { &self.failed };
        counter.fetch_add(n, Ordering::Relaxed);
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) -= n;
        self.changed.notify_all();
    }
}

/// The actor's side for one slice: hand over events for `dur`, then wait until all are durable.
/// Returns (events made durable, time taken).
fn daemon_slice(
    writer: &WriterHandle,
    window: &Arc<Window>,
    next_seq: &mut u64,
    args: &Args,
    dur: Duration,
) -> (u64, Duration) {
    let before = window.durable.load(Ordering::Relaxed);
    let start = Instant::now();
    while start.elapsed() < dur {
        window.wait_below(args.in_flight - args.per_turn + 1);
        let events: Vec<Event> = (0..args.per_turn).map(|i| steered(*next_seq + i)).collect();
        *next_seq += args.per_turn;
        window.add(args.per_turn);
        let w = window.clone();
        let n = args.per_turn;
        let callback: CommitFn = Box::new(move |res| w.done(n, res.is_ok()));
        writer.send(Batch {
            events,
            callbacks: vec![callback],
            snapshot: None,
        });
    }
    window.wait_below(1);
    (
        window.durable.load(Ordering::Relaxed) - before,
        start.elapsed(),
    )
}

struct Raw {
    db: sled::Db,
    log: sled::Tree,
    next: u64,
    value: Vec<u8>,
}

impl Raw {
    fn open(dir: &Path, value_len: usize) -> Raw {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(Config::default().journal_cache_mb << 20)
            .flush_every_ms(None)
            .open()
            .unwrap_or_else(|e| panic!("sled open: {e}"));
        let log = db.open_tree("log").unwrap_or_else(|e| panic!("sled: {e}"));
        Raw {
            db,
            log,
            next: 0,
            value: vec![b'x'; value_len],
        }
    }

    fn slice(&mut self, batch: u64, dur: Duration) -> (u64, Duration) {
        let start = Instant::now();
        let mut written = 0;
        while start.elapsed() < dur {
            let mut b = sled::Batch::default();
            for _ in 0..batch {
                self.next += 1;
                b.insert(&self.next.to_be_bytes()[..], self.value.as_slice());
            }
            self.log
                .apply_batch(b)
                .unwrap_or_else(|e| panic!("apply_batch: {e}"));
            self.db.flush().unwrap_or_else(|e| panic!("flush: {e}"));
            written += batch;
        }
        (written, start.elapsed())
    }
}

#[derive(Default)]
struct Tally {
    events: u64,
    time: Duration,
}

impl Tally {
    fn add(&mut self, (events, time): (u64, Duration)) {
        self.events += events;
        self.time += time;
    }

    fn per_second(&self) -> f64 {
        self.events as f64 / self.time.as_secs_f64().max(1e-9)
    }
}

fn bench_dir() -> PathBuf {
    std::env::var_os("CREW_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

fn main() {
    let args = parse_args();
    let base = bench_dir();
    std::fs::create_dir_all(&base).unwrap_or_else(|e| panic!("{}: {e}", base.display()));
    let tmp = tempfile::tempdir_in(&base).unwrap_or_else(|e| panic!("temp dir: {e}"));
    let state_dir = tmp.path().join("state");
    std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("state dir: {e}"));

    let config = Config::default();
    let journal = Arc::new(Counted {
        inner: SledJournal::open(&state_dir.join("journal"), config.journal_cache_mb << 20)
            .unwrap_or_else(|e| panic!("journal: {e}")),
        appends: AtomicU64::new(0),
    });
    let shared = Arc::new(Shared::new(
        config,
        state_dir.clone(),
        tmp.path().join("unused.sock"),
        journal.clone(),
        0,
    ));
    let (writer, join) = writer::spawn(shared);
    let value_len = serde_json::to_vec(&steered(1_000_000))
        .map(|v| v.len())
        .unwrap_or(200);
    let mut raw = Raw::open(&tmp.path().join("raw"), value_len);

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "journal path bench: {} events in flight, {} per actor turn, {}-byte events, {} alternating slices of {:.1} s each, in {}; loadavg {}",
        args.in_flight,
        args.per_turn,
        value_len,
        SLICES,
        args.secs as f64 / SLICES as f64,
        base.display(),
        load.trim()
    );
    let slice = Duration::from_secs_f64(args.secs as f64 / SLICES as f64);
    let window = Arc::new(Window::default());
    let (mut ours, mut theirs) = (Tally::default(), Tally::default());
    let mut next_seq = 1;
    for _ in 0..SLICES {
        theirs.add(raw.slice(args.in_flight, slice));
        ours.add(daemon_slice(&writer, &window, &mut next_seq, &args, slice));
    }
    drop(writer);
    let _ = join.join();

    let failed = window.failed.load(Ordering::Relaxed);
    let appends = journal.appends.load(Ordering::Relaxed).max(1);
    let durable = journal.last_seq();
    if failed > 0 || durable != next_seq - 1 {
        panic!(
            "{failed} events failed; journal last seq {durable}, handed over {}",
            next_seq - 1
        );
    }
    let (rate, raw_rate) = (ours.per_second(), theirs.per_second());
    let ratio = rate / raw_rate;
    println!(
        "raw sled apply_batch+flush, batches of {}: {:.0} events/s",
        args.in_flight, raw_rate
    );
    println!(
        "crewd journal path: {} events durable in {} group commits ({:.0} per commit): {:.0} events/s",
        ours.events,
        appends,
        ours.events as f64 / appends as f64,
        rate
    );
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!(
        "journal path / raw = {ratio:.2} (target >= {RATIO_TARGET}): {}",
        verdict(ratio >= RATIO_TARGET)
    );
    println!(
        "journal path rate {rate:.0}/s (target >= {RATE_TARGET:.0}/s): {}",
        verdict(rate >= RATE_TARGET)
    );
}
