//! What crosses between the actor and a worker, and nothing else: the attempt's input frozen on
//! the actor (`AttemptSpec`), what the actor sends a running worker (`WorkerCtl`), and the
//! narrow port a worker reports through (`Port`: spawned, progress, warnings, the one final
//! report). The executor depends on this module, never on the actor: the arrow goes
//! actor → workers → executor → attempt, and the actor side implements the port.

use crate::config::RuntimeConfig;
use crew_core::plan::PlannedTask;
use crew_core::run::{AttemptResult, Reuse};
use crew_core::usage::Usage;
use std::path::PathBuf;

/// Which attempt a note is about.
#[derive(Debug, Clone)]
pub struct AttemptKey {
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
}

pub struct AttemptSpec {
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
    pub cwd: String,
    pub goal: String,
    pub runtime_name: String,
    pub runtime: RuntimeConfig,
    pub plan: std::sync::Arc<PlannedTask>,
    pub model: Option<String>,
    /// The task's fallback models after `model` (for a CLI with a fallback of its own).
    pub fallback_models: Vec<String>,
    /// Direct dependencies: (task id, role).
    pub deps: Vec<(String, String)>,
    pub steers: Vec<String>,
    pub answers: Vec<String>,
    /// The attempt answers a question: it continues the CLI session that asked, if it can.
    pub resume: Option<Resume>,
    pub run_dir: PathBuf,
    pub reuse: Reuse,
    /// Worktree mode: the task works in its own worktree, made before the worker starts.
    pub workspace: Option<crate::workspace::TaskWorkspace>,
    /// Why the previous attempt's work was refused (a failed verification), for the prompt.
    pub feedback: Option<String>,
    /// A writing task's cache entry in worktree mode, held until its result commit exists
    /// (`reuse::insert_after_commit`).
    pub cache_after_commit: std::sync::Mutex<Option<(String, crate::results::CachedResult)>>,
    /// A fan-out step's repair attempt: why its last block was refused.
    pub fan_out_repair: Option<String>,
    /// A judge's repair attempt: why its last answer held no readable verdict.
    pub verdict_repair: Option<String>,
    /// A judge in a worktree run: the run's base commit, so its prompt names the range under
    /// review (`<base>..HEAD`).
    pub judge_base: Option<String>,
    /// The project's per-task checks (`task_verify_commands`, frozen in the run), run after a
    /// task that can edit and has no verification of its own.
    pub task_verify_commands: Vec<String>,
}

pub struct Report {
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
    pub result: AttemptResult,
    /// A fan-out step's completed attempt: its final answer, for the actor to validate.
    pub answer: Option<crew_core::fanout::Answer>,
}
/// A recorded CLI session to continue with the user's answer.
#[derive(Debug, Clone)]
pub struct Resume {
    /// pi: the session file; claude / codex: the session id.
    pub session: String,
    pub answer: String,
}

impl AttemptSpec {
    pub fn key(&self) -> AttemptKey {
        AttemptKey {
            run_id: self.run_id.clone(),
            task_id: self.task_id.clone(),
            attempt: self.attempt,
        }
    }
}

/// What the actor sends a running worker.
pub enum WorkerCtl {
    Stop { reason: String },
    Steer(String),
}

/// How a worker reaches the actor. Each call is fire-and-forget: the actor applies it in order
/// with everything else it does, and drops notes of an attempt that is no longer current.
pub trait Port: Send + Sync {
    /// The worker process started (its pid, and whether it reads live steering messages).
    fn spawned(&self, key: &AttemptKey, pid: u32, pid_start: u64, live: bool);
    /// Live usage and the tool in use.
    fn progress(&self, key: &AttemptKey, usage: Usage, tool: Option<String>);
    /// The worker's CLI refused a tool call.
    fn warning(&self, key: &AttemptKey, tool: String, message: String);
    /// A live worker gave its final answer (pi `agent_end`, claude's last `result`): it reads no
    /// more live messages.
    fn answered(&self, key: &AttemptKey);
    /// The attempt ended: exactly once per attempt.
    fn finished(&self, report: Report);
}
