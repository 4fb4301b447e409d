//! One attempt as a Slurm job: stage, submit (or re-attach), follow, finish.

use super::attempt_job::AttemptJob;
use super::client::{JobRequest, SlurmError};
use super::state::{phase, Phase};
use super::{Backend, SlurmConfig};
use crate::attempt::{AttemptKey, AttemptSpec, Port, WorkerCtl};
use crate::placement::{JobLedger, LedgerError};
use crate::shared::Shared;
use crew_core::run::RemoteJob;
use crew_core::run::{ArtifactRef, AttemptResult};
use crew_core::usage::Usage;
use crew_staging::{Launch, Note, Staging};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

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
    let client = super::backend(&cfg);
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
        &staged.staging.dir,
        &staged.tag,
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
    // Named files must be durable before the event naming them, as for local attempts. An
    // attempt that names none (its pre-step script failed on the node) has nothing to sync,
    // and the run's directory may not exist.
    if result.parts().2.is_empty() {
        return result;
    }
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
    /// The job's tag (`token::job_tag`), in its comment.
    tag: String,
}

/// The staging directory: input bundle, prompt, the attempt's `WorkerSpec`, launch and
/// environment. Written again on re-attach only where missing (the worker may be reading it).
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
    let prompt_name = format!("prompts/{}.md", spec.task_id);
    let key = {
        let state = shared.state_dir.clone();
        blocking(move || super::token::key(&state)).map_err(|e| e.to_string())?
    };
    // The pre-step script runs on the node (in its checkout, in its box): its block goes
    // between the two parts there, where a local attempt's goes.
    let (mut head, rest) = blocking(|| crate::executor::render_parts(spec))
        .map_err(|e| format!("cannot render the prompt: {e}"))?;
    // The session that asked stayed on its node: an answered task starts afresh, and its
    // prompt quotes the question beside the answer (after the `Answer:` lines that end the
    // first part).
    if !spec.answers.is_empty() {
        let asked = blocking(|| {
            earlier_questions(
                &key,
                &cfg.staging_dir,
                (&spec.run_id, &spec.task_id, spec.attempt),
                spec.answers.len(),
            )
        });
        head.push_str(&crew_core::prompt::asked_section(&asked));
    }
    let pre_step = spec
        .plan
        .checks
        .pre_step
        .clone()
        .map(|script| crew_staging::PreStepAt {
            script,
            at: head.len(),
        });
    let prompt = head + &rest;
    // The prompt is final here unless the node adds a pre-step script's block to it: then the
    // run keeps the node's, once, when it comes back (`take_prompt`), as a local attempt keeps
    // its prompt after its script ran.
    if spec.plan.checks.pre_step.is_none() {
        let kept = blocking(|| {
            keep_prompt(
                &spec.run_dir,
                &spec.task_id,
                spec.attempt,
                prompt.as_bytes(),
            )
        })
        .map_err(|e| format!("cannot write the prompt: {e}"))?;
        artifacts.extend(kept);
    }
    // The attempt as a local one would run it; the node puts its own paths in.
    let worker = crate::executor::worker_spec(&shared.config, spec, &prompt, false);
    // Derived, never journaled: the same again for the attempt a restarted daemon re-attaches.
    let token = super::token::derive(
        &key,
        &spec.run_id,
        &spec.task_id,
        spec.attempt,
        &staging.dir.display().to_string(),
    );
    let tag = super::token::job_tag(
        &key,
        &spec.run_id,
        &spec.task_id,
        spec.attempt,
        &staging.dir.display().to_string(),
    );
    let mut record = Launch {
        version: crew_staging::VERSION,
        token: token.clone(),
        run_id: spec.run_id.clone(),
        task_id: spec.task_id.clone(),
        attempt: spec.attempt,
        start: start.to_string(),
        // Set with the input bundle.
        base: None,
        commit: spec.plan.writes,
        message: format!("crew: {} ({})", spec.task_id, spec.plan.role),
        checks: crew_staging::Checks {
            commands: crate::executor::checks::verify_commands(shared, spec)
                .map(|v| v.commands)
                .unwrap_or_default(),
            timeout_ms: shared.config.verify_timeout_ms,
            grace_ms: shared.config.kill_grace_ms,
            output_bytes: shared.config.verify_output_bytes,
        },
        sandbox: crew_staging::BoxRules {
            mode: crate::executor::sandbox::mode(&shared.config, &spec.runtime),
            network: spec.runtime.network.unwrap_or(true),
            verify_network: shared.config.verify_network,
            runtime_env: spec.runtime.env.clone(),
            read: spec.runtime.sandbox_read.clone(),
            write: spec.runtime.sandbox_write.clone(),
        },
        pre_step,
    };
    // The worker's environment: the daemon's through the allowlist and the runtime's own
    // variables (the node's attempt crate adds the adapter's). Without crew's process tags: a
    // remote worker is not this daemon's process, and recovery must not take it for one.
    let mut extra = shared.config.env_passthrough.clone();
    extra.extend(spec.runtime.env.iter().cloned());
    let env: crew_staging::Env = crew_core::worker_env::filter(std::env::vars_os(), &extra, &[])
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let dir = staging.clone();
    let cwd = spec.cwd.clone();
    let start_commit = start.to_string();
    let run_base = spec
        .workspace
        .as_ref()
        .map(|w| (spec.run_id.clone(), w.base.clone()));
    let fresh = earlier.is_none();
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
            record.base = shared_bundle(
                &cwd,
                &start_commit,
                run_base.as_ref().map(|(r, b)| (r.as_str(), b.as_str())),
                &dir,
            )
            .map_err(|x| e("cannot bundle the start commit", &x))?;
            let prompts = dir.dir.join("prompts");
            std::fs::create_dir_all(&prompts).map_err(|x| e("prompts", &x))?;
            crew_staging::write_atomic(&dir.dir.join(&prompt_name), prompt.as_bytes(), 0o600)
                .map_err(|x| e("prompt", &x))?;
            crew_staging::write_json(&dir.worker(), &worker, 0o600)
                .map_err(|x| e("worker spec", &x))?;
            crew_staging::write_json(&dir.env(), &env, 0o600).map_err(|x| e("environment", &x))?;
            // Last: a launch means the directory is complete.
            crew_staging::write_json(&dir.launch(), &record, 0o600).map_err(|x| e("launch", &x))?;
        }
        Ok(())
    })?;
    Ok(Staged {
        staging,
        token,
        tag,
    })
}

