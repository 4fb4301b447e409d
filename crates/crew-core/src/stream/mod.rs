//! Agent CLI adapters: how to build a worker's command line and how to read its stdout.
//!
//! Each adapter turns LF-delimited stdout lines into normalized [`WorkerEvent`]s and keeps what
//! it needs to produce the final [`Outcome`]. Parsers are pure and never panic on any input.

mod acp;
mod classify;
mod claude;
mod codex;
mod codex_app;
mod command;
mod gemini;
mod jsonc;
mod opencode;
mod pi;

pub use classify::{is_capacity_message, is_retryable_message, is_retryable_spawn_error};
pub use gemini::{
    ask_settings as gemini_ask_settings, AskSettingsError as GeminiAskSettingsError,
    ENV_HOME as GEMINI_ENV_HOME,
};

use crate::usage::Usage;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdapterKind {
    Pi,
    Claude,
    Codex,
    Gemini,
    Opencode,
    Command,
}

/// How the prompt reaches a `command` adapter program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PromptVia {
    /// Last argv entry.
    #[default]
    Arg,
    /// A file path as last argv entry.
    File,
    /// The prompt file is the program's stdin.
    Stdin,
}

/// Environment variable naming the file that holds the system prompt, for `command` runtimes
/// (they have no flag crew could know).
pub const ENV_SYSTEM_PROMPT_FILE: &str = "CREW_SYSTEM_PROMPT_FILE";

/// Everything needed to build one worker's argv.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    /// The runtime's command: program followed by fixed extra args (from config).
    pub command: Vec<String>,
    /// The rendered task prompt.
    pub prompt: String,
    /// Path of a file holding the prompt (already written by the caller). Used when the prompt
    /// is too long for argv, or when `PromptVia::File`.
    pub prompt_file: Option<String>,
    pub system_prompt: String,
    pub system_prompt_mode: crate::resource::SystemPromptMode,
    /// Path of a file holding the system prompt (already written by the caller), if any.
    pub system_prompt_file: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub tools: Vec<String>,
    /// Live mode: stdin is a pipe owned by the daemon, the prompt its first message and a steer
    /// the next ones (pi `--mode rpc`, claude `--input-format stream-json`, `codex app-server`).
    /// Other adapters ignore it.
    pub rpc: bool,
    pub prompt_via: PromptVia,
    /// Agent `effort` (claude `--effort`, codex `model_reasoning_effort`).
    pub effort: Option<String>,
    /// Models to fall back to, in order (claude `--fallback-model`).
    pub fallback_models: Vec<String>,
    /// Directories holding the task's skills as `SKILL.md` (pi `--skill`; the other CLIs get
    /// them only in the prompt).
    pub skill_dirs: Vec<String>,
    /// The agent CLI's session: where it is kept, and whether this attempt continues one.
    pub session: SessionSpec,
    /// The worker's working directory (absolute; a protocol that opens a session names it).
    pub cwd: String,
}

/// A worker's conversation across attempts: the attempt that asked the user keeps its session,
/// and the attempt after the answer continues it with the answer as its prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionSpec {
    /// pi: the session file the attempt writes (`--session FILE` instead of `--no-session`);
    /// the same file again continues it.
    pub file: Option<String>,
    /// claude / codex / gemini / opencode: the recorded session id to continue (`claude -p
    /// --resume ID`, `codex exec resume ID`, `gemini --resume ID`, `opencode run --session=ID`).
    /// The prompt is then the answer.
    pub resume: Option<String>,
    /// pi: crew's extension file that gives the agent its `ask_user` tool (`--extension`).
    pub ask_extension: Option<String>,
    /// claude / codex / opencode: the command (program first) of crew's stdio MCP server that
    /// gives the agent its `ask_user` tool (`crewctl mcp --ask`), registered as
    /// [`ASK_MCP_SERVER`].
    pub ask_server: Option<Vec<String>>,
    /// gemini: the home crew made for Gemini CLI (`GEMINI_CLI_HOME`) whose settings register
    /// its ask server ([`gemini_ask_settings`]); the rest of it is the user's own `.gemini`.
    pub ask_config: Option<String>,
}

