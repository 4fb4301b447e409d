//! Run residency (SPEC §9): active runs stay in memory; finished runs keep a summary, and their
//! details stay resident up to `resident_runs` (least recently used leave first). An evicted
//! run is rebuilt from its own journaled events on demand.

use super::Core;
use crate::shared::Shared;
use crew_api::ApiError;
use crew_core::run::{Event, RunState};
use std::sync::atomic::Ordering;

/// Journal page size when rebuilding a run.
const LOAD_PAGE: usize = 10_000;

/// Evict finished runs beyond the bound.
pub fn enforce(core: &mut Core) {
    evict_beyond_bound(core, None);
}

fn evict_beyond_bound(core: &mut Core, just_used: Option<&str>) {
    let bound = core.shared.config.resident_runs;
    let mut finished: Vec<&str> = core
        .state
        .runs
        .values()
        .filter(|r| r.status.is_finished())
        .map(|r| r.id.as_str())
        .collect();
    let out = core
        .shared
        .run_cache
        .victims(&mut finished, bound, just_used);
    let mut n = 0;
    for v in out {
        if core.state.evict(&v) {
            n += 1;
        }
    }
    if n > 0 {
        core.shared
            .run_cache
            .evictions
            .fetch_add(n, Ordering::Relaxed);
    }
}

/// Put a rebuilt run back in memory as the most recently used, within the bound.
pub fn adopt(core: &mut Core, run: RunState) {
    if core.state.runs.contains_key(&run.id) {
        return;
    }
    let id = run.id.clone();
    core.state.insert_loaded(run);
    evict_beyond_bound(core, Some(&id));
}

/// Rebuild an evicted run from its journaled events (off the actor: this reads disk).
pub fn load_run(shared: &Shared, run_id: &str) -> Result<Option<RunState>, ApiError> {
    let events =
        run_events(shared.journal.as_ref(), run_id, u64::MAX).map_err(ApiError::internal)?;
    Ok(crew_core::run::replay_run(events.iter()))
}

/// A run's journaled events with a seq below `before`, oldest first. An unreadable one is an
/// error: a run rebuilt without one of its events would answer wrongly.
pub fn run_events(
    journal: &dyn crew_journal::Journal,
    run_id: &str,
    before: u64,
) -> Result<Vec<Event>, String> {
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let page = journal
            .read_run_after(run_id, after, LOAD_PAGE)
            .map_err(|e| format!("reading the events of run {run_id}: {e}"))?;
        let full = page.len() >= LOAD_PAGE;
        for (seq, bytes) in page {
            if seq >= before {
                return Ok(events);
            }
            after = seq;
            let ev = serde_json::from_slice::<Event>(&bytes).map_err(|e| {
                format!(
                    "event {seq} of run {run_id} is unreadable (the journal may be corrupt): {e}"
                )
            })?;
            events.push(ev);
        }
        if !full {
            return Ok(events);
        }
    }
}
