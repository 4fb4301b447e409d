//! A real Slurm test cluster for the Slurm placement's tests (slurm.rs, real_pi_slurm.rs):
//! the one `CREW_SLURM_ENV` names (`.ci/run`, `make slurm-up`), else one started for the test
//! by `tests/slurm/start.sh` and stopped by PID when it ends.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running test cluster: its env file's settings, and whether this test started it.
pub struct Cluster {
    pub env: BTreeMap<String, String>,
    pub owned: Option<tempfile::TempDir>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.owned {
            let _ = Command::new("bash")
                .arg(repo_root().join("tests/slurm/stop.sh"))
                .arg(dir.path())
                .status();
        }
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_env(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.to_string(), v.trim_matches('\'').to_string()))
        })
        .collect()
}

/// The cluster: the one `CREW_SLURM_ENV` names, else one started for this test.
pub fn cluster(test: &str) -> Cluster {
    if let Some(env) = std::env::var_os("CREW_SLURM_ENV") {
        let env = read_env(Path::new(&env));
        assert!(
            env.contains_key("CREW_SLURM_URL"),
            "CREW_SLURM_ENV names no cluster's env file"
        );
        return Cluster { env, owned: None };
    }
    let dir = tempfile::Builder::new()
        .prefix("crew-slurm")
        .tempdir()
        .unwrap();
    let out = Command::new("bash")
        .arg(repo_root().join("tests/slurm/start.sh"))
        .arg(dir.path())
        .output()
        .unwrap();
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let _ = Command::new("bash")
            .arg(repo_root().join("tests/slurm/stop.sh"))
            .arg(dir.path())
            .status();
        // Never a silent pass: `make test` (tests/run.sh) and nextest's default filter leave
        // this binary out where Slurm is not installed and count it as skipped.
        panic!("{test}: the Slurm test cluster did not start: {why}");
    }
    let env = read_env(&dir.path().join("env"));
    Cluster {
        env,
        owned: Some(dir),
    }
}

impl Cluster {
    pub fn get(&self, k: &str) -> &str {
        self.env.get(k).map(String::as_str).unwrap_or("")
    }

    /// A Slurm client command (squeue, scancel, scontrol) against this cluster.
    pub fn cmd(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", self.get("SLURM_CONF"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every job of this run as (name, state, node list), from `squeue` (all states).
    pub fn jobs_of(&self, run: &str) -> Vec<(String, String, String)> {
        self.cmd("squeue", &["-h", "-t", "all", "-o", "%j|%T|%N"])
            .lines()
            .filter_map(|l| {
                let mut p = l.split('|');
                Some((
                    p.next()?.to_string(),
                    p.next()?.to_string(),
                    p.next()?.to_string(),
                ))
            })
            .filter(|(n, _, _)| n.starts_with(&format!("crew-{run}-")))
            .collect()
    }

    /// The `[slurm]` section of a daemon's config for this cluster, with a staging directory
    /// of its own under the cluster's directory (it goes with the cluster).
    pub fn slurm_config(&self) -> String {
        build_worker();
        let under = Path::new(self.get("CREW_SLURM_DIR")).join("staging");
        std::fs::create_dir_all(&under).unwrap();
        let staging = tempfile::Builder::new()
            .prefix("crew-staging")
            .tempdir_in(&under)
            .unwrap()
            .keep();
        format!(
            "[slurm]\nurl = {url:?}\napi_version = {api:?}\ntoken_command = {tok:?}\n\
             staging_dir = {staging:?}\nmax_workers = 32\npoll_ms = 200\npartition = {part:?}\n\
             cpus_per_task = 1\nmemory_mb = 100\ntime_limit_minutes = 5\n",
            url = self.get("CREW_SLURM_URL"),
            api = self.get("CREW_SLURM_API"),
            tok = self.get("CREW_SLURM_TOKEN_CMD"),
            staging = staging.display().to_string(),
            part = self.get("CREW_SLURM_PARTITION"),
        )
    }
}

impl Cluster {
    /// `slurm_config` for the client commands (`interface = "cli"`): no slurmrestd URL, no
    /// token; the commands find the cluster by its `slurm.conf`.
    pub fn slurm_config_cli(&self) -> String {
        self.slurm_config()
            .lines()
            .filter(|l| {
                !["url = ", "api_version = ", "token_command = "]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(|l| {
                if l == "[slurm]" {
                    format!(
                        "[slurm]\ninterface = \"cli\"\nconf = {:?}",
                        self.get("SLURM_CONF")
                    )
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    }
}

/// `crew-worker`, which the jobs run from next to crewd, and crew's init `crew-box` beside it
/// (the node's box): built now, so a test never runs an older one left in the target
/// directory. `CREW_TEST_WORKER_BUILT=1` says it was built
/// just before (a `cargo build` here waits on cargo's package-cache lock, which any other
/// build on the machine may hold for minutes).
pub fn build_worker() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if std::env::var_os("CREW_TEST_WORKER_BUILT").is_some() {
        return;
    }
    ONCE.call_once(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "crew-worker", "-p", "crew-box"])
            .status()
            .unwrap();
        assert!(
            status.success(),
            "cargo build -p crew-worker -p crew-box failed"
        );
    });
}
