//! One attempt as a Slurm job: stage, submit (or re-attach), follow, finish.

use super::client::{Client, JobRequest, SlurmError};
use super::state::{phase, Phase};
use super::SlurmConfig;
use crate::attempt::{AttemptSpec, Port, WorkerCtl};
use crate::placement::{JobLedger, LedgerError};
use crate::shared::Shared;
use crew_core::run::RemoteJob;
use crew_core::run::{ArtifactRef, AttemptResult};
use crew_core::stream::{self, LaunchSpec, StreamParser, WorkerEvent};
use crew_core::usage::Usage;
use crew_staging::{Launch, Staging};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

/// Transcripts keep at most this much, as local ones.
const TRANSCRIPT_MAX: usize = 16 << 20;
/// Slurm unreachable this long in a row ends the attempt (retryable); the job is left to run
/// out its time limit or be found again by recovery.
const UNREACHABLE_FOR: Duration = Duration::from_secs(300);
/// After a cancel, how long crew waits to see the job end before it reports anyway.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

fn failed(
    artifacts: Vec<ArtifactRef>,
    error: String,
    retryable: bool,
    reason: &str,
) -> AttemptResult {
    AttemptResult::Failed {
        usage: Usage::default(),
        model: None,
        artifacts,
        error,
        retryable,
        reason: reason.into(),
    }
}

/// Run `spec` as a Slurm job in the worktree at `start` (`spec.cwd`), or follow the job an
/// earlier crewd submitted for this very attempt.
pub async fn attempt(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    ledger: &Arc<dyn JobLedger>,
    spec: &AttemptSpec,
    start: &str,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let Some(cfg) = shared.config.slurm.clone() else {
        return failed(
            vec![],
            format!(
                "runtime `{}` is placed on Slurm but the config has no [slurm] section",
                spec.runtime_name
            ),
            false,
            "spawn",
        );
    };
    let client = super::client(&cfg);
    let mut artifacts = Vec::new();
    let staged = match stage(shared, &cfg, spec, start, &mut artifacts).await {
        Ok(s) => s,
        Err(e) => return failed(artifacts, e, true, "staging"),
    };
    let job_id = match submit_or_attach(
        &client,
        &cfg,
        ledger,
        spec,
        &staged.token,
        &staged.staging.dir,
    )
    .await
    {
        Ok(id) => id,
        Err(SubmitError::Slurm(e)) => {
            let retryable = e.is_transient();
            return failed(
                artifacts,
                format!("cannot submit the Slurm job: {e}"),
                retryable,
                "slurm_submit",
            );
        }
        Err(SubmitError::Ledger(LedgerError::Refused)) => {
            return failed(
                artifacts,
                "the attempt ended before its Slurm job was submitted".into(),
                false,
                "cancelled",
            )
        }
        Err(SubmitError::Ledger(LedgerError::Storage(e))) => {
            return failed(
                artifacts,
                format!("cannot journal the Slurm job: {e}"),
                true,
                "storage",
            )
        }
    };
    tracing::info!(job_id, staging = %staged.staging.dir.display(), "Slurm job submitted");
    let mut result = follow(
        shared,
        port,
        spec,
        &cfg,
        &client,
        job_id,
        staged,
        ctl,
        &mut artifacts,
    )
    .await;
    // Named files must be durable before the event naming them, as for local attempts.
    let run_dir = spec.run_dir.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || crate::artifacts::make_durable(&run_dir))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    {
        result = failed(
            vec![],
            format!("cannot make the task's files durable: {e}"),
            true,
            "storage",
        );
    }
    result
}

/// What `stage` made.
struct Staged {
    staging: Staging,
    token: String,
    parser: Box<dyn StreamParser>,
    rpc: bool,
    /// stdin batches written so far (the live start is the first).
    stdin_batches: u64,
}

