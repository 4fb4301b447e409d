//! Issue 6 benchmark (not a test: it prints figures).
//!
//! 1. `team.status` latency of an evicted run (cold: rebuilt from its journaled events) against
//!    a resident one (hot), as a ratio, both measured in this run, alternating samples. Measured
//!    on a fresh daemon and again once it holds every run.
//! 2. crewd's RSS with `--runs` finished runs (default 100,000) under the default residency
//!    bound (target < 200 MB). Runs are real: a one-task project team on a `command` runtime
//!    (`/bin/echo`), driven by `--clients` threads that each start a run and wait for it.
//!    Then the daemon is restarted and its start time and RSS are measured again.
//!
//! The state directory lives in `/dev/shm` unless `--disk` is given: each run syncs several
//! artifact files, and on a disk those fsyncs, not crewd, bound how fast 100,000 runs can be
//! made (about 100 runs/s on the 2-core dev VM). tmpfs pages are not in crewd's RSS. Expect
//! ~3 GB of tmpfs for 100,000 runs while the bench runs (removed at the end).
//!
//! `CREW_BENCH_CONFIG` (TOML lines) is appended to the daemon's config, for experiments such
//! as `journal_cache_mb = 16` or `snapshot_every = 1000000000`.
//!
//! `cargo bench -p crewd --bench caches -- [--runs N] [--clients N] [--samples N] [--disk]`

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const RSS_TARGET_MB: f64 = 200.0;

struct Args {
    runs: usize,
    clients: usize,
    samples: usize,
    disk: bool,
}

/// The bench's directory and daemon, cleaned up by `fail` too (exit skips destructors, and a
/// tmpfs directory left behind holds gigabytes of memory).
static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
static DAEMON_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("bench caches: {msg}");
    let pid = DAEMON_PID.load(Ordering::Relaxed);
    if pid != 0 {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    if let Some(root) = ROOT.get() {
        if let Ok(log) = std::fs::read_to_string(root.join("crewd.log")) {
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            eprintln!("crewd log (last lines):");
            for l in tail.iter().rev() {
                eprintln!("  {l}");
            }
        }
        let _ = std::fs::remove_dir_all(root);
    }
    std::process::exit(1)
}

fn parse_args() -> Args {
    let mut a = Args {
        runs: 100_000,
        clients: 48,
        samples: 200,
        disk: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let slot = match flag.as_str() {
            "--disk" => {
                a.disk = true;
                continue;
            }
            "--runs" => &mut a.runs,
            "--clients" => &mut a.clients,
            "--samples" => &mut a.samples,
            // cargo bench passes `--bench`; libtest-style filters are ignored too.
            _ => continue,
        };
        *slot = it
            .next()
            .and_then(|v| v.replace('_', "").parse().ok())
            .filter(|v| *v > 0)
            .unwrap_or_else(|| fail(format!("{flag} needs a positive number")));
    }
    a
}

