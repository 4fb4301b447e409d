//! Issue 31 on the real Claude Code CLI (pinned in `tests/agents/package.json`) against a
//! scripted Anthropic Messages stub on 127.0.0.1: in a repository made here (a word list and
//! its `check.sh`), two executors running in parallel each add their own word at the end of
//! the list; the task that needs both finds their results conflicting, crew adds a resolve
//! task, and Claude Code (the builtin `resolver`) reads the file with the markers, edits the
//! conflict away keeping both words and runs the check. The run goes on from the resolution
//! and completes; `crewctl apply` brings it onto the user's branch, where `sh check.sh` passes
//! with both words in the list. Once with a third task needing both (the merge of its inputs
//! conflicts), once with the two as the run's leaves (the integration conflicts; there the
//! resolver commits its resolution itself, as agents often do, and that commit is the result).
//!
//! Without the install `make test` leaves it out (tests/run.sh) and counts it skipped.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Exchange, Reply, Stub, Wire};
use real_cli::*;
use serde_json::{json, Value};
use std::path::Path;

/// The repository's test command: one lowercase word a line, none twice (a conflict marker
/// left in the list fails it).
const CHECK_SH: &str = "#!/bin/sh\n\
bad=$(grep -nvE '^[a-z]+$' words.txt)\n\
if [ -n \"$bad\" ]; then echo \"CHECK-FAIL: not a word: $bad\"; exit 1; fi\n\
dup=$(sort words.txt | uniq -d)\n\
if [ -n \"$dup\" ]; then echo \"CHECK-FAIL: twice: $dup\"; exit 1; fi\n\
echo \"CHECK-PASS: $(wc -l < words.txt) words\"\n";

/// The two executors' tasks (each side's task text is quoted in the resolver's prompt).
const GAMMA: &str = "Append the word gamma as the last line of words.txt.";
const DELTA: &str = "Append the word delta as the last line of words.txt.";
/// The task that needs both.
const JOIN: &str = "Run sh check.sh on the word list and save what it prints in report.txt.";
/// What only the resolve task's text asks (crew-core's `run/resolve.rs`).
const RESOLVER_ASK: &str = "remove every conflict marker";
/// In the goal of the run whose resolver commits its resolution itself.
const SELF_COMMIT: &str = "(the resolver commits)";
/// The first words of the builtin resolver's system prompt.
const RESOLVER_SYSTEM: &str = "You resolve merge conflicts.";

fn tool(name: &str, input: Value) -> Reply {
    Reply::Tool {
        name: name.into(),
        input,
    }
}

fn bash(command: &str) -> Reply {
    tool(
        "Bash",
        json!({"command": command, "description": "edit or check the word list"}),
    )
}

/// The last tool result's text in the conversation so far.
fn last_tool_result(body: &Value) -> String {
    last_result(body).0
}

/// The last tool result in the conversation so far: its text, and whether Claude Code marked
/// it an error.
fn last_result(body: &Value) -> (String, bool) {
    find_all(body, &|o| {
        (o.get("type")?.as_str()? == "tool_result").then(|| {
            let error = o.get("is_error").and_then(Value::as_bool) == Some(true);
            let mut s = String::new();
            match o.get("content") {
                Some(Value::String(t)) => s.push_str(t),
                Some(Value::Array(parts)) => {
                    for p in parts {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            s.push_str(t);
                        }
                    }
                }
                _ => {}
            }
            (s, error)
        })
    })
    .pop()
    .unwrap_or_default()
}

/// The directory Claude Code says it works in (its system prompt's environment section).
fn working_dir(e: &Exchange) -> Option<String> {
    let texts = e.texts();
    let at = texts.find("orking directory: ")?;
    let rest = &texts[at + "orking directory: ".len()..];
    let dir = rest.split_whitespace().next()?;
    dir.starts_with('/').then(|| dir.to_string())
}

/// How many tool calls the model made in the conversation so far.
fn tool_calls(body: &Value) -> usize {
    find_all(body, &|o| {
        (o.get("type")?.as_str()? == "tool_use").then_some(())
    })
    .len()
}

