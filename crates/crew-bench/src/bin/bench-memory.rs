//! Memory: crewd's RSS growth per 10,000 finished tasks kept resident (target: < 20 MB),
//! against the RSS of the same daemon after a small warm-up run (the baseline).
//!
//! `--tasks` fake-agent tasks run as runs of `--per-run` independent tasks at concurrency 8;
//! `resident_runs` is set so every one of those runs stays in memory. Then the same number of
//! tasks runs again, and the growth of that second batch is printed too (the marginal cost of a
//! task, once the daemon's bounded buffers and caches have filled).
//!
//! `CREW_BENCH_CONFIG` (TOML lines) is appended to the daemon's config, for experiments such as
//! `journal_cache_mb = 16` or `result_cache_entries = 1`. `CREW_BENCH_HOLD_SECS` keeps the
//! daemon running that long after the figures are printed, to inspect it.
//!
//! Usage: `bench-memory [--tasks 10000] [--per-run 1000]`.

mod daemon_support;

use daemon_support::*;
use serde_json::json;

const TARGET_MB_PER_10K: f64 = 20.0;

struct Args {
    tasks: usize,
    per_run: usize,
}

fn parse_args() -> Args {
    let mut a = Args {
        tasks: 10_000,
        per_run: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|v| *v > 0)
            .unwrap_or_else(|| fail(format!("{flag} needs a positive number")));
        match flag.as_str() {
            "--tasks" => a.tasks = value,
            "--per-run" => a.per_run = value,
            _ => fail(format!("unknown flag {flag}")),
        }
    }
    a
}

fn run_team(d: &Daemon, team: &str) -> String {
    let started = d.call(
        "team.run",
        json!({"goal": "memory bench", "cwd": d.work.display().to_string(),
               "team": team, "runtime": "fake", "concurrency": 8}),
    );
    let run = started["runId"].as_str().unwrap_or_default().to_string();
    let status = d.wait(&run);
    if status != "completed" {
        fail(format!("run {run} ended {status}"));
    }
    run
}

fn main() {
    let args = parse_args();
    let runs = args.tasks.div_ceil(args.per_run);
    let root = bench_root("crew-bench-memory");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "memory bench: {} tasks as {runs} runs of {}; loadavg {}",
        args.tasks,
        args.per_run,
        load.trim()
    );
    let extra = std::env::var("CREW_BENCH_CONFIG").unwrap_or_default();
    if !extra.trim().is_empty() {
        println!("extra config: {}", extra.trim().replace('\n', "; "));
    }
    let d = Daemon::start(
        root.path(),
        &format!(
            "max_workers = 8\nmax_concurrency_cap = 8\nresident_runs = {}\n{extra}\n",
            2 * runs + 8
        ),
    );
    d.bulk_team("warm", 16, |i| format!("Item {i}."));
    d.bulk_team("bulk", args.per_run, |i| format!("Item {i}."));
    run_team(&d, "warm");
    let idle = d.rss_kib();

    let (_, took) = timed(|| {
        for _ in 0..runs {
            run_team(&d, "bulk");
        }
    });
    let status = d.call("daemon.status", json!({}));
    let resident = status["runs"]["resident"].as_u64().unwrap_or(0);
    if resident < runs as u64 + 1 {
        fail(format!("only {resident} runs are resident: {status}"));
    }
    let after = d.rss_kib();
    let tasks = runs * args.per_run;
    let growth_mib = after.saturating_sub(idle) as f64 / 1024.0;
    let per_10k = growth_mib * 10_000.0 / tasks as f64;
    println!(
        "baseline (after a 16-task warm-up run): RSS {:.1} MiB",
        idle as f64 / 1024.0
    );
    println!(
        "after {tasks} finished tasks in {runs} resident runs ({}): RSS {:.1} MiB = {:.2}x baseline",
        secs(took),
        after as f64 / 1024.0,
        after as f64 / idle.max(1) as f64
    );
    println!(
        "growth per 10,000 finished tasks: {per_10k:.1} MiB (target < {TARGET_MB_PER_10K} MB): {}",
        verdict(per_10k * 1.048_576 < TARGET_MB_PER_10K)
    );
    // For a look inside (gdb, /proc/<pid>/smaps) before the daemon is stopped.

    // The same number of tasks again: fixed costs that fill up during the first batch (the event
    // bus's ring of recent events, sled's page cache, malloc arenas) do not grow any more, so
    // this is the cost of the tasks alone.
    let (_, took2) = timed(|| {
        for _ in 0..runs {
            run_team(&d, "bulk");
        }
    });
    let resident = d.call("daemon.status", json!({}))["runs"]["resident"]
        .as_u64()
        .unwrap_or(0);
    if resident < 2 * runs as u64 + 1 {
        fail(format!(
            "only {resident} runs are resident after the second batch"
        ));
    }
    let after2 = d.rss_kib();
    let marginal = after2.saturating_sub(after) as f64 / 1024.0 * 10_000.0 / tasks as f64;
    println!(
        "after {tasks} more ({}): RSS {:.1} MiB; marginal growth per 10,000 finished tasks: \
         {marginal:.1} MiB (target < {TARGET_MB_PER_10K} MB): {}",
        secs(took2),
        after2 as f64 / 1024.0,
        verdict(marginal * 1.048_576 < TARGET_MB_PER_10K)
    );
    if let Some(secs) = std::env::var("CREW_BENCH_HOLD_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        println!("holding crewd (pid {}) for {secs} s", d.pid());
        std::thread::sleep(std::time::Duration::from_secs(secs));
    }
}
