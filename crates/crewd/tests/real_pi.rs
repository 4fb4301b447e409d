//! Issue 3, "The real agent": the builtin `default` team on the real `pi` CLI, whose model is a
//! custom `openai-completions` provider pointing at a stub server this test runs on 127.0.0.1.
//!
//! pi is installed by `tests/pi/setup.sh` into `<repo>/.cache/pi` (or `$CREW_PI_DIR`). Without
//! that install the test passes after printing why it did nothing, so `cargo test` works offline.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const PROVIDER: &str = "stub";
/// What the stub answers a fan-out step (`fan_out_on_the_real_pi_cli`).
const FAN_OUT_BLOCK: &str = r#"{"tasks": [
  {"id": "left", "role": "executor", "title": "Left half", "task": "Do the left half.", "scope": ["left/**"]},
  {"id": "right", "role": "executor", "title": "Right half", "task": "Do the right half.", "scope": ["right/**"]}
]}"#;
const MODEL_ID: &str = "stub-model";
/// USD per million tokens, as written into models.json; pi prices each message with these.
const PRICE_INPUT: f64 = 1.0;
const PRICE_OUTPUT: f64 = 2.0;

fn pi_bin() -> Option<PathBuf> {
    let dir = std::env::var_os("CREW_PI_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/pi"));
    let bin = dir.join("node_modules/.bin/pi");
    bin.exists().then(|| bin.canonicalize().unwrap_or(bin))
}

/// pi is not installed: a failure, never a pass. `make test` (tests/run.sh) and nextest's
/// default filter leave this binary out while pi is missing.
fn not_installed(test: &str) -> ! {
    panic!(
        "{test}: pi is not installed (run tests/pi/setup.sh, or set CREW_PI_DIR); \
         `make test` leaves this test out, counted as skipped, while pi is missing"
    )
}

/// What the stub answered to one chat-completions request.
#[derive(Debug, Clone)]
struct Exchange {
    body: Value,
    reply: String,
    prompt_tokens: u64,
    cached_tokens: u64,
    completion_tokens: u64,
}

impl Exchange {
    /// pi's accounting of the usage chunk: `input` excludes the cached part.
    fn input(&self) -> u64 {
        self.prompt_tokens - self.cached_tokens
    }

    fn cost(&self) -> f64 {
        (self.input() as f64 * PRICE_INPUT + self.completion_tokens as f64 * PRICE_OUTPUT) / 1e6
    }

    /// Every text the request carried (system and user messages, string or parts).
    fn texts(&self) -> String {
        let mut out = String::new();
        for m in self.body["messages"].as_array().into_iter().flatten() {
            match &m["content"] {
                Value::String(s) => out.push_str(s),
                Value::Array(parts) => {
                    for p in parts {
                        out.push_str(p["text"].as_str().unwrap_or_default());
                    }
                }
                _ => {}
            }
            out.push('\n');
        }
        out
    }
}

/// A minimal OpenAI-compatible server: `POST /v1/chat/completions` answers with a streamed
/// (SSE) completion whose text names the request's sequence number, then a usage chunk.
struct Stub {
    port: u16,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    errors: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stub {
    fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ex, er, st) = (exchanges.clone(), errors.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (ex, er) = (ex.clone(), er.clone());
                std::thread::spawn(move || {
                    if let Err(e) = serve(conn, &ex) {
                        er.lock().unwrap().push(e.to_string());
                    }
                });
            }
        });
        Stub {
            port,
            exchanges,
            errors,
            stop,
            thread: Some(thread),
        }
    }

    fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
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

