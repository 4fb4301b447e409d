//! Candidates (issue 36): a step tries N solutions at once and keeps the one that proves best.
//!
//! **Shape.** A step asking for candidates (`candidates: N` or a list of `runtime/model`, on
//! the step, its team role, or the run) is planned as N *candidate tasks* `_cand-<T>-<k>`
//! (crew's reserved ids, `ids::reserved`), each a copy of the step's task with its own
//! worktree from the same start commit (they have the step's dependencies), and the step's
//! own task `T` becomes the *selector*: it depends on the candidates, and its result is the
//! chosen candidate's commit, so dependents go on from it unchanged. Candidates are ordinary
//! tasks: concurrency, budget, usage, retries of a crashed agent, recovery after `kill -9`
//! and result reuse are theirs as for any task. Everything is in the frozen plan
//! (`run.created`), so nothing is added at run time but the one `task.candidate_chosen`.
//!
//! **Evidence.** A candidate's checks (verification commands, scope, no-change guard) do not
//! fail it: it completes with its commit and the failing checks recorded
//! (`TaskState::failed_checks`), and a candidate with a failing check is out. Among those
//! left, `select` decides: `smallest` (fewest changed lines), `first` (the first to pass; the
//! others are cancelled, their trees kept), or `judge` (the selector runs as the team's judging
//! role, gets every passing candidate's diff and checks, and answers a verdict with `choice`).
//! One passing candidate is chosen without a judge. No candidate passing adds one fix task
//! (`task.fix_added`) that starts from the candidate with the fewest failing checks, told every
//! candidate's findings; its result is then chosen.
//!
//! Pure: the daemon runs the tasks and reads the answers; this module decides.

use super::event::{AttemptEnd, EventBody, Pending};
use super::types::{RunState, TaskState, TaskStatus};
use crate::fanout::RoleTemplate;
use crate::ids::reserved::{task_id, TaskKind};
use crate::ids::{ArtifactName, SafeId};
use crate::plan::PlannedTask;
use crate::verdict::{Finding, Outcome, Verdict};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// At most this many candidates per step.
pub const MAX_CANDIDATES: u32 = 8;
/// A candidate's failing checks are kept this long each (they go into prompts and events).
pub const MAX_CHECK_CHARS: usize = 2000;
/// The heading of the selection section of a judging selector's prompt (the fake agent reads
/// it to answer a `choice`).
pub const PROMPT_HEADING: &str = "## The candidates";

/// How the selector chooses among the candidates that passed their checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    Smallest,
    First,
    Judge,
}

impl Select {
    pub fn parse(s: &str) -> Option<Select> {
        match s.trim() {
            "smallest" => Some(Select::Smallest),
            "first" => Some(Select::First),
            "judge" => Some(Select::Judge),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Select::Smallest => "smallest",
            Select::First => "first",
            Select::Judge => "judge",
        }
    }
}

/// One candidate as asked: a runtime (`None`: the run's) and a model (`None`: the step's, or
/// the runtime's default when the runtime is named).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Contender {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Contender {
    /// `claude/<model>`, `codex`, `opencode/<provider>/<model>`: split on the first `/` only,
    /// since opencode's models contain one.
    pub fn parse(s: &str) -> Option<Contender> {
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        let (runtime, model) = match s.split_once('/') {
            Some((r, m)) => (r.trim(), Some(m.trim()).filter(|m| !m.is_empty())),
            None => (s, None),
        };
        (!runtime.is_empty()).then(|| Contender {
            runtime: Some(runtime.to_string()),
            model: model.map(str::to_string),
        })
    }

    /// `runtime/model` as the user wrote it (for messages and prompts).
    pub fn label(&self) -> String {
        match (&self.runtime, &self.model) {
            (Some(r), Some(m)) => format!("{r}/{m}"),
            (Some(r), None) => r.clone(),
            (None, Some(m)) => m.clone(),
            (None, None) => String::new(),
        }
    }
}

/// What a step, a team role or the run asks for: `candidates: N` or a list of contenders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Ask {
    Count(u32),
    List(Vec<String>),
}

