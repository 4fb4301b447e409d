//! Issue 35: the real `pi` CLI through Slurm. crewd places the task on a real two-node Slurm
//! cluster (`support/slurm.rs`); `crew-worker` runs pi on the node in its live (rpc) mode,
//! whose model is the stub on 127.0.0.1. The stub's first answer (a `write` tool call) is held
//! until the test has steered; pi's next request must carry the steer, the file must land on
//! the task's branch through the worker's result commit, and the job must have run in Slurm.
//!
//! Needs pi (`tests/pi/setup.sh`, or `$CREW_PI_DIR`) and root with Debian's Slurm packages:
//! `make test` (tests/run.sh) leaves it out, counted as skipped, where either is missing.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_pi.rs"]
mod real_pi;
#[path = "support/slurm.rs"]
mod slurm_cluster;

use common::*;
use model_stub::{Reply, Stub, Wire};
use real_pi::*;
use serde_json::{json, Value};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MODEL: &str = "stub-model";
const STEER: &str = "STEER-35: say which node you ran on";
const WRITTEN: &str = "hello from pi on a Slurm node\n";

#[test]
fn real_pi_runs_on_slurm_with_a_live_steer_and_its_file_lands() {
    let test = "real_pi_runs_on_slurm_with_a_live_steer_and_its_file_lands";
    let Some(pi) = pi_bin() else {
        not_installed(test);
    };
    let c = slurm_cluster::cluster(test);
    let (seen_tx, seen_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (seen_tx, go_rx) = (Mutex::new(seen_tx), Mutex::new(go_rx));
    let stub = Stub::start(Wire::Chat, move |e| {
        if e.n == 1 {
            let _ = seen_tx.lock().unwrap().send(());
            // Bounded, so a test that fails elsewhere still ends.
            let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(120));
            Reply::Tool {
                name: "write".into(),
                input: json!({"path": "greeting.txt", "content": WRITTEN}),
            }
        } else {
            Reply::Text(format!("FINAL-{}: wrote the greeting, as steered.", e.n))
        }
    });
    let d = pi_on_slurm(&c, &pi, &stub);
    let w = d.work.as_path();
    one_step_team(&d, "greet", "Write greeting.txt.", "executor");
    let run = d.ok(
        "team.run",
        json!({
            "goal": "Add a greeting file", "cwd": path_str(w), "team": "greet",
            "workspace": "worktree", "runtime": "pi", "model": format!("stub/{MODEL}"),
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();

    seen_rx
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| {
            panic!(
                "pi made no model request: {:#}\n{}",
                d.status(&run),
                d.log_text()
            )
        });
    let r = d.ok(
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": STEER}),
    );
    assert_eq!(r["delivered"], "live", "{r}");
    // On pi's stdin on the node (the worker's log, in the job's output) before the model's
    // answer is let go.
    let submitting = d
        .events(Some(&run))
        .into_iter()
        .find(|e| e["type"] == "worker.submitting")
        .expect("the job's intent is journaled");
    let job_out =
        std::path::Path::new(submitting["data"]["staging"].as_str().unwrap()).join("job.out");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&job_out)
        .unwrap_or_default()
        .contains("steer written to the worker")
    {
        assert!(
            Instant::now() < deadline,
            "the steer did not reach pi on the node: {}",
            std::fs::read_to_string(&job_out).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    go_tx.send(()).unwrap();

    let status = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\n{}",
        stub.errors(),
        d.log_text()
    );
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 2, "requests: {ex:#?}");
    assert!(
        ex[1].texts().contains(STEER) && ex[1].has_tool_result(),
        "the request after the tool call lacks the steer: {:#}",
        ex[1].body
    );
    // It ran as a Slurm job, once, on one of the cluster's nodes.
    let jobs = c.jobs_of(&run);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].1, "COMPLETED", "{jobs:?}");
    assert!(["n1", "n2"].contains(&jobs[0].2.as_str()), "{jobs:?}");
    // The file pi wrote on the node is on the task's branch, not in the user's checkout.
    assert_eq!(
        git(
            w,
            &["show", &format!("crew/tasks/{run}/01_only:greeting.txt")]
        ),
        WRITTEN.trim_end()
    );
    assert!(!w.join("greeting.txt").exists());
    // The node's transcript and usage came back.
    let t = Daemon::task(&st, "01_only");
    assert!(t["usage"]["input"].as_u64().unwrap_or(0) > 0, "{t:#}");
    let events = d.events(Some(&run));
    let done = events
        .iter()
        .find(|e| e["type"] == "task.completed")
        .unwrap();
    let names: Vec<&str> = done["data"]["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a: &Value| a["name"].as_str())
        .collect();
    assert!(
        names.contains(&"transcripts/01_only.attempt-1.jsonl"),
        "{names:?}"
    );
}

