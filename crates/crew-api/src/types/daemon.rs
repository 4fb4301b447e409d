use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PingResult {
    pub version: String,
    pub pid: u32,
    pub uptime_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    pub version: String,
    pub api_version: String,
    pub pid: u32,
    pub uptime_ms: u64,
    pub socket: String,
    pub state_dir: String,
    pub runs: RunCounts,
    pub schedules: ScheduleCounts,
    pub journal: JournalStatus,
    pub workers: WorkerCounts,
    /// How local attempts are held: `pid-namespace` (each in its own, under crew's init),
    /// `process-group+subreaper` (namespaces unavailable) or `process-group` (no init).
    #[serde(default)]
    pub containment: String,
    /// The box around local attempts: `off`, `bubblewrap`, or why it is unavailable here.
    #[serde(default)]
    pub sandbox: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunCounts {
    pub active: u64,
    pub total: u64,
    /// Runs whose details are in memory.
    pub resident: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleCounts {
    pub total: u64,
    pub enabled: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JournalStatus {
    pub last_seq: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkerCounts {
    pub running: u64,
    pub max: u64,
}
