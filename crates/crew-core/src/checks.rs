//! What crew checks after a task's agent finished, frozen into the plan: the file scope's
//! policy, the no-change guard and the verification commands (issue 17); and the one command
//! it runs before the agent, a step's pre-step script (issue 19). The daemon runs the commands
//! and looks at the changes; the core only carries the settings and decides retries.

use serde::{Deserialize, Serialize};

mod failure;
pub use failure::{failing_lines, failure_message};

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

/// pi-crew's `preStepTimeout` default.
pub const PRE_STEP_TIMEOUT_MS: u64 = 30_000;
/// The longest `preStepTimeout` a step may ask for (ten minutes, like a verification command).
pub const PRE_STEP_TIMEOUT_MAX_MS: u64 = 10 * 60 * 1000;
/// Bytes of the script's output kept for the prompt (the end of it, like a verification
/// command's tail). pi-crew took up to 1 MB; a prompt block that size would crowd out the task.
pub const PRE_STEP_OUTPUT_BYTES: usize = 64 << 10;
/// The `reason` of an attempt whose pre-step script failed.
pub const PRE_STEP_FAILED: &str = "pre_step";

/// A step's `preStepScript` (issue 19): run in the task's workspace before its worker, its
/// output joining the prompt. Only from files the user trusts (`plan_checks` in crewd).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreStep {
    /// The program, as written: a path relative to the task's workspace, absolute, or a name
    /// looked up on `PATH`. Run directly (no shell), as pi-crew's `execFileSync` did.
    pub script: String,
    /// `preStepArgs`, one argument each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    pub timeout_ms: u64,
    /// `preStepOptional`: a failure is a `task.warning` and the agent runs without the output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl PreStep {
    /// The command line as shown to a user (`team.plan`, notes, errors).
    pub fn display(&self) -> String {
        let mut out = self.script.clone();
        for a in &self.args {
            out.push(' ');
            out.push_str(a);
        }
        out
    }

    /// A `sh -c` command that runs exactly `script args…` (each single-quoted), so the runner
    /// verification commands use can run it with no shell interpretation of the words.
    pub fn shell_command(&self) -> String {
        let mut out = String::from("exec ");
        out.push_str(&crate::text::shell_quoted(&self.script));
        for a in &self.args {
            out.push(' ');
            out.push_str(&crate::text::shell_quoted(a));
        }
        out
    }
}

/// A task whose product is the artifact its step names (`output: research-summary.md`, a
/// writer's), not a change to the code: the no-change guard does not apply to it.
pub fn product_is_artifact(t: &crate::plan::PlannedTask) -> bool {
    t.output
        .as_ref()
        .is_some_and(|o| o.as_str() != format!("{}.md", t.id))
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
    /// Run before the agent; see [`PreStep`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_step: Option<PreStep>,
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

#[cfg(test)]
mod pre_step_tests {
    use super::*;

    #[test]
    fn the_shell_command_quotes_every_word() {
        let p = PreStep {
            script: "scripts/ctx.sh".into(),
            args: vec!["a b".into(), "it's".into(), "$HOME".into()],
            timeout_ms: PRE_STEP_TIMEOUT_MS,
            optional: false,
        };
        assert_eq!(
            p.shell_command(),
            r#"exec 'scripts/ctx.sh' 'a b' 'it'\''s' '$HOME'"#
        );
        assert_eq!(p.display(), "scripts/ctx.sh a b it's $HOME");
    }
}
