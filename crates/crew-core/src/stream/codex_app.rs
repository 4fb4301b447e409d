//! `codex app-server`: codex's live mode. JSON-RPC over stdio, one JSON object a line.
//!
//! The parser drives the protocol: `initialize` at start, then, as the answers come,
//! `initialized`, `thread/start` (or `thread/resume` of the thread that asked the user) and a
//! `turn/start` with the prompt. A steer while a turn runs is `turn/steer` (codex adds it to
//! the running turn's next model call); one that finds no turn running (none started yet, the
//! last one completed, or codex refused the steer) waits for the next `turn/start`, which
//! carries it. The attempt is over (`Finished`) once a turn completed and no steer is waiting
//! or unanswered.
//!
//! Items are those of `codex exec --json` in camelCase (`commandExecution`, `aggregatedOutput`):
//! they are renamed and read by the exec parser's item code, so tools, refusals, the ask tool and
//! the final text are read the same way. Usage: `thread/tokenUsage/updated` gives the thread's
//! totals, counted like the exec parser's (`input` uncached, cached input as `cacheRead`,
//! `output` with reasoning), less the totals of the attempt this one resumes.

use super::codex::{self, CodexParser};
use super::{
    add_usage, json_count, status_retryable, strip_cr, Launch, LaunchSpec, Outcome, StdinFrom,
    StreamParser, WorkerEvent,
};
use crate::usage::Usage;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The subcommand of the live mode.
const APP_SERVER: &str = "app-server";

/// Request ids of the handshake; turns and steers count on from [`FIRST_TURN_ID`].
const INITIALIZE_ID: u64 = 0;
const THREAD_ID: u64 = 1;
const FIRST_TURN_ID: u64 = 2;

/// Steers kept for a turn that has not started yet; more are dropped (a client that floods a
/// task with messages must not grow the daemon without bound).
const MAX_QUEUED: usize = 256;

/// JSON-RPC "method not found": the answer to a request of codex's crew has no answer for.
const METHOD_NOT_FOUND: i64 = -32601;

pub(super) fn launch(spec: &LaunchSpec) -> Launch {
    let mut argv = spec.command.clone();
    if !spec.command.iter().skip(1).any(|a| a == APP_SERVER) {
        argv.push(APP_SERVER.into());
    }
    // As `codex exec`: nothing waits for an approval, a call that needs one fails.
    argv.push("-c".into());
    argv.push("approval_policy=\"never\"".into());
    argv.extend(codex::config_args(spec));
    Launch {
        argv,
        env: Vec::new(),
        stdin: StdinFrom::Pipe,
    }
}

/// What a request of ours was, to read its answer.
#[derive(Debug, Clone)]
enum Sent {
    /// `turn/start` (the prompt, or the steers that waited for a turn).
    Turn,
    /// `turn/steer` of this turn with this message: back to the queue if codex refuses it.
    Steer { turn: String, message: String },
}

#[derive(Debug)]
pub(crate) struct CodexAppParser {
    /// Items, tools, refusals, the ask tool and the final text, as in exec mode.
    items: CodexParser,
    cwd: String,
    model: Option<String>,
    sandbox: Option<&'static str>,
    /// The thread to resume (the one that asked the user), if any.
    resume: Option<String>,
    prompt: Option<String>,
    thread_id: Option<String>,
    /// The model codex's answer to `thread/start` names.
    thread_model: Option<String>,
    /// The running turn's id.
    turn: Option<String>,
    /// A running turn that refused a steer (not steerable): the queue waits for its end, not
    /// sent to it again and again.
    unsteerable: Option<String>,
    /// A `turn/start` is out and unanswered.
    turn_starting: bool,
    /// Steers waiting for the next turn.
    queued: Vec<String>,
    /// Requests out and unanswered.
    sent: BTreeMap<u64, Sent>,
    next_id: u64,
    /// Lines owed to codex.
    out: Vec<String>,
    /// `Finished` was given: codex has nothing left to do.
    finished: bool,
    usage: Usage,
    /// The thread's totals as of the last usage update (at start: those of the attempt this
    /// one resumes).
    thread_total: Usage,
    /// The last turn's error (a failed turn), with the API status when codex names one.
    turn_error: Option<(String, Option<u64>)>,
    /// An `error` notification or a refused request of ours: the outcome only when no turn
    /// completed after it.
    stream_error: Option<String>,
    completed_turn: bool,
}

