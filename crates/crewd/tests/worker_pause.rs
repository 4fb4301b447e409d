//! A daemon stopped (SIGSTOP, Ctrl-Z, a frozen cgroup) for longer than `no_output_timeout_ms`
//! while its workers keep writing must not blame them when it resumes: the lines waiting in
//! the pipes are read before silence is judged, and the time the daemon did not run is not
//! silence.

mod common;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

const WORKERS: usize = 4;

#[test]
fn a_paused_daemon_does_not_kill_workers_that_kept_writing() {
    let d = Daemon::start_with(Opts {
        config: "no_output_timeout_ms = 1000\nmax_attempts = 1\nkill_grace_ms = 500\n\
                 final_drain_ms = 1000\nfinal_drain_quiet_ms = 200\n"
            .into(),
        env: vec![],
    });
    // Independent steps, so every worker runs at once; each writes a line every 100 ms.
    let mut workflow = String::from("---\nname: beat\n---\n");
    for i in 0..WORKERS {
        workflow.push_str(&format!(
            "\n## w{i}\nrole: explorer\n\nKeep writing. [fake:sleep=8s][fake:heartbeat=100ms]\n"
        ));
    }
    d.project_file("workflows/beat.workflow.md", &workflow);
    d.project_file(
        "teams/beat.team.md",
        "---\nname: beat\ndefaultWorkflow: beat\n---\n\n- explorer: agent=explorer\n",
    );
    let run = d.run("keep writing", json!({"team": "beat"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while d
        .events(Some(&run))
        .iter()
        .filter(|e| e["type"] == "worker.spawned")
        .count()
        < WORKERS
    {
        assert!(
            Instant::now() < deadline,
            "workers did not start: {}",
            d.status(&run)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Two pauses, each well past the watchdog's second; after each, a round trip shows the
    // daemon is running again before the next one.
    let pid = d.pid() as i32;
    for _ in 0..2 {
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(2500));
        unsafe { libc::kill(pid, libc::SIGCONT) };
        d.ok("daemon.ping", json!({}));
    }
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let failures: Vec<_> = d
        .events(Some(&run))
        .into_iter()
        .filter(|e| e["type"] == "task.failed")
        .collect();
    assert!(
        failures.is_empty(),
        "healthy workers were blamed: {failures:?}"
    );
    // And the pause was seen as one (a worker's slow first line is not: runs.rs).
    let log = d.log_text();
    assert!(log.contains("the daemon did not run for a while"), "{log}");
}
