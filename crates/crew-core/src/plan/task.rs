//! `PlannedTask` in memory: what differs between the tasks of a run (id, step, dependencies,
//! text, artifacts) is inline; the rest ([`TaskCommon`]: the agent, its prompt and tools, the
//! step's options) sits behind one `Arc` that tasks with equal values share
//! (`plan::share_prompts`). A resident run keeps a plan per task, finished or not, and in a
//! 1,000-step workflow nearly all of it is the same for every task of one agent: about 600
//! bytes per task inline before, 150 now.
//!
//! The JSON (journal, snapshots, bundles) is the flat object the derived form gave, field for
//! field and in the same order: written through a borrowed [`FlatOut`], read into [`FlatTask`]
//! (derived serde, so missing, defaulted and unknown fields behave as they always did).

use crate::ids::{ArtifactName, SafeId};
use crate::skills::PlannedSkill;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// One task of a plan: a workflow step bound to its team role and agent, with everything the
/// run needs frozen in, so a run never depends on resource files after it was created.
///
/// The fields of [`TaskCommon`] are read through `Deref` (`task.agent`). A write to one of them
/// goes through `DerefMut`, which first copies the common part when another task shares it
/// (`Arc::make_mut`): a change to one task never reaches another.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTask {
    /// `NN_<slug(stepId)>`, NN = 1-based step index, two digits. Checked when read back (from
    /// the journal or a bundle), like every id that reaches a path.
    pub id: SafeId,
    pub step_id: String,
    /// Task ids (not step ids) of direct dependencies.
    pub depends_on: Vec<SafeId>,
    /// The step's task text, `{goal}` not yet substituted.
    pub task_template: String,
    /// Shared artifact name written from the result (`None` when `output: false`).
    pub output: Option<ArtifactName>,
    pub reads: Vec<ArtifactName>,
    common: Arc<TaskCommon>,
}

/// What tasks of one agent and one kind of step usually have alike.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskCommon {
    pub role: String,
    pub agent: String,
    /// Step model, else team-role model, else agent model.
    pub model: Option<String>,
    /// Shared between the tasks of one agent even where the rest differs (`share_prompts`):
    /// it is the largest field.
    pub system_prompt: Arc<str>,
    pub system_prompt_mode: crate::resource::SystemPromptMode,
    /// Effective tool list of the agent, shared between its tasks like the prompt.
    pub tools: Arc<[String]>,
    pub thinking: Option<String>,
    /// The agent's `effort` (claude `--effort`, codex `model_reasoning_effort`; else its
    /// `thinking` maps onto them).
    pub effort: Option<String>,
    /// The agent's `fallbackModels`, in order: a task whose retries on one model ran out on a
    /// rate limit or an overload moves on to the next (`State::finish_attempt`).
    pub fallback_models: Vec<String>,
    /// True when the agent's tools include edit, write or bash (SPEC §4 plan approval, §9 reuse).
    pub writes: bool,
    /// The step's `seedPaths` (worktree mode copies them from the user's tree).
    pub seed_paths: Vec<String>,
    /// The paths or globs (relative to the run's cwd, normalized by `scope::normalize`) this
    /// task may change; empty = unrestricted. From the step's `scope:`, or a fan-out block.
    pub scope: Vec<String>,
    /// Scope policy, no-change guard and verification commands (issue 17).
    pub checks: crate::checks::Checks,
    /// A fan-out step (`expands: tasks`): its answer adds tasks, within what this allows.
    pub expands: Option<Arc<crate::fanout::Expansion>>,
    /// Added by this fan-out task (`task.expanded`), not by the workflow.
    pub added_by: Option<SafeId>,
    /// An added task's one-line title.
    pub title: Option<String>,
    /// The task's skills with their text, frozen here (`crate::skills`); shared between tasks
    /// with the same selection like the prompt.
    pub skills: Arc<[PlannedSkill]>,
    /// Verdict and fix loop (issue 30): whether the task judges, who fixes its findings, and
    /// for a fix task the judge it answers.
    pub judging: crate::verdict::Judging,
    /// Candidates (issue 36): asked for, one candidate of a step, or the step's selector.
    pub candidates: Option<Arc<crate::run::candidates::Candidacy>>,
    /// The step's job resources over its role's (issue 35; `crate::job_shape`): what the task
    /// asks of a cluster node beyond its runtime's defaults. Unused on a local runtime.
    pub resources: crate::job_shape::JobShape,
    /// Its team role's `network=` (issue 34): `Some(false)`, its boxed attempts get no
    /// network, whatever the runtime allows.
    pub network: Option<bool>,
    /// A resolve task (issue 31): the conflict it resolves (its paths and sides), so its
    /// prompt quotes what each side did there. `None` for every other task, and for a resolve
    /// task journaled before this was kept.
    pub resolves: Option<Arc<crate::run::resolve::Conflict>>,
}

