//! Property tests of the run state machine: random commands over random small DAGs, with the
//! state machine's invariants checked after every single event.

use chrono::{DateTime, Duration, TimeZone, Utc};
use crew_core::plan::PlannedTask;
use crew_core::resource::SystemPromptMode;
use crew_core::run::candidates::{self, Candidacy, Contender, Select};
use crew_core::run::{
    replay_run, task_transition_allowed, AttemptResult, Budget, Event, EventBody, FailurePolicy,
    Pending, RetryPolicy, Reuse, RunSpec, RunStatus, State, TaskStatus,
};
use crew_core::usage::Usage;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::HashMap;

#[derive(Debug, Clone)]
struct RunDef {
    /// Task `i` depends on the tasks `j < i` whose bit is set.
    dep_masks: Vec<u8>,
    writes: Vec<bool>,
    concurrency: u32,
    policy: FailurePolicy,
    budget: Option<u64>,
    approval: bool,
    max_attempts: u32,
    /// Per task: how many candidates a writing task tries (issue 36; under 2: none).
    candidates: Vec<u8>,
    /// Candidates are chosen by `first` to pass, else by `smallest`.
    select_first: bool,
}

impl RunDef {
    fn spec(&self) -> RunSpec {
        let id = |i: usize| crew_core::ids::SafeId::new(format!("{:02}_t{i}", i + 1)).unwrap();
        let tasks = self
            .dep_masks
            .iter()
            .zip(&self.writes)
            .enumerate()
            .map(|(i, (mask, writes))| {
                PlannedTask::from(crew_core::plan::FlatTask {
                    candidates: None,
                    resources: Default::default(),
                    network: None,
                    resolves: None,
                    id: id(i),
                    step_id: format!("t{i}"),
                    role: "role".into(),
                    agent: "agent".into(),
                    depends_on: (0..i.min(8))
                        .filter(|j| mask & (1 << j) != 0)
                        .map(id)
                        .collect(),
                    task_template: "{goal}".into(),
                    output: None,
                    reads: vec![],
                    model: None,
                    system_prompt: "".into(),
                    system_prompt_mode: SystemPromptMode::Replace,
                    tools: vec![].into(),
                    thinking: None,
                    effort: None,
                    fallback_models: Vec::new(),
                    seed_paths: Vec::new(),
                    scope: Vec::new(),
                    checks: Default::default(),
                    skills: Default::default(),
                    writes: *writes,
                    expands: None,
                    added_by: None,
                    judging: Default::default(),
                    title: None,
                })
            })
            .collect();
        // Candidates (issue 36), split as the daemon splits them at `team.run`.
        let tasks: Vec<PlannedTask> = tasks;
        let tasks = tasks
            .into_iter()
            .zip(&self.candidates)
            .map(|(mut t, n)| {
                if *n >= 2 {
                    // Only a writing task has candidates.
                    t.writes = true;
                    t.candidates = Some(std::sync::Arc::new(Candidacy::Asked {
                        contenders: vec![Contender::default(); usize::from(*n)],
                        select: Some(if self.select_first {
                            Select::First
                        } else {
                            Select::Smallest
                        }),
                        judge: None,
                    }));
                }
                t
            })
            .collect();
        let tasks = candidates::expand(tasks, None)
            .into_iter()
            .map(std::sync::Arc::new)
            .collect();
        RunSpec {
            goal: "g".into(),
            cwd: "/w".into(),
            team: "t".into(),
            workflow: "w".into(),
            runtime: "fake".into(),
            model: None,
            concurrency: self.concurrency,
            failure_policy: self.policy,
            budget: self.budget.map(|tokens| Budget {
                tokens,
                warn_at: 0.8,
                abort_at: 1.0,
            }),
            require_plan_approval: self.approval,
            reuse: Reuse::Off,
            max_attempts: self.max_attempts,
            schedule_id: None,
            imported: false,
            task_verify_commands: vec![],
            job_shapes: Default::default(),
            workspace: None,
            tasks,
        }
    }
}

