//! crew-soak: random runs, cancels, resumes, schedule changes and subscriptions against a real
//! crewd, with `kill -9` / restart cycles; after every cycle it checks what SPEC §6/§7 promise:
//!
//! * every acknowledged change is there (runs created; cancels, resumes and schedule changes as
//!   acknowledged);
//! * no task is `running` without a live worker (and no fake agent outlives its task);
//! * the journal's event seqs are contiguous;
//! * every subscriber that reconnects with its last seq sees no gap (and catches up);
//! * the daemon's VmRSS stays under a bound.
//!
//! Usage: crew-soak --crewd PATH [--duration SECS] [--seed N] [--max-rss-mb MB]

mod client;
mod daemon;

use client::{call, CallError};
use daemon::Daemon;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    crewd: PathBuf,
    duration: Duration,
    seed: u64,
    max_rss_mb: f64,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        crewd: PathBuf::from("target/debug/crewd"),
        duration: Duration::from_secs(600),
        seed: rand::random(),
        max_rss_mb: 400.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("{k} needs a value"))
        };
        match k.as_str() {
            "--crewd" => a.crewd = PathBuf::from(v()?),
            "--duration" => a.duration = Duration::from_secs(v()?.parse()?),
            "--seed" => a.seed = v()?.parse()?,
            "--max-rss-mb" => a.max_rss_mb = v()?.parse()?,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    a.crewd = std::fs::canonicalize(&a.crewd)?;
    Ok(a)
}

/// What the daemon acknowledged, and so must still say after any crash.
#[derive(Default)]
struct Model {
    runs: BTreeMap<String, Expect>,
    schedules: BTreeMap<String, Sched>,
    removed: BTreeSet<String>,
    counts: Counts,
    violations: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// Created; anything may have happened since.
    Exists,
    /// A cancel was acknowledged with status `cancelled`.
    Cancelled,
    /// A resume was acknowledged after a cancel.
    NotCancelled,
    /// A cancel or resume was in flight at a kill: either outcome.
    Unsure,
}

#[derive(Clone, Copy, PartialEq, Debug)]
struct Sched {
    enabled: Option<bool>,
}

#[derive(Default, Debug)]
struct Counts {
    cycles: u64,
    kills: u64,
    runs: u64,
    cancels: u64,
    resumes: u64,
    schedule_ops: u64,
    lost_in_flight: u64,
    reconnects: u64,
    dropped_notices: u64,
    events_checked: u64,
    subscriber_events: u64,
    max_rss_mb: f64,
}

type Shared = Arc<Mutex<Model>>;

fn lock(m: &Shared) -> std::sync::MutexGuard<'_, Model> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn violation(m: &Shared, what: String) {
    eprintln!("VIOLATION: {what}");
    lock(m).violations.push(what);
}

fn goal(rng: &mut StdRng) -> String {
    let d = match rng.random_range(0..20) {
        0..=7 => format!("[fake:sleep={}ms]", rng.random_range(50..1500)),
        8..=9 => "[fake:sleep=20s]".into(),
        10 => "[fake:fail]".into(),
        11 => "[fake:fail-attempts=1]".into(),
        12 => "[fake:crash-attempts=1]".into(),
        13 => "[fake:linger]".into(),
        14 => "[fake:turns=3] [fake:tokens=500]".into(),
        _ => "[fake:turns=1]".into(),
    };
    format!("soak {} {d}", rng.random_range(0..1_000_000))
}

fn run_params(d: &Daemon, rng: &mut StdRng) -> Value {
    let team = if rng.random_bool(0.7) { "solo" } else { "duo" };
    json!({"goal": goal(rng), "cwd": d.work, "runtime": "fake", "team": team})
}

