//! Scenario tests of the run state machine, driven the way the daemon drives it: deciders give
//! pending events, the simulator stamps and applies them, settles, and dispatches.

use super::*;
use crate::plan::{task_id, PlannedTask};
use crate::resource::SystemPromptMode;
use crate::usage::Usage;
use chrono::{DateTime, Duration, TimeZone, Utc};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap()
}

/// A step: name (also its slug), names of the steps it depends on, whether its role writes.
pub(super) type Step<'a> = (&'a str, &'a [&'a str], bool);

fn tasks(steps: &[Step]) -> Vec<std::sync::Arc<PlannedTask>> {
    let id_of = |name: &str| {
        let i = steps.iter().position(|s| s.0 == name).unwrap();
        task_id(i + 1, name)
    };
    steps
        .iter()
        .enumerate()
        .map(|(i, (name, deps, writes))| {
            PlannedTask::from(crate::plan::FlatTask {
                candidates: None,
                resources: Default::default(),
                network: None,
                resolves: None,
                id: task_id(i + 1, name),
                step_id: name.to_string(),
                role: if *writes {
                    "executor".into()
                } else {
                    "explorer".into()
                },
                agent: if *writes {
                    "executor".into()
                } else {
                    "explorer".into()
                },
                depends_on: deps.iter().map(|d| id_of(d)).collect(),
                task_template: format!("do {name} for {{goal}}"),
                output: Some(format!("{}.md", task_id(i + 1, name)).parse().unwrap()),
                reads: vec![],
                model: None,
                system_prompt: "You work.".into(),
                system_prompt_mode: SystemPromptMode::Replace,
                tools: if *writes {
                    vec!["read".into(), "edit".into()].into()
                } else {
                    vec!["read".into()].into()
                },
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
        .map(std::sync::Arc::new)
        .collect()
}

/// A run of `steps` (also used by the other modules' tests of `run`).
pub(super) fn spec(steps: &[Step]) -> RunSpec {
    RunSpec {
        goal: "fix the flaky login test".into(),
        cwd: "/src/app".into(),
        team: "default".into(),
        workflow: "default".into(),
        runtime: "fake".into(),
        model: None,
        concurrency: 4,
        failure_policy: FailurePolicy::FailFast,
        budget: None,
        require_plan_approval: false,
        reuse: Reuse::Off,
        max_attempts: 3,
        schedule_id: None,
        imported: false,
        task_verify_commands: vec![],
        job_shapes: Default::default(),
        workspace: None,
        tasks: tasks(steps),
    }
}

fn used(tokens: u64) -> Usage {
    Usage {
        input: tokens,
        turns: 1,
        ..Usage::default()
    }
}

fn done(tokens: u64) -> AttemptResult {
    AttemptResult::Completed {
        usage: used(tokens),
        model: None,
        artifacts: vec![],
        reused_from: None,
        commit: None,
        verification: vec![],
    }
}

fn failed(retryable: bool, tokens: u64) -> AttemptResult {
    AttemptResult::Failed {
        usage: used(tokens),
        model: None,
        artifacts: vec![],
        error: "boom".into(),
        retryable,
        reason: "crash".into(),
    }
}

fn no_final_text() -> AttemptResult {
    AttemptResult::NoFinalText {
        usage: used(1),
        model: None,
        artifacts: vec![],
    }
}

fn asked(question: &str) -> AttemptResult {
    AttemptResult::Asked {
        usage: used(1),
        model: None,
        artifacts: vec![],
        question: question.into(),
        session: None,
    }
}

/// `"type step"` for a task event, `"type"` otherwise (task ids are `NN_<step>`).
fn names(evs: &[Event]) -> Vec<String> {
    evs.iter()
        .map(|e| match &e.task_id {
            Some(t) => format!(
                "{} {}",
                e.body.type_name(),
                t.split_once('_').map_or(t.as_str(), |x| x.1)
            ),
            None => e.body.type_name().to_string(),
        })
        .collect()
}

/// The daemon's loop without I/O: a state, a journal position, a clock and the journal itself.
struct Sim {
    st: State,
    seq: u64,
    now: DateTime<Utc>,
    log: Vec<Event>,
    retry: RetryPolicy,
    jitter: f64,
}

impl Sim {
    fn new() -> Self {
        Sim {
            st: State::default(),
            seq: 0,
            now: t0(),
            log: vec![],
            retry: RetryPolicy::default(),
            jitter: 0.5,
        }
    }

    /// Stamp and apply each event, checking `seq`/`runSeq` on the way.
    fn emit(&mut self, ps: Vec<Pending>) -> Vec<Event> {
        let mut out = Vec::new();
        for p in ps {
            self.seq += 1;
            let ev = self.st.stamp(p, self.seq, self.now);
            assert!(ev.seq > self.st.last_seq, "seq must increase: {ev:?}");
            if let Some(id) = &ev.run_id {
                let want = match (&ev.body, self.st.runs.get(id)) {
                    (EventBody::RunCreated(_), _) => 1,
                    (_, Some(r)) => r.run_seq + 1,
                    (_, None) => 0,
                };
                assert_eq!(ev.run_seq, want, "runSeq must be contiguous: {ev:?}");
            }
            self.st.apply(&ev);
            self.log.push(ev.clone());
            out.push(ev);
        }
        out
    }

    fn settle_all(&mut self, run: &str) -> Vec<Event> {
        let mut out = Vec::new();
        for _ in 0..100 {
            let ps = self.st.settle(run);
            if ps.is_empty() {
                return out;
            }
            out.extend(self.emit(ps));
        }
        panic!("settle does not converge for {run}: {:?}", names(&out));
    }

    /// Emit a decider's events, then settle the run.
    fn control(
        &mut self,
        run: &str,
        r: Result<Vec<Pending>, CoreError>,
    ) -> Result<Vec<Event>, CoreError> {
        let ps = r?;
        let mut evs = self.emit(ps);
        evs.extend(self.settle_all(run));
        Ok(evs)
    }

    fn create(&mut self, run: &str, spec: RunSpec) -> Vec<Event> {
        let r = self.st.create_run(run, spec);
        self.control(run, r).unwrap()
    }

    /// Start what may start; `"run/step"` per started task, in start order.
    fn dispatch(&mut self, max_workers: usize) -> Vec<String> {
        let starts = self.st.dispatch(self.now, max_workers);
        let mut out = Vec::new();
        for s in starts {
            let step = self.step_of(&s.run_id, &s.task_id);
            out.push(format!("{}/{step}", s.run_id));
            let ev = self.emit(vec![s.event]);
            assert_eq!(ev[0].body.type_name(), "task.started");
            self.settle_all(&s.run_id);
        }
        out
    }

    fn step_of(&self, run: &str, task: &str) -> String {
        self.st.runs[run].task(task).unwrap().plan.step_id.clone()
    }

    fn tid(&self, run: &str, step: &str) -> String {
        self.task(run, step).plan.id.to_string()
    }

    fn task(&self, run: &str, step: &str) -> &TaskState {
        self.st.runs[run]
            .tasks
            .iter()
            .find(|t| t.plan.step_id == step)
            .unwrap()
    }

    fn status(&self, run: &str, step: &str) -> TaskStatus {
        self.task(run, step).status
    }

    fn run_status(&self, run: &str) -> RunStatus {
        self.st.runs[run].status
    }

    /// Report the current attempt's result, then settle.
    fn finish(&mut self, run: &str, step: &str, result: AttemptResult) -> Vec<Event> {
        let attempt = self.task(run, step).attempts;
        self.finish_attempt(run, step, attempt, result)
    }

    fn finish_attempt(
        &mut self,
        run: &str,
        step: &str,
        attempt: u32,
        result: AttemptResult,
    ) -> Vec<Event> {
        let id = self.tid(run, step);
        let ps = self.st.finish_attempt(
            run,
            &id,
            attempt,
            result,
            self.now,
            &self.retry,
            self.jitter,
        );
        let mut evs = self.emit(ps);
        evs.extend(self.settle_all(run));
        evs
    }

    fn progress(&mut self, run: &str, step: &str, tokens: u64) -> Vec<Event> {
        let id = self.tid(run, step);
        let attempt = self.task(run, step).attempts;
        let p = self
            .st
            .progress(run, &id, attempt, used(tokens), Some("bash".into()));
        let mut evs = self.emit(p.into_iter().collect());
        evs.extend(self.settle_all(run));
        evs
    }

    fn advance(&mut self, ms: i64) {
        self.now += Duration::milliseconds(ms);
    }
}

fn invalid_state<T: std::fmt::Debug>(r: Result<T, CoreError>) -> String {
    match r {
        Err(CoreError::InvalidState(m)) => m,
        other => panic!("expected InvalidState, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Readiness and dispatch

#[test]
fn readiness_is_exact_no_wave_barrier() {
    let mut sim = Sim::new();
    sim.create(
        "r",
        spec(&[
            ("a", &[], false),
            ("b", &["a"], false),
            ("c", &["a"], false),
            ("d", &["c"], false),
        ]),
    );
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(
        sim.dispatch(8),
        Vec::<String>::new(),
        "nothing else is ready while a runs"
    );
    sim.finish("r", "a", done(10));
    assert_eq!(sim.dispatch(8), ["r/b", "r/c"]);
    sim.finish("r", "c", done(10));
    assert_eq!(
        sim.dispatch(8),
        ["r/d"],
        "d starts as soon as c completes, b still running"
    );
    assert_eq!(sim.status("r", "b"), TaskStatus::Running);
    sim.finish("r", "d", done(10));
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    let evs = sim.finish("r", "b", done(10));
    assert_eq!(names(&evs), ["task.completed b", "run.completed"]);
    assert_eq!(sim.st.runs["r"].usage().input, 40);
}

/// A task's attempt count comes from the journal (and an imported bundle, which import caps):
/// at the end of its range the next attempt's number saturates, never overflows.
#[test]
fn an_attempt_count_at_the_end_of_its_range_still_dispatches() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    if let Some(run) = sim.st.runs.get_mut("r") {
        run.tasks[0].attempts = u32::MAX;
    }
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(sim.st.runs["r"].tasks[0].attempts, u32::MAX);
}

#[test]
fn streaming_dispatch_refills_a_slot_at_once() {
    let mut sim = Sim::new();
    let mut s = spec(&[
        ("a", &[], false),
        ("b", &[], false),
        ("c", &[], false),
        ("d", &[], false),
        ("e", &[], false),
    ]);
    s.concurrency = 2;
    sim.create("r", s);
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    assert!(sim.dispatch(8).is_empty(), "per-run concurrency 2");
    sim.finish("r", "b", done(1));
    assert_eq!(
        sim.dispatch(8),
        ["r/c"],
        "the freed slot is filled, a is still running"
    );
    sim.finish("r", "a", done(1));
    sim.finish("r", "c", done(1));
    assert_eq!(sim.dispatch(8), ["r/d", "r/e"]);
    sim.finish("r", "e", done(1));
    sim.finish("r", "d", done(1));
    assert_eq!(sim.run_status("r"), RunStatus::Completed);
}

#[test]
fn per_run_concurrency_and_max_workers() {
    // (concurrency, max_workers, started in the first dispatch)
    let cases = [
        (1, 8, 1),
        (2, 8, 2),
        (3, 8, 3),
        (8, 8, 5),
        (4, 2, 2),
        (4, 0, 0),
    ];
    for (concurrency, max_workers, want) in cases {
        let mut sim = Sim::new();
        let mut s = spec(&[
            ("a", &[], false),
            ("b", &[], false),
            ("c", &[], false),
            ("d", &[], false),
            ("e", &[], false),
        ]);
        s.concurrency = concurrency;
        sim.create("r", s);
        let got = sim.dispatch(max_workers);
        assert_eq!(
            got.len(),
            want,
            "concurrency {concurrency}, max_workers {max_workers}: {got:?}"
        );
        assert_eq!(sim.st.runs["r"].running_count(), want);
        assert!(
            sim.dispatch(max_workers).is_empty(),
            "a second dispatch starts nothing"
        );
    }
}

fn three_runs() -> Sim {
    let mut sim = Sim::new();
    for r in ["r1", "r2", "r3"] {
        sim.create(
            r,
            spec(&[("a", &[], false), ("b", &[], false), ("c", &[], false)]),
        );
    }
    sim
}

#[test]
fn max_workers_are_shared_round_robin() {
    // max_workers -> tasks started per run: each run gets a slot before any gets a second.
    let cases: [(usize, [usize; 3]); 6] = [
        (1, [1, 0, 0]),
        (2, [1, 1, 0]),
        (3, [1, 1, 1]),
        (4, [2, 1, 1]),
        (6, [2, 2, 2]),
        (20, [3, 3, 3]),
    ];
    for (max_workers, want) in cases {
        let mut sim = three_runs();
        let started = sim.dispatch(max_workers);
        let got = ["r1", "r2", "r3"].map(|r| {
            started
                .iter()
                .filter(|s| s.starts_with(&format!("{r}/")))
                .count()
        });
        assert_eq!(got, want, "max_workers {max_workers}: {started:?}");
        assert_eq!(sim.st.workers_running(), want.iter().sum::<usize>());
    }
}

#[test]
fn pools_bound_their_own_runs_only() {
    // r1 and r2 in pool 0 (the machine, 1 slot), r3 in pool 1 (a cluster, 3 slots): the
    // machine's cap does not hold the cluster's run back, nor the cluster's the machine's.
    let mut sim = three_runs();
    let pool = |r: &RunState| usize::from(r.id == "r3");
    let started: Vec<String> = sim
        .st
        .dispatch_pooled(sim.now, &[1, 3], &pool, &|_, _| false)
        .into_iter()
        .map(|s| {
            let id = format!("{}/{}", s.run_id, s.task_id);
            sim.emit(vec![s.event]);
            id
        })
        .collect();
    let per_run = |r: &str| {
        started
            .iter()
            .filter(|s| s.starts_with(&format!("{r}/")))
            .count()
    };
    assert_eq!(
        [per_run("r1") + per_run("r2"), per_run("r3")],
        [1, 3],
        "{started:?}"
    );
    // Full on both sides: nothing more, whatever is ready.
    assert!(sim
        .st
        .dispatch_pooled(sim.now, &[1, 3], &pool, &|_, _| false)
        .is_empty());
    // A pool index past the list is the last pool.
    assert!(sim
        .st
        .dispatch_pooled(sim.now, &[1, 3], &|_| 7, &|_, _| false)
        .is_empty());
}

#[test]
fn a_held_task_waits_and_its_slot_goes_to_the_next_ready_one() {
    // r1's first task is held (its last worker still ends): r1's next ready task takes the
    // slot, and the first is started once it is no longer held.
    let mut sim = three_runs();
    let held = |r: &str, t: &str| r == "r1" && t == "01_a";
    let one_run = |r: &RunState| usize::from(r.id != "r1");
    let started: Vec<String> = sim
        .st
        .dispatch_pooled(sim.now, &[1, 0], &one_run, &held)
        .into_iter()
        .map(|s| {
            sim.emit(vec![s.event]);
            format!("{}/{}", s.run_id, s.task_id)
        })
        .collect();
    assert_eq!(started, ["r1/02_b"]);
    let later = sim
        .st
        .dispatch_pooled(sim.now, &[2, 0], &one_run, &|_, _| false);
    assert_eq!(
        later
            .iter()
            .map(|s| format!("{}/{}", s.run_id, s.task_id))
            .collect::<Vec<_>>(),
        ["r1/01_a"]
    );
}

#[test]
fn round_robin_continues_after_the_last_run_served() {
    let mut sim = three_runs();
    assert_eq!(sim.dispatch(2), ["r1/a", "r2/a"]);
    sim.finish("r1", "a", done(1));
    assert_eq!(sim.dispatch(2), ["r3/a"], "r3 has had nothing yet");
    sim.finish("r2", "a", done(1));
    assert_eq!(sim.dispatch(2), ["r1/b"]);
    sim.finish("r3", "a", done(1));
    assert_eq!(sim.dispatch(2), ["r2/b"]);
}

// ---------------------------------------------------------------------------------------------
// Failure policies and retries

fn policy_plan(policy: FailurePolicy) -> RunSpec {
    let mut s = spec(&[
        ("a", &[], false),
        ("b", &[], false),
        ("c", &[], false),
        ("d", &[], false),
        ("e", &["a"], false),
    ]);
    s.concurrency = 2;
    s.failure_policy = policy;
    s
}

#[test]
fn fail_fast_skips_queued_lets_running_finish_then_fails() {
    let mut sim = Sim::new();
    sim.create("r", policy_plan(FailurePolicy::FailFast));
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    let evs = sim.finish("r", "a", failed(false, 5));
    assert_eq!(
        names(&evs),
        [
            "task.failed a",
            "task.skipped c",
            "task.skipped d",
            "task.skipped e"
        ]
    );
    assert_eq!(sim.run_status("r"), RunStatus::Running, "b still runs");
    assert!(sim.dispatch(8).is_empty(), "no new task starts");
    let evs = sim.finish("r", "b", done(5));
    assert_eq!(names(&evs), ["task.completed b", "run.failed"]);
    let run = &sim.st.runs["r"];
    assert_eq!(run.reason.as_deref(), Some("task 01_a failed: boom"));
    assert_eq!(sim.status("r", "b"), TaskStatus::Completed);
    assert_eq!(sim.st.summaries["r"].tasks.skipped, 3);
    assert!(!sim.st.active.contains("r"));
}

#[test]
fn continue_skips_only_dependents_then_fails_at_the_end() {
    let mut sim = Sim::new();
    sim.create("r", policy_plan(FailurePolicy::Continue));
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    let evs = sim.finish("r", "a", failed(false, 5));
    assert_eq!(names(&evs), ["task.failed a", "task.skipped e"]);
    assert_eq!(sim.dispatch(8), ["r/c"]);
    sim.finish("r", "b", done(1));
    assert_eq!(sim.dispatch(8), ["r/d"]);
    assert_eq!(names(&sim.finish("r", "c", done(1))), ["task.completed c"]);
    assert_eq!(
        names(&sim.finish("r", "d", done(1))),
        ["task.completed d", "run.failed"]
    );
    let got: Vec<_> = ["a", "b", "c", "d", "e"]
        .map(|s| sim.status("r", s))
        .to_vec();
    use TaskStatus::*;
    assert_eq!(got, [Failed, Completed, Completed, Completed, Skipped]);
}

#[test]
fn retry_delay_table() {
    let p = RetryPolicy::default();
    // (failed attempts, jitter, delay)
    let cases = [
        (1, 0.0, 1000),
        (1, 0.5, 1150),
        (1, 1.0, 1300),
        (2, 0.0, 2000),
        (3, 0.0, 4000),
        (7, 0.0, 60_000),
        (40, 0.0, 60_000),
        (40, 1.0, 78_000),
        (1, -3.0, 1000),
        (1, 9.0, 1300),
    ];
    for (n, jitter, want) in cases {
        assert_eq!(p.delay_ms(n, jitter), want, "attempts {n}, jitter {jitter}");
    }
}

#[test]
fn retryable_failure_backs_off_until_max_attempts() {
    for jitter in [0.0, 0.37, 0.999] {
        let mut sim = Sim::new();
        sim.jitter = jitter;
        sim.create("r", spec(&[("a", &[], false)]));
        let policy = sim.retry;
        for attempt in 1..=2u32 {
            assert_eq!(sim.dispatch(8), ["r/a"], "attempt {attempt}");
            assert_eq!(sim.task("r", "a").attempts, attempt);
            let evs = sim.finish("r", "a", failed(true, 10));
            assert_eq!(names(&evs), ["task.retrying a"]);
            let EventBody::TaskRetrying {
                delay_ms,
                not_before,
                reason,
                ..
            } = &evs[0].body
            else {
                unreachable!()
            };
            let base = policy.base_ms * u64::from(policy.factor).pow(attempt - 1);
            let max = base + (base as f64 * policy.jitter_ratio) as u64;
            assert!(
                (base..=max).contains(delay_ms),
                "jitter {jitter} attempt {attempt}: {delay_ms} not in {base}..={max}"
            );
            assert_eq!(
                *not_before,
                sim.now + Duration::milliseconds(*delay_ms as i64)
            );
            assert_eq!(reason, "crash");
            assert_eq!(evs[0].message.as_deref(), Some("boom"));
            assert_eq!(sim.status("r", "a"), TaskStatus::Queued);
            assert_eq!(sim.st.next_wakeup(sim.now), Some(*not_before));
            assert_eq!(sim.st.next_wakeup(*not_before), None, "strictly after");
            let wait = *delay_ms as i64;
            sim.advance(wait - 1);
            assert!(sim.dispatch(8).is_empty(), "not before notBefore");
            sim.advance(1);
        }
        assert_eq!(sim.dispatch(8), ["r/a"]);
        assert_eq!(sim.task("r", "a").attempts, 3);
        let evs = sim.finish("r", "a", failed(true, 10));
        assert_eq!(
            names(&evs),
            ["task.failed a", "run.failed"],
            "max_attempts 3 reached"
        );
        assert_eq!(sim.st.next_wakeup(sim.now), None);
        assert_eq!(
            sim.task("r", "a").usage().input,
            30,
            "usage of every attempt is kept"
        );
    }
}

#[test]
fn final_failure_is_not_retried_and_max_attempts_one_never_retries() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false), ("b", &[], false)]);
    s.max_attempts = 1;
    s.failure_policy = FailurePolicy::Continue;
    sim.create("r", s);
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "a", failed(true, 0))),
        ["task.failed a"]
    );
    assert_eq!(
        names(&sim.finish("r", "b", failed(false, 0))),
        ["task.failed b", "run.failed"]
    );
}

