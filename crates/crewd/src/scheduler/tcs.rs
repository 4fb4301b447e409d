//! tokio-cron-scheduler as a timer driver: one one-shot job per armed schedule job, created at
//! the instant crew's own math computed. Its callback only reports which job woke; the engine
//! decides what (if anything) is due. Nothing of the crate's cron parser, `*_tz` constructors,
//! repeated jobs or stores is used (SPEC §8; .notes/schedule-notes.md has the defect table).

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_cron_scheduler::{Job, JobScheduler};
use uuid::Uuid;

/// The crate's internal broadcast channels: a listener that lags behind this many messages
/// stops for good (job code is then never found), so keep it well above a burst of re-arms.
const CHANNEL_SIZE: usize = 2048;

pub struct TcsTimers {
    sched: JobScheduler,
    uuids: HashMap<Arc<str>, Uuid>,
    wake_tx: mpsc::UnboundedSender<(Arc<str>, Uuid)>,
}

impl TcsTimers {
    pub async fn start(
        wake_tx: mpsc::UnboundedSender<(Arc<str>, Uuid)>,
    ) -> Result<TcsTimers, tokio_cron_scheduler::JobSchedulerError> {
        let sched = JobScheduler::new_with_channel_size(CHANNEL_SIZE).await?;
        sched.start().await?;
        Ok(TcsTimers {
            sched,
            uuids: HashMap::new(),
            wake_tx,
        })
    }

    /// (Re)arm `id` for `at`. The crate counts in whole seconds and polls every 500 ms, so the
    /// wake-up may come up to about a second early or half a second late.
    pub async fn arm(&mut self, id: &str, at: DateTime<Utc>) {
        self.disarm(id).await;
        let wait = (at - Utc::now()).to_std().unwrap_or_default();
        let Some(instant) = std::time::Instant::now().checked_add(wait) else {
            return;
        };
        let key: Arc<str> = Arc::from(id);
        let tx = self.wake_tx.clone();
        let for_job = key.clone();
        let job = match Job::new_one_shot_at_instant(instant, move |uuid, _sched| {
            let _ = tx.send((for_job.clone(), uuid));
        }) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!(job = id, error = ?e, "cannot create a timer");
                return;
            }
        };
        match self.sched.add(job).await {
            Ok(uuid) => {
                self.uuids.insert(key, uuid);
            }
            Err(e) => tracing::warn!(job = id, error = ?e, "cannot register a timer"),
        }
    }

    pub fn is_armed(&self, id: &str) -> bool {
        self.uuids.contains_key(id)
    }

    pub async fn disarm(&mut self, id: &str) {
        if let Some(uuid) = self.uuids.remove(id) {
            // A one-shot that already fired is gone from the crate; its removal is a no-op.
            let _ = self.sched.remove(&uuid).await;
        }
    }

    /// The one-shot `uuid` of `id` woke, so the crate drops it by itself: forget it without
    /// a removal round trip (unless `id` was re-armed since).
    pub fn spent(&mut self, id: &str, uuid: Uuid) {
        if self.uuids.get(id) == Some(&uuid) {
            self.uuids.remove(id);
        }
    }

    pub async fn shutdown(mut self) {
        let _ = self.sched.shutdown().await;
    }
}
