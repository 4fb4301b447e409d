//! What a snapshot of `State` holds.
//!
//! Every summary, every schedule and every run that is not finished, but finished runs only as
//! their summaries: their details are rebuilt from their own journaled events on demand, exactly
//! as for a run that run residency evicted (SPEC §9). So the snapshot stays small however many
//! finished runs happen to be resident, and it is cheap to write often.
//!
//! The JSON has `State`'s shape (same field names), so `State`'s own Deserialize reads it, and it
//! reads snapshots that hold finished runs in full too (those written before this type existed).

use super::jobs::ScheduleJob;
use super::types::{RunState, RunSummary};
use super::State;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a snapshot of a `State` holds, owned, so the state's owner can hand it to another
/// thread to serialize. Taking it is cheap: the summaries (one per run ever made, the bulk of
/// it) are a persistent map shared with the state, an O(1) clone; what is copied is the
/// unfinished runs, the active ids and the schedules.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    runs: BTreeMap<String, RunState>,
    summaries: imbl::OrdMap<String, RunSummary>,
    active: BTreeSet<String>,
    schedules: BTreeMap<String, ScheduleJob>,
    last_seq: u64,
}

impl Snapshot {
    /// The seq the snapshot is valid as of.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Runs held in full (the ones that were not finished).
    pub fn full_runs(&self) -> usize {
        self.runs.len()
    }
}

impl State {
    /// What a snapshot of this state holds (see the module doc).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            runs: self
                .runs
                .iter()
                .filter(|(_, r)| !r.status.is_finished())
                .map(|(id, r)| (id.clone(), r.clone()))
                .collect(),
            summaries: self.summaries.clone(),
            active: self.active.clone(),
            schedules: self.schedules.clone(),
            last_seq: self.last_seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{replay_run, Event, EventBody, RunSpec, RunStatus};
    use super::*;
    use chrono::{TimeZone, Utc};

    fn spec(goal: &str) -> RunSpec {
        RunSpec {
            goal: goal.into(),
            ..super::super::tests::spec(&[("a", &[], false)])
        }
    }

    /// Runs "r0".."r{n-1}" in order; `finished` of them completed, the others only created.
    fn events(n: usize, finished: usize) -> Vec<Event> {
        let time = Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap();
        let mut out = Vec::new();
        for i in 0..n {
            let mut bodies = vec![EventBody::RunCreated(Box::new(spec(&format!("goal {i}"))))];
            if i < finished {
                bodies.push(EventBody::RunStarted {});
                bodies.push(EventBody::RunCompleted {
                    usage: Default::default(),
                });
            }
            for (k, body) in bodies.into_iter().enumerate() {
                out.push(Event {
                    seq: out.len() as u64 + 1,
                    run_seq: k as u64 + 1,
                    time,
                    run_id: Some(format!("r{i}")),
                    task_id: None,
                    message: None,
                    body,
                });
            }
        }
        out
    }

    fn state(evs: &[Event]) -> State {
        let mut st = State::default();
        for ev in evs {
            st.apply(ev);
        }
        st
    }

    #[test]
    fn finished_runs_are_kept_as_summaries_only() {
        // (runs, finished)
        let cases = [(0, 0), (3, 0), (3, 3), (5, 2)];
        for (n, finished) in cases {
            let evs = events(n, finished);
            let st = state(&evs);
            assert_eq!(st.runs.len(), n);
            let bytes = serde_json::to_vec(&st.snapshot()).unwrap();
            let back: State = serde_json::from_slice(&bytes).unwrap();
            let mut resident: Vec<&String> = back.runs.keys().collect();
            resident.sort();
            let want: Vec<String> = (finished..n).map(|i| format!("r{i}")).collect();
            assert_eq!(resident, want.iter().collect::<Vec<_>>(), "{n} {finished}");
            assert_eq!(back.summaries, st.summaries);
            assert_eq!(back.active, st.active);
            assert_eq!(back.last_seq, st.last_seq);
            assert_eq!(st.snapshot().full_runs(), n - finished);
            for id in &want {
                assert_eq!(back.run(id), st.run(id), "{id}");
            }
            // The same JSON as the state with its finished runs evicted: `State` reads it.
            let mut evicted = st.clone();
            for i in 0..finished {
                assert!(evicted.evict(&format!("r{i}")));
            }
            assert_eq!(
                serde_json::to_value(&evicted).unwrap(),
                serde_json::to_value(st.snapshot()).unwrap()
            );
        }
    }

    #[test]
    fn a_finished_run_left_out_is_rebuilt_from_its_events_as_it_was() {
        let evs = events(3, 2);
        let st = state(&evs);
        let back: State =
            serde_json::from_slice(&serde_json::to_vec(&st.snapshot()).unwrap()).unwrap();
        for id in ["r0", "r1"] {
            assert!(back.run(id).is_none());
            let own: Vec<&Event> = evs
                .iter()
                .filter(|e| e.run_id.as_deref() == Some(id))
                .collect();
            let rebuilt = replay_run(own).unwrap();
            assert_eq!(Some(&rebuilt), st.run(id));
            assert_eq!(rebuilt.status, RunStatus::Completed);
            let mut restored = back.clone();
            restored.insert_loaded(rebuilt);
            assert_eq!(restored.run(id), st.run(id));
        }
    }

    #[test]
    fn a_snapshot_with_finished_runs_in_full_still_loads() {
        // What snapshots held before this type: the whole `State`.
        let st = state(&events(4, 3));
        let old = serde_json::to_vec(&st).unwrap();
        let back: State = serde_json::from_slice(&old).unwrap();
        assert_eq!(back.runs, st.runs);
        assert_eq!(back.summaries, st.summaries);
        assert_eq!(back.active, st.active);
    }
}
