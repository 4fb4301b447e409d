use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A state change (SPEC §6). `seq` is daemon-wide and strictly increasing; `runSeq` counts the
/// run's own events.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub seq: u64,
    pub run_seq: u64,
    /// RFC 3339.
    pub time: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default)]
    pub data: serde_json::Value,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsParams {
    pub run_id: Option<String>,
    /// Events with a larger seq than this (default 0 = from the start).
    pub after_seq: Option<i64>,
    /// Default 500, at most 5000.
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EventsResult {
    pub events: Vec<Event>,
    /// Pass as `afterSeq` to continue.
    pub next_seq: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscribeParams {
    pub run_id: Option<String>,
    pub after_seq: Option<i64>,
}

/// What a subscription sends: events, and a final notice when the subscriber was dropped.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum SubscriptionItem {
    Event(Event),
    Notice(SubscriptionNotice),
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionNotice {
    /// `dropped`: the subscriber fell too far behind; resubscribe with `afterSeq = lastSeq`.
    pub notice: String,
    pub last_seq: u64,
    pub message: String,
}
