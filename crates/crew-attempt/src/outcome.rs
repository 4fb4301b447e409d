//! The last phase: what the attempt came to. [`classify`] is pure over what supervision
//! collected (why crew stopped the worker, its question, exit status, whether it was drained,
//! whether it printed anything, the stream's `Outcome`, the stderr tail); [`settle`] turns the
//! verdict into an `AttemptResult`, writing the final answer as the task's result on the way.

use crate::fault;
use crew_core::run::{ArtifactRef, AttemptResult, FailReason};
use crew_core::stream::{self, Outcome};
use crew_core::usage::Usage;
use std::path::Path;
use std::process::ExitStatus;

/// How much of the stderr tail an error message quotes.
const ERROR_STDERR: usize = 500;

/// A failed attempt's error, whether another attempt may do better, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub error: String,
    pub retryable: bool,
    pub reason: FailReason,
}

impl Failure {
    pub fn new(error: String, retryable: bool, reason: FailReason) -> Failure {
        Failure {
            error,
            retryable,
            reason,
        }
    }

    pub fn into_result(
        self,
        usage: Usage,
        model: Option<String>,
        artifacts: Vec<ArtifactRef>,
    ) -> AttemptResult {
        AttemptResult::Failed {
            usage,
            model,
            artifacts,
            error: self.error,
            retryable: self.retryable,
            reason: self.reason.into(),
        }
    }
}

/// What supervision collected, once the worker is gone.
#[derive(Debug, Default)]
pub struct Collected {
    /// Why crew stopped the worker, if it did for a reason of its own (not a drain).
    pub stopped: Option<Failure>,
    /// The question the agent asked.
    pub question: Option<String>,
    pub exit: Option<ExitStatus>,
    /// crew stopped a worker that had given its final answer.
    pub drained: bool,
    /// The worker printed anything on stdout.
    pub any_stdout: bool,
    pub outcome: Outcome,
    /// The end of the worker's stderr, redacted and trimmed.
    pub stderr_tail: String,
    /// The role is there to change files (`stream::edits_files` of its tools).
    pub edits_files: bool,
    /// pi's session file (what an answer continues).
    pub session_file: Option<String>,
    /// stdout lines longer than `lines::MAX_LINE`, cut (a final answer in one is unreadable).
    pub cut_lines: u64,
}

/// What an attempt came to, before its result is written.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Failed(Failure),
    Asked {
        question: String,
        session: Option<String>,
    },
    /// A final answer, to be written as the task's result; `attention` when it is not enough.
    Answered {
        text: String,
        attention: Option<String>,
    },
    NoFinalText,
    /// No final answer could be read, and lines of the output were cut for their length: the
    /// answer was likely in one of them.
    AnswerCut {
        lines: u64,
    },
}

