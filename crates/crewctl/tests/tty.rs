//! crewctl in a real terminal (tmux): the Ctrl-C prompt reads one key without Enter, and a second
//! Ctrl-C detaches and exits at once instead of leaving a read on stdin behind. Skipped, with a
//! note, where tmux is not installed (.ci/run installs it).

// Shared with cli.rs, which uses all of it.
#[allow(dead_code)]
mod mock;

use mock::{event, run_started, status, task, Mock, Script};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// These tests drive crewctl in a real terminal (tmux). Without tmux they fail, never pass:
/// `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped.
fn need_tmux() {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "tmux is not installed (Debian package `tmux`); `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped");
}

/// One tmux server of our own per test, so tests neither see nor disturb anyone else's.
struct Tmux {
    server: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    fn start(socket: &Path, args: &str) -> Tmux {
        Tmux::start_sized(socket, args, 80)
    }

    fn start_sized(socket: &Path, args: &str, columns: u16) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let server = format!(
            "crewctl-test-{}-{}",
            std::process::id(),
            dir.path().display().to_string().len() ^ rand_suffix()
        );
        let exit_file = dir.path().join("exit");
        let cmd = format!(
            "{} --socket {} {args}; echo $? > {}; sleep 60",
            env!("CARGO_BIN_EXE_crewctl"),
            socket.display(),
            exit_file.display()
        );
        let ok = Command::new("tmux")
            .args([
                "-L",
                &server,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                &columns.to_string(),
                "-y",
                "24",
            ])
            .arg(cmd)
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(ok.success());
        Tmux { server, dir }
    }

    fn screen(&self) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.server, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        Command::new("tmux")
            .args(["-L", &self.server, "send-keys"])
            .args(keys)
            .status()
            .unwrap();
    }

    fn exit_file(&self) -> PathBuf {
        self.dir.path().join("exit")
    }

    /// Waits (bounded) until `cond` holds; the screen is in the panic message otherwise.
    async fn until(&self, what: &str, cond: impl Fn(&Tmux) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{}",
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn shows(&self, text: &str) {
        self.until(text, |t| t.screen().contains(text)).await;
    }

    async fn exit_code(&self) -> String {
        self.until("crewctl to exit", |t| {
            std::fs::read_to_string(t.exit_file()).is_ok_and(|s| s.ends_with('\n'))
        })
        .await;
        std::fs::read_to_string(self.exit_file())
            .unwrap()
            .trim()
            .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.server, "kill-server"])
            .status();
    }
}

fn rand_suffix() -> usize {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish() as usize
}

