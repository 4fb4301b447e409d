//! What the fake agent does with one prompt: read the directives, then play pi's event
//! sequence for them.

use crate::directives::{self, Directives};
use crate::events::{self as ev, Usage};
use crate::out::{self, Emitter};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const FAIL_MESSAGE: &str = "invalid api key (fake)";
pub const MODEL_ERROR_MESSAGE: &str = "429 rate_limit_error: overloaded (fake)";
const ABORT_MESSAGE: &str = "Request was aborted";
const CRASH_EXIT: i32 = 101;
const FAIL_EXIT: i32 = 1;
const ATTEMPT_ENV: &str = "CREW_ATTEMPT";
const CHATTY_CHUNK: usize = 8 * 1024;

/// `[fake:leak]`: made-up secrets of the kinds crew must redact. Tests look for their
/// distinctive parts in everything the daemon keeps.
pub const LEAK_PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\n\
MIIEowIBAAKCAQEAfakeagentleakedkeybodyline1AAAAB3NzaC1yc2EAAAADAQAB\n\
fakeagentleakedkeybodyline2QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIz\n\
fakeagentleakedkeybodyline3==\n\
-----END RSA PRIVATE KEY-----";
pub const LEAK_URL: &str = "https://deploy:fakeagentUrlPassw0rd@git.example.com/team/repo.git";
pub const LEAK_KEY: &str = "sk-ant-api03-fakeagentApiKey0123456789abcdefXYZ";

const DEFAULT_USAGE: Usage = Usage {
    input: 100,
    output: 20,
    cache_read: 10,
    cache_write: 5,
    cost: 0.0003,
};
const USD_PER_TOKEN: f64 = 0.000002;

/// The `--model` the agent was started with.
static MODEL_ARG: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

pub fn set_model_arg(model: Option<String>) {
    let _ = MODEL_ARG.set(model);
}

/// Is `model` (pi's `id[:thinking]`) one of the `[fake:busy-model=…]` models?
fn is_busy(d: &Directives, model: Option<&str>) -> bool {
    let Some(model) = model else { return false };
    let id = model.rsplit_once(':').map_or(model, |(id, _)| id);
    d.busy_models.iter().any(|b| b == model || b == id)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Json,
    Rpc,
}

/// What the process does once a prompt has been played.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// json mode exits 0; rpc mode waits for the next command.
    Done,
    Exit(i32),
    /// Never exit (linger, silent).
    Hang,
}

/// A command from the rpc reader thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Prompt(String),
    Steer(String),
    Abort,
}

struct Aborted;

/// Steers and aborts arriving while a prompt plays (rpc mode); inert in json mode.
pub struct Control {
    rx: Option<Receiver<Command>>,
    pub steers: Vec<String>,
    pub queued: VecDeque<String>,
    /// Cleared just before `agent_end`, so a prompt sent on seeing it is accepted.
    busy: Option<Arc<AtomicBool>>,
}

impl Control {
    pub fn new(rx: Option<Receiver<Command>>, busy: Option<Arc<AtomicBool>>) -> Self {
        Control {
            rx,
            steers: Vec::new(),
            queued: VecDeque::new(),
            busy,
        }
    }

    pub fn set_idle(&self) {
        if let Some(busy) = &self.busy {
            busy.store(false, Ordering::SeqCst);
        }
    }

    /// Block for the next command; `None` once stdin is closed.
    pub fn recv(&mut self) -> Option<Command> {
        let cmd = self.rx.as_ref()?.recv().ok();
        if cmd.is_none() {
            self.rx = None;
        }
        cmd
    }

    fn take(&mut self, cmd: Command) -> Result<(), Aborted> {
        match cmd {
            Command::Steer(m) => self.steers.push(m),
            Command::Prompt(p) => self.queued.push_back(p),
            Command::Abort => return Err(Aborted),
        }
        Ok(())
    }