/// Pure: the verdict over what was collected. The order of the rules is the rule: crew's own
/// stop first, then a question, then the stream's error without an answer, then a clean end,
/// then an unclean exit.
pub fn classify(c: &Collected) -> Verdict {
    if let Some(f) = &c.stopped {
        return Verdict::Failed(f.clone());
    }
    let o = &c.outcome;
    if let Some(q) = &c.question {
        return Verdict::Asked {
            question: q.clone(),
            // What the answer continues: pi's file, else the id the CLI's stream named.
            session: c.session_file.clone().or(o.session_id.clone()),
        };
    }
    let clean_exit = c.drained || c.exit.is_some_and(|s| s.success());
    if o.final_text.is_none() {
        if let Some(err) = &o.error {
            let retryable = o
                .retryable
                .unwrap_or_else(|| stream::is_retryable_message(err));
            return Verdict::Failed(Failure::new(err.clone(), retryable, FailReason::ModelError));
        }
    }
    if clean_exit {
        return match &o.final_text {
            Some(text) => Verdict::Answered {
                text: text.clone(),
                // A role that is there to change files and could change none did not do its
                // job, whatever it answered.
                attention: (o.writes.all_refused() && c.edits_files).then(|| {
                    format!(
                        "every file change the agent tried was refused ({} of {}); see the task's warnings",
                        o.writes.refused, o.writes.tried
                    )
                }),
            },
            None if c.cut_lines > 0 => Verdict::AnswerCut {
                lines: c.cut_lines,
            },
            None => Verdict::NoFinalText,
        };
    }
    // crew's init could not start the program: the spawn failure it would have been without it.
    if let (Some(127), false, Some(errno)) = (
        c.exit.and_then(|s| s.code()),
        c.any_stdout,
        crew_box::init::not_started(&c.stderr_tail),
    ) {
        let e = std::io::Error::from_raw_os_error(errno);
        let what = c
            .stderr_tail
            .lines()
            .find_map(|l| l.strip_prefix(crew_box::init::NOT_STARTED))
            .and_then(|l| l.split_once(": "))
            .map_or("the worker", |(name, _)| name);
        return Verdict::Failed(Failure::new(
            format!("failed to start {what}: {e}"),
            stream::is_retryable_spawn_error(e.kind()),
            FailReason::Spawn,
        ));
    }
    let code = c
        .exit
        .and_then(|s| s.code())
        .map(|c| c.to_string())
        .unwrap_or_else(|| "a signal".into());
    if !c.any_stdout {
        let detail = if c.stderr_tail.is_empty() {
            String::new()
        } else {
            format!(": {}", crate::tail(&c.stderr_tail, ERROR_STDERR))
        };
        return Verdict::Failed(Failure::new(
            format!("worker exited with {code} and no output{detail}"),
            true,
            FailReason::Crash,
        ));
    }
    let msg = o.error.clone().unwrap_or_else(|| {
        format!(
            "worker exited with {code}: {}",
            crate::tail(&c.stderr_tail, ERROR_STDERR)
        )
    });
    let retryable = match (&o.error, o.retryable) {
        (Some(_), Some(r)) => r,
        _ => stream::is_retryable_message(&msg),
    };
    Verdict::Failed(Failure::new(msg, retryable, FailReason::Exit))
}

/// The verdict as the attempt's result. `write` writes the final answer as the task's result
/// (adding its artifacts); failing that fails the attempt.
pub fn settle(
    verdict: Verdict,
    usage: Usage,
    model: Option<String>,
    artifacts: &mut Vec<ArtifactRef>,
    write: impl FnOnce(&str, &mut Vec<ArtifactRef>) -> std::io::Result<()>,
) -> AttemptResult {
    match verdict {
        Verdict::Failed(f) => f.into_result(usage, model, artifacts.clone()),
        Verdict::Asked { question, session } => AttemptResult::Asked {
            usage,
            model,
            artifacts: artifacts.clone(),
            question,
            session,
        },
        Verdict::NoFinalText => AttemptResult::NoFinalText {
            usage,
            model,
            artifacts: artifacts.clone(),
        },
        Verdict::AnswerCut { lines } => AttemptResult::NeedsAttention {
            usage,
            model,
            artifacts: artifacts.clone(),
            reason: format!(
                "the worker exited cleanly, but no final answer could be read: {lines} line(s) of its output were over {} MiB and cut, the answer likely among them (ask for a shorter answer, or for the long part in a file)",
                crate::lines::MAX_LINE >> 20
            ),
        },
        Verdict::Answered { text, attention } => match write(&text, artifacts) {
            Ok(()) => match attention {
                Some(reason) => AttemptResult::NeedsAttention {
                    usage,
                    model,
                    artifacts: artifacts.clone(),
                    reason,
                },
                None => AttemptResult::Completed {
                    usage,
                    model,
                    artifacts: artifacts.clone(),
                    reused_from: None,
                    commit: None,
                    verification: Vec::new(),
                },
            },
            Err(e) => Failure::new(
                format!("cannot write the result: {e}"),
                false,
                FailReason::Storage,
            )
            .into_result(usage, model, artifacts.clone()),
        },
    }
}

