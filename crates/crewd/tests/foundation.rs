//! Issue 2: the daemon serving JSON-RPC on its socket, resources, team.plan, bad input.

mod common;
use common::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

#[test]
fn ping_status_and_discover_over_http() {
    let d = Daemon::start();
    let ping = d.ok("daemon.ping", json!({}));
    assert_eq!(ping["pid"], d.pid());
    let st = d.ok("daemon.status", json!({}));
    assert_eq!(st["socket"], path_str(&d.socket));
    assert_eq!(st["workers"]["max"], 8);
    let doc = d.ok("rpc.discover", json!({}));
    assert_eq!(doc["openrpc"], "1.3.2");
    assert_eq!(
        doc,
        serde_json::to_value(crew_api::openrpc::document()).unwrap()
    );
}

#[test]
fn socket_and_directory_permissions() {
    let d = Daemon::start();
    let sock = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    let dir = std::fs::metadata(d.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!((sock, dir), (0o600, 0o700));
}

#[test]
fn plan_of_the_default_team() {
    let d = Daemon::start();
    let plan = d.ok(
        "team.plan",
        json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake"}),
    );
    let ids: Vec<(&str, Vec<&str>)> = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap(),
                t["dependsOn"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        vec![
            ("01_explore", vec![]),
            ("02_plan", vec!["01_explore"]),
            ("03_execute", vec!["02_plan"]),
            ("04_verify", vec!["03_execute"])
        ]
    );
    // Nothing stored.
    assert_eq!(
        d.ok("team.list", json!({}))["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn bad_input_gets_standard_errors_and_the_daemon_serves_on() {
    let d = Daemon::start();
    let (_, body) = d.http_raw("{not json").unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32700);
    let (_, body) = d.http_raw(r#"{"jsonrpc":"2.0","id":1}"#).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert_eq!(d.err("no.such.method", json!({}))["code"], -32601);
    let e = d.err("team.plan", json!({"cwd": "/"}));
    assert_eq!(
        (e["code"].as_i64(), e["data"]["field"].as_str()),
        (Some(-32602), Some("goal"))
    );
    let e = d.err("team.plan", json!({"goal": 5, "cwd": "/"}));
    assert_eq!(
        (e["code"].as_i64(), e["data"]["field"].as_str()),
        (Some(-32602), Some("goal"))
    );
    // Over the body limit (1 MiB).
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(2 << 20)
    );
    let (status, _) = d.http_raw(&big).unwrap();
    assert_eq!(status, 413);
    // A batch over the batch limit.
    let batch: Vec<_> = (0..100)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"daemon.ping"}))
        .collect();
    let (_, body) = d.http_raw(&serde_json::to_string(&batch).unwrap()).unwrap();
    assert!(
        body.contains("-32010") || body.contains("too large") || body.contains("Batch"),
        "{body}"
    );
    // A subscription over plain HTTP says what it needs instead of "Internal error".
    let e = d.err("team.subscribe", json!({}));
    assert_eq!(e["code"], -32600, "{e}");
    assert!(e["message"].as_str().unwrap().contains("WebSocket"), "{e}");
    // Still serving.
    d.ok("daemon.ping", json!({}));
}

#[test]
fn broken_resources_give_diagnostics_not_crashes() {
    let d = Daemon::start();
    d.project_file("agents/garbage.md", "\u{0}\u{1}\u{2}\u{fffd}binary");
    std::fs::write(
        d.work.join(".crew/agents/bin.md"),
        [0u8, 159, 146, 150, 0, 1],
    )
    .unwrap();
    d.project_file(
        "workflows/loop.workflow.md",
        "---\nname: loop\n---\n\n## a\nrole: explorer\ndependsOn: b\n\nA\n\n## b\nrole: explorer\ndependsOn: a\n\nB\n",
    );
    d.project_file(
        "teams/ghosts.team.md",
        "---\nname: ghosts\n---\n\n- explorer: agent=nobody-here\n",
    );
    let v = d.ok("resource.validate", json!({"cwd": path_str(&d.work)}));
    assert_eq!(v["ok"], false);
    let diags = v["diagnostics"].as_array().unwrap();
    let text = serde_json::to_string(diags).unwrap();
    assert!(
        text.contains("a -> b -> a") || text.contains("b -> a -> b"),
        "{text}"
    );
    assert!(text.contains("nobody-here"), "{text}");
    assert!(
        diags
            .iter()
            .any(|d| d["path"].as_str().unwrap().ends_with("bin.md")),
        "{text}"
    );
    let cycle = diags
        .iter()
        .find(|d| d["message"].as_str().unwrap().contains("->"))
        .unwrap();
    assert!(
        cycle["line"].as_u64().is_some()
            && cycle["path"]
                .as_str()
                .unwrap()
                .ends_with("loop.workflow.md")
    );
    // The other resources are still there.
    let l = d.ok("resource.list", json!({"cwd": path_str(&d.work)}));
    assert!(l["teams"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "default"));
    d.ok("daemon.ping", json!({}));
}

