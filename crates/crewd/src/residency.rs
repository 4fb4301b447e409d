//! Run residency (SPEC §9): active runs stay in memory; finished runs keep a summary, and their
//! details stay resident up to `resident_runs` (least recently used leave first). An evicted
//! run is rebuilt from its own journaled events on demand.

use crate::actor::Core;
use crate::shared::Shared;
use crew_api::ApiError;
use crew_core::run::{Event, RunState};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct RunCacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
    /// Finished resident runs, least recently used first.
    pub lru: Mutex<VecDeque<String>>,
}

impl RunCacheStats {
    pub fn touch(&self, id: &str) {
        if let Ok(mut q) = self.lru.lock() {
            if let Some(i) = q.iter().position(|x| x == id) {
                q.remove(i);
            }
            q.push_back(id.to_string());
        }
    }
}

/// Evict finished runs beyond the bound.
pub fn enforce(core: &mut Core) {
    let bound = core.shared.config.resident_runs;
    let finished: Vec<String> = core
        .state
        .runs
        .values()
        .filter(|r| r.status.is_finished())
        .map(|r| r.id.clone())
        .collect();
    if finished.len() <= bound {
        for id in &finished {
            core.shared.run_cache.touch_if_absent(id);
        }
        return;
    }
    let mut victims = Vec::new();
    if let Ok(mut q) = core.shared.run_cache.lru.lock() {
        for id in &finished {
            if !q.contains(id) {
                q.push_back(id.clone());
            }
        }
        q.retain(|id| {
            core.state
                .runs
                .get(id)
                .is_some_and(|r| r.status.is_finished())
        });
        while q.len() > bound {
            if let Some(v) = q.pop_front() {
                victims.push(v);
            }
        }
    }
    for v in victims {
        if core.state.evict(&v) {
            core.shared
                .run_cache
                .evictions
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl RunCacheStats {
    fn touch_if_absent(&self, id: &str) {
        if let Ok(mut q) = self.lru.lock() {
            if !q.iter().any(|x| x == id) {
                q.push_back(id.to_string());
            }
        }
    }
}

/// Rebuild an evicted run from the journal (off the actor: this reads disk).
pub fn load_run(shared: &Shared, run_id: &str) -> Result<Option<RunState>, ApiError> {
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let page = shared
            .journal
            .read_run_after(run_id, after, 10_000)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        if page.is_empty() {
            break;
        }
        for (seq, bytes) in page {
            after = seq;
            if let Ok(ev) = serde_json::from_slice::<Event>(&bytes) {
                events.push(ev);
            }
        }
    }
    Ok(crew_core::run::replay_run(events.iter()))
}