impl Deref for PlannedTask {
    type Target = TaskCommon;
    fn deref(&self) -> &TaskCommon {
        &self.common
    }
}

impl DerefMut for PlannedTask {
    fn deref_mut(&mut self) -> &mut TaskCommon {
        Arc::make_mut(&mut self.common)
    }
}

impl PlannedTask {
    /// The shared part itself, for `share_prompts`.
    pub(crate) fn common(&self) -> &Arc<TaskCommon> {
        &self.common
    }

    /// The same task with `common` (equal to its own) in place of its own copy.
    pub(crate) fn with_common(&self, common: Arc<TaskCommon>) -> PlannedTask {
        debug_assert!(*common == *self.common);
        PlannedTask {
            common,
            ..self.clone()
        }
    }

    /// Every field as its own value: to build a changed task with struct-update syntax.
    pub fn into_flat(self) -> FlatTask {
        let c = Arc::try_unwrap(self.common).unwrap_or_else(|shared| (*shared).clone());
        FlatTask {
            id: self.id,
            step_id: self.step_id,
            role: c.role,
            agent: c.agent,
            depends_on: self.depends_on,
            task_template: self.task_template,
            output: self.output,
            reads: self.reads,
            model: c.model,
            system_prompt: c.system_prompt,
            system_prompt_mode: c.system_prompt_mode,
            tools: c.tools,
            thinking: c.thinking,
            effort: c.effort,
            fallback_models: c.fallback_models,
            writes: c.writes,
            seed_paths: c.seed_paths,
            scope: c.scope,
            checks: c.checks,
            expands: c.expands,
            added_by: c.added_by,
            title: c.title,
            skills: c.skills,
            judging: c.judging,
            candidates: c.candidates,
            resources: c.resources,
            network: c.network,
            resolves: c.resolves,
        }
    }
}

/// A planned task with every field its own, in the order of its JSON: how a task is built
/// (`PlannedTask::from`) and read back.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlatTask {
    pub id: SafeId,
    pub step_id: String,
    pub role: String,
    pub agent: String,
    pub depends_on: Vec<SafeId>,
    pub task_template: String,
    pub output: Option<ArtifactName>,
    pub reads: Vec<ArtifactName>,
    pub model: Option<String>,
    pub system_prompt: Arc<str>,
    pub system_prompt_mode: crate::resource::SystemPromptMode,
    pub tools: Arc<[String]>,
    pub thinking: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub fallback_models: Vec<String>,
    pub writes: bool,
    #[serde(default)]
    pub seed_paths: Vec<String>,
    #[serde(default)]
    pub scope: Vec<String>,
    #[serde(default)]
    pub checks: crate::checks::Checks,
    #[serde(default)]
    pub expands: Option<Arc<crate::fanout::Expansion>>,
    #[serde(default)]
    pub added_by: Option<SafeId>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub skills: Arc<[PlannedSkill]>,
    #[serde(default)]
    pub judging: crate::verdict::Judging,
    #[serde(default)]
    pub candidates: Option<Arc<crate::run::candidates::Candidacy>>,
    #[serde(default)]
    pub resources: crate::job_shape::JobShape,
    #[serde(default)]
    pub network: Option<bool>,
    #[serde(default)]
    pub resolves: Option<Arc<crate::run::resolve::Conflict>>,
}

impl From<FlatTask> for PlannedTask {
    fn from(f: FlatTask) -> Self {
        PlannedTask {
            id: f.id,
            step_id: f.step_id,
            depends_on: f.depends_on,
            task_template: f.task_template,
            output: f.output,
            reads: f.reads,
            common: Arc::new(TaskCommon {
                role: f.role,
                agent: f.agent,
                model: f.model,
                system_prompt: f.system_prompt,
                system_prompt_mode: f.system_prompt_mode,
                tools: f.tools,
                thinking: f.thinking,
                effort: f.effort,
                fallback_models: f.fallback_models,
                writes: f.writes,
                seed_paths: f.seed_paths,
                scope: f.scope,
                checks: f.checks,
                expands: f.expands,
                added_by: f.added_by,
                title: f.title,
                skills: f.skills,
                judging: f.judging,
                candidates: f.candidates,
                resources: f.resources,
                network: f.network,
                resolves: f.resolves,
            }),
        }
    }
}