fn serve(conn: TcpStream, exchanges: &Mutex<Vec<Exchange>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut content_length = None;
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
        }
    }
    let mut out = conn;
    let is_completion = request_line.starts_with("POST ")
        && request_line
            .split(' ')
            .nth(1)
            .is_some_and(|p| p.ends_with("/chat/completions"));
    let Some(len) = content_length.filter(|_| is_completion) else {
        out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
        return Err(std::io::Error::other(format!(
            "unexpected request: {}",
            request_line.trim_end()
        )));
    };
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    let body: Value = serde_json::from_slice(&body).map_err(std::io::Error::other)?;

    let exchange = {
        let mut all = exchanges.lock().unwrap();
        let n = all.len() as u64 + 1;
        let plain = format!("STUB-REPLY-{n} from the stub model, all done.");
        // A judge's answer (crew_core::verdict::prompt_section asked for one) ends with a
        // passing verdict block: a judge with no verdict would block the run.
        let plain = if body.to_string().contains("## Output: your verdict") {
            format!("{plain}\n\n```json\n{{\"verdict\": \"pass\", \"findings\": []}}\n```")
        } else {
            plain
        };
        // A fan-out step's prompt (crew_core::fanout::prompt_section) gets a block of tasks.
        let reply = if body
            .to_string()
            .contains("## Output: tasks for the team (fan-out)")
        {
            format!("{plain}\n\n```json\n{FAN_OUT_BLOCK}\n```")
        } else {
            plain
        };
        let e = Exchange {
            body,
            reply,
            prompt_tokens: 1000 + 7 * n,
            cached_tokens: n,
            completion_tokens: 20 + n,
        };
        all.push(e.clone());
        e
    };

    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    )?;
    let chunk = |choices: Value, usage: Option<Value>| {
        let mut c = json!({
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": MODEL_ID,
            "choices": choices,
        });
        if let Some(u) = usage {
            c["usage"] = u;
        }
        format!("data: {c}\n\n")
    };
    let mut stream = String::new();
    let (head, tail) = exchange.reply.split_at(exchange.reply.len() / 2);
    stream.push_str(&chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": head}}]),
        None,
    ));
    stream.push_str(&chunk(
        json!([{"index": 0, "delta": {"content": tail}}]),
        None,
    ));
    stream.push_str(&chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        None,
    ));
    stream.push_str(&chunk(
        json!([]),
        Some(json!({
            "prompt_tokens": exchange.prompt_tokens,
            "completion_tokens": exchange.completion_tokens,
            "total_tokens": exchange.prompt_tokens + exchange.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": exchange.cached_tokens},
        })),
    ));
    stream.push_str("data: [DONE]\n\n");
    out.write_all(stream.as_bytes())?;
    out.flush()
}

fn models_json(port: u16) -> Value {
    json!({
        "providers": {
            PROVIDER: {
                "baseUrl": format!("http://127.0.0.1:{port}/v1"),
                "api": "openai-completions",
                "apiKey": "stub-key-not-secret",
                "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
                "models": [{
                    "id": MODEL_ID,
                    "name": "Stub model",
                    "contextWindow": 128000,
                    "maxTokens": 4096,
                    "cost": {"input": PRICE_INPUT, "output": PRICE_OUTPUT, "cacheRead": 0, "cacheWrite": 0},
                }],
            }
        }
    })
}

