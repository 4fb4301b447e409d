//! A live worker spoken to in the Agent Client Protocol (ACP: JSON-RPC 2.0, one message a
//! line on stdin and stdout): `gemini --acp` and `opencode acp`.
//!
//! crew is the client. It sends `initialize` (no file system or terminal of its own, so the
//! agent uses its own tools), then `session/new` (or `session/load` to continue the session of
//! an attempt that asked the user), then the prompt as `session/prompt`, which the agent
//! answers when its turn ends. Meanwhile the agent streams `session/update` notifications
//! (message chunks, tool calls and their updates) and asks `session/request_permission` for
//! a call its own policy does not approve; crew answers from the role.
//!
//! ACP has no steer. What the CLIs do with a `session/prompt` sent while one runs:
//! - opencode queues it into the running turn: the model gets it at the next step that reads
//!   the history after opencode stored it (the call after the tool results, or a step of its
//!   own after the turn's answer), and every prompt is answered when that turn ends. crew
//!   sends a steer at once.
//! - Gemini CLI aborts the running prompt (answered `cancelled`) and drops that turn's user
//!   message from its history (the next request lacked the task's prompt; `session/cancel`
//!   does the same): crew holds the steer until the running prompt is answered and sends it as
//!   the next prompt, so the history stays whole and the model gets it at its next call after
//!   that turn.
//!
//! Usage: Gemini CLI reports each prompt's token counts in the answer's `_meta.quota`
//! (`input_tokens` counts the cached tokens too, which it does not name apart). opencode's
//! answer has `usage`, but only of the turn's last model call (and the same one in every
//! prompt a turn answers: counted once); its `usage_update` is the context size.

use super::{
    add_usage, cut_chars, json_count, status_retryable, strip_cr, LaunchSpec, Outcome,
    StreamParser, WorkerEvent, Writes, ASK_MCP_SERVER, ASK_TOOL, TOOL_ARGS_LIMIT,
};
use crate::usage::Usage;
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};

/// The ACP protocol version crew speaks.
const PROTOCOL_VERSION: u64 = 1;

/// Tool calls kept to name their updates; bounded.
const MAX_TOOLS: usize = 4096;

/// Steers held for a moment the agent can take them; bounded (each is a user message).
const MAX_QUEUED: usize = 64;

/// File-changing tools by name, for a refused call whose kind the agent did not say
/// (opencode's and Gemini CLI's).
const WRITE_KINDS_BY_NAME: &[&str] = &[
    "write",
    "edit",
    "patch",
    "multiedit",
    "write_file",
    "replace",
];

/// Which agent CLI speaks: they differ in what a steer does and in their tools' names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Gemini,
    Opencode,
}

/// What the role allows of a tool call the agent asks permission for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Policy {
    edits: bool,
    shell: bool,
}

impl Policy {
    fn allows(self, kind: &str) -> bool {
        match kind {
            "edit" | "delete" | "move" => self.edits,
            "execute" => self.shell,
            "read" | "search" | "think" => true,
            // Web fetches, mode switches and what the agent does not name: never granted by a
            // role (opencode's and Gemini CLI's non-live modes deny them too).
            _ => false,
        }
    }
}

/// Where the protocol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Idle,
    /// `initialize` sent.
    Initializing,
    /// `session/new` or `session/load` sent.
    Opening,
    /// The session is open: prompts go.
    Open,
    /// The agent has nothing left to do (or cannot go on).
    Done,
}

/// A tool call not ended yet.
#[derive(Debug)]
struct Call {
    name: String,
    /// It would change files (counted in `writes.tried`).
    write: bool,
    /// Told as refused already.
    refused: bool,
    /// Told as a question already.
    asked: bool,
}

#[derive(Debug)]
pub(crate) struct AcpParser {
    flavor: Flavor,
    policy: Policy,
    cwd: String,
    /// The session to continue (`session/load`) instead of a new one.
    resume: Option<String>,
    phase: Phase,
    next_id: u64,
    /// Id of the `initialize` / `session/*` request in flight.
    open_id: Option<u64>,
    /// Ids of the prompts not answered yet.
    prompts: BTreeSet<u64>,
    /// The task's prompt, until the session is open.
    prompt: Option<String>,
    /// Steers waiting for a moment the agent can take them.
    queued: Vec<String>,
    replies: Vec<String>,
    session_id: Option<String>,
    model: Option<String>,
    usage: Usage,
    /// Assistant text of the current message.
    text: String,
    /// The last non-empty assistant text.
    last_text: Option<String>,
    error: Option<String>,
    retryable: Option<bool>,
    writes: Writes,
    /// Tool calls by id.
    tools: HashMap<String, Call>,
    started: bool,
    finished: bool,
    /// A loaded session's history may still be coming (Gemini CLI streams it after the
    /// load's answer, opencode before it): what is replayed is not this attempt's.
    replaying: bool,
    /// The assistant messages of the attempt whose session this one loads (from its
    /// transcript): what a replay of its end repeats.
    replayed: Vec<String>,
}

