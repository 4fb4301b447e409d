//! Whatever fails while a worker is started or supervised ends that attempt as a failure: the
//! task never stays `running` without a worker, and `team.wait` returns. Each fault point of
//! the worker path (`crew-attempt/src/fault.rs`, debug builds only) is made to panic or fail
//! in turn; real faults (a state directory that cannot be written, a runtime command that is
//! not executable) are made for real.

mod common;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// One attempt per task, short timeouts: a fault resolves in seconds.
const CONFIG: &str =
    "max_attempts = 1\nkill_grace_ms = 500\nfinal_drain_ms = 1000\nfinal_drain_quiet_ms = 200\n";

fn daemon_with_fault(fault: &str) -> Daemon {
    Daemon::start_with(Opts {
        config: CONFIG.into(),
        env: vec![("CREW_TEST_FAULT".into(), fault.into())],
    })
}

/// The run stops (team.wait says so) and no task is left `running`; its final status.
fn stops(d: &Daemon, run: &str) -> String {
    let r = d.ok("team.wait", json!({"runId": run, "timeoutMs": 60000}));
    let st = d.status(run);
    assert_eq!(r["finished"], true, "run {run} did not stop: {st}");
    for t in st["tasks"].as_array().unwrap() {
        assert_ne!(t["status"], "running", "{st}");
    }
    r["status"].as_str().unwrap().to_string()
}

fn task_error(d: &Daemon, run: &str) -> String {
    let st = d.status(run);
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["status"], "failed", "{st}");
    t["error"].as_str().unwrap_or_default().to_string()
}

/// Every `worker.spawned` pid of the run.
fn worker_pids(d: &Daemon, run: &str) -> Vec<u32> {
    d.events(Some(run))
        .iter()
        .filter(|e| e["type"] == "worker.spawned")
        .filter_map(|e| e["data"]["pid"].as_u64())
        .map(|p| p as u32)
        .collect()
}

/// Running, as opposed to gone or a zombie waiting to be reaped.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// Start a one-task run under the fault and check how it ends.
fn check(fault: &str, task: &str, want_status: &str, want_error: &str) -> (Daemon, String) {
    let d = daemon_with_fault(fault);
    one_step_team(&d, "solo", task, "explorer");
    let run = d.run("survive the fault", json!({"team": "solo"}));
    assert_eq!(stops(&d, &run), want_status, "{fault}: {}", d.status(&run));
    if want_status == "failed" {
        let error = task_error(&d, &run);
        assert!(error.contains(want_error), "{fault}: {error}");
    }
    (d, run)
}

macro_rules! fault_cases {
    ($($name:ident: $fault:expr => $status:expr, $error:expr;)*) => {$(
        #[test]
        fn $name() {
            check($fault, "Do it.", $status, $error);
        }
    )*};
}

fault_cases! {
    a_panic_as_the_attempt_starts: "start:panic" => "failed", "injected fault at start";
    an_error_as_the_attempt_starts: "start:error" => "failed", "injected fault at start";
    a_panic_while_the_prompt_renders: "render:panic" => "failed", "injected fault at render";
    an_error_while_the_prompt_renders: "render:error" => "failed", "injected fault at render";
    an_error_writing_the_prompt: "prompt-artifact:error" => "failed", "cannot write the prompt";
    a_panic_writing_the_system_prompt: "system-prompt:panic" => "failed", "injected fault at system-prompt";
    an_error_writing_the_system_prompt: "system-prompt:error" => "failed", "cannot write the system prompt";
    a_panic_building_the_environment: "env:panic" => "failed", "injected fault at env";
    an_error_building_the_environment: "env:error" => "failed", "environment";
    a_panic_starting_the_process: "spawn:panic" => "failed", "injected fault at spawn";
    an_error_starting_the_process: "spawn:error" => "failed", "failed to start";
    an_error_writing_the_result: "result:error" => "failed", "cannot write the result";
    an_error_making_files_durable: "durable:error" => "failed", "durable";
    an_error_freezing_the_attempt_spec: "spec:error" => "failed", "injected fault at spec";
    a_transcript_that_cannot_be_created_is_not_a_failure: "transcript:error" => "completed", "";
}

#[test]
fn a_panic_while_supervising_kills_the_worker_and_fails_the_attempt() {
    // The worker would run for a minute; the supervision panics at its first line.
    let (d, run) = check(
        "supervise:panic",
        "Take long. [fake:sleep=60s]",
        "failed",
        "injected fault at supervise",
    );
    let pids = worker_pids(&d, &run);
    assert_eq!(pids.len(), 1, "{:?}", d.events(Some(&run)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive(pids[0]) {
        assert!(
            Instant::now() < deadline,
            "worker {} outlived its attempt",
            pids[0]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_state_directory_that_cannot_be_written_fails_the_attempt() {
    let d = daemon_with_fault("");
    one_step_team(&d, "solo", "Do it.", "explorer");
    // Where the run's files go is a regular file now: every artifact write fails.
    let runs = d.state_dir.join("runs");
    let _ = std::fs::remove_dir_all(&runs);
    std::fs::write(&runs, "not a directory").unwrap();
    let run = d.run("write nothing", json!({"team": "solo"}));
    assert_eq!(stops(&d, &run), "failed");
    let error = task_error(&d, &run);
    assert!(error.contains("cannot write the prompt"), "{error}");
}

#[test]
fn a_runtime_command_that_is_not_executable_is_refused_before_the_run() {
    let bin = tempfile::tempdir().unwrap();
    let script = bin.path().join("agent.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap(); // mode 0644: not executable
    let config = format!(
        "{CONFIG}[runtimes.broken]\nadapter = \"command\"\ncommand = [\"{}\"]\n",
        script.display()
    );
    let d = Daemon::start_with(Opts {
        config,
        env: vec![],
    });
    one_step_team(&d, "solo", "Do it.", "explorer");
    // Checked at `team.run` (issue 18): no run is acknowledged that can never start.
    let e = d.err(
        "team.run",
        json!({"goal": "run a broken agent", "cwd": path_str(&d.work), "team": "solo", "runtime": "broken"}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not an executable file"),
        "{e}"
    );
    // Executable but not a program (ENOEXEC): the check passes and the spawn failure ends
    // the attempts as failures.
    std::fs::write(&script, "").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = d.run(
        "run a broken agent",
        json!({"team": "solo", "runtime": "broken"}),
    );
    assert_eq!(stops(&d, &run), "failed");
    let error = task_error(&d, &run);
    assert!(
        error.contains("failed to start") || error.contains("exited"),
        "{error}"
    );
}
