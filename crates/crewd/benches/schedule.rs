//! Issue 5's scheduler benchmark, against the real daemon:
//! 10,000 enabled jobs (9,900 that do not fire during the run, 100 due in the same second,
//! every 2 s), measuring the daemon's memory for the jobs and the fire lateness (scheduled
//! instant → `schedule.fired` journaled: the event's `time` minus its `data.at`).
//!
//! It is an ignored test so that it only runs when asked for, in release mode:
//!
//! ```text
//! cargo build --release -p crew-fake-agent
//! cargo test --release -p crewd --bench schedule -- --ignored --nocapture
//! ```
//!
//! Each wake-up mode runs on its own daemon: `precise` (the default) and `tcs`
//! (`CREW_SCHEDULER_WAKEUP=tcs`: tokio-cron-scheduler's one-shots alone). Knobs:
//! `SCHED_BENCH_MODES` (comma-separated modes), `SCHED_BENCH_ROUNDS` (2-second rounds, 10),
//! `SCHED_BENCH_ADD_THREADS` (clients adding jobs, 8), `SCHED_BENCH_CONFIG` (daemon config
//! lines, `;`-separated, e.g. `journal_cache_mb = 1`), `SCHED_BENCH_DAEMON_ENV` (`K=V,...`,
//! e.g. `MALLOC_ARENA_MAX=1`), `SCHED_BENCH_LOG` (the daemon's `CREW_LOG`, `warn`) and
//! `SCHED_BENCH_SHOW_LOG` (print the daemon log).