impl AcpParser {
    /// crew's ask server is in the CLI's own configuration (the Gemini home crew made, opencode's
    /// `OPENCODE_CONFIG_CONTENT`), as in the print modes: no MCP server goes in the protocol.
    pub(crate) fn new(flavor: Flavor, spec: &LaunchSpec) -> AcpParser {
        let edits = spec.edits_files();
        let bash = spec.tools.iter().any(|t| t == "bash");
        let policy = match flavor {
            // Gemini CLI's approval mode already approves what the role may do (yolo: all,
            // auto_edit: edits); what it asks about is what its non-live mode denies.
            Flavor::Gemini => Policy {
                edits,
                shell: edits && bash,
            },
            Flavor::Opencode => Policy { edits, shell: bash },
        };
        AcpParser {
            flavor,
            policy,
            cwd: spec.cwd.clone(),
            resume: spec
                .session
                .resume
                .clone()
                .filter(|id| super::is_resumable_session_id(id)),
            phase: Phase::Idle,
            next_id: 0,
            open_id: None,
            prompts: BTreeSet::new(),
            prompt: None,
            queued: Vec::new(),
            replies: Vec::new(),
            session_id: None,
            model: None,
            usage: Usage::default(),
            text: String::new(),
            last_text: None,
            error: None,
            retryable: None,
            writes: Writes::default(),
            tools: HashMap::new(),
            started: false,
            finished: false,
            replaying: false,
            replayed: Vec::new(),
        }
    }

    /// This attempt loads the session of the attempt whose stream (ACP lines) was `asked`.
    pub(crate) fn resuming(mut self, asked: &str) -> AcpParser {
        let mut text = String::new();
        for line in asked.lines() {
            let Ok(Value::Object(msg)) = serde_json::from_str::<Value>(strip_cr(line)) else {
                continue;
            };
            let update = msg.get("params").and_then(|p| p.get("update"));
            let kind = update.and_then(|u| u.get("sessionUpdate")?.as_str());
            match kind {
                Some("agent_message_chunk") => {
                    if let Some(t) = update.and_then(|u| u.get("content")?.get("text")?.as_str()) {
                        text.push_str(t);
                    }
                    continue;
                }
                Some("agent_thought_chunk") => continue,
                _ => {}
            }
            if !text.is_empty() && self.replayed.len() < MAX_TOOLS {
                self.replayed.push(std::mem::take(&mut text));
            }
        }
        if !text.is_empty() {
            self.replayed.push(text);
        }
        self
    }

    fn request(&mut self, method: &str, params: Value) -> (u64, String) {
        self.next_id = self.next_id.saturating_add(1);
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (id, line.to_string())
    }

    fn prompt_line(&mut self, text: &str) -> String {
        let session = self.session_id.clone().unwrap_or_default();
        let (id, line) = self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        self.prompts.insert(id);
        line
    }

    /// The assistant text streamed so far becomes one message.
    fn close_text(&mut self, stop_reason: &str) -> Option<WorkerEvent> {
        if self.text.is_empty() {
            return None;
        }
        let text = std::mem::take(&mut self.text);
        let text = (!text.trim().is_empty()).then_some(text);
        if text.is_some() {
            self.last_text.clone_from(&text);
        }
        Some(WorkerEvent::AssistantMessage {
            text,
            model: self.model.clone(),
            usage: Usage::default(),
            stop_reason: Some(stop_reason.into()),
            error: None,
        })
    }

    fn finish(&mut self, events: &mut Vec<WorkerEvent>) {
        self.phase = Phase::Done;
        if !self.finished {
            self.finished = true;
            events.push(WorkerEvent::Finished);
        }
    }

    fn fail(&mut self, message: String, status: Option<u64>, events: &mut Vec<WorkerEvent>) {
        self.retryable = status.map(status_retryable);
        self.error = Some(message.clone());
        events.push(WorkerEvent::Error { message });
    }