    /// Sleep for `d`, taking commands as they come.
    fn sleep(&mut self, d: Duration) -> Result<(), Aborted> {
        let deadline = Instant::now() + d;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(rx) = &self.rx else {
                std::thread::sleep(left);
                return Ok(());
            };
            if left.is_zero() {
                return self.poll();
            }
            match rx.recv_timeout(left) {
                Ok(cmd) => self.take(cmd)?,
                Err(RecvTimeoutError::Timeout) => return Ok(()),
                Err(RecvTimeoutError::Disconnected) => self.rx = None,
            }
        }
    }

    /// Take whatever commands are already waiting.
    fn poll(&mut self) -> Result<(), Aborted> {
        while let Some(rx) = &self.rx {
            match rx.try_recv() {
                Ok(cmd) => self.take(cmd)?,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => self.rx = None,
            }
        }
        Ok(())
    }
}

/// One assistant message to play.
enum Step {
    Tool(String),
    Work(u32, u32),
    Final,
    Empty,
    Ask(String),
    Error(&'static str),
}

pub fn run(prompt: &str, mode: Mode, ctl: &mut Control) -> End {
    let mut d = directives::parse(prompt);
    // Candidate k's own sleep (issue 36), so candidates of one prompt finish apart.
    if let Some(k) = candidate_index() {
        if let Some((_, dur)) = d.cand_sleep.iter().find(|(i, _)| *i == k) {
            d.sleep = Some(*dur);
        }
    }
    if d.ignore_sigterm {
        // SAFETY: setting a signal disposition to SIG_IGN has no handler code to run.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    if d.silent {
        return End::Hang;
    }
    if d.leak {
        eprintln!("fake-agent: connecting with {LEAK_URL}\n{LEAK_PEM}");
    }
    let attempt: u32 = std::env::var(ATTEMPT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    let seen = cat_files(&d.cats);
    let visible = directives::visible_text(prompt);
    if crate::verdict::is_resolve(&visible) {
        apply_edits(&d.resolve_edits);
    } else {
        apply_edits(&d.edits);
    }
    if crate::verdict::is_fix(&visible) {
        apply_edits(&d.fix_edits);
    }
    if let Some(k) = candidate_index() {
        let mine: Vec<_> = d
            .cand_edits
            .iter()
            .filter(|(i, _)| *i == k)
            .map(|(_, e)| e.clone())
            .collect();
        apply_edits(&mine);
    }
    if d.crash || d.crash_attempts.is_some_and(|n| attempt <= n) {
        let _ = ctl.sleep(d.sleep.unwrap_or_default());
        eprintln!("fake-agent: simulated crash (attempt {attempt})");
        return End::Exit(CRASH_EXIT);
    }
    let model_error = d.model_error
        || d.fail_attempts.is_some_and(|n| attempt <= n)
        || is_busy(&d, MODEL_ARG.get().and_then(Option::as_deref));
    let steps = plan(&d, model_error);
    let mut player = Player {
        em: Emitter::new(d.invalid_json),
        messages: Vec::new(),
        final_text: final_text(prompt, &d, &seen),
        chatty: d.chatty.unwrap_or(0),
        deltas: d.deltas,
        all_steers: Vec::new(),
    };
    player.start(prompt, mode);
    let usage = run_usage(&d);
    let paid = steps
        .iter()
        .filter(|s| !matches!(s, Step::Error(_)))
        .count();
    let mut shares = usage.split(paid).into_iter();
    let n = u32::try_from(steps.len()).unwrap_or(u32::MAX).max(1);
    let slice = d.sleep.unwrap_or_default() / n;
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            player.em.emit(&ev::simple("turn_start"));
        }
        if sleep_beating(ctl, slice, d.heartbeat)
            .and_then(|()| ctl.poll())
            .is_err()
        {
            ctl.set_idle();
            player.aborted();
            return End::Done;
        }
        let steered = std::mem::take(&mut ctl.steers);
        let share = match step {
            Step::Error(_) => Usage::default(),
            _ => shares.next().unwrap_or_default(),
        };
        player.step(step, &steered, share);
    }
    ctl.set_idle();
    player.em.emit(&ev::agent_end(&player.messages));
    if d.fail {
        End::Exit(FAIL_EXIT)
    } else if d.linger {
        End::Hang
    } else {
        End::Done
    }
}

