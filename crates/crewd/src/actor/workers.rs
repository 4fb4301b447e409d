//! The actor's side of workers: starting them after `task.started` is durable, and turning
//! their reports into state changes.

use super::Actor;
use super::Core;
use crate::attempt::{AttemptKey, AttemptSpec, Port, Report, WorkerCtl};
use crate::executor;
use crate::placement::LedgerError;
use crew_core::run::{AttemptResult, RetryPolicy, TaskStatus};
use crew_core::usage::Usage;
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct WorkerHandle {
    pub attempt: u32,
    pub ctl: mpsc::UnboundedSender<WorkerCtl>,
    /// The worker reads steering messages live (pi's rpc mode, Claude Code's stream-json input),
    /// until it has answered.
    pub live: bool,
    /// A live worker gave its final answer and is on its way out.
    pub answered: bool,
}

/// Start every task that may start now.
pub fn dispatch(core: &mut Core, now: chrono::DateTime<chrono::Utc>) {
    let stopping = &core.stopping;
    let held = |run: &str, task: &str| {
        !stopping.is_empty() && stopping.contains_key(&(run.to_string(), task.to_string()))
    };
    let starts = crate::placement::dispatch(&mut core.state, &core.shared.config, now, &held);
    for s in starts {
        let spec = match attempt_spec(core, &s.run_id, &s.task_id, s.attempt) {
            Ok(spec) => spec,
            // The task starts and its attempt fails at once: skipping it would leave it
            // queued, picked again by every dispatch, and never run.
            Err(error) => {
                core.emit(s.event);
                tracing::warn!(run = %s.run_id, task = %s.task_id, %error, "cannot start a worker");
                let report = Report {
                    run_id: s.run_id,
                    task_id: s.task_id,
                    attempt: s.attempt,
                    result: AttemptResult::Failed {
                        usage: Usage::default(),
                        model: None,
                        artifacts: vec![],
                        error,
                        retryable: false,
                        reason: crew_core::run::FailReason::Spawn.into(),
                    },
                    answer: None,
                    conflict: None,
                };
                core.actor.tell(move |core| on_finished(core, report));
                continue;
            }
        };
        core.emit(s.event);
        let (tx, rx) = mpsc::unbounded_channel();
        let live = spec.runtime.rpc();
        core.workers.insert(
            (s.run_id.clone(), s.task_id.clone()),
            WorkerHandle {
                attempt: s.attempt,
                ctl: tx,
                live,
                answered: false,
            },
        );
        let actor = core.actor.clone();
        let shared = core.shared.clone();
        // Commit callbacks run on the journal writer thread: spawn onto the daemon's runtime.
        let rt = tokio::runtime::Handle::current();
        core.after_commit(move |res| match res {
            Ok(()) => {
                let actor = Arc::new(actor);
                rt.spawn(executor::run_attempt(
                    shared,
                    actor.clone(),
                    actor,
                    spec,
                    rx,
                ));
            }
            // `task.started` is applied but not durable: no worker may run for it. The attempt
            // ends as a retryable failure, so the task does not stay `running` with nothing
            // behind it.
            Err(e) => {
                let report = Report {
                    run_id: spec.run_id,
                    task_id: spec.task_id,
                    attempt: spec.attempt,
                    result: AttemptResult::Failed {
                        usage: Usage::default(),
                        model: None,
                        artifacts: vec![],
                        error: format!("the task start could not be journaled: {e}"),
                        retryable: true,
                        reason: crew_core::run::FailReason::NotJournaled.into(),
                    },
                    answer: None,
                    conflict: None,
                };
                actor.tell(move |core| on_finished(core, report));
            }
        });
    }
}

