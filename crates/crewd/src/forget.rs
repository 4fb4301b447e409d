//! Removing a run's data once its `run.forgotten` is durable.

use crate::shared::Shared;

pub fn remove_run_data(shared: &Shared, run_id: &str) {
    let Ok(safe) = crew_core::ids::SafeId::new(run_id) else {
        return;
    };
    // Tests kill the daemon here: `run.forgotten` durable, the run's data not yet removed.
    let _ = crate::executor::fault::hit("forget-data");
    if let Err(e) = shared.journal.forget_run(run_id) {
        tracing::warn!(run = run_id, error = %e, "cannot remove the run's events from the journal");
    }
    let dir = shared.run_dir(&safe);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(run = run_id, error = %e, "cannot remove the run's artifacts");
        }
    }
    shared.results.invalidate_run(run_id);
}

/// At start-up: the data of runs the journal no longer knows (forgotten by a daemon killed
/// before it removed their data, or never created: a crash before `run.created` was durable)
/// goes, as `team.forget` would have removed it. A run is known by its summary row, which
/// every run has, resident or not.
pub fn sweep_unknown(shared: &Shared, known: &dyn Fn(&str) -> bool) {
    let Ok(dir) = std::fs::read_dir(shared.runs_dir()) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if crew_core::ids::is_safe_id(&name) && e.path().is_dir() && !known(&name) {
            tracing::info!(run = %name, "removing the data of a run the journal does not know (forgotten before a crash)");
            remove_run_data(shared, &name);
        }
    }
}
