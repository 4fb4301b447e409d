//! The crewd under soak: started, SIGKILLed and restarted on one state directory; and what /proc
//! says about it and its workers.

use crate::client;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub bin: PathBuf,
    pub root: PathBuf,
    pub socket: PathBuf,
    pub work: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

const CONFIG: &str = "max_workers = 4
max_attempts = 3
no_output_timeout_ms = 20000
task_timeout_ms = 60000
kill_grace_ms = 300
final_drain_ms = 300
final_drain_quiet_ms = 100
resident_runs = 16
snapshot_every = 300
";

/// One-step and two-step teams; the fake agent's directives come from the goal.
const FILES: &[(&str, &str)] = &[
    (
        "teams/solo.team.md",
        "---\nname: solo\ndefaultWorkflow: solo\n---\n\n- executor: agent=executor\n",
    ),
    (
        "workflows/solo.workflow.md",
        "---\nname: solo\n---\n\n## only\nrole: executor\n\nDo it: {goal}\n",
    ),
    (
        "teams/duo.team.md",
        "---\nname: duo\ndefaultWorkflow: duo\n---\n\n- executor: agent=executor\n",
    ),
    (
        "workflows/duo.workflow.md",
        "---\nname: duo\n---\n\n## first\nrole: executor\n\nStart: {goal}\n\n\
         ## second\nrole: executor\ndependsOn: first\n\nFinish: {goal}\n",
    ),
];

impl Daemon {
    pub fn new(bin: PathBuf, root: &Path) -> anyhow::Result<Daemon> {
        let home = root.join("home");
        let work = root.join("work");
        std::fs::create_dir_all(home.join(".config"))?;
        for (rel, content) in FILES {
            let p = work.join(".crew").join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(&work))?;
            std::fs::write(p, content)?;
        }
        std::fs::write(root.join("config.toml"), CONFIG)?;
        Ok(Daemon {
            bin,
            root: root.to_path_buf(),
            socket: root.join("run").join("crewd.sock"),
            work,
            log: root.join("crewd.log"),
            child: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Started and answering `daemon.ping`.
    pub async fn start(&mut self) -> anyhow::Result<Duration> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let home = self.root.join("home");
        let child = Command::new(&self.bin)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(self.root.join("state"))
            .arg("--config")
            .arg(self.root.join("config.toml"))
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("LISTEN_FDS")
            .env("CREW_LOG", "info,jsonrpsee=warn,sled=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                anyhow::bail!("crewd exited at start with {status}");
            }
            if client::call(&self.socket, "daemon.ping", json!({}))
                .await
                .is_ok()
            {
                return Ok(start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(60) {
                anyhow::bail!("crewd did not answer within 60 s of starting");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `Some(status)` when the daemon exited by itself.
    pub fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        c.try_wait().ok().flatten().map(|s| s.to_string())
    }

    pub fn rss_mb(&self) -> f64 {
        status_kb(self.pid(), "VmRSS:") / 1024.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn status_kb(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0)
}

/// Parent pid of a live, non-zombie process.
pub fn live_parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.next()?.parse().ok()
}

/// Whether `ancestor` is `pid` or one of its live ancestors. A worker runs under crew's init
/// (crew-box), so an agent is crewd's grandchild, not its child; the walk is bounded because
/// a parent chain read from /proc can change under us.
pub fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if p == ancestor {
            return true;
        }
        match live_parent(p) {
            Some(parent) if parent > 1 && parent != p => p = parent,
            _ => return false,
        }
    }
    false
}

/// Fake agents working in `work` (any process whose cwd is there and whose command names
/// crew-fake-agent).
pub fn workers_in(work: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == work)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("crew-fake-agent"))
                && live_parent(*pid).is_some()
        })
        .collect()
}
