//! Durable events/s of `SledJournal::append` against a raw sled `apply_batch` + `flush` loop on
//! the same disk, for group commits of 1, 64 and 1024 events of ~300 bytes.
//!
//! The two loops alternate in short slices so that both see the same disk conditions; each
//! keeps its own database (in `CREW_JOURNAL_BENCH_DIR`, else cargo's target tmp dir) for the
//! whole run. Journal events are spread over 8 runs, as with 8 runs in flight in the daemon, so
//! the per-run index is exercised too. Total run time ≈ 3 sizes × ROUNDS × 2 × SLICE ≈ 22 s.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crew_journal::{Entry, Journal, SledJournal, DEFAULT_CACHE_BYTES};

const BATCHES: [usize; 3] = [1, 64, 1024];
const ROUNDS: u32 = 6;
const SLICE: Duration = Duration::from_millis(600);
const EVENT_BYTES: usize = 300;
const RUNS: u64 = 8;

/// Target from the project's plan: the journal keeps ≥ 70% of raw sled's durable throughput.
const TARGET_RATIO: f64 = 0.7;

trait Sink {
    /// Appends one group commit of `size` events durably; returns how many were written.
    fn commit(&mut self, size: usize) -> usize;
}

struct Raw {
    db: sled::Db,
    log: sled::Tree,
    next: u64,
    payload: Vec<u8>,
}

impl Sink for Raw {
    fn commit(&mut self, size: usize) -> usize {
        let mut batch = sled::Batch::default();
        for _ in 0..size {
            self.next += 1;
            batch.insert(&self.next.to_be_bytes()[..], self.payload.as_slice());
        }
        self.log.apply_batch(batch).unwrap();
        self.db.flush().unwrap();
        size
    }
}

struct Ours {
    journal: SledJournal,
    payload: Vec<u8>,
    runs: Vec<String>,
}

impl Sink for Ours {
    fn commit(&mut self, size: usize) -> usize {
        let first = self.journal.last_seq() + 1;
        let entries: Vec<Entry> = (first..first + size as u64)
            .map(|seq| Entry {
                seq,
                run: self.runs.get((seq % RUNS) as usize).cloned(),
                bytes: self.payload.clone(),
            })
            .collect();
        self.journal.append(&entries).unwrap();
        size
    }
}

#[derive(Default)]
struct Tally {
    events: usize,
    time: Duration,
}

impl Tally {
    fn run_slice(&mut self, sink: &mut dyn Sink, size: usize) {
        let start = Instant::now();
        while start.elapsed() < SLICE {
            self.events += sink.commit(size);
        }
        self.time += start.elapsed();
    }

    fn per_second(&self) -> f64 {
        self.events as f64 / self.time.as_secs_f64()
    }
}

fn bench_dir() -> PathBuf {
    std::env::var_os("CREW_JOURNAL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

fn open_raw(dir: &Path) -> Raw {
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(DEFAULT_CACHE_BYTES)
        .mode(sled::Mode::LowSpace)
        .open()
        .unwrap();
    Raw {
        log: db.open_tree("log").unwrap(),
        db,
        next: 0,
        payload: vec![b'x'; EVENT_BYTES],
    }
}

fn main() {
    let base = bench_dir();
    std::fs::create_dir_all(&base).unwrap();
    let tmp = tempfile::tempdir_in(&base).unwrap();
    println!(
        "journal bench: {EVENT_BYTES}-byte events over {RUNS} runs, {ROUNDS} alternating slices of {SLICE:?} per loop, in {}",
        base.display()
    );
    println!(
        "{:>6} {:>16} {:>16} {:>7}",
        "batch", "raw sled ev/s", "journal ev/s", "ratio"
    );
    let mut worst = f64::INFINITY;
    for size in BATCHES {
        let mut raw = open_raw(&tmp.path().join(format!("raw-{size}")));
        let mut ours = Ours {
            journal: SledJournal::open(
                &tmp.path().join(format!("journal-{size}")),
                DEFAULT_CACHE_BYTES,
            )
            .unwrap(),
            payload: vec![b'x'; EVENT_BYTES],
            runs: (0..RUNS).map(|r| format!("run-{r:08}")).collect(),
        };
        let (mut raw_tally, mut ours_tally) = (Tally::default(), Tally::default());
        for _ in 0..ROUNDS {
            raw_tally.run_slice(&mut raw, size);
            ours_tally.run_slice(&mut ours, size);
        }
        let ratio = ours_tally.per_second() / raw_tally.per_second();
        worst = worst.min(ratio);
        println!(
            "{size:>6} {:>16.0} {:>16.0} {ratio:>7.2}",
            raw_tally.per_second(),
            ours_tally.per_second()
        );
    }
    println!(
        "lowest ratio {worst:.2} (target >= {TARGET_RATIO}): {}",
        if worst >= TARGET_RATIO {
            "met"
        } else {
            "NOT met"
        }
    );
}