#[test]
fn fail_fast_does_not_schedule_retries_after_a_final_failure() {
    let mut sim = Sim::new();
    sim.create("r", policy_plan(FailurePolicy::FailFast));
    sim.dispatch(8);
    sim.finish("r", "a", failed(false, 0));
    let evs = sim.finish("r", "b", failed(true, 0));
    assert_eq!(names(&evs), ["task.failed b", "run.failed"]);
}

// ---------------------------------------------------------------------------------------------
// needs_attention, waiting, respond

#[test]
fn no_final_text_needs_attention_blocks_the_run_until_resumed() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    sim.dispatch(8);
    let evs = sim.finish("r", "a", no_final_text());
    assert_eq!(names(&evs), ["task.needs_attention a", "run.blocked"]);
    assert_eq!(sim.run_status("r"), RunStatus::Blocked);
    assert_eq!(
        sim.status("r", "b"),
        TaskStatus::Queued,
        "a dependent waits, it is not skipped"
    );
    assert!(sim.st.runs["r"]
        .reason
        .as_deref()
        .unwrap()
        .contains("needs attention"));
    assert!(sim.st.active.contains("r"), "blocked is active");
    assert!(sim.settle_all("r").is_empty(), "blocked once, not again");

    let (ps, ids) = sim.st.resume_run("r", None).unwrap();
    assert_eq!(ids, [sim.tid("r", "a")]);
    assert_eq!(names(&sim.control("r", Ok(ps)).unwrap()), ["run.resumed"]);
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(sim.task("r", "a").attempts, 2);
    sim.finish("r", "a", done(1));
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "b", done(1))),
        ["task.completed b", "run.completed"]
    );
}

#[test]
fn asked_waits_blocks_and_respond_requeues_until_complete() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    let evs = sim.finish("r", "a", asked("which database?"));
    assert_eq!(names(&evs), ["task.waiting a", "run.blocked"]);
    assert_eq!(sim.status("r", "a"), TaskStatus::Waiting);
    assert_eq!(sim.run_status("r"), RunStatus::Blocked);
    assert!(sim.st.runs["r"]
        .reason
        .as_deref()
        .unwrap()
        .contains("which database?"));
    assert!(sim.dispatch(8).is_empty());

    let id = sim.tid("r", "a");
    // An empty or blank answer is refused; the task goes on waiting.
    for blank in ["", " \n\t"] {
        assert!(matches!(
            sim.st.respond("r", &id, blank),
            Err(CoreError::Invalid { ref field, .. }) if field == "message"
        ));
    }
    assert_eq!(sim.status("r", "a"), TaskStatus::Waiting);
    let r = sim.st.respond("r", &id, "postgres");
    let evs = sim.control("r", r).unwrap();
    assert_eq!(names(&evs), ["task.queued a"]);
    assert_eq!(sim.status("r", "a"), TaskStatus::Queued);
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    assert_eq!(sim.task("r", "a").answers(), ["postgres"]);
    assert_eq!(sim.task("r", "a").question(), None);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(sim.task("r", "a").attempts, 2);
    assert_eq!(
        names(&sim.finish("r", "a", done(1))),
        ["task.completed a", "run.completed"]
    );
}

#[test]
fn the_asking_session_is_kept_for_the_answer_and_dropped_after_it() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    let mut ask = asked("which database?");
    if let AttemptResult::Asked { session, .. } = &mut ask {
        *session = Some("/runs/r/sessions/a.attempt-1.jsonl".into());
    }
    let evs = sim.finish("r", "a", ask);
    let waiting = evs
        .iter()
        .find(|e| matches!(e.body, EventBody::TaskWaiting { .. }))
        .unwrap();
    let mut waiting = serde_json::to_value(waiting).unwrap();
    assert_eq!(
        waiting["data"]["session"], "/runs/r/sessions/a.attempt-1.jsonl",
        "{waiting}"
    );
    // An old journal's task.waiting has no session: read as none.
    waiting["data"].as_object_mut().unwrap().remove("session");
    let old: Event = serde_json::from_value(waiting).unwrap();
    assert!(matches!(
        old.body,
        EventBody::TaskWaiting { session: None, .. }
    ));
    assert_eq!(
        sim.task("r", "a").session(),
        Some("/runs/r/sessions/a.attempt-1.jsonl")
    );

    let id = sim.tid("r", "a");
    let r = sim.st.respond("r", &id, "postgres");
    sim.control("r", r).unwrap();
    // The answered attempt resumes it...
    assert_eq!(
        sim.task("r", "a").session(),
        Some("/runs/r/sessions/a.attempt-1.jsonl")
    );
    assert_eq!(sim.dispatch(8), ["r/a"]);
    // ...and whatever it did, the attempt after it starts over.
    sim.finish("r", "a", no_final_text());
    assert_eq!(sim.task("r", "a").session(), None);
}

#[test]
fn waiting_task_does_not_block_while_others_run() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &[], false)]));
    sim.dispatch(8);
    assert_eq!(names(&sim.finish("r", "a", asked("?"))), ["task.waiting a"]);
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    assert_eq!(
        names(&sim.finish("r", "b", done(1))),
        ["task.completed b", "run.blocked"]
    );
}

// ---------------------------------------------------------------------------------------------
// Budget

fn budget_spec(steps: &[Step], tokens: u64) -> RunSpec {
    let mut s = spec(steps);
    s.budget = Some(Budget {
        tokens,
        warn_at: 0.8,
        abort_at: 1.0,
    });
    s
}

#[test]
fn budget_warns_once_then_aborts() {
    let mut sim = Sim::new();
    let mut s = budget_spec(
        &[
            ("a", &[], false),
            ("b", &[], false),
            ("c", &[], false),
            ("d", &[], false),
        ],
        1000,
    );
    s.concurrency = 2;
    sim.create("r", s);
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    assert_eq!(names(&sim.progress("r", "a", 500)), ["task.progress a"]);
    assert_eq!(names(&sim.progress("r", "b", 299)), ["task.progress b"]);
    assert_eq!(
        names(&sim.progress("r", "b", 300)),
        ["task.progress b", "run.budget_warning"]
    );
    let warn = &sim.log[sim.log.len() - 1];
    assert_eq!(
        warn.body,
        EventBody::RunBudgetWarning {
            used: 800,
            total: 1000
        }
    );
    assert_eq!(
        names(&sim.progress("r", "b", 350)),
        ["task.progress b"],
        "warned once"
    );
    let evs = sim.progress("r", "a", 650);
    assert_eq!(
        names(&evs),
        [
            "task.progress a",
            "run.budget_exceeded",
            "task.cancelled a",
            "task.cancelled b",
            "task.skipped c",
            "task.skipped d",
            "run.failed"
        ]
    );
    assert_eq!(
        evs[1].body,
        EventBody::RunBudgetExceeded {
            used: 1000,
            total: 1000
        }
    );
    let run = &sim.st.runs["r"];
    assert_eq!(
        (run.status, run.reason.as_deref()),
        (RunStatus::Failed, Some("budget_exceeded"))
    );
    assert_eq!(
        run.usage().input,
        1000,
        "spent usage of cancelled attempts is kept"
    );
    assert_eq!(sim.st.summaries["r"].usage.input, 1000);
    assert!(
        sim.finish("r", "a", done(700)).is_empty(),
        "the stopped worker's late result is stale"
    );
    assert!(sim.dispatch(8).is_empty());
}

