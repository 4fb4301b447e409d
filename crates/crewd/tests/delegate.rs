//! Issue 19 through the real daemon and the fake agent: skills reach the tasks' prompts (role
//! defaults, team-role and step overrides, the run's `skills`, `false`), bounded, and
//! `team.plan` lists them; one-agent runs; chains of teams as one run, with cancel, resume,
//! a budget across the chain and a `kill -9` in the middle.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const FAST: &str = "kill_grace_ms = 500\nfinal_drain_ms = 1500\nfinal_drain_quiet_ms = 200\n";

fn daemon() -> Daemon {
    Daemon::start_with(Opts {
        config: FAST.to_string(),
        ..Default::default()
    })
}

fn artifact(d: &Daemon, run: &str, name: &str) -> String {
    d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn plan(d: &Daemon, extra: Value) -> Value {
    let mut p = json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    d.ok("team.plan", p)
}

fn skills_of(tasks: &Value, id: &str) -> Vec<String> {
    let t = tasks
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {tasks}"));
    t["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The `## Skills` block of a prompt (up to `## Task`), or "" when there is none.
fn skills_block(prompt: &str) -> &str {
    match (prompt.find("## Skills"), prompt.find("## Task")) {
        (Some(a), Some(b)) if a < b => &prompt[a..b],
        _ => "",
    }
}

fn code(e: &Value) -> i64 {
    e["code"].as_i64().unwrap_or(0)
}

#[test]
fn skills_reach_the_prompts_with_defaults_overrides_and_off() {
    let d = daemon();
    // A project skill, one far over the size bound, and a team whose roles and steps override.
    d.project_file(
        "skills/house-style/SKILL.md",
        "---\nname: house-style\ndescription: How this project writes code.\n---\nTabs, never spaces. HOUSE-STYLE-MARK\n",
    );
    d.project_file(
        "skills/huge/SKILL.md",
        &format!(
            "---\nname: huge\ndescription: Far too long.\n---\n{}",
            "huge text ".repeat(20_000)
        ),
    );
    d.project_file(
        "teams/mixed.team.md",
        "---\nname: mixed\ndefaultWorkflow: mixed\n---\n\n- explorer: agent=explorer\n- executor: agent=executor skills=false\n",
    );
    d.project_file(
        "workflows/mixed.workflow.md",
        "---\nname: mixed\n---\n\n## look\nrole: explorer\nskills: house-style, huge, ghost\n\nLook at {goal}.\n\n\
         ## plain\nrole: explorer\nskills: false\n\nLook again.\n\n## change\nrole: executor\ndependsOn: look\n\nChange it.\n",
    );

    // team.plan lists each task's skills, missing ones named.
    let p = plan(&d, json!({"team": "mixed"}));
    assert_eq!(
        skills_of(&p["tasks"], "01_look"),
        [
            "read-only-explorer",
            "context-artifact-hygiene",
            "house-style",
            "huge",
            "ghost"
        ]
    );
    let look = &p["tasks"][0];
    assert_eq!(look["missingSkills"], json!(["ghost"]), "{look}");
    assert!(
        skills_of(&p["tasks"], "02_plain").is_empty(),
        "step skills: false"
    );
    assert!(
        skills_of(&p["tasks"], "03_change").is_empty(),
        "role skills=false"
    );
    let p = plan(&d, json!({"team": "mixed", "skills": ["safe-bash"]}));
    assert_eq!(skills_of(&p["tasks"], "02_plain"), ["safe-bash"]);
    let p = plan(&d, json!({"team": "mixed", "skills": false}));
    for id in ["01_look", "02_plain", "03_change"] {
        assert!(skills_of(&p["tasks"], id).is_empty(), "{id}");
    }
    // Builtin teams: every task has its role's builtin skills.
    let p = plan(&d, json!({}));
    assert_eq!(
        skills_of(&p["tasks"], "03_execute"),
        ["safe-bash", "verification-before-done"]
    );

    let run = d.run("tidy the parser", json!({"team": "mixed"}));
    assert_eq!(d.wait(&run), "completed");
    let look = artifact(&d, &run, "prompts/01_look.md");
    let block = skills_block(&look);
    assert!(block.contains("### read-only-explorer"), "{look}");
    assert!(block.contains("HOUSE-STYLE-MARK"), "{block}");
    assert!(block.contains("`ghost` was selected"), "{block}");
    assert!(block.contains("skill text cut"), "the huge skill is cut");
    assert!(
        block.chars().count() < crew_core::skills::BLOCK_MAX + 600,
        "bounded: {} chars",
        block.chars().count()
    );
    assert_eq!(skills_block(&artifact(&d, &run, "prompts/02_plain.md")), "");
    assert_eq!(
        skills_block(&artifact(&d, &run, "prompts/03_change.md")),
        ""
    );
    // The fake runtime speaks pi: each installed skill is also a `--skill` directory, written
    // from the text frozen in the plan.
    let frozen = d
        .state_dir
        .join("runs")
        .join(&run)
        .join("skills/house-style/SKILL.md");
    let text = std::fs::read_to_string(&frozen).expect("skill file for pi");
    assert!(text.starts_with("---\nname: house-style\n") && text.contains("HOUSE-STYLE-MARK"));

    // Skills frozen at run.created: editing the file later changes nothing for this run.
    let created = d
        .events(Some(&run))
        .into_iter()
        .find(|e| e["type"] == "run.created")
        .unwrap();
    assert!(created.to_string().contains("HOUSE-STYLE-MARK"));

    let off = d.run("tidy", json!({"team": "mixed", "skills": false}));
    assert_eq!(d.wait(&off), "completed");
    assert_eq!(skills_block(&artifact(&d, &off, "prompts/01_look.md")), "");

    for bad in [json!("x"), json!(["../etc"]), json!([1])] {
        let e = d.err(
            "team.plan",
            json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "skills": bad}),
        );
        assert_eq!(code(&e), -32602, "{bad}: {e}");
    }
}

#[test]
fn one_agent_runs_without_a_team_file() {
    let d = daemon();
    let p = plan(&d, json!({"agent": "executor"}));
    assert_eq!(
        (p["team"].as_str(), p["workflow"].as_str()),
        (Some("direct-executor"), Some("direct-agent"))
    );
    assert_eq!(p["tasks"].as_array().unwrap().len(), 1);
    let run = d.run(
        "rename the flag",
        json!({"agent": "executor", "role": "reviewer"}),
    );
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    let t = Daemon::task(&st, "01_agent");
    assert_eq!(
        (t["role"].as_str(), t["agent"].as_str()),
        (Some("reviewer"), Some("executor"))
    );
    let prompt = artifact(&d, &run, "prompts/01_agent.md");
    assert!(prompt.contains("## Task\n\nrename the flag"), "{prompt}");
    assert!(
        skills_block(&prompt).contains("### multi-perspective-review"),
        "reviewer defaults"
    );

    let work = path_str(&d.work);
    for (params, field) in [
        (json!({"agent": "executor", "team": "default"}), "agent"),
        (json!({"role": "reviewer"}), "role"),
        (json!({"agent": "executor", "chain": ["default"]}), "chain"),
        (
            json!({"chain": ["default"], "workflow": "default"}),
            "chain",
        ),
        (json!({"chain": []}), "chain"),
    ] {
        let mut p = params.clone();
        p["goal"] = json!("g");
        p["cwd"] = json!(work);
        p["runtime"] = json!("fake");
        let e = d.err("team.run", p);
        assert_eq!(
            (code(&e), e["data"]["field"].as_str()),
            (-32602, Some(field)),
            "{params}: {e}"
        );
    }
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": work, "runtime": "fake", "agent": "ghost"}),
    );
    assert_eq!(code(&e), 1003, "{e}");
}

