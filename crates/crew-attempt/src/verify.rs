//! Running one verification command (issue 17) after a task's agent finished: `sh -c
//! <command>` in the task's workspace, in its own process group, with the workers' filtered
//! environment and stdin `/dev/null`, bounded in time (`verify_timeout_ms`: SIGTERM to the
//! group, SIGKILL after `kill_grace_ms`) and in output (the last `verify_output_bytes` bytes
//! kept, redacted line by line as they arrive, like a worker's stderr). A stop from the actor
//! (cancel) kills the group at once. `sh -c` is deliberate: the commands come from the user's
//! own files or config (see `plan_checks`), written as they would be typed.

use crate::port::WorkerCtl;
use crate::process;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// After the command exited, how long its pipes may stay open (a background process it left).
const EXIT_DRAIN: Duration = Duration::from_millis(500);

pub struct Limits {
    pub timeout: Duration,
    pub grace: Duration,
    pub output_bytes: usize,
}

pub struct Ran {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The actor stopped the task (cancel) while the command ran.
    pub stopped: bool,
    pub duration: Duration,
    /// The kept end of the output, redacted.
    pub output: String,
    pub output_bytes: u64,
}

/// Output kept: the last `max` bytes of redacted lines.
struct Tail {
    lines: crate::lines::RedactedLines,
    kept: VecDeque<u8>,
    max: usize,
    total: u64,
    cut: bool,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        let (kept, max, cut) = (&mut self.kept, self.max, &mut self.cut);
        self.lines.push(bytes, |line| keep(kept, max, cut, line));
    }

    fn finish(mut self) -> (String, u64) {
        let (kept, max, cut) = (&mut self.kept, self.max, &mut self.cut);
        self.lines.finish(|line| keep(kept, max, cut, line));
        let bytes: Vec<u8> = self.kept.into_iter().collect();
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if self.cut {
            // The cut may have split a character: start at the next line.
            if let Some(nl) = text.find('\n') {
                text.drain(..=nl);
            }
            text.insert_str(0, "[… earlier output cut …]\n");
        }
        (text, self.total)
    }
}

fn keep(kept: &mut VecDeque<u8>, max: usize, cut: &mut bool, line: &str) {
    kept.extend(line.as_bytes());
    kept.push_back(b'\n');
    while kept.len() > max {
        kept.pop_front();
        *cut = true;
    }
}

