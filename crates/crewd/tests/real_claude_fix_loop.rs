//! Issue 30 on the real Claude Code CLI (pinned in `tests/agents/package.json`) against a
//! scripted Anthropic Messages stub on 127.0.0.1: in a repository with a test suite made here,
//! the executor's first change breaks the test, the verifier runs it and answers FAIL, crew's
//! fix task repairs it, the verifier answers PASS, the run completes, `team.apply` takes the
//! result and the repository's tests pass.
//!
//! Without the install `make test` leaves it out (tests/run.sh) and counts it skipped.

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

fn bash(command: &str) -> Reply {
    Reply::Tool {
        name: "Bash".into(),
        input: json!({"command": command, "description": "edit or test the script"}),
    }
}

/// The scripted model: explorer and planner answer in words; the executor writes a broken
/// `add.sh`; crew's fix task (its prompt says the judge judges again) writes the right one;
/// the verifier runs the tests and answers by their output.
fn script(e: &model_stub::Exchange) -> Reply {
    let texts = e.texts();
    let is_fix = texts.contains("judges the result again after you");
    let role = if is_fix { "fixer" } else { role_of(e) };
    match (role, e.has_tool_result()) {
        ("executor", false) => bash("printf '#!/bin/sh\\necho $(($1 - $2))\\n' > add.sh"),
        ("fixer", false) => bash("printf '#!/bin/sh\\necho $(($1 + $2))\\n' > add.sh"),
        ("verifier", false) => bash("sh test.sh"),
        ("verifier", true) if texts.contains("TESTS-PASS") => {
            Reply::Text("PASS\nEvidence: sh test.sh printed TESTS-PASS.".into())
        }
        ("verifier", true) => Reply::Text(
            "FAIL\nEvidence: sh test.sh failed: add.sh subtracts instead of adding.".into(),
        ),
        (role, _) => Reply::Text(format!("STUB: the {role} is done.")),
    }
}

#[test]
fn a_failing_verifier_is_fixed_on_the_real_claude_cli() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    git(&w, &["init", "-q", "-b", "main"]);
    git(&w, &["config", "user.name", "user"]);
    git(&w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join("add.sh"), "#!/bin/sh\necho TODO\n").unwrap();
    std::fs::write(w.join("test.sh"), TEST_SH).unwrap();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "init"]);

    let stub = Stub::start(Wire::Anthropic, script);
    let Some(claude) = agent_bin("claude") else {
        not_installed(
            "a_failing_verifier_is_fixed_on_the_real_claude_cli",
            "claude",
        );
    };
    let env = claude_env(&stub);
    let names: Vec<String> = env.iter().map(|(k, _)| format!("{k:?}")).collect();
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.claude]\nadapter = \"claude\"\ncommand = [{claude:?}]\nenv = [{}]\n",
        names.join(", "),
        claude = claude.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    let run = d.ok(
        "team.run",
        json!({
            "goal": "Make add.sh print the sum of its two arguments; sh test.sh must pass.",
            "cwd": path_str(&w), "team": "default", "workspace": "worktree",
            "runtime": "claude", "model": MODEL,
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let status = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\ndaemon log tail:\n{}",
        stub.errors(),
        tail(&d.log_text(), 6000)
    );
    let evs = d.events(Some(&run));
    let of = |kind: &str| -> Vec<&Value> { evs.iter().filter(|e| e["type"] == kind).collect() };
    let added = of("task.fix_added");
    assert_eq!(added.len(), 1, "one fix round");
    assert_eq!(
        added[0]["message"],
        "04_verify: fail, 1 finding → _fix-04_verify-1"
    );
    let verdicts: Vec<&Value> = of("task.completed")
        .into_iter()
        .filter(|e| e["taskId"] == "04_verify")
        .map(|e| &e["data"]["verdict"]["verdict"])
        .collect();
    assert_eq!(verdicts, [&json!("fail"), &json!("pass")]);
    assert_eq!(st["run"]["verdict"], "pass");
    // The fix task was told what the verifier found.
    let fix_prompt = stub
        .exchanges()
        .into_iter()
        .find(|e| e.texts().contains("judges the result again after you"))
        .expect("the fix task reached the model");
    assert!(fix_prompt.texts().contains("subtracts instead of adding"));

    d.ok("team.apply", json!({"runId": run}));
    let out = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&w)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the repository's tests after apply: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