/// The staging directory: input bundle, prompt files, launch, environment. Written again on
/// re-attach only where missing (the worker may be reading it).
async fn stage(
    shared: &Arc<Shared>,
    cfg: &SlurmConfig,
    spec: &AttemptSpec,
    start: &str,
    artifacts: &mut Vec<ArtifactRef>,
) -> Result<Staged, String> {
    let earlier = spec.job.as_ref();
    // Where the journal says, on re-attach (the config's directory may have changed since).
    let staging = Staging::new(match earlier {
        Some(j) => PathBuf::from(&j.staging),
        None => cfg
            .staging_dir
            .join(&spec.run_id)
            .join(format!("{}.attempt-{}", spec.task_id, spec.attempt)),
    });
    let prompt = {
        let spec_prompt = blocking(|| crate::executor::render_prompt(spec, None))
            .map_err(|e| format!("cannot render the prompt: {e}"))?;
        let name = format!("prompts/{}.md", spec.task_id);
        let a = blocking(|| {
            crate::artifacts::put(&spec.run_dir, &name, "prompt", spec_prompt.as_bytes())
        })
        .map_err(|e| format!("cannot write the prompt: {e}"))?;
        artifacts.push(a);
        spec_prompt
    };
    let rpc = spec.runtime.rpc();
    let launch_spec = LaunchSpec {
        command: spec.runtime.command.argv(),
        prompt: prompt.clone(),
        prompt_file: stream::prompt_through_file(
            spec.runtime.adapter,
            &prompt,
            spec.runtime.prompt_via,
        )
        .then(|| "{staging}/prompt.md".to_string()),
        system_prompt: spec.plan.system_prompt.to_string(),
        system_prompt_mode: spec.plan.system_prompt_mode,
        system_prompt_file: Some("{staging}/system.md".into()),
        model: spec.model.clone(),
        thinking: spec.plan.thinking.clone(),
        tools: spec.plan.tools.to_vec(),
        rpc,
        prompt_via: spec.runtime.prompt_via,
        effort: spec.plan.effort.clone(),
        fallback_models: spec.fallback_models.clone(),
        // Skills as files and the ask tool need paths on the node: not yet (README).
        skill_dirs: Vec::new(),
        session: Default::default(),
        cwd: "{workdir}".into(),
    };
    let launch = stream::build_launch(spec.runtime.adapter, &launch_spec);
    let mut parser = stream::attempt_parser(spec.runtime.adapter, &launch_spec, None);
    let first = parser.live_start(&prompt);
    let token = match earlier {
        Some(j) => j.token.clone(),
        None => format!("{:032x}", rand::random::<u128>()),
    };
    let record = Launch {
        version: crew_staging::VERSION,
        token: token.clone(),
        run_id: spec.run_id.clone(),
        task_id: spec.task_id.clone(),
        attempt: spec.attempt,
        start: start.to_string(),
        argv: launch.argv.clone(),
        stdin: match &launch.stdin {
            stream::StdinFrom::Null => crew_staging::Stdin::Null,
            stream::StdinFrom::Pipe => crew_staging::Stdin::Pipe,
            stream::StdinFrom::File(_) => crew_staging::Stdin::File("prompt.md".into()),
        },
        commit: spec.plan.writes,
        message: format!("crew: {} ({})", spec.task_id, spec.plan.role),
    };
    // The worker's environment: the daemon's through the allowlist, the runtime's own
    // variables, the adapter's. Without crew's process tags: a remote worker is not this
    // daemon's process, and recovery must not take it for one.
    let mut extra = shared.config.env_passthrough.clone();
    extra.extend(spec.runtime.env.iter().cloned());
    let mut env: crew_staging::Env =
        crew_core::worker_env::filter(std::env::vars_os(), &extra, &[])
            .into_iter()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
    env.extend(launch.env.iter().cloned());
    let system = spec.plan.system_prompt.to_string();
    let dir = staging.clone();
    let cwd = spec.cwd.clone();
    let fresh = earlier.is_none();
    let first_lines = first.clone();
    blocking(move || -> Result<(), String> {
        let e = |what: &str, err: &dyn std::fmt::Display| format!("{what}: {err}");
        if fresh {
            // A directory of an attempt whose job was never journaled, so never submitted
            // (the intent comes first): start it over.
            let _ = std::fs::remove_dir_all(&dir.dir);
        }
        dir.create()
            .map_err(|x| e("cannot create the staging directory", &x))?;
        if !dir.launch().exists() {
            bundle(&cwd, &dir.input_bundle())
                .map_err(|x| e("cannot bundle the start commit", &x))?;
            crew_staging::write_atomic(&dir.prompt(), prompt.as_bytes(), 0o600)
                .map_err(|x| e("prompt", &x))?;
            crew_staging::write_atomic(&dir.system_prompt(), system.as_bytes(), 0o600)
                .map_err(|x| e("system prompt", &x))?;
            crew_staging::write_json(&dir.env(), &env, 0o600).map_err(|x| e("environment", &x))?;
            if !first_lines.is_empty() {
                dir.put_stdin(1, &first_lines).map_err(|x| e("stdin", &x))?;
            }
            // Last: a launch means the directory is complete.
            crew_staging::write_json(&dir.launch(), &record, 0o600).map_err(|x| e("launch", &x))?;
        }
        Ok(())
    })?;
    let stdin_batches = if first.is_empty() { 0 } else { 1 };
    Ok(Staged {
        staging,
        token,
        parser,
        rpc,
        stdin_batches,
    })
}

