//! `crew-worker STAGING_DIR`: one attempt of a crew task on a cluster node.
//!
//! crewd prepared the staging directory (`crew_staging`): the start commit as a bundle, the
//! launch (token, start commit), the attempt as a `crew_attempt::WorkerSpec`, the rendered
//! prompt and the filtered environment. The worker checks the start commit out in the node's
//! scratch directory and runs the attempt there through `crew_attempt::run`, the same command,
//! spawn, supervision (watchdogs, final drain, live stdin) and outcome classification as a
//! local attempt: the staging directory is the attempt's run directory, so its transcript,
//! stderr log and result land there. What the attempt reports as it goes (progress, refused
//! tool calls, a live agent's answer) is appended to `notes.jsonl`; steer messages come from
//! `ctl/`. Then it commits what the agent changed, bundles the commit and writes the final
//! record, with the attempt's token and its classified result. SIGTERM (a cancel, a time
//! limit) stops the attempt as crewd's own stop would.
//!
//! It never depends on crewd: the staging format and the attempt crate are the whole contract.

mod ask;
mod git;
mod notes;

use anyhow::{Context, Result};
use crew_attempt::port::{Port, WorkerCtl};
use crew_attempt::WorkerSpec;
use crew_core::run::AttemptResult;
use crew_staging::{Final, Launch, Staging};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: crew-worker STAGING_DIR");
        std::process::exit(2);
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CREW_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .without_time()
        .init();
    let staging = Staging::new(PathBuf::from(dir));
    let launch = match crew_staging::read_launch(&staging) {
        Ok(Some(l)) => l,
        Ok(None) => {
            eprintln!("crew-worker: {} has no launch.json", staging.dir.display());
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("crew-worker: {e}");
            std::process::exit(2);
        }
    };
    let host = hostname();
    let record = match prepare(&staging) {
        Ok(spec) => run(&staging, &launch, spec),
        Err(e) => Err(e),
    };
    let record = match record {
        Ok(mut f) => {
            f.host = host;
            f
        }
        Err(e) => Final {
            version: crew_staging::VERSION,
            token: launch.token.clone(),
            result: None,
            terminated: false,
            commit: None,
            host,
            error: Some(format!("{e:#}")),
        },
    };
    if let Err(e) = crew_staging::write_json(&staging.final_record(), &record, 0o600) {
        eprintln!("crew-worker: cannot write the final record: {e}");
        std::process::exit(1);
    }
}

/// The attempt's spec, and its environment made this process's own. Before any thread
/// exists: `crew_attempt` filters the process environment through the same allowlist crewd
/// used, so the agent sees what crewd's filter let through (API keys included), never the
/// job's own environment beyond it.
fn prepare(staging: &Staging) -> Result<WorkerSpec> {
    let spec: WorkerSpec = crew_staging::read_json(&staging.worker())?
        .with_context(|| format!("{} has no worker.json", staging.dir.display()))?;
    let env: crew_staging::Env = crew_staging::read_json(&staging.env())?.unwrap_or_default();
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    Ok(spec)
}

fn hostname() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_default()
}

/// The node's scratch directory for this attempt: `$TMPDIR` (Slurm sets it per job on many
/// clusters), else `/tmp`.
fn scratch(launch: &Launch) -> PathBuf {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(format!(
        "crew-worker-{}-{}-{}-{}",
        launch.run_id,
        launch.task_id,
        launch.attempt,
        std::process::id()
    ))
}

