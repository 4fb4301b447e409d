//! Running one attempt of one task as a worker process.
//!
//! The worker gets stdin `/dev/null` (pi and codex block on an open stdin), or the prompt file
//! when its adapter reads a long prompt from stdin, or a pipe the daemon owns (live mode: pi's
//! rpc mode, Claude Code's stream-json input), its own process group, a filtered environment
//! and the run's cwd. Its stdout is read line by line without ever blocking it; a no-output watchdog,
//! an overall timeout and a final drain (agents linger after answering) bound its life; stopping
//! it is SIGTERM to the group, SIGKILL after a grace period.

mod answer;
mod judge;
mod checks;
mod env;
pub(crate) mod fault;
mod lines;
mod pre_step;
pub mod process;
mod reuse;
mod session;
mod stderr;
mod verify;

use crate::artifacts;
use crate::attempt::{AttemptKey, AttemptSpec, Port, Report, Resume, WorkerCtl};
use crate::shared::Shared;
use crew_core::prompt::{DepOutput, PromptInput, SharedRead};
use crew_core::run::{ArtifactRef, AttemptResult};
use crew_core::stream::{self, LaunchSpec, WorkerEvent};
use crew_core::usage::Usage;
use futures::FutureExt;
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

/// Transcripts keep at most this much (the rest is counted, not stored).
const TRANSCRIPT_MAX: u64 = 16 << 20;
const STDERR_TAIL: usize = 8 << 10;
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// After the worker exits, how long stdout may stay silent before it counts as done.
const EXIT_QUIET: Duration = Duration::from_millis(500);
/// A timer this late means the daemon itself did not run (SIGSTOP, a frozen cgroup, a starved
/// machine): what the worker did meanwhile could not be seen, so its silence is not judged.
const PAUSE_SLACK: Duration = Duration::from_secs(1);
/// Most stdout lines taken at once, without waiting, before a deadline is judged.
const DRAIN_LINES: usize = 4096;

fn render_prompt(spec: &AttemptSpec, pre_step: Option<&str>) -> std::io::Result<String> {
    fault::hit("render")?;
    let mut dep_texts = Vec::new();
    for (id, role) in &spec.deps {
        let text = std::fs::read_to_string(spec.run_dir.join("results").join(format!("{id}.txt")))
            .unwrap_or_default();
        dep_texts.push((id.as_str(), role.as_str(), text));
    }
    let read_texts: Vec<(&str, Option<String>)> = spec
        .plan
        .reads
        .iter()
        .map(|r| {
            let text = crew_core::ids::is_safe_artifact_name(r)
                .then(|| std::fs::read_to_string(spec.run_dir.join("shared").join(r)).ok())
                .flatten();
            (r.as_str(), text)
        })
        .collect();
    let deps: Vec<DepOutput> = dep_texts
        .iter()
        .map(|(id, role, t)| DepOutput {
            task_id: id,
            role,
            text: t,
        })
        .collect();
    let reads: Vec<SharedRead> = read_texts
        .iter()
        .map(|(n, t)| SharedRead {
            name: n,
            text: t.as_deref(),
        })
        .collect();
    let mut prompt = crew_core::prompt::render(
        &spec.plan,
        &PromptInput {
            goal: &spec.goal,
            deps: &deps,
            reads: &reads,
            steers: &spec.steers,
            answers: &spec.answers,
            feedback: spec.feedback.as_deref(),
        },
    );
    if let Some(block) = pre_step {
        prompt.push_str(block);
    }
    if let Some(exp) = &spec.plan.expands {
        prompt.push_str(&crew_core::fanout::prompt_section(
            exp,
            spec.fan_out_repair.as_deref(),
        ));
    }
    if let Some(section) = judge::prompt_section(spec) {
        prompt.push_str(&section);
    }
    Ok(prompt)
}

/// Run the attempt and report to the actor: always exactly one report, whatever fails. A panic
/// anywhere in starting or supervising the worker (a daemon bug) is caught here and ends the
/// attempt as a retryable failure; the worker's process group, if it was started, is killed
/// on the way out (`GroupGuard`). Without this the task would stay `running` with no worker.
pub async fn run_attempt(
    shared: Arc<Shared>,
    port: Arc<dyn Port>,
    spec: AttemptSpec,
    mut ctl: mpsc::UnboundedReceiver<WorkerCtl>,
) {
    let span = tracing::info_span!("worker", run = %spec.run_id, task = %spec.task_id, attempt = spec.attempt, runtime = %spec.runtime_name);
    async move {
        let mut spec = spec;
        let caught = std::panic::AssertUnwindSafe(async {
            fault::hit("start")?;
            let result = match spec.workspace.clone() {
                None => {
                    let before = checks::shared_before(&shared, &spec).await;
                    let r = attempt(&shared, &port, &spec, &mut ctl).await;
                    let r = checks::verify(&shared, &spec, r, &mut ctl).await;
                    checks::shared_after(&spec, before, r).await
                }
                // The worktree is made here, off the actor, before the worker starts.
                Some(ws) => match crate::workspace::prepare(&shared, &ws).await {
                    Err(ended) => ended,
                    Ok(prepared) => {
                        spec.cwd = prepared.cwd.to_string_lossy().into_owned();
                        let r = attempt(&shared, &port, &spec, &mut ctl).await;
                        // Verified in the worktree, before its result is committed.
                        let r = checks::verify(&shared, &spec, r, &mut ctl).await;
                        let r = crate::workspace::finish_attempt(
                            &shared,
                            &ws,
                            prepared,
                            r,
                            &spec.run_dir,
                        )
                        .await;
                        let r = checks::worktree_after(&shared, &port, &spec, &ws, r).await;
                        reuse::insert_after_commit(&shared, &spec, &r);
                        r
                    }
                },
            };
            Ok::<_, std::io::Error>(result)
        })
        .catch_unwind()
        .await;
        let result = match caught {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => failed(
                Usage::default(),
                Vec::new(),
                format!("cannot start the worker: {e}"),
                true,
                "internal",
            ),
            Err(panic) => {
                let what = panic_text(panic.as_ref());
                tracing::error!(panic = %what, "the worker's supervision panicked; the attempt fails");
                failed(
                    Usage::default(),
                    Vec::new(),
                    format!("internal error while running the worker: {what}"),
                    true,
                    "internal",
                )
            }
        };
        tracing::info!(outcome = outcome_name(&result), "attempt ended");
        // The actor does no I/O: a fan-out step's answer is read here (bounded) and
        // validated there.
        let answer = match (judge::answer_limit(&spec.plan), &result) {
            (Some(limit), AttemptResult::Completed { .. }) => {
                let path = spec
                    .run_dir
                    .join("results")
                    .join(format!("{}.txt", spec.task_id));
                Some(blocking(|| answer::read(&path, limit)))
            }
            _ => None,
        };
        let report = Report {
            run_id: spec.run_id.clone(),
            task_id: spec.task_id.clone(),
            attempt: spec.attempt,
            result,
            answer,
        };
        port.finished(report);
    }
    .instrument(span)
    .await
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Kills the worker's process group when dropped: at the end of supervision (tools the agent
/// started go too), and on any early way out, a panic included.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        process::signal_group(self.0, Signal::SIGKILL);
    }
}

