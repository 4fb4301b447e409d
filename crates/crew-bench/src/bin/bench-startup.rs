//! Start-up with 1,000,000 journaled events (target: < 1 s from spawning crewd to its first
//! successful `daemon.ping`), against the start-up of the same crewd on an empty state dir.
//!
//! The events are real ones: a template run of `--steps` independent fake-agent tasks goes
//! through a daemon, its events are read back with `team.events`, and copies of them (new run
//! id, new seq; each one checked to parse as `crew_core::run::Event`) are written with
//! crew-journal directly into a fresh state dir until `--events` are there. Along the way the
//! events are applied to a `crew_core::run::State` the way crewd does (finished runs beyond
//! `--resident-runs` evicted, oldest finished first), and that State's snapshot (finished runs as
//! summaries only) is taken every `--snapshot-every` events, as crewd's actor does in `commit`,
//! and serialized, as crewd's journal writer then does. Both are timed.
//!
//! crewd then starts on that state dir three times:
//! 1. with no snapshot at all: every event replayed (the worst case; crewd itself never gets
//!    there, it snapshots every `snapshot_every` events);
//! 2. after a clean stop, which writes a snapshot of the whole state (a replay of nothing);
//! 3. with the snapshot the bench made at crewd's cadence, placed so that `snapshot_every - 1`
//!    events follow it: the slowest start a daemon that ran with that cadence can have.
//!
//! Usage: `bench-startup [--events 1000000] [--steps 16] [--snapshot-every 10000]
//! [--resident-runs 256] [--keep]` (the last two are passed to crewd too; the defaults are crewd's).
//! `--keep` leaves the state dirs and the cadence snapshot behind; `bench-startup --reuse DIR
//! [--as-saved]` times the clean-stop and cadence starts again on them (re-encoding the saved
//! snapshot in the current format, or with `--as-saved` putting it as it was written).

mod daemon_support;

use crew_core::run::{Event, EventBody, State};
use crew_journal::{Entry, Journal, SledJournal, DEFAULT_CACHE_BYTES};
use daemon_support::*;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const TARGET: Duration = Duration::from_secs(1);

/// A start of crewd timed to its first `daemon.ping`, with crewd's CPU time and RSS at that
/// point and its `daemon.status`. The daemon is left running.
struct Ready {
    took: Duration,
    cpu: Duration,
    rss_kib: u64,
    status: Value,
}

fn start_timed(d: &mut Daemon) -> Ready {
    let took = d.spawn();
    let cpu = cpu_time(&d.pid().to_string());
    let rss_kib = d.rss_kib();
    let status = d.call("daemon.status", json!({}));
    Ready {
        took,
        cpu,
        rss_kib,
        status,
    }
}
const APPEND_CHUNK: usize = 10_000;

struct Args {
    events: u64,
    steps: usize,
    snapshot_every: u64,
    resident_runs: usize,
    /// Leave the state dirs behind (for profiling crewd on them), with the cadence snapshot
    /// saved next to them.
    keep: bool,
    /// A root left by `--keep`: time crewd on it again instead of writing a new journal.
    reuse: Option<std::path::PathBuf>,
    /// With `--reuse`: put the saved cadence snapshot as it was written, not re-encoded in the
    /// current snapshot format (an older crewd's snapshot must still load).
    as_saved: bool,
    /// With `--reuse`: only put the snapshot (to start crewd by hand, e.g. under perf).
    put_only: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        events: 1_000_000,
        steps: 16,
        snapshot_every: 10_000,
        resident_runs: 256,
        keep: false,
        reuse: None,
        as_saved: false,
        put_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--keep" => {
                a.keep = true;
                continue;
            }
            "--as-saved" => {
                a.as_saved = true;
                continue;
            }
            "--put-only" => {
                a.put_only = true;
                continue;
            }
            "--reuse" => {
                let dir = it
                    .next()
                    .unwrap_or_else(|| fail("--reuse needs a directory left by --keep"));
                a.reuse = Some(dir.into());
                continue;
            }
            _ => {}
        }
        let value = it
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or_else(|| fail(format!("{flag} needs a positive number")));
        match flag.as_str() {
            "--events" => a.events = value,
            "--steps" => a.steps = value as usize,
            "--snapshot-every" => a.snapshot_every = value,
            "--resident-runs" => a.resident_runs = value as usize,
            _ => fail(format!("unknown flag {flag}")),
        }
    }
    a
}

/// Every string equal to or containing `from` gets `to` instead.
fn replace_strings(v: &mut Value, from: &str, to: &str) {
    match v {
        Value::String(s) if s.contains(from) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|x| replace_strings(x, from, to)),
        Value::Object(map) => map.values_mut().for_each(|x| replace_strings(x, from, to)),
        _ => {}
    }
}