const QUESTION: &str = "Which database should the service use? (q-35)";
const ANSWER: &str = "Postgres, version 16";
const TASK_MARK: &str = "Pick the storage for the service (mark-35a).";

/// The real pi asks on a node (crew's extension, written into the staging directory, gives it
/// `ask_user`): the task waits with the question; `team.respond` starts a fresh attempt on the
/// cluster (pi's session stayed on the node), whose prompt, the task's again, holds the
/// question and the answer; the run completes with the model's final text.
#[test]
fn real_pi_asks_on_slurm_and_the_answer_starts_a_fresh_attempt() {
    let test = "real_pi_asks_on_slurm_and_the_answer_starts_a_fresh_attempt";
    let Some(pi) = pi_bin() else {
        not_installed(test);
    };
    let c = slurm_cluster::cluster(test);
    let stub = Stub::start(Wire::Chat, move |e| {
        if e.n == 1 {
            Reply::Tool {
                name: "ask_user".into(),
                input: json!({"question": QUESTION}),
            }
        } else {
            Reply::Text(format!("FINAL-{}: using the answer.", e.n))
        }
    });
    let d = pi_on_slurm(&c, &pi, &stub);
    let w = d.work.as_path();
    one_step_team(&d, "storage", TASK_MARK, "explorer");
    let run = d.ok(
        "team.run",
        json!({
            "goal": "Choose the storage", "cwd": path_str(w), "team": "storage",
            "workspace": "worktree", "runtime": "pi", "model": format!("stub/{MODEL}"),
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let status = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        status,
        "blocked",
        "{st:#}\nstub errors: {:?}\n{}",
        stub.errors(),
        d.log_text()
    );
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["status"], "waiting", "{st:#}");
    assert_eq!(t["question"], QUESTION, "{st:#}");
    let ex = stub.exchanges();
    assert!(
        ex[0].body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["function"]["name"] == "ask_user"),
        "pi on the node was not offered ask_user: {:#}",
        ex[0].body
    );

    d.ok(
        "team.respond",
        json!({"runId": run, "taskId": "01_only", "message": ANSWER}),
    );
    let status = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\n{}",
        stub.errors(),
        d.log_text()
    );
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 2, "requests: {ex:#?}");
    // A fresh conversation: the task's prompt again, with the question and the answer in it.
    let texts = ex[1].texts();
    assert!(
        texts.contains(TASK_MARK) && texts.contains(QUESTION) && texts.contains(ANSWER),
        "the fresh attempt's request lacks the task, question or answer: {:#}",
        ex[1].body
    );
    assert!(
        !ex[1].has_tool_result(),
        "not the asking session: {:#}",
        ex[1].body
    );
    let names: Vec<String> = c.jobs_of(&run).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(Daemon::task(&st, "01_only")["attempts"], 2, "{st:#}");
}

/// A daemon whose `pi` runtime (the real CLI, pointed at `stub`) is placed on the test cluster
/// `c`, and a work tree of one commit. No `rpc` key: the pi adapter's default is its live (rpc)
/// mode.
fn pi_on_slurm(c: &slurm_cluster::Cluster, pi: &std::path::Path, stub: &Stub) -> Daemon {
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 120000\ntask_timeout_ms = 240000\n{slurm}\
         [runtimes.pi]\nadapter = \"pi\"\ncommand = [{pi:?}, \"--offline\"]\nplacement = \"slurm\"\n",
        slurm = c.slurm_config(),
        pi = pi.display().to_string(),
    );
    let d = Daemon::start_with(Opts {
        config,
        env: vec![],
    });
    pi_models(&d, &stub.base_url(), MODEL, (1.0, 2.0));
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("README.md"), "# project\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    d
}