fn run_def() -> impl Strategy<Value = RunDef> {
    // Some runs are big enough that tasks are found through the run's task index, not a scan.
    prop_oneof![4 => 1usize..=6, 1 => 17usize..=24].prop_flat_map(|n| {
        (
            proptest::collection::vec(any::<u8>(), n),
            proptest::collection::vec(prop::bool::weighted(0.3), n),
            1u32..=3,
            any::<bool>(),
            prop::option::weighted(0.4, 20u64..400),
            prop::bool::weighted(0.3),
            1u32..=3,
            proptest::collection::vec(prop::sample::select(vec![0u8, 0, 0, 2, 3]), n),
            any::<bool>(),
        )
            .prop_map(
                |(
                    dep_masks,
                    writes,
                    concurrency,
                    cont,
                    budget,
                    approval,
                    max_attempts,
                    candidates,
                    select_first,
                )| RunDef {
                    dep_masks,
                    writes,
                    concurrency,
                    policy: if cont {
                        FailurePolicy::Continue
                    } else {
                        FailurePolicy::FailFast
                    },
                    budget,
                    approval,
                    max_attempts,
                    candidates,
                    select_first,
                },
            )
    })
}

#[derive(Debug, Clone)]
enum Cmd {
    Dispatch,
    /// outcome: 0-1 completed, 2 no final text, 3 retryable failure, 4 final failure, 5 asked.
    Finish {
        run: usize,
        pick: usize,
        outcome: u8,
        tokens: u64,
    },
    Progress {
        run: usize,
        pick: usize,
        tokens: u64,
    },
    Cancel {
        run: usize,
    },
    Resume {
        run: usize,
    },
    Retry {
        run: usize,
        pick: usize,
    },
    Approve {
        run: usize,
    },
    Reject {
        run: usize,
    },
    Respond {
        run: usize,
        pick: usize,
    },
    Advance {
        ms: i64,
    },
    /// The daemon restarted: running tasks lost their workers.
    Restart,
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let r = 0usize..3;
    let pick = 0usize..6;
    prop_oneof![
        6 => Just(Cmd::Dispatch),
        6 => (r.clone(), pick.clone(), 0u8..6, 0u64..120)
            .prop_map(|(run, pick, outcome, tokens)| Cmd::Finish { run, pick, outcome, tokens }),
        3 => (r.clone(), pick.clone(), 0u64..120).prop_map(|(run, pick, tokens)| Cmd::Progress { run, pick, tokens }),
        1 => r.clone().prop_map(|run| Cmd::Cancel { run }),
        2 => r.clone().prop_map(|run| Cmd::Resume { run }),
        2 => (r.clone(), pick.clone()).prop_map(|(run, pick)| Cmd::Retry { run, pick }),
        2 => r.clone().prop_map(|run| Cmd::Approve { run }),
        1 => r.clone().prop_map(|run| Cmd::Reject { run }),
        2 => (r, pick).prop_map(|(run, pick)| Cmd::Respond { run, pick }),
        2 => (0i64..5000).prop_map(|ms| Cmd::Advance { ms }),
        1 => Just(Cmd::Restart),
    ]
}

fn used(tokens: u64) -> Usage {
    Usage {
        input: tokens,
        output: tokens / 3,
        turns: 1,
        // Not a round binary fraction: sums of it depend on their order.
        cost: tokens as f64 * 1.7e-6,
        ..Usage::default()
    }
}

/// What to check after each event, besides the invariants that always hold.
#[derive(Clone, Copy)]
struct Checks {
    /// Run usage never goes down (progress and results only grow an attempt's usage here).
    usage_monotonic: bool,
    /// Every `queued`/`running` run can move on by itself (see `check_live`).
    live: bool,
    /// Do not retry a task whose dependent is running or waiting (a known bug, tested apart).
    avoid_retry_under_running_dependent: bool,
}

const BASE: Checks = Checks {
    usage_monotonic: false,
    live: false,
    avoid_retry_under_running_dependent: true,
};

struct Harness {
    st: State,
    seq: u64,
    now: DateTime<Utc>,
    max_workers: usize,
    run_ids: Vec<String>,
    run_seqs: HashMap<String, u64>,
    checks: Checks,
    log: Vec<Event>,
    reported: HashMap<(String, String, u32), Usage>,
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).unwrap()
}