/// Follow a running task's attempt again after a restart (its worker outlived the daemon: a
/// Slurm job). No event: the task is still `running` in this attempt; the attempt's worker
/// starts once what recovery emitted is durable.
pub fn reattach(core: &mut Core, run_id: &str, task_id: &str) {
    let Some(attempt) = core
        .state
        .run(run_id)
        .and_then(|r| r.task(task_id))
        .map(|t| t.attempts)
    else {
        return;
    };
    let spec = match attempt_spec(core, run_id, task_id, attempt) {
        Ok(spec) => spec,
        Err(error) => {
            let report = Report {
                run_id: run_id.to_string(),
                task_id: task_id.to_string(),
                attempt,
                result: AttemptResult::Failed {
                    usage: Usage::default(),
                    model: None,
                    artifacts: vec![],
                    error,
                    retryable: true,
                    reason: "spawn".into(),
                },
                answer: None,
                conflict: None,
            };
            core.actor.tell(move |core| on_finished(core, report));
            return;
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    core.workers.insert(
        (run_id.to_string(), task_id.to_string()),
        WorkerHandle {
            attempt,
            ctl: tx,
            live: spec.runtime.rpc(),
            answered: false,
        },
    );
    let actor = core.actor.clone();
    let shared = core.shared.clone();
    let rt = tokio::runtime::Handle::current();
    core.after_commit(move |_| {
        let actor = Arc::new(actor);
        rt.spawn(executor::run_attempt(
            shared,
            actor.clone(),
            actor,
            spec,
            rx,
        ));
    });
}

/// Everything the worker needs, frozen now (on the actor, where the state is consistent). The
/// worker reads dependency outputs and renders the prompt itself, so the actor does no I/O.
fn attempt_spec(
    core: &Core,
    run_id: &str,
    task_id: &str,
    attempt: u32,
) -> Result<AttemptSpec, String> {
    executor::fault::hit("spec").map_err(|e| e.to_string())?;
    let run = core
        .state
        .run(run_id)
        .ok_or_else(|| format!("run {run_id} is not loaded"))?;
    let task = run
        .task(task_id)
        .ok_or_else(|| format!("run {run_id} has no task {task_id}"))?;
    // A candidate may run on a runtime of its own (issue 36).
    let runtime_name = crew_core::run::candidates::task_runtime(run, task).to_string();
    let runtime =
        core.shared.config.runtime(&runtime_name).ok_or_else(|| {
            format!("the runtime `{runtime_name}` is not configured in this daemon")
        })?;
    let deps = task
        .plan
        .depends_on
        .iter()
        // A judging selector is shown its candidates' answers in its own section, bounded
        // all together (`candidates::prompt_section`), not as dependency outputs.
        .filter(|d| !crew_core::run::candidates::is_own_candidate(&task.plan, d))
        .filter_map(|d| {
            let dt = run.task(d)?;
            // A step with candidates is its chosen candidate's work, not its judge's.
            let chosen = dt.choice().and_then(|ch| run.task(&ch.candidate));
            Some((d.to_string(), chosen.unwrap_or(dt).plan.role.clone()))
        })
        .collect();
    let job_shape = crate::placement::slurm::task_shape(
        &core.shared.config,
        &run.spec,
        &task.plan,
        &runtime_name,
    );
    Ok(AttemptSpec {
        run_id: run_id.to_string(),
        task_id: task_id.to_string(),
        attempt,
        cwd: run.spec.cwd.clone(),
        goal: run.spec.goal.clone(),
        runtime_name,
        runtime,
        plan: task.plan.clone(),
        // The model `task.started` named: the task's own, or the fallback it moved on to.
        model: run.attempt_model(task),
        fallback_models: run.later_fallbacks(task).to_vec(),
        deps,
        steers: task.pending_steers().to_vec(),
        answers: task.answers().to_vec(),
        // The attempt after an answer continues the session that asked, with the answer.
        resume: task
            .session()
            .zip(task.answers().last())
            .map(|(session, answer)| crate::attempt::Resume {
                session: session.to_string(),
                answer: answer.clone(),
            }),
        run_dir: core
            .shared
            .run_dir(&crew_core::ids::SafeId::new(run_id).map_err(|e| format!("run id: {e}"))?),
        reuse: run.spec.reuse,
        workspace: crate::workspace::task_workspace(run, task, attempt),
        feedback: task.feedback().map(str::to_string),
        cache_after_commit: Default::default(),
        fan_out_repair: task.fan_out_repair().map(str::to_string),
        verdict_repair: task.verdict_repair().map(str::to_string),
        judge_base: run
            .spec
            .workspace
            .as_ref()
            .filter(|_| task.plan.judging.judge)
            .map(|w| w.base.clone()),
        task_verify_commands: run.spec.task_verify_commands.clone(),
        job: task.job().cloned(),
        job_shape,
        candidates: crew_core::run::candidates::shown(run, task),
        verify_retries_used: task.rare().verify_retries,
        sources: sources(run, task),
    })
}

/// What a task reads of a step with candidates is its chosen candidate's (issue 36): the
/// dependency's result and the `reads:` of the step's artifact.
fn sources(
    run: &crew_core::run::RunState,
    task: &crew_core::run::TaskState,
) -> Vec<(String, String)> {
    use crew_core::run::candidates as c;
    let results = task.plan.depends_on.iter().filter_map(|d| {
        let chosen = run
            .task(d)
            .filter(|dt| c::selector(&dt.plan).is_some())?
            .choice()?;
        // By the task it names (its id a checked path part), never the choice's text.
        let chosen = run.task(&chosen.candidate)?;
        Some((
            format!("results/{d}.txt"),
            format!("results/{}.txt", chosen.plan.id),
        ))
    });
    let reads = task.plan.reads.iter().filter_map(|r| {
        c::output_source(run, r).map(|from| (format!("shared/{r}"), format!("shared/{from}")))
    });
    results.chain(reads).collect()
}

/// The port a worker reports through: each note becomes a message to the actor, applied there.
impl Port for Actor {
    fn spawned(&self, key: &AttemptKey, pid: u32, pid_start: u64, live: bool) {
        let k = key.clone();
        self.tell(move |core| {
            on_spawned(core, &k.run_id, &k.task_id, k.attempt, pid, pid_start, live)
        });
    }

    fn progress(&self, key: &AttemptKey, usage: Usage, tool: Option<String>) {
        let k = key.clone();
        self.tell(move |core| on_progress(core, &k.run_id, &k.task_id, k.attempt, usage, tool));
    }

    fn warning(&self, key: &AttemptKey, tool: String, message: String) {
        let k = key.clone();
        self.tell(move |core| on_warning(core, &k.run_id, &k.task_id, k.attempt, tool, message));
    }

    fn answered(&self, key: &AttemptKey) {
        let k = key.clone();
        self.tell(move |core| {
            if let Some(h) = core.workers.get_mut(&(k.run_id, k.task_id)) {
                if h.attempt == k.attempt {
                    h.live = false;
                    h.answered = true;
                }
            }
        });
    }

    fn finished(&self, report: Report) {
        self.tell(move |core| on_finished(core, report));
    }
}

/// A remote attempt journals its job: the answer comes once the event is durable.
impl crate::placement::JobLedger for Actor {
    fn submitting(
        &self,
        key: &AttemptKey,
        job: crew_core::run::RemoteJob,
    ) -> BoxFuture<'static, Result<(), LedgerError>> {
        let (actor, k) = (self.clone(), key.clone());
        Box::pin(async move {
            let emitted = actor.mutate(move |core| {
                let p = core.state.worker_submitting(
                    &k.run_id,
                    &k.task_id,
                    k.attempt,
                    job.name,
                    job.staging,
                );
                Ok(p.map(|p| core.emit(p)).is_some())
            });
            ledger_answer(emitted.await)
        })
    }

    fn submitted(
        &self,
        key: &AttemptKey,
        job_id: u64,
    ) -> BoxFuture<'static, Result<(), LedgerError>> {
        let (actor, k) = (self.clone(), key.clone());
        Box::pin(async move {
            let emitted = actor.mutate(move |core| {
                let p = core
                    .state
                    .worker_submitted(&k.run_id, &k.task_id, k.attempt, job_id);
                Ok(p.map(|p| core.emit(p)).is_some())
            });
            ledger_answer(emitted.await)
        })
    }
}

