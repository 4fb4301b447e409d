//! Shared by the daemon benches: the `crewd` built next to the bench binary, on a temporary
//! socket and state directory, driven by JSON-RPC over HTTP on its Unix socket (as a client
//! would), plus small timing and reporting helpers.
//!
//! Benches are programs, not tests: a broken precondition ends them with a message (`fail`).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Ends the bench with a message: benches report, they do not panic with a backtrace.
/// The child gets SIGKILL when the bench exits, however it exits (`fail` and `exit` skip the
/// destructors that would stop it): a daemon left running skews the next bench's figures.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl(2),
    // which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

pub fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("bench failed: {msg}");
    std::process::exit(2)
}

/// A binary built into the same target directory as this bench (`cargo build --release -p
/// crewd -p crew-fake-agent`).
pub fn sibling_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(format!("current_exe: {e}")));
    let path = exe
        .parent()
        .map(|d| d.join(name))
        .unwrap_or_else(|| fail("the bench binary has no directory"));
    if !path.exists() {
        fail(format!(
            "{} is missing: build it first (cargo build --release -p crewd -p crew-box -p crew-fake-agent -p crew-bench)",
            path.display()
        ));
    }
    path
}

/// Where bench files go: `$CREW_BENCH_DIR`, else the system temp dir. Raw baselines use the
/// same parent so they see the same disk as the daemon.
pub fn bench_root(prefix: &str) -> tempfile::TempDir {
    let parent = std::env::var_os("CREW_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&parent).unwrap_or_else(|e| fail(format!("{parent:?}: {e}")));
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)
        .unwrap_or_else(|e| fail(format!("tempdir in {parent:?}: {e}")))
}