/// A run that keeps running until cancelled.
fn endless() -> Script {
    let mut s = Script::default();
    s.results.insert("team.run", run_started());
    s.results.insert(
        "team.status",
        status("running", vec![task("01_explore", "running")]),
    );
    s.results.insert(
        "team.cancel",
        json!({"status": "cancelled", "cancelledTaskIds": ["01_explore", "02_fix"], "stoppedTaskIds": ["01_explore"]}),
    );
    s.events = vec![
        event(1, "run.started", None, json!({})),
        event(2, "task.started", Some("01_explore"), json!({"attempt": 1})),
    ];
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_ctrl_c_detaches_at_once() {
    need_tmux();
    let mock = Mock::start(endless()).await;
    let t = Tmux::start(&mock.socket, "run x");
    t.shows("Ctrl-C to cancel or detach").await;
    t.keys(&["C-c"]);
    t.shows("one key, no Enter").await;
    t.keys(&["C-c"]);
    assert_eq!(t.exit_code().await, "0", "{}", t.screen());
    assert!(t.screen().contains("Detached"), "{}", t.screen());
    assert!(mock.calls("team.cancel").is_empty());
}

/// On a narrow terminal the live footer is cut to fit beside its duration: the duration never
/// wraps onto a line of its own.
#[tokio::test(flavor = "multi_thread")]
async fn the_footer_fits_a_narrow_terminal() {
    need_tmux();
    let mock = Mock::start(endless()).await;
    let t = Tmux::start_sized(&mock.socket, "run x", 32);
    t.until("the footer", |t| t.screen().contains("done")).await;
    // The footer redraws each tick: look a few times.
    for _ in 0..5 {
        let screen = t.screen();
        let footer = screen
            .lines()
            .find(|l| l.contains("done"))
            .unwrap_or_default();
        assert!(
            footer.trim_end().ends_with('s'),
            "the duration ends the footer's line: {screen}"
        );
        let lone = screen.lines().any(|l| {
            let l = l.trim();
            !l.is_empty() && l.chars().all(|c| c.is_ascii_digit() || "hms.".contains(c))
        });
        assert!(!lone, "a duration wrapped to a line of its own: {screen}");
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
}

/// A running task whose id is longer than a narrow terminal leaves: its bar is cut to fit, so
/// it is redrawn in place (a wrapped bar left copies of itself on the lines below).
#[tokio::test(flavor = "multi_thread")]
async fn a_long_task_id_fits_a_narrow_terminal() {
    need_tmux();
    let long = "part-00-with-a-rather-long-identifier-xyz";
    let mut s = endless();
    let mut started = run_started();
    started["tasks"][0]["id"] = json!(long);
    s.results.insert("team.run", started);
    s.results.insert(
        "team.status",
        status("running", vec![task(long, "running")]),
    );
    s.events = vec![
        event(1, "run.started", None, json!({})),
        event(2, "task.started", Some(long), json!({"attempt": 1})),
    ];
    let mock = Mock::start(s).await;
    let t = Tmux::start_sized(&mock.socket, "run x", 40);
    t.until("the task's bar", |t| t.screen().contains("part-00"))
        .await;
    for _ in 0..5 {
        let screen = t.screen();
        assert!(
            !screen.contains("xyz"),
            "the id is cut, not wrapped: {screen}"
        );
        let lone = screen.lines().any(|l| {
            let l = l.trim();
            // A duration's end (`5h`, `2s`): digits in it, nothing but letters and digits.
            !l.is_empty()
                && l.len() <= 8
                && l.chars().all(|c| c.is_ascii_alphanumeric())
                && l.chars().any(|c| c.is_ascii_digit())
        });
        assert!(
            !lone,
            "a piece of a bar wrapped to a line of its own: {screen}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_key_without_enter_cancels_or_keeps_following() {
    need_tmux();
    let mock = Mock::start(endless()).await;
    let t = Tmux::start(&mock.socket, "run x");
    t.shows("Ctrl-C to cancel or detach").await;
    // Any other key: still following, and the key is not left for a later read.
    t.keys(&["C-c"]);
    t.shows("one key, no Enter").await;
    t.keys(&["x"]);
    t.shows("still following").await;
    // `c`, no Enter: the run is cancelled.
    t.keys(&["C-c"]);
    t.until("the second prompt", |t| {
        t.screen().matches("one key, no Enter").count() >= 2
    })
    .await;
    t.keys(&["c"]);
    t.until("team.cancel", |_| !mock.calls("team.cancel").is_empty())
        .await;
    t.shows("1 worker stopped (01_explore), 1 task not started")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_is_approved_inline_with_one_key() {
    need_tmux();
    let mut s = Script::default();
    s.results.insert("team.run", run_started());
    s.results
        .insert("team.approve", json!({"status": "running"}));
    s.artifacts.insert(
        "shared/plan.md".into(),
        "1. change the retry loop\n2. add a test".into(),
    );
    let mut blocked = status("blocked", vec![task("01_explore", "completed")]);
    blocked["run"]["reason"] = json!("plan approval required before 02_fix starts");
    s.sequence
        .insert("team.status", vec![blocked].into_iter().collect());
    s.results.insert(
        "team.status",
        status(
            "completed",
            vec![task("01_explore", "completed"), task("02_fix", "completed")],
        ),
    );
    s.events = vec![
        event(1, "run.started", None, json!({})),
        event(
            2,
            "plan.approval_required",
            Some("02_fix"),
            json!({"taskId": "02_fix"}),
        ),
        event(
            3,
            "run.blocked",
            None,
            json!({"reason": "plan approval required"}),
        ),
    ];
    // What follows the approval comes once it is given (live, as crewd sends it).
    s.after_call.insert(
        "team.approve",
        vec![
            event(4, "plan.approved", None, json!({})),
            event(5, "task.started", Some("02_fix"), json!({"attempt": 1})),
            event(6, "task.completed", Some("02_fix"), json!({"attempt": 1})),
            event(7, "run.completed", None, json!({})),
        ],
    );
    let mock = Mock::start(s).await;
    let t = Tmux::start(&mock.socket, "run x");
    t.shows("add a test").await;
    t.shows("a approves").await;
    t.keys(&["a"]);
    assert_eq!(t.exit_code().await, "0", "{}", t.screen());
    assert_eq!(mock.calls("team.approve").len(), 1);
    let screen = t.screen();
    assert!(screen.contains("Run r-1 completed"), "{screen}");
    // Said once, by the run's own event.
    assert_eq!(screen.matches("plan approved").count(), 1, "{screen}");
}

/// A run blocked on 01_explore's `question` (02_fix queued behind it), `team.respond` queued.
fn asking(question: &str) -> Script {
    let mut s = Script::default();
    s.results.insert("team.run", run_started());
    let mut asking = task("01_explore", "waiting");
    asking["question"] = json!(question);
    let mut blocked = status("blocked", vec![asking, task("02_fix", "queued")]);
    blocked["run"]["reason"] = json!("01_explore asks a question");
    blocked["run"]["approval"] = json!("not_required");
    s.results.insert("team.status", blocked);
    s.results
        .insert("team.respond", json!({"status": "queued"}));
    s.events = vec![
        event(1, "run.started", None, json!({})),
        event(2, "task.started", Some("01_explore"), json!({"attempt": 1})),
        event(
            3,
            "task.waiting",
            Some("01_explore"),
            json!({"attempt": 1, "question": question}),
        ),
        event(
            4,
            "run.blocked",
            None,
            json!({"reason": "01_explore asks a question"}),
        ),
    ];
    s
}

/// On a narrow terminal the answer being typed stays in sight (its end, after a short
/// prompt); the long hint prints once above, and the whole answer is sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_answer_stays_in_sight_on_a_narrow_terminal() {
    need_tmux();
    let mock = Mock::start(asking("Which backend?")).await;
    let t = Tmux::start_sized(&mock.socket, "run x", 40);
    t.shows("answer 01_explore >").await;
    let answer = "the in-memory backend, because the tests need no server";
    t.keys(&[answer]);
    t.shows("need no server").await;
    // Sent whole; detach after (the mock's run stays blocked).
    t.keys(&["Enter"]);
    t.until("the answer sent", |_| {
        !mock.calls("team.respond").is_empty()
    })
    .await;
    let sent = mock.calls("team.respond");
    assert_eq!(sent[0]["message"], answer, "{}", t.screen());
}

/// Issue 32 (2): while the follow view offers to act on a block, live events go on drawing,
/// and none is lost: another task starts and finishes, the run is resumed elsewhere, and the
/// answer typed meanwhile is shown and sent whole. At 80 and 120 columns.
#[tokio::test(flavor = "multi_thread")]
async fn live_events_draw_while_a_block_is_offered() {
    need_tmux();
    for columns in [80, 120] {
        let mut s = asking("Which backend: redis or memory?");
        s.after_call.insert(
            "team.respond",
            vec![
                event(
                    9,
                    "task.queued",
                    Some("01_explore"),
                    json!({"reason": "answered"}),
                ),
                event(
                    10,
                    "task.started",
                    Some("01_explore"),
                    json!({"attempt": 2}),
                ),
                event(
                    11,
                    "task.completed",
                    Some("01_explore"),
                    json!({"attempt": 2}),
                ),
                event(12, "run.completed", None, json!({})),
            ],
        );
        let mock = Mock::start(s).await;
        let t = Tmux::start_sized(&mock.socket, "run x", columns);
        t.shows("Answer 01_explore").await;
        // Live, with the offer up and no key pressed.
        mock.emit(event(5, "run.resumed", None, json!({})));
        mock.emit(event(
            6,
            "task.started",
            Some("02_fix"),
            json!({"attempt": 1}),
        ));
        t.shows("run resumed").await;
        mock.emit(event(
            7,
            "task.completed",
            Some("02_fix"),
            json!({"attempt": 1}),
        ));
        t.until("02_fix done", |t| {
            t.screen()
                .lines()
                .any(|l| l.contains("02_fix") && l.contains('✓'))
        })
        .await;
        assert!(t.screen().contains("Answer 01_explore"), "{}", t.screen());
        // The answer is typed at a person's pace while more happens, and shows as typed.
        t.keys(&["mem"]);
        t.shows("> mem").await;
        mock.emit(event(
            8,
            "task.progress",
            Some("02_fix"),
            json!({"attempt": 1}),
        ));
        t.keys(&["ory"]);
        t.shows("> memory").await;
        // The run ends after the answer: the status says so from here on.
        let done = status(
            "completed",
            vec![task("01_explore", "completed"), task("02_fix", "completed")],
        );
        mock.state
            .lock()
            .unwrap()
            .script
            .results
            .insert("team.status", done);
        t.keys(&["Enter"]);
        assert_eq!(t.exit_code().await, "0", "{}", t.screen());
        let answers: Vec<String> = mock
            .calls("team.respond")
            .iter()
            .map(|p| p["message"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(answers, ["memory"], "{}", t.screen());
        assert!(t.screen().contains("Run r-1 completed"), "{}", t.screen());
    }
}

/// What `crewctl ARGS` writes to a terminal, byte for byte: tmux pipes the pane's output to a
/// file from before crewctl starts (the shell waits for a key) until it exits.
async fn raw_output(socket: &Path, args: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let done = dir.path().join("done");
    let server = format!("crewctl-raw-{}-{}", std::process::id(), rand_suffix());
    let cmd = format!(
        "read x; {} --socket {} --color never {args}; echo $? > {}; sleep 60",
        env!("CARGO_BIN_EXE_crewctl"),
        socket.display(),
        done.display()
    );
    let tmux = |a: &[&str]| {
        Command::new("tmux")
            .args(["-L", &server, "-f", "/dev/null"])
            .args(a)
            .env_remove("TMUX")
            .status()
            .unwrap()
    };
    assert!(tmux(&["new-session", "-d", "-x", "160", "-y", "50", &cmd]).success());
    assert!(tmux(&["pipe-pane", "-o", &format!("cat >> {}", raw.display())]).success());
    assert!(tmux(&["send-keys", "Enter"]).success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&done).is_ok_and(|s| s.ends_with('\n')) {
        assert!(Instant::now() < deadline, "crewctl {args} did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The pipe drains what crewctl wrote before the exit status was written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    tmux(&["kill-server"]);
    std::fs::read(&raw).unwrap()
}

/// Issue 29 item 2: a fan-out title, an error, a question, an event message and an answer
/// holding cursor moves, an OSC 52 clipboard write, a C1 CSI and a bidi override reach the
/// terminal as visible escapes, never as the characters themselves.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_text_reaches_the_terminal_escaped() {
    need_tmux();
    const EVIL: &str = "x\u{1b}[1A\u{1b}[2K\u{1b}]52;c;aGk=\u{7}\u{9b}2J\u{202e}gpj";
    let mut s = Script::default();
    let mut plan = task("01_plan", "needs_attention");
    plan["error"] = json!(format!("refused: {EVIL}"));
    plan["artifacts"] = json!([{"name": "transcripts/01_plan.attempt-1.jsonl", "kind": "transcript", "taskId": "01_plan", "bytes": 10, "sha256": "x"}]);
    let mut asking = task("02_ask", "waiting");
    asking["question"] = json!(format!("which? {EVIL}"));
    let mut st = status("blocked", vec![plan, asking]);
    st["run"]["reason"] = json!(format!("plan approval required {EVIL}"));
    st["addedTasks"] = json!([
        {"id": "ok", "addedBy": "01_plan", "role": "executor", "agent": "executor",
         "title": format!("fine {EVIL}"), "dependsOn": ["01_plan"], "scope": ["src/a.rs"],
         "writes": true, "awaitingApproval": true},
        {"id": "backdoor", "addedBy": "01_plan", "role": "executor", "agent": "executor",
         "title": "backdoor", "dependsOn": ["01_plan"], "scope": ["**"],
         "writes": true, "awaitingApproval": true},
    ]);
    s.results.insert("team.status", st);
    let mut ev = event(
        1,
        "task.needs_attention",
        Some("01_plan"),
        json!({"attempt": 1, "reason": EVIL}),
    );
    ev["message"] = json!(EVIL);
    s.events = vec![ev.clone()];
    s.results
        .insert("team.events", json!({"events": [ev], "nextSeq": 2}));
    s.results.insert(
        "team.summary",
        json!({"markdown": format!("# Run\n\n{EVIL}\n")}),
    );
    s.artifacts.insert(
        "transcripts/01_plan.attempt-1.jsonl".into(),
        format!(
            "{}\n",
            json!({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": format!("answer {EVIL}")}]}})
        ),
    );
    let mock = Mock::start(s).await;
    for args in ["status r-1", "logs r-1", "logs r-1 01_plan", "summary r-1"] {
        let out = raw_output(&mock.socket, args).await;
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("\\u001b[1A"),
            "{args}: the escape is shown: {text:?}"
        );
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(
                !text.contains(bad),
                "{args}: {bad:?} reached the terminal: {text:?}"
            );
        }
        if args == "status r-1" {
            assert!(text.contains("backdoor"), "{text:?}");
        }
    }
}

/// The same gate under `--json`: the daemon's error message (which can quote what a model or
/// worker wrote) went to the terminal as serde_json writes it, which escapes C0 controls but
/// not a C1 CSI or a bidi override.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_text_in_a_json_error_reaches_the_terminal_escaped() {
    need_tmux();
    const EVIL: &str = "x\u{9b}2J\u{202e}gpj\u{7f}";
    let mut s = Script::default();
    s.errors
        .insert("team.status", (-32000, format!("refused: {EVIL}"), None));
    let mock = Mock::start(s).await;
    let out = raw_output(&mock.socket, "--json status r-1").await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("refused"), "{text:?}");
    for bad in ['\u{9b}', '\u{202e}', '\u{7f}'] {
        assert!(
            !text.contains(bad),
            "{bad:?} reached the terminal: {text:?}"
        );
    }
}

/// Issue 32 (5): a run that failed its verification, followed in a terminal at 80 and 120
/// columns: the task's line and the closing reason show the failing command and lines, none of
/// the passing tests kept before them, and the whole output is one command away.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_check_shows_its_failing_lines_not_the_passing_tests() {
    need_tmux();
    let passing: String = (1..=80)
        .map(|i| format!("test case_{i} ... ok\n"))
        .collect();
    let error = format!(
        "verification failed: `cargo test` exited with 101: error: test failed\n  \
         test case_81 ... FAILED\n  assertion failed at src/lib.rs:12\n  error: test failed\n\
         its whole output: verify/01_explore.attempt-1.1.txt\n\n\
         the end of its output:\n{passing}test case_81 ... FAILED\nerror: test failed\n"
    );
    for columns in [80, 120] {
        let mut s = Script::default();
        s.results.insert("team.run", run_started());
        let mut failed = task("01_explore", "failed");
        failed["error"] = json!(error);
        failed["artifacts"] = json!([{"name": "verify/01_explore.attempt-1.1.txt", "kind": "verify",
            "taskId": "01_explore", "bytes": 2400, "sha256": ""}]);
        let mut st = status("failed", vec![failed]);
        st["run"]["reason"] = json!(format!("task 01_explore failed: {error}"));
        s.results.insert("team.status", st);
        s.events = vec![
            event(1, "run.started", None, json!({})),
            event(2, "task.started", Some("01_explore"), json!({"attempt": 1})),
            event(
                3,
                "task.failed",
                Some("01_explore"),
                json!({"attempt": 1, "error": error, "reason": "verify"}),
            ),
            event(
                4,
                "run.failed",
                None,
                json!({"reason": "task 01_explore failed"}),
            ),
        ];
        let mock = Mock::start(s).await;
        let t = Tmux::start_sized(&mock.socket, "run x", columns);
        assert_eq!(t.exit_code().await, "1", "{}", t.screen());
        let screen = t.screen();
        assert!(
            screen.contains("test case_81 ... FAILED"),
            "{columns}: {screen}"
        );
        assert!(
            screen.contains("assertion failed at src/lib.rs:12"),
            "{columns}: {screen}"
        );
        assert!(
            screen.contains("whole output: crewctl cat r-1 verify/01_explore.attempt-1.1.txt"),
            "{columns}: {screen}"
        );
        assert!(!screen.contains("... ok"), "{columns}: {screen}");
        assert!(
            !screen.contains("the end of its output"),
            "{columns}: {screen}"
        );
    }
}
