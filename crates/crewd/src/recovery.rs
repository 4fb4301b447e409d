//! Start-up: rebuild memory from the journal, and deal with workers a dead daemon left behind.

use crate::actor::Core;
use crate::executor::process;
use anyhow::{bail, Context};
use crew_core::run::{Event, EventBody, Pending, State, TaskStatus};
use crew_core::usage::Usage;
use crew_journal::Journal;
use std::collections::BTreeSet;

/// Journal entries per read while replaying.
const REPLAY_PAGE: usize = 20_000;

/// Snapshot + the journal after it. A corrupt entry is an error, never a silently shorter state.
///
/// Finished runs beyond `resident_runs` are evicted as the replay goes (oldest ids first), so
/// memory stays bounded however long the journal is. A later event of an evicted run (a resume,
/// a retry) first rebuilds that run from its own journaled events, as residency does on demand;
/// the same holds for runs the snapshot holds only as summaries.
pub fn load_state(journal: &dyn Journal, resident_runs: usize) -> anyhow::Result<State> {
    let (mut state, mut after) = match journal.read_snapshot().context("reading the snapshot")? {
        Some((seq, bytes)) => {
            let st: State = serde_json::from_slice(&bytes)
                .with_context(|| format!("the snapshot at seq {seq} is unreadable"))?;
            (st, seq)
        }
        None => (State::default(), 0),
    };
    // Finished runs that ended during this replay and may still be resident, by id. Evicting in
    // batches (down to the bound once twice the bound finished) keeps the bookkeeping cheap.
    let mut finished: BTreeSet<String> = BTreeSet::new();
    let evict_at = resident_runs.saturating_mul(2).max(64);
    loop {
        let page = journal
            .read_after(after, REPLAY_PAGE)
            .context("reading the journal")?;
        if page.is_empty() {
            break;
        }
        for (seq, bytes) in page {
            let ev: Event = serde_json::from_slice(&bytes).with_context(|| {
                format!("journal entry {seq} is unreadable (the journal may be corrupt)")
            })?;
            if ev.seq != seq {
                bail!(
                    "journal entry {seq} claims seq {}: the journal is corrupt",
                    ev.seq
                );
            }
            if let Some(id) = evicted_target(&state, &ev) {
                reload(journal, &mut state, id, seq)?;
            }
            state.apply(&ev);
            if ends_run(&ev.body) {
                if let Some(id) = &ev.run_id {
                    finished.insert(id.clone());
                }
            }
            if finished.len() >= evict_at {
                let excess = finished.len().saturating_sub(resident_runs);
                for _ in 0..excess {
                    if let Some(id) = finished.pop_first() {
                        state.evict(&id);
                    }
                }
            }
            after = seq;
        }
    }
    state.last_seq = state.last_seq.max(journal.last_seq());
    // Keep only the newest finished ones resident (the rest load from the journal on demand),
    // so memory and the next snapshot stay bounded.
    let finished: Vec<String> = {
        let mut ids: Vec<&String> = state
            .runs
            .iter()
            .filter(|(_, r)| r.status.is_finished())
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        let excess = ids.len().saturating_sub(resident_runs);
        ids.into_iter().take(excess).cloned().collect()
    };
    for id in finished {
        state.evict(&id);
    }
    Ok(state)
}

