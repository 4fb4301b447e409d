//! Run the built fake agent and read its stdout with crew's own pi parser.

use crew_core::stream::{is_retryable_message, parser, AdapterKind, Outcome, WorkerEvent};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_crew-fake-agent");

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    events: Vec<WorkerEvent>,
    outcome: Outcome,
}

fn parse(stdout: &str) -> (Vec<WorkerEvent>, Outcome) {
    let mut p = parser(AdapterKind::Pi);
    let events = stdout.lines().flat_map(|l| p.feed_line(l)).collect();
    (events, p.outcome())
}

fn run_env(prompt: &str, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "--mode",
        "json",
        "-p",
        "--no-session",
        "--model",
        "fake/fake-1",
        "--no-tools",
        prompt,
    ])
    .stdin(Stdio::null())
    .env_remove("CREW_ATTEMPT")
    .env_remove("CREW_FAKE_ECHO");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (events, outcome) = parse(&stdout);
    Run {
        status: out.status,
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        events,
        outcome,
    }
}

fn run(prompt: &str) -> Run {
    run_env(prompt, &[])
}

fn count(events: &[WorkerEvent], pred: impl Fn(&WorkerEvent) -> bool) -> usize {
    events.iter().filter(|e| pred(e)).count()
}

#[test]
fn default_answer_quotes_the_first_line() {
    let r = run("Task: Goal: fix it\nStep: fix (executor)\nDo the thing.");
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(
        r.outcome.final_text.as_deref(),
        Some("fake-agent: done with \"Goal: fix it\"")
    );
    let u = r.outcome.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write, u.turns),
        (100, 20, 10, 5, 1)
    );
    assert!((u.cost - 0.0003).abs() < 1e-12, "{}", u.cost);
    assert_eq!(r.outcome.model.as_deref(), Some("fake-1"));
    assert_eq!(r.outcome.error, None);
    assert!(matches!(
        r.events.first(),
        Some(WorkerEvent::Started {
            session_id: Some(_),
            ..
        })
    ));
    assert_eq!(r.events.last(), Some(&WorkerEvent::Finished));
    // every stdout line is JSON with a type
    for line in r.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["type"].is_string(), "{line}");
    }
}

#[test]
fn usage_streams_per_turn_and_sums() {
    let r = run("Task: Goal: count [fake:tokens=5000] [fake:turns=3] [fake:sleep=30ms]");
    assert_eq!(r.status.code(), Some(0));
    let u = r.outcome.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write, u.turns),
        (4000, 1000, 0, 0, 3)
    );
    assert!((u.cost - 0.01).abs() < 1e-9, "{}", u.cost);
    let per_message: Vec<u64> = r
        .events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::AssistantMessage { usage, .. } => Some(usage.input + usage.output),
            _ => None,
        })
        .collect();
    assert_eq!(per_message, [1666, 1666, 1668]);
    let finals: Vec<bool> = r
        .events
        .iter()
        .filter(|e| matches!(e, WorkerEvent::AssistantMessage { .. }))
        .map(|e| e.is_final())
        .collect();
    assert_eq!(
        finals,
        [false, false, true],
        "intermediate turns must not start the drain"
    );
    assert_eq!(r.outcome.final_text.as_deref(), Some("fake-agent: done with \"Goal: count [fake:tokens=5000] [fake:turns=3] [fake:sleep=30ms]\""));
}

#[test]
fn failures() {
    struct Case {
        prompt: &'static str,
        env: &'static [(&'static str, &'static str)],
        code: i32,
        error: Option<&'static str>,
        retryable: bool,
        final_text: bool,
    }
    let table = [
        Case {
            prompt: "[fake:fail]",
            env: &[],
            code: 1,
            error: Some("invalid api key (fake)"),
            retryable: false,
            final_text: false,
        },
        Case {
            prompt: "[fake:model-error]",
            env: &[],
            code: 0,
            error: Some("429 rate_limit_error: overloaded (fake)"),
            retryable: true,
            final_text: false,
        },
        Case {
            prompt: "[fake:fail-attempts=2]",
            env: &[("CREW_ATTEMPT", "2")],
            code: 0,
            error: Some("429 rate_limit_error: overloaded (fake)"),
            retryable: true,
            final_text: false,
        },
        Case {
            prompt: "[fake:fail-attempts=2]",
            env: &[("CREW_ATTEMPT", "3")],
            code: 0,
            error: None,
            retryable: false,
            final_text: true,
        },
        Case {
            prompt: "[fake:no-final-text]",
            env: &[],
            code: 0,
            error: None,
            retryable: false,
            final_text: false,
        },
        Case {
            prompt: "Goal: g\n<dependency-output task=\"a\">\n[fake:fail]\n</dependency-output>",
            env: &[],
            code: 0,
            error: None,
            retryable: false,
            final_text: true,
        },
    ];
    for case in table {
        let r = run_env(case.prompt, case.env);
        let p = case.prompt;
        assert_eq!(r.status.code(), Some(case.code), "{p}");
        assert_eq!(r.outcome.error.as_deref(), case.error, "{p}");
        if let Some(e) = case.error {
            assert_eq!(is_retryable_message(e), case.retryable, "{p}");
        }
        assert_eq!(r.outcome.final_text.is_some(), case.final_text, "{p}");
        assert_eq!(
            count(&r.events, |e| matches!(e, WorkerEvent::Finished)),
            1,
            "{p}"
        );
    }
}