/// `git bundle create OUT HEAD` in the task's worktree: the start commit and its history.
fn bundle(worktree: &str, out: &Path) -> std::io::Result<()> {
    let tmp = out.with_extension("bundle.tmp");
    let o = std::process::Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null", "bundle", "create", "-q"])
        .arg(&tmp)
        .arg("HEAD")
        .current_dir(worktree)
        .stdin(std::process::Stdio::null())
        .output()?;
    if !o.status.success() {
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&o.stderr).trim().to_string(),
        ));
    }
    std::fs::rename(tmp, out)
}

/// Why an attempt got no job.
enum SubmitError {
    Slurm(SlurmError),
    Ledger(LedgerError),
}

impl From<SlurmError> for SubmitError {
    fn from(e: SlurmError) -> Self {
        SubmitError::Slurm(e)
    }
}

/// The job for this attempt: the journaled one; else, when the journal holds only the intent
/// (a daemon killed between submitting and journaling the id), the one of its name; else a new
/// submission, its intent durable before it and its id journaled after.
async fn submit_or_attach(
    client: &Client,
    cfg: &SlurmConfig,
    ledger: &Arc<dyn JobLedger>,
    spec: &AttemptSpec,
    token: &str,
    staging: &Path,
) -> Result<u64, SubmitError> {
    let name = super::job_name(&spec.run_id, &spec.task_id, spec.attempt);
    let key = spec.key();
    match &spec.job {
        Some(RemoteJob { id: Some(id), .. }) => {
            tracing::info!(job_id = id, "re-attached to the attempt's Slurm job");
            return Ok(*id);
        }
        Some(_) => {
            let found = client.jobs_named(&name).await?;
            if let Some(j) = found.into_iter().max_by_key(|j| j.job_id) {
                tracing::info!(job_id = j.job_id, "found the attempt's Slurm job by name");
                record_id(client, ledger, &key, j.job_id).await?;
                return Ok(j.job_id);
            }
            // The intent is journaled and Slurm has no job of its name: never submitted.
        }
        None => {
            let intent = RemoteJob {
                attempt: spec.attempt,
                name: name.clone(),
                staging: staging.display().to_string(),
                token: token.to_string(),
                id: None,
            };
            ledger
                .submitting(&key, intent)
                .await
                .map_err(SubmitError::Ledger)?;
        }
    }
    let worker = cfg.worker.clone().unwrap_or_else(worker_path);
    let dir = staging.display().to_string();
    let req = JobRequest {
        name,
        comment: format!(
            "crew run {} task {} attempt {}",
            spec.run_id, spec.task_id, spec.attempt
        ),
        script: format!("#!/bin/sh\nexec {} {}\n", sh_quote(&worker), sh_quote(&dir)),
        cwd: dir.clone(),
        stdout: format!("{dir}/job.out"),
        resources: cfg.resources(spec.runtime.slurm.as_ref()),
        env: ["PATH", "HOME", "LANG", "USER"]
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .chain([("CREW_STAGING".to_string(), dir.clone())])
            .collect(),
    };
    let fault =
        |e: std::io::Error| SubmitError::Ledger(LedgerError::Storage(format!("injected: {e}")));
    crate::executor::fault::hit("slurm-submit").map_err(fault)?;
    let id = client.submit(&req).await?;
    // Tests kill the daemon here: submitted, the id not journaled.
    crate::executor::fault::hit("slurm-submitted").map_err(fault)?;
    record_id(client, ledger, &key, id).await?;
    Ok(id)
}

