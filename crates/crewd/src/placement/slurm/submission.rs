//! The attempt's submission record in the run's directory (crewd's side, not the shared
//! staging directory a worker can write): written and synced before the job is submitted,
//! again with the job id after. It holds the attempt's token, which only crewd knows.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    pub token: String,
    pub job_name: String,
    pub staging: PathBuf,
    pub job_id: Option<u64>,
}

pub fn path(run_dir: &Path, task_id: &str, attempt: u32) -> PathBuf {
    run_dir
        .join("slurm")
        .join(format!("{task_id}.attempt-{attempt}.json"))
}

pub fn read(run_dir: &Path, task_id: &str, attempt: u32) -> Option<Submission> {
    crew_staging::read_json(&path(run_dir, task_id, attempt))
        .ok()
        .flatten()
}

/// Write it whole and make it (and its name) durable.
pub fn write(run_dir: &Path, task_id: &str, attempt: u32, s: &Submission) -> std::io::Result<()> {
    let p = path(run_dir, task_id, attempt);
    let dir = p.parent().unwrap_or(run_dir);
    std::fs::create_dir_all(dir)?;
    crew_staging::write_json(&p, s, 0o600).map_err(std::io::Error::other)?;
    std::fs::File::open(dir)?.sync_all()
}