/// The tool an agent calls to ask the user something (pi: from crew's extension).
pub const ASK_TOOL: &str = "ask_user";

/// The MCP server name crew's ask server is registered under for claude, codex and opencode:
/// Claude Code calls its tool `mcp__crew_ask__ask_user`, codex reports `server: "crew_ask"`,
/// opencode calls it `crew_ask_ask_user`. Not `crew`,
/// which is what a user names `crewctl mcp` in their own settings.
pub const ASK_MCP_SERVER: &str = "crew_ask";

/// `flag value` on argv, or `flag=value` when the value looks like an option: no model,
/// level or name starts with `-`, and Gemini CLI's and opencode's parsers read `--model
/// --version` as two options (a plan's model from a project's `.crew/` or a bundle). The
/// `=` form hands such a value to the CLI as the value, which it refuses as one.
pub(super) fn push_value(argv: &mut Vec<String>, flag: &str, value: &str) {
    if value.starts_with('-') {
        argv.push(format!("{flag}={value}"));
    } else {
        argv.push(flag.to_owned());
        argv.push(value.to_owned());
    }
}

/// True for a CLI session id crew passes back to the CLI on argv (`--resume=ID`, `exec resume
/// ID`): the ids the CLIs make are UUIDs; anything else the stream said (an option-like or
/// empty string) is not trusted with a place on argv.
pub fn is_resumable_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// crew's pi extension registering [`ASK_TOOL`]: the daemon writes it into the run directory
/// and passes it with `--extension`.
pub const PI_ASK_EXTENSION: &str = include_str!("pi_ask_extension.ts");

impl LaunchSpec {
    /// True when the role may change files through an edit or write tool: the adapters that
    /// have a write permission (claude's permission mode, codex's sandbox) grant it only then.
    pub fn edits_files(&self) -> bool {
        edits_files(&self.tools)
    }
}

/// True when `tools` (crew's tool names) hold an edit or write tool.
pub fn edits_files(tools: &[String]) -> bool {
    tools.iter().any(|t| t == "edit" || t == "write")
}

/// Where a worker's stdin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinFrom {
    /// `/dev/null`: print-mode agents read a piped stdin to its end before they start.
    Null,
    /// A regular file (the prompt): read to its end at once, never a pipe left open.
    File(String),
    /// A pipe the daemon writes (pi's rpc mode).
    Pipe,
}

/// How to start one worker: its argv (program first), extra environment and stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub stdin: StdinFrom,
}

impl Launch {
    fn args(argv: Vec<String>) -> Launch {
        Launch {
            argv,
            env: Vec::new(),
            stdin: StdinFrom::Null,
        }
    }
}

/// Prompts longer than this go through a file, not argv (pi-crew's `TASK_ARG_LIMIT`).
pub const ARGV_PROMPT_LIMIT: usize = 8000;

/// Build the argv (program first), environment and stdin for a worker.
pub fn build_launch(kind: AdapterKind, spec: &LaunchSpec) -> Launch {
    match kind {
        AdapterKind::Pi => Launch {
            stdin: if spec.rpc {
                StdinFrom::Pipe
            } else {
                StdinFrom::Null
            },
            ..Launch::args(pi::argv(spec))
        },
        AdapterKind::Claude => claude::launch(spec),
        AdapterKind::Codex => codex::launch(spec),
        AdapterKind::Gemini => gemini::launch(spec),
        AdapterKind::Opencode => opencode::launch(spec),
        AdapterKind::Command => command::launch(spec),
    }
}

/// The argv (program first) for a worker.
pub fn build_argv(kind: AdapterKind, spec: &LaunchSpec) -> Vec<String> {
    build_launch(kind, spec).argv
}