/// What each orphaned attempt's transcript shows it spent (the worker went on after the last
/// progress the dead daemon held): read with its runtime's parser, keyed (run, task, attempt).
/// Transcripts are capped (`TRANSCRIPT_MAX`), so each read is bounded.
fn orphans_usage(core: &Core) -> std::collections::BTreeMap<(String, String, u32), Usage> {
    let mut seen = std::collections::BTreeMap::new();
    for id in &core.state.active {
        let Some(run) = core.state.run(id) else {
            continue;
        };
        let Ok(safe) = crew_core::ids::SafeId::new(id) else {
            continue;
        };
        let dir = core.shared.run_dir(&safe).join("transcripts");
        for t in run.tasks.iter().filter(|t| t.status == TaskStatus::Running) {
            // The task's own runtime reads its transcript (a candidate's may differ).
            let name = crew_core::run::candidates::task_runtime(run, t);
            let Some(runtime) = core.shared.config.runtime(name) else {
                continue;
            };
            let read = |n: u32| {
                std::fs::read(dir.join(format!("{}.attempt-{n}.jsonl", t.plan.id)))
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            };
            let Some(text) = read(t.attempts) else {
                continue;
            };
            // An attempt that continued an answer's session (codex counts the whole thread):
            // read against the stream its live parser counted from.
            let asked = t.session().and_then(|_| {
                let run_dir = dir.parent()?;
                crew_attempt::asked_stream(
                    run_dir,
                    &t.plan.id,
                    t.attempts,
                    runtime.adapter,
                    runtime.rpc(),
                )
            });
            let usage = crew_core::stream::transcript_usage(
                runtime.adapter,
                runtime.rpc(),
                &text,
                asked.as_deref(),
            );
            seen.insert((id.clone(), t.plan.id.to_string(), t.attempts), usage);
        }
    }
    seen
}

/// Events after which a run may be finished.
fn ends_run(body: &EventBody) -> bool {
    matches!(
        body,
        EventBody::RunCompleted { .. }
            | EventBody::RunFailed { .. }
            | EventBody::RunCancelled { .. }
    )
}

/// The run `ev` names, when that run is known (it has a summary) but not resident. Reloading
/// it for an event that does not change its details (a schedule event naming it) is harmless.
fn evicted_target<'a>(state: &State, ev: &'a Event) -> Option<&'a str> {
    if matches!(
        ev.body,
        EventBody::RunCreated(_) | EventBody::RunForgotten {}
    ) {
        return None;
    }
    let id = ev.run_id.as_deref()?;
    (!state.runs.contains_key(id) && state.summaries.contains_key(id)).then_some(id)
}

/// Make run `id` resident again as it was just before seq `before`, from its own events.
fn reload(journal: &dyn Journal, state: &mut State, id: &str, before: u64) -> anyhow::Result<()> {
    let events =
        crate::actor::residency::run_events(journal, id, before).map_err(anyhow::Error::msg)?;
    match crew_core::run::replay_run(events.iter()) {
        Some(run) => state.insert_loaded(run),
        // Nothing to apply to: the event is ignored, as it was before runs were evicted.
        None => tracing::warn!(run = %id, before, "a known run has no run.created in the journal"),
    }
    Ok(())
}

