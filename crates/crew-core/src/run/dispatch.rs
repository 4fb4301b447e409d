//! Streaming dispatch: which queued tasks start now.
//!
//! A task is ready the moment every task it depends on is `completed` (no wave barriers). Each
//! run may use up to its concurrency; the daemon-wide `max_workers` slots are handed out
//! round-robin between runs, one task per run per round, so one big run cannot starve others.

use super::event::{EventBody, Pending};
use super::types::{Approval, RunState, TaskStatus};
use super::State;
use chrono::{DateTime, Utc};

/// A task the daemon should start, with the `task.started` event to journal first.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
    pub event: Pending,
}

fn ready<'a>(
    run: &'a RunState,
    now: DateTime<Utc>,
    held: &'a dyn Fn(&str, &str) -> bool,
) -> impl Iterator<Item = usize> + 'a {
    run.tasks.iter().enumerate().filter_map(move |(i, t)| {
        let ok = t.status == TaskStatus::Queued
            && t.not_before().is_none_or(|nb| nb <= now)
            && !held(&run.id, &t.plan.id)
            && t.plan.depends_on.iter().all(|d| {
                run.task(d).is_some_and(|dt| {
                    dt.status == TaskStatus::Completed
                        || super::candidates::dep_settled(&t.plan, dt)
                })
            })
            && super::candidates::may_start(run, t)
            && !(super::fanout::needs_approval(t)
                && matches!(
                    run.approval,
                    Approval::Required | Approval::Pending | Approval::Rejected
                ));
        ok.then_some(i)
    })
}

/// Shared mode (pi-crew's `serializeOnPathOverlap`): a task whose scope overlaps the scope of
/// a task of the run that is running, or picked in this round, waits. Only scoped tasks are
/// compared (`scope::overlap`); in worktree mode each task has its own tree and nothing waits.
fn scope_busy(run: &RunState, i: usize, picked: &[usize]) -> bool {
    if run.spec.workspace.is_some() {
        return false;
    }
    let Some(t) = run.tasks.get(i) else {
        return false;
    };
    if t.plan.scope.is_empty() {
        return false;
    }
    run.tasks.iter().enumerate().any(|(j, o)| {
        j != i
            && (o.status == TaskStatus::Running || picked.contains(&j))
            && crate::scope::overlap(&t.plan.scope, &o.plan.scope)
    })
}

impl State {
    /// Pick the tasks to start now. The caller applies each `event` before the next call.
    pub fn dispatch(&mut self, now: DateTime<Utc>, max_workers: usize) -> Vec<Start> {
        self.dispatch_pooled(now, &[max_workers], &|_| 0, &|_, _| false)
    }

    /// `dispatch` with several worker pools: each run's workers count against the pool
    /// `pool_of` names (an index into `caps`, the pools' sizes; out of range is the last), so
    /// runs placed on a cluster have slots of their own beside the machine's.
    ///
    /// `held(run, task)`: a queued task that may not start yet for a reason only the daemon
    /// knows (a worker of its last attempt is still on its way out, in the task's one working
    /// tree).
    pub fn dispatch_pooled(
        &mut self,
        now: DateTime<Utc>,
        caps: &[usize],
        pool_of: &dyn Fn(&RunState) -> usize,
        held: &dyn Fn(&str, &str) -> bool,
    ) -> Vec<Start> {
        let last = caps.len().saturating_sub(1);
        let mut free: Vec<usize> = caps.to_vec();
        if let [only] = free.as_mut_slice() {
            *only = only.saturating_sub(self.workers_running());
        } else {
            for id in &self.active {
                if let Some(run) = self.runs.get(id) {
                    if let Some(f) = free.get_mut(pool_of(run).min(last)) {
                        *f = f.saturating_sub(self.running_in(id));
                    }
                }
            }
        }
        if free.iter().all(|f| *f == 0) {
            return vec![];
        }
        // Runs in round-robin order starting after the last one served.
        let mut order: Vec<&String> = self.active.iter().collect();
        if let Some(after) = &self.rr_after {
            let split = order
                .iter()
                .position(|id| id.as_str() > after.as_str())
                .unwrap_or(order.len());
            order.rotate_left(split);
        }
        let mut picks: Vec<(String, usize)> = Vec::new();
        let mut taken: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        loop {
            let mut progressed = false;
            for id in &order {
                if free.iter().all(|f| *f == 0) {
                    break;
                }
                let Some(run) = self.runs.get(id.as_str()) else {
                    continue;
                };
                if run.halted || run.status.is_finished() {
                    continue;
                }
                let pool = pool_of(run).min(last);
                if free.get(pool).is_none_or(|f| *f == 0) {
                    continue;
                }
                let mine = taken.entry(id.as_str()).or_default();
                if self.running_in(id) + mine.len() >= run.spec.concurrency as usize {
                    continue;
                }
                if let Some(i) =
                    ready(run, now, held).find(|i| !mine.contains(i) && !scope_busy(run, *i, mine))
                {
                    mine.push(i);
                    picks.push(((*id).clone(), i));
                    if let Some(f) = free.get_mut(pool) {
                        *f = f.saturating_sub(1);
                    }
                    progressed = true;
                }
            }
            if !progressed || free.iter().all(|f| *f == 0) {
                break;
            }
        }
        if let Some((last, _)) = picks.last() {
            self.rr_after = Some(last.clone());
        }
        picks
            .into_iter()
            .filter_map(|(run_id, i)| {
                let run = self.runs.get(&run_id)?;
                let t = run.tasks.get(i)?;
                // The count is the journal's (a damaged one may hold anything): saturates.
                let attempt = t.attempts.saturating_add(1);
                let model = run.attempt_model(t);
                let event = Pending::task(
                    &run_id,
                    &t.plan.id,
                    EventBody::TaskStarted {
                        attempt,
                        runtime: super::candidates::runtime_of(&t.plan)
                            .unwrap_or(&run.spec.runtime)
                            .to_string(),
                        model,
                        artifacts: vec![],
                    },
                );
                Some(Start {
                    run_id,
                    task_id: t.plan.id.to_string(),
                    attempt,
                    event,
                })
            })
            .collect()
    }

    /// The earliest instant strictly after `after` at which a backed-off task becomes
    /// startable. The daemon passes its last dispatch time: a task due before that was seen
    /// by that dispatch (and waits for a slot, which a finishing task frees and dispatches
    /// anyway); one due after it needs a wake-up.
    pub fn next_wakeup(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.active
            .iter()
            .filter_map(|id| self.runs.get(id))
            .filter_map(|r| r.next_backoff_after(after))
            .min()
    }
}
