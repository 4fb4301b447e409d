//! `config.toml` (SPEC §2): every key has a default; an unknown key or a bad value is an error
//! naming the file, line and key, and the daemon does not start on it.

use crew_core::stream::{AdapterKind, PromptVia};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Largest accepted `journal_cache_mb` (1 TiB).
pub const JOURNAL_CACHE_MB_MAX: u64 = 1 << 20;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Runtime used when a run does not name one.
    pub default_runtime: String,
    /// Workers running at once, daemon-wide, shared round-robin between runs.
    pub max_workers: usize,
    /// Per-run concurrency is capped at this.
    pub max_concurrency_cap: u32,
    /// Attempts per task for retryable failures.
    pub max_attempts: u32,
    /// A worker that prints nothing for this long is stopped (retryable).
    pub no_output_timeout_ms: u64,
    /// A task attempt may take at most this long.
    pub task_timeout_ms: u64,
    /// SIGTERM → SIGKILL grace.
    pub kill_grace_ms: u64,
    /// After the final answer, a worker that lingers is stopped after this long...
    pub final_drain_ms: u64,
    /// ...or after this much quiet, whichever comes first.
    pub final_drain_quiet_ms: u64,
    /// Environment variables workers may see besides the built-in allowlist.
    pub env_passthrough: Vec<String>,
    /// Projects (roots) whose `.crew/` may shadow builtin and user resources.
    pub trusted_projects: Vec<PathBuf>,
    /// Also load pi-crew's `~/.pi/agent/{agents,teams,workflows}`.
    pub pi_compat: bool,
    /// Finished runs whose details stay in memory (the rest load from the journal on demand).
    pub resident_runs: usize,
    pub resource_cache_entries: usize,
    pub result_cache_entries: usize,
    /// sled's page cache. sled holds several times this in practice (bench-memory: 4 → +6 to
    /// +11 MiB, 8 → +18, 16 → +29 over 1 per 10,000 tasks), and an append-mostly journal reads
    /// little: bench-journal measured no loss at 1 against 4.
    pub journal_cache_mb: u64,
    /// Write a snapshot every this many events. A snapshot holds finished runs as summaries
    /// only, so it is small and this can be low: start-up replays at most this many events.
    pub snapshot_every: u64,
    pub max_request_bytes: u32,
    pub max_batch: u32,
    pub max_connections: u32,
    pub max_subscriptions_per_connection: u32,
    /// Events a subscriber may lag behind before it is dropped.
    pub subscriber_buffer: usize,
    pub runtimes: BTreeMap<String, RuntimeConfig>,
    /// Serve the web dashboard on this TCP address (e.g. `127.0.0.1:7070`, for SSH port
    /// forwarding); off by default (`crewctl ui` serves it on demand instead).
    pub ui_listen: Option<std::net::SocketAddr>,
    /// Accept a non-loopback `ui_listen` without TLS: anyone who can see the traffic can read
    /// the token. Without this, crewd refuses to start on such an address.
    pub ui_allow_remote_without_tls: bool,
    /// `shared` or `worktree`: a run's workspace when neither it nor its team says.
    pub default_workspace: crew_core::run::WorkspaceMode,
    /// One git call (worktree add, commit, merge) may take at most this long.
    pub git_timeout_ms: u64,
    /// Run when a run ends (completed, failed, cancelled), with `CREW_RUN_ID`, `CREW_RUN_STATUS`
    /// and `CREW_RUN_REASON` in its environment: a string (split on whitespace) or an array.
    pub on_run_end: Option<CommandSpec>,
    /// One verification command (a step's `verifyCommands`, a project's `verify_commands`) may
    /// run this long; then its process group is killed and it fails.
    pub verify_timeout_ms: u64,
    /// Of each verification command's output, the last this many bytes are kept (artifact);
    /// `task.completed` and the retry's feedback carry the last 2,000 characters of it.
    pub verify_output_bytes: u64,
    /// Verification failures a task retries, its failure fed to the agent, when its step does
    /// not say (`verifyRetries`).
    pub verify_retries: u32,
    /// What a worktree task's change outside its `scope` does when its step does not say
    /// (`scopePolicy`): `needs_attention` or `warn`.
    pub scope_policy: crew_core::checks::ScopePolicy,
    /// Let a writing task complete without changing anything when its step does not say
    /// (`allowNoChange`). Off: such a task needs attention ("changed nothing").
    pub allow_no_change: bool,
    /// What a worktree run's conflicting merge of results does when neither the run nor its
    /// team says (`conflicts`): `agent` (a resolve task) or `manual`.
    pub conflicts: crew_core::run::ConflictMode,
    /// Tasks one fan-out step (`expands: tasks`) may add; a run's `maxFanOutTasks` overrides.
    pub max_fan_out_tasks: u32,
    /// Fix rounds a judge's failing verdicts may start when neither the run, the step nor the
    /// team says (`maxFixRounds`); then the run is blocked with the findings.
    pub max_fix_rounds: u32,
    /// The longest final answer of a fan-out step that is read for its tasks block (bytes);
    /// a longer one is refused as invalid output without being read.
    pub max_fan_out_answer_bytes: u64,
    /// Per project root (as `trusted_projects` names them): its verification commands.
    pub projects: BTreeMap<PathBuf, ProjectConfig>,
    /// The Slurm cluster runtimes with `placement = "slurm"` run on (README, "Slurm").
    pub slurm: Option<crate::placement::slurm::SlurmConfig>,
    /// Box each local attempt (bubblewrap): `auto`, `required` or `off` (issue 34). A
    /// runtime's `sandbox` overrides it, and a project's the runtime's.
    pub sandbox: SandboxMode,
    /// `false`: boxed verify commands and pre-step scripts get no network, loopback included.
    pub verify_network: bool,
    /// The projects that set their own `sandbox`, by root resolved once when the config is
    /// read: resolved again later, a link an agent put where a root was would move it
    /// (`executor::sandbox::in_project`).
    #[serde(skip)]
    pub project_sandboxes: Vec<(PathBuf, SandboxMode)>,
}