/// The events of one finished run of `steps` fake tasks, and that run's id.
fn template(steps: usize) -> (String, Vec<Value>) {
    let root = bench_root("crew-bench-startup-template");
    let d = Daemon::start(root.path(), "");
    d.bulk_team("tpl", steps, |i| format!("Item {i}. [fake:turns=2]"));
    let started = d.call(
        "team.run",
        json!({"goal": "start-up bench", "cwd": d.work.display().to_string(),
               "team": "tpl", "runtime": "fake", "concurrency": 8}),
    );
    let run = started["runId"].as_str().unwrap_or_default().to_string();
    let status = d.wait(&run);
    if status != "completed" {
        fail(format!("template run ended {status}"));
    }
    let events = d.events(&run);
    (run, events)
}

/// What crewd's actor would have done with the events: the State it keeps, evicting finished
/// runs beyond the bound (the least recently finished first), and its snapshots.
struct Shadow {
    state: State,
    finished: VecDeque<String>,
    resident_runs: usize,
    snapshot_every: u64,
    /// The seq after which `snapshot_every - 1` events remain; snapshots fall on it and every
    /// `snapshot_every` events before it.
    last_at: u64,
    snapshot: Option<(u64, Vec<u8>)>,
    snapshots: u32,
    /// Taking the snapshots (on crewd's actor) and serializing them (on its journal writer).
    take: Duration,
    serialize: Duration,
}

impl Shadow {
    fn new(total: u64, snapshot_every: u64, resident_runs: usize) -> Shadow {
        Shadow {
            state: State::default(),
            finished: VecDeque::new(),
            resident_runs,
            snapshot_every,
            last_at: total.saturating_sub(snapshot_every - 1),
            snapshot: None,
            snapshots: 0,
            take: Duration::ZERO,
            serialize: Duration::ZERO,
        }
    }

    fn apply(&mut self, ev: &Event) {
        self.state.apply(ev);
        if let (
            EventBody::RunCompleted { .. }
            | EventBody::RunFailed { .. }
            | EventBody::RunCancelled { .. },
            Some(id),
        ) = (&ev.body, &ev.run_id)
        {
            self.finished.push_back(id.clone());
            while self.finished.len() > self.resident_runs {
                if let Some(old) = self.finished.pop_front() {
                    self.state.evict(&old);
                }
            }
        }
        if ev.seq <= self.last_at && (self.last_at - ev.seq).is_multiple_of(self.snapshot_every) {
            let t0 = Instant::now();
            let snapshot = self.state.snapshot();
            self.take += t0.elapsed();
            let t1 = Instant::now();
            let bytes = serde_json::to_vec(&snapshot).unwrap_or_else(|e| fail(e));
            self.serialize += t1.elapsed();
            self.snapshots += 1;
            self.snapshot = Some((ev.seq, bytes));
        }
    }
}

/// A snapshot as crewd writes it (finished runs as summaries only).
fn encode_snapshot(state: &State) -> Vec<u8> {
    serde_json::to_vec(&state.snapshot()).unwrap_or_else(|e| fail(e))
}

/// Where `--keep` saves the cadence snapshot: its seq on the first line, then its bytes.
const SAVED_SNAPSHOT: &str = "cadence.snapshot";

fn save_snapshot(root: &std::path::Path, seq: u64, bytes: &[u8]) {
    let mut out = format!("{seq}\n").into_bytes();
    out.extend_from_slice(bytes);
    std::fs::write(root.join(SAVED_SNAPSHOT), out).unwrap_or_else(|e| fail(e));
}

fn load_saved_snapshot(root: &std::path::Path) -> (u64, Vec<u8>) {
    let raw = std::fs::read(root.join(SAVED_SNAPSHOT)).unwrap_or_else(|e| fail(e));
    let nl = raw
        .iter()
        .position(|b| *b == b'\n')
        .unwrap_or_else(|| fail("malformed saved snapshot"));
    let seq = std::str::from_utf8(&raw[..nl])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| fail("malformed saved snapshot seq"));
    (seq, raw[nl + 1..].to_vec())
}

/// The saved cadence snapshot, re-encoded in the current format unless `--as-saved`.
fn saved_snapshot(args: &Args, root: &std::path::Path) -> (u64, Vec<u8>) {
    let (seq, saved) = load_saved_snapshot(root);
    if args.as_saved {
        return (seq, saved);
    }
    let state: State = serde_json::from_slice(&saved).unwrap_or_else(|e| fail(e));
    (seq, encode_snapshot(&state))
}

