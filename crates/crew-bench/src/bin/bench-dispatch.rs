//! Dispatch overhead: one crew run of N independent fake-agent tasks at concurrency 8, against
//! the same N `crew-fake-agent` invocations through `xargs -P8` (target: crew ≤ 1.5× xargs), and
//! M such tasks against pueue with `parallel 8` (target: crew ≥ 10× faster), when `pueue` and
//! `pueued` are on PATH.
//!
//! Usage: `bench-dispatch [--tasks N (1000)] [--pueue-tasks M (200)] [--work-ms W (0)]
//! [--rounds R (3)] [--box 0|1 (1)] [--serial S (100)]`. The xargs comparison alternates R rounds of xargs and crew (so both see the
//! same machine load) and compares medians; pueue runs once.
//! `--work-ms` makes every invocation sleep W ms (`[fake:sleep=Wms]`) to model agents that do
//! something; 0 measures pure overhead. `--box 0` leaves out the rounds in crew's box (they
//! price the box, not dispatch, and their disk writes slow the rounds after them). With the box,
//! S tasks also run one at a time with and without it: the box's cost per task start alone.
//! Build first:
//! `cargo build --release -p crewd -p crew-box -p crew-fake-agent -p crew-bench`.

mod daemon_support;

use daemon_support::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PARALLEL: usize = 8;
const XARGS_TARGET: f64 = 1.5;
const PUEUE_TARGET: f64 = 10.0;

struct Args {
    tasks: usize,
    pueue_tasks: usize,
    work_ms: u64,
    rounds: usize,
    boxed: bool,
    /// Tasks of the one-at-a-time box comparison.
    serial: usize,
}

fn parse_args() -> Args {
    let mut a = Args {
        tasks: 1000,
        pueue_tasks: 200,
        work_ms: 0,
        rounds: 3,
        boxed: true,
        serial: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| fail(format!("{flag} needs a number")));
        match flag.as_str() {
            "--tasks" => a.tasks = value as usize,
            "--pueue-tasks" => a.pueue_tasks = value as usize,
            "--work-ms" => a.work_ms = value,
            "--rounds" => a.rounds = (value as usize).max(1),
            "--box" => a.boxed = value != 0,
            "--serial" => a.serial = (value as usize).max(1),
            _ => fail(format!("unknown flag {flag}")),
        }
    }
    a
}

/// The task text of item `i`: what both crew and the baselines hand to the fake agent.
fn task_text(i: usize, work_ms: u64) -> String {
    if work_ms > 0 {
        format!("Item {i}. [fake:sleep={work_ms}ms]")
    } else {
        format!("Item {i}.")
    }
}

/// pi's argv as crewd builds it for the fake runtime, minus the prompt.
const FAKE_ARGS: &[&str] = &["--mode", "json", "-p", "--no-session", "--no-tools"];

fn xargs_baseline(root: &Path, fake: &Path, n: usize, work_ms: u64) -> Duration {
    let list = root.join("xargs-items.txt");
    let items: Vec<String> = (0..n)
        .map(|i| format!("Task: {}", task_text(i, work_ms)))
        .collect();
    std::fs::write(&list, items.join("\n") + "\n").unwrap_or_else(|e| fail(e));
    let out = std::fs::File::create(root.join("xargs-out.jsonl")).unwrap_or_else(|e| fail(e));
    let input = std::fs::File::open(&list).unwrap_or_else(|e| fail(e));
    let t0 = Instant::now();
    let status = Command::new("xargs")
        .args(["-P", &PARALLEL.to_string(), "-d", "\\n", "-n", "1"])
        .arg(fake)
        .args(FAKE_ARGS)
        .stdin(input)
        .stdout(out)
        .stderr(Stdio::inherit())
        .status()
        .unwrap_or_else(|e| fail(format!("xargs: {e}")));
    let took = t0.elapsed();
    if !status.success() {
        fail(format!("xargs failed: {status}"));
    }
    took
}

/// One crew run of `n` independent tasks: wall time from `team.run` to `team.wait`, durable
/// events, and crewd's own CPU time (its workers not included).
fn crew_run(d: &Daemon, team: &str, n: usize) -> (Duration, u64, Duration) {
    let r = crew_run_on(d, team, n, "fake", PARALLEL);
    (r.took, r.events, r.cpu)
}

/// One crew run: its wall time, durable events, crewd's CPU, and its id.
struct CrewRun {
    took: Duration,
    events: u64,
    cpu: Duration,
    id: String,
}