/// `[projects."/path/to/root"]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectConfig {
    /// Run, each as `sh -c`, in the task's workspace after a `verify: true` step's agent
    /// finished, when the step names no `verifyCommands` of its own.
    pub verify_commands: Vec<String>,
    /// Per-task checks (issue 30): run, each as `sh -c`, after every task that can edit
    /// (fan-out and fix tasks included) and has no verification of its own; a failure retries
    /// that task with the failure as feedback. Integration checks (a test that passes only
    /// once the pieces are merged) belong in `verify_commands`.
    pub task_verify_commands: Vec<String>,
    /// Tasks one fan-out step (`expands: tasks`) of a run in this project may add, instead of
    /// the daemon-wide `max_fan_out_tasks`; a run's `maxFanOutTasks` overrides.
    pub max_fan_out_tasks: Option<u32>,
    /// The box of this project's local attempts (issue 34), over the runtime's and the
    /// daemon's: `required` for a project whose agents must never run unboxed, `off` for one
    /// whose tasks need what no box gives.
    pub sandbox: Option<SandboxMode>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            default_runtime: "pi".into(),
            max_workers: 8,
            max_concurrency_cap: 8,
            max_attempts: 3,
            no_output_timeout_ms: 5 * 60 * 1000,
            task_timeout_ms: 30 * 60 * 1000,
            kill_grace_ms: 3000,
            final_drain_ms: 5000,
            final_drain_quiet_ms: 800,
            env_passthrough: Vec::new(),
            trusted_projects: Vec::new(),
            pi_compat: true,
            resident_runs: 256,
            resource_cache_entries: 1024,
            result_cache_entries: 10_000,
            journal_cache_mb: 1,
            snapshot_every: 10_000,
            max_request_bytes: 1 << 20,
            max_batch: 64,
            max_connections: 128,
            max_subscriptions_per_connection: 64,
            subscriber_buffer: 4096,
            runtimes: BTreeMap::new(),
            ui_listen: None,
            ui_allow_remote_without_tls: false,
            default_workspace: crew_core::run::WorkspaceMode::Shared,
            git_timeout_ms: 120_000,
            on_run_end: None,
            verify_timeout_ms: 10 * 60 * 1000,
            verify_output_bytes: 64 << 10,
            verify_retries: crew_core::checks::DEFAULT_VERIFY_RETRIES,
            scope_policy: crew_core::checks::ScopePolicy::NeedsAttention,
            sandbox: SandboxMode::Auto,
            verify_network: true,
            project_sandboxes: Vec::new(),
            allow_no_change: false,
            conflicts: crew_core::run::ConflictMode::Agent,
            projects: BTreeMap::new(),
            max_fan_out_tasks: crew_core::fanout::DEFAULT_MAX_TASKS,
            max_fix_rounds: crew_core::verdict::DEFAULT_MAX_FIX_ROUNDS,
            max_fan_out_answer_bytes: crew_core::fanout::DEFAULT_MAX_ANSWER_BYTES,
            slurm: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    pub adapter: AdapterKind,
    /// Program and fixed arguments: a string (split on whitespace) or an array.
    pub command: CommandSpec,
    /// Run workers in live mode (`pi --mode rpc`, `claude -p --input-format stream-json`,
    /// `codex app-server`, `gemini --acp`, `opencode acp`), so `team.steer` reaches the running
    /// agent. Unset means the adapter's default (`rpc()`): on for pi, claude and codex (not for
    /// a codex command that names `exec`), off for gemini, opencode and command; `rpc = false`
    /// keeps pi in `--mode json -p`, claude's prompt on argv and codex on `codex exec`.
    #[serde(default)]
    pub rpc: Option<bool>,
    /// command adapter: pass the prompt as the last argument (`arg`), as a file path (`file`) or
    /// as stdin (`stdin`).
    #[serde(default)]
    pub prompt_via: PromptVia,
    /// Extra environment variables this runtime's workers may see (e.g. `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub env: Vec<String>,
    /// Overrides `no_output_timeout_ms` for this runtime.
    #[serde(default)]
    pub no_output_timeout_ms: Option<u64>,
    /// Where its attempts run: `local` (a process of crewd) or `slurm` (a job on the cluster
    /// of `[slurm]`, worktree mode only).
    #[serde(default)]
    pub placement: crate::placement::Placement,
    /// Slurm placement: this runtime's partition, account, QOS, CPUs, memory and time limit
    /// over `[slurm]`'s.
    #[serde(default)]
    pub slurm: Option<crate::placement::slurm::SlurmResources>,
    /// Overrides the daemon's `sandbox` for this runtime's workers.
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// `false`: this runtime's boxed workers get no network at all, loopback included.
    #[serde(default)]
    pub network: Option<bool>,
    /// More paths a boxed worker sees read-only (toolchains, the CLI's install).
    #[serde(default)]
    pub sandbox_read: Vec<PathBuf>,
    /// More paths a boxed worker may write (caches).
    #[serde(default)]
    pub sandbox_write: Vec<PathBuf>,
}

