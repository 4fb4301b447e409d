//! The first phase: what to start. From a serializable [`WorkerSpec`] (so an attempt can be
//! described on one machine and run on another), write the worker's input files (system
//! prompt, skills), build its session and launch (argv, extra env, stdin) through the adapter,
//! check its cwd, filter its environment, and open its stdin. Any failure here ends the attempt
//! before a process exists.

use crate::artifacts;
use crate::fault;
use crate::outcome::Failure;
use crate::port::AttemptKey;
use crate::{blocking, env, process};
use crew_core::resource::SystemPromptMode;
use crew_core::run::FailReason;
use crew_core::skills::PlannedSkill;
use crew_core::stream::{self, AdapterKind, LaunchSpec, PromptVia, SessionSpec};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything one attempt's worker process needs, frozen by its owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub key: AttemptKey,
    /// The run's directory: prompts, transcripts, logs, results.
    pub run_dir: PathBuf,
    /// The worker's working directory.
    pub cwd: String,
    pub adapter: AdapterKind,
    pub prompt_via: PromptVia,
    /// The runtime's command: program followed by fixed extra args.
    pub command: Vec<String>,
    /// The rendered prompt (already written as `prompts/<task>.md`).
    pub prompt: String,
    pub system_prompt: String,
    pub system_prompt_mode: SystemPromptMode,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub tools: Vec<String>,
    pub effort: Option<String>,
    pub fallback_models: Vec<String>,
    pub skills: Vec<PlannedSkill>,
    /// Live mode: stdin is a pipe the owner writes the prompt and steers to.
    pub rpc: bool,
    /// Names of variables passed through to the worker beyond the allowlist.
    pub env_passthrough: Vec<String>,
    /// The step's shared output name, written from the result.
    pub output: Option<String>,
    /// The attempt continues the session of the attempt before it (an answer).
    pub resumed: bool,
    pub limits: Limits,
}

/// How long a worker may take, in milliseconds as configured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Limits {
    /// No output at all for this long: stopped, retryable.
    pub no_output_ms: u64,
    /// The task's overall time.
    pub task_timeout_ms: u64,
    /// After the final answer, how long stdout may stay quiet before the worker is stopped.
    pub final_drain_quiet_ms: u64,
    /// After the final answer, the most time the worker gets to exit by itself.
    pub final_drain_ms: u64,
    /// From SIGTERM to SIGKILL.
    pub kill_grace_ms: u64,
}

impl Limits {
    pub fn no_output(&self) -> Duration {
        Duration::from_millis(self.no_output_ms)
    }
    pub fn task_timeout(&self) -> Duration {
        Duration::from_millis(self.task_timeout_ms)
    }
    pub fn quiet(&self) -> Duration {
        Duration::from_millis(self.final_drain_quiet_ms)
    }
    pub fn drain_max(&self) -> Duration {
        Duration::from_millis(self.final_drain_ms)
    }
    pub fn grace(&self) -> Duration {
        Duration::from_millis(self.kill_grace_ms)
    }
}

/// Where the worker's stdin comes from, opened.
pub enum Stdin {
    Null,
    /// A pipe the owner writes (live mode).
    Pipe,
    /// The prompt file: a regular file the agent reads to its end and goes on, where a pipe
    /// left open would keep it waiting.
    File(std::fs::File),
}

/// The process to start: what a [`crate::spawn::Launcher`] gets.
pub struct Program {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Stdin,
}

/// The command phase's result.
pub struct WorkerCommand {
    pub program: Program,
    /// What the adapter's parser is built from.
    pub launch: LaunchSpec,
    /// pi's session file, named in an `Asked` result so the answer continues it.
    pub session_file: Option<String>,
}

fn storage(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::new(format!("cannot {what}: {e}"), false, FailReason::Storage)
}

