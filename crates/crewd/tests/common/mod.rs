//! Test harness: the real `crewd` binary on a temporary socket and state directory, driven
//! through its public API (HTTP and WebSocket), like a user would.
#![allow(dead_code)]

use crew_api::client::{call, CallError, ObjectParams};
use crew_api::Method;
use jsonrpsee::core::client::{Client, ClientBuilder, SubscriptionClientT};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

pub fn crewd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_crewd"))
}

/// `crew-fake-agent` lives next to `crewd` in the target directory; build it once if a plain
/// `cargo test -p crewd` did not.
pub fn ensure_fake_agent() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // And crew's init, `crew-box`, which crewd starts every local attempt under.
        let missing = ["crew-fake-agent", "crew-box"]
            .iter()
            .any(|b| !crewd_bin().with_file_name(b).exists());
        if missing {
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "crew-fake-agent", "-p", "crew-box"])
                .status()
                .expect("cargo build -p crew-fake-agent -p crew-box");
            assert!(
                status.success(),
                "building crew-fake-agent and crew-box failed"
            );
        }
    });
}

pub struct Daemon {
    pub dir: tempfile::TempDir,
    /// The crewd that `spawn` starts (the workspace's, unless a test put a copy elsewhere).
    pub bin: PathBuf,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub config: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    pub child: Option<Child>,
    pub log: PathBuf,
}

#[derive(Default)]
pub struct Opts {
    pub config: String,
    pub env: Vec<(String, String)>,
}

