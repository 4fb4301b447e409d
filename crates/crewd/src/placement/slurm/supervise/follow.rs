//! Following an attempt's Slurm job until it ends, then taking what its worker left.
//!
//! The loop (`Follower::until_end`) waits for a wake-up (`Wake`): a message from the run (stop
//! or steer) or a new listing of the cluster's jobs (`slurm::board`). After each it handles the
//! message, passes on the worker's new notes and looks at the job; the job's end, Slurm
//! unreachable for [`UNREACHABLE_FOR`], or a cancel not seen through in [`CANCEL_WAIT`] ends
//! the loop. Then `Follower::finish` takes the worker's files and decides the attempt's result
//! (`end`). The rules that need no I/O (`seen`, `unreachable_end`, `cancel_overdue`, `end`) are
//! pure functions, table-tested below.

use super::notes::Notes;
use super::stage::Staged;
use super::take::{as_taken, import, take_prompt, take_result, Own, MAX_MODEL_CHARS};
use super::{blocking, bound};
use crate::attempt::{AttemptKey, AttemptSpec, Port, WorkerCtl};
use crate::placement::slurm::attempt_job::AttemptJob;
use crate::placement::slurm::board::Snapshot;
use crate::placement::slurm::state::{phase, JobInfo, Phase};
use crate::placement::slurm::{self, Backend, SlurmConfig};
use crate::shared::Shared;
use crew_core::run::{ArtifactRef, AttemptResult};
use crew_core::usage::Usage;
use crew_staging::{Final, Staging};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Slurm unreachable this long in a row ends the attempt (retryable); the job is left to run
/// out its time limit or be found again by recovery.
const UNREACHABLE_FOR: Duration = Duration::from_secs(300);
/// After a cancel, how long crew waits to see the job end before it reports anyway.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

/// Follow the attempt's job `job_id` until it ends, and make its result.
#[allow(clippy::too_many_arguments)]
pub(super) async fn follow(
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
    let name = slurm::job_name(&spec.run_id, &spec.task_id, spec.attempt);
    let mut job = AttemptJob::new(job_id, name, client.submitter(), tag);
    if spec.job.as_ref().is_some_and(|j| j.id == Some(job_id)) {
        // Re-attached by the journaled id: is it still this attempt's job?
        job.check(client).await;
    }
    let ctl_n = ctl_written(&staging);
    let mut follower = Follower {
        shared,
        port,
        spec,
        cfg,
        client,
        job_id,
        key: spec.key(),
        staging,
        token,
        job,
        notes: Notes::default(),
        ctl_n,
        board: slurm::board(cfg).subscribe(),
        stop: None,
        unreachable_since: None,
        ctl_open: true,
    };
    let ended = follower.until_end(ctl).await;
    follower.finish(ended, artifacts).await
}

/// The last control message written to the worker so far: a re-attached attempt goes on after
/// the earlier ones.
fn ctl_written(staging: &Staging) -> u64 {
    let written = blocking(|| {
        std::fs::read_dir(staging.ctl_dir())
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    });
    crew_staging::ctl_after(&written, 0)
        .last()
        .copied()
        .unwrap_or(0)
}

/// What woke the loop.
enum Wake {
    /// A message from the run; `None` once the run's side is gone.
    Ctl(Option<WorkerCtl>),
    /// A new listing of the cluster's jobs; `Err` once the board is gone.
    Listing(Result<(), watch::error::RecvError>),
}

/// The run stopped the attempt: why, when its job was cancelled, and whether Slurm took the
/// cancel (until it does, each wake-up asks again).
struct Stop {
    reason: String,
    at: Instant,
    sent: bool,
}