/// A task as written: borrowed, so a snapshot copies nothing. The attributes are those the
/// derived form had.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlatOut<'a> {
    id: &'a SafeId,
    step_id: &'a str,
    role: &'a str,
    agent: &'a str,
    depends_on: &'a [SafeId],
    task_template: &'a str,
    output: &'a Option<ArtifactName>,
    reads: &'a [ArtifactName],
    model: &'a Option<String>,
    system_prompt: &'a str,
    system_prompt_mode: crate::resource::SystemPromptMode,
    tools: &'a [String],
    thinking: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: &'a Option<String>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    fallback_models: &'a [String],
    writes: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    seed_paths: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    scope: &'a [String],
    #[serde(skip_serializing_if = "crate::checks::Checks::is_default")]
    checks: &'a crate::checks::Checks,
    #[serde(skip_serializing_if = "Option::is_none")]
    expands: &'a Option<Arc<crate::fanout::Expansion>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    added_by: &'a Option<SafeId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: &'a Option<String>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    skills: &'a [PlannedSkill],
    #[serde(skip_serializing_if = "crate::verdict::Judging::is_default")]
    judging: &'a crate::verdict::Judging,
    #[serde(skip_serializing_if = "Option::is_none")]
    candidates: &'a Option<Arc<crate::run::candidates::Candidacy>>,
    #[serde(skip_serializing_if = "crate::job_shape::JobShape::is_empty")]
    resources: &'a crate::job_shape::JobShape,
    #[serde(skip_serializing_if = "Option::is_none")]
    network: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolves: &'a Option<Arc<crate::run::resolve::Conflict>>,
}