pub use crew_core::sandbox::SandboxMode;

/// A config key and what is wrong with its value.
type Bad = (String, String);

fn bad(key: &str, message: impl Into<String>) -> Bad {
    (key.to_string(), message.into())
}

impl RuntimeConfig {
    /// What is wrong with this runtime, as (the part of its key after `runtimes.<name>`, why).
    fn problem(&self, has_slurm: bool) -> Option<(&'static str, String)> {
        if self.placement == crate::placement::Placement::Slurm && !has_slurm {
            return Some((
                "",
                "placement = \"slurm\" needs a [slurm] section (url, token, staging_dir)".into(),
            ));
        }
        if let Some(problem) = self.slurm.as_ref().and_then(|r| r.shape().problem()) {
            return Some((".slurm", problem));
        }
        if self.command.argv().is_empty() {
            return Some(("", "command is empty".into()));
        }
        if self.rpc == Some(true) && !crew_core::stream::has_live_mode(self.adapter) {
            return Some((
                "",
                format!(
                    "rpc = true needs an adapter with a live mode ({})",
                    crew_core::stream::live_adapter_names()
                ),
            ));
        }
        if self.rpc == Some(true)
            && crew_core::stream::command_excludes_live_mode(self.adapter, &self.command.argv())
        {
            return Some((
                "",
                "rpc = true runs `codex app-server`, which takes no `exec` subcommand: \
                 take `exec` and its flags out of the command"
                    .into(),
            ));
        }
        None
    }