impl Ask {
    /// The contenders, or why the ask is refused (more than [`MAX_CANDIDATES`], an empty
    /// entry). `Ok(empty)`: nothing to do (`candidates: 1` or `0`).
    pub fn contenders(&self) -> Result<Vec<Contender>, String> {
        let list = match self {
            Ask::Count(n) if *n <= 1 => return Ok(vec![]),
            Ask::Count(n) if *n > MAX_CANDIDATES => {
                return Err(format!("at most {MAX_CANDIDATES} candidates, got {n}"))
            }
            Ask::Count(n) => (0..*n).map(|_| Contender::default()).collect(),
            Ask::List(l) if l.len() > MAX_CANDIDATES as usize => {
                return Err(format!(
                    "at most {MAX_CANDIDATES} candidates, got {}",
                    l.len()
                ))
            }
            Ask::List(l) => l
                .iter()
                .map(|s| {
                    Contender::parse(s).ok_or_else(|| {
                        format!("`{}` is not `runtime` or `runtime/model`", cut(s, 80))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(if list.len() <= 1 && matches!(self, Ask::Count(_)) {
            vec![]
        } else {
            list
        })
    }
}

/// What a planned task is to candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Candidacy {
    /// Asked for at plan time, not yet split ([`expand`] turns it into the two below).
    #[serde(rename_all = "camelCase")]
    Asked {
        contenders: Vec<Contender>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        select: Option<Select>,
        /// The role that judges when `select` is `judge` (the step's `judge:`, else the team's
        /// reviewer, else its verifier).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        judge: Option<Arc<RoleTemplate>>,
    },
    /// Candidate `index` (1-based) of the step task `of`.
    #[serde(rename_all = "camelCase")]
    Candidate {
        of: SafeId,
        index: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    },
    /// The task crew added to fix the best candidate when none passed its checks: it goes on
    /// from `candidate`'s work, on that candidate's runtime.
    #[serde(rename_all = "camelCase")]
    Fix {
        candidate: SafeId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    },
    /// The step's task: chooses among `candidates`; `inputs` are the step's own dependencies
    /// (its start commit is theirs, never a merge of the candidates).
    #[serde(rename_all = "camelCase")]
    Selector {
        select: Select,
        candidates: Vec<SafeId>,
        inputs: Vec<SafeId>,
    },
}

/// What one step asks of candidates, read at plan time.
#[derive(Debug, Clone, Default)]
pub struct StepAsk {
    pub ask: Option<Ask>,
    pub select: Option<Select>,
    pub judge: Option<String>,
}

/// The role that chooses among candidates: `asked` (the step's `judge:`), else the team's
/// reviewer, else its verifier (by role name, then by agent).
pub fn judge_template(roles: &[RoleTemplate], asked: Option<&str>) -> Option<Arc<RoleTemplate>> {
    let by = |name: &str| {
        roles
            .iter()
            .find(|r| r.role == name)
            .or_else(|| roles.iter().find(|r| r.agent == name))
    };
    let found = match asked {
        Some(a) => by(a),
        None => by("reviewer").or_else(|| by("verifier")),
    };
    found.map(|r| Arc::new(r.clone()))
}

/// Mark every task whose step (or role) asked for candidates (`Candidacy::Asked`); [`expand`]
/// splits them once the run's own ask is known.
pub fn attach_asks(tasks: &mut [PlannedTask], asks: &[StepAsk], roles: &[RoleTemplate]) {
    for (t, a) in tasks.iter_mut().zip(asks) {
        let Some(ask) = &a.ask else { continue };
        let Ok(contenders) = ask.contenders() else {
            continue;
        };
        if contenders.is_empty() {
            continue;
        }
        t.candidates = Some(Arc::new(Candidacy::Asked {
            contenders,
            select: a.select,
            judge: judge_template(roles, a.judge.as_deref()),
        }));
    }
}

/// The choice a selector made, as `task.candidate_chosen` carries it and the task keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    /// 1-based candidate index; 0 for the fix task's result.
    pub index: u32,
    pub candidate: String,
    /// `smallest`, `first`, `judge`, `only` (the one that passed), `fix`, `person`.
    pub by: String,
    pub reason: String,
}

/// `Choice::by` of a person's pick.
pub const BY_PERSON: &str = "person";

/// The runtime a task runs on when it is not the run's (a candidate of another runtime).
pub fn runtime_of(plan: &PlannedTask) -> Option<&str> {
    match plan.candidates.as_deref() {
        Some(Candidacy::Candidate { runtime, .. } | Candidacy::Fix { runtime, .. }) => {
            runtime.as_deref()
        }
        _ => None,
    }
}

/// The runtime `t` runs on: its own (a contender's, or the fix of one), else the run's.
pub fn task_runtime<'a>(run: &'a RunState, t: &'a TaskState) -> &'a str {
    runtime_of(&t.plan).unwrap_or(&run.spec.runtime)
}

/// `(of, index)` of a candidate task.
pub fn candidate_of(plan: &PlannedTask) -> Option<(&SafeId, u32)> {
    match plan.candidates.as_deref() {
        Some(Candidacy::Candidate { of, index, .. }) => Some((of, *index)),
        _ => None,
    }
}

/// `(select, candidates, inputs)` of a selector.
pub fn selector(plan: &PlannedTask) -> Option<(Select, &[SafeId], &[SafeId])> {
    match plan.candidates.as_deref() {
        Some(Candidacy::Selector {
            select,
            candidates,
            inputs,
        }) => Some((*select, candidates, inputs)),
        _ => None,
    }
}

/// The artifact a task writes its final answer to: its `output`, except a selector's. A
/// selector's `output` names the step's artifact, whose content is the chosen candidate's
/// ([`output_source`]); a judging selector's own answer is its result only.
pub fn own_output(plan: &PlannedTask) -> Option<&ArtifactName> {
    match plan.candidates.as_deref() {
        Some(Candidacy::Selector { .. }) => None,
        _ => plan.output.as_ref(),
    }
}

/// Where the step artifact `name` is read from: the chosen candidate's own artifact (or the
/// fix task's, when no candidate passed) when `name` is a selector's output and its choice
/// is made; `None`: `name` itself. Derived from the journaled choice, so a `team.pick`
/// changes what a dependent started afterwards reads, and replay gives the same answer.
pub fn output_source(run: &RunState, name: &str) -> Option<ArtifactName> {
    let sel = run
        .tasks
        .iter()
        .find(|t| selector(&t.plan).is_some() && t.plan.output.as_deref() == Some(name))?;
    let chosen = run.task(&sel.choice()?.candidate)?;
    chosen.plan.output.clone()
}

/// A task's usage as its step counts it: a selector's own (its judge's) plus every one of its
/// candidates'; any other task's own. The run's usage still sums each task once.
pub fn step_usage(run: &RunState, t: &TaskState) -> crate::usage::Usage {
    let mut u = t.usage();
    if let Some((_, ids, _)) = selector(&t.plan) {
        for (_, c) in candidates_of(run, ids) {
            u.add(&c.usage());
        }
    }
    u
}

/// Whether `dep` is one of selector `t`'s candidates (its workspace does not start from them).
pub fn is_own_candidate(t: &PlannedTask, dep: &str) -> bool {
    selector(t).is_some_and(|(_, c, _)| c.iter().any(|c| c.as_str() == dep))
}

/// A candidate that no longer counts for the run's outcome: it ended (passed or not; its
/// selector decides) or was set aside when another was chosen first.
pub fn set_aside(t: &TaskState) -> bool {
    candidate_of(&t.plan).is_some()
        && !matches!(
            t.status,
            TaskStatus::Queued | TaskStatus::Running | TaskStatus::Waiting
        )
}

/// A candidate that completed and whose checks all passed.
pub fn passed(t: &TaskState) -> bool {
    t.status == TaskStatus::Completed && t.failed_checks().is_empty()
}

/// The failing checks of a completed candidate, from its verification outcomes, bounded.
pub fn failing(verification: &[crate::checks::VerifyOutcome]) -> Vec<String> {
    verification
        .iter()
        .filter(|v| !v.passed())
        .map(|v| {
            let how = match (v.timed_out, v.exit_code) {
                (true, _) => "timed out".to_string(),
                (false, Some(c)) => format!("exited with {c}"),
                (false, None) => "was killed".to_string(),
            };
            let tail = v.tail.trim();
            let said = if tail.is_empty() {
                format!("`{}` {how}", v.command)
            } else {
                format!("`{}` {how}: {tail}", v.command)
            };
            cut(&said, MAX_CHECK_CHARS)
        })
        .collect()
}

fn cut(s: &str, max: usize) -> String {
    crate::text::bound(s.to_string(), max)
}

/// The run's own ask (`--candidates`, `--select`) and the team's judging role.
#[derive(Debug, Clone, Copy)]
pub struct RunAsk<'a> {
    pub contenders: &'a [Contender],
    pub select: Option<Select>,
    pub judge: Option<&'a Arc<RoleTemplate>>,
}

/// The run's own ask as a fan-out step keeps it (`Expansion::candidates`): the tasks the step
/// adds at run time are split as the planned ones were, inside the one `task.expanded`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAskFrozen {
    pub contenders: Vec<Contender>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Select>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<Arc<RoleTemplate>>,
}

impl RunAskFrozen {
    pub fn of(a: RunAsk<'_>) -> RunAskFrozen {
        RunAskFrozen {
            contenders: a.contenders.to_vec(),
            select: a.select,
            judge: a.judge.cloned(),
        }
    }
    pub fn ask(&self) -> RunAsk<'_> {
        RunAsk {
            contenders: &self.contenders,
            select: self.select,
            judge: self.judge.as_ref(),
        }
    }
}