/// Journal the job's id. A refusal means the attempt ended meanwhile (cancelled): its job
/// goes too. A journal that cannot write keeps the event in memory; the job is followed.
async fn record_id(
    client: &Client,
    ledger: &Arc<dyn JobLedger>,
    key: &crate::attempt::AttemptKey,
    id: u64,
) -> Result<(), SubmitError> {
    match ledger.submitted(key, id).await {
        Ok(()) => Ok(()),
        Err(LedgerError::Refused) => {
            if let Err(e) = client.cancel(id).await {
                tracing::warn!(error = %e, job_id = id, "cannot cancel the Slurm job of an ended attempt");
            }
            Err(SubmitError::Ledger(LedgerError::Refused))
        }
        Err(LedgerError::Storage(e)) => {
            tracing::warn!(error = %e, job_id = id, "the Slurm job's id is not durable yet");
            Ok(())
        }
    }
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `crew-worker` next to the running crewd, else from PATH.
fn worker_path() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("crew-worker")))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "crew-worker".into())
}

/// The agent's stream as it arrives in the staging directory.
struct Stream {
    redactor: crew_core::redact::StreamRedactor,
    parser: Box<dyn StreamParser>,
    transcript: Vec<u8>,
    dropped: u64,
    offset: u64,
    partial: Vec<u8>,
    rpc: bool,
    answered: bool,
    tool: Option<String>,
    dirty: bool,
}

impl Stream {
    fn line(&mut self, raw: &str) -> bool {
        let line = self.redactor.line(raw);
        if self.transcript.len() + line.len() < TRANSCRIPT_MAX {
            self.transcript.extend_from_slice(line.as_bytes());
            self.transcript.push(b'\n');
        } else {
            self.dropped += 1;
        }
        let before = self.parser.usage();
        let mut finished = false;
        for ev in self.parser.feed_line(&line) {
            match &ev {
                WorkerEvent::ToolStart { name, .. } => self.tool = Some(name.clone()),
                WorkerEvent::ToolEnd { .. } => self.tool = None,
                _ => {}
            }
            if (self.rpc && matches!(ev, WorkerEvent::Finished)) || (!self.rpc && ev.is_final()) {
                finished = true;
            }
        }
        self.dirty |= self.parser.usage() != before;
        finished
    }

    /// Read what the worker appended since the last look; true when the agent's final answer
    /// came with it.
    async fn read_new(&mut self, path: &Path) -> bool {
        let Ok(mut f) = tokio::fs::File::open(path).await else {
            return false;
        };
        if f.seek(std::io::SeekFrom::Start(self.offset)).await.is_err() {
            return false;
        }
        let mut buf = Vec::new();
        let Ok(n) = f.take(8 << 20).read_to_end(&mut buf).await else {
            return false;
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let mut finished = false;
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            finished |= self.line(text.trim_end_matches('\r'));
        }
        finished
    }
}