/// Sleep `d`, printing a line every `beat` meanwhile (`[fake:heartbeat=…]`).
fn sleep_beating(ctl: &mut Control, d: Duration, beat: Option<Duration>) -> Result<(), Aborted> {
    let Some(beat) = beat else {
        return ctl.sleep(d);
    };
    let deadline = Instant::now() + d;
    let mut n: u64 = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        ctl.sleep(left.min(beat))?;
        n += 1;
        out::json(&json!({"type": "fake_heartbeat", "n": n}));
    }
}

fn plan(d: &Directives, model_error: bool) -> Vec<Step> {
    if d.fail || candidate_index().is_some_and(|k| d.cand_fail.contains(&k)) {
        return vec![Step::Error(FAIL_MESSAGE)];
    }
    if model_error {
        return vec![Step::Error(MODEL_ERROR_MESSAGE)];
    }
    if let (Some(q), None) = (&d.ask, &d.answer) {
        let q = if d.leak {
            format!("{q} (I found the key {LEAK_KEY} in .env and the remote {LEAK_URL}; may I use them?)")
        } else {
            q.clone()
        };
        return vec![Step::Ask(q)];
    }
    if d.no_final_text {
        return vec![Step::Tool("read".into()), Step::Empty];
    }
    let turns = d.turns.unwrap_or(1);
    let mut steps: Vec<Step> = d.tools.iter().cloned().map(Step::Tool).collect();
    steps.extend((1..turns).map(|i| Step::Work(i, turns)));
    steps.push(Step::Final);
    steps
}

fn run_usage(d: &Directives) -> Usage {
    match d.tokens {
        Some(t) => {
            let input = t / 10 * 8 + t % 10 * 8 / 10;
            Usage {
                input,
                output: t - input,
                cache_read: 0,
                cache_write: 0,
                cost: t as f64 * USD_PER_TOKEN,
            }
        }
        None => DEFAULT_USAGE,
    }
}

/// The first line of the task (without pi's `Task: ` prefix), cut for quoting.
fn first_line(prompt: &str) -> String {
    let text = prompt.strip_prefix("Task: ").unwrap_or(prompt);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    line.chars().take(200).collect()
}

/// `path: content` (or `path: <missing>`) per `cat` directive, read before any edit.
fn cat_files(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| match std::fs::read_to_string(p) {
            Ok(text) => format!("{p}: {}", text.trim_end().replace('\n', "\\n")),
            Err(_) => format!("{p}: <missing>"),
        })
        .collect()
}

/// The edits, in order; a failure is reported on stderr and the rest still runs, as an agent's
/// failed tool call would not end its turn.
fn apply_edits(edits: &[directives::Edit]) {
    use directives::Edit;
    use std::io::Write;
    for e in edits {
        let r = match e {
            Edit::Write(p, t) => mkparent(p).and_then(|()| std::fs::write(p, t)),
            Edit::Append(p, t) => mkparent(p).and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .and_then(|mut f| f.write_all(t.as_bytes()))
            }),
            Edit::Delete(p) => std::fs::remove_file(p),
        };
        if let Err(err) = r {
            eprintln!("fake-agent: edit {e:?} failed: {err}");
        }
    }
}

fn mkparent(p: &str) -> std::io::Result<()> {
    match std::path::Path::new(p).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir),
        _ => Ok(()),
    }
}