/// What a runtime cannot enforce of a role's tool list, one sentence each (for `team.plan` and
/// `team.run` diagnostics). Empty when the adapter enforces all of it.
pub fn policy_gaps(kind: AdapterKind, tools: &[String]) -> Vec<String> {
    match kind {
        AdapterKind::Pi | AdapterKind::Opencode => Vec::new(),
        AdapterKind::Claude => claude::policy_gaps(tools),
        AdapterKind::Codex => codex::policy_gaps(tools),
        AdapterKind::Gemini => gemini::policy_gaps(tools),
        AdapterKind::Command if tools.is_empty() => Vec::new(),
        AdapterKind::Command => {
            vec!["a `command` runtime gets no tool list: the program decides what it may do".into()]
        }
    }
}

/// For pi's rpc-mode workers: the stdin lines to send at start (the prompt) and for a steer
/// (the fake agent's tests drive it with them).
pub fn rpc_prompt_line(prompt: &str) -> String {
    pi::rpc_prompt_line(prompt)
}
pub fn rpc_steer_line(message: &str) -> String {
    pi::rpc_steer_line(message)
}

/// The adapters whose CLI has a live mode (`LaunchSpec::rpc`): stdin a pipe the daemon owns,
/// on which it starts the work and steers the running agent. pi's rpc mode, Claude Code's
/// stream-json input, `codex app-server`, Gemini CLI's and opencode's Agent Client Protocol
/// (`gemini --acp`, `opencode acp`).
pub const LIVE_ADAPTERS: &[AdapterKind] = &[
    AdapterKind::Pi,
    AdapterKind::Claude,
    AdapterKind::Codex,
    AdapterKind::Gemini,
    AdapterKind::Opencode,
];

/// True when a runtime of this adapter with this command is live unless it says `rpc = false`:
/// pi, Claude Code, and codex unless its command names `exec` (the user chose `codex exec` and
/// its flags, which `codex app-server` does not take). Gemini CLI and opencode run live only
/// with `rpc = true`: over ACP their usage is not the whole of what the API reported (see
/// `stream/acp.rs`), so their print modes stay the default.
pub fn live_by_default(kind: AdapterKind, command: &[String]) -> bool {
    match kind {
        AdapterKind::Pi | AdapterKind::Claude => true,
        AdapterKind::Codex => !command_excludes_live_mode(kind, command),
        AdapterKind::Gemini | AdapterKind::Opencode | AdapterKind::Command => false,
    }
}

/// True when a runtime's command rules its adapter's live mode out: a codex command that names
/// `exec` (its flags are `codex exec`'s, which `codex app-server` does not take).
pub fn command_excludes_live_mode(kind: AdapterKind, command: &[String]) -> bool {
    kind == AdapterKind::Codex && codex::names_exec(command)
}

/// True when the adapter has a live mode (see [`LIVE_ADAPTERS`]).
pub fn has_live_mode(kind: AdapterKind) -> bool {
    LIVE_ADAPTERS.contains(&kind)
}

/// The names of [`LIVE_ADAPTERS`] as config spells them, for messages: `pi`, `claude`, `codex`.
pub fn live_adapter_names() -> String {
    LIVE_ADAPTERS
        .iter()
        .map(|k| format!("`{}`", k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl AdapterKind {
    /// The adapter's name in config (`adapter = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            AdapterKind::Pi => "pi",
            AdapterKind::Claude => "claude",
            AdapterKind::Codex => "codex",
            AdapterKind::Gemini => "gemini",
            AdapterKind::Opencode => "opencode",
            AdapterKind::Command => "command",
        }
    }
}

/// True when a live worker of this adapter says when it took each stdin message
/// ([`WorkerEvent::InputTaken`]; Claude Code's `--replay-user-messages`): its `Finished` is
/// then its last only once it took every message written to it, since a message it took after
/// its last model call makes it run another turn.
pub fn live_input_is_acknowledged(kind: AdapterKind) -> bool {
    kind == AdapterKind::Claude
}

/// A normalized thing that happened in a worker's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerEvent {
    Started {
        session_id: Option<String>,
        model: Option<String>,
    },
    ToolStart {
        name: String,
        args: String,
    },
    ToolEnd {
        name: String,
        ok: bool,
    },
    /// An assistant message finished. `usage` is this message's usage (not cumulative).
    AssistantMessage {
        text: Option<String>,
        model: Option<String>,
        usage: Usage,
        stop_reason: Option<String>,
        error: Option<String>,
    },
    TurnEnd,
    /// The agent is done answering (pi `agent_end`, claude `result`, codex `turn.completed`
    /// of the last turn). Starts the final drain.
    Finished,
    /// A live worker took a message from its stdin (the prompt or a steer; Claude Code's
    /// replay of it, see [`live_input_is_acknowledged`]).
    InputTaken,
    /// An error reported in the stream.
    Error {
        message: String,
    },
    /// The worker asks the user a question (a call of the `ask_user` tool: pi's from crew's
    /// extension). The task then goes `waiting` until the user answers.
    Ask {
        question: String,
    },
    /// The agent's CLI refused a tool call (a permission denial, a tool the role does not
    /// have, a write the sandbox blocked). `write`: the call would have changed files.
    Refused {
        tool: String,
        message: String,
        write: bool,
    },
}