impl CodexAppParser {
    /// The parser of a live worker launched from `spec`; `before`: the thread's usage totals
    /// as the attempt it resumes left them.
    pub(crate) fn new(spec: &LaunchSpec, before: Usage) -> CodexAppParser {
        CodexAppParser {
            items: CodexParser::default(),
            cwd: spec.cwd.clone(),
            model: spec.model.clone(),
            sandbox: codex::sandbox(spec),
            resume: spec.session.resume.clone(),
            prompt: None,
            thread_id: None,
            thread_model: None,
            turn: None,
            unsteerable: None,
            turn_starting: false,
            queued: Vec::new(),
            sent: BTreeMap::new(),
            next_id: FIRST_TURN_ID,
            out: Vec::new(),
            finished: false,
            usage: Usage::default(),
            thread_total: before,
            turn_error: None,
            stream_error: None,
            completed_turn: false,
        }
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    fn thread_params(&self) -> Value {
        let mut p = Map::new();
        if let Some(id) = &self.resume {
            p.insert("threadId".into(), json!(id));
        }
        // Empty: codex's own cwd, the worker's (the executor always names it).
        if !self.cwd.is_empty() {
            p.insert("cwd".into(), json!(self.cwd));
        }
        p.insert("approvalPolicy".into(), json!("never"));
        if let Some(model) = &self.model {
            p.insert("model".into(), json!(model));
        }
        if let Some(sandbox) = self.sandbox {
            p.insert("sandbox".into(), json!(sandbox));
        }
        Value::Object(p)
    }

    /// A `turn/start` with the prompt (first turn) and the queued steers.
    fn start_turn(&mut self) -> Option<String> {
        let thread = self.thread_id.clone()?;
        let texts: Vec<String> = self
            .prompt
            .take()
            .into_iter()
            .chain(std::mem::take(&mut self.queued))
            .collect();
        if texts.is_empty() {
            return None;
        }
        let input: Vec<Value> = texts.iter().map(|t| text_input(t)).collect();
        let id = self.next_id();
        self.sent.insert(id, Sent::Turn);
        self.turn_starting = true;
        Some(request(
            id,
            "turn/start",
            json!({"threadId": thread, "input": input}),
        ))
    }

    fn steer(&mut self, message: String) -> Option<String> {
        let (thread, turn) = (self.thread_id.clone()?, self.turn.clone()?);
        let id = self.next_id();
        let line = request(
            id,
            "turn/steer",
            json!({"threadId": thread, "expectedTurnId": turn, "input": [text_input(&message)]}),
        );
        self.sent.insert(id, Sent::Steer { turn, message });
        Some(line)
    }

    fn queue(&mut self, message: String) {
        if self.queued.len() < MAX_QUEUED {
            self.queued.push(message);
        }
    }

    /// Codex may go on: a running turn takes the queued steers one by one, no turn running
    /// starts one with them. Else, with nothing out, the attempt is over.
    fn go_on(&mut self) -> Vec<WorkerEvent> {
        if self.finished || self.thread_id.is_none() {
            return Vec::new();
        }
        if self.turn.is_some() && self.turn == self.unsteerable {
            return Vec::new();
        }
        if self.turn.is_some() {
            for m in std::mem::take(&mut self.queued) {
                if let Some(line) = self.steer(m) {
                    self.out.push(line);
                }
            }
            return Vec::new();
        }
        if self.turn_starting {
            return Vec::new();
        }
        if let Some(line) = self.start_turn() {
            self.out.push(line);
            return Vec::new();
        }
        if self.completed_turn && self.sent.is_empty() {
            self.finished = true;
            return vec![WorkerEvent::Finished];
        }
        Vec::new()
    }

    /// Codex's answer to a request of ours.
    fn on_response(&mut self, id: u64, msg: &Map<String, Value>) -> Vec<WorkerEvent> {
        let result = msg.get("result");
        let error = msg.get("error").filter(|e| !e.is_null());
        match id {
            INITIALIZE_ID => {
                if let Some(e) = error {
                    return self.fatal(format!("codex app-server: initialize: {}", rpc_error(e)));
                }
                self.out.push(json!({"method": "initialized"}).to_string());
                let method = match self.resume {
                    Some(_) => "thread/resume",
                    None => "thread/start",
                };
                let line = request(THREAD_ID, method, self.thread_params());
                self.out.push(line);
                Vec::new()
            }
            THREAD_ID => {
                if let Some(e) = error {
                    return self.fatal(format!("codex app-server: thread: {}", rpc_error(e)));
                }
                let str_at = |path: &[&str]| {
                    let mut v = result?;
                    for k in path {
                        v = v.get(k)?;
                    }
                    v.as_str().map(str::to_owned)
                };
                let Some(thread) = str_at(&["thread", "id"]) else {
                    return self.fatal("codex app-server: its thread has no id".into());
                };
                self.thread_id = Some(thread.clone());
                self.thread_model = str_at(&["model"]);
                let mut events = vec![WorkerEvent::Started {
                    session_id: Some(thread),
                    model: self.thread_model.clone(),
                }];
                events.extend(self.go_on());
                events
            }
            _ => {
                let Some(sent) = self.sent.remove(&id) else {
                    return Vec::new();
                };
                match (sent, error) {
                    (Sent::Turn, None) => {
                        self.turn_starting = false;
                        let turn = result
                            .and_then(|r| r.get("turn"))
                            .filter(|t| {
                                t.get("status").and_then(Value::as_str) == Some("inProgress")
                            })
                            .and_then(|t| t.get("id"))
                            .and_then(Value::as_str);
                        if let Some(turn) = turn {
                            self.turn.get_or_insert_with(|| turn.to_owned());
                        }
                        self.go_on()
                    }
                    (Sent::Turn, Some(e)) => {
                        self.turn_starting = false;
                        self.fatal(format!("codex app-server: turn/start: {}", rpc_error(e)))
                    }
                    (Sent::Steer { .. }, None) => self.go_on(),
                    // No turn running by now (it completed first), another one, or one that
                    // takes no steer: the message waits for the next turn, or goes to the
                    // running one if that is another.
                    (Sent::Steer { turn, message }, Some(_)) => {
                        if self.turn.as_deref() == Some(turn.as_str()) {
                            self.unsteerable = Some(turn);
                        }
                        self.queue(message);
                        self.go_on()
                    }
                }
            }
        }
    }

    /// A request of ours failed in a way no later turn mends: the attempt is over.
    fn fatal(&mut self, message: String) -> Vec<WorkerEvent> {
        self.stream_error = Some(message.clone());
        let mut events = vec![WorkerEvent::Error { message }];
        if !self.finished {
            self.finished = true;
            events.push(WorkerEvent::Finished);
        }
        events
    }

    /// A request of codex's: approvals are declined, as `codex exec`'s approval policy
    /// `never` does; anything else has no answer here.
    fn answer(&mut self, id: &Value, method: &str) {
        let result = match method {
            "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
                json!({"decision": "decline"})
            }
            "execCommandApproval" | "applyPatchApproval" => {
                json!({"decision": {"denied": {"rejection": "crew runs codex without approvals"}}})
            }
            "mcpServer/elicitation/request" => {
                json!({"action": "decline", "content": null, "_meta": null})
            }
            _ => {
                self.out.push(
                    json!({"id": id, "error": {"code": METHOD_NOT_FOUND,
                        "message": format!("crew does not answer {method}")}})
                    .to_string(),
                );
                return;
            }
        };
        self.out
            .push(json!({"id": id, "result": result}).to_string());
    }

