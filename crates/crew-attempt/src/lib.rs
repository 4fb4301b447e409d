//! Running one attempt of one crew task as a worker process, in four phases, each in its own
//! module: `command` (the worker's files, session, argv, cwd, env and stdin, from a serializable
//! [`WorkerSpec`]), `spawn` (a [`spawn::Launcher`] starts it in its own process group),
//! `supervise` (one wake-up enum, one handler per wake-up, pure deadline and drain rules), and
//! `outcome` (a pure classification of what was collected into an `AttemptResult`).
//!
//! The worker gets stdin `/dev/null` (pi and codex block on an open stdin), or the prompt file
//! when its adapter reads a long prompt from stdin, or a pipe the owner holds (live mode: pi's
//! rpc mode, Claude Code's stream-json input), its own process group, a filtered environment
//! and the run's cwd. Its stdout is read line by line without ever blocking it; a no-output
//! watchdog, an overall timeout and a final drain (agents linger after answering) bound its
//! life; stopping it is SIGTERM to the group, SIGKILL after a grace period.
//!
//! This crate knows nothing of the daemon: crewd (its actor, journal and state) and a worker
//! binary both drive an attempt through [`run`] and hear from it through [`port::Port`]. It
//! also holds what both need around an attempt: artifact files, verification and pre-step
//! commands (`verify`, `pre_step`), the worker's stderr log and environment, and the rules of
//! the box around an attempt (`sandbox`).

pub mod artifacts;
pub mod command;
pub mod durable;
pub mod env;
pub mod fault;
mod lines;
mod live;
pub mod log;
pub mod outcome;
pub mod port;
pub mod pre_step;
pub mod process;
pub mod sandbox;
pub mod spawn;
pub mod stderr;
mod stdout;
mod supervise;
pub use supervise::asked_stream;
pub mod verify;

pub use command::{Limits, WorkerSpec};
pub use outcome::Failure;

use crew_core::run::{ArtifactRef, AttemptResult};
use crew_core::stream::SessionSpec;
use port::{Port, WorkerCtl};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Run the worker process of one attempt, from its command to its classified result. The
/// attempt's prompt is already in `prompts/<task>.md` of the run directory (the prompt
/// artifact, in `artifacts`); the transcript, stderr log and result files it writes are added
/// to `artifacts`, not made durable. `session` builds the agent CLI's session (the owner knows
/// where sessions live), called where the command phase needs it.
pub async fn run(
    spec: &WorkerSpec,
    session: impl FnOnce() -> Result<SessionSpec, String>,
    launcher: &dyn spawn::Launcher,
    port: &Arc<dyn Port>,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
    artifacts: &mut Vec<ArtifactRef>,
) -> AttemptResult {
    let early = |f: Failure, artifacts: &Vec<ArtifactRef>| {
        f.into_result(Default::default(), None, artifacts.clone())
    };
    let cmd = match command::worker_command(spec, session) {
        Ok(cmd) => cmd,
        Err(f) => return early(f, artifacts),
    };
    let spawned = match spawn::spawn(launcher, cmd.program) {
        Ok(s) => s,
        Err(f) => return early(f, artifacts),
    };
    tracing::info!(pid = spawned.pid, "worker started");
    port.spawned(&spec.key, spawned.pid, spawned.pid_start, spec.rpc);
    let collected =
        match supervise::supervise(spec, &cmd.launch, spawned, port, ctl, artifacts).await {
            Ok(c) => c,
            Err(f) => return early(f, artifacts),
        };
    let collected = outcome::Collected {
        session_file: cmd.session_file,
        ..collected
    };
    let usage = collected.outcome.usage;
    let model = collected.outcome.model.clone();
    let verdict = outcome::classify(&collected);
    outcome::settle(verdict, usage, model, artifacts, |text, artifacts| {
        blocking(|| {
            outcome::write_result(
                &spec.run_dir,
                &spec.key.task_id,
                spec.output.as_deref(),
                text.as_bytes(),
                artifacts,
            )
        })
    })
}

/// Run blocking file work (reads, writes, syncs) without stalling the other tasks of the runtime thread.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// `1.5s`, `300s`, `250ms`: what a user set, not a rounded-down number.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// The last `n` bytes of `s`, from a character boundary.
pub fn tail(s: &str, n: usize) -> &str {
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