/// The tasks a fan-out step's answer adds, split into candidates and selectors as the planned
/// tasks were: a role's `candidates=N` first, else the run's own ask, writing tasks only.
/// Deterministic in its input, and its output is what `task.expanded` carries, so replay and
/// `kill -9` see the same candidates.
pub fn for_added(mut tasks: Vec<PlannedTask>, exp: &crate::fanout::Expansion) -> Vec<PlannedTask> {
    let asks: Vec<StepAsk> = tasks
        .iter()
        .map(|t| StepAsk {
            ask: exp
                .roles
                .iter()
                .find(|r| r.role == t.role)
                .and_then(|r| r.candidates)
                .map(Ask::Count),
            select: None,
            judge: None,
        })
        .collect();
    attach_asks(&mut tasks, &asks, &exp.roles);
    expand(tasks, exp.candidates.as_ref().map(RunAskFrozen::ask))
}

/// How many agents a task of `role` that a fan-out step adds starts: one per candidate when
/// [`for_added`] splits it (the role's `candidates=N`, else the run's ask; writing roles
/// only), else one. Counted without splitting, for the step's cap (`fanout::validate`).
pub fn runs_of_added(role: &RoleTemplate, exp: &crate::fanout::Expansion) -> u32 {
    if !role.writes {
        return 1;
    }
    let own = role
        .candidates
        .and_then(|n| Ask::Count(n).contenders().ok())
        .filter(|c| !c.is_empty())
        .map(|c| c.len());
    let n = own
        .or_else(|| exp.candidates.as_ref().map(|c| c.contenders.len()))
        .unwrap_or(1);
    if n < 2 {
        1
    } else {
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

/// Whether tasks a fan-out step adds may get candidates (the run's ask, or a writing role's).
pub fn added_may_have(exp: &crate::fanout::Expansion) -> bool {
    exp.candidates
        .as_ref()
        .is_some_and(|c| c.contenders.len() >= 2)
        || exp
            .roles
            .iter()
            .any(|r| r.writes && r.candidates.is_some_and(|n| n >= 2))
}

/// What `team.pick` did: the chosen candidate's id and the dependents queued again.
pub type Picked = (String, Vec<String>);

/// Split every task that asked for candidates: the candidates come before it in the plan, and
/// it becomes their selector. `run_ask` (the run's `--candidates`) applies to every writing
/// task that asked nothing itself. Only writing tasks can have candidates (what a read-only
/// task produces is no commit to choose from); fan-out steps cannot (their product is tasks).
pub fn expand(tasks: Vec<PlannedTask>, run_ask: Option<RunAsk<'_>>) -> Vec<PlannedTask> {
    let mut out = Vec::with_capacity(tasks.len());
    for mut t in tasks {
        let asked = match t.candidates.as_deref() {
            Some(Candidacy::Asked {
                contenders,
                select,
                judge,
            }) => Some((contenders.clone(), *select, judge.clone())),
            Some(_) => None,
            None => run_ask.map(|a| (a.contenders.to_vec(), a.select, a.judge.cloned())),
        };
        let Some((contenders, select, judge)) = asked else {
            out.push(t);
            continue;
        };
        if contenders.len() < 2 || !t.writes || t.expands.is_some() {
            t.candidates = None;
            out.push(t);
            continue;
        }
        let select = match (select, &judge) {
            (Some(Select::Judge), None) => Select::Smallest,
            (Some(s), _) => s,
            (None, Some(_)) => Select::Judge,
            (None, None) => Select::Smallest,
        };
        let mut ids = Vec::with_capacity(contenders.len());
        for (k, c) in contenders.iter().enumerate() {
            let index = u32::try_from(k + 1).unwrap_or(u32::MAX);
            let id = task_id(TaskKind::Candidate, &t.id, index);
            out.push(candidate_task(&t, c, &id, index));
            ids.push(id);
        }
        let inputs = t.depends_on.clone();
        t.depends_on.extend(ids.iter().cloned());
        t.candidates = Some(Arc::new(Candidacy::Selector {
            select,
            candidates: ids,
            inputs,
        }));
        t.checks = Default::default();
        t.judging = Default::default();
        if let (Select::Judge, Some(j)) = (select, judge) {
            t.role = j.role.clone();
            t.agent = j.agent.clone();
            t.model = j.model.clone();
            t.system_prompt = j.system_prompt.clone();
            t.system_prompt_mode = j.system_prompt_mode;
            t.tools = j.tools.clone();
            t.thinking = j.thinking.clone();
            t.effort = j.effort.clone();
            t.fallback_models = j.fallback_models.clone();
            // It runs as the judge's role: the skills and the network a task of that role
            // gets.
            t.skills = j.skills.clone();
            t.network = j.network;
            t.writes = false;
            t.seed_paths = vec![];
            t.scope = vec![];
            t.judging.judge = true;
            t.task_template = format!(
                "Choose the best of the candidate solutions below for this task:\n\n{}",
                t.task_template
            );
        }
        t.title = Some(format!("choose among {} candidates", contenders.len()));
        out.push(t);
    }
    out
}

fn candidate_task(t: &PlannedTask, c: &Contender, id: &SafeId, index: u32) -> PlannedTask {
    let mut p = t.clone();
    p.id = id.clone();
    p.candidates = Some(Arc::new(Candidacy::Candidate {
        of: t.id.clone(),
        index,
        runtime: c.runtime.clone(),
    }));
    // A named runtime without a model runs its own default, not a model meant for another.
    p.model = match (&c.runtime, &c.model) {
        (_, Some(m)) => Some(m.clone()),
        (Some(_), None) => None,
        (None, None) => t.model.clone(),
    };
    if c.runtime.is_some() {
        p.fallback_models = vec![];
    }
    // Each candidate writes its own artifact: they run at once.
    p.output = t
        .output
        .as_ref()
        .and_then(|_| ArtifactName::new(format!("{id}.md")).ok());
    // The other candidates are the retries of a verification failure, unless the step says.
    if let Some(v) = p.checks.verify.as_mut() {
        v.retries = Some(v.retries.unwrap_or(0));
    }
    let label = c.label();
    p.title = Some(if label.is_empty() {
        format!("candidate {index} of {}", t.id)
    } else {
        format!("candidate {index} of {} ({label})", t.id)
    });
    p
}

/// The candidates of selector `t` in index order, with their task states.
fn candidates_of<'a>(run: &'a RunState, ids: &[SafeId]) -> Vec<(u32, &'a TaskState)> {
    ids.iter()
        .filter_map(|id| run.task(id))
        .filter_map(|c| Some((candidate_of(&c.plan)?.1, c)))
        .collect()
}

/// The fix task crew added for selector `sel` (no candidate passed), if any.
fn fix_of<'a>(run: &'a RunState, sel: &str) -> Option<&'a TaskState> {
    run.tasks
        .iter()
        .find(|x| x.plan.judging.fixes.as_deref() == Some(sel))
}

