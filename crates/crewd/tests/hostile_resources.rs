//! Issue 14: what a cloned repository's `.crew/`, a bundle or a template can do to crewd.
//! Every case gives a diagnostic or a refusal; the daemon keeps answering and the other
//! resources keep loading.

mod common;
use common::*;
use serde_json::{json, Value};
use std::path::Path;

fn diags_for<'a>(list: &'a Value, needle: &str) -> Vec<&'a Value> {
    list["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["path"].as_str().unwrap_or("").contains(needle))
        .collect()
}

fn names(list: &Value, kind: &str) -> Vec<String> {
    list[kind]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

fn hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn chain_workflow(steps: usize) -> String {
    let mut wf = String::from("---\nname: chain\n---\n");
    for i in 0..steps {
        wf.push_str(&format!("\n## s{i}\nrole: explorer\n"));
        if i > 0 {
            wf.push_str(&format!("dependsOn: s{}\n", i - 1));
        }
    }
    wf
}

/// Symlinks out of the project, FIFOs, sockets, a 1 GiB sparse file, a 10,000-step chain and
/// binary junk in one `.crew/`: `resource.list` answers with a diagnostic for each, the good
/// files load, nothing outside the project is read, and memory stays flat.
#[test]
fn hostile_project_directory() {
    let d = Daemon::start();
    let good = d.project_file("agents/good.md", "---\nname: good\n---\nA good agent.");
    let crew = good.parent().unwrap().parent().unwrap().to_path_buf();
    let agents = crew.join("agents");
    // A secret outside the project, linked in.
    let ssh = d.home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(
        ssh.join("id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\nSECRET\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(ssh.join("id_ed25519"), agents.join("spy.md")).unwrap();
    // A link that stays inside the resource directory is fine.
    std::fs::create_dir_all(crew.join("library")).unwrap();
    std::fs::write(
        crew.join("library/inner.md"),
        "---\nname: inner\n---\nInner.",
    )
    .unwrap();
    std::os::unix::fs::symlink("../library/inner.md", agents.join("inner.md")).unwrap();
    // A whole kind directory linked out of the project.
    std::fs::create_dir_all(d.home.join("elsewhere")).unwrap();
    std::fs::write(
        d.home.join("elsewhere/x.team.md"),
        "---\nname: outside\n---\n- explorer\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(d.home.join("elsewhere"), crew.join("teams")).unwrap();
    // A symlinked skill directory and a symlinked SKILL.md.
    std::fs::create_dir_all(d.home.join("skill-out")).unwrap();
    std::fs::write(
        d.home.join("skill-out/SKILL.md"),
        "---\nname: skill-out\ndescription: d\n---\nbody",
    )
    .unwrap();
    std::fs::create_dir_all(crew.join("skills/linked")).unwrap();
    std::os::unix::fs::symlink(
        d.home.join("skill-out/SKILL.md"),
        crew.join("skills/linked/SKILL.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(d.home.join("skill-out"), crew.join("skills/dirlink")).unwrap();
    // Special files that must never be opened as resources (a FIFO would block the open).
    nix::unistd::mkfifo(&agents.join("fifo.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(agents.join("sock.md")).unwrap();
    // 1 GiB, sparse: was read whole on every call.
    std::fs::File::create(agents.join("huge.md"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    // Junk and a 10,000-step chain (overflowed the stack in the cycle check).
    std::fs::write(agents.join("junk.md"), [0xffu8, 0xfe, 0, 1]).unwrap();
    d.project_file("workflows/chain.workflow.md", &chain_workflow(10_000));
    // A cycle deep in a chain within the limit is still found and named.
    let mut cyclic = chain_workflow(4_000).replace("name: chain", "name: cyclic");
    cyclic = cyclic.replacen(
        "## s0\nrole: explorer\n",
        "## s0\nrole: explorer\ndependsOn: s3999\n",
        1,
    );
    d.project_file("workflows/cyclic.workflow.md", &cyclic);

    let before = hwm_kib(d.pid());
    let cwd = path_str(&d.work).to_string();
    for _ in 0..3 {
        let list = d.ok("resource.list", json!({"cwd": cwd}));
        let agents_listed = names(&list, "agents");
        assert!(
            agents_listed.contains(&"good".to_string()),
            "{agents_listed:?}"
        );
        assert!(
            agents_listed.contains(&"inner".to_string()),
            "{agents_listed:?}"
        );
        for bad in ["spy", "fifo", "sock", "huge", "junk"] {
            assert!(!agents_listed.contains(&bad.to_string()), "{bad} listed");
        }
        assert!(!names(&list, "teams").contains(&"outside".to_string()));
        assert!(!names(&list, "skills")
            .iter()
            .any(|s| s.contains("skill-out") || s == "linked" || s == "dirlink"));
        let text = list.to_string();
        assert!(!text.contains("SECRET"), "the linked key was read");
        for (file, says) in [
            ("spy.md", "outside the resource directory"),
            ("fifo.md", "FIFO"),
            ("sock.md", "socket"),
            ("huge.md", "file too large"),
            ("junk.md", "not UTF-8"),
            ("teams", "outside the resource directory"),
            ("linked/SKILL.md", "outside the resource directory"),
            ("dirlink", "symlinked skill directory"),
            ("chain.workflow.md", "at most 5000"),
            ("cyclic.workflow.md", "cycle: s0 -> s3999"),
        ] {
            let ds = diags_for(&list, file);
            assert!(
                ds.iter()
                    .any(|d| d["message"].as_str().unwrap().contains(says)),
                "{file}: no diagnostic saying {says:?}: {ds:?}"
            );
        }
    }
    let v = d.ok("resource.validate", json!({"cwd": cwd}));
    assert_eq!(v["ok"], false);
    let e = d.err(
        "resource.get",
        json!({"cwd": cwd, "kind": "agent", "name": "spy"}),
    );
    assert_eq!(e["code"], 1001);
    // Planning the chain is refused with the diagnostic, and the daemon is still there.
    let e = d.err(
        "team.plan",
        json!({"goal": "g", "cwd": cwd, "team": "default", "workflow": "chain", "runtime": "fake"}),
    );
    assert_eq!(e["code"], 1003, "{e}");
    d.ok("daemon.ping", json!({}));
    let grown = hwm_kib(d.pid()).saturating_sub(before);
    assert!(grown < 200 * 1024, "peak memory grew by {grown} KiB");
}

/// A `.crew` that is itself a link out of the project is not read.
#[test]
fn linked_dot_crew_is_not_followed() {
    let d = Daemon::start();
    let outside = d.home.join("foreign-crew");
    std::fs::create_dir_all(outside.join("agents")).unwrap();
    std::fs::write(
        outside.join("agents/far.md"),
        "---\nname: far\n---\nFar away.",
    )
    .unwrap();
    std::fs::create_dir_all(d.work.join(".git")).unwrap();
    std::os::unix::fs::symlink(&outside, d.work.join(".crew")).unwrap();
    let list = d.ok("resource.list", json!({"cwd": path_str(&d.work)}));
    assert!(!names(&list, "agents").contains(&"far".to_string()));
    assert!(!diags_for(&list, ".crew").is_empty(), "{list}");
}

/// The user's own directory is not a repository's: files and skill directories linked in from
/// elsewhere (GNU stow links them one by one into `~/.config/crew/`) load, where the same links
/// in a project's `.crew/` would not.
#[test]
fn links_in_the_users_directory_are_followed() {
    let d = Daemon::start();
    let dotfiles = d.home.join("dotfiles");
    std::fs::create_dir_all(dotfiles.join("writer")).unwrap();
    std::fs::write(
        dotfiles.join("mine.md"),
        "---\nname: mine\n---\nThe user's agent, kept in their dotfiles.",
    )
    .unwrap();
    std::fs::write(
        dotfiles.join("writer/SKILL.md"),
        "---\nname: writer\ndescription: Writes well.\n---\nWrite short sentences.",
    )
    .unwrap();
    let user = d.home.join(".config/crew");
    std::fs::create_dir_all(user.join("agents")).unwrap();
    std::fs::create_dir_all(user.join("skills")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("mine.md"), user.join("agents/mine.md")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("writer"), user.join("skills/writer")).unwrap();
    let list = d.ok("resource.list", json!({}));
    assert!(
        names(&list, "agents").contains(&"mine".to_string()),
        "{list}"
    );
    assert!(
        names(&list, "skills").contains(&"writer".to_string()),
        "{list}"
    );
    assert!(diags_for(&list, ".config/crew").is_empty(), "{list}");
}

/// A template that multiplies the goal: refused at plan time (1003) and reported by
/// `resource.validate`, without rendering anything.
#[test]
fn goal_bombs_are_refused_before_rendering() {
    let d = Daemon::start();
    let cwd = path_str(&d.work).to_string();
    let bomb = "{goal}".repeat(20_000);
    d.project_file(
        "teams/bomb.team.md",
        "---\nname: bomb\ndefaultWorkflow: bomb\n---\n- explorer\n",
    );
    d.project_file(
        "workflows/bomb.workflow.md",
        &format!("---\nname: bomb\n---\n## a\nrole: explorer\n\n{bomb}\n"),
    );
    // Ten placeholders are allowed, but not with a goal that makes them megabytes.
    d.project_file(
        "teams/ten.team.md",
        "---\nname: ten\ndefaultWorkflow: ten\n---\n- explorer\n",
    );
    d.project_file(
        "workflows/ten.workflow.md",
        &format!(
            "---\nname: ten\n---\n## a\nrole: explorer\n\n{}\n",
            "{goal} ".repeat(10)
        ),
    );
    let v = d.ok("resource.validate", json!({"cwd": cwd}));
    let ds = diags_for(&v, "bomb.workflow.md");
    assert!(
        ds.iter()
            .any(|d| d["field"] == "task" && d["severity"] == "error"),
        "{ds:?}"
    );
    let before = hwm_kib(d.pid());
    let goal = "g".repeat(200_000);
    for method in ["team.plan", "team.run"] {
        let e = d.err(
            method,
            json!({"goal": goal, "cwd": cwd, "team": "bomb", "runtime": "fake"}),
        );
        assert_eq!(e["code"], 1003, "{method}: {e}");
        let e = d.err(
            method,
            json!({"goal": "g".repeat(250_000), "cwd": cwd, "team": "ten", "runtime": "fake"}),
        );
        assert_eq!(e["code"], 1003, "{method}: {e}");
        assert!(e["message"].as_str().unwrap().contains("task text"), "{e}");
    }
    // A short goal with ten placeholders runs.
    let r = d.ok(
        "team.plan",
        json!({"goal": "short", "cwd": cwd, "team": "ten", "runtime": "fake"}),
    );
    assert_eq!(r["tasks"].as_array().unwrap().len(), 1);
    let grown = hwm_kib(d.pid()).saturating_sub(before);
    assert!(grown < 200 * 1024, "peak memory grew by {grown} KiB");
}

fn finished_run_with_big_output(d: &Daemon) -> String {
    // ~1 MB of worker output: its bundle is bigger than the default max_request_bytes.
    one_step_team(d, "big", "[fake:chatty=1200k]", "explorer");
    let run = d.run("big output", json!({"team": "big"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    run
}

/// Issue 14.11: what export makes, import takes under the same (default) config, through a
/// file the daemon reads; and an imported run does not run its foreign prompts unconfirmed.
#[test]
fn big_bundles_round_trip_and_imported_runs_need_confirmation() {
    let d = Daemon::start();
    let run = finished_run_with_big_output(&d);
    let bundle = d.ok("team.export", json!({"runId": run}))["bundle"].clone();
    let text = serde_json::to_string(&bundle).unwrap();
    assert!(text.len() > 1 << 20, "bundle only {} bytes", text.len());
    // Inline, it is over the request limit.
    let (status, _) = d
        .http_raw(&json!({"jsonrpc": "2.0", "id": 1, "method": "team.import", "params": {"bundle": bundle}}).to_string())
        .unwrap();
    assert_ne!(status, 200);
    let file = d.dir.path().join("bundle.json");
    std::fs::write(&file, &text).unwrap();
    d.ok("team.forget", json!({"runId": run}));
    let r = d.ok("team.import", json!({"path": path_str(&file)}));
    assert_eq!(r["runId"], run.as_str());
    let status = d.status(&run);
    assert_eq!(status["run"]["status"], "completed");

    // Bad paths: -32602 naming `path`, never a hang on a FIFO.
    let fifo = d.dir.path().join("bundle.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    for (p, why) in [
        (json!({"path": "relative.json"}), "absolute"),
        (json!({"path": path_str(&fifo)}), "regular file"),
        (json!({"path": "/nonexistent/b.json"}), "cannot open"),
        (json!({}), "exactly one"),
        (
            json!({"path": path_str(&file), "bundle": {}}),
            "exactly one",
        ),
    ] {
        let e = d.err("team.import", p.clone());
        assert_eq!(e["code"], -32602, "{p}: {e}");
        assert!(e["message"].as_str().unwrap().contains(why), "{p}: {e}");
    }

    // An imported failed run: resume needs confirmation and shows what would run.
    one_step_team(&d, "flaky", "[fake:fail]", "explorer");
    let failed = d.run("fail once", json!({"team": "flaky"}));
    assert_eq!(d.wait(&failed), "failed");
    let bundle = d.ok("team.export", json!({"runId": failed}))["bundle"].clone();
    d.ok("team.forget", json!({"runId": failed}));
    d.ok("team.import", json!({"bundle": bundle}));
    for (method, params) in [
        ("team.resume", json!({"runId": failed})),
        (
            "team.retry",
            json!({"runId": failed, "taskIds": ["01_only"]}),
        ),
    ] {
        let e = d.err(method, params);
        assert_eq!(e["code"], 1002, "{method}: {e}");
        assert!(e["message"].as_str().unwrap().contains("imported"), "{e}");
        let tasks = e["data"]["tasks"].as_array().unwrap();
        assert_eq!(tasks[0]["id"], "01_only", "{e}");
        assert!(tasks[0]["systemPromptSha256"].is_string(), "{e}");
        assert_eq!(e["data"]["runtime"], "fake");
    }
    assert_eq!(d.status(&failed)["run"]["status"], "failed", "nothing ran");
    let r = d.ok(
        "team.resume",
        json!({"runId": failed, "confirmImported": true}),
    );
    assert_eq!(r["requeuedTaskIds"], json!(["01_only"]));
    d.wait(&failed);
}

/// A bundle naming a task `../../../../<dir>/PWNED` is refused, and nothing is written
/// outside the state directory.
#[test]
fn bundle_task_ids_cannot_leave_the_state_dir() {
    let d = Daemon::start();
    one_step_team(&d, "one", "[fake:turns=1]", "explorer");
    let run = d.run("one", json!({"team": "one"}));
    assert_eq!(d.wait(&run), "completed");
    let target = d.dir.path().join("x");
    std::fs::create_dir_all(&target).unwrap();
    let evil = format!("../../../../{}/PWNED", target.display());
    let evil_bundle = forged_bundle(&d, &run, |b| {
        text_replaced(&b, "01_only", &evil.replace('/', "\\/"))
    });
    let e = d.err("team.import", json!({"bundle": evil_bundle}));
    assert_eq!(e["code"], 1003, "{e}");
    assert!(e.to_string().contains("not a valid id"), "{e}");
    assert!(std::fs::read_dir(&target).unwrap().next().is_none());
    assert!(!Path::new(&format!("{}/PWNED", target.display())).exists());
    let e = d.err("team.summary", json!({"runId": evil}));
    assert_eq!(e["code"], -32602);
}

/// A bundle whose run holds a task named like one of crew's own files (`_repo`, the shared
/// reader checkout's folder) is refused, also when no event names the task (a run cancelled
/// before it started: the name is only in `run.created`'s plan).
#[test]
fn a_bundles_task_named_like_crews_files_is_refused() {
    let d = Daemon::start();
    d.project_file(
        "teams/two.team.md",
        "---\nname: two\ndefaultWorkflow: two\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/two.workflow.md",
        "---\nname: two\n---\n\n## first\nrole: explorer\n\n[fake:sleep=30s]\n\n\
         ## second\nrole: explorer\ndependsOn: first\n\nthen\n",
    );
    let run = d.run("two", json!({"team": "two"}));
    while !d
        .events(Some(&run))
        .iter()
        .any(|e| e["type"] == "worker.spawned")
    {
        let _ = d.ok("team.wait", json!({"runId": run, "timeoutMs": 100}));
    }
    d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(d.wait(&run), "cancelled");
    let events = d.events(Some(&run));
    assert!(
        !events.iter().any(|e| e["taskId"] == "02_second"),
        "an event names the second task"
    );
    let bundle = d.ok("team.export", json!({"runId": run}))["bundle"].clone();
    d.ok("team.forget", json!({"runId": run}));
    for name in ["_repo", "_readers-0123abcd", "_system-0123abcd"] {
        let mut forged = text_replaced(&bundle, "02_second", name);
        reseal(&mut forged);
        let e = d.err("team.import", json!({"bundle": forged}));
        assert_eq!(e["code"], 1003, "{name}: {e}");
        assert!(e.to_string().contains("reserved"), "{name}: {e}");
    }
}

/// Issue 19: pi-crew's project folders load as project resources (`.pi/agents`, `.pi/teams` as
/// the team root when there is no `.crew`, pi's skill folders), under `.crew`'s trust and link
/// rules; `.crew` wins a name clash.
#[test]
fn pi_crew_project_folders_load() {
    let d = Daemon::start();
    let cwd = path_str(&d.work).to_string();
    std::fs::create_dir_all(d.work.join(".git")).unwrap();
    let write = |rel: &str, text: &str| {
        let p = d.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(".pi/agents/pia.md", "---\nname: pia\n---\nA pi-crew agent.");
    write(
        ".pi/teams/teams/pit.team.md",
        "---\nname: pit\ndefaultWorkflow: piw\n---\n- explorer\n",
    );
    write(
        ".pi/teams/workflows/piw.workflow.md",
        "---\nname: piw\n---\n## a\nrole: explorer\n\nLook.\n",
    );
    write(
        ".pi/skills/pis/SKILL.md",
        "---\nname: pis\ndescription: A pi skill.\n---\nBody.",
    );
    write(
        ".agents/skills/ags/SKILL.md",
        "---\nname: ags\ndescription: An agents skill.\n---\nBody.",
    );
    let list = d.ok("resource.list", json!({"cwd": cwd}));
    for (kind, name) in [
        ("agents", "pia"),
        ("teams", "pit"),
        ("workflows", "piw"),
        ("skills", "pis"),
        ("skills", "ags"),
    ] {
        assert!(
            names(&list, kind).contains(&name.to_string()),
            "{kind} {name}: {list}"
        );
    }
    let pia = d.ok(
        "resource.get",
        json!({"cwd": cwd, "kind": "agent", "name": "pia"}),
    );
    assert_eq!(pia["resource"]["source"], "project", "{pia}");
    // With a `.crew`, `.pi/teams` is no team root any more, and `.crew` wins a clash.
    d.project_file("agents/pia.md", "---\nname: pia\n---\nThe crew one.");
    let list = d.ok("resource.list", json!({"cwd": cwd}));
    assert!(
        !names(&list, "teams").contains(&"pit".to_string()),
        "{list}"
    );
    let pia = d.ok(
        "resource.get",
        json!({"cwd": cwd, "kind": "agent", "name": "pia"}),
    );
    assert!(
        pia["resource"]["path"]
            .as_str()
            .unwrap()
            .contains("/.crew/"),
        "{pia}"
    );
    assert!(!diags_for(&list, ".pi/agents/pia.md").is_empty(), "{list}");
    // A `.pi` that links out of the project is not read.
    std::fs::remove_dir_all(d.work.join(".pi")).unwrap();
    let outside = d.home.join("elsewhere-pi");
    std::fs::create_dir_all(outside.join("agents")).unwrap();
    std::fs::write(outside.join("agents/far.md"), "---\nname: far\n---\nFar.").unwrap();
    std::os::unix::fs::symlink(&outside, d.work.join(".pi")).unwrap();
    let list = d.ok("resource.list", json!({"cwd": cwd}));
    assert!(
        !names(&list, "agents").contains(&"far".to_string()),
        "{list}"
    );
    assert!(!diags_for(&list, ".pi").is_empty(), "{list}");
}

/// Issue 29 item 3: a bundle's task carrying a pre-step `/bin/sh -c …`: the confirmation that
/// `team.resume` asks for names it (message and data), and nothing runs unconfirmed.
#[test]
fn an_imported_pre_step_is_named_before_it_runs() {
    let d = Daemon::start();
    one_step_team(&d, "flaky", "[fake:fail]", "explorer");
    let failed = d.run("fail once", json!({"team": "flaky"}));
    assert_eq!(d.wait(&failed), "failed");
    let marker = d.dir.path().join("PRE_STEP_RAN");
    let shell = format!("touch {}", path_str(&marker));
    let bundle = forged_bundle(&d, &failed, |mut b| {
        run_created(&mut b)["data"]["tasks"][0]["checks"] = json!({
            "preStep": {"script": "/bin/sh", "args": ["-c", shell], "timeoutMs": 10000}
        });
        b
    });
    d.ok("team.import", json!({"bundle": bundle}));
    let e = d.err("team.resume", json!({"runId": failed}));
    assert_eq!(e["code"], 1002, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("01_only pre-step: /bin/sh -c {shell}")),
        "{msg}"
    );
    assert_eq!(
        e["data"]["tasks"][0]["preStep"],
        format!("/bin/sh -c {shell}"),
        "{e}"
    );
    assert_eq!(
        e["data"]["commands"],
        json!([format!("01_only pre-step: /bin/sh -c {shell}")])
    );
    assert!(!marker.exists(), "nothing ran unconfirmed");
}

/// A bundle's tasks may name files of the importer's checkout to hand their agents
/// (`seedPaths`, e.g. `.env`): the confirmation names them before anything runs.
#[test]
fn an_imported_runs_seed_paths_are_named_before_it_runs() {
    let d = Daemon::start();
    one_step_team(&d, "flaky", "[fake:fail]", "explorer");
    let failed = d.run("fail once", json!({"team": "flaky"}));
    assert_eq!(d.wait(&failed), "failed");
    let bundle = forged_bundle(&d, &failed, |mut b| {
        run_created(&mut b)["data"]["tasks"][0]["seedPaths"] = json!([".env"]);
        b
    });
    d.ok("team.import", json!({"bundle": bundle}));
    let e = d.err("team.resume", json!({"runId": failed}));
    assert_eq!(e["code"], 1002, "{e}");
    let said = "01_only copies from your checkout into its worktree: .env";
    assert!(e["message"].as_str().unwrap().contains(said), "{e}");
    assert_eq!(e["data"]["tasks"][0]["seedPaths"], json!([".env"]), "{e}");
}

/// A bundle's run carries the project's per-task checks (`taskVerifyCommands`, frozen in
/// `run.created`), which run after every editing task without checks of its own: the
/// confirmation `team.resume` asks for names them, and they run only once confirmed.
#[test]
fn an_imported_runs_project_checks_are_named_before_they_run() {
    let d = Daemon::start();
    one_step_team(&d, "flaky", "[fake:fail]", "executor");
    let failed = d.run("fail once", json!({"team": "flaky"}));
    assert_eq!(d.wait(&failed), "failed");
    let check = "touch PROJECT_CHECK_RAN";
    let bundle = forged_bundle(&d, &failed, |mut b| {
        let created = run_created(&mut b);
        created["data"]["taskVerifyCommands"] = json!([check]);
        // The task completes when run again, so its checks run.
        created["data"]["tasks"][0]["taskTemplate"] = json!("do it");
        b
    });
    d.ok("team.import", json!({"bundle": bundle}));
    let e = d.err("team.resume", json!({"runId": failed}));
    assert_eq!(e["code"], 1002, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains(check), "{msg}");
    assert_eq!(e["data"]["taskVerifyCommands"], json!([check]), "{e}");
    let marker = d.work.join("PROJECT_CHECK_RAN");
    assert!(!marker.exists(), "nothing ran unconfirmed");
    d.ok(
        "team.resume",
        json!({"runId": failed, "confirmImported": true}),
    );
    assert_eq!(d.wait(&failed), "completed", "{}", d.status(&failed));
    assert!(
        marker.exists(),
        "the project check the confirmation named ran"
    );
}

/// A bundle's failed run may hold a task that never started (its events left out): once the
/// run runs again it starts like any queued task, so the confirmation `team.resume` asks for
/// shows it, though it did not fail.
#[test]
fn an_imported_runs_queued_task_is_named_before_it_runs() {
    let d = Daemon::start();
    d.project_file(
        "teams/two.team.md",
        "---\nname: two\ndefaultWorkflow: two\n---\n\n- executor: agent=executor\n",
    );
    d.project_file(
        "workflows/two.workflow.md",
        "---\nname: two\n---\n\n## a\nrole: executor\n\n[fake:fail]\n\n## b\nrole: executor\n\n[fake:write=B_RAN.txt:b]\n",
    );
    let run = d.run("two", json!({"team": "two"}));
    d.wait(&run);
    // `b` never started: its events out, the rest renumbered, the run's view left empty (it
    // is compared where it says something).
    let bundle = forged_bundle(&d, &run, |mut b| {
        let events: Vec<Value> = b["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["taskId"] != "02_b")
            .cloned()
            .enumerate()
            .map(|(i, mut e)| {
                e["runSeq"] = json!(i + 1);
                e
            })
            .collect();
        b["events"] = json!(events);
        b["run"] = json!({});
        b
    });
    std::fs::remove_file(d.work.join("B_RAN.txt")).ok();
    d.ok("team.import", json!({"bundle": bundle}));
    assert_eq!(d.status(&run)["run"]["status"], "failed");
    let e = d.err("team.resume", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    let ids: Vec<&str> = e["data"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert!(ids.contains(&"02_b"), "the queued task is not shown: {e}");
    d.ok(
        "team.resume",
        json!({"runId": run, "confirmImported": true}),
    );
    d.wait(&run);
    assert!(d.work.join("B_RAN.txt").exists(), "the queued task ran");
}