fn ledger_answer(r: Result<bool, crew_api::ApiError>) -> Result<(), LedgerError> {
    match r {
        Ok(true) => Ok(()),
        Ok(false) => Err(LedgerError::Refused),
        Err(e) => Err(LedgerError::Storage(e.message)),
    }
}

/// A worker reported its pid.
fn on_spawned(
    core: &mut Core,
    run: &str,
    task: &str,
    attempt: u32,
    pid: u32,
    pid_start: u64,
    live: bool,
) {
    if let Some(p) = core
        .state
        .worker_spawned(run, task, attempt, pid, pid_start, live)
    {
        core.emit(p);
    }
}

fn on_progress(
    core: &mut Core,
    run: &str,
    task: &str,
    attempt: u32,
    usage: Usage,
    tool: Option<String>,
) {
    if let Some(p) = core.state.progress(run, task, attempt, usage, tool) {
        core.emit(p);
    }
}

/// The worker's CLI refused a tool call: a `task.warning`.
fn on_warning(core: &mut Core, run: &str, task: &str, attempt: u32, tool: String, message: String) {
    if let Some(p) = core.state.warning(run, task, attempt, tool, message) {
        core.emit(p);
    }
}

pub fn on_finished(core: &mut Core, report: Report) {
    let key = (report.run_id.clone(), report.task_id.clone());
    if core
        .workers
        .get(&key)
        .is_some_and(|h| h.attempt == report.attempt)
    {
        core.workers.remove(&key);
    }
    if core.stopping.get(&key) == Some(&report.attempt) {
        // The task may start its next attempt now.
        core.stopping.remove(&key);
        core.touch(&report.run_id);
    }
    let still_running = core
        .state
        .run(&report.run_id)
        .and_then(|r| r.task(&report.task_id))
        .is_some_and(|t| t.status == TaskStatus::Running && t.attempts == report.attempt);
    if !still_running {
        return;
    }
    // The merge of its inputs conflicts: a resolver takes it, in a run that says so.
    if let Some(conflict) = &report.conflict {
        let ps = core.state.on_conflict(
            &report.run_id,
            Some(&report.task_id),
            report.attempt,
            conflict,
        );
        if !ps.is_empty() {
            core.emit_all(ps);
            core.touch(&report.run_id);
            return;
        }
    }
    let result: AttemptResult = report.result;
    // A fan-out step's answer is checked here, where the run's task ids are known; a valid
    // block adds its tasks in the same batch as the completion.
    let ps = core.state.finish_fan_out(
        &report.run_id,
        &report.task_id,
        report.attempt,
        result,
        report.answer.as_ref(),
        core.now(),
        &RetryPolicy::default(),
        rand::random::<f64>(),
    );
    core.emit_all(ps);
    core.touch(&report.run_id);
}