impl WorkerEvent {
    /// True for the event after which the worker may linger and should be drained (pi:
    /// a final assistant `message_end` with stopReason stop and no tool call, or `agent_end`).
    pub fn is_final(&self) -> bool {
        match self {
            WorkerEvent::Finished => true,
            WorkerEvent::AssistantMessage {
                stop_reason,
                text,
                error,
                ..
            } => {
                error.is_none()
                    && text.is_some()
                    && matches!(stop_reason.as_deref(), Some("stop") | None)
            }
            _ => false,
        }
    }
}

/// What a worker produced, once its stream is over.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    /// Final assistant text (last non-empty assistant text).
    pub final_text: Option<String>,
    pub usage: Usage,
    pub model: Option<String>,
    /// Error reported in the stream (e.g. `stopReason: "error"` with `errorMessage`), even when
    /// the process exited 0.
    pub error: Option<String>,
    /// Whether `error` is worth a retry, when the stream says so itself (an API status);
    /// `None`: judge by the message.
    pub retryable: Option<bool>,
    /// Calls of file-changing tools the agent made, and how many of them were refused.
    pub writes: Writes,
    /// The CLI's own session id, when its stream names one (claude `session_id`, codex
    /// `thread_id`, opencode `sessionID`): what a later attempt resumes.
    pub session_id: Option<String>,
}

/// File-changing tool calls of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Writes {
    pub tried: u32,
    pub refused: u32,
}

impl Writes {
    /// Every write the agent tried was refused (and it tried at least one).
    pub fn all_refused(&self) -> bool {
        self.tried > 0 && self.refused >= self.tried
    }
}

/// Is an API status worth a retry: rate limits, overload (529) and server errors are; any
/// other client error (400 bad request, 401, 403, 404, 413) is not.
pub fn status_retryable(status: u64) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// Stateful reader of one worker's stdout.
pub trait StreamParser: Send {
    /// Feed one line (without the trailing `\n`; a trailing `\r` may be present). Returns the
    /// normalized events in it. Invalid JSON lines are tolerated (adapter decides).
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent>;
    /// Usage so far (for live budgets and progress).
    fn usage(&self) -> Usage;
    /// The outcome after the stream ended.
    fn outcome(&self) -> Outcome;

