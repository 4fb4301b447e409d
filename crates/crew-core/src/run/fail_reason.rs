//! Why an attempt failed, as a type. The wire (events, `task.status`, the dashboard) carries
//! the reason as a string in `AttemptResult::Failed::reason`; this enum is the one place those
//! strings are spelled for the worker path, so a new reason is a new variant, not a new literal.

use serde::{Deserialize, Serialize};

/// A failed attempt's reason. `as_str` is its wire string, unchanged from when these were
/// literals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// The attempt's files could not be written or made durable.
    Storage,
    /// The task's start could not be journaled (the journal cannot write): no worker ran, and
    /// the attempt does not count against the task's attempts.
    NotJournaled,
    /// The worker's program could not be started (or its command is empty).
    Spawn,
    /// The run's working directory is gone.
    Cwd,
    /// A daemon bug (a panic) or an injected fault before the worker started.
    Internal,
    /// The actor stopped the worker (cancel).
    Cancelled,
    /// The task's overall timeout.
    Timeout,
    /// The no-output watchdog.
    NoOutput,
    /// The agent's stream reported an error and no final answer.
    ModelError,
    /// The worker exited unsuccessfully without printing anything.
    Crash,
    /// The worker exited unsuccessfully after printing something.
    Exit,
    /// The task's worktree could not be made or committed.
    Workspace,
    /// The task's pre-step script failed (`checks::PRE_STEP_FAILED`).
    PreStep,
    /// The task's verification failed (`checks::VERIFY_FAILED`).
    Verify,
}

impl FailReason {
    pub const ALL: [FailReason; 14] = [
        FailReason::Storage,
        FailReason::NotJournaled,
        FailReason::Spawn,
        FailReason::Cwd,
        FailReason::Internal,
        FailReason::Cancelled,
        FailReason::Timeout,
        FailReason::NoOutput,
        FailReason::ModelError,
        FailReason::Crash,
        FailReason::Exit,
        FailReason::Workspace,
        FailReason::PreStep,
        FailReason::Verify,
    ];

    /// The string events and the API carry.
    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::Storage => "storage",
            FailReason::NotJournaled => "not_journaled",
            FailReason::Spawn => "spawn",
            FailReason::Cwd => "cwd",
            FailReason::Internal => "internal",
            FailReason::Cancelled => "cancelled",
            FailReason::Timeout => "timeout",
            FailReason::NoOutput => "no_output",
            FailReason::ModelError => "model_error",
            FailReason::Crash => "crash",
            FailReason::Exit => "exit",
            FailReason::Workspace => "workspace",
            FailReason::PreStep => crate::checks::PRE_STEP_FAILED,
            FailReason::Verify => crate::checks::VERIFY_FAILED,
        }
    }
}

impl std::fmt::Display for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<FailReason> for String {
    fn from(r: FailReason) -> String {
        r.as_str().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire strings are what events already journaled say: they must never change.
    #[test]
    fn wire_strings_are_stable_and_match_serde() {
        let want = [
            "storage",
            "not_journaled",
            "spawn",
            "cwd",
            "internal",
            "cancelled",
            "timeout",
            "no_output",
            "model_error",
            "crash",
            "exit",
            "workspace",
            "pre_step",
            "verify",
        ];
        for (r, w) in FailReason::ALL.iter().zip(want) {
            assert_eq!(r.as_str(), w);
            assert_eq!(r.to_string(), w);
            assert_eq!(serde_json::to_value(r).unwrap(), serde_json::json!(w));
            let back: FailReason = serde_json::from_value(serde_json::json!(w)).unwrap();
            assert_eq!(back, *r);
        }
    }
}