/// Lines changed, then files, then the index: the smallest passing candidate first.
fn size_key(i: u32, t: &TaskState) -> (u64, u64, u32) {
    let c = t.commit();
    (
        c.map_or(0, |c| c.insertions.saturating_add(c.deletions)),
        c.map_or(0, |c| c.files),
        i,
    )
}

/// Whether a selector may start as a worker now: only a judging selector, once every
/// candidate ended and at least two passed (one passing candidate is chosen without it).
pub fn may_start(run: &RunState, t: &TaskState) -> bool {
    let Some((select, ids, _)) = selector(&t.plan) else {
        return true;
    };
    if select != Select::Judge || fix_of(run, &t.plan.id).is_some() {
        return false;
    }
    let cands = candidates_of(run, ids);
    cands.iter().all(|(_, c)| set_aside(c)) && cands.iter().filter(|(_, c)| passed(c)).count() >= 2
}

/// Whether `dep` no longer holds up selector `t` (a candidate that ended, whatever its end).
pub fn dep_settled(t: &PlannedTask, dep: &TaskState) -> bool {
    is_own_candidate(t, &dep.plan.id) && set_aside(dep)
}

/// The settle phase of candidates: a selector whose choice can be made now makes it (one
/// `task.candidate_chosen`), `first` sets the others aside, and no candidate passing starts
/// the fix from the best one. `None`: nothing to do.
pub(super) fn settle(run: &RunState) -> Option<Vec<Pending>> {
    if !run.has_selector() {
        return None;
    }
    let mut out = Vec::new();
    for t in run.tasks.iter().filter(|t| t.status == TaskStatus::Queued) {
        let Some((select, ids, _)) = selector(&t.plan) else {
            continue;
        };
        out.extend(settle_one(run, t, select, ids));
        if !out.is_empty() {
            return Some(out);
        }
    }
    None
}

