//! The run state machine.
//!
//! `State` is the daemon's authoritative model. It changes only through [`State::apply`] of an
//! [`Event`]. Deciders (`&self` methods returning `Vec<Pending>`) look at the state and say what
//! should happen; the daemon stamps the pending events with their journal position, applies
//! them, journals them, and only then answers or publishes. After any change the daemon calls
//! [`State::settle`] until it returns nothing, which derives the follow-ups (skips, budget,
//! approval, run completion), and then [`State::dispatch`] to start what may start.

mod apply;
mod apply_task;
mod artifact;
mod artifact_list;
pub mod candidates;
mod decide;
mod dispatch;
pub use dispatch::Start;
mod event;
mod event_de;
mod fail_reason;
pub use fail_reason::FailReason;
mod fanout;
mod fixloop;
pub use fixloop::{fix_task_id, run_verdict};
mod jobs;
pub mod resolve;
mod settle;
mod snapshot;
mod task_serde;
mod types;
pub mod workspace;

pub use apply::apply_run_event;
pub use decide::{AttemptResult, RetryPolicy};
pub use event::{AttemptEnd, Delivery, Event, EventBody, Pending, ReusedFrom};
pub use jobs::{find_job, name_owner, unique_name, JobLookup, ScheduleJob, JOB_RUN_IDS_KEPT};
pub use snapshot::Snapshot;
pub use types::*;
pub use workspace::{ConflictMode, Integration, TaskCommit, WorkspaceMode, WorkspaceSpec};

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    #[error("{what} not found: {id}")]
    NotFound { what: &'static str, id: String },
    #[error("{0}")]
    InvalidState(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

fn not_found(what: &'static str, id: &str) -> CoreError {
    CoreError::NotFound {
        what,
        id: id.to_string(),
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// Resident runs: every active run, plus finished runs the daemon chose to keep.
    pub runs: HashMap<String, RunState>,
    /// One row per run, resident or not. Run ids sort by creation time.
    /// A persistent map: a snapshot shares it (an O(1) clone) and is serialized off the actor.
    pub summaries: imbl::OrdMap<String, RunSummary>,
    /// Ids of runs that are not finished.
    pub active: BTreeSet<String>,
    pub schedules: BTreeMap<String, ScheduleJob>,
    pub last_seq: u64,
    /// Round-robin position between runs for `max_workers`; fairness, not state to replay.
    #[serde(skip)]
    rr_after: Option<String>,
}

impl State {
    pub fn run(&self, id: &str) -> Option<&RunState> {
        self.runs.get(id)
    }

    /// Give an event its place: `seq` from the journal position, `runSeq` from the run.
    /// Every text a worker or a model can make long is bounded here, the one way an event
    /// comes to be: the journal, the run's state and its summary keep at most
    /// `text::MAX_REASON_CHARS` of each.
    pub fn stamp(&self, p: Pending, seq: u64, time: chrono::DateTime<chrono::Utc>) -> Event {
        let p = p.bounded();
        let run_seq = match (&p.run_id, &p.body) {
            (Some(_), EventBody::RunCreated(_)) => 1,
            (Some(id), _) => self.runs.get(id).map(|r| r.run_seq + 1).unwrap_or(0),
            (None, _) => 0,
        };
        Event {
            seq,
            run_seq,
            time,
            run_id: p.run_id,
            task_id: p.task_id,
            message: p.message,
            body: p.body,
        }
    }

    /// Forget a finished run's details but keep its summary (run residency, SPEC §9).
    pub fn evict(&mut self, id: &str) -> bool {
        match self.runs.get(id) {
            Some(r) if r.status.is_finished() => {
                self.runs.remove(id);
                true
            }
            _ => false,
        }
    }

    /// Put back a run rebuilt from its events.
    pub fn insert_loaded(&mut self, run: RunState) {
        if self.summaries.contains_key(&run.id) {
            self.runs.insert(run.id.clone(), run);
        }
    }

    pub fn workers_running(&self) -> usize {
        self.active.iter().map(|id| self.running_in(id)).sum()
    }

    /// Tasks of run `id` running now, from its summary's counts (kept exact by `apply`).
    pub fn running_in(&self, id: &str) -> usize {
        self.summaries
            .get(id)
            .map_or(0, |s| s.tasks.running as usize)
    }
}

/// Rebuild one run from its own events (in order). Used to load an evicted run.
pub fn replay_run<'a>(events: impl IntoIterator<Item = &'a Event>) -> Option<RunState> {
    let mut st = State::default();
    let mut id = None;
    for ev in events {
        if id.is_none() {
            if let EventBody::RunCreated(_) = ev.body {
                id = ev.run_id.clone();
            }
        }
        st.apply(ev);
    }
    id.and_then(|id| st.runs.remove(&id))
}

#[cfg(test)]
mod tests;
