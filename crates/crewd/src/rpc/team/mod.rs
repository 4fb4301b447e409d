//! `team.*` (except the subscription, in `subscribe.rs`): a table of named handlers, one file
//! per family (runs, talking to tasks, reading, cleanup, worktrees, bundles). This module keeps
//! what they share: id checks and the ways to reach a run on the actor (`on_run`, `with_run`,
//! `change_run`).

mod bundles;
mod cleanup;
mod pick;
mod read;
mod runs;
mod talk;
mod worktree;

use super::{in_range, Out, P};
use super::{off_actor, register, views, Ctx};
use crate::actor::residency;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use crew_core::run::{CoreError, Pending, RunState};
use jsonrpsee::RpcModule;

pub(super) fn check_id(field: &str, id: &str) -> Result<crew_core::ids::SafeId, ApiError> {
    crew_core::ids::SafeId::new(id)
        .map_err(|_| ApiError::invalid_params(field, "must be 1-128 characters of A-Z a-z 0-9 _ -"))
}

/// An evicted run's details, loaded from the journal off the actor, not yet adopted.
async fn load_evicted(ctx: &Ctx, run_id: &str) -> Result<RunState, ApiError> {
    let shared = ctx.shared.clone();
    let id = run_id.to_string();
    off_actor(move || residency::load_run(&shared, &id))
        .await??
        .ok_or_else(|| ApiError::not_found("run", run_id))
}

/// Make sure the run exists and its details are in memory (load an evicted run).
pub(crate) async fn ensure_resident(ctx: &Ctx, run_id: &str) -> Result<(), ApiError> {
    on_run(ctx, run_id, Access::Read, |_| Ok(())).await
}

pub(crate) async fn with_run<R: Send + 'static>(
    ctx: &Ctx,
    run_id: &str,
    f: impl Fn(&RunState) -> R + Clone + Send + 'static,
) -> Result<R, ApiError> {
    let id = run_id.to_string();
    on_run(ctx, run_id, Access::Read, move |core| {
        core.state
            .run(&id)
            .map(&f)
            .ok_or_else(|| ApiError::not_found("run", &id))
    })
    .await
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Access {
    Read,
    Change,
}

/// What one actor turn of `on_run` found.
enum Turn<R> {
    Done(R),
    /// Known but evicted: load it and come back.
    Evicted,
}

/// Run `f` on the actor with the run's details resident, in one actor turn when the run is
/// resident (the common case). An evicted run is loaded off the actor and adopted in the same
/// turn that runs `f`: otherwise another request's load could evict it again in between (the
/// LRU bound) and a known run would be reported unknown. `f` runs at most once.
pub(crate) async fn on_run<R: Send + 'static>(
    ctx: &Ctx,
    run_id: &str,
    access: Access,
    f: impl Fn(&mut crate::actor::Core) -> Result<R, ApiError> + Clone + Send + 'static,
) -> Result<R, ApiError> {
    use std::sync::atomic::Ordering::Relaxed;
    check_id("runId", run_id)?;
    const ATTEMPTS: usize = 4;
    let mut loaded: Option<RunState> = None;
    for _ in 0..ATTEMPTS {
        let id = run_id.to_string();
        let f = f.clone();
        let first = loaded.is_none();
        let mut carry = loaded.take();
        let job = move |core: &mut crate::actor::Core| {
            if !core.state.summaries.contains_key(&id) {
                // Unknown, or forgotten while it was loading (not to be brought back).
                return Err(ApiError::not_found("run", &id));
            }
            if !core.state.runs.contains_key(&id) {
                match carry.take() {
                    Some(run) => residency::adopt(core, run),
                    None => return Ok(Turn::Evicted),
                }
            } else if first {
                core.shared.run_cache.hits.fetch_add(1, Relaxed);
                core.shared.run_cache.touch(&id);
            }
            f(core).map(Turn::Done)
        };
        let turn = match access {
            Access::Read => ctx.actor.call(job).await?,
            Access::Change => ctx.actor.mutate(job).await?,
        };
        match turn {
            Turn::Done(r) => return Ok(r),
            Turn::Evicted => {
                ctx.shared.run_cache.misses.fetch_add(1, Relaxed);
                loaded = Some(load_evicted(ctx, run_id).await?);
            }
        }
    }
    Err(ApiError::limit(format!(
        "run {run_id} was evicted {ATTEMPTS} times while loading; raise resident_runs"
    )))
}

/// A change to one run: the core decides the events (`decide`), the daemon emits them and
/// settles the run, and `answer` reads the reply from the state after the change.
pub(super) async fn change_run<T, R: Send + 'static>(
    ctx: &Ctx,
    run_id: &str,
    decide: impl Fn(&crew_core::run::State, &str) -> Result<(Vec<Pending>, T), CoreError>
        + Clone
        + Send
        + 'static,
    answer: impl Fn(&crate::actor::Core, &str, T) -> R + Clone + Send + 'static,
) -> Result<R, ApiError> {
    let id = run_id.to_string();
    on_run(ctx, run_id, Access::Change, move |core| {
        let (events, out) = decide(&core.state, &id).map_err(views::core_error)?;
        core.emit_all(events);
        core.touch(&id);
        Ok(answer(core, &id, out))
    })
    .await
}

pub(super) fn run_status_now(core: &crate::actor::Core, id: &str) -> RunStatus {
    core.state
        .summaries
        .get(id)
        .map(|s| views::run_status(s.status))
        .unwrap_or(RunStatus::Cancelled)
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<TeamPlan, _, _>(m, runs::plan);
    register::<TeamRun, _, _>(m, runs::run);
    register::<TeamStatus, _, _>(m, read::status);
    register::<TeamList, _, _>(m, read::list);
    register::<TeamCancel, _, _>(m, runs::cancel);
    register::<TeamResume, _, _>(m, runs::resume);
    register::<TeamRetry, _, _>(m, runs::retry);
    register::<TeamPick, _, _>(m, pick::pick);
    register::<TeamApprove, _, _>(m, runs::approve);
    register::<TeamReject, _, _>(m, runs::reject);
    register::<TeamSteer, _, _>(m, talk::steer);
    register::<TeamRespond, _, _>(m, talk::respond);
    register::<TeamWait, _, _>(m, talk::wait);
    register::<TeamEvents, _, _>(m, read::events);
    register::<TeamArtifacts, _, _>(m, read::artifacts);
    register::<TeamArtifact, _, _>(m, read::artifact);
    register::<TeamSummary, _, _>(m, read::summary);
    register::<TeamForget, _, _>(m, cleanup::forget);
    register::<TeamPrune, _, _>(m, cleanup::prune);
    register::<TeamDiff, _, _>(m, worktree::diff);
    register::<TeamApply, _, _>(m, worktree::apply);
    register::<TeamExport, _, _>(m, bundles::export);
    register::<TeamImport, _, _>(m, bundles::import);
}
