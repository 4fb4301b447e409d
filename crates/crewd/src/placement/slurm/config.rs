//! `[slurm]` in config.toml and a runtime's `[runtimes.NAME.slurm]` resources.

use crate::config::CommandSpec;
use crew_core::job_shape::JobShape;
use serde::Deserialize;
use std::path::PathBuf;

/// How crewd talks to Slurm.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    /// slurmrestd's REST API (JSON, JWT).
    #[default]
    Rest,
    /// The client commands (`sbatch`, `squeue`, `scancel`, `sacct`) on crewd's machine, for a
    /// cluster without slurmrestd.
    Cli,
}

/// The cluster: how to reach slurmrestd, who submits, where the staging directories live.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmConfig {
    /// `rest` (slurmrestd, the default) or `cli` (the client commands).
    #[serde(default)]
    pub interface: Interface,
    /// The client commands' `slurm.conf` (`SLURM_CONF`), `cli` only; default: theirs.
    #[serde(default)]
    pub conf: Option<PathBuf>,
    /// slurmrestd, `http://127.0.0.1:PORT` (loopback only: the token travels in a header and
    /// crew speaks no TLS; on a cluster crewd runs where slurmrestd does, or through a tunnel).
    /// Needed with `interface = "rest"` only.
    #[serde(default)]
    pub url: String,
    /// The OpenAPI version slurmrestd serves: `v0.0.38` for Debian 12's Slurm 22.05 (its
    /// newest), `v0.0.40`–`v0.0.42` for newer Slurm.
    #[serde(default = "default_api")]
    pub api_version: String,
    /// The Slurm user jobs are submitted as (`X-SLURM-USER-NAME`); default: the daemon's user.
    #[serde(default)]
    pub user: Option<String>,
    /// Prints a JWT (`scontrol token lifespan=3600`; a `SLURM_JWT=` prefix is taken off).
    /// Run again before the token expires.
    #[serde(default)]
    pub token_command: Option<CommandSpec>,
    /// Or a file holding the token (read again when it changes or is about to expire).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// On a filesystem the daemon and the nodes share: one private (0700) directory per
    /// attempt under it.
    pub staging_dir: PathBuf,
    /// The `crew-worker` program as the nodes see it; default: the one next to crewd.
    #[serde(default)]
    pub worker: Option<String>,
    /// Jobs of this daemon in the cluster at once (the local `max_workers` bounds local
    /// workers only).
    #[serde(default = "default_max_workers")]
    pub max_workers: usize,
    /// How often a running job's state and output are looked at.
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    /// Defaults for every Slurm runtime; a runtime's `[runtimes.NAME.slurm]` overrides them.
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub qos: Option<String>,
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    #[serde(default)]
    pub memory_mb: Option<u64>,
    #[serde(default)]
    pub time_limit_minutes: Option<u32>,
}

/// One runtime's job shape (`[runtimes.NAME.slurm]`), over `[slurm]`'s defaults.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlurmResources {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub cpus_per_task: Option<u32>,
    pub memory_mb: Option<u64>,
    pub time_limit_minutes: Option<u32>,
}

fn default_api() -> String {
    "v0.0.38".into()
}
fn default_max_workers() -> usize {
    64
}
fn default_poll_ms() -> u64 {
    500
}

impl SlurmResources {
    /// Its CPUs, memory and time limit: what a role or a step may override (issue 35).
    pub fn shape(&self) -> JobShape {
        JobShape {
            cpus_per_task: self.cpus_per_task,
            memory_mb: self.memory_mb,
            time_limit_minutes: self.time_limit_minutes,
        }
    }

    /// These resources with `shape`'s CPUs, memory and time limit.
    pub fn with_shape(self, shape: &JobShape) -> SlurmResources {
        SlurmResources {
            cpus_per_task: shape.cpus_per_task,
            memory_mb: shape.memory_mb,
            time_limit_minutes: shape.time_limit_minutes,
            ..self
        }
    }
}

impl SlurmConfig {
    /// The cluster's default CPUs, memory and time limit (`[slurm]`).
    pub fn shape(&self) -> JobShape {
        JobShape {
            cpus_per_task: self.cpus_per_task,
            memory_mb: self.memory_mb,
            time_limit_minutes: self.time_limit_minutes,
        }
    }

    /// A runtime's CPUs, memory and time limit over the cluster's: what a run freezes for it
    /// (`RunSpec::job_shapes`).
    pub fn runtime_shape(&self, rt: Option<&SlurmResources>) -> JobShape {
        rt.map(SlurmResources::shape)
            .unwrap_or_default()
            .over(&self.shape())
    }

    /// A runtime's resources: its own where set, else the cluster's defaults.
    pub fn resources(&self, rt: Option<&SlurmResources>) -> SlurmResources {
        let rt = rt.cloned().unwrap_or_default();
        SlurmResources {
            partition: rt.partition.or_else(|| self.partition.clone()),
            account: rt.account.or_else(|| self.account.clone()),
            qos: rt.qos.or_else(|| self.qos.clone()),
            cpus_per_task: rt.cpus_per_task.or(self.cpus_per_task),
            memory_mb: rt.memory_mb.or(self.memory_mb),
            time_limit_minutes: rt.time_limit_minutes.or(self.time_limit_minutes),
        }
    }

    /// What is wrong with it, for config.toml's error.
    pub fn problem(&self) -> Option<String> {
        if let Some(p) = self.shape().problem() {
            return Some(p);
        }
        if !self.staging_dir.is_absolute() {
            return Some("staging_dir must be an absolute path".into());
        }
        if self.max_workers == 0 {
            return Some("max_workers must be at least 1".into());
        }
        if self.poll_ms == 0 {
            return Some("poll_ms must be at least 1".into());
        }
        if self.interface == Interface::Cli {
            return None;
        }
        if self.conf.is_some() {
            return Some("conf is for interface = \"cli\" (the client commands)".into());
        }
        let Some(rest) = self.url.strip_prefix("http://") else {
            return Some("url must be http://127.0.0.1:PORT (crew speaks no TLS)".into());
        };
        let host = rest.split('/').next().unwrap_or("");
        match host.parse::<std::net::SocketAddr>() {
            Ok(a) if a.ip().is_loopback() => {}
            _ => {
                return Some(format!(
                    "url: `{host}` is not a loopback address and port; slurmrestd's token must \
                     not cross a network in clear (run crewd where slurmrestd runs, or tunnel it)"
                ))
            }
        }
        if !self
            .api_version
            .strip_prefix("v0.0.")
            .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n >= 38))
        {
            return Some(format!(
                "api_version `{}`: crew speaks v0.0.38 and later (v0.0.38, v0.0.40, ...)",
                self.api_version
            ));
        }
        if self.token_command.is_none() == self.token_file.is_none() {
            return Some("set exactly one of token_command and token_file".into());
        }
        None
    }
}