/// Teams `c1` (steps a, then b) and `c2` (step x), `c3` (step y), each task text given.
fn chain_teams(d: &Daemon, a: &str, x: &str, y: &str) {
    d.project_file(
        "teams/c1.team.md",
        "---\nname: c1\ndefaultWorkflow: c1\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/c1.workflow.md",
        &format!("---\nname: c1\n---\n\n## a\nrole: explorer\noutput: notes.md\n\n{a}\n\n## b\nrole: explorer\ndependsOn: a\n\nSum up.\n"),
    );
    one_step_team(d, "c2", x, "explorer");
    one_step_team(d, "c3", y, "explorer");
}

#[test]
fn a_chain_hands_each_team_the_previous_results() {
    let d = daemon();
    chain_teams(&d, "Find things.", "Use them.", "Finish.");
    let run = d.run("chain it", json!({"chain": ["c1", "c2", "c3"]}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    assert_eq!(st["run"]["team"], "c1+c2+c3", "{st}");
    let ids: Vec<&str> = st["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["01_a", "02_b", "03_only", "04_only"]);
    assert_eq!(Daemon::task(&st, "03_only")["dependsOn"], json!(["02_b"]));
    assert_eq!(
        Daemon::task(&st, "04_only")["dependsOn"],
        json!(["03_only"])
    );
    // The handoff: the previous team's result as a dependency output, its shared outputs read.
    let second = artifact(&d, &run, "prompts/03_only.md");
    assert!(
        second.contains("<dependency-output task=\"02_b\""),
        "{second}"
    );
    assert!(
        second.contains("<dependency-output shared=\"notes.md\">"),
        "{second}"
    );
    let third = artifact(&d, &run, "prompts/04_only.md");
    assert!(
        third.contains("<dependency-output task=\"03_only\""),
        "{third}"
    );
    assert!(!artifact(&d, &run, "shared/04_only.md").is_empty());
}

#[test]
fn cancel_and_resume_act_on_the_whole_chain_and_it_survives_kill_9() {
    let mut d = daemon();
    chain_teams(
        &d,
        "Find things. [fake:sleep=4s]",
        "Use them. [fake:sleep=3s]",
        "Finish.",
    );
    let run = d.run("chain it", json!({"chain": ["c1", "c2", "c3"]}));
    wait_for(&d, &run, |st| {
        Daemon::task(st, "01_a")["status"] == "running"
    });
    d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(d.wait(&run), "cancelled");
    let st = d.status(&run);
    for t in st["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "cancelled", "every team's tasks: {t}");
    }

    // Resume goes on with the whole chain; a kill -9 while the second team works loses nothing.
    // The workflow file changes meanwhile: the run does not read it again.
    d.project_file(
        "workflows/c1.workflow.md",
        "---\nname: c1\n---\n\n## a\nrole: explorer\n\nchanged file: not read by the run\n",
    );
    d.ok("team.resume", json!({"runId": run}));
    wait_for(&d, &run, |st| {
        Daemon::task(st, "03_only")["status"] == "running"
    });
    d.kill9();
    d.spawn(&[]);
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    for t in st["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed", "{t}");
    }
    // The plan was frozen at run.created: the edited workflow did not change the run.
    let prompt = artifact(&d, &run, "prompts/01_a.md");
    assert!(prompt.contains("Find things."), "{prompt}");
}

#[test]
fn a_budget_spans_the_whole_chain() {
    let d = daemon();
    chain_teams(
        &d,
        "Spend. [fake:tokens=2000]",
        "Spend more. [fake:tokens=2000]",
        "Never. [fake:tokens=2000]",
    );
    let run = d.run(
        "chain it",
        json!({"chain": ["c1", "c2", "c3"], "budget": {"tokens": 3000}}),
    );
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    assert_eq!(st["run"]["reason"], "budget_exceeded", "{st}");
    assert_eq!(Daemon::task(&st, "01_a")["status"], "completed");
    assert_ne!(
        Daemon::task(&st, "04_only")["status"],
        "completed",
        "the third team never ran: {st}"
    );
    assert!(Daemon::task(&st, "04_only")["startedAt"].is_null(), "{st}");
}

fn wait_for(d: &Daemon, run: &str, pred: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = d.status(run);
        if pred(&st) {
            return;
        }
        assert!(Instant::now() < deadline, "never happened: {st:#}");
        std::thread::sleep(Duration::from_millis(25));
    }
}