fn final_text(prompt: &str, d: &Directives, seen: &[String]) -> String {
    let mut lines = vec![format!("fake-agent: done with \"{}\"", first_line(prompt))];
    lines.extend(seen.iter().cloned());
    if let Some(answer) = &d.answer {
        lines.push(format!("Answer: {answer}"));
    }
    for name in &d.echo_env {
        // Lossy: a value that is not UTF-8 shows as such instead of as unset.
        let value = std::env::var_os(name)
            .map_or_else(|| "unset".to_owned(), |v| v.to_string_lossy().into_owned());
        lines.push(format!("{name}={value}"));
    }
    if d.leak {
        lines.push(format!("The deploy key:\n{LEAK_PEM}"));
        lines.push(format!("Remote: {LEAK_URL}"));
        lines.push(format!("ANTHROPIC key {LEAK_KEY} works."));
    }
    // crew's fan-out prompt section names a refused block under this heading.
    let repairing = prompt.contains("## Your previous fan-out block was refused");
    let block = match (&d.fanout_repair, &d.fanout) {
        (Some(r), _) if repairing => Some(r),
        (_, f) => f.as_ref(),
    };
    if let Some(path) = block {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| format!("<cannot read {path}: {e}>"));
        lines.push(format!("```json\n{}\n```", text.trim_end()));
    }
    let visible = directives::visible_text(prompt);
    match crate::verdict::answer(
        &visible,
        d.verdict.as_deref(),
        d.verdict_repair.as_deref(),
        d.verdict_needs.as_deref(),
        d.finding.as_deref(),
    ) {
        crate::verdict::Placed::First(v) => lines.insert(0, v),
        crate::verdict::Placed::Last(v) => lines.push(v),
        crate::verdict::Placed::None => {}
    }
    // A selector's choice among candidates (crew's `## The candidates` section, issue 36).
    if let Some(k) = d.choice.filter(|_| visible.contains("## The candidates")) {
        lines.push(format!(
            "```json\n{}\n```",
            serde_json::json!({"verdict": d.choice_verdict.as_deref().unwrap_or("pass"), "choice": k, "reasons": format!("the fake judge chose candidate {k}")})
        ));
    }
    lines.join("\n")
}

/// `k` when this is crew's candidate `k` of a step (task id `_cand-<step>-<k>`).
fn candidate_index() -> Option<u32> {
    let id = std::env::var("CREW_TASK_ID").ok()?;
    let rest = id.strip_prefix("_cand-")?;
    rest.rsplit_once('-')?.1.parse().ok()
}

fn tool_io(name: &str) -> (Value, &'static str) {
    match name {
        "bash" => (json!({"command": "echo fake"}), "fake\n"),
        "read" => (json!({"path": "README.md"}), "# fake file\n"),
        "ask_user" => (
            Value::Null,
            "Question sent to the user; the answer comes with the next prompt.",
        ),
        _ => (json!({}), "ok"),
    }
}

/// What one assistant message holds.
struct Shape {
    text: Option<String>,
    /// Tool name and arguments.
    tool: Option<(String, Value)>,
    stop: &'static str,
    error: Option<&'static str>,
}

struct Player {
    em: Emitter,
    messages: Vec<Value>,
    final_text: String,
    chatty: u64,
    deltas: Option<usize>,
    /// Every steer taken during this prompt: the final answer lists them all.
    all_steers: Vec<String>,
}

impl Player {
    fn start(&mut self, prompt: &str, mode: Mode) {
        if mode == Mode::Json {
            self.em.emit(&ev::session_header());
        }
        self.em.emit(&ev::simple("agent_start"));
        self.em.emit(&ev::simple("turn_start"));
        self.user(prompt);
    }

    fn user(&mut self, text: &str) {
        let user = ev::user_message(text);
        self.em.emit(&ev::message_event("message_start", &user));
        self.em.emit(&ev::message_event("message_end", &user));
        self.messages.push(user);
    }