/// Starts runs for as long as it is left running.
async fn starter(socket: PathBuf, params: Vec<Value>, model: Shared, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for p in params {
        match call(&socket, "team.run", p).await {
            Ok(r) => {
                if let Some(id) = r["runId"].as_str() {
                    let mut m = lock(&model);
                    m.runs.insert(id.to_string(), Expect::Exists);
                    m.counts.runs += 1;
                }
            }
            Err(CallError::Transport(_)) => lock(&model).counts.lost_in_flight += 1,
            Err(e) => violation(&model, format!("team.run refused: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..600))).await;
    }
}

/// Cancels, resumes and schedule changes, one at a time, for as long as it is left running.
async fn operator(socket: PathBuf, template: Value, model: Shared, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..700))).await;
        let (runs, scheds): (Vec<String>, Vec<String>) = {
            let m = lock(&model);
            (
                m.runs.keys().rev().take(30).cloned().collect(),
                m.schedules.keys().cloned().collect(),
            )
        };
        match rng.random_range(0..10) {
            0..=3 if !runs.is_empty() => {
                let id = runs[rng.random_range(0..runs.len())].clone();
                set_expect(&model, &id, Expect::Unsure);
                match call(
                    &socket,
                    "team.cancel",
                    json!({"runId": id, "reason": "soak"}),
                )
                .await
                {
                    Ok(r) => {
                        let e = if r["status"] == "cancelled" {
                            Expect::Cancelled
                        } else {
                            Expect::Exists
                        };
                        set_expect(&model, &id, e);
                        lock(&model).counts.cancels += 1;
                    }
                    // Already finished: nothing changed.
                    Err(CallError::Api { code: 1002, .. }) => {
                        set_expect(&model, &id, Expect::Exists)
                    }
                    Err(CallError::Api { .. }) => set_expect(&model, &id, Expect::Exists),
                    Err(CallError::Transport(_)) => {}
                }
            }
            4..=5 if !runs.is_empty() => {
                let id = runs[rng.random_range(0..runs.len())].clone();
                let before = lock(&model).runs.get(&id).copied();
                set_expect(&model, &id, Expect::Unsure);
                match call(&socket, "team.resume", json!({"runId": id})).await {
                    Ok(_) => {
                        set_expect(&model, &id, Expect::NotCancelled);
                        lock(&model).counts.resumes += 1;
                    }
                    Err(CallError::Api { .. }) => {
                        set_expect(&model, &id, before.unwrap_or(Expect::Exists))
                    }
                    Err(CallError::Transport(_)) => {}
                }
            }
            6..=7 if scheds.len() < 3 => {
                let p = json!({"intervalMs": rng.random_range(3000..8000), "run": template,
                    "overlap": "skip", "enabled": rng.random_bool(0.8)});
                match call(&socket, "schedule.add", p).await {
                    Ok(j) => {
                        if let Some(id) = j["id"].as_str() {
                            let mut m = lock(&model);
                            m.schedules.insert(
                                id.to_string(),
                                Sched {
                                    enabled: j["enabled"].as_bool(),
                                },
                            );
                            m.counts.schedule_ops += 1;
                        }
                    }
                    Err(CallError::Transport(_)) => {}
                    Err(e) => violation(&model, format!("schedule.add refused: {e}")),
                }
            }
            8 if !scheds.is_empty() => {
                let id = scheds[rng.random_range(0..scheds.len())].clone();
                let enabled = rng.random_bool(0.5);
                lock(&model)
                    .schedules
                    .insert(id.clone(), Sched { enabled: None });
                let p = json!({"id": id, "enabled": enabled, "intervalMs": rng.random_range(3000..8000)});
                match call(&socket, "schedule.update", p).await {
                    Ok(j) => {
                        let mut m = lock(&model);
                        m.schedules.insert(
                            id,
                            Sched {
                                enabled: j["enabled"].as_bool(),
                            },
                        );
                        m.counts.schedule_ops += 1;
                    }
                    Err(CallError::Transport(_)) => {}
                    Err(e) => violation(&model, format!("schedule.update {id}: {e}")),
                }
            }
            9 if !scheds.is_empty() => {
                let id = scheds[rng.random_range(0..scheds.len())].clone();
                // Unsure until acknowledged.
                lock(&model)
                    .schedules
                    .insert(id.clone(), Sched { enabled: None });
                match call(&socket, "schedule.remove", json!({"id": id})).await {
                    Ok(_) => {
                        let mut m = lock(&model);
                        m.schedules.remove(&id);
                        m.removed.insert(id);
                        m.counts.schedule_ops += 1;
                    }
                    Err(CallError::Transport(_)) => {
                        // Either outcome is fine now; forget it.
                        let mut m = lock(&model);
                        m.schedules.remove(&id);
                    }
                    Err(e) => violation(&model, format!("schedule.remove {id}: {e}")),
                }
            }
            _ => {}
        }
    }
}

fn set_expect(model: &Shared, id: &str, e: Expect) {
    if let Some(x) = lock(model).runs.get_mut(id) {
        *x = e;
    }
}

/// One subscriber's view: the last event it got.
#[derive(Clone, Default)]
struct SubState {
    run: Option<String>,
    last_seq: u64,
    last_run_seq: Option<u64>,
}