#[test]
fn a_spent_budget_is_resumed_only_with_a_larger_one() {
    let mut sim = Sim::new();
    sim.create(
        "r",
        budget_spec(&[("a", &[], false), ("b", &[], false)], 1000),
    );
    sim.dispatch(1);
    let evs = sim.progress("r", "a", 1000);
    assert!(
        names(&evs).contains(&"run.failed".to_string()),
        "{:?}",
        names(&evs)
    );
    let plain = invalid_state(sim.st.resume_run("r", None));
    assert!(
        plain.contains("1000 of 1000 tokens") && plain.contains("at least 1001"),
        "{plain}"
    );
    assert!(invalid_state(sim.st.resume_run("r", Some(1000))).contains("spent already"));
    assert!(matches!(
        sim.st.resume_run("r", Some(0)),
        Err(CoreError::Invalid { .. })
    ));
    let (ps, ids) = sim.st.resume_run("r", Some(5000)).unwrap();
    assert_eq!(ids.len(), 2, "{ids:?}");
    sim.emit(ps);
    let run = &sim.st.runs["r"];
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.spec.budget.map(|b| b.tokens), Some(5000));
    assert!(
        !run.budget_warned,
        "the warning comes again, at 80% of the new budget"
    );
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    // A run without a budget gets one with the default fractions.
    sim.create("s", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    sim.finish("s", "a", failed(false, 10));
    let (ps, _) = sim.st.resume_run("s", Some(50)).unwrap();
    sim.emit(ps);
    assert_eq!(sim.st.runs["s"].spec.budget, Some(Budget::of(50)));
}

#[test]
fn a_refused_budget_says_where_a_fraction_stops_the_run() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false), ("b", &[], false)]);
    s.budget = Some(Budget {
        tokens: 1000,
        warn_at: 0.4,
        abort_at: 0.5,
    });
    sim.create("r", s);
    sim.dispatch(1);
    sim.progress("r", "a", 600);
    let m = invalid_state(sim.st.resume_run("r", Some(1100)));
    assert!(
        m.contains("stops at 0.5 of it") && m.contains("at least 1201"),
        "{m}"
    );
}

#[test]
fn the_least_budget_a_usage_does_not_spend_is_not_spent() {
    for (abort_at, used) in [
        (1.0, 0),
        (1.0, 1000),
        (0.55, 144_177),
        (0.3, 7),
        (1.5, 999_999),
    ] {
        let b = Budget {
            tokens: 1,
            warn_at: 0.1,
            abort_at,
        };
        let need = b.least_above(used);
        let at = |tokens| Budget { tokens, ..b };
        assert!(!at(need).spent(used), "{abort_at} {used}: {need} is spent");
        assert!(
            at(need.saturating_sub(1)).spent(used) || need == 0,
            "{abort_at} {used}: {need} is not the least"
        );
    }
}

#[test]
fn budget_counts_cache_write_but_not_cache_read() {
    let mut sim = Sim::new();
    sim.create("r", budget_spec(&[("a", &[], false)], 100));
    sim.dispatch(8);
    let id = sim.tid("r", "a");
    let usage = Usage {
        input: 10,
        output: 10,
        cache_read: 1000,
        cache_write: 59,
        cost: 0.1,
        turns: 1,
    };
    let p = sim.st.progress("r", &id, 1, usage, None).unwrap();
    sim.emit(vec![p]);
    assert!(sim.settle_all("r").is_empty(), "79 of 100 tokens");
    let usage = Usage {
        cache_write: 60,
        ..usage
    };
    let p = sim.st.progress("r", &id, 1, usage, None).unwrap();
    sim.emit(vec![p]);
    assert_eq!(names(&sim.settle_all("r")), ["run.budget_warning"]);
}

#[test]
fn budget_is_enforced_after_resume_with_usage_of_earlier_attempts() {
    let mut sim = Sim::new();
    sim.create("r", budget_spec(&[("a", &[], false)], 1000));
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "a", failed(false, 600))),
        ["task.failed a", "run.failed"]
    );
    let (ps, _) = sim.st.resume_run("r", None).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(
        names(&sim.progress("r", "a", 200)),
        ["task.progress a", "run.budget_warning"]
    );
    let evs = sim.progress("r", "a", 400);
    assert_eq!(
        names(&evs),
        [
            "task.progress a",
            "run.budget_exceeded",
            "task.cancelled a",
            "run.failed"
        ]
    );
    assert_eq!(sim.st.runs["r"].reason.as_deref(), Some("budget_exceeded"));

    // Resuming an over-budget run is refused: it would fail again at once.
    assert!(invalid_state(sim.st.resume_run("r", None)).contains("--budget-tokens"));
    let a = sim.tid("r", "a");
    assert!(invalid_state(sim.st.retry_tasks("r", &[a])).contains("--budget-tokens"));
}

#[test]
fn usage_of_a_cancelled_attempt_survives_resume() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    sim.progress("r", "a", 500);
    let (ps, _) = sim.st.cancel_run("r", None).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.st.runs["r"].usage().input, 500);
    let (ps, _) = sim.st.resume_run("r", None).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    sim.dispatch(8);
    sim.progress("r", "a", 100);
    assert_eq!(
        sim.st.runs["r"].usage().input,
        600,
        "500 spent before the cancel + 100 now"
    );
}

// ---------------------------------------------------------------------------------------------
// Plan approval

fn approval_spec() -> RunSpec {
    let mut s = spec(&[
        ("explore", &[], false),
        ("plan", &["explore"], false),
        ("execute", &["plan"], true),
    ]);
    s.require_plan_approval = true;
    s
}

/// Run explore and plan; return the events of plan's completion.
fn until_approval(sim: &mut Sim) -> Vec<Event> {
    sim.create("r", approval_spec());
    assert_eq!(sim.dispatch(8), ["r/explore"]);
    assert_eq!(
        names(&sim.finish("r", "explore", done(1))),
        ["task.completed explore"]
    );
    assert_eq!(sim.dispatch(8), ["r/plan"]);
    sim.finish("r", "plan", done(1))
}

#[test]
fn plan_approval_blocks_exactly_when_the_write_task_is_ready() {
    let mut sim = Sim::new();
    let evs = until_approval(&mut sim);
    assert_eq!(
        names(&evs),
        [
            "task.completed plan",
            "plan.approval_required execute",
            "run.blocked"
        ]
    );
    assert_eq!(
        evs[1].body,
        EventBody::PlanApprovalRequired {
            task_id: sim.tid("r", "execute")
        }
    );
    assert_eq!(
        sim.log
            .iter()
            .filter(|e| e.body.type_name() == "plan.approval_required")
            .count(),
        1
    );
    assert_eq!(
        (sim.run_status("r"), sim.st.runs["r"].approval),
        (RunStatus::Blocked, Approval::Pending)
    );
    assert!(sim.dispatch(8).is_empty(), "execute is not dispatched");
    assert!(sim.settle_all("r").is_empty());
    assert!(invalid_state(sim.st.resume_run("r", None)).contains("approval"));

    let r = sim.st.approve("r", Some("lgtm".into()));
    assert_eq!(names(&sim.control("r", r).unwrap()), ["plan.approved"]);
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    assert_eq!(sim.dispatch(8), ["r/execute"]);
    assert_eq!(
        names(&sim.finish("r", "execute", done(1))),
        ["task.completed execute", "run.completed"]
    );
    invalid_state(sim.st.approve("r", None));
}

#[test]
fn plan_rejection_cancels_the_run() {
    let mut sim = Sim::new();
    until_approval(&mut sim);
    let r = sim.st.reject("r", Some("too risky".into()));
    assert_eq!(
        names(&sim.control("r", r).unwrap()),
        ["plan.rejected", "run.cancelled"]
    );
    assert_eq!(sim.run_status("r"), RunStatus::Cancelled);
    assert_eq!(sim.status("r", "execute"), TaskStatus::Cancelled);
    assert_eq!(sim.st.runs["r"].reason.as_deref(), Some("too risky"));
    invalid_state(sim.st.approve("r", None));
    invalid_state(sim.st.reject("r", None));

    // Resuming a rejected run asks again.
    let (ps, ids) = sim.st.resume_run("r", None).unwrap();
    assert_eq!(ids, [sim.tid("r", "execute")]);
    let evs = sim.control("r", Ok(ps)).unwrap();
    assert_eq!(
        names(&evs),
        [
            "run.resumed",
            "plan.approval_required execute",
            "run.blocked"
        ]
    );
}

/// Retrying the planner of a rejected run plans again and asks again: the tasks the rejection
/// cancelled come back with it, or the new plan would have nothing to approve and the run
/// would end failed.
#[test]
fn retrying_the_planner_of_a_rejected_run_asks_again() {
    let mut sim = Sim::new();
    until_approval(&mut sim);
    let r = sim.st.reject("r", None);
    sim.control("r", r).unwrap();
    let plan = sim.tid("r", "plan");
    let (ps, ids) = sim
        .st
        .retry_tasks("r", std::slice::from_ref(&plan))
        .unwrap();
    assert_eq!(ids, [plan, sim.tid("r", "execute")]);
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.dispatch(8), ["r/plan"]);
    assert_eq!(
        names(&sim.finish("r", "plan", done(2))),
        [
            "task.completed plan",
            "plan.approval_required execute",
            "run.blocked"
        ]
    );
}

#[test]
fn approval_not_needed_for_read_only_runs_or_without_the_flag() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false), ("b", &["a"], false)]);
    s.require_plan_approval = true;
    sim.create("ro", s);
    let mut s = spec(&[("a", &[], true)]);
    s.require_plan_approval = false;
    sim.create("w", s);
    assert_eq!(sim.dispatch(8), ["ro/a", "w/a"]);
    sim.finish("ro", "a", done(1));
    sim.dispatch(8);
    sim.finish("ro", "b", done(1));
    sim.finish("w", "a", done(1));
    assert!(sim
        .log
        .iter()
        .all(|e| e.body.type_name() != "plan.approval_required"));
    assert_eq!(
        (sim.run_status("ro"), sim.run_status("w")),
        (RunStatus::Completed, RunStatus::Completed)
    );
}

#[test]
fn approval_asked_at_once_when_a_write_task_has_no_deps_and_read_tasks_still_run() {
    let mut sim = Sim::new();
    let mut s = spec(&[("w", &[], true), ("r", &[], false)]);
    s.require_plan_approval = true;
    let evs = sim.create("x", s);
    assert_eq!(
        names(&evs),
        [
            "run.created",
            "run.started",
            "plan.approval_required w",
            "run.blocked"
        ]
    );
    assert_eq!(
        sim.dispatch(8),
        ["x/r"],
        "a read-only task may run while the plan waits"
    );
    sim.finish("x", "r", done(1));
    assert_eq!(sim.run_status("x"), RunStatus::Blocked);
    let r = sim.st.approve("x", None);
    sim.control("x", r).unwrap();
    assert_eq!(sim.dispatch(8), ["x/w"]);
}

#[test]
fn respond_while_approval_pending_keeps_the_run_blocked() {
    let mut sim = Sim::new();
    let mut s = spec(&[("q", &[], false), ("w", &[], true)]);
    s.require_plan_approval = true;
    sim.create("x", s);
    assert_eq!(sim.dispatch(8), ["x/q"]);
    sim.finish("x", "q", asked("?"));
    let id = sim.tid("x", "q");
    let r = sim.st.respond("x", &id, "yes");
    sim.control("x", r).unwrap();
    assert_eq!(sim.dispatch(8), ["x/q"]);
    sim.finish("x", "q", done(1));
    assert_eq!(sim.st.runs["x"].approval, Approval::Pending);
    assert_eq!(sim.run_status("x"), RunStatus::Blocked);
}

// ---------------------------------------------------------------------------------------------
// Control

#[test]
fn cancel_while_queued_running_and_after_finish() {
    // Queued: nothing started yet.
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    let (ps, ids) = sim.st.cancel_run("r", None).unwrap();
    assert_eq!(ids, [sim.tid("r", "a"), sim.tid("r", "b")]);
    assert_eq!(names(&sim.control("r", Ok(ps)).unwrap()), ["run.cancelled"]);
    assert_eq!(
        (sim.status("r", "a"), sim.status("r", "b")),
        (TaskStatus::Cancelled, TaskStatus::Cancelled)
    );
    assert_eq!(sim.st.runs["r"].reason.as_deref(), Some("cancelled"));
    assert!(sim.dispatch(8).is_empty());
    assert!(!sim.st.active.contains("r"));

    // Running: the worker's late result is stale.
    let mut sim = Sim::new();
    sim.create(
        "r",
        spec(&[("a", &[], false), ("b", &[], false), ("c", &["a"], false)]),
    );
    sim.dispatch(8);
    sim.finish("r", "b", done(1));
    let (ps, ids) = sim.st.cancel_run("r", Some("user".into())).unwrap();
    assert_eq!(
        ids,
        [sim.tid("r", "a"), sim.tid("r", "c")],
        "completed b is not cancelled"
    );
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.run_status("r"), RunStatus::Cancelled);
    assert_eq!(sim.status("r", "b"), TaskStatus::Completed);
    assert!(sim.finish("r", "a", done(1)).is_empty());
    assert_eq!(sim.status("r", "a"), TaskStatus::Cancelled);

    // Finished.
    assert!(invalid_state(sim.st.cancel_run("r", None)).contains("cancelled"));
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    assert!(invalid_state(sim.st.cancel_run("r", None)).contains("completed"));
    assert!(matches!(
        sim.st.cancel_run("nope", None),
        Err(CoreError::NotFound { what: "run", .. })
    ));
}

#[test]
fn resume_rules() {
    let mut sim = Sim::new();
    sim.create(
        "r",
        spec(&[("a", &[], false), ("b", &[], false), ("c", &["a"], false)]),
    );
    sim.dispatch(8);
    assert!(invalid_state(sim.st.resume_run("r", None)).contains("running"));
    sim.finish("r", "b", done(1));
    sim.finish("r", "a", failed(false, 1));
    assert_eq!(sim.run_status("r"), RunStatus::Failed);

    let (ps, ids) = sim.st.resume_run("r", None).unwrap();
    assert_eq!(
        ids,
        [sim.tid("r", "a"), sim.tid("r", "c")],
        "failed and skipped, not completed"
    );
    assert_eq!(names(&sim.control("r", Ok(ps)).unwrap()), ["run.resumed"]);
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    assert_eq!(sim.st.runs["r"].finished_at, None);
    assert!(sim.st.active.contains("r"));
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(sim.task("r", "a").attempts, 2);
    assert_eq!(
        sim.task("r", "a").attempts_in_window,
        1,
        "a manual resume opens a new attempt window"
    );
    sim.finish("r", "a", done(1));
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "c", done(1))),
        ["task.completed c", "run.completed"]
    );
    assert!(invalid_state(sim.st.resume_run("r", None)).contains("nothing to resume"));
    assert!(matches!(
        sim.st.resume_run("nope", None),
        Err(CoreError::NotFound { .. })
    ));
}

