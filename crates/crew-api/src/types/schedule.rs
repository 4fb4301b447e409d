use super::RunParams;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    #[default]
    Skip,
    Allow,
    CancelPrevious,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUp {
    #[default]
    Latest,
    None,
    All,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleAddParams {
    /// Unique among jobs; other `schedule.*` methods take it where they take the id. 1-200
    /// characters, no control characters, not another job's id. Default: the team and the
    /// start of the goal, made unique with ` (2)`, ` (3)`…
    pub name: Option<String>,
    /// 5 fields (or 6 with leading seconds), names, `@daily` etc.
    pub cron: Option<String>,
    pub interval_ms: Option<i64>,
    /// One shot, RFC 3339.
    pub at: Option<String>,
    /// IANA zone; default: the daemon's local zone.
    pub timezone: Option<String>,
    pub run: RunParams,
    pub overlap: Option<Overlap>,
    pub catch_up: Option<CatchUp>,
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleUpdateParams {
    /// The job's id or its name.
    pub id: String,
    /// A new name, unique as for `schedule.add`.
    pub name: Option<String>,
    pub cron: Option<String>,
    pub interval_ms: Option<i64>,
    pub at: Option<String>,
    pub timezone: Option<String>,
    pub run: Option<RunParams>,
    pub overlap: Option<Overlap>,
    pub catch_up: Option<CatchUp>,
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleIdParams {
    /// The job's id or its name.
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleRemoveParams {
    /// The job's id or its name.
    pub id: String,
    /// Cancel the job's still-active runs (default true).
    pub cancel_runs: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    pub name: String,
    /// `cron`, `interval` or `at`.
    pub kind: String,
    /// The expression, the interval in ms, or the instant.
    pub spec: String,
    pub timezone: String,
    pub enabled: bool,
    pub next_fire_at: Option<String>,
    /// The last fire of any kind, scheduled or `schedule.trigger` (see `lastFireManual`).
    /// Manual fires do not move the schedule: the next fire is as if they had not happened.
    pub last_fire_at: Option<String>,
    /// True when the last fire was a `schedule.trigger`.
    #[serde(default)]
    pub last_fire_manual: bool,
    pub last_run_id: Option<String>,
    pub run_ids: Vec<String>,
    pub fire_count: u64,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub run: RunParams,
    pub created_at: String,
    /// The last scheduled fire that started no run, and why (cleared by the next one that
    /// starts a run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_skip: Option<JobSkip>,
}

/// A scheduled fire that started no run: when (in the job's zone) and why.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSkip {
    pub at: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleListResult {
    pub jobs: Vec<Job>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleRemoveResult {
    pub cancelled_run_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TriggerResult {
    pub run_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreviewParams {
    pub cron: String,
    pub timezone: Option<String>,
    /// Default 5, at most 1000.
    pub count: Option<i64>,
    /// RFC 3339; default now.
    pub from: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreviewResult {
    pub fire_times: Vec<String>,
    pub timezone: String,
}