    /// Whether workers run in live mode: what the runtime says, else on for the adapters with
    /// a live channel (tested against the real CLIs in real_pi_steer.rs, real_claude_steer.rs
    /// and real_codex_steer.rs), unless the command pins `codex exec`.
    pub fn rpc(&self) -> bool {
        self.rpc.unwrap_or_else(|| {
            crew_core::stream::live_by_default(self.adapter, &self.command.argv())
        })
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum CommandSpec {
    Line(String),
    Argv(Vec<String>),
}

impl CommandSpec {
    pub fn argv(&self) -> Vec<String> {
        match self {
            CommandSpec::Line(s) => s.split_whitespace().map(str::to_string).collect(),
            CommandSpec::Argv(v) => v.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        path: String,
        line: usize,
        key: String,
        message: String,
    },
}

impl Config {
    /// Load `path`. A missing file is fine only when `required` is false (the default location).
    pub fn load(path: &Path, required: bool) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                return Ok(Config::default())
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        Self::parse(&path.display().to_string(), &text)
    }

    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(0);
            // The span covers the key (unknown field) or the value (bad value): the key is what
            // stands before `=` on that line.
            let key = e
                .span()
                .and_then(|sp| {
                    let start = text[..sp.start.min(text.len())]
                        .rfind('\n')
                        .map_or(0, |n| n + 1);
                    let line_text = text[start..].lines().next().unwrap_or("");
                    match line_text.split_once('=') {
                        Some((k, _)) => Some(k.trim().trim_matches('"').to_string()),
                        None => text
                            .get(sp)
                            .map(|k| k.trim().trim_matches(['"', '[', ']']).to_string()),
                    }
                })
                .unwrap_or_default();
            ConfigError::Invalid {
                path: path.to_string(),
                line,
                key,
                message: e.message().to_string(),
            }
        })?;
        cfg.check(path, text)?;
        let mut cfg = cfg;
        cfg.project_sandboxes = cfg
            .projects
            .iter()
            .filter_map(|(root, p)| {
                let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
                Some((real, p.sandbox?))
            })
            .collect();
        Ok(cfg)
    }

    /// The first value out of its range, as an error naming its key and line. The checks run
    /// in a fixed order: limits, the dashboard's address, verification, projects, Slurm,
    /// runtimes.
    fn check(&self, path: &str, text: &str) -> Result<(), ConfigError> {
        let problem = self
            .limits_problem()
            .or_else(|| self.ui_problem())
            .or_else(|| self.verify_problem())
            .or_else(|| self.projects_problem())
            .or_else(|| {
                self.slurm
                    .as_ref()
                    .and_then(|s| s.problem())
                    .map(|p| bad("slurm", p))
            })
            .or_else(|| self.runtimes_problem());
        let Some((key, message)) = problem else {
            return Ok(());
        };
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(key.as_str()))
            .map(|i| i + 1)
            .unwrap_or(0);
        Err(ConfigError::Invalid {
            path: path.to_string(),
            line,
            key,
            message,
        })
    }

    fn limits_problem(&self) -> Option<Bad> {
        let at_least_one = [
            ("max_workers", self.max_workers == 0),
            ("max_concurrency_cap", self.max_concurrency_cap == 0),
            ("max_attempts", self.max_attempts == 0),
        ];
        if let Some((key, _)) = at_least_one.iter().find(|(_, zero)| *zero) {
            return Some(bad(key, "must be at least 1"));
        }
        if self.max_fix_rounds > crew_core::verdict::MAX_FIX_ROUNDS_CEILING {
            return Some(bad(
                "max_fix_rounds",
                format!(
                    "must be at most {}",
                    crew_core::verdict::MAX_FIX_ROUNDS_CEILING
                ),
            ));
        }
        if !(1..=crew_core::fanout::MAX_TASKS_CEILING).contains(&self.max_fan_out_tasks) {
            return Some(bad(
                "max_fan_out_tasks",
                format!(
                    "must be between 1 and {}",
                    crew_core::fanout::MAX_TASKS_CEILING
                ),
            ));
        }
        let answer_bytes =
            crew_core::fanout::MAX_ANSWER_BYTES_FLOOR..=crew_core::fanout::MAX_ANSWER_BYTES_CEILING;
        if !answer_bytes.contains(&self.max_fan_out_answer_bytes) {
            return Some(bad(
                "max_fan_out_answer_bytes",
                format!(
                    "must be between {} and {}",
                    answer_bytes.start(),
                    answer_bytes.end()
                ),
            ));
        }
        if self.resident_runs == 0 {
            return Some(bad("resident_runs", "must be at least 1"));
        }
        // sled panics on a cache below 256 bytes, which would read as a corrupt journal; the
        // upper bound keeps `journal_cache_mb << 20` from wrapping around to such a size.
        if !(1..=JOURNAL_CACHE_MB_MAX).contains(&self.journal_cache_mb) {
            return Some(bad(
                "journal_cache_mb",
                format!("must be between 1 and {JOURNAL_CACHE_MB_MAX}"),
            ));
        }
        None
    }

    fn ui_problem(&self) -> Option<Bad> {
        let addr = self.ui_listen?;
        (!addr.ip().is_loopback() && !self.ui_allow_remote_without_tls).then(|| {
            bad(
                "ui_listen",
                format!(
                    "{addr} is not a loopback address and crew serves no TLS; forward a \
                     loopback port over SSH instead, or set ui_allow_remote_without_tls = true"
                ),
            )
        })
    }

    fn verify_problem(&self) -> Option<Bad> {
        if self.verify_timeout_ms == 0 {
            return Some(bad("verify_timeout_ms", "must be at least 1"));
        }
        if !(1..=(64 << 20)).contains(&self.verify_output_bytes) {
            return Some(bad("verify_output_bytes", "must be between 1 and 67108864"));
        }
        (self.verify_retries > 10).then(|| bad("verify_retries", "must be at most 10"))
    }

    fn projects_problem(&self) -> Option<Bad> {
        for (root, p) in &self.projects {
            if p.max_fan_out_tasks
                .is_some_and(|n| !(1..=crew_core::fanout::MAX_TASKS_CEILING).contains(&n))
            {
                return Some(bad(
                    "max_fan_out_tasks",
                    format!(
                        "projects.\"{}\": must be between 1 and {}",
                        root.display(),
                        crew_core::fanout::MAX_TASKS_CEILING
                    ),
                ));
            }
            if p.verify_commands
                .iter()
                .chain(&p.task_verify_commands)
                .any(|c| c.trim().is_empty() || c.contains('\0'))
            {
                return Some(bad(
                    "verify_commands",
                    format!(
                        "projects.\"{}\": a command is empty or holds a NUL",
                        root.display()
                    ),
                ));
            }
        }
        None
    }

    fn runtimes_problem(&self) -> Option<Bad> {
        self.runtimes.iter().find_map(|(name, rt)| {
            rt.problem(self.slurm.is_some())
                .map(|(part, message)| bad(&format!("runtimes.{name}{part}"), message))
        })
    }

    /// Configured runtimes plus the always-available `fake` (crew-fake-agent next to crewd,
    /// else on PATH) and `pi`.
    pub fn runtime(&self, name: &str) -> Option<RuntimeConfig> {
        if let Some(r) = self.runtimes.get(name) {
            return Some(r.clone());
        }
        match name {
            "fake" => Some(RuntimeConfig {
                adapter: AdapterKind::Pi,
                command: CommandSpec::Argv(vec![fake_agent_path()]),
                // JSON mode, as the tests of queued steering and final drains expect.
                rpc: Some(false),
                prompt_via: PromptVia::Arg,
                env: vec![],
                no_output_timeout_ms: None,
                placement: Default::default(),
                slurm: None,
                sandbox: None,
                network: None,
                sandbox_read: vec![],
                sandbox_write: vec![],
            }),
            "fake-rpc" => Some(RuntimeConfig {
                adapter: AdapterKind::Pi,
                command: CommandSpec::Argv(vec![fake_agent_path()]),
                rpc: Some(true),
                prompt_via: PromptVia::Arg,
                env: vec![],
                no_output_timeout_ms: None,
                placement: Default::default(),
                slurm: None,
                sandbox: None,
                network: None,
                sandbox_read: vec![],
                sandbox_write: vec![],
            }),
            "pi" => Some(RuntimeConfig {
                adapter: AdapterKind::Pi,
                command: CommandSpec::Argv(vec!["pi".into()]),
                rpc: None,
                prompt_via: PromptVia::Arg,
                env: vec![],
                no_output_timeout_ms: None,
                placement: Default::default(),
                slurm: None,
                sandbox: None,
                network: None,
                sandbox_read: vec![],
                sandbox_write: vec![],
            }),
            _ => None,
        }
    }

    pub fn runtime_names(&self) -> Vec<String> {
        let mut v: Vec<String> = ["fake", "fake-rpc", "pi"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(self.runtimes.keys().cloned());
        v.sort();
        v.dedup();
        v
    }
}