pub struct Daemon {
    pub root: PathBuf,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub config: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// A daemon layout under `root` (nothing started yet).
    pub fn new(root: &Path, config: &str) -> Daemon {
        let d = Daemon {
            root: root.to_path_buf(),
            socket: root.join("run/crewd.sock"),
            state_dir: root.join("state"),
            config: root.join("config.toml"),
            home: root.join("home"),
            work: root.join("work"),
            log: root.join("crewd.log"),
            child: None,
        };
        for dir in [&d.home, &d.work, &d.home.join(".config")] {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(format!("{dir:?}: {e}")));
        }
        std::fs::write(&d.config, config).unwrap_or_else(|e| fail(format!("config: {e}")));
        d
    }

    /// Start and wait until `daemon.ping` answers.
    pub fn start(root: &Path, config: &str) -> Daemon {
        let mut d = Daemon::new(root, config);
        d.spawn();
        d
    }

    /// Spawn crewd; returns the time from spawn to the first successful `daemon.ping`.
    pub fn spawn(&mut self) -> Duration {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| fail(format!("log: {e}")));
        let err_log = log
            .try_clone()
            .unwrap_or_else(|e| fail(format!("log: {e}")));
        // crewd runs its attempts under crew's init only when it finds `crew-box` beside
        // itself; a bench without it would price a daemon no user runs.
        sibling_bin("crew-box");
        let mut cmd = Command::new(sibling_bin("crewd"));
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
            .env("CREW_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log);
        die_with_parent(&mut cmd);
        let t0 = Instant::now();
        self.child = Some(
            cmd.spawn()
                .unwrap_or_else(|e| fail(format!("spawn crewd: {e}"))),
        );
        let deadline = t0 + Duration::from_secs(120);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    fail(format!(
                        "crewd exited early with {status}:\n{}",
                        self.log_tail()
                    ));
                }
            }
            if let Ok(v) = self.try_call("daemon.ping", json!({})) {
                if v.get("result").is_some() {
                    return t0.elapsed();
                }
            }
            if Instant::now() > deadline {
                fail(format!(
                    "crewd did not answer in time:\n{}",
                    self.log_tail()
                ));
            }
            // Polling the socket is the measurement itself; 1 ms bounds its error.
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(3000);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..].to_string()
    }

    /// SIGTERM and wait: a clean stop (crewd writes a snapshot on the way out).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: plain kill(2) on the pid of a child we own and have not reaped.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let _ = c.wait();
        }
    }

    /// Resident set size of crewd, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }

    /// The raw JSON-RPC response object of one call.
    pub fn try_call(&self, method: &str, params: Value) -> std::io::Result<Value> {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let text = post(&self.socket, &body)?;
        serde_json::from_str(&text).map_err(|e| std::io::Error::other(format!("{e}: {text}")))
    }

    /// `result` of a call that must succeed.
    pub fn call(&self, method: &str, params: Value) -> Value {
        match self.try_call(method, params.clone()) {
            Ok(v) => match v.get("result") {
                Some(r) => r.clone(),
                None => fail(format!("{method} {params} failed: {v}")),
            },
            Err(e) => fail(format!("{method}: {e}\n{}", self.log_tail())),
        }
    }

    /// Every event of run `run_id`, page by page (`team.events`).
    pub fn events(&self, run_id: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut after = 0u64;
        loop {
            let page = self.call(
                "team.events",
                json!({"runId": run_id, "afterSeq": after, "limit": 5000}),
            );
            let evs = page["events"].as_array().cloned().unwrap_or_default();
            if evs.is_empty() {
                return events;
            }
            after = page["nextSeq"].as_u64().unwrap_or(u64::MAX);
            events.extend(evs);
        }
    }

    /// Block until the run stops; its status.
    pub fn wait(&self, run_id: &str) -> String {
        let r = self.call(
            "team.wait",
            json!({"runId": run_id, "timeoutMs": 3_600_000}),
        );
        if r["finished"] != true {
            fail(format!("run {run_id} did not finish: {r}"));
        }
        r["status"].as_str().unwrap_or_default().to_string()
    }

    /// Write `<work>/.crew/<rel>`.
    pub fn project_file(&self, rel: &str, content: &str) {
        let p = self.work.join(".crew").join(rel);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(format!("{dir:?}: {e}")));
        }
        std::fs::write(&p, content).unwrap_or_else(|e| fail(format!("{p:?}: {e}")));
    }

    /// A team `name` of one role whose workflow has `steps` independent steps, each running
    /// the task text `task(i)`.
    pub fn bulk_team(&self, name: &str, steps: usize, task: impl Fn(usize) -> String) {
        self.project_file(
            &format!("teams/{name}.team.md"),
            &format!(
                "---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- worker: agent=explorer\n"
            ),
        );
        let mut wf = format!("---\nname: {name}\ntopology: concurrent\n---\n");
        for i in 0..steps {
            wf.push_str(&format!(
                "\n## s{i:05}\nrole: worker\noutput: false\n\n{}\n",
                task(i)
            ));
        }
        self.project_file(&format!("workflows/{name}.workflow.md"), &wf);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `VmRSS` of a process in KiB (0 if it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One HTTP POST on the Unix socket (one connection per request); the response body.
pub fn post(socket: &Path, body: &str) -> std::io::Result<String> {
    crew_testkit::post(socket, body.as_bytes(), Duration::from_secs(600)).map(|r| r.body)
}

/// Time a closure.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t0 = Instant::now();
    let out = f();
    (out, t0.elapsed())
}

pub fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// `PASS`/`MISS` for a target line.
pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)` part, which may itself contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Duration::from_secs_f64((ticks(11) + ticks(12)) as f64 / hz)
}

/// An HTTP/1.1 keep-alive connection to the daemon's socket: many requests, one connection.
pub struct KeepAlive(crew_testkit::KeepAlive);

impl KeepAlive {
    pub fn connect(socket: &Path) -> std::io::Result<KeepAlive> {
        crew_testkit::KeepAlive::connect(socket, Duration::from_secs(600)).map(KeepAlive)
    }

    /// POST `body`; the response body.
    pub fn post(&mut self, body: &str) -> std::io::Result<String> {
        self.0.post(body.as_bytes()).map(|r| r.body)
    }
}