#[test]
fn retry_rules() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    sim.dispatch(8);
    let a = sim.tid("r", "a");
    let b = sim.tid("r", "b");
    let errs = [
        (vec!["zz".to_string()], "not found"),
        (vec![], "at least one"),
        (vec![a.clone()], "running"),
        (vec![b.clone()], "already queued"),
    ];
    for (ids, want) in errs {
        let e = sim.st.retry_tasks("r", &ids).unwrap_err();
        assert!(e.to_string().contains(want), "{ids:?}: {e}");
    }
    assert!(matches!(
        sim.st.retry_tasks("r", &["zz".into()]),
        Err(CoreError::NotFound { what: "task", .. })
    ));
    assert!(matches!(
        sim.st.retry_tasks("nope", std::slice::from_ref(&a)),
        Err(CoreError::NotFound { what: "run", .. })
    ));

    sim.finish("r", "a", done(1));
    sim.dispatch(8);
    sim.finish("r", "b", done(1));
    assert_eq!(sim.run_status("r"), RunStatus::Completed);
    // Retry of a completed task: a new attempt.
    let (ps, ids) = sim.st.retry_tasks("r", std::slice::from_ref(&b)).unwrap();
    assert_eq!(ids, [b.as_str()]);
    assert_eq!(names(&sim.control("r", Ok(ps)).unwrap()), ["run.resumed"]);
    assert_eq!(sim.dispatch(8), ["r/b"]);
    assert_eq!(sim.task("r", "b").attempts, 2);
    assert_eq!(
        names(&sim.finish("r", "b", done(1))),
        ["task.completed b", "run.completed"]
    );
}

#[test]
fn retry_in_a_running_run_brings_back_skipped_dependents() {
    let mut sim = Sim::new();
    let mut s = spec(&[
        ("a", &[], false),
        ("b", &["a"], false),
        ("c", &["b"], false),
        ("d", &[], false),
    ]);
    s.failure_policy = FailurePolicy::Continue;
    sim.create("r", s);
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "a", failed(false, 1))),
        ["task.failed a", "task.skipped b", "task.skipped c"]
    );
    let a = sim.tid("r", "a");
    let (ps, ids) = sim.st.retry_tasks("r", &[a]).unwrap();
    assert_eq!(
        ids,
        [sim.tid("r", "a"), sim.tid("r", "b"), sim.tid("r", "c")]
    );
    assert_eq!(
        names(&sim.control("r", Ok(ps)).unwrap()),
        ["task.queued a", "task.queued b", "task.queued c"]
    );
    assert_eq!(sim.dispatch(8), ["r/a"]);
    for step in ["a", "b", "c"] {
        sim.finish("r", step, done(1));
        sim.dispatch(8);
    }
    assert_eq!(
        names(&sim.finish("r", "d", done(1))),
        ["task.completed d", "run.completed"]
    );
}

#[test]
fn fail_fast_retry_of_the_failed_task_finishes_the_run() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false), ("b", &[], false)]);
    s.concurrency = 1;
    sim.create("r", s);
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "a", failed(false, 1))),
        ["task.failed a", "task.skipped b", "run.failed"]
    );
    let a = sim.tid("r", "a");
    let (ps, _) = sim.st.retry_tasks("r", &[a]).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.dispatch(8), ["r/a"]);
    sim.finish("r", "a", done(1));
    // Fail-fast skipped b; the retry brought it back too.
    assert_eq!(sim.dispatch(8), ["r/b"]);
    sim.finish("r", "b", done(1));
    assert!(
        sim.run_status("r").is_finished(),
        "run is {:?} with b {:?}",
        sim.run_status("r"),
        sim.status("r", "b")
    );
}

#[test]
fn retry_refuses_a_task_whose_dependent_is_running() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    assert_eq!(sim.dispatch(8), ["r/b"]);
    let a = sim.tid("r", "a");
    assert!(invalid_state(sim.st.retry_tasks("r", &[a])).contains("running"));
}

#[test]
fn resume_while_approval_pending_blocks_again() {
    let mut sim = Sim::new();
    let mut s = spec(&[("w", &[], true), ("r", &[], false)]);
    s.require_plan_approval = true;
    sim.create("x", s);
    assert_eq!(sim.dispatch(8), ["x/r"]);
    let evs = sim.finish("x", "r", failed(false, 1));
    assert_eq!(
        names(&evs),
        ["task.failed r", "task.skipped w", "run.failed"]
    );
    let (ps, _) = sim.st.resume_run("x", None).unwrap();
    sim.control("x", Ok(ps)).unwrap();
    assert_eq!(sim.dispatch(8), ["x/r"]);
    sim.finish("x", "r", done(1));
    assert_eq!(sim.run_status("x"), RunStatus::Blocked);
}

#[test]
fn retry_of_a_task_with_a_cancelled_dependency_finishes_the_run() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    let (ps, _) = sim.st.cancel_run("r", None).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    let b = sim.tid("r", "b");
    let (ps, _) = sim.st.retry_tasks("r", &[b]).unwrap();
    let evs = sim.control("r", Ok(ps)).unwrap();
    assert_eq!(names(&evs)[..2], ["run.resumed", "task.skipped b"]);
    assert!(
        sim.run_status("r").is_finished(),
        "run is {:?}",
        sim.run_status("r")
    );
}

#[test]
fn steer_and_respond_rules() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    sim.dispatch(8);
    let a = sim.tid("r", "a");
    let b = sim.tid("r", "b");
    // (task, live, delivery)
    assert_eq!(
        sim.st.steer("r", &a, "look at x", true).unwrap().1,
        Delivery::Live
    );
    assert_eq!(
        sim.st.steer("r", &a, "look at x", false).unwrap().1,
        Delivery::Queued
    );
    let (p, d) = sim.st.steer("r", &b, "and y", true).unwrap();
    assert_eq!(d, Delivery::Queued, "a queued task gets it with its prompt");
    assert_eq!(names(&sim.emit(vec![p])), ["task.steered b"]);
    assert_eq!(sim.task("r", "b").pending_steers(), ["and y"]);
    assert!(matches!(
        sim.st.steer("r", &a, "  ", true),
        Err(CoreError::Invalid { .. })
    ));
    assert!(matches!(
        sim.st.steer("r", "zz", "x", true),
        Err(CoreError::NotFound { .. })
    ));
    assert!(invalid_state(sim.st.respond("r", &a, "x")).contains("not waiting"));

    sim.finish("r", "a", done(1));
    assert!(invalid_state(sim.st.steer("r", &a, "late", true)).contains("completed"));
    assert!(invalid_state(sim.st.respond("r", &a, "x")).contains("completed"));
    sim.dispatch(8);
    assert!(
        sim.task("r", "b").pending_steers().is_empty(),
        "delivered with the attempt's prompt"
    );
}

#[test]
fn forget_and_prune_rules() {
    let mut sim = Sim::new();
    sim.create("r1", spec(&[("a", &[], false)]));
    sim.create("r2", spec(&[("a", &[], false)]));
    assert!(invalid_state(sim.st.forget("r1")).contains("cancel it"));
    assert!(
        sim.st.prune(0, None).unwrap().is_empty(),
        "active runs stay"
    );
    assert!(matches!(
        sim.st.forget("nope"),
        Err(CoreError::NotFound { .. })
    ));

    sim.dispatch(8);
    sim.finish("r1", "a", done(1));
    assert_eq!(
        sim.st.prune(0, None).unwrap(),
        ["r1"],
        "only the finished one"
    );
    sim.advance(1000);
    sim.finish("r2", "a", done(1));
    assert_eq!(sim.st.prune(0, None).unwrap(), ["r2", "r1"]);
    assert_eq!(sim.st.prune(1, None).unwrap(), ["r1"]);
    assert_eq!(
        sim.st
            .prune(0, Some(t0() + Duration::milliseconds(500)))
            .unwrap(),
        ["r1"]
    );
    assert!(sim.st.prune(5, None).unwrap().is_empty());

    let r = sim.st.forget("r1");
    assert_eq!(names(&sim.control("r1", r).unwrap()), ["run.forgotten"]);
    assert!(!sim.st.runs.contains_key("r1") && !sim.st.summaries.contains_key("r1"));
    assert_eq!(sim.st.summaries.keys().collect::<Vec<_>>(), ["r2"]);
}

#[test]
fn create_rules() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    assert!(invalid_state(sim.st.create_run("r", spec(&[("a", &[], false)]))).contains("exists"));
    assert!(matches!(
        sim.st.create_run("e", spec(&[])),
        Err(CoreError::Invalid { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Stale results

#[test]
fn stale_results_are_dropped() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &[], false)]));
    sim.dispatch(8);
    sim.finish("r", "a", failed(true, 1));
    sim.advance(60_000);
    sim.dispatch(8);
    assert_eq!(sim.task("r", "a").attempts, 2);
    let a = sim.tid("r", "a");
    let before = sim.log.len();
    // (attempt, result) that must change nothing
    let cases = [
        (1, done(1)),
        (1, failed(false, 1)),
        (3, done(1)),
        (0, asked("?")),
    ];
    for (attempt, result) in cases {
        assert!(
            sim.finish_attempt("r", "a", attempt, result).is_empty(),
            "attempt {attempt}"
        );
    }
    assert!(sim.st.progress("r", &a, 1, used(9), None).is_none());
    assert!(sim.st.worker_spawned("r", &a, 1, 42, 7, true).is_none());
    assert!(sim
        .st
        .finish_attempt("nope", &a, 2, done(1), sim.now, &sim.retry, 0.0)
        .is_empty());
    assert!(sim
        .st
        .finish_attempt("r", "zz", 2, done(1), sim.now, &sim.retry, 0.0)
        .is_empty());
    assert_eq!(sim.log.len(), before);

    let p = sim.st.worker_spawned("r", &a, 2, 42, 7, true).unwrap();
    sim.emit(vec![p]);
    assert_eq!(
        (sim.task("r", "a").pid(), sim.task("r", "a").pid_start()),
        (Some(42), Some(7))
    );
    let (ps, _) = sim.st.cancel_run("r", None).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    assert!(
        sim.finish_attempt("r", "a", 2, done(1)).is_empty(),
        "cancelled"
    );
    assert!(
        sim.finish_attempt("r", "b", 1, done(1)).is_empty(),
        "cancelled"
    );
}

/// A remote attempt's job (Slurm placement) is journaled twice: the intent before it is
/// submitted, its id after. Both are exact across replay and snapshots, belong to the running
/// attempt only, and go when it ends.
#[test]
fn a_remote_job_is_journaled_before_and_after_its_submission() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    let a = sim.tid("r", "a");
    let submitting = |st: &State, attempt: u32| {
        st.worker_submitting(
            "r",
            &a,
            attempt,
            format!("crew-r-a-{attempt}"),
            "/staging/r/a.attempt-1".into(),
        )
    };
    assert!(submitting(&sim.st, 2).is_none(), "not the running attempt");
    assert!(
        sim.st.worker_submitted("r", &a, 1, 7).is_none(),
        "no id without an intent"
    );
    let p = submitting(&sim.st, 1).unwrap();
    sim.emit(vec![p]);
    let job = sim.task("r", "a").job().cloned().unwrap();
    assert_eq!(
        (job.name.as_str(), job.staging.as_str(), job.id),
        ("crew-r-a-1", "/staging/r/a.attempt-1", None)
    );
    assert!(submitting(&sim.st, 1).is_none(), "one intent per attempt");
    sim.replays_equal();
    assert!(sim.st.worker_submitted("r", &a, 2, 7).is_none());
    let p = sim.st.worker_submitted("r", &a, 1, 7).unwrap();
    let evs = sim.emit(vec![p]);
    assert_eq!(
        serde_json::to_value(&evs[0]).unwrap()["data"],
        serde_json::json!({"attempt": 1, "jobId": 7})
    );
    assert_eq!(sim.task("r", "a").job().unwrap().id, Some(7));
    assert!(
        sim.st.worker_submitted("r", &a, 1, 8).is_none(),
        "the id is recorded once"
    );
    sim.replays_equal();
    // The attempt ends: its job goes with it, and the retry starts without one.
    sim.finish("r", "a", failed(true, 1));
    assert!(sim.task("r", "a").job().is_none());
    assert_eq!(sim.task("r", "a").rare().job, None);
    sim.advance(60_000);
    sim.dispatch(8);
    assert_eq!(sim.task("r", "a").attempts, 2);
    assert!(sim.task("r", "a").job().is_none());
    // A cancelled task keeps no job either.
    let p = submitting(&sim.st, 2).unwrap();
    sim.emit(vec![p]);
    let (ps, _) = sim.st.cancel_run("r", None).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    assert!(sim.task("r", "a").job().is_none());
    assert!(
        sim.st.worker_submitted("r", &a, 2, 9).is_none(),
        "cancelled"
    );
    sim.replays_equal();
}

#[test]
fn orphans_are_requeued_after_a_restart_without_counting_an_attempt() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &["a"], false)]));
    sim.dispatch(8);
    sim.progress("r", "a", 70);
    let ps = sim.st.requeue_orphans(sim.now);
    let evs = sim.emit(ps);
    assert_eq!(names(&evs), ["task.retrying a"]);
    assert_eq!(sim.status("r", "a"), TaskStatus::Queued);
    assert_eq!(sim.st.runs["r"].usage().input, 70);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(sim.task("r", "a").attempts, 2);
}

#[test]
fn an_orphans_transcript_usage_counts_when_it_shows_more() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false), ("b", &[], false)]));
    sim.dispatch(8);
    sim.progress("r", "a", 70);
    sim.progress("r", "b", 70);
    // a's transcript shows more than its last progress; b's less (the progress stands).
    let seen = |_: &str, task: &str, attempt: u32| {
        assert_eq!(attempt, 1);
        Some(Usage {
            input: if task.ends_with('a') { 500 } else { 10 },
            cost: 0.25,
            ..Default::default()
        })
    };
    let ps = sim.st.requeue_orphans_except(sim.now, &|_, _| false, &seen);
    sim.emit(ps);
    assert_eq!(sim.st.runs["r"].usage().input, 570);
    assert_eq!(sim.task("r", "a").usage().input, 500);
    assert_eq!(sim.task("r", "b").usage().input, 70);
}

#[test]
fn orphaned_attempt_does_not_count_against_max_attempts() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false)]);
    s.max_attempts = 2;
    sim.create("r", s);
    sim.dispatch(8);
    let ps = sim.st.requeue_orphans(sim.now);
    sim.emit(ps);
    sim.dispatch(8);
    assert_eq!(
        names(&sim.finish("r", "a", failed(true, 1))),
        ["task.retrying a"],
        "one real failure of two allowed"
    );
}