    fn on_response(&mut self, id: u64, msg: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events = Vec::new();
        if let Some(err) = msg.get("error") {
            let code = err.get("code").and_then(Value::as_i64);
            let raw = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the agent refused a request");
            // opencode wraps a session's error as JSON-RPC's internal error: the prefix is
            // not the API's (and would read as a server error worth a retry).
            let raw = match code {
                Some(-32603) => raw.strip_prefix("Internal error: ").unwrap_or(raw),
                _ => raw,
            };
            // Gemini CLI answers a failed prompt with the API's HTTP status as the code and
            // the API's JSON body as the message.
            let status = code
                .and_then(|c| u64::try_from(c).ok())
                .filter(|c| (100..600).contains(c))
                .or_else(|| super::gemini::api_status(raw));
            let message = match (api_message(raw), status) {
                (Some(m), Some(st)) => format!("{m} (HTTP {st})"),
                (Some(m), None) => m,
                (None, Some(st)) if !raw.contains(&st.to_string()) => format!("{raw} (HTTP {st})"),
                (None, _) => raw.to_owned(),
            };
            self.prompts.remove(&id);
            self.open_id = self.open_id.filter(|o| *o != id);
            let text = self.close_text("error");
            events.extend(text);
            self.fail(cut_chars(&message, 2000), status, &mut events);
            self.queued.clear();
            if self.prompts.is_empty() {
                self.finish(&mut events);
            }
            return events;
        }
        let result = msg.get("result").and_then(Value::as_object);
        if self.open_id == Some(id) {
            self.open_id = None;
            match self.phase {
                Phase::Initializing => {
                    let mut params = json!({"cwd": self.cwd, "mcpServers": []});
                    let method = match self.resume.clone() {
                        Some(session) => {
                            params["sessionId"] = json!(session);
                            self.session_id = Some(session);
                            "session/load"
                        }
                        None => "session/new",
                    };
                    let (id, line) = self.request(method, params);
                    self.open_id = Some(id);
                    self.phase = Phase::Opening;
                    self.replies.push(line);
                }
                Phase::Opening => {
                    if let Some(s) = result.and_then(|r| r.get("sessionId")?.as_str()) {
                        self.session_id = Some(s.to_owned());
                    }
                    if let Some(m) = result.and_then(current_model) {
                        self.model = Some(m);
                    }
                    // A loaded session streamed its history before this answer: not this
                    // attempt's text.
                    self.text.clear();
                    self.replaying = self.resume.is_some();
                    self.phase = Phase::Open;
                    self.started = true;
                    events.push(WorkerEvent::Started {
                        session_id: self.session_id.clone(),
                        model: self.model.clone(),
                    });
                    let mut texts: Vec<String> = self.prompt.take().into_iter().collect();
                    texts.append(&mut self.queued);
                    // The task's prompt and any steer that came before the session was open:
                    // one message.
                    let line = self.prompt_line(&texts.join("\n\n"));
                    self.replies.push(line);
                }
                _ => {}
            }
            return events;
        }
        if !self.prompts.remove(&id) {
            return events;
        }
        self.replaying = false;
        let stop = result
            .and_then(|r| r.get("stopReason")?.as_str())
            .unwrap_or("end_turn")
            .to_owned();
        events.extend(self.close_text(&stop));
        // opencode answers every prompt of a turn with that turn's last call's usage: counted
        // with the last of them.
        if self.prompts.is_empty() {
            if let Some(r) = result {
                let (usage, model) = prompt_usage(r);
                add_usage(&mut self.usage, &usage);
                if model.is_some() {
                    self.model = model;
                }
            }
        }
        self.usage.turns = self.usage.turns.saturating_add(1);
        events.push(WorkerEvent::TurnEnd);
        if stop == "refusal" {
            self.fail("the model refused to answer".into(), None, &mut events);
        }
        if !self.queued.is_empty() && self.prompts.is_empty() && self.error.is_none() {
            let texts = std::mem::take(&mut self.queued);
            let line = self.prompt_line(&texts.join("\n\n"));
            self.replies.push(line);
        } else if self.prompts.is_empty() {
            self.finish(&mut events);
        }
        events
    }

    fn on_update(&mut self, update: &Map<String, Value>) -> Vec<WorkerEvent> {
        // A loaded session's history comes before the load's answer.
        if self.phase != Phase::Open {
            return Vec::new();
        }
        let kind = str_of(update, "sessionUpdate");
        if self.replaying && self.is_replay(kind, update) {
            return Vec::new();
        }
        match kind {
            Some("agent_message_chunk") => {
                if let Some(t) = update.get("content").and_then(|c| c.get("text")?.as_str()) {
                    self.text.push_str(t);
                }
                Vec::new()
            }
            Some("tool_call") => self.on_tool_call(update),
            Some("tool_call_update") => self.on_tool_update(update),
            _ => Vec::new(),
        }
    }

    /// Whether an update of a loaded session is its history's replay: a user message (what
    /// came before it is history too), a tool call already over, or a message of the attempt
    /// this one continues. Anything else is this attempt's: the replay is over.
    fn is_replay(&mut self, kind: Option<&str>, update: &Map<String, Value>) -> bool {
        let replay = match kind {
            Some("user_message_chunk") => {
                self.text.clear();
                true
            }
            Some("agent_thought_chunk" | "available_commands_update") => true,
            Some("tool_call") => matches!(str_of(update, "status"), Some("completed" | "failed")),
            Some("agent_message_chunk") => update
                .get("content")
                .and_then(|c| c.get("text")?.as_str())
                .is_some_and(|t| self.replayed.iter().any(|r| r == t)),
            _ => false,
        };
        self.replaying = replay;
        replay
    }

    /// The tool's name: opencode's title is it; Gemini CLI's title describes the call, its
    /// id starts with the tool's name.
    fn tool_name(&self, call: &Map<String, Value>) -> String {
        let id = str_of(call, "toolCallId").unwrap_or_default();
        match self.flavor {
            Flavor::Gemini => id
                .split_once("__")
                .map(|(name, _)| name)
                .or_else(|| id.rsplit_once('-').map(|(name, _)| name))
                .unwrap_or(id)
                .to_owned(),
            Flavor::Opencode => str_of(call, "title").unwrap_or(id).to_owned(),
        }
    }

