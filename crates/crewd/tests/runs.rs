//! Issue 3 through the real daemon: runs of the fake agent end to end, exact readiness and
//! streaming dispatch, worker faults, bad input, cancel, and event subscriptions.

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Small timeouts so every fault resolves in seconds.
const FAST: &[(&str, &str)] = &[
    ("no_output_timeout_ms", "1500"),
    ("kill_grace_ms", "500"),
    ("final_drain_ms", "1000"),
    ("final_drain_quiet_ms", "200"),
];

/// A daemon with the FAST timeouts; `extra` lines (`key = value`) add to or override them.
fn daemon(extra: &str) -> Daemon {
    let mut lines: Vec<String> = extra.lines().map(str::to_string).collect();
    for (k, v) in FAST {
        if !lines
            .iter()
            .any(|l| l.split('=').next().map(str::trim) == Some(*k))
        {
            lines.push(format!("{k} = {v}"));
        }
    }
    Daemon::start_with(Opts {
        config: lines.join("\n") + "\n",
        env: vec![],
    })
}

/// SPEC §6 names, plus the ones the daemon adds: `worker.spawned` (pid and start time, for
/// recovery), `worker.submitting`/`worker.submitted` (a remote attempt's job), `run.forgotten`
/// and `task.warning` (a tool call the worker's CLI refused).
const EVENT_TYPES: &[&str] = &[
    "run.created",
    "run.started",
    "run.blocked",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "run.resumed",
    "run.budget_warning",
    "run.budget_exceeded",
    "plan.approval_required",
    "plan.approved",
    "plan.rejected",
    "task.queued",
    "task.started",
    "task.progress",
    "task.completed",
    "task.failed",
    "task.cancelled",
    "task.skipped",
    "task.needs_attention",
    "task.waiting",
    "task.retrying",
    "task.steered",
    "task.warning",
    "schedule.added",
    "schedule.updated",
    "schedule.removed",
    "schedule.fired",
    "schedule.skipped",
    "daemon.started",
    "daemon.recovered",
    "worker.spawned",
    "worker.submitting",
    "worker.submitted",
    "run.forgotten",
];

fn ty(e: &Value) -> &str {
    e["type"].as_str().unwrap_or("")
}

fn of_type<'a>(evs: &'a [Value], t: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| ty(e) == t).collect()
}

fn task_events<'a>(evs: &'a [Value], task: &str, t: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| ty(e) == t && e["taskId"] == task)
        .collect()
}