// ---------------------------------------------------------------------------------------------
// Replay and wire shape

/// A day of work over several runs: retries, budget, approval, cancel, resume, forget.
fn busy_sim() -> Sim {
    let mut sim = Sim::new();
    sim.create(
        "r1",
        spec(&[
            ("a", &[], false),
            ("b", &["a"], false),
            ("c", &["a"], false),
            ("d", &["c"], false),
        ]),
    );
    sim.create(
        "r2",
        budget_spec(&[("a", &[], false), ("b", &[], false)], 100),
    );
    let mut s = approval_spec();
    s.concurrency = 1;
    sim.create("r3", s);
    sim.create("r4", spec(&[("a", &[], false)]));
    sim.create("r5", spec(&[("a", &[], false)]));
    sim.dispatch(3);
    sim.advance(10);
    sim.finish("r1", "a", failed(true, 3));
    sim.progress("r2", "a", 50);
    sim.dispatch(3);
    sim.advance(10);
    sim.finish("r3", "explore", done(4));
    sim.progress("r2", "a", 90);
    let (ps, _) = sim.st.cancel_run("r4", None).unwrap();
    sim.control("r4", Ok(ps)).unwrap();
    sim.advance(5_000);
    for _ in 0..20 {
        let started = sim.dispatch(3);
        sim.advance(100);
        for s in started {
            let (run, step) = s.split_once('/').unwrap();
            if run == "r2" {
                sim.progress(run, step, 200);
            } else {
                sim.finish(run, step, done(2));
            }
        }
        if sim.st.runs["r3"].approval == Approval::Pending {
            let r = sim.st.approve("r3", None);
            sim.control("r3", r).unwrap();
        }
    }
    let r = sim.st.forget("r5");
    sim.control("r5", r).unwrap();
    let (ps, _) = sim.st.resume_run("r4", None).unwrap();
    sim.control("r4", Ok(ps)).unwrap();
    sim
}

#[test]
fn busy_scenario_reaches_the_expected_end() {
    let sim = busy_sim();
    let got: Vec<_> = ["r1", "r2", "r3", "r4"].map(|r| sim.run_status(r)).to_vec();
    assert_eq!(
        got,
        [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Completed,
            RunStatus::Running
        ]
    );
    assert!(!sim.st.summaries.contains_key("r5"));
    assert_eq!(sim.st.runs["r2"].reason.as_deref(), Some("budget_exceeded"));
}

#[test]
fn replaying_the_log_rebuilds_the_same_state() {
    let sim = busy_sim();
    let mut fresh = State::default();
    for ev in &sim.log {
        fresh.apply(ev);
    }
    assert_eq!(
        serde_json::to_value(&fresh).unwrap(),
        serde_json::to_value(&sim.st).unwrap()
    );
    assert_eq!(fresh.runs, sim.st.runs);
    assert_eq!(fresh.summaries, sim.st.summaries);
    assert_eq!(fresh.active, sim.st.active);
    assert_eq!(fresh.last_seq, sim.seq);

    // Round trip through the journal's serialization too.
    let mut from_json = State::default();
    for ev in &sim.log {
        let text = serde_json::to_string(ev).unwrap();
        let back: Event = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, ev, "{text}");
        from_json.apply(&back);
    }
    assert_eq!(from_json.runs, sim.st.runs);

    // Summaries stay right for runs no longer resident.
    for id in ["r1", "r2", "r3", "r4"] {
        assert_eq!(sim.st.summaries[id], sim.st.runs[id].summary(), "{id}");
    }
}

#[test]
fn replay_run_rebuilds_one_run_after_eviction() {
    let mut sim = busy_sim();
    for id in ["r1", "r2", "r3", "r4"] {
        let own: Vec<Event> = sim
            .log
            .iter()
            .filter(|e| e.run_id.as_deref() == Some(id))
            .cloned()
            .collect();
        let rebuilt = replay_run(&own).unwrap();
        assert_eq!(&rebuilt, &sim.st.runs[id], "{id}");
    }
    let live = sim.st.runs["r1"].clone();
    assert!(!sim.st.evict("r4"), "an active run stays resident");
    assert!(sim.st.evict("r1"));
    assert!(sim.st.run("r1").is_none());
    assert_eq!(sim.st.summaries["r1"].status, RunStatus::Completed);
    let own: Vec<&Event> = sim
        .log
        .iter()
        .filter(|e| e.run_id.as_deref() == Some("r1"))
        .collect();
    sim.st.insert_loaded(replay_run(own).unwrap());
    assert_eq!(sim.st.runs["r1"], live);
    assert!(replay_run(Vec::<&Event>::new()).is_none());
}

#[test]
fn events_have_the_spec_wire_shape() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    sim.finish("r", "a", failed(true, 1));
    let v = serde_json::to_value(sim.log.last().unwrap()).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["data", "message", "runId", "runSeq", "seq", "taskId", "time", "type"]
    );
    assert_eq!(v["type"], "task.retrying");
    assert_eq!(v["runSeq"], 4);
    assert_eq!(v["taskId"], "01_a");
    assert_eq!(v["data"]["delayMs"], 1150);
    assert_eq!(v["data"]["notBefore"], "2025-01-02T03:04:06.150Z");
    assert_eq!(v["data"]["usage"]["cacheWrite"], 0);
    assert_eq!(v["data"]["attempt"], 1);
    for ev in &sim.log {
        let v = serde_json::to_value(ev).unwrap();
        assert_eq!(v["type"], ev.body.type_name());
        for snake in ["run_seq", "run_id", "task_id"] {
            assert!(v.get(snake).is_none(), "{snake} in {v}");
        }
    }
}

#[test]
fn short_run_event_snapshot() {
    let mut sim = Sim::new();
    sim.create(
        "20250102-030405-abcd",
        spec(&[("a", &[], false), ("b", &["a"], false)]),
    );
    sim.dispatch(8);
    sim.advance(1500);
    sim.progress("20250102-030405-abcd", "a", 40);
    sim.advance(1500);
    sim.finish("20250102-030405-abcd", "a", done(50));
    sim.dispatch(8);
    sim.advance(1000);
    sim.finish("20250102-030405-abcd", "b", no_final_text());
    let (ps, _) = sim
        .st
        .cancel_run("20250102-030405-abcd", Some("user".into()))
        .unwrap();
    sim.control("20250102-030405-abcd", Ok(ps)).unwrap();
    // The frozen spec in run.created is long and covered elsewhere; keep the rest.
    let evs: Vec<serde_json::Value> = sim
        .log
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            if e.body.type_name() == "run.created" {
                v["data"] = serde_json::json!("<spec>");
            }
            v
        })
        .collect();
    insta::assert_json_snapshot!("short_run_events", evs);
}

#[test]
fn tasks_of_a_big_run_are_found_by_id() {
    // 120 tasks: ids past 99 sort before the two-digit ones, so index order is not plan order.
    let template = tasks(&[("step", &[], false)]).remove(0);
    let mut s = spec(&[("step", &[], false)]);
    s.tasks = (1..=120)
        .map(|i| {
            std::sync::Arc::new(PlannedTask::from(crate::plan::FlatTask {
                id: task_id(i, "step"),
                ..PlannedTask::clone(&template).into_flat()
            }))
        })
        .collect();
    let mut sim = Sim::new();
    sim.create("r", s);
    let run = &sim.st.runs["r"];
    for (i, t) in run.tasks.iter().enumerate() {
        assert_eq!(run.task_index(&t.plan.id), Some(i), "{}", t.plan.id);
        assert_eq!(
            run.task(&t.plan.id).map(|t| t.plan.id.as_str()),
            Some(t.plan.id.as_str())
        );
    }
    for missing in ["", "nope", "000-step", "121-step"] {
        assert_eq!(run.task_index(missing), None, "{missing}");
    }
    // A run read back from a snapshot builds its index again.
    let back: RunState = serde_json::from_value(serde_json::to_value(run).unwrap()).unwrap();
    assert_eq!(back.task_index(&task_id(100, "step")), Some(99));
}

/// A worktree run stays running once its tasks completed until the daemon records the
/// integration; a conflict blocks it, a resume with nothing to requeue waits for the next
/// integration, and a task's commit rides on `task.completed` into the task's state.
#[test]
fn a_worktree_run_completes_only_after_integration() {
    use super::workspace::{Integration, TaskCommit, WorkspaceSpec};
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], true)]);
    s.workspace = Some(WorkspaceSpec {
        repo: "/src/app".into(),
        subdir: String::new(),
        base: "b".repeat(40),
        head: Some("b".repeat(40)),
        dirty: false,
        branch: Some("main".into()),
        conflicts: Default::default(),
        resolver: None,
    });
    sim.create("r", s);
    sim.dispatch(8);
    let commit = TaskCommit {
        branch: "crew/tasks/r/01_a".into(),
        start: "b".repeat(40),
        commit: "c".repeat(40),
        files: 1,
        insertions: 2,
        deletions: 0,
    };
    let mut result = done(1);
    if let AttemptResult::Completed { commit: c, .. } = &mut result {
        *c = Some(commit.clone());
    }
    let evs = sim.finish("r", "a", result);
    assert_eq!(names(&evs), ["task.completed a"]);
    assert_eq!(sim.task("r", "a").commit(), Some(&commit));
    assert_eq!(sim.run_status("r"), RunStatus::Running);

    sim.emit(vec![Pending::run(
        "r",
        EventBody::RunBlocked {
            reason: "integration conflict".into(),
        },
    )]);
    assert!(sim.settle_all("r").is_empty());
    assert_eq!(sim.run_status("r"), RunStatus::Blocked);
    let r = sim.st.resume_run("r", None).map(|(ps, _)| ps);
    let evs = sim.control("r", r).unwrap();
    assert_eq!(names(&evs), ["run.resumed"]);
    assert_eq!(sim.run_status("r"), RunStatus::Running);

    let integration = Integration {
        branch: "crew/r".into(),
        commit: "c".repeat(40),
        files: 1,
        insertions: 2,
        deletions: 0,
    };
    let evs = sim.control(
        "r",
        Ok(vec![Pending::run(
            "r",
            EventBody::RunIntegrated(Box::new(integration.clone())),
        )]),
    );
    assert_eq!(names(&evs.unwrap()), ["run.integrated", "run.completed"]);
    assert_eq!(sim.st.runs["r"].integration, Some(integration));
    // The wire shape of the commit on task.completed, and a replay gives the same run.
    let completed = sim
        .log
        .iter()
        .find(|e| e.body.type_name() == "task.completed")
        .unwrap();
    let json = serde_json::to_value(completed).unwrap();
    assert_eq!(json["data"]["commit"]["files"], 1);
    let back: Event = serde_json::from_value(json).unwrap();
    assert_eq!(&back, completed);
    let run = &sim.st.runs["r"];
    let again: RunState = serde_json::from_value(serde_json::to_value(run).unwrap()).unwrap();
    assert_eq!(&again, run);
}

/// Issue 17: shared-mode tasks whose scopes overlap never run at once; worktree-mode ones do.
#[test]
fn overlapping_scopes_are_serialized_in_shared_mode_only() {
    let scoped = |scopes: &[&[&str]], worktree: bool| {
        let steps: Vec<Step> = ["a", "b", "c"][..scopes.len()]
            .iter()
            .map(|n| (*n, &[][..], true))
            .collect();
        let mut s = spec(&steps);
        s.tasks = s
            .tasks
            .iter()
            .zip(scopes)
            .map(|(t, sc)| {
                std::sync::Arc::new(PlannedTask::from(crate::plan::FlatTask {
                    scope: sc.iter().map(|p| p.to_string()).collect(),
                    ..PlannedTask::clone(t).into_flat()
                }))
            })
            .collect();
        if worktree {
            s.workspace = Some(WorkspaceSpec {
                repo: "/r".into(),
                subdir: String::new(),
                base: "b".into(),
                head: None,
                dirty: false,
                branch: None,
                conflicts: Default::default(),
                resolver: None,
            });
        }
        s
    };
    type Case = (
        &'static str,
        &'static [&'static [&'static str]],
        bool,
        &'static [&'static str],
    );
    let cases: &[Case] = &[
        (
            "disjoint run together",
            &[&["src/a"], &["src/b"]],
            false,
            &["r/a", "r/b"],
        ),
        ("overlap waits", &[&["src"], &["src/b.rs"]], false, &["r/a"]),
        (
            "glob overlap waits",
            &[&["src/*.rs"], &["src/main.rs"], &["docs"]],
            false,
            &["r/a", "r/c"],
        ),
        (
            "unscoped never waits",
            &[&[], &["src"]],
            false,
            &["r/a", "r/b"],
        ),
        (
            "worktree mode never waits",
            &[&["src"], &["src"]],
            true,
            &["r/a", "r/b"],
        ),
    ];
    for (name, scopes, worktree, first) in cases {
        let mut sim = Sim::new();
        sim.create("r", scoped(scopes, *worktree));
        assert_eq!(sim.dispatch(8), *first, "{name}");
        if first.len() < scopes.len() {
            // The waiting task starts once the one holding the overlap ended.
            sim.finish("r", "a", done(1));
            assert_eq!(sim.dispatch(8), ["r/b"], "{name}: after a completed");
        }
    }
}

fn verify_failed() -> AttemptResult {
    AttemptResult::Failed {
        usage: used(1),
        model: None,
        artifacts: vec![],
        error: "verification failed: `make check` exited with 2: BOOM".into(),
        retryable: true,
        reason: crate::checks::VERIFY_FAILED.into(),
    }
}

/// A failed verification is retried as often as the step allows, with its failure kept as the
/// next attempt's feedback; then the task fails. A manual retry starts the count again.
#[test]
fn verification_failures_retry_with_feedback_then_fail() {
    for (retries, attempts_before_fail) in [(None, 2u32), (Some(0), 1), (Some(2), 3)] {
        let mut s = spec(&[("a", &[], true)]);
        s.tasks = s
            .tasks
            .iter()
            .map(|t| {
                let mut p = (**t).clone();
                p.checks.verify = Some(crate::checks::Verify {
                    commands: vec!["make check".into()],
                    retries,
                });
                std::sync::Arc::new(p)
            })
            .collect();
        let mut sim = Sim::new();
        sim.create("r", s);
        for attempt in 1..=attempts_before_fail {
            assert_eq!(sim.dispatch(8), ["r/a"], "{retries:?} attempt {attempt}");
            let evs = sim.finish("r", "a", verify_failed());
            let want = if attempt < attempts_before_fail {
                "task.retrying"
            } else {
                "task.failed"
            };
            assert_eq!(
                evs[0].body.type_name(),
                want,
                "{retries:?} attempt {attempt}"
            );
            if want == "task.retrying" {
                assert_eq!(
                    sim.task("r", "a").feedback(),
                    Some("verification failed: `make check` exited with 2: BOOM")
                );
                sim.advance(60_000);
            }
        }
        assert_eq!(sim.status("r", "a"), TaskStatus::Failed, "{retries:?}");
    }
}