/// The `git diff <start> <commit>` commands the resolver's prompt gives for the sides.
fn side_diffs(texts: &str) -> Vec<String> {
    texts
        .split('`')
        .filter(|s| {
            let w: Vec<&str> = s.split(' ').collect();
            w.len() == 4
                && w[..2] == ["git", "diff"]
                && w[2..]
                    .iter()
                    .all(|c| c.len() >= 7 && c.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .map(str::to_string)
        .collect()
}

/// A `Read` result's file text: Claude Code numbers each line (`   3→text`, older versions
/// `   3\ttext`); the numbers are dropped.
fn read_lines(result: &str) -> Vec<String> {
    result
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return None;
            }
            let rest = &t[digits..];
            rest.strip_prefix('→')
                .or_else(|| rest.strip_prefix('\t'))
                .map(str::to_string)
        })
        .collect()
}

/// The resolver's edit of what it read: the conflict block (from `<<<<<<< ` through
/// `>>>>>>> `) replaced by both sides' lines, ours then theirs. `None` without a conflict.
fn resolve_edit(lines: &[String]) -> Option<(String, String)> {
    let start = lines.iter().position(|l| l.starts_with("<<<<<<< "))?;
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.starts_with(">>>>>>> "))?;
    let block = &lines[start..=end];
    let sides: Vec<&str> = block
        .iter()
        .filter(|l| {
            !(l.starts_with("<<<<<<< ")
                || l.starts_with(">>>>>>> ")
                || l.starts_with("=======")
                || l.starts_with("||||||| "))
        })
        .map(String::as_str)
        .collect();
    Some((block.join("\n"), sides.join("\n")))
}

/// The scripted model. The resolver (its task asks to remove every marker) looks at each
/// side's change, reads the list, edits the conflict away keeping both sides, runs the check
/// and reports; each executor
/// appends its word with Bash; the join saves the check's output in `report.txt`.
fn script(e: &Exchange) -> Reply {
    let texts = e.texts();
    let last = last_call(&e.body);
    if texts.contains(RESOLVER_ASK) {
        let Some(dir) = working_dir(e) else {
            return Reply::Text("STUB-NO-CWD: no working directory in the request".into());
        };
        let file = format!("{dir}/words.txt");
        return match tool_calls(&e.body) {
            // First what each side changed, by the commands the prompt gives.
            0 => bash(&side_diffs(&texts).join("; ")),
            1 => tool("Read", json!({"file_path": file})),
            2 => {
                let lines = read_lines(&last_tool_result(&e.body));
                match resolve_edit(&lines) {
                    Some((old, new)) => tool(
                        "Edit",
                        json!({"file_path": file, "old_string": old, "new_string": new}),
                    ),
                    None => Reply::Text(format!("STUB-NO-CONFLICT in what was read: {lines:?}")),
                }
            }
            // As agents often do, despite the resolver's prompt: its own commit is its result.
            3 if texts.contains(SELF_COMMIT) => {
                bash("sh check.sh && git add -A && git commit -qm 'resolve words.txt'")
            }
            3 => bash("sh check.sh"),
            _ => Reply::Text(format!(
                "Summary: resolved words.txt keeping both words.\nFiles resolved: words.txt: \
                 both appended words kept, the one after the other.\nCommands run: sh check.sh: {}",
                last_tool_result(&e.body).trim()
            )),
        };
    }
    if texts.contains(JOIN) {
        return match last {
            None => bash("sh check.sh > report.txt; cat report.txt"),
            Some(_) => Reply::Text(format!("JOIN-REPORT: {}", last_tool_result(&e.body).trim())),
        };
    }
    for (task, word) in [(GAMMA, "gamma"), (DELTA, "delta")] {
        if texts.contains(task) {
            return match last {
                None => bash(&format!("printf '{word}\\n' >> words.txt")),
                Some(_) => Reply::Text(format!("STUB: {word} appended.")),
            };
        }
    }
    Reply::Text("STUB: nothing to do.".into())
}

fn commit_of(evs: &[Value], task: &str) -> String {
    evs.iter()
        .find(|e| e["type"] == "task.completed" && e["taskId"] == task)
        .unwrap_or_else(|| panic!("no task.completed for {task}"))["data"]["commit"]["commit"]
        .as_str()
        .unwrap()
        .to_string()
}

fn file_at(w: &Path, commit: &str, path: &str) -> String {
    git(w, &["show", &format!("{commit}:{path}")])
}