fn result_text(d: &Daemon, run_id: &str, task: &Value) -> String {
    let name = task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "result")
        .unwrap_or_else(|| panic!("task {} has no result artifact: {task}", task["id"]))["name"]
        .as_str()
        .unwrap()
        .to_string();
    d.ok("team.artifact", json!({"runId": run_id, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The pi adapter's default: `pi --mode rpc`, the prompt on stdin.
#[test]
fn default_team_on_the_real_pi_cli() {
    default_team("default_team_on_the_real_pi_cli", "", true);
}

/// `rpc = false`: `pi --mode json -p`, as before rpc became the default.
#[test]
fn default_team_on_the_real_pi_cli_in_json_mode() {
    default_team(
        "default_team_on_the_real_pi_cli_in_json_mode",
        "rpc = false\n",
        false,
    );
}

fn default_team(test: &str, runtime_extra: &str, rpc: bool) {
    let Some(pi) = pi_bin() else {
        not_installed(test)
    };
    let stub = Stub::start();
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 120000\n\
         [runtimes.pi]\nadapter = \"pi\"\ncommand = [{pi:?}, \"--offline\"]\n{runtime_extra}",
        pi = pi.display().to_string(),
    );
    let d = Daemon::start_with(Opts {
        config,
        env: vec![],
    });
    // The harness gives crewd (and so its workers, HOME being allowlisted) a temporary HOME:
    // pi reads its custom models from `$HOME/.pi/agent/models.json`.
    let agent_dir = d.home.join(".pi/agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(
        agent_dir.join("models.json"),
        serde_json::to_string_pretty(&models_json(stub.port)).unwrap(),
    )
    .unwrap();

    let started = d.ok(
        "team.run",
        json!({
            "goal": "Add a greeting to the README",
            "cwd": path_str(&d.work),
            "team": "default",
            "runtime": "pi",
            "model": format!("{PROVIDER}/{MODEL_ID}"),
        }),
    );
    let run_id = started["runId"].as_str().unwrap().to_string();
    let status = d.wait(&run_id);
    let st = d.status(&run_id);
    let exchanges = stub.exchanges();
    let errors = stub.errors.lock().unwrap().clone();
    assert_eq!(
        status,
        "completed",
        "run status {st:#}\nstub errors: {errors:?}\ndaemon log tail:\n{}",
        tail(&d.log_text(), 4000)
    );
    assert!(errors.is_empty(), "stub errors: {errors:?}");

    let tasks = st["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4, "{st:#}");
    // No tool calls from the stub, so one request per task.
    assert_eq!(exchanges.len(), tasks.len(), "requests: {exchanges:#?}");

    let mut by_task = std::collections::BTreeMap::new();
    for t in tasks {
        let id = t["id"].as_str().unwrap();
        assert_eq!(t["status"], "completed", "{t:#}");
        assert_eq!(t["attempts"], 1, "{t:#}");
        assert_eq!(t["model"], MODEL_ID, "model comes from the stream: {t:#}");
        let text = result_text(&d, &run_id, t);
        let ex = exchanges
            .iter()
            .find(|e| text.contains(&e.reply))
            .unwrap_or_else(|| panic!("result of {id} is not a stub reply: {text:?}"));
        // Usage of each task is what pi parsed from that request's usage chunk.
        let u = &t["usage"];
        assert_eq!(
            (
                u["input"].as_u64(),
                u["output"].as_u64(),
                u["cacheRead"].as_u64()
            ),
            (
                Some(ex.input()),
                Some(ex.completion_tokens),
                Some(ex.cached_tokens)
            ),
            "usage of {id}: {u}"
        );
        assert!(
            (u["cost"].as_f64().unwrap() - ex.cost()).abs() < 1e-9,
            "cost of {id}: {u} vs {}",
            ex.cost()
        );
        assert_eq!(u["turns"], 1, "{id}: {u}");
        by_task.insert(id.to_string(), (t.clone(), ex.clone()));
    }

    // The agent's system prompt reached the model (pi read the file crewd passed).
    for (id, (t, ex)) in &by_task {
        let sys = ex.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !sys.is_empty() && ex.texts().contains("You are a"),
            "{id} ({}): no system prompt in {:#}",
            t["agent"],
            ex.body
        );
        assert_eq!(ex.body["model"], MODEL_ID);
        assert_eq!(ex.body["stream"], true);
    }

    // A later step's request carries each dependency's output.
    let mut checked = 0;
    for (id, (t, ex)) in &by_task {
        for dep in t["dependsOn"].as_array().unwrap() {
            let (_, dep_ex) = &by_task[dep.as_str().unwrap()];
            assert!(
                ex.texts().contains(&dep_ex.reply),
                "request of {id} lacks the output of {dep}: {}",
                ex.texts()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "the default team is a chain of four steps");

    // Run usage = the sum of every usage chunk the stub sent.
    let ru = &st["run"]["usage"];
    let sum = |f: fn(&Exchange) -> u64| exchanges.iter().map(f).sum::<u64>();
    assert_eq!(ru["input"].as_u64(), Some(sum(Exchange::input)), "{ru}");
    assert_eq!(
        ru["output"].as_u64(),
        Some(sum(|e| e.completion_tokens)),
        "{ru}"
    );
    assert_eq!(
        ru["cacheRead"].as_u64(),
        Some(sum(|e| e.cached_tokens)),
        "{ru}"
    );
    let cost: f64 = exchanges.iter().map(Exchange::cost).sum();
    assert!(
        (ru["cost"].as_f64().unwrap() - cost).abs() < 1e-9,
        "{ru} vs {cost}"
    );
    assert_eq!(st["run"]["model"], format!("{PROVIDER}/{MODEL_ID}"));

    // Each worker ran in the mode asked for (`live` = it takes steers on stdin) and, in rpc
    // mode, ended by itself once crew closed its stdin after `agent_end`, not after a drain.
    let spawned: Vec<Value> = d
        .events(Some(&run_id))
        .into_iter()
        .filter(|e| e["type"] == "worker.spawned")
        .collect();
    assert_eq!(spawned.len(), 4, "{spawned:#?}");
    assert!(
        spawned.iter().all(|e| e["data"]["live"] == rpc),
        "{spawned:#?}"
    );
    if rpc {
        let log = d.log_text();
        let ended: Vec<&str> = log.lines().filter(|l| l.contains("worker ended")).collect();
        assert_eq!(ended.len(), 4, "{log}");
        assert!(
            ended
                .iter()
                .all(|l| l.contains("code=0") && l.contains("drained=false")),
            "{ended:#?}"
        );
    }
}

/// Issue 17: the stub model answers the builtin `implement` workflow's plan step with a
/// fan-out block; the tasks it names are added and run on pi too.
#[test]
fn fan_out_on_the_real_pi_cli() {
    let Some(pi) = pi_bin() else {
        not_installed("fan_out_on_the_real_pi_cli")
    };
    let stub = Stub::start();
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 120000\n\
         [runtimes.pi]\nadapter = \"pi\"\ncommand = [{pi:?}, \"--offline\"]\n",
        pi = pi.display().to_string(),
    );
    let d = Daemon::start_with(Opts {
        config,
        env: vec![],
    });
    let agent_dir = d.home.join(".pi/agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(
        agent_dir.join("models.json"),
        serde_json::to_string_pretty(&models_json(stub.port)).unwrap(),
    )
    .unwrap();
    let started = d.ok(
        "team.run",
        json!({
            "goal": "Split the greeting work",
            "cwd": path_str(&d.work),
            "team": "implement",
            "workspace": "shared",
            "runtime": "pi",
            "model": format!("{PROVIDER}/{MODEL_ID}"),
        }),
    );
    let run_id = started["runId"].as_str().unwrap().to_string();
    let status = d.wait(&run_id);
    let st = d.status(&run_id);
    let errors = stub.errors.lock().unwrap().clone();
    assert_eq!(
        status,
        "completed",
        "run status {st:#}\nstub errors: {errors:?}\ndaemon log tail:\n{}",
        tail(&d.log_text(), 4000)
    );
    let ids: Vec<&str> = st["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "01_explore",
            "02_plan",
            "03_integrate",
            "04_verify",
            "05_review",
            "left",
            "right"
        ]
    );
    for id in ["left", "right"] {
        let t = Daemon::task(&st, id);
        assert_eq!(t["status"], "completed", "{t:#}");
        assert_eq!(t["model"], MODEL_ID, "{t:#}");
    }
    assert_eq!(
        Daemon::task(&st, "03_integrate")["dependsOn"],
        json!(["02_plan", "left", "right"])
    );
    // pi sent each added task's text to the model, and the integrate step saw both results.
    let exchanges = stub.exchanges();
    for want in ["Do the left half.", "Do the right half."] {
        assert!(
            exchanges.iter().any(|e| e.texts().contains(want)),
            "no request carried {want:?}"
        );
    }
    let integrate = exchanges
        .iter()
        .find(|e| e.texts().contains("Integrate the parallel work"))
        .expect("the integrate step's request");
    assert!(
        integrate.texts().contains("task=\"left\"") && integrate.texts().contains("task=\"right\""),
        "{}",
        integrate.texts()
    );
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}