#[test]
fn feedback_is_cleared_by_completion() {
    let mut s = spec(&[("a", &[], true)]);
    s.tasks = s
        .tasks
        .iter()
        .map(|t| {
            let mut p = (**t).clone();
            p.checks.verify = Some(crate::checks::Verify {
                commands: vec!["true".into()],
                retries: None,
            });
            std::sync::Arc::new(p)
        })
        .collect();
    let mut sim = Sim::new();
    sim.create("r", s);
    sim.dispatch(8);
    sim.finish("r", "a", verify_failed());
    sim.advance(60_000);
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    assert_eq!(sim.status("r", "a"), TaskStatus::Completed);
    assert_eq!(sim.task("r", "a").feedback(), None);
    assert_eq!(sim.task("r", "a").rare().verify_retries, 1);
}

#[test]
fn answering_neither_uses_up_nor_refills_the_retry_budget() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    // Attempt 1 fails retryably (1 of 3 used), attempt 2 asks (not counted).
    assert_eq!(sim.dispatch(8), ["r/a"]);
    let evs = sim.finish("r", "a", failed(true, 1));
    assert_eq!(names(&evs), ["task.retrying a"]);
    sim.advance(60_000);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    sim.finish("r", "a", asked("Which DB?"));
    assert_eq!(sim.task("r", "a").attempts_in_window, 1);
    let id = sim.tid("r", "a");
    let r = sim.st.respond("r", &id, "Postgres");
    sim.control("r", r).unwrap();
    assert_eq!(
        sim.task("r", "a").attempts_in_window,
        1,
        "the answer keeps the window"
    );
    // Attempts 3 and 4 may still fail retryably-once: 2 more tries count as 2 and 3 of 3.
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(sim.task("r", "a").attempts, 3);
    let evs = sim.finish("r", "a", failed(true, 1));
    assert_eq!(
        names(&evs),
        ["task.retrying a"],
        "the question used no attempt"
    );
    sim.advance(60_000);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    let evs = sim.finish("r", "a", failed(true, 1));
    assert_eq!(
        names(&evs),
        ["task.failed a", "run.failed"],
        "nor did the answer refill the budget: 3 failed attempts are max_attempts"
    );
}

#[test]
fn retry_with_dependents_brings_back_finished_downstream_tasks() {
    let mut sim = Sim::new();
    let mut s = spec(&[
        ("a", &[], false),
        ("b", &["a"], false),
        ("c", &["b"], false),
        ("d", &[], false),
    ]);
    s.failure_policy = FailurePolicy::Continue;
    sim.create("r", s);
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    sim.finish("r", "d", done(1));
    sim.dispatch(8);
    sim.finish("r", "b", done(1));
    sim.dispatch(8);
    sim.finish("r", "c", failed(false, 1));
    assert!(sim.run_status("r").is_finished());
    let a = sim.tid("r", "a");
    // Plain retry: a alone.
    let (_, ids) = sim.st.retry_tasks("r", std::slice::from_ref(&a)).unwrap();
    assert_eq!(ids, std::slice::from_ref(&a));
    // With dependents: b (completed) and c (failed) too, not the unrelated d.
    let (ps, ids) = sim
        .st
        .retry_tasks_with_dependents("r", std::slice::from_ref(&a))
        .unwrap();
    assert_eq!(ids, [a.clone(), sim.tid("r", "b"), sim.tid("r", "c")]);
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.status("r", "d"), TaskStatus::Completed);
    // Readiness holds: b waits for a again.
    assert_eq!(sim.dispatch(8), ["r/a"]);
    sim.finish("r", "a", done(1));
    assert_eq!(sim.dispatch(8), ["r/b"]);
    sim.finish("r", "b", done(1));
    assert_eq!(sim.dispatch(8), ["r/c"]);
    assert_eq!(
        names(&sim.finish("r", "c", done(1))),
        ["task.completed c", "run.completed"]
    );
    assert!(matches!(
        sim.st.retry_tasks_with_dependents("r", &["zz".into()]),
        Err(CoreError::NotFound { what: "task", .. })
    ));
}

#[test]
fn a_failed_attempts_turns_count_in_the_tasks_progress() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    assert_eq!(sim.dispatch(8), ["r/a"]);
    sim.progress("r", "a", 10);
    assert_eq!(sim.task("r", "a").progress.turns, 1);
    let failed_with_turns = AttemptResult::Failed {
        usage: Usage {
            input: 10,
            turns: 3,
            ..Usage::default()
        },
        model: None,
        artifacts: vec![],
        error: "429 rate limited".into(),
        retryable: true,
        reason: "model_error".into(),
    };
    assert_eq!(
        names(&sim.finish("r", "a", failed_with_turns)),
        ["task.retrying a"]
    );
    assert_eq!(
        sim.task("r", "a").progress.turns,
        3,
        "the ended attempt's turns"
    );
    sim.advance(60_000);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    sim.progress("r", "a", 5);
    let t = sim.task("r", "a");
    assert_eq!(t.progress.turns, 4, "3 of the failed attempt + 1 so far");
    assert_eq!(t.progress.tokens, 15);
    assert_eq!(t.usage().turns, 4);
    sim.finish("r", "a", done(7));
    let t = sim.task("r", "a");
    assert_eq!(t.status, TaskStatus::Completed);
    assert_eq!((t.progress.turns, t.usage().turns), (4, 4));
}

fn capacity_failure() -> AttemptResult {
    AttemptResult::Failed {
        usage: used(1),
        model: None,
        artifacts: vec![],
        error: "API Error: 529 overloaded_error".into(),
        retryable: true,
        reason: "model_error".into(),
    }
}

/// The model each `task.started` of `events` names.
fn started_models(events: &[Event]) -> Vec<Option<String>> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::TaskStarted { model, .. } => Some(model.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn capacity_failures_move_a_task_down_its_fallback_models() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false)]);
    s.max_attempts = 2;
    let mut task = (*s.tasks[0]).clone();
    task.model = Some("a/one".into());
    // The task's own model again in the list is skipped: it would not help.
    task.fallback_models = vec!["a/one".into(), "b/two".into(), "c/three".into()];
    s.tasks[0] = std::sync::Arc::new(task);
    sim.create("r", s);
    let mut reasons = Vec::new();
    for _ in 0..6 {
        sim.advance(600_000);
        assert_eq!(sim.dispatch(8), ["r/a"]);
        let evs = sim.finish("r", "a", capacity_failure());
        reasons.extend(evs.iter().map(|e| match &e.body {
            EventBody::TaskRetrying { fallback_model, .. } => {
                format!("retrying {}", fallback_model.as_deref().unwrap_or("-"))
            }
            other => other.type_name().to_string(),
        }));
    }
    assert_eq!(
        reasons,
        [
            "retrying -",
            "retrying b/two",
            "retrying -",
            "retrying c/three",
            "retrying -",
            "task.failed",
            "run.failed"
        ]
    );
    let m = |s: &str| Some(s.to_string());
    assert_eq!(
        started_models(&sim.log),
        [
            m("a/one"),
            m("a/one"),
            m("b/two"),
            m("b/two"),
            m("c/three"),
            m("c/three")
        ],
        "each attempt records its model"
    );
    let t = sim.task("r", "a");
    assert_eq!(
        (t.attempts, t.fallback(), t.model.as_deref()),
        (6, 3, Some("c/three"))
    );
    let msg = sim
        .log
        .iter()
        .find_map(|e| match &e.body {
            EventBody::TaskRetrying {
                fallback_model: Some(_),
                ..
            } => e.message.clone(),
            _ => None,
        })
        .unwrap();
    assert!(
        msg.contains("next attempt on fallback model b/two"),
        "{msg}"
    );

    // The journal's form replays to the same task.
    let mut replayed = State::default();
    for ev in &sim.log {
        let back: Event = serde_json::from_str(&serde_json::to_string(ev).unwrap()).unwrap();
        replayed.apply(&back);
    }
    assert_eq!(replayed.runs, sim.st.runs);
    let snap: TaskState =
        serde_json::from_value(serde_json::to_value(sim.task("r", "a")).unwrap()).unwrap();
    assert_eq!(&snap, sim.task("r", "a"), "a snapshot keeps the fallback");

    // A manual retry starts over from the task's own model.
    let id = sim.tid("r", "a");
    let (ps, _) = sim.st.retry_tasks("r", std::slice::from_ref(&id)).unwrap();
    sim.control("r", Ok(ps)).unwrap();
    assert_eq!(sim.task("r", "a").fallback(), 0);
    let before = sim.log.len();
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(started_models(&sim.log[before..]), [m("a/one")]);
}

#[test]
fn only_capacity_failures_fall_back() {
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false)]);
    s.max_attempts = 1;
    let mut task = (*s.tasks[0]).clone();
    task.fallback_models = vec!["b/two".into()];
    s.tasks[0] = std::sync::Arc::new(task);
    sim.create("r", s);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    // A crash is retryable, but no other model would help with it.
    assert_eq!(
        names(&sim.finish("r", "a", failed(true, 1))),
        ["task.failed a", "run.failed"]
    );

    // Without a model of its own, the task's first fallback follows the CLI's default.
    let mut sim = Sim::new();
    let mut s = spec(&[("a", &[], false)]);
    s.max_attempts = 1;
    let mut task = (*s.tasks[0]).clone();
    task.fallback_models = vec!["b/two".into()];
    s.tasks[0] = std::sync::Arc::new(task);
    sim.create("r", s);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(
        names(&sim.finish("r", "a", capacity_failure())),
        ["task.retrying a"]
    );
    sim.advance(600_000);
    assert_eq!(sim.dispatch(8), ["r/a"]);
    let run = &sim.st.runs["r"];
    let t = sim.task("r", "a");
    assert_eq!(run.attempt_model(t).as_deref(), Some("b/two"));
    assert!(run.later_fallbacks(t).is_empty());
    assert_eq!(started_models(&sim.log), [None, Some("b/two".to_string())]);
}

// ---- fan-out steps (`expands: tasks`) ----

/// A run of the builtin `implement` workflow (explore, plan (fan-out), integrate, verify,
/// review), shared workspace.
fn implement_spec(approval: bool) -> RunSpec {
    let plan = crate::plan::build_plan(
        &crate::resource::Catalog::builtin(),
        Some("implement"),
        None,
    )
    .unwrap();
    RunSpec {
        tasks: plan.tasks.into_iter().map(std::sync::Arc::new).collect(),
        require_plan_approval: approval,
        ..spec(&[("x", &[], false)])
    }
}

fn fan_out_answer(ids: &[&str]) -> String {
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "role": "executor", "title": id, "task": "t", "scope": [format!("src/{id}/**")]})
        })
        .collect();
    format!("```json\n{}\n```", serde_json::json!({ "tasks": tasks }))
}

impl Sim {
    fn finish_fan_out(&mut self, run: &str, step: &str, answer: &str) -> Vec<Event> {
        let id = self.tid(run, step);
        let attempt = self.task(run, step).attempts;
        let ps = self.st.finish_fan_out(
            run,
            &id,
            attempt,
            done(10),
            Some(&crate::fanout::Answer::Text(answer.to_string())),
            self.now,
            &self.retry,
            self.jitter,
        );
        let mut evs = self.emit(ps);
        evs.extend(self.settle_all(run));
        evs
    }
}

#[test]
fn fan_out_adds_parallel_tasks_that_the_next_step_waits_for() {
    let mut sim = Sim::new();
    sim.create("r", implement_spec(false));
    assert_eq!(sim.dispatch(8), ["r/explore"]);
    sim.finish("r", "explore", done(1));
    assert_eq!(sim.dispatch(8), ["r/plan"]);
    let evs = sim.finish_fan_out("r", "plan", &fan_out_answer(&["a", "b", "c", "d"]));
    assert_eq!(
        names(&evs)[..2],
        ["task.expanded plan", "task.completed plan"]
    );
    let run = &sim.st.runs["r"];
    assert_eq!(run.tasks.len(), 9);
    assert_eq!(run.spec.tasks.len(), 9);
    let integrate = sim.task("r", "integrate");
    assert_eq!(
        integrate.plan.depends_on.join(","),
        "02_plan,a,b,c,d",
        "the step after the fan-out waits for every added task"
    );
    assert_eq!(sim.task("r", "a").plan.depends_on.join(","), "02_plan");
    assert_eq!(sim.st.summaries["r"].tasks.total, 9);
    // All four start at once (concurrency 4).
    assert_eq!(sim.dispatch(8), ["r/a", "r/b", "r/c", "r/d"]);
    for id in ["a", "b", "c"] {
        sim.finish("r", id, done(1));
    }
    assert_eq!(sim.dispatch(8), Vec::<String>::new());
    sim.finish("r", "d", done(1));
    assert_eq!(sim.dispatch(8), ["r/integrate"]);
    // A task id is found through the index after the list grew.
    assert_eq!(sim.st.runs["r"].task_index("d"), Some(8));

    // The journal replays to the same run, through JSON too.
    let mut fresh = State::default();
    for ev in &sim.log {
        let back: Event = serde_json::from_str(&serde_json::to_string(ev).unwrap()).unwrap();
        fresh.apply(&back);
    }
    assert_eq!(fresh.runs, sim.st.runs);
    assert_eq!(fresh.summaries, sim.st.summaries);
    // And a snapshot of it reads back equal.
    let snap: RunState =
        serde_json::from_value(serde_json::to_value(&sim.st.runs["r"]).unwrap()).unwrap();
    assert_eq!(snap, sim.st.runs["r"]);
    assert_eq!(
        snap.task("c").map(|t| t.plan.scope.clone()),
        Some(vec!["src/c/**".to_string()])
    );
}