/// `crew_run` on `runtime` (`fake-boxed`: the same fake agent in crew's box, issue 34) at
/// `concurrency`.
fn crew_run_on(d: &Daemon, team: &str, n: usize, runtime: &str, concurrency: usize) -> CrewRun {
    let before = d.call("daemon.status", json!({}))["journal"]["lastSeq"]
        .as_u64()
        .unwrap_or(0);
    let pid = d.pid().to_string();
    let cpu0 = cpu_time(&pid);
    let t0 = Instant::now();
    let started = d.call(
        "team.run",
        json!({
            "goal": "bench",
            "cwd": d.work.display().to_string(),
            "team": team,
            "runtime": runtime,
            "concurrency": concurrency,
        }),
    );
    let run_id = started["runId"].as_str().unwrap_or_default().to_string();
    let status = d.wait(&run_id);
    let took = t0.elapsed();
    let cpu = cpu_time(&pid) - cpu0;
    if status != "completed" {
        fail(format!("crew run {run_id} ended {status}"));
    }
    let st = d.call("team.status", json!({"runId": run_id}));
    let done = st["tasks"]
        .as_array()
        .map(|t| t.iter().filter(|t| t["status"] == "completed").count())
        .unwrap_or(0);
    if done != n {
        fail(format!("{done} of {n} tasks completed"));
    }
    let after = d.call("daemon.status", json!({}))["journal"]["lastSeq"]
        .as_u64()
        .unwrap_or(0);
    CrewRun {
        took,
        events: after - before,
        cpu,
        id: run_id,
    }
}

