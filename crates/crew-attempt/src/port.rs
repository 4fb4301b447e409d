//! What crosses between whoever owns a task (crewd's actor, a worker binary's reporter) and a
//! running attempt: which attempt a note is about (`AttemptKey`), what the owner sends a running
//! worker (`WorkerCtl`), and the narrow port an attempt reports through (`Port`: spawned,
//! progress, warnings, answered, the one final report). The owner implements the port; the
//! attempt never sees the owner.

use crew_core::run::AttemptResult;
use crew_core::usage::Usage;
use serde::{Deserialize, Serialize};

/// Which attempt a note is about.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptKey {
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
}

pub struct Report {
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
    pub result: AttemptResult,
    /// A fan-out step's completed attempt: its final answer, for the actor to validate.
    pub answer: Option<crew_core::fanout::Answer>,
    /// The attempt could not start: the merge of its inputs conflicts (worktree mode), for
    /// the actor to hand to a resolver (issue 31).
    pub conflict: Option<crew_core::run::resolve::Conflict>,
}

/// What the owner sends a running worker.
pub enum WorkerCtl {
    Stop { reason: String },
    Steer(String),
}

/// How a worker reaches its owner. Each call is fire-and-forget: the actor applies it in order
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