pub async fn run(
    command: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
    limits: &Limits,
    launcher: &dyn crate::spawn::Launcher,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> std::io::Result<Ran> {
    let start = Instant::now();
    // Started like a worker (the launcher: crew's init, the box), stdin /dev/null.
    let (mut child, lifeline) = launcher.launch(crate::command::Program {
        program: "sh".into(),
        args: vec!["-c".into(), command.into()],
        cwd: cwd.display().to_string(),
        env: env.to_vec(),
        stdin: crate::command::Stdin::Null,
    })?;
    let pid = child.id().unwrap_or(0);
    // Whatever way this ends (a panic included), nothing of the group outlives it.
    let mut group = process::GroupGuard::new(pid, lifeline);
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let mut tail = Tail {
        lines: Default::default(),
        kept: VecDeque::new(),
        max: limits.output_bytes.max(1),
        total: 0,
        cut: false,
    };
    let (mut b1, mut b2) = (vec![0u8; 8192], vec![0u8; 8192]);
    let deadline = start + limits.timeout;
    let mut term_at: Option<Instant> = None;
    let (mut timed_out, mut stopped, mut ctl_open) = (false, false, true);
    let mut status = None;
    while status.is_none() {
        let kill_at = term_at.map(|t| t + limits.grace);
        tokio::select! {
            r = async { out.as_mut()?.read(&mut b1).await.ok() }, if out.is_some() => match r {
                Some(n @ 1..) => tail.push(b1.get(..n).unwrap_or_default()),
                _ => out = None,
            },
            r = async { err.as_mut()?.read(&mut b2).await.ok() }, if err.is_some() => match r {
                Some(n @ 1..) => tail.push(b2.get(..n).unwrap_or_default()),
                _ => err = None,
            },
            s = child.wait() => status = Some(s?),
            m = ctl.recv(), if ctl_open => match m {
                // Steering has no one to reach while the commands run.
                Some(WorkerCtl::Steer(_)) => {}
                Some(WorkerCtl::Stop { .. }) | None => {
                    ctl_open = false;
                    stopped = true;
                    group.kill();
                }
            },
            _ = tokio::time::sleep_until(deadline), if term_at.is_none() => {
                timed_out = true;
                group.terminate();
                term_at = Some(Instant::now());
            },
            _ = tokio::time::sleep_until(kill_at.unwrap_or(deadline)), if kill_at.is_some() => {
                group.kill();
                term_at = Some(Instant::now() + Duration::from_secs(3600));
            },
        }
    }
    // What is left in the group (a background job of the command) goes now; its pipes then
    // close, and what they still hold is read briefly.
    group.kill();
    let _ = tokio::time::timeout(EXIT_DRAIN, async {
        for pipe in [
            out.as_mut()
                .map(|o| o as &mut (dyn tokio::io::AsyncRead + Unpin + Send)),
            err.as_mut().map(|e| e as _),
        ]
        .into_iter()
        .flatten()
        {
            while let Ok(n @ 1..) = pipe.read(&mut b1).await {
                tail.push(b1.get(..n).unwrap_or_default());
            }
        }
    })
    .await;
    let (output, output_bytes) = tail.finish();
    Ok(Ran {
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        stopped,
        duration: start.elapsed(),
        output,
        output_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(timeout_ms: u64, bytes: usize) -> Limits {
        Limits {
            timeout: Duration::from_millis(timeout_ms),
            grace: Duration::from_millis(200),
            output_bytes: bytes,
        }
    }

    fn env() -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())]
    }

    async fn go(cmd: &str, l: Limits) -> Ran {
        let (_tx, mut rx) = mpsc::unbounded_channel();
        let dir = tempfile::tempdir().unwrap();
        run(cmd, dir.path(), &env(), &l, &crate::spawn::Local, &mut rx)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn exit_codes_output_and_bounds() {
        let r = go("echo out; echo err >&2; exit 3", limits(10_000, 1000)).await;
        assert_eq!(r.exit_code, Some(3));
        assert!(!r.timed_out);
        assert!(
            r.output.contains("out\n") && r.output.contains("err\n"),
            "{}",
            r.output
        );
        let r = go("yes line | head -c 100000", limits(10_000, 100)).await;
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(r.output_bytes, 100_000);
        assert!(
            r.output.starts_with("[… earlier output cut …]\n"),
            "{}",
            r.output
        );
        assert!(r.output.len() < 200, "{}", r.output.len());
    }

    #[tokio::test]
    async fn a_timeout_kills_the_group() {
        let started = Instant::now();
        let r = go("sleep 30 & sleep 30; echo never", limits(300, 1000)).await;
        assert!(r.timed_out);
        assert_eq!(r.exit_code, None);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!r.output.contains("never"));
    }

    #[tokio::test]
    async fn a_stop_kills_at_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let dir = tempfile::tempdir().unwrap();
        tx.send(WorkerCtl::Stop {
            reason: "cancel".into(),
        })
        .unwrap();
        let started = Instant::now();
        let r = run(
            "sleep 30",
            dir.path(),
            &env(),
            &limits(60_000, 100),
            &crate::spawn::Local,
            &mut rx,
        )
        .await
        .unwrap();
        assert!(r.stopped);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

/// Characters of a command's output in `task.completed` and in the retry's feedback.
const EVENT_TAIL: usize = 2000;

fn char_tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

/// A check that is not a command (scope, the no-change guard, a command that could not run)
/// as the outcome of one that failed, so a candidate's record lists every check it failed.
pub fn failed_check(check: &str, reason: String) -> crew_core::checks::VerifyOutcome {
    crew_core::checks::VerifyOutcome {
        command: check.to_string(),
        exit_code: Some(1),
        timed_out: false,
        duration_ms: 0,
        tail: char_tail(&reason, EVENT_TAIL),
        output_bytes: 0,
        artifact: String::new(),
    }
}

/// What a task's verification commands came to.
#[derive(Debug, Default)]
pub struct Checked {
    /// One per command run, in order, up to the first that failed.
    pub outcomes: Vec<crew_core::checks::VerifyOutcome>,
    /// Each command's output (`verify/<task>.attempt-<n>.<k>.txt`), not yet durable.
    pub artifacts: Vec<crew_core::run::ArtifactRef>,
    /// Why the work is refused: a command failed or could not run.
    pub failure: Option<String>,
    /// The owner stopped the task while a command ran.
    pub stopped: bool,
}

impl Checked {
    /// A candidate whose verification retries are spent (issue 36): its failing command rules
    /// it out rather than failing it. The failure moves into the outcomes (one is added when
    /// no command itself failed: one could not run), so `settle` completes the attempt with it
    /// recorded and the candidate stays a possible base of the fix when none passes. The same
    /// on crewd's machine and on a node.
    pub fn rule_out(&mut self) {
        if self.stopped {
            return;
        }
        if let Some(error) = self.failure.take() {
            if self
                .outcomes
                .iter()
                .all(crew_core::checks::VerifyOutcome::passed)
            {
                self.outcomes.push(failed_check("(verification)", error));
            }
        }
    }
}

/// Run `commands` in order in `cwd` until one fails, keeping each one's output in `run_dir`.
/// `launcher` starts each (crew's init, a box: the owner's choice). The same on crewd's machine
/// and on a cluster node, so a remote task's checks read as a local one's.
#[allow(clippy::too_many_arguments)]
pub async fn run_all(
    commands: &[String],
    cwd: &Path,
    env: &[(OsString, OsString)],
    limits: &Limits,
    launcher: &(dyn Fn() -> Result<Box<dyn crate::spawn::Launcher>, String> + Sync),
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
    run_dir: &Path,
    key: &crate::port::AttemptKey,
) -> Checked {
    let mut checked = Checked::default();
    for (k, command) in commands.iter().enumerate() {
        tracing::info!(command = %command, "verification command");
        let ran = match launcher() {
            Err(e) => Err(std::io::Error::other(e)),
            Ok(l) => run(command, cwd, env, limits, l.as_ref(), ctl).await,
        };
        let ran = match ran {
            Ok(r) => r,
            Err(e) => {
                checked.failure = Some(format!("cannot run verification command `{command}`: {e}"));
                break;
            }
        };
        if ran.stopped {
            checked.stopped = true;
            break;
        }
        let name = format!(
            "verify/{}.attempt-{}.{}.txt",
            key.task_id,
            key.attempt,
            k + 1
        );
        let ended = match (ran.timed_out, ran.exit_code) {
            (true, _) => format!("timed out after {}", crate::human(limits.timeout)),
            (false, Some(c)) => format!("exited with {c}"),
            (false, None) => "was killed by a signal".to_string(),
        };
        let text = format!(
            "$ {command}\n{}\n[{ended} after {}; {} bytes of output]\n",
            ran.output.trim_end(),
            crate::human(ran.duration),
            ran.output_bytes
        );
        match crate::blocking(|| crate::artifacts::put(run_dir, &name, "verify", text.as_bytes())) {
            Ok(a) => checked.artifacts.push(a),
            Err(e) => tracing::warn!(error = %e, "cannot keep a verification command's output"),
        }
        let outcome = crew_core::checks::VerifyOutcome {
            command: command.clone(),
            exit_code: ran.exit_code,
            timed_out: ran.timed_out,
            duration_ms: u64::try_from(ran.duration.as_millis()).unwrap_or(u64::MAX),
            tail: char_tail(&ran.output, EVENT_TAIL),
            output_bytes: ran.output_bytes,
            artifact: name,
        };
        let passed = outcome.passed();
        if !passed {
            // The failing part first, the raw tail after it (issue 32 item 5).
            checked.failure = Some(crew_core::checks::failure_message(
                command,
                &ended,
                &outcome.tail,
                &outcome.artifact,
            ));
        }
        checked.outcomes.push(outcome);
        if !passed {
            break;
        }
    }
    checked
}

/// An attempt's result after its checks: a completed attempt whose checks failed is a
/// retryable `verify` failure (its work refused), one stopped while checking is cancelled.
pub fn settle(
    result: crew_core::run::AttemptResult,
    checked: Checked,
) -> crew_core::run::AttemptResult {
    use crew_core::run::{AttemptResult, FailReason};
    let AttemptResult::Completed {
        usage,
        model,
        mut artifacts,
        reused_from,
        commit,
        ..
    } = result
    else {
        return result;
    };
    artifacts.extend(checked.artifacts);
    if checked.stopped {
        return AttemptResult::Failed {
            usage,
            model,
            artifacts,
            error: "stopped while verifying".into(),
            retryable: false,
            reason: FailReason::Cancelled.into(),
        };
    }
    match checked.failure {
        None => AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            commit,
            verification: checked.outcomes,
        },
        Some(error) => AttemptResult::Failed {
            usage,
            model,
            artifacts,
            error,
            retryable: true,
            reason: crew_core::checks::VERIFY_FAILED.into(),
        },
    }
}