impl Harness {
    fn new(max_workers: usize, checks: Checks) -> Self {
        Harness {
            st: State::default(),
            seq: 0,
            now: t0(),
            max_workers,
            run_ids: vec![],
            run_seqs: HashMap::new(),
            checks,
            log: vec![],
            reported: HashMap::new(),
        }
    }

    fn emit(&mut self, ps: Vec<Pending>) -> Result<(), TestCaseError> {
        for p in ps {
            self.seq += 1;
            let ev = self.st.stamp(p, self.seq, self.now);
            prop_assert!(ev.seq > self.st.last_seq, "seq not increasing: {:?}", ev);
            if let Some(id) = &ev.run_id {
                let last = self.run_seqs.get(id).copied().unwrap_or(0);
                prop_assert_eq!(ev.run_seq, last + 1, "runSeq gap in {}: {:?}", id, ev);
                self.run_seqs.insert(id.clone(), ev.run_seq);
            }
            let prev = self.st.clone();
            self.st.apply(&ev);
            check_step(&prev, &self.st, &ev, self.max_workers, self.checks)?;
            check_wakeup(&self.st, self.now)?;
            if matches!(ev.body, EventBody::TaskRetrying { .. }) {
                // A state read back from a snapshot finds the same backed-off tasks.
                let json = serde_json::to_vec(&self.st.snapshot()).expect("snapshot");
                let read: State = serde_json::from_slice(&json).expect("state");
                check_wakeup(&read, self.now)?;
            }
            self.log.push(ev);
        }
        Ok(())
    }

    fn settle(&mut self, run: &str) -> Result<(), TestCaseError> {
        for _ in 0..200 {
            let ps = self.st.settle(run);
            if ps.is_empty() {
                return Ok(());
            }
            self.emit(ps)?;
        }
        Err(TestCaseError::fail(format!(
            "settle of {run} does not converge"
        )))
    }

    fn settle_all(&mut self) -> Result<(), TestCaseError> {
        for id in self.run_ids.clone() {
            self.settle(&id)?;
        }
        Ok(())
    }

    fn run_id(&self, i: usize) -> String {
        self.run_ids[i % self.run_ids.len()].clone()
    }

    /// The `pick`-th task of the run with `status`, if any.
    fn pick(&self, run: &str, status: TaskStatus, pick: usize) -> Option<(String, u32)> {
        let r = self.st.runs.get(run)?;
        let tasks: Vec<_> = r.tasks.iter().filter(|t| t.status == status).collect();
        let t = tasks.get(pick % tasks.len().max(1))?;
        Some((t.plan.id.to_string(), t.attempts))
    }

    /// The usage a worker reports for its attempt: what it reported before plus `tokens`. Kept
    /// here, as a worker keeps it, not read back from the state under test.
    fn grow(&mut self, run: &str, task: &str, attempt: u32, tokens: u64) -> Usage {
        let u = self
            .reported
            .entry((run.to_string(), task.to_string(), attempt))
            .or_default();
        u.add(&used(tokens));
        *u
    }

