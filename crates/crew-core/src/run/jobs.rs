//! Scheduled jobs as state: what `schedule.*` events build.

use crate::schedule::{CatchUp, Overlap, ScheduleSpec};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleJob {
    pub id: String,
    pub name: String,
    pub spec: ScheduleSpec,
    pub timezone: String,
    pub enabled: bool,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    /// The `team.run` params, as the client gave them (validated when the job was added).
    pub run: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub last_fire_at: Option<DateTime<Utc>>,
    pub last_run_id: Option<String>,
    pub fire_count: u64,
    /// Runs this job spawned, newest last (bounded).
    pub run_ids: Vec<String>,
}

/// How many spawned run ids a job remembers.
pub const JOB_RUN_IDS_KEPT: usize = 100;
