//! A stub model API on 127.0.0.1 for the real-CLI tests: Anthropic Messages (Claude Code),
//! OpenAI Responses (Codex), Gemini's `streamGenerateContent` (Gemini CLI) or OpenAI chat
//! completions (opencode), all streamed as server-sent events; errors as the API's JSON body. What it answers is up to the
//! test's script; every request is recorded with what the stub answered and the usage it
//! reported, so a test can hold crew's accounting to it.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `POST /v1/messages`, Anthropic's streaming events.
    Anthropic,
    /// `POST /v1/responses`, OpenAI's Responses streaming events.
    Responses,
    /// `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, Gemini's chunks. The model
    /// is named in the path: the stub records it as the body's `model`.
    Gemini,
    /// `POST /v1/chat/completions`, OpenAI's chat completions chunks (opencode's
    /// OpenAI-compatible provider).
    Chat,
}

/// What the stub answers to one model request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Text(String),
    /// A call of the named tool with these arguments.
    Tool {
        name: String,
        input: Value,
    },
    /// A call of a tool inside a namespace (the Responses API's `namespace` tools, as Codex
    /// offers an MCP server's tools: namespace `mcp__<server>`, the tool's own name).
    NamespacedTool {
        namespace: String,
        name: String,
        input: Value,
    },
    /// An HTTP error with the API's JSON error body.
    Error {
        status: u16,
        message: String,
    },
}

/// Usage the stub reported for one answer, in the API's own terms: Anthropic's `input_tokens`
/// exclude the cached ones, OpenAI's include them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sent {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

#[derive(Debug, Clone)]
pub struct Exchange {
    /// 1-based, in arrival order.
    pub n: u64,
    pub path: String,
    pub body: Value,
    pub reply: Reply,
    pub sent: Sent,
}

impl Exchange {
    /// Every string the request carried (system prompt, messages, tool results), one per line.
    pub fn texts(&self) -> String {
        let mut out = String::new();
        collect_strings(&self.body, &mut out);
        out
    }

    pub fn has_tool_result(&self) -> bool {
        fn any(v: &Value) -> bool {
            match v {
                Value::Object(o) => {
                    matches!(
                        o.get("type").and_then(Value::as_str),
                        Some("tool_result" | "function_call_output" | "custom_tool_call_output")
                    ) || o.contains_key("functionResponse")
                        || o.get("role").and_then(Value::as_str) == Some("tool")
                        || o.values().any(any)
                }
                Value::Array(a) => a.iter().any(any),
                _ => false,
            }
        }
        any(&self.body)
    }
}

fn collect_strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

type Script = dyn Fn(&Exchange) -> Reply + Send + Sync;

pub struct Stub {
    pub port: u16,
    wire: Wire,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    errors: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stub {
    /// Serve `wire` on a free port; `script` decides each answer from the request (its `reply`
    /// and `sent` fields are placeholders when the script sees it).
    pub fn start(wire: Wire, script: impl Fn(&Exchange) -> Reply + Send + Sync + 'static) -> Stub {
        Stub::start_with_retry_after(wire, None, script)
    }

    /// `start`, with a `retry-after-ms` header of `ms` on every error reply: a CLI that honours
    /// the API's hint (opencode) retries at once instead of after its own backoff.
    pub fn start_with_retry_after(
        wire: Wire,
        ms: Option<u64>,
        script: impl Fn(&Exchange) -> Reply + Send + Sync + 'static,
    ) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (ex, er, st) = (exchanges.clone(), errors.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (ex, er, script) = (ex.clone(), er.clone(), script.clone());
                std::thread::spawn(move || {
                    if let Err(e) = serve(wire, ms, conn, &ex, &*script) {
                        er.lock().unwrap().push(e.to_string());
                    }
                });
            }
        });
        Stub {
            port,
            wire,
            exchanges,
            errors,
            stop,
            thread: Some(thread),
        }
    }

    /// The base URL a CLI is given (`ANTHROPIC_BASE_URL`, a codex provider's `base_url`).
    pub fn base_url(&self) -> String {
        match self.wire {
            Wire::Anthropic => format!("http://127.0.0.1:{}", self.port),
            Wire::Responses => format!("http://127.0.0.1:{}/v1", self.port),
            Wire::Gemini => format!("http://127.0.0.1:{}", self.port),
            Wire::Chat => format!("http://127.0.0.1:{}/v1", self.port),
        }
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }

    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The usage the stub reports for request `n`: distinct per request, so a sum names them.
fn sent_for(n: u64) -> Sent {
    Sent {
        input: 1000 + 7 * n,
        output: 20 + n,
        cache_read: n,
        cache_write: 2 * n,
        reasoning: 3,
    }
}

