//! Candidates (issue 36): a worktree run whose one step works 2 s, with 4 candidates at
//! concurrency 4, against the same run with 1 candidate (target ≤ 1.2×: the candidates run in
//! parallel and the choice is cheap). Rounds alternate (so both see the same machine load) and
//! medians are compared.
//!
//! Usage: `bench-candidates [--rounds R (3)] [--work-ms W (2000)]`. Build first:
//! `cargo build --release -p crewd -p crew-fake-agent -p crew-box -p crew-bench`.

mod daemon_support;

use daemon_support::*;
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};

const TARGET: f64 = 1.2;

fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        fail(format!("git {args:?} failed"));
    }
}

/// One run of the team: wall time from `team.run` until it stopped.
fn one(d: &Daemon, team: &str) -> Duration {
    let t0 = Instant::now();
    let started = d.call(
        "team.run",
        json!({"goal": "bench", "cwd": d.work, "runtime": "fake", "team": team,
               "workspace": "worktree", "concurrency": 4}),
    );
    let run = started["runId"].as_str().unwrap_or_default().to_string();
    let status = d.wait(&run);
    let took = t0.elapsed();
    if status != "completed" {
        fail(format!("run {run} ended {status}:\n{}", d.log_tail()));
    }
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let mut rounds = 3usize;
    let mut work_ms = 2000u64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v: u64 = it
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| fail(format!("{flag} needs a number")));
        match flag.as_str() {
            "--rounds" => rounds = (v as usize).max(1),
            "--work-ms" => work_ms = v,
            _ => fail(format!("unknown flag {flag}")),
        }
    }
    let root = bench_root("crew-bench-candidates");
    let d = Daemon::start(root.path(), "");
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "bench"]);
    git(w, &["config", "user.email", "bench@example.com"]);
    std::fs::write(w.join("base.txt"), "base\n").unwrap_or_else(|e| fail(e));
    std::fs::create_dir_all(w.join(".git/info")).unwrap_or_else(|e| fail(e));
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap_or_else(|e| fail(e));
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    for (team, n) in [("one", 1), ("four", 4)] {
        d.project_file(
            &format!("teams/{team}.team.md"),
            &format!(
                "---\nname: {team}\ndefaultWorkflow: {team}\n---\n\n- worker: agent=executor\n"
            ),
        );
        let task = if n == 1 {
            format!("work [fake:sleep={work_ms}ms][fake:write=out.txt:x]")
        } else {
            format!(
                "work [fake:sleep={work_ms}ms][fake:cand-write=1:out.txt:a][fake:cand-write=2:out.txt:bb]\
                 [fake:cand-write=3:out.txt:ccc][fake:cand-write=4:out.txt:dddd]"
            )
        };
        d.project_file(
            &format!("workflows/{team}.workflow.md"),
            &format!(
                "---\nname: {team}\n---\n\n## work\nrole: worker\ncandidates: {n}\nselect: smallest\n\n{task}\n"
            ),
        );
    }
    let (mut ones, mut fours) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        ones.push(one(&d, "one"));
        fours.push(one(&d, "four"));
    }
    let (a, b) = (median(ones.clone()), median(fours.clone()));
    let ratio = b.as_secs_f64() / a.as_secs_f64().max(1e-9);
    println!("1 candidate:  {} (rounds: {:?})", secs(a), ones);
    println!("4 candidates: {} (rounds: {:?})", secs(b), fours);
    println!(
        "ratio {ratio:.2}× (target ≤ {TARGET}×) {}",
        verdict(ratio <= TARGET)
    );
}
