//! What crew checks after a task's agent finished, frozen into the plan: the file scope's
//! policy, the no-change guard and the verification commands (issue 17). The daemon runs the
//! commands and looks at the changes; the core only carries the settings and decides retries.

use serde::{Deserialize, Serialize};

/// Verification failures retried (with the failure in the next prompt) when neither the step
/// nor the config says.
pub const DEFAULT_VERIFY_RETRIES: u32 = 1;

/// What a change outside the task's scope does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopePolicy {
    /// The task needs attention, naming the paths (the default).
    NeedsAttention,
    /// The task completes with a `task.warning` naming the paths.
    Warn,
}

impl ScopePolicy {
    pub fn parse(s: &str) -> Option<ScopePolicy> {
        match s {
            "needs_attention" | "needs-attention" => Some(ScopePolicy::NeedsAttention),
            "warn" => Some(ScopePolicy::Warn),
            _ => None,
        }
    }
}

/// Commands run in the task's workspace after its agent finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verify {
    /// Each run as `sh -c <command>`. Empty only between planning and the daemon filling in
    /// the project's configured commands.
    pub commands: Vec<String>,
    /// Verification failures retried; `None` until the daemon applies its config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
}

/// A task's checks. `None` fields take the daemon's configured default.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_policy: Option<ScopePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_no_change: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

impl Checks {
    pub fn is_default(&self) -> bool {
        *self == Checks::default()
    }

    /// Verification failures this task may retry.
    pub fn verify_retries(&self) -> u32 {
        self.verify
            .as_ref()
            .and_then(|v| v.retries)
            .unwrap_or(DEFAULT_VERIFY_RETRIES)
    }
}

/// The `reason` of an attempt that failed its verification commands.
pub const VERIFY_FAILED: &str = "verify";

/// One verification command's outcome, as `task.completed` and the artifact report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyOutcome {
    pub command: String,
    /// `None` when it was killed (timeout, cancel) or ended by a signal.
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The end of its output (stdout and stderr together), redacted and bounded.
    pub tail: String,
    /// Bytes of output it printed in all (more than the tail when it was cut).
    pub output_bytes: u64,
    /// The artifact holding its kept output.
    pub artifact: String,
}

impl VerifyOutcome {
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}