struct Daemon {
    root: PathBuf,
    socket: PathBuf,
    work: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    fn start(root: &Path, config: &str) -> Daemon {
        let home = root.join("home");
        let work = root.join("work");
        for d in [&home.join(".config"), &work] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| fail(e));
        }
        std::fs::write(root.join("config.toml"), config).unwrap_or_else(|e| fail(e));
        let mut d = Daemon {
            root: root.to_path_buf(),
            socket: root.join("run/crewd.sock"),
            work,
            child: None,
        };
        d.spawn();
        d
    }

    /// Start crewd and wait until it answers; how long that took.
    fn spawn(&mut self) -> Duration {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("crewd.log"))
            .unwrap_or_else(|e| fail(e));
        let home = self.root.join("home");
        let t = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_crewd"))
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(self.root.join("state"))
            .arg("--config")
            .arg(self.root.join("config.toml"))
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("CREW_LOG", "warn")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("LISTEN_FDS")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap_or_else(|e| fail(e)))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| fail(format!("cannot start crewd: {e}")));
        DAEMON_PID.store(child.id(), Ordering::Relaxed);
        self.child = Some(child);
        loop {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                fail(format!(
                    "crewd exited with {st}; see {}",
                    self.root.display()
                ));
            }
            if self.try_call("daemon.ping", json!({})).is_ok() {
                return t.elapsed();
            }
            if t.elapsed() > Duration::from_secs(300) {
                fail("crewd did not answer within 300s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// SIGTERM and wait: a clean stop.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
    }

    fn rss_mb(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    }

    fn try_call(&self, method: &str, params: Value) -> Result<Value, String> {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let text = post(&self.socket, &body).map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        match v.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(format!("{method}: {v}")),
        }
    }

    fn call(&self, method: &str, params: Value) -> Value {
        self.try_call(method, params).unwrap_or_else(|e| fail(e))
    }

    fn project_file(&self, rel: &str, content: &str) {
        let p = self.work.join(".crew").join(rel);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(e));
        }
        std::fs::write(p, content).unwrap_or_else(|e| fail(e));
    }

    /// Start a one-task run and wait for it; its id.
    fn one_run(&self, n: usize) -> String {
        let started = self.call(
            "team.run",
            json!({"goal": format!("bench run {n}"), "cwd": self.work.display().to_string(), "team": "one"}),
        );
        let id = started["runId"].as_str().unwrap_or_default().to_string();
        let r = self.call("team.wait", json!({"runId": id, "timeoutMs": 600_000}));
        if r["status"] != "completed" {
            fail(format!(
                "run {id} ended {r}: {}",
                self.call("team.status", json!({"runId": id}))
            ));
        }
        id
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

/// One HTTP POST over the Unix socket; the body of the answer.
fn post(socket: &Path, body: &str) -> std::io::Result<String> {
    crew_testkit::post(socket, body.as_bytes(), Duration::from_secs(900)).map(|r| r.body)
}

struct Latency {
    hot: Vec<Duration>,
    cold: Vec<Duration>,
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn mean(v: &[Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.iter().sum::<Duration>() / v.len() as u32
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Alternate hot and cold `team.status` calls on `run`; cold = just evicted with
/// `cache.invalidate {runId}`. Every answer is checked against the first one.
fn hot_vs_cold(d: &Daemon, run: &str, samples: usize) -> Latency {
    let status = |_: ()| d.call("team.status", json!({"runId": run}));
    let want = status(());
    let stats_before = d.call("cache.stats", json!({}))["runs"].clone();
    let mut l = Latency {
        hot: Vec::with_capacity(samples),
        cold: Vec::with_capacity(samples),
    };
    for _ in 0..samples {
        // Resident (it was just read).
        let t = Instant::now();
        let got = status(());
        l.hot.push(t.elapsed());
        if got != want {
            fail("a resident run answered differently");
        }
        d.call("cache.invalidate", json!({"runId": run}));
        let t = Instant::now();
        let got = status(());
        l.cold.push(t.elapsed());
        if got != want {
            fail("an evicted run answered differently once loaded");
        }
    }
    let stats = d.call("cache.stats", json!({}))["runs"].clone();
    let misses =
        stats["misses"].as_u64().unwrap_or(0) - stats_before["misses"].as_u64().unwrap_or(0);
    if misses != samples as u64 {
        fail(format!(
            "expected {samples} cold loads, the run cache counted {misses}"
        ));
    }
    l
}

fn report_latency(label: &str, mut l: Latency) {
    let (hm, cm) = (mean(&l.hot), mean(&l.cold));
    let (h50, c50) = (median(&mut l.hot), median(&mut l.cold));
    println!(
        "team.status {label}: hot median {} (mean {}), cold median {} (mean {}); cold/hot = {:.2}x median, {:.2}x mean",
        ms(h50),
        ms(hm),
        ms(c50),
        ms(cm),
        c50.as_secs_f64() / h50.as_secs_f64().max(1e-9),
        cm.as_secs_f64() / hm.as_secs_f64().max(1e-9),
    );
}

fn main() {
    let args = parse_args();
    let shm = Path::new("/dev/shm");
    let mut builder = tempfile::Builder::new();
    builder.prefix("crew-bench-caches");
    let root = if !args.disk && shm.is_dir() {
        builder.tempdir_in(shm)
    } else {
        builder.tempdir()
    }
    .unwrap_or_else(|e| fail(e));
    let _ = ROOT.set(root.path().to_path_buf());
    // Default residency bound; enough workers and per-run slots for the client threads.
    let extra = std::env::var("CREW_BENCH_CONFIG").unwrap_or_default();
    let config = format!(
        "default_runtime = \"echo\"\nmax_workers = {}\n{extra}\n\n[runtimes.echo]\nadapter = \"command\"\ncommand = \"/bin/echo\"\n",
        args.clients
    );
    if !extra.is_empty() {
        println!("extra config: {extra}");
    }
    let mut d = Daemon::start(root.path(), &config);
    d.project_file(
        "teams/one.team.md",
        "---\nname: one\ndefaultWorkflow: one\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/one.workflow.md",
        "---\nname: one\n---\n\n## only\nrole: explorer\n\nSay {goal}.\n",
    );
    let capacity = d.call("cache.stats", json!({}))["runs"]["capacity"].clone();
    println!(
        "crewd {} (pid {}), state in {}, resident_runs = {capacity}, {} runs by {} clients, {} latency samples; load {}",
        env!("CARGO_BIN_EXE_crewd"),
        d.pid(),
        root.path().display(),
        args.runs,
        args.clients,
        args.samples,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    let rss_empty = d.rss_mb();

    let probe = d.one_run(0);
    report_latency(
        "(fresh daemon, 1 run)",
        hot_vs_cold(&d, &probe, args.samples),
    );

    let next = AtomicUsize::new(1);
    let done = AtomicUsize::new(1);
    let t = Instant::now();
    let total = args.runs;
    std::thread::scope(|s| {
        for _ in 0..args.clients {
            s.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                d.one_run(n);
                let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                if k.is_multiple_of(10_000) {
                    println!(
                        "  {k} runs finished, {:.0} runs/s, RSS {:.1} MB",
                        k as f64 / t.elapsed().as_secs_f64(),
                        d.rss_mb()
                    );
                }
            });
        }
    });
    let took = t.elapsed();
    let st = d.call("daemon.status", json!({}));
    let runs = d.call("cache.stats", json!({}))["runs"].clone();
    let rss_full = d.rss_mb();
    println!(
        "{total} runs finished in {:.1}s ({:.0} runs/s); daemon.status runs {}; cache.stats.runs {}",
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64(),
        st["runs"],
        runs
    );
    if st["runs"]["total"] != json!(total) {
        fail(format!(
            "expected {total} runs, daemon.status says {}",
            st["runs"]
        ));
    }
    println!(
        "RSS: {rss_empty:.1} MB empty, {rss_full:.1} MB with {total} finished runs (target < {RSS_TARGET_MB} MB): {}",
        if rss_full < RSS_TARGET_MB { "OK" } else { "OVER" }
    );
    report_latency(
        &format!("({total} runs, oldest run)"),
        hot_vs_cold(&d, &probe, args.samples),
    );

    d.stop();
    let start = d.spawn();
    let rss_restarted = d.rss_mb();
    let st = d.call("daemon.status", json!({}));
    println!(
        "restart with {total} runs: ready in {:.2}s, RSS {rss_restarted:.1} MB, runs {}",
        start.as_secs_f64(),
        st["runs"]
    );
    // Any run activity settles residency: one more run, then RSS and residency again.
    d.one_run(total);
    let st = d.call("daemon.status", json!({}));
    println!(
        "after one more run: RSS {:.1} MB, runs {}",
        d.rss_mb(),
        st["runs"]
    );
    println!("state dir: {} MB", du_mb(&root.path().join("state")));
}

fn du_mb(p: &Path) -> String {
    Command::new("du")
        .args(["-sm"])
        .arg(p)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}