    fn step(&mut self, cmd: &Cmd) -> Result<(), TestCaseError> {
        let retry = RetryPolicy::default();
        match *cmd {
            Cmd::Dispatch => {
                for s in self.st.dispatch(self.now, self.max_workers) {
                    prop_assert_eq!(
                        s.attempt,
                        self.st.runs[&s.run_id].task(&s.task_id).unwrap().attempts + 1
                    );
                    self.emit(vec![s.event])?;
                    self.settle(&s.run_id)?;
                }
                // A second call right away has nothing more to start.
                prop_assert!(self
                    .st
                    .clone()
                    .dispatch(self.now, self.max_workers)
                    .is_empty());
            }
            Cmd::Finish {
                run,
                pick,
                outcome,
                tokens,
            } => {
                let run = self.run_id(run);
                let Some((task, attempt)) = self.pick(&run, TaskStatus::Running, pick) else {
                    return Ok(());
                };
                let usage = self.grow(&run, &task, attempt, tokens);
                // A candidate completes with a commit, and on outcome 1 with a failing check
                // (it is then out, not failed).
                let candidate =
                    candidates::candidate_of(&self.st.runs[&run].task(&task).unwrap().plan)
                        .is_some();
                let result = match outcome {
                    0 | 1 => AttemptResult::Completed {
                        usage,
                        model: None,
                        artifacts: vec![],
                        reused_from: None,
                        commit: candidate.then(|| crew_core::run::TaskCommit {
                            branch: format!("crew/tasks/{run}/{task}"),
                            start: "s".into(),
                            commit: format!("c{tokens}"),
                            files: 1,
                            insertions: tokens,
                            deletions: 0,
                        }),
                        verification: if candidate && outcome == 1 {
                            vec![crew_core::checks::VerifyOutcome {
                                command: "test".into(),
                                exit_code: Some(1),
                                timed_out: false,
                                duration_ms: 1,
                                tail: "no".into(),
                                output_bytes: 2,
                                artifact: "verify/x.log".into(),
                            }]
                        } else {
                            vec![]
                        },
                    },
                    2 => AttemptResult::NoFinalText {
                        usage,
                        model: None,
                        artifacts: vec![],
                    },
                    3 | 4 => AttemptResult::Failed {
                        usage,
                        model: None,
                        artifacts: vec![],
                        error: "boom".into(),
                        retryable: outcome == 3,
                        reason: "crash".into(),
                    },
                    _ => AttemptResult::Asked {
                        usage,
                        model: None,
                        artifacts: vec![],
                        question: "?".into(),
                        session: Some("sessions/t.jsonl".into()),
                    },
                };
                let ps = self.st.finish_attempt(
                    &run,
                    &task,
                    attempt,
                    result.clone(),
                    self.now,
                    &retry,
                    0.5,
                );
                prop_assert!(
                    !ps.is_empty(),
                    "a running task's current attempt result is never dropped"
                );
                self.emit(ps)?;
                self.settle(&run)?;
                // The same result again is stale now.
                prop_assert!(self
                    .st
                    .finish_attempt(&run, &task, attempt, result, self.now, &retry, 0.5)
                    .is_empty());
            }
            Cmd::Progress { run, pick, tokens } => {
                let run = self.run_id(run);
                let Some((task, attempt)) = self.pick(&run, TaskStatus::Running, pick) else {
                    return Ok(());
                };
                let usage = self.grow(&run, &task, attempt, tokens);
                let p = self.st.progress(&run, &task, attempt, usage, None);
                prop_assert!(p.is_some());
                self.emit(p.into_iter().collect())?;
                self.settle(&run)?;
            }
            Cmd::Cancel { run } => {
                let run = self.run_id(run);
                if let Ok((ps, _)) = self.st.cancel_run(&run, None) {
                    self.emit(ps)?;
                    self.settle(&run)?;
                    prop_assert_eq!(self.st.runs[&run].status, RunStatus::Cancelled);
                }
            }
            Cmd::Resume { run } => {
                let run = self.run_id(run);
                if let Ok((ps, _)) = self.st.resume_run(&run, None) {
                    self.emit(ps)?;
                    self.settle(&run)?;
                }
            }
            Cmd::Retry { run, pick } => {
                let run = self.run_id(run);
                let Some(r) = self.st.runs.get(&run) else {
                    return Ok(());
                };
                let task = r.tasks[pick % r.tasks.len()].plan.id.clone();
                let dependent_active = r.tasks.iter().any(|t| {
                    t.plan.depends_on.contains(&task)
                        && matches!(t.status, TaskStatus::Running | TaskStatus::Waiting)
                });
                if dependent_active && self.checks.avoid_retry_under_running_dependent {
                    return Ok(());
                }
                if let Ok((ps, _)) = self.st.retry_tasks(&run, &[task.to_string()]) {
                    self.emit(ps)?;
                    self.settle(&run)?;
                }
            }
            Cmd::Approve { run } => {
                let run = self.run_id(run);
                if let Ok(ps) = self.st.approve(&run, None) {
                    self.emit(ps)?;
                    self.settle(&run)?;
                }
            }
            Cmd::Reject { run } => {
                let run = self.run_id(run);
                if let Ok(ps) = self.st.reject(&run, None) {
                    self.emit(ps)?;
                    self.settle(&run)?;
                    prop_assert_eq!(self.st.runs[&run].status, RunStatus::Cancelled);
                }
            }
            Cmd::Respond { run, pick } => {
                let run = self.run_id(run);
                let Some((task, _)) = self.pick(&run, TaskStatus::Waiting, pick) else {
                    return Ok(());
                };
                let ps = self.st.respond(&run, &task, "answer");
                prop_assert!(ps.is_ok(), "respond to a waiting task: {:?}", ps);
                self.emit(ps.unwrap_or_default())?;
                self.settle(&run)?;
            }
            Cmd::Advance { ms } => self.now += Duration::milliseconds(ms),
            Cmd::Restart => {
                let ps = self.st.requeue_orphans(self.now);
                self.emit(ps)?;
                self.settle_all()?;
            }
        }
        Ok(())
    }