/// Write the task's result (`results/<task>.txt`) and the step's shared output.
pub fn write_result(
    run_dir: &Path,
    task_id: &str,
    output: Option<&str>,
    text: &[u8],
    artifacts: &mut Vec<ArtifactRef>,
) -> std::io::Result<()> {
    fault::hit("result")?;
    artifacts.push(crate::artifacts::put(
        run_dir,
        &format!("results/{task_id}.txt"),
        "result",
        text,
    )?);
    if let Some(out) = output {
        if crew_core::ids::is_safe_artifact_name(out) {
            artifacts.push(crate::artifacts::put(
                run_dir,
                &format!("shared/{out}"),
                "shared",
                text,
            )?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_core::stream::Writes;
    use std::os::unix::process::ExitStatusExt;

    fn exited(code: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(code << 8))
    }

    fn killed() -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(9))
    }

    fn answered(text: &str) -> Outcome {
        Outcome {
            final_text: Some(text.into()),
            ..Outcome::default()
        }
    }

    fn failed(error: &str, retryable: bool, reason: FailReason) -> Verdict {
        Verdict::Failed(Failure::new(error.into(), retryable, reason))
    }

    #[test]
    fn the_rules_in_their_order() {
        let stop = Failure::new("no output for 1s".into(), true, FailReason::NoOutput);
        let all_refused = Outcome {
            final_text: Some("done".into()),
            writes: Writes {
                tried: 2,
                refused: 2,
            },
            ..Outcome::default()
        };
        let model_error = Outcome {
            error: Some("invalid api key".into()),
            ..Outcome::default()
        };
        let rate_limited = Outcome {
            error: Some("429 rate limit".into()),
            ..Outcome::default()
        };
        let cases: Vec<(&str, Collected, Verdict)> = vec![
            (
                "crew's stop wins over an answer",
                Collected {
                    stopped: Some(stop.clone()),
                    outcome: answered("x"),
                    exit: exited(0),
                    ..Collected::default()
                },
                Verdict::Failed(stop),
            ),
            (
                "a question wins over an exit code; pi's file names the session",
                Collected {
                    question: Some("which?".into()),
                    session_file: Some("/s.jsonl".into()),
                    exit: exited(1),
                    ..Collected::default()
                },
                Verdict::Asked {
                    question: "which?".into(),
                    session: Some("/s.jsonl".into()),
                },
            ),
            (
                "else the stream's session id",
                Collected {
                    question: Some("which?".into()),
                    outcome: Outcome {
                        session_id: Some("abc".into()),
                        ..Outcome::default()
                    },
                    ..Collected::default()
                },
                Verdict::Asked {
                    question: "which?".into(),
                    session: Some("abc".into()),
                },
            ),
            (
                "a model error without an answer, even on exit 0",
                Collected {
                    outcome: model_error.clone(),
                    exit: exited(0),
                    any_stdout: true,
                    ..Collected::default()
                },
                failed("invalid api key", false, FailReason::ModelError),
            ),
            (
                "a transient model error is retryable",
                Collected {
                    outcome: rate_limited,
                    exit: exited(1),
                    ..Collected::default()
                },
                failed("429 rate limit", true, FailReason::ModelError),
            ),
            (
                "the stream's own retryable flag wins",
                Collected {
                    outcome: Outcome {
                        retryable: Some(true),
                        ..model_error
                    },
                    ..Collected::default()
                },
                failed("invalid api key", true, FailReason::ModelError),
            ),
            (
                "a clean exit with an answer",
                Collected {
                    outcome: answered("the answer"),
                    exit: exited(0),
                    any_stdout: true,
                    ..Collected::default()
                },
                Verdict::Answered {
                    text: "the answer".into(),
                    attention: None,
                },
            ),
            (
                "drained counts as clean, whatever the signal",
                Collected {
                    outcome: answered("a"),
                    exit: killed(),
                    drained: true,
                    ..Collected::default()
                },
                Verdict::Answered {
                    text: "a".into(),
                    attention: None,
                },
            ),
            (
                "every write refused in a writing role needs attention",
                Collected {
                    outcome: all_refused.clone(),
                    exit: exited(0),
                    edits_files: true,
                    ..Collected::default()
                },
                Verdict::Answered {
                    text: "done".into(),
                    attention: Some(
                        "every file change the agent tried was refused (2 of 2); see the task's warnings"
                            .into(),
                    ),
                },
            ),
            (
                "…but not in a role that does not edit",
                Collected {
                    outcome: all_refused,
                    exit: exited(0),
                    ..Collected::default()
                },
                Verdict::Answered {
                    text: "done".into(),
                    attention: None,
                },
            ),
            (
                "a clean exit without an answer",
                Collected {
                    exit: exited(0),
                    any_stdout: true,
                    ..Collected::default()
                },
                Verdict::NoFinalText,
            ),
            (
                "a clean exit without an answer, a line of the output cut",
                Collected {
                    exit: exited(0),
                    any_stdout: true,
                    cut_lines: 1,
                    ..Collected::default()
                },
                Verdict::AnswerCut { lines: 1 },
            ),
            (
                "an answer read, a line cut: the answer",
                Collected {
                    exit: exited(0),
                    outcome: answered("x"),
                    cut_lines: 2,
                    ..Collected::default()
                },
                Verdict::Answered {
                    text: "x".into(),
                    attention: None,
                },
            ),
            (
                "a crash without output quotes stderr",
                Collected {
                    exit: exited(2),
                    stderr_tail: "boom".into(),
                    ..Collected::default()
                },
                failed(
                    "worker exited with 2 and no output: boom",
                    true,
                    FailReason::Crash,
                ),
            ),
            (
                "a signal without output or stderr",
                Collected {
                    exit: killed(),
                    ..Collected::default()
                },
                failed(
                    "worker exited with a signal and no output",
                    true,
                    FailReason::Crash,
                ),
            ),
            (
                "an unclean exit after output, with an answer, is an exit failure",
                Collected {
                    outcome: answered("half"),
                    exit: exited(3),
                    any_stdout: true,
                    stderr_tail: "invalid api key".into(),
                    ..Collected::default()
                },
                failed(
                    "worker exited with 3: invalid api key",
                    false,
                    FailReason::Exit,
                ),
            ),
            (
                "an unclean exit reads retryable from the message",
                Collected {
                    exit: exited(1),
                    any_stdout: true,
                    stderr_tail: "503 overloaded".into(),
                    ..Collected::default()
                },
                failed(
                    "worker exited with 1: 503 overloaded",
                    true,
                    FailReason::Exit,
                ),
            ),
        ];
        for (name, collected, want) in cases {
            assert_eq!(classify(&collected), want, "{name}");
        }
    }

    #[test]
    fn settling_writes_the_answer_or_fails_on_storage() {
        let ok = settle(
            Verdict::Answered {
                text: "t".into(),
                attention: None,
            },
            Usage::default(),
            Some("m".into()),
            &mut Vec::new(),
            |_, _| Ok(()),
        );
        assert!(matches!(ok, AttemptResult::Completed { model: Some(m), .. } if m == "m"));
        let broken = settle(
            Verdict::Answered {
                text: "t".into(),
                attention: None,
            },
            Usage::default(),
            None,
            &mut Vec::new(),
            |_, _| Err(std::io::Error::other("disk full")),
        );
        match broken {
            AttemptResult::Failed {
                error,
                retryable,
                reason,
                ..
            } => {
                assert_eq!(error, "cannot write the result: disk full");
                assert!(!retryable);
                assert_eq!(reason, "storage");
            }
            other => panic!("{other:?}"),
        }
    }
}
