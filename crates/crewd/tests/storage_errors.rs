//! Issue 14 (under item 7): journal write errors sled cannot get past by itself. A big
//! `run.created` makes sled write a blob file; when that fails (EMFILE under a low
//! RLIMIT_NOFILE, EROFS on a read-only journal directory), sled keeps a slot of its write buffer
//! that it never gives back, and dropping that handle waited forever: the writer hung in its
//! reopen, every call through the actor with it, and SIGTERM no longer stopped crewd. Each
//! kind of error here must leave calls answering (reads succeed, writes get 1007), the daemon
//! writing again once the cause is gone, and SIGTERM stopping it. (A full disk: fulldisk.rs.)

mod common;
use common::*;
use crew_testkit::KeepAlive;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STORAGE_FAILED: i64 = 1007;
const CHILD_MOUNT: &str = "CREWD_STORAGE_ERRORS_CHILD";
/// Exit code of the wrapper when no mount namespace can be made here.
const NO_NAMESPACE: i32 = 77;
const CONFIG: &str = "no_output_timeout_ms = 20000\ntask_timeout_ms = 60000\n\
kill_grace_ms = 300\nfinal_drain_ms = 300\nfinal_drain_quiet_ms = 100\n";

fn call(conn: &mut KeepAlive, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let r = conn
        .post(body.as_bytes())
        .unwrap_or_else(|e| panic!("{method}: no answer: {e}"));
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{method}: {e}: {}", r.body))
}

fn code(v: &Value) -> Option<i64> {
    v.pointer("/error/code").and_then(Value::as_i64)
}

fn run_params(d: &Daemon, goal: &str) -> Value {
    json!({"goal": goal, "cwd": path_str(&d.work), "runtime": "fake", "team": "solo"})
}

/// During the fault: a builtin team, as under EMFILE the project's resource files cannot be
/// read (that is a diagnostic, not what is tested here).
fn builtin_run_params(d: &Daemon, goal: &str) -> Value {
    json!({"goal": goal, "cwd": path_str(&d.work), "runtime": "fake", "team": "fast-fix"})
}

