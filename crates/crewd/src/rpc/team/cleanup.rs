//! Forgetting runs: one (`forget`) or the oldest (`prune`); their files and worktrees go once
//! the journal has the change, and the answer comes when they are gone, naming what was kept
//! (`workspace/cleanup.rs`).

use super::{check_id, with_run, Out, P};
use crate::rpc::{views, Ctx};
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use std::sync::Arc;

pub(super) async fn forget(ctx: Arc<Ctx>, p: P<TeamForget>) -> Out<TeamForget> {
    check_id("runId", &p.run_id)?;
    let force = p.force.unwrap_or(false);
    // A run that cannot be forgotten (still running) says so first: its worktrees have
    // uncommitted work because it is working in them, and forcing would not help.
    {
        let id = p.run_id.clone();
        super::on_run(&ctx, &p.run_id, super::Access::Read, move |core| {
            core.state
                .forget(&id)
                .map(|_| ())
                .map_err(views::core_error)
        })
        .await?;
    }
    if !force {
        let dirty = crate::workspace::cleanup::uncommitted(&ctx.shared, &p.run_id).await;
        if !dirty.is_empty() {
            return Err(ApiError::invalid_state(format!(
                "run {} has worktrees with uncommitted work: {}; forget with force to \
                 delete them",
                p.run_id,
                dirty.join(", ")
            )));
        }
    }
    let (recorded, repo) = with_run(&ctx, &p.run_id, |r| {
        (
            crate::workspace::cleanup::recorded_tips(r),
            crate::workspace::cleanup::repo_of_run(r),
        )
    })
    .await?;
    let shared = ctx.shared.clone();
    let run_id = p.run_id.clone();
    ctx.actor
        .mutate(move |core| {
            let events = core.state.forget(&p.run_id).map_err(views::core_error)?;
            core.emit_all(events);
            let id = p.run_id.clone();
            core.after_commit(move |res| {
                if res.is_ok() {
                    crate::forget::remove_run_data(&shared, &id);
                }
            });
            Ok(())
        })
        .await?;
    let forgotten = crate::workspace::cleanup::Forgotten {
        run_id,
        recorded,
        repo,
    };
    let notes =
        crate::workspace::cleanup::after_forget(ctx.shared.clone(), vec![forgotten], force).await;
    Ok(ForgetResult { notes })
}

pub(super) async fn prune(ctx: Arc<Ctx>, p: P<TeamPrune>) -> Out<TeamPrune> {
    let keep = p.keep.unwrap_or(20);
    if keep < 0 {
        return Err(ApiError::invalid_params("keep", "must not be negative"));
    }
    let older = match p.older_than_ms {
        None => None,
        Some(ms) if ms < 0 => {
            return Err(ApiError::invalid_params(
                "olderThanMs",
                "must not be negative",
            ))
        }
        // Checked: a cutoff before the earliest instant chrono can hold is refused, not a
        // panic in the handler.
        Some(ms) => Some(
            chrono::TimeDelta::try_milliseconds(ms)
                .and_then(|age| chrono::Utc::now().checked_sub_signed(age))
                .ok_or_else(|| ApiError::invalid_params("olderThanMs", "is too large"))?,
        ),
    };
    let force = p.force.unwrap_or(false);
    // What each run to prune knows of its repository and branch tips, as forget has it: an
    // evicted run (any finished run after a restart) is loaded for it, or a branch crew
    // adopted from the user would be taken for someone else's commit and kept.
    let victims = ctx
        .actor
        .call(move |core| {
            core.state
                .prune(keep as usize, older)
                .map_err(views::core_error)
        })
        .await?;
    let mut known = std::collections::BTreeMap::new();
    for id in &victims {
        let found = with_run(&ctx, id, |r| {
            (
                crate::workspace::cleanup::recorded_tips(r),
                crate::workspace::cleanup::repo_of_run(r),
            )
        })
        .await;
        if let Ok(found) = found {
            known.insert(id.clone(), found);
        }
    }
    let shared = ctx.shared.clone();
    let (mut pruned, runs) = ctx
        .actor
        .mutate(move |core| {
            let victims = core
                .state
                .prune(keep as usize, older)
                .map_err(views::core_error)?;
            // A run that came to be pruned meanwhile goes by what is resident, else by the
            // file beside its worktrees.
            let runs: Vec<crate::workspace::cleanup::Forgotten> = victims
                .iter()
                .map(|id| {
                    let (recorded, repo) = known.remove(id).unwrap_or_else(|| {
                        let run = core.state.run(id);
                        (
                            run.map(crate::workspace::cleanup::recorded_tips)
                                .unwrap_or_default(),
                            run.and_then(crate::workspace::cleanup::repo_of_run),
                        )
                    });
                    crate::workspace::cleanup::Forgotten {
                        run_id: id.clone(),
                        recorded,
                        repo,
                    }
                })
                .collect();
            for id in &victims {
                if let Ok(evs) = core.state.forget(id) {
                    core.emit_all(evs);
                }
            }
            let kept = core.state.summaries.len() as u64;
            let ids = victims.clone();
            core.after_commit(move |res| {
                if res.is_ok() {
                    for id in &ids {
                        crate::forget::remove_run_data(&shared, id);
                    }
                }
            });
            Ok((
                PruneResult {
                    removed: victims,
                    kept,
                    notes: Vec::new(),
                },
                runs,
            ))
        })
        .await?;
    pruned.notes = crate::workspace::cleanup::after_forget(ctx.shared.clone(), runs, force).await;
    Ok(pruned)
}