/// `--reuse`: the clean-stop and cadence starts again, on a root kept by an earlier run.
fn reuse(args: &Args, root: &std::path::Path, config: &str) {
    if args.put_only {
        let (seq, bytes) = saved_snapshot(args, root);
        put_snapshot(&root.join("full/state"), seq, &bytes);
        println!("put the snapshot at seq {seq} ({} KiB)", bytes.len() / 1024);
        return;
    }
    let mut empty = Daemon::new(&root.join("empty"), config);
    let empty_start = empty.spawn();
    empty.stop();
    println!(
        "empty state dir: crewd ready in {} (baseline)",
        secs(empty_start)
    );
    let mut d = Daemon::new(&root.join("full"), config);
    // A clean stop of this build first, so the snapshot is in its format.
    d.spawn();
    let (_, stop_took) = timed(|| d.stop());
    let warm = start_timed(&mut d);
    d.stop();
    println!(
        "after a clean stop (stop took {}): ready in {} (crewd CPU {}) = {:.1}x empty; RSS {} MiB; runs.total {}; lastSeq {}; {}",
        secs(stop_took),
        secs(warm.took),
        secs(warm.cpu),
        warm.took.as_secs_f64() / empty_start.as_secs_f64(),
        warm.rss_kib / 1024,
        warm.status["runs"]["total"],
        warm.status["journal"]["lastSeq"],
        verdict(warm.took < TARGET)
    );
    let (seq, bytes) = saved_snapshot(args, root);
    put_snapshot(&d.state_dir, seq, &bytes);
    let Ready {
        took,
        cpu,
        rss_kib: rss,
        status,
    } = start_timed(&mut d);
    d.stop();
    println!(
        "snapshot at seq {seq} ({} KiB, {}; {} events after it): ready in {} (crewd CPU {}) = {:.1}x empty; RSS {} MiB; runs.total {}; {}",
        bytes.len() / 1024,
        if args.as_saved { "as saved" } else { "re-encoded" },
        status["journal"]["lastSeq"].as_u64().unwrap_or(0).saturating_sub(seq),
        secs(took),
        secs(cpu),
        took.as_secs_f64() / empty_start.as_secs_f64(),
        rss / 1024,
        status["runs"]["total"],
        verdict(took < TARGET)
    );
}

/// Writes `total` events (copies of the template run) into `<state>/journal`, with no
/// snapshot; returns the run count.
fn write_journal(
    state: &std::path::Path,
    tpl_run: &str,
    tpl: &[Value],
    total: u64,
    shadow: &mut Shadow,
) -> u64 {
    std::fs::create_dir_all(state).unwrap_or_else(|e| fail(e));
    let journal = SledJournal::open(&state.join("journal"), DEFAULT_CACHE_BYTES)
        .unwrap_or_else(|e| fail(format!("open journal: {e}")));
    // `team_<timestamp>_<16 hex>`: keep the timestamp, number the copies.
    let prefix = tpl_run
        .rsplit_once('_')
        .map(|(p, _)| p.to_string())
        .unwrap_or_else(|| fail(format!("unexpected run id {tpl_run}")));
    let mut seq = 0u64;
    let mut runs = 0u64;
    let mut chunk: Vec<Entry> = Vec::with_capacity(APPEND_CHUNK);
    'outer: loop {
        let run_id = format!("{prefix}_{runs:016x}");
        runs += 1;
        for ev in tpl {
            if seq == total {
                break 'outer;
            }
            seq += 1;
            let mut v = ev.clone();
            replace_strings(&mut v, tpl_run, &run_id);
            v["seq"] = json!(seq);
            let bytes = serde_json::to_vec(&v).unwrap_or_else(|e| fail(e));
            // What crewd will read back must be a valid event with this seq.
            match serde_json::from_slice::<Event>(&bytes) {
                Ok(parsed) if parsed.seq == seq && parsed.run_id.as_deref() == Some(&run_id) => {
                    shadow.apply(&parsed)
                }
                Ok(parsed) => fail(format!("event {seq} parsed as {parsed:?}")),
                Err(e) => fail(format!("event {seq} is not a crew event: {e}: {v}")),
            }
            chunk.push(Entry {
                seq,
                run: Some(run_id.clone()),
                bytes,
            });
            if chunk.len() == APPEND_CHUNK {
                journal
                    .append(&chunk)
                    .unwrap_or_else(|e| fail(format!("append: {e}")));
                chunk.clear();
            }
        }
    }
    if !chunk.is_empty() {
        journal
            .append(&chunk)
            .unwrap_or_else(|e| fail(format!("append: {e}")));
    }
    if journal.last_seq() != total {
        fail(format!(
            "journal ends at {} instead of {total}",
            journal.last_seq()
        ));
    }
    runs
}

/// Replaces the journal's snapshot (crewd must be stopped).
fn put_snapshot(state: &std::path::Path, seq: u64, bytes: &[u8]) {
    let journal = SledJournal::open(&state.join("journal"), DEFAULT_CACHE_BYTES)
        .unwrap_or_else(|e| fail(format!("open journal: {e}")));
    journal
        .write_snapshot(seq, bytes)
        .unwrap_or_else(|e| fail(format!("write snapshot: {e}")));
}

