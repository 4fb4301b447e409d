//! Issue 3, SPEC §7: `kill -9` of the daemon in the middle of many runs, a corrupted journal,
//! and pid reuse, through the real binary.

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FAST: &str = "no_output_timeout_ms = 5000\nkill_grace_ms = 500\nfinal_drain_ms = 1000\nfinal_drain_quiet_ms = 200\n";

fn ty(e: &Value) -> &str {
    e["type"].as_str().unwrap_or("")
}

/// (state char, start time) from /proc/<pid>/stat, if the pid exists.
fn proc_stat(pid: u64) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    Some((state, f.nth(18)?.parse().ok()?))
}

/// The very process that was spawned (same pid AND start time) still runs.
fn same_process_alive(pid: u64, start: u64) -> bool {
    matches!(proc_stat(pid), Some((s, st)) if st == start && s != 'Z' && s != 'X')
}

/// Live processes whose environment says the daemon `pid` started them (workers get
/// `CREW_DAEMON_PID`; their tools inherit it).
fn processes_of_daemon(pid: u32) -> Vec<u64> {
    let want = format!("CREW_DAEMON_PID={pid}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{p}/environ")) else {
            continue;
        };
        let alive = matches!(proc_stat(p), Some((s, _)) if s != 'Z' && s != 'X');
        if alive && env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            out.push(p);
        }
    }
    out
}

/// SIGSTOP each of `pids` and wait (bounded) until it is stopped; (pid, start time) of those
/// that were still alive, now held in place until someone SIGKILLs them.
fn freeze(pids: &[u64]) -> Vec<(u64, u64)> {
    for pid in pids {
        // SAFETY: kill(2) with a pid this test found among its own daemon's workers.
        unsafe { libc::kill(*pid as i32, libc::SIGSTOP) };
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    for pid in pids {
        loop {
            match proc_stat(*pid) {
                Some(('T', start)) => {
                    out.push((*pid, start));
                    break;
                }
                Some((s, _)) if s != 'Z' && s != 'X' => {
                    assert!(Instant::now() < deadline, "{pid} did not stop ({s})");
                    std::thread::sleep(Duration::from_millis(10));
                }
                // Gone (or a zombie) before the stop took.
                _ => break,
            }
        }
    }
    out
}

/// Repeat `f` on each new event (long-polling the run with `team.wait`) until it says done.
fn until_events(d: &Daemon, run: &str, mut f: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let evs = d.events(None);
        if f(&evs) {
            return evs;
        }
        assert!(Instant::now() < deadline, "condition never met");
        let _ = d.ok("team.wait", json!({"runId": run, "timeoutMs": 100}));
    }
}

fn two_step_team(d: &Daemon, name: &str, text: &str) {
    d.project_file(
        &format!("teams/{name}.team.md"),
        &format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- explorer: agent=explorer\n"),
    );
    d.project_file(
        &format!("workflows/{name}.workflow.md"),
        &format!(
            "---\nname: {name}\n---\n\n## first\nrole: explorer\n\n{text}\n\n## second\nrole: explorer\ndependsOn: first\n\n{text}\n"
        ),
    );
}

/// Key of a task across runs.
fn key(e: &Value) -> (String, String) {
    (
        e["runId"].as_str().unwrap().to_string(),
        e["taskId"].as_str().unwrap().to_string(),
    )
}