fn outcome_name(r: &AttemptResult) -> &'static str {
    match r {
        AttemptResult::Completed { .. } => "completed",
        AttemptResult::NoFinalText { .. } => "no_final_text",
        AttemptResult::NeedsAttention { .. } => "needs_attention",
        AttemptResult::Failed { .. } => "failed",
        AttemptResult::Asked { .. } => "asked",
    }
}

fn failed(
    usage: Usage,
    artifacts: Vec<ArtifactRef>,
    error: String,
    retryable: bool,
    reason: &str,
) -> AttemptResult {
    AttemptResult::Failed {
        usage,
        model: None,
        artifacts,
        error,
        retryable,
        reason: reason.to_string(),
    }
}

/// One attempt, its artifacts durable before the result is reported (the report's event names
/// them).
async fn attempt(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    spec: &AttemptSpec,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let result = attempt_unsynced(shared, port, spec, ctl).await;
    let (usage, model, names) = match &result {
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            ..
        }
        | AttemptResult::NoFinalText {
            usage,
            model,
            artifacts,
        }
        | AttemptResult::NeedsAttention {
            usage,
            model,
            artifacts,
            ..
        }
        | AttemptResult::Failed {
            usage,
            model,
            artifacts,
            ..
        }
        | AttemptResult::Asked {
            usage,
            model,
            artifacts,
            ..
        } => (*usage, model.clone(), !artifacts.is_empty()),
    };
    // An attempt that failed before writing anything names no file: nothing to sync, and its
    // own error is the one to report (the run directory may not even exist).
    if !names {
        return result;
    }
    let durable = blocking(|| {
        fault::hit("durable")?;
        artifacts::make_durable(&spec.run_dir)
    });
    let Err(e) = durable else {
        return result;
    };
    // The files may not be on disk: name none of them, and let the retry write them again.
    AttemptResult::Failed {
        usage,
        model,
        artifacts: Vec::new(),
        error: format!("cannot make the task's files durable: {e}"),
        retryable: true,
        reason: "storage".into(),
    }
}

async fn attempt_unsynced(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    spec: &AttemptSpec,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let run_dir = spec.run_dir.clone();
    let mut artifacts = Vec::new();
    let prompt_name = format!("prompts/{}.md", spec.task_id);
    let resume = session::usable_resume(spec);
    // The step's pre-step script first: its output is part of the prompt, so of the reuse
    // fingerprint too. A resumed session saw it when it started: not run again.
    let pre_step = match resume {
        Some(_) => None,
        None => match pre_step::run(shared, port, spec, ctl).await {
            Ok(block) => block,
            Err(ended) => return ended,
        },
    };
    // Reads dependency results, writes the prompt artifact.
    let written = blocking(|| {
        let prompt = match resume {
            Some(r) => session::resume_prompt(&r.answer),
            None => render_prompt(spec, pre_step.as_deref())?,
        };
        fault::hit("prompt-artifact")?;
        // Every attempt's prompt is kept beside the latest (a judge's repair, a retry with
        // feedback: what each attempt was told).
        let this = format!("prompts/{}.attempt-{}.md", spec.task_id, spec.attempt);
        let kept = artifacts::put(&run_dir, &this, "prompt", prompt.as_bytes())?;
        artifacts::put(&run_dir, &prompt_name, "prompt", prompt.as_bytes())
            .map(|a| (prompt, [kept, a]))
    });
    let prompt = match written {
        Ok((prompt, a)) => {
            artifacts.extend(a);
            prompt
        }
        Err(e) => {
            return failed(
                Usage::default(),
                artifacts,
                format!("cannot write the prompt: {e}"),
                false,
                "storage",
            )
        }
    };

    // Result reuse (SPEC §9): a matching earlier result instead of a new agent call.
    // A resumed session's prompt (the answer) does not describe the task: never cached.
    let fingerprint = match resume {
        Some(_) => None,
        None => reuse::fingerprint_for(spec, &prompt).await,
    };
    // A writing task in worktree mode reuses a result commit, which must be in this
    // repository; without one it runs.
    let worktree_writer = spec.workspace.is_some() && spec.plan.writes;
    if let Some(fp) = &fingerprint {
        let hit = shared.results.lookup(fp);
        let commit = match (&hit, worktree_writer) {
            (Some(h), true) => match &h.commit {
                Some(c) if reuse::commit_present(shared, &spec.cwd, c).await => Some(c.clone()),
                _ => None,
            },
            _ => None,
        };
        let hit = hit.filter(|_| !worktree_writer || commit.is_some());
        if let Some(hit) = hit {
            if let Ok(text) = blocking(|| std::fs::read(&hit.result_path)) {
                match blocking(|| finish_result(&run_dir, spec, &text, &mut artifacts)) {
                    Ok(()) => {
                        shared.results.record_saving(&hit.usage);
                        return AttemptResult::Completed {
                            usage: Usage::default(),
                            model: hit.model.clone(),
                            artifacts,
                            reused_from: Some(crew_core::run::ReusedFrom {
                                run_id: hit.run_id.clone(),
                                task_id: hit.task_id.clone(),
                            }),
                            // The worktree step takes it (`workspace::finish`).
                            commit: commit.map(crate::workspace::reused_commit),
                            verification: Vec::new(),
                        };
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot reuse a cached result; running the agent")
                    }
                }
            }
        }
    }

    let result = run_process(shared, port, spec, &prompt, resume, ctl, &mut artifacts).await;
    if let (Some(fp), AttemptResult::Completed { usage, model, .. }) = (&fingerprint, &result) {
        let entry = crate::results::CachedResult {
            run_id: spec.run_id.clone(),
            task_id: spec.task_id.clone(),
            result_path: run_dir
                .join("results")
                .join(format!("{}.txt", spec.task_id)),
            usage: *usage,
            model: model.clone(),
            commit: None,
        };
        if worktree_writer {
            if let Ok(mut held) = spec.cache_after_commit.lock() {
                *held = Some((fp.clone(), entry));
            }
        } else {
            shared.results.insert(fp.clone(), entry);
        }
    }
    result
}