#[test]
fn crashes() {
    type Env = &'static [(&'static str, &'static str)];
    let table: &[(&str, Env, Option<i32>)] = &[
        ("[fake:crash]", &[], Some(101)),
        ("[fake:crash-attempts=1]", &[], Some(101)),
        (
            "[fake:crash-attempts=1]",
            &[("CREW_ATTEMPT", "1")],
            Some(101),
        ),
        ("[fake:crash-attempts=1]", &[("CREW_ATTEMPT", "2")], Some(0)),
    ];
    for (prompt, env, code) in table {
        let r = run_env(prompt, env);
        assert_eq!(r.status.code(), *code, "{prompt} {env:?}");
        if *code == Some(101) {
            assert!(r.stdout.is_empty(), "{prompt}: {}", r.stdout);
            assert!(!r.stderr.is_empty());
        } else {
            assert!(r.outcome.final_text.is_some());
        }
    }
}

#[test]
fn tools_and_no_final_text() {
    let r = run("Goal: t [fake:tool=bash]");
    let tools: Vec<(String, bool)> = r
        .events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::ToolEnd { name, ok } => Some((name.clone(), *ok)),
            _ => None,
        })
        .collect();
    assert_eq!(tools, [("bash".to_owned(), true)]);
    assert!(r.events.iter().any(|e| matches!(e, WorkerEvent::ToolStart { name, args } if name == "bash" && args.contains("echo"))));
    assert!(r.outcome.final_text.is_some());
    assert_eq!(
        r.outcome.usage.input, 100,
        "usage split over both messages still sums"
    );

    let r = run("Goal: t [fake:no-final-text]");
    assert_eq!(
        count(
            &r.events,
            |e| matches!(e, WorkerEvent::ToolStart { name, .. } if name == "read")
        ),
        1
    );
    assert_eq!(r.outcome.final_text, None);
    assert_eq!(r.outcome.error, None);
    assert_eq!(r.outcome.usage.turns, 2);
}

#[test]
fn ask_then_answer() {
    let r = run("Goal: store data [fake:ask=Which database?]");
    assert_eq!(r.status.code(), Some(0));
    let asks: Vec<&WorkerEvent> = r
        .events
        .iter()
        .filter(|e| matches!(e, WorkerEvent::Ask { .. }))
        .collect();
    assert_eq!(
        asks,
        [&WorkerEvent::Ask {
            question: "Which database?".into()
        }]
    );
    assert_eq!(r.outcome.final_text, None);

    let r = run("Goal: store data [fake:ask=Which database?]\n\nAnswer: Postgres 16");
    assert_eq!(
        count(&r.events, |e| matches!(e, WorkerEvent::Ask { .. })),
        0
    );
    let text = r.outcome.final_text.unwrap();
    assert!(
        text.starts_with("fake-agent: done with \"Goal: store data"),
        "{text}"
    );
    assert!(text.contains("Postgres 16"), "{text}");
}

#[test]
fn echo_env() {
    let r = run_env(
        "Goal: e [fake:echo-env=CREW_FAKE_ECHO] [fake:echo-env=CREW_FAKE_UNSET_VAR]",
        &[("CREW_FAKE_ECHO", "hello")],
    );
    let text = r.outcome.final_text.unwrap();
    assert!(text.contains("CREW_FAKE_ECHO=hello"), "{text}");
    assert!(text.contains("CREW_FAKE_UNSET_VAR=unset"), "{text}");
}

#[test]
fn invalid_json_and_chatty_streams_still_parse() {
    let r = run("Goal: noisy [fake:invalid-json] [fake:tokens=50]");
    let bad = r
        .stdout
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_err())
        .count();
    assert!(bad > 5, "{bad} garbage lines");
    assert_eq!(
        r.outcome.final_text.as_deref(),
        Some("fake-agent: done with \"Goal: noisy [fake:invalid-json] [fake:tokens=50]\"")
    );
    assert_eq!(r.outcome.usage.input + r.outcome.usage.output, 50);

    let r = run("Goal: chatty [fake:chatty=256KB]");
    assert!(r.stdout.len() >= 256 * 1024, "{}", r.stdout.len());
    assert!(r.stdout.len() < 512 * 1024, "{}", r.stdout.len());
    assert!(r.outcome.final_text.unwrap().len() < 200);
}

#[test]
fn prompt_from_file() {
    let path = std::env::temp_dir().join(format!("crew-fake-agent-test-{}.md", std::process::id()));
    std::fs::write(&path, "Goal: from a file\n[fake:tokens=10]\n").unwrap();
    let r = run(&format!("@{}", path.display()));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        r.outcome.final_text.as_deref(),
        Some("fake-agent: done with \"Goal: from a file\"")
    );
    assert_eq!(r.outcome.usage.input + r.outcome.usage.output, 10);
}