/// bubblewrap can make a box here (as crewd probes it).
fn bwrap_works() -> bool {
    Command::new("bwrap")
        .args([
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "/bin/true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Wall time per task of `n` tasks run one at a time, without and with the box (ms, medians of
/// `rounds` alternating runs): what the box adds to a task start when nothing else competes
/// for the cores — the latency an agent's start sees, without the queueing of 8 slots on a
/// machine with fewer cores. With each side's `Phases` of its median run, and what the box
/// added in each round (its boxed run less the plain run before it): the machine's state moves
/// this figure by a millisecond or more between runs, so one median alone says little.
fn one_start(d: &Daemon, n: usize, rounds: usize) -> OneStart {
    d.bulk_team("serial", n, |i| task_text(i, 0));
    let per_task = |t: Duration| t.as_secs_f64() * 1e3 / n.max(1) as f64;
    let (mut plain, mut boxed) = (Vec::new(), Vec::new());
    let mut added = Vec::new();
    for _ in 0..rounds {
        let p = crew_run_on(d, "serial", n, "fake", 1);
        let b = crew_run_on(d, "serial", n, "fake-boxed", 1);
        added.push(per_task(b.took) - per_task(p.took));
        plain.push((p.took, p.id));
        boxed.push((b.took, b.id));
    }
    let side = |runs: &mut Vec<(Duration, String)>| {
        runs.sort();
        let (took, id) = runs.get(runs.len() / 2).cloned().unwrap_or_default();
        (per_task(took), phases(d, &id))
    };
    OneStart {
        plain: side(&mut plain),
        boxed: side(&mut boxed),
        added,
    }
}

struct OneStart {
    plain: (f64, Phases),
    boxed: (f64, Phases),
    /// Per round, ms per task.
    added: Vec<f64>,
}

/// Where a one-at-a-time run's time per task went, from its events' times (medians over its
/// tasks, ms).
#[derive(Default, Clone, Copy)]
struct Phases {
    /// `task.started` → `worker.spawned`: the prompt, the session, the box's making ready,
    /// the spawn.
    before: f64,
    /// `worker.spawned` → `task.completed`: the worker's life, crewd's reading of its end,
    /// the result and its sync.
    worker: f64,
    /// `task.completed` → the next `task.started`.
    between: f64,
}

fn phases(d: &Daemon, run_id: &str) -> Phases {
    use std::collections::HashMap;
    type Time = chrono::DateTime<chrono::Utc>;
    let mut times: HashMap<String, [Option<Time>; 3]> = HashMap::new();
    for v in d.events(run_id) {
        let Ok(ev) = serde_json::from_value::<crew_core::run::Event>(v) else {
            continue;
        };
        let slot = match ev.body.type_name() {
            "task.started" => 0,
            "worker.spawned" => 1,
            "task.completed" => 2,
            _ => continue,
        };
        if let Some(t) = ev.task_id {
            times.entry(t).or_default()[slot] = Some(ev.time);
        }
    }
    let ms = |a: Option<Time>, b: Option<Time>| -> Option<f64> {
        Some((b? - a?).num_microseconds()? as f64 / 1e3)
    };
    let mut rows: Vec<[Option<Time>; 3]> = times.into_values().collect();
    rows.sort_by_key(|r| r[0]);
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    Phases {
        before: med(rows.iter().filter_map(|r| ms(r[0], r[1])).collect()),
        worker: med(rows.iter().filter_map(|r| ms(r[1], r[2])).collect()),
        between: med(rows
            .windows(2)
            .filter_map(|w| ms(w[0][2], w[1][0]))
            .collect()),
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let home_bin = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin"));
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(home_bin)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

struct Pueue {
    client: PathBuf,
    config: PathBuf,
    daemon: std::process::Child,
}

impl Pueue {
    fn start(root: &Path, pueued: &Path, client: &Path) -> Pueue {
        let dir = root.join("pueue");
        for sub in ["data", "run"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap_or_else(|e| fail(e));
        }
        let config = dir.join("pueue.yml");
        std::fs::write(
            &config,
            format!(
                "shared:\n  pueue_directory: {d}/data\n  runtime_directory: {d}/run\n  use_unix_socket: true\n  unix_socket_path: {d}/run/pueue.sock\n",
                d = dir.display()
            ),
        )
        .unwrap_or_else(|e| fail(e));
        let log = std::fs::File::create(dir.join("pueued.log")).unwrap_or_else(|e| fail(e));
        let daemon = Command::new(pueued)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap_or_else(|e| fail(e)))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| fail(format!("pueued: {e}")));
        let p = Pueue {
            client: client.to_path_buf(),
            config,
            daemon,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !p.run(&["status"]) {
            if Instant::now() > deadline {
                fail("pueued did not come up");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !p.run(&["parallel", &PARALLEL.to_string()]) {
            fail("pueue parallel failed");
        }
        p
    }

    fn run(&self, args: &[&str]) -> bool {
        Command::new(&self.client)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `pueue add` every invocation, then `pueue wait` for all of them: how pueue is driven.
    /// (total, of which adding).
    fn bench(&self, fake: &Path, n: usize, work_ms: u64) -> (Duration, Duration) {
        let t0 = Instant::now();
        for i in 0..n {
            let prompt = format!("'Task: {}'", task_text(i, work_ms));
            let mut args: Vec<String> = vec!["add".into(), "--".into(), fake.display().to_string()];
            args.extend(FAKE_ARGS.iter().map(|s| s.to_string()));
            args.push(prompt);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if !self.run(&args) {
                fail(format!("pueue add #{i} failed"));
            }
        }
        let adding = t0.elapsed();
        if !self.run(&["wait"]) {
            fail("pueue wait failed");
        }
        (t0.elapsed(), adding)
    }
}

impl Drop for Pueue {
    fn drop(&mut self) {
        let _ = self.run(&["shutdown"]);
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

fn main() {
    let args = parse_args();
    let fake = sibling_bin("crew-fake-agent");
    let root = bench_root("crew-bench-dispatch");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "dispatch bench: {} tasks (pueue: {}), parallel {PARALLEL}, work {} ms per task; loadavg {}",
        args.tasks,
        args.pueue_tasks,
        args.work_ms,
        load.trim()
    );

    // `fake-boxed`: the fake agent in crew's box (bubblewrap), to price the box per task;
    // `fake` unboxed (`sandbox = "off"`: the box is on by default).
    let boxed = args.boxed && bwrap_works();
    let d = Daemon::start(
        root.path(),
        &format!(
            "max_workers = {PARALLEL}\nmax_concurrency_cap = {PARALLEL}\nresident_runs = 16\n\
             sandbox = \"off\"\n\
             [runtimes.fake-boxed]\nadapter = \"pi\"\ncommand = [{:?}]\nrpc = false\nsandbox = \"required\"\n",
            fake.display().to_string()
        ),
    );
    d.bulk_team("bulk", args.tasks, |i| task_text(i, args.work_ms));

    // Warm both paths (page cache, first-run costs) with a few items.
    xargs_baseline(root.path(), &fake, 16, 0);
    d.bulk_team("warm", 16, |i| task_text(i, 0));
    crew_run(&d, "warm", 16);

    let mut xargs_times = Vec::new();
    let mut crew_times = Vec::new();
    let mut boxed_times = Vec::new();
    if boxed {
        crew_run_on(&d, "warm", 16, "fake-boxed", PARALLEL);
    }
    for round in 1..=args.rounds {
        let x = xargs_baseline(root.path(), &fake, args.tasks, args.work_ms);
        if boxed {
            let b = crew_run_on(&d, "bulk", args.tasks, "fake-boxed", PARALLEL).took;
            println!(
                "round {round}: crew with the box {}: {:.2}x",
                secs(b),
                b.as_secs_f64() / x.as_secs_f64()
            );
            boxed_times.push(b);
        }
        let (c, events, cpu) = crew_run(&d, "bulk", args.tasks);
        println!(
            "round {round}: xargs -P{PARALLEL} {}, crew {} ({events} durable events, {:.0} events/s, \
             crewd CPU {:.2} ms per task): {:.2}x",
            secs(x),
            secs(c),
            events as f64 / c.as_secs_f64(),
            cpu.as_secs_f64() * 1e3 / args.tasks.max(1) as f64,
            c.as_secs_f64() / x.as_secs_f64()
        );
        xargs_times.push(x);
        crew_times.push(c);
    }
    let (xargs, crew) = (median(&mut xargs_times), median(&mut crew_times));
    let ratio = crew.as_secs_f64() / xargs.as_secs_f64();
    println!(
        "median of {} rounds: xargs -P{PARALLEL} {} tasks in {}, crew run in {}",
        args.rounds,
        args.tasks,
        secs(xargs),
        secs(crew)
    );
    println!(
        "crew / xargs = {ratio:.2}x (target <= {XARGS_TARGET}x): {}",
        verdict(ratio <= XARGS_TARGET)
    );
    if boxed {
        let b = median(&mut boxed_times);
        let per_run_ms = (b.as_secs_f64() - crew.as_secs_f64()) * 1e3 / args.tasks.max(1) as f64;
        let in_slot_ms = per_run_ms * PARALLEL as f64;
        println!(
            "crew with the box: {} = {:.2}x xargs (without: {ratio:.2}x); the run takes \
             {per_run_ms:.2} ms more per task; in its slot (x {PARALLEL} slots sharing the \
             machine's cores) each start waits {in_slot_ms:.2} ms more",
            secs(b),
            b.as_secs_f64() / xargs.as_secs_f64(),
        );
        let one = one_start(&d, args.serial, args.rounds);
        let ((plain, p), (boxed, q)) = (one.plain, one.boxed);
        let rounds: Vec<String> = one.added.iter().map(|a| format!("{a:.2}")).collect();
        println!(
            "one task start alone (concurrency 1, {} tasks, medians of {} alternating rounds): \
             {plain:.2} ms without the box, {boxed:.2} ms with it: the box adds {:.2} ms per \
             task start (target <= 5 ms): {}; by round: {} ms",
            args.serial,
            args.rounds,
            boxed - plain,
            verdict(boxed - plain <= 5.0),
            rounds.join(" / ")
        );
        println!(
            "  per task, medians (without / with the box): started -> spawned {:.2} / {:.2} ms, \
             spawned -> completed {:.2} / {:.2} ms, completed -> next started {:.2} / {:.2} ms",
            p.before, q.before, p.worker, q.worker, p.between, q.between
        );
    } else if args.boxed {
        println!("box comparison SKIPPED: bubblewrap cannot make a box here");
    }

    if args.pueue_tasks == 0 {
        return;
    }
    match (find_on_path("pueued"), find_on_path("pueue")) {
        (Some(pueued), Some(client)) => {
            d.bulk_team("bulk-pueue", args.pueue_tasks, |i| {
                task_text(i, args.work_ms)
            });
            let pueue = Pueue::start(root.path(), &pueued, &client);
            let (pt, adding) = pueue.bench(&fake, args.pueue_tasks, args.work_ms);
            drop(pueue);
            let (crew, _, _) = crew_run(&d, "bulk-pueue", args.pueue_tasks);
            let speedup = pt.as_secs_f64() / crew.as_secs_f64();
            println!(
                "pueue (parallel {PARALLEL}): {} tasks in {} (`pueue add` each: {}, then `pueue wait`)",
                args.pueue_tasks,
                secs(pt),
                secs(adding)
            );
            println!("crew run:  {} tasks in {}", args.pueue_tasks, secs(crew));
            println!(
                "pueue / crew = {speedup:.1}x faster (target >= {PUEUE_TARGET}x): {}",
                verdict(speedup >= PUEUE_TARGET)
            );
        }
        _ => println!(
            "pueue comparison SKIPPED: pueue/pueued not found on PATH or in ~/.cargo/bin \
             (cargo install pueue)"
        ),
    }
}
