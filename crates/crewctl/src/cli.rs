//! The command line: every verb, its arguments, and the global flags.

pub use crate::resolve::RunRef;
use crate::style::ColorChoice;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Exit status:
  0    success; for `run` (following) and `wait`: the run completed
  1    an error, or the run failed
  2    the run is blocked (plan approval, a question) or a task needs attention
  3    the run was cancelled
  4    crewd is not running (no socket, or nothing listens on it)
  5    not found: no such run, task, job or artifact
  64   usage: a wrong command line, a refused parameter, an ambiguous run id
  124  `wait --timeout` expired while the run was still active

A run is named by its id, any unique prefix of the id's last part (as `ls` shows it),
`last` (the newest run) or `-N` (the N-th newest).

`--json` prints each method's result as the API's wire JSON (see proto-docs/); following
commands (`run`, `logs -f`) print one event per line instead; errors are one JSON object
`{\"error\": {message, code, data, exit}}` on stderr.";

/// Command-line client for crewd, the crew daemon that runs teams of AI coding agents.
#[derive(Debug, Parser)]
#[command(name = "crewctl", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/crew/crewd.sock, else /tmp/crew-$UID/crewd.sock]
    #[arg(long, global = true, env = "CREW_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,

    /// Print results as JSON (the API's wire types) instead of tables
    #[arg(long, global = true)]
    pub json: bool,

    /// When to colour output (NO_COLOR is respected by `auto`)
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a run and follow it live (exit status reflects how it ended)
    Run(RunCmd),
    /// Show the tasks a run would execute, without running anything
    Plan(RunArgs),
    /// Show a run and its tasks
    Status {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// Redraw as the run changes, until it finishes (exit status as for `wait`)
        #[arg(short, long)]
        watch: bool,
    },
    /// List runs, newest first
    #[command(visible_alias = "list")]
    Ls(LsArgs),
    /// Show a run's events, or a task's transcript; -f follows live
    Logs(LogsArgs),
    /// Cancel a run (workers get SIGTERM, then SIGKILL)
    Cancel {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// Why, recorded with the run
        #[arg(long)]
        reason: Option<String>,
    },
    /// Re-queue a run's failed, cancelled, skipped and needs-attention tasks and continue
    Resume {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// Run an imported run's prompts and tools (shown when this is refused without it)
        #[arg(long)]
        confirm_imported: bool,
        /// The run's token budget from now on: how a run its budget stopped goes on
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
        budget_tokens: Option<i64>,
    },
    /// Run the named tasks again with a new attempt
    Retry {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        #[arg(required = true, value_name = "TASK_ID")]
        task_ids: Vec<String>,
        /// Also run again the tasks downstream of these that already finished (their inputs
        /// change); skipped ones come back in any case
        #[arg(long)]
        with_dependents: bool,
        /// Run an imported run's prompts and tools (shown when this is refused without it)
        #[arg(long)]
        confirm_imported: bool,
    },
    /// Take another of a step's candidates: its dependents run again from it if they started
    Pick {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// The step's task
        task_id: String,
        /// The candidate (1-based)
        candidate: u32,
    },
    /// Approve the plan of a run waiting for approval; it continues at once
    Approve {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject the plan of a run waiting for approval; the run is cancelled
    Reject {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Send a message to a task (live if the runtime allows, else on its next attempt)
    Steer {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        task_id: String,
        message: String,
    },
    /// Answer a task that is waiting for input
    Respond {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        task_id: String,
        message: String,
    },
    /// Wait until a run stops; the exit status says how
    Wait {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// Give up after this long (e.g. 30s, 5m, 1h); exit status 124
        #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
        timeout: Option<std::time::Duration>,
        /// Also return when the run blocks (plan approval, a question, attention): exit status 2.
        /// Without it, `wait` waits through blocks for a final status
        #[arg(long)]
        until_blocked: bool,
    },
    /// List a run's artifacts (prompts, results, transcripts, shared outputs)
    Artifacts {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
    },
    /// Print an artifact
    Cat {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        name: String,
    },
    /// Print a run's markdown report
    Summary {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
    },
    /// Remove a finished run, its events and artifacts, its worktrees and branches
    Forget {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// Also delete worktrees that hold uncommitted work
        #[arg(long)]
        force: bool,
    },
    /// Show a worktree run's change (or one task's): diffstat and patch
    Diff {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        task_id: Option<String>,
        /// The diffstat only
        #[arg(long)]
        stat: bool,
        /// With a task: its candidate K (1-based), with its checks and the step's choice
        #[arg(long, value_name = "K", requires = "task_id")]
        candidate: Option<u32>,
    },
    /// Bring a worktree run's change into your current branch (refused on a dirty tree)
    Apply {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// As one new commit instead of merging the run's branch
        #[arg(long)]
        squash: bool,
        /// Apply although the run's judges did not pass the work
        #[arg(long)]
        force: bool,
    },
    /// Remove old finished runs (active runs are left alone)
    #[command(visible_alias = "clean")]
    Prune(PruneArgs),
    /// Write a run as a self-contained bundle (JSON)
    Export {
        /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(allow_negative_numbers = true, value_name = "RUN")]
        run_id: RunRef,
        /// Write to this file instead of stdout
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Import a bundle made by `export` (`-` reads stdin)
    Import { file: PathBuf },
    /// Scheduled runs
    #[command(subcommand)]
    Schedule(ScheduleCmd),
    /// The daemon's caches
    #[command(subcommand)]
    Cache(CacheCmd),
    /// List agents, teams, workflows and skills
    Resources(ResourcesArgs),
    /// Check resource files; exit status 1 when any has an error
    Validate {
        /// Project directory whose .crew/ is checked [default: current directory]
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// The daemon itself
    #[command(subcommand)]
    Daemon(DaemonCmd),
    /// Open the web dashboard on a loopback address (runs until Ctrl-C)
    Ui {
        /// Address or port to listen on [default: a free port on 127.0.0.1]
        #[arg(long, value_parser = crate::ui::parse_listen, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Print the URL only; do not start a browser
        #[arg(long)]
        no_open: bool,
        /// Allow a non-loopback address without TLS (anyone on the path can read the token)
        #[arg(long)]
        allow_remote_without_tls: bool,
    },
    /// Serve crew's runs as MCP tools over stdin/stdout (for Claude Code, Codex, any MCP client)
    Mcp {
        /// Serve only the `ask_user` tool crewd gives its Claude Code, Codex, Gemini CLI and
        /// opencode workers (needs no daemon)
        #[arg(long, hide = true)]
        ask: bool,
        /// With --ask: the tool's name (Gemini CLI hides tools named `ask_user`)
        #[arg(long, hide = true, requires = "ask", default_value = crew_mcp::ASK_TOOL)]
        tool: String,
    },
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages into a directory
    #[command(hide = true)]
    Man { dir: PathBuf },
}

#[derive(Debug, Args)]
pub struct RunCmd {
    #[command(flatten)]
    pub args: RunArgs,
    /// Return as soon as the run is created instead of following it
    #[arg(short, long)]
    pub detach: bool,
    #[command(flatten)]
    pub blocks: BlocksArgs,
}

/// What following does when the run blocks.
#[derive(Debug, Clone, Copy, Args)]
pub struct BlocksArgs {
    /// Keep following when the run blocks (plan approval, a question, attention); in a terminal,
    /// offer to approve, reject, answer or retry inline. The default in a terminal
    #[arg(long, conflicts_with = "stop_at_block")]
    pub through_blocks: bool,
    /// Stop following when the run blocks, with exit status 2. The default when not in a terminal
    #[arg(long)]
    pub stop_at_block: bool,
}

impl BlocksArgs {
    /// Whether to follow through blocks, given whether stdin and stdout are a terminal.
    pub fn through(self, terminal: bool) -> bool {
        self.through_blocks || (terminal && !self.stop_at_block)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailurePolicyArg {
    /// Stop starting tasks after the first failure
    FailFast,
    /// Skip only the dependents of a failed task
    Continue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReuseArg {
    /// Read-only roles may reuse earlier results
    ReadOnly,
    /// Every role may reuse earlier results
    All,
}

/// What `team.run` and `team.plan` take.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// What the team should achieve
    pub goal: String,
    /// Team [default: the daemon's default team]
    #[arg(short, long)]
    pub team: Option<String>,
    /// Workflow [default: the team's]
    #[arg(short, long)]
    pub workflow: Option<String>,
    /// Worker runtime, e.g. pi, claude, codex, fake
    #[arg(short, long)]
    pub runtime: Option<String>,
    /// Model for every task (overrides agents and steps)
    #[arg(short, long)]
    pub model: Option<String>,
    /// Tasks running at once in this run
    #[arg(short = 'j', long, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// What a failed task does to the rest of the run
    #[arg(long, value_enum, value_name = "POLICY")]
    pub failure_policy: Option<FailurePolicyArg>,
    /// Token budget (input + output + cache writes); the run stops when it is used up
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub budget_tokens: Option<u64>,
    /// Fraction of the budget that triggers a warning [default: 0.8]
    #[arg(long, value_name = "FRACTION", requires = "budget_tokens")]
    pub budget_warn: Option<f64>,
    /// Fraction of the budget that stops the run [default: 1.0]
    #[arg(long, value_name = "FRACTION", requires = "budget_tokens")]
    pub budget_abort: Option<f64>,
    /// Ask for approval before the first task that may write starts
    #[arg(long)]
    pub approve_plan: bool,
    /// Reuse results of identical earlier tasks (read-only roles; `=all` for every role)
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "read-only", value_name = "WHICH")]
    pub reuse_results: Option<ReuseArg>,
    /// Working directory of the workers [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// `worktree`: every task in its own git worktree, results as commits on crew/<run>
    #[arg(long, value_enum, value_name = "MODE")]
    pub workspace: Option<WorkspaceArg>,
    /// Refuse to start a worktree run when the tree has uncommitted changes
    #[arg(long)]
    pub refuse_dirty: bool,
    /// What a worktree run does when the merge of results conflicts: an agent resolves it, or
    /// you do [default: the team's `conflicts`, else the daemon's, agent]
    #[arg(long, value_enum, value_name = "MODE")]
    pub conflicts: Option<ConflictsArg>,
    /// Tasks one fan-out step may add (1-256) [default: the daemon's max_fan_out_tasks, 16]
    #[arg(long, value_name = "N")]
    pub max_fan_out_tasks: Option<u32>,
    /// Fix rounds a judge's failing verdicts may start (0-20) [default: the step's or team's
    /// maxFixRounds, else the daemon's max_fix_rounds, 2]
    #[arg(long, value_name = "N")]
    pub max_fix_rounds: Option<u32>,
    /// Every task may complete without changing files (the no-change guard off for this run,
    /// as a step's allowNoChange: true)
    #[arg(long)]
    pub allow_no_change: bool,
    /// Candidates for every writing task (1-8): N attempts at once, each in its own worktree,
    /// and the one that proves best is kept [default: the step's or role's `candidates`]
    #[arg(long, value_name = "N")]
    pub candidates: Option<u32>,
    /// How candidates are chosen: smallest, first or judge [default: judge when the team has
    /// a reviewer or verifier, else smallest]
    #[arg(long, value_name = "HOW", requires = "candidates")]
    pub select: Option<String>,
    /// Run this one agent as a one-step team (no team file)
    #[arg(long, value_name = "AGENT", conflicts_with_all = ["team", "workflow", "chain"])]
    pub agent: Option<String>,
    /// The role of the `--agent` task [default: the agent's name]
    #[arg(long, requires = "agent")]
    pub role: Option<String>,
    /// Run these teams one after another as one run, each handing its results to the next
    #[arg(long, value_name = "TEAMS", value_delimiter = ',', conflicts_with_all = ["team", "workflow"])]
    pub chain: Option<Vec<String>>,
    /// Skills added to every task (comma-separated)
    #[arg(
        long,
        value_name = "SKILLS",
        value_delimiter = ',',
        conflicts_with = "no_skills"
    )]
    pub skills: Option<Vec<String>>,
    /// No skills for any task
    #[arg(long)]
    pub no_skills: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConflictsArg {
    Agent,
    Manual,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkspaceArg {
    Shared,
    Worktree,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunStatusArg {
    Queued,
    Running,
    Blocked,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Only runs with this status
    #[arg(long, value_enum)]
    pub status: Option<RunStatusArg>,
    /// At most this many runs [default: 50]
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Every run (pages through the whole list)
    #[arg(short, long, conflicts_with = "limit")]
    pub all: bool,
    /// Runs older than this run (paging; any form a run is named by)
    #[arg(long, value_name = "RUN", allow_negative_numbers = true)]
    pub before: Option<RunRef>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
    #[arg(allow_negative_numbers = true, value_name = "RUN")]
    pub run_id: RunRef,
    /// A task: show its transcript instead of the run's events
    pub task_id: Option<String>,
    /// Follow the run live until it stops
    #[arg(short, long)]
    pub follow: bool,
    /// Transcript of this attempt [default: the latest]
    #[arg(long, requires = "task_id", value_name = "N")]
    pub attempt: Option<u32>,
    /// Also show progress events, the full prompt, thinking and tool output
    #[arg(short, long)]
    pub verbose: bool,
    #[command(flatten)]
    pub blocks: BlocksArgs,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Keep this many newest finished runs [default: 20]
    #[arg(long, value_name = "N")]
    pub keep: Option<u32>,
    /// Only remove runs older than this (e.g. 7d, 12h)
    #[arg(long, value_parser = parse_duration, value_name = "AGE")]
    pub older_than: Option<std::time::Duration>,
    /// Also delete worktrees that hold uncommitted work
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCmd {
    /// Add a job that starts a run on a schedule
    Add(ScheduleAddArgs),
    /// List jobs
    #[command(visible_alias = "list")]
    Ls,
    /// Show one job
    #[command(visible_alias = "show")]
    Get {
        /// Job: its id or its name
        #[arg(value_name = "JOB")]
        id: String,
    },
    /// Change a job
    Update(ScheduleUpdateArgs),
    /// Enable a job
    Enable {
        /// Job: its id or its name
        #[arg(value_name = "JOB")]
        id: String,
    },
    /// Disable a job
    Disable {
        /// Job: its id or its name
        #[arg(value_name = "JOB")]
        id: String,
    },
    /// Remove a job (its active runs are cancelled unless --keep-runs)
    #[command(visible_alias = "remove")]
    Rm {
        /// Job: its id or its name
        #[arg(value_name = "JOB")]
        id: String,
        /// Leave the job's still-active runs running
        #[arg(long)]
        keep_runs: bool,
    },
    /// Fire a job now (shown as its last fire; the schedule itself does not move)
    Trigger {
        /// Job: its id or its name
        #[arg(value_name = "JOB")]
        id: String,
    },
    /// Show the next fire times of a cron expression
    Preview {
        cron: String,
        /// IANA time zone [default: the daemon's]
        #[arg(long, visible_alias = "timezone", value_name = "ZONE")]
        tz: Option<String>,
        /// How many fire times
        #[arg(short = 'n', long, default_value_t = 5)]
        count: u32,
        /// Start from this instant (RFC 3339) [default: now]
        #[arg(long, value_name = "TIME")]
        from: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OverlapArg {
    Skip,
    Allow,
    CancelPrevious,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CatchUpArg {
    Latest,
    None,
    All,
}

/// When a job fires: exactly one of these.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct WhenArgs {
    /// Cron expression (5 fields, or 6 with seconds; @daily etc.)
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// Fixed interval (e.g. 15m, 2h)
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub every: Option<std::time::Duration>,
    /// Once, at this instant (RFC 3339)
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct JobPolicyArgs {
    /// IANA time zone of the schedule [default: the daemon's]
    #[arg(long, visible_alias = "timezone", value_name = "ZONE")]
    pub tz: Option<String>,
    /// What to do when a fire comes while the previous run is still active
    #[arg(long, value_enum)]
    pub overlap: Option<OverlapArg>,
    /// Which fires missed while the daemon was down to make up
    #[arg(long, value_enum)]
    pub catch_up: Option<CatchUpArg>,
}

#[derive(Debug, Args)]
pub struct ScheduleAddArgs {
    /// A name for the job, unique; every `schedule` verb takes it instead of the id
    /// [default: the team and the start of the goal]
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub when: WhenArgs,
    #[command(flatten)]
    pub policy: JobPolicyArgs,
    /// Add the job disabled
    #[arg(long)]
    pub disabled: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct ScheduleUpdateArgs {
    /// Job: its id or its name
    #[arg(value_name = "JOB")]
    pub id: String,
    /// A new name (unique)
    #[arg(long)]
    pub name: Option<String>,
    /// New cron expression
    #[arg(long, value_name = "EXPR", conflicts_with_all = ["every", "at"])]
    pub cron: Option<String>,
    /// New interval
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", conflicts_with = "at")]
    pub every: Option<std::time::Duration>,
    /// New one-shot instant (RFC 3339)
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    #[command(flatten)]
    pub policy: JobPolicyArgs,
    /// New goal of the runs
    #[arg(long)]
    pub goal: Option<String>,
    #[arg(long)]
    pub team: Option<String>,
    #[arg(long)]
    pub workflow: Option<String>,
    #[arg(long)]
    pub runtime: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CacheCmd {
    /// Hits, misses, evictions and sizes per cache
    Stats,
    /// Empty a cache (default: all)
    Clear {
        #[arg(value_enum)]
        cache: Option<CacheArg>,
    },
    /// Drop what is cached about one resource file or one run
    Invalidate {
        /// A resource file
        #[arg(
            long,
            value_name = "PATH",
            conflicts_with = "run",
            required_unless_present = "run"
        )]
        path: Option<PathBuf>,
        /// A run: its id, a unique prefix of the id's last part, `last` or `-N` (N-th newest)
        #[arg(long, value_name = "RUN", allow_negative_numbers = true)]
        run: Option<RunRef>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CacheArg {
    Resources,
    Results,
    Runs,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    Agent,
    Team,
    Workflow,
    Skill,
}

#[derive(Debug, Args)]
pub struct ResourcesArgs {
    /// Only this kind
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Project directory whose .crew/ resources are included [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// Show the daemon's version, socket, state and load
    Status,
    /// Stop the daemon gracefully
    Stop,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::render::time::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("crewctl").chain(args.iter().copied()))
    }

    #[test]
    fn run_flags() {
        let cli = parse(&[
            "run",
            "fix it",
            "--team",
            "fast-fix",
            "-j",
            "3",
            "--failure-policy",
            "continue",
            "--budget-tokens",
            "5000",
            "--budget-warn",
            "0.5",
            "--approve-plan",
            "--reuse-results",
            "--detach",
            "--json",
        ])
        .unwrap();
        let Command::Run(r) = cli.command else {
            panic!("not run")
        };
        assert!(cli.json && r.detach && r.args.approve_plan);
        assert_eq!(r.args.goal, "fix it");
        assert_eq!(r.args.concurrency, Some(3));
        assert_eq!(r.args.failure_policy, Some(FailurePolicyArg::Continue));
        assert_eq!(r.args.reuse_results, Some(ReuseArg::ReadOnly));
        let cli = parse(&["plan", "x", "--reuse-results=all"]).unwrap();
        let Command::Plan(p) = cli.command else {
            panic!("not plan")
        };
        assert_eq!(p.reuse_results, Some(ReuseArg::All));
    }

    #[test]
    fn rejected_command_lines() {
        let bad: &[&[&str]] = &[
            &["run"],
            &["run", "x", "--budget-warn", "0.5"],
            &["run", "x", "-j", "0"],
            &["run", "x", "--budget-tokens", "0"],
            &["retry", "r-1"],
            &["wait", "r-1", "--timeout", "soon"],
            &["schedule", "add", "goal"],
            &[
                "schedule",
                "add",
                "goal",
                "--cron",
                "* * * * *",
                "--every",
                "5m",
            ],
            &["cache", "invalidate"],
            &["logs", "r-1", "--attempt", "2"],
            &["--color", "sometimes", "ls"],
        ];
        for args in bad {
            assert!(parse(args).is_err(), "{args:?} should be rejected");
        }
    }

    #[test]
    fn accepted_command_lines() {
        let good: &[&[&str]] = &[
            &["ls", "--all", "--status", "failed"],
            &["logs", "r-1", "01_explore", "-f", "--attempt", "2"],
            &["wait", "r-1", "--timeout", "1h30m"],
            &["prune", "--keep", "5", "--older-than", "7d"],
            &[
                "schedule",
                "add",
                "nightly",
                "--cron",
                "0 3 * * *",
                "--tz",
                "Europe/Berlin",
                "--team",
                "review",
            ],
            &[
                "schedule",
                "add",
                "poll",
                "--every",
                "15m",
                "--overlap",
                "cancel-previous",
                "--catch-up",
                "none",
            ],
            &["schedule", "preview", "@daily", "-n", "3"],
            &["schedule", "rm", "s-1", "--keep-runs"],
            &["schedule", "show", "nightly review"],
            &["retry", "last", "01_explore", "--with-dependents"],
            &["cache", "clear", "results"],
            &["cache", "invalidate", "--run", "r-1"],
            &["resources", "--kind", "team"],
            &["completions", "zsh"],
            &["--socket", "/tmp/x.sock", "daemon", "status"],
            &["man", "/tmp/man"],
        ];
        for args in good {
            if let Err(e) = parse(args) {
                panic!("{args:?} should parse: {e}");
            }
        }
    }
}