/// SIGTERM, and the daemon must exit by itself (bounded, so a hang fails instead of blocking).
fn stop_bounded(d: &mut Daemon) {
    let mut child = d.child.take().expect("running");
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(
                status.success(),
                "crewd exited with {status}:\n{}",
                d.log_text()
            );
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("SIGTERM did not stop crewd:\n{}", d.log_text());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The shared scenario: a run before, the fault, a big write and calls during it, the cure,
/// writes again, SIGTERM, and every acknowledged run still there after a restart.
fn exercise(d: &mut Daemon, inject: &dyn Fn(&Daemon), heal: &dyn Fn(&Daemon)) {
    one_step_team(d, "solo", "Do it. [fake:turns=1]", "executor");
    // Every call on one connection, opened first: under EMFILE the daemon cannot accept new
    // ones, and a one-shot connection closing late would free a descriptor for sled.
    let mut conn = KeepAlive::connect(&d.socket, Duration::from_secs(60)).unwrap();
    let before = call(&mut conn, "team.run", run_params(d, "before the fault"));
    let before = before["result"]["runId"].as_str().unwrap().to_string();
    let waited = call(
        &mut conn,
        "team.wait",
        json!({"runId": before, "timeoutMs": 120000}),
    );
    assert_eq!(waited["result"]["status"], "completed", "{waited}");
    assert!(call(&mut conn, "daemon.ping", json!({}))
        .get("result")
        .is_some());

    inject(d);
    // Big enough that sled stores the event in a blob file of its own.
    let big = format!("a big goal {}", "x".repeat(300 << 10));
    let v = call(&mut conn, "team.run", builtin_run_params(d, &big));
    assert_eq!(
        code(&v),
        Some(STORAGE_FAILED),
        "the big write: {v}\n{}",
        d.log_text()
    );
    // Calls keep answering: reads from memory succeed, writes are refused with 1007. The big
    // run is in memory and keeps emitting (its attempts cannot start), so some reads land in a
    // turn whose batch fails to commit: they answer anyway (a CI run saw them get 1007).
    for _ in 0..40 {
        let st = call(&mut conn, "team.status", json!({"runId": before}));
        assert_eq!(st["result"]["run"]["status"], "completed", "{st}");
        let list = call(&mut conn, "team.list", json!({}));
        assert!(list.get("result").is_some(), "{list}");
        let w = call(
            &mut conn,
            "team.run",
            builtin_run_params(d, "during the fault"),
        );
        assert_eq!(code(&w), Some(STORAGE_FAILED), "{w}");
    }

    heal(d);
    let healed = Instant::now();
    let after = loop {
        let v = call(&mut conn, "team.run", run_params(d, "after the fault"));
        if let Some(id) = v.pointer("/result/runId").and_then(Value::as_str) {
            break id.to_string();
        }
        assert_eq!(code(&v), Some(STORAGE_FAILED), "{v}");
        assert!(
            healed.elapsed() < Duration::from_secs(30),
            "no write succeeded within 30 s of the cure:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(conn);
    assert_eq!(d.wait(&after), "completed");
    let events = d.http("team.events", json!({"runId": before, "limit": 10}));
    assert!(events.get("result").is_some(), "journal reads: {events}");
    stop_bounded(d);
    d.spawn(&[]);
    for id in [&before, &after] {
        assert_eq!(d.status(id)["run"]["status"], "completed", "{id}");
    }
}

fn daemon(state: Option<PathBuf>) -> Daemon {
    let mut d = Daemon::start_with(Opts {
        config: CONFIG.into(),
        env: vec![],
    });
    if let Some(state) = state {
        // Restart on a state dir of the caller's choosing (inside its mount namespace).
        d.kill9();
        d.state_dir = state;
        d.spawn(&[]);
    }
    d
}

/// The lowest descriptor number crewd does not use: as its soft limit, no new one can be made.
fn lowest_free_fd(pid: u32) -> u64 {
    let used: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|fd| !used.contains(fd)).unwrap()
}

fn set_nofile(pid: u32, soft: u64) {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: 20_000.max(soft),
    };
    // SAFETY: prlimit reads the struct we own; no old limit is asked for.
    let rc = unsafe {
        libc::prlimit(
            pid as i32,
            libc::RLIMIT_NOFILE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn emfile_while_writing_a_blob_leaves_calls_answering_and_recovers() {
    let mut d = daemon(None);
    exercise(
        &mut d,
        &|d| {
            // Until no descriptor below the limit is free: one closed meanwhile (a connection
            // of an earlier call) would let sled create its file after all.
            let mut limit = u64::MAX;
            loop {
                let free = lowest_free_fd(d.pid());
                if free >= limit {
                    break;
                }
                limit = free;
                set_nofile(d.pid(), limit);
            }
        },
        &|d| set_nofile(d.pid(), 20_000),
    );
}

fn mount(args: &[&str]) {
    let out = Command::new("mount").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "mount {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child: runs only when re-executed by the test below, inside a user+mount namespace, so
/// that it can make the journal directory read-only under the running daemon.
#[test]
fn read_only_child() {
    let Ok(root) = std::env::var(CHILD_MOUNT) else {
        return;
    };
    println!();
    let mut d = daemon(Some(Path::new(&root).join("state")));
    let journal = d.state_dir.join("journal");
    let journal = journal.to_str().unwrap().to_owned();
    exercise(
        &mut d,
        &|_| {
            mount(&["--bind", &journal, &journal]);
            mount(&["-o", "remount,bind,ro", &journal]);
        },
        &|_| mount(&["-o", "remount,bind,rw", &journal]),
    );
    println!("READ-ONLY DONE");
}

#[test]
fn a_read_only_journal_directory_leaves_calls_answering_and_recovers() {
    in_mount_namespace("read_only_child", "READ-ONLY DONE");
}

/// The child of the test below: a task becomes ready while the journal directory is
/// read-only. It waits (queued; the start that could not be journaled is not counted) and
/// starts once the journal writes again; it used to start, fail its attempts for storage every
/// backoff and fail for good.
#[test]
fn held_dispatch_child() {
    let Ok(root) = std::env::var(CHILD_MOUNT) else {
        return;
    };
    println!();
    let d = daemon(Some(Path::new(&root).join("state")));
    let journal = d.state_dir.join("journal");
    let journal = journal.to_str().unwrap().to_owned();
    d.project_file(
        "teams/pair.team.md",
        "---\nname: pair\ndefaultWorkflow: pair\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/pair.workflow.md",
        "---\nname: pair\n---\n\n## a\nrole: explorer\n\nstep a [fake:sleep=1500ms]\n\n\
         ## b\nrole: explorer\ndependsOn: a\n\nstep b\n",
    );
    let run = d.run("two steps", json!({"team": "pair"}));
    let task = |name: &str| Daemon::task(&d.status(&run), name).clone();
    let until = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !f() {
            assert!(Instant::now() < deadline, "never: {what}\n{}", d.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    until("a runs", &|| task("01_a")["status"] == "running");
    mount(&["--bind", &journal, &journal]);
    mount(&["-o", "remount,bind,ro", &journal]);
    // A write that needs a new file of sled's fails (what is open stays writable): from now
    // on the journal cannot write.
    let big = format!("a big goal {}", "x".repeat(300 << 10));
    let refused = d.http("team.run", builtin_run_params(&d, &big));
    assert_eq!(code(&refused), Some(STORAGE_FAILED), "{refused}");
    until("a completes (in memory)", &|| {
        task("01_a")["status"] == "completed"
    });
    // Longer than the default retries' backoff (1 s, 2 s): b does not start while the journal
    // cannot write, so it spends no attempt (it used to start, fail for storage each time and
    // fail for good after three).
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(4) {
        let b = task("02_b");
        assert_eq!(
            (b["status"].as_str(), b["attempts"].as_u64()),
            (Some("queued"), Some(0)),
            "{b}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    mount(&["-o", "remount,bind,rw", &journal]);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    println!("HELD DISPATCH DONE");
}

#[test]
fn a_task_ready_while_the_journal_cannot_write_waits_for_it() {
    in_mount_namespace("held_dispatch_child", "HELD DISPATCH DONE");
}

/// Run the test `child` again inside a user + mount namespace (where it may remount the
/// journal directory read-only under its daemon); it prints `done` at its end.
fn in_mount_namespace(child: &str, done: &str) {
    let root = tempfile::Builder::new()
        .prefix("crewd-ro")
        .tempdir()
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(format!(
            "mount --make-rprivate / 2>/dev/null; mount -t tmpfs tmpfs \"$0\" || exit {NO_NAMESPACE}; exec \"$@\""
        ))
        .arg(root.path())
        .arg(exe)
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env(CHILD_MOUNT, root.path())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("cannot run unshare ({e}); `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(NO_NAMESPACE)
        || (!out.status.success() && stdout.trim().is_empty())
    {
        panic!(
            "no mount namespace here ({}): {stderr}; `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped",
            out.status
        );
    }
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(done), "{stdout}");
}