#[allow(clippy::too_many_arguments)]
async fn follow(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    spec: &AttemptSpec,
    cfg: &SlurmConfig,
    client: &Client,
    job_id: u64,
    staged: Staged,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
    artifacts: &mut Vec<ArtifactRef>,
) -> AttemptResult {
    let Staged {
        staging,
        token,
        parser,
        rpc,
        mut stdin_batches,
    } = staged;
    let mut out = Stream {
        redactor: Default::default(),
        parser,
        transcript: Vec::new(),
        dropped: 0,
        offset: 0,
        partial: Vec::new(),
        rpc,
        answered: false,
        tool: None,
        dirty: false,
    };
    let poll = Duration::from_millis(cfg.poll_ms);
    let mut stopped: Option<String> = None;
    let mut cancel_at: Option<tokio::time::Instant> = None;
    let mut unreachable_since: Option<tokio::time::Instant> = None;
    let mut ctl_open = true;
    let ended = loop {
        tokio::select! {
            msg = ctl.recv(), if ctl_open => match msg {
                Some(WorkerCtl::Stop { reason }) => {
                    if stopped.is_none() {
                        tracing::info!(%reason, job_id, "cancelling the Slurm job");
                        if let Err(e) = client.cancel(job_id).await {
                            tracing::warn!(error = %e, job_id, "cannot cancel the Slurm job");
                        }
                        stopped = Some(reason);
                        cancel_at = Some(tokio::time::Instant::now());
                    }
                }
                Some(WorkerCtl::Steer(m)) => {
                    let lines = out.parser.live_steer(&m);
                    stdin_batches += 1;
                    if let Err(e) = blocking(|| staging.put_stdin(stdin_batches, &lines)) {
                        tracing::warn!(error = %e, "cannot hand the steer message to the worker");
                    }
                }
                None => ctl_open = false,
            },
            _ = tokio::time::sleep(poll) => {}
        }
        if out.read_new(&staging.stdout()).await && out.rpc && !out.answered {
            out.answered = true;
            port.answered(&spec.key());
            let _ = blocking(|| staging.close_stdin());
        }
        let replies = out.parser.live_replies();
        if !replies.is_empty() {
            stdin_batches += 1;
            let _ = blocking(|| staging.put_stdin(stdin_batches, &replies));
        }
        if out.dirty {
            out.dirty = false;
            port.progress(&spec.key(), out.parser.usage(), out.tool.clone());
        }
        match client.job(job_id).await {
            // Slurm forgets an ended job after `MinJobAge` (300 s by default): a job followed
            // again after a long outage may be gone though its worker finished. Its final
            // record, with this attempt's token, says so.
            Ok(None) if matches!(crew_staging::read_final(&staging, &token), Ok(Some(_))) => {
                break Phase::Ended;
            }
            Ok(job) => {
                unreachable_since = None;
                match phase(job.as_ref()) {
                    Phase::Queued | Phase::Running => {}
                    done => {
                        // A requeued job would run the attempt again: it goes.
                        if job.as_ref().is_some_and(|j| j.restarts > 0) {
                            if let Err(e) = client.cancel(job_id).await {
                                tracing::warn!(error = %e, job_id, "cannot cancel the requeued Slurm job");
                            }
                        }
                        break done;
                    }
                }
            }
            Err(e) => {
                let since = *unreachable_since.get_or_insert_with(tokio::time::Instant::now);
                tracing::warn!(error = %e, job_id, "cannot read the Slurm job's state");
                if since.elapsed() > UNREACHABLE_FOR {
                    break Phase::Failed {
                        error: format!("Slurm unreachable for {}s: {e}", UNREACHABLE_FOR.as_secs()),
                        retryable: true,
                        reason: "slurm_unreachable".into(),
                    };
                }
            }
        }
        if cancel_at.is_some_and(|t| t.elapsed() > CANCEL_WAIT) {
            break Phase::Failed {
                error: "the Slurm job did not end after its cancel".into(),
                retryable: false,
                reason: "cancelled".into(),
            };
        }
    };
    // What the worker wrote last.
    out.read_new(&staging.stdout()).await;
    if !out.partial.is_empty() {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut out.partial)).into_owned();
        out.line(&rest);
    }
    if out.dropped > 0 {
        let note = format!(
            "{{\"type\":\"crew.transcript_truncated\",\"droppedLines\":{}}}\n",
            out.dropped
        );
        out.transcript.extend_from_slice(note.as_bytes());
    }
    let name = format!(
        "transcripts/{}.attempt-{}.jsonl",
        spec.task_id, spec.attempt
    );
    match blocking(|| crate::artifacts::put(&spec.run_dir, &name, "transcript", &out.transcript)) {
        Ok(a) => artifacts.push(a),
        Err(e) => tracing::warn!(error = %e, "cannot write the transcript"),
    }
    let outcome = out.parser.outcome();
    let usage = outcome.usage;
    let model = outcome.model.clone();
    let named = artifacts.clone();
    let fail = |error: String, retryable: bool, reason: &str| AttemptResult::Failed {
        usage,
        model: model.clone(),
        artifacts: named.clone(),
        error,
        retryable,
        reason: reason.into(),
    };
    if let Some(reason) = stopped {
        return fail(reason, false, "cancelled");
    }
    if let Phase::Failed {
        error,
        retryable,
        reason,
    } = ended
    {
        return fail(error, retryable, &reason);
    }
    let fin = match crew_staging::read_final(&staging, &token) {
        Ok(Some(f)) => f,
        Ok(None) => {
            return fail(
                format!(
                "the Slurm job {job_id} ended without the worker's final record (see {}/job.out)",
                staging.dir.display()
            ),
                true,
                "worker",
            )
        }
        // Not this attempt's worker: refused, and nothing of it is taken.
        Err(e) => return fail(e, true, "stale_token"),
    };
    if let Some(e) = &fin.error {
        return fail(
            format!("crew-worker on {}: {}", fin.host, bound(e)),
            true,
            "worker",
        );
    }
    let Some(text) = outcome.final_text.clone() else {
        if let Some(err) = &outcome.error {
            let retryable = outcome
                .retryable
                .unwrap_or_else(|| stream::is_retryable_message(err));
            return fail(err.clone(), retryable, "model_error");
        }
        let stderr = tail_file(&staging.stderr());
        return match fin.exit_code {
            Some(0) => AttemptResult::NoFinalText {
                usage,
                model,
                artifacts: named.clone(),
            },
            _ => fail(
                format!(
                    "worker on {} exited with {}: {}",
                    fin.host,
                    fin.exit_code.map_or_else(
                        || format!("signal {}", fin.signal.unwrap_or(0)),
                        |c| c.to_string()
                    ),
                    stderr
                ),
                true,
                "exit",
            ),
        };
    };
    if let Some(commit) = &fin.result {
        if let Err(e) = take_result(shared, &spec.cwd, &staging.result_bundle(), commit).await {
            return fail(
                format!("cannot take the worker's result commit: {e}"),
                true,
                "workspace",
            );
        }
    }
    match blocking(|| {
        crate::executor::finish_result(&spec.run_dir, spec, text.as_bytes(), artifacts)
    }) {
        Ok(()) => AttemptResult::Completed {
            usage,
            model,
            artifacts: artifacts.clone(),
            reused_from: None,
            commit: None,
            verification: Vec::new(),
        },
        Err(e) => fail(format!("cannot write the result: {e}"), false, "storage"),
    }
}