    /// A run that is `queued`/`running` must be able to move on by itself: something runs,
    /// something can start (now or after a backoff), or settle has something to say.
    fn check_live(&self) -> Result<(), TestCaseError> {
        let far = self.now + Duration::days(1);
        let mut probe = self.st.clone();
        let starts = probe.dispatch(far, usize::MAX);
        for (id, run) in &self.st.runs {
            if !matches!(run.status, RunStatus::Queued | RunStatus::Running) {
                continue;
            }
            let moving = run.running_count() > 0
                || starts.iter().any(|s| &s.run_id == id)
                || !self.st.settle(id).is_empty();
            let statuses: Vec<_> = run.tasks.iter().map(|t| t.status).collect();
            prop_assert!(
                moving,
                "run {} is {:?} but stuck: approval {:?}, tasks {:?}",
                id,
                run.status,
                run.approval,
                statuses
            );
        }
        Ok(())
    }
}

/// `next_wakeup` (served by per-run backoff entries) against a scan of every task.
fn check_wakeup(st: &State, now: DateTime<Utc>) -> Result<(), TestCaseError> {
    for after in [t0() - Duration::days(1), now] {
        let scan = st
            .active
            .iter()
            .filter_map(|id| st.runs.get(id))
            .flat_map(|r| r.tasks.iter())
            .filter(|t| t.status == TaskStatus::Queued)
            .filter_map(|t| t.not_before())
            .filter(|t| *t > after)
            .min();
        prop_assert_eq!(st.next_wakeup(after), scan, "next_wakeup({})", after);
    }
    Ok(())
}

fn check_step(
    prev: &State,
    st: &State,
    ev: &Event,
    max_workers: usize,
    checks: Checks,
) -> Result<(), TestCaseError> {
    let mut total_running = 0;
    for (id, run) in &st.runs {
        if let Some(before) = prev.runs.get(id) {
            for (a, b) in before.tasks.iter().zip(&run.tasks) {
                prop_assert!(
                    a.status == b.status || task_transition_allowed(a.status, b.status),
                    "{} {}: {:?} -> {:?} by {}",
                    id,
                    b.plan.id,
                    a.status,
                    b.status,
                    ev.body.type_name()
                );
            }
            if checks.usage_monotonic {
                let (u0, u1) = (before.usage().budget_tokens(), run.usage().budget_tokens());
                prop_assert!(
                    u1 >= u0,
                    "{} usage went down {} -> {} by {}",
                    id,
                    u0,
                    u1,
                    ev.body.type_name()
                );
            }
        }
        for t in &run.tasks {
            if t.status == TaskStatus::Running {
                let deps_done = t.plan.depends_on.iter().all(|d| {
                    run.task(d)
                        .is_some_and(|dt| dt.status == TaskStatus::Completed)
                });
                prop_assert!(
                    deps_done,
                    "{} {} runs before its dependencies completed (after {})",
                    id,
                    t.plan.id,
                    ev.body.type_name()
                );
            }
        }
        // Run usage is the sum of task usage, in the run, its summary and its final events.
        let mut sum = Usage::default();
        for t in &run.tasks {
            sum.add(&t.usage());
        }
        prop_assert_eq!(run.usage(), sum);
        // The summary is kept up to date event by event: it equals one built afresh, but for
        // float drift of the cost while the run goes on (a finished run's is summed afresh).
        let mut kept = st.summaries[id].clone();
        let fresh = run.summary();
        if !run.status.is_finished() {
            let drift = (kept.usage.cost - fresh.usage.cost).abs();
            prop_assert!(
                drift <= 1e-9 * fresh.usage.cost.abs().max(1.0),
                "cost drift {}",
                drift
            );
            kept.usage.cost = fresh.usage.cost;
        }
        prop_assert_eq!(&kept, &fresh);
        prop_assert_eq!(fresh.usage, sum);
        if ev.run_id.as_deref() == Some(id.as_str()) {
            if let EventBody::RunCompleted { usage } | EventBody::RunFailed { usage, .. } = &ev.body
            {
                prop_assert_eq!(
                    usage.budget_tokens(),
                    sum.budget_tokens(),
                    "{} final usage",
                    ev.body.type_name()
                );
            }
        }
        if run.status == RunStatus::Completed {
            // A candidate set aside (out, or not chosen) is no part of the result.
            prop_assert!(
                run.tasks
                    .iter()
                    .all(|t| t.status == TaskStatus::Completed || candidates::set_aside(t)),
                "{} completed with unfinished tasks",
                id
            );
        }
        let running = run.running_count();
        if run.status.is_finished() {
            prop_assert_eq!(running, 0, "{} is {:?} with running tasks", id, run.status);
        }
        prop_assert!(
            running <= run.spec.concurrency as usize,
            "{} runs {} > concurrency",
            id,
            running
        );
        prop_assert_eq!(
            st.active.contains(id),
            !run.status.is_finished(),
            "active set of {}",
            id
        );
        total_running += running;
    }
    prop_assert!(
        total_running <= max_workers,
        "{} running > max_workers {}",
        total_running,
        max_workers
    );
    prop_assert_eq!(st.workers_running(), total_running);
    Ok(())
}