#[test]
fn invalid_fan_out_gets_one_repair_attempt_then_needs_attention() {
    let mut sim = Sim::new();
    sim.create("r", implement_spec(false));
    sim.dispatch(8);
    sim.finish("r", "explore", done(1));
    sim.dispatch(8);
    let evs = sim.finish_fan_out("r", "plan", "no block here");
    assert_eq!(names(&evs)[..1], ["task.retrying plan"]);
    assert!(sim
        .task("r", "plan")
        .fan_out_repair()
        .unwrap()
        .contains("no fan-out block"));
    assert_eq!(sim.dispatch(8), ["r/plan"]);
    let bad = fan_out_answer(&["a"]).replace("executor", "wizard");
    let evs = sim.finish_fan_out("r", "plan", &bad);
    assert_eq!(names(&evs)[..1], ["task.needs_attention plan"]);
    let plan = sim.task("r", "plan");
    assert_eq!(plan.status, TaskStatus::NeedsAttention);
    assert!(plan
        .error
        .as_deref()
        .unwrap()
        .contains("unknown role `wizard`"));
    assert_eq!(sim.st.runs["r"].tasks.len(), 5, "nothing added");
    assert_eq!(sim.run_status("r"), RunStatus::Blocked);
    // A resume gives it a fresh window, with one repair again.
    let r = sim.st.resume_run("r", None).map(|(ps, _)| ps);
    sim.control("r", r).unwrap();
    assert_eq!(sim.task("r", "plan").fan_out_repair(), None);
    assert_eq!(sim.dispatch(8), ["r/plan"]);
    let evs = sim.finish_fan_out("r", "plan", &fan_out_answer(&["a", "b"]));
    assert_eq!(
        names(&evs)[..2],
        ["task.expanded plan", "task.completed plan"]
    );
}

#[test]
fn added_tasks_wait_for_plan_approval_and_reject_cancels() {
    for approve in [true, false] {
        let mut sim = Sim::new();
        sim.create("r", implement_spec(true));
        sim.dispatch(8);
        sim.finish("r", "explore", done(1));
        sim.dispatch(8);
        let evs = sim.finish_fan_out("r", "plan", &fan_out_answer(&["a", "b"]));
        assert!(
            names(&evs)
                .iter()
                .any(|n| n.starts_with("plan.approval_required")),
            "{:?}",
            names(&evs)
        );
        assert_eq!(sim.run_status("r"), RunStatus::Blocked);
        assert_eq!(sim.dispatch(8), Vec::<String>::new());
        if approve {
            let r = sim.st.approve("r", None);
            sim.control("r", r).unwrap();
            assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
        } else {
            let r = sim.st.reject("r", None);
            sim.control("r", r).unwrap();
            assert_eq!(sim.run_status("r"), RunStatus::Cancelled);
            assert_eq!(sim.status("r", "a"), TaskStatus::Cancelled);
        }
    }
}

#[test]
fn a_fan_out_task_run_again_adds_nothing_twice() {
    let mut sim = Sim::new();
    sim.create("r", implement_spec(false));
    sim.dispatch(8);
    sim.finish("r", "explore", done(1));
    sim.dispatch(8);
    sim.finish_fan_out("r", "plan", &fan_out_answer(&["a"]));
    let id = sim.tid("r", "plan");
    let r = sim.st.retry_tasks("r", &[id]).map(|(ps, _)| ps);
    sim.control("r", r).unwrap();
    assert_eq!(sim.dispatch(8), ["r/plan"]);
    let evs = sim.finish_fan_out("r", "plan", &fan_out_answer(&["a"]));
    assert_eq!(names(&evs)[..1], ["task.completed plan"]);
    assert_eq!(sim.st.runs["r"].tasks.len(), 6);
}

/// The builtin `team`'s plan as a run spec.
fn team_spec(team: &str) -> RunSpec {
    let plan =
        crate::plan::build_plan(&crate::resource::Catalog::builtin(), Some(team), None).unwrap();
    RunSpec {
        tasks: plan.tasks.into_iter().map(std::sync::Arc::new).collect(),
        ..spec(&[("x", &[], false)])
    }
}

impl Sim {
    /// A task's attempt completed with `answer` as its final text, as the daemon reports it.
    fn finish_answer(&mut self, run: &str, task_id: &str, answer: &str) -> Vec<Event> {
        let attempt = self.st.runs[run].task(task_id).unwrap().attempts;
        let ps = self.st.finish_fan_out(
            run,
            task_id,
            attempt,
            done(10),
            Some(&crate::fanout::Answer::Text(answer.to_string())),
            self.now,
            &self.retry,
            self.jitter,
        );
        let mut evs = self.emit(ps);
        evs.extend(self.settle_all(run));
        evs
    }

    /// Run the default team up to its verifier.
    fn up_to_verify(&mut self) {
        self.create("r", team_spec("default"));
        for step in ["explore", "plan", "execute"] {
            assert_eq!(self.dispatch(8), [format!("r/{step}")]);
            self.finish("r", step, done(1));
        }
        assert_eq!(self.dispatch(8), ["r/verify"]);
    }

    fn replays_equal(&self) {
        let mut fresh = State::default();
        for ev in &self.log {
            let back: Event = serde_json::from_str(&serde_json::to_string(ev).unwrap()).unwrap();
            fresh.apply(&back);
        }
        assert_eq!(fresh.runs, self.st.runs);
        assert_eq!(fresh.summaries, self.st.summaries);
        let snap: RunState =
            serde_json::from_value(serde_json::to_value(&self.st.runs["r"]).unwrap()).unwrap();
        assert_eq!(snap, self.st.runs["r"]);
    }
}

const FAIL_ONE: &str = "Tests fail.\n```json\n{\"verdict\": \"fail\", \"findings\": [{\"title\": \"add() is wrong\", \"detail\": \"1+1 gave 3\", \"paths\": [\"src/lib.rs\"]}]}\n```";

#[test]
fn a_failing_verdict_adds_a_fix_task_and_the_judge_runs_again() {
    let mut sim = Sim::new();
    sim.up_to_verify();
    let evs = sim.finish_answer("r", "04_verify", FAIL_ONE);
    assert_eq!(
        names(&evs)[..2],
        ["task.completed verify", "task.fix_added verify"]
    );
    assert_eq!(
        evs[1].message.as_deref(),
        Some("04_verify: fail, 1 finding → _fix-04_verify-1")
    );
    let fix = sim.st.runs["r"].task("_fix-04_verify-1").unwrap();
    assert_eq!(fix.plan.role, "executor");
    assert_eq!(fix.plan.depends_on.join(","), "03_execute");
    assert!(fix.plan.task_template.contains("add() is wrong"));
    assert!(fix.plan.task_template.contains("1+1 gave 3"));
    let verify = sim.task("r", "verify");
    assert_eq!(verify.status, TaskStatus::Queued);
    assert_eq!(
        verify.plan.depends_on.join(","),
        "03_execute,_fix-04_verify-1"
    );
    assert_eq!(
        verify.verdict().unwrap().verdict,
        crate::verdict::Outcome::Fail
    );
    assert_eq!(sim.run_status("r"), RunStatus::Running);
    assert_eq!(sim.dispatch(8), ["r/fix"]);
    sim.finish("r", "fix", done(1));
    assert_eq!(sim.dispatch(8), ["r/verify"]);
    let evs = sim.finish_answer("r", "04_verify", "PASS\nall green");
    assert_eq!(names(&evs), ["task.completed verify", "run.completed"]);
    assert_eq!(
        super::run_verdict(&sim.st.runs["r"]),
        Some(crate::verdict::Outcome::Pass)
    );
    sim.replays_equal();
}

/// Issue 30: a fix task gets the skills a task of its role gets, as a planned task of that
/// role has them (the default team's fixer is its executor), across replay.
#[test]
fn a_fix_task_gets_the_skills_of_its_role() {
    let mut sim = Sim::new();
    sim.up_to_verify();
    let planned = sim.task("r", "execute").plan.skills.clone();
    let names_of = |s: &[crate::skills::PlannedSkill]| -> Vec<String> {
        s.iter().map(|k| k.name.clone()).collect()
    };
    assert_eq!(
        names_of(&planned),
        ["safe-bash", "verification-before-done"],
        "the executor's defaults"
    );
    sim.finish_answer("r", "04_verify", FAIL_ONE);
    let fix = sim.st.runs["r"].task("_fix-04_verify-1").unwrap();
    assert_eq!(fix.plan.role, "executor");
    assert_eq!(
        fix.plan.skills, planned,
        "the fixer role's skills, with their text"
    );
    assert!(fix.plan.skills.iter().all(|k| !k.text.is_empty()));
    sim.replays_equal();
}

#[test]
fn spent_rounds_block_the_run_and_resume_grants_one_more() {
    let mut sim = Sim::new();
    sim.up_to_verify();
    for round in 1..=2 {
        sim.finish_answer("r", "04_verify", FAIL_ONE);
        assert_eq!(sim.dispatch(8), ["r/fix"]);
        sim.finish_answer("r", &format!("_fix-04_verify-{round}"), "fixed");
        assert_eq!(sim.dispatch(8), ["r/verify"]);
    }
    let evs = sim.finish_answer("r", "04_verify", FAIL_ONE);
    assert_eq!(
        names(&evs),
        ["task.needs_attention verify", "run.blocked"],
        "two rounds spent"
    );
    assert_eq!(sim.run_status("r"), RunStatus::Blocked);
    let reason = sim.st.runs["r"].reason.clone().unwrap();
    assert!(reason.contains("add() is wrong"), "{reason}");
    assert_eq!(sim.st.runs["r"].tasks.len(), 6);
    // Resume: one more round, not the judge again.
    let r = sim.st.resume_run("r", None).map(|(ps, _)| ps);
    let evs = sim.control("r", r).unwrap();
    assert_eq!(names(&evs), ["run.resumed", "task.fix_added verify"]);
    assert_eq!(sim.dispatch(8), ["r/fix"]);
    sim.finish_answer("r", "_fix-04_verify-3", "fixed");
    assert_eq!(sim.dispatch(8), ["r/verify"]);
    let evs = sim.finish_answer("r", "04_verify", FAIL_ONE);
    assert_eq!(names(&evs), ["task.needs_attention verify", "run.blocked"]);
    sim.replays_equal();
}

#[test]
fn a_missing_verdict_gets_one_repair_then_needs_attention() {
    let mut sim = Sim::new();
    sim.up_to_verify();
    let evs = sim.finish_answer("r", "04_verify", "I looked at it.");
    assert_eq!(names(&evs), ["task.retrying verify"]);
    assert!(sim
        .task("r", "verify")
        .verdict_repair()
        .unwrap()
        .contains("no verdict"));
    assert_eq!(sim.dispatch(8), ["r/verify"]);
    let evs = sim.finish_answer("r", "04_verify", "```json\n{\"verdict\": \"meh\"}\n```");
    assert_eq!(names(&evs), ["task.needs_attention verify", "run.blocked"]);
}

#[test]
fn a_failed_integration_check_on_a_judge_starts_the_loop() {
    let mut sim = Sim::new();
    sim.up_to_verify();
    let id = sim.tid("r", "verify");
    let attempt = sim.task("r", "verify").attempts;
    let ps = sim.st.finish_fan_out(
        "r",
        &id,
        attempt,
        AttemptResult::Failed {
            usage: used(1),
            model: None,
            artifacts: vec![],
            error: "`cargo test` exited 101: test add ... FAILED".into(),
            retryable: true,
            reason: crate::checks::VERIFY_FAILED.into(),
        },
        None,
        sim.now,
        &sim.retry,
        sim.jitter,
    );
    let evs = sim.emit(ps);
    assert_eq!(
        names(&evs),
        ["task.completed verify", "task.fix_added verify"]
    );
    assert!(sim.st.runs["r"]
        .task("_fix-04_verify-1")
        .unwrap()
        .plan
        .task_template
        .contains("exited 101"));
}

#[test]
fn the_review_team_s_verdict_is_its_product() {
    let mut sim = Sim::new();
    sim.create("r", team_spec("review"));
    assert_eq!(sim.dispatch(8), ["r/explore"]);
    sim.finish("r", "explore", done(1));
    assert_eq!(sim.dispatch(8), ["r/code-review", "r/security-review"]);
    sim.finish_answer(
        "r",
        "02_code-review",
        "Verdict: request changes\nFindings: x",
    );
    sim.finish_answer("r", "03_security-review", "Verdict: PASS");
    assert_eq!(sim.dispatch(8), ["r/verify"]);
    let evs = sim.finish_answer("r", "04_verify", "PASS");
    assert_eq!(names(&evs), ["task.completed verify", "run.completed"]);
    assert_eq!(
        super::run_verdict(&sim.st.runs["r"]),
        Some(crate::verdict::Outcome::ChangesRequested)
    );
}

/// Issue 29 item 1: whatever a decider put in an event's message, reason, error or question,
/// the stamped event keeps at most `text::MAX_REASON_CHARS` of it.
#[test]
fn stamped_events_keep_texts_bounded() {
    use super::event::{AttemptEnd, EventBody, Pending};
    let long = "p".repeat(1 << 20);
    let st = State::default();
    let bodies = vec![
        EventBody::TaskNeedsAttention {
            end: AttemptEnd {
                error: Some(long.clone()),
                ..Default::default()
            },
            reason: long.clone(),
            verdict: None,
        },
        EventBody::RunBlocked {
            reason: long.clone(),
        },
        EventBody::TaskWaiting {
            end: AttemptEnd::default(),
            question: long.clone(),
            session: None,
        },
    ];
    for body in bodies {
        let p = Pending::task("r", "t", body).with_message(long.clone());
        let ev = st.stamp(p, 1, chrono::Utc::now());
        let json = serde_json::to_string(&ev).unwrap();
        assert!(
            json.len() < 4 * crate::text::MAX_REASON_CHARS,
            "{}",
            json.len()
        );
        assert!(json.contains("more characters]"));
    }
}

/// The names a stream gives (its model, the tool in use) are kept bounded in every event that
/// carries one, as texts are.
#[test]
fn stamped_events_keep_names_bounded() {
    use super::event::{AttemptEnd, EventBody, Pending};
    let long = "m".repeat(1 << 16);
    let st = State::default();
    let end = || AttemptEnd {
        model: Some(long.clone()),
        ..Default::default()
    };
    let bodies = vec![
        EventBody::TaskFailed { end: end() },
        EventBody::TaskStarted {
            attempt: 1,
            runtime: "r".into(),
            model: Some(long.clone()),
            artifacts: vec![],
        },
        EventBody::TaskProgress {
            attempt: 1,
            usage: Default::default(),
            current_tool: Some(long.clone()),
        },
        EventBody::TaskCandidateChosen {
            end: Some(end()),
            commit: None,
            choice: super::candidates::Choice {
                index: 1,
                candidate: "c".into(),
                by: "judge".into(),
                reason: String::new(),
            },
            verdict: None,
        },
    ];
    for body in bodies {
        let ev = st.stamp(Pending::task("r", "t", body), 1, chrono::Utc::now());
        let json = serde_json::to_string(&ev).unwrap();
        assert!(
            json.len() < 4 * crate::text::MAX_NAME_CHARS,
            "{}: {}",
            ev.body.type_name(),
            json.len()
        );
    }
}