fn run(staging: &Staging, launch: &Launch, mut spec: WorkerSpec) -> Result<Final> {
    let root = scratch(launch);
    let work = root.join("work");
    let result = (|| {
        git::checkout(staging, launch, &work)?;
        // The node's paths: the staging directory is the attempt's run directory.
        spec.run_dir = staging.dir.clone();
        spec.cwd = work.display().to_string();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("start the runtime")?;
        let (result, terminated) = rt.block_on(attempt(staging, &spec, &launch.checks));
        let commit = match &result {
            AttemptResult::Completed { .. } | AttemptResult::NeedsAttention { .. }
                if launch.commit =>
            {
                git::commit(staging, launch, &work)?
            }
            _ => None,
        };
        Ok(Final {
            version: crew_staging::VERSION,
            token: launch.token.clone(),
            result: Some(result),
            terminated,
            commit,
            host: String::new(),
            error: None,
        })
    })();
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// Launches the agent as a local attempt does, without crew's process tags: a node may also
/// be crewd's own machine, whose recovery takes tagged processes for its own orphans.
struct Untagged;

impl crew_attempt::spawn::Launcher for Untagged {
    fn launch(
        &self,
        mut p: crew_attempt::command::Program,
    ) -> std::io::Result<crew_attempt::spawn::Launched> {
        use crew_attempt::process::{ENV_ATTEMPT, ENV_DAEMON_PID, ENV_RUN_ID, ENV_TASK_ID};
        p.env.retain(|(k, _)| {
            ![ENV_RUN_ID, ENV_TASK_ID, ENV_ATTEMPT, ENV_DAEMON_PID]
                .contains(&k.to_str().unwrap_or(""))
        });
        crew_attempt::spawn::Local.launch(p)
    }
}

/// The attempt through `crew_attempt::run`, then the task's checks (`crew_attempt::verify`,
/// as crewd runs them after a local attempt), fed steer messages from `ctl/` and stopped by
/// SIGTERM. (result, whether SIGTERM came).
async fn attempt(
    staging: &Staging,
    spec: &WorkerSpec,
    checks: &crew_staging::Checks,
) -> (AttemptResult, bool) {
    let port: Arc<dyn Port> = Arc::new(notes::Notes::open(&staging.notes()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let terminated = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ctl = tokio::spawn(feed_ctl(staging.ctl_dir(), tx.clone()));
    let term = {
        let terminated = terminated.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            terminated.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = tx.send(WorkerCtl::Stop {
                reason: "the Slurm job was told to stop (cancelled, or past its time limit)".into(),
            });
        })
    };
    let mut artifacts = Vec::new();
    // crew's ask tool, as locally; the session stays here (`ask`).
    let session = || ask::session(spec, staging);
    let result = crew_attempt::run(spec, session, &Untagged, &port, &mut rx, &mut artifacts).await;
    let result = ask::without_session(result);
    let result = match result {
        AttemptResult::Completed { .. } if !checks.commands.is_empty() => {
            let limits = crew_attempt::verify::Limits {
                timeout: std::time::Duration::from_millis(checks.timeout_ms),
                grace: std::time::Duration::from_millis(checks.grace_ms),
                output_bytes: usize::try_from(checks.output_bytes).unwrap_or(usize::MAX),
            };
            let env = crew_attempt::env::worker_env(&spec.env_passthrough, &[]);
            let launcher = || -> Result<Box<dyn crew_attempt::spawn::Launcher>, String> {
                Ok(Box::new(Untagged))
            };
            let checked = crew_attempt::verify::run_all(
                &checks.commands,
                Path::new(&spec.cwd),
                &env,
                &limits,
                &launcher,
                &mut rx,
                &spec.run_dir,
                &spec.key,
            )
            .await;
            crew_attempt::verify::settle(result, checked)
        }
        other => other,
    };
    ctl.abort();
    term.abort();
    (result, terminated.load(std::sync::atomic::Ordering::SeqCst))
}

/// Steer messages crewd writes to `ctl/`, in order, each once.
async fn feed_ctl(dir: PathBuf, tx: mpsc::UnboundedSender<WorkerCtl>) {
    let mut after = 0u64;
    loop {
        let names = list(&dir);
        for n in crew_staging::ctl_after(&names, after) {
            let path = dir.join(crew_staging::ctl_name(n));
            match crew_staging::read_json::<crew_staging::Ctl>(&path) {
                Ok(Some(crew_staging::Ctl::Steer { text })) => {
                    if tx.send(WorkerCtl::Steer(text)).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => tracing::warn!(error = %e, "an unreadable control message is skipped"),
            }
            after = n;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn list(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}
