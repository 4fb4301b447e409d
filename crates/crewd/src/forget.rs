//! Removing a run's data once its `run.forgotten` is durable.

use crate::shared::Shared;

pub fn remove_run_data(shared: &Shared, run_id: &str) {
    let Ok(safe) = crew_core::ids::SafeId::new(run_id) else {
        return;
    };
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
