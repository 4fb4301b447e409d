//! Durable events per second through the daemon's journal path, against a raw sled
//! `apply_batch` + `flush` loop on the same disk (targets: ≥ 0.7 of raw and ≥ 100,000 events/s).
//!
//! The daemon is driven from outside, as clients would: `--clients` threads, each on its own
//! keep-alive HTTP connection to the socket, post JSON-RPC batches of `--batch` `team.steer`
//! calls (one `task.steered` event each) on a queued task (it waits for a sleeping one) for
//! `--secs` seconds. Every call answers only after its event is durable, so acknowledged calls
//! per second = durable events per second. The raw loop writes values of the same size in
//! batches of the number of calls in flight (the most one daemon flush can group), measured
//! before and after the daemon phase in a sibling directory.
//!
//! `CREW_BENCH_CONFIG` (TOML lines) is appended to the daemon's config, e.g. to compare
//! `journal_cache_mb` sizes.
//!
//! Usage: `bench-journal [--clients 32] [--batch 32] [--secs 5]`.

mod daemon_support;

use daemon_support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RATIO_TARGET: f64 = 0.7;
const RATE_TARGET: f64 = 100_000.0;

struct Args {
    clients: usize,
    batch: usize,
    secs: u64,
}

fn parse_args() -> Args {
    let mut a = Args {
        clients: 32,
        batch: 32,
        secs: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or_else(|| fail(format!("{flag} needs a positive number")));
        match flag.as_str() {
            "--clients" => a.clients = value as usize,
            "--batch" => a.batch = value as usize,
            "--secs" => a.secs = value,
            _ => fail(format!("unknown flag {flag}")),
        }
    }
    a
}

/// Raw sled: `apply_batch` of `batch` values of `value_len` bytes under big-endian u64 keys,
/// then `flush` (write + fsync), for `dur`. Events per second.
fn raw_sled(dir: &Path, batch: usize, value_len: usize, dur: Duration) -> f64 {
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(64 << 20)
        .flush_every_ms(None)
        .open()
        .unwrap_or_else(|e| fail(format!("sled open: {e}")));
    let tree = db
        .open_tree("log")
        .unwrap_or_else(|e| fail(format!("sled: {e}")));
    let value = vec![b'x'; value_len];
    let mut next = tree
        .last()
        .ok()
        .flatten()
        .and_then(|(k, _)| k.as_ref().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0);
    let t0 = Instant::now();
    let mut written = 0u64;
    while t0.elapsed() < dur {
        let mut b = sled::Batch::default();
        for _ in 0..batch {
            next += 1;
            b.insert(&next.to_be_bytes()[..], value.as_slice());
        }
        tree.apply_batch(b)
            .unwrap_or_else(|e| fail(format!("apply_batch: {e}")));
        db.flush().unwrap_or_else(|e| fail(format!("flush: {e}")));
        written += batch as u64;
    }
    written as f64 / t0.elapsed().as_secs_f64()
}

