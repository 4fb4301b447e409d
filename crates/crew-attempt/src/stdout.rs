//! The worker's stdout: every line redacted where it enters, written to the transcript
//! (bounded) and fed to the adapter's parser; what the stream said so far (final answer,
//! question, tool in use, live-input bookkeeping) is kept here for the supervisor's rules.

use crate::lines;
use crate::port::{AttemptKey, Port};
use crew_core::run::ArtifactRef;
use crew_core::stream::{self, WorkerEvent};
use futures::FutureExt;
use std::sync::Arc;
use tokio::time::Instant;

/// Transcripts keep at most this much (the rest is counted, not stored).
const TRANSCRIPT_MAX: u64 = 16 << 20;
/// Most stdout lines taken at once, without waiting, before a deadline is judged.
const DRAIN_LINES: usize = 4096;

/// The stream as redacted where it entered (`Stdout::line`), capped at `TRANSCRIPT_MAX`. Buffered std I/O: a line costs a
/// copy, a 64 KiB write now and then reaches the page cache; it is made durable with the
/// attempt's other files.
pub(crate) struct Transcript {
    pub(crate) file: Option<std::io::BufWriter<std::fs::File>>,
    pub(crate) written: u64,
    pub(crate) dropped: u64,
    /// Of every byte written, so naming the transcript does not read it back (up to 16 MiB).
    pub(crate) digest: sha2::Sha256,
    /// A write failed (or the file could not be created): the file holds an unknown prefix, and
    /// only a read-back can describe it.
    pub(crate) broken: bool,
}

impl Transcript {
    /// A new transcript at `path`; without a file (it could not be created) the attempt runs
    /// on, with no transcript. The flag: the file was created.
    pub(crate) fn create(path: &std::path::Path) -> (Transcript, bool) {
        let file = crate::blocking(|| {
            crate::fault::hit("transcript")?;
            if let Some(d) = path.parent() {
                std::fs::create_dir_all(d)?;
            }
            std::fs::File::create(path)
        });
        if let Err(e) = &file {
            tracing::warn!(error = %e, "cannot create the transcript; the attempt runs without one");
        }
        let opened = file.is_ok();
        let transcript = Transcript {
            file: file
                .ok()
                .map(|f| std::io::BufWriter::with_capacity(64 << 10, f)),
            written: 0,
            dropped: 0,
            digest: Default::default(),
            broken: !opened,
        };
        (transcript, opened)
    }

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

    /// Hand what is buffered to the file (not synced: the page cache outlives the daemon).
    pub(crate) fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            if std::io::Write::flush(f).is_err() {
                self.file = None;
                self.broken = true;
            }
        }
    }

    /// The transcript as an artifact, from what was written (after a successful `finish`).
    pub(crate) fn artifact(self, name: String) -> Option<ArtifactRef> {
        use sha2::Digest;
        (!self.broken).then(|| ArtifactRef {
            name,
            kind: crew_core::run::ArtifactKind::Transcript,
            bytes: self.written,
            sha256: crew_core::run::Sha256::from_bytes(self.digest.finalize().into()),
        })
    }

    /// Note what was cut (past the cap, so the note itself is never cut) and flush.
    pub(crate) fn finish(&mut self) -> std::io::Result<()> {
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
pub(crate) struct Stdout {
    /// Where the worker's output enters the daemon: every line is redacted here, before the
    /// transcript and the parser see it, so nothing downstream (results, questions, errors,
    /// events, summaries, bundles) can carry a secret the worker printed.
    pub(crate) redactor: crew_core::redact::StreamRedactor,
    /// The redactor's lines, between `push` and the transcript (kept to reuse its buffer).
    pub(crate) redacted: Vec<String>,
    pub(crate) parser: Box<dyn stream::StreamParser>,
    pub(crate) transcript: Transcript,
    pub(crate) any: bool,
    /// When the last stdout line arrived.
    pub(crate) last: Instant,
    pub(crate) question: Option<String>,
    pub(crate) current_tool: Option<String>,
    pub(crate) progress_dirty: bool,
    /// When the final answer (or a question) arrived: the final drain runs from here.
    pub(crate) final_at: Option<Instant>,
    /// Live mode (pi's rpc mode, Claude Code's stream-json input): only `Finished` is final (a
    /// steer that arrives while the last message streams makes the agent go on after it), and
    /// it is the moment to close the worker's stdin.
    pub(crate) rpc: bool,
    /// Live mode: `Finished` came; the worker has nothing more to do.
    pub(crate) rpc_done: bool,
    /// Live mode of an adapter that acknowledges its input (`live_input_is_acknowledged`):
    /// messages written to the worker's stdin and not yet taken. A `Finished` with one pending
    /// is not the last: the agent runs another turn for it.
    pub(crate) pending_inputs: Option<u32>,
    /// Live mode: when a `Finished` came while messages were pending. The agent takes a message
    /// it holds right after its turn ends and says so at once; one that says nothing for the
    /// final-drain time did not take it (a CLI that does not echo, a message it dropped), and
    /// its last answer stands instead of the task waiting for the no-output watchdog.
    pub(crate) unacked_since: Option<Instant>,
    /// A question ends the agent's turn at once (pi: crew's extension returns `terminate`).
    /// Claude Code, Codex and opencode make one more model call after the ask tool's result: their
    /// turn's end, not the question, starts the drain, so the session they resume is whole.
    pub(crate) ask_ends_turn: bool,
    pub(crate) warnings: Warnings,
}

/// Refused tool calls, told to the actor as `task.warning`s as they happen.
pub(crate) struct Warnings {
    pub(crate) port: Arc<dyn Port>,
    pub(crate) key: AttemptKey,
    pub(crate) sent: u32,
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
    pub(crate) fn line(&mut self, raw: &str) {
        self.last = Instant::now();
        self.any = true;
        self.through_redactor(|r, lines| r.push(raw, lines));
    }

    /// stdout ended (or the attempt does): the deltas the redactor holds are passed on.
    pub(crate) fn end(&mut self) {
        self.through_redactor(|r, lines| r.finish(lines));
    }

    /// What the redactor hands on (`step`), line by line to the transcript and the parser.
    fn through_redactor(
        &mut self,
        step: impl FnOnce(&mut crew_core::redact::StreamRedactor, &mut Vec<String>),
    ) {
        let mut lines = std::mem::take(&mut self.redacted);
        step(&mut self.redactor, &mut lines);
        for line in lines.drain(..) {
            self.take(&line);
        }
        self.redacted = lines;
    }

    /// One redacted line: to the transcript and the parser.
    fn take(&mut self, line: &str) {
        self.transcript.line(line);
        let before = self.parser.usage();
        let events = self.parser.feed_line(line);
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

/// Take the stdout lines that are already waiting, without waiting for more (at most
/// `DRAIN_LINES`). False when stdout ended.
pub(crate) fn drain_ready_lines<R: tokio::io::AsyncBufRead + Unpin>(
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