    fn step(&mut self, step: &Step, steered: &[String], usage: Usage) {
        for s in steered {
            self.user(s);
        }
        self.all_steers.extend(steered.iter().cloned());
        let Shape {
            text,
            tool,
            stop,
            error,
        } = self.shape(step, steered);
        let id = format!("call_{}", self.messages.len());
        let mut content = Vec::new();
        if let Some(t) = &text {
            content.push(ev::text_part(t));
        }
        if let Some((name, args)) = &tool {
            content.push(ev::tool_call_part(&id, name, args));
        }
        let message = ev::assistant_message(content, usage, stop, error);
        let partial = ev::assistant_message(Vec::new(), Usage::default(), "stop", None);
        self.em.emit(&ev::message_event("message_start", &partial));
        let chatty = matches!(step, Step::Final)
            .then_some(self.chatty)
            .unwrap_or(0);
        if let Some(t) = &text {
            self.stream_text(t, chatty);
        }
        if let Some((name, args)) = &tool {
            let index = usize::from(text.is_some());
            self.em.emit(&ev::update(json!({"type": "toolcall_start", "contentIndex": index, "id": id, "toolName": name})));
            self.em.emit(&ev::update(
                json!({"type": "toolcall_end", "contentIndex": index, "toolCall": ev::tool_call_part(&id, name, args)}),
            ));
        }
        self.em.emit(&ev::message_event("message_end", &message));
        let mut results = Vec::new();
        if let Some((name, args)) = &tool {
            let output = tool_io(name).1;
            self.em.emit(&ev::tool_start(&id, name, args));
            self.em.emit(&ev::tool_end(&id, name, output, false));
            let result = ev::tool_result_message(&id, name, output, false);
            self.em.emit(&ev::message_event("message_start", &result));
            self.em.emit(&ev::message_event("message_end", &result));
            results.push(result);
        }
        self.em.emit(&ev::turn_end(&message, &results));
        self.messages.push(message);
        self.messages.extend(results);
    }

    /// The text, tool call and stop of the message for `step`; `steered` are this turn's steers.
    fn shape(&self, step: &Step, steered: &[String]) -> Shape {
        let steer_line = |s: &String| format!("Steered: {s}");
        let with_steers = |head: Option<String>| -> Option<String> {
            let lines: Vec<String> = head
                .into_iter()
                .chain(steered.iter().map(steer_line))
                .collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        };
        let (text, tool, stop, error) = match step {
            Step::Tool(name) => (
                with_steers(None),
                Some((name.clone(), tool_io(name).0)),
                "toolUse",
                None,
            ),
            Step::Work(i, n) => (
                with_steers(Some(format!("fake-agent: working (turn {i}/{n})"))),
                None,
                "toolUse",
                None,
            ),
            Step::Final => {
                let mut lines: Vec<String> = self.final_text.lines().map(str::to_owned).collect();
                // Every steer of this prompt, right after the first line so the quote stays first.
                let at = lines.len().min(1);
                lines.splice(at..at, self.all_steers.iter().map(steer_line));
                (Some(lines.join("\n")), None, "stop", None)
            }
            Step::Empty => (with_steers(None), None, "stop", None),
            Step::Ask(q) => (
                with_steers(None),
                Some(("ask_user".into(), json!({"question": q}))),
                "toolUse",
                None,
            ),
            Step::Error(msg) => (None, None, "error", Some(*msg)),
        };
        Shape {
            text,
            tool,
            stop,
            error,
        }
    }

    /// text_start, deltas (after `chatty` bytes of filler lines), text_end.
    fn stream_text(&mut self, text: &str, chatty: u64) {
        self.em.emit(&ev::update(
            json!({"type": "text_start", "contentIndex": 0}),
        ));
        let mut sent: u64 = 0;
        if chatty > 0 {
            let filler: String = "lorem ipsum dolor sit amet "
                .chars()
                .cycle()
                .take(CHATTY_CHUNK)
                .collect();
            let line =
                ev::update(json!({"type": "text_delta", "contentIndex": 0, "delta": filler}))
                    .to_string();
            while sent < chatty {
                out::raw(&line);
                sent += line.len() as u64 + 1;
            }
        }
        let pieces: Vec<String> = match self.deltas {
            Some(size) => {
                let chars: Vec<char> = text.chars().collect();
                chars.chunks(size).map(|c| c.iter().collect()).collect()
            }
            None => {
                let mid = text
                    .char_indices()
                    .nth(text.chars().count() / 2)
                    .map_or(text.len(), |(i, _)| i);
                let (a, b) = text.split_at(mid);
                vec![a.to_owned(), b.to_owned()]
            }
        };
        for delta in pieces.iter().filter(|d| !d.is_empty()) {
            self.em.emit(&ev::update(
                json!({"type": "text_delta", "contentIndex": 0, "delta": delta}),
            ));
        }
        self.em.emit(&ev::update(
            json!({"type": "text_end", "contentIndex": 0, "content": text}),
        ));
    }

