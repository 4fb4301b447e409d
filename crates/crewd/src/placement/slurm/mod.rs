//! Slurm placement: an attempt is a Slurm job running `crew-worker` on a node.
//!
//! crewd still makes the task's worktree (its start commit, merged from the dependencies'
//! results as for a local attempt) and still finishes the attempt (verification, the result
//! commit, diffstat, patch, integration): only the agent runs on the node. Between the two
//! sides is a staging directory (`crew_staging`) on a shared filesystem: the start commit as a
//! bundle, the launch and the filtered environment in, the agent's stdout, a result bundle and
//! a final record out. The job's script and environment carry no secret: slurmctld stores both
//! and shows them to admins.
//!
//! Durable submission: before submitting, the attempt's intent (token, job name, staging
//! directory) is journaled (`worker.submitting`, durable before the submit); after, the job id
//! (`worker.submitted`). A crewd killed anywhere in between finds, on recovery, either the job
//! id or the intent in its state, and with the intent alone either a job of that name in Slurm
//! or none, so a job is neither lost nor submitted twice (`supervise::submit_or_attach`).

pub mod client;
pub mod config;
pub mod state;
mod supervise;

pub use config::{SlurmConfig, SlurmResources};
pub use supervise::attempt;

use std::sync::{Arc, OnceLock};

/// The daemon's one client (its config does not change while it runs).
pub fn client(cfg: &SlurmConfig) -> Arc<client::Client> {
    static CLIENT: OnceLock<Arc<client::Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| Arc::new(client::Client::new(cfg)))
        .clone()
}

/// The job name crew gives an attempt: how recovery finds a job whose id was not recorded.
pub fn job_name(run_id: &str, task_id: &str, attempt: u32) -> String {
    format!("crew-{run_id}-{task_id}-{attempt}")
}