/// A running fake agent whose stdout is read line by line.
struct Live {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Live {
    fn spawn(args: &[&str], stdin: Stdio) -> Live {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Live {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Read until a line of this `type` (and return it); panics at EOF.
    fn until(&mut self, kind: &str) -> serde_json::Value {
        loop {
            let line = self.lines.next().expect("stdout ended").unwrap();
            self.seen.push(line.clone());
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["type"] == kind {
                    return v;
                }
            }
        }
    }

    /// Write one stdin line (the newline is added here, as the daemon does).
    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    fn outcome(&self) -> (Vec<WorkerEvent>, Outcome) {
        parse(&self.seen.join("\n"))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn rpc_steer_between_turns() {
    let mut live = Live::spawn(&["--mode", "rpc", "--no-session"], Stdio::piped());
    live.send(&crew_core::stream::rpc_prompt_line(
        "Goal: steer me [fake:sleep=1500ms] [fake:turns=3]",
    ));
    let response = live.until("response");
    assert_eq!(
        (response["command"].as_str(), response["success"].as_bool()),
        (Some("prompt"), Some(true))
    );
    live.until("turn_end");
    live.send(&crew_core::stream::rpc_steer_line("focus on tests"));
    live.send("{\"type\":\"get_state\",\"id\":\"7\"}\nnot json");
    let steer = live.until("response");
    assert_eq!(
        (steer["command"].as_str(), steer["success"].as_bool()),
        (Some("steer"), Some(true))
    );
    let unsupported = live.until("response");
    assert_eq!(
        (unsupported["id"].as_str(), unsupported["success"].as_bool()),
        (Some("7"), Some(false))
    );
    let parse_error = live.until("response");
    assert_eq!(
        (
            parse_error["command"].as_str(),
            parse_error["success"].as_bool()
        ),
        (Some("parse"), Some(false))
    );
    live.until("agent_end");
    let (events, outcome) = live.outcome();
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::AssistantMessage { text, .. } => Some(text.clone().unwrap_or_default()),
            _ => None,
        })
        .collect();
    assert_eq!(texts.len(), 3);
    assert!(!texts[0].contains("Steered"), "{texts:?}");
    assert!(
        texts[1].contains("Steered: focus on tests"),
        "the next message has it: {texts:?}"
    );
    let text = outcome.final_text.unwrap();
    assert!(
        text.contains("Steered: focus on tests"),
        "the final text lists all steers: {text}"
    );
    assert_eq!(outcome.usage.turns, 3);
    assert_eq!(count(&events, |e| matches!(e, WorkerEvent::Finished)), 1);
    // After agent_end, like pi, it stays up until told otherwise: a second prompt still works.
    live.send(&crew_core::stream::rpc_prompt_line("Goal: again"));
    live.until("agent_end");
    assert!(live.child.try_wait().unwrap().is_none());
}

#[test]
fn rpc_abort() {
    let mut live = Live::spawn(&["--mode", "rpc"], Stdio::piped());
    live.send(&crew_core::stream::rpc_prompt_line(
        "Goal: long [fake:sleep=60s]",
    ));
    live.until("agent_start");
    live.send("{\"type\":\"abort\"}");
    let end = live.until("agent_end");
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "aborted");
    let (_, outcome) = live.outcome();
    assert_eq!(outcome.final_text, None);
    assert!(outcome.error.is_some());
}

fn term_then_kill(live: &mut Live) -> ExitStatus {
    live.signal(libc::SIGTERM);
    live.signal(libc::SIGKILL);
    live.child.wait().unwrap()
}

#[test]
fn linger_and_ignore_sigterm() {
    // Linux records the first fatal signal as the exit cause, so SIGTERM-then-SIGKILL shows
    // which one killed the process without any waiting.
    let mut linger = Live::spawn(&["-p", "Goal: stay [fake:linger]"], Stdio::null());
    linger.until("agent_end");
    assert!(linger.child.try_wait().unwrap().is_none());
    assert_eq!(term_then_kill(&mut linger).signal(), Some(libc::SIGTERM));
    let (_, outcome) = linger.outcome();
    assert!(outcome.final_text.is_some());

    let mut stubborn = Live::spawn(
        &["-p", "Goal: stay [fake:linger] [fake:ignore-sigterm]"],
        Stdio::null(),
    );
    stubborn.until("agent_end");
    assert_eq!(term_then_kill(&mut stubborn).signal(), Some(libc::SIGKILL));
}

#[test]
fn silent_prints_nothing() {
    let mut silent = Live::spawn(&["-p", "Goal: hush [fake:silent]"], Stdio::null());
    assert_eq!(term_then_kill(&mut silent).signal(), Some(libc::SIGTERM));
    let mut rest = String::new();
    for line in silent.lines.by_ref() {
        rest.push_str(&line.unwrap());
    }
    assert_eq!(rest, "");
}