fn settle_one(run: &RunState, t: &TaskState, select: Select, ids: &[SafeId]) -> Vec<Pending> {
    let cands = candidates_of(run, ids);
    let id = t.plan.id.as_str();
    if let Some(fix) = fix_of(run, id) {
        // The fix task's result is the choice; its failure is the run's, as any task's.
        if fix.status != TaskStatus::Completed {
            return vec![];
        }
        let choice = Choice {
            index: 0,
            candidate: fix.plan.id.to_string(),
            by: "fix".into(),
            reason: "no candidate passed its checks; the fix task's result".into(),
        };
        return vec![chosen(run, t, fix, choice, None, None)];
    }
    if select == Select::First {
        let first = cands
            .iter()
            .filter(|(_, c)| passed(c))
            .min_by_key(|(i, c)| (c.finished_at, *i));
        if let Some((i, c)) = first {
            let choice = Choice {
                index: *i,
                candidate: c.plan.id.to_string(),
                by: "first".into(),
                reason: format!("candidate {i} was the first to pass its checks"),
            };
            let mut out = vec![chosen(run, t, c, choice, None, None)];
            out.extend(set_others_aside(run, &cands, *i));
            return out;
        }
    }
    if !cands.iter().all(|(_, c)| set_aside(c)) {
        return vec![];
    }
    let passing: Vec<&(u32, &TaskState)> = cands.iter().filter(|(_, c)| passed(c)).collect();
    match passing.as_slice() {
        [] => no_candidate_passed(run, t, &cands),
        [(i, c)] => {
            let choice = Choice {
                index: *i,
                candidate: c.plan.id.to_string(),
                by: "only".into(),
                reason: format!("candidate {i} is the only one that passed its checks"),
            };
            vec![chosen(run, t, c, choice, None, None)]
        }
        _ if select == Select::Smallest || select == Select::First => {
            let Some((i, c)) = passing.iter().min_by_key(|(i, c)| size_key(*i, c)) else {
                return vec![];
            };
            let lines = size_key(*i, c).0;
            let choice = Choice {
                index: *i,
                candidate: c.plan.id.to_string(),
                by: "smallest".into(),
                reason: format!(
                    "candidate {i} is the smallest of {} that passed ({lines} changed line{})",
                    passing.len(),
                    if lines == 1 { "" } else { "s" }
                ),
            };
            vec![chosen(run, t, c, choice, None, None)]
        }
        // Two or more passed and a judge chooses: dispatch starts the selector.
        _ => vec![],
    }
}

/// `task.candidate_chosen` on selector `t`: `c`'s commit becomes its result.
fn chosen(
    run: &RunState,
    t: &TaskState,
    c: &TaskState,
    choice: Choice,
    end: Option<AttemptEnd>,
    verdict: Option<Verdict>,
) -> Pending {
    let message = format!(
        "chose {} ({}): {}",
        choice.candidate, choice.by, choice.reason
    );
    Pending::task(
        &run.id,
        &t.plan.id,
        EventBody::TaskCandidateChosen {
            end,
            commit: c.commit().cloned(),
            choice,
            verdict,
        },
    )
    .with_message(message)
}

/// `first`: the candidates still running are cancelled, the queued ones skipped; their
/// worktrees stay as their refs.
fn set_others_aside(run: &RunState, cands: &[(u32, &TaskState)], chosen: u32) -> Vec<Pending> {
    let reason = format!("candidate {chosen} passed first");
    cands
        .iter()
        .filter(|(i, _)| *i != chosen)
        .filter_map(|(_, c)| {
            let body = match c.status {
                TaskStatus::Running | TaskStatus::Waiting => EventBody::TaskCancelled {
                    reason: Some(reason.clone()),
                },
                TaskStatus::Queued => EventBody::TaskSkipped {
                    reason: reason.clone(),
                },
                _ => return None,
            };
            Some(Pending::task(&run.id, &c.plan.id, body))
        })
        .collect()
}

/// No candidate passed: a fix task from the completed candidate with the fewest failing
/// checks (then the smallest), told every candidate's findings; with none completed, the
/// selector is skipped and the run fails as for any task that cannot run.
fn no_candidate_passed(run: &RunState, t: &TaskState, cands: &[(u32, &TaskState)]) -> Vec<Pending> {
    let best = cands
        .iter()
        .filter(|(_, c)| c.status == TaskStatus::Completed && c.commit().is_some())
        .min_by_key(|(i, c)| (c.failed_checks().len(), size_key(*i, c)));
    let Some((bi, best)) = best else {
        return vec![Pending::task(
            &run.id,
            &t.plan.id,
            EventBody::TaskSkipped {
                reason: format!(
                    "none of its {} candidates completed with a result",
                    cands.len()
                ),
            },
        )];
    };
    let findings: Vec<Finding> = cands
        .iter()
        .map(|(i, c)| Finding {
            title: format!("candidate {i} ({}) is out", c.plan.id),
            detail: match c.status {
                TaskStatus::Completed => c.failed_checks().join("\n"),
                s => format!("it is {}: {}", s.as_str(), c.error.as_deref().unwrap_or("")),
            },
            ..Default::default()
        })
        .collect();
    let verdict = Verdict {
        verdict: Outcome::Fail,
        findings,
    };
    let mut n = 1u32;
    let mut id = task_id(TaskKind::Fix, &t.plan.id, n);
    while run.task_index(&id).is_some() && (n as usize) <= run.tasks.len() {
        n = n.saturating_add(1);
        id = task_id(TaskKind::Fix, &t.plan.id, n);
    }
    let task = fix_task(t, best, *bi, &verdict, &id);
    vec![Pending::task(
        &run.id,
        &t.plan.id,
        EventBody::TaskFixAdded {
            task: Arc::new(task),
            round: 1,
            verdict,
        },
    )
    .with_message(format!(
        "no candidate passed its checks → {id} fixes candidate {bi}"
    ))]
}