    fn count_write(&mut self, id: &str, name: &str, kind: &str) {
        let write = matches!(kind, "edit" | "delete" | "move");
        if !self.tools.contains_key(id) && self.tools.len() < MAX_TOOLS {
            self.tools.insert(
                id.to_owned(),
                Call {
                    name: name.to_owned(),
                    write,
                    refused: false,
                    asked: false,
                },
            );
            if write {
                self.writes.tried = self.writes.tried.saturating_add(1);
            }
        }
    }

    fn on_tool_call(&mut self, call: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events: Vec<WorkerEvent> = self.close_text("tool_use").into_iter().collect();
        let id = str_of(call, "toolCallId").unwrap_or_default().to_owned();
        let name = self.tool_name(call);
        let kind = str_of(call, "kind").unwrap_or("other").to_owned();
        self.count_write(&id, &name, &kind);
        let args = call
            .get("rawInput")
            .map(Value::to_string)
            .unwrap_or_default();
        events.push(WorkerEvent::ToolStart {
            name,
            args: cut_chars(&args, TOOL_ARGS_LIMIT),
        });
        events.extend(self.on_tool_update(call));
        events
    }

    fn on_tool_update(&mut self, call: &Map<String, Value>) -> Vec<WorkerEvent> {
        let id = str_of(call, "toolCallId").unwrap_or_default();
        let status = str_of(call, "status").unwrap_or_default();
        let mut events = Vec::new();
        // opencode: a call of a tool the agent does not have turns into its `invalid` tool,
        // naming the tool wanted.
        let raw = call.get("rawInput").and_then(Value::as_object);
        let unavailable = (self.flavor == Flavor::Opencode
            && str_of(call, "title") == Some("invalid"))
        .then(|| raw.and_then(|r| Some((str_of(r, "tool")?, str_of(r, "error")?))))
        .flatten();
        let failed = (status == "failed").then(|| failure_text(call));
        // What each CLI calls crew's ask tool: `mcp_<server>_<tool>`, `<server>_<tool>`.
        let ask = match self.flavor {
            Flavor::Gemini => format!("mcp_{ASK_MCP_SERVER}_{}", super::gemini::ASK_TOOL),
            Flavor::Opencode => format!("{ASK_MCP_SERVER}_{ASK_TOOL}"),
        };
        let Some(entry) = self.tools.get_mut(id) else {
            return events;
        };
        // A call of crew's ask tool is the question (opencode names its input only in the
        // call's first update; Gemini CLI in the call's content).
        if !entry.asked && entry.name == ask {
            if let Some(question) = question_of(raw, call) {
                entry.asked = true;
                events.push(WorkerEvent::Ask { question });
            }
        }
        let refusal = match (unavailable, &failed) {
            (Some((tool, error)), _) => Some((tool.to_owned(), error.to_owned())),
            (None, Some(message)) => {
                let lower = message.to_ascii_lowercase();
                [
                    "permission",
                    "denied",
                    "rejected",
                    "not allowed",
                    "canceled by the user",
                ]
                .iter()
                .any(|w| lower.contains(w))
                .then(|| (entry.name.clone(), message.clone()))
            }
            (None, None) => None,
        };
        if let (Some((tool, message)), false) = (refusal, entry.refused) {
            entry.refused = true;
            let write = entry.write || WRITE_KINDS_BY_NAME.contains(&tool.as_str());
            if write {
                if !entry.write {
                    entry.write = true;
                    self.writes.tried = self.writes.tried.saturating_add(1);
                }
                self.writes.refused = self.writes.refused.saturating_add(1);
            }
            events.push(WorkerEvent::Refused {
                tool,
                message: cut_chars(&message, 500),
                write,
            });
        }
        if !matches!(status, "completed" | "failed") {
            return events;
        }
        if let Some(entry) = self.tools.remove(id) {
            events.push(WorkerEvent::ToolEnd {
                name: entry.name,
                ok: status == "completed" && !entry.refused,
            });
        }
        events
    }

