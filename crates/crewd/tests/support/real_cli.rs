//! What the real-CLI tests (real_claude.rs, real_codex.rs, real_gemini.rs, real_opencode.rs,
//! real_mcp.rs) share: finding the installed CLI, pointing it at the stub, telling which role a
//! model request comes from, and holding a finished `default` team run to what the stub saw and
//! said.
#![allow(dead_code)]

use super::common::*;
use super::model_stub::{Exchange, Reply, Sent, Stub, Wire};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const MODEL: &str = "stub-model";

/// `tests/agents` (or `$CREW_AGENTS_DIR`): where setup.sh installs the CLIs.
pub fn agents_dir() -> PathBuf {
    std::env::var_os("CREW_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents"))
}

/// `tests/agents/node_modules/.bin/<name>` (or under `$CREW_AGENTS_DIR`), if installed.
pub fn agent_bin(name: &str) -> Option<PathBuf> {
    let bin = agents_dir().join("node_modules/.bin").join(name);
    bin.exists().then(|| bin.canonicalize().unwrap_or(bin))
}

/// Everything Claude Code needs to reach the stub and nothing else: its base URL and key, no
/// retries of its own (crew's are under test), no telemetry, update checks or error reports.
pub fn claude_env(stub: &Stub) -> Vec<(String, String)> {
    [
        ("ANTHROPIC_BASE_URL", stub.base_url()),
        ("ANTHROPIC_API_KEY", "stub-key-not-secret".into()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The start of a Codex `config.toml` whose only provider is the stub (its key in
/// `STUB_API_KEY`), with codex's own retries off (crew's are under test).
pub fn codex_provider_toml(stub: &Stub) -> String {
    format!(
        "model = \"{MODEL}\"\nmodel_provider = \"stub\"\n\n[model_providers.stub]\n\
         name = \"stub\"\nbase_url = \"{}\"\nwire_api = \"responses\"\n\
         env_key = \"STUB_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
        stub.base_url()
    )
}

/// A directory holding `opencode.json`, an opencode config whose one provider is the stub
/// (named `stub`: opencode's model is then `stub/stub-model`).
pub fn opencode_config(stub: &Stub) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("opencode-config")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let config = json!({
        "autoupdate": false,
        "share": "disabled",
        "provider": {"stub": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "stub",
            "options": {"baseURL": stub.base_url(), "apiKey": "stub-key-not-secret"},
            "models": {MODEL: {"name": MODEL}},
        }},
    });
    std::fs::write(dir.path().join("opencode.json"), config.to_string()).unwrap();
    dir
}

/// The environment an opencode runtime passes through: the config file of
/// [`opencode_config`], and no traffic but to the stub (opencode's model catalogue, models.dev,
/// is not fetched).
pub fn opencode_env(config: &tempfile::TempDir) -> Vec<(String, String)> {
    vec![
        (
            "OPENCODE_CONFIG".to_string(),
            config.path().join("opencode.json").display().to_string(),
        ),
        ("OPENCODE_DISABLE_MODELS_FETCH".to_string(), "1".to_string()),
    ]
}

/// opencode installs its plugin SDK from npm into `~/.config/opencode` when it finds none:
/// tens of MB per fresh HOME, which on a loaded machine outlasts the no-output timeout. setup.sh
/// installs that package once, pinned, in `tests/agents/opencode-config`; each test's HOME gets
/// a copy (a copy, not a link: opencode writes there, and tests run in parallel).
pub fn seed_opencode_plugin_dir(home: &Path) {
    let from = agents_dir().join("opencode-config");
    if !from.join("node_modules").is_dir() {
        return;
    }
    let to = home.join(".config/opencode");
    std::fs::create_dir_all(&to).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(&to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// The test's CLI is not installed: a failure, never a pass. `make test` (tests/run.sh) and
/// nextest's default filter leave these tests out when their CLI is missing, so this is reached
/// only when one is asked for by hand.
pub fn not_installed(test: &str, cli: &str) -> ! {
    panic!(
        "{test}: {cli} is not installed (run tests/agents/setup.sh, or set CREW_AGENTS_DIR); \
         `make test` leaves this test out, counted as skipped, while {cli} is missing"
    )
}

/// Runs the builtin `default` team with the long goal on `runtime` in `cwd` and waits: the run
/// must complete with no stub error. Returns the run id.
pub fn run_default_team(d: &Daemon, stub: &Stub, runtime: &str, cwd: &Path) -> String {
    run_default_team_on(d, stub, runtime, cwd, MODEL)
}

/// `run_default_team` with the model named as the CLI wants it (opencode: `provider/model`).
pub fn run_default_team_on(
    d: &Daemon,
    stub: &Stub,
    runtime: &str,
    cwd: &Path,
    model: &str,
) -> String {
    let run_id = d.ok(
        "team.run",
        json!({
            "goal": long_goal(), "cwd": path_str(cwd), "team": "default",
            "runtime": runtime, "model": model,
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let status = d.wait(&run_id);
    let st = d.status(&run_id);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\ndaemon log tail:\n{}",
        stub.errors(),
        tail(&d.log_text(), 6000)
    );
    assert!(stub.errors().is_empty(), "{:?}", stub.errors());
    run_id
}

/// A role's final text from a stub model in the `default` team's tests. The verifier's starts
/// with `PASS`, its verdict in the short form crew reads (`crew_core::verdict`): a judge with
/// no verdict would block the run.
pub fn stub_answer(role: &str, n: u64) -> String {
    let text = format!("STUB-REPLY-{n} from the {role}, all done.");
    if role == "verifier" {
        format!("PASS: {text}")
    } else {
        text
    }
}

/// A goal of 100,000 characters: far past what crew puts on argv.
pub fn long_goal() -> String {
    let mut goal = String::from("Add a greeting to the README. Context follows. ");
    let mut i = 0;
    while goal.len() < 100_000 {
        goal.push_str(&format!("filler-{i} "));
        i += 1;
    }
    goal.push_str("END-OF-GOAL");
    goal
}

/// The builtin `default` workflow's step texts, and the agent each step runs.
const STEPS: &[(&str, &str)] = &[
    ("Explore the codebase for this goal", "explorer"),
    ("Write an implementation plan for", "planner"),
    ("Implement the plan for", "executor"),
    ("Verify that this goal is achieved", "verifier"),
];

/// The first words of each builtin agent's system prompt.
const SYSTEM_PROMPTS: &[(&str, &str)] = &[
    ("explorer", "You are a codebase explorer."),
    ("planner", "You are a planner."),
    ("executor", "You are an implementer."),
    ("verifier", "You are a verifier."),
];

/// Which step of the `default` workflow a request belongs to (`other` for anything else).
pub fn role_of(e: &Exchange) -> &'static str {
    let texts = e.texts();
    STEPS
        .iter()
        .find(|(needle, _)| texts.contains(needle))
        .map_or("other", |(_, role)| role)
}

pub fn result_text(d: &Daemon, run_id: &str, task: &Value) -> String {
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

/// How the CLI turns the usage the stub sent into the task's usage.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Accounting {
    /// Claude Code: the API's counts as they are; a turn per model call.
    Anthropic,
    /// Codex: one turn per `codex exec`, no cache writes in the Responses API.
    Responses,
    /// Gemini CLI, opencode: a turn per model call, no cache writes in the API.
    PerCall,
}

pub struct TeamRun {
    /// Task by agent name.
    pub tasks: BTreeMap<String, Value>,
    /// The first model request of each role.
    pub first_requests: Vec<(String, Exchange)>,
}

/// The checks every real CLI's `default` team run must pass: each task completed on its first
/// attempt with the stub's last answer as its result and exactly the usage the stub sent; the
/// agent's system prompt and the earlier steps' outputs reached the model.
pub fn check_team_run(
    d: &Daemon,
    run_id: &str,
    exchanges: &[Exchange],
    acc: Accounting,
) -> TeamRun {
    let st = d.status(run_id);
    let tasks = st["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4, "{st:#}");
    let mut by_role: BTreeMap<String, Vec<&Exchange>> = BTreeMap::new();
    for e in exchanges {
        by_role.entry(role_of(e).to_string()).or_default().push(e);
    }
    assert_eq!(
        by_role.get("other").map(Vec::len),
        None,
        "requests of no step"
    );

    let mut out = TeamRun {
        tasks: BTreeMap::new(),
        first_requests: Vec::new(),
    };
    let mut results = BTreeMap::new();
    for t in tasks {
        let role = t["agent"].as_str().unwrap().to_string();
        let id = t["id"].as_str().unwrap().to_string();
        assert_eq!(t["status"], "completed", "{t:#}");
        assert_eq!(t["attempts"], 1, "{t:#}");
        let mine = by_role
            .get(&role)
            .unwrap_or_else(|| panic!("no request from the {role}"));
        let last = mine.last().unwrap();
        let Reply::Text(answer) = &last.reply else {
            panic!("the {role}'s last answer was {:?}", last.reply)
        };
        let text = result_text(d, run_id, t);
        assert_eq!(text.trim(), answer, "result of {id}");
        results.insert(id.clone(), text);

        // Usage is what the stub sent, summed over the role's requests.
        let sum = |f: fn(&Sent) -> u64| mine.iter().map(|e| f(&e.sent)).sum::<u64>();
        let u = &t["usage"];
        let want = (
            sum(|s| s.input),
            sum(|s| s.output),
            sum(|s| s.cache_read),
            match acc {
                Accounting::Anthropic => sum(|s| s.cache_write),
                Accounting::Responses | Accounting::PerCall => 0,
            },
            match acc {
                Accounting::Anthropic | Accounting::PerCall => mine.len() as u64,
                Accounting::Responses => 1,
            },
        );
        assert_eq!(
            (
                u["input"].as_u64().unwrap(),
                u["output"].as_u64().unwrap(),
                u["cacheRead"].as_u64().unwrap(),
                u["cacheWrite"].as_u64().unwrap(),
                u["turns"].as_u64().unwrap(),
            ),
            want,
            "usage of {id} ({role}): {u}"
        );

        // The agent's own system prompt reached the model, on every request.
        let (_, system) = SYSTEM_PROMPTS.iter().find(|(r, _)| *r == role).unwrap();
        for e in mine {
            assert!(
                e.texts().contains(system),
                "{role}: no system prompt in request {}",
                e.n
            );
            assert_eq!(e.body["model"], MODEL, "{role}");
        }
        out.first_requests
            .push((role.clone(), (*mine.first().unwrap()).clone()));
        out.tasks.insert(role, t.clone());
    }

    // A later step's request holds each dependency's output.
    let mut checked = 0;
    for (role, first) in &out.first_requests {
        for dep in out.tasks[role]["dependsOn"].as_array().unwrap() {
            let dep_text = &results[dep.as_str().unwrap()];
            assert!(
                first.texts().contains(dep_text.trim()),
                "the {role}'s request lacks the output of {dep}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "the default team is a chain of four steps");

    // Run usage is every task's.
    let ru = &st["run"]["usage"];
    let total: u64 = exchanges.iter().map(|e| e.sent.output).sum();
    assert_eq!(ru["output"].as_u64(), Some(total), "{ru}");
    out
}

/// The roles whose tasks got a `task.warning`, sorted.
pub fn warned_roles(d: &Daemon, run_id: &str, run: &TeamRun) -> Vec<String> {
    let events = d.events(Some(run_id));
    let mut roles: Vec<String> = run
        .tasks
        .iter()
        .filter(|(_, t)| {
            events
                .iter()
                .any(|e| e["type"] == "task.warning" && e["taskId"] == t["id"])
        })
        .map(|(role, _)| role.clone())
        .collect();
    roles.sort();
    roles
}

/// The visible files directly in `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// On the one-step `solo` team: a 529 then a 429 are retried and the third attempt answers; a
/// 400 fails the task at once with the API's message.
pub fn check_retries_and_400(d: &Daemon, runtime: &str) {
    let retried = d.run(
        "RETRY-GOAL",
        json!({"team": "solo", "runtime": runtime, "model": MODEL}),
    );
    let status = d.wait(&retried);
    let st = d.status(&retried);
    assert_eq!(status, "completed", "{st:#}\n{}", tail(&d.log_text(), 4000));
    let t = &st["tasks"][0];
    assert_eq!(t["attempts"], 3, "{t:#}");
    assert_eq!(
        result_text(d, &retried, t).trim(),
        "STUB-REPLY after the retries"
    );
    let events = d.events(Some(&retried));
    let retries: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "task.retrying")
        .map(|e| e["data"]["error"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries[0].contains("529"), "{retries:?}");
    assert!(retries[1].contains("429"), "{retries:?}");

    let bad = d.run(
        "BAD-REQUEST-GOAL",
        json!({"team": "solo", "runtime": runtime, "model": MODEL}),
    );
    let status = d.wait(&bad);
    let st = d.status(&bad);
    assert_eq!(status, "failed", "{st:#}");
    let t = &st["tasks"][0];
    assert_eq!(t["status"], "failed", "{t:#}");
    assert_eq!(t["attempts"], 1, "a 400 is not retried: {t:#}");
    assert!(
        t["error"]
            .as_str()
            .unwrap_or_default()
            .contains("STUB-400: max_tokens: field required"),
        "the API's message: {t:#}"
    );
}

pub fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

/// The answer the retry tests' stubs give once their errors are spent.
pub const AFTER_RETRIES: &str = "STUB-REPLY after the retries";

/// A stub that answers its first `errors.len()` requests with those statuses, each saying
/// `retry-after-ms: retry_after_ms` when given, then [`AFTER_RETRIES`].
pub fn failing_then_ok(
    wire: Wire,
    retry_after_ms: Option<u64>,
    errors: Vec<(u16, &'static str)>,
) -> Stub {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    Stub::start_with_retry_after(wire, retry_after_ms, move |_| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match errors.get(n) {
            Some((status, message)) => Reply::Error {
                status: *status,
                message: (*message).into(),
            },
            None => Reply::Text(AFTER_RETRIES.into()),
        }
    })
}

/// Runs `goal` on the one-step `solo` team (see `one_step_team`) and holds it to a recovery
/// from the stub's retryable errors: the task completed after `attempts` attempts of crew's
/// (1: the CLI retried inside itself), crew's retries named the API's messages `retried` in
/// order, its result is the stub's one text answer, and its usage is exactly that answer's
/// (a failed request sent none). Returns the task.
pub fn check_recovered(
    d: &Daemon,
    stub: &Stub,
    runtime: &str,
    model: &str,
    attempts: u64,
    retried: &[&str],
) -> Value {
    let run = d.run(
        "RETRY-GOAL",
        json!({"team": "solo", "runtime": runtime, "model": model}),
    );
    let status = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub: {:?}\n{}",
        stub.exchanges()
            .iter()
            .map(|e| &e.reply)
            .collect::<Vec<_>>(),
        tail(&d.log_text(), 4000)
    );
    let t = &st["tasks"][0];
    assert_eq!(t["attempts"], attempts, "who retried: {t:#}");
    assert_eq!(result_text(d, &run, t).trim(), AFTER_RETRIES);

    let retries: Vec<String> = d
        .events(Some(&run))
        .iter()
        .filter(|e| e["type"] == "task.retrying")
        .map(|e| e["data"]["error"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(retries.len(), retried.len(), "{retries:?}");
    for (got, want) in retries.iter().zip(retried) {
        assert!(got.contains(want), "{got:?} lacks the API's {want:?}");
    }

    let ex = stub.exchanges();
    let ok: Vec<&Exchange> = ex
        .iter()
        .filter(|e| !matches!(e.reply, Reply::Error { .. }))
        .collect();
    assert_eq!(
        ok.len(),
        1,
        "one answer: {:?}",
        ex.iter().map(|e| &e.reply).collect::<Vec<_>>()
    );
    let sent = ok[0].sent;
    let u = &t["usage"];
    assert_eq!(
        (
            u["input"].as_u64().unwrap(),
            u["output"].as_u64().unwrap(),
            u["cacheRead"].as_u64().unwrap(),
        ),
        (sent.input, sent.output, sent.cache_read),
        "the usage is the answer's: {u}"
    );
    t.clone()
}

/// `$CREWCTL_BIN`, else [`crewctl_next_to_crewd`].
pub fn crewctl_bin() -> PathBuf {
    match std::env::var_os("CREWCTL_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => crewctl_next_to_crewd(),
    }
}

/// The `crewctl` next to `crewd` in the target directory, built once if missing: crewd gives
/// its Claude Code and Codex workers that one (`crewctl mcp --ask`). crewctl is another crate,
/// so cargo does not build it for crewd's tests: `make build` (`cargo build --workspace
/// --bins`) and `cargo nextest run --workspace` do, and a test run of one file alone uses
/// whatever crewctl they left.
pub fn crewctl_next_to_crewd() -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let bin = crewd_bin().with_file_name("crewctl");
    ONCE.call_once(|| {
        if !bin.exists() {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "-p", "crewctl"])
                .status()
                .expect("cargo build -p crewctl");
            assert!(status.success(), "building crewctl failed");
        }
    });
    bin
}

/// Every object in `v` (depth first, arrays in order) for which `f` gives a value.
pub fn find_all<T>(v: &Value, f: &impl Fn(&serde_json::Map<String, Value>) -> Option<T>) -> Vec<T> {
    let mut out = Vec::new();
    match v {
        Value::Object(o) => {
            out.extend(f(o));
            for v in o.values() {
                out.extend(find_all(v, f));
            }
        }
        Value::Array(a) => a.iter().for_each(|v| out.extend(find_all(v, f))),
        _ => {}
    }
    out
}

/// The tools the request offers, wherever the CLI put them in its tool list: (namespace,
/// name), the namespace set for a tool inside one (Codex puts an MCP server's tools in a
/// Responses API namespace `mcp__<server>`).
pub fn offered_tools(body: &Value) -> Vec<(Option<String>, String)> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tools {
        // Gemini: `{"functionDeclarations": [{"name": …}, …]}`.
        if let Some(decls) = t.get("functionDeclarations").and_then(Value::as_array) {
            out.extend(
                decls
                    .iter()
                    .filter_map(|d| d.get("name")?.as_str())
                    .map(|n| (None, n.to_string())),
            );
            continue;
        }
        // Chat completions: `{"type": "function", "function": {"name": …}}`.
        if let Some(name) = t.get("function").and_then(|f| f.get("name")?.as_str()) {
            out.push((None, name.to_string()));
            continue;
        }
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        match t.get("tools").and_then(Value::as_array) {
            Some(inner) => out.extend(
                inner
                    .iter()
                    .filter_map(|i| i.get("name")?.as_str())
                    .map(|n| (Some(name.to_string()), n.to_string())),
            ),
            None => out.push((None, name.to_string())),
        }
    }
    out
}

/// The name of the last tool the model called in the conversation so far (Anthropic
/// `tool_use`, Responses `function_call`, Gemini `functionCall`, chat completions
/// `tool_calls`).
pub fn last_call(body: &Value) -> Option<String> {
    find_all(body, &|o| {
        if let Some(call) = o.get("functionCall") {
            return call.get("name")?.as_str().map(str::to_owned);
        }
        if let Some(calls) = o.get("tool_calls").and_then(Value::as_array) {
            let last = calls.last()?.get("function")?;
            return last.get("name")?.as_str().map(str::to_owned);
        }
        let ty = o.get("type")?.as_str()?;
        matches!(ty, "tool_use" | "function_call")
            .then(|| o.get("name")?.as_str().map(str::to_owned))
            .flatten()
    })
    .pop()
}

/// Runs the one-step `asker` team (task text `task`, run params `params`) until its task
/// waits with `question`, answers `answer`, and runs it to the end; returns (run id, status).
pub fn ask_and_answer(
    d: &Daemon,
    stub: &Stub,
    params: Value,
    task: &str,
    question: &str,
    answer: &str,
) -> (String, Value) {
    one_step_team(d, "asker", task, "executor");
    let mut p = json!({"team": "asker"});
    if let (Some(p), Some(extra)) = (p.as_object_mut(), params.as_object()) {
        p.extend(extra.clone());
    }
    let run = d.run("choose storage", p);
    let wait_for = |want: &str| {
        let status = d.wait(&run);
        let st = d.status(&run);
        assert_eq!(
            status,
            want,
            "{st:#}\nstub: {:#?}\nlog:\n{}",
            stub.exchanges(),
            tail(&d.log_text(), 4000)
        );
        st
    };
    let st = wait_for("blocked");
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["status"], "waiting", "{st:#}");
    assert_eq!(t["question"], question, "{st:#}");
    d.ok(
        "team.respond",
        json!({"runId": run, "taskId": "01_only", "message": answer}),
    );
    let st = wait_for("completed");
    (run, st)
}

/// A crewd whose `gemini` runtime is the real Gemini CLI pointed at `stub`, with `settings`
/// (`general.maxAttempts`, …) in the workers' `~/.gemini/settings.json` beside API-key auth.
pub fn gemini_daemon(
    stub: &Stub,
    extra_config: &str,
    settings: serde_json::Value,
) -> Option<Daemon> {
    let gemini = agent_bin("gemini")?;
    let env = vec![
        ("GOOGLE_GEMINI_BASE_URL".to_string(), stub.base_url()),
        (
            "GEMINI_API_KEY".to_string(),
            "stub-key-not-secret".to_string(),
        ),
    ];
    let config = format!(
        "{extra_config}no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.gemini]\nadapter = \"gemini\"\ncommand = [{gemini:?}]\n\
         env = [\"GEMINI_API_KEY\", \"GOOGLE_GEMINI_BASE_URL\"]\n",
        gemini = gemini.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    // Workers get the daemon's HOME: choose API-key auth there (with a base URL alone, Gemini
    // CLI picks a gateway auth that its headless mode refuses).
    let dir = d.home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let mut all = json!({"security": {"auth": {"selectedType": "gemini-api-key"}}});
    for (k, v) in settings.as_object().unwrap() {
        all[k] = v.clone();
    }
    std::fs::write(dir.join("settings.json"), all.to_string()).unwrap();
    Some(d)
}

/// The steer tests' stub: the requests numbered in `held` are answered only once the test lets
/// each go ([`Held::steer`]), so a steer comes while that model call is out. Request 1 gets
/// the reply `first` makes (the tool call each test starts with); every later one answers
/// `FINAL-<n>: the README greets, as steered.`
pub struct Held {
    pub stub: Stub,
    seen: std::sync::mpsc::Receiver<u64>,
    go: std::sync::mpsc::Sender<()>,
}

impl Held {
    pub fn start(
        wire: Wire,
        held: Vec<u64>,
        first: impl Fn() -> Reply + Send + Sync + 'static,
    ) -> Held {
        let (seen_tx, seen) = std::sync::mpsc::channel::<u64>();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let (seen_tx, go_rx) = (std::sync::Mutex::new(seen_tx), std::sync::Mutex::new(go_rx));
        let stub = Stub::start(wire, move |e: &Exchange| {
            if held.contains(&e.n) {
                let _ = seen_tx.lock().unwrap().send(e.n);
                // Bounded, so a test that fails elsewhere still ends.
                let _ = go_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(std::time::Duration::from_secs(90));
            }
            if e.n == 1 {
                first()
            } else {
                Reply::Text(format!("FINAL-{}: the README greets, as steered.", e.n))
            }
        });
        Held { stub, seen, go }
    }

    /// For each `(n, message)` of `steers`: once request `n` arrived, steer task `01_only` of
    /// `run_id` with `message` (it must go live, with no note), and let the request go once
    /// crew wrote the steer to the worker's stdin. `cli` names the agent in a failure.
    pub fn steer(&self, d: &Daemon, run_id: &str, cli: &str, steers: &[(u64, &str)]) {
        for (i, (n, message)) in steers.iter().enumerate() {
            let got = self
                .seen
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| {
                    panic!(
                        "{cli} made no model request {n}: {:#}\n{}",
                        d.status(run_id),
                        tail(&d.log_text(), 6000)
                    )
                });
            assert_eq!(got, *n);
            let r = d.ok(
                "team.steer",
                json!({"runId": run_id, "taskId": "01_only", "message": message}),
            );
            assert_eq!(r["delivered"], "live", "steer {i}: {r}");
            assert_eq!(r.get("note"), None, "steer {i}: {r}");
            // On the worker's stdin before the held answer is let go.
            d.wait_log_n("steer written to the worker", i + 1);
            self.go.send(()).unwrap();
        }
    }
}

/// Waits for `run_id`, which must complete with the stub having seen nothing wrong; returns
/// its `team.status`.
pub fn wait_completed(d: &Daemon, run_id: &str, stub: &Stub) -> Value {
    let status = d.wait(run_id);
    let st = d.status(run_id);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\n{}",
        stub.errors(),
        tail(&d.log_text(), 6000)
    );
    assert!(stub.errors().is_empty(), "{:?}", stub.errors());
    st
}

/// The result of a one-step run's task `01_only`.
pub fn only_result(d: &Daemon, run_id: &str) -> String {
    d.ok(
        "team.artifact",
        json!({"runId": run_id, "name": "results/01_only.txt"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string()
}