/// The fix task: the step's own task (the best candidate's copy), starting from that
/// candidate's commit, with every candidate's findings.
fn fix_task(
    sel: &TaskState,
    best: &TaskState,
    index: u32,
    v: &Verdict,
    id: &SafeId,
) -> PlannedTask {
    let mut p = PlannedTask::clone(&best.plan);
    p.id = id.clone();
    p.step_id = "fix".into();
    p.depends_on = vec![best.plan.id.clone()];
    // On the best one's runtime (and so its model, which `p` keeps): its work is what goes on.
    p.candidates = runtime_of(&best.plan).map(|r| {
        Arc::new(Candidacy::Fix {
            candidate: best.plan.id.clone(),
            runtime: Some(r.to_string()),
        })
    });
    p.judging = crate::verdict::Judging {
        fixes: Some(sel.plan.id.clone()),
        ..Default::default()
    };
    p.output = best
        .plan
        .output
        .as_ref()
        .and_then(|_| ArtifactName::new(format!("{id}.md")).ok());
    p.title = Some(format!("fix candidate {index} of {}", sel.plan.id));
    p.task_template = format!(
        "{template}\n\n## No candidate passed its checks\n\nSeveral solutions of this task were \
         tried at once and each failed a check. You start from candidate {index}'s work (the \
         one with the fewest failing checks). Make the checks pass, keeping the change minimal. \
         The step's checks run on your result, and {sel} judges the result again after you.\n\n\
         What each candidate got wrong:\n{findings}",
        sel = sel.plan.id,
        template = best.plan.task_template,
        findings = v.findings_text(),
    );
    p
}

/// A judging selector's attempt ended: its answer's `choice` names a passing candidate, whose
/// commit becomes the result (one `task.candidate_chosen`, which also ends the attempt).
/// `Err`: the problem with the answer, for the repair attempt.
pub(super) fn judged(
    run: &RunState,
    t: &TaskState,
    end: AttemptEnd,
    answer: &str,
) -> Result<Pending, String> {
    let Some((_, ids, _)) = selector(&t.plan) else {
        return Err("not a selector".into());
    };
    let (index, reasons) = parse_choice(answer)?;
    let cands = candidates_of(run, ids);
    let Some((_, c)) = cands.iter().find(|(i, _)| *i == index) else {
        return Err(format!(
            "`choice` {index} names no candidate (they are 1 to {})",
            cands.len()
        ));
    };
    if !passed(c) {
        return Err(format!(
            "`choice` {index} names a candidate that failed its checks; choose among those that passed"
        ));
    }
    let verdict = crate::verdict::parse(answer).ok();
    let choice = Choice {
        index,
        candidate: c.plan.id.to_string(),
        by: "judge".into(),
        reason: reasons,
    };
    Ok(chosen(run, t, c, choice, Some(end), verdict))
}

/// `choice` (a 1-based candidate index) and `reasons` from the last ```json block holding a
/// `choice`, bounded.
pub fn parse_choice(answer: &str) -> Result<(u32, String), String> {
    let block = crate::fanout::last_json_fence(answer)
        .filter(|b| b.contains("\"choice\""))
        .or_else(|| {
            let t = answer.trim();
            (t.starts_with('{') && t.contains("\"choice\"")).then_some(t)
        })
        .ok_or_else(|| {
            "no choice found: end your answer with a ```json block holding \"choice\" (the \
             number of the candidate you choose) and \"reasons\""
                .to_string()
        })?;
    let v: serde_json::Value =
        serde_json::from_str(block).map_err(|e| format!("the choice block is not valid: {e}"))?;
    let index = v
        .get("choice")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.trim().parse().ok()))
        })
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| "`choice` must be the number of a candidate".to_string())?;
    let reasons = match v.get("reasons") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        _ => String::new(),
    };
    Ok((index, cut(&reasons, MAX_CHECK_CHARS)))
}

/// What a judging selector is told of one candidate (the daemon adds its diff).
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub index: u32,
    pub task_id: String,
    pub label: String,
    pub passed: bool,
    pub commit: Option<super::workspace::TaskCommit>,
    pub failed_checks: Vec<String>,
}

/// The candidates a judging selector is shown, in index order.
pub fn shown(run: &RunState, t: &TaskState) -> Vec<Shown> {
    let Some((_, ids, _)) = selector(&t.plan) else {
        return vec![];
    };
    candidates_of(run, ids)
        .into_iter()
        .map(|(i, c)| Shown {
            index: i,
            task_id: c.plan.id.to_string(),
            label: match (runtime_of(&c.plan), &c.plan.model) {
                (Some(r), Some(m)) => format!("{r}/{m}"),
                (Some(r), None) => r.to_string(),
                (None, Some(m)) => m.clone(),
                (None, None) => run.spec.runtime.clone(),
            },
            passed: passed(c),
            commit: c.commit().cloned(),
            failed_checks: c.failed_checks().to_vec(),
        })
        .collect()
}

/// Characters of all passing candidates' patches together in a judging selector's prompt:
/// each gets an equal share, at most [`MAX_PATCH_CHARS`].
pub const MAX_PATCHES_CHARS: usize = 96_000;
/// Characters of one candidate's patch in the prompt.
pub const MAX_PATCH_CHARS: usize = 24_000;
/// Characters of one candidate's final answer in the prompt.
pub const MAX_ANSWER_CHARS: usize = 2_000;
/// Characters of one candidate's failing checks in the prompt (each is bounded too).
pub const MAX_CHECKS_SHOWN_CHARS: usize = 3_000;
/// The most the selection section can hold, whatever up to [`MAX_CANDIDATES`] candidates
/// wrote: the sum of the bounds above, the headers and the fixed text, with room to spare.
pub const MAX_SECTION_CHARS: usize = 160_000;