/// Write the result and the step's shared output.
fn finish_result(
    run_dir: &std::path::Path,
    spec: &AttemptSpec,
    text: &[u8],
    artifacts: &mut Vec<ArtifactRef>,
) -> std::io::Result<()> {
    fault::hit("result")?;
    artifacts.push(artifacts::put(
        run_dir,
        &format!("results/{}.txt", spec.task_id),
        "result",
        text,
    )?);
    if let Some(out) = &spec.plan.output {
        if crew_core::ids::is_safe_artifact_name(out) {
            artifacts.push(artifacts::put(
                run_dir,
                &format!("shared/{out}"),
                "shared",
                text,
            )?);
        }
    }
    Ok(())
}

/// The stream as redacted where it entered (`Stdout::line`), capped at `TRANSCRIPT_MAX`. Buffered std I/O: a line costs a
/// copy, a 64 KiB write now and then reaches the page cache; it is made durable with the
/// attempt's other files.
struct Transcript {
    file: Option<std::io::BufWriter<std::fs::File>>,
    written: u64,
    dropped: u64,
    /// Of every byte written, so naming the transcript does not read it back (up to 16 MiB).
    digest: sha2::Sha256,
    /// A write failed (or the file could not be created): the file holds an unknown prefix, and
    /// only a read-back can describe it.
    broken: bool,
}

impl Transcript {
    fn line(&mut self, line: &str) {
        if self.written + line.len() as u64 + 1 > TRANSCRIPT_MAX {
            self.dropped += 1;
            return;
        }
        self.write(line);
    }

    fn write(&mut self, text: &str) {
        use sha2::Digest;
        use std::io::Write;
        if let Some(f) = &mut self.file {
            if f.write_all(text.as_bytes()).is_ok() && f.write_all(b"\n").is_ok() {
                self.written += text.len() as u64 + 1;
                self.digest.update(text.as_bytes());
                self.digest.update(b"\n");
            } else {
                // A write error (disk full) ends the transcript, not the attempt.
                self.file = None;
                self.broken = true;
            }
        }
    }

    /// The transcript as an artifact, from what was written (after a successful `finish`).
    fn artifact(self, name: String) -> Option<ArtifactRef> {
        use sha2::Digest;
        (!self.broken).then(|| ArtifactRef {
            name,
            kind: crew_core::run::ArtifactKind::Transcript,
            bytes: self.written,
            sha256: crew_core::run::Sha256::from_bytes(self.digest.finalize().into()),
        })
    }

    /// Note what was cut (past the cap, so the note itself is never cut) and flush.
    fn finish(&mut self) -> std::io::Result<()> {
        if self.dropped > 0 {
            self.write(&format!(
                "{{\"type\":\"crew.transcript_truncated\",\"droppedLines\":{}}}",
                self.dropped
            ));
        }
        match self.file.take() {
            // Flushed to the file here; made durable with the attempt's other files.
            Some(mut f) => std::io::Write::flush(&mut f).inspect_err(|_| self.broken = true),
            None => Ok(()),
        }
    }
}

/// What the worker's stdout said so far.
struct Stdout {
    /// Where the worker's output enters the daemon: every line is redacted here, before the
    /// transcript and the parser see it, so nothing downstream (results, questions, errors,
    /// events, summaries, bundles) can carry a secret the worker printed.
    redactor: crew_core::redact::StreamRedactor,
    parser: Box<dyn stream::StreamParser>,
    transcript: Transcript,
    any: bool,
    /// When the last stdout line arrived.
    last: Instant,
    question: Option<String>,
    current_tool: Option<String>,
    progress_dirty: bool,
    /// When the final answer (or a question) arrived: the final drain runs from here.
    final_at: Option<Instant>,
    /// Live mode (pi's rpc mode, Claude Code's stream-json input): only `Finished` is final (a
    /// steer that arrives while the last message streams makes the agent go on after it), and
    /// it is the moment to close the worker's stdin.
    rpc: bool,
    /// Live mode: `Finished` came; the worker has nothing more to do.
    rpc_done: bool,
    /// Live mode of an adapter that acknowledges its input (`live_input_is_acknowledged`):
    /// messages written to the worker's stdin and not yet taken. A `Finished` with one pending
    /// is not the last: the agent runs another turn for it.
    pending_inputs: Option<u32>,
    /// Live mode: when a `Finished` came while messages were pending. The agent takes a message
    /// it holds right after its turn ends and says so at once; one that says nothing for the
    /// final-drain time did not take it (a CLI that does not echo, a message it dropped), and
    /// its last answer stands instead of the task waiting for the no-output watchdog.
    unacked_since: Option<Instant>,
    /// A question ends the agent's turn at once (pi: crew's extension returns `terminate`).
    /// Claude Code, Codex and opencode make one more model call after the ask tool's result: their
    /// turn's end, not the question, starts the drain, so the session they resume is whole.
    ask_ends_turn: bool,
    warnings: Warnings,
}

/// Refused tool calls, told to the actor as `task.warning`s as they happen.
struct Warnings {
    port: Arc<dyn Port>,
    key: AttemptKey,
    sent: u32,
}

/// Warnings per attempt: an agent that retries a refused call in a loop must not flood the
/// journal.
const MAX_WARNINGS: u32 = 20;