    /// Live mode: the stdin lines (each without its `\n`) that start the work with `prompt`.
    /// A protocol that must hear from the agent first (a handshake, a session to open) sends
    /// its first request here and the rest from [`StreamParser::live_replies`].
    fn live_start(&mut self, _prompt: &str) -> Vec<String> {
        Vec::new()
    }
    /// Live mode: the stdin lines that steer the running agent with `message` now. Empty when
    /// the protocol keeps the message for a moment the agent can take it (then it comes out of
    /// [`StreamParser::live_replies`]).
    fn live_steer(&mut self, _message: &str) -> Vec<String> {
        Vec::new()
    }
    /// Live mode: the stdin lines the agent must get now, in answer to the lines fed so far (a
    /// protocol's next request, the answer to a request of the agent's). Each is returned once.
    fn live_replies(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// True when a prompt is too long for argv and must go through a prompt file.
pub fn prompt_needs_file(prompt: &str) -> bool {
    prompt.len() > ARGV_PROMPT_LIMIT
}

/// True when an attempt's prompt goes through its prompt file (stdin, or a path): too long for
/// argv, a `command` runtime that asks for it, or opencode, whose `run` wraps a message argument
/// holding a space in quotes and escapes the quotes inside (`say "hi"` reaches the model as
/// `"say \"hi\""`); stdin reaches it as written.
pub fn prompt_through_file(kind: AdapterKind, prompt: &str, via: PromptVia) -> bool {
    prompt_needs_file(prompt) || via != PromptVia::Arg || kind == AdapterKind::Opencode
}

/// The parser of one attempt launched from `spec`. `asked`: when the attempt continues the
/// session of the attempt before it (an answer), that attempt's stream (its transcript).
pub fn attempt_parser(
    kind: AdapterKind,
    spec: &LaunchSpec,
    asked: Option<&str>,
) -> Box<dyn StreamParser> {
    if kind == AdapterKind::Codex && spec.rpc {
        let before = asked.map(codex_app::thread_total).unwrap_or_default();
        return Box::new(codex_app::CodexAppParser::new(spec, before));
    }
    // Gemini CLI and opencode live: crew speaks ACP to them.
    let flavor = match kind {
        AdapterKind::Gemini => Some(acp::Flavor::Gemini),
        AdapterKind::Opencode => Some(acp::Flavor::Opencode),
        _ => None,
    };
    if let (Some(flavor), true) = (flavor, spec.rpc) {
        let parser = acp::AcpParser::new(flavor, spec);
        return Box::new(match asked {
            Some(asked) => parser.resuming(asked),
            None => parser,
        });
    }
    match asked {
        Some(asked) => resuming_parser(kind, asked),
        None => parser(kind),
    }
}

/// What an attempt's transcript shows it spent, read with the parser its stream had: the usage
/// of a worker that died with the daemon (recovery counts it). `asked`: the stream of the
/// attempt whose session it continued (an answer's), as the live parser had it.
pub fn transcript_usage(
    kind: AdapterKind,
    rpc: bool,
    transcript: &str,
    asked: Option<&str>,
) -> Usage {
    let spec = LaunchSpec {
        rpc,
        ..codex_app::empty_spec()
    };
    let mut p = attempt_parser(kind, &spec, asked);
    for line in transcript.lines() {
        p.feed_line(line);
    }
    p.usage()
}

/// The parser for an attempt that continues the session of the attempt whose stream was
/// `asked` (its transcript): codex counts usage over the whole thread, so the resumed
/// attempt's usage starts from the totals the earlier stream ended with; the other CLIs
/// report each invocation's own usage.
pub fn resuming_parser(kind: AdapterKind, asked: &str) -> Box<dyn StreamParser> {
    match kind {
        AdapterKind::Codex => Box::new(codex::CodexParser::resuming(codex::thread_total(asked))),
        _ => parser(kind),
    }
}

pub fn parser(kind: AdapterKind) -> Box<dyn StreamParser> {
    match kind {
        AdapterKind::Pi => Box::new(pi::PiParser::default()),
        AdapterKind::Claude => Box::new(claude::ClaudeParser::default()),
        AdapterKind::Codex => Box::new(codex::CodexParser::default()),
        AdapterKind::Gemini => Box::new(gemini::GeminiParser::default()),
        AdapterKind::Opencode => Box::new(opencode::OpencodeParser::default()),
        AdapterKind::Command => Box::new(command::CommandParser::default()),
    }
}

/// Tool arguments shown in events are cut to about this many characters.
pub(crate) const TOOL_ARGS_LIMIT: usize = 200;

/// Drop one trailing `\r` (CRLF streams).
pub(crate) fn strip_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// Cut `s` to at most `max` characters (on a char boundary), marking the cut with `…`.
pub(crate) fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => {
            let mut out = String::with_capacity(at + 3);
            out.push_str(s.get(..at).unwrap_or_default());
            out.push('…');
            out
        }
        None => s.to_owned(),
    }
}

