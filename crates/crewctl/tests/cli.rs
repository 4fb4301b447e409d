//! crewctl end to end against a scripted stand-in daemon (tests/mock): exit statuses, piped
//! output without escape codes, `--json` parsed back, resubscription after a dropped notice,
//! Ctrl-C without a terminal, and the "daemon not running" message.

mod mock;

use mock::{event, run_started, status, task, usage, Mock, Script};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_crewctl"))
}

async fn crewctl(socket: &Path, args: &[&str]) -> Output {
    let socket = socket.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin())
            .arg("--socket")
            .arg(&socket)
            .args(&args)
            .env_remove("NO_COLOR")
            .env_remove("CREW_SOCKET")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A two-task run ending with `end` (`run.completed`, `run.failed`, ...).
fn run_script(end: &str, final_status: &str) -> Script {
    let mut s = Script::default();
    s.results.insert("team.run", run_started());
    s.results.insert(
        "team.status",
        status(
            final_status,
            vec![task("01_explore", "completed"), task("02_fix", "completed")],
        ),
    );
    s.artifacts.insert(
        "results/01_explore.txt".into(),
        "Explored 3 files.\nThe flaky part is the sleep.".into(),
    );
    let result =
        json!([{"name": "results/01_explore.txt", "kind": "result", "bytes": 40, "sha256": "x"}]);
    s.events = vec![
        event(1, "run.started", None, json!({})),
        event(
            2,
            "task.started",
            Some("01_explore"),
            json!({"attempt": 1, "runtime": "fake"}),
        ),
        event(
            3,
            "task.progress",
            Some("01_explore"),
            json!({"attempt": 1, "usage": usage(500, 0.0005), "currentTool": "read"}),
        ),
        event(
            4,
            "task.completed",
            Some("01_explore"),
            json!({"attempt": 1, "usage": usage(1000, 0.001), "artifacts": result}),
        ),
        event(5, "task.started", Some("02_fix"), json!({"attempt": 1})),
        event(
            6,
            "task.completed",
            Some("02_fix"),
            json!({"attempt": 1, "usage": usage(1000, 0.001)}),
        ),
        event(7, end, None, json!({"reason": "x"})),
    ];
    s
}

