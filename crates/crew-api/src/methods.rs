//! Every method as a typed descriptor. Adding a method = one `method!` line here; the daemon's
//! registration test and the OpenRPC drift test fail until it is handled and documented.

use crate::types::*;
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Serialize};

pub trait Method {
    const NAME: &'static str;
    const SUMMARY: &'static str;
    /// Error codes this method may answer with, besides the standard ones.
    const ERRORS: &'static [i32];
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    type Result: Serialize + DeserializeOwned + JsonSchema + Clone + Send + 'static;
}

macro_rules! method {
    ($ty:ident, $name:literal, $params:ty, $result:ty, [$($err:expr),*], $summary:literal) => {
        #[doc = $summary]
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            const SUMMARY: &'static str = $summary;
            const ERRORS: &'static [i32] = &[$($err),*];
            type Params = $params;
            type Result = $result;
        }
    };
}

use crate::codes::*;

method!(
    DaemonPing,
    "daemon.ping",
    NoParams,
    PingResult,
    [],
    "Liveness check: version, pid and uptime."
);
method!(
    DaemonStatus_,
    "daemon.status",
    NoParams,
    DaemonStatus,
    [],
    "Daemon overview: socket, state dir, runs, schedules, journal, workers."
);
method!(
    DaemonShutdown,
    "daemon.shutdown",
    NoParams,
    Empty,
    [],
    "Shut the daemon down gracefully; in-flight calls finish first."
);
method!(
    ResourceList,
    "resource.list",
    ResourceListParams,
    ResourceListResult,
    [],
    "Agents, teams, workflows and skills visible from `cwd`, with diagnostics."
);
method!(
    ResourceGet,
    "resource.get",
    ResourceGetParams,
    ResourceGetResult,
    [NOT_FOUND],
    "One parsed resource by kind and name."
);
method!(
    ResourceValidate,
    "resource.validate",
    ValidateParams,
    ValidateResult,
    [],
    "Validate every resource visible from `cwd`."
);
method!(
    TeamPlan,
    "team.plan",
    RunParams,
    PlanResult,
    [NOT_FOUND, VALIDATION_FAILED],
    "The tasks a run would execute, with exact dependencies. Nothing is stored."
);
method!(
    TeamRun,
    "team.run",
    RunParams,
    RunStarted,
    [
        NOT_FOUND,
        VALIDATION_FAILED,
        LIMIT_EXCEEDED,
        SHUTTING_DOWN,
        STORAGE_FAILED
    ],
    "Start a run; answers as soon as the run is durably created."
);
method!(
    TeamStatus,
    "team.status",
    RunIdParams,
    StatusResult,
    [NOT_FOUND],
    "A run and its tasks."
);
method!(
    TeamList,
    "team.list",
    ListParams,
    ListResult,
    [],
    "Run summaries, newest first, paged with `before`/`next`."
);
method!(
    TeamCancel,
    "team.cancel",
    CancelParams,
    CancelResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Cancel a run: workers get SIGTERM, then SIGKILL after a grace period."
);
method!(
    TeamResume,
    "team.resume",
    ResumeParams,
    ResumeResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Re-queue failed, cancelled, skipped and needs_attention tasks and continue."
);
method!(
    TeamRetry,
    "team.retry",
    RetryParams,
    RetryResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Run the named tasks again with a new attempt (with `withDependents`, their finished downstream tasks too)."
);
method!(
    TeamPick,
    "team.pick",
    PickParams,
    PickResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Replace a step's chosen candidate: before its dependents started the choice just changes; after, they run again from the new choice. Refused once the run was applied."
);
method!(
    TeamApprove,
    "team.approve",
    ApproveParams,
    RunStatusResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Approve the plan of a run blocked on plan approval; it continues at once."
);
method!(
    TeamReject,
    "team.reject",
    ApproveParams,
    RunStatusResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Reject the plan of a run blocked on plan approval; the run is cancelled."
);
method!(TeamSteer, "team.steer", TaskMessageParams, SteerResult, [NOT_FOUND, INVALID_STATE, STORAGE_FAILED], "Send a message to a task: live to a running worker where the runtime allows, else queued for its next attempt.");
method!(
    TeamRespond,
    "team.respond",
    TaskMessageParams,
    RespondResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Answer a task that is waiting for input."
);
method!(
    TeamWait,
    "team.wait",
    WaitParams,
    WaitResult,
    [NOT_FOUND],
    "Wait until a run stops (finished or blocked) or the timeout passes."
);
method!(
    TeamEvents,
    "team.events",
    EventsParams,
    EventsResult,
    [NOT_FOUND],
    "Stored events after `afterSeq`, optionally of one run."
);
method!(
    TeamArtifacts,
    "team.artifacts",
    RunIdParams,
    ArtifactsResult,
    [NOT_FOUND],
    "A run's artifacts: prompts, results, transcripts, shared outputs."
);
method!(
    TeamArtifact,
    "team.artifact",
    ArtifactParams,
    ArtifactResult,
    [NOT_FOUND],
    "Read (part of) one artifact."
);
method!(
    TeamSummary,
    "team.summary",
    RunIdParams,
    SummaryResult,
    [NOT_FOUND],
    "A markdown report of a run."
);
method!(
    TeamForget,
    "team.forget",
    ForgetParams,
    ForgetResult,
    [NOT_FOUND, INVALID_STATE, STORAGE_FAILED],
    "Remove a finished run, its events and artifacts, and its worktrees and branches (worktrees with uncommitted work only with `force`; a branch checked out in a worktree or committed on is kept). Answers when the cleanup is done, with what was kept in `notes`."
);
method!(
    TeamPrune,
    "team.prune",
    PruneParams,
    PruneResult,
    [STORAGE_FAILED],
    "Remove finished runs beyond the newest `keep` (and, with `olderThanMs`, only older ones); active runs are never touched, so it works while runs are active."
);
method!(
    TeamDiff,
    "team.diff",
    DiffParams,
    DiffResult,
    [NOT_FOUND, INVALID_STATE],
    "A worktree run's change (or one task's): diffstat and patch."
);
method!(
    TeamApply,
    "team.apply",
    ApplyParams,
    ApplyResult,
    [NOT_FOUND, INVALID_STATE],
    "Bring a worktree run's integrated branch into the user's current branch (refused on a dirty tree or a conflicting branch)."
);
method!(
    TeamExport,
    "team.export",
    RunIdParams,
    ExportResult,
    [NOT_FOUND],
    "A self-contained bundle of a run: run, tasks, events and artifacts, secrets redacted."
);
method!(
    TeamImport,
    "team.import",
    ImportParams,
    ImportResult,
    [VALIDATION_FAILED, INVALID_STATE, STORAGE_FAILED],
    "Import a bundle made by team.export, given inline or as a file path the daemon reads."
);
method!(
    ScheduleAdd,
    "schedule.add",
    ScheduleAddParams,
    Job,
    [VALIDATION_FAILED, NOT_FOUND, STORAGE_FAILED],
    "Add a scheduled job (cron, interval or one shot) that runs a team.run request."
);
method!(
    ScheduleList,
    "schedule.list",
    NoParams,
    ScheduleListResult,
    [],
    "Every scheduled job."
);
method!(
    ScheduleGet,
    "schedule.get",
    ScheduleIdParams,
    Job,
    [NOT_FOUND],
    "One scheduled job."
);
method!(
    ScheduleUpdate,
    "schedule.update",
    ScheduleUpdateParams,
    Job,
    [NOT_FOUND, VALIDATION_FAILED, STORAGE_FAILED],
    "Change a job's fields."
);
method!(
    ScheduleEnable,
    "schedule.enable",
    ScheduleIdParams,
    Job,
    [NOT_FOUND, STORAGE_FAILED],
    "Enable a job."
);
method!(
    ScheduleDisable,
    "schedule.disable",
    ScheduleIdParams,
    Job,
    [NOT_FOUND, STORAGE_FAILED],
    "Disable a job."
);
method!(
    ScheduleRemove,
    "schedule.remove",
    ScheduleRemoveParams,
    ScheduleRemoveResult,
    [NOT_FOUND, STORAGE_FAILED],
    "Remove a job; its still-active runs are cancelled unless `cancelRuns` is false."
);
method!(
    ScheduleTrigger,
    "schedule.trigger",
    ScheduleIdParams,
    TriggerResult,
    [NOT_FOUND, VALIDATION_FAILED, STORAGE_FAILED],
    "Fire a job now."
);
method!(
    SchedulePreview,
    "schedule.preview",
    PreviewParams,
    PreviewResult,
    [],
    "The next fire times of a cron expression in a zone."
);
method!(CacheStats, "cache.stats", NoParams, CacheStatsResult, [], "Hits, misses, evictions, entries, capacity and hit rate per cache; tokens and cost saved by result reuse.");
method!(
    CacheClear,
    "cache.clear",
    CacheClearParams,
    Empty,
    [],
    "Empty one cache or all."
);
method!(
    CacheInvalidate,
    "cache.invalidate",
    CacheInvalidateParams,
    InvalidateResult,
    [],
    "Drop the cached entries of one resource path or one run."
);

