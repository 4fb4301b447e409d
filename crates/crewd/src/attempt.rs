//! What crosses between the actor and a worker, and nothing else: the attempt's input frozen on
//! the actor (`AttemptSpec`), what the actor sends a running worker (`WorkerCtl`), and the
//! narrow port a worker reports through (`Port`: spawned, progress, warnings, the one final
//! report). The executor depends on this module, never on the actor: the arrow goes
//! actor → workers → executor → attempt, and the actor side implements the port.

use crate::config::RuntimeConfig;
use crew_core::plan::PlannedTask;
use crew_core::run::Reuse;
use std::path::PathBuf;

/// The attempt's side of the port lives with the code that runs attempts (`crew-attempt`), so a
/// worker binary reports through the same trait.
pub use crew_attempt::port::{AttemptKey, Port, Report, WorkerCtl};

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
    /// A remote attempt's job as journaled (a daemon restarted while it ran): followed again,
    /// never submitted twice.
    pub job: Option<crew_core::run::RemoteJob>,
    /// The CPUs, memory and time limit a cluster-placed attempt's job asks for (the task's
    /// step and role over its runtime's frozen shape; `placement::slurm::task_shape`).
    pub job_shape: crew_core::job_shape::JobShape,
    /// A judging selector (issue 36): the candidates it chooses among.
    pub candidates: Vec<crew_core::run::candidates::Shown>,
    /// Verification failures the task already retried: a candidate whose step's
    /// `verifyRetries` are spent completes with its failure recorded (issue 36).
    pub verify_retries_used: u32,
    /// Run-dir files whose content is another file's, `(read as, read from)`: a step with
    /// candidates (issue 36) has the chosen candidate's result and `output:` artifact, which
    /// the candidate wrote under its own names.
    pub sources: Vec<(String, String)>,
}

/// A recorded CLI session to continue with the user's answer.
#[derive(Debug, Clone)]
pub struct Resume {
    /// pi: the session file; claude / codex: the session id.
    pub session: String,
    pub answer: String,
}

impl AttemptSpec {
    /// The run-dir file to read for `rel` (`results/<task>.txt`, `shared/<name>`).
    pub fn source<'a>(&'a self, rel: &'a str) -> &'a str {
        self.sources
            .iter()
            .find(|(name, _)| name == rel)
            .map_or(rel, |(_, from)| from.as_str())
    }

    pub fn key(&self) -> AttemptKey {
        AttemptKey {
            run_id: self.run_id.clone(),
            task_id: self.task_id.clone(),
            attempt: self.attempt,
        }
    }
}