impl Warnings {
    fn send(&mut self, tool: &str, message: &str) {
        let (tool, message) = match self.sent {
            n if n < MAX_WARNINGS => (tool.to_owned(), message.to_owned()),
            MAX_WARNINGS => (
                String::new(),
                format!(
                    "more than {MAX_WARNINGS} tool calls were refused; the rest are not reported"
                ),
            ),
            _ => return,
        };
        self.sent += 1;
        self.port.warning(&self.key, tool, message);
    }
}

impl Stdout {
    fn line(&mut self, raw: &str) {
        self.last = Instant::now();
        self.any = true;
        let line = self.redactor.line(raw);
        self.transcript.line(&line);
        let before = self.parser.usage();
        let events = self.parser.feed_line(&line);
        if self.parser.usage() != before {
            self.progress_dirty = true;
        }
        for ev in events {
            match &ev {
                WorkerEvent::ToolStart { name, .. } => {
                    self.current_tool = Some(name.clone());
                    self.progress_dirty = true;
                }
                WorkerEvent::ToolEnd { .. } => {
                    self.current_tool = None;
                    self.progress_dirty = true;
                }
                WorkerEvent::AssistantMessage { .. } | WorkerEvent::TurnEnd => {
                    self.progress_dirty = true
                }
                WorkerEvent::Ask { question } => {
                    self.question = Some(question.clone());
                    if self.ask_ends_turn {
                        self.final_at.get_or_insert(Instant::now());
                    }
                }
                WorkerEvent::Refused { tool, message, .. } => self.warnings.send(tool, message),
                WorkerEvent::InputTaken => {
                    if let Some(n) = self.pending_inputs.as_mut() {
                        *n = n.saturating_sub(1);
                    }
                    self.unacked_since = None;
                }
                _ => {}
            }
            let last = if self.rpc {
                matches!(ev, WorkerEvent::Finished) && self.pending_inputs.unwrap_or(0) == 0
            } else {
                ev.is_final()
            };
            if last {
                self.final_at.get_or_insert(Instant::now());
                self.rpc_done |= self.rpc;
            } else if self.rpc && matches!(ev, WorkerEvent::Finished) {
                self.unacked_since.get_or_insert(Instant::now());
            }
        }
    }
}

/// The file holding a system prompt for the run's workers, written once per distinct prompt:
/// the tasks of one agent share it (creating a file per task was the dispatch bench's biggest
/// cost on ext4). Named by its content, so a name always means the same bytes. The worker's
/// input, not an artifact any event names: no sync needed (the agent reads it right away, and
/// a file lost or cut short in a crash is written again by the next attempt that needs it).
fn system_prompt_file(run_dir: &Path, prompt: &str) -> std::io::Result<PathBuf> {
    fault::hit("system-prompt")?;
    let path = run_dir.join(artifacts::system_prompt_name(prompt));
    // Compared, not just found: it is never synced, so after a power loss it may be empty.
    let current = std::fs::read(&path).ok();
    if current.as_deref() != Some(prompt.as_bytes()) {
        artifacts::write_replace(&path, prompt.as_bytes())?;
    }
    Ok(path)
}

/// The task's skills (those installed when the run was planned) as `skills/<name>/SKILL.md`
/// in the run's directory, from the text frozen in the plan: a worker never reads the user's
/// skill files, which may have changed since. Like the system prompt file, the worker's input
/// and no artifact: rewritten when it differs, never synced.
fn skill_dirs(
    run_dir: &Path,
    skills: &[crew_core::skills::PlannedSkill],
) -> std::io::Result<Vec<String>> {
    let mut dirs = Vec::new();
    for s in skills.iter().filter(|s| !s.missing) {
        // Names come from checked directory names, but a plan may come from a bundle.
        if !crew_core::ids::is_safe_id(&s.name) {
            continue;
        }
        let dir = run_dir.join("skills").join(&s.name);
        let description = if s.description.is_empty() {
            format!("Skill {}", s.name)
        } else {
            s.description.replace(['\n', '\r'], " ")
        };
        let text = format!(
            "---\nname: {}\ndescription: {}\n---\n{}\n",
            s.name,
            serde_json::to_string(&description).unwrap_or_default(),
            s.text
        );
        let path = dir.join("SKILL.md");
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            std::fs::create_dir_all(&dir)?;
            artifacts::write_replace(&path, text.as_bytes())?;
        }
        dirs.push(dir.display().to_string());
    }
    Ok(dirs)
}

/// When a worker that gave its final answer at `final_at` is stopped: after a quiet moment, at
/// the latest after the final-drain time. An rpc worker whose stdin crew closed after
/// `agent_end` is exiting by itself (pi takes a second or two to shut down on a busy machine):
/// quiet does not count, only the final-drain time.
fn drain_at(
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

/// Send a live worker what its protocol owes it after the lines fed so far (its next request,
/// an answer to a request of the agent's): the agent may be waiting for it and print nothing
/// until then, so every place that feeds lines sends them.
async fn send_replies(
    stdin: Option<&mut tokio::process::ChildStdin>,
    out: &mut Stdout,
    limit: Duration,
) {
    let replies = out.parser.live_replies();
    if let (Some(w), false) = (stdin, replies.is_empty()) {
        if let Err(e) = send_lines(w, &replies, limit).await {
            tracing::warn!(error = %e, "cannot answer the live worker");
        }
    }
}

/// Write `lines` to a live worker's stdin, each with its `\n`, within `limit`: a worker that
/// does not read its stdin must not hold the supervision loop.
async fn send_lines(
    w: &mut tokio::process::ChildStdin,
    lines: &[String],
    limit: Duration,
) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    match tokio::time::timeout(limit, w.write_all(&bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the worker does not read its stdin",
        )),
    }
}

/// Run blocking file work (reads, writes, syncs) without stalling the other tasks of the runtime thread.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