/// Follows a subscription until the connection ends; checks contiguity on the way. Returns the
/// state to resume from.
async fn follow(socket: PathBuf, mut st: SubState, model: Shared) -> SubState {
    loop {
        let Ok(client) = client::ws(&socket).await else {
            return st;
        };
        let Ok(mut sub) = client::subscribe(&client, st.run.as_deref(), st.last_seq).await else {
            return st;
        };
        let mut dropped = false;
        while let Some(item) = sub.next().await {
            let Ok(ev) = item else { break };
            if ev.get("notice").is_some() {
                lock(&model).counts.dropped_notices += 1;
                dropped = true;
                break;
            }
            let seq = ev["seq"].as_u64().unwrap_or(0);
            let who = st.run.as_deref().unwrap_or("*");
            if st.run.is_none() && seq != st.last_seq + 1 {
                violation(
                    &model,
                    format!(
                        "subscriber {who}: seq {seq} after {} (gap or repeat)",
                        st.last_seq
                    ),
                );
            }
            if seq <= st.last_seq {
                violation(
                    &model,
                    format!("subscriber {who}: seq {seq} not after {}", st.last_seq),
                );
            }
            if let Some(rs) = ev["runSeq"].as_u64() {
                if st.run.is_some() {
                    if let Some(prev) = st.last_run_seq {
                        if rs != prev + 1 {
                            violation(
                                &model,
                                format!("subscriber {who}: runSeq {rs} after {prev}"),
                            );
                        }
                    }
                    st.last_run_seq = Some(rs);
                }
            }
            st.last_seq = seq;
            lock(&model).counts.subscriber_events += 1;
        }
        if !dropped {
            return st;
        }
        lock(&model).counts.reconnects += 1;
    }
}

