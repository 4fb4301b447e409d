//! `crew-worker STAGING_DIR`: one attempt of a crew task on a cluster node.
//!
//! crewd prepared the staging directory (`crew_staging`): the start commit as a bundle, the
//! launch (token, start commit), the attempt as a `crew_attempt::WorkerSpec`, the rendered
//! prompt and the filtered environment. The worker checks the start commit out in the node's
//! scratch directory and runs the attempt there through `crew_attempt::run`, the same command,
//! spawn, supervision (watchdogs, final drain, live stdin) and outcome classification as a
//! local attempt: the staging directory is the attempt's run directory, so its transcript,
//! stderr log and result land there. The step's pre-step script runs first and the task's
//! checks after, and all three run in the box of a local attempt (`boxed`) where the node
//! can make one, as the staged `sandbox` mode says. What the attempt reports as it goes (progress, refused
//! tool calls, a live agent's answer) is appended to `notes.jsonl`; steer messages come from
//! `ctl/`. Then it commits what the agent changed, bundles the commit and writes the final
//! record, with the attempt's token and its classified result. SIGTERM (a cancel, a time
//! limit) stops the attempt as crewd's own stop would.
//!
//! It never depends on crewd: the staging format and the attempt crate are the whole contract.

mod ask;
mod boxed;
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
        .fmt_fields(crew_attempt::log::fields())
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CREW_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .without_time()
        .init();
    let staging = Staging::new(PathBuf::from(dir));
    // Every attempt's staging folder (`<staging_dir>/<run>/<task>.attempt-<n>`, their keys and
    // tokens) stays out of a box an agent's install folder would bring it into.
    crew_attempt::sandbox::keep_out(
        staging
            .dir
            .ancestors()
            .nth(2)
            .map(std::path::Path::to_path_buf)
            .into_iter()
            .chain([staging.dir.clone()])
            .collect(),
    );
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
            unboxed: None,
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