impl Daemon {
    pub fn start() -> Daemon {
        Self::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Daemon {
        ensure_fake_agent();
        let dir = tempfile::Builder::new()
            .prefix("crewd-test")
            .tempdir()
            .expect("tempdir");
        let root = dir.path().to_path_buf();
        let home = root.join("home");
        let work = root.join("work");
        for d in [&home, &work, &home.join(".config")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let config = root.join("config.toml");
        std::fs::write(&config, with_test_sandbox(&opts.config)).unwrap();
        let mut d = Daemon {
            // `CREW_TEST_CREWD` runs a test against another build (an older crewd, to see a
            // new test fail before its fix).
            bin: std::env::var_os("CREW_TEST_CREWD")
                .map(PathBuf::from)
                .unwrap_or_else(crewd_bin),
            socket: root.join("run").join("crewd.sock"),
            state_dir: root.join("state"),
            config,
            home,
            work,
            child: None,
            log: root.join("crewd.log"),
            dir,
        };
        d.spawn(&opts.env);
        d
    }

    pub fn spawn(&mut self, env: &[(String, String)]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .arg("--config")
            .arg(&self.config)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("LISTEN_FDS")
            .env("CREW_LOG", "debug,jsonrpsee=info,sled=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("spawn crewd"));
        self.wait_ready();
    }

    /// Ready = the socket answers `daemon.ping`.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("crewd exited early with {status}:\n{}", self.log_text());
                }
            }
            if self.socket.exists() {
                if let Ok(v) = self.try_http("daemon.ping", json!({})) {
                    if v.get("result").is_some() {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "crewd did not become ready:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Poll the daemon's log until it holds `needle` (a minute at most): for states the daemon
    /// only logs, such as a worker's stdin being closed.
    pub fn wait_log(&self, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !self.log_text().contains(needle) {
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon never logged {needle:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `wait_log` until the log holds `needle` `n` times.
    pub fn wait_log_n(&self, needle: &str, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.log_text().matches(needle).count() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon never logged {needle:?} {n} times:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        unsafe { libc_kill(c.id() as i32, 15) };
        c.wait().unwrap()
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn(&[]);
    }

    /// One HTTP POST over the Unix socket; the raw JSON-RPC response object.
    pub fn try_http(&self, method: &str, params: Value) -> std::io::Result<Value> {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let (status, text) = self.http_raw(&body)?;
        let _ = status;
        serde_json::from_str(&text).map_err(|e| std::io::Error::other(format!("{e}: {text}")))
    }

    pub fn http(&self, method: &str, params: Value) -> Value {
        self.try_http(method, params)
            .unwrap_or_else(|e| panic!("{method}: {e}\n{}", self.log_text()))
    }

    /// `result` of a call that must succeed.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        let v = self.http(method, params.clone());
        match v.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} {params} failed: {v}"),
        }
    }

    /// The error object of a call that must fail.
    pub fn err(&self, method: &str, params: Value) -> Value {
        let v = self.http(method, params.clone());
        match v.get("error") {
            Some(e) => e.clone(),
            None => panic!("{method} {params} should have failed: {v}"),
        }
    }

    /// Send raw bytes as an HTTP POST body; (status code, body).
    pub fn http_raw(&self, body: &str) -> std::io::Result<(u16, String)> {
        let r = crew_testkit::post(&self.socket, body.as_bytes(), Duration::from_secs(60))?;
        Ok((r.status, r.body))
    }

    pub async fn ws(&self) -> Client {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .expect("connect");
        let (tx, rx) = jsonrpsee::client_transport::ws::WsTransportClientBuilder::default()
            .build_with_stream(url::Url::parse("ws://localhost/").unwrap(), stream)
            .await
            .expect("ws handshake");
        ClientBuilder::default()
            .request_timeout(Duration::from_secs(120))
            .build_with_tokio(tx, rx)
    }

    pub async fn call<M: Method>(
        &self,
        client: &Client,
        params: M::Params,
    ) -> Result<M::Result, CallError> {
        call::<M>(client, &params).await
    }

    /// Start a run on the fake runtime in the work dir; returns the run id.
    pub fn run(&self, goal: &str, extra: Value) -> String {
        let mut p = json!({"goal": goal, "cwd": self.work.to_str().unwrap(), "runtime": "fake"});
        if let (Some(obj), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                obj.insert(k.clone(), v.clone());
            }
        }
        self.ok("team.run", p)["runId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Block until the run stops (finished or blocked); returns its status.
    /// Wait for the run to stop: `team.wait` in slices shorter than the HTTP read timeout
    /// (`http_raw`), up to 5 minutes in all (real agent CLIs on a loaded 2-core CI machine).
    pub fn wait(&self, run_id: &str) -> String {
        let until = std::time::Instant::now() + Duration::from_secs(300);
        loop {
            let r = self.ok("team.wait", json!({"runId": run_id, "timeoutMs": 20000}));
            if r["finished"] == true {
                return r["status"].as_str().unwrap().to_string();
            }
            assert!(
                std::time::Instant::now() < until,
                "run {run_id} did not stop in time: {}",
                self.status(run_id)
            );
        }
    }

    pub fn status(&self, run_id: &str) -> Value {
        self.ok("team.status", json!({"runId": run_id}))
    }

    pub fn task<'a>(status: &'a Value, id: &str) -> &'a Value {
        status["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap_or_else(|| panic!("no task {id}"))
    }

    /// The task ran a live worker (pi rpc, Claude Code stream-json), took its steer live, and
    /// ended by itself once crew closed its stdin after the last turn: exit 0, no final drain
    /// (which would have waited for quiet and sent SIGTERM), no process left.
    pub fn live_worker_ended_by_itself(&self, run_id: &str, task: &str) {
        let (pid, ended) = self.live_worker_ended(run_id, task);
        assert!(
            ended.contains("code=0") && ended.contains("drained=false"),
            "{ended}"
        );
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "worker {pid} is still there"
        );
    }

    /// The task ran a live worker, took its steer live, and its stdin was closed after the
    /// last turn; the worker's pid and the one log line that says how it ended.
    pub fn live_worker_ended(&self, run_id: &str, task: &str) -> (u64, String) {
        let evs = self.events(Some(run_id));
        let find = |kind: &str| -> &Value {
            evs.iter()
                .find(|e| e["type"] == kind && e["taskId"] == task)
                .unwrap_or_else(|| panic!("no {kind}: {evs:#?}"))
        };
        assert_eq!(find("task.steered")["data"]["delivered"], "live");
        let spawned = find("worker.spawned");
        assert_eq!(spawned["data"]["live"], true, "{spawned}");
        let pid = spawned["data"]["pid"].as_u64().unwrap();
        let log = self.log_text();
        assert!(
            log.contains("rpc worker finished; its stdin is closed so it exits"),
            "{log}"
        );
        let ended: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("worker ended") && l.contains(&format!("pid={pid}")))
            .collect();
        assert_eq!(ended.len(), 1, "{log}");
        (pid, ended[0].to_string())
    }

    /// Every event (optionally of one run), paging through `team.events`.
    pub fn events(&self, run_id: Option<&str>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut after = 0u64;
        loop {
            let mut p = json!({"afterSeq": after, "limit": 5000});
            if let Some(r) = run_id {
                p["runId"] = json!(r);
            }
            let r = self.ok("team.events", p);
            let evs = r["events"].as_array().unwrap().clone();
            if evs.is_empty() {
                return out;
            }
            after = r["nextSeq"].as_u64().unwrap();
            out.extend(evs);
        }
    }

    /// A file for the fake agent to read by path (`[fake:fanout=…]`, answers): under the
    /// daemon's `~/.cache`, which every boxed attempt sees (the rest of the test directory is
    /// not in the box).
    pub fn fixture_path(&self, name: &str) -> PathBuf {
        let dir = self.home.join(".cache/crew-test-fixtures");
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// Wait for crewd to die at a `kill` fault point (`CREW_TEST_FAULT=<point>:kill`): it must
    /// end by SIGKILL. The daemon is then down until `spawn`.
    pub fn wait_killed_at_fault(&mut self) {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.take().expect("running").wait().unwrap();
        assert_eq!(status.signal(), Some(9), "crewd was to die at the fault");
    }

    /// A user team `name` (trusted: its steps' verification commands run) whose roles are
    /// `roles` (`- role: agent=…` lines) and whose workflow `name` has the steps `steps`.
    pub fn user_team(&self, name: &str, roles: &str, steps: &str) {
        let base = self.home.join(".config/crew");
        for (rel, content) in [
            (
                format!("teams/{name}.team.md"),
                format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n{roles}"),
            ),
            (
                format!("workflows/{name}.workflow.md"),
                format!("---\nname: {name}\n---\n\n{steps}"),
            ),
        ] {
            let p = base.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, content).unwrap();
        }
    }

    /// Write a project resource file under the work dir's `.crew/`.
    pub fn project_file(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.work.join(".crew").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    pub async fn subscribe(
        &self,
        client: &Client,
        params: Value,
    ) -> jsonrpsee::core::client::Subscription<Value> {
        client
            .subscribe::<Value, _>("team.subscribe", ObjectParams(params), "team.unsubscribe")
            .await
            .expect("subscribe")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// A one-step workflow + team in the project for directive-driven tests: the step's task text
/// carries the directives.
pub fn one_step_team(d: &Daemon, name: &str, task: &str, agent: &str) {
    d.project_file(
        &format!("teams/{name}.team.md"),
        &format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- {agent}: agent={agent}\n"),
    );
    d.project_file(
        &format!("workflows/{name}.workflow.md"),
        &format!("---\nname: {name}\n---\n\n## only\nrole: {agent}\n\n{task}\n"),
    );
}

/// `CREW_TEST_SANDBOX` (`make test-nonroot` sets `required`, tests/as-user.sh): the `sandbox`
/// mode of a test daemon whose config names none. Under the default, `auto`, a box that cannot
/// be made runs the attempt unboxed and a real-agent test would pass without its box; under
/// `required` it fails.
fn with_test_sandbox(config: &str) -> String {
    let Some(mode) = std::env::var("CREW_TEST_SANDBOX")
        .ok()
        .filter(|m| !m.is_empty())
    else {
        return config.to_string();
    };
    let names_one = config.lines().any(|l| {
        l.trim_start()
            .strip_prefix("sandbox")
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    });
    if names_one {
        return config.to_string();
    }
    // Top-level keys come before the first table: the line goes first.
    format!("sandbox = {mode:?}\n{config}")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

impl Daemon {
    /// The error text of a `team.subscribe` that must be refused.
    pub async fn subscribe_err(&self, client: &Client, params: Value) -> String {
        match client
            .subscribe::<Value, _>("team.subscribe", ObjectParams(params), "team.unsubscribe")
            .await
        {
            Ok(_) => panic!("subscription should have been refused"),
            Err(e) => e.to_string(),
        }
    }
}

/// `git` in `dir` with a fixed identity; its stdout, trimmed. Fails the test when git does.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// The bundle checksum's text, as crewd's `bundle::canonical` makes it.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Number(n) if n.as_u64().is_none() && n.as_i64().is_none() => {
            out.push_str(&format!("{:.14e}", n.as_f64().unwrap()))
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let sorted: std::collections::BTreeMap<_, _> = map.iter().collect();
            out.push('{');
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Seal an edited bundle again, as a forger would (the checksum is no signature).
pub fn reseal(bundle: &mut Value) {
    use sha2::Digest;
    let obj = bundle.as_object_mut().unwrap();
    obj.remove("checksum");
    let mut text = String::new();
    canonical(&Value::Object(obj.clone()), &mut text);
    let sum = hex::encode(sha2::Sha256::digest(text.as_bytes()));
    obj.insert("checksum".into(), json!(sum));
}

/// A run's bundle as someone else would hand it over: exported, the run forgotten here,
/// `forge` applied, and sealed again.
pub fn forged_bundle(d: &Daemon, run: &str, forge: impl FnOnce(Value) -> Value) -> Value {
    let bundle = d.ok("team.export", json!({"runId": run}))["bundle"].clone();
    d.ok("team.forget", json!({"runId": run}));
    let mut forged = forge(bundle);
    reseal(&mut forged);
    forged
}

/// A bundle's `run.created` event.
pub fn run_created(bundle: &mut Value) -> &mut Value {
    bundle["events"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|e| e["type"] == "run.created")
        .unwrap()
}

/// `bundle` with `from` replaced by `to` wherever it occurs in its JSON text (`to` as JSON
/// text: a `/` may be written `\/`).
pub fn text_replaced(bundle: &Value, from: &str, to: &str) -> Value {
    let text = serde_json::to_string(bundle).unwrap().replace(from, to);
    serde_json::from_str(&text).unwrap()
}

/// Wait (60 s at most, looking every 20 ms) until `path` exists; `what` says what never came.
pub fn wait_for_file(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
