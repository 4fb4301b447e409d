//! One look at the cluster for every followed job: each poll lists the controller's jobs once
//! (`GET /jobs`, or `squeue --json`) and every attempt reads its own job from that list.
//! Asked one by one, 200 followed jobs polled every 200 ms were 1,000 requests a second
//! through slurmrestd into slurmctld, on the machine whose scheduling they were waiting for.

use super::client::SlurmError;
use super::state::JobInfo;
use super::Backend;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// A listing asks only for a change since the last one (`update_time`: slurmrestd answers 304
/// when no job changed, instead of every job again); at least this often it lists in full, so
/// a controller whose clock runs behind crewd's cannot hide a change for long.
const FULL_EVERY: Duration = Duration::from_secs(10);
/// The controller's clock may be this far behind crewd's without a change being missed.
const SLACK_SECS: u64 = 2;

/// One listing of the controller's jobs, by id (or why there is none this time).
pub struct Snapshot {
    pub jobs: Result<Arc<HashMap<u64, JobInfo>>, SlurmError>,
}

pub struct Board {
    /// Kept so the poller can tell followers (more receivers than this one) from none.
    rx: watch::Receiver<Arc<Snapshot>>,
}

impl Board {
    /// The poller: while any attempt follows a job, list the jobs every `poll`.
    pub fn start(backend: Arc<Backend>, poll: Duration) -> Board {
        let (tx, rx) = watch::channel(Arc::new(Snapshot {
            jobs: Ok(Arc::new(HashMap::new())),
        }));
        tokio::spawn(async move {
            // The last full answer: when it was asked (Unix seconds, for `update_time`), what
            // it said, and when the last full listing was.
            let mut last: Option<(u64, Arc<HashMap<u64, JobInfo>>)> = None;
            let mut full_at = Instant::now();
            loop {
                tokio::time::sleep(poll).await;
                if tx.receiver_count() <= 1 {
                    continue;
                }
                let full = full_at.elapsed() >= FULL_EVERY;
                let since = last
                    .as_ref()
                    .filter(|_| !full)
                    .map(|(t, _)| t.saturating_sub(SLACK_SECS));
                let asked = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                let jobs = match backend.jobs_since(since).await {
                    Ok(Some(v)) => {
                        if since.is_none() {
                            full_at = Instant::now();
                        }
                        let map: Arc<HashMap<u64, JobInfo>> =
                            Arc::new(v.into_iter().map(|j| (j.job_id, j)).collect());
                        last = Some((asked, map.clone()));
                        Ok(map)
                    }
                    // Nothing changed: the last answer still holds (and `since` stays: the
                    // controller's "no change" is relative to it).
                    Ok(None) => match &last {
                        Some((_, map)) => Ok(map.clone()),
                        None => Ok(Arc::new(HashMap::new())),
                    },
                    Err(e) => Err(e),
                };
                if tx.send(Arc::new(Snapshot { jobs })).is_err() {
                    break;
                }
            }
        });
        Board { rx }
    }

    /// Follow the listings from the next one on.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        let mut rx = self.rx.clone();
        rx.borrow_and_update();
        rx
    }
}

/// `job_id` as the latest listing has it; a job not listed (submitted after the listing, or
/// forgotten by the controller) is asked for on its own.
pub async fn look(
    backend: &Backend,
    snapshot: &Snapshot,
    job_id: u64,
) -> Result<Option<JobInfo>, SlurmError> {
    match &snapshot.jobs {
        Ok(jobs) => match jobs.get(&job_id) {
            Some(j) => Ok(Some(j.clone())),
            None => backend.job(job_id).await,
        },
        Err(e) => Err(e.clone()),
    }
}