/// The selection section of a judging selector's prompt: each candidate (with `answer(k, max)`,
/// its final answer, and `diff(k, max)`, its patch, which the caller reads and bounds to `max`
/// characters) and the block to end with. Everything a candidate wrote is bounded, each part
/// and all together (at most [`MAX_SECTION_CHARS`]), so up to eight large candidates cannot
/// crowd the judge's context. Candidates' answers and diffs are quoted in
/// `<dependency-output>` blocks: they are material, not instructions.
pub fn prompt_section(
    shown: &[Shown],
    answer: &dyn Fn(&Shown, usize) -> String,
    diff: &dyn Fn(&Shown, usize) -> String,
    repair: Option<&str>,
) -> String {
    let passing = shown.iter().filter(|s| s.passed).count().max(1);
    let patch_max = (MAX_PATCHES_CHARS / passing).min(MAX_PATCH_CHARS);
    let shown = &shown[..shown.len().min(MAX_CANDIDATES as usize)];
    let mut out = format!("\n{PROMPT_HEADING}\n\n");
    out.push_str(
        "Several solutions of this task were made at once, each from the same start. Those \
         that failed their checks are out. Compare those that passed: correctness first, then \
         completeness, then simplicity.\n\n",
    );
    for s in shown {
        out.push_str(&format!(
            "### Candidate {} ({}, {}){}\n\n",
            s.index,
            s.task_id,
            crate::text::echo(&s.label),
            if s.passed {
                ""
            } else {
                " — OUT, failed its checks"
            }
        ));
        if let Some(c) = &s.commit {
            out.push_str(&format!(
                "Commit `{}`: {} file(s), +{} -{}.\n",
                c.commit, c.files, c.insertions, c.deletions
            ));
        }
        let checks: String = s
            .failed_checks
            .iter()
            .map(|f| format!("Failed check: {f}\n"))
            .collect();
        out.push_str(&cut(&checks, MAX_CHECKS_SHOWN_CHARS));
        if s.passed {
            out.push_str(&format!(
                "\nIts final answer:\n<dependency-output task=\"{id}\">\n{}\n</dependency-output>\n\n\
                 Its change:\n<dependency-output task=\"{id}\">\n{}\n</dependency-output>\n\n",
                cut(&answer(s, MAX_ANSWER_CHARS), MAX_ANSWER_CHARS),
                cut(&diff(s, patch_max), patch_max),
                id = s.task_id,
            ));
        } else {
            out.push('\n');
        }
    }
    out.push_str(crate::verdict::PROMPT_HEADING);
    out.push_str(
        "\n\nEnd your final answer with one fenced ```json block naming the candidate you \
         choose by its number, with your reasons:\n\n```json\n{\"verdict\": \"pass\", \
         \"choice\": 2, \"reasons\": \"why this one is best, and what is wrong with the others\"}\n```\n",
    );
    if let Some(msg) = repair {
        out.push('\n');
        out.push_str(crate::verdict::REPAIR_HEADING);
        out.push_str("\n\n");
        out.push_str(&cut(msg, MAX_CHECK_CHARS));
        out.push_str("\n\nAnswer again, ending with the ```json block holding `choice`.\n");
    }
    out
}

/// `team.pick`: replace selector `sel`'s choice by candidate `index`. Refused when it is no
/// selector, the candidate did not complete, or the choice is already that one. The
/// dependents of the selector that started or ended are queued again from the new choice.
pub fn pick(run: &RunState, sel: &TaskState, index: u32) -> Result<Vec<Pending>, String> {
    let Some((_, ids, _)) = selector(&sel.plan) else {
        return Err(format!("task {} has no candidates", sel.plan.id));
    };
    let cands = candidates_of(run, ids);
    let Some((_, c)) = cands.iter().find(|(i, _)| *i == index) else {
        return Err(format!(
            "task {} has candidates 1 to {}, not {index}",
            sel.plan.id,
            cands.len()
        ));
    };
    if c.status != TaskStatus::Completed {
        return Err(format!(
            "candidate {index} ({}) is {}: only a completed candidate can be picked",
            c.plan.id,
            c.status.as_str()
        ));
    }
    if sel.choice().is_some_and(|ch| ch.index == index) {
        return Err(format!("candidate {index} is already the choice"));
    }
    // A person may take a candidate its checks ruled out (they know better, or will fix it):
    // the choice says so, wherever it is shown.
    let reason = match c.failed_checks().first() {
        None => format!("picked by hand (candidate {index})"),
        Some(first) => format!(
            "picked by hand (candidate {index}), although its checks failed: {}",
            cut(first, 300)
        ),
    };
    let choice = Choice {
        index,
        candidate: c.plan.id.to_string(),
        by: BY_PERSON.into(),
        reason,
    };
    let mut out = vec![chosen(run, sel, c, choice, None, None)];
    for d in dependents(run, &sel.plan.id) {
        if let Some(dt) = run.task(&d) {
            if dt.status != TaskStatus::Queued {
                out.push(Pending::task(
                    &run.id,
                    &d,
                    EventBody::TaskQueued {
                        reason: format!("candidate {index} of {} was picked", sel.plan.id),
                        answer: None,
                    },
                ));
            }
        }
    }
    Ok(out)
}

impl super::State {
    /// `team.pick`: the events, the chosen candidate's id and the dependents queued again.
    pub fn pick_candidate(
        &self,
        run_id: &str,
        task_id: &str,
        index: u32,
    ) -> Result<(Vec<Pending>, Picked), super::CoreError> {
        let run = self
            .runs
            .get(run_id)
            .ok_or_else(|| super::CoreError::NotFound {
                what: "run",
                id: run_id.to_string(),
            })?;
        let sel = run
            .task(task_id)
            .ok_or_else(|| super::CoreError::NotFound {
                what: "task",
                id: task_id.to_string(),
            })?;
        let events = pick(run, sel, index).map_err(super::CoreError::InvalidState)?;
        let mut chosen = String::new();
        let mut requeued = Vec::new();
        for e in &events {
            match &e.body {
                EventBody::TaskCandidateChosen { choice, .. } => chosen = choice.candidate.clone(),
                EventBody::TaskQueued { .. } => requeued.extend(e.task_id.clone()),
                _ => {}
            }
        }
        Ok((events, (chosen, requeued)))
    }
}