impl Serialize for PlannedTask {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = &*self.common;
        FlatOut {
            id: &self.id,
            step_id: &self.step_id,
            role: &c.role,
            agent: &c.agent,
            depends_on: &self.depends_on,
            task_template: &self.task_template,
            output: &self.output,
            reads: &self.reads,
            model: &c.model,
            system_prompt: &c.system_prompt,
            system_prompt_mode: c.system_prompt_mode,
            tools: &c.tools,
            thinking: &c.thinking,
            effort: &c.effort,
            fallback_models: &c.fallback_models,
            writes: c.writes,
            seed_paths: &c.seed_paths,
            scope: &c.scope,
            checks: &c.checks,
            expands: &c.expands,
            added_by: &c.added_by,
            title: &c.title,
            skills: &c.skills,
            judging: &c.judging,
            candidates: &c.candidates,
            resources: &c.resources,
            network: c.network,
            resolves: &c.resolves,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PlannedTask {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        FlatTask::deserialize(d).map(PlannedTask::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{Checks, ScopePolicy, Verify};
    use crate::run::candidates::Candidacy;
    use crate::verdict::Judging;
    use serde::{Deserialize, Serialize};

    /// `PlannedTask` as it was derived before the split (copied from it): the JSON to match.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Derived {
        id: SafeId,
        step_id: String,
        role: String,
        agent: String,
        depends_on: Vec<SafeId>,
        task_template: String,
        output: Option<ArtifactName>,
        reads: Vec<ArtifactName>,
        model: Option<String>,
        system_prompt: Arc<str>,
        system_prompt_mode: crate::resource::SystemPromptMode,
        tools: Arc<[String]>,
        thinking: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        fallback_models: Vec<String>,
        writes: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seed_paths: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scope: Vec<String>,
        #[serde(default, skip_serializing_if = "crate::checks::Checks::is_default")]
        checks: crate::checks::Checks,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expands: Option<Arc<crate::fanout::Expansion>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        added_by: Option<SafeId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
        skills: Arc<[PlannedSkill]>,
        #[serde(default, skip_serializing_if = "crate::verdict::Judging::is_default")]
        judging: crate::verdict::Judging,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        candidates: Option<Arc<crate::run::candidates::Candidacy>>,
        #[serde(default, skip_serializing_if = "crate::job_shape::JobShape::is_empty")]
        resources: crate::job_shape::JobShape,
    }

    fn full() -> Derived {
        Derived {
            id: SafeId::new("02_build").unwrap(),
            step_id: "build".into(),
            role: "exec".into(),
            agent: "executor".into(),
            depends_on: vec![SafeId::new("01_plan").unwrap()],
            task_template: "Build {goal}.".into(),
            output: Some(ArtifactName::new("build.md").unwrap()),
            reads: vec![ArtifactName::new("plan.md").unwrap()],
            model: Some("a/model".into()),
            system_prompt: Arc::from("You build."),
            system_prompt_mode: crate::resource::SystemPromptMode::default(),
            tools: vec!["read".to_string(), "edit".to_string()].into(),
            thinking: Some("low".into()),
            effort: Some("high".into()),
            fallback_models: vec!["b/other".into()],
            writes: true,
            seed_paths: vec!["data/".into()],
            scope: vec!["src/**".into()],
            checks: Checks {
                scope_policy: Some(ScopePolicy::Warn),
                allow_no_change: Some(true),
                verify: Some(Verify {
                    commands: vec!["make test".into()],
                    retries: Some(2),
                }),
                pre_step: None,
            },
            expands: Some(Arc::new(crate::fanout::Expansion {
                max_tasks: 4,
                max_answer_bytes: 1000,
                roles: vec![],
                candidates: None,
            })),
            added_by: Some(SafeId::new("01_plan").unwrap()),
            title: Some("a title".into()),
            skills: vec![PlannedSkill {
                name: "git".into(),
                description: "d".into(),
                text: "t".into(),
                missing: false,
            }]
            .into(),
            judging: Judging {
                judge: true,
                fix: None,
                fixes: Some(SafeId::new("01_plan").unwrap()),
            },
            candidates: Some(Arc::new(Candidacy::Candidate {
                of: SafeId::new("02_build").unwrap(),
                index: 2,
                runtime: Some("pi".into()),
            })),
            resources: crate::job_shape::JobShape {
                cpus_per_task: Some(2),
                memory_mb: None,
                time_limit_minutes: Some(5),
            },
        }
    }

    fn bare() -> Derived {
        Derived {
            model: None,
            thinking: None,
            effort: None,
            output: None,
            reads: vec![],
            depends_on: vec![],
            fallback_models: vec![],
            writes: false,
            seed_paths: vec![],
            scope: vec![],
            checks: Default::default(),
            expands: None,
            added_by: None,
            title: None,
            skills: Arc::from(Vec::<PlannedSkill>::new()),
            judging: Default::default(),
            candidates: None,
            resources: Default::default(),
            ..full()
        }
    }

    #[test]
    fn the_json_is_the_derived_forms_both_ways() {
        for (name, old) in [("full", full()), ("bare", bare())] {
            let json = serde_json::to_string(&old).unwrap();
            let task: PlannedTask = serde_json::from_str(&json).unwrap();
            assert_eq!(
                serde_json::to_string(&task).unwrap(),
                json,
                "{name}: same JSON out"
            );
            let back: Derived =
                serde_json::from_str(&serde_json::to_string(&task).unwrap()).unwrap();
            assert_eq!(back, old, "{name}: same values");
            // Every field reads back from where it went.
            assert_eq!(
                (
                    task.agent.as_str(),
                    task.model.clone(),
                    task.writes,
                    task.title.clone()
                ),
                (
                    old.agent.as_str(),
                    old.model.clone(),
                    old.writes,
                    old.title.clone()
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn an_old_task_without_the_later_fields_reads_as_before() {
        // A journal written before effort, fallbacks, scope, checks, fan-out, skills,
        // judging, candidates and resources existed: the defaults fill in, unknown fields
        // are skipped, as the derived form did.
        let json = r#"{"id":"01_a","stepId":"a","role":"r","agent":"x","dependsOn":[],
            "taskTemplate":"t","output":null,"reads":[],"model":null,"systemPrompt":"p",
            "systemPromptMode":"append","tools":[],"thinking":null,"writes":false,
            "someFutureField":1}"#;
        let old: Derived = serde_json::from_str(json).unwrap();
        let task: PlannedTask = serde_json::from_str(json).unwrap();
        assert_eq!(
            serde_json::to_string(&task).unwrap(),
            serde_json::to_string(&old).unwrap()
        );
        // A field the derived form required is still required.
        let missing = json.replace(r#""writes":false,"#, "");
        assert!(serde_json::from_str::<Derived>(&missing).is_err());
        assert!(serde_json::from_str::<PlannedTask>(&missing).is_err());
    }

    #[test]
    fn a_task_holds_what_differs_inline_and_a_pointer_to_the_rest() {
        // Six fields of its own and one `Arc`: about a quarter of the derived form.
        assert!(std::mem::size_of::<PlannedTask>() <= 160);
        assert!(std::mem::size_of::<Derived>() >= 3 * std::mem::size_of::<PlannedTask>());
    }

    #[test]
    fn a_write_to_a_shared_part_changes_one_task() {
        let json = serde_json::to_string(&full()).unwrap();
        let one: PlannedTask = serde_json::from_str(&json).unwrap();
        let mut two = one.clone();
        assert!(Arc::ptr_eq(one.common(), two.common()), "a clone shares");
        two.model = Some("c/changed".into());
        assert_eq!(one.model.as_deref(), Some("a/model"));
        assert_eq!(two.model.as_deref(), Some("c/changed"));
        assert!(!Arc::ptr_eq(one.common(), two.common()));
        assert_eq!(PlannedTask::from(two.clone().into_flat()), two);
    }
}