/// Earlier attempts looked at for the questions a fresh attempt quotes.
const QUESTIONS_LOOKBACK: u32 = 32;

/// The questions the task's earlier attempts asked before `attempt` (the last `wanted` of
/// them, oldest first), each from the final record of its attempt's staging directory under
/// `staging_dir`, taken only with that attempt's token (what crewd took as the question when
/// the attempt ended). A directory gone or moved (`staging_dir` changed) leaves its question
/// out: the answer is in the prompt anyway.
fn earlier_questions(
    key: &[u8; 32],
    staging_dir: &Path,
    (run_id, task_id, attempt): (&str, &str, u32),
    wanted: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let first = attempt.saturating_sub(QUESTIONS_LOOKBACK).max(1);
    for n in (first..attempt).rev() {
        if out.len() >= wanted {
            break;
        }
        let staging = Staging::new(
            staging_dir
                .join(run_id)
                .join(format!("{task_id}.attempt-{n}")),
        );
        let token =
            super::token::derive(key, run_id, task_id, n, &staging.dir.display().to_string());
        if let Ok(Some(crew_staging::Final {
            result: Some(AttemptResult::Asked { question, .. }),
            ..
        })) = crew_staging::read_final(&staging, &token)
        {
            out.push(question);
        }
    }
    out.reverse();
    out
}

/// The attempt's input bundle(s), from a cache per run (`<staging>/<run>/bundles/`, 0700,
/// each file made once and hard-linked into each attempt's directory: a fan-out's 200 tasks
/// all start at the planner's result and share one file):
/// - `<commit>.bundle`: the commit and its whole history;
/// - `<commit>.thin.bundle`: only what the commit has past the run's base (`HEAD ^base`).
///
/// A start commit past the run's base gets its thin bundle as `input.bundle` and the base's
/// whole one as `base.bundle` (`Some(base)`: the worker takes the base first): the history is
/// written once per run, not again for each new start commit (a fix task, each step after
/// one that changed something, an integration). The base itself, a start it is not an
/// ancestor of, or a base without its ref (`refs/crew/<run>/_base`) gets the whole bundle.
fn shared_bundle(
    worktree: &str,
    start: &str,
    run_base: Option<(&str, &str)>,
    staging: &Staging,
) -> std::io::Result<Option<String>> {
    let valid = |c: &str| c.len() >= 40 && c.bytes().all(|b| b.is_ascii_hexdigit());
    let Some(run_dir) = staging.dir.parent().filter(|_| valid(start)) else {
        // `bundle` keeps a file already in place: one of a staging cut short goes first.
        let _ = std::fs::remove_file(staging.input_bundle());
        bundle(worktree, &staging.input_bundle(), &["HEAD"])?;
        return Ok(None);
    };
    let cache = run_dir.join("bundles");
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&cache)?;
    }
    let whole = |commit: &str| cache.join(format!("{commit}.bundle"));
    let thin = cache.join(format!("{start}.thin.bundle"));
    let base = run_base
        .filter(|(_, b)| valid(b) && *b != start)
        .filter(|(run_id, base)| {
            thin.exists() || thin_ok(worktree, run_id, base, start, &whole(base))
        });
    let (input, base) = match base {
        Some((_, base)) => {
            if !thin.exists() {
                bundle(worktree, &thin, &["HEAD", &format!("^{base}")])?;
            }
            link(&whole(base), &staging.base_bundle())?;
            (thin, Some(base.to_string()))
        }
        None => {
            let cached = whole(start);
            if !cached.exists() {
                bundle(worktree, &cached, &["HEAD"])?;
            }
            (cached, None)
        }
    };
    link(&input, &staging.input_bundle())?;
    Ok(base)
}

/// Whether a thin bundle on `base` will do for `start`: the base is an ancestor of it, and the
/// base's whole bundle is in the cache or made now from the run's base ref. `false` sends the
/// attempt the whole history (as before bundles were thin), never a bundle the node cannot use.
fn thin_ok(worktree: &str, run_id: &str, base: &str, start: &str, base_bundle: &Path) -> bool {
    let git_ok = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-c", "core.hooksPath=/dev/null"])
            .args(args)
            .current_dir(worktree)
            .stdin(std::process::Stdio::null())
            .output()
    };
    match git_ok(&["merge-base", "--is-ancestor", base, start]) {
        Ok(o) if o.status.success() => {}
        _ => return false,
    }
    if base_bundle.exists() {
        return true;
    }
    // A bundle needs a ref to carry the commit: the run's, kept from `team.run` on.
    let name = crew_core::run::workspace::base_ref(run_id);
    let held = git_ok(&["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")])
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == base);
    if !held {
        tracing::info!(
            run = run_id,
            "the run's base has no ref: the input bundle holds the whole history"
        );
        return false;
    }
    match bundle(worktree, base_bundle, &[&name]) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "cannot bundle the run's base: the input bundle holds the whole history");
            false
        }
    }
}

/// `to` as a hard link of `from` (a copy on a filesystem without them).
fn link(from: &Path, to: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(to);
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => std::fs::copy(from, to).map(|_| ()),
    }
}