fn resolver_role() -> crate::fanout::RoleTemplate {
    crate::fanout::RoleTemplate {
        role: "resolver".into(),
        agent: "resolver".into(),
        model: None,
        system_prompt: "You resolve merge conflicts.".into(),
        system_prompt_mode: SystemPromptMode::Replace,
        tools: vec!["read".into(), "edit".into(), "bash".into()].into(),
        thinking: None,
        effort: None,
        fallback_models: vec![],
        writes: true,
        candidates: None,
        skills: Default::default(),
        resources: Default::default(),
        network: None,
        allow_no_change: false,
    }
}

#[test]
fn a_conflict_adds_a_resolve_task_once_and_the_needing_task_waits_for_it() {
    let mut sim = Sim::new();
    let steps: &[Step] = &[("a", &[], true), ("b", &[], true), ("c", &["a", "b"], true)];
    let mut s = spec(steps);
    let titles = ["add dot-case", "add path-case"];
    s.tasks = s
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = PlannedTask::clone(&t);
            t.title = titles.get(i).map(|x| x.to_string());
            std::sync::Arc::new(t)
        })
        .collect();
    sim.create("r", s);
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    sim.finish("r", "a", done(1));
    sim.finish("r", "b", done(1));
    assert_eq!(sim.dispatch(8), ["r/c"]);
    let c = sim.tid("r", "c");
    let attempt = sim.task("r", "c").attempts;
    let conflict = super::resolve::Conflict::bounded(
        &["src/lib.rs".into()],
        &[sim.tid("r", "a"), sim.tid("r", "b")],
    );
    let ps = sim
        .st
        .resolve_conflict("r", &c, attempt, &conflict, &resolver_role());
    let evs = sim.emit(ps);
    assert_eq!(names(&evs), ["task.resolve_added c"]);
    assert_eq!(
        evs[0].message.as_deref(),
        Some("03_c: conflict in src/lib.rs (01_a × 02_b) → _resolve-03_c-1")
    );
    // The same report again (a duplicate) adds nothing: the attempt is no longer running.
    assert!(sim
        .st
        .resolve_conflict("r", &c, attempt, &conflict, &resolver_role())
        .is_empty());
    let r = sim.st.runs["r"].task("_resolve-03_c-1").unwrap();
    assert_eq!(r.plan.role, "resolver");
    assert_eq!(r.plan.depends_on.join(","), "01_a,02_b");
    let text = &r.plan.task_template;
    assert!(text.contains("src/lib.rs"), "{text}");
    // The fake agent knows a resolver by this phrase (crew-fake-agent `RESOLVE_MARK`).
    assert!(text.contains("remove every conflict marker"), "{text}");
    assert!(
        text.contains("add dot-case") && text.contains("do a for {goal}"),
        "{text}"
    );
    assert!(
        text.contains("add path-case") && text.contains("do b for {goal}"),
        "{text}"
    );
    assert_eq!(sim.status("r", "c"), TaskStatus::Queued);
    assert_eq!(
        sim.task("r", "c").plan.depends_on.join(","),
        "01_a,02_b,_resolve-03_c-1"
    );
    // The attempt that found the conflict ran no agent: it is given back.
    assert_eq!(sim.task("r", "c").attempts, attempt - 1);
    assert_eq!(sim.dispatch(8), ["r/resolve"]);
    sim.finish("r", "resolve", done(1));
    assert_eq!(sim.dispatch(8), ["r/c"]);
    assert_eq!(
        sim.task("r", "c").attempts,
        1,
        "its first attempt that runs"
    );
    // A conflict again after a resolution: not another resolver (the manual way).
    let attempt = sim.task("r", "c").attempts;
    assert!(sim
        .st
        .resolve_conflict("r", &c, attempt, &conflict, &resolver_role())
        .is_empty());
    let evs = sim.finish("r", "c", done(1));
    assert_eq!(
        names(&evs).last().map(String::as_str),
        Some("run.completed")
    );
    // Replayed (a restart after kill -9): the resolve task is there once.
    sim.replays_equal();
    let mut fresh = State::default();
    for ev in sim.log.iter().chain(
        sim.log
            .iter()
            .filter(|e| e.body.type_name() == "task.resolve_added"),
    ) {
        fresh.apply(ev);
    }
    let n = fresh.runs["r"]
        .tasks
        .iter()
        .filter(|t| super::resolve::is_resolve(&t.plan))
        .count();
    assert_eq!(n, 1);
    assert_eq!(
        fresh.runs["r"].task(&c).unwrap().attempts,
        1,
        "a repeated task.resolve_added gives nothing back twice"
    );
}

#[test]
fn a_conflict_of_the_leaves_adds_a_resolve_task_that_becomes_the_only_leaf() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], true), ("b", &[], true)]));
    assert_eq!(sim.dispatch(8), ["r/a", "r/b"]);
    sim.finish("r", "a", done(1));
    let conflict = super::resolve::Conflict::bounded(
        &["src/lib.rs".into()],
        &[sim.tid("r", "a"), sim.tid("r", "b")],
    );
    let (p, id) =
        super::resolve::resolve_added(&sim.st.runs["r"], None, &conflict, &resolver_role())
            .unwrap();
    assert_eq!(id, "_resolve-r-1");
    let evs = sim.emit(vec![p]);
    assert_eq!(names(&evs), ["task.resolve_added"]);
    assert_eq!(
        evs[0].message.as_deref(),
        Some("integration: conflict in src/lib.rs (01_a × 02_b) → _resolve-r-1")
    );
    let run = &sim.st.runs["r"];
    assert_eq!(
        run.task(&id).unwrap().plan.depends_on.join(","),
        "01_a,02_b"
    );
    let leaves: Vec<&str> = run
        .tasks
        .iter()
        .filter(|t| {
            !run.tasks
                .iter()
                .any(|o| o.plan.depends_on.contains(&t.plan.id))
        })
        .map(|t| t.plan.id.as_str())
        .collect();
    assert_eq!(leaves, [id.as_str()]);
    sim.finish("r", "b", done(1));
    assert_eq!(sim.dispatch(8), ["r/resolve"]);
    let evs = sim.finish("r", "resolve", done(1));
    assert_eq!(
        names(&evs).last().map(String::as_str),
        Some("run.completed")
    );
    sim.replays_equal();
}

fn worktree_spec(steps: &[Step], conflicts: super::ConflictMode) -> RunSpec {
    let mut s = spec(steps);
    s.workspace = Some(super::WorkspaceSpec {
        repo: "/src/app".into(),
        subdir: String::new(),
        base: "b".repeat(40),
        head: Some("b".repeat(40)),
        dirty: false,
        branch: Some("main".into()),
        conflicts,
        resolver: Some(std::sync::Arc::new(resolver_role())),
    });
    s
}

/// The run's mode decides: `manual` adds nothing (the report's manual message stands);
/// `agent` adds the resolve task, for a task and for the integration (once).
#[test]
fn the_conflicts_mode_decides_whether_a_resolver_is_added() {
    let steps: &[Step] = &[("a", &[], true), ("b", &[], true), ("c", &["a", "b"], true)];
    let conflict =
        super::resolve::Conflict::bounded(&["x".into()], &["01_a".into(), "02_b".into()]);
    for (mode, added) in [
        (super::ConflictMode::Manual, false),
        (super::ConflictMode::Agent, true),
    ] {
        let mut sim = Sim::new();
        sim.create("r", worktree_spec(steps, mode));
        sim.dispatch(8);
        sim.finish("r", "a", done(1));
        sim.finish("r", "b", done(1));
        assert_eq!(sim.dispatch(8), ["r/c"]);
        let c = sim.tid("r", "c");
        let attempt = sim.task("r", "c").attempts;
        let ps = sim.st.on_conflict("r", Some(&c), attempt, &conflict);
        assert_eq!(!ps.is_empty(), added, "{mode:?}");
    }
    // The integration: its resolve task once; a conflict again goes the manual way.
    let mut sim = Sim::new();
    sim.create(
        "r",
        worktree_spec(
            &[("a", &[], true), ("b", &[], true)],
            super::ConflictMode::Agent,
        ),
    );
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    sim.finish("r", "b", done(1));
    let evs = sim.emit(sim.st.on_conflict("r", None, 0, &conflict));
    assert_eq!(names(&evs), ["task.resolve_added"]);
    assert_eq!(sim.dispatch(8), ["r/resolve"]);
    sim.finish("r", "resolve", done(1));
    assert!(sim.st.on_conflict("r", None, 0, &conflict).is_empty());
}

/// A resolver whose last attempt fails leaves the conflict to the user: the run waits with
/// the way to resolve on its branch, resumable, instead of failing.
#[test]
fn a_resolver_that_gives_up_needs_attention_with_the_manual_way() {
    let steps: &[Step] = &[("a", &[], true), ("b", &[], true), ("c", &["a", "b"], true)];
    let mut sim = Sim::new();
    sim.create("r", worktree_spec(steps, super::ConflictMode::Agent));
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    sim.finish("r", "b", done(1));
    sim.dispatch(8);
    let c = sim.tid("r", "c");
    let attempt = sim.task("r", "c").attempts;
    let conflict =
        super::resolve::Conflict::bounded(&["x".into()], &["01_a".into(), "02_b".into()]);
    let ps = sim.st.on_conflict("r", Some(&c), attempt, &conflict);
    sim.emit(ps);
    assert_eq!(sim.dispatch(8), ["r/resolve"]);
    let evs = sim.finish("r", "resolve", failed(false, 1));
    assert_eq!(
        names(&evs),
        ["task.needs_attention resolve-03_c-1", "run.blocked"]
    );
    let t = sim.task("r", "resolve");
    assert_eq!(t.status, TaskStatus::NeedsAttention);
    let why = t.error.as_deref().unwrap_or_default();
    // The way out first (views show a reason's first paragraph), what went wrong after it.
    assert!(
        why.starts_with("The resolver could not resolve the conflict; resolve it by hand.")
            && why.contains("git -C /src/app worktree add /src/app-resolve-r._resolve-03_c-1 crew/tasks/r/_resolve-03_c-1")
            && why.contains("then: crewctl resume r\n")
            && why.ends_with("Its last attempt: boom"),
        "{why}"
    );
    assert_eq!(sim.status("r", "c"), TaskStatus::Queued);
    // No attempt of the needing task ran an agent: status shows none.
    assert_eq!(sim.task("r", "c").attempts, 0);
    sim.replays_equal();
}

/// The resolver's one retry holds even when the run allows one attempt per task.
#[test]
fn a_resolver_is_retried_once_even_with_max_attempts_one() {
    let steps: &[Step] = &[("a", &[], true), ("b", &[], true), ("c", &["a", "b"], true)];
    let mut sim = Sim::new();
    let mut s = worktree_spec(steps, super::ConflictMode::Agent);
    s.max_attempts = 1;
    sim.create("r", s);
    sim.dispatch(8);
    sim.finish("r", "a", done(1));
    sim.finish("r", "b", done(1));
    sim.dispatch(8);
    let c = sim.tid("r", "c");
    let attempt = sim.task("r", "c").attempts;
    let conflict =
        super::resolve::Conflict::bounded(&["x".into()], &["01_a".into(), "02_b".into()]);
    let ps = sim.st.on_conflict("r", Some(&c), attempt, &conflict);
    sim.emit(ps);
    assert_eq!(sim.dispatch(8), ["r/resolve"]);
    let evs = sim.finish("r", "resolve", failed(true, 1));
    assert_eq!(names(&evs), ["task.retrying resolve-03_c-1"]);
}

/// A fan-out task the planner named `resolve` (its step id is its name) is an ordinary task,
/// not one crew added to resolve a conflict.
#[test]
fn a_fan_out_task_named_resolve_is_not_a_resolver() {
    let mut t = (*tasks(&[("resolve", &[], true)])[0]).clone();
    t.step_id = "resolve".into();
    t.added_by = Some(crate::ids::SafeId::new("01_plan".to_string()).unwrap());
    assert!(!super::resolve::is_resolve(&t), "{}", t.id);
    t.id = crate::ids::SafeId::new(super::resolve::resolve_task_id("03_c", 1)).unwrap();
    assert!(super::resolve::is_resolve(&t));
}

/// The tasks a pick re-queues: every dependent of the selector, also through tasks a fan-out
/// block listed after the ones that depend on them (plan order need not be topological).
#[test]
fn a_selectors_dependents_are_found_through_forward_references() {
    let mut sim = Sim::new();
    sim.create(
        "r",
        spec(&[
            ("p", &["q"], true),
            ("q", &["s"], true),
            ("s", &[], true),
            ("other", &[], true),
        ]),
    );
    let run = &sim.st.runs["r"];
    let s = sim.tid("r", "s");
    let found = super::candidates::dependents(run, &s);
    assert_eq!(found, [sim.tid("r", "p"), sim.tid("r", "q")]);
}

/// A start the journal could not make durable ran no worker: it is retried and never counts
/// against the task's attempts, however often it happens (a full disk for a while).
#[test]
fn a_start_that_was_not_journaled_is_not_an_attempt() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    let not_journaled = || AttemptResult::Failed {
        usage: used(0),
        model: None,
        artifacts: vec![],
        error: "the task start could not be journaled: disk full".into(),
        retryable: true,
        reason: super::FailReason::NotJournaled.as_str().into(),
    };
    for n in 1..=5 {
        assert_eq!(sim.dispatch(8), ["r/a"], "start {n}");
        let evs = sim.finish("r", "a", not_journaled());
        assert_eq!(names(&evs), ["task.retrying a"], "start {n}");
        assert_eq!(sim.task("r", "a").attempts_in_window, 0);
        sim.advance(60_000);
    }
    assert_eq!(sim.dispatch(8), ["r/a"]);
    assert_eq!(
        names(&sim.finish("r", "a", done(1))),
        ["task.completed a", "run.completed"]
    );
}

/// The attempt that continues an answer is cut short by a crash of the daemon: the next one
/// continues the same session with the answer again — it started over with a bare `Answer:`
/// line and the question was gone.
#[test]
fn a_crash_while_an_answer_is_continued_keeps_the_session_for_the_next_attempt() {
    let mut sim = Sim::new();
    sim.create("r", spec(&[("a", &[], false)]));
    sim.dispatch(8);
    let mut ask = asked("which database?");
    if let AttemptResult::Asked { session, .. } = &mut ask {
        *session = Some("/runs/r/sessions/a.attempt-1.jsonl".into());
    }
    sim.finish("r", "a", ask);
    let id = sim.tid("r", "a");
    let r = sim.st.respond("r", &id, "postgres");
    sim.control("r", r).unwrap();
    assert_eq!(sim.dispatch(8), ["r/a"]);
    let requeued = sim.st.requeue_orphans(sim.now);
    sim.emit(requeued);
    assert_eq!(
        sim.task("r", "a").session(),
        Some("/runs/r/sessions/a.attempt-1.jsonl")
    );
}
