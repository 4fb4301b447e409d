//! The actor's side of workers: starting them after `task.started` is durable, and turning
//! their reports into state changes.

use crate::actor::Core;
use crate::executor::{self, AttemptSpec, Report};
use crew_core::run::{AttemptResult, RetryPolicy, TaskStatus};
use crew_core::usage::Usage;
use tokio::sync::mpsc;

pub enum WorkerCtl {
    Stop { reason: String },
    Steer(String),
}

pub struct WorkerHandle {
    pub attempt: u32,
    pub ctl: mpsc::UnboundedSender<WorkerCtl>,
    /// The worker reads steering messages live (pi rpc mode).
    pub live: bool,
}

/// Start every task that may start now.
pub fn dispatch(core: &mut Core, now: chrono::DateTime<chrono::Utc>) {
    let starts = core.state.dispatch(now, core.shared.config.max_workers);
    for s in starts {
        let Some(spec) = attempt_spec(core, &s.run_id, &s.task_id, s.attempt) else {
            continue;
        };
        core.emit(s.event);
        let (tx, rx) = mpsc::unbounded_channel();
        let live = spec.runtime.rpc;
        core.workers.insert(
            (s.run_id.clone(), s.task_id.clone()),
            WorkerHandle {
                attempt: s.attempt,
                ctl: tx,
                live,
            },
        );
        let actor = core.actor.clone();
        let shared = core.shared.clone();
        // Commit callbacks run on the journal writer thread: spawn onto the daemon's runtime.
        let rt = tokio::runtime::Handle::current();
        core.after_commit(move |res| match res {
            Ok(()) => {
                rt.spawn(executor::run_attempt(shared, actor, spec, rx));
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
                        reason: "storage".into(),
                    },
                };
                actor.tell(move |core| on_finished(core, report));
            }
        });
    }
}

/// Everything the worker needs, frozen now (on the actor, where the state is consistent). The
/// worker reads dependency outputs and renders the prompt itself, so the actor does no I/O.
fn attempt_spec(core: &Core, run_id: &str, task_id: &str, attempt: u32) -> Option<AttemptSpec> {
    let run = core.state.run(run_id)?;
    let task = run.task(task_id)?;
    let runtime = core.shared.config.runtime(&run.spec.runtime)?;
    let deps = task
        .plan
        .depends_on
        .iter()
        .filter_map(|d| run.task(d).map(|dt| (d.clone(), dt.plan.role.clone())))
        .collect();
    Some(AttemptSpec {
        run_id: run_id.to_string(),
        task_id: task_id.to_string(),
        attempt,
        cwd: run.spec.cwd.clone(),
        goal: run.spec.goal.clone(),
        runtime_name: run.spec.runtime.clone(),
        runtime,
        plan: task.plan.clone(),
        model: run.spec.model.clone().or_else(|| task.plan.model.clone()),
        deps,
        steers: task.pending_steers().to_vec(),
        answers: task.answers().to_vec(),
        run_dir: core.shared.run_dir(run_id),
        reuse: run.spec.reuse,
        workspace: crate::workspace::task_workspace(run, task, attempt),
    })
}

/// A worker reported its pid.
pub fn on_spawned(
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

pub fn on_progress(
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

pub fn on_finished(core: &mut Core, report: Report) {
    let key = (report.run_id.clone(), report.task_id.clone());
    if core
        .workers
        .get(&key)
        .is_some_and(|h| h.attempt == report.attempt)
    {
        core.workers.remove(&key);
    }
    let still_running = core
        .state
        .run(&report.run_id)
        .and_then(|r| r.task(&report.task_id))
        .is_some_and(|t| t.status == TaskStatus::Running && t.attempts == report.attempt);
    if !still_running {
        return;
    }
    let result: AttemptResult = report.result;
    let ps = core.state.finish_attempt(
        &report.run_id,
        &report.task_id,
        report.attempt,
        result,
        core.now(),
        &RetryPolicy::default(),
        rand::random::<f64>(),
    );
    core.emit_all(ps);
    core.touch(&report.run_id);
}
