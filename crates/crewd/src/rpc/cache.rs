//! `cache.*`

use super::{register, Ctx};
use crew_api::methods::{CacheClear, CacheInvalidate, CacheStats};
use crew_api::types::*;
use crew_api::ApiError;
use jsonrpsee::RpcModule;
use std::sync::atomic::Ordering;
use std::sync::Arc;

async fn run_stats(ctx: &Arc<Ctx>) -> Result<CacheStat, ApiError> {
    let (entries, capacity) = ctx
        .actor
        .call(|core| {
            Ok((
                core.state
                    .runs
                    .values()
                    .filter(|r| r.status.is_finished())
                    .count() as u64,
                core.shared.config.resident_runs as u64,
            ))
        })
        .await?;
    let rc = &ctx.shared.run_cache;
    Ok(crate::resources::stat(
        rc.hits.load(Ordering::Relaxed),
        rc.misses.load(Ordering::Relaxed),
        rc.evictions.load(Ordering::Relaxed),
        entries,
        capacity,
    ))
}

/// Evict finished runs (all, or the one named); returns how many left memory.
async fn evict_runs(ctx: &Ctx, only: Option<String>) -> Result<u64, ApiError> {
    ctx.actor
        .call(move |core| {
            let ids: Vec<String> = match only {
                Some(id) => vec![id],
                None => core
                    .state
                    .runs
                    .values()
                    .filter(|r| r.status.is_finished())
                    .map(|r| r.id.clone())
                    .collect(),
            };
            let mut n = 0;
            for id in ids {
                if core.state.evict(&id) {
                    core.shared.run_cache.remove(&id);
                    n += 1;
                }
            }
            core.shared
                .run_cache
                .evictions
                .fetch_add(n, Ordering::Relaxed);
            Ok(n)
        })
        .await
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<CacheStats, _, _>(m, |ctx, _| async move {
        Ok(CacheStatsResult {
            resources: ctx.shared.resources.stats(),
            results: ctx.shared.results.stats(),
            runs: run_stats(&ctx).await?,
        })
    });
    register::<CacheClear, _, _>(m, |ctx, p| async move {
        let which = p.cache.unwrap_or(CacheName::All);
        if matches!(which, CacheName::Resources | CacheName::All) {
            ctx.shared.resources.clear();
        }
        if matches!(which, CacheName::Results | CacheName::All) {
            let shared = ctx.shared.clone();
            super::off_actor(move || shared.results.clear()).await?;
        }
        if matches!(which, CacheName::Runs | CacheName::All) {
            evict_runs(&ctx, None).await?;
            ctx.shared.run_cache.clear();
        }
        Ok(Empty {})
    });
    register::<CacheInvalidate, _, _>(m, |ctx, p| async move {
        match (p.path, p.run_id) {
            (Some(path), None) => {
                super::checks::absolute_path("path", &path)?;
                let path = std::path::PathBuf::from(path);
                let shared = ctx.shared.clone();
                let invalidated =
                    super::off_actor(move || shared.resources.invalidate(&path)).await?;
                Ok(InvalidateResult { invalidated })
            }
            (None, Some(run)) => {
                if !crew_core::ids::is_safe_id(&run) {
                    return Err(ApiError::invalid_params(
                        "runId",
                        "must be 1-128 characters of A-Z a-z 0-9 _ -",
                    ));
                }
                let id = run.clone();
                let known = ctx
                    .actor
                    .call(move |core| Ok(core.state.summaries.contains_key(&id)))
                    .await?;
                if !known {
                    return Err(ApiError::not_found("run", &run));
                }
                let shared = ctx.shared.clone();
                let id = run.clone();
                let mut n = super::off_actor(move || shared.results.invalidate_run(&id)).await?;
                n += evict_runs(&ctx, Some(run)).await?;
                Ok(InvalidateResult { invalidated: n })
            }
            _ => Err(ApiError::invalid_params(
                "path",
                "give exactly one of path or runId",
            )),
        }
    });
}