/// One attempt's job as it is followed: what the loop keeps between wake-ups.
struct Follower<'a> {
    shared: &'a Arc<Shared>,
    port: &'a Arc<dyn Port>,
    spec: &'a AttemptSpec,
    cfg: &'a SlurmConfig,
    client: &'a Backend,
    job_id: u64,
    key: AttemptKey,
    staging: Staging,
    token: String,
    job: AttemptJob,
    notes: Notes,
    /// Control messages written so far (a re-attached attempt goes on after the earlier ones).
    ctl_n: u64,
    board: watch::Receiver<Arc<Snapshot>>,
    stop: Option<Stop>,
    /// Since when Slurm has not answered, while it does not.
    unreachable_since: Option<Instant>,
    /// The run's side of the control channel is still there.
    ctl_open: bool,
}

impl Follower<'_> {
    /// Follow the job until the attempt's end: the phase it ended in.
    async fn until_end(&mut self, ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>) -> Phase {
        loop {
            match self.next_wake(ctl).await {
                Wake::Ctl(msg) => self.on_ctl(msg).await,
                Wake::Listing(changed) => self.on_listing(changed).await,
            }
            if let Some(ended) = self.look().await {
                return ended;
            }
        }
    }

    async fn next_wake(&mut self, ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>) -> Wake {
        tokio::select! {
            msg = ctl.recv(), if self.ctl_open => Wake::Ctl(msg),
            changed = self.board.changed() => Wake::Listing(changed),
        }
    }

    async fn on_ctl(&mut self, msg: Option<WorkerCtl>) {
        match msg {
            Some(WorkerCtl::Stop { reason }) => self.on_stop(reason).await,
            Some(WorkerCtl::Steer(text)) => self.on_steer(text),
            None => self.ctl_open = false,
        }
    }

    /// The run stops the attempt: its job is cancelled, once (the first reason stays).
    async fn on_stop(&mut self, reason: String) {
        if self.stop.is_some() {
            return;
        }
        let job_id = self.job_id;
        tracing::info!(%reason, job_id, "cancelling the Slurm job");
        let sent = self.send_cancel().await;
        self.stop = Some(Stop {
            reason,
            at: Instant::now(),
            sent,
        });
    }

    /// Ask Slurm to cancel the job; whether it took the request (a refusal is logged: a
    /// controller that timed out or answered 503 is asked again on the next wake-up).
    async fn send_cancel(&self) -> bool {
        let asked = match crate::executor::fault::hit("slurm-cancel") {
            Err(e) => Err(e.to_string()),
            Ok(()) => self
                .job
                .cancel(self.client)
                .await
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = &asked {
            let job_id = self.job_id;
            tracing::warn!(error = %e, job_id, "cannot cancel the Slurm job; asking again at the next look");
        }
        asked.is_ok()
    }

    /// A steer message, handed to the worker as the next control file.
    fn on_steer(&mut self, text: String) {
        self.ctl_n += 1;
        let msg = crew_staging::Ctl::Steer { text };
        if let Err(e) = blocking(|| self.staging.put_ctl(self.ctl_n, &msg)) {
            tracing::warn!(error = %e, "cannot hand the steer message to the worker");
        }
    }

    async fn on_listing(&self, changed: Result<(), watch::error::RecvError>) {
        if changed.is_err() {
            // Never: the board lives as long as the daemon.
            tokio::time::sleep(Duration::from_millis(self.cfg.poll_ms)).await;
        }
    }

    /// After a wake-up: the worker's new notes passed on, and the job as the latest listing
    /// has it. `Some` with the phase the attempt ended in when it did.
    async fn look(&mut self) -> Option<Phase> {
        if self.stop.as_ref().is_some_and(|s| !s.sent) {
            let sent = self.send_cancel().await;
            if let Some(s) = self.stop.as_mut() {
                s.sent = sent;
            }
        }
        self.notes
            .read_new(&self.staging.notes(), self.port, &self.key)
            .await;
        let snapshot = self.board.borrow_and_update().clone();
        let looked = slurm::board::look(self.client, &snapshot, self.job_id).await;
        let ended = match looked.map(|j| self.job.see(j)) {
            Ok(job) => {
                self.unreachable_since = None;
                let (staging, token) = (&self.staging, &self.token);
                let has_final = || matches!(crew_staging::read_final(staging, token), Ok(Some(_)));
                match seen(job.as_ref(), has_final) {
                    Seen::Waiting => None,
                    Seen::Ended { phase, cancel } => {
                        if cancel {
                            self.cancel_requeued().await;
                        }
                        Some(phase)
                    }
                }
            }
            Err(e) => {
                let since = *self.unreachable_since.get_or_insert_with(Instant::now);
                let job_id = self.job_id;
                tracing::warn!(error = %e, job_id, "cannot read the Slurm job's state");
                unreachable_end(since.elapsed(), &e)
            }
        };
        let overdue = cancel_overdue(self.stop.as_ref().map(|s| s.at.elapsed()));
        if let (Some(_), Some(s)) = (&overdue, self.stop.as_ref().filter(|s| !s.sent)) {
            let job_id = self.job_id;
            tracing::error!(job_id, reason = %s.reason, "Slurm never took the cancel of the attempt's job: it may still run; cancel it with `scancel {job_id}`");
        }
        ended.or(overdue)
    }

    /// A requeued job would run the attempt again: it goes.
    async fn cancel_requeued(&self) {
        if let Err(e) = self.job.cancel(self.client).await {
            let job_id = self.job_id;
            tracing::warn!(error = %e, job_id, "cannot cancel the requeued Slurm job");
        }
    }

    /// The attempt's result once its job `ended`.
    async fn finish(mut self, ended: Phase, artifacts: &mut Vec<ArtifactRef>) -> AttemptResult {
        self.notes
            .read_new(&self.staging.notes(), self.port, &self.key)
            .await;
        // The worker's final record: refused unless it carries this attempt's token.
        let fin = crew_staging::read_final(&self.staging, &self.token);
        let (result, usage, model) = self.take_files(&fin, artifacts);
        let named = artifacts.clone();
        let fail = |error: String, retryable: bool, reason: &str| AttemptResult::Failed {
            usage,
            model: model.clone(),
            artifacts: named.clone(),
            error,
            retryable,
            reason: reason.into(),
        };
        let stopped = self.stop.map(|s| s.reason);
        let (result, commit) =
            match end(stopped, ended, fin, result, self.job_id, &self.staging.dir) {
                Ok(taken) => taken,
                Err(Failure {
                    error,
                    retryable,
                    reason,
                }) => return fail(error, retryable, &reason),
            };
        if let Some(commit) = commit {
            let bundle = self.staging.result_bundle();
            if let Err(e) = take_result(self.shared, &self.spec.cwd, &bundle, &commit).await {
                return fail(
                    format!("cannot take the worker's result commit: {e}"),
                    true,
                    "workspace",
                );
            }
        }
        as_taken(result, artifacts.clone())
    }

    /// The worker's files (transcript, stderr log, result), taken into the run's directory
    /// whatever the end: a cancelled or timed-out worker saved its partial transcript. Returns
    /// the worker's result, and the usage and model of the attempt as a failure reports them.
    fn take_files(
        &self,
        fin: &Result<Option<Final>, String>,
        artifacts: &mut Vec<ArtifactRef>,
    ) -> (Option<AttemptResult>, Usage, Option<String>) {
        let Ok(Some(Final {
            result: Some(r), ..
        })) = fin
        else {
            return (None, self.notes.usage, None);
        };
        let spec = self.spec;
        let (usage, model, named) = r.parts();
        let model = model.map(|m| crew_core::text::bound(m.to_string(), MAX_MODEL_CHARS));
        let run_dir = spec.run_dir.clone();
        let dir = self.staging.dir.clone();
        let named = named.to_vec();
        let (task_id, attempt) = (spec.task_id.clone(), spec.attempt);
        let output = crew_core::run::candidates::own_output(&spec.plan).map(|o| o.to_string());
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
            let (dir, run_dir) = (&self.staging.dir, &spec.run_dir);
            artifacts.extend(blocking(|| {
                take_prompt(dir, run_dir, &spec.task_id, spec.attempt)
            }));
        }
        (Some(r.clone()), usage, model)
    }
}