fn run(staging: &Staging, launch: &Launch, spec: WorkerSpec) -> Result<Final> {
    let root = scratch(launch);
    let result = (|| {
        let co = git::checkout(staging, launch, &root)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("start the runtime")?;
        let ran = rt.block_on(attempt(staging, launch, &co, &root, spec));
        let commit = match &ran.result {
            AttemptResult::Completed { .. } | AttemptResult::NeedsAttention { .. }
                if launch.commit =>
            {
                git::commit(staging, launch, &co.work)?
            }
            _ => None,
        };
        Ok(Final {
            version: crew_staging::VERSION,
            token: launch.token.clone(),
            result: Some(ran.result),
            terminated: ran.terminated,
            commit,
            host: String::new(),
            error: None,
            unboxed: ran.unboxed,
        })
    })();
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// What `attempt` ends with.
struct Ran {
    result: AttemptResult,
    /// SIGTERM came (a cancel, a time limit).
    terminated: bool,
    /// Why it ran unboxed under `sandbox = "auto"`.
    unboxed: Option<String>,
}

/// The attempt as a local one runs: the pre-step script, then the agent through
/// `crew_attempt::run`, then the task's checks (`crew_attempt::verify`, as crewd runs them
/// after a local attempt), each in the box the staged mode gives on this node; fed steer
/// messages from `ctl/` and stopped by SIGTERM.
async fn attempt(
    staging: &Staging,
    launch: &Launch,
    co: &git::Checkout,
    root: &Path,
    mut spec: WorkerSpec,
) -> Ran {
    // The node's paths: the staging directory is the attempt's run directory.
    spec.run_dir = staging.dir.clone();
    spec.cwd = co.work.display().to_string();
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
    let (result, unboxed) = boxed_attempt(staging, launch, co, root, spec, &port, &mut rx).await;
    ctl.abort();
    term.abort();
    Ran {
        result,
        terminated: terminated.load(std::sync::atomic::Ordering::SeqCst),
        unboxed,
    }
}

/// `attempt`'s three phases in the box `launch.sandbox` gives here; (result, why unboxed).
async fn boxed_attempt(
    staging: &Staging,
    launch: &Launch,
    co: &git::Checkout,
    root: &Path,
    mut spec: WorkerSpec,
    port: &Arc<dyn Port>,
    rx: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> (AttemptResult, Option<String>) {
    let sandbox_failed = |error: String| AttemptResult::Failed {
        usage: Default::default(),
        model: None,
        artifacts: Vec::new(),
        error,
        // Another node may be able to box it.
        retryable: true,
        reason: "sandbox".into(),
    };
    let boxer = match boxed::decide(&launch.sandbox) {
        Ok(boxed::Decision::Boxed(b)) => Some(b),
        Ok(boxed::Decision::Unboxed(None)) => None,
        Ok(boxed::Decision::Unboxed(Some(why))) => {
            // Said where the user sees it (a `task.warning`) and in the final record.
            let message = format!(
                "sandbox = \"auto\": the attempt runs unboxed on node {}: {why}",
                hostname()
            );
            port.warning(&spec.key, "sandbox".into(), message);
            return (unboxed(staging, launch, spec, port, rx).await, Some(why));
        }
        Err(e) => return (sandbox_failed(format!("{e} (node {})", hostname())), None),
    };
    let Some(boxer) = boxer else {
        return (unboxed(staging, launch, spec, port, rx).await, None);
    };
    // The pre-step script's and the checks' environment: the task's, before the agent's own
    // changes to it below.
    let env = crew_attempt::env::worker_env(&spec.env_passthrough, &[]);
    let commands = || -> Result<Box<dyn crew_attempt::spawn::Launcher>, String> {
        Ok(Box::new(boxed::Launcher {
            boxed: Some((
                boxer.clone(),
                boxed::commands(&launch.sandbox, co, launch.commit),
            )),
        }))
    };
    if let Err(ended) = pre_step(staging, launch, &mut spec, &env, &commands, port, rx).await {
        return (ended, None);
    }
    crew_attempt::sandbox::inside_box(spec.adapter, &mut spec.command, &mut spec.env_passthrough);
    let writes = crew_core::stream::edits_files(&spec.tools);
    // A writing agent's git objects go to a directory of the attempt's own, brought into the
    // scratch repository after it (each read back), as locally.
    let own = root.join("objects");
    let own = match writes.then(|| crew_attempt::sandbox::make_own_objects(&own)) {
        Some(Err(e)) => {
            return (
                sandbox_failed(format!("cannot make the attempt's object directory: {e}")),
                None,
            )
        }
        Some(Ok(())) => Some(own),
        None => None,
    };
    if let Some(home) = std::env::var_os("HOME") {
        if let Err(e) = crew_attempt::sandbox::make_agent_dirs(Path::new(&home), spec.adapter) {
            tracing::warn!(error = %e, "cannot make the agent's state directories for its box");
        }
    }
    let agent = boxed::Launcher {
        boxed: Some((
            boxer.clone(),
            boxed::agent(&spec, &launch.sandbox, co, own.as_deref(), &staging.dir),
        )),
    };
    let result = run_agent(&spec, &agent, port, rx).await;
    if let Some(dir) = own {
        let taken = crew_git::Git::default()
            .repo(&co.repo)
            .take_objects(&dir.join("objects"))
            .await;
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = taken {
            return (
                sandbox_failed(format!(
                    "cannot bring the attempt's git objects into the node's repository: {e}"
                )),
                None,
            );
        }
    }
    (
        check(result, launch, &spec, &env, &commands, rx).await,
        None,
    )
}

/// The three phases unboxed (`off`, or `auto` where the node cannot box).
async fn unboxed(
    staging: &Staging,
    launch: &Launch,
    mut spec: WorkerSpec,
    port: &Arc<dyn Port>,
    rx: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let env = crew_attempt::env::worker_env(&spec.env_passthrough, &[]);
    let commands = || -> Result<Box<dyn crew_attempt::spawn::Launcher>, String> {
        Ok(Box::new(boxed::Launcher { boxed: None }))
    };
    if let Err(ended) = pre_step(staging, launch, &mut spec, &env, &commands, port, rx).await {
        return ended;
    }
    let result = run_agent(&spec, &boxed::Launcher { boxed: None }, port, rx).await;
    check(result, launch, &spec, &env, &commands, rx).await
}

type Commands<'a> = dyn Fn() -> Result<Box<dyn crew_attempt::spawn::Launcher>, String> + Sync + 'a;

/// The step's pre-step script (`crew_attempt::pre_step`, as crewd runs a local one): its
/// output block goes into the prompt where crewd would have put it, and the staged prompt
/// file is written again with it (the agent may read its prompt from there; crewd takes it
/// back). `Err`: the attempt ends (the script failed, or the job was told to stop).
async fn pre_step(
    staging: &Staging,
    launch: &Launch,
    spec: &mut WorkerSpec,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    commands: &Commands<'_>,
    port: &Arc<dyn Port>,
    rx: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> Result<(), AttemptResult> {
    let Some(p) = &launch.pre_step else {
        return Ok(());
    };
    let launcher = commands().map_err(|e| AttemptResult::Failed {
        usage: Default::default(),
        model: None,
        artifacts: Vec::new(),
        error: e,
        retryable: true,
        reason: "sandbox".into(),
    })?;
    let place = crew_attempt::pre_step::Place {
        cwd: Path::new(&spec.cwd),
        env,
        grace: std::time::Duration::from_millis(launch.checks.grace_ms),
        launcher: launcher.as_ref(),
    };
    let block = crew_attempt::pre_step::run(&p.script, &place, port.as_ref(), &spec.key, rx)
        .await
        .map_err(|f| f.into_result(Default::default(), None, Vec::new()))?;
    let Some(block) = block else {
        return Ok(());
    };
    let at = if spec.prompt.is_char_boundary(p.at) {
        p.at
    } else {
        spec.prompt.len()
    };
    spec.prompt.insert_str(at, &block);
    let file = staging.dir.join(format!("prompts/{}.md", spec.key.task_id));
    crew_staging::write_atomic(&file, spec.prompt.as_bytes(), 0o600).map_err(|e| {
        AttemptResult::Failed {
            usage: Default::default(),
            model: None,
            artifacts: Vec::new(),
            error: format!("cannot write the prompt: {e}"),
            retryable: true,
            reason: "storage".into(),
        }
    })?;
    Ok(())
}

/// The agent through `crew_attempt::run`. No CLI session on a node: a remote agent cannot
/// ask (README says so).
async fn run_agent(
    spec: &WorkerSpec,
    launcher: &boxed::Launcher,
    port: &Arc<dyn Port>,
    rx: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let mut artifacts = Vec::new();
    // crew's ask tool, as locally; the session stays here (`ask`).
    let session = || ask::session(spec);
    let result = crew_attempt::run(spec, session, launcher, port, rx, &mut artifacts).await;
    ask::without_session(result)
}

/// The task's checks after a completed attempt, as crewd runs a local one's.
async fn check(
    result: AttemptResult,
    launch: &Launch,
    spec: &WorkerSpec,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    commands: &Commands<'_>,
    rx: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let checks = &launch.checks;
    match result {
        AttemptResult::Completed { .. } if !checks.commands.is_empty() => {
            let limits = crew_attempt::verify::Limits {
                timeout: std::time::Duration::from_millis(checks.timeout_ms),
                grace: std::time::Duration::from_millis(checks.grace_ms),
                output_bytes: usize::try_from(checks.output_bytes).unwrap_or(usize::MAX),
            };
            let checked = crew_attempt::verify::run_all(
                &checks.commands,
                Path::new(&spec.cwd),
                env,
                &limits,
                commands,
                rx,
                &spec.run_dir,
                &spec.key,
            )
            .await;
            let mut checked = checked;
            if checks.failure_completes {
                checked.rule_out();
            }
            crew_attempt::verify::settle(result, checked)
        }
        other => other,
    }
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