#[path = "../tests/common/mod.rs"]
mod common;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const JOBS: usize = 10_000;
const DUE_TOGETHER: usize = 100;
const ADD_THREADS: usize = 8;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn instant(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

/// The 9,900 jobs that stay quiet: a mix of kinds, all enabled and armed.
fn quiet_job(i: usize, run: &Value) -> Value {
    let mut p = match i % 3 {
        0 => json!({"cron": format!("{} {} 1 1 *", i % 60, i % 24)}),
        1 => json!({"intervalMs": 86_400_000 + i as i64}),
        _ => {
            json!({"at": (Utc::now() + chrono::TimeDelta::days(30 + (i % 300) as i64)).to_rfc3339()})
        }
    };
    p["timezone"] = json!(["UTC", "Europe/Berlin", "America/New_York"][i % 3]);
    p["name"] = json!(format!("quiet {i}"));
    p["run"] = run.clone();
    p
}

struct Report {
    mode: String,
    rss_before: u64,
    rss_jobs: u64,
    rss_end: u64,
    add_secs: f64,
    lateness_ms: Vec<f64>,
    skipped: usize,
}

fn bench(mode: &str, rounds: usize) -> Report {
    let log = std::env::var("SCHED_BENCH_LOG").unwrap_or_else(|_| "warn".into());
    let mut env = vec![("CREW_LOG".to_string(), log)];
    if mode == "tcs" {
        env.push(("CREW_SCHEDULER_WAKEUP".into(), "tcs".into()));
    }
    // Extra daemon environment, `K=V,K=V` (e.g. MALLOC_ARENA_MAX=2).
    if let Ok(extra) = std::env::var("SCHED_BENCH_DAEMON_ENV") {
        for kv in extra.split(',').filter(|kv| !kv.is_empty()) {
            if let Some((k, v)) = kv.split_once('=') {
                env.push((k.into(), v.into()));
            }
        }
    }
    // Extra daemon config lines, `;`-separated (e.g. journal_cache_mb = 1).
    let config = std::env::var("SCHED_BENCH_CONFIG")
        .unwrap_or_default()
        .replace(';', "\n");
    let d = Daemon::start_with(Opts { config, env });
    // Runs that stay blocked on plan approval: a fire creates a run, no worker starts.
    one_step_team(&d, "hold", "Change things.", "executor");
    let run = json!({"goal": "benchmark", "cwd": path_str(&d.work), "runtime": "fake", "team": "hold", "requirePlanApproval": true});
    let pid = d.pid();
    // Warm up the resource cache and the allocator's first arenas, then measure.
    let warm = d.ok(
        "schedule.add",
        json!({"cron": "0 0 1 1 *", "run": run, "enabled": false}),
    );
    d.ok("schedule.remove", json!({"id": warm["id"]}));
    let rss_before = rss_kib(pid);

    let started = Instant::now();
    let quiet = JOBS - DUE_TOGETHER;
    let threads: usize = std::env::var("SCHED_BENCH_ADD_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(ADD_THREADS);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (d, run) = (&d, &run);
            s.spawn(move || {
                for i in (t..quiet).step_by(threads) {
                    d.ok("schedule.add", quiet_job(i, run));
                }
            });
        }
    });
    // The 100 due together start disabled so the memory figure has no runs in it.
    let due: Vec<String> = (0..DUE_TOGETHER)
        .map(|i| {
            d.ok(
                "schedule.add",
                json!({"name": format!("due {i}"), "cron": "*/2 * * * * *", "timezone": "UTC",
                       "overlap": "allow", "enabled": false, "run": run}),
            )["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let add_secs = started.elapsed().as_secs_f64();
    let listed = d.ok("schedule.list", json!({}))["jobs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(listed, JOBS);
    let rss_jobs = rss_kib(pid);

    let seq_before = d.ok("daemon.status", json!({}))["journal"]["lastSeq"]
        .as_u64()
        .unwrap();
    for id in &due {
        d.ok("schedule.enable", json!({"id": id}));
    }
    // Let `rounds` rounds of 100 fires happen (waiting for wall-clock instants is the point).
    std::thread::sleep(Duration::from_secs(2 * rounds as u64 + 1));
    for id in &due {
        d.ok("schedule.disable", json!({"id": id}));
    }
    let rss_end = rss_kib(pid);
    if std::env::var_os("SCHED_BENCH_SHOW_LOG").is_some() {
        println!("{}", d.log_text());
    }

    let mut lateness_ms = Vec::new();
    let mut skipped = 0;
    let mut after = seq_before;
    loop {
        let page = d.ok("team.events", json!({"afterSeq": after, "limit": 5000}));
        let evs = page["events"].as_array().unwrap();
        if evs.is_empty() {
            break;
        }
        for e in evs {
            match e["type"].as_str() {
                Some("schedule.fired") => {
                    let late = instant(&e["time"]) - instant(&e["data"]["at"]);
                    lateness_ms.push(late.num_microseconds().unwrap() as f64 / 1000.0);
                }
                Some("schedule.skipped") => skipped += 1,
                _ => {}
            }
        }
        after = page["nextSeq"].as_u64().unwrap();
    }
    lateness_ms.sort_by(f64::total_cmp);
    Report {
        mode: mode.into(),
        rss_before,
        rss_jobs,
        rss_end,
        add_secs,
        lateness_ms,
        skipped,
    }
}

#[test]
#[ignore = "benchmark: cargo test --release -p crewd --bench schedule -- --ignored --nocapture"]
fn scheduler_10k_jobs_memory_and_fire_lateness() {
    let modes = std::env::var("SCHED_BENCH_MODES").unwrap_or_else(|_| "precise,tcs".into());
    let rounds: usize = std::env::var("SCHED_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let mut reports = Vec::new();
    for mode in modes.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let r = bench(mode, rounds);
        let l = &r.lateness_ms;
        println!(
            "[{}] {} jobs added in {:.1} s ({:.0}/s); RSS {:.1} MiB before, {:.1} MiB with the jobs \
             (+{:.1} MiB, {:.0} B/job), {:.1} MiB after the fires",
            r.mode,
            JOBS,
            r.add_secs,
            JOBS as f64 / r.add_secs,
            r.rss_before as f64 / 1024.0,
            r.rss_jobs as f64 / 1024.0,
            (r.rss_jobs - r.rss_before.min(r.rss_jobs)) as f64 / 1024.0,
            (r.rss_jobs.saturating_sub(r.rss_before) * 1024) as f64 / JOBS as f64,
            r.rss_end as f64 / 1024.0,
        );
        if l.is_empty() {
            println!("[{}] no fires", r.mode);
        } else {
            println!(
                "[{}] {} fires ({} skipped), {} due per second: lateness p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, min {:.1} ms",
                r.mode,
                l.len(),
                r.skipped,
                DUE_TOGETHER,
                percentile(l, 50.0),
                percentile(l, 99.0),
                l[l.len() - 1],
                l[0],
            );
        }
        reports.push(r);
    }
    if let (Some(p), Some(t)) = (
        reports.iter().find(|r| r.mode == "precise"),
        reports.iter().find(|r| r.mode == "tcs"),
    ) {
        if !p.lateness_ms.is_empty() && !t.lateness_ms.is_empty() {
            println!(
                "tcs/precise lateness: p50 x{:.1}, p99 x{:.1}",
                percentile(&t.lateness_ms, 50.0) / percentile(&p.lateness_ms, 50.0),
                percentile(&t.lateness_ms, 99.0) / percentile(&p.lateness_ms, 99.0),
            );
        }
    }
    for r in &reports {
        assert!(
            r.lateness_ms.len() >= DUE_TOGETHER * rounds.saturating_sub(1),
            "[{}] too few fires: {}",
            r.mode,
            r.lateness_ms.len()
        );
    }
}