/// Build the worker's command. The order of the checks is the order their failures win in.
pub fn worker_command(
    spec: &WorkerSpec,
    session: impl FnOnce() -> Result<SessionSpec, String>,
) -> Result<WorkerCommand, Failure> {
    let run_dir = &spec.run_dir;
    // The prompt goes through a file (the prompt artifact, already written) when it is too long
    // for argv or the runtime asks for one.
    let prompt_file = stream::prompt_through_file(spec.adapter, &spec.prompt, spec.prompt_via)
        .then(|| {
            run_dir
                .join(format!("prompts/{}.md", spec.key.task_id))
                .display()
                .to_string()
        });
    let system_prompt_file = blocking(|| system_prompt_file(run_dir, &spec.system_prompt))
        .map_err(|e| storage("write the system prompt", e))?;
    // Only pi takes skills as files; the other CLIs have them in the prompt alone.
    let skill_dirs = if spec.adapter == AdapterKind::Pi {
        blocking(|| skill_dirs(run_dir, &spec.skills))
            .map_err(|e| storage("write the task's skills", e))?
    } else {
        Vec::new()
    };
    let session = session().map_err(|e| Failure::new(e, false, FailReason::Storage))?;
    let session_file = session.file.clone();
    let launch = LaunchSpec {
        command: spec.command.clone(),
        prompt: spec.prompt.clone(),
        prompt_file,
        system_prompt: spec.system_prompt.clone(),
        system_prompt_mode: spec.system_prompt_mode,
        system_prompt_file: Some(system_prompt_file.display().to_string()),
        model: spec.model.clone(),
        thinking: spec.thinking.clone(),
        tools: spec.tools.clone(),
        rpc: spec.rpc,
        prompt_via: spec.prompt_via,
        effort: spec.effort.clone(),
        fallback_models: spec.fallback_models.clone(),
        skill_dirs,
        session,
        cwd: spec.cwd.clone(),
    };
    let built = stream::build_launch(spec.adapter, &launch);
    let Some((program, args)) = built.argv.split_first() else {
        return Err(Failure::new(
            "the runtime's command is empty".into(),
            false,
            FailReason::Spawn,
        ));
    };
    if !Path::new(&spec.cwd).is_dir() {
        return Err(Failure::new(
            format!("the run's cwd does not exist: {}", spec.cwd),
            false,
            FailReason::Cwd,
        ));
    }
    if let Err(e) = fault::hit("env") {
        return Err(Failure::new(
            format!("cannot build the worker's environment: {e}"),
            true,
            FailReason::Spawn,
        ));
    }
    let mut env = env::worker_env(
        &spec.env_passthrough,
        &[
            (process::ENV_RUN_ID, spec.key.run_id.clone()),
            (process::ENV_TASK_ID, spec.key.task_id.clone()),
            (process::ENV_ATTEMPT, spec.key.attempt.to_string()),
            (process::ENV_DAEMON_PID, std::process::id().to_string()),
        ],
    );
    env.extend(
        built
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    let stdin = match &built.stdin {
        stream::StdinFrom::Null => Stdin::Null,
        stream::StdinFrom::Pipe => Stdin::Pipe,
        stream::StdinFrom::File(path) => match blocking(|| std::fs::File::open(path)) {
            Ok(f) => Stdin::File(f),
            Err(e) => return Err(storage(&format!("open the prompt file {path}"), e)),
        },
    };
    Ok(WorkerCommand {
        program: Program {
            program: program.clone(),
            args: args.to_vec(),
            cwd: spec.cwd.clone(),
            env,
            stdin,
        },
        launch,
        session_file,
    })
}

/// The file holding a system prompt for the run's workers, written once per distinct prompt:
/// the tasks of one agent share it (creating a file per task was the dispatch bench's biggest
/// cost on ext4). Named by its content, so a name always means the same bytes. The worker's
/// input, not an artifact any event names: no sync needed (the agent reads it right away, and
/// a file lost or cut short in a crash is written again by the next attempt that needs it).
pub fn system_prompt_file(run_dir: &Path, prompt: &str) -> std::io::Result<PathBuf> {
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
fn skill_dirs(run_dir: &Path, skills: &[PlannedSkill]) -> std::io::Result<Vec<String>> {
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
}