    fn on_usage(&mut self, params: &Map<String, Value>) {
        let Some(total) = params.get("tokenUsage").and_then(|u| u.get("total")) else {
            return;
        };
        let field = |k: &str| json_count(total.get(k));
        let total = codex::thread_usage(
            field("inputTokens"),
            field("cachedInputTokens"),
            field("cacheWriteInputTokens"),
            field("outputTokens"),
        );
        // A thread whose totals start over (below those it resumed) counts from zero.
        let before =
            if total.input < self.thread_total.input || total.output < self.thread_total.output {
                Usage::default()
            } else {
                self.thread_total
            };
        let delta = total.tokens_since(&before);
        self.thread_total = total;
        add_usage(&mut self.usage, &delta);
    }

    fn on_turn_completed(&mut self, params: &Map<String, Value>) -> Vec<WorkerEvent> {
        let turn = params.get("turn");
        let id = turn.and_then(|t| t.get("id")).and_then(Value::as_str);
        if self.turn.is_some() && self.turn.as_deref() != id {
            return Vec::new();
        }
        self.turn = None;
        self.turn_starting = false;
        self.completed_turn = true;
        let status = turn
            .and_then(|t| t.get("status"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut events = vec![WorkerEvent::TurnEnd];
        if status == "completed" {
            // As in exec mode, where only `turn.completed` counts a turn.
            self.usage.turns = self.usage.turns.saturating_add(1);
            self.turn_error = None;
            self.stream_error = None;
            events.extend(self.go_on());
            return events;
        }
        // A failed or interrupted turn ends the attempt, its error the outcome (retried by
        // crew when its status says so); steers still waiting are not run.
        let error = turn.and_then(|t| t.get("error")).filter(|e| !e.is_null());
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("codex's turn ended {status}"));
        self.turn_error = Some((message.clone(), error.and_then(http_status)));
        events.push(WorkerEvent::Error { message });
        if !self.finished {
            self.finished = true;
            events.push(WorkerEvent::Finished);
        }
        events
    }
}

/// A JSON-RPC request line.
fn request(id: u64, method: &str, params: Value) -> String {
    json!({"id": id, "method": method, "params": params}).to_string()
}

/// A text input of `turn/start` and `turn/steer`.
fn text_input(text: &str) -> Value {
    json!({"type": "text", "text": text, "text_elements": []})
}

fn rpc_error(e: &Value) -> String {
    codex::error_message(Some(e))
}

/// The API status a turn error names (`codexErrorInfo: {<kind>: {httpStatusCode: N}}`).
fn http_status(error: &Value) -> Option<u64> {
    error
        .get("codexErrorInfo")?
        .as_object()?
        .values()
        .find_map(|v| v.get("httpStatusCode")?.as_u64())
}

/// An app-server item in the shape `codex exec --json` gives it (snake_case kinds and keys).
fn exec_item(item: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in item {
        let key = match k.as_str() {
            "aggregatedOutput" => "aggregated_output",
            "exitCode" => "exit_code",
            "type" => {
                let kind = match v.as_str().unwrap_or_default() {
                    "agentMessage" => "agent_message",
                    "commandExecution" => "command_execution",
                    "fileChange" => "file_change",
                    "mcpToolCall" => "mcp_tool_call",
                    "webSearch" => "web_search",
                    other => other,
                };
                out.insert("type".into(), Value::String(kind.to_owned()));
                continue;
            }
            other => other,
        };
        out.insert(key.to_owned(), v.clone());
    }
    out
}

impl StreamParser for CodexAppParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(msg)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        let method = msg.get("method").and_then(Value::as_str);
        match (msg.get("id"), method) {
            // A request of codex's.
            (Some(id), Some(method)) => {
                let id = id.clone();
                self.answer(&id, method);
                Vec::new()
            }
            // The answer to one of ours.
            (Some(id), None) => match id.as_u64() {
                Some(id) => self.on_response(id, &msg),
                None => Vec::new(),
            },
            (None, Some(method)) => {
                let empty = Map::new();
                let params = msg
                    .get("params")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                match method {
                    "turn/started" => {
                        let turn = params
                            .get("turn")
                            .and_then(|t| t.get("id"))
                            .and_then(Value::as_str);
                        if let Some(turn) = turn {
                            self.turn = Some(turn.to_owned());
                        }
                        self.go_on()
                    }
                    "item/started" | "item/completed" => match params.get("item") {
                        Some(Value::Object(item)) => self
                            .items
                            .on_item(&exec_item(item), method == "item/completed"),
                        _ => Vec::new(),
                    },
                    "thread/tokenUsage/updated" => {
                        self.on_usage(params);
                        Vec::new()
                    }
                    "turn/completed" => self.on_turn_completed(params),
                    "error" => {
                        let message = params
                            .get("error")
                            .and_then(|e| e.get("message"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .unwrap_or_else(|| codex::error_message(params.get("error")));
                        self.stream_error = Some(message.clone());
                        vec![WorkerEvent::Error { message }]
                    }
                    _ => Vec::new(),
                }
            }
            (None, None) => Vec::new(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        let (error, retryable) = match &self.turn_error {
            Some((message, status)) => (Some(message.clone()), status.map(status_retryable)),
            None if !self.completed_turn || self.stream_error.is_some() => {
                (self.stream_error.clone(), None)
            }
            None => (None, None),
        };
        // A message before a failed turn is a preamble, not an answer.
        let final_text = match self.turn_error {
            Some(_) => None,
            None => self.items.last_text().cloned(),
        };
        Outcome {
            final_text,
            usage: self.usage,
            model: self.thread_model.clone(),
            error,
            retryable,
            writes: self.items.writes(),
            session_id: self.thread_id.clone(),
        }
    }

    fn live_start(&mut self, prompt: &str) -> Vec<String> {
        self.prompt = Some(prompt.to_owned());
        vec![
            json!({"id": INITIALIZE_ID, "method": "initialize", "params": {
                "clientInfo": {"name": "crew", "title": null, "version": env!("CARGO_PKG_VERSION")},
                "capabilities": null,
            }})
            .to_string(),
        ]
    }

    fn live_steer(&mut self, message: &str) -> Vec<String> {
        if self.finished {
            return Vec::new();
        }
        self.queue(message.to_owned());
        // Sent now when codex can take it; else it waits in the queue for a turn.
        self.go_on();
        std::mem::take(&mut self.out)
    }

    fn live_replies(&mut self) -> Vec<String> {
        std::mem::take(&mut self.out)
    }
}

/// The thread's usage totals a live codex stream ended with: what an attempt that resumes the
/// thread starts from.
pub(crate) fn thread_total(stream: &str) -> Usage {
    let mut p = CodexAppParser::new(&empty_spec(), Usage::default());
    for line in stream.lines() {
        p.feed_line(line);
    }
    p.thread_total
}

pub(crate) fn empty_spec() -> LaunchSpec {
    LaunchSpec {
        command: Vec::new(),
        prompt: String::new(),
        prompt_file: None,
        system_prompt: String::new(),
        system_prompt_mode: crate::resource::SystemPromptMode::Append,
        system_prompt_file: None,
        model: None,
        thinking: None,
        tools: Vec::new(),
        rpc: true,
        prompt_via: Default::default(),
        effort: None,
        fallback_models: Vec::new(),
        skill_dirs: Vec::new(),
        session: Default::default(),
        cwd: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{attempt_parser, build_launch, AdapterKind, Writes};

    const PROMPT: &str = "Read README.md";

    fn spec() -> LaunchSpec {
        LaunchSpec {
            command: vec!["codex".into()],
            prompt: PROMPT.into(),
            model: Some("stub-model".into()),
            tools: vec!["read".into(), "bash".into()],
            cwd: "/work/repo".into(),
            ..empty_spec()
        }
    }

    /// What a live attempt saw and said: the events, every line crew wrote to codex's stdin
    /// (as JSON), and the outcome.
    struct Drive {
        events: Vec<WorkerEvent>,
        sent: Vec<Value>,
        outcome: Outcome,
        /// The index of the line after which each `Finished` came.
        finished_at: Vec<usize>,
    }

    /// Feed `stream` to a live codex parser of `spec`, steering with `message` before feeding
    /// line `at` for each `(at, message)` of `steers`.
    fn drive(
        spec: &LaunchSpec,
        asked: Option<&str>,
        stream: &str,
        steers: &[(usize, &str)],
    ) -> Drive {
        let mut p = attempt_parser(AdapterKind::Codex, spec, asked);
        let parse = |lines: Vec<String>| -> Vec<Value> {
            lines
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let mut sent = parse(p.live_start(&spec.prompt));
        let (mut events, mut finished_at) = (Vec::new(), Vec::new());
        for (i, line) in stream.lines().enumerate() {
            for (_, m) in steers.iter().filter(|(at, _)| *at == i) {
                sent.extend(parse(p.live_steer(m)));
            }
            let evs = p.feed_line(line);
            if evs.contains(&WorkerEvent::Finished) {
                finished_at.push(i);
            }
            events.extend(evs);
            sent.extend(parse(p.live_replies()));
        }
        assert_eq!(p.usage(), p.outcome().usage);
        Drive {
            events,
            sent,
            outcome: p.outcome(),
            finished_at,
        }
    }

    fn methods(sent: &[Value]) -> Vec<String> {
        sent.iter()
            .map(|m| match m.get("method") {
                Some(Value::String(s)) => s.clone(),
                _ => format!("answer {}", m["id"]),
            })
            .collect()
    }

    fn texts(request: &Value) -> Vec<&str> {
        request["params"]["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["text"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn the_live_launch_is_app_server_with_execs_configuration() {
        let mut s = spec();
        s.tools = ["read", "bash", "edit"].map(String::from).to_vec();
        s.system_prompt = "You review.".into();
        s.effort = Some("high".into());
        s.session.ask_server = Some(
            ["/opt/crew/crewctl", "mcp", "--ask"]
                .map(String::from)
                .to_vec(),
        );
        let launch = build_launch(AdapterKind::Codex, &s);
        assert_eq!(
            launch.argv,
            [
                "codex",
                "app-server",
                "-c",
                "approval_policy=\"never\"",
                "-c",
                "model_reasoning_effort=\"high\"",
                "-c",
                "developer_instructions=\"You review.\"",
                "-c",
                "mcp_servers.crew_ask.command=\"/opt/crew/crewctl\"",
                "-c",
                "mcp_servers.crew_ask.args=[\"mcp\", \"--ask\"]",
                "-c",
                "mcp_servers.crew_ask.tools.ask_user.approval_mode=\"approve\"",
            ]
        );
        assert_eq!(launch.stdin, StdinFrom::Pipe);
        // The sandbox is the thread's: the writing role's is workspace-write; a user's own
        // `-c sandbox_mode=...` wins.
        let d = drive(
            &s,
            None,
            include_str!("fixtures/codex_app_refused.jsonl"),
            &[],
        );
        assert_eq!(d.sent[2]["params"]["sandbox"], "workspace-write");
        s.command = ["codex", "-c", "sandbox_mode=\"danger-full-access\""]
            .map(String::from)
            .to_vec();
        let d = drive(
            &s,
            None,
            include_str!("fixtures/codex_app_refused.jsonl"),
            &[],
        );
        assert_eq!(d.sent[2]["params"].get("sandbox"), None);
    }

    /// A real Codex 0.171.0 app-server stream (stub model) steered while its turn ran: the
    /// handshake, the prompt as the first turn, the steer as `turn/steer` of that turn.
    #[test]
    fn a_steer_during_the_turn_is_turn_steer() {
        let d = drive(
            &spec(),
            None,
            include_str!("fixtures/codex_app_steer.jsonl"),
            &[(6, "STEER-7 also this")],
        );
        assert_eq!(
            methods(&d.sent),
            [
                "initialize",
                "initialized",
                "thread/start",
                "turn/start",
                "turn/steer"
            ]
        );
        assert_eq!(
            d.sent[2]["params"],
            json!({"cwd": "/work/repo", "approvalPolicy": "never", "model": "stub-model",
                   "sandbox": "read-only"})
        );
        let thread = "01a23a6e-665f-70a3-be59-38ee95694d57";
        assert_eq!(d.sent[3]["params"]["threadId"], thread);
        assert_eq!(texts(&d.sent[3]), [PROMPT]);
        assert_eq!(
            d.sent[4]["params"]["expectedTurnId"],
            "01a23a6e-666a-7e92-a057-1b958158467b"
        );
        assert_eq!(texts(&d.sent[4]), ["STEER-7 also this"]);
        assert_eq!(
            d.events.first(),
            Some(&WorkerEvent::Started {
                session_id: Some(thread.into()),
                model: Some("stub-model".into())
            })
        );
        assert_eq!(d.finished_at, [14], "Finished once, at the turn's end");
        let o = d.outcome;
        assert_eq!(o.final_text.as_deref(), Some("FINAL-2 done"));
        assert_eq!(o.session_id.as_deref(), Some(thread));
        assert_eq!(o.model.as_deref(), Some("stub-model"));
        assert_eq!((o.error, o.retryable), (None, None));
        // Codex's input holds the cached tokens; its output the reasoning ones.
        let u = o.usage;
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write, u.turns),
            (1014, 22, 2, 0, 1)
        );
    }

    /// A real stream whose steer came as the turn ended: codex refused it (`no active turn to
    /// steer`), so it starts the next turn, and the attempt ends only after that one.
    #[test]
    fn a_steer_the_turn_ended_before_starts_the_next_turn() {
        let d = drive(
            &spec(),
            None,
            include_str!("fixtures/codex_app_late.jsonl"),
            &[(14, "STEER-7 late")],
        );
        assert_eq!(
            methods(&d.sent),
            [
                "initialize",
                "initialized",
                "thread/start",
                "turn/start",
                "turn/steer",
                "turn/start"
            ]
        );
        assert_eq!(
            (d.sent[4]["id"].as_u64(), d.sent[5]["id"].as_u64()),
            (Some(3), Some(4))
        );
        assert_eq!(texts(&d.sent[5]), ["STEER-7 late"]);
        assert_eq!(d.finished_at, [24], "not at the first turn's end (line 14)");
        let o = d.outcome;
        assert_eq!(o.final_text.as_deref(), Some("FINAL-3 done"));
        let u = o.usage;
        assert_eq!(
            (u.input, u.output, u.cache_read, u.turns),
            (3048 - 6, 66, 6, 2)
        );
        assert_eq!(o.error, None);
    }

    /// Steers before the thread is open, and while a `turn/start` is out, go with the first
    /// turn and to the turn once it is known.
    #[test]
    fn early_steers_wait_for_a_turn() {
        let d = drive(
            &spec(),
            None,
            include_str!("fixtures/codex_app_steer.jsonl"),
            &[(0, "early"), (4, "while starting")],
        );
        assert_eq!(
            methods(&d.sent),
            [
                "initialize",
                "initialized",
                "thread/start",
                "turn/start",
                "turn/steer"
            ]
        );
        assert_eq!(texts(&d.sent[3]), [PROMPT, "early"]);
        assert_eq!(texts(&d.sent[4]), ["while starting"]);
        // Codex's answer to that steer (id 3) came before the turn's end.
        assert_eq!(d.finished_at, [14]);
        // Without it the attempt waits for it.
        let unanswered: String = include_str!("fixtures/codex_app_steer.jsonl")
            .lines()
            .filter(|l| !l.starts_with(r#"{"id":3,"#))
            .map(|l| format!("{l}\n"))
            .collect();
        let d = drive(
            &spec(),
            None,
            &unanswered,
            &[(0, "early"), (4, "while starting")],
        );
        assert!(d.finished_at.is_empty());
    }

    #[test]
    fn a_failed_turn_is_the_outcome_retried_by_its_status() {
        let d = drive(
            &spec(),
            None,
            include_str!("fixtures/codex_app_rate_limited.jsonl"),
            &[],
        );
        assert_eq!(d.finished_at, [9]);
        let o = d.outcome;
        assert_eq!(
            o.error.as_deref(),
            Some("exceeded retry limit, last status: 429 Too Many Requests")
        );
        assert_eq!(o.retryable, Some(true));
        assert_eq!((o.final_text, o.usage.turns), (None, 0));
        // A 400 names no status: judged by its message, as in exec mode.
        let bad = include_str!("fixtures/codex_app_rate_limited.jsonl").replace(
            r#"{"responseTooManyFailedAttempts":{"httpStatusCode":429}}"#,
            r#""other""#,
        );
        assert_eq!(drive(&spec(), None, &bad, &[]).outcome.retryable, None);
        let e401 = include_str!("fixtures/codex_app_rate_limited.jsonl")
            .replace(r#""httpStatusCode":429"#, r#""httpStatusCode":401"#);
        assert_eq!(
            drive(&spec(), None, &e401, &[]).outcome.retryable,
            Some(false)
        );
    }

    /// A real stream of a read-only role's write: the sandbox's refusal is a refused write.
    #[test]
    fn a_write_the_sandbox_refused_is_refused() {
        let d = drive(
            &spec(),
            None,
            include_str!("fixtures/codex_app_refused.jsonl"),
            &[],
        );
        let refused: Vec<&WorkerEvent> = d
            .events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Refused { .. }))
            .collect();
        assert_eq!(
            refused,
            [&WorkerEvent::Refused {
                tool: "command_execution".into(),
                message: "/bin/bash: line 1: out.txt: Read-only file system".into(),
                write: true
            }]
        );
        assert_eq!(
            d.outcome.writes,
            Writes {
                tried: 1,
                refused: 1
            }
        );
        assert_eq!(d.outcome.final_text.as_deref(), Some("FINAL-2 done"));
    }

    /// The answer resumes the thread that asked (`thread/resume`) and counts only its own
    /// usage; the ask tool (an `mcpToolCall` of crew's server) is the question.
    #[test]
    fn the_answer_resumes_the_thread_and_the_ask_tool_asks() {
        let asked = include_str!("fixtures/codex_app_refused.jsonl");
        let mut s = spec();
        s.session.resume = Some("01a23a6e-6e81-78c2-a20e-bf5a382914bf".into());
        // Codex tells the resumed thread's totals: the asked attempt's (2024 in, 3 of them
        // cached, 43 out) and this one's.
        let resumed = [
            r#"{"id":0,"result":{}}"#,
            r#"{"id":1,"result":{"thread":{"id":"01a23a6e-6e81-78c2-a20e-bf5a382914bf"},"model":"stub-model"}}"#,
            r#"{"id":2,"result":{"turn":{"id":"u2","status":"inProgress"}}}"#,
            r#"{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"total":{"inputTokens":3024,"cachedInputTokens":5,"outputTokens":60}}}}"#,
            r#"{"method":"turn/completed","params":{"turn":{"id":"u2","status":"completed"}}}"#,
        ]
        .join("\n");
        let d = drive(&s, Some(asked), &resumed, &[]);
        assert_eq!(d.sent[2]["method"], "thread/resume");
        assert_eq!(
            d.sent[2]["params"]["threadId"],
            "01a23a6e-6e81-78c2-a20e-bf5a382914bf"
        );
        assert_eq!(texts(&d.sent[3]), [PROMPT]);
        let u = d.outcome.usage;
        assert_eq!((u.input, u.cache_read, u.output, u.turns), (998, 2, 17, 1));
        // Totals below the asked attempt's: codex started counting over; all of them are new.
        let over = resumed.replace("3024", "1024").replace("60", "30");
        let u = drive(&s, Some(asked), &over, &[]).outcome.usage;
        assert_eq!((u.input, u.cache_read, u.output), (1019, 5, 30));

        let ask = r#"{"method":"item/started","params":{"item":{"type":"mcpToolCall","id":"c1","server":"crew_ask","tool":"ask_user","status":"inProgress","arguments":{"question":"Which database?"},"result":null,"error":null},"threadId":"t","turnId":"u"}}"#;
        let done = ask
            .replace("item/started", "item/completed")
            .replace("inProgress", "completed");
        let d = drive(&spec(), None, &format!("{ask}\n{done}\n"), &[]);
        let asks: Vec<&WorkerEvent> = d
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
    }

    /// Codex's requests: approvals declined (approval policy never, as `codex exec`), anything
    /// else answered with an error, never left waiting.
    #[test]
    fn codexs_requests_are_answered() {
        let stream = [
            r#"{"id":7,"method":"item/commandExecution/requestApproval","params":{}}"#,
            r#"{"id":"s8","method":"item/fileChange/requestApproval","params":{}}"#,
            r#"{"id":9,"method":"mcpServer/elicitation/request","params":{}}"#,
            r#"{"id":10,"method":"execCommandApproval","params":{}}"#,
            r#"{"id":11,"method":"item/tool/requestUserInput","params":{}}"#,
        ]
        .join("\n");
        let d = drive(&spec(), None, &stream, &[]);
        let answers: Vec<Value> = d.sent.into_iter().skip(1).collect();
        assert_eq!(
            answers,
            [
                json!({"id": 7, "result": {"decision": "decline"}}),
                json!({"id": "s8", "result": {"decision": "decline"}}),
                json!({"id": 9, "result": {"action": "decline", "content": null, "_meta": null}}),
                json!({"id": 10, "result": {"decision": {"denied": {"rejection": "crew runs codex without approvals"}}}}),
                json!({"id": 11, "error": {"code": -32601, "message": "crew does not answer item/tool/requestUserInput"}}),
            ]
        );
    }

    /// A turn that refuses a steer is not steered again: the message waits for the turn's end
    /// and starts the next.
    #[test]
    fn a_turn_that_refuses_steers_gets_them_after_it() {
        let stream = [
            r#"{"id":0,"result":{}}"#,
            r#"{"id":1,"result":{"thread":{"id":"t"},"model":"m"}}"#,
            r#"{"id":2,"result":{"turn":{"id":"u1","status":"inProgress"}}}"#,
            r#"{"id":3,"error":{"code":-32600,"message":"turn not steerable"}}"#,
            r#"{"method":"turn/completed","params":{"turn":{"id":"u1","status":"completed"}}}"#,
            r#"{"id":4,"result":{"turn":{"id":"u2","status":"inProgress"}}}"#,
            r#"{"method":"turn/completed","params":{"turn":{"id":"u2","status":"completed"}}}"#,
        ]
        .join("\n");
        let d = drive(&spec(), None, &stream, &[(3, "steer")]);
        assert_eq!(
            methods(&d.sent),
            [
                "initialize",
                "initialized",
                "thread/start",
                "turn/start",
                "turn/steer",
                "turn/start"
            ]
        );
        assert_eq!(texts(&d.sent[5]), ["steer"]);
        assert_eq!(d.finished_at, [6]);
        assert_eq!(d.outcome.usage.turns, 2);
    }

    #[test]
    fn a_refused_handshake_ends_the_attempt() {
        let stream = [
            r#"{"id":0,"result":{}}"#,
            r#"{"id":1,"error":{"code":-32600,"message":"bad cwd"}}"#,
        ]
        .join("\n");
        let d = drive(&spec(), None, &stream, &[(2, "late")]);
        assert_eq!(d.finished_at, [1]);
        assert_eq!(
            d.outcome.error.as_deref(),
            Some("codex app-server: thread: bad cwd")
        );
        assert_eq!(
            methods(&d.sent),
            ["initialize", "initialized", "thread/start"]
        );
    }

    #[test]
    fn odd_shapes_never_panic() {
        let mut p = CodexAppParser::new(&spec(), Usage::default());
        for line in [
            "",
            "{}",
            "[1]",
            r#"{"id":0}"#,
            r#"{"id":1,"result":{"thread":7}}"#,
            r#"{"id":1,"result":{"thread":{"id":"t"}}}"#,
            r#"{"id":99,"result":null}"#,
            r#"{"id":-1,"error":5}"#,
            r#"{"method":"turn/started","params":[]}"#,
            r#"{"method":"item/completed","params":{"item":"x"}}"#,
            r#"{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"total":{"inputTokens":-5,"cachedInputTokens":1e300}}}}"#,
            r#"{"method":"turn/completed","params":{"turn":{"status":"failed","error":{"codexErrorInfo":{"x":{"httpStatusCode":"429"}}}}}}"#,
            r#"{"method":"error","params":{}}"#,
        ] {
            p.feed_line(line);
            p.live_replies();
        }
        for _ in 0..(MAX_QUEUED + 10) {
            p.live_steer("x");
        }
        assert!(p.outcome().error.is_some());
    }
}