/// What one look at the job means for the attempt.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Queued or running: follow on.
    Waiting,
    /// Ended in `phase`; `cancel` when Slurm requeued the job, which would run the attempt
    /// again.
    Ended { phase: Phase, cancel: bool },
}

/// The attempt's job as Slurm has it (`None`: Slurm does not know it, or the id is a
/// stranger's), and whether the worker's final record is in place (asked only of a job Slurm
/// does not know).
fn seen(job: Option<&JobInfo>, has_final: impl FnOnce() -> bool) -> Seen {
    // Slurm forgets an ended job after `MinJobAge` (300 s by default): a job followed
    // again after a long outage may be gone though its worker finished. Its final
    // record, with this attempt's token, says so.
    if job.is_none() && has_final() {
        return Seen::Ended {
            phase: Phase::Ended,
            cancel: false,
        };
    }
    match phase(job) {
        Phase::Queued | Phase::Running => Seen::Waiting,
        done => Seen::Ended {
            phase: done,
            cancel: job.is_some_and(|j| j.restarts > 0),
        },
    }
}

/// Slurm has not answered for `unanswered`: the attempt's end once that is over
/// [`UNREACHABLE_FOR`].
fn unreachable_end(unanswered: Duration, e: &impl std::fmt::Display) -> Option<Phase> {
    (unanswered > UNREACHABLE_FOR).then(|| Phase::Failed {
        error: format!("Slurm unreachable for {}s: {e}", UNREACHABLE_FOR.as_secs()),
        retryable: true,
        reason: "slurm_unreachable".into(),
    })
}

