//! Issue 15's worktree benchmark, against the real daemon and a generated repository of
//! 20,000 files:
//!
//! 1. the floor: a shell loop of `git worktree add` + `git add -A` + `git commit` for 8 tasks,
//!    one after the other (what giving 8 tasks a worktree and recording their results costs
//!    in git alone);
//! 2. crew: a run of 8 parallel fake tasks that each write one file, in `worktree` mode
//!    (worktrees, result commits, patches, integration), from `team.run` to the run's end;
//! 3. the same run in `shared` mode.
//!
//! Prints the ratios crew/floor and worktree/shared. An ignored test, so it runs only when asked:
//!
//! ```text
//! cargo test -p crewd --bench workspaces -- --ignored --nocapture
//! ```
//!
//! `WS_BENCH_FILES` changes the file count (20000).

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const TASKS: usize = 8;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn generate(dir: &Path, files: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(".git/info/exclude"), ".crew/\n").unwrap();
    for i in 0..files {
        let sub = dir.join(format!("d{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(
            sub.join(format!("f{i}.txt")),
            format!("file {i}\nsome content\n"),
        )
        .unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "generated"]);
}

fn floor(repo: &Path, scratch: &Path) -> f64 {
    let t = Instant::now();
    for i in 0..TASKS {
        let wt = scratch.join(format!("floor{i}"));
        let p = wt.to_str().unwrap();
        git(
            repo,
            &[
                "worktree",
                "add",
                "-q",
                "-B",
                &format!("floor/{i}"),
                p,
                "HEAD",
            ],
        );
        std::fs::write(wt.join(format!("task{i}.txt")), "change\n").unwrap();
        git(&wt, &["add", "-A"]);
        git(&wt, &["commit", "-qm", "task"]);
    }
    t.elapsed().as_secs_f64()
}

/// The floor's worktrees go only after every phase: on this kind of disk (ext4) creating files
/// right after deleting many is much slower, which would charge the floor's deletions to crew.
fn remove_floor(repo: &Path, scratch: &Path) {
    for i in 0..TASKS {
        let wt = scratch.join(format!("floor{i}"));
        git(
            repo,
            &["worktree", "remove", "--force", wt.to_str().unwrap()],
        );
    }
}

fn timed_run(d: &Daemon, mode: &str) -> f64 {
    let t = Instant::now();
    let run = d.run(
        "bench",
        json!({"team": "bench", "workspace": mode, "concurrency": TASKS}),
    );
    // Short waits: the test client's socket gives up on one long wait.
    loop {
        let r = d.ok("team.wait", json!({"runId": run, "timeoutMs": 5000}));
        if r["finished"] == true {
            assert_eq!(r["status"], "completed", "{}", d.status(&run));
            break;
        }
    }
    let s = t.elapsed().as_secs_f64();
    if std::env::var_os("WS_BENCH_EVENTS").is_some() {
        for e in d.events(Some(&run)) {
            println!("{} {} {}", e["time"], e["type"], e["taskId"]);
        }
    }
    s
}

#[test]
#[ignore]
fn bench_workspaces() {
    let files: usize = std::env::var("WS_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let d = Daemon::start_with(Opts {
        // A loaded machine checks 8 copies of 20,000 files out slowly: the bench measures time,
        // not the default per-call limit.
        config: format!("max_workers = {TASKS}\ngit_timeout_ms = 1800000\n"),
        ..Default::default()
    });
    let repo = d.work.clone();
    generate(&repo, files);
    let mut roles = String::new();
    let mut wf = String::from("---\nname: bench\n---\n\n");
    for i in 0..TASKS {
        roles.push_str(&format!("- r{i}: agent=executor\n"));
        wf.push_str(&format!(
            "## t{i}\nrole: r{i}\n\n[fake:write=task{i}.txt:change\\n]\n\n"
        ));
    }
    d.project_file(
        "teams/bench.team.md",
        &format!("---\nname: bench\ndefaultWorkflow: bench\n---\n\n{roles}"),
    );
    d.project_file("workflows/bench.workflow.md", &wf);

    let scratch = tempfile::tempdir().unwrap();
    let floor_s = floor(&repo, scratch.path());
    let worktree_s = timed_run(&d, "worktree");
    // Finished worktrees are deleted in the background: let that end before the next phase.
    let trash = d.state_dir.join("worktrees/.trash");
    while std::fs::read_dir(&trash).is_ok_and(|mut r| r.next().is_some()) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let shared_s = timed_run(&d, "shared");
    remove_floor(&repo, scratch.path());
    println!("files in repository: {files}, tasks: {TASKS}");
    println!("floor (git worktree add + add -A + commit, x{TASKS}): {floor_s:.2}s");
    println!("crew worktree run (8 parallel fake tasks, whole run): {worktree_s:.2}s");
    println!("crew shared run (same tasks):                       {shared_s:.2}s");
    println!("ratio crew worktree / floor:  {:.2}", worktree_s / floor_s);
    println!(
        "ratio (worktree - shared) / floor, what the workspaces add: {:.2}",
        (worktree_s - shared_s) / floor_s
    );
    println!("ratio worktree / shared run:  {:.2}", worktree_s / shared_s);
}
