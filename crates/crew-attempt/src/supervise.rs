//! The third phase: watch the worker until it is gone. A [`Supervisor`] holds the attempt's
//! state in groups (the stdout it has read, its stderr, the clock's marks in [`Deadlines`], a
//! [`Stopping`] state machine); `next_wake` waits for one [`Wake`] (a stdout line, stdout's
//! end, stderr bytes, the exit, a message from the owner, or the next deadline) and each has
//! one handler. When something must happen without input (progress notes, the final drain,
//! the no-output watchdog, the timeout, SIGKILL after the grace) is decided by pure functions
//! over a [`Watch`]: `next_deadline` and `stop_due`, table-tested below.

use crate::command::WorkerSpec;
use crate::live::{send_lines, send_replies};
use crate::outcome::{Collected, Failure};
use crate::port::{AttemptKey, Port, WorkerCtl};
use crate::process::GroupGuard;
use crate::spawn::Spawned;
use crate::stderr::{self, StderrTail};
use crate::stdout::{drain_ready_lines, Stdout, Transcript, Warnings};
use crate::{artifacts, blocking, fault, human, lines};
use crew_core::run::{ArtifactRef, FailReason};
use crew_core::stream::{self, AdapterKind, LaunchSpec};
use futures::FutureExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::time::Instant;

const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// After the worker exits, how long stdout may stay silent before it counts as done.
const EXIT_QUIET: Duration = Duration::from_millis(500);
/// A timer this late means the daemon itself did not run (SIGSTOP, a frozen cgroup, a starved
/// machine): what the worker did meanwhile could not be seen, so its silence is not judged.
const PAUSE_SLACK: Duration = Duration::from_secs(1);
/// After SIGKILL, when to send it again if the worker is still not reaped.
const KILL_AGAIN: Duration = Duration::from_secs(3600);

/// Why crew sent SIGTERM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    /// For a reason of its own: the attempt fails with it.
    Stopped(Failure),
    /// The worker had answered and lingered past the final drain.
    Drained,
}

/// Whether crew is stopping the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stopping {
    Running,
    TermSent { at: Instant, why: Why },
    Killed { at: Instant, why: Why },
}

impl Stopping {
    /// From when the grace before (another) SIGKILL counts.
    fn grace_from(&self) -> Option<Instant> {
        match self {
            Stopping::Running => None,
            Stopping::TermSent { at, .. } => Some(*at),
            Stopping::Killed { at, .. } => Some(*at + KILL_AGAIN),
        }
    }

    fn why(self) -> Option<Why> {
        match self {
            Stopping::Running => None,
            Stopping::TermSent { why, .. } | Stopping::Killed { why, .. } => Some(why),
        }
    }
}

/// The supervisor's own marks on the clock.
pub(crate) struct Deadlines {
    /// When the task's overall time is up.
    task: Instant,
    /// When the daemon last came back from not running (see `PAUSE_SLACK`): silence before it
    /// was not watched, so the no-output watchdog counts from here at the earliest.
    resumed_at: Instant,
    last_progress: Instant,
    last_stderr: Instant,
    /// When the worker exited.
    exited_at: Option<Instant>,
}

/// The limits as durations.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    no_output: Duration,
    task_timeout: Duration,
    quiet: Duration,
    drain_max: Duration,
    grace: Duration,
}

/// Everything the timing rules read, at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    last_stdout: Instant,
    last_stderr: Instant,
    resumed_at: Instant,
    task_deadline: Instant,
    final_at: Option<Instant>,
    rpc_done: bool,
    unacked_since: Option<Instant>,
    progress_dirty: bool,
    last_progress: Instant,
    exited_at: Option<Instant>,
    grace_from: Option<Instant>,
}

impl Watch {
    fn last_output(&self) -> Instant {
        self.last_stdout.max(self.last_stderr)
    }

    fn watched_silence_from(&self) -> Instant {
        self.last_output().max(self.resumed_at)
    }
}

/// When crew stops a worker that has not exited, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// It ignored SIGTERM for the grace time.
    Kill,
    /// It answered and lingered past the final drain.
    Drain,
    Timeout,
    NoOutput,
}