/// The job was cancelled `since_cancel` ago (`None`: it was not): the attempt's end once that
/// is over [`CANCEL_WAIT`] and the job has still not ended.
fn cancel_overdue(since_cancel: Option<Duration>) -> Option<Phase> {
    since_cancel
        .filter(|d| *d > CANCEL_WAIT)
        .map(|_| Phase::Failed {
            error: "the Slurm job did not end after its cancel".into(),
            retryable: false,
            reason: "cancelled".into(),
        })
}

/// Why the attempt failed, as its `AttemptResult::Failed` says.
#[derive(Debug)]
struct Failure {
    error: String,
    retryable: bool,
    reason: String,
}

/// The attempt's end from what is known once its job ended: whether the run stopped it, the
/// phase its job ended in, the worker's final record (`fin`), and the result in it. A stop
/// comes first, then a failed job, then what the worker says; `job_id` and `staging` name
/// where to look in the messages. `Ok` has the worker's result to take, and the result commit
/// to bring into the task's worktree first (when it succeeded with one).
fn end(
    stopped: Option<String>,
    ended: Phase,
    fin: Result<Option<Final>, String>,
    result: Option<AttemptResult>,
    job_id: u64,
    staging: &Path,
) -> Result<(AttemptResult, Option<String>), Failure> {
    let failed = |error: String, retryable: bool, reason: &str| {
        Err(Failure {
            error,
            retryable,
            reason: reason.into(),
        })
    };
    if let Some(reason) = stopped {
        return failed(reason, false, "cancelled");
    }
    if let Phase::Failed {
        error,
        retryable,
        reason,
    } = ended
    {
        return failed(error, retryable, &reason);
    }
    let fin = match fin {
        Ok(Some(f)) => f,
        Ok(None) => {
            return failed(
                format!(
                "the Slurm job {job_id} ended without the worker's final record (see {}/job.out)",
                staging.display()
            ),
                true,
                "worker",
            )
        }
        // Not this attempt's worker: refused, and nothing of it is taken.
        Err(e) => return failed(e, true, "stale_token"),
    };
    if let Some(why) = &fin.unboxed {
        tracing::warn!(host = %bound(&fin.host), why = %bound(why), "the attempt ran unboxed on its node (sandbox = \"auto\")");
    }
    if let Some(e) = &fin.error {
        return failed(
            format!("crew-worker on {}: {}", bound(&fin.host), bound(e)),
            true,
            "worker",
        );
    }
    let Some(result) = result else {
        return failed(
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
    let commit = fin.commit.filter(|_| succeeded);
    Ok((result, commit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str, restarts: u64) -> JobInfo {
        JobInfo {
            job_id: 7,
            name: "crew-r-t-1".into(),
            state: state.into(),
            exit_code: None,
            signal: None,
            reason: "None".into(),
            nodes: "n2".into(),
            restarts,
            owner: Default::default(),
        }
    }

    /// The reason of a failed phase, or the phase's name.
    fn reason(p: &Phase) -> &str {
        match p {
            Phase::Queued => "queued",
            Phase::Running => "running",
            Phase::Ended => "ended",
            Phase::Failed { reason, .. } => reason,
        }
    }

    /// A look ends the attempt only once its job ended; a job Slurm no longer knows ended
    /// well when its worker's final record is there (and only then is the record read); a
    /// requeued job is cancelled as it ends the attempt.
    #[test]
    fn a_look_ends_the_attempt_when_its_job_ended() {
        // The job as Slurm has it, whether the final record is there, and the end: the
        // phase's reason and whether the job is cancelled.
        type Case = (Option<JobInfo>, bool, Option<(&'static str, bool)>);
        let table: [Case; 9] = [
            (Some(job("PENDING", 0)), false, None),
            (Some(job("RUNNING", 0)), false, None),
            (Some(job("COMPLETING", 0)), false, None),
            (Some(job("COMPLETED", 0)), false, Some(("ended", false))),
            (Some(job("TIMEOUT", 0)), false, Some(("timeout", false))),
            (
                Some(job("CANCELLED", 0)),
                false,
                Some(("slurm_cancelled", false)),
            ),
            (Some(job("RUNNING", 1)), false, Some(("requeued", true))),
            (None, true, Some(("ended", false))),
            (None, false, Some(("slurm_vanished", false))),
        ];
        for (job, has_final, want) in table {
            let what = format!(
                "{:?} (final record: {has_final})",
                job.as_ref().map(|j| &j.state)
            );
            let asked = std::cell::Cell::new(false);
            let got = seen(job.as_ref(), || {
                asked.set(true);
                has_final
            });
            let got = match &got {
                Seen::Waiting => None,
                Seen::Ended { phase, cancel } => Some((reason(phase), *cancel)),
            };
            assert_eq!(got, want, "{what}");
            assert_eq!(asked.get(), job.is_none(), "{what}: final record read");
        }
    }

    /// Slurm unanswered ends the attempt (retryable) only past `UNREACHABLE_FOR`; a cancel
    /// not seen through ends it (not retryable) only past `CANCEL_WAIT`.
    #[test]
    fn outages_and_cancels_end_the_attempt_only_past_their_wait() {
        let s = Duration::from_secs;
        let unanswered = [(s(0), false), (s(300), false), (s(301), true)];
        for (d, ends) in unanswered {
            let got = unreachable_end(d, &"refused");
            assert_eq!(got.is_some(), ends, "unanswered for {d:?}");
            if let Some(p) = got {
                assert_eq!(
                    p,
                    Phase::Failed {
                        error: "Slurm unreachable for 300s: refused".into(),
                        retryable: true,
                        reason: "slurm_unreachable".into(),
                    }
                );
            }
        }
        let cancelled = [(None, false), (Some(s(0)), false), (Some(s(60)), false)];
        for (d, ends) in cancelled.into_iter().chain([(Some(s(61)), true)]) {
            let got = cancel_overdue(d);
            assert_eq!(got.is_some(), ends, "cancelled {d:?} ago");
            if let Some(p) = got {
                assert_eq!(
                    p,
                    Phase::Failed {
                        error: "the Slurm job did not end after its cancel".into(),
                        retryable: false,
                        reason: "cancelled".into(),
                    }
                );
            }
        }
    }

    fn fin(result: Option<AttemptResult>, commit: Option<&str>, error: Option<&str>) -> Final {
        Final {
            version: crew_staging::VERSION,
            token: "t".into(),
            result,
            terminated: false,
            commit: commit.map(str::to_string),
            host: "n1".into(),
            error: error.map(str::to_string),
            unboxed: None,
        }
    }

    fn attention() -> AttemptResult {
        AttemptResult::NeedsAttention {
            usage: Usage::default(),
            model: None,
            artifacts: vec![],
            reason: "r".into(),
        }
    }

    fn no_final_text() -> AttemptResult {
        AttemptResult::NoFinalText {
            usage: Usage::default(),
            model: None,
            artifacts: vec![],
        }
    }

    /// A stop comes first, then a failed job, then the worker's record: missing, another
    /// worker's, an error, no result; a result commit is taken only for a success.
    #[test]
    fn the_end_of_an_attempt_is_decided_in_order() {
        let failed_job = || Phase::Failed {
            error: "Slurm job 7 ended TIMEOUT".into(),
            retryable: true,
            reason: "timeout".into(),
        };
        let with = |r: AttemptResult, commit: Option<&str>| {
            let result = Some(r.clone());
            (Ok(Some(fin(Some(r), commit, None))), result)
        };
        type Case = (
            &'static str,
            Option<String>,
            Phase,
            (Result<Option<Final>, String>, Option<AttemptResult>),
            Result<Option<&'static str>, (&'static str, bool, &'static str)>,
        );
        let table: Vec<Case> = vec![
            (
                "stopped",
                Some("the user cancelled".into()),
                failed_job(),
                with(attention(), Some("c")),
                Err(("the user cancelled", false, "cancelled")),
            ),
            (
                "failed job",
                None,
                failed_job(),
                with(attention(), Some("c")),
                Err(("Slurm job 7 ended TIMEOUT", true, "timeout")),
            ),
            (
                "no final record",
                None,
                Phase::Ended,
                (Ok(None), None),
                Err((
                    "the Slurm job 7 ended without the worker's final record (see /s/job.out)",
                    true,
                    "worker",
                )),
            ),
            (
                "another worker's record",
                None,
                Phase::Ended,
                (Err("stale".into()), None),
                Err(("stale", true, "stale_token")),
            ),
            (
                "the worker failed",
                None,
                Phase::Ended,
                (Ok(Some(fin(None, None, Some("no checkout")))), None),
                Err(("crew-worker on n1: no checkout", true, "worker")),
            ),
            (
                "no result",
                None,
                Phase::Ended,
                (Ok(Some(fin(None, None, None))), None),
                Err(("crew-worker on n1 reported no result", true, "worker")),
            ),
            (
                "a success with a commit",
                None,
                Phase::Ended,
                with(attention(), Some("c")),
                Ok(Some("c")),
            ),
            (
                "no final text with a commit",
                None,
                Phase::Ended,
                with(no_final_text(), Some("c")),
                Ok(None),
            ),
            (
                "a success without a commit",
                None,
                Phase::Ended,
                with(attention(), None),
                Ok(None),
            ),
        ];
        for (what, stopped, ended, (fin, result), want) in table {
            let got = end(stopped, ended, fin, result, 7, Path::new("/s"))
                .map(|(_, commit)| commit)
                .map_err(|f| (f.error, f.retryable, f.reason));
            let want = want
                .map(|c| c.map(str::to_string))
                .map_err(|(e, r, why)| (e.to_string(), r, why.to_string()));
            assert_eq!(got, want, "{what}");
        }
    }
}