fn serve(
    wire: Wire,
    retry_after_ms: Option<u64>,
    conn: TcpStream,
    exchanges: &Mutex<Vec<Exchange>>,
    script: &Script,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut content_length = None;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse::<usize>().ok();
            }
            if name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked") {
                chunked = true;
            }
        }
    }
    let mut out = conn;
    let mut parts = request_line.split(' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default().to_string(),
    );
    let route = path.split('?').next().unwrap_or_default();
    let gemini_model = route
        .strip_prefix("/v1beta/models/")
        .and_then(|r| r.strip_suffix(":streamGenerateContent"))
        .map(str::to_owned);
    let known = match wire {
        Wire::Anthropic => route == "/v1/messages",
        Wire::Responses => route == "/v1/responses",
        Wire::Gemini => gemini_model.is_some(),
        Wire::Chat => route == "/v1/chat/completions",
    };
    if method != "POST" || !known {
        // Model listings and the like: an empty answer, not a failure.
        let (status, body) = if method == "GET" && path.ends_with("/models") {
            ("200 OK", r#"{"object":"list","data":[]}"#)
        } else {
            ("404 Not Found", "{}")
        };
        return respond(&mut out, status, "application/json", "", body.as_bytes());
    }
    let body = if chunked {
        read_chunked(&mut reader)?
    } else {
        let mut body = vec![0; content_length.unwrap_or(0)];
        reader.read_exact(&mut body)?;
        body
    };
    let mut body: Value = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
    if let (Some(model), Some(obj)) = (gemini_model, body.as_object_mut()) {
        obj.insert("model".into(), json!(model));
    }

    let exchange = {
        let mut all = exchanges.lock().unwrap();
        let n = all.len() as u64 + 1;
        let mut e = Exchange {
            n,
            path,
            body,
            reply: Reply::Text(String::new()),
            sent: Sent::default(),
        };
        e.reply = script(&e);
        if !matches!(e.reply, Reply::Error { .. }) {
            e.sent = sent_for(n);
        }
        all.push(e.clone());
        e
    };
    if let Reply::Error { status, message } = &exchange.reply {
        let body = match wire {
            Wire::Anthropic => {
                json!({"type": "error", "error": {"type": error_type(*status), "message": message}})
            }
            Wire::Responses | Wire::Chat => {
                json!({"error": {"type": error_type(*status), "message": message, "code": null}})
            }
            Wire::Gemini => {
                json!({"error": {"code": status, "message": message, "status": error_type(*status)}})
            }
        };
        let status = format!("{status} Stub Error");
        let extra = retry_after_ms.map_or(String::new(), |ms| format!("retry-after-ms: {ms}\r\n"));
        return respond(
            &mut out,
            &status,
            "application/json",
            &extra,
            body.to_string().as_bytes(),
        );
    }
    let stream = match wire {
        Wire::Anthropic => anthropic_stream(&exchange),
        Wire::Responses => responses_stream(&exchange),
        Wire::Gemini => gemini_stream(&exchange),
        Wire::Chat => chat_stream(&exchange),
    };
    respond(
        &mut out,
        "200 OK",
        "text/event-stream",
        "",
        stream.as_bytes(),
    )
}

fn error_type(status: u16) -> &'static str {
    match status {
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400 => "invalid_request_error",
        _ => "api_error",
    }
}

/// `extra`: more header lines, each ending in `\r\n`.
fn respond(
    out: &mut TcpStream,
    status: &str,
    ty: &str,
    extra: &str,
    body: &[u8],
) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {ty}\r\nCache-Control: no-cache\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(std::io::Error::other)?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

fn sse(event: &Value) -> String {
    format!(
        "event: {}\ndata: {event}\n\n",
        event["type"].as_str().unwrap_or("message")
    )
}

fn anthropic_stream(e: &Exchange) -> String {
    let model = e.body["model"].as_str().unwrap_or("stub-model");
    let mut s = sse(&json!({
        "type": "message_start",
        "message": {
            "id": format!("msg_stub_{}", e.n), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            // As the API does: the start's output count is a placeholder.
            "usage": {"input_tokens": e.sent.input, "output_tokens": 1,
                      "cache_read_input_tokens": e.sent.cache_read,
                      "cache_creation_input_tokens": e.sent.cache_write},
        },
    }));
    let stop = match &e.reply {
        Reply::Text(text) => {
            s += &sse(
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            let (head, tail) = text.split_at(text.len() / 2);
            for part in [head, tail] {
                s += &sse(
                    &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}}),
                );
            }
            "end_turn"
        }
        Reply::Tool { name, input } => {
            s += &sse(
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_stub_{}", e.n), "name": name, "input": {}}}),
            );
            s += &sse(
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            );
            "tool_use"
        }
        Reply::Error { .. } => unreachable!("errors are not streamed"),
        Reply::NamespacedTool { .. } => unreachable!("tool namespaces are the Responses API's"),
    };
    s += &sse(&json!({"type": "content_block_stop", "index": 0}));
    s += &sse(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": e.sent.output},
    }));
    s += &sse(&json!({"type": "message_stop"}));
    s
}