fn artifact(d: &Daemon, run: &str, name: &str) -> String {
    d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn tasks(status: &Value) -> Vec<Value> {
    status["tasks"].as_array().unwrap().clone()
}

fn task_status(status: &Value, id: &str) -> String {
    Daemon::task(status, id)["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every seq strictly increasing; each run's runSeq contiguous from 1; every type known.
fn check_event_order(all: &[Value]) {
    let mut last = 0u64;
    let mut run_seq: std::collections::HashMap<String, u64> = Default::default();
    for e in all {
        let seq = e["seq"].as_u64().unwrap();
        assert!(seq > last, "seq not increasing at {e}");
        last = seq;
        assert!(EVENT_TYPES.contains(&ty(e)), "unknown event type in {e}");
        if let Some(r) = e["runId"].as_str() {
            let n = run_seq.entry(r.to_string()).or_insert(0);
            *n += 1;
            assert_eq!(e["runSeq"].as_u64(), Some(*n), "runSeq gap at {e}");
        }
    }
}

fn pgid_alive(pgid: i64) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    unsafe { libc::kill(-(pgid as i32), 0) == 0 }
}

/// Wait (bounded) until a worker's process group is gone; false if it outlives `limit`.
fn group_gone_within(pgid: i64, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !pgid_alive(pgid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !pgid_alive(pgid)
}

/// Whether the process ignores SIGTERM (bit 15 of `SigIgn` in /proc/<pid>/status).
fn sigterm_ignored(pid: i64) -> bool {
    // The worker runs under crew's init (whose pid the event names): in the init's group, or
    // in its box (a session of its own) below it.
    group_members(pid)
        .into_iter()
        .chain(descendants(pid))
        .any(sigterm_ignored_by)
}

/// The processes below `root`.
fn descendants(root: i64) -> Vec<i64> {
    let table: Vec<(i64, i64)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i64>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let rest = stat.get(stat.rfind(')')? + 1..)?;
            Some((p, rest.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect();
    let mut out = vec![];
    let mut next = vec![root];
    while let Some(p) = next.pop() {
        for &(c, _) in table.iter().filter(|(_, pp)| *pp == p) {
            if !out.contains(&c) {
                out.push(c);
                next.push(c);
            }
        }
    }
    out
}

/// Processes in process group `pgid`.
fn group_members(pgid: i64) -> Vec<i64> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i64>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let rest = stat
                .rfind(')')
                .and_then(|i| stat.get(i + 1..))
                .unwrap_or("");
            rest.split_whitespace().nth(2).and_then(|g| g.parse().ok()) == Some(pgid)
        })
        .collect()
}

fn sigterm_ignored_by(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
}

/// Poll an OS-level condition (no event exists for it), bounded.
fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "condition not met within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn spawned_pids(evs: &[Value]) -> Vec<i64> {
    of_type(evs, "worker.spawned")
        .iter()
        .map(|e| e["data"]["pid"].as_i64().unwrap())
        .collect()
}

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn default_team_on_fake_completes_end_to_end() {
    let d = daemon("");
    let goal = "fix the flaky login test [fake:tokens=1000]";
    let run = d.run(goal, json!({}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let ts = tasks(&st);
    let ids: Vec<&str> = ts.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["01_explore", "02_plan", "03_execute", "04_verify"]);

    let mut sum = [0u64; 5];
    let mut cost = 0.0;
    for t in &ts {
        assert_eq!(t["status"], "completed", "{t}");
        assert_eq!(t["attempts"], 1);
        let id = t["id"].as_str().unwrap();
        let result = artifact(&d, &run, &format!("results/{id}.txt"));
        // A judge's answer ends with its verdict block (issue 30).
        assert_eq!(
            result.lines().next().unwrap_or_default(),
            format!("fake-agent: done with \"Goal: {goal}\""),
            "result of {id}"
        );
        let u = &t["usage"];
        assert_eq!(
            (u["input"].as_u64(), u["output"].as_u64()),
            (Some(800), Some(200))
        );
        for (i, k) in ["input", "output", "cacheRead", "cacheWrite", "turns"]
            .iter()
            .enumerate()
        {
            sum[i] += u[k].as_u64().unwrap();
        }
        cost += u["cost"].as_f64().unwrap();
        // The artifacts named in the status are the ones that exist.
        let names: BTreeSet<String> = t["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect();
        for want in [
            format!("prompts/{id}.md"),
            format!("results/{id}.txt"),
            format!("transcripts/{id}.attempt-1.jsonl"),
        ] {
            assert!(names.contains(&want), "{id} lacks {want}: {names:?}");
        }
    }
    // The plan step's `output: plan.md` is a shared artifact.
    assert_eq!(
        artifact(&d, &run, "shared/plan.md"),
        artifact(&d, &run, "results/02_plan.txt")
    );
    let ru = &st["run"]["usage"];
    let got = [
        ru["input"].as_u64().unwrap(),
        ru["output"].as_u64().unwrap(),
        ru["cacheRead"].as_u64().unwrap(),
        ru["cacheWrite"].as_u64().unwrap(),
        ru["turns"].as_u64().unwrap(),
    ];
    assert_eq!(got, sum, "run usage = sum of its tasks");
    assert_eq!(sum[0], 4 * 800);
    assert!(sum[4] >= 4, "turns counted");
    assert!(approx(ru["cost"].as_f64().unwrap(), cost));
    assert!(approx(cost, 4.0 * 1000.0 * 0.000002));

    // Each later prompt carries the previous task's output in a fenced dependency block.
    for w in ids.windows(2) {
        let (prev, cur) = (w[0], w[1]);
        let prompt = artifact(&d, &run, &format!("prompts/{cur}.md"));
        let prev_out = artifact(&d, &run, &format!("results/{prev}.txt"));
        let open = format!("<dependency-output task=\"{prev}\"");
        let at = prompt
            .find(&open)
            .unwrap_or_else(|| panic!("{cur}'s prompt has no block for {prev}:\n{prompt}"));
        let block = &prompt[at..];
        let end = block.find("</dependency-output>").unwrap();
        assert!(block[..end].contains(&prev_out), "{cur}'s block: {block}");
        assert!(prompt.starts_with(&format!("Goal: {goal}")));
    }
    assert!(!artifact(&d, &run, "prompts/01_explore.md").contains("<dependency-output"));

    // Events: the run's own, ordered, contiguous, named per SPEC §6.
    let all = d.events(None);
    check_event_order(&all);
    let evs = d.events(Some(&run));
    assert!(evs.iter().all(|e| e["runId"] == run.as_str()));
    let types: Vec<&str> = evs.iter().map(ty).collect();
    assert_eq!(types.first(), Some(&"run.created"));
    assert_eq!(types.last(), Some(&"run.completed"));
    for id in &ids {
        assert_eq!(task_events(&evs, id, "task.started").len(), 1);
        assert_eq!(task_events(&evs, id, "task.completed").len(), 1);
    }
    let done = of_type(&evs, "run.completed")[0];
    assert_eq!(done["data"]["usage"]["input"].as_u64(), Some(sum[0]));
}

/// A project team `name` whose workflow is `steps`: (step id, dependsOn, task text); every step
/// is played by the explorer (read-only, no plan approval).
fn project_workflow(d: &Daemon, name: &str, steps: &[(&str, &str, &str)]) {
    d.project_file(
        &format!("teams/{name}.team.md"),
        &format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- explorer: agent=explorer\n"),
    );
    let mut wf = format!("---\nname: {name}\n---\n\n");
    for (id, deps, text) in steps {
        wf.push_str(&format!("## {id}\nrole: explorer\n"));
        if !deps.is_empty() {
            wf.push_str(&format!("dependsOn: {deps}\n"));
        }
        wf.push_str(&format!("\n{text}\n\n"));
    }
    d.project_file(&format!("workflows/{name}.workflow.md"), &wf);
}

fn seq_of(evs: &[Value], task: &str, t: &str) -> u64 {
    task_events(evs, task, t)
        .first()
        .unwrap_or_else(|| panic!("no {t} for {task}"))["seq"]
        .as_u64()
        .unwrap()
}

fn time_of(evs: &[Value], task: &str, t: &str) -> chrono::DateTime<chrono::Utc> {
    task_events(evs, task, t).first().unwrap()["time"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Task id of a step (ids are `NN_step`).
fn tid(st: &Value, step: &str) -> String {
    tasks(st)
        .iter()
        .find(|t| t["stepId"] == step)
        .unwrap_or_else(|| panic!("no step {step}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn diamond_readiness_is_exact_and_dispatch_streams() {
    let d = daemon("");
    project_workflow(
        &d,
        "diamond",
        &[
            ("root", "", "Start."),
            // Long enough that fast and after_fast (two spawns, two syncfs) end well before it
            // even on a loaded machine: the ordering below is then the scheduler's, not luck.
            // (A turn every 250 ms keeps it under the 1.5 s no-output watchdog.)
            (
                "slow",
                "root",
                "Take your time. [fake:sleep=10s] [fake:turns=40]",
            ),
            ("fast", "root", "Be quick."),
            ("after_fast", "fast", "Follow up."),
            ("join", "slow, after_fast", "Join."),
        ],
    );
    let run = d.run("diamond goal", json!({"team": "diamond"}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let evs = d.events(Some(&run));
    let [root, slow, fast, after_fast, join] =
        ["root", "slow", "fast", "after_fast", "join"].map(|s| tid(&st, s));
    let started = |t: &str| seq_of(&evs, t, "task.started");
    let completed = |t: &str| seq_of(&evs, t, "task.completed");
    // Exact readiness: nothing starts before its dependencies completed.
    for (t, deps) in [
        (&slow, vec![&root]),
        (&fast, vec![&root]),
        (&after_fast, vec![&fast]),
        (&join, vec![&slow, &after_fast]),
    ] {
        for dep in deps {
            assert!(
                started(t) > completed(dep),
                "{t} started before {dep} completed"
            );
        }
    }
    // No wave barrier: the fast branch's dependent started (and finished) while slow still ran.
    assert!(started(&after_fast) < completed(&slow));
    assert!(completed(&after_fast) < completed(&slow));
    assert!(time_of(&evs, &after_fast, "task.started") < time_of(&evs, &slow, "task.completed"));
    // The five tasks of one agent share one system prompt file.
    let prompts = d.state_dir.join("runs").join(&run).join("prompts");
    let system: Vec<String> = std::fs::read_dir(&prompts)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("_system-"))
        .collect();
    assert_eq!(system.len(), 1, "{system:?}");
    let text = artifact(&d, &run, &format!("prompts/{}", system[0]));
    assert!(!text.trim().is_empty());
}

#[test]
fn crashing_worker_is_retried_with_backoff_then_fails() {
    let d = daemon("");
    one_step_team(&d, "crashy", "Crash. [fake:crash]", "explorer");
    let run = d.run("crash goal", json!({"team": "crashy"}));
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    let t = &tasks(&st)[0];
    assert_eq!(t["status"], "failed");
    assert_eq!(t["attempts"], 3, "maxAttempts defaults to 3");
    let err = t["error"].as_str().unwrap();
    assert!(err.contains("101") && err.contains("no output"), "{err}");
    let evs = d.events(Some(&run));
    let retries = of_type(&evs, "task.retrying");
    assert_eq!(retries.len(), 2);
    let delays: Vec<u64> = retries
        .iter()
        .map(|e| e["data"]["delayMs"].as_u64().unwrap())
        .collect();
    assert!(
        delays[0] >= 1000 && delays[1] >= 2000 && delays[1] > delays[0],
        "{delays:?}"
    );
    for r in &retries {
        assert_eq!(r["data"]["reason"], "crash");
    }
    // The backoff was honoured: attempt 2 started no earlier than retrying + delay.
    let starts = of_type(&evs, "task.started");
    assert_eq!(starts.len(), 3);
    for (r, s) in retries.iter().zip(&starts[1..]) {
        let rt: chrono::DateTime<chrono::Utc> = r["time"].as_str().unwrap().parse().unwrap();
        let stt: chrono::DateTime<chrono::Utc> = s["time"].as_str().unwrap().parse().unwrap();
        let delay = r["data"]["delayMs"].as_i64().unwrap();
        assert!((stt - rt).num_milliseconds() >= delay - 5, "{r} {s}");
    }
    assert_eq!(of_type(&evs, "task.failed").len(), 1);
    assert!(st["run"]["reason"].as_str().unwrap().contains("failed"));
}

#[test]
fn crash_on_the_first_attempt_only_succeeds_on_the_second() {
    let d = daemon("");
    one_step_team(
        &d,
        "flaky",
        "Crash once. [fake:crash-attempts=1]",
        "explorer",
    );
    let run = d.run("flaky goal", json!({"team": "flaky"}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let t = &tasks(&st)[0];
    assert_eq!(
        (t["status"].as_str(), t["attempts"].as_u64()),
        (Some("completed"), Some(2))
    );
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.retrying").len(), 1);
    let id = t["id"].as_str().unwrap();
    assert!(artifact(&d, &run, &format!("results/{id}.txt")).starts_with("fake-agent: done"));
    // Each attempt keeps its own transcript.
    assert!(d
        .http(
            "team.artifact",
            json!({"runId": run, "name": format!("transcripts/{id}.attempt-2.jsonl")})
        )
        .get("result")
        .is_some());
}

/// A worker whose first words come late does not read as a daemon that stopped running: that
/// line (and the watchdog's restart it stands for) is kept for a real pause.
#[test]
fn a_slow_first_line_is_not_taken_for_a_pause_of_the_daemon() {
    let d = daemon("");
    one_step_team(&d, "slow", "Think first. [fake:sleep=1400ms]", "explorer");
    let run = d.run("slow goal", json!({"team": "slow"}));
    assert_eq!(d.wait(&run), "completed");
    let log = d.log_text();
    assert!(log.contains("worker ended"), "{log}");
    assert!(!log.contains("did not run for a while"), "{log}");
}

#[test]
fn silent_worker_is_stopped_by_the_watchdog_and_retried() {
    let d = daemon("max_attempts = 2\n");
    one_step_team(&d, "mute", "Say nothing. [fake:silent]", "explorer");
    let run = d.run("silent goal", json!({"team": "mute"}));
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    let t = &tasks(&st)[0];
    assert_eq!(t["attempts"], 2);
    assert!(t["error"].as_str().unwrap().contains("no output"), "{t}");
    let evs = d.events(Some(&run));
    let retries = of_type(&evs, "task.retrying");
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["data"]["reason"], "no_output");
    // The log says why each worker was stopped, when it was stopped.
    let log = d.log_text();
    assert_eq!(
        log.matches("no output for 1.5s; sending SIGTERM").count(),
        2,
        "{log}"
    );
    // The watchdog fired after the configured quiet time, not before.
    let started: chrono::DateTime<chrono::Utc> = of_type(&evs, "task.started")[0]["time"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let retried: chrono::DateTime<chrono::Utc> =
        retries[0]["time"].as_str().unwrap().parse().unwrap();
    let ms = (retried - started).num_milliseconds();
    // (The upper bound only tells the configured 1.5 s from the 5 min default; a loaded
    // machine may add seconds to the SIGTERM and reaping.)
    assert!((1500..60_000).contains(&ms), "watchdog after {ms} ms");
    for pid in spawned_pids(&evs) {
        assert!(!pgid_alive(pid), "worker group {pid} survived");
    }
}

#[test]
fn worker_ignoring_sigterm_is_killed_after_the_grace() {
    let d = daemon("max_attempts = 1\nkill_grace_ms = 2000");
    one_step_team(
        &d,
        "stubborn",
        "Ignore TERM. [fake:ignore-sigterm] [fake:silent]",
        "explorer",
    );
    let cpu_before = cpu_ms(d.pid());
    let run = d.run("stubborn goal", json!({"team": "stubborn"}));
    assert_eq!(d.wait(&run), "failed");
    let evs = d.events(Some(&run));
    let pids = spawned_pids(&evs);
    assert_eq!(pids.len(), 1);
    // The attempt is reported only once the worker is gone: its group must be empty now.
    assert!(
        !pgid_alive(pids[0]),
        "group {} still has processes",
        pids[0]
    );
    let time = |t: &str| -> chrono::DateTime<chrono::Utc> {
        of_type(&evs, t)[0]["time"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let ms = (time("task.failed") - time("worker.spawned")).num_milliseconds();
    assert!(
        ms >= 1500 + 2000,
        "SIGKILL came before the grace ran out ({ms} ms)"
    );
    assert!(d.log_text().contains("ignored SIGTERM"));
    // Waiting out the grace is waiting, not spinning.
    let cpu = cpu_ms(d.pid()) - cpu_before;
    // (A loop woken by instants already past used ~350 ms here; idle waiting ~20 ms.)
    assert!(
        cpu < 200,
        "the daemon used {cpu} ms of CPU during a 3.5 s attempt"
    );
}

/// CPU time (user + system) a process used so far, in ms.
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the whole line (11 and 12 after the name).
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    (f[11] + f[12]) * 1000 / hz
}

#[test]
fn lingering_worker_is_drained_and_completes() {
    let d = daemon("");
    one_step_team(&d, "linger", "Stay around. [fake:linger]", "explorer");
    let run = d.run("linger goal", json!({"team": "linger"}));
    // Completed, on the first attempt: the final drain stopped it (the no-output watchdog
    // would have made the attempt a failure, and the worker never exits by itself).
    assert_eq!(d.wait(&run), "completed");
    let evs = d.events(Some(&run));
    let pids = spawned_pids(&evs);
    assert!(!pgid_alive(pids[0]));
    let st = d.status(&run);
    assert_eq!(tasks(&st)[0]["attempts"], 1);
}

#[test]
fn lingering_worker_that_ignores_sigterm_still_completes() {
    let d = daemon("");
    one_step_team(
        &d,
        "linger2",
        "Stay. [fake:linger] [fake:ignore-sigterm]",
        "explorer",
    );
    let run = d.run("linger goal", json!({"team": "linger2"}));
    assert_eq!(d.wait(&run), "completed");
    let evs = d.events(Some(&run));
    assert!(!pgid_alive(spawned_pids(&evs)[0]));
}

fn rss_kb(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn flood_of_50_mb_completes_with_a_capped_transcript() {
    let d = daemon("");
    let base = d.run("warm up", json!({}));
    assert_eq!(d.wait(&base), "completed");
    let before = rss_kb(d.pid(), "VmHWM:");
    one_step_team(&d, "chatty", "Talk a lot. [fake:chatty=50MB]", "explorer");
    let run = d.run("chatty goal", json!({"team": "chatty"}));
    assert_eq!(d.wait(&run), "completed");
    // Streamed, not buffered: the peak grows by far less than the flood.
    let peak = rss_kb(d.pid(), "VmHWM:");
    assert!(
        peak < before + 40 * 1024,
        "daemon peak RSS {before} kB -> {peak} kB"
    );
    let st = d.status(&run);
    let t = &tasks(&st)[0];
    let id = t["id"].as_str().unwrap();
    let tr = t["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "transcript")
        .unwrap()
        .clone();
    let bytes = tr["bytes"].as_u64().unwrap();
    assert!(bytes <= (16 << 20) + 4096, "transcript {bytes} bytes");
    assert!(bytes > 1 << 20);
    let tail = d.ok(
        "team.artifact",
        json!({"runId": run, "name": tr["name"], "offset": bytes.saturating_sub(300)}),
    );
    assert!(
        tail["content"]
            .as_str()
            .unwrap()
            .contains("crew.transcript_truncated"),
        "{tail}"
    );
    let result = artifact(&d, &run, &format!("results/{id}.txt"));
    assert!(
        result.len() < 10_000,
        "the result is the final text, not the flood"
    );
}

#[test]
fn no_final_text_needs_attention_and_blocks_the_run() {
    let d = daemon("");
    one_step_team(
        &d,
        "quiet",
        "Say nothing final. [fake:no-final-text]",
        "explorer",
    );
    let run = d.run("quiet goal", json!({"team": "quiet"}));
    assert_eq!(d.wait(&run), "blocked");
    let st = d.status(&run);
    assert_eq!(tasks(&st)[0]["status"], "needs_attention");
    assert!(st["run"]["reason"]
        .as_str()
        .unwrap()
        .contains("needs attention"));
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.needs_attention").len(), 1);
    assert_eq!(of_type(&evs, "run.blocked").len(), 1);
    // Resume re-queues it (it will need attention again).
    let r = d.ok("team.resume", json!({"runId": run}));
    assert_eq!(r["requeuedTaskIds"].as_array().unwrap().len(), 1);
}

/// A final answer on a stdout line over the line cap (1 MiB) cannot be read: the task needs
/// attention and says why, not only that there was no answer.
#[test]
fn an_answer_on_a_line_over_the_cap_says_it_was_cut() {
    let d = daemon("");
    std::fs::write(d.work.join("big.txt"), "y".repeat(1_200_000)).unwrap();
    one_step_team(&d, "big", "Quote it. [fake:cat=big.txt]", "explorer");
    let run = d.run("big goal", json!({"team": "big"}));
    assert_eq!(d.wait(&run), "blocked");
    let st = d.status(&run);
    assert_eq!(tasks(&st)[0]["status"], "needs_attention");
    let reason = of_type(&d.events(Some(&run)), "task.needs_attention")[0]["data"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(reason.contains("over 1 MiB and cut"), "{reason}");
}

#[test]
fn invalid_json_lines_are_skipped() {
    let d = daemon("");
    one_step_team(
        &d,
        "garbled",
        "Mix garbage. [fake:invalid-json]",
        "explorer",
    );
    let run = d.run("garbled goal", json!({"team": "garbled"}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let id = tasks(&st)[0]["id"].as_str().unwrap().to_string();
    assert!(artifact(&d, &run, &format!("results/{id}.txt")).starts_with("fake-agent: done"));
}

#[test]
fn final_failure_fail_fast_skips_the_rest_continue_only_dependents() {
    let d = daemon("");
    project_workflow(
        &d,
        "failing",
        &[
            ("bad", "", "Fail. [fake:fail]"),
            ("other", "", "Independent work."),
            ("dep", "bad", "Needs bad."),
        ],
    );
    for (policy, other_status) in [("fail-fast", "skipped"), ("continue", "completed")] {
        let run = d.run(
            "failing goal",
            json!({"team": "failing", "concurrency": 1, "failurePolicy": policy}),
        );
        assert_eq!(d.wait(&run), "failed", "{policy}");
        let st = d.status(&run);
        let (bad, other, dep) = (tid(&st, "bad"), tid(&st, "other"), tid(&st, "dep"));
        assert_eq!(task_status(&st, &bad), "failed");
        assert_eq!(
            Daemon::task(&st, &bad)["attempts"],
            1,
            "a final failure is not retried"
        );
        assert!(Daemon::task(&st, &bad)["error"]
            .as_str()
            .unwrap()
            .contains("invalid api key"));
        assert_eq!(task_status(&st, &other), other_status, "{policy}");
        assert_eq!(task_status(&st, &dep), "skipped", "{policy}");
        let evs = d.events(Some(&run));
        assert!(of_type(&evs, "task.retrying").is_empty());
    }
}

#[test]
fn bad_run_requests_are_refused_with_the_field_named() {
    let d = daemon("");
    let cwd = path_str(&d.work).to_string();
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": "/nonexistent/crew/dir", "runtime": "fake"}),
    );
    assert_eq!(e["code"], -32602);
    assert!(e["message"].as_str().unwrap().contains("cwd"), "{e}");
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": cwd, "runtime": "no-such-runtime"}),
    );
    assert_eq!(e["code"], -32602);
    assert!(e["message"].as_str().unwrap().contains("runtime"), "{e}");
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": cwd, "runtime": "fake", "team": "no-such-team"}),
    );
    assert_eq!(e["code"], 1003);
    let diags = e["data"]["diagnostics"].as_array().unwrap();
    assert!(!diags.is_empty(), "{e}");
    assert!(
        diags
            .iter()
            .any(|g| g["message"].as_str().unwrap().contains("no-such-team")),
        "{e}"
    );
    // None of these created anything.
    assert!(d.ok("team.list", json!({}))["runs"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn goal_of_100k_characters_goes_through_a_file() {
    let d = daemon("");
    one_step_team(&d, "big", "Handle it: {goal}", "explorer");
    // The worker must still run when its /proc entry is read below: a margin for a loaded
    // machine, with a turn every 250 ms for the 1.5 s watchdog.
    let goal = format!("[fake:sleep=6s] [fake:turns=24] {}", "y".repeat(100_000));
    let run = d.run(&goal, json!({"team": "big"}));
    // While the worker runs, its argv names the prompt file instead of holding the prompt.
    let evs = wait_for_event(&d, &run, "worker.spawned");
    let pid = evs["data"]["pid"].as_i64().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(cmdline.len() < 10_000, "argv of {} bytes", cmdline.len());
    let args = String::from_utf8_lossy(&cmdline).to_string();
    assert!(args.contains("@") && args.contains("prompts/"), "{args}");
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let id = tasks(&st)[0]["id"].as_str().unwrap().to_string();
    let prompt = artifact(&d, &run, &format!("prompts/{id}.md"));
    assert!(prompt.len() > 200_000, "goal twice in the prompt");
    let result = artifact(&d, &run, &format!("results/{id}.txt"));
    assert!(
        result.starts_with("fake-agent: done with \"Goal: [fake:sleep=6s] [fake:turns=24] yyyy")
    );
}

/// Block (on `team.wait`-like long polls of `team.events`) until the run has an event of type
/// `t`; returns it.
fn wait_for_event(d: &Daemon, run: &str, t: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = 0u64;
    loop {
        let r = d.ok("team.events", json!({"runId": run, "afterSeq": after}));
        for e in r["events"].as_array().unwrap() {
            if ty(e) == t {
                return e.clone();
            }
        }
        after = r["nextSeq"].as_u64().unwrap();
        assert!(Instant::now() < deadline, "no {t} in run {run}");
        // Wake on the run's next event (or in 100 ms), not on a fixed sleep.
        let _ = d.ok("team.wait", json!({"runId": run, "timeoutMs": 100}));
    }
}

#[test]
fn cancel_while_queued_while_running_and_after_finish() {
    // One worker slot: the second run waits in the queue. A long grace (60 s): a worker that is
    // gone well before it went on SIGTERM, however loaded the machine.
    // No watchdog within the test's time: only the cancel may stop these workers.
    let d = daemon("max_workers = 1\nkill_grace_ms = 60000\nno_output_timeout_ms = 60000");
    one_step_team(&d, "hold", "Hold on. [fake:sleep=20s]", "explorer");
    let a = d.run("run a", json!({"team": "hold"}));
    let spawned = wait_for_event(&d, &a, "worker.spawned");
    let pid = spawned["data"]["pid"].as_i64().unwrap();
    let b = d.run("run b", json!({"team": "hold"}));
    let sb = d.status(&b);
    let b_task = tasks(&sb)[0]["id"].as_str().unwrap().to_string();
    assert_eq!(tasks(&sb)[0]["status"], "queued");

    // While queued.
    let r = d.ok("team.cancel", json!({"runId": b, "reason": "not needed"}));
    assert_eq!(r["status"], "cancelled");
    assert_eq!(r["cancelledTaskIds"], json!([b_task]));
    let sb = d.status(&b);
    assert_eq!(tasks(&sb)[0]["status"], "cancelled");
    assert!(of_type(&d.events(Some(&b)), "task.started").is_empty());

    // While running: the worker's group gets SIGTERM and goes.
    let sa = d.status(&a);
    let a_task = tasks(&sa)[0]["id"].as_str().unwrap().to_string();
    assert_eq!(tasks(&sa)[0]["status"], "running");
    let t0 = Instant::now();
    let r = d.ok("team.cancel", json!({"runId": a}));
    assert_eq!(r["status"], "cancelled");
    assert_eq!(r["cancelledTaskIds"], json!([a_task]));
    assert_eq!(d.wait(&a), "cancelled");
    assert!(
        group_gone_within(pid, Duration::from_secs(30)),
        "worker {pid} still alive after cancel"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "took the SIGKILL path"
    );
    assert!(
        !d.log_text().contains("ignored SIGTERM"),
        "took the SIGKILL path"
    );
    assert_eq!(tasks(&d.status(&a))[0]["status"], "cancelled");
    let evs = d.events(Some(&a));
    assert_eq!(of_type(&evs, "run.cancelled").len(), 1);

    // After finish.
    let e = d.err("team.cancel", json!({"runId": a}));
    assert_eq!(e["code"], 1002, "{e}");
    let e = d.err("team.cancel", json!({"runId": b}));
    assert_eq!(e["code"], 1002, "{e}");
    // The slot is free again: a new run gets going.
    let c = d.run("run c", json!({}));
    assert_eq!(d.wait(&c), "completed");
}

#[test]
fn cancel_of_a_worker_that_ignores_sigterm_kills_it_after_the_grace() {
    let d = daemon("kill_grace_ms = 1000\nno_output_timeout_ms = 60000");
    one_step_team(
        &d,
        "stubborn",
        "Hold on. [fake:sleep=30s] [fake:ignore-sigterm]",
        "explorer",
    );
    let run = d.run("stubborn", json!({"team": "stubborn"}));
    let pid = wait_for_event(&d, &run, "worker.spawned")["data"]["pid"]
        .as_i64()
        .unwrap();
    // The fake sets SIGTERM to SIG_IGN first thing: cancel only once it has.
    wait_until(Duration::from_secs(10), || sigterm_ignored(pid));
    let t0 = Instant::now();
    d.ok("team.cancel", json!({"runId": run}));
    assert!(
        group_gone_within(pid, Duration::from_secs(30)),
        "worker {pid} survived SIGTERM and the grace"
    );
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "gone after {took:?}: SIGTERM was not ignored?"
    );
    assert!(d.log_text().contains("ignored SIGTERM"));
}

/// A task's next attempt starts only once the worker of its last one is gone: a retry right
/// after a cancel, while that worker still sits out its grace (SIGTERM ignored), would
/// otherwise run two agents of one task at once, in one working tree.
#[test]
fn a_retry_waits_for_the_stopped_workers_end() {
    let d = daemon("kill_grace_ms = 3000\nno_output_timeout_ms = 60000");
    one_step_team(
        &d,
        "stubborn",
        "Hold on. [fake:sleep=30s] [fake:ignore-sigterm]",
        "explorer",
    );
    let run = d.run("stubborn", json!({"team": "stubborn"}));
    let first = wait_for_event(&d, &run, "worker.spawned")["data"]["pid"]
        .as_i64()
        .unwrap();
    wait_until(Duration::from_secs(10), || sigterm_ignored(first));
    d.ok("team.cancel", json!({"runId": run}));
    let r = d.ok("team.retry", json!({"runId": run, "taskIds": ["01_only"]}));
    assert_eq!(r["requeuedTaskIds"], json!(["01_only"]), "{r}");
    // The second worker's start, seen as it happens.
    let second = loop {
        let pids = spawned_pids(&d.events(Some(&run)));
        if let Some(p) = pids.get(1) {
            break *p;
        }
        let _ = d.ok("team.wait", json!({"runId": run, "timeoutMs": 100}));
    };
    assert!(
        !pgid_alive(first),
        "attempt 2 (worker {second}) started while attempt 1's worker {first} still ran"
    );
    d.ok("team.cancel", json!({"runId": run}));
}

// ---------------------------------------------------------------------------------------------
// Subscriptions over WebSocket.

/// Take notifications until `stop` says so (deadline 60 s); every item is returned.
async fn collect_until(
    sub: &mut jsonrpsee::core::client::Subscription<Value>,
    mut stop: impl FnMut(&Value) -> bool,
) -> Vec<Value> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let next = tokio::time::timeout_at(deadline, sub.next())
            .await
            .expect("subscription went quiet")
            .expect("subscription ended")
            .expect("bad notification");
        let done = stop(&next);
        out.push(next);
        if done {
            return out;
        }
    }
}

fn is_run_end(e: &Value, run: &str) -> bool {
    e["runId"] == run && matches!(ty(e), "run.completed" | "run.failed" | "run.cancelled")
}

fn seqs(evs: &[Value]) -> Vec<u64> {
    evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_after_a_middle_seq_gets_every_later_event_once() {
    let d = daemon("");
    let slow = "[fake:turns=3] [fake:sleep=300ms]";
    let a = d.run(&format!("first {slow}"), json!({}));
    let b = d.run(&format!("second {slow}"), json!({}));
    // Subscribe several times while both runs produce events, each after the then-middle seq.
    let mut subs = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..4 {
        let evs = d.events(None);
        let mid = evs[evs.len() / 2]["seq"].as_u64().unwrap();
        let client = d.ws().await;
        let sub = d.subscribe(&client, json!({"afterSeq": mid})).await;
        subs.push((mid, sub));
        clients.push(client);
        // Let more events happen before the next one: the seam moves with the run.
        let _ = d.ok("team.wait", json!({"runId": a, "timeoutMs": 200}));
    }
    let mut got = Vec::new();
    for (mid, sub) in &mut subs {
        let (mut a_done, mut b_done) = (false, false);
        let items = collect_until(sub, |e| {
            a_done |= is_run_end(e, &a);
            b_done |= is_run_end(e, &b);
            a_done && b_done
        })
        .await;
        got.push((*mid, items));
    }
    assert_eq!(d.wait(&a), "completed");
    assert_eq!(d.wait(&b), "completed");
    let stored = d.events(None);
    for (mid, items) in got {
        let last = items.last().unwrap()["seq"].as_u64().unwrap();
        let want: Vec<u64> = seqs(&stored)
            .into_iter()
            .filter(|s| *s > mid && *s <= last)
            .collect();
        assert_eq!(seqs(&items), want, "subscription after {mid}");
        // Same events, not only the same numbers.
        for e in &items {
            let s = stored.iter().find(|x| x["seq"] == e["seq"]).unwrap();
            assert_eq!(e, s);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_subscription_sees_only_that_run() {
    let d = daemon("");
    let a = d.run("alpha [fake:sleep=200ms]", json!({}));
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({"runId": a})).await;
    let b = d.run("beta [fake:sleep=200ms]", json!({}));
    let items = collect_until(&mut sub, |e| is_run_end(e, &a)).await;
    assert_eq!(d.wait(&b), "completed");
    assert!(
        items.iter().all(|e| e["runId"] == a.as_str()),
        "foreign event"
    );
    assert_eq!(
        items,
        d.events(Some(&a)),
        "replay + live = the stored events of the run"
    );
    let e = d
        .subscribe_err(&client, json!({"runId": "team_nope"}))
        .await;
    assert!(e.contains("1001") || e.contains("not found"), "{e}");
}

/// A WebSocket opened by hand, so the test controls (and can stop) reading.
struct RawWs {
    s: std::os::unix::net::UnixStream,
    buf: Vec<u8>,
}

impl RawWs {
    fn connect(socket: &std::path::Path) -> RawWs {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
        s.write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        RawWs { s, buf: Vec::new() }
    }

    fn send(&mut self, text: &str) {
        use std::io::Write;
        let mask = [1u8, 2, 3, 4];
        let mut f = vec![0x81u8];
        let n = text.len();
        if n < 126 {
            f.push(0x80 | n as u8);
        } else {
            f.push(0x80 | 126);
            f.extend((n as u16).to_be_bytes());
        }
        f.extend(mask);
        f.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.s.write_all(&f).unwrap();
    }

    /// The next text message; None on close or EOF.
    fn recv(&mut self, timeout: Duration) -> Option<String> {
        self.try_recv(timeout)
            .unwrap_or_else(|| panic!("no message within {timeout:?}"))
    }

    /// Like `recv`; the outer None = nothing within `timeout`.
    fn try_recv(&mut self, timeout: Duration) -> Option<Option<String>> {
        use std::io::Read;
        self.s.set_read_timeout(Some(timeout)).unwrap();
        loop {
            if let Some((op, payload, used)) = parse_frame(&self.buf) {
                self.buf.drain(..used);
                match op {
                    1 => return Some(Some(String::from_utf8(payload).unwrap())),
                    8 => return Some(None),
                    _ => continue,
                }
            }
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => return Some(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    }
}

/// (opcode, payload, bytes used) of one complete unmasked frame at the start of `b`.
fn parse_frame(b: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if b.len() < 2 {
        return None;
    }
    let op = b[0] & 0x0f;
    let (len, mut at) = match b[1] & 0x7f {
        126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
        127 if b.len() >= 10 => (
            u64::from_be_bytes(b[2..10].try_into().unwrap()) as usize,
            10,
        ),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    if b[1] & 0x80 != 0 {
        at += 4;
    }
    (b.len() >= at + len).then(|| (op, b[at..at + len].to_vec(), at + len))
}

#[test]
fn a_subscriber_that_never_reads_does_not_stall_the_daemon() {
    let d = daemon("max_workers = 8");
    let steps: Vec<(String, &str, &str)> = (0..30)
        .map(|i| (format!("s{i:02}"), "", "Quick."))
        .collect();
    let steps_ref: Vec<(&str, &str, &str)> =
        steps.iter().map(|(a, b, c)| (a.as_str(), *b, *c)).collect();
    project_workflow(&d, "wide", &steps_ref);

    let mut slow = RawWs::connect(&d.socket);
    slow.send(r#"{"jsonrpc":"2.0","id":1,"method":"team.subscribe","params":{}}"#);
    // From here on the test does not read `slow` until the runs are done.
    // ~2000 events: more than the socket buffer plus the server's per-connection queue (1024
    // messages) can hold, so the daemon's sends to `slow` block.
    let runs: Vec<String> = (0..16)
        .map(|i| {
            d.run(
                &format!("wide {i}"),
                json!({"team": "wide", "concurrency": 8}),
            )
        })
        .collect();
    let mut worst = Duration::ZERO;
    for r in &runs {
        let t = Instant::now();
        d.ok("daemon.ping", json!({}));
        worst = worst.max(t.elapsed());
        assert_eq!(d.wait(r), "completed");
    }
    // A stalled daemon would take at least the 5 s send timeout.
    assert!(worst < Duration::from_secs(3), "ping took {worst:?}");
    let total = d.events(None);

    // The daemon gives up on `slow` after it has not read for a while; its log says when.
    wait_until(Duration::from_secs(30), || {
        d.log_text().contains("subscriber does not read; dropped")
    });
    // Now read: a prefix of the events, in order and once each, then the dropped notice.
    let first = slow
        .recv(Duration::from_secs(10))
        .expect("subscription answer");
    assert!(first.contains("\"result\""), "{first}");
    let mut last = 0u64;
    let mut n = 0usize;
    let notice = loop {
        let msg = match slow.try_recv(Duration::from_secs(30)) {
            Some(Some(m)) => m,
            Some(None) => panic!("connection closed without a notice after {n} events"),
            None => panic!(
                "no notice after {n} of {} events, last seq {last}; daemon log:\n{}",
                total.len(),
                d.log_text()
                    .lines()
                    .filter(|l| l.contains("subscri"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        };
        let v: Value = serde_json::from_str(&msg).unwrap();
        let item = &v["params"]["result"];
        if item.get("notice").is_some() {
            break item.clone();
        }
        let seq = item["seq"].as_u64().unwrap();
        assert!(seq > last, "seq {seq} after {last}");
        last = seq;
        n += 1;
    };
    assert_eq!(notice["notice"], "dropped");
    assert_eq!(notice["lastSeq"].as_u64(), Some(last));
    assert!(
        n < total.len(),
        "the slow subscriber got everything ({n}): it was never dropped"
    );
    // The daemon is fine.
    d.ok("daemon.ping", json!({}));
}

#[test]
fn a_free_slot_is_filled_as_soon_as_any_task_ends() {
    let d = daemon("");
    project_workflow(
        &d,
        "slots",
        &[
            // Long enough for three quick tasks in a row (three spawns, three syncfs) even on a
            // loaded machine; a turn every 250 ms keeps it under the 1.5 s watchdog.
            (
                "slow",
                "",
                "Take your time. [fake:sleep=10s] [fake:turns=40]",
            ),
            ("f1", "", "Quick."),
            ("f2", "", "Quick."),
            ("f3", "", "Quick."),
        ],
    );
    let run = d.run("slots goal", json!({"team": "slots", "concurrency": 2}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let evs = d.events(Some(&run));
    // Never more than the run's concurrency at once.
    let mut running = 0i32;
    let mut most = 0;
    for e in &evs {
        match ty(e) {
            "task.started" => running += 1,
            "task.completed" | "task.failed" | "task.retrying" => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    assert_eq!(most, 2);
    // The quick ones cycle through the second slot while the slow one holds the first.
    let slow_done = seq_of(&evs, &tid(&st, "slow"), "task.completed");
    for f in ["f1", "f2", "f3"] {
        assert!(
            seq_of(&evs, &tid(&st, f), "task.completed") < slow_done,
            "{f} waited for the slow task"
        );
    }
}

#[test]
fn a_cwd_removed_after_the_start_fails_the_next_task_naming_it() {
    // This test is about the cwd, not the watchdog: with the whole suite on 2 cores the first
    // task's worker was once stopped before its end (not by the drain: by the FAST 1.5 s
    // watchdog, most likely), so that task failed and the second never found the cwd gone.
    let d = daemon("no_output_timeout_ms = 10000");
    let cwd = d.work.join("vanishing");
    std::fs::create_dir_all(&cwd).unwrap();
    project_workflow(
        &d,
        "vanish",
        &[
            // Still running when the cwd goes, even if the test is slow to get there (talking
            // every 250 ms).
            ("first", "", "Hold on. [fake:sleep=5s] [fake:turns=20]"),
            ("second", "first", "Then this."),
        ],
    );
    // Resources come from the project root above the cwd.
    std::fs::create_dir_all(d.work.join(".git")).unwrap();
    let run = d.ok(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&cwd), "runtime": "fake", "team": "vanish"}),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    // The agent is talking, not only spawned: removed before the box bound it, the cwd would
    // fail the first task's start instead (seen under load).
    wait_for_event(&d, &run, "task.progress");
    std::fs::remove_dir_all(&cwd).unwrap();
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    let second = Daemon::task(&st, &tid(&st, "second")).clone();
    assert_eq!(second["status"], "failed", "{st}");
    let err = second["error"].as_str().unwrap();
    assert!(err.contains("cwd") && err.contains("vanishing"), "{err}");
    assert_eq!(second["attempts"], 1, "not retried: it cannot get better");
}

/// Issue 18 (6): a runtime whose command is not installed is refused when a run or a schedule
/// is asked for, naming the command and the way out; a program that cannot be executed at spawn
/// time fails its task at once instead of three times.
#[test]
fn a_missing_runtime_command_is_refused_up_front() {
    let tools = tempfile::tempdir().unwrap();
    // Exists and is executable, but its interpreter does not: execve says ENOENT at spawn.
    let broken = tools.path().join("agent");
    std::fs::write(&broken, "#!/no/such/interpreter\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = Daemon::start_with(Opts {
        config: format!(
            "default_runtime = \"ghost\"\n\
             [runtimes.ghost]\nadapter = \"command\"\ncommand = [\"crew-no-such-agent-xyz\"]\n\
             [runtimes.broken]\nadapter = \"command\"\ncommand = [{:?}]\n",
            broken.display().to_string()
        ),
        env: vec![],
    });
    let cwd = path_str(&d.work).to_string();
    for (method, params) in [
        ("team.run", json!({"goal": "g", "cwd": cwd})),
        ("team.plan", json!({"goal": "g", "cwd": cwd})),
        (
            "schedule.add",
            json!({"cron": "0 3 * * *", "run": {"goal": "g", "cwd": cwd}}),
        ),
    ] {
        let e = d.err(method, params);
        assert_eq!(e["code"], -32602, "{method}: {e}");
        let msg = e["message"].as_str().unwrap();
        for part in [
            "crew-no-such-agent-xyz",
            "--runtime fake",
            "default_runtime",
        ] {
            assert!(msg.contains(part), "{method}: {part} missing in {msg}");
        }
    }
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": cwd, "runtime": "ghost"}),
    );
    assert!(
        e["message"].as_str().unwrap().contains("--runtime fake"),
        "{e}"
    );
    assert!(d.ok("team.list", json!({}))["runs"]
        .as_array()
        .unwrap()
        .is_empty());

    let id = d.run("g", json!({"runtime": "broken", "team": "fast-fix"}));
    assert_eq!(d.wait(&id), "failed");
    let s = d.status(&id);
    let failed: Vec<&Value> = s["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{s}");
    assert_eq!(failed[0]["attempts"], 1, "not retried: {s}");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("failed to start"),
        "{s}"
    );
}

/// Issue 18 (5): what a crashing worker wrote to stderr is kept, redacted, as an artifact of the
/// attempt, not only its last line in the failure reason.
#[test]
fn a_crashed_workers_stderr_is_kept_as_an_artifact() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\n\
                 [runtimes.crashy]\nadapter = \"command\"\n\
                 command = [\"/bin/sh\", \"-c\", \"echo starting up >&2; echo token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 >&2; echo 'panic: boom' >&2; exit 3\", \"sh\"]\n"
            .into(),
        env: vec![],
    });
    let id = d.run("g", json!({"runtime": "crashy", "team": "fast-fix"}));
    assert_eq!(d.wait(&id), "failed");
    let s = d.status(&id);
    let task = s["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "failed")
        .unwrap_or_else(|| panic!("{s}"));
    let tid = task["id"].as_str().unwrap();
    let name = format!("logs/{tid}.attempt-1.stderr.txt");
    assert!(
        task["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == name.as_str() && a["kind"] == "stderr"),
        "{task}"
    );
    let a = d.ok("team.artifact", json!({"runId": id, "name": name}));
    let text = a["content"].as_str().unwrap();
    assert!(
        text.contains("starting up") && text.contains("panic: boom"),
        "{text}"
    );
    assert!(!text.contains("abcdefghijklmnop"), "redacted: {text}");
}

/// Issue 18 (9): `on_run_end` runs a command with the run's id and status in its environment.
#[test]
fn on_run_end_runs_a_command_with_the_run_in_its_env() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("ends.txt");
    let d = Daemon::start_with(Opts {
        config: format!(
            "on_run_end = [\"/bin/sh\", \"-c\", \"echo \\\"$CREW_RUN_ID $CREW_RUN_STATUS\\\" >> {}\"]\n",
            file.display()
        ),
        env: vec![],
    });
    let id = d.run("[fake:tokens=10] hi", json!({"team": "fast-fix"}));
    assert_eq!(d.wait(&id), "completed");
    // The callback runs after the event is published: wait (bounded) for its line.
    let want = format!("{id} completed\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = std::fs::read_to_string(&file).unwrap_or_default();
        if got == want {
            break;
        }
        assert!(Instant::now() < deadline, "callback wrote {got:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