/// `crew-fake-agent` from the directory of the running `crewd` (how the workspace builds and
/// installs them), else from PATH. Looked up once: every task start asks for its runtime on the
/// actor, which must not touch the filesystem each time.
pub fn fake_agent_path() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("crew-fake-agent")))
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "crew-fake-agent".into())
    })
    .clone()
}

/// `crewctl` from the directory of the running `crewd`, else from the daemon's PATH (which
/// workers inherit): Claude Code, Codex and opencode workers start `crewctl mcp --ask` for
/// their `ask_user` tool. Looked up once, like the fake agent. `None`: neither has one, and
/// `team.plan`/`team.run` say that those workers cannot ask.
pub fn crewctl() -> Option<&'static Path> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let exe = std::env::current_exe().ok();
            find_crewctl(
                exe.as_deref().and_then(Path::parent),
                std::env::var_os("PATH").as_deref(),
            )
        })
        .as_deref()
}

/// The command that starts crew's ask server: [`crewctl`], else plain `crewctl` (the worker's
/// own PATH may still have one).
pub fn crewctl_path() -> String {
    crewctl().map_or_else(|| "crewctl".into(), |p| p.display().to_string())
}

fn find_crewctl(crewd_dir: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    crew_box::spawn::beside_or_on_path("crewctl", crewd_dir, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crewctl_is_found_next_to_crewd_then_on_path() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let (beside, on_path, plain, empty) = (
            t.path().join("bin"),
            t.path().join("path"),
            t.path().join("plain"),
            t.path().join("empty"),
        );
        for (dir, mode) in [(&beside, 0o755), (&on_path, 0o755), (&plain, 0o644)] {
            std::fs::create_dir_all(dir).unwrap();
            let f = dir.join("crewctl");
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::create_dir_all(&empty).unwrap();
        let path = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap();
        let table: Vec<(Option<&Path>, std::ffi::OsString, Option<PathBuf>)> = vec![
            (
                Some(&beside),
                path(&[&on_path]),
                Some(beside.join("crewctl")),
            ),
            (
                Some(&empty),
                path(&[&plain, &on_path]),
                Some(on_path.join("crewctl")),
            ),
            (Some(&empty), path(&[&plain]), None),
            (None, path(&[Path::new("relative"), &empty]), None),
            (None, std::ffi::OsString::new(), None),
        ];
        for (dir, path, want) in table {
            assert_eq!(find_crewctl(dir, Some(&path)), want, "{dir:?} {path:?}");
        }
    }

    #[test]
    fn defaults_without_a_file() {
        let c = Config::parse("c.toml", "").unwrap();
        assert_eq!(c.max_workers, 8);
        assert!(c.runtime("fake").is_some());
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let table = [
            ("max_workers = 4\nmax_worker = 3\n", 2, "max_worker"),
            ("max_workers = \"many\"\n", 1, "max_workers"),
            ("max_workers = 0\n", 1, "max_workers"),
            ("journal_cache_mb = 0\n", 1, "journal_cache_mb"),
            ("journal_cache_mb = 17592186044416\n", 1, "journal_cache_mb"),
            (
                "[runtimes.x]\nadapter = \"nope\"\ncommand = \"x\"\n",
                2,
                "adapter",
            ),
        ];
        for (text, line, key) in table {
            match Config::parse("/etc/c.toml", text) {
                Err(ConfigError::Invalid {
                    path,
                    line: l,
                    key: k,
                    ..
                }) => {
                    assert_eq!((path.as_str(), l), ("/etc/c.toml", line), "{text}");
                    assert!(k.contains(key), "{k} vs {key}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn checks_parse() {
        let c = Config::parse(
            "c",
            "verify_timeout_ms = 5000\nscope_policy = \"warn\"\nallow_no_change = true\n\
             [projects.\"/src/app\"]\nverify_commands = [\"cargo test\", \"npm test\"]\n",
        )
        .unwrap();
        assert_eq!(c.verify_timeout_ms, 5000);
        assert_eq!(c.scope_policy, crew_core::checks::ScopePolicy::Warn);
        assert!(c.allow_no_change);
        assert_eq!(
            c.projects[Path::new("/src/app")].verify_commands,
            ["cargo test", "npm test"]
        );
        let d = Config::default();
        assert_eq!(
            (d.verify_retries, d.allow_no_change, d.verify_output_bytes),
            (1, false, 65536)
        );
        assert_eq!(d.conflicts, crew_core::run::ConflictMode::Agent);
        let m = Config::parse("c", "conflicts = \"manual\"\n").unwrap();
        assert_eq!(m.conflicts, crew_core::run::ConflictMode::Manual);
        assert!(Config::parse("c", "conflicts = \"ask\"\n").is_err());
        for text in [
            "verify_timeout_ms = 0\n",
            "scope_policy = \"ignore\"\n",
            "[projects.\"/x\"]\nverify_commands = [\"\"]\n",
            "[projects.\"/x\"]\nverify = 1\n",
        ] {
            assert!(Config::parse("c", text).is_err(), "{text}");
        }
    }

    #[test]
    fn runtimes_parse() {
        let c = Config::parse(
            "c",
            "[runtimes.claude]\nadapter = \"claude\"\ncommand = [\"claude\", \"--foo\"]\nenv = [\"ANTHROPIC_API_KEY\"]\n",
        )
        .unwrap();
        let r = c.runtime("claude").unwrap();
        assert_eq!(r.adapter, AdapterKind::Claude);
        assert_eq!(r.command.argv(), vec!["claude", "--foo"]);
        let c = Config::parse(
            "c",
            "[runtimes.s]\nadapter = \"command\"\ncommand = \"s\"\nprompt_via = \"stdin\"\n",
        )
        .unwrap();
        assert_eq!(c.runtime("s").unwrap().prompt_via, PromptVia::Stdin);
    }

    #[test]
    fn slurm_placement_parses_and_bad_settings_are_refused() {
        let ok = "[slurm]\nurl = \"http://127.0.0.1:6820\"\ntoken_command = \"scontrol token\"\n\
                  staging_dir = \"/shared/s\"\nmax_workers = 200\npartition = \"batch\"\n\
                  cpus_per_task = 2\n\
                  [runtimes.c]\nadapter = \"claude\"\ncommand = \"claude\"\nplacement = \"slurm\"\n\
                  [runtimes.c.slurm]\ncpus_per_task = 4\ntime_limit_minutes = 30\n";
        let c = Config::parse("c", ok).unwrap();
        let s = c.slurm.as_ref().unwrap();
        assert_eq!((s.api_version.as_str(), s.max_workers), ("v0.0.38", 200));
        let rt = c.runtime("c").unwrap();
        assert_eq!(rt.placement, crate::placement::Placement::Slurm);
        let r = s.resources(rt.slurm.as_ref());
        assert_eq!(
            (
                r.partition.as_deref(),
                r.cpus_per_task,
                r.time_limit_minutes
            ),
            (Some("batch"), Some(4), Some(30))
        );
        assert_eq!(
            c.runtime("fake").unwrap().placement,
            crate::placement::Placement::Local
        );
        // The client commands need no slurmrestd: no url, no token.
        let cli = "[slurm]\ninterface = \"cli\"\nconf = \"/etc/slurm/slurm.conf\"\nstaging_dir = \"/s\"\n";
        let c = Config::parse("c", cli).unwrap();
        assert_eq!(
            c.slurm.as_ref().unwrap().interface,
            crate::placement::slurm::config::Interface::Cli
        );
        let base = "[slurm]\nurl = \"http://127.0.0.1:6820\"\ntoken_command = \"t\"\nstaging_dir = \"/s\"\n";
        for (text, says) in [
            (base.replace("127.0.0.1", "10.0.0.5"), "not a loopback"),
            (base.replace("http://", "https://"), "no TLS"),
            (format!("{base}token_file = \"/t\"\n"), "exactly one"),
            (
                format!("{base}api_version = \"v0.0.37\"\n"),
                "v0.0.38 and later",
            ),
            (base.replace("\"/s\"", "\"rel\""), "absolute"),
            (
                format!("{base}conf = \"/etc/slurm.conf\"\n"),
                "interface = \"cli\"",
            ),
            (
                "[runtimes.x]\nadapter = \"pi\"\ncommand = \"pi\"\nplacement = \"slurm\"\n".into(),
                "needs a [slurm] section",
            ),
            // Job resources are bounded (issue 35), the cluster's and a runtime's.
            (
                format!("{base}cpus_per_task = 0\n"),
                "cpus_per_task = 0: must be from 1 to 4096",
            ),
            (
                format!(
                    "{base}[runtimes.x]\nadapter = \"pi\"\ncommand = \"pi\"\nplacement = \"slurm\"\n\
                     [runtimes.x.slurm]\ntime_limit_minutes = 600000\n"
                ),
                "time_limit_minutes = 600000: must be from 1 to 527040",
            ),
        ] {
            match Config::parse("c", &text) {
                Err(ConfigError::Invalid { message, .. }) => {
                    assert!(message.contains(says), "{text}: {message}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn rpc_defaults_per_adapter() {
        let c = Config::parse(
            "c",
            "[runtimes.a]\nadapter = \"pi\"\ncommand = \"pi\"\n\
             [runtimes.b]\nadapter = \"pi\"\ncommand = \"pi\"\nrpc = false\n\
             [runtimes.c]\nadapter = \"claude\"\ncommand = \"claude\"\n\
             [runtimes.c2]\nadapter = \"claude\"\ncommand = \"claude\"\nrpc = false\n\
             [runtimes.d]\nadapter = \"codex\"\ncommand = \"codex\"\nrpc = false\n\
             [runtimes.d1]\nadapter = \"codex\"\ncommand = \"codex\"\n\
             [runtimes.d2]\nadapter = \"codex\"\ncommand = \"codex exec --full-auto\"\n\
             [runtimes.e]\nadapter = \"gemini\"\ncommand = \"gemini\"\n\
             [runtimes.e2]\nadapter = \"gemini\"\ncommand = \"gemini\"\nrpc = true\n\
             [runtimes.f]\nadapter = \"opencode\"\ncommand = \"opencode\"\n\
             [runtimes.f2]\nadapter = \"opencode\"\ncommand = \"opencode\"\nrpc = true\n",
        )
        .unwrap();
        let rpc = |name: &str| c.runtime(name).unwrap().rpc();
        assert_eq!(
            [
                "a", "b", "c", "c2", "d", "d1", "d2", "e", "e2", "f", "f2", "pi", "fake",
                "fake-rpc"
            ]
            .map(rpc),
            [
                true, false, true, false, false, true, false, false, true, false, true, true,
                false, true
            ]
        );
        match Config::parse(
            "c",
            "[runtimes.x]\nadapter = \"codex\"\ncommand = \"codex exec\"\nrpc = true\n",
        ) {
            Err(ConfigError::Invalid { message, .. }) => {
                assert!(message.contains("takes no `exec` subcommand"), "{message}")
            }
            other => panic!("codex exec with rpc = true: {other:?}"),
        }
        {
            let adapter = "command";
            let text =
                format!("[runtimes.x]\nadapter = \"{adapter}\"\ncommand = \"x\"\nrpc = true\n");
            match Config::parse("c", &text) {
                Err(ConfigError::Invalid { message, .. }) => {
                    assert!(
                        message.contains(
                            "needs an adapter with a live mode (`pi`, `claude`, `codex`, `gemini`, `opencode`)"
                        ),
                        "{message}"
                    )
                }
                other => panic!("{adapter}: {other:?}"),
            }
        }
    }
}