/// Kill workers of the previous daemon (only when pid AND start time match: a reused pid is
/// never killed) and whatever else carries one of this daemon's runs in its environment,
/// re-queue their tasks as retries with reason `daemon_restarted`, and report.
pub fn recover(core: &mut Core) {
    {
        let summaries = &core.state.summaries;
        crate::forget::sweep_unknown(&core.shared, &|id| summaries.contains_key(id));
    }
    // Everything the previous daemon left, looked at before anything is killed: killing a
    // worker under crew's init (its PID namespace's init) ends the processes inside it too,
    // and a process on its way out can no longer be read from /proc, so a scan after the
    // kills would miss processes this recovery ended. The journal may not name every process
    // the dead daemon left: a worker spawned just before the kill (its pid not journaled
    // yet), or a tool that left its worker's process group. Each carries its run and task in
    // its environment.
    let me = std::process::id();
    let left: Vec<process::Tagged> = process::tagged_processes()
        .into_iter()
        .filter(|t| t.daemon_pid != Some(me) && core.state.summaries.contains_key(&t.run_id))
        .collect();
    let mut killed = Vec::new();
    for id in core.state.active.clone() {
        let Some(run) = core.state.run(&id) else {
            continue;
        };
        for t in &run.tasks {
            if t.status != TaskStatus::Running {
                continue;
            }
            if let (Some(pid), Some(start)) = (t.pid(), t.pid_start()) {
                if process::kill_orphan(pid, start) {
                    tracing::warn!(run = %id, task = %t.plan.id, pid, "killed a worker left by the previous daemon");
                    killed.push(pid);
                }
            }
        }
    }
    for t in &left {
        // Gone already: ended with a worker killed above (its box), which this recovery did.
        let ended = process::kill_tagged(t) || process::start_time(t.pid) != Some(t.start);
        if ended && !killed.contains(&t.pid) {
            tracing::warn!(run = %t.run_id, task = %t.task_id, pid = t.pid, "killed a process left by the previous daemon");
            killed.push(t.pid);
        }
    }
    let now = core.now();
    let seen = orphans_usage(core);
    // Tasks whose attempt is a job on a cluster: it ran on without the daemon, and is followed
    // again rather than started over.
    let remote = crate::placement::remote_attempts(&core.state, &core.shared.config);
    let requeue = core.state.requeue_orphans_except(
        now,
        &|run, task| remote.contains(&(run.id.clone(), task.plan.id.to_string())),
        &|run, task, attempt| {
            seen.get(&(run.to_string(), task.to_string(), attempt))
                .copied()
        },
    );
    let requeued: Vec<String> = requeue
        .iter()
        .filter_map(|p| Some(format!("{}/{}", p.run_id.as_ref()?, p.task_id.as_ref()?)))
        .collect();
    core.emit_all(requeue);
    let active_runs = core.state.active.len();
    if active_runs > 0 || !requeued.is_empty() {
        tracing::info!(
            active_runs,
            requeued = requeued.len(),
            killed = killed.len(),
            "recovered"
        );
        core.emit(Pending::global(EventBody::DaemonRecovered {
            requeued_tasks: requeued,
            killed_workers: killed,
            active_runs,
        }));
    }
    for (run, task) in remote {
        tracing::info!(%run, %task, "following the task's Slurm job again");
        crate::actor::workers::reattach(core, &run, &task);
    }
    for id in core.state.active.clone() {
        core.touch(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use crew_core::run::{RunSpec, RunStatus};
    use crew_journal::{Entry, MemJournal};

    fn spec() -> RunSpec {
        crate::test_support::run_spec(Vec::new())
    }

    /// A journal of `runs` runs created and completed in turn, then `tail` (run index, body).
    fn journal(runs: usize, tail: &[(usize, EventBody)]) -> MemJournal {
        let j = MemJournal::new();
        let time = Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap();
        let mut bodies: Vec<(usize, EventBody)> = Vec::new();
        for i in 0..runs {
            bodies.push((i, EventBody::RunCreated(Box::new(spec()))));
            bodies.push((i, EventBody::RunStarted {}));
            bodies.push((
                i,
                EventBody::RunCompleted {
                    usage: Default::default(),
                },
            ));
        }
        bodies.extend(tail.iter().cloned());
        let entries: Vec<Entry> = bodies
            .into_iter()
            .enumerate()
            .map(|(n, (i, body))| {
                let id = format!("team_1_{i:04}");
                let ev = Event {
                    seq: n as u64 + 1,
                    run_seq: 0,
                    time,
                    run_id: Some(id.clone()),
                    task_id: None,
                    message: None,
                    body,
                };
                Entry {
                    seq: ev.seq,
                    run: Some(id),
                    bytes: serde_json::to_vec(&ev).unwrap(),
                }
            })
            .collect();
        j.append(&entries).unwrap();
        j
    }

    fn resumed() -> EventBody {
        EventBody::RunResumed {
            requeued_task_ids: Vec::new(),
            budget_tokens: None,
        }
    }

    /// (runs, resident_runs, tail, run 0 resident and running at the end)
    type Case = (usize, usize, Vec<(usize, EventBody)>, bool);

    #[test]
    fn evicted_runs_still_take_later_events() {
        let cases: [Case; 4] = [
            (3, 1, vec![], false),
            // Run 0 is evicted during the replay (200 runs finish first), then resumed.
            (200, 1, vec![(0, resumed())], true),
            (200, 5, vec![(0, resumed()), (150, resumed())], true),
            (10, 100, vec![(0, resumed())], true),
        ];
        for (runs, resident, tail, running) in cases {
            let j = journal(runs, &tail);
            let st = load_state(&j, resident).unwrap();
            assert_eq!(st.summaries.len(), runs);
            let finished = st.runs.values().filter(|r| r.status.is_finished()).count();
            assert!(
                finished <= resident,
                "{runs} {resident}: {finished} resident"
            );
            let first = st.run("team_1_0000").map(|r| r.status);
            assert_eq!(
                first == Some(RunStatus::Running),
                running,
                "{runs} {resident}"
            );
            assert_eq!(st.active.contains("team_1_0000"), running);
            assert_eq!(st.active.len(), tail.len());
        }
    }

    /// A snapshot as crewd writes it now (finished runs as summaries only), and as it wrote it
    /// before (the whole state, `resident` finished runs in full).
    fn put_snapshot(j: &MemJournal, resident: usize, old_format: bool) -> State {
        let mut st = load_state(j, resident).unwrap();
        st.last_seq = j.last_seq();
        let bytes = if old_format {
            serde_json::to_vec(&st).unwrap()
        } else {
            serde_json::to_vec(&st.snapshot()).unwrap()
        };
        j.write_snapshot(st.last_seq, &bytes).unwrap();
        st
    }

    /// The run as its own journaled events make it.
    fn replayed(j: &MemJournal, id: &str) -> crew_core::run::RunState {
        let evs = crate::actor::residency::run_events(j, id, u64::MAX).unwrap();
        crew_core::run::replay_run(evs.iter()).unwrap()
    }

    #[test]
    fn a_snapshot_summary_takes_later_events() {
        // (resident_runs when the snapshot was taken, old format)
        for (resident, old_format) in [(1, false), (1, true), (100, false), (100, true)] {
            let j = journal(4, &[]);
            put_snapshot(&j, resident, old_format);
            let time = Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 6).unwrap();
            let ev = Event {
                seq: j.last_seq() + 1,
                run_seq: 0,
                time,
                run_id: Some("team_1_0000".into()),
                task_id: None,
                message: None,
                body: resumed(),
            };
            j.append(&[Entry {
                seq: ev.seq,
                run: ev.run_id.clone(),
                bytes: serde_json::to_vec(&ev).unwrap(),
            }])
            .unwrap();
            let st = load_state(&j, 1).unwrap();
            assert_eq!(
                st.run("team_1_0000").map(|r| r.status),
                Some(RunStatus::Running),
                "{resident} {old_format}"
            );
            assert_eq!(
                st.summaries.get("team_1_0000").map(|s| s.status),
                Some(RunStatus::Running)
            );
        }
    }

    #[test]
    fn finished_runs_left_out_of_the_snapshot_load_on_demand_as_they_were() {
        let j = journal(6, &[]);
        // Every run resident when the snapshot is taken; none of them goes into it.
        let before = put_snapshot(&j, 100, false);
        assert_eq!(before.runs.len(), 6);
        let st = load_state(&j, 100).unwrap();
        assert!(st.runs.is_empty());
        assert_eq!(st.summaries, before.summaries);
        assert_eq!(st.last_seq, before.last_seq);
        for id in before.summaries.keys() {
            assert_eq!(Some(&replayed(&j, id)), before.run(id), "{id}");
        }
    }

    #[test]
    fn an_old_snapshot_with_finished_runs_in_full_loads_within_the_bound() {
        // (finished runs in the old snapshot, resident_runs now)
        for (runs, resident) in [(6, 100), (6, 2), (6, 1)] {
            let j = journal(runs, &[]);
            let before = put_snapshot(&j, 100, true);
            assert_eq!(before.runs.len(), runs);
            let st = load_state(&j, resident).unwrap();
            assert_eq!(st.summaries, before.summaries);
            assert_eq!(st.runs.len(), runs.min(resident), "{runs} {resident}");
            // The newest stay; each is what its own events make.
            for (id, run) in &st.runs {
                assert!(id.as_str() >= format!("team_1_{:04}", runs - resident.min(runs)).as_str());
                assert_eq!(run, &replayed(&j, id));
            }
        }
    }
}