/// A JSON value as a token count: non-negative numbers only (floats truncated), else 0.
pub(crate) fn json_count(v: Option<&serde_json::Value>) -> u64 {
    match v {
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f > 0.0)
                    .map(|f| f as u64)
            })
            .unwrap_or(0),
        _ => 0,
    }
}

/// A JSON value as a USD amount: finite non-negative numbers only, else 0.
pub(crate) fn json_cost(v: Option<&serde_json::Value>) -> f64 {
    v.and_then(serde_json::Value::as_f64)
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(0.0)
}

/// `acc += u`, saturating: counts in a stream are untrusted and must not overflow.
pub(crate) fn add_usage(acc: &mut Usage, u: &Usage) {
    acc.input = acc.input.saturating_add(u.input);
    acc.output = acc.output.saturating_add(u.output);
    acc.cache_read = acc.cache_read.saturating_add(u.cache_read);
    acc.cache_write = acc.cache_write.saturating_add(u.cache_write);
    acc.turns = acc.turns.saturating_add(u.turns);
    let cost = acc.cost + u.cost;
    acc.cost = if cost.is_finite() { cost } else { f64::MAX };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_prompts_go_through_the_prompt_file() {
        let long = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        for (kind, prompt, via, want) in [
            (AdapterKind::Claude, "short", PromptVia::Arg, false),
            (AdapterKind::Claude, long.as_str(), PromptVia::Arg, true),
            (AdapterKind::Command, "short", PromptVia::Stdin, true),
            (AdapterKind::Command, "short", PromptVia::File, true),
            (AdapterKind::Opencode, "short", PromptVia::Arg, true),
        ] {
            assert_eq!(
                prompt_through_file(kind, prompt, via),
                want,
                "{kind:?} {via:?}"
            );
        }
    }

    /// A model, level or fallback that looks like an option goes on argv as `--flag=value`:
    /// Gemini CLI and opencode read `--model --version` as two options (tried against the
    /// pinned CLIs: both print their version); a plain one stays `--flag value`.
    #[test]
    fn an_option_like_model_is_never_an_option_of_its_own() {
        let kinds = [
            AdapterKind::Pi,
            AdapterKind::Claude,
            AdapterKind::Codex,
            AdapterKind::Gemini,
            AdapterKind::Opencode,
        ];
        for kind in kinds {
            let mut spec = super::codex_app::empty_spec();
            spec.command = vec!["agent".into()];
            spec.rpc = false;
            spec.prompt = "Goal: g".into();
            spec.model = Some("--version".into());
            spec.thinking = Some("--yolo".into());
            spec.effort = Some("--yolo".into());
            spec.fallback_models = vec!["--yolo".into()];
            let argv = build_argv(kind, &spec);
            assert!(
                !argv.iter().any(|a| a == "--version" || a == "--yolo"),
                "{kind:?}: {argv:?}"
            );
            assert!(
                argv.iter().any(|a| a.starts_with("--model=--version")),
                "{kind:?}: {argv:?}"
            );
            spec.model = Some("m1".into());
            let argv = build_argv(kind, &spec);
            let at = argv.iter().position(|a| a == "--model");
            assert!(
                at.is_some_and(|i| argv.get(i + 1).is_some_and(|m| m.starts_with("m1"))),
                "{kind:?}: {argv:?}"
            );
        }
    }

    use super::is_resumable_session_id;

    #[test]
    fn only_plain_session_ids_go_back_on_argv() {
        for (id, ok) in [
            ("1d623514-ea5c-4f75-aa8a-f0d154a0eccf", true),
            ("thread_01", true),
            ("", false),
            ("--dangerously-skip-permissions", false),
            ("-x", false),
            ("a b", false),
            ("a/../b", false),
            ("ünï", false),
        ] {
            assert_eq!(is_resumable_session_id(id), ok, "{id:?}");
        }
        assert!(!is_resumable_session_id(&"a".repeat(129)));
    }
}