    fn aborted(&mut self) {
        let message =
            ev::assistant_message(Vec::new(), Usage::default(), "aborted", Some(ABORT_MESSAGE));
        self.em.emit(&ev::message_event("message_start", &message));
        self.em.emit(&ev::message_event("message_end", &message));
        self.em.emit(&ev::turn_end(&message, &[]));
        self.messages.push(message);
        self.em.emit(&ev::agent_end(&self.messages));
    }
}

#[cfg(test)]
mod busy_tests {
    use super::*;

    #[test]
    fn busy_models_match_with_or_without_a_thinking_suffix() {
        let d = directives::parse("[fake:busy-model=fake/busy] [fake:busy-model=b]");
        for (model, want) in [
            (Some("fake/busy"), true),
            (Some("fake/busy:high"), true),
            (Some("b"), true),
            (Some("fake/spare"), false),
            (None, false),
        ] {
            assert_eq!(is_busy(&d, model), want, "{model:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_lines() {
        let table = [
            ("Task: Goal: fix it\nStep: a", "Goal: fix it"),
            ("\n\n  Goal: spaced  \n", "Goal: spaced"),
            ("", ""),
        ];
        for (prompt, want) in table {
            assert_eq!(first_line(prompt), want);
        }
    }

    #[test]
    fn token_usage() {
        let d = Directives {
            tokens: Some(5000),
            ..Default::default()
        };
        let u = run_usage(&d);
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (4000, 1000, 0, 0)
        );
        assert!((u.cost - 0.01).abs() < 1e-12);
        let d = Directives {
            tokens: Some(7),
            ..Default::default()
        };
        let u = run_usage(&d);
        assert_eq!(u.input + u.output, 7);
        assert_eq!(run_usage(&Directives::default()), DEFAULT_USAGE);
    }

    #[test]
    fn plans() {
        let kinds = |d: &Directives, err: bool| -> Vec<String> {
            plan(d, err)
                .iter()
                .map(|s| match s {
                    Step::Tool(t) => format!("tool:{t}"),
                    Step::Work(i, n) => format!("work:{i}/{n}"),
                    Step::Final => "final".into(),
                    Step::Empty => "empty".into(),
                    Step::Ask(q) => format!("ask:{q}"),
                    Step::Error(m) => format!("error:{m}"),
                })
                .collect()
        };
        let base = Directives::default();
        assert_eq!(kinds(&base, false), ["final"]);
        assert_eq!(kinds(&base, true), [format!("error:{MODEL_ERROR_MESSAGE}")]);
        let d = Directives {
            turns: Some(3),
            tools: vec!["bash".into()],
            ..Default::default()
        };
        assert_eq!(
            kinds(&d, false),
            ["tool:bash", "work:1/3", "work:2/3", "final"]
        );
        let d = Directives {
            ask: Some("Q?".into()),
            ..Default::default()
        };
        assert_eq!(kinds(&d, false), ["ask:Q?"]);
        let d = Directives {
            ask: Some("Q?".into()),
            answer: Some("A".into()),
            ..Default::default()
        };
        assert_eq!(kinds(&d, false), ["final"]);
        let d = Directives {
            no_final_text: true,
            ..Default::default()
        };
        assert_eq!(kinds(&d, false), ["tool:read", "empty"]);
        let d = Directives {
            fail: true,
            model_error: true,
            ..Default::default()
        };
        assert_eq!(kinds(&d, true), [format!("error:{FAIL_MESSAGE}")]);
    }
}