fn responses_stream(e: &Exchange) -> String {
    let id = format!("resp_stub_{}", e.n);
    let mut s = sse(&json!({"type": "response.created", "response": {"id": id}}));
    let item = match &e.reply {
        Reply::Text(text) => json!({
            "type": "message", "role": "assistant", "id": format!("msg_stub_{}", e.n),
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        Reply::Tool { name, input } => json!({
            "type": "function_call", "id": format!("fc_stub_{}", e.n),
            "call_id": format!("call_stub_{}", e.n), "name": name, "arguments": input.to_string(),
        }),
        Reply::NamespacedTool {
            namespace,
            name,
            input,
        } => json!({
            "type": "function_call", "id": format!("fc_stub_{}", e.n),
            "call_id": format!("call_stub_{}", e.n), "namespace": namespace, "name": name,
            "arguments": input.to_string(),
        }),
        Reply::Error { .. } => unreachable!("errors are not streamed"),
    };
    s += &sse(&json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    s += &sse(&json!({
        "type": "response.completed",
        "response": {"id": id, "usage": {
            // OpenAI counts the cached tokens in `input_tokens`, reasoning in `output_tokens`.
            "input_tokens": e.sent.input + e.sent.cache_read,
            "input_tokens_details": {"cached_tokens": e.sent.cache_read},
            "output_tokens": e.sent.output,
            "output_tokens_details": {"reasoning_tokens": e.sent.reasoning},
            "total_tokens": e.sent.input + e.sent.cache_read + e.sent.output,
        }},
    }));
    s
}

fn gemini_stream(e: &Exchange) -> String {
    let model = e.body["model"].as_str().unwrap_or("stub-model");
    let chunk = |parts: Value, last: bool| {
        let mut c = json!({
            "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
            "modelVersion": model,
        });
        if last {
            c["candidates"][0]["finishReason"] = json!("STOP");
            // Gemini counts the cached tokens in `promptTokenCount`, like OpenAI.
            c["usageMetadata"] = json!({
                "promptTokenCount": e.sent.input + e.sent.cache_read,
                "cachedContentTokenCount": e.sent.cache_read,
                "candidatesTokenCount": e.sent.output,
                "totalTokenCount": e.sent.input + e.sent.cache_read + e.sent.output,
            });
        }
        format!("data: {c}\r\n\r\n")
    };
    match &e.reply {
        Reply::Text(text) => {
            let (head, tail) = text.split_at(text.len() / 2);
            chunk(json!([{"text": head}]), false) + &chunk(json!([{"text": tail}]), true)
        }
        Reply::Tool { name, input } => chunk(
            json!([{"functionCall": {"name": name, "args": input}}]),
            true,
        ),
        Reply::Error { .. } => unreachable!("errors are not streamed"),
        Reply::NamespacedTool { .. } => unreachable!("tool namespaces are the Responses API's"),
    }
}

fn chat_stream(e: &Exchange) -> String {
    let model = e.body["model"].as_str().unwrap_or("stub-model");
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut c = json!({
            "id": format!("chatcmpl-stub-{}", e.n), "object": "chat.completion.chunk",
            "created": 1, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if finish.is_some() {
            // OpenAI counts the cached tokens in `prompt_tokens`.
            c["usage"] = json!({
                "prompt_tokens": e.sent.input + e.sent.cache_read,
                "completion_tokens": e.sent.output,
                "total_tokens": e.sent.input + e.sent.cache_read + e.sent.output,
                "prompt_tokens_details": {"cached_tokens": e.sent.cache_read},
            });
        }
        format!("data: {c}\n\n")
    };
    let mut s = match &e.reply {
        Reply::Text(text) => {
            let (head, tail) = text.split_at(text.len() / 2);
            chunk(json!({"role": "assistant", "content": head}), None)
                + &chunk(json!({"content": tail}), None)
                + &chunk(json!({}), Some("stop"))
        }
        Reply::Tool { name, input } => {
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_stub_{}", e.n),
                    "type": "function", "function": {"name": name, "arguments": input.to_string()}}]}),
                None,
            ) + &chunk(json!({}), Some("tool_calls"))
        }
        Reply::Error { .. } => unreachable!("errors are not streamed"),
        Reply::NamespacedTool { .. } => unreachable!("tool namespaces are the Responses API's"),
    };
    s.push_str("data: [DONE]\n\n");
    s
}
