//! Issue 15, "Tests": the real `pi` CLI edits a file in its task's git worktree. The stub model
//! (chat completions, pi's `openai-completions` provider) answers the executor's first request
//! with a call of pi's `write` tool; the file lands on the task's branch and on the run's
//! integrated branch, never in the user's checkout. A read-only role (explorer: pi runs it
//! without `write`) asked to write the same way does not change anything.
//!
//! pi is installed by `tests/pi/setup.sh` into `<repo>/.cache/pi` (or `$CREW_PI_DIR`); without
//! it `make test` leaves the test out and counts it as skipped.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_pi.rs"]
mod real_pi;

use common::*;
use model_stub::{Exchange, Reply, Stub, Wire};
use real_pi::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

const MODEL_ID: &str = "stub-model";
const WRITTEN: &str = "hello from the real pi\n";
/// Markers in the steps' task texts: the stub tells the two tasks' requests apart by them.
const EDIT_MARK: &str = "EDIT-STEP-MARKER";
const LOOK_MARK: &str = "LOOK-STEP-MARKER";

/// The tools a request offered the model, by name.
fn offered_tools(e: &Exchange) -> Vec<String> {
    e.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The stub's script: the first request of each step asks for a `write` (the explorer's for a
/// file of its own, which must not land); every later request (after the tool result) is text.
fn script(e: &Exchange) -> Reply {
    let texts = e.texts();
    if e.has_tool_result() {
        return Reply::Text(format!("STUB-DONE-{}", e.n));
    }
    if texts.contains(EDIT_MARK) {
        Reply::Tool {
            name: "write".into(),
            input: json!({"path": "greeting.txt", "content": WRITTEN}),
        }
    } else if texts.contains(LOOK_MARK) {
        Reply::Tool {
            name: "write".into(),
            input: json!({"path": "sneaky.txt", "content": "a reader wrote this\n"}),
        }
    } else {
        Reply::Text(format!("STUB-TEXT-{}", e.n))
    }
}

/// Every file outside `.git` (bytes), the index, HEAD and the user's own branches.
fn checksum(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out.insert(
        "<index>".into(),
        std::fs::read(dir.join(".git/index")).unwrap(),
    );
    out.insert(
        "<HEAD>".into(),
        git(dir, &["rev-parse", "HEAD"]).into_bytes(),
    );
    let branches = git(
        dir,
        &[
            "for-each-ref",
            "refs/heads",
            "--format=%(refname) %(objectname)",
        ],
    );
    let own: Vec<&str> = branches
        .lines()
        .filter(|l| !l.starts_with("refs/heads/crew/"))
        .collect();
    out.insert("<branches>".into(), own.join("\n").into_bytes());
    out
}

fn worktrees(dir: &Path) -> Vec<String> {
    git(dir, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_string)
        .collect()
}

#[test]
fn real_pi_writes_a_file_in_its_worktree() {
    let Some(pi) = pi_bin() else {
        not_installed("real_pi_writes_a_file_in_its_worktree");
    };
    let stub = Stub::start(Wire::Chat, script);
    let d = pi_daemon(&pi, &stub.base_url(), MODEL_ID, (0.0, 0.0));

    // The user's repository: one commit; the test's `.crew/` resources excluded.
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("README.md"), "# project\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    d.project_file(
        "teams/piwt.team.md",
        "---\nname: piwt\ndefaultWorkflow: piwt\n---\n\n\
         - exec: agent=executor\n- look: agent=explorer\n",
    );
    d.project_file(
        "workflows/piwt.workflow.md",
        &format!(
            "---\nname: piwt\n---\n\n\
             ## edit\nrole: exec\n\nWrite the greeting file. {EDIT_MARK}\n\n\
             ## look\nrole: look\ndependsOn: edit\n\nLook at the greeting. {LOOK_MARK}\n"
        ),
    );
    let before = checksum(w);

    let started = d.ok(
        "team.run",
        json!({
            "goal": "Add a greeting file",
            "cwd": path_str(w),
            "team": "piwt",
            "workspace": "worktree",
            "runtime": "pi",
            "model": format!("stub/{MODEL_ID}"),
        }),
    );
    let run = started["runId"].as_str().unwrap().to_string();
    let status = d.wait(&run);
    let st = d.status(&run);
    let exchanges = stub.exchanges();
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\nrequests: {}",
        stub.errors(),
        exchanges.len()
    );

    // pi offered the executor its write tool and ran the call in the task's worktree.
    let edit_first = exchanges
        .iter()
        .find(|e| e.texts().contains(EDIT_MARK) && !e.has_tool_result())
        .expect("the executor's first request");
    assert!(
        offered_tools(edit_first).iter().any(|t| t == "write"),
        "executor's tools: {:?}",
        offered_tools(edit_first)
    );
    let edit_after = exchanges
        .iter()
        .find(|e| e.texts().contains(EDIT_MARK) && e.has_tool_result())
        .expect("pi sent the write tool's result back");
    let worktree_root = d.state_dir.join("worktrees");
    assert!(
        !edit_after.texts().to_lowercase().contains("error"),
        "the write succeeded: {}",
        edit_after.texts()
    );

    let events = d.events(Some(&run));
    let commit_of = |task: &str| -> Value {
        events
            .iter()
            .find(|e| e["type"] == "task.completed" && e["taskId"] == task)
            .unwrap_or_else(|| panic!("no task.completed for {task}"))["data"]["commit"]
            .clone()
    };
    let edit = commit_of("01_edit");
    let edit_branch = format!("crew/tasks/{run}/01_edit");
    assert_eq!(edit["branch"], edit_branch, "{edit}");
    assert_eq!(edit["files"], 1, "{edit}");
    assert_eq!(
        git(w, &["show", &format!("{edit_branch}:greeting.txt")]),
        WRITTEN.trim_end()
    );
    assert_eq!(
        git(w, &["rev-parse", &edit_branch]),
        edit["commit"].as_str().unwrap()
    );
    let branch = format!("crew/{run}");
    assert_eq!(
        git(w, &["show", &format!("{branch}:greeting.txt")]),
        WRITTEN.trim_end()
    );

    // The explorer runs without `write`: its call is refused by pi and nothing lands.
    let look_first = exchanges
        .iter()
        .find(|e| e.texts().contains(LOOK_MARK) && !e.has_tool_result())
        .expect("the explorer's first request");
    assert!(
        !offered_tools(look_first).iter().any(|t| t == "write"),
        "explorer's tools: {:?}",
        offered_tools(look_first)
    );
    // pi answered the call with a tool error, which went back to the model.
    let look_after = exchanges
        .iter()
        .find(|e| e.texts().contains(LOOK_MARK) && e.has_tool_result())
        .expect("pi sent the refused call's result back");
    assert!(
        look_after.texts().contains("Tool write not found"),
        "{}",
        look_after.texts()
    );
    let look = commit_of("02_look");
    assert_eq!(look["files"], 0, "a reader changed nothing: {look}");
    let on_branch = git(w, &["ls-tree", "-r", "--name-only", &branch]);
    assert!(!on_branch.contains("sneaky.txt"), "{on_branch}");
    assert!(!w.join("sneaky.txt").exists());
    assert!(!w.join("greeting.txt").exists());

    assert_eq!(checksum(w), before, "the user's checkout is byte-identical");
    assert_eq!(worktrees(w), [path_str(w)], "no worktree left behind");
    let left: Vec<_> = std::fs::read_dir(&worktree_root)
        .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    let stale: Vec<_> = left
        .iter()
        .flat_map(|p| std::fs::read_dir(p).into_iter().flatten().flatten())
        // The run's `repo` file (naming the repository for forget/prune) is not a checkout.
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(stale.is_empty(), "worktree dirs left: {stale:?}");
}
