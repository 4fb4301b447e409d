//! The actor's side of integrating a worktree run: which runs are ready (every task completed,
//! nothing merged yet), the merge started off the actor (`workspace::integrate`), and its
//! outcome journaled back as `run.integrated` or `run.blocked`.

use super::Core;
use crate::workspace;
use crew_core::run::workspace::leaf_tasks;
use crew_core::run::{EventBody, Pending, RunState, RunStatus, TaskStatus};
use std::collections::BTreeSet;

/// Runs whose tasks all completed and whose results are not merged yet get their integration
/// started (once: `Core::integrating` holds the ones under way).
pub fn integrate_ready(core: &mut Core, touched: &BTreeSet<String>) {
    for id in touched {
        let Some(run) = core.state.run(id) else {
            continue;
        };
        let Some(ws) = run.spec.workspace.clone() else {
            continue;
        };
        if run.status != RunStatus::Running
            || run.integration.is_some()
            || core.integrating.contains(id)
            || !all_done(run)
        {
            continue;
        }
        let leaves = leaves_of(run, &ws.base);
        let starts: Vec<(String, String, String)> = run
            .tasks
            .iter()
            .filter_map(|t| {
                t.commit()
                    .map(|c| (t.plan.id.to_string(), c.start.clone(), c.commit.clone()))
            })
            .collect();
        core.integrating.insert(id.clone());
        let shared = core.shared.clone();
        let actor = core.actor.clone();
        let run_id = id.clone();
        tokio::spawn(async move {
            let outcome = workspace::integrate(&shared, &run_id, &ws, &leaves, &starts).await;
            let (merged, base) = (leaves, ws.base);
            actor.tell(move |core| {
                core.integrating.remove(&run_id);
                // Still what was merged: a task retried or picked while the merge ran (off the
                // actor) makes it stale; the run integrates again once its tasks are done.
                let still = core.state.run(&run_id).is_some_and(|r| {
                    r.status == RunStatus::Running
                        && r.integration.is_none()
                        && all_done(r)
                        && leaves_of(r, &base) == merged
                });
                if !still {
                    core.touch(&run_id);
                    return;
                }
                let ps = match outcome {
                    Ok(i) => vec![Pending::run(&run_id, EventBody::RunIntegrated(Box::new(i)))],
                    Err(blocked) => {
                        // A conflict of the leaves goes to a resolver, in a run that says so.
                        let resolving = blocked
                            .conflict
                            .as_ref()
                            .map_or_else(Vec::new, |c| core.state.on_conflict(&run_id, None, 0, c));
                        if resolving.is_empty() {
                            vec![Pending::run(
                                &run_id,
                                EventBody::RunBlocked {
                                    reason: blocked.reason,
                                },
                            )
                            .with_message("integration needs attention")]
                        } else {
                            resolving
                        }
                    }
                };
                core.emit_all(ps);
                core.touch(&run_id);
            });
        });
    }
}

/// Every task completed (a candidate set aside by its selector's choice is no part of the
/// result).
fn all_done(run: &RunState) -> bool {
    run.tasks
        .iter()
        .all(|t| t.status == TaskStatus::Completed || crew_core::run::candidates::set_aside(t))
}

/// The leaf tasks and the commits of theirs the integration merges (`base` for a leaf that
/// changed nothing).
fn leaves_of(run: &RunState, base: &str) -> Vec<(String, String)> {
    leaf_tasks(run)
        .iter()
        .map(|t| {
            let commit = t
                .commit()
                .map_or_else(|| base.to_string(), |c| c.commit.clone());
            (t.plan.id.to_string(), commit)
        })
        .collect()
}