#[test]
fn kill_9_in_the_middle_of_20_runs_then_restart() {
    let mut d = Daemon::start_with(Opts {
        config: format!("{FAST}max_workers = 8\n"),
        env: vec![],
    });
    two_step_team(&d, "pair", "Work a while. [fake:sleep=1500ms]");
    let mut runs: Vec<String> = (0..14)
        .map(|i| d.run(&format!("run {i}"), json!({"team": "pair"})))
        .collect();
    // Every slot busy: 8 workers spawned.
    let before = until_events(&d, &runs[0], |evs| {
        evs.iter().filter(|e| ty(e) == "worker.spawned").count() >= 8
    });
    // Workers alive right now (spawned, not finished): every slot is busy.
    let mut finished: BTreeSet<(String, String, u64)> = BTreeSet::new();
    for e in &before {
        if matches!(ty(e), "task.completed" | "task.failed" | "task.retrying") {
            let (r, t) = key(e);
            finished.insert((r, t, e["data"]["attempt"].as_u64().unwrap()));
        }
    }
    let busy = before
        .iter()
        .filter(|e| ty(e) == "worker.spawned")
        .filter(|e| {
            let (r, t) = key(e);
            !finished.contains(&(r, t, e["data"]["attempt"].as_u64().unwrap()))
        })
        .count();
    assert!(busy >= 8, "{busy} workers busy");

    // The last six runs are submitted while the daemon dies: whatever was acknowledged must
    // survive; a request the kill cut off may or may not have made it.
    let (first_ack_tx, first_ack) = std::sync::mpsc::channel();
    let socket = d.socket.clone();
    let work = d.work.clone();
    let submitter = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for i in 14..20 {
            let params =
                json!({"goal": format!("run {i}"), "cwd": work, "runtime": "fake", "team": "pair"});
            match post(&socket, "team.run", params) {
                Some(v) if v["result"]["runId"].is_string() => {
                    acked.push(v["result"]["runId"].as_str().unwrap().to_string());
                    let _ = first_ack_tx.send(());
                }
                _ => break,
            }
        }
        acked
    });
    first_ack.recv_timeout(Duration::from_secs(30)).unwrap();
    let old_daemon = d.pid();
    d.kill9();
    // The old workers die with their daemon (crew's init reads the end of its lifeline), but
    // a worker may still be there for a moment, and without crew's init (or with an init
    // frozen, as here) it would outlive the daemon. Frozen here, none can end by itself
    // before the new daemon looks: each one alive now must be killed by the new daemon, and
    // reported. (None may be left: then the rest of the test checks the re-queueing alone.)
    let alive_after_kill = freeze(&processes_of_daemon(old_daemon));
    runs.extend(submitter.join().unwrap());
    assert!(runs.len() >= 15, "{runs:?}");
    d.spawn(&[]);

    // ...until the new daemon kills them (SIGKILL is sent before it answers; dying takes a
    // moment): pid gone or reused (another start time). A stopped process does not go by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (pid, st) in &alive_after_kill {
        while same_process_alive(*pid, *st) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !same_process_alive(*pid, *st),
            "old worker {pid} still runs after the restart: {:?}\n{}",
            proc_stat(*pid),
            d.events(None)
                .iter()
                .filter(|e| ty(e) == "daemon.recovered")
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    // Not only the workers the journal knew of: nothing the old daemon started survives (a
    // worker spawned just before the kill may not have had its pid journaled yet).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = processes_of_daemon(old_daemon);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the dead daemon still run: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every acknowledged run exists.
    for r in &runs {
        let st = d.status(r);
        assert_eq!(st["run"]["id"], r.as_str());
    }
    let evs = d.events(None);
    let starts: Vec<usize> = evs
        .iter()
        .enumerate()
        .filter(|(_, e)| ty(e) == "daemon.started")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 2, "one start per daemon");
    let after = &evs[starts[1]..];
    // Every worker the old daemon journaled: pid -> (run, task).
    let journaled: BTreeMap<u64, (String, String)> = evs[..starts[1]]
        .iter()
        .filter(|e| ty(e) == "worker.spawned")
        .map(|e| (e["data"]["pid"].as_u64().unwrap(), key(e)))
        .collect();
    let old_pids: BTreeSet<u64> = journaled
        .keys()
        .copied()
        .chain(alive_after_kill.iter().map(|(pid, _)| *pid))
        .collect();
    let recovered = after
        .iter()
        .find(|e| ty(e) == "daemon.recovered")
        .expect("daemon.recovered");
    let killed: BTreeSet<u64> = recovered["data"]["killedWorkers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert!(
        killed.is_subset(&old_pids),
        "killed {killed:?}, old {old_pids:?}"
    );
    for (pid, _) in &alive_after_kill {
        assert!(
            killed.contains(pid),
            "{pid} was alive at the restart but not reported killed"
        );
    }
    assert!(recovered["data"]["activeRuns"].as_u64().unwrap() >= 1);
    // What the journal said was running is what was re-queued, each as a retry.
    let requeued: BTreeSet<String> = recovered["data"]["requeuedTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let retried: BTreeSet<String> = after
        .iter()
        .filter(|e| ty(e) == "task.retrying" && e["data"]["reason"] == "daemon_restarted")
        .map(|e| {
            format!(
                "{}/{}",
                e["runId"].as_str().unwrap(),
                e["taskId"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(requeued, retried);
    // A worker still alive at the kill had not ended its attempt: its task is re-queued.
    for (pid, _) in &alive_after_kill {
        if let Some((r, t)) = journaled.get(pid) {
            assert!(
                requeued.contains(&format!("{r}/{t}")),
                "{r}/{t} (worker {pid}) was not re-queued"
            );
        }
    }

    // No task is running without a live worker: each running task's current attempt has a
    // spawned worker that exists (or the task moved on meanwhile).
    for r in &runs {
        let st = d.status(r);
        for t in st["tasks"].as_array().unwrap() {
            if t["status"] != "running" {
                continue;
            }
            let id = t["id"].as_str().unwrap();
            let attempt = t["attempts"].as_u64().unwrap();
            let evs = until_events(&d, r, |evs| {
                evs.iter().any(|e| {
                    e["runId"] == r.as_str()
                        && e["taskId"] == id
                        && e["data"]["attempt"] == attempt
                        && ty(e) != "task.started"
                })
            });
            let spawned = evs.iter().find(|e| {
                ty(e) == "worker.spawned"
                    && e["runId"] == r.as_str()
                    && e["taskId"] == id
                    && e["data"]["attempt"] == attempt
            });
            if let Some(s) = spawned {
                let (pid, start) = (
                    s["data"]["pid"].as_u64().unwrap(),
                    s["data"]["pidStart"].as_u64().unwrap(),
                );
                assert!(!old_pids.contains(&pid) || !same_process_alive(pid, start));
                if !same_process_alive(pid, start) {
                    // A worker that just exited is still `running` until the daemon has read
                    // its end; that end must follow (a task never stays running without one).
                    let ended = |e: &Value| {
                        e["runId"] == r.as_str()
                            && e["taskId"] == id
                            && e["data"]["attempt"] == attempt
                            && !matches!(
                                ty(e),
                                "task.started"
                                    | "worker.spawned"
                                    | "task.progress"
                                    | "task.steered"
                            )
                    };
                    until_events(&d, r, |evs| {
                        evs.iter().any(ended)
                            || Daemon::task(&d.status(r), id)["status"] != "running"
                    });
                }
            }
        }
    }

    // All runs finish by themselves.
    for r in &runs {
        let status = d.wait(r);
        if status != "completed" {
            let st = d.status(r);
            let mut why = String::new();
            for t in st["tasks"].as_array().unwrap() {
                if t["status"] != "completed" {
                    for a in t["artifacts"].as_array().unwrap() {
                        if a["kind"] == "transcript" {
                            let c = d.ok("team.artifact", json!({"runId": r, "name": a["name"]}));
                            why.push_str(&format!("{}:\n{}\n", a["name"], c["content"]));
                        }
                    }
                }
            }
            let evs: Vec<String> = d.events(Some(r)).iter().map(|e| e.to_string()).collect();
            panic!(
                "{r} ended {status}: {st}\n{why}\nevents:\n{}\nlog:\n{}",
                evs.join("\n"),
                d.log_text()
                    .lines()
                    .filter(|l| l.contains(r.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    let evs = d.events(None);
    let seqs: Vec<u64> = evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let want: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, want, "event seqs have a gap or a duplicate");
    let mut run_seq: BTreeMap<String, u64> = BTreeMap::new();
    for e in &evs {
        if let Some(r) = e["runId"].as_str() {
            let n = run_seq.entry(r.to_string()).or_default();
            *n += 1;
            assert_eq!(e["runSeq"].as_u64(), Some(*n), "runSeq gap at {e}");
        }
    }
    // Re-queued tasks ran again as a new attempt and their results exist.
    for rt in &requeued {
        let (r, t) = rt.split_once('/').unwrap();
        let task = Daemon::task(&d.status(r), t).clone();
        assert_eq!(task["status"], "completed");
        assert!(task["attempts"].as_u64().unwrap() >= 2, "{task}");
    }
}

/// The journal names a worker whose pid now belongs to another process (another start time):
/// that process is left alone. The real worker, which the journal no longer names, is still
/// found (by the run and task in its environment) and killed.
#[test]
fn a_reused_pid_is_never_killed() {
    // Without crew's init (`CREW_CONTAINMENT=none`) and unboxed, the worker outlives the
    // daemon until recovery kills it: the case where a pid's start time matters.
    let mut d = Daemon::start_with(Opts {
        config: format!("sandbox = \"off\"\n{FAST}"),
        env: vec![("CREW_CONTAINMENT".into(), "none".into())],
    });
    one_step_team(&d, "long", "Take long. [fake:sleep=30s]", "explorer");
    let run = d.run("long goal", json!({"team": "long"}));
    let evs = until_events(&d, &run, |evs| {
        evs.iter().any(|e| ty(e) == "worker.spawned")
    });
    let spawned = evs
        .iter()
        .find(|e| ty(e) == "worker.spawned")
        .unwrap()
        .clone();
    let worker = spawned["data"]["pid"].as_u64().unwrap();
    let worker_start = spawned["data"]["pidStart"].as_u64().unwrap();
    d.kill9();
    assert!(same_process_alive(worker, worker_start));

    // A bystander, and a journal that says the worker has the bystander's pid with another
    // start time: what a reused pid looks like to the next daemon.
    let mut bystander = {
        use std::os::unix::process::CommandExt;
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let pid = u64::from(bystander.id());
    let start = proc_stat(pid).unwrap().1;
    {
        use crew_journal::Journal;
        let journal = crew_journal::SledJournal::open(&d.state_dir.join("journal"), 8 << 20)
            .expect("open the journal");
        let last = journal.last_seq();
        let run_seq = journal.read_run_after(&run, 0, 10_000).unwrap().len();
        let mut forged = spawned.clone();
        forged["seq"] = json!(last + 1);
        forged["runSeq"] = json!(run_seq as u64 + 1);
        forged["data"]["pid"] = json!(pid);
        forged["data"]["pidStart"] = json!(start + 1_000_000);
        journal
            .append(&[crew_journal::Entry {
                seq: last + 1,
                run: Some(run.clone()),
                bytes: serde_json::to_vec(&forged).unwrap(),
            }])
            .unwrap();
    }
    wait_journal_released(&d.state_dir);
    d.spawn(&[]);
    let evs = d.events(None);
    let recovered = evs
        .iter()
        .rev()
        .find(|e| ty(e) == "daemon.recovered")
        .expect("daemon.recovered");
    assert!(
        same_process_alive(pid, start),
        "the bystander with pid {pid} (another start time than journaled) was killed"
    );
    assert_eq!(
        recovered["data"]["killedWorkers"],
        json!([worker]),
        "{recovered}"
    );
    // SIGKILL was sent before the daemon answered; dying takes a moment (longer when loaded),
    // and the worker would take 30 s to end by itself.
    let deadline = Instant::now() + Duration::from_secs(15);
    while same_process_alive(worker, worker_start) {
        assert!(
            Instant::now() < deadline,
            "the real worker {worker} survived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The task is re-queued as a retry.
    assert!(evs.iter().any(|e| ty(e) == "task.retrying"
        && e["runId"] == run.as_str()
        && e["data"]["reason"] == "daemon_restarted"));
    d.ok("team.cancel", json!({"runId": run}));
    let _ = bystander.kill();
    let _ = bystander.wait();
}

/// sled lets go of its file lock a moment after the journal is dropped (its background thread
/// holds the database until it notices): wait for that, bounded.
fn wait_journal_released(state_dir: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(state_dir.join("journal").join("db")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // SAFETY: flock on a file descriptor this function owns.
    while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        assert!(Instant::now() < deadline, "the journal stayed locked");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
}

/// One JSON-RPC call over HTTP on the socket; None if the daemon did not answer.
fn post(socket: &std::path::Path, method: &str, params: Value) -> Option<Value> {
    use std::io::{Read, Write};
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut s = std::os::unix::net::UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let req = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (_, body) = resp.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// crewd run by hand on the state dir (no harness), for start-up failures.
fn crewd_once(d: &Daemon) -> (Option<i32>, String) {
    let mut child = Command::new(crewd_bin())
        .arg("--socket")
        .arg(&d.socket)
        .arg("--state-dir")
        .arg(&d.state_dir)
        .arg("--config")
        .arg(&d.config)
        .env("HOME", &d.home)
        .env("XDG_CONFIG_HOME", d.home.join(".config"))
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("LISTEN_FDS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "crewd kept running on a corrupt journal:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn journal_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

type Pick = fn(&std::path::Path) -> bool;

#[test]
fn a_corrupt_journal_stops_the_daemon_with_a_clear_error_and_deletes_nothing() {
    // Which files get garbage: every file, sled's files, the marker only.
    let cases: [(&str, Pick); 3] = [
        ("everything", |_| true),
        ("sled files", |p| !p.to_string_lossy().contains("marker")),
        ("marker", |p| p.to_string_lossy().contains("marker")),
    ];
    for (what, pick) in cases {
        corrupt_and_start(what, pick);
    }
}

/// Only sled's `db` file damaged (its `conf` intact): sled would open it and "recover" by zeroing
/// the unreadable data; crew-journal judges a copy first, so the damaged bytes stay as they are.
#[test]
fn a_corrupt_sled_db_file_is_not_rewritten() {
    corrupt_and_start("sled db only", |p| p.file_name().is_some_and(|n| n == "db"));
}

fn corrupt_and_start(what: &str, pick: Pick) {
    let mut d = Daemon::start_with(Opts {
        config: FAST.into(),
        env: vec![],
    });
    let run = d.run("before the damage", json!({}));
    assert_eq!(d.wait(&run), "completed");
    assert!(d.stop().success());
    let jdir = d.state_dir.join("journal");
    let files = journal_files(&jdir);
    let mut garbage: BTreeMap<std::path::PathBuf, Vec<u8>> = BTreeMap::new();
    for (i, f) in files.iter().filter(|f| pick(f)).enumerate() {
        let len = std::fs::metadata(f).unwrap().len().max(64) as usize;
        let bytes: Vec<u8> = (0..len).map(|j| (j * 31 + i * 7 + 13) as u8).collect();
        std::fs::write(f, &bytes).unwrap();
        garbage.insert(f.clone(), bytes);
    }
    assert!(
        !garbage.is_empty(),
        "{what}: nothing to damage in {files:?}"
    );
    let runs_dir = d.state_dir.join("runs").join(&run);
    assert!(runs_dir.is_dir());

    let (code, stderr) = crewd_once(&d);
    assert!(
        matches!(code, Some(c) if c != 0),
        "{what}: exit {code:?}\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("crewd: ") && last.to_lowercase().contains("journal"),
        "{what}: not a clear message: {stderr}"
    );
    // Nothing deleted, nothing rewritten, artifacts kept.
    assert_eq!(journal_files(&jdir), files, "{what}: files changed");
    for (f, bytes) in &garbage {
        let now = std::fs::read(f).unwrap();
        assert!(
            &now == bytes,
            "{what}: {} rewritten ({} bytes, {} zero) by a daemon that refused to start:\n{stderr}",
            f.display(),
            now.len(),
            now.iter().filter(|b| **b == 0).count()
        );
    }
    assert!(runs_dir.is_dir(), "{what}: artifacts deleted");
    // A second attempt says the same: no half-repaired state in between.
    let (code2, _) = crewd_once(&d);
    assert_eq!(code2, code, "{what}");
}

#[test]
fn an_unreadable_journal_entry_stops_the_daemon() {
    let mut d = Daemon::start_with(Opts {
        config: FAST.into(),
        env: vec![],
    });
    let run = d.run("before the damage", json!({}));
    assert_eq!(d.wait(&run), "completed");
    assert!(d.stop().success());
    let last = {
        use crew_journal::Journal;
        let j = crew_journal::SledJournal::open(&d.state_dir.join("journal"), 8 << 20).unwrap();
        let last = j.last_seq();
        j.append(&[crew_journal::Entry {
            seq: last + 1,
            run: Some(run.clone()),
            bytes: b"{\"seq\": not json".to_vec(),
        }])
        .unwrap();
        last + 1
    };
    wait_journal_released(&d.state_dir);
    let (code, stderr) = crewd_once(&d);
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("journal entry {last} is unreadable")),
        "{stderr}"
    );
    // Still there for someone to look at.
    use crew_journal::Journal;
    let j = crew_journal::SledJournal::open(&d.state_dir.join("journal"), 8 << 20).unwrap();
    assert_eq!(j.last_seq(), last);
}

/// After a restart the runs go on by themselves: no client call nudges the daemon (the
/// subscription and `daemon.ping` do not go through its state owner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_runs_continue_without_any_client_call() {
    let mut d = Daemon::start_with(Opts {
        config: FAST.into(),
        env: vec![],
    });
    one_step_team(&d, "short", "Work a bit. [fake:sleep=1s]", "explorer");
    let run = d.run("go on", json!({"team": "short"}));
    until_events(&d, &run, |evs| {
        evs.iter().any(|e| ty(e) == "worker.spawned")
    });
    d.kill9();
    d.spawn(&[]);
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({"afterSeq": 0})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout_at(deadline, sub.next())
            .await
            .unwrap_or_else(|_| panic!("the run did not go on by itself; events: {seen:?}"))
            .unwrap()
            .unwrap();
        seen.push(format!(
            "{} {}",
            ev["seq"],
            ev["type"].as_str().unwrap_or("")
        ));
        if ev["runId"] == run.as_str() && ty(&ev) == "run.completed" {
            break;
        }
    }
}

/// A clean stop of an idle daemon leaves a snapshot of everything, so the next start replays
/// nothing (an idle daemon at shutdown once skipped it: nothing was pending to carry it).
#[test]
fn a_clean_stop_leaves_a_snapshot_as_of_the_last_event() {
    let mut d = Daemon::start();
    let run = d.run("snapshot at stop", json!({"runtime": "fake"}));
    assert_eq!(d.wait(&run), "completed");
    let last = d.ok("daemon.status", json!({}))["journal"]["lastSeq"]
        .as_u64()
        .expect("journal.lastSeq");
    assert!(last > 1);
    assert!(d.stop().success(), "{}", d.log_text());
    wait_journal_released(&d.state_dir);
    let journal = crew_journal::SledJournal::open(
        &d.state_dir.join("journal"),
        crew_journal::DEFAULT_CACHE_BYTES,
    )
    .expect("open the journal");
    use crew_journal::Journal;
    let (seq, bytes) = journal
        .read_snapshot()
        .expect("read the snapshot")
        .expect("a snapshot after a clean stop");
    assert_eq!(seq, journal.last_seq(), "the snapshot covers every event");
    assert!(seq >= last);
    let state: Value = serde_json::from_slice(&bytes).expect("a JSON snapshot");
    assert!(
        state.to_string().contains(&run),
        "the snapshot holds the run"
    );
}

/// `team.forget`, and crewd killed the instant `run.forgotten` is durable, before it removed
/// the run's data: the next start removes it (the run directory and its events), which no
/// later call could reach (the run is "not found" once forgotten).
#[test]
fn a_run_forgotten_just_before_a_crash_leaves_no_data() {
    let mut d = Daemon::start_with(Opts {
        config: String::new(),
        env: vec![("CREW_TEST_FAULT".into(), "forget-data:kill".into())],
    });
    one_step_team(&d, "one", "Do it.", "explorer");
    let run = d.run("one", json!({"team": "one"}));
    assert_eq!(d.wait(&run), "completed");
    let dir = d.state_dir.join("runs").join(&run);
    assert!(dir.is_dir());
    let _ = d.try_http("team.forget", json!({"runId": run}));
    d.wait_killed_at_fault();
    assert!(dir.is_dir(), "killed before the data went");
    d.spawn(&[]);
    assert!(!dir.exists(), "{}", d.log_text());
    let events = d.http("team.events", json!({"runId": run, "limit": 10}));
    let none = events["result"]["events"]
        .as_array()
        .is_none_or(|e| e.is_empty());
    assert!(none, "{events}");
}
