//! Start-up: rebuild memory from the journal, and deal with workers a dead daemon left behind.

use crate::actor::Core;
use crate::executor::process;
use anyhow::{bail, Context};
use crew_core::run::{EventBody, Pending, State, TaskStatus};
use crew_journal::Journal;

/// Snapshot + the journal after it. A corrupt entry is an error, never a silently shorter state.
pub fn load_state(journal: &dyn Journal, resident_runs: usize) -> anyhow::Result<State> {
    let (mut state, mut after) = match journal.read_snapshot().context("reading the snapshot")? {
        Some((seq, bytes)) => {
            let st: State = serde_json::from_slice(&bytes)
                .with_context(|| format!("the snapshot at seq {seq} is unreadable"))?;
            (st, seq)
        }
        None => (State::default(), 0),
    };
    loop {
        let page = journal
            .read_after(after, 20_000)
            .context("reading the journal")?;
        if page.is_empty() {
            break;
        }
        for (seq, bytes) in page {
            let ev: crew_core::run::Event = serde_json::from_slice(&bytes).with_context(|| {
                format!("journal entry {seq} is unreadable (the journal may be corrupt)")
            })?;
            if ev.seq != seq {
                bail!(
                    "journal entry {seq} claims seq {}: the journal is corrupt",
                    ev.seq
                );
            }
            state.apply(&ev);
            after = seq;
        }
    }
    state.last_seq = state.last_seq.max(journal.last_seq());
    // Replay rebuilt every run it saw; keep only the newest finished ones resident (the rest
    // load from the journal on demand), so memory and the next snapshot stay bounded. Not during
    // the replay: a later event of an evicted run (a resume) would have nothing to apply to.
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

/// Kill workers of the previous daemon (only when pid AND start time match: a reused pid is
/// never killed) and whatever else carries one of this daemon's runs in its environment,
/// re-queue their tasks as retries with reason `daemon_restarted`, and report.
pub fn recover(core: &mut Core) {
    let mut killed = Vec::new();
    for id in core.state.active.clone() {
        let Some(run) = core.state.run(&id) else {
            continue;
        };
        for t in &run.tasks {
            if t.status != TaskStatus::Running {
                continue;
            }
            if let (Some(pid), Some(start)) = (t.pid, t.pid_start) {
                if process::kill_orphan(pid, start) {
                    tracing::warn!(run = %id, task = %t.plan.id, pid, "killed a worker left by the previous daemon");
                    killed.push(pid);
                }
            }
        }
    }
    // The journal may not name every process the dead daemon left: a worker spawned just
    // before the kill (its pid not journaled yet), or a tool that left its worker's process
    // group. Each carries its run and task in its environment.
    let me = std::process::id();
    for t in process::tagged_processes() {
        if t.daemon_pid == Some(me) || !core.state.summaries.contains_key(&t.run_id) {
            continue;
        }
        if process::kill_tagged(&t) {
            tracing::warn!(run = %t.run_id, task = %t.task_id, pid = t.pid, "killed a process left by the previous daemon");
            if !killed.contains(&t.pid) {
                killed.push(t.pid);
            }
        }
    }
    let now = core.now();
    let requeue = core.state.requeue_orphans(now);
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
    for id in core.state.active.clone() {
        core.touch(&id);
    }
}