fn run_case(
    defs: &[RunDef],
    max_workers: usize,
    cmds: &[Cmd],
    checks: Checks,
) -> Result<(), TestCaseError> {
    let mut h = Harness::new(max_workers, checks);
    for (i, d) in defs.iter().enumerate() {
        let id = format!("r{i}");
        let ps =
            h.st.create_run(&id, d.spec())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        h.emit(ps)?;
        h.settle(&id)?;
        h.run_ids.push(id);
    }
    for c in cmds {
        h.step(c)?;
        if checks.live {
            h.check_live()?;
        }
    }
    // Replaying the journal gives the same state, as a whole and run by run.
    let mut fresh = State::default();
    for ev in &h.log {
        fresh.apply(ev);
    }
    prop_assert_eq!(&fresh.runs, &h.st.runs);
    prop_assert_eq!(&fresh.summaries, &h.st.summaries);
    prop_assert_eq!(&fresh.active, &h.st.active);
    for id in &h.run_ids {
        let own = h
            .log
            .iter()
            .filter(|e| e.run_id.as_deref() == Some(id.as_str()));
        let rebuilt = replay_run(own);
        prop_assert_eq!(rebuilt.as_ref(), h.st.runs.get(id));
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn invariants_hold_after_every_event(
        defs in proptest::collection::vec(run_def(), 1..=3),
        max_workers in 1usize..=4,
        cmds in proptest::collection::vec(cmd(), 1..60),
    ) {
        run_case(&defs, max_workers, &cmds, BASE)?;
    }

    #[test]
        fn retry_never_breaks_exact_readiness(
        defs in proptest::collection::vec(run_def(), 1..=3),
        max_workers in 1usize..=4,
        cmds in proptest::collection::vec(cmd(), 1..60),
    ) {
        run_case(&defs, max_workers, &cmds, Checks { avoid_retry_under_running_dependent: false, ..BASE })?;
    }

    #[test]
        fn usage_never_decreases(
        defs in proptest::collection::vec(run_def(), 1..=3),
        max_workers in 1usize..=4,
        cmds in proptest::collection::vec(cmd(), 1..60),
    ) {
        run_case(&defs, max_workers, &cmds, Checks { usage_monotonic: true, ..BASE })?;
    }

    #[test]
        fn active_runs_never_get_stuck(
        defs in proptest::collection::vec(run_def(), 1..=3),
        max_workers in 1usize..=4,
        cmds in proptest::collection::vec(cmd(), 1..60),
    ) {
        run_case(&defs, max_workers, &cmds, Checks { live: true, ..BASE })?;
    }
}