    /// Answer the agent's `session/request_permission` from the role.
    fn on_permission(&mut self, id: &Value, params: &Map<String, Value>) -> Vec<WorkerEvent> {
        let call = params.get("toolCall").and_then(Value::as_object);
        let kind = call
            .and_then(|c| str_of(c, "kind"))
            .unwrap_or("other")
            .to_owned();
        let allow = self.policy.allows(&kind);
        let wanted: &[&str] = if allow {
            &["allow_once", "allow_always"]
        } else {
            &["reject_once", "reject_always"]
        };
        let options = params
            .get("options")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let option = wanted.iter().find_map(|w| {
            options
                .iter()
                .find(|o| o.get("kind").and_then(Value::as_str) == Some(w))
                .and_then(|o| o.get("optionId")?.as_str())
        });
        let outcome = match option {
            Some(o) => json!({"outcome": "selected", "optionId": o}),
            None => json!({"outcome": "cancelled"}),
        };
        self.replies
            .push(json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}}).to_string());
        let mut events = Vec::new();
        if !allow || option.is_none() {
            let (name, tool_id) = match call {
                Some(c) => (
                    self.tool_name(c),
                    str_of(c, "toolCallId").unwrap_or_default().to_owned(),
                ),
                None => (String::new(), String::new()),
            };
            self.count_write(&tool_id, &name, &kind);
            let write = matches!(kind.as_str(), "edit" | "delete" | "move");
            if write {
                self.writes.refused = self.writes.refused.saturating_add(1);
            }
            // Told once: the agent's update of the call does not count it again.
            self.tools.remove(&tool_id);
            let title = call
                .and_then(|c| str_of(c, "title"))
                .unwrap_or_default()
                .to_owned();
            events.push(WorkerEvent::Refused {
                tool: name,
                message: cut_chars(
                    &format!("the role does not allow this {kind} call: {title}"),
                    500,
                ),
                write,
            });
        }
        events
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// The model a `session/new` answer names (opencode: its model config option).
fn current_model(result: &Map<String, Value>) -> Option<String> {
    if let Some(m) = result
        .get("models")
        .and_then(|m| m.get("currentModelId")?.as_str())
    {
        return Some(m.to_owned());
    }
    result
        .get("configOptions")?
        .as_array()?
        .iter()
        .find(|o| o.get("category").and_then(Value::as_str) == Some("model"))?
        .get("currentValue")?
        .as_str()
        .map(str::to_owned)
}

/// A prompt answer's usage and model: ACP's `usage` (opencode), else Gemini CLI's
/// `_meta.quota`.
fn prompt_usage(result: &Map<String, Value>) -> (Usage, Option<String>) {
    if let Some(Value::Object(u)) = result.get("usage") {
        let usage = Usage {
            input: json_count(u.get("inputTokens")),
            output: json_count(u.get("outputTokens"))
                .saturating_add(json_count(u.get("thoughtTokens"))),
            cache_read: json_count(u.get("cachedReadTokens")),
            cache_write: json_count(u.get("cachedWriteTokens")),
            ..Usage::default()
        };
        return (usage, None);
    }
    let Some(quota) = result.get("_meta").and_then(|m| m.get("quota")) else {
        return (Usage::default(), None);
    };
    let count = quota.get("token_count");
    let usage = Usage {
        input: json_count(count.and_then(|c| c.get("input_tokens"))),
        output: json_count(count.and_then(|c| c.get("output_tokens"))),
        ..Usage::default()
    };
    let model = quota
        .get("model_usage")
        .and_then(Value::as_array)
        .and_then(|m| m.first()?.get("model")?.as_str())
        .map(str::to_owned);
    (usage, model)
}

/// The API's own message in an error message that is the API's JSON body
/// (`{"error":{"message":…}}`).
fn api_message(message: &str) -> Option<String> {
    let v: Value = serde_json::from_str(message.trim()).ok()?;
    v.get("error")?.get("message")?.as_str().map(str::to_owned)
}

/// The `question` argument of an ask tool call: in its `rawInput` (opencode), else in its
/// content, the arguments as JSON text (Gemini CLI).
fn question_of(raw: Option<&Map<String, Value>>, call: &Map<String, Value>) -> Option<String> {
    if let Some(q) = raw.and_then(|r| str_of(r, "question")) {
        return Some(q.to_owned());
    }
    call.get("content")?.as_array()?.iter().find_map(|c| {
        let text = c.get("content")?.get("text")?.as_str()?;
        let args: Value = serde_json::from_str(text).ok()?;
        args.get("question")?.as_str().map(str::to_owned)
    })
}

/// What a failed tool call's update says.
fn failure_text(call: &Map<String, Value>) -> String {
    let mut out = String::new();
    if let Some(content) = call.get("content").and_then(Value::as_array) {
        for c in content {
            if let Some(t) = c.get("content").and_then(|c| c.get("text")?.as_str()) {
                out.push_str(t);
            }
        }
    }
    if out.is_empty() {
        if let Some(raw) = call.get("rawOutput") {
            out = match raw.get("error").and_then(Value::as_str) {
                Some(e) => e.to_owned(),
                None => raw.to_string(),
            };
        }
    }
    out
}