async fn run_process(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    spec: &AttemptSpec,
    prompt: &str,
    resume: Option<&Resume>,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
    artifacts: &mut Vec<ArtifactRef>,
) -> AttemptResult {
    let cfg = &shared.config;
    let run_dir = &spec.run_dir;
    let rpc = spec.runtime.rpc();

    // The prompt goes through a file (the prompt artifact, already written) when it is too long
    // for argv or the runtime asks for one.
    let prompt_file =
        stream::prompt_through_file(spec.runtime.adapter, prompt, spec.runtime.prompt_via).then(
            || {
                run_dir
                    .join(format!("prompts/{}.md", spec.task_id))
                    .display()
                    .to_string()
            },
        );
    let system_prompt_file =
        match blocking(|| system_prompt_file(run_dir, &spec.plan.system_prompt)) {
            Ok(path) => Some(path.display().to_string()),
            Err(e) => {
                return failed(
                    Usage::default(),
                    artifacts.clone(),
                    format!("cannot write the system prompt: {e}"),
                    false,
                    "storage",
                )
            }
        };
    // Only pi takes skills as files; the other CLIs have them in the prompt alone.
    let skill_dirs = if spec.runtime.adapter == stream::AdapterKind::Pi {
        match blocking(|| skill_dirs(run_dir, &spec.plan.skills)) {
            Ok(dirs) => dirs,
            Err(e) => {
                return failed(
                    Usage::default(),
                    artifacts.clone(),
                    format!("cannot write the task's skills: {e}"),
                    false,
                    "storage",
                )
            }
        }
    } else {
        Vec::new()
    };
    let session = match session::session_spec(spec, resume, &shared.state_dir) {
        Ok(session) => session,
        Err(e) => return failed(Usage::default(), artifacts.clone(), e, false, "storage"),
    };
    let session_file = session.file.clone();
    let launch_spec = LaunchSpec {
        command: spec.runtime.command.argv(),
        prompt: prompt.to_string(),
        prompt_file,
        system_prompt: spec.plan.system_prompt.to_string(),
        system_prompt_mode: spec.plan.system_prompt_mode,
        system_prompt_file,
        model: spec.model.clone(),
        thinking: spec.plan.thinking.clone(),
        tools: spec.plan.tools.to_vec(),
        rpc,
        prompt_via: spec.runtime.prompt_via,
        effort: spec.plan.effort.clone(),
        fallback_models: spec.fallback_models.clone(),
        skill_dirs,
        session,
        cwd: spec.cwd.clone(),
    };
    let launch = stream::build_launch(spec.runtime.adapter, &launch_spec);
    let argv = launch.argv;
    let Some((program, args)) = argv.split_first() else {
        return failed(
            Usage::default(),
            artifacts.clone(),
            "the runtime's command is empty".into(),
            false,
            "spawn",
        );
    };

    if !std::path::Path::new(&spec.cwd).is_dir() {
        return failed(
            Usage::default(),
            artifacts.clone(),
            format!("the run's cwd does not exist: {}", spec.cwd),
            false,
            "cwd",
        );
    }

    let mut extra = cfg.env_passthrough.clone();
    extra.extend(spec.runtime.env.iter().cloned());
    if let Err(e) = fault::hit("env") {
        return failed(
            Usage::default(),
            artifacts.clone(),
            format!("cannot build the worker's environment: {e}"),
            true,
            "spawn",
        );
    }
    let env = env::worker_env(
        &extra,
        &[
            (process::ENV_RUN_ID, spec.run_id.clone()),
            (process::ENV_TASK_ID, spec.task_id.clone()),
            (process::ENV_ATTEMPT, spec.attempt.to_string()),
            (process::ENV_DAEMON_PID, std::process::id().to_string()),
        ],
    );
    // A prompt on stdin is a regular file: the agent reads it to its end and goes on, where a
    // pipe left open would keep it waiting.
    let stdin = match &launch.stdin {
        stream::StdinFrom::Null => Stdio::null(),
        stream::StdinFrom::Pipe => Stdio::piped(),
        stream::StdinFrom::File(path) => match blocking(|| std::fs::File::open(path)) {
            Ok(f) => Stdio::from(f),
            Err(e) => {
                return failed(
                    Usage::default(),
                    artifacts.clone(),
                    format!("cannot open the prompt file {path}: {e}"),
                    false,
                    "storage",
                )
            }
        },
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(env)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let mut child = match fault::hit("spawn").and_then(|()| cmd.spawn()) {
        Ok(c) => c,
        Err(e) => {
            // Too long for argv stays too long, and a missing program stays missing: no
            // attempt can do better.
            let retryable = e.kind() != std::io::ErrorKind::ArgumentListTooLong
                && stream::is_retryable_spawn_error(e.kind());
            return failed(
                Usage::default(),
                artifacts.clone(),
                format!("failed to start `{program}`: {e}"),
                retryable,
                "spawn",
            );
        }
    };
    let pid = child.id().unwrap_or(0);
    let group = GroupGuard(pid);
    let pid_start = process::start_time(pid).unwrap_or(0);
    tracing::info!(pid, "worker started");
    port.spawned(&spec.key(), pid, pid_start, rpc);

    let no_output = Duration::from_millis(
        spec.runtime
            .no_output_timeout_ms
            .unwrap_or(cfg.no_output_timeout_ms),
    );
    let asked = match resume {
        Some(_) => {
            // The attempt that asked is the one before this one (an answer starts the next
            // attempt); its stream is what this session goes on from.
            let asked = spec
                .attempt
                .checked_sub(1)
                .map(|n| run_dir.join(format!("transcripts/{}.attempt-{n}.jsonl", spec.task_id)));
            let text = asked
                .and_then(|p| blocking(|| std::fs::read(p)).ok())
                .unwrap_or_default();
            Some(String::from_utf8_lossy(&text).into_owned())
        }
        None => None,
    };
    let mut parser = stream::attempt_parser(spec.runtime.adapter, &launch_spec, asked.as_deref());
    let mut stdin = child.stdin.take();
    // Messages written and not yet acknowledged, for an adapter that acknowledges them.
    let mut pending_inputs =
        stream::live_input_is_acknowledged(spec.runtime.adapter).then_some(0u32);
    if let Some(w) = stdin.as_mut() {
        let lines = parser.live_start(prompt);
        // Bounded: a worker that does not read its stdin would otherwise hold the attempt here,
        // before any watchdog runs.
        match send_lines(w, &lines, no_output).await {
            Ok(()) => {
                if let Some(n) = pending_inputs.as_mut() {
                    *n = n.saturating_add(1);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot send the prompt to the live worker"),
        }
    }
    let Some(stdout) = child.stdout.take() else {
        return failed(
            Usage::default(),
            artifacts.clone(),
            "worker stdout unavailable".into(),
            true,
            "spawn",
        );
    };
    let mut stderr = child.stderr.take();
    let mut lines = lines::LineReader::new(BufReader::with_capacity(64 << 10, stdout));

    let transcript_name = format!(
        "transcripts/{}.attempt-{}.jsonl",
        spec.task_id, spec.attempt
    );
    let transcript_path = run_dir.join(&transcript_name);
    let file = blocking(|| {
        fault::hit("transcript")?;
        if let Some(d) = transcript_path.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::File::create(&transcript_path)
    });
    if let Err(e) = &file {
        tracing::warn!(error = %e, "cannot create the transcript; the attempt runs without one");
    }
    let opened = file.is_ok();
    let mut out = Stdout {
        redactor: Default::default(),
        parser,
        transcript: Transcript {
            file: file
                .ok()
                .map(|f| std::io::BufWriter::with_capacity(64 << 10, f)),
            written: 0,
            dropped: 0,
            digest: Default::default(),
            broken: !opened,
        },
        any: false,
        last: Instant::now(),
        question: None,
        current_tool: None,
        progress_dirty: false,
        final_at: None,
        rpc,
        rpc_done: false,
        pending_inputs,
        unacked_since: None,
        ask_ends_turn: spec.runtime.adapter == stream::AdapterKind::Pi,
        warnings: Warnings {
            port: port.clone(),
            key: spec.key(),
            sent: 0,
        },
    };

    let start = Instant::now();
    let task_deadline = start + Duration::from_millis(cfg.task_timeout_ms);
    let mut last_stderr = Instant::now();
    let mut stdout_open = true;
    let mut stderr_tail = StderrTail::default();
    let mut stderr_chunk = vec![0u8; 8192];
    // When the daemon last came back from not running (see `PAUSE_SLACK`): silence before it
    // was not watched, so the no-output watchdog counts from here at the earliest.
    let mut resumed_at = Instant::now();
    let mut exit: Option<std::process::ExitStatus> = None;
    let mut exited_at: Option<Instant> = None;
    // Why we stopped the worker, if we did: (error, retryable, reason).
    let mut stopped: Option<(String, bool, &'static str)> = None;
    let mut ctl_open = true;
    let mut term_sent_at: Option<Instant> = None;
    let mut drained = false;
    let mut last_progress = Instant::now() - PROGRESS_EVERY;
    let quiet = Duration::from_millis(cfg.final_drain_quiet_ms);
    let drain_max = Duration::from_millis(cfg.final_drain_ms);
    let grace = Duration::from_millis(cfg.kill_grace_ms);
    // After the worker exited, stdout stays open only while something it started holds it:
    // stop reading after a quiet moment, and at the latest after the final-drain time.
    let stdout_cutoff = |exited: Instant, last: Instant| {
        (exited.max(last) + EXIT_QUIET).min(exited + drain_max.max(EXIT_QUIET))
    };

    loop {
        if exit.is_some() && !stdout_open {
            break;
        }
        // A live worker (pi in rpc mode, Claude Code on stream-json input) waits for its next
        // message after its final answer and exits when its stdin ends: closing it ends the
        // worker now, not after the final drain's quiet time and a SIGTERM.
        if out.rpc_done && stdin.take().is_some() {
            // A steer from now on would be written nowhere: the actor queues it instead. Told
            // before the log line, which tests wait on.
            port.answered(&spec.key());
            tracing::info!(pid, "rpc worker finished; its stdin is closed so it exits");
        }
        let last_output = out.last.max(last_stderr);
        let watched_silence_from = last_output.max(resumed_at);
        // The next instant something must happen without input. Once the worker was told to
        // stop, only the grace counts: the watchdog, timeout and drain instants are past and
        // would wake the loop over and over.
        let mut deadline = match term_sent_at {
            Some(t) => t + grace,
            None => {
                let mut d = (watched_silence_from + no_output).min(task_deadline);
                if let Some(f) = out.final_at {
                    d = d.min(drain_at(out.rpc_done, f, last_output, quiet, drain_max));
                }
                if let Some(t) = out.unacked_since {
                    d = d.min(t + drain_max);
                }
                d
            }
        };
        if out.progress_dirty {
            deadline = deadline.min(last_progress + PROGRESS_EVERY);
        }
        if let Some(e) = exited_at {
            deadline = deadline.min(stdout_cutoff(e, out.last));
        }
        tokio::select! {
            line = lines.next_line(), if stdout_open => match line {
                Ok(Some(line)) => {
                    out.line(&line);
                    send_replies(stdin.as_mut(), &mut out, no_output).await;
                    if let Err(e) = fault::hit("supervise") {
                        tracing::debug!(error = %e, "fault point `supervise` only panics");
                    }
                }
                Ok(None) | Err(_) => stdout_open = false,
            },
            n = async { match stderr.as_mut() { Some(s) => s.read(&mut stderr_chunk).await, None => std::future::pending().await } } => match n {
                Ok(0) | Err(_) => stderr = None,
                Ok(n) => {
                    last_stderr = Instant::now();
                    stderr_tail.push(stderr_chunk.get(..n).unwrap_or_default());
                }
            },
            status = child.wait(), if exit.is_none() => {
                exit = status.ok();
                exited_at = Some(Instant::now());
            }
            msg = ctl.recv(), if ctl_open => match msg {
                Some(WorkerCtl::Stop { reason }) => {
                    if term_sent_at.is_none() {
                        tracing::info!(%reason, "stopping worker");
                        stopped.get_or_insert((reason, false, "cancelled"));
                        process::signal_group(pid, Signal::SIGTERM);
                        term_sent_at = Some(Instant::now());
                    }
                }
                Some(WorkerCtl::Steer(m)) => {
                    if let Some(w) = stdin.as_mut() {
                        let lines = out.parser.live_steer(&m);
                        // Bounded for the same reason as the prompt: the loop must keep watching.
                        match send_lines(w, &lines, no_output).await {
                            Ok(()) => {
                                if let Some(n) = out.pending_inputs.as_mut() {
                                    *n = n.saturating_add(1);
                                }
                                tracing::info!(chars = m.chars().count(), "steer written to the worker")
                            }
                            Err(e) => tracing::warn!(error = %e, "steer could not be written to the worker; dropped"),
                        }
                    } else {
                        tracing::info!("the worker has already answered; steer not delivered");
                    }
                }
                // The actor dropped the handle: right after a Stop (the task is no longer this
                // worker's), or because the daemon is going away. Either way the loop must go on
                // (grace, SIGKILL, reaping); only this branch is done.
                None => ctl_open = false,
            },
            _ = tokio::time::sleep_until(deadline) => {
                let now = Instant::now();
                // Read what is pending before judging silence: a loop that was not polled for a
                // while (the daemon stopped, a busy machine) wakes up with its timer and its
                // pipes ready at once, and the timer may be polled first.
                if stdout_open && !drain_ready_lines(&mut lines, &mut out) {
                    stdout_open = false;
                }
                send_replies(stdin.as_mut(), &mut out, no_output).await;
                if let Some(s) = stderr.as_mut() {
                    loop {
                        match s.read(&mut stderr_chunk).now_or_never() {
                            Some(Ok(0)) | Some(Err(_)) => {
                                stderr = None;
                                break;
                            }
                            Some(Ok(n)) => {
                                last_stderr = now;
                                stderr_tail.push(stderr_chunk.get(..n).unwrap_or_default());
                                        }
                            None => break,
                        }
                    }
                }
                if now.saturating_duration_since(deadline) > PAUSE_SLACK {
                    tracing::info!(late_ms = now.saturating_duration_since(deadline).as_millis() as u64, "the daemon did not run for a while; the worker's silence counts from now");
                    resumed_at = now;
                }
                let last_output = out.last.max(last_stderr);
                let watched_silence_from = last_output.max(resumed_at);
                if let (Some(e), true) = (exited_at, stdout_open) {
                    if Instant::now() >= stdout_cutoff(e, out.last) {
                        stdout_open = false;
                    }
                }
                if out.unacked_since.is_some_and(|t| now >= t + drain_max) {
                    tracing::warn!(
                        pending = out.pending_inputs.unwrap_or(0),
                        "the live worker did not take the messages written to it after its last answer; that answer stands"
                    );
                    out.unacked_since = None;
                    out.pending_inputs = Some(0);
                    out.rpc_done = true;
                    // From now: the worker gets the drain time to exit once its stdin is closed.
                    out.final_at = Some(now);
                }
                if out.progress_dirty && now >= last_progress + PROGRESS_EVERY {
                    out.progress_dirty = false;
                    last_progress = now;
                    port.progress(&spec.key(), out.parser.usage(), out.current_tool.clone());
                }
                if exit.is_none() {
                    if let Some(t) = term_sent_at {
                        if now >= t + grace {
                            tracing::warn!(pid, "worker ignored SIGTERM; sending SIGKILL");
                            process::signal_group(pid, Signal::SIGKILL);
                            term_sent_at = Some(now + Duration::from_secs(3600));
                        }
                    } else if let Some(d) = out.final_at {
                        if now >= drain_at(out.rpc_done, d, last_output, quiet, drain_max) {
                            drained = true;
                            process::signal_group(pid, Signal::SIGTERM);
                            term_sent_at = Some(now);
                        }
                    } else if now >= task_deadline {
                        stopped = Some((format!("the task timed out after {}", human(Duration::from_millis(cfg.task_timeout_ms))), false, "timeout"));
                        process::signal_group(pid, Signal::SIGTERM);
                        term_sent_at = Some(now);
                    } else if now >= watched_silence_from + no_output {
                        stopped = Some((format!("no output for {}", human(no_output)), true, "no_output"));
                        process::signal_group(pid, Signal::SIGTERM);
                        term_sent_at = Some(now);
                    }
                }
            }
        }
    }
    // Whether crew had to stop a worker that had answered (`drained`) or it ended by itself.
    tracing::info!(
        pid,
        code = exit.and_then(|s| s.code()),
        drained,
        "worker ended"
    );
    // What the worker wrote to stderr just before it exited may not be read yet (the loop ends
    // on exit and stdout's end): take it, briefly, for the error message.
    if let Some(s) = stderr.as_mut() {
        let _ = tokio::time::timeout(EXIT_QUIET, async {
            while let Ok(n @ 1..) = s.read(&mut stderr_chunk).await {
                stderr_tail.push(stderr_chunk.get(..n).unwrap_or_default());
            }
        })
        .await;
    }
    // Whatever is left in the group (tools the agent started) goes too.
    drop(group);
    drop(stdin);
    let rest = stderr::drain(&mut stderr).await;
    stderr_tail.push(&rest);
    // The last line too: the log below keeps what the tail has redacted.
    let stderr_tail = stderr_tail.finish();

    let Stdout {
        parser,
        mut transcript,
        any: any_stdout,
        question,
        ..
    } = out;
    let described = blocking(|| {
        if let Err(e) = transcript.finish() {
            tracing::warn!(error = %e, "the transcript could not be completed");
        }
        match transcript.artifact(transcript_name.clone()) {
            Some(a) => Ok(a),
            None if opened => artifacts::describe(run_dir, &transcript_name, "transcript"),
            None => Err(std::io::Error::other("no transcript was created")),
        }
    });
    if let Ok(a) = described {
        artifacts.push(a);
    }
    match blocking(|| stderr_tail.log.save(run_dir, &spec.task_id, spec.attempt)) {
        Ok(Some(a)) => artifacts.push(a),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "cannot keep the worker's stderr"),
    }

    let outcome = parser.outcome();
    let usage = outcome.usage;
    let model = outcome.model.clone();
    let with_model = |r: AttemptResult| match r {
        AttemptResult::Failed {
            usage,
            artifacts,
            error,
            retryable,
            reason,
            ..
        } => AttemptResult::Failed {
            usage,
            model: model.clone(),
            artifacts,
            error,
            retryable,
            reason,
        },
        other => other,
    };
    let stderr_tail = stderr_tail.text;
    if let Some((error, retryable, reason)) = stopped {
        return with_model(failed(usage, artifacts.clone(), error, retryable, reason));
    }
    if let Some(q) = question {
        return AttemptResult::Asked {
            usage,
            model,
            artifacts: artifacts.clone(),
            question: q,
            // What the answer continues: pi's file, else the id the CLI's stream named.
            session: session_file.or(outcome.session_id.clone()),
        };
    }
    let clean_exit = drained || exit.is_some_and(|s| s.success());
    if outcome.final_text.is_none() {
        if let Some(err) = &outcome.error {
            let retryable = outcome
                .retryable
                .unwrap_or_else(|| stream::is_retryable_message(err));
            return with_model(failed(
                usage,
                artifacts.clone(),
                err.clone(),
                retryable,
                "model_error",
            ));
        }
    }
    if clean_exit {
        return match &outcome.final_text {
            Some(text) => {
                match blocking(|| finish_result(run_dir, spec, text.as_bytes(), artifacts)) {
                    // A role that is there to change files and could change none did not do
                    // its job, whatever it answered.
                    Ok(())
                        if outcome.writes.all_refused() && stream::edits_files(&spec.plan.tools) =>
                    {
                        AttemptResult::NeedsAttention {
                            usage,
                            model,
                            artifacts: artifacts.clone(),
                            reason: format!(
                                "every file change the agent tried was refused ({} of {}); see the task's warnings",
                                outcome.writes.refused, outcome.writes.tried
                            ),
                        }
                    }
                    Ok(()) => AttemptResult::Completed {
                        usage,
                        model,
                        artifacts: artifacts.clone(),
                        reused_from: None,
                        commit: None,
                        verification: Vec::new(),
                    },
                    Err(e) => with_model(failed(
                        usage,
                        artifacts.clone(),
                        format!("cannot write the result: {e}"),
                        false,
                        "storage",
                    )),
                }
            }
            None => AttemptResult::NoFinalText {
                usage,
                model,
                artifacts: artifacts.clone(),
            },
        };
    }
    let code = exit
        .and_then(|s| s.code())
        .map(|c| c.to_string())
        .unwrap_or_else(|| "a signal".into());
    if !any_stdout {
        let detail = if stderr_tail.is_empty() {
            String::new()
        } else {
            format!(": {}", tail(&stderr_tail, 500))
        };
        return with_model(failed(
            usage,
            artifacts.clone(),
            format!("worker exited with {code} and no output{detail}"),
            true,
            "crash",
        ));
    }
    let msg = outcome
        .error
        .clone()
        .unwrap_or_else(|| format!("worker exited with {code}: {}", tail(&stderr_tail, 500)));
    let retryable = match (&outcome.error, outcome.retryable) {
        (Some(_), Some(r)) => r,
        _ => stream::is_retryable_message(&msg),
    };
    with_model(failed(usage, artifacts.clone(), msg, retryable, "exit"))
}

/// Take the stdout lines that are already waiting, without waiting for more (at most
/// `DRAIN_LINES`). False when stdout ended.
fn drain_ready_lines<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut lines::LineReader<R>,
    out: &mut Stdout,
) -> bool {
    for _ in 0..DRAIN_LINES {
        match lines.next_line().now_or_never() {
            Some(Ok(Some(line))) => out.line(&line),
            Some(Ok(None)) | Some(Err(_)) => return false,
            None => break,
        }
    }
    true
}

/// The end of the worker's stderr, for error messages: redacted line by line as it arrives
/// (a key printed there spans lines too), then cut to the last `STDERR_TAIL` bytes.
#[derive(Default)]
struct StderrTail {
    redactor: crew_core::redact::StreamRedactor,
    /// The redacted lines, bounded, for the stderr artifact: fed here, after redaction, so a
    /// secret spanning lines (a PEM block) is masked whole before any of it is cut or kept.
    log: stderr::StderrLog,
    /// The line still being written (flushed as a line past `STDERR_LINE_MAX`).
    partial: Vec<u8>,
    text: String,
}

const STDERR_LINE_MAX: usize = 64 << 10;

impl StderrTail {
    fn push(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            match piece.split_last() {
                Some((b'\n', line)) => {
                    self.partial.extend_from_slice(line);
                    self.flush();
                }
                _ => {
                    self.partial.extend_from_slice(piece);
                    if self.partial.len() > STDERR_LINE_MAX {
                        self.flush();
                    }
                }
            }
        }
    }

    fn flush(&mut self) {
        let raw = String::from_utf8_lossy(&self.partial);
        let line = self.redactor.line(raw.trim_end_matches('\r'));
        self.partial.clear();
        self.log.push(line.as_bytes());
        self.log.push(b"\n");
        self.text.push_str(&line);
        self.text.push('\n');
        if self.text.len() > STDERR_TAIL * 2 {
            self.text = tail(&self.text, STDERR_TAIL).to_string();
        }
    }

    /// Flushes the last line; `text` is then the trimmed tail for error messages.
    fn finish(mut self) -> StderrTail {
        if !self.partial.is_empty() {
            self.flush();
        }
        self.text = self.text.trim().to_string();
        self
    }
}

/// `1.5s`, `300s`, `250ms`: what a user set, not a rounded-down number.
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

fn tail(s: &str, n: usize) -> &str {
    let len = s.len();
    if len <= n {
        return s;
    }
    let mut start = len - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_prompt_file_is_shared_and_repaired() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let a = system_prompt_file(dir.path(), "You are A.").unwrap();
        let first = inode(&a);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "You are A.");
        // The same prompt again: the same file, not rewritten.
        assert_eq!(system_prompt_file(dir.path(), "You are A.").unwrap(), a);
        assert_eq!(inode(&a), first);
        // Another prompt: another file.
        let b = system_prompt_file(dir.path(), "You are B.").unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "You are B.");
        // Cut short (a power loss before writeback): written again.
        std::fs::write(&a, "").unwrap();
        assert_eq!(system_prompt_file(dir.path(), "You are A.").unwrap(), a);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "You are A.");
    }

    #[test]
    fn durations_read_as_configured() {
        for (ms, want) in [
            (250, "250ms"),
            (1000, "1s"),
            (1500, "1.5s"),
            (300_000, "300s"),
        ] {
            assert_eq!(human(Duration::from_millis(ms)), want);
        }
    }
}
