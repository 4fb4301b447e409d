//! Fixtures the daemon's unit tests share.

use crew_core::plan::PlannedTask;
use crew_core::run::{FailurePolicy, Reuse, RunSpec};
use std::sync::Arc;

/// A plain run of `tasks`: one at a time, one attempt, fail-fast, no reuse.
pub fn run_spec(tasks: Vec<Arc<PlannedTask>>) -> RunSpec {
    RunSpec {
        goal: "g".into(),
        cwd: "/w".into(),
        team: "t".into(),
        workflow: "w".into(),
        runtime: "fake".into(),
        model: None,
        concurrency: 1,
        failure_policy: FailurePolicy::FailFast,
        budget: None,
        require_plan_approval: false,
        reuse: Reuse::Off,
        max_attempts: 1,
        schedule_id: None,
        imported: false,
        task_verify_commands: vec![],
        job_shapes: Default::default(),
        workspace: None,
        tasks,
    }
}