/// One queued task to steer: it depends on a task that sleeps for an hour.
fn queued_task(d: &Daemon) -> (String, String) {
    d.project_file(
        "teams/steer.team.md",
        "---\nname: steer\ndefaultWorkflow: steer\n---\n\n- worker: agent=explorer\n",
    );
    d.project_file(
        "workflows/steer.workflow.md",
        "---\nname: steer\n---\n\n## first\nrole: worker\noutput: false\n\nWait. [fake:sleep=3600s]\n\n\
         ## second\nrole: worker\ndependsOn: first\noutput: false\n\nThen this.\n",
    );
    let started = d.call(
        "team.run",
        json!({
            "goal": "journal bench",
            "cwd": d.work.display().to_string(),
            "team": "steer",
            "runtime": "fake",
        }),
    );
    let run = started["runId"].as_str().unwrap_or_default().to_string();
    let st = d.call("team.status", json!({"runId": run}));
    let second = st["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["stepId"] == "second"))
        .cloned()
        .unwrap_or_default();
    if second["status"] != "queued" {
        fail(format!("the steer target is not queued: {st}"));
    }
    (run, second["id"].as_str().unwrap_or_default().to_string())
}

fn batch_body(run: &str, task: &str, n: usize, first_id: u64) -> String {
    let calls: Vec<Value> = (0..n as u64)
        .map(|i| {
            json!({
                "jsonrpc": "2.0",
                "id": first_id + i,
                "method": "team.steer",
                "params": {"runId": run, "taskId": task, "message": "bench steer: keep going"},
            })
        })
        .collect();
    Value::Array(calls).to_string()
}

/// Clients post batches until `dur` is over; acknowledged calls per second.
fn drive(d: &Daemon, run: &str, task: &str, args: &Args) -> (f64, u64, u64) {
    let ok = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let dur = Duration::from_secs(args.secs);
    let t0 = Instant::now();
    let threads: Vec<_> = (0..args.clients)
        .map(|c| {
            let (ok, bad, stop) = (ok.clone(), bad.clone(), stop.clone());
            let socket = d.socket.clone();
            let body = batch_body(run, task, args.batch, (c * args.batch) as u64);
            std::thread::spawn(move || {
                let mut conn = KeepAlive::connect(&socket).unwrap_or_else(|e| fail(e));
                while !stop.load(Ordering::Relaxed) {
                    let text = conn.post(&body).unwrap_or_else(|e| fail(e));
                    let v: Value = serde_json::from_str(&text)
                        .unwrap_or_else(|e| fail(format!("{e}: {text}")));
                    let (good, errs) = match v.as_array() {
                        Some(items) => {
                            items
                                .iter()
                                .fold((0, 0), |(g, b), r| match r.get("result") {
                                    Some(_) => (g + 1, b),
                                    None => (g, b + 1),
                                })
                        }
                        None => (0, 1),
                    };
                    if errs > 0 && bad.fetch_add(errs, Ordering::Relaxed) == 0 {
                        eprintln!("first error response: {}", &text[..text.len().min(400)]);
                    }
                    ok.fetch_add(good, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let took = t0.elapsed();
    let acked = ok.load(Ordering::Relaxed);
    (
        acked as f64 / took.as_secs_f64(),
        acked,
        bad.load(Ordering::Relaxed),
    )
}

fn main() {
    let args = parse_args();
    let in_flight = args.clients * args.batch;
    let root = bench_root("crew-bench-journal");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "journal bench: {} clients x batches of {} team.steer ({} in flight), {} s; loadavg {}",
        args.clients,
        args.batch,
        in_flight,
        args.secs,
        load.trim()
    );

    // Extra config lines (e.g. `journal_cache_mb = 1`), as for bench-memory.
    let extra = std::env::var("CREW_BENCH_CONFIG").unwrap_or_default();
    if !extra.trim().is_empty() {
        println!("extra config: {}", extra.trim().replace('\n', "; "));
    }
    let d = Daemon::start(
        root.path(),
        &format!(
            "max_batch = {}\nmax_connections = {}\nmax_request_bytes = 16777216\n{extra}\n",
            args.batch.max(64),
            (args.clients + 16).max(128)
        ),
    );
    let (run, task) = queued_task(&d);

    // The size of what the daemon journals per call, for the raw loop.
    let sample = d.call(
        "team.events",
        json!({"runId": run, "afterSeq": 0, "limit": 1000}),
    );
    let value_len = sample["events"]
        .as_array()
        .and_then(|evs| evs.last())
        .map(|e| e.to_string().len())
        .unwrap_or(200)
        .max(200);

    let raw_dur = Duration::from_secs(args.secs.clamp(1, 3));
    let raw_dir = root.path().join("raw-sled");
    let raw_before = raw_sled(&raw_dir, in_flight, value_len, raw_dur);

    let seq0 = d.call("daemon.status", json!({}))["journal"]["lastSeq"]
        .as_u64()
        .unwrap_or(0);
    let pid = d.pid().to_string();
    let (cpu_d0, cpu_b0) = (cpu_time(&pid), cpu_time("self"));
    let (rate, acked, errors) = drive(&d, &run, &task, &args);
    let (cpu_d, cpu_b) = (cpu_time(&pid) - cpu_d0, cpu_time("self") - cpu_b0);
    let seq1 = d.call("daemon.status", json!({}))["journal"]["lastSeq"]
        .as_u64()
        .unwrap_or(0);

    let raw_after = raw_sled(&raw_dir, in_flight, value_len, raw_dur);
    let raw = (raw_before + raw_after) / 2.0;
    let raw_1 = raw_sled(&root.path().join("raw-sled-1"), 1, value_len, raw_dur);
    let raw_64 = raw_sled(&root.path().join("raw-sled-64"), 64, value_len, raw_dur);

    println!(
        "raw sled apply_batch+flush, {value_len}-byte values: batch {in_flight}: {raw:.0} events/s \
         (before {raw_before:.0}, after {raw_after:.0}); batch 64: {raw_64:.0}; batch 1: {raw_1:.0}"
    );
    println!(
        "crewd team.steer: {acked} acknowledged ({errors} errors), journal seq +{}: {rate:.0} durable events/s",
        seq1 - seq0
    );
    println!(
        "CPU during the daemon phase: crewd {} ({:.1} us per event), bench clients {}",
        secs(cpu_d),
        cpu_d.as_secs_f64() * 1e6 / acked.max(1) as f64,
        secs(cpu_b)
    );
    let ratio = rate / raw;
    println!(
        "crewd / raw = {ratio:.3} (target >= {RATIO_TARGET}): {}",
        verdict(ratio >= RATIO_TARGET)
    );
    println!(
        "crewd rate {rate:.0}/s (target >= {RATE_TARGET:.0}/s): {}",
        verdict(rate >= RATE_TARGET)
    );
    let _ = d.call("team.cancel", json!({"runId": run}));
}