/// Everything checked after a restart.
async fn check(d: &Daemon, model: &Shared, checked_upto: &mut u64) {
    let socket = &d.socket;
    // 1. Acknowledged runs and their acknowledged cancels/resumes.
    let runs: Vec<(String, Expect)> = lock(model)
        .runs
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    for (id, expect) in &runs {
        match call(socket, "team.status", json!({"runId": id})).await {
            Ok(st) => {
                let status = st["run"]["status"].as_str().unwrap_or_default().to_string();
                let bad = match expect {
                    Expect::Cancelled => status != "cancelled",
                    Expect::NotCancelled => status == "cancelled",
                    _ => false,
                };
                if bad {
                    violation(
                        model,
                        format!("run {id}: status {status}, acknowledged {expect:?}"),
                    );
                }
            }
            Err(e) => {
                // Tell a run that is gone from one that is briefly reported missing.
                let again = call(socket, "team.status", json!({"runId": id})).await;
                let what = if again.is_ok() {
                    "reported missing once, found on retry"
                } else {
                    "is gone"
                };
                violation(model, format!("acknowledged run {id} {what}: {e}"));
            }
        }
    }
    // 2. Schedules.
    match call(socket, "schedule.list", json!({})).await {
        Ok(list) => {
            let jobs: BTreeMap<String, Option<bool>> = list["jobs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|j| Some((j["id"].as_str()?.to_string(), j["enabled"].as_bool())))
                .collect();
            let m = lock(model);
            let (expected, removed) = (m.schedules.clone(), m.removed.clone());
            drop(m);
            for (id, s) in expected {
                match jobs.get(&id) {
                    None => violation(model, format!("acknowledged schedule {id} is gone")),
                    Some(en) if s.enabled.is_some() && *en != s.enabled => violation(
                        model,
                        format!(
                            "schedule {id}: enabled {en:?}, acknowledged {:?}",
                            s.enabled
                        ),
                    ),
                    _ => {}
                }
            }
            for id in removed {
                if jobs.contains_key(&id) {
                    violation(model, format!("removed schedule {id} is back"));
                }
            }
        }
        Err(e) => violation(model, format!("schedule.list: {e}")),
    }
    // 3. The journal's seqs are contiguous.
    loop {
        match call(
            socket,
            "team.events",
            json!({"afterSeq": *checked_upto, "limit": 1000}),
        )
        .await
        {
            Ok(r) => {
                let evs = r["events"].as_array().cloned().unwrap_or_default();
                if evs.is_empty() {
                    break;
                }
                for ev in evs {
                    let seq = ev["seq"].as_u64().unwrap_or(0);
                    if seq != *checked_upto + 1 {
                        violation(model, format!("journal: seq {seq} after {}", *checked_upto));
                    }
                    *checked_upto = seq.max(*checked_upto);
                    lock(model).counts.events_checked += 1;
                }
            }
            Err(e) => {
                violation(model, format!("team.events: {e}"));
                break;
            }
        }
    }
    // 4. Running tasks have live workers of this daemon, and no fake agent works for nobody.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (missing, orphans) = workers(d).await;
        if missing.is_empty() && orphans.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            for m in missing {
                violation(model, format!("running without a live worker: {m}"));
            }
            for o in orphans {
                violation(
                    model,
                    format!("fake agent pid {o} works for no running task"),
                );
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// (running tasks without a live worker of this daemon, worker pids without a running task)
async fn workers(d: &Daemon) -> (Vec<String>, Vec<u32>) {
    let socket = &d.socket;
    let mut missing = Vec::new();
    let mut owned = BTreeSet::new();
    let list = call(
        socket,
        "team.list",
        json!({"status": "running", "limit": 1000}),
    )
    .await;
    let runs = list
        .ok()
        .and_then(|l| l["runs"].as_array().cloned())
        .unwrap_or_default();
    for r in runs {
        if r["status"] != "running" {
            continue;
        }
        let Some(id) = r["id"].as_str() else { continue };
        let Ok(st) = call(socket, "team.status", json!({"runId": id})).await else {
            continue;
        };
        let running: Vec<(String, u64)> = st["tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|t| t["status"] == "running")
            .filter_map(|t| Some((t["id"].as_str()?.to_string(), t["attempts"].as_u64()?)))
            .collect();
        if running.is_empty() {
            continue;
        }
        let evs = run_events(socket, id).await;
        for (task, attempt) in running {
            let pid = evs
                .iter()
                .rev()
                .find(|e| {
                    e["type"] == "worker.spawned"
                        && e["taskId"] == task.as_str()
                        && e["data"]["attempt"].as_u64() == Some(attempt)
                })
                .and_then(|e| e["data"]["pid"].as_u64())
                .map(|p| p as u32);
            match pid {
                Some(p) if daemon::live_parent(p) == Some(d.pid()) => {
                    // The worker crewd spawned (crew's init, or the agent itself without it).
                    owned.insert(p);
                }
                other => missing.push(format!("{id}/{task} attempt {attempt} (pid {other:?})")),
            }
        }
    }
    let orphans = daemon::workers_in(&d.work)
        .into_iter()
        .filter(|p| {
            !owned.iter().any(|w| daemon::descends_from(*p, *w))
                && !daemon::descends_from(*p, d.pid())
        })
        .collect();
    (missing, orphans)
}

/// All of one run's events, page by page.
async fn run_events(socket: &std::path::Path, id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = 0u64;
    loop {
        let page = call(
            socket,
            "team.events",
            json!({"runId": id, "afterSeq": after, "limit": 1000}),
        )
        .await
        .ok()
        .and_then(|r| r["events"].as_array().cloned())
        .unwrap_or_default();
        let Some(last) = page.last().and_then(|e| e["seq"].as_u64()) else {
            return out;
        };
        after = last;
        out.extend(page);
    }
}

fn schedule_template(d: &Daemon) -> Value {
    json!({"goal": "scheduled [fake:sleep=100ms]", "cwd": d.work, "runtime": "fake", "team": "solo"})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("crew-soak: {e}\nusage: crew-soak --crewd PATH [--duration SECS] [--seed N] [--max-rss-mb MB]");
            return ExitCode::from(2);
        }
    };
    match soak(&a).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("crew-soak: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn soak(a: &Args) -> anyhow::Result<bool> {
    let dir = tempfile::Builder::new().prefix("crew-soak").tempdir()?;
    println!(
        "crew-soak: seed {} duration {} s, state in {}",
        a.seed,
        a.duration.as_secs(),
        dir.path().display()
    );
    let mut rng = StdRng::seed_from_u64(a.seed);
    let mut d = Daemon::new(a.crewd.clone(), dir.path())?;
    d.start().await?;
    let model: Shared = Arc::default();
    let mut subs = vec![SubState::default()];
    let mut checked_upto = 0u64;
    let started = Instant::now();
    while started.elapsed() < a.duration {
        lock(&model).counts.cycles += 1;
        // A run-scoped subscriber on a recent run, besides the global one.
        if subs.len() < 2 {
            if let Some(id) = lock(&model).runs.keys().next_back().cloned() {
                subs.push(SubState {
                    run: Some(id),
                    ..Default::default()
                });
            }
        }
        let followers: Vec<_> = subs
            .iter()
            .cloned()
            .map(|s| tokio::spawn(follow(d.socket.clone(), s, model.clone())))
            .collect();
        let params: Vec<Value> = (0..rng.random_range(3..15))
            .map(|_| run_params(&d, &mut rng))
            .collect();
        let start = tokio::spawn(starter(
            d.socket.clone(),
            params,
            model.clone(),
            rng.random(),
        ));
        let ops = tokio::spawn(operator(
            d.socket.clone(),
            schedule_template(&d),
            model.clone(),
            rng.random(),
        ));
        let cycle = Duration::from_millis(rng.random_range(2000..7000));
        tokio::time::sleep(cycle).await;
        if let Some(status) = d.exited() {
            violation(&model, format!("crewd exited by itself: {status}"));
        }
        // kill -9 in the middle of whatever is going on.
        d.kill9();
        lock(&model).counts.kills += 1;
        start.abort();
        ops.abort();
        let _ = start.await;
        let _ = ops.await;
        // Whatever was in flight when the daemon died may or may not have happened.
        {
            let mut m = lock(&model);
            for e in m.runs.values_mut() {
                if *e == Expect::Unsure {
                    *e = Expect::Exists;
                }
            }
        }
        let mut next_subs = Vec::new();
        for f in followers {
            if let Ok(s) = f.await {
                next_subs.push(s);
            }
        }
        subs = next_subs;
        d.start().await?;
        // Reconnected subscribers: replay from their last seq, no gap, and they catch up.
        let followers: Vec<_> = subs
            .iter()
            .cloned()
            .map(|s| tokio::spawn(follow(d.socket.clone(), s, model.clone())))
            .collect();
        lock(&model).counts.reconnects += followers.len() as u64;
        check(&d, &model, &mut checked_upto).await;
        let target = checked_upto;
        let caught_up = Instant::now();
        // The global subscriber must reach the journal's end as checked.
        while !followers.is_empty() {
            let last = lock(&model).counts.subscriber_events;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = lock(&model).counts.subscriber_events;
            if (now == last && caught_up.elapsed() > Duration::from_secs(2))
                || caught_up.elapsed() > Duration::from_secs(20)
            {
                break;
            }
        }
        d.kill9();
        lock(&model).counts.kills += 1;
        let mut next_subs = Vec::new();
        for f in followers {
            if let Ok(s) = f.await {
                if s.run.is_none() && s.last_seq < target {
                    violation(
                        &model,
                        format!("global subscriber stopped at seq {} < {target}", s.last_seq),
                    );
                }
                next_subs.push(s);
            }
        }
        subs = next_subs;
        d.start().await?;
        let rss = d.rss_mb();
        {
            let mut m = lock(&model);
            m.counts.max_rss_mb = m.counts.max_rss_mb.max(rss);
        }
        if rss > a.max_rss_mb {
            violation(
                &model,
                format!("crewd VmRSS {rss:.0} MB > {} MB", a.max_rss_mb),
            );
        }
        let m = lock(&model);
        println!(
            "cycle {:>3} t={:>4}s runs={} kills={} events={} rss={rss:.0}MB violations={}",
            m.counts.cycles,
            started.elapsed().as_secs(),
            m.counts.runs,
            m.counts.kills,
            checked_upto,
            m.violations.len()
        );
    }
    d.kill9();
    let m = lock(&model);
    let c = &m.counts;
    println!(
        "crew-soak done: cycles {} kills {} runs {} cancels {} resumes {} schedule-ops {} \
         in-flight-at-kill {} subscriber-reconnects {} dropped-notices {} events-checked {} \
         subscriber-events {} max-rss {:.0} MB violations {}",
        c.cycles,
        c.kills,
        c.runs,
        c.cancels,
        c.resumes,
        c.schedule_ops,
        c.lost_in_flight,
        c.reconnects,
        c.dropped_notices,
        c.events_checked,
        c.subscriber_events,
        c.max_rss_mb,
        m.violations.len()
    );
    for v in m.violations.iter().take(30) {
        println!("  violation: {v}");
    }
    if !m.violations.is_empty() {
        // Keep the evidence.
        let kept = dir.keep();
        println!("state and crewd.log kept in {}", kept.display());
    }
    Ok(m.violations.is_empty())
}
