//! Submitting an attempt's job, or re-attaching to the one an earlier crewd submitted: the
//! intent journaled before the submission and the id after, so a job is neither lost nor
//! submitted twice (`crate::placement::slurm`'s module doc).

use crate::attempt::AttemptSpec;
use crate::placement::slurm::client::{JobRequest, SlurmError};
use crate::placement::slurm::{self, Backend, SlurmConfig};
use crate::placement::{JobLedger, LedgerError};
use crew_core::run::RemoteJob;
use std::path::Path;
use std::sync::Arc;

/// Why an attempt got no job.
pub(super) enum SubmitError {
    Slurm(SlurmError),
    Ledger(LedgerError),
}

impl From<SlurmError> for SubmitError {
    fn from(e: SlurmError) -> Self {
        SubmitError::Slurm(e)
    }
}

/// The job for this attempt: the journaled one; else, when the journal holds only the intent
/// (a daemon killed between submitting and journaling the id), the one of its name that this
/// daemon submitted (its Slurm user, `tag` in its comment: `slurm::own_jobs`); else a new
/// submission, its intent durable before it and its id journaled after.
pub(super) async fn submit_or_attach(
    client: &Backend,
    cfg: &SlurmConfig,
    ledger: &Arc<dyn JobLedger>,
    spec: &AttemptSpec,
    staging: &Path,
    tag: &str,
) -> Result<u64, SubmitError> {
    let name = slurm::job_name(&spec.run_id, &spec.task_id, spec.attempt);
    let key = spec.key();
    match &spec.job {
        Some(RemoteJob { id: Some(id), .. }) => {
            tracing::info!(job_id = id, "re-attached to the attempt's Slurm job");
            return Ok(*id);
        }
        Some(_) => {
            let found = client.jobs_named(&name, tag).await?;
            if let Some(j) = found.into_iter().max_by_key(|j| j.job_id) {
                tracing::info!(job_id = j.job_id, "found the attempt's Slurm job by name");
                record_id(client, ledger, &key, j.job_id).await?;
                return Ok(j.job_id);
            }
            // The intent is journaled and Slurm has no job of its name from this daemon: never
            // submitted (a job of that name from anyone else is left alone).
        }
        None => {
            let intent = RemoteJob {
                attempt: spec.attempt,
                name: name.clone(),
                staging: staging.display().to_string(),
                id: None,
            };
            ledger
                .submitting(&key, intent)
                .await
                .map_err(SubmitError::Ledger)?;
        }
    }
    let worker = cfg.worker.clone().unwrap_or_else(worker_path);
    let dir = staging.display().to_string();
    let req = JobRequest {
        name,
        comment: slurm::job_comment(&spec.run_id, &spec.task_id, spec.attempt, tag),
        script: format!(
            "#!/bin/sh\nexec {} {}\n",
            crew_core::text::shell_quoted(&worker),
            crew_core::text::shell_quoted(&dir)
        ),
        cwd: dir.clone(),
        stdout: format!("{dir}/job.out"),
        // Partition, account and QOS from the config; CPUs, memory and time limit as the
        // run froze them, with the task's step and role over them.
        resources: cfg
            .resources(spec.runtime.slurm.as_ref())
            .with_shape(&spec.job_shape),
        env: ["PATH", "HOME", "LANG", "USER"]
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .chain([("CREW_STAGING".to_string(), dir.clone())])
            .collect(),
    };
    let fault =
        |e: std::io::Error| SubmitError::Ledger(LedgerError::Storage(format!("injected: {e}")));
    crate::executor::fault::hit("slurm-submit").map_err(fault)?;
    let id = client.submit(&req).await?;
    // Tests kill the daemon here: submitted, the id not journaled.
    crate::executor::fault::hit("slurm-submitted").map_err(fault)?;
    record_id(client, ledger, &key, id).await?;
    Ok(id)
}

/// Journal the job's id. A refusal means the attempt ended meanwhile (cancelled): its job
/// goes too. A journal that cannot write keeps the event in memory; the job is followed.
async fn record_id(
    client: &Backend,
    ledger: &Arc<dyn JobLedger>,
    key: &crate::attempt::AttemptKey,
    id: u64,
) -> Result<(), SubmitError> {
    match ledger.submitted(key, id).await {
        Ok(()) => Ok(()),
        Err(LedgerError::Refused) => {
            if let Err(e) = client.cancel(id).await {
                tracing::warn!(error = %e, job_id = id, "cannot cancel the Slurm job of an ended attempt");
            }
            Err(SubmitError::Ledger(LedgerError::Refused))
        }
        Err(LedgerError::Storage(e)) => {
            tracing::warn!(error = %e, job_id = id, "the Slurm job's id is not durable yet");
            Ok(())
        }
    }
}

/// `crew-worker` next to the running crewd, else from PATH.
fn worker_path() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("crew-worker")))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "crew-worker".into())
}