#[test]
fn second_daemon_on_the_same_state_dir_fails_fast() {
    let d = Daemon::start();
    let out = std::process::Command::new(crewd_bin())
        .arg("--socket")
        .arg(d.dir.path().join("other.sock"))
        .arg("--state-dir")
        .arg(&d.state_dir)
        .env("HOME", &d.home)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("pid {}", d.pid())), "{err}");
}

#[test]
fn config_with_a_typo_is_refused_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "max_workers = 4\nmax_wrokers = 2\n").unwrap();
    let out = std::process::Command::new(crewd_bin())
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:2", cfg.display())) && err.contains("max_wrokers"),
        "{err}"
    );
}

#[test]
fn stale_socket_is_replaced_and_sigterm_removes_the_socket() {
    let mut d = Daemon::start();
    d.kill9();
    assert!(d.socket.exists(), "kill -9 leaves the socket file behind");
    d.spawn(&[]);
    d.ok("daemon.ping", json!({}));
    let status = d.stop();
    assert!(status.success(), "{status}");
    assert!(!d.socket.exists());
}

#[tokio::test]
async fn websocket_calls_work() {
    let d = Daemon::start();
    let c = d.ws().await;
    let r = d
        .call::<crew_api::methods::DaemonPing>(&c, Default::default())
        .await
        .unwrap();
    assert_eq!(r.pid, d.pid());
    let e = d
        .call::<crew_api::methods::TeamStatus>(
            &c,
            crew_api::types::RunIdParams {
                run_id: "nope".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(1001));
}

/// `team.list` pages newest first: a page's `next` is the following page's `before`, and pages
/// neither overlap nor skip a run, with or without a status filter.
#[test]
fn team_list_pages_newest_first_without_gaps() {
    let d = Daemon::start();
    for i in 0..7 {
        let r = d.ok(
            "team.run",
            json!({"goal": format!("page {i}"), "cwd": path_str(&d.work), "runtime": "fake"}),
        );
        if i % 2 == 0 {
            d.ok("team.cancel", json!({"runId": r["runId"]}));
        }
        d.ok("team.wait", json!({"runId": r["runId"]}));
    }
    let listed = |params: serde_json::Value| -> (Vec<(String, String)>, Option<String>) {
        let r = d.ok("team.list", params);
        let runs = r["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| {
                (
                    run["id"].as_str().unwrap().to_string(),
                    run["status"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (runs, r["next"].as_str().map(str::to_string))
    };
    let paged = |filter: serde_json::Value| {
        let mut got = Vec::new();
        let mut before: Option<String> = None;
        for _ in 0..10 {
            let mut params = json!({"limit": 3});
            if let Some(b) = &before {
                params["before"] = json!(b);
            }
            if let Some(status) = filter.as_str() {
                params["status"] = json!(status);
            }
            let (runs, next) = listed(params);
            got.extend(runs);
            match next {
                Some(n) => before = Some(n),
                None => return got,
            }
        }
        panic!("more pages than runs: {got:?}");
    };

    let (all, next) = listed(json!({"limit": 100}));
    assert_eq!((all.len(), next), (7, None));
    let mut newest_first = all.clone();
    newest_first.sort_by(|a, b| b.0.cmp(&a.0));
    assert_eq!(all, newest_first);
    assert_eq!(paged(json!(null)), all);

    for status in ["completed", "cancelled"] {
        let with_status: Vec<_> = all.iter().filter(|r| r.1 == status).cloned().collect();
        assert_eq!(paged(json!(status)), with_status, "{status}");
    }
}