#[tokio::test]
async fn not_running_says_how_to_start_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("crewd.sock");
    let o = crewctl(&missing, &["status", "r-1"]).await;
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "crewd is not running (no socket at {}).",
            missing.display()
        )),
        "{err}"
    );
    // The advice starts crewd where this client looks.
    assert!(
        err.contains(&format!("crewd --socket {} &", missing.display())),
        "{err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes when stderr is not a terminal: {err:?}"
    );

    // A socket file left by a dead daemon: connection refused.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let o = crewctl(&stale, &["ls"]).await;
    assert_eq!(code(&o), 4);
    assert!(
        stderr(&o).contains("crewd is not running (nothing listens on"),
        "{}",
        stderr(&o)
    );

    // A directory or a regular file is named as what it is, not as a daemon that is down:
    // no crewd could listen there. Exit 64, and under --json as JSON too.
    let o = crewctl(dir.path(), &["ls"]).await;
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{} is a directory, not crewd's socket.",
            dir.path().display()
        )) && err.contains(&format!("{}", dir.path().join("crewd.sock").display()))
            && !err.contains("not running"),
        "{err}"
    );
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "x").unwrap();
    let o = crewctl(&file, &["--json", "ls"]).await;
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let v: Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(
        v["error"]["message"],
        format!("{} is a regular file, not crewd's socket.", file.display())
    );
    assert_eq!(v["error"]["exit"], 64);

    // Stopping a daemon that is not running is not an error.
    let o = crewctl(&missing, &["daemon", "stop"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn run_follows_and_exits_with_the_run_status() {
    let cases = [
        ("run.completed", "completed", 0),
        ("run.failed", "failed", 1),
        ("run.blocked", "blocked", 2),
        ("run.cancelled", "cancelled", 3),
    ];
    for (end, final_status, want) in cases {
        let mock = Mock::start(run_script(end, final_status)).await;
        let o = crewctl(
            &mock.socket,
            &[
                "run",
                "fix the flaky test",
                "--cwd",
                "/tmp/proj",
                "-t",
                "fast-fix",
            ],
        )
        .await;
        let out = stdout(&o);
        assert_eq!(code(&o), want, "{end}: {out}\n{}", stderr(&o));
        assert!(out.contains("✓ 01_explore"), "{out}");
        assert!(out.contains("│ Explored 3 files."), "result excerpt: {out}");
        assert!(out.contains(&format!("Run r-1 {final_status}")), "{out}");
        assert!(
            !out.contains('\u{1b}'),
            "piped output has no escape codes: {out:?}"
        );
        let run = mock.calls("team.run");
        assert_eq!(run.len(), 1);
        assert_eq!(run[0]["goal"], "fix the flaky test");
        assert_eq!(run[0]["cwd"], "/tmp/proj");
        assert_eq!(run[0]["team"], "fast-fix");
        assert_eq!(
            mock.subscriptions(),
            vec![json!({"runId": "r-1", "afterSeq": 0})]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_needing_attention_exits_2() {
    let mut s = run_script("run.completed", "completed");
    s.results.insert(
        "team.status",
        status(
            "completed",
            vec![
                task("01_explore", "completed"),
                task("02_fix", "needs_attention"),
            ],
        ),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["run", "x"]).await;
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    assert!(
        stdout(&o).contains("02_fix needs attention"),
        "{}",
        stdout(&o)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn resubscribes_after_a_dropped_notice() {
    let mut s = run_script("run.completed", "completed");
    s.drop_first_after = Some(3);
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["run", "x"]).await;
    let out = stdout(&o);
    assert_eq!(code(&o), 0, "{out}\n{}", stderr(&o));
    assert_eq!(
        mock.subscriptions(),
        vec![
            json!({"runId": "r-1", "afterSeq": 0}),
            json!({"runId": "r-1", "afterSeq": 3})
        ],
        "resubscribed after the last event seen"
    );
    assert_eq!(
        out.matches("✓ 01_explore").count(),
        1,
        "no event shown twice: {out}"
    );
    assert_eq!(out.matches("✓ 02_fix").count(), 1, "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_json_prints_events_as_lines() {
    let mock = Mock::start(run_script("run.completed", "completed")).await;
    let o = crewctl(&mock.socket, &["--json", "run", "x"]).await;
    assert_eq!(code(&o), 0);
    let events: Vec<crew_api::types::Event> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );

    let o = crewctl(&mock.socket, &["--json", "run", "x", "--detach"]).await;
    assert_eq!(code(&o), 0);
    let started: crew_api::types::RunStarted = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(started.run_id, "r-1");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_without_a_terminal_detaches() {
    let mut s = run_script("run.completed", "completed");
    s.events.truncate(2); // the run keeps running
    let mock = Mock::start(s).await;
    let socket = mock.socket.clone();
    let child = std::process::Command::new(bin())
        .arg("--socket")
        .arg(&socket)
        .args(["run", "x"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    mock.subscribed.notified().await;
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let o = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Detached; run r-1 keeps going"),
        "{}",
        stderr(&o)
    );
    assert!(
        mock.calls("team.cancel").is_empty(),
        "detaching does not cancel"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_exit_statuses() {
    let cases = [
        (
            json!({"status": "completed", "finished": true}),
            "completed",
            0,
        ),
        (json!({"status": "failed", "finished": true}), "failed", 1),
        (json!({"status": "blocked", "finished": true}), "blocked", 2),
        (
            json!({"status": "cancelled", "finished": true}),
            "cancelled",
            3,
        ),
        (
            json!({"status": "running", "finished": false}),
            "running",
            124,
        ),
    ];
    for (wait, st, want) in cases {
        let mut s = Script::default();
        s.results.insert("team.wait", wait);
        s.results.insert(
            "team.status",
            status(st, vec![task("01_explore", "completed")]),
        );
        let mock = Mock::start(s).await;
        // Waiting through blocks is `wait_waits_through_a_block_unless_told`.
        let o = crewctl(
            &mock.socket,
            &["wait", "r-1", "--timeout", "2s", "--until-blocked"],
        )
        .await;
        assert_eq!(code(&o), want, "{st}: {}{}", stdout(&o), stderr(&o));
        // A wait that ends unfinished before the deadline (this mock answers at once) is
        // asked again for what is left.
        let calls = mock.calls("team.wait");
        assert_eq!(calls[0], json!({"runId": "r-1", "timeoutMs": 2000}));
        assert!(
            calls[1..]
                .iter()
                .all(|c| c["timeoutMs"].as_i64() < Some(2000)),
            "{calls:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn status_json_round_trips_and_colour_follows_the_flag() {
    let mut s = Script::default();
    let st = status("completed", vec![task("01_explore", "completed")]);
    s.results.insert("team.status", st.clone());
    let mock = Mock::start(s).await;

    let o = crewctl(&mock.socket, &["--json", "status", "r-1"]).await;
    assert_eq!(code(&o), 0);
    let got: crew_api::types::StatusResult = serde_json::from_str(&stdout(&o)).unwrap();
    let want: crew_api::types::StatusResult = serde_json::from_value(st).unwrap();
    assert_eq!(got, want);

    let plain = crewctl(&mock.socket, &["status", "r-1"]).await;
    assert!(
        stdout(&plain).contains("01_explore") && !stdout(&plain).contains('\u{1b}'),
        "{}",
        stdout(&plain)
    );
    let coloured = crewctl(&mock.socket, &["--color", "always", "status", "r-1"]).await;
    assert!(
        stdout(&coloured).contains('\u{1b}'),
        "--color always colours even when piped"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn validate_exits_1_on_errors() {
    let diag = json!({"path": ".crew/workflows/broken.md", "line": 7, "field": "dependsOn", "severity": "error", "message": "cycle: a → b → a"});
    let warn = json!({"path": ".crew/agents/x.md", "line": null, "field": null, "severity": "warning", "message": "unused"});
    for (result, want) in [
        (json!({"ok": false, "diagnostics": [diag, warn]}), 1),
        (json!({"ok": true, "diagnostics": [warn]}), 0),
    ] {
        let mut s = Script::default();
        s.results.insert("resource.validate", result);
        let mock = Mock::start(s).await;
        let o = crewctl(&mock.socket, &["validate", "--cwd", "/tmp/proj"]).await;
        assert_eq!(code(&o), want, "{}", stdout(&o));
        if want == 1 {
            assert!(
                stdout(&o).contains(".crew/workflows/broken.md:7: dependsOn: cycle: a → b → a"),
                "{}",
                stdout(&o)
            );
        }
        assert_eq!(
            mock.calls("resource.validate"),
            vec![json!({"cwd": "/tmp/proj"})]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn api_errors_show_message_and_diagnostics() {
    let mut s = Script::default();
    let diags = json!({"diagnostics": [{"path": "teams/x.md", "line": 2, "field": "role", "severity": "error", "message": "unknown agent nobody"}]});
    s.errors
        .insert("team.plan", (1003, "team x is invalid".into(), Some(diags)));
    s.errors
        .insert("team.status", (1001, "run not found: r-9".into(), None));
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["plan", "x", "--team", "x"]).await;
    assert_eq!(code(&o), 1);
    let err = stderr(&o);
    assert!(
        err.contains("error: team x is invalid (code 1003)"),
        "{err}"
    );
    assert!(
        err.contains("teams/x.md:2: role: unknown agent nobody"),
        "{err}"
    );
    let o = crewctl(&mock.socket, &["status", "r-9"]).await;
    assert_eq!(code(&o), 5, "not found has its own exit status");
    assert!(
        stderr(&o).contains("run not found: r-9 (code 1001)"),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_show_events_and_transcripts() {
    let mut s = run_script("run.completed", "completed");
    s.results.insert(
        "team.events",
        json!({"events": s.events.clone(), "nextSeq": 7}),
    );
    let mut t = task("01_explore", "completed");
    t["artifacts"] = json!([{"name": "transcripts/01_explore.attempt-1.jsonl", "kind": "transcript", "taskId": "01_explore", "bytes": 10, "sha256": "x"}]);
    s.results
        .insert("team.status", status("completed", vec![t]));
    s.artifacts.insert(
        "transcripts/01_explore.attempt-1.jsonl".into(),
        concat!(
            r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"toolCall","id":"1","name":"read","arguments":{"path":"a.rs"}}]}}"#,
            "\n",
            r#"{"type":"tool_execution_end","toolName":"read","result":{"content":[{"type":"text","text":"boom"}]},"isError":true}"#,
            "\n"
        )
        .into(),
    );
    let mock = Mock::start(s).await;

    let o = crewctl(&mock.socket, &["logs", "r-1"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("task.completed") && out.contains("01_explore"),
        "{out}"
    );
    assert!(
        !out.contains("task.progress"),
        "progress events only with -v: {out}"
    );

    let o = crewctl(&mock.socket, &["logs", "r-1", "01_explore"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("Reading.")
            && out.contains("▸ read {\"path\":\"a.rs\"}")
            && out.contains("✗ read failed: boom"),
        "{out}"
    );

    // A finished run followed: the stored events, then the summary and its exit status.
    let o = crewctl(&mock.socket, &["logs", "-f", "r-1"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("Run r-1 completed"), "{}", stdout(&o));
}

fn summary_row(id: &str) -> Value {
    json!({"id": id, "status": "failed", "team": "default", "workflow": "default", "goal": "g",
        "cwd": "/w", "createdAt": "2026-03-10T11:55:00Z", "finishedAt": null, "usage": usage(1, 0.5),
        "tasks": {"total": 2, "queued": 0, "running": 0, "waiting": 0, "completed": 1, "failed": 1, "cancelled": 0, "skipped": 0, "needsAttention": 0},
        "scheduleId": null, "reason": null})
}

#[tokio::test(flavor = "multi_thread")]
async fn ls_pages_with_all_and_hints_at_more() {
    let mut s = Script::default();
    let pages = [
        json!({"runs": [summary_row("r-3"), summary_row("r-2")], "next": "r-2"}),
        json!({"runs": [summary_row("r-1")], "next": null}),
    ];
    s.sequence
        .insert("team.list", pages.iter().cloned().collect());
    let mock = Mock::start(s).await;
    let o = crewctl(
        &mock.socket,
        &["--json", "ls", "--all", "--status", "failed"],
    )
    .await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let l: crew_api::types::ListResult = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        l.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["r-3", "r-2", "r-1"]
    );
    assert_eq!(
        mock.calls("team.list"),
        vec![
            json!({"status": "failed", "limit": 1000, "before": null, "team": null}),
            json!({"status": "failed", "limit": 1000, "before": "r-2", "team": null}),
        ]
    );

    let mut s = Script::default();
    s.results.insert("team.list", pages[0].clone());
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["ls", "-n", "2"]).await;
    assert!(stdout(&o).contains("--before r-2"), "{}", stdout(&o));
    assert_eq!(
        mock.calls("team.list"),
        vec![json!({"status": null, "limit": 2, "before": null, "team": null})]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tables_when_piped_have_no_escape_codes() {
    let mut s = Script::default();
    s.results.insert(
        "team.list",
        json!({"runs": [summary_row("r-1")], "next": null}),
    );
    let stat = json!({"hits": 3, "misses": 1, "evictions": 0, "entries": 2, "capacity": 10, "hitRate": 0.75});
    let mut results = stat.clone();
    results["tokensSaved"] = json!(1234);
    results["costSaved"] = json!(0.01);
    s.results.insert(
        "cache.stats",
        json!({"resources": stat, "results": results, "runs": stat}),
    );
    let mock = Mock::start(s).await;
    for args in [&["ls"][..], &["cache", "stats"][..]] {
        let o = crewctl(&mock.socket, args).await;
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
        assert!(!stdout(&o).contains('\u{1b}'), "{args:?}: {}", stdout(&o));
        assert!(stdout(&o).lines().count() >= 3, "{args:?}: {}", stdout(&o));
    }
    let o = crewctl(&mock.socket, &["--json", "cache", "stats"]).await;
    let parsed: crew_api::types::CacheStatsResult = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(parsed.results.tokens_saved, 1234);
}

/// Piped into `cat` or `less -R`, a view still reaches a terminal: what a model wrote (an
/// error, a goal, an event message, a summary) is escaped there too. `crewctl cat` of an
/// artifact stays the artifact's bytes, for files and scripts.
#[tokio::test]
async fn piped_views_escape_model_text_and_cat_stays_raw() {
    const EVIL: &str = "x\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}2J\u{202e}gpj";
    let mut s = Script::default();
    let mut t = task("01_plan", "needs_attention");
    t["error"] = json!(format!("refused: {EVIL}"));
    let mut st = status("blocked", vec![t]);
    st["run"]["goal"] = json!(format!("goal {EVIL}"));
    st["run"]["reason"] = json!(format!("stopped {EVIL}"));
    s.results.insert("team.status", st);
    let mut ev = event(
        1,
        "task.needs_attention",
        Some("01_plan"),
        json!({"attempt": 1}),
    );
    ev["message"] = json!(EVIL);
    s.events = vec![ev.clone()];
    s.results
        .insert("team.events", json!({"events": [ev], "nextSeq": 2}));
    s.results.insert(
        "team.summary",
        json!({"markdown": format!("# Run\n\n{EVIL}\n")}),
    );
    s.artifacts
        .insert("shared/notes.md".into(), format!("raw {EVIL}\n"));
    let mock = Mock::start(s).await;
    for args in [
        &["status", "r-1"][..],
        &["logs", "r-1"],
        &["summary", "r-1"],
    ] {
        let o = crewctl(&mock.socket, args).await;
        let text = stdout(&o);
        assert!(text.contains("\\u001b"), "{args:?}: escaped: {text:?}");
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(bad), "{args:?}: {bad:?} in {text:?}");
        }
    }
    let o = crewctl(&mock.socket, &["cat", "r-1", "shared/notes.md"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("raw {EVIL}\n"));
}

/// A resume that blocked again at once (a conflict nobody resolved yet; a resolution refused
/// again, its task requeued) says so and exits 2, instead of "is running".
#[tokio::test]
async fn a_resume_that_blocks_again_at_once_says_so() {
    for requeued in [json!([]), json!(["03_join"])] {
        let o = resumed_into_a_block(requeued.clone()).await;
        assert_eq!(code(&o), 2, "{requeued}: {}{}", stdout(&o), stderr(&o));
        assert!(
            stdout(&o).contains("blocked again at once"),
            "{}",
            stdout(&o)
        );
        assert!(stdout(&o).contains("conflict in a.txt"), "{}", stdout(&o));
    }
    // Blocked by something new (a requeued task that asks at once): not "nothing changed".
    let mut s = Script::default();
    s.results.insert(
        "team.resume",
        json!({"status": "running", "requeuedTaskIds": ["03_join"]}),
    );
    s.results
        .insert("team.wait", json!({"status": "blocked", "finished": true}));
    let mut was = status("blocked", vec![task("03_join", "needs_attention")]);
    was["run"]["reason"] = json!("task 03_join needs attention: it crashed");
    let mut now = status("blocked", vec![task("03_join", "waiting")]);
    now["run"]["reason"] = json!("03_join asks a question");
    s.sequence
        .insert("team.status", vec![was, now].into_iter().collect());
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["resume", "r-1"]).await;
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    let said = stdout(&o);
    assert!(said.contains("was resumed and is blocked again"), "{said}");
    assert!(!said.contains("nothing it waits on has changed"), "{said}");
    assert!(said.contains("asks a question"), "{said}");
    // Blocked again by the same after agents ran (a resolver that gave up again): not
    // "nothing changed" either.
    let mut s = Script::default();
    s.results.insert(
        "team.resume",
        json!({"status": "running", "requeuedTaskIds": ["_resolve-03_join-1"]}),
    );
    s.results
        .insert("team.wait", json!({"status": "blocked", "finished": true}));
    let reason = json!("task _resolve-03_join-1 needs attention: conflict markers left");
    let with_attempts = |n: u32| {
        let mut t = task("_resolve-03_join-1", "needs_attention");
        t["attempts"] = json!(n);
        let mut st = status("blocked", vec![t]);
        st["run"]["reason"] = reason.clone();
        st
    };
    s.sequence.insert(
        "team.status",
        vec![with_attempts(2), with_attempts(4)]
            .into_iter()
            .collect(),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["resume", "r-1"]).await;
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    let said = stdout(&o);
    assert!(said.contains("was resumed and is blocked again"), "{said}");
    assert!(!said.contains("nothing it waits on has changed"), "{said}");
    // One that goes on is running.
    let mut s = Script::default();
    s.results.insert(
        "team.resume",
        json!({"status": "running", "requeuedTaskIds": ["02_fix"]}),
    );
    s.results
        .insert("team.wait", json!({"status": "running", "finished": false}));
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["resume", "r-1"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("is running; requeued 02_fix"),
        "{}",
        stdout(&o)
    );
}

/// `crewctl resume` of a run whose resume answered `requeued` and which then blocked.
async fn resumed_into_a_block(requeued: Value) -> std::process::Output {
    let mut s = Script::default();
    s.results.insert(
        "team.resume",
        json!({"status": "running", "requeuedTaskIds": requeued}),
    );
    s.results
        .insert("team.wait", json!({"status": "blocked", "finished": true}));
    let mut st = status("blocked", vec![task("03_join", "queued")]);
    st["run"]["reason"] = json!("the results of 03_join's dependencies conflict in a.txt\nresolve it on crew/tasks/r-1/03_join");
    s.results.insert("team.status", st);
    let mock = Mock::start(s).await;
    crewctl(&mock.socket, &["resume", "r-1"]).await
}

#[tokio::test]
async fn completions_and_man_pages() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    for shell in ["bash", "zsh", "fish"] {
        let o = crewctl(&sock, &["completions", shell]).await;
        assert_eq!(code(&o), 0);
        assert!(stdout(&o).contains("crewctl"), "{shell}");
    }
    let man = dir.path().join("man");
    let o = crewctl(&sock, &["man", man.to_str().unwrap()]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for page in [
        "crewctl.1",
        "crewctl-run.1",
        "crewctl-schedule.1",
        "crewctl-schedule-add.1",
    ] {
        assert!(man.join(page).exists(), "{page} written");
    }
    let page: String = std::fs::read_to_string(man.join("crewctl.1")).unwrap();
    assert!(
        page.contains("Exit status"),
        "the exit statuses are documented"
    );
    let _ = Value::Null;
}

fn summary(id: &str, status: &str, goal: &str) -> Value {
    json!({
        "id": id, "status": status, "team": "default", "workflow": "default", "goal": goal,
        "cwd": "/w", "createdAt": "2026-03-10T11:55:00Z", "finishedAt": null,
        "usage": usage(0, 0.0),
        "tasks": {"total": 1, "queued": 0, "running": 0, "waiting": 0, "completed": 1,
                  "failed": 0, "cancelled": 0, "skipped": 0, "needsAttention": 0},
        "scheduleId": null, "reason": null,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn run_ids_by_prefix_last_and_minus_n() {
    let mut s = Script::default();
    let newest = "team_20260310115500_3f9a1c2e00001111";
    let twin = "team_20260310115500_3f9a1c2e00002222";
    let old = "team_20260309080000_a0b1c2d3e4f50617";
    s.results.insert(
        "team.list",
        json!({"runs": [summary(newest, "running", "fix it"), summary(twin, "completed", "twin"),
                        summary(old, "failed", "old one")], "next": null}),
    );
    s.results.insert("team.status", status("running", vec![]));
    let mock = Mock::start(s).await;
    let asked = |m: &Mock| -> Vec<String> {
        m.calls("team.status")
            .iter()
            .map(|p| p["runId"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    for (typed, want) in [
        ("a0b1", old),
        ("last", newest),
        ("-1", newest),
        ("-3", old),
        ("3F9A1C2E00002", twin),
    ] {
        let o = crewctl(&mock.socket, &["status", typed]).await;
        assert_eq!(code(&o), 0, "{typed}: {}", stderr(&o));
        assert_eq!(
            asked(&mock).last().map(String::as_str),
            Some(want),
            "{typed}"
        );
    }
    // A whole id (or one of another shape) goes to the daemon as it is, without a listing.
    let lists = mock.calls("team.list").len();
    let o = crewctl(&mock.socket, &["status", old]).await;
    assert_eq!(code(&o), 0);
    assert_eq!(mock.calls("team.list").len(), lists);

    let o = crewctl(&mock.socket, &["status", "3f9a"]).await;
    assert_eq!(code(&o), 64, "an ambiguous prefix is a usage error");
    let err = stderr(&o);
    assert!(err.contains("`3f9a` matches 2 runs"), "{err}");
    assert!(
        err.contains(newest) && err.contains(twin) && !err.contains(old),
        "{err}"
    );

    let o = crewctl(&mock.socket, &["status", "ffff"]).await;
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no run id starts with `ffff`"),
        "{}",
        stderr(&o)
    );
    let o = crewctl(&mock.socket, &["status", "-4"]).await;
    assert_eq!(code(&o), 5);
    assert!(stderr(&o).contains("only 3 runs"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_errors_exit_64_and_json_errors_are_json() {
    let mock = Mock::start(Script::default()).await;
    for args in [
        &["status"][..],
        &["--bogus", "ls"],
        &["ls", "-n", "zero"],
        &["run"],
    ] {
        let o = crewctl(&mock.socket, args).await;
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
    }
    let o = crewctl(&mock.socket, &["--help"]).await;
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("64   usage"), "{}", stdout(&o));

    let mut s = Script::default();
    s.errors
        .insert("team.status", (1001, "run not found: r-9".into(), None));
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["--json", "status", "r-9"]).await;
    assert_eq!(code(&o), 5);
    let v: Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(v["error"]["code"], 1001);
    assert_eq!(v["error"]["exit"], 5);
    assert_eq!(v["error"]["message"], "run not found: r-9");
    let o = crewctl(&mock.socket, &["--json", "status"]).await;
    assert_eq!(code(&o), 64);
    let v: Value = serde_json::from_str(stderr(&o).trim()).expect("one JSON object");
    assert_eq!(v["error"]["exit"], 64);

    // A message quoting a model's bidi override or C1 control: escaped piped too, still JSON.
    let mut s = Script::default();
    s.errors.insert(
        "team.status",
        (1002, "refused: \u{9b}2J\u{202e}gpj".into(), None),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["--json", "status", "r-1"]).await;
    let text = stderr(&o);
    assert!(
        !text.contains('\u{9b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    let v: Value = serde_json::from_str(text.trim()).expect("one JSON object");
    assert_eq!(v["error"]["message"], "refused: \u{9b}2J\u{202e}gpj");
}

#[test]
fn readme_lists_every_exit_status_of_help() {
    let help = std::process::Command::new(bin())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = help.split("Exit status:").nth(1).unwrap_or_default();
    let mut codes = vec![];
    for line in section.lines().skip(1) {
        let Some(code) = line.split_whitespace().next() else {
            break;
        };
        match code.parse::<u32>() {
            Ok(n) => codes.push(n),
            Err(_) => break,
        }
    }
    assert!(codes.len() >= 8, "{codes:?}\n{help}");
    for c in codes {
        assert!(
            readme.contains(&format!("| {c} |")),
            "README has no row for exit status {c}"
        );
    }
}

fn waiting_task(id: &str, question: &str) -> Value {
    let mut t = task(id, "waiting");
    t["question"] = json!(question);
    t
}

/// A run whose task asked twice: answered once, asking again now.
fn asked_twice() -> Vec<Value> {
    vec![
        event(1, "run.started", None, json!({})),
        event(2, "task.started", Some("01_explore"), json!({"attempt": 1})),
        event(
            3,
            "task.waiting",
            Some("01_explore"),
            json!({"question": "first question?"}),
        ),
        event(
            4,
            "run.blocked",
            None,
            json!({"reason": "task 01_explore is waiting for an answer: first question?"}),
        ),
        event(5, "task.queued", Some("01_explore"), json!({})),
        event(6, "task.started", Some("01_explore"), json!({"attempt": 1})),
        event(
            7,
            "task.waiting",
            Some("01_explore"),
            json!({"question": "second question?"}),
        ),
        event(
            8,
            "run.blocked",
            None,
            json!({"reason": "task 01_explore is waiting for an answer: second question?"}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_follow_does_not_stop_at_an_old_block() {
    let mut s = Script::default();
    let events = asked_twice();
    s.results.insert(
        "team.events",
        json!({"events": events.clone(), "nextSeq": 8}),
    );
    s.events = events;
    let mut st = status(
        "blocked",
        vec![waiting_task("01_explore", "second question?")],
    );
    st["run"]["approval"] = json!("not_required");
    st["run"]["reason"] = json!("task 01_explore is waiting for an answer: second question?");
    s.results.insert("team.status", st);
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["logs", "-f", "r-1"]).await;
    let out = stdout(&o);
    assert_eq!(code(&o), 2, "{out}\n{}", stderr(&o));
    assert!(
        out.contains("second question?"),
        "history shown to the end: {out}"
    );
    assert_eq!(
        out.matches("Run r-1 blocked").count(),
        1,
        "one summary, at the end: {out}"
    );
    assert_eq!(
        mock.subscriptions(),
        vec![json!({"runId": "r-1", "afterSeq": 8})],
        "live from where the stored history ended"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_follows_through_a_block_when_asked() {
    let script = || {
        let mut s = run_script("run.completed", "completed");
        let mut blocked = status("blocked", vec![waiting_task("01_explore", "which branch?")]);
        blocked["run"]["approval"] = json!("not_required");
        blocked["run"]["reason"] = json!("task 01_explore is waiting for an answer: which branch?");
        s.sequence
            .insert("team.status", vec![blocked].into_iter().collect());
        // Blocked after seq 2 (a question), answered, then the run goes on to complete.
        let mut events = s.events.clone();
        events.insert(
            2,
            event(
                2,
                "task.waiting",
                Some("01_explore"),
                json!({"question": "which branch?"}),
            ),
        );
        events.insert(
            3,
            event(2, "run.blocked", None, json!({"reason": "waiting"})),
        );
        for (i, e) in events.iter_mut().enumerate() {
            e["seq"] = json!(i + 1);
            e["runSeq"] = json!(i + 1);
        }
        s.events = events;
        s
    };
    let mock = Mock::start(script()).await;
    let o = crewctl(&mock.socket, &["run", "x"]).await;
    assert_eq!(code(&o), 2, "piped: a block ends following: {}", stdout(&o));

    let mock = Mock::start(script()).await;
    let o = crewctl(&mock.socket, &["run", "x", "--through-blocks"]).await;
    let out = stdout(&o);
    assert_eq!(code(&o), 0, "{out}\n{}", stderr(&o));
    assert!(out.contains("Run r-1 blocked"), "the block is shown: {out}");
    assert!(
        out.contains("answer 01_explore: crewctl respond r-1 01_explore"),
        "{out}"
    );
    assert!(
        out.contains("Run r-1 completed"),
        "and followed to the end: {out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_waits_through_a_block_unless_told() {
    let script = || {
        let mut s = Script::default();
        s.sequence.insert(
            "team.wait",
            vec![json!({"status": "blocked", "finished": true})]
                .into_iter()
                .collect(),
        );
        s.results.insert(
            "team.wait",
            json!({"status": "completed", "finished": true}),
        );
        s.results.insert(
            "daemon.status",
            json!({"version": "0", "apiVersion": "1", "pid": 1, "uptimeMs": 1, "socket": "/s",
                   "stateDir": "/d", "runs": {"active": 1, "total": 1, "resident": 1},
                   "schedules": {"total": 0, "enabled": 0}, "journal": {"lastSeq": 40, "bytes": 1},
                   "workers": {"running": 0, "max": 8}}),
        );
        s.sequence.insert(
            "team.status",
            vec![status("blocked", vec![waiting_task("01_explore", "?")])]
                .into_iter()
                .collect(),
        );
        s.results.insert(
            "team.status",
            status("completed", vec![task("01_explore", "completed")]),
        );
        s.events = vec![event(41, "task.queued", Some("01_explore"), json!({}))];
        s
    };
    let mock = Mock::start(script()).await;
    let o = crewctl(&mock.socket, &["wait", "r-1"]).await;
    assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(mock.calls("team.wait").len(), 2);
    assert_eq!(
        mock.subscriptions(),
        vec![json!({"runId": "r-1", "afterSeq": 40})]
    );

    let mock = Mock::start(script()).await;
    let o = crewctl(&mock.socket, &["wait", "r-1", "--until-blocked"]).await;
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    assert_eq!(mock.calls("team.wait").len(), 1);
}

fn daemon_status_json(last_seq: u64) -> Value {
    json!({"version": "0", "apiVersion": "1", "pid": 1, "uptimeMs": 1, "socket": "/s",
           "stateDir": "/d", "runs": {"active": 1, "total": 1, "resident": 1},
           "schedules": {"total": 0, "enabled": 0}, "journal": {"lastSeq": last_seq, "bytes": 1},
           "workers": {"running": 0, "max": 8}})
}

#[tokio::test(flavor = "multi_thread")]
async fn status_watch_redraws_until_the_run_finishes_and_clean_prunes() {
    let mut s = Script::default();
    s.results.insert("daemon.status", daemon_status_json(10));
    s.sequence.insert(
        "team.status",
        vec![status("running", vec![task("01_explore", "running")])]
            .into_iter()
            .collect(),
    );
    s.results.insert(
        "team.status",
        status("failed", vec![task("01_explore", "failed")]),
    );
    s.events = vec![event(
        11,
        "task.failed",
        Some("01_explore"),
        json!({"error": "boom"}),
    )];
    s.results.insert(
        "team.prune",
        json!({"removed": ["team_20260301080000_77aa00bb11cc22dd"], "kept": 3}),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["status", "r-1", "--watch"]).await;
    let out = stdout(&o);
    assert_eq!(code(&o), 1, "the run failed: {out}\n{}", stderr(&o));
    assert!(
        out.contains("● running") && out.contains("✗ failed"),
        "{out}"
    );
    assert_eq!(
        mock.subscriptions(),
        vec![json!({"runId": "r-1", "afterSeq": 10})]
    );

    let o = crewctl(&mock.socket, &["clean", "--keep", "3"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("Removed 1 run; kept 3."),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        mock.calls("team.prune"),
        vec![json!({"keep": 3, "olderThanMs": null, "force": null})]
    );
}

/// `crewctl steer` prints the daemon's note when the running worker will not hear the message.
#[tokio::test(flavor = "multi_thread")]
async fn steer_prints_the_note_of_a_queued_message() {
    let note = "runtime `codex` cannot take a message while its worker runs";
    let cases = [
        (json!({"delivered": "live"}), "Delivered to 01_fix live."),
        (json!({"delivered": "queued", "note": note}), note),
        (
            json!({"delivered": "queued"}),
            "Queued for 01_fix: it gets it when it starts.",
        ),
    ];
    for (answer, want) in cases {
        let mut s = Script::default();
        s.results.insert("team.steer", answer.clone());
        let mock = Mock::start(s).await;
        let o = crewctl(&mock.socket, &["steer", "r-1", "01_fix", "use the cache"]).await;
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains(want), "{answer}: {}", stdout(&o));
        assert_eq!(
            mock.calls("team.steer"),
            vec![json!({"runId": "r-1", "taskId": "01_fix", "message": "use the cache"})]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_and_fan_out_approval_show_scopes_and_verify_commands() {
    let mut s = Script::default();
    let planned = |id: &str, extra: Value| {
        let mut t = json!({"id": id, "stepId": id, "role": "executor", "agent": "executor",
            "dependsOn": [], "model": null, "writes": true});
        t.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        t
    };
    s.results.insert(
        "team.plan",
        json!({"team": "implement", "workflow": "implement", "concurrency": 4, "runtime": "fake",
        "diagnostics": [], "tasks": [
            planned("02_plan", json!({})),
            planned("04_verify", json!({"scope": ["src/auth", "docs/*.md"],
                "verifyCommands": ["cargo test -p auth", "make lint"]})),
        ]}),
    );
    let mut st = status(
        "blocked",
        vec![task("02_plan", "completed"), {
            let mut t = task("04_verify", "queued");
            t["verifyCommands"] = json!(["cargo test -p auth"]);
            t
        }],
    );
    st["addedTasks"] = json!([
        {"id": "parser", "addedBy": "02_plan", "role": "executor", "agent": "executor",
         "title": "Parse the flag", "dependsOn": ["02_plan"], "scope": ["src/cli.rs"],
         "writes": true, "awaitingApproval": true, "verifyCommands": ["cargo test cli"]},
        {"id": "tests", "addedBy": "02_plan", "role": "test-engineer", "agent": "test-engineer",
         "title": "Test it", "dependsOn": ["02_plan", "parser"], "scope": ["tests/**"],
         "writes": true, "awaitingApproval": true},
    ]);
    s.results.insert("team.status", st);
    let mock = Mock::start(s).await;

    let o = crewctl(&mock.socket, &["plan", "add a flag", "--team", "implement"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let line = |out: &str, start: &str| {
        out.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_default()
            .to_string()
    };
    assert!(out.contains("checks:"), "{out}");
    assert_eq!(
        line(&out, "  04_verify"),
        "  04_verify  scope: src/auth, docs/*.md  verify: cargo test -p auth; make lint",
        "{out}"
    );
    assert!(
        line(&out, "  02_plan").is_empty(),
        "no checks, no line: {out}"
    );

    let o = crewctl(&mock.socket, &["status", "r-1"]).await;
    let out = stdout(&o);
    // The added tasks: one table, each value under its column's header.
    let parser = line(&out, "  parser");
    let header = line(&out, "  task ");
    let under = |row: &str, col: &str, want: &str| {
        let at = header.find(col).unwrap_or_else(|| panic!("{col} in {out}"));
        assert_eq!(row.get(at..at + want.len()), Some(want), "{col}: {out}");
    };
    under(&parser, "role", "executor");
    under(&parser, "title", "Parse the flag");
    under(&parser, "scope", "src/cli.rs");
    under(&parser, "verify", "cargo test cli");
    assert!(parser.contains("awaiting approval"), "{out}");
    let tests = line(&out, "  tests");
    under(&tests, "role", "test-engineer");
    under(&tests, "scope", "tests/**");
    under(&tests, "after", "parser");
    under(&tests, "verify", "-");
    // The step that waits for the added work says what it will run.
    assert_eq!(
        line(&out, "  04_verify"),
        "  04_verify  verify: cargo test -p auth",
        "{out}"
    );
}

/// Issue 32 (1): every verb that takes a run resolves `last`, `-N` and a prefix the same way,
/// `diff` and `apply` included: the daemon is asked with the whole id.
#[tokio::test(flavor = "multi_thread")]
async fn every_verb_that_takes_a_run_resolves_it() {
    let newest = "team_20260310115500_3f9a1c2e00001111";
    let older = "team_20260309080000_a0b1c2d3e4f50617";
    let mut s = Script::default();
    s.results.insert(
        "team.list",
        json!({"runs": [summary(newest, "completed", "new"), summary(older, "completed", "old")],
               "next": null}),
    );
    let mock = Mock::start(s).await;
    // (the verb's arguments with RUN where the run goes, the method and field it must reach)
    let verbs: &[(&[&str], &str, &str)] = &[
        (&["status", "RUN"], "team.status", "runId"),
        (&["logs", "RUN"], "team.events", "runId"),
        (&["cancel", "RUN"], "team.status", "runId"),
        (&["resume", "RUN"], "team.resume", "runId"),
        (&["retry", "RUN", "01_x"], "team.retry", "runId"),
        (&["approve", "RUN"], "team.approve", "runId"),
        (&["reject", "RUN"], "team.reject", "runId"),
        (&["steer", "RUN", "01_x", "hi"], "team.steer", "runId"),
        (&["respond", "RUN", "01_x", "hi"], "team.respond", "runId"),
        (&["wait", "RUN"], "team.wait", "runId"),
        (&["artifacts", "RUN"], "team.artifacts", "runId"),
        (&["cat", "RUN", "results/x.txt"], "team.artifact", "runId"),
        (&["summary", "RUN"], "team.summary", "runId"),
        (&["forget", "RUN"], "team.forget", "runId"),
        (&["diff", "RUN"], "team.diff", "runId"),
        (&["diff", "RUN", "01_x", "--stat"], "team.diff", "runId"),
        (&["apply", "RUN"], "team.apply", "runId"),
        (&["pick", "RUN", "01_x", "2"], "team.pick", "runId"),
        (&["export", "RUN"], "team.export", "runId"),
        (&["ls", "--before", "RUN"], "team.list", "before"),
        (
            &["cache", "invalidate", "--run", "RUN"],
            "cache.invalidate",
            "runId",
        ),
    ];
    for (args, method, field) in verbs {
        for (typed, want) in [("last", newest), ("-2", older), ("a0b1c2", older)] {
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == "RUN" { typed } else { a })
                .collect();
            let o = crewctl(&mock.socket, &args).await;
            let asked: Vec<Value> = mock
                .calls(method)
                .into_iter()
                .filter(|p| !p[*field].is_null())
                .collect();
            assert_eq!(
                asked.last().and_then(|p| p[*field].as_str()),
                Some(want),
                "{args:?}: {}",
                stderr(&o)
            );
            assert!(
                !stderr(&o).contains("run not found"),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
}

/// Issue 32 (3): piped output is never cut: a long goal, a long error and a long question
/// reach `status | cat` and `ls | cat` whole (on one line each).
#[tokio::test(flavor = "multi_thread")]
async fn piped_output_is_never_cut() {
    let goal = format!(
        "Rework the parser {}end-of-goal",
        "and keep every test green ".repeat(20)
    );
    let error = format!(
        "verify failed: {}end-of-error",
        "cargo test said no ".repeat(12)
    );
    let question = format!(
        "Which one {}end-of-question?",
        "of the many options ".repeat(10)
    );
    let mut st = status(
        "blocked",
        vec![task("01_explore", "failed"), task("02_fix", "waiting")],
    );
    st["run"]["goal"] = json!(goal);
    st["tasks"][0]["error"] = json!(error);
    st["tasks"][1]["question"] = json!(question);
    let mut s = Script::default();
    s.results.insert("team.status", st);
    s.results.insert(
        "team.list",
        json!({"runs": [summary("team_20260310115500_3f9a1c2e00001111", "blocked", &goal)], "next": null}),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["status", "r-1"]).await;
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    for whole in [&goal, &error, &question] {
        assert!(out.contains(whole.as_str()), "{whole}\n{out}");
    }
    // The error is in its row, not again below the table.
    assert_eq!(out.matches("end-of-error").count(), 1, "{out}");
    let o = crewctl(&mock.socket, &["ls"]).await;
    assert!(stdout(&o).contains(goal.as_str()), "{}", stdout(&o));
}

/// Issue 29 item 6: `crewctl ui` starts the browser with nothing secret on its command line:
/// `xdg-open` gets a `file://` URL of a 0600 page that redirects to a one-time code.
#[tokio::test(flavor = "multi_thread")]
async fn ui_puts_no_token_on_the_browsers_command_line() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let state = tempfile::tempdir().unwrap();
    let mut status = daemon_status_json(1);
    status["stateDir"] = json!(state.path().display().to_string());
    let mut s = Script::default();
    s.results.insert("daemon.status", status);
    let mock = Mock::start(s).await;

    // A stand-in xdg-open: records its argv and a copy of the file it was given.
    let bin_dir = tempfile::tempdir().unwrap();
    let record = bin_dir.path().join("argv");
    let page = bin_dir.path().join("page");
    let opener = bin_dir.path().join("xdg-open");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nf=\"${{1#file://}}\"\nstat -c %a \"$f\" > {page}.mode\ncp \"$f\" {page}\nprintf '%s\\n' \"$0\" \"$@\" > {record}.tmp\nmv {record}.tmp {record}\n",
            page = page.display(),
            record = record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = std::process::Command::new(bin())
        .arg("--socket")
        .arg(&mock.socket)
        .args(["ui", "--listen", "0"])
        .env("DISPLAY", ":99")
        .env("PATH", &path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        line.trim().to_string()
    })
    .await
    .unwrap();
    let token = url.rsplit_once("token=").unwrap().1.to_string();
    assert_eq!(token.len(), 64, "{url}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !record.exists() {
        assert!(std::time::Instant::now() < deadline, "xdg-open never ran");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let argv = std::fs::read_to_string(&record).unwrap();
    let own = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !argv.contains(&token),
        "the token is on xdg-open's argv: {argv}"
    );
    assert!(
        !argv.contains("code=") && !argv.contains("token="),
        "{argv}"
    );
    assert!(!String::from_utf8_lossy(&own).contains(&token));
    let target = argv.lines().nth(1).unwrap();
    assert!(target.starts_with("file:///"), "{argv}");
    assert_eq!(
        std::fs::read_to_string(format!("{}.mode", page.display()))
            .unwrap()
            .trim(),
        "600"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("?code="), "{html}");
    assert!(
        !html.contains(&token),
        "the page holds a one-time code, not the token"
    );
}

/// `wait --timeout 2h`: crewd bounds one `team.wait` to an hour, so crewctl asks for at most
/// that each time and asks again while its own deadline is ahead — it sent the whole 2 h
/// first (refused as invalid params, exit 64) and would have given up after the first hour.
#[tokio::test(flavor = "multi_thread")]
async fn wait_longer_than_an_hour_waits_in_hours() {
    let mut s = Script::default();
    s.sequence.insert(
        "team.wait",
        vec![json!({"status": "running", "finished": false})]
            .into_iter()
            .collect(),
    );
    s.results.insert(
        "team.wait",
        json!({"status": "completed", "finished": true}),
    );
    s.results.insert(
        "team.status",
        status("completed", vec![task("01_explore", "completed")]),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["wait", "r-1", "--timeout", "2h"]).await;
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let calls = mock.calls("team.wait");
    assert_eq!(calls.len(), 2, "{calls:?}");
    for c in &calls {
        let ms = c["timeoutMs"].as_i64().unwrap();
        assert!(ms <= 3_600_000 && ms > 3_500_000, "{c}");
    }
}

/// `logs` of a task the run does not have: exit 5 (not found), as `retry`, `steer` and `diff`
/// exit for it — it exited 1.
#[tokio::test(flavor = "multi_thread")]
async fn logs_of_an_unknown_task_is_not_found() {
    let mut s = run_script("run.completed", "completed");
    s.results.insert(
        "team.status",
        status("completed", vec![task("01_explore", "completed")]),
    );
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["logs", "r-1", "nosuch"]).await;
    assert_eq!(code(&o), 5, "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("has no task nosuch"), "{}", stderr(&o));
}

/// `logs -f <run> <task>` piped, for a task the run blocks before it starts: it stops with exit
/// status 2, as following a run does (the status was dropped and it exited 0).
#[tokio::test(flavor = "multi_thread")]
async fn logs_follow_of_a_task_exits_as_its_run_stopped() {
    let mut s = Script::default();
    let events = vec![
        event(1, "run.created", None, json!({})),
        event(
            2,
            "run.blocked",
            None,
            json!({"reason": "waiting for plan approval"}),
        ),
    ];
    s.results.insert(
        "team.events",
        json!({"events": events.clone(), "nextSeq": 3}),
    );
    s.events = events;
    let mut st = status(
        "blocked",
        vec![task("01_plan", "completed"), task("02_build", "queued")],
    );
    st["run"]["reason"] = json!("waiting for plan approval");
    s.results.insert("team.status", st);
    let mock = Mock::start(s).await;
    let o = crewctl(&mock.socket, &["logs", "-f", "r-1", "02_build"]).await;
    assert_eq!(code(&o), 2, "{}\n{}", stdout(&o), stderr(&o));
}
