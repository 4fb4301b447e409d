//! Issue 35's benchmark, outside CI (`#[ignore]`; `make bench-slurm`): 200 instant fake-agent
//! tasks placed on Slurm by crew (a fan-out run in worktree mode) against `sbatch --array` of
//! the same 200 `crew-fake-agent` invocations on the same cluster, same scheduler settings.
//! Prints both makespans, their ratio, and crewd's CPU time and peak memory per remote task.
//! The array's baseline leaves out everything crew adds per task: the staging directory and
//! input bundle, the job's journaled submission, the worker's checkout, commit and result
//! bundle, the result's import and the run's integration, and the planner and integrate jobs.

mod common;
#[path = "support/slurm.rs"]
mod slurm_cluster;

use common::{git, path_str, Daemon, Opts};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TASKS: usize = 200;

/// crewd's CPU time (user + system, in clock ticks) and peak resident memory (kB).
fn usage_of(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    (ticks, hwm)
}

#[test]
#[ignore = "a benchmark: make bench-slurm"]
fn bench_200_tasks_against_sbatch_array() {
    let c = slurm_cluster::cluster("bench_200_tasks_against_sbatch_array");
    let fake = common::crewd_bin().with_file_name("crew-fake-agent");

    // The baseline: one array of the same 200 agent invocations.
    let out = std::env::temp_dir().join(format!("crew-bench-array-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    // The same prompt a crew task gets (a file written), run in the output directory.
    let wrap = format!(
        "cd {o} && {} --mode json -p \"Work. [fake:write=w$SLURM_ARRAY_TASK_ID.txt:x]\" > $SLURM_ARRAY_TASK_ID.out",
        fake.display(),
        o = out.display()
    );
    let t0 = Instant::now();
    let id = c
        .cmd(
            "sbatch",
            &[
                "--parsable",
                &format!("--array=0-{}", TASKS - 1),
                "-p",
                c.get("CREW_SLURM_PARTITION"),
                "-c",
                "1",
                "--mem=100",
                "-t",
                "5",
                "-o",
                "/dev/null",
                "--wrap",
                &wrap,
            ],
        )
        .trim()
        .to_string();
    assert!(!id.is_empty(), "sbatch gave no job id");
    loop {
        let left = c.cmd("squeue", &["-h", "-j", &id, "-o", "%i"]);
        if left.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let array = t0.elapsed();
    let done = std::fs::read_dir(&out)
        .map(|r| {
            r.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".out"))
            })
            .count()
        })
        .unwrap_or(0);
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(done, TASKS, "the array's outputs");

    // crew: a fan-out of the same 200 tasks, each a Slurm job.
    let config = format!(
        "max_attempts = 1\nmax_concurrency_cap = 256\nmax_fan_out_tasks = {TASKS}\n{slurm}\
         [runtimes.fake-slurm]\nadapter = \"pi\"\ncommand = [{fake:?}]\nrpc = false\nplacement = \"slurm\"\n",
        slurm = c.slurm_config().replace("max_workers = 32", "max_workers = 256"),
        fake = fake.display().to_string(),
    );
    let d = Daemon::start_with(Opts {
        config,
        env: vec![],
    });
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("base.txt"), "base\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    let tasks: Vec<Value> = (0..TASKS)
        .map(|i| {
            json!({"id": format!("t{i:03}"), "role": "executor", "title": format!("task {i}"),
                   "task": format!("Work. [fake:write=t{i:03}.txt:x]"), "dependsOn": [], "scope": [format!("t{i:03}.txt")]})
        })
        .collect();
    let block = d.fixture_path("block.json");
    std::fs::write(&block, json!({ "tasks": tasks }).to_string()).unwrap();
    d.project_file(
        "teams/fan.team.md",
        &format!(
            "---\nname: fan\ndefaultWorkflow: fan\nmaxConcurrency: {TASKS}\n---\n\n\
             - planner: agent=planner\n- executor: agent=executor\n- verifier: agent=verifier\n"
        ),
    );
    d.project_file(
        "workflows/fan.workflow.md",
        &format!(
            "---\nname: fan\n---\n\n## plan\nrole: planner\nexpands: tasks\n\nSplit. [fake:fanout={}]\n\n\
             ## integrate\nrole: verifier\ndependsOn: plan\n\nCheck.\n",
            path_str(&block)
        ),
    );
    let pid = d.pid();
    let before = usage_of(pid);
    let t0 = Instant::now();
    let run = d.run(
        "bench",
        json!({"team": "fan", "workspace": "worktree", "runtime": "fake-slurm",
               "maxFanOutTasks": TASKS}),
    );
    let status = d.wait(&run);
    let crew = t0.elapsed();
    let after = usage_of(pid);
    assert_eq!(status, "completed", "{}", d.status(&run));
    let jobs = c.jobs_of(&run);
    assert_eq!(
        jobs.len(),
        TASKS + 2,
        "the 200 tasks, the planner and the integrate step"
    );

    // Where crew's makespan goes, from the run's events: the planner's job, the 200 (first
    // start to last end), the integrate step's job, and the run's end after it.
    let evs = d.events(Some(&run));
    let at = |e: &Value| {
        chrono::DateTime::parse_from_rfc3339(e["time"].as_str().unwrap_or_default())
            .map(|t| t.timestamp_millis())
            .unwrap_or(0)
    };
    let of = |ty: &str, task: &dyn Fn(&str) -> bool| -> Vec<i64> {
        evs.iter()
            .filter(|e| e["type"] == ty && task(e["taskId"].as_str().unwrap_or_default()))
            .map(at)
            .collect()
    };
    let plan = |t: &str| t.ends_with("plan");
    let integ = |t: &str| t.ends_with("integrate");
    let fan = |t: &str| !t.is_empty() && !t.ends_with("plan") && !t.ends_with("integrate");
    let created = evs
        .iter()
        .find(|e| e["type"] == "run.created")
        .map(at)
        .unwrap_or(0);
    let ended = evs.last().map(at).unwrap_or(0);
    let first = |v: Vec<i64>| v.into_iter().min().unwrap_or(0);
    let last = |v: Vec<i64>| v.into_iter().max().unwrap_or(0);
    let (p0, p1) = (
        first(of("task.started", &plan)),
        last(of("task.completed", &plan)),
    );
    let (f0, f1) = (
        first(of("task.started", &fan)),
        last(of("task.completed", &fan)),
    );
    let (i0, i1) = (
        first(of("task.started", &integ)),
        last(of("task.completed", &integ)),
    );
    println!(
        "slurm bench: crew's phases (ms): created→planner start {}, planner {}, →fan-out start {}, \
         fan-out {}, →integrate start {}, integrate {}, →run end {}",
        p0 - created,
        p1 - p0,
        f0 - p1,
        f1 - f0,
        i0 - f1,
        i1 - i0,
        ended - i1
    );

    let hz = 100.0; // USER_HZ on Linux
    let cpu_ms = (after.0.saturating_sub(before.0)) as f64 * 1000.0 / hz;
    println!(
        "slurm bench: {TASKS} tasks: sbatch --array {:.1}s, crew {:.1}s (ratio {:.2}); \
         crewd {:.1} ms CPU per remote task, peak RSS {} kB",
        array.as_secs_f64(),
        crew.as_secs_f64(),
        crew.as_secs_f64() / array.as_secs_f64(),
        cpu_ms / TASKS as f64,
        after.1,
    );
}