/// The worker's commit, into the task's worktree as uncommitted changes on its start commit:
/// from here the attempt finishes as a local one (verification, commit, diffstat, patch).
async fn take_result(
    shared: &Shared,
    worktree: &str,
    bundle: &Path,
    commit: &str,
) -> Result<(), String> {
    let timeout = Duration::from_millis(shared.config.git_timeout_ms.max(1000));
    let b = bundle.display().to_string();
    git(
        worktree,
        &["fetch", "-q", &b, crew_staging::RESULT_REF],
        timeout,
    )
    .await?;
    let fetched = git(worktree, &["rev-parse", "FETCH_HEAD"], timeout).await?;
    if fetched.trim() != commit {
        return Err(format!(
            "the bundle holds {}, the final record names {commit}",
            fetched.trim()
        ));
    }
    git(worktree, &["read-tree", "-u", "--reset", commit], timeout).await?;
    Ok(())
}

async fn git(dir: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    let run = tokio::process::Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let o = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| format!("git {} timed out", args.join(" ")))?
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !o.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn bound(s: &str) -> String {
    let s = crew_core::redact::redact_str(s);
    match s.char_indices().nth(2000) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// The end of the worker's stderr file, redacted, for an error message.
fn tail_file(path: &PathBuf) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(2000);
    bound(String::from_utf8_lossy(&bytes[start..]).trim())
}

fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
