//! The job an attempt follows, told from a stranger that holds the same id.
//!
//! A job's id is the controller's: one whose state was reset while crewd was down (a
//! reinstalled cluster, a cleared `StateSaveLocation`) numbers new jobs from 1 again, so an id
//! the journal recorded may now name another job — another user's, or the same user's
//! script. crew neither follows nor cancels such a job: to the attempt its own job is gone.

use super::client::SlurmError;
use super::state::JobInfo;
use super::{Backend, Submitter};

pub struct AttemptJob {
    id: u64,
    name: String,
    by: Submitter,
    tag: String,
    /// The id was seen on a job that is not the attempt's.
    foreign: bool,
}

impl AttemptJob {
    pub fn new(id: u64, name: String, by: Submitter, tag: String) -> AttemptJob {
        AttemptJob {
            id,
            name,
            by,
            tag,
            foreign: false,
        }
    }

    /// `job` as read under the attempt's id: `None` when it is not the attempt's (and from
    /// then on, whatever Slurm says of the id).
    pub fn see(&mut self, job: Option<JobInfo>) -> Option<JobInfo> {
        match job {
            Some(j)
                if !self.foreign && super::is_attempts_job(&j, &self.name, &self.by, &self.tag) =>
            {
                Some(j)
            }
            Some(j) => {
                if !self.foreign {
                    tracing::warn!(
                        job_id = self.id,
                        name = %crew_core::text::bound(j.name.clone(), 200),
                        expected = %self.name,
                        "the Slurm job under the attempt's id is not the attempt's (the controller \
                         reused the id): it is left alone, and the attempt's own job is gone"
                    );
                }
                self.foreign = true;
                None
            }
            None => None,
        }
    }

    /// Reads the job once (a re-attached attempt, before anything is sent to it).
    pub async fn check(&mut self, client: &Backend) {
        if let Ok(job) = client.job(self.id).await {
            self.see(job);
        }
    }

    /// Cancels the attempt's job; a stranger under its id is never cancelled.
    pub async fn cancel(&self, client: &Backend) -> Result<(), SlurmError> {
        if self.foreign {
            return Ok(());
        }
        client.cancel(self.id).await
    }
}
