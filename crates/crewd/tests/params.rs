//! Issue 14, items 9 and 13: params that cannot work are refused at the call with -32602
//! naming the field, never acknowledged to fail later, and never a panic in a handler (which
//! leaves the client without an answer).
//!
//! Item 9 is a table: every duration, count and size field of every method, sent u64::MAX,
//! i64::MAX, i64::MIN, -1, 1e308, -1e308 and 1.5. Each must answer -32602 naming the field, or
//! a valid answer, and the daemon must still answer afterwards.

mod common;
use common::*;
use jsonrpsee::core::client::SubscriptionClientT;
use serde_json::{json, Value};

const HUGE: &[&str] = &[
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "-1",
    "1e308",
    "-1e308",
    "1.5",
];

/// Set `value` (raw JSON text) at the dotted `field` of `params`.
fn with_field(params: &Value, field: &str, value: &str) -> Value {
    let mut p = params.clone();
    let v: Value = serde_json::from_str(value).unwrap();
    let mut at = &mut p;
    let parts: Vec<&str> = field.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            at[*part] = v.clone();
        } else {
            if at.get(*part).is_none() {
                at[*part] = json!({});
            }
            at = &mut at[*part];
        }
    }
    p
}

/// The raw answer of a call whose params are `params`; serde_json writes `1e308` as is.
fn call(d: &Daemon, method: &str, params: &Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let (status, text) = d
        .http_raw(&body)
        .unwrap_or_else(|e| panic!("{method} {params}: no answer ({e})\n{}", d.log_text()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method}: {status} {e}: {text}"))
}

fn alive(d: &Daemon, after: &str) {
    let v = d
        .try_http("daemon.ping", json!({}))
        .unwrap_or_else(|e| panic!("the daemon stopped answering after {after}: {e}"));
    assert!(v.get("result").is_some(), "after {after}: {v}");
}

#[test]
fn every_number_param_takes_any_number() {
    let d = Daemon::start();
    let work = path_str(&d.work).to_string();
    let run_id = d.run("numbers [fake:sleep=0s]", json!({}));
    assert_eq!(d.wait(&run_id), "completed");
    let artifact = d.ok("team.artifacts", json!({"runId": run_id}))["artifacts"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let run = json!({"goal": "g", "cwd": work, "runtime": "fake"});
    let job = d.ok(
        "schedule.add",
        json!({"cron": "0 9 * * *", "run": run, "enabled": false}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();

    // (method, base params, field)
    let table: Vec<(&str, Value, &str)> = vec![
        ("team.run", run.clone(), "concurrency"),
        ("team.run", run.clone(), "budget.tokens"),
        (
            "team.run",
            with_field(&run, "budget.tokens", "1000"),
            "budget.warnAt",
        ),
        (
            "team.run",
            with_field(&run, "budget.tokens", "1000"),
            "budget.abortAt",
        ),
        ("team.plan", run.clone(), "concurrency"),
        ("team.plan", run.clone(), "budget.tokens"),
        (
            "team.plan",
            with_field(&run, "budget.tokens", "1000"),
            "budget.warnAt",
        ),
        (
            "team.plan",
            with_field(&run, "budget.tokens", "1000"),
            "budget.abortAt",
        ),
        ("team.list", json!({}), "limit"),
        ("team.wait", json!({"runId": run_id}), "timeoutMs"),
        ("team.events", json!({}), "afterSeq"),
        ("team.events", json!({}), "limit"),
        ("team.events", json!({"runId": run_id}), "afterSeq"),
        (
            "team.artifact",
            json!({"runId": run_id, "name": artifact}),
            "offset",
        ),
        (
            "team.artifact",
            json!({"runId": run_id, "name": artifact}),
            "limit",
        ),
        ("team.prune", json!({"keep": 1000}), "olderThanMs"),
        ("team.prune", json!({}), "keep"),
        (
            "schedule.add",
            json!({"run": run, "enabled": false}),
            "intervalMs",
        ),
        (
            "schedule.add",
            json!({"cron": "0 9 * * *", "run": run, "enabled": false}),
            "run.concurrency",
        ),
        (
            "schedule.add",
            json!({"cron": "0 9 * * *", "run": run, "enabled": false}),
            "run.budget.tokens",
        ),
        ("schedule.update", json!({"id": job}), "intervalMs"),
        (
            "schedule.update",
            json!({"id": job, "run": run}),
            "run.concurrency",
        ),
        ("schedule.preview", json!({"cron": "0 9 * * *"}), "count"),
    ];
    for (method, base, field) in &table {
        for value in HUGE {
            let params = with_field(base, field, value);
            let answer = call(&d, method, &params);
            let what = format!("{method} {field}={value}");
            if let Some(err) = answer.get("error") {
                // A refusal names the field; any other error must be an answer about the
                // state (crewd's codes from 1001), never an internal or protocol error.
                if err["code"] == -32602 {
                    assert_eq!(err["data"]["field"], *field, "{what}: {answer}");
                } else {
                    let code = err["code"].as_i64().unwrap_or(0);
                    assert!((1001..=1007).contains(&code), "{what}: {answer}");
                }
            } else {
                assert!(answer.get("result").is_some(), "{what}: {answer}");
            }
            alive(&d, &what);
        }
    }
    // team.prune kept every run: its keep is 1000.
    d.status(&run_id);
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribe_after_seq_takes_any_number() {
    let d = Daemon::start();
    let client = d.ws().await;
    for value in HUGE {
        let params: Value = serde_json::from_str(&format!("{{\"afterSeq\": {value}}}")).unwrap();
        match client
            .subscribe::<Value, _>(
                "team.subscribe",
                crew_api::client::ObjectParams(params),
                "team.unsubscribe",
            )
            .await
        {
            Ok(sub) => drop(sub),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("-32602") || text.contains("afterSeq"),
                    "{value}: {text}"
                );
                assert!(text.contains("afterSeq"), "{value}: {text}");
            }
        }
        alive(&d, &format!("team.subscribe afterSeq={value}"));
    }
}

#[test]
fn runs_that_can_never_start_are_refused() {
    let d = Daemon::start();
    let work = path_str(&d.work).to_string();
    let file = d.work.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let run = json!({"goal": "g", "cwd": work, "runtime": "fake"});
    // (params change, field)
    let mut table: Vec<(Value, &str)> = vec![
        (json!({"goal": "before\u{0}after"}), "goal"),
        (json!({"cwd": "/nonexistent/crew-test-cwd"}), "cwd"),
        (json!({"cwd": path_str(&file)}), "cwd"),
        (json!({"cwd": format!("{work}\u{0}/x")}), "cwd"),
        (json!({"model": "m\u{0}"}), "model"),
        (json!({"team": "default\u{0}"}), "team"),
        (json!({"workflow": "x\u{0}"}), "workflow"),
        (json!({"runtime": "fake\u{0}"}), "runtime"),
    ];
    let locked = d.work.join("locked");
    std::fs::create_dir(&locked).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root enters any directory; the case only means something for other users.
    if nix_euid() != 0 {
        table.push((json!({"cwd": path_str(&locked)}), "cwd"));
    }
    for (change, field) in &table {
        let mut params = run.clone();
        for (k, v) in change.as_object().unwrap() {
            params[k] = v.clone();
        }
        for method in ["team.run", "team.plan"] {
            let err = d.err(method, params.clone());
            assert_eq!(err["code"], -32602, "{method} {change}: {err}");
            assert_eq!(err["data"]["field"], *field, "{method} {change}: {err}");
        }
        let err = d.err(
            "schedule.add",
            json!({"cron": "0 9 * * *", "run": params, "enabled": false}),
        );
        assert_eq!(err["code"], -32602, "schedule.add {change}: {err}");
        assert_eq!(err["data"]["field"], format!("run.{field}"), "{err}");
    }
    // Nothing was acknowledged.
    assert_eq!(d.ok("team.list", json!({}))["runs"], json!([]));
    assert_eq!(d.ok("schedule.list", json!({}))["jobs"], json!([]));
    // Messages that become part of a prompt.
    for method in ["team.steer", "team.respond"] {
        let err = d.err(
            method,
            json!({"runId": "run_x", "taskId": "t", "message": "a\u{0}b"}),
        );
        assert_eq!(err["code"], -32602, "{method}: {err}");
        assert_eq!(err["data"]["field"], "message", "{method}: {err}");
    }
    for (method, params, field) in [
        ("resource.list", json!({"cwd": "/tmp\u{0}x"}), "cwd"),
        ("resource.validate", json!({"cwd": "/tmp\u{0}x"}), "cwd"),
        ("cache.invalidate", json!({"path": "/tmp\u{0}x"}), "path"),
    ] {
        let err = d.err(method, params);
        assert_eq!(err["code"], -32602, "{method}: {err}");
        assert_eq!(err["data"]["field"], field, "{method}: {err}");
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn nix_euid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

/// Issue 35: a runtime placed on Slurm needs worktree mode (a node works on a commit, not the
/// user's checkout): a shared-mode run of it is refused at the call, by `team.plan` too, and
/// nothing is started. No cluster is needed to be refused.
#[test]
fn a_slurm_runtime_in_shared_mode_is_refused() {
    let d = Daemon::start_with(Opts {
        config: format!(
            "[slurm]\ninterface = \"cli\"\nstaging_dir = {:?}\n\
             [runtimes.on-slurm]\nadapter = \"pi\"\ncommand = [\"/bin/true\"]\nplacement = \"slurm\"\n",
            std::env::temp_dir().join("crew-params-staging").display().to_string()
        ),
        env: vec![],
    });
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["commit", "-q", "--allow-empty", "-m", "init"]);
    let params = json!({"goal": "g", "cwd": path_str(w), "runtime": "on-slurm",
        "agent": "explorer", "workspace": "shared"});
    for method in ["team.run", "team.plan"] {
        let e = d.err(method, params.clone());
        assert_eq!(e["code"], 1003, "{method}: {e}");
        let msg = e["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("runs on Slurm") && msg.contains("worktree"),
            "{method}: {e}"
        );
    }
    assert_eq!(d.ok("team.list", json!({}))["runs"], json!([]));
}
