//! Slurm through its client commands, for a cluster without slurmrestd (`interface = "cli"`):
//! `sbatch --parsable` (the script on stdin), `squeue --json`, `scancel`, and `sacct` for a job
//! the controller no longer knows (it needs accounting; without it such a job has vanished).
//!
//! Slurm 22.05's `squeue --json` ignores squeue's filters (`-j`, `-n`): it lists every job the
//! controller knows, and crew picks its own from the list. Its jobs have slurmrestd's v0.0.38
//! shape, read by the same `state::parse_job`.

use super::client::{JobRequest, SlurmError};
use super::state::{parse_job, JobInfo};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// One command may take at most this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest output read from a command (`squeue --json` of a big cluster is large).
const MAX_OUTPUT: usize = 64 << 20;

pub struct Cli {
    /// `SLURM_CONF` for the commands; `None`: theirs.
    conf: Option<PathBuf>,
}

impl Cli {
    pub fn new(conf: Option<PathBuf>) -> Cli {
        Cli { conf }
    }

    /// Run `program args`, `stdin` fed to it; its stdout. `env`: the command's whole
    /// environment (for sbatch, whose environment the job inherits); `None`: crewd's.
    async fn run(
        &self,
        program: &'static str,
        args: &[String],
        stdin: Option<&str>,
        env: Option<&[(String, String)]>,
    ) -> Result<String, SlurmError> {
        use tokio::io::AsyncWriteExt;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(env) = env {
            cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        }
        if let Some(conf) = &self.conf {
            cmd.env("SLURM_CONF", conf);
        }
        let err = |message: String| SlurmError::Command {
            program,
            transient: true,
            message,
        };
        let work = async {
            let mut child = cmd.spawn().map_err(|e| err(e.to_string()))?;
            if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
                pipe.write_all(text.as_bytes())
                    .await
                    .map_err(|e| err(e.to_string()))?;
            }
            child
                .wait_with_output()
                .await
                .map_err(|e| err(e.to_string()))
        };
        let out = tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .map_err(|_| err(format!("no answer in {}s", CALL_TIMEOUT.as_secs())))??;
        if !out.status.success() {
            let message = crew_core::redact::redact_str(
                String::from_utf8_lossy(&out.stderr[..out.stderr.len().min(600)]).trim(),
            );
            return Err(SlurmError::Command {
                program,
                transient: is_transient(&message),
                message,
            });
        }
        if out.stdout.len() > MAX_OUTPUT {
            return Err(err(format!("more than {MAX_OUTPUT} bytes of output")));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Submit; the job id.
    pub async fn submit(&self, job: &JobRequest) -> Result<u64, SlurmError> {
        let out = self
            .run(
                "sbatch",
                &sbatch_args(job),
                Some(&job.script),
                Some(&job.env),
            )
            .await?;
        // `--parsable`: `ID` or `ID;CLUSTER`.
        out.trim()
            .split(';')
            .next()
            .and_then(|id| id.parse::<u64>().ok())
            .filter(|id| *id > 0)
            .ok_or_else(|| SlurmError::Command {
                program: "sbatch",
                transient: false,
                message: format!("no job id in its answer `{}`", bound(out.trim())),
            })
    }

    /// Every job the controller knows.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, SlurmError> {
        let out = self
            .run(
                "squeue",
                &["--json".into(), "-t".into(), "all".into()],
                None,
                None,
            )
            .await?;
        let v: Value = serde_json::from_str(&out).map_err(|e| SlurmError::Command {
            program: "squeue",
            transient: true,
            message: format!("its --json output does not parse: {e}"),
        })?;
        Ok(v.get("jobs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(parse_job).collect())
            .unwrap_or_default())
    }

    /// One job: from the controller's list, else from accounting; `None` when neither knows it.
    pub async fn job(&self, id: u64) -> Result<Option<JobInfo>, SlurmError> {
        if let Some(j) = self.jobs().await?.into_iter().find(|j| j.job_id == id) {
            return Ok(Some(j));
        }
        let args: Vec<String> = [
            "-n",
            "-P",
            "-X",
            "-o",
            "JobID,JobName,State,ExitCode,NodeList",
            "-j",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([id.to_string()])
        .collect();
        match self.run("sacct", &args, None, None).await {
            Ok(out) => Ok(out.lines().find_map(parse_sacct).filter(|j| j.job_id == id)),
            // No accounting ("Slurm accounting storage is disabled"): the job is gone.
            Err(e) => {
                tracing::debug!(error = %e, job_id = id, "sacct does not know the job");
                Ok(None)
            }
        }
    }

    /// Cancel (SIGTERM, then SIGKILL after `KillWait`); a job Slurm no longer knows is
    /// cancelled already.
    pub async fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        match self.run("scancel", &[id.to_string()], None, None).await {
            Ok(_) => Ok(()),
            Err(SlurmError::Command { message, .. }) if message.contains("Invalid job id") => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// The controller is down or busy (worth another try), as opposed to a refusal.
fn is_transient(stderr: &str) -> bool {
    [
        "Unable to contact slurm controller",
        "Socket timed out",
        "Connection refused",
        "Resource temporarily unavailable",
        "slurm_load_jobs error: Unable",
    ]
    .iter()
    .any(|s| stderr.contains(s))
}

/// sbatch's options for `job` (the script comes on stdin, the environment is sbatch's own).
pub fn sbatch_args(job: &JobRequest) -> Vec<String> {
    let r = &job.resources;
    let mut a: Vec<String> = vec![
        "--parsable".into(),
        // A job whose node fails must not run its worker a second time behind crew's back.
        "--no-requeue".into(),
        format!("--job-name={}", job.name),
        format!("--comment={}", job.comment),
        format!("--chdir={}", job.cwd),
        format!("--output={}", job.stdout),
        format!("--error={}", job.stdout),
    ];
    if let Some(p) = &r.partition {
        a.push(format!("--partition={p}"));
    }
    if let Some(x) = &r.account {
        a.push(format!("--account={x}"));
    }
    if let Some(q) = &r.qos {
        a.push(format!("--qos={q}"));
    }
    if let Some(c) = r.cpus_per_task {
        a.push(format!("--cpus-per-task={c}"));
    }
    if let Some(m) = r.memory_mb {
        a.push(format!("--mem={m}M"));
    }
    if let Some(t) = r.time_limit_minutes {
        a.push(format!("--time={t}"));
    }
    a
}

/// One line of `sacct -n -P -X -o JobID,JobName,State,ExitCode,NodeList`: `5|crew-r-t-1|
/// CANCELLED by 0|0:15|n1` (the state's first word; the exit code as `code:signal`).
pub fn parse_sacct(line: &str) -> Option<JobInfo> {
    let mut f = line.split('|');
    let job_id = f.next()?.trim().parse().ok()?;
    let name = f.next()?.to_string();
    let state = f.next()?.split_whitespace().next()?.to_string();
    let (code, signal) = f.next()?.split_once(':')?;
    let (code, signal) = (code.parse::<i32>().ok()?, signal.parse::<i32>().ok()?);
    let nodes = f.next().unwrap_or("").trim();
    Some(JobInfo {
        job_id,
        name,
        state,
        exit_code: (signal == 0).then_some(code),
        signal: (signal != 0).then_some(signal),
        reason: String::new(),
        nodes: if nodes == "None assigned" {
            String::new()
        } else {
            nodes.to_string()
        },
        restarts: 0,
        // Not asked for: a job only accounting knows is followed by its journaled id, never
        // looked up by name.
        owner: Default::default(),
    })
}

fn bound(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacct_lines_parse_into_jobs() {
        let j = parse_sacct("5|crew-r-t-1|CANCELLED by 0|0:15|n1").unwrap();
        assert_eq!(
            (
                j.job_id,
                j.name.as_str(),
                j.state.as_str(),
                j.exit_code,
                j.signal,
                j.nodes.as_str()
            ),
            (5, "crew-r-t-1", "CANCELLED", None, Some(15), "n1")
        );
        let j = parse_sacct("7|x|FAILED|3:0|n2").unwrap();
        assert_eq!(
            (j.state.as_str(), j.exit_code, j.signal),
            ("FAILED", Some(3), None)
        );
        let j = parse_sacct("8|x|PENDING|0:0|None assigned").unwrap();
        assert_eq!(j.nodes, "");
        assert!(parse_sacct("8.batch|x|COMPLETED|0:0|n1").is_none());
        assert!(parse_sacct("").is_none());
        assert!(parse_sacct("9|x|TIMEOUT|zero|n1").is_none());
    }

    #[test]
    fn sbatch_gets_the_jobs_shape_and_never_requeues() {
        let job = JobRequest {
            name: "crew-r-t-1".into(),
            comment: "crew run r".into(),
            script: "#!/bin/sh\n".into(),
            cwd: "/s".into(),
            stdout: "/s/job.out".into(),
            resources: super::super::config::SlurmResources {
                partition: Some("crew".into()),
                memory_mb: Some(100),
                time_limit_minutes: Some(5),
                ..Default::default()
            },
            env: vec![],
        };
        let a = sbatch_args(&job);
        for want in [
            "--parsable",
            "--no-requeue",
            "--job-name=crew-r-t-1",
            "--partition=crew",
            "--mem=100M",
            "--time=5",
            "--output=/s/job.out",
        ] {
            assert!(a.iter().any(|x| x == want), "{want}: {a:?}");
        }
        assert!(!a.iter().any(|x| x.starts_with("--account")), "{a:?}");
    }
}