fn main() {
    let args = parse_args();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "start-up bench: {} events; snapshot_every {}; resident_runs {}; loadavg {}",
        args.events,
        args.snapshot_every,
        args.resident_runs,
        load.trim()
    );
    let config = format!(
        "snapshot_every = {}\nresident_runs = {}\n",
        args.snapshot_every, args.resident_runs
    );
    if let Some(root) = &args.reuse {
        reuse(&args, root, &config);
        return;
    }

    let (tpl_run, tpl) = template(args.steps);
    println!(
        "template: run of {} fake tasks = {} events",
        args.steps,
        tpl.len()
    );

    let root = bench_root("crew-bench-startup");
    let empty_root = root.path().join("empty");
    std::fs::create_dir_all(&empty_root).unwrap_or_else(|e| fail(e));
    let mut empty = Daemon::new(&empty_root, &config);
    let empty_start = empty.spawn();
    empty.stop();

    let full_root = root.path().join("full");
    let d0 = Daemon::new(&full_root, &config);
    let mut shadow = Shadow::new(args.events, args.snapshot_every, args.resident_runs);
    let (runs, gen) =
        timed(|| write_journal(&d0.state_dir, &tpl_run, &tpl, args.events, &mut shadow));
    println!(
        "wrote {} events ({} runs) with crew-journal in {}",
        args.events,
        runs,
        secs(gen)
    );

    let mut d = d0;
    let Ready {
        took: cold,
        cpu: cpu_cold,
        rss_kib: rss_cold,
        status,
    } = start_timed(&mut d);
    if status["journal"]["lastSeq"].as_u64().unwrap_or(0) < args.events {
        fail(format!("crewd did not see the journal: {status}"));
    }
    let (_, stop_took) = timed(|| d.stop());
    let Ready {
        took: warm,
        cpu: cpu_warm,
        rss_kib: rss_warm,
        status,
    } = start_timed(&mut d);
    let total = status["runs"]["total"].clone();
    d.stop();

    let cadence = shadow.snapshot.take().map(|(seq, bytes)| {
        if args.keep {
            save_snapshot(root.path(), seq, &bytes);
        }
        put_snapshot(&d.state_dir, seq, &bytes);
        let r = start_timed(&mut d);
        d.stop();
        (seq, bytes.len(), r.took, r.cpu, r.rss_kib, r.status)
    });

    println!(
        "empty state dir: crewd ready in {} (baseline)",
        secs(empty_start)
    );
    println!(
        "{} events, no snapshot (full replay, worst case): ready in {} (crewd CPU {}) = {:.1}x empty; RSS {} MiB; {}",
        args.events,
        secs(cold),
        secs(cpu_cold),
        cold.as_secs_f64() / empty_start.as_secs_f64(),
        rss_cold / 1024,
        verdict(cold < TARGET)
    );
    println!(
        "{} events, after a clean stop (snapshot; stop took {}): ready in {} (crewd CPU {}) = {:.1}x empty; RSS {} MiB; runs.total {}; {}",
        args.events,
        secs(stop_took),
        secs(warm),
        secs(cpu_warm),
        warm.as_secs_f64() / empty_start.as_secs_f64(),
        rss_warm / 1024,
        total,
        verdict(warm < TARGET)
    );
    match cadence {
        Some((seq, size, took, cpu, rss, status)) => {
            println!(
                "snapshots every {} events as crewd: {} taken, {} KiB each at the end; on average {:.2} ms to take (on crewd's actor), {:.1} ms to serialize (on its journal writer)",
                args.snapshot_every,
                shadow.snapshots,
                size / 1024,
                shadow.take.as_secs_f64() * 1000.0 / f64::from(shadow.snapshots.max(1)),
                shadow.serialize.as_secs_f64() * 1000.0 / f64::from(shadow.snapshots.max(1)),
            );
            println!(
                "{} events, snapshot at seq {} ({} events after it, the most crewd's cadence leaves): ready in {} (crewd CPU {}) = {:.1}x empty; RSS {} MiB; runs.total {}; {}",
                args.events,
                seq,
                status["journal"]["lastSeq"].as_u64().unwrap_or(0).saturating_sub(seq),
                secs(took),
                secs(cpu),
                took.as_secs_f64() / empty_start.as_secs_f64(),
                rss / 1024,
                status["runs"]["total"],
                verdict(took < TARGET)
            );
        }
        None => println!(
            "fewer than --snapshot-every events: crewd would not have snapshotted (see the full replay)"
        ),
    }
    println!("target: < {} to the first daemon.ping", secs(TARGET));
    if args.keep {
        println!("kept {}", root.keep().display());
    }
}