/// When a worker that gave its final answer at `final_at` is stopped: after a quiet moment, at
/// the latest after the final-drain time. An rpc worker whose stdin crew closed after
/// `agent_end` is exiting by itself (pi takes a second or two to shut down on a busy machine):
/// quiet does not count, only the final-drain time.
pub(crate) fn drain_at(
    rpc_done: bool,
    final_at: Instant,
    last_output: Instant,
    quiet: Duration,
    drain_max: Duration,
) -> Instant {
    if rpc_done {
        final_at + drain_max
    } else {
        (last_output + quiet)
            .max(final_at)
            .min(final_at + drain_max)
    }
}

/// After the worker exited, stdout stays open only while something it started holds it: stop
/// reading after a quiet moment, and at the latest after the final-drain time.
pub(crate) fn stdout_cutoff(exited: Instant, last_stdout: Instant, drain_max: Duration) -> Instant {
    (exited.max(last_stdout) + EXIT_QUIET).min(exited + drain_max.max(EXIT_QUIET))
}

/// Pure: the next instant something must happen without input. Once the worker was told to
/// stop, only the grace counts: the watchdog, timeout and drain instants are past and would
/// wake the loop over and over.
pub(crate) fn next_deadline(w: &Watch, r: &Rules) -> Instant {
    let mut deadline = match w.grace_from {
        Some(t) => t + r.grace,
        None => {
            let mut d = (w.watched_silence_from() + r.no_output).min(w.task_deadline);
            if let Some(f) = w.final_at {
                d = d.min(drain_at(
                    w.rpc_done,
                    f,
                    w.last_output(),
                    r.quiet,
                    r.drain_max,
                ));
            }
            if let Some(t) = w.unacked_since {
                d = d.min(t + r.drain_max);
            }
            d
        }
    };
    if w.progress_dirty {
        deadline = deadline.min(w.last_progress + PROGRESS_EVERY);
    }
    if let Some(e) = w.exited_at {
        deadline = deadline.min(stdout_cutoff(e, w.last_stdout, r.drain_max));
    }
    deadline
}

/// Pure: whether a worker that has not exited must be signalled at `now`, and why. A worker
/// being stopped only waits for its grace; one that answered only for its drain; the timeout
/// goes before the watchdog.
pub(crate) fn stop_due(w: &Watch, r: &Rules, now: Instant) -> Option<Action> {
    if let Some(t) = w.grace_from {
        return (now >= t + r.grace).then_some(Action::Kill);
    }
    if let Some(f) = w.final_at {
        let due = now >= drain_at(w.rpc_done, f, w.last_output(), r.quiet, r.drain_max);
        return due.then_some(Action::Drain);
    }
    if now >= w.task_deadline {
        return Some(Action::Timeout);
    }
    (now >= w.watched_silence_from() + r.no_output).then_some(Action::NoOutput)
}

/// One reason the supervisor woke up.
enum Wake {
    Line(String),
    StdoutEnd,
    /// This many bytes of stderr are in `stderr_chunk` (0 or an error: stderr ended).
    Stderr(std::io::Result<usize>),
    Exited(std::io::Result<ExitStatus>),
    Ctl(Option<WorkerCtl>),
    /// The deadline this wake-up was for.
    Tick(Instant),
}

struct Supervisor<'a> {
    port: &'a Arc<dyn Port>,
    key: AttemptKey,
    rules: Rules,
    pid: u32,
    child: Child,
    group: GroupGuard,
    stdin: Option<ChildStdin>,
    lines: lines::LineReader<BufReader<ChildStdout>>,
    stdout_open: bool,
    out: Stdout,
    stderr: Option<ChildStderr>,
    stderr_chunk: Vec<u8>,
    stderr_tail: StderrTail,
    ctl: &'a mut mpsc::UnboundedReceiver<WorkerCtl>,
    ctl_open: bool,
    exit: Option<ExitStatus>,
    deadlines: Deadlines,
    stopping: Stopping,
}