impl StreamParser for AcpParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(msg)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        let method = str_of(&msg, "method");
        let id = msg.get("id").filter(|v| !v.is_null());
        match (method, id) {
            // A request of the agent's: it waits for the answer.
            (Some("session/request_permission"), Some(id)) => {
                let id = id.clone();
                let params = msg
                    .get("params")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                self.on_permission(&id, &params)
            }
            (Some(method), Some(id)) => {
                // crew offered no file system, terminal or anything else.
                self.replies.push(
                    json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601, "message": format!("crew does not offer {}", cut_chars(method, 100)),
                    }})
                    .to_string(),
                );
                Vec::new()
            }
            (Some("session/update"), None) => match msg
                .get("params")
                .and_then(|p| p.get("update"))
                .and_then(Value::as_object)
            {
                Some(u) => {
                    let u = u.clone();
                    self.on_update(&u)
                }
                None => Vec::new(),
            },
            (None, Some(id)) => match id.as_u64() {
                Some(id) => self.on_response(id, &msg),
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        let pending = (!self.text.trim().is_empty()).then(|| self.text.clone());
        let final_text = match &self.error {
            Some(_) => None,
            None => pending.or_else(|| self.last_text.clone()),
        };
        let error = match (&self.error, self.finished, self.started) {
            (Some(e), _, _) => Some(e.clone()),
            (None, false, false) => {
                Some("the agent ended before its ACP session was open".to_owned())
            }
            (None, false, true) if final_text.is_none() => {
                Some("the agent ended before it answered the prompt".to_owned())
            }
            _ => None,
        };
        Outcome {
            final_text,
            usage: self.usage,
            model: self.model.clone(),
            error,
            retryable: self.retryable,
            writes: self.writes,
            session_id: self.session_id.clone(),
        }
    }

    fn live_start(&mut self, prompt: &str) -> Vec<String> {
        self.prompt = Some(prompt.to_owned());
        let (id, line) = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                "clientInfo": {"name": "crew", "version": env!("CARGO_PKG_VERSION")},
            }),
        );
        self.open_id = Some(id);
        self.phase = Phase::Initializing;
        vec![line]
    }

    fn live_steer(&mut self, message: &str) -> Vec<String> {
        let now = self.flavor == Flavor::Opencode
            && self.phase == Phase::Open
            && !self.prompts.is_empty();
        if now {
            return vec![self.prompt_line(message)];
        }
        if self.phase != Phase::Done && self.queued.len() < MAX_QUEUED {
            self.queued.push(message.to_owned());
        }
        Vec::new()
    }

    fn live_replies(&mut self) -> Vec<String> {
        std::mem::take(&mut self.replies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::SystemPromptMode;

    fn spec(tools: &[&str]) -> LaunchSpec {
        LaunchSpec {
            command: vec!["agent".into()],
            prompt: String::new(),
            prompt_file: None,
            system_prompt: String::new(),
            system_prompt_mode: SystemPromptMode::Replace,
            system_prompt_file: None,
            model: None,
            thinking: None,
            tools: tools.iter().map(|s| s.to_string()).collect(),
            rpc: true,
            prompt_via: Default::default(),
            skill_dirs: Vec::new(),
            session: Default::default(),
            cwd: "/work/repo".into(),
            effort: None,
            fallback_models: Vec::new(),
        }
    }

    const TASK: &str = "Read README.md and say what it holds.";
    const STEER: &str = "STEER-7: also list headings";

    /// What replaying a captured stream gave: every event, and the lines crew wrote (its
    /// start, then its replies and steers in order), each as JSON.
    struct Replay {
        events: Vec<WorkerEvent>,
        written: Vec<Value>,
        outcome: Outcome,
    }

    /// Replay `fixture` (the agent's stdout lines) through a parser of `flavor` for a role
    /// with `tools`, steering with [`STEER`] before line `steer_at` when given.
    fn replay(flavor: Flavor, tools: &[&str], fixture: &str, steer_at: Option<usize>) -> Replay {
        let mut p = AcpParser::new(flavor, &spec(tools));
        let mut written: Vec<String> = p.live_start(TASK);
        let mut events = Vec::new();
        for (i, line) in fixture.lines().enumerate() {
            if steer_at == Some(i) {
                written.extend(p.live_steer(STEER));
            }
            events.extend(p.feed_line(line));
            written.extend(p.live_replies());
        }
        Replay {
            events,
            written: written
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            outcome: p.outcome(),
        }
    }

    fn methods(written: &[Value]) -> Vec<String> {
        written
            .iter()
            .map(|m| match m.get("method").and_then(Value::as_str) {
                Some(method) => format!("{}:{}", m["id"], method),
                None => format!("answer:{}", m["id"]),
            })
            .collect()
    }

    fn prompt_texts(written: &[Value]) -> Vec<String> {
        written
            .iter()
            .filter(|m| m["method"] == "session/prompt")
            .map(|m| {
                m["params"]["prompt"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    fn finished(events: &[WorkerEvent]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Finished))
            .count()
    }

    #[test]
    fn gemini_holds_a_steer_until_the_running_prompt_is_answered() {
        // Captured from `gemini --acp --approval-mode default` (0.61): a `write_file` call it
        // asked permission for, refused; the steer sent as the next prompt once the first was
        // answered.
        let r = replay(
            Flavor::Gemini,
            &["read"],
            include_str!("fixtures/acp_gemini_queued_steer_refused.jsonl"),
            Some(2),
        );
        assert_eq!(
            methods(&r.written),
            [
                "1:initialize",
                "2:session/new",
                "3:session/prompt",
                "answer:0",
                "4:session/prompt"
            ]
        );
        assert_eq!(r.written[1]["params"]["cwd"], "/work/repo");
        assert_eq!(prompt_texts(&r.written), [TASK, STEER]);
        // The permission was refused with the option the agent offered for it.
        assert_eq!(
            r.written[3]["result"]["outcome"],
            json!({"outcome": "selected", "optionId": "cancel"})
        );
        assert!(r.events.iter().any(|e| matches!(
            e,
            WorkerEvent::Refused { tool, write: true, .. } if tool == "write_file"
        )));
        assert_eq!(
            r.outcome.writes,
            Writes {
                tried: 1,
                refused: 1
            }
        );
        assert!(r.outcome.writes.all_refused());
        assert_eq!(finished(&r.events), 1);
        assert_eq!(r.events.last(), Some(&WorkerEvent::Finished));
        assert_eq!(r.outcome.final_text.as_deref(), Some("FINAL-3 done"));
        assert_eq!(r.outcome.error, None);
        // Both prompts' counts: Gemini CLI's `input_tokens` hold the cached ones.
        assert_eq!(
            (
                r.outcome.usage.input,
                r.outcome.usage.output,
                r.outcome.usage.turns
            ),
            (2024 + 1024, 43 + 23, 2)
        );
        assert_eq!(r.outcome.model.as_deref(), Some("stub-model"));
        assert_eq!(
            r.outcome.session_id.as_deref(),
            Some("5fff27e8-27bf-46fd-b9a5-8f46031191c8")
        );
    }

    #[test]
    fn gemini_allows_what_its_approval_mode_asks_for_a_writer() {
        // The same request for a role that writes (but has no shell): an edit is allowed.
        let r = replay(
            Flavor::Gemini,
            &["read", "edit"],
            include_str!("fixtures/acp_gemini_queued_steer_refused.jsonl"),
            None,
        );
        assert_eq!(
            r.written[3]["result"]["outcome"],
            json!({"outcome": "selected", "optionId": "proceed_once"})
        );
        assert!(!r
            .events
            .iter()
            .any(|e| matches!(e, WorkerEvent::Refused { .. })));
        // No steer: the first prompt's answer is the last.
        assert_eq!(finished(&r.events), 1);
        assert_eq!(r.outcome.final_text.as_deref(), Some("FINAL-2 done"));
    }

    #[test]
    fn opencode_takes_a_steer_at_once() {
        // Captured from `opencode acp` (1.18.33): the steer sent while the first prompt ran;
        // opencode answered both when the turn ended, each with the turn's last call's usage.
        let r = replay(
            Flavor::Opencode,
            &["read"],
            include_str!("fixtures/acp_opencode_steer.jsonl"),
            Some(2),
        );
        assert_eq!(
            methods(&r.written),
            [
                "1:initialize",
                "2:session/new",
                "3:session/prompt",
                "4:session/prompt"
            ]
        );
        assert_eq!(prompt_texts(&r.written), [TASK, STEER]);
        assert_eq!(finished(&r.events), 1);
        assert_eq!(r.events.last(), Some(&WorkerEvent::Finished));
        assert!(r
            .events
            .iter()
            .any(|e| matches!(e, WorkerEvent::ToolEnd { name, ok: true } if name == "read")));
        assert_eq!(r.outcome.final_text.as_deref(), Some("FINAL-2 done"));
        // Counted once, though both answers carry it.
        assert_eq!(
            (
                r.outcome.usage.input,
                r.outcome.usage.output,
                r.outcome.usage.cache_read
            ),
            (1014, 22, 2)
        );
        assert_eq!(r.outcome.model.as_deref(), Some("stub/stub-model"));
        assert_eq!(
            r.outcome.session_id.as_deref(),
            Some("ses_dc5855d62fferOtnZPBpUYZU7T")
        );
    }

    #[test]
    fn opencode_refuses_a_tool_the_role_lacks() {
        let r = replay(
            Flavor::Opencode,
            &["read"],
            include_str!("fixtures/acp_opencode_refused.jsonl"),
            None,
        );
        let refused: Vec<&WorkerEvent> = r
            .events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Refused { .. }))
            .collect();
        assert_eq!(refused.len(), 1, "{:?}", r.events);
        assert!(matches!(
            refused[0],
            WorkerEvent::Refused { tool, write: true, message } if tool == "write" && message.contains("unavailable tool")
        ));
        assert_eq!(
            r.outcome.writes,
            Writes {
                tried: 1,
                refused: 1
            }
        );
        assert!(r
            .events
            .iter()
            .any(|e| matches!(e, WorkerEvent::ToolEnd { name, ok: false } if name == "write")));
        assert_eq!(finished(&r.events), 1);
    }

    #[test]
    fn api_errors_keep_the_apis_message_and_status() {
        for (flavor, fixture, want, retryable) in [
            (
                Flavor::Gemini,
                include_str!("fixtures/acp_gemini_api_error.jsonl"),
                "STUB-400: max_tokens: field required (HTTP 400)",
                Some(false),
            ),
            (
                Flavor::Opencode,
                include_str!("fixtures/acp_opencode_api_error.jsonl"),
                "STUB-400: max_tokens: field required",
                None,
            ),
        ] {
            let r = replay(flavor, &["read"], fixture, None);
            assert_eq!(r.outcome.error.as_deref(), Some(want), "{flavor:?}");
            assert_eq!(r.outcome.retryable, retryable, "{flavor:?}");
            assert_eq!(r.outcome.final_text, None);
            assert_eq!(finished(&r.events), 1, "{flavor:?}");
            assert!(!crate::stream::is_retryable_message(want), "{flavor:?}");
        }
    }

    #[test]
    fn a_call_of_crews_ask_tool_is_the_question() {
        // Captured from `gemini --acp` with crew's ask server in its settings: the call's
        // arguments are JSON text in its content.
        let r = replay(
            Flavor::Gemini,
            &["read"],
            include_str!("fixtures/acp_gemini_ask.jsonl"),
            None,
        );
        let asks: Vec<&WorkerEvent> = r
            .events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Ask { .. }))
            .collect();
        assert_eq!(
            asks,
            [&WorkerEvent::Ask {
                question: "Which database?".into()
            }]
        );
        assert_eq!(finished(&r.events), 1);
    }

    #[test]
    fn a_resumed_session_is_loaded_and_its_history_ignored() {
        let mut s = spec(&["read"]);
        s.session.resume = Some("ses_1".into());
        let mut p = AcpParser::new(Flavor::Opencode, &s);
        p.live_start("the answer");
        let open = p.feed_line(r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#);
        assert!(open.is_empty());
        let load: Value = serde_json::from_str(&p.live_replies()[0]).unwrap();
        assert_eq!(load["method"], "session/load");
        assert_eq!(load["params"]["sessionId"], "ses_1");
        // History streamed before the load's answer is not this attempt's.
        p.feed_line(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"OLD"}}}}"#);
        let ev = p.feed_line(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
        assert_eq!(
            ev,
            [WorkerEvent::Started {
                session_id: Some("ses_1".into()),
                model: None
            }]
        );
        let prompt: Value = serde_json::from_str(&p.live_replies()[0]).unwrap();
        assert_eq!(prompt["params"]["prompt"][0]["text"], "the answer");
        assert_eq!(prompt["params"]["sessionId"], "ses_1");
        p.feed_line(r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#);
        assert_eq!(p.outcome().final_text, None);
    }

    #[test]
    fn a_loaded_sessions_replayed_history_is_not_this_attempts() {
        // Gemini CLI streams a loaded session's history after the load's answer (the shape of
        // its `streamHistory`): the user's messages, the agent's, its calls already over.
        let asked = include_str!("fixtures/acp_gemini_ask.jsonl");
        let mut s = spec(&["read"]);
        s.session.resume = Some("bcc0b009-0ea3-41db-be94-4536c14c6d20".into());
        let mut p = AcpParser::new(Flavor::Gemini, &s).resuming(asked);
        p.live_start("The user answered your question: Postgres");
        let update = |u: Value| {
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}})
                .to_string()
        };
        let mut events = Vec::new();
        let mut redactor = crate::redact::StreamRedactor::new();
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":2,"result":{"modes":{}}}"#.to_owned(),
            update(
                json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Pick the storage"}}),
            ),
            update(
                json!({"sessionUpdate": "tool_call", "toolCallId": "mcp_crew_ask_ask_question__1", "status": "completed", "title": "ask_question", "kind": "edit"}),
            ),
            update(
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "FINAL-2 done"}}),
            ),
            // This attempt's own answer.
            update(
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "STUB-FINAL: Postgres"}}),
            ),
            r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#.to_owned(),
        ] {
            // Through the stream redactor first, as the daemon feeds the parser: it holds the
            // chunks and must hand them on one by one (a replayed message is one chunk).
            let mut redacted = Vec::new();
            redactor.push(&line, &mut redacted);
            for l in redacted {
                events.extend(p.feed_line(&l));
            }
        }
        let o = p.outcome();
        assert_eq!(o.final_text.as_deref(), Some("STUB-FINAL: Postgres"));
        assert_eq!(
            o.writes,
            Writes::default(),
            "a replayed call is not this attempt's"
        );
        assert!(!events
            .iter()
            .any(|e| matches!(e, WorkerEvent::ToolStart { .. })));
        assert_eq!(finished(&events), 1);
    }

    #[test]
    fn hostile_lines_do_not_panic_and_requests_crew_lacks_are_refused() {
        let mut p = AcpParser::new(Flavor::Gemini, &spec(&[]));
        p.live_start(TASK);
        for line in [
            "",
            "not json",
            "[]",
            r#"{"id":null}"#,
            r#"{"id":"x","result":{}}"#,
            r#"{"id":99,"result":{}}"#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update"}}}"#,
            r#"{"id":7,"method":"session/request_permission","params":{"options":"no"}}"#,
        ] {
            p.feed_line(line);
        }
        let replies = p.live_replies();
        let perm: Value = serde_json::from_str(replies.last().unwrap()).unwrap();
        assert_eq!(perm["result"]["outcome"]["outcome"], "cancelled");
        p.feed_line(r#"{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{}}"#);
        let err: Value = serde_json::from_str(&p.live_replies()[0]).unwrap();
        assert_eq!(err["error"]["code"], -32601);
        assert!(p.outcome().error.is_some(), "never opened: an error");
    }
}