/// `git bundle create OUT REVS…` in the task's worktree. Two attempts may make the same
/// cached bundle at once: each writes its own temporary file and the first in place stays
/// (a link that fails on an existing name), so every attempt links the one file.
fn bundle(worktree: &str, out: &Path, revs: &[&str]) -> std::io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = out.with_extension(format!(
        "bundle.tmp-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let o = std::process::Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null", "bundle", "create", "-q"])
        .arg(&tmp)
        .args(revs)
        .current_dir(worktree)
        .stdin(std::process::Stdio::null())
        .output()?;
    if !o.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&o.stderr).trim().to_string(),
        ));
    }
    let placed = match std::fs::hard_link(&tmp, out) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            // A filesystem without hard links: the rename (atomic, last one stays).
            return std::fs::rename(&tmp, out);
        }
        _ => Ok(()),
    };
    let _ = std::fs::remove_file(&tmp);
    placed
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
/// (a daemon killed between submitting and journaling the id), the one of its name that this
/// daemon submitted (its Slurm user, `tag` in its comment: `super::own_jobs`); else a new
/// submission, its intent durable before it and its id journaled after.
async fn submit_or_attach(
    client: &Backend,
    cfg: &SlurmConfig,
    ledger: &Arc<dyn JobLedger>,
    spec: &AttemptSpec,
    staging: &Path,
    tag: &str,
) -> Result<u64, SubmitError> {
    let name = super::job_name(&spec.run_id, &spec.task_id, spec.attempt);
    let key = spec.key();
    match &spec.job {
        Some(RemoteJob { id: Some(id), .. }) => {
            tracing::info!(job_id = id, "re-attached to the attempt's Slurm job");
            return Ok(*id);
        }
        Some(_) => {
            let found = client.jobs_named(&name, tag).await?;
            if let Some(j) = found.into_iter().max_by_key(|j| j.job_id) {
                tracing::info!(job_id = j.job_id, "found the attempt's Slurm job by name");
                record_id(client, ledger, &key, j.job_id).await?;
                return Ok(j.job_id);
            }
            // The intent is journaled and Slurm has no job of its name from this daemon: never
            // submitted (a job of that name from anyone else is left alone).
        }
        None => {
            let intent = RemoteJob {
                attempt: spec.attempt,
                name: name.clone(),
                staging: staging.display().to_string(),
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
        comment: super::job_comment(&spec.run_id, &spec.task_id, spec.attempt, tag),
        script: format!("#!/bin/sh\nexec {} {}\n", sh_quote(&worker), sh_quote(&dir)),
        cwd: dir.clone(),
        stdout: format!("{dir}/job.out"),
        // Partition, account and QOS from the config; CPUs, memory and time limit as the
        // run froze them, with the task's step and role over them.
        resources: cfg
            .resources(spec.runtime.slurm.as_ref())
            .with_shape(&spec.job_shape),
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
    client: &Backend,
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

/// Most warnings of one attempt passed on (and one saying the rest are not).
const MAX_WARNING_NOTES: u32 = 32;

/// Longest note line kept (a note is a few hundred bytes; a progress note's tool name and a
/// warning are bounded again where they are used).
const MAX_NOTE_BYTES: usize = 1 << 20;

/// The worker's notes (`notes.jsonl`) as they arrive: what the attempt's port would hear.
#[derive(Default)]
struct Notes {
    offset: u64,
    /// The unfinished last line, at most `MAX_NOTE_BYTES`.
    partial: Vec<u8>,
    /// The line being read was longer than `MAX_NOTE_BYTES`: the rest of it, up to its
    /// newline, is dropped as it comes.
    overlong: bool,
    /// Warnings passed on so far (each one a journaled `task.warning`).
    warnings: u32,
    /// The attempt's usage as last reported (for a failure the worker could not report).
    usage: Usage,
}

impl Notes {
    /// Read what the worker appended since the last look and pass it on. The file is opened
    /// as a worker's files are (`crew_staging::open_beneath`: a regular file, no link, no
    /// waiting on a FIFO), at most 8 MiB a look.
    async fn read_new(&mut self, path: &Path, port: &Arc<dyn Port>, key: &AttemptKey) {
        use std::io::{Read, Seek};
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let offset = self.offset;
        let read = blocking(|| -> Result<Vec<u8>, String> {
            let mut f =
                crew_staging::open_beneath(dir, Path::new(name)).map_err(|e| e.to_string())?;
            f.seek(std::io::SeekFrom::Start(offset))
                .map_err(|e| e.to_string())?;
            let mut buf = Vec::new();
            f.take(8 << 20)
                .read_to_end(&mut buf)
                .map_err(|e| e.to_string())?;
            Ok(buf)
        });
        let buf = match read {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %bound(&e), "the worker's notes are not readable");
                return;
            }
        };
        self.offset = self.offset.saturating_add(buf.len() as u64);
        // Progress is a running total: of one look's notes the last is passed on, once (a
        // local attempt reports it at most every 250 ms; each is a journaled event).
        let mut progress = None;
        for line in self.take_lines(&buf) {
            self.pass(&line, port, key, &mut progress);
        }
        if let Some((usage, tool)) = progress {
            port.progress(key, usage, tool);
        }
    }

    /// The complete lines `buf` ends (with what was kept of the line before it), keeping the
    /// unfinished rest; a line past `MAX_NOTE_BYTES` is dropped whole.
    fn take_lines(&mut self, mut buf: &[u8]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        while !buf.is_empty() {
            let (piece, ended) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            buf = buf
                .get(piece.len() + usize::from(ended)..)
                .unwrap_or_default();
            if !self.overlong {
                if self.partial.len().saturating_add(piece.len()) > MAX_NOTE_BYTES {
                    tracing::warn!(
                        "a line of the worker's notes over {MAX_NOTE_BYTES} bytes is skipped"
                    );
                    self.partial.clear();
                    self.overlong = true;
                } else {
                    self.partial.extend_from_slice(piece);
                }
            }
            if ended {
                if !self.overlong {
                    lines.push(std::mem::take(&mut self.partial));
                }
                self.overlong = false;
            }
        }
        lines
    }

    fn pass(
        &mut self,
        line: &[u8],
        port: &Arc<dyn Port>,
        key: &AttemptKey,
        progress: &mut Option<(Usage, Option<String>)>,
    ) {
        // A line crew-worker did not write (or a layout it does not share) is skipped.
        let Ok(note) = serde_json::from_slice::<Note>(line) else {
            return;
        };
        match note {
            Note::Spawned { pid, live } => {
                tracing::info!(pid, live, "the agent started on the node")
            }
            Note::Progress { usage, tool } => {
                self.usage = usage;
                *progress = Some((usage, tool.map(|t| bound(&t))));
            }
            // As many as a local attempt reports, then one note that the rest are not.
            Note::Warning { tool, message } => {
                match self.warnings {
                    n if n < MAX_WARNING_NOTES => port.warning(key, bound(&tool), bound(&message)),
                    MAX_WARNING_NOTES => port.warning(
                        key,
                        String::new(),
                        format!(
                            "the worker reported more than {MAX_WARNING_NOTES} warnings; the rest are not shown"
                        ),
                    ),
                    _ => {}
                }
                self.warnings = self.warnings.saturating_add(1);
            }
            Note::Answered => port.answered(key),
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn follow(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    spec: &AttemptSpec,
    cfg: &SlurmConfig,
    client: &Backend,
    job_id: u64,
    staged: Staged,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
    artifacts: &mut Vec<ArtifactRef>,
) -> AttemptResult {
    let Staged {
        staging,
        token,
        tag,
    } = staged;
    let key = spec.key();
    let name = super::job_name(&spec.run_id, &spec.task_id, spec.attempt);
    let mut job = AttemptJob::new(job_id, name, client.submitter(), tag);
    if spec.job.as_ref().is_some_and(|j| j.id == Some(job_id)) {
        // Re-attached by the journaled id: is it still this attempt's job?
        job.check(client).await;
    }
    let mut notes = Notes::default();
    // Control messages written so far (a re-attached attempt goes on after the earlier ones).
    let mut ctl_sent = blocking(|| {
        std::fs::read_dir(staging.ctl_dir())
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    });
    let mut ctl_n = crew_staging::ctl_after(&ctl_sent, 0)
        .last()
        .copied()
        .unwrap_or(0);
    ctl_sent.clear();
    let mut board = super::board(cfg).subscribe();
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
                        if let Err(e) = job.cancel(client).await {
                            tracing::warn!(error = %e, job_id, "cannot cancel the Slurm job");
                        }
                        stopped = Some(reason);
                        cancel_at = Some(tokio::time::Instant::now());
                    }
                }
                Some(WorkerCtl::Steer(text)) => {
                    ctl_n += 1;
                    let msg = crew_staging::Ctl::Steer { text };
                    if let Err(e) = blocking(|| staging.put_ctl(ctl_n, &msg)) {
                        tracing::warn!(error = %e, "cannot hand the steer message to the worker");
                    }
                }
                None => ctl_open = false,
            },
            changed = board.changed() => if changed.is_err() {
                // Never: the board lives as long as the daemon.
                tokio::time::sleep(Duration::from_millis(cfg.poll_ms)).await;
            },
        }
        notes.read_new(&staging.notes(), port, &key).await;
        let snapshot = board.borrow_and_update().clone();
        let looked = super::board::look(client, &snapshot, job_id).await;
        match looked.map(|j| job.see(j)) {
            // Slurm forgets an ended job after `MinJobAge` (300 s by default): a job followed
            // again after a long outage may be gone though its worker finished. Its final
            // record, with this attempt's token, says so.
            Ok(None) if matches!(crew_staging::read_final(&staging, &token), Ok(Some(_))) => {
                break Phase::Ended;
            }
            Ok(info) => {
                unreachable_since = None;
                match phase(info.as_ref()) {
                    Phase::Queued | Phase::Running => {}
                    done => {
                        // A requeued job would run the attempt again: it goes.
                        if info.as_ref().is_some_and(|j| j.restarts > 0) {
                            if let Err(e) = job.cancel(client).await {
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
    notes.read_new(&staging.notes(), port, &key).await;
    // The worker's final record: refused unless it carries this attempt's token.
    let fin = crew_staging::read_final(&staging, &token);
    // Its files (transcript, stderr log, result), taken into the run's directory whatever
    // the end: a cancelled or timed-out worker saved its partial transcript.
    let (result, usage, model) = match &fin {
        Ok(Some(f)) => match &f.result {
            Some(r) => {
                let (usage, model, named) = r.parts();
                let model = model.map(|m| crew_core::text::bound(m.to_string(), MAX_MODEL_CHARS));
                let run_dir = spec.run_dir.clone();
                let dir = staging.dir.clone();
                let named = named.to_vec();
                let (task_id, attempt) = (spec.task_id.clone(), spec.attempt);
                let output =
                    crew_core::run::candidates::own_output(&spec.plan).map(|o| o.to_string());
                artifacts.extend(blocking(move || {
                    let own = Own {
                        task_id: &task_id,
                        attempt,
                        output: output.as_deref(),
                    };
                    import(&dir, &run_dir, &named, &own)
                }));
                // A failed script's attempt told no agent anything (none kept, as locally).
                let script_failed = matches!(r, AttemptResult::Failed { reason, .. }
                    if reason == crew_core::run::FailReason::PreStep.as_str());
                if spec.plan.checks.pre_step.is_some() && !script_failed {
                    let (dir, run_dir) = (&staging.dir, &spec.run_dir);
                    artifacts.extend(blocking(|| {
                        take_prompt(dir, run_dir, &spec.task_id, spec.attempt)
                    }));
                }
                (Some(r.clone()), usage, model)
            }
            None => (None, notes.usage, None),
        },
        _ => (None, notes.usage, None),
    };
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
    let fin = match fin {
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
    if let Some(why) = &fin.unboxed {
        tracing::warn!(host = %bound(&fin.host), why = %bound(why), "the attempt ran unboxed on its node (sandbox = \"auto\")");
    }
    if let Some(e) = &fin.error {
        return fail(
            format!("crew-worker on {}: {}", bound(&fin.host), bound(e)),
            true,
            "worker",
        );
    }
    let Some(result) = result else {
        return fail(
            format!("crew-worker on {} reported no result", bound(&fin.host)),
            true,
            "worker",
        );
    };
    // The node classified the attempt (`crew_attempt`, as a local one); this side names the
    // files as they are here and lands the result commit in the task's worktree.
    let succeeded = matches!(
        result,
        AttemptResult::Completed { .. } | AttemptResult::NeedsAttention { .. }
    );
    if let (true, Some(commit)) = (succeeded, &fin.commit) {
        if let Err(e) = take_result(shared, &spec.cwd, &staging.result_bundle(), commit).await {
            return fail(
                format!("cannot take the worker's result commit: {e}"),
                true,
                "workspace",
            );
        }
    }
    as_taken(result, artifacts.clone())
}

/// Longest model name kept from a worker's record.
const MAX_MODEL_CHARS: usize = 200;

/// The worker's classified result as crewd takes it: naming `named` (the files as they are in
/// this run's directory), and without what only crewd decides. A reuse and its commit are the
/// result cache's (`workspace::finish_attempt` adopts the commit a reused result names, with no
/// ancestry check and no no-change guard): from a worker's record they would let it name any
/// revision of the user's repository as the task's result. The commit is the one the bundle
/// brought (`take_result`); a session stays on its node (an answered task starts afresh).
fn as_taken(mut r: AttemptResult, named: Vec<ArtifactRef>) -> AttemptResult {
    match &mut r {
        AttemptResult::Completed {
            artifacts,
            reused_from,
            commit,
            ..
        } => {
            *artifacts = named;
            *reused_from = None;
            *commit = None;
        }
        AttemptResult::Asked {
            artifacts, session, ..
        } => {
            *artifacts = named;
            *session = None;
        }
        AttemptResult::NoFinalText { artifacts, .. }
        | AttemptResult::NeedsAttention { artifacts, .. }
        | AttemptResult::Failed { artifacts, .. } => *artifacts = named,
    }
    match &mut r {
        AttemptResult::Completed { model, .. }
        | AttemptResult::NoFinalText { model, .. }
        | AttemptResult::NeedsAttention { model, .. }
        | AttemptResult::Failed { model, .. }
        | AttemptResult::Asked { model, .. } => {
            if let Some(m) = model {
                *m = crew_core::text::bound(std::mem::take(m), MAX_MODEL_CHARS);
            }
        }
    }
    r
}

/// The directories of a run a worker's files may land in.
const IMPORTED: &[&str] = &["transcripts", "logs", "results", "shared", "verify"];
/// Largest file taken from a worker (a transcript is capped well below it on the node).
const IMPORT_MAX: u64 = 64 << 20;

/// The attempt a worker ran, for the names of its files: crew_attempt's layout
/// (`transcripts/T.attempt-N.jsonl`, `logs/T.attempt-N.stderr.txt`, `verify/T.attempt-N.K.txt`,
/// `results/T.txt`, `shared/OUTPUT`).
struct Own<'a> {
    task_id: &'a str,
    attempt: u32,
    output: Option<&'a str>,
}

impl Own<'_> {
    /// Whether `name` is one of this attempt's files: a worker names its own only (another
    /// task's result or shared output, which its dependents read, is not its to write).
    fn names(&self, name: &str) -> bool {
        let (t, n) = (self.task_id, self.attempt);
        let verify = name
            .strip_prefix(&format!("verify/{t}.attempt-{n}."))
            .and_then(|r| r.strip_suffix(".txt"))
            .is_some_and(|k| {
                !k.is_empty() && k.len() <= 6 && k.bytes().all(|b| b.is_ascii_digit())
            });
        verify
            || name == format!("results/{t}.txt")
            || name == format!("transcripts/{t}.attempt-{n}.jsonl")
            || name == format!("logs/{t}.attempt-{n}.stderr.txt")
            || self.output.is_some_and(|o| name == format!("shared/{o}"))
    }
}

/// Copy the files a worker's result names from its staging directory into the run's
/// directory, each written whole and described afresh. A name outside the run's layout or
/// not of this attempt (`own`), a file too large, missing, or not a regular file is left out
/// (the worker's directory is not trusted with paths).
fn import(staging: &Path, run_dir: &Path, named: &[ArtifactRef], own: &Own) -> Vec<ArtifactRef> {
    let mut out = Vec::new();
    for a in named {
        let p = Path::new(&a.name);
        let mut parts = p.components();
        let inside = matches!(parts.next(), Some(std::path::Component::Normal(d)) if IMPORTED.iter().any(|x| d == *x))
            && parts.clone().count() >= 1
            && parts.all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside || !own.names(&a.name) {
            tracing::warn!(name = %bound(&a.name), "a worker's file outside its attempt's layout is not taken");
            continue;
        }
        // A regular file through real directories only: a link would be resolved on this
        // machine (a file of the user's taken into the run), a FIFO would hold the attempt.
        match crew_staging::read_beneath(staging, p, IMPORT_MAX) {
            Ok(bytes) => match crate::artifacts::put(run_dir, &a.name, a.kind.as_str(), &bytes) {
                Ok(r) => out.push(r),
                Err(e) => {
                    tracing::warn!(error = %e, name = %a.name, "cannot keep a worker's file")
                }
            },
            Err(e) => {
                tracing::warn!(error = %bound(&e.to_string()), "a worker's file is not taken")
            }
        }
    }
    out
}

/// What an attempt was told, kept as a local attempt keeps it: `prompts/<task>.attempt-N.md`
/// (each attempt's, a retry with feedback or an answer: what each was told) and
/// `prompts/<task>.md` a second name of the same file (the latest), not a second copy.
fn keep_prompt(
    run_dir: &Path,
    task: &str,
    attempt: u32,
    bytes: &[u8],
) -> std::io::Result<[ArtifactRef; 2]> {
    let this = format!("prompts/{task}.attempt-{attempt}.md");
    let kept = crate::artifacts::put(run_dir, &this, "prompt", bytes)?;
    let latest = crate::artifacts::put_same(run_dir, &kept, &format!("prompts/{task}.md"), bytes)?;
    Ok([kept, latest])
}

/// The prompt the node gave the agent, its pre-step script's block in it (the worker wrote it
/// over the staged one), kept in the run's directory (`keep_prompt`).
fn take_prompt(staging: &Path, run_dir: &Path, task: &str, attempt: u32) -> Vec<ArtifactRef> {
    let name = format!("prompts/{task}.md");
    // A regular file through real directories only, as the worker's other files.
    match crew_staging::read_beneath(staging, Path::new(&name), IMPORT_MAX) {
        Ok(bytes) => match keep_prompt(run_dir, task, attempt, &bytes) {
            Ok(kept) => kept.into(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot keep the node's prompt");
                Vec::new()
            }
        },
        Err(e) => {
            tracing::warn!(error = %bound(&e.to_string()), "the node's prompt is not taken");
            Vec::new()
        }
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
    // git checks that the bundle's prerequisite (the start commit, which is here) is reachable
    // from a ref; while other tasks of the run create and move refs in the same repository,
    // that walk can miss it ("some prerequisite commits exist in the object store, but are
    // not connected to the repository's history": 2 of 200 fan-out tasks in the benchmark).
    // The commit is there: the fetch is tried again.
    let mut tries = 0;
    loop {
        match git(
            worktree,
            &["fetch", "-q", &b, crew_staging::RESULT_REF],
            timeout,
        )
        .await
        {
            Ok(_) => break,
            Err(e) if e.contains("not connected to the repository's history") && tries < 5 => {
                tries += 1;
                tracing::info!(error = %e, tries, "fetching the result bundle again");
                tokio::time::sleep(Duration::from_millis(100 * tries)).await;
            }
            Err(e) => return Err(e),
        }
    }
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

fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_files_are_taken_only_inside_the_runs_layout() {
        let staging = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("transcripts/a.attempt-1.jsonl", "{}\n"),
            ("results/a.txt", "done"),
            ("secret.txt", "no"),
        ] {
            let p = staging.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let named = |name: &str, kind: &str| ArtifactRef {
            name: name.into(),
            kind: crew_core::run::ArtifactKind::new(kind),
            bytes: 0,
            sha256: crew_core::run::Sha256::from_bytes([0; 32]),
        };
        let own = Own {
            task_id: "a",
            attempt: 1,
            output: None,
        };
        let got = import(
            staging.path(),
            run.path(),
            &[
                named("transcripts/a.attempt-1.jsonl", "transcript"),
                named("results/a.txt", "result"),
                named("secret.txt", "result"),
                named("results/../secret.txt", "result"),
                named("/etc/passwd", "result"),
                named("results", "result"),
                named("results/missing.txt", "result"),
            ],
            &own,
        );
        let names: Vec<&str> = got.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["transcripts/a.attempt-1.jsonl", "results/a.txt"]);
        assert_eq!(got[1].bytes, 4);
        assert_eq!(
            std::fs::read_to_string(run.path().join("results/a.txt")).unwrap(),
            "done"
        );
        assert!(!run.path().join("secret.txt").exists());
    }

    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfifo {}", path.display());
    }

    /// A worker (or an agent unboxed on its node, the same user) plants links and FIFOs in its
    /// staging directory under the names its result gives: crewd, which reads them on its own
    /// machine, neither follows a link (a file of crewd's machine taken into the run's
    /// artifacts, and from there into a later task's prompt) nor waits on a FIFO (the attempt
    /// never ends, a runtime thread held).
    #[test]
    fn a_workers_links_and_fifos_are_not_taken() {
        let staging = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let mine = tempfile::tempdir().unwrap();
        let secret = mine.path().join("id_ed25519");
        std::fs::write(&secret, "PRIVATE KEY").unwrap();
        // The attempt's own names, each something else than a regular file.
        for d in ["results", "shared", "transcripts", "prompts"] {
            std::fs::create_dir_all(staging.path().join(d)).unwrap();
        }
        std::fs::write(staging.path().join("results/t.txt"), "done").unwrap();
        std::os::unix::fs::symlink(&secret, staging.path().join("shared/out.md")).unwrap();
        std::fs::write(mine.path().join("t.attempt-1.stderr.txt"), "PRIVATE").unwrap();
        std::os::unix::fs::symlink(mine.path(), staging.path().join("logs")).unwrap();
        mkfifo(&staging.path().join("transcripts/t.attempt-1.jsonl"));
        std::os::unix::fs::symlink(&secret, staging.path().join("prompts/t.md")).unwrap();
        let named = |name: &str| ArtifactRef {
            name: name.into(),
            kind: crew_core::run::ArtifactKind::new("result"),
            bytes: 0,
            sha256: crew_core::run::Sha256::from_bytes([0; 32]),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, r) = (staging.path().to_path_buf(), run.path().to_path_buf());
        std::thread::spawn(move || {
            let own = Own {
                task_id: "t",
                attempt: 1,
                output: Some("out.md"),
            };
            let got = import(
                &s,
                &r,
                &[
                    named("results/t.txt"),
                    named("shared/out.md"),
                    named("logs/t.attempt-1.stderr.txt"),
                    named("transcripts/t.attempt-1.jsonl"),
                ],
                &own,
            );
            let prompts = take_prompt(&s, &r, "t", 1);
            let _ = tx.send((got, prompts));
        });
        let (got, prompts) = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("crewd blocked on a worker's FIFO");
        let names: Vec<&str> = got.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["results/t.txt"]);
        assert!(!run.path().join("shared/out.md").exists());
        assert!(!run.path().join("logs/t.attempt-1.stderr.txt").exists());
        assert!(!run.path().join("prompts/t.md").exists());
        assert!(
            prompts.is_empty(),
            "the linked prompt was taken: {prompts:?}"
        );
    }

    /// A worker names the files of its own attempt only: one naming another task's result,
    /// shared output or transcript (names under the run's layout all the same) overwrote that
    /// task's file in the run's directory, which its dependents read.
    #[test]
    fn a_worker_cannot_name_another_tasks_files() {
        let staging = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        for name in [
            "results/01_a.txt",
            "results/02_b.txt",
            "shared/b.md",
            "shared/a.md",
            "transcripts/01_a.attempt-2.jsonl",
            "transcripts/02_b.attempt-1.jsonl",
            "transcripts/01_a.attempt-1.jsonl",
            "logs/01_a.attempt-2.stderr.txt",
            "verify/01_a.attempt-2.1.txt",
            "verify/02_b.attempt-1.1.txt",
        ] {
            let p = staging.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "forged").unwrap();
        }
        std::fs::create_dir_all(run.path().join("results")).unwrap();
        std::fs::write(run.path().join("results/02_b.txt"), "b's answer").unwrap();
        let named: Vec<ArtifactRef> = std::fs::read_dir(staging.path())
            .unwrap()
            .flat_map(|d| {
                let d = d.unwrap().path();
                std::fs::read_dir(&d).unwrap().map(move |f| {
                    let f = f.unwrap().path();
                    format!(
                        "{}/{}",
                        d.file_name().unwrap().to_str().unwrap(),
                        f.file_name().unwrap().to_str().unwrap()
                    )
                })
            })
            .map(|name| ArtifactRef {
                name,
                kind: crew_core::run::ArtifactKind::new("result"),
                bytes: 0,
                sha256: crew_core::run::Sha256::from_bytes([0; 32]),
            })
            .collect();
        let own = Own {
            task_id: "01_a",
            attempt: 2,
            output: Some("a.md"),
        };
        let mut got: Vec<String> = import(staging.path(), run.path(), &named, &own)
            .into_iter()
            .map(|a| a.name)
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "logs/01_a.attempt-2.stderr.txt",
                "results/01_a.txt",
                "shared/a.md",
                "transcripts/01_a.attempt-2.jsonl",
                "verify/01_a.attempt-2.1.txt",
            ]
        );
        assert_eq!(
            std::fs::read_to_string(run.path().join("results/02_b.txt")).unwrap(),
            "b's answer"
        );
    }

    struct Heard(std::sync::Mutex<Vec<String>>);
    impl Port for Heard {
        fn spawned(&self, _: &AttemptKey, _: u32, _: u64, _: bool) {}
        fn progress(&self, _: &AttemptKey, _: Usage, tool: Option<String>) {
            self.0.lock().unwrap().push(tool.unwrap_or_default());
        }
        fn warning(&self, _: &AttemptKey, _: String, message: String) {
            self.0.lock().unwrap().push(message);
        }
        fn answered(&self, _: &AttemptKey) {}
        fn finished(&self, _: crate::attempt::Report) {}
    }

    fn key() -> AttemptKey {
        AttemptKey {
            run_id: "r".into(),
            task_id: "t".into(),
            attempt: 1,
        }
    }

    /// `notes.jsonl` without a newline (a worker's, or an unboxed agent's appending to it):
    /// what crewd keeps of the unfinished line stays bounded however much is written, and a
    /// note after the next newline is heard again.
    #[tokio::test]
    async fn a_note_line_without_end_is_not_kept_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        let heard = Arc::new(Heard(Default::default()));
        let port: Arc<dyn Port> = heard.clone();
        let mut notes = Notes::default();
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![b'x'; 4 << 20];
        for _ in 0..8 {
            f.write_all(&chunk).unwrap();
            notes.read_new(&path, &port, &key()).await;
            assert!(
                notes.partial.len() <= MAX_NOTE_BYTES,
                "{} bytes of one unfinished line kept",
                notes.partial.len()
            );
        }
        writeln!(f).unwrap();
        let note = Note::Warning {
            tool: "bash".into(),
            message: "refused".into(),
        };
        writeln!(f, "{}", serde_json::to_string(&note).unwrap()).unwrap();
        notes.read_new(&path, &port, &key()).await;
        assert_eq!(*heard.0.lock().unwrap(), ["refused"]);
    }

    /// A worker's notes are its word on what happened, each refusal a journaled
    /// `task.warning`: a worker (or an unboxed agent appending to its notes) that writes them
    /// by the thousand is heard as a local attempt is, a bounded number of times.
    #[tokio::test]
    async fn a_flood_of_warning_notes_is_heard_a_bounded_number_of_times() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        let heard = Arc::new(Heard(Default::default()));
        let port: Arc<dyn Port> = heard.clone();
        let mut notes = Notes::default();
        let mut f = std::fs::File::create(&path).unwrap();
        let note = Note::Warning {
            tool: "bash".into(),
            message: "refused".into(),
        };
        let line = serde_json::to_string(&note).unwrap();
        for _ in 0..10_000 {
            writeln!(f, "{line}").unwrap();
        }
        notes.read_new(&path, &port, &key()).await;
        notes.read_new(&path, &port, &key()).await;
        let n = heard.0.lock().unwrap().len();
        assert!(
            n <= MAX_WARNING_NOTES as usize + 1,
            "{n} warnings passed on"
        );
        assert!(n > 1);
    }

    /// Progress notes by the thousand in one look are one `task.progress` (the last), as a
    /// local attempt reports progress at most every 250 ms: each one is a journaled event.
    #[tokio::test]
    async fn progress_notes_of_one_look_are_passed_on_once() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        let heard = Arc::new(Heard(Default::default()));
        let port: Arc<dyn Port> = heard.clone();
        let mut notes = Notes::default();
        let mut f = std::fs::File::create(&path).unwrap();
        for i in 0..10_000 {
            let note = Note::Progress {
                usage: Usage {
                    input: i,
                    ..Usage::default()
                },
                tool: Some(format!("t{i}")),
            };
            writeln!(f, "{}", serde_json::to_string(&note).unwrap()).unwrap();
        }
        notes.read_new(&path, &port, &key()).await;
        assert_eq!(*heard.0.lock().unwrap(), ["t9999"]);
        assert_eq!(notes.usage.input, 9999);
    }

    /// `notes.jsonl` as a FIFO: the look at it returns at once.
    #[tokio::test]
    async fn notes_as_a_fifo_do_not_hold_the_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        mkfifo(&path);
        let port: Arc<dyn Port> = Arc::new(Heard(Default::default()));
        let mut notes = Notes::default();
        tokio::time::timeout(Duration::from_secs(5), notes.read_new(&path, &port, &key()))
            .await
            .expect("crewd blocked on a worker's FIFO");
    }

    /// The question a fresh attempt quotes is its earlier attempts' own: a final record without
    /// that attempt's token (a stale or foreign worker) is not taken, nor one that did not ask.
    #[test]
    fn earlier_questions_are_taken_only_with_their_attempts_token() {
        let dir = tempfile::tempdir().unwrap();
        let key = [7u8; 32];
        let write = |n: u32, token: Option<&str>, question: Option<&str>| {
            let s = Staging::new(dir.path().join("r1").join(format!("01_a.attempt-{n}")));
            s.create().unwrap();
            let own =
                super::super::token::derive(&key, "r1", "01_a", n, &s.dir.display().to_string());
            let result = match question {
                Some(q) => AttemptResult::Asked {
                    usage: Usage::default(),
                    model: None,
                    artifacts: vec![],
                    question: q.into(),
                    session: None,
                },
                None => AttemptResult::NoFinalText {
                    usage: Usage::default(),
                    model: None,
                    artifacts: vec![],
                },
            };
            let fin = crew_staging::Final {
                version: crew_staging::VERSION,
                token: token.map_or(own, str::to_string),
                result: Some(result),
                terminated: false,
                commit: None,
                host: "n1".into(),
                error: None,
                unboxed: None,
            };
            crew_staging::write_json(&s.final_record(), &fin, 0o600).unwrap();
        };
        write(1, None, Some("first?"));
        write(2, None, None);
        write(3, Some("stale"), Some("injected?"));
        write(4, None, Some("second?"));
        let got =
            |attempt, wanted| earlier_questions(&key, dir.path(), ("r1", "01_a", attempt), wanted);
        assert_eq!(got(5, 2), ["first?", "second?"]);
        assert_eq!(got(5, 1), ["second?"]);
        assert_eq!(got(4, 5), ["first?"]);
        assert!(got(1, 1).is_empty());
        // Another key (another daemon's state) takes nothing.
        assert!(earlier_questions(&[8u8; 32], dir.path(), ("r1", "01_a", 5), 2).is_empty());
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=u", "-c", "user.email=u@x"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// A start past the run's base gets a thin bundle and the base's, each made once per run;
    /// a start the base is not an ancestor of, or a base whose ref is gone, the whole history.
    #[test]
    fn a_start_past_the_base_gets_a_thin_bundle_else_the_whole_history() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        let commit = |name: &str| {
            std::fs::write(repo.join(format!("{name}.txt")), name).unwrap();
            git(&repo, &["add", "-A"]);
            git(&repo, &["commit", "-qm", name]);
            git(&repo, &["rev-parse", "HEAD"])
        };
        commit("one");
        let base = commit("two");
        git(&repo, &["update-ref", "refs/crew/r1/_base", &base]);
        let past = commit("three");
        git(&repo, &["checkout", "-q", "--orphan", "other"]);
        let elsewhere = commit("four");
        let w = repo.display().to_string();
        let run = t.path().join("staging/r1");
        let attempt = |name: &str, at: &str| {
            git(&repo, &["checkout", "-q", "--detach", at]);
            let s = Staging::new(run.join(name));
            s.create().unwrap();
            let b = shared_bundle(&w, at, Some(("r1", &base)), &s).unwrap();
            (s, b)
        };
        let requires = |s: &Staging| {
            git(
                &repo,
                &["bundle", "verify", &s.input_bundle().display().to_string()],
            )
        };

        let (s, b) = attempt("a.attempt-1", &past);
        assert_eq!(b.as_deref(), Some(base.as_str()));
        assert!(requires(&s).contains(&base));
        assert!(s.base_bundle().exists());
        assert!(run.join(format!("bundles/{past}.thin.bundle")).exists());
        assert!(run.join(format!("bundles/{base}.bundle")).exists());

        let (s, b) = attempt("b.attempt-1", &elsewhere);
        assert_eq!(b, None);
        assert!(
            !requires(&s).contains("requires this ref"),
            "{}",
            requires(&s)
        );
        assert!(!s.base_bundle().exists());

        let (s, b) = attempt("c.attempt-1", &base);
        assert_eq!(b, None);
        assert!(!s.base_bundle().exists());

        // Another run whose base ref is gone: whole.
        git(&repo, &["update-ref", "-d", "refs/crew/r1/_base"]);
        let s = Staging::new(t.path().join("staging/r2/a.attempt-1"));
        s.create().unwrap();
        git(&repo, &["checkout", "-q", "--detach", &past]);
        assert_eq!(
            shared_bundle(&w, &past, Some(("r2", &base)), &s).unwrap(),
            None
        );
        assert!(!requires(&s).contains("requires this ref"));
    }
}