/// Supervise a spawned worker to its end: its files written (transcript, stderr log, added to
/// `artifacts`), what it said collected for `outcome::classify`.
pub(crate) async fn supervise(
    spec: &WorkerSpec,
    launch: &LaunchSpec,
    spawned: Spawned,
    port: &Arc<dyn Port>,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
    artifacts: &mut Vec<ArtifactRef>,
) -> Result<Collected, Failure> {
    let Spawned {
        mut child,
        group,
        pid,
        ..
    } = spawned;
    let limits = &spec.limits;
    let rules = Rules {
        no_output: limits.no_output(),
        task_timeout: limits.task_timeout(),
        quiet: limits.quiet(),
        drain_max: limits.drain_max(),
        grace: limits.grace(),
    };
    let asked = spec.resumed.then(|| {
        let (dir, task, n) = (&spec.run_dir, &spec.key.task_id, spec.key.attempt);
        blocking(|| asked_stream(dir, task, n, spec.adapter, launch.rpc)).unwrap_or_default()
    });
    let mut parser = stream::attempt_parser(spec.adapter, launch, asked.as_deref());
    let mut stdin = child.stdin.take();
    // Messages written and not yet acknowledged, for an adapter that acknowledges them.
    let mut pending_inputs = stream::live_input_is_acknowledged(spec.adapter).then_some(0u32);
    if let Some(w) = stdin.as_mut() {
        let lines = parser.live_start(&spec.prompt);
        // Bounded: a worker that does not read its stdin would otherwise hold the attempt here,
        // before any watchdog runs.
        match send_lines(w, &lines, rules.no_output).await {
            Ok(()) => {
                if let Some(n) = pending_inputs.as_mut() {
                    *n = n.saturating_add(1);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot send the prompt to the live worker"),
        }
    }
    let Some(stdout) = child.stdout.take() else {
        return Err(Failure::new(
            "worker stdout unavailable".into(),
            true,
            FailReason::Spawn,
        ));
    };
    let stderr = child.stderr.take();
    let lines = lines::LineReader::new(BufReader::with_capacity(64 << 10, stdout));
    let transcript_name = transcript_name(&spec.key.task_id, spec.key.attempt);
    let (transcript, opened) = Transcript::create(&spec.run_dir.join(&transcript_name));
    let out = Stdout {
        redactor: Default::default(),
        redacted: Vec::new(),
        parser,
        transcript,
        any: false,
        last: Instant::now(),
        question: None,
        current_tool: None,
        progress_dirty: false,
        final_at: None,
        rpc: spec.rpc,
        rpc_done: false,
        pending_inputs,
        unacked_since: None,
        ask_ends_turn: spec.adapter == AdapterKind::Pi,
        warnings: Warnings {
            port: port.clone(),
            key: spec.key.clone(),
            sent: 0,
        },
    };
    let start = Instant::now();
    let sup = Supervisor {
        port,
        key: spec.key.clone(),
        rules,
        pid,
        child,
        group,
        stdin,
        lines,
        stdout_open: true,
        out,
        stderr,
        stderr_chunk: vec![0u8; 8192],
        stderr_tail: StderrTail::default(),
        ctl,
        ctl_open: true,
        exit: None,
        deadlines: Deadlines {
            task: start + rules.task_timeout,
            resumed_at: Instant::now(),
            last_progress: Instant::now() - PROGRESS_EVERY,
            last_stderr: Instant::now(),
            exited_at: None,
        },
        stopping: Stopping::Running,
    };
    let ended = sup.run().await;
    Ok(keep_files(spec, ended, &transcript_name, opened, artifacts))
}

/// The transcript's name in the run directory.
fn transcript_name(task_id: &str, attempt: u32) -> String {
    format!("transcripts/{task_id}.attempt-{attempt}.jsonl")
}

/// The stream an attempt that continues a session (an answer's) counts its usage from: the
/// newest earlier attempt's transcript that reported usage. Usually the one just before (the
/// attempt that asked); after a crash or a start that could not be journaled, the attempt in
/// between may have none (codex reports the whole thread's totals, so the baseline must be
/// the last totals it reported). Looks back at most 16 attempts.
pub fn asked_stream(
    run_dir: &std::path::Path,
    task_id: &str,
    attempt: u32,
    adapter: crew_core::stream::AdapterKind,
    rpc: bool,
) -> Option<String> {
    let first = attempt.saturating_sub(16).max(1);
    (first..attempt).rev().find_map(|n| {
        let bytes = std::fs::read(run_dir.join(transcript_name(task_id, n))).ok()?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let reported = stream::transcript_usage(adapter, rpc, &text, None)
            != crew_core::usage::Usage::default();
        reported.then_some(text)
    })
}

/// What the loop leaves once the worker and its group are gone.
struct Ended {
    out: Stdout,
    stderr_tail: StderrTail,
    exit: Option<ExitStatus>,
    why: Option<Why>,
    /// stdout lines longer than `lines::MAX_LINE`, cut.
    cut_lines: u64,
}

/// The transcript and the stderr log named in `artifacts`, and what was collected.
fn keep_files(
    spec: &WorkerSpec,
    ended: Ended,
    transcript_name: &str,
    opened: bool,
    artifacts: &mut Vec<ArtifactRef>,
) -> Collected {
    let Ended {
        out,
        stderr_tail,
        exit,
        why,
        cut_lines,
    } = ended;
    let Stdout {
        parser,
        mut transcript,
        any: any_stdout,
        question,
        ..
    } = out;
    let run_dir = &spec.run_dir;
    let described = blocking(|| {
        if let Err(e) = transcript.finish() {
            tracing::warn!(error = %e, "the transcript could not be completed");
        }
        match transcript.artifact(transcript_name.to_string()) {
            Some(a) => Ok(a),
            None if opened => artifacts::describe(run_dir, transcript_name, "transcript"),
            None => Err(std::io::Error::other("no transcript was created")),
        }
    });
    if let Ok(a) = described {
        artifacts.push(a);
    }
    match blocking(|| {
        stderr_tail
            .log
            .save(run_dir, &spec.key.task_id, spec.key.attempt)
    }) {
        Ok(Some(a)) => artifacts.push(a),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "cannot keep the worker's stderr"),
    }
    let (stopped, drained) = match why {
        Some(Why::Stopped(f)) => (Some(f), false),
        Some(Why::Drained) => (None, true),
        None => (None, false),
    };
    Collected {
        stopped,
        question,
        exit,
        drained,
        any_stdout,
        outcome: parser.outcome(),
        stderr_tail: stderr_tail.text,
        edits_files: stream::edits_files(&spec.tools),
        session_file: None,
        cut_lines,
    }
}

impl Supervisor<'_> {
    async fn run(mut self) -> Ended {
        loop {
            if self.exit.is_some() && !self.stdout_open {
                break;
            }
            self.close_stdin_when_done();
            let deadline = next_deadline(&self.watch(), &self.rules);
            match self.next_wake(deadline).await {
                Wake::Line(line) => self.on_line(&line).await,
                Wake::StdoutEnd => self.stdout_ended(),
                Wake::Stderr(read) => self.on_stderr(read),
                Wake::Exited(status) => self.on_exit(status),
                Wake::Ctl(msg) => self.on_ctl(msg).await,
                Wake::Tick(deadline) => self.on_tick(deadline).await,
            }
        }
        self.finish().await
    }

    fn watch(&self) -> Watch {
        Watch {
            last_stdout: self.out.last,
            last_stderr: self.deadlines.last_stderr,
            resumed_at: self.deadlines.resumed_at,
            task_deadline: self.deadlines.task,
            final_at: self.out.final_at,
            rpc_done: self.out.rpc_done,
            unacked_since: self.out.unacked_since,
            progress_dirty: self.out.progress_dirty,
            last_progress: self.deadlines.last_progress,
            exited_at: self.deadlines.exited_at,
            grace_from: self.stopping.grace_from(),
        }
    }

    /// A live worker (pi in rpc mode, Claude Code on stream-json input) waits for its next
    /// message after its final answer and exits when its stdin ends: closing it ends the
    /// worker now, not after the final drain's quiet time and a SIGTERM.
    fn close_stdin_when_done(&mut self) {
        if self.out.rpc_done && self.stdin.take().is_some() {
            // A steer from now on would be written nowhere: the owner queues it instead. Told
            // before the log line, which tests wait on.
            self.port.answered(&self.key);
            tracing::info!(
                pid = self.pid,
                "rpc worker finished; its stdin is closed so it exits"
            );
        }
    }

    async fn next_wake(&mut self, deadline: Instant) -> Wake {
        // A deadline already past when the wait begins (the progress flush after a first line
        // that came late) is due now: how late the tick is counts from here, so only a loop
        // that was not polled reads as a pause of the daemon.
        let deadline = deadline.max(Instant::now());
        let stderr = &mut self.stderr;
        let chunk = &mut self.stderr_chunk;
        tokio::select! {
            line = self.lines.next_line(), if self.stdout_open => match line {
                Ok(Some(line)) => Wake::Line(line),
                Ok(None) | Err(_) => Wake::StdoutEnd,
            },
            n = async { match stderr.as_mut() { Some(s) => s.read(chunk).await, None => std::future::pending().await } } => Wake::Stderr(n),
            status = self.child.wait(), if self.exit.is_none() => Wake::Exited(status),
            msg = self.ctl.recv(), if self.ctl_open => Wake::Ctl(msg),
            _ = tokio::time::sleep_until(deadline) => Wake::Tick(deadline),
        }
    }

    async fn on_line(&mut self, line: &str) {
        self.out.line(line);
        send_replies(self.stdin.as_mut(), &mut self.out, self.rules.no_output).await;
        if let Err(e) = fault::hit("supervise") {
            tracing::debug!(error = %e, "fault point `supervise` only panics");
        }
    }

    fn on_stderr(&mut self, read: std::io::Result<usize>) {
        match read {
            Ok(0) | Err(_) => self.stderr = None,
            Ok(n) => {
                self.deadlines.last_stderr = Instant::now();
                self.stderr_tail
                    .push(self.stderr_chunk.get(..n).unwrap_or_default());
            }
        }
    }

    fn on_exit(&mut self, status: std::io::Result<ExitStatus>) {
        self.exit = status.ok();
        self.deadlines.exited_at = Some(Instant::now());
    }

    async fn on_ctl(&mut self, msg: Option<WorkerCtl>) {
        match msg {
            Some(WorkerCtl::Stop { reason }) => {
                if self.stopping == Stopping::Running {
                    tracing::info!(%reason, "stopping worker");
                    let why = Why::Stopped(Failure::new(reason, false, FailReason::Cancelled));
                    self.term(Instant::now(), why);
                }
            }
            Some(WorkerCtl::Steer(m)) => self.steer(&m).await,
            // The owner dropped the handle: right after a Stop (the task is no longer this
            // worker's), or because the daemon is going away. Either way the loop must go on
            // (grace, SIGKILL, reaping); only this source is done.
            None => self.ctl_open = false,
        }
    }

    async fn steer(&mut self, m: &str) {
        let Some(w) = self.stdin.as_mut() else {
            tracing::info!("the worker has already answered; steer not delivered");
            return;
        };
        let lines = self.out.parser.live_steer(m);
        // Bounded for the same reason as the prompt: the loop must keep watching.
        match send_lines(w, &lines, self.rules.no_output).await {
            Ok(()) => {
                if let Some(n) = self.out.pending_inputs.as_mut() {
                    *n = n.saturating_add(1);
                }
                tracing::info!(chars = m.chars().count(), "steer written to the worker")
            }
            Err(e) => {
                tracing::warn!(error = %e, "steer could not be written to the worker; dropped")
            }
        }
    }

    fn term(&mut self, at: Instant, why: Why) {
        self.group.terminate();
        self.stopping = Stopping::TermSent { at, why };
    }

    async fn on_tick(&mut self, deadline: Instant) {
        let now = Instant::now();
        self.take_ready(now).await;
        if now.saturating_duration_since(deadline) > PAUSE_SLACK {
            tracing::info!(
                late_ms = now.saturating_duration_since(deadline).as_millis() as u64,
                "the daemon did not run for a while; the worker's silence counts from now"
            );
            self.deadlines.resumed_at = now;
        }
        if let (Some(e), true) = (self.deadlines.exited_at, self.stdout_open) {
            if Instant::now() >= stdout_cutoff(e, self.out.last, self.rules.drain_max) {
                self.stdout_open = false;
            }
        }
        if self
            .out
            .unacked_since
            .is_some_and(|t| now >= t + self.rules.drain_max)
        {
            tracing::warn!(
                pending = self.out.pending_inputs.unwrap_or(0),
                "the live worker did not take the messages written to it after its last answer; that answer stands"
            );
            self.out.unacked_since = None;
            self.out.pending_inputs = Some(0);
            self.out.rpc_done = true;
            // From now: the worker gets the drain time to exit once its stdin is closed.
            self.out.final_at = Some(now);
        }
        if self.out.progress_dirty && now >= self.deadlines.last_progress + PROGRESS_EVERY {
            self.out.progress_dirty = false;
            self.deadlines.last_progress = now;
            self.port.progress(
                &self.key,
                self.out.parser.usage(),
                self.out.current_tool.clone(),
            );
            // On disk as far as the progress goes: if the daemon dies now, recovery counts
            // this attempt's usage from its transcript.
            self.out.transcript.flush();
        }
        if self.exit.is_none() {
            if let Some(action) = stop_due(&self.watch(), &self.rules, now) {
                self.act(action, now);
            }
        }
    }

    fn stdout_ended(&mut self) {
        self.stdout_open = false;
        self.out.end();
        self.answered_at_eof();
    }

    /// stdout ended while the worker still runs: a worker whose answer is complete (an adapter
    /// whose answer is all of stdout, `command`, knows it only now) has nothing more to say,
    /// and what lingers is stopped after the final drain instead of the no-output watchdog
    /// failing (and retrying, and paying for) an attempt that answered.
    fn answered_at_eof(&mut self) {
        if self.exit.is_some() || self.out.final_at.is_some() || self.out.question.is_some() {
            return;
        }
        let outcome = self.out.parser.outcome();
        if outcome.final_text.is_some() && outcome.error.is_none() {
            // A worker already told to stop is stopped on that account, not the drain's.
            if matches!(self.stopping, Stopping::Running) {
                tracing::info!("the worker closed stdout after its answer; what lingers is stopped after the final drain");
            }
            self.out.final_at = Some(Instant::now());
        }
    }

    /// Read what is pending before judging silence: a loop that was not polled for a while
    /// (the daemon stopped, a busy machine) wakes up with its timer and its pipes ready at
    /// once, and the timer may be polled first.
    async fn take_ready(&mut self, now: Instant) {
        if self.stdout_open && !drain_ready_lines(&mut self.lines, &mut self.out) {
            self.stdout_ended();
        }
        send_replies(self.stdin.as_mut(), &mut self.out, self.rules.no_output).await;
        if let Some(s) = self.stderr.as_mut() {
            loop {
                match s.read(&mut self.stderr_chunk).now_or_never() {
                    Some(Ok(0)) | Some(Err(_)) => {
                        self.stderr = None;
                        break;
                    }
                    Some(Ok(n)) => {
                        self.deadlines.last_stderr = now;
                        self.stderr_tail
                            .push(self.stderr_chunk.get(..n).unwrap_or_default());
                    }
                    None => break,
                }
            }
        }
    }

    fn act(&mut self, action: Action, now: Instant) {
        let stopped =
            |error: String, retryable, reason| Why::Stopped(Failure::new(error, retryable, reason));
        match action {
            Action::Kill => {
                tracing::warn!(pid = self.pid, "worker ignored SIGTERM; sending SIGKILL");
                self.group.kill();
                let why = std::mem::replace(&mut self.stopping, Stopping::Running)
                    .why()
                    .unwrap_or(Why::Drained);
                self.stopping = Stopping::Killed { at: now, why };
            }
            Action::Drain => {
                tracing::info!(
                    pid = self.pid,
                    "the worker answered and lingers; sending SIGTERM"
                );
                self.term(now, Why::Drained)
            }
            Action::Timeout => {
                let error = format!(
                    "the task timed out after {}",
                    human(self.rules.task_timeout)
                );
                tracing::info!(pid = self.pid, "{error}; sending SIGTERM");
                self.term(now, stopped(error, false, FailReason::Timeout));
            }
            Action::NoOutput => {
                let error = format!("no output for {}", human(self.rules.no_output));
                tracing::info!(pid = self.pid, "{error}; sending SIGTERM");
                self.term(now, stopped(error, true, FailReason::NoOutput));
            }
        }
    }

    /// The worker is gone (and stdout ended): take the last of stderr, kill what is left of
    /// the group.
    async fn finish(mut self) -> Ended {
        let drained = matches!(
            self.stopping,
            Stopping::TermSent {
                why: Why::Drained,
                ..
            } | Stopping::Killed {
                why: Why::Drained,
                ..
            }
        );
        // Whether crew had to stop a worker that had answered (`drained`) or it ended by itself.
        tracing::info!(
            pid = self.pid,
            code = self.exit.and_then(|s| s.code()),
            drained,
            "worker ended"
        );
        // Deltas the redactor still holds (stdout not ended: a worker killed mid-answer).
        self.out.end();
        // What the worker wrote to stderr just before it exited may not be read yet (the loop
        // ends on exit and stdout's end): take it, briefly, for the error message.
        if let Some(s) = self.stderr.as_mut() {
            let chunk = &mut self.stderr_chunk;
            let tail = &mut self.stderr_tail;
            let _ = tokio::time::timeout(EXIT_QUIET, async {
                while let Ok(n @ 1..) = s.read(chunk).await {
                    tail.push(chunk.get(..n).unwrap_or_default());
                }
            })
            .await;
        }
        // Whatever is left in the group (tools the agent started) goes too.
        drop(self.group);
        drop(self.stdin);
        let rest = stderr::drain(&mut self.stderr).await;
        self.stderr_tail.push(&rest);
        Ended {
            out: self.out,
            // The last line too: the log keeps what the tail has redacted.
            stderr_tail: self.stderr_tail.finish(),
            exit: self.exit,
            why: self.stopping.why(),
            cut_lines: self.lines.cut_lines(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// no_output 10s, timeout 100s, quiet 0.5s, drain 5s, grace 2s.
    fn rules() -> Rules {
        Rules {
            no_output: MS(10_000),
            task_timeout: MS(100_000),
            quiet: MS(500),
            drain_max: MS(5_000),
            grace: MS(2_000),
        }
    }

    /// A worker started at `t0` that has said nothing since.
    fn quiet_watch(t0: Instant) -> Watch {
        Watch {
            last_stdout: t0,
            last_stderr: t0,
            resumed_at: t0,
            task_deadline: t0 + rules().task_timeout,
            final_at: None,
            rpc_done: false,
            unacked_since: None,
            progress_dirty: false,
            last_progress: t0,
            exited_at: None,
            grace_from: None,
        }
    }

    #[test]
    fn the_drain_waits_for_quiet_within_its_bound() {
        let t0 = Instant::now();
        let (quiet, max) = (MS(500), MS(5_000));
        // (rpc_done, final at, last output at, stopped at), in ms from t0.
        for (rpc_done, f, last, want) in [
            (false, 1_000, 1_000, 1_500),
            (false, 1_000, 0, 1_000),
            (false, 1_000, 3_000, 3_500),
            (false, 1_000, 9_000, 6_000),
            (true, 1_000, 1_000, 6_000),
            (true, 1_000, 0, 6_000),
        ] {
            let got = drain_at(rpc_done, t0 + MS(f), t0 + MS(last), quiet, max);
            assert_eq!(
                got,
                t0 + MS(want),
                "rpc_done {rpc_done}, final {f}, last {last}"
            );
        }
    }

    #[test]
    fn stdout_is_cut_after_a_quiet_moment_past_the_exit() {
        let t0 = Instant::now();
        // (exited at, last stdout at, drain max, cut at), in ms.
        for (e, last, max, want) in [
            (1_000, 0, 5_000, 1_500),
            (1_000, 2_000, 5_000, 2_500),
            (1_000, 9_000, 5_000, 6_000),
            // A drain shorter than the quiet moment still gets the quiet moment.
            (1_000, 1_200, 100, 1_500),
        ] {
            assert_eq!(
                stdout_cutoff(t0 + MS(e), t0 + MS(last), MS(max)),
                t0 + MS(want),
                "exit {e}, last {last}, max {max}"
            );
        }
    }

    #[test]
    fn the_next_deadline() {
        let t0 = Instant::now();
        let r = rules();
        let at = |ms| t0 + MS(ms);
        let w = quiet_watch(t0);
        let cases: Vec<(&str, Watch, Instant)> = vec![
            ("silent: the watchdog", w, at(10_000)),
            (
                "output moves the watchdog",
                Watch {
                    last_stderr: at(4_000),
                    ..w
                },
                at(14_000),
            ),
            (
                "a pause moves it too",
                Watch {
                    resumed_at: at(7_000),
                    ..w
                },
                at(17_000),
            ),
            (
                "the timeout when it comes first",
                Watch {
                    last_stdout: at(95_000),
                    ..w
                },
                at(100_000),
            ),
            (
                "an answer: its drain",
                Watch {
                    final_at: Some(at(1_000)),
                    last_stdout: at(1_000),
                    ..w
                },
                at(1_500),
            ),
            (
                "live messages not taken: the drain bound",
                Watch {
                    unacked_since: Some(at(2_000)),
                    ..w
                },
                at(7_000),
            ),
            (
                "progress to report",
                Watch {
                    progress_dirty: true,
                    last_progress: at(100),
                    ..w
                },
                at(350),
            ),
            (
                "the exit: stdout's cut-off",
                Watch {
                    exited_at: Some(at(3_000)),
                    ..w
                },
                at(3_500),
            ),
            (
                "stopping: only the grace counts",
                Watch {
                    grace_from: Some(at(20_000)),
                    final_at: Some(at(1_000)),
                    ..w
                },
                at(22_000),
            ),
            (
                "stopping, but the exit's cut-off is sooner",
                Watch {
                    grace_from: Some(at(20_000)),
                    exited_at: Some(at(20_100)),
                    last_stdout: at(20_000),
                    ..w
                },
                at(20_600),
            ),
        ];
        for (name, w, want) in cases {
            assert_eq!(next_deadline(&w, &r), want, "{name}");
        }
    }

    #[test]
    fn when_a_running_worker_is_stopped() {
        let t0 = Instant::now();
        let r = rules();
        let at = |ms| t0 + MS(ms);
        let w = quiet_watch(t0);
        let cases: Vec<(&str, Watch, u64, Option<Action>)> = vec![
            ("nothing due yet", w, 9_999, None),
            ("no output", w, 10_000, Some(Action::NoOutput)),
            (
                "the timeout goes before the watchdog",
                Watch {
                    task_deadline: at(10_000),
                    ..w
                },
                10_000,
                Some(Action::Timeout),
            ),
            (
                "a pause restarts the watch",
                Watch {
                    resumed_at: at(5_000),
                    ..w
                },
                10_000,
                None,
            ),
            (
                "an answer waits for its drain, not the watchdog",
                Watch {
                    final_at: Some(at(9_000)),
                    rpc_done: true,
                    ..w
                },
                10_000,
                None,
            ),
            (
                "…and is drained after it",
                Watch {
                    final_at: Some(at(9_000)),
                    rpc_done: true,
                    ..w
                },
                14_000,
                Some(Action::Drain),
            ),
            (
                "drained at its bound",
                Watch {
                    final_at: Some(at(1_000)),
                    last_stdout: at(1_000),
                    ..w
                },
                1_500,
                Some(Action::Drain),
            ),
            (
                "even past the timeout, an answered worker is drained",
                Watch {
                    final_at: Some(at(1_000)),
                    task_deadline: at(1_200),
                    ..w
                },
                1_500,
                Some(Action::Drain),
            ),
            (
                "SIGTERM sent: the grace, nothing else",
                Watch {
                    grace_from: Some(at(3_000)),
                    ..w
                },
                50_000,
                Some(Action::Kill),
            ),
            (
                "within the grace",
                Watch {
                    grace_from: Some(at(3_000)),
                    ..w
                },
                4_999,
                None,
            ),
        ];
        for (name, w, now, want) in cases {
            assert_eq!(stop_due(&w, &r, at(now)), want, "{name}");
        }
    }

    #[test]
    fn the_stopping_machine_keeps_why() {
        let t0 = Instant::now();
        let why = Why::Stopped(Failure::new("x".into(), false, FailReason::Cancelled));
        assert_eq!(Stopping::Running.grace_from(), None);
        let term = Stopping::TermSent {
            at: t0,
            why: why.clone(),
        };
        assert_eq!(term.grace_from(), Some(t0));
        let killed = Stopping::Killed {
            at: t0,
            why: why.clone(),
        };
        assert_eq!(killed.grace_from(), Some(t0 + KILL_AGAIN));
        assert_eq!(killed.why(), Some(why));
        assert_eq!(Stopping::Running.why(), None);
    }
}

#[cfg(test)]
mod asked_tests {
    use super::asked_stream;
    use crew_core::stream::AdapterKind;

    /// The attempt that continues an answer counts from the newest earlier transcript that
    /// reported usage: past an attempt that never ran (no transcript: its start could not be
    /// journaled) and one killed before it reported any.
    #[test]
    fn the_asked_stream_is_the_newest_that_reported_usage() {
        let asked = include_str!("../../crew-core/src/stream/fixtures/codex_ask.jsonl");
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("transcripts");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("a.attempt-1.jsonl"), asked).unwrap();
        // Attempt 2: none. Attempt 3: killed before it reported usage.
        std::fs::write(
            t.join("a.attempt-3.jsonl"),
            "{\"type\":\"thread.started\",\"thread_id\":\"x\"}\n",
        )
        .unwrap();
        let got = asked_stream(dir.path(), "a", 4, AdapterKind::Codex, false);
        assert_eq!(got.as_deref(), Some(asked));
        assert_eq!(
            asked_stream(dir.path(), "a", 1, AdapterKind::Codex, false),
            None
        );
    }
}
