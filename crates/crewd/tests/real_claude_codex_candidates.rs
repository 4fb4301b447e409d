//! Issue 36 on the real Claude Code and Codex CLIs (pinned in `tests/agents/package.json`),
//! each against a scripted stub model on 127.0.0.1 (Anthropic Messages for Claude Code, OpenAI
//! Responses for Codex): one step with two candidates, one per CLI. Claude Code's change breaks
//! the repository's test, Codex's passes it; crew rules the first out by the verification
//! command, chooses the second, and `team.apply` brings it in.
//!
//! Without both installs `make test` leaves it out (tests/run.sh) and counts it skipped.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Reply, Stub, Wire};
use real_cli::*;
use serde_json::{json, Value};

const TEST_SH: &str = "r=$(sh add.sh 1 2)\nif [ \"$r\" = 3 ]; then echo TESTS-PASS; else echo \"TESTS-FAIL: add 1 2 gave $r\"; exit 1; fi\n";

#[test]
fn claude_and_codex_candidates_compete_and_the_passing_one_is_chosen() {
    let test = "claude_and_codex_candidates_compete_and_the_passing_one_is_chosen";
    let Some(claude) = agent_bin("claude") else {
        not_installed(test, "claude");
    };
    let Some(codex) = agent_bin("codex") else {
        not_installed(test, "codex");
    };
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    git(&w, &["init", "-q", "-b", "main"]);
    git(&w, &["config", "user.name", "user"]);
    git(&w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join("add.sh"), "#!/bin/sh\necho TODO\n").unwrap();
    std::fs::write(w.join("test.sh"), TEST_SH).unwrap();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "init"]);

    // Claude Code subtracts (the test fails); Codex adds (it passes).
    let anthropic = Stub::start(Wire::Anthropic, |e| {
        if e.has_tool_result() {
            Reply::Text("STUB: claude's candidate is done.".into())
        } else {
            Reply::Tool {
                name: "Bash".into(),
                input: json!({"command": "printf '#!/bin/sh\\necho $(($1 - $2))\\n' > add.sh",
                              "description": "write the script"}),
            }
        }
    });
    let responses = Stub::start(Wire::Responses, |e| {
        if e.has_tool_result() {
            Reply::Text("STUB: codex's candidate is done.".into())
        } else {
            Reply::Tool {
                name: "exec_command".into(),
                input: json!({"cmd": "printf '#!/bin/sh\\necho $(($1 + $2))\\n' > add.sh"}),
            }
        }
    });
    let codex_home = tempfile::Builder::new()
        .prefix("codex-home")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    std::fs::write(
        codex_home.path().join("config.toml"),
        codex_provider_toml(&responses),
    )
    .unwrap();
    let mut env = claude_env(&anthropic);
    let claude_names: Vec<String> = env.iter().map(|(k, _)| format!("{k:?}")).collect();
    env.push((
        "CODEX_HOME".to_string(),
        path_str(codex_home.path()).to_string(),
    ));
    env.push((
        "STUB_API_KEY".to_string(),
        "stub-key-not-secret".to_string(),
    ));
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.claude]\nadapter = \"claude\"\ncommand = [{claude:?}]\nenv = [{}]\n\
         [runtimes.codex]\nadapter = \"codex\"\ncommand = [{codex:?}]\n\
         env = [\"CODEX_HOME\", \"STUB_API_KEY\"]\n",
        claude_names.join(", "),
        claude = claude.display().to_string(),
        codex = codex.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    // A user file, not the project's: its verification command is trusted.
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join("teams/pair.team.md"),
        "---\nname: pair\ndefaultWorkflow: pair\n---\n\n- executor: agent=executor\n",
    )
    .unwrap();
    std::fs::write(
        base.join("workflows/pair.workflow.md"),
        format!(
            "---\nname: pair\n---\n\n## add\nrole: executor\ncandidates: [claude/{MODEL}, codex/{MODEL}]\n\
             select: smallest\nverifyCommands: sh test.sh\n\nMake add.sh print the sum of its two arguments.\n"
        ),
    )
    .unwrap();
    let run = d.ok(
        "team.run",
        json!({"goal": "add", "cwd": path_str(&w), "team": "pair", "workspace": "worktree",
               "runtime": "claude"}),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let status = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?} {:?}\ndaemon log tail:\n{}",
        anthropic.errors(),
        responses.errors(),
        tail(&d.log_text(), 6000)
    );
    let evs = d.events(Some(&run));
    let of = |kind: &str, task: &str| -> Vec<&Value> {
        evs.iter()
            .filter(|e| e["type"] == kind && e["taskId"] == task)
            .collect()
    };
    let started1 = of("task.started", "_cand-01_add-1");
    let started2 = of("task.started", "_cand-01_add-2");
    assert_eq!(started1[0]["data"]["runtime"], "claude");
    assert_eq!(started2[0]["data"]["runtime"], "codex");
    let c1 = Daemon::task(&st, "_cand-01_add-1");
    assert!(
        c1["candidates"]["failedChecks"][0]
            .as_str()
            .unwrap()
            .contains("TESTS-FAIL"),
        "{c1}"
    );
    let chosen = of("task.candidate_chosen", "01_add");
    assert_eq!(chosen.len(), 1);
    assert_eq!(chosen[0]["data"]["choice"]["index"], 2, "{}", chosen[0]);
    // Each CLI's usage is its own candidate's.
    for k in 1..=2 {
        let c = Daemon::task(&st, &format!("_cand-01_add-{k}"));
        assert!(c["usage"]["input"].as_u64().unwrap_or(0) > 0, "{c}");
    }
    d.ok("team.apply", json!({"runId": run}));
    let out = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&w)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
