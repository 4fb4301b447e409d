//! `cache.*`

use super::{register, Ctx};
use crew_api::methods::{CacheClear, CacheInvalidate, CacheStats};
use crew_api::types::*;
use crew_api::ApiError;
use jsonrpsee::RpcModule;
use std::sync::atomic::Ordering;

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<CacheStats, _, _>(m, |ctx, _| async move {
        let sh = ctx.shared.clone();
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
        Ok(CacheStatsResult {
            resources: sh.resources.stats(),
            results: sh.results.stats(),
            runs: crate::resources::stat(
                sh.run_cache.hits.load(Ordering::Relaxed),
                sh.run_cache.misses.load(Ordering::Relaxed),
                sh.run_cache.evictions.load(Ordering::Relaxed),
                entries,
                capacity,
            ),
        })
    });
    register::<CacheClear, _, _>(m, |ctx, p| async move {
        let which = p.cache.unwrap_or(CacheName::All);
        if matches!(which, CacheName::Resources | CacheName::All) {
            ctx.shared.resources.clear();
        }
        if matches!(which, CacheName::Results | CacheName::All) {
            ctx.shared.results.clear();
        }
        if matches!(which, CacheName::Runs | CacheName::All) {
            ctx.actor
                .call(|core| {
                    let finished: Vec<String> = core
                        .state
                        .runs
                        .values()
                        .filter(|r| r.status.is_finished())
                        .map(|r| r.id.clone())
                        .collect();
                    for id in finished {
                        if core.state.evict(&id) {
                            core.shared
                                .run_cache
                                .evictions
                                .fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if let Ok(mut q) = core.shared.run_cache.lru.lock() {
                        q.clear();
                    }
                    Ok(())
                })
                .await?;
        }
        Ok(Empty {})
    });
    register::<CacheInvalidate, _, _>(m, |ctx, p| async move {
        match (&p.path, &p.run_id) {
            (Some(path), None) => Ok(InvalidateResult {
                invalidated: ctx.shared.resources.invalidate(std::path::Path::new(path)),
            }),
            (None, Some(run)) => {
                let mut n = ctx.shared.results.invalidate_run(run);
                let id = run.clone();
                if ctx
                    .actor
                    .call(move |core| Ok(core.state.evict(&id)))
                    .await?
                {
                    n += 1;
                }
                Ok(InvalidateResult { invalidated: n })
            }
            _ => Err(ApiError::invalid_params(
                "path",
                "give exactly one of path or runId",
            )),
        }
    });
}