/// Every task that depends on `id`, directly or not, in plan order. Plan order need not be
/// topological (a fan-out block may name a task it lists later), so passes repeat until one
/// finds nothing new: at most one per task.
pub(super) fn dependents(run: &RunState, id: &str) -> Vec<String> {
    let mut found: std::collections::HashSet<&str> = std::collections::HashSet::from([id]);
    for _ in 0..run.tasks.len() {
        let before = found.len();
        for t in &run.tasks {
            if t.plan.depends_on.iter().any(|d| found.contains(d.as_str())) {
                found.insert(t.plan.id.as_str());
            }
        }
        if found.len() == before {
            break;
        }
    }
    run.tasks
        .iter()
        .map(|t| t.plan.id.as_str())
        .filter(|t| *t != id && found.contains(t))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A judging selector runs as the judge's role: its agent and tools, and the skills a task
    /// of that role gets, not those of the step's own role.
    #[test]
    fn a_judging_selector_has_the_judge_s_skills() {
        let catalog = crate::resource::Catalog::builtin();
        let plan = crate::plan::build_plan(&catalog, Some("implement"), None).unwrap();
        let roles = crate::plan::role_templates(
            &catalog,
            catalog.team("implement").unwrap(),
            &crate::skills::RunSkills::Selected,
        );
        let mut judge = (*judge_template(&roles, None).unwrap()).clone();
        assert_eq!(judge.role, "reviewer");
        // The judge's role offline, the step's not: the selector runs as the judge.
        judge.network = Some(false);
        let judge = Arc::new(judge);
        let integrate = plan
            .tasks
            .iter()
            .find(|t| t.step_id == "integrate")
            .unwrap();
        assert_ne!(integrate.skills, judge.skills, "the test tells them apart");
        let contenders = vec![Contender::default(); 2];
        let tasks = expand(
            plan.tasks.clone(),
            Some(RunAsk {
                contenders: &contenders,
                select: None,
                judge: Some(&judge),
            }),
        );
        let sel = tasks
            .iter()
            .find(|t| t.step_id == "integrate" && selector(t).is_some());
        let sel = sel.unwrap();
        assert_eq!(
            (sel.role.as_str(), sel.agent.as_str()),
            ("reviewer", "reviewer")
        );
        let names: Vec<&str> = sel.skills.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["read-only-explorer", "multi-perspective-review"]);
        assert_eq!(sel.network, Some(false));
        assert_eq!(integrate.network, None);
    }

    #[test]
    fn contenders_split_on_the_first_slash() {
        let c = Contender::parse("opencode/anthropic/claude-x").unwrap();
        assert_eq!(c.runtime.as_deref(), Some("opencode"));
        assert_eq!(c.model.as_deref(), Some("anthropic/claude-x"));
        let c = Contender::parse("codex").unwrap();
        assert_eq!((c.runtime.as_deref(), c.model), (Some("codex"), None));
        assert!(Contender::parse(" ").is_none());
        assert!(Contender::parse("/m").is_none());
    }

    #[test]
    fn asks_are_bounded() {
        assert_eq!(Ask::Count(1).contenders().unwrap().len(), 0);
        assert_eq!(Ask::Count(3).contenders().unwrap().len(), 3);
        assert!(Ask::Count(9).contenders().is_err());
        assert!(Ask::List(vec!["fake".into(); 9]).contenders().is_err());
        assert!(Ask::List(vec!["fake".into(), "".into()])
            .contenders()
            .is_err());
        assert_eq!(
            Ask::List(vec!["a/x".into(), "b".into()])
                .contenders()
                .unwrap()[1]
                .label(),
            "b"
        );
    }

    /// Eight candidates with huge patches, answers, labels and failing checks: each part is
    /// cut to its bound and the section stays under its total.
    #[test]
    fn the_judges_section_is_bounded_in_each_part_and_in_total() {
        let huge = "x".repeat(1_000_000);
        let shown: Vec<Shown> = (1..=MAX_CANDIDATES)
            .map(|i| Shown {
                index: i,
                task_id: format!("_cand-t-{i}"),
                label: huge.clone(),
                passed: i % 4 != 0,
                commit: None,
                failed_checks: vec![huge.clone(); 50],
            })
            .collect();
        let asked = std::cell::RefCell::new(vec![]);
        let diff = |s: &Shown, max: usize| {
            asked.borrow_mut().push((s.index, max));
            huge.clone()
        };
        let answer = |_: &Shown, _: usize| huge.clone();
        let section = prompt_section(&shown, &answer, &diff, Some(&huge));
        let n = section.chars().count();
        assert!(n <= MAX_SECTION_CHARS, "{n} characters");
        // Six passed: each patch gets an equal share of the total, under the one-patch cap.
        let asked = asked.borrow();
        assert_eq!(asked.len(), 6);
        assert!(asked.iter().all(|(_, max)| *max == MAX_PATCHES_CHARS / 6));
        assert!(
            section.contains("### Candidate 8"),
            "every candidate is named"
        );
        assert!(
            section.ends_with("holding `choice`.\n"),
            "the instructions are kept"
        );
        // Two candidates: the one-patch cap.
        let two: Vec<Shown> = shown.iter().take(2).cloned().collect();
        let max_seen = std::cell::Cell::new(0);
        let diff = |_: &Shown, max: usize| {
            max_seen.set(max_seen.get().max(max));
            String::new()
        };
        let _ = prompt_section(&two, &answer, &diff, None);
        assert_eq!(max_seen.get(), MAX_PATCH_CHARS);
    }

    #[test]
    fn choices_are_read_bounded() {
        let a = "compare...\n```json\n{\"verdict\": \"pass\", \"choice\": 2, \"reasons\": [\"smaller\", \"tested\"]}\n```\n";
        assert_eq!(parse_choice(a).unwrap(), (2, "smaller; tested".into()));
        assert_eq!(parse_choice("{\"choice\": \"3\"}").unwrap().0, 3);
        assert!(parse_choice("I like the second one").is_err());
        assert!(parse_choice("```json\n{\"choice\": -1}\n```").is_err());
    }
}