fn is_ancestor(w: &Path, a: &str, b: &str) -> bool {
    std::process::Command::new("git")
        .args(["merge-base", "--is-ancestor", a, b])
        .current_dir(w)
        .status()
        .unwrap()
        .success()
}

#[test]
fn claude_code_resolves_a_conflict_of_two_parallel_tasks() {
    resolves_on_the_real_cli(
        "claude_code_resolves_a_conflict_of_two_parallel_tasks",
        true,
    );
}

#[test]
fn claude_code_resolves_a_conflict_of_the_leaves_into_the_integration() {
    resolves_on_the_real_cli(
        "claude_code_resolves_a_conflict_of_the_leaves_into_the_integration",
        false,
    );
}

/// Two executors in parallel append their word to the list; with `join` a third task needs
/// both (the merge of its inputs conflicts), without it the integration of the two leaves
/// conflicts. Claude Code resolves; the run completes; `crewctl apply`; the check passes.
fn resolves_on_the_real_cli(test: &str, join: bool) {
    let Some(claude) = agent_bin("claude") else {
        not_installed(test, "claude");
    };
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    git(&w, &["init", "-q", "-b", "main"]);
    git(&w, &["config", "user.name", "user"]);
    git(&w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join("words.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(w.join("check.sh"), CHECK_SH).unwrap();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "init"]);

    let stub = Stub::start(Wire::Anthropic, script);
    let env = claude_env(&stub);
    let names: Vec<String> = env.iter().map(|(k, _)| format!("{k:?}")).collect();
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.claude]\nadapter = \"claude\"\ncommand = [{claude:?}]\nenv = [{}]\n",
        names.join(", "),
        claude = claude.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    // The user's team: two executors in parallel, and (with `join`) a third that needs both.
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join("teams/words.team.md"),
        "---\nname: words\ndefaultWorkflow: words\n---\n\n- executor: agent=executor\n",
    )
    .unwrap();
    let mut workflow = format!(
        "---\nname: words\n---\n\n## gamma\nrole: executor\n\n{GAMMA}\n\n\
         ## delta\nrole: executor\n\n{DELTA}\n\n"
    );
    if join {
        workflow.push_str(&format!(
            "## join\nrole: executor\ndependsOn: gamma, delta\n\n{JOIN}\n"
        ));
    }
    std::fs::write(base.join("workflows/words.workflow.md"), workflow).unwrap();
    // The integration's resolver commits its work itself; the join's leaves it to crew.
    let goal = if join {
        "grow the word list".to_string()
    } else {
        format!("grow the word list {SELF_COMMIT}")
    };
    let run = d.ok(
        "team.run",
        json!({"goal": goal, "cwd": path_str(&w), "team": "words",
               "workspace": "worktree", "runtime": "claude", "model": MODEL}),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let st = wait_completed(&d, &run, &stub);

    // One resolve task, between the conflicting tasks and the one that needed them (the
    // integration without `join`).
    let evs = d.events(Some(&run));
    let added: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "task.resolve_added")
        .collect();
    assert_eq!(added.len(), 1, "one resolve task: {added:?}");
    let (needing, id) = if join {
        ("03_join", "_resolve-03_join-1".to_string())
    } else {
        ("integration", format!("_resolve-{run}-1"))
    };
    if join {
        assert_eq!(added[0]["taskId"], "03_join");
    }
    assert_eq!(
        added[0]["message"],
        format!("{needing}: conflict in words.txt (01_gamma × 02_delta) → {id}")
    );
    let id = id.as_str();
    let r = Daemon::task(&st, id);
    assert_eq!(r["agent"], "resolver", "{r:#}");
    assert_eq!(r["status"], "completed", "{r:#}");
    assert_eq!(r["attempts"], 1, "resolved at the first attempt: {r:#}");

    // What Claude Code was told: the resolver's system prompt, the conflicting path, each
    // side's task; and what it saw: the file with the markers.
    let ex = stub.exchanges();
    let mine: Vec<&Exchange> = ex
        .iter()
        .filter(|e| e.texts().contains(RESOLVER_ASK))
        .collect();
    let first = mine.first().expect("the resolver reached the model");
    let texts = first.texts();
    for want in [
        RESOLVER_SYSTEM,
        "Conflicting paths: words.txt",
        GAMMA,
        DELTA,
    ] {
        assert!(texts.contains(want), "the resolver's prompt lacks {want:?}");
    }
    let tools: Vec<String> = offered_tools(&first.body)
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    for t in ["Read", "Edit", "Write", "Bash"] {
        assert!(
            tools.iter().any(|n| n == t),
            "{t} not offered to the resolver: {tools:?}"
        );
    }
    let calls: Vec<String> = mine.iter().filter_map(|e| last_call(&e.body)).collect();
    assert_eq!(
        calls,
        ["Bash", "Read", "Edit", "Bash"],
        "the resolver's tool calls"
    );
    // Each side's change, by the command its prompt names, in the resolver's box.
    let diffs = side_diffs(&texts);
    assert_eq!(diffs.len(), 2, "one diff command per side: {diffs:?}");
    let (shown, failed) = last_result(&mine[1].body);
    assert!(
        !failed && shown.contains("+gamma") && shown.contains("+delta"),
        "the sides' diffs in the resolver's box: {shown}"
    );
    let read = last_tool_result(&mine[2].body);
    assert!(
        read.contains("<<<<<<< ") && read.contains(">>>>>>> "),
        "the resolver's worktree holds the markers: {read}"
    );
    let (edited, failed) = last_result(&mine[3].body);
    assert!(!failed, "the Edit went through: {edited}");
    let checked = last_tool_result(&mine[4].body);
    assert!(checked.contains("CHECK-PASS: 4 words"), "{checked}");

    // The resolver started from every input merged with the markers, and its commit has
    // both inputs as ancestors, both words, and no marker.
    let wsr = &st["workspace"]["tasks"][id];
    let (start, resolved) = (
        wsr["start"].as_str().unwrap(),
        wsr["commit"].as_str().unwrap(),
    );
    assert!(
        file_at(&w, start, "words.txt").contains("<<<<<<< "),
        "{st:#}"
    );
    let gamma = commit_of(&evs, "01_gamma");
    let delta = commit_of(&evs, "02_delta");
    for input in [&gamma, &delta] {
        assert!(
            is_ancestor(&w, input, resolved),
            "{input} is not an ancestor of the resolution {resolved}"
        );
    }
    assert_eq!(
        file_at(&w, resolved, "words.txt"),
        "alpha\nbeta\ngamma\ndelta"
    );

    if join {
        join_went_on(&d, &run, &w, &st, &evs, resolved);
    } else {
        // Claude Code's own commit is the resolution, nothing of crew's on top.
        assert_eq!(
            git(&w, &["log", "-1", "--format=%s", resolved]),
            "resolve words.txt"
        );
        assert_eq!(st["workspace"]["integrated"]["commit"], resolved, "{st:#}");
    }

    // `crewctl apply`, as the user would; the repository's test passes on their branch with
    // both intents in the list.
    let out = std::process::Command::new(crewctl_bin())
        .arg("--socket")
        .arg(&d.socket)
        .args(["apply", &run])
        .current_dir(&w)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "crewctl apply: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(git(&w, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    let head = git(&w, &["rev-parse", "HEAD"]);
    assert!(
        is_ancestor(&w, resolved, &head),
        "the resolution is on main"
    );
    let out = std::process::Command::new("sh")
        .arg("check.sh")
        .current_dir(&w)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "sh check.sh on main: {printed}");
    let words = std::fs::read_to_string(w.join("words.txt")).unwrap();
    assert!(
        words.lines().any(|l| l == "gamma") && words.lines().any(|l| l == "delta"),
        "both intents on main: {words:?}"
    );
    if join {
        let report = std::fs::read_to_string(w.join("report.txt")).unwrap();
        assert_eq!(report, "CHECK-PASS: 4 words\n", "the join's report on main");
    }
}

/// The join started from the resolution and its check passed there.
fn join_went_on(d: &Daemon, run: &str, w: &Path, st: &Value, evs: &[Value], resolved: &str) {
    let joined = commit_of(evs, "03_join");
    assert!(
        file_at(w, &joined, "report.txt").contains("CHECK-PASS: 4 words"),
        "{}",
        file_at(w, &joined, "report.txt")
    );
    assert_eq!(
        st["workspace"]["tasks"]["03_join"]["start"], resolved,
        "{st:#}"
    );
    let join = Daemon::task(st, "03_join");
    assert!(
        result_text(d, run, join).contains("CHECK-PASS: 4 words"),
        "{}",
        result_text(d, run, join)
    );
}