/// Subscription descriptor: `team.subscribe` → notifications `team.event` → `team.unsubscribe`.
pub struct TeamSubscribe;
impl TeamSubscribe {
    pub const NAME: &'static str = "team.subscribe";
    pub const UNSUBSCRIBE: &'static str = "team.unsubscribe";
    pub const NOTIFICATION: &'static str = crate::EVENT_NOTIFICATION;
}

/// A method's documentation, for OpenRPC.
pub struct MethodDoc {
    pub name: &'static str,
    pub summary: &'static str,
    pub errors: &'static [i32],
    pub params: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
    pub result: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

fn doc<M: Method>() -> MethodDoc {
    MethodDoc {
        name: M::NAME,
        summary: M::SUMMARY,
        errors: M::ERRORS,
        params: |g| g.subschema_for::<M::Params>(),
        result: |g| g.subschema_for::<M::Result>(),
    }
}

/// Every request/response method, in the order of SPEC §10.
pub fn all() -> Vec<MethodDoc> {
    vec![
        doc::<DaemonPing>(),
        doc::<DaemonStatus_>(),
        doc::<DaemonShutdown>(),
        doc::<ResourceList>(),
        doc::<ResourceGet>(),
        doc::<ResourceValidate>(),
        doc::<TeamPlan>(),
        doc::<TeamRun>(),
        doc::<TeamStatus>(),
        doc::<TeamList>(),
        doc::<TeamCancel>(),
        doc::<TeamResume>(),
        doc::<TeamRetry>(),
        doc::<TeamPick>(),
        doc::<TeamApprove>(),
        doc::<TeamReject>(),
        doc::<TeamSteer>(),
        doc::<TeamRespond>(),
        doc::<TeamWait>(),
        doc::<TeamEvents>(),
        doc::<TeamArtifacts>(),
        doc::<TeamArtifact>(),
        doc::<TeamSummary>(),
        doc::<TeamForget>(),
        doc::<TeamPrune>(),
        doc::<TeamDiff>(),
        doc::<TeamApply>(),
        doc::<TeamExport>(),
        doc::<TeamImport>(),
        doc::<ScheduleAdd>(),
        doc::<ScheduleList>(),
        doc::<ScheduleGet>(),
        doc::<ScheduleUpdate>(),
        doc::<ScheduleEnable>(),
        doc::<ScheduleDisable>(),
        doc::<ScheduleRemove>(),
        doc::<ScheduleTrigger>(),
        doc::<SchedulePreview>(),
        doc::<CacheStats>(),
        doc::<CacheClear>(),
        doc::<CacheInvalidate>(),
    ]
}

/// Every method name the daemon must serve, including `rpc.discover` and the subscription pair.
pub fn all_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = all().iter().map(|d| d.name).collect();
    v.push("rpc.discover");
    v.push(TeamSubscribe::NAME);
    v.push(TeamSubscribe::UNSUBSCRIBE);
    v
}
