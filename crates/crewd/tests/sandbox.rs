//! Issue 34: a hostile `command` agent, boxed (`sandbox = "required"`), tries each way out of
//! its task; each fails, while its own work in its worktree (edits, `git add`, `git commit`)
//! goes through. Where bubblewrap cannot make a box these fail; tests/run.sh leaves them out
//! there and counts them skipped.

mod common;
use common::*;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// The test's daemon directory (its `$HOME`, checkout and state) outside `/tmp`: the box's
/// `/tmp` is a private, writable tmpfs, so a home under `/tmp` would be writable in the box
/// (the writes staying in the box), which is not what a user's home is. Each test is a
/// process of its own under nextest; all set the same value. cargo's `target/tmp`, or
/// `CREW_TEST_TMPDIR` (`make test-nonroot` runs these tests as an ordinary user, to whom
/// root's `target/tmp` is not writable).
fn out_of_tmp() {
    let dir = std::env::var_os("CREW_TEST_TMPDIR")
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| env!("CARGO_TARGET_TMPDIR").into());
    std::env::set_var("TMPDIR", dir);
}

/// bubblewrap cannot make a box here: a failure, never a pass. `make test` (tests/run.sh)
/// leaves these tests out where bubblewrap is missing (its HOST table) and counts them skipped.
fn skip(name: &str, why: &str) -> ! {
    panic!("{name}: {why} (install Debian's `bubblewrap`; tests/run.sh counts this test skipped where it cannot run)");
}

/// bubblewrap works here (the daemon probes the same way).
fn bwrap_works() -> Result<(), String> {
    let out = std::process::Command::new("bwrap")
        .args([
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "/bin/true",
        ])
        .output()
        .map_err(|e| format!("bwrap: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn repo(w: &Path) {
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("a.txt"), "one\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    git(w, &["gc", "-q"]);
    // Another task's branch and worktree (its own metadata under `.git/worktrees`), made
    // after `gc` packed `main` into `packed-refs`.
    git(
        w,
        &["worktree", "add", "-q", "-b", "other-task", "../other-wt"],
    );
}

/// A daemon whose runtime `w` runs `script` (a shell command line) as the agent, boxed
/// (`sandbox = "required"`).
fn boxed_writer(script: &str) -> Daemon {
    Daemon::start_with(Opts {
        config: format!(
            "sandbox = \"required\"\n[runtimes.w]\nadapter = \"command\"\n\
             command = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        env: vec![],
    })
}

/// An agent CLI installed in `$HOME` itself — a script in `~`, an `npm install` without `-g`
/// (`~/node_modules/.bin/…`) — or right in `/tmp` brings its install into the box, never all
/// of `$HOME` or the host's `/tmp` with it;
/// and of `~/.cargo` the toolchain is there, a registry token (`credentials.toml`) is not.
#[test]
fn an_agent_installed_in_home_brings_its_install_not_the_home() {
    const NAME: &str = "an_agent_installed_in_home_brings_its_install_not_the_home";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let mut d = Daemon::start();
    let h = d.home.clone();
    repo(&d.work);
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::create_dir_all(h.join(".cargo/bin")).unwrap();
    std::fs::write(h.join(".cargo/credentials.toml"), "token = \"x\"\n").unwrap();
    std::fs::write(h.join(".cargo/bin/tool"), "a tool\n").unwrap();
    let hd = h.display();
    let script = format!(
        "#!/bin/sh\ncat {hd}/.ssh/id_ed25519 2>/dev/null && echo ESCAPE ssh-key\n\
         cat {hd}/.cargo/credentials.toml 2>/dev/null && echo ESCAPE cargo-credentials\n\
         cat {hd}/.cargo/bin/tool >/dev/null 2>&1 && echo TOOL-OK\n\
         cat \"$(dirname \"$0\")/../fakecli/package.json\" >/dev/null 2>&1 && echo PACKAGE-OK\n\
         echo done\n"
    );
    let in_home = h.join("agent.sh");
    let pkg = h.join("node_modules/fakecli");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::create_dir_all(h.join("node_modules/.bin")).unwrap();
    std::fs::write(pkg.join("package.json"), "{}\n").unwrap();
    for f in [&in_home, &pkg.join("cli.sh")] {
        std::fs::write(f, &script).unwrap();
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::symlink("../fakecli/cli.sh", h.join("node_modules/.bin/fakecli")).unwrap();
    let npm = h.join("node_modules/.bin/fakecli");
    // A program right in the host's /tmp: /tmp would come in over the box's own (and a
    // socket under it can be connected to through a read-only bind).
    let stamp = format!(
        "{}-{}",
        std::process::id(),
        d.socket.display().to_string().len()
    );
    let in_tmp = std::path::PathBuf::from(format!("/tmp/crew-box-agent-{stamp}.sh"));
    let marker = std::path::PathBuf::from(format!("/tmp/crew-box-marker-{stamp}"));
    std::fs::write(&marker, "host tmp\n").unwrap();
    std::fs::write(
        &in_tmp,
        format!(
            "#!/bin/sh\ncat {} 2>/dev/null && echo ESCAPE host-tmp\n{}",
            marker.display(),
            script.trim_start_matches("#!/bin/sh\n")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&in_tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        &d.config,
        format!(
            "sandbox = \"required\"\nallow_no_change = true\n\
             [runtimes.home]\nadapter = \"command\"\ncommand = [{:?}]\n\
             [runtimes.npm]\nadapter = \"command\"\ncommand = [{:?}]\n\
             [runtimes.tmp]\nadapter = \"command\"\ncommand = [{:?}]\n",
            in_home.display().to_string(),
            npm.display().to_string(),
            in_tmp.display().to_string(),
        ),
    )
    .unwrap();
    d.restart();
    one_step_team(&d, "h", "Look around.", "executor");
    for (runtime, package) in [("home", false), ("npm", true), ("tmp", false)] {
        let run = d.run(
            "look",
            json!({"team": "h", "runtime": runtime, "workspace": "worktree"}),
        );
        let end = d.wait(&run);
        let result = result_of(&d, &run);
        assert_eq!(end, "completed", "{runtime}: {}", d.status(&run));
        assert!(result.contains("done"), "{runtime}: {result}");
        assert!(!result.contains("ESCAPE"), "{runtime}: {result}");
        assert!(result.contains("TOOL-OK"), "{runtime}: {result}");
        // The npm CLI's package tree is there.
        assert_eq!(
            result.contains("PACKAGE-OK"),
            package,
            "{runtime}: {result}"
        );
    }
    let _ = std::fs::remove_file(&in_tmp);
    let _ = std::fs::remove_file(&marker);
}

/// `sandbox` per project (issue 34): a project's mode wins over the runtime's and the
/// daemon's — here `off` for one project under a daemon that requires the box — in what runs
/// and in what `team.plan` shows, for its root and every folder below it; another project
/// keeps the daemon's.
#[test]
fn a_projects_sandbox_mode_wins_over_the_daemons() {
    const NAME: &str = "a_projects_sandbox_mode_wins_over_the_daemons";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let mut d = Daemon::start();
    let h = d.home.clone();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    let open = d.dir.path().join("open");
    std::fs::create_dir_all(open.join(".crew")).unwrap();
    let script = format!(
        "cat {}/.ssh/id_ed25519 >/dev/null 2>&1 && echo UNBOXED; echo done",
        h.display()
    );
    // A project `off` inside the boxed one's cwd, where a boxed agent could put a link.
    let inner = d.work.join("sub");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(
        &d.config,
        format!(
            "sandbox = \"required\"\nallow_no_change = true\n\
             [runtimes.w]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n\
             [projects.{:?}]\nsandbox = \"off\"\n\
             [projects.{:?}]\nsandbox = \"off\"\n",
            open.display().to_string(),
            inner.display().to_string()
        ),
    )
    .unwrap();
    d.restart();
    // The configured root made a link to its parent (what an agent in the parent could do):
    // the roots are those read with the config, so the parent stays boxed.
    std::fs::remove_dir(&inner).unwrap();
    std::os::unix::fs::symlink("..", &inner).unwrap();
    // The user's own team, seen from either project.
    let base = h.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join("teams/look.team.md"),
        "---\nname: look\ndefaultWorkflow: look\n---\n\n- explorer: agent=explorer\n",
    )
    .unwrap();
    std::fs::write(
        base.join("workflows/look.workflow.md"),
        "---\nname: look\n---\n\n## only\nrole: explorer\n\nLook.\n",
    )
    .unwrap();
    // daemon.status says which project is set apart.
    let status = d.ok("daemon.status", json!({}));
    assert!(
        status["sandbox"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("project {} off", open.display())),
        "{status}"
    );
    // A folder below it that looks like a project root of its own (a `.crew` an agent could
    // make in a shared-mode cwd) is still the configured project's: the config's paths decide.
    let below = open.join("sub");
    std::fs::create_dir_all(below.join(".crew")).unwrap();
    for (cwd, unboxed) in [(open.clone(), true), (below, true), (d.work.clone(), false)] {
        let cwd = path_str(&cwd).to_string();
        let plan = d.ok(
            "team.plan",
            json!({"goal": "g", "cwd": cwd, "team": "look", "runtime": "w"}),
        );
        assert_eq!(
            plan["tasks"][0].get("sandbox").is_none(),
            unboxed,
            "{cwd}: {plan:#}"
        );
        let run = d.ok(
            "team.run",
            json!({"goal": "g", "cwd": cwd, "team": "look", "runtime": "w"}),
        )["runId"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
        let result = result_of(&d, &run);
        assert_eq!(result.contains("UNBOXED"), unboxed, "{cwd}: {result}");
    }
}

/// What the one-step run's task answered (its result file).
fn result_of(d: &Daemon, run: &str) -> String {
    d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/01_only.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn marked(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rfind(')')
                .and_then(|i| stat.get(i + 1..))
                .and_then(|r| r.split_whitespace().next())
                == Some("Z");
            !zombie && String::from_utf8_lossy(&cmd).contains(marker)
        })
        .collect()
}

#[test]
fn a_hostile_agent_in_its_box_reaches_nothing_but_its_worktree() {
    const NAME: &str = "a_hostile_agent_in_its_box_reaches_nothing_but_its_worktree";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    // Paths are known once the daemon's directories exist: start it, write the config, restart.
    let mut d = Daemon::start();
    let (h, s, r) = (d.home.clone(), d.state_dir.clone(), d.work.clone());
    repo(&r);
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::write(h.join(".bashrc"), "# rc\n").unwrap();
    std::fs::create_dir_all(h.join(".claude")).unwrap();
    std::fs::write(h.join(".claude/settings.json"), "{}\n").unwrap();
    let marker = format!(
        "boxmarker{}",
        d.dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );
    let (h, s, r, sock) = (h.display(), s.display(), r.display(), d.socket.display());
    let script = format!(
        "cat {h}/.ssh/id_ed25519 2>/dev/null && echo ESCAPE ssh-key; \
         echo x >> {h}/.bashrc 2>/dev/null && echo ESCAPE bashrc; \
         echo x > {r}/a.txt 2>/dev/null && echo ESCAPE checkout; \
         git -C {r} config core.fsmonitor /tmp/evil 2>/dev/null && echo ESCAPE fsmonitor; \
         alt=$(cat {r}/.git/objects/info/alternates 2>/dev/null); \
         for p in {r}/.git/objects/pack/*.pack $alt/pack/*.pack; do \
           [ -e \"$p\" ] && {{ rm -f \"$p\" 2>/dev/null; [ -e \"$p\" ] || echo ESCAPE pack; }}; \
         done; \
         echo x > {s}/pwned 2>/dev/null && echo ESCAPE state; \
         mkdir -p {s}/worktrees/other 2>/dev/null && echo ESCAPE worktrees; \
         for d in transcripts results; do \
           ls -d {s}/runs/*/$d >/dev/null 2>&1 && echo ESCAPE run-$d; \
         done; \
         ls {s}/runs/*/objects 2>/dev/null | grep -v '^01_only[.]attempt-' && echo ESCAPE run-objects; \
         [ -e {sock} ] && echo ESCAPE socket; \
         echo x > {h}/.claude/settings.json 2>/dev/null && echo ESCAPE claude-settings; \
         kill -TERM $CREW_DAEMON_PID 2>/dev/null; \
         setsid sh -c 'while :; do sleep 0.2; done' {marker} & \
         echo mine > own.txt && git add own.txt && git commit -qm own && echo OWN-OK; \
         git update-ref refs/heads/other-task HEAD 2>/dev/null && echo ESCAPE other-ref; \
         git update-ref -d refs/heads/other-task 2>/dev/null && echo ESCAPE delete-ref; \
         git update-ref refs/heads/main HEAD 2>/dev/null && echo ESCAPE packed-main; \
         git update-ref refs/heads/crew/new HEAD 2>/dev/null && echo ESCAPE new-ref; \
         echo x >> {r}/.git/packed-refs 2>/dev/null && echo ESCAPE packed-refs; \
         echo x > {r}/.git/worktrees/other-wt/HEAD 2>/dev/null && echo ESCAPE other-worktree; \
         echo 'gitdir: /tmp/evil' > .git 2>/dev/null && echo ESCAPE dot-git; \
         echo done"
    );
    std::fs::write(
        &d.config,
        format!(
            "sandbox = \"required\"\nno_output_timeout_ms = 10000\nkill_grace_ms = 300\n\
             final_drain_ms = 500\nfinal_drain_quiet_ms = 100\nallow_no_change = true\n\
             [runtimes.hostile]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    d.restart();
    let packs = || {
        let mut v: Vec<_> = std::fs::read_dir(d.work.join(".git/objects/pack"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    };
    let packs_before = packs();
    let refs_before = git(&d.work, &["for-each-ref"]);
    let packed_before = std::fs::read(d.work.join(".git/packed-refs")).unwrap();
    assert!(!packs_before.is_empty(), "git gc made a pack");
    one_step_team(&d, "h", "Escape.", "executor");
    let run = d.run(
        "escape",
        json!({"team": "h", "runtime": "hostile", "workspace": "worktree"}),
    );
    let end = d.wait(&run);
    let result = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/01_only.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!result.contains("ESCAPE"), "{result}");
    assert!(
        result.contains("OWN-OK"),
        "own commit: {result}\n{}",
        d.status(&run)
    );
    assert_eq!(end, "completed", "{}", d.status(&run));
    // Outside, nothing changed; crewd still answers.
    let home = d.home.clone();
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# rc\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.work.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(!d.state_dir.join("pwned").exists());
    assert!(!d.state_dir.join("worktrees/other").exists());
    assert!(!git(&d.work, &["config", "--list"]).contains("fsmonitor"));
    assert_eq!(
        packs(),
        packs_before,
        "the repository's packs are all there"
    );
    // The agent's own commit (its objects made in the attempt's own object directory) is in
    // the repository now, whole.
    let log = git(&d.work, &["log", "--all", "--format=%s"]);
    assert!(log.lines().any(|l| l == "own"), "{log}");
    // ... on the task's branch (crew moved it there after the box), and no other ref but
    // crew's own moved.
    let branch = format!("crew/tasks/{run}/01_only");
    let on_branch = git(&d.work, &["log", &branch, "--format=%s"]);
    assert!(on_branch.lines().any(|l| l == "own"), "{on_branch}");
    let others = |t: &str| -> String {
        t.lines()
            .filter(|l| !l.contains("/crew/"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        others(&git(&d.work, &["for-each-ref"])),
        others(&refs_before)
    );
    assert_eq!(
        std::fs::read(d.work.join(".git/packed-refs")).unwrap(),
        packed_before
    );
    git(&d.work, &["fsck", "--no-dangling"]);
    d.ok("daemon.ping", json!({}));
    // The setsid'd process ended with the attempt.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marked(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the setsid'd process outlived its box"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn required_without_the_mechanism_refuses_with_a_clear_message() {
    // No bubblewrap on PATH: `required` refuses the attempt, `auto` runs it unboxed and says
    // so at start-up.
    let d = Daemon::start_with(Opts {
        config: "sandbox = \"required\"\nmax_attempts = 1\n".into(),
        env: vec![("PATH".into(), "/nonexistent".into())],
    });
    d.wait_log("bubblewrap (`bwrap`) is not installed");
    one_step_team(&d, "solo", "Do it.", "explorer");
    let run = d.run("boxed", json!({"team": "solo"}));
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    let error = Daemon::task(&st, "01_only")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("sandbox = \"required\"") && error.contains("not installed"),
        "{error}"
    );
    let status = d.ok("daemon.status", json!({}));
    assert!(
        status["sandbox"]
            .as_str()
            .unwrap_or_default()
            .contains("attempts do not start"),
        "{status}"
    );
}

/// Item 6: `auto` where bubblewrap is missing runs attempts unboxed, and says so once — at
/// start-up and in `daemon.status` — not once per attempt.
#[test]
fn auto_without_the_mechanism_runs_unboxed_and_says_so_once() {
    // Named, not left to the default: `make test-nonroot` makes a config that names no mode
    // `required` (CREW_TEST_SANDBOX).
    let d = Daemon::start_with(Opts {
        config: "sandbox = \"auto\"\n".into(),
        env: vec![("PATH".into(), "/nonexistent".into())],
    });
    d.wait_log("bubblewrap (`bwrap`) is not installed");
    one_step_team(&d, "solo", "Do it.", "explorer");
    for goal in ["one", "two"] {
        let run = d.run(goal, json!({"team": "solo"}));
        assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    }
    let log = d.log_text();
    assert_eq!(
        log.matches("bubblewrap (`bwrap`) is not installed").count(),
        1,
        "{log}"
    );
    let status = d.ok("daemon.status", json!({}));
    assert!(
        status["sandbox"]
            .as_str()
            .unwrap_or_default()
            .contains("attempts run unboxed"),
        "{status}"
    );
}

/// A listener on 127.0.0.1 (non-blocking: `accept` counts what came) and the bash line that
/// connects to it.
fn loopback() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, format!("exec 3<>/dev/tcp/127.0.0.1/{port}"))
}

/// Item 5: `verify_network = false` gives verify commands no network, loopback included,
/// while the agent (network on by default) reaches the same port.
#[test]
fn a_verify_command_without_network_cannot_reach_loopback() {
    const NAME: &str = "a_verify_command_without_network_cannot_reach_loopback";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let (listener, connect) = loopback();
    let mut d = Daemon::start();
    let work = d.work.display().to_string();
    let agent = format!("bash -c {connect:?} && echo AGENT-REACHED > reached.txt; echo done");
    let verify = format!("! bash -c {connect:?}");
    std::fs::write(
        &d.config,
        format!(
            "verify_network = false\nmax_attempts = 1\nverify_retries = 0\nallow_no_change = true\n\
             [runtimes.net]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {agent:?}]\n\
             [projects.{work:?}]\ntask_verify_commands = [{verify:?}]\n"
        ),
    )
    .unwrap();
    d.restart();
    one_step_team(&d, "n", "Connect.", "executor");
    let run = d.run("net", json!({"team": "n", "runtime": "net"}));
    let end = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        end, "completed",
        "the verify command reached 127.0.0.1: {st}"
    );
    let evs = d.events(Some(&run));
    assert!(
        evs.iter()
            .any(|e| e.to_string().contains("/dev/tcp/127.0.0.1")),
        "the verify command ran: {evs:?}"
    );
    assert!(
        std::fs::read_to_string(d.work.join("reached.txt")).is_ok_and(|t| t.contains("REACHED")),
        "the agent (network on) reached the port: {st}"
    );
    // One connection came, the agent's.
    let mut accepted = 0;
    while listener.accept().is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, 1, "{st}");
}

/// Item 5: `network=false` on a team role: that role's boxed attempts reach nothing, loopback
/// included, while another role of the same run on the same runtime does; `team.plan` says
/// which.
#[test]
fn a_role_without_network_cannot_reach_loopback() {
    const NAME: &str = "a_role_without_network_cannot_reach_loopback";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let (listener, connect) = loopback();
    let mut d = Daemon::start();
    let agent = format!(
        "bash -c {connect:?} 2>/dev/null && echo REACHED-$CREW_TASK_ID || echo OFFLINE-$CREW_TASK_ID"
    );
    std::fs::write(
        &d.config,
        format!(
            "sandbox = \"required\"\nallow_no_change = true\n\
             [runtimes.net]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {agent:?}]\n"
        ),
    )
    .unwrap();
    d.restart();
    d.project_file(
        "teams/n.team.md",
        "---\nname: n\ndefaultWorkflow: n\n---\n\n- online: agent=explorer\n- offline: agent=explorer network=false\n",
    );
    d.project_file(
        "workflows/n.workflow.md",
        "---\nname: n\n---\n\n## on\nrole: online\n\nConnect.\n\n## off\nrole: offline\n\nConnect.\n",
    );
    let cwd = path_str(&d.work).to_string();
    let plan = d.ok(
        "team.plan",
        json!({"goal": "g", "cwd": cwd, "team": "n", "runtime": "net"}),
    );
    let nets: Vec<&serde_json::Value> = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["sandbox"]["network"])
        .collect();
    assert_eq!(nets, [&json!(true), &json!(false)], "{plan:#}");
    let run = d.run("net", json!({"team": "n", "runtime": "net"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let answer = |task: &str| {
        d.ok(
            "team.artifact",
            json!({"runId": run, "name": format!("results/{task}.txt")}),
        )["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        answer("01_on").contains("REACHED-01_on"),
        "{}",
        answer("01_on")
    );
    assert!(
        answer("02_off").contains("OFFLINE-02_off"),
        "{}",
        answer("02_off")
    );
    let mut accepted = 0;
    while listener.accept().is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, 1, "only the online role connected");
}

/// Item 6: `team.plan` shows each task's box, and a boxed runtime has no policy gaps (a
/// read-only role's workspace is read-only in the box, whatever its CLI's Bash can do); the
/// same runtime unboxed names the gap.
#[test]
fn the_plan_shows_each_tasks_box_and_no_policy_gap_when_boxed() {
    const NAME: &str = "the_plan_shows_each_tasks_box_and_no_policy_gap_when_boxed";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let d = Daemon::start_with(Opts {
        config: "[runtimes.boxed]\nadapter = \"claude\"\ncommand = [\"/bin/sh\"]\nnetwork = false\n\
                 [runtimes.open]\nadapter = \"claude\"\ncommand = [\"/bin/sh\"]\nsandbox = \"off\"\n"
            .into(),
        env: vec![],
    });
    one_step_team(&d, "r", "Review.", "reviewer");
    let cwd = path_str(&d.work).to_string();
    let plan = |runtime: &str| {
        d.ok(
            "team.plan",
            json!({"goal": "g", "cwd": cwd, "team": "r", "runtime": runtime}),
        )
    };
    let boxed = plan("boxed");
    assert_eq!(boxed["diagnostics"], json!([]), "{boxed:#}");
    let b = &boxed["tasks"][0]["sandbox"];
    let has = |k: &str, p: &str| {
        b[k].as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_str().is_some_and(|s| s.starts_with(p)))
    };
    // The reviewer may not edit: its workspace is read-only.
    assert!(has("readOnly", &cwd) && !has("writable", &cwd), "{b:#}");
    assert!(has("readOnly", "/usr") && has("writable", "/tmp"), "{b:#}");
    assert!(
        has("writable", &d.home.join(".claude").display().to_string()),
        "{b:#}"
    );
    assert!(has("hidden", &d.state_dir.display().to_string()), "{b:#}");
    assert!(has("hidden", &d.socket.display().to_string()), "{b:#}");
    assert_eq!(b["network"], false, "{b:#}");
    let open = plan("open");
    assert!(open["tasks"][0].get("sandbox").is_none(), "{open:#}");
    assert!(
        open["diagnostics"].to_string().contains("Bash"),
        "unboxed, the gap is named: {open:#}"
    );
}

/// Shared mode: a writing role writes the run's cwd and nothing beside it; a read-only role
/// cannot write even the cwd.
#[test]
fn in_shared_mode_only_the_cwd_is_writable_and_only_for_a_writing_role() {
    const NAME: &str = "in_shared_mode_only_the_cwd_is_writable_and_only_for_a_writing_role";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let script = "echo x > mine.txt 2>/dev/null && echo WROTE-CWD; \
                  echo x > ../beside.txt 2>/dev/null && echo ESCAPE beside; echo done";
    let d = Daemon::start_with(Opts {
        config: format!(
            "allow_no_change = true\n[runtimes.w]\nadapter = \"command\"\n\
             command = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        env: vec![],
    });
    one_step_team(&d, "reader", "Read.", "explorer");
    let run = d.run("read", json!({"team": "reader", "runtime": "w"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let r = result_of(&d, &run);
    assert!(!r.contains("WROTE-CWD") && !r.contains("ESCAPE"), "{r}");
    assert!(!d.work.join("mine.txt").exists());
    one_step_team(&d, "writer", "Write.", "executor");
    let run = d.run("write", json!({"team": "writer", "runtime": "w"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let r = result_of(&d, &run);
    assert!(r.contains("WROTE-CWD") && !r.contains("ESCAPE"), "{r}");
    assert!(d.work.join("mine.txt").exists());
    assert!(!d.work.parent().unwrap().join("beside.txt").exists());
}

/// Shared mode in a git checkout: the workspace is the user's own, `.git` included. A boxed
/// agent's `git add`/`git commit` there work; what would make git run a program in the user's
/// next session (the config's `core.fsmonitor`, a hook) cannot be written.
#[test]
fn in_shared_mode_the_agent_commits_but_cannot_plant_a_program_for_git() {
    const NAME: &str = "in_shared_mode_the_agent_commits_but_cannot_plant_a_program_for_git";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let script = "git config core.fsmonitor 'touch /tmp/pwned' 2>/dev/null && echo PLANTED-CONFIG; \
                  echo 'touch /tmp/pwned' > .git/hooks/post-checkout 2>/dev/null && echo PLANTED-HOOK; \
                  echo x > mine.txt && git add mine.txt && git commit -qm mine && echo COMMITTED; echo done";
    let d = boxed_writer(script);
    repo(&d.work);
    std::fs::remove_dir_all(d.work.join(".git/hooks")).unwrap();
    one_step_team(&d, "writer", "Write.", "executor");
    let run = d.run(
        "write",
        json!({"team": "writer", "runtime": "w", "workspace": "shared"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let r = result_of(&d, &run);
    assert!(r.contains("COMMITTED"), "{r}");
    assert!(!r.contains("PLANTED"), "{r}");
    let config = std::fs::read_to_string(d.work.join(".git/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(!d.work.join(".git/hooks/post-checkout").exists());
    let log = std::process::Command::new("git")
        .args(["log", "-1", "--format=%s"])
        .current_dir(&d.work)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "mine");
}

/// Shared mode where the checkout's `.git` is a file (a linked worktree, a submodule): the
/// agent cannot point it at a git directory of its own (whose config the user's next `git
/// status` would obey), nor write a `config.worktree` or a submodule's config.
#[test]
fn in_shared_mode_the_agent_cannot_redirect_the_checkouts_git() {
    const NAME: &str = "in_shared_mode_the_agent_cannot_redirect_the_checkouts_git";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let script =
        "printf 'gitdir: /nowhere\\n' > .git 2>/dev/null && echo PLANTED-GITFILE; echo done";
    let d = boxed_writer(script);
    let main = d.work.parent().unwrap().join("main-repo");
    std::fs::create_dir_all(&main).unwrap();
    repo(&main);
    std::fs::remove_dir(&d.work).unwrap();
    git(
        &main,
        &["worktree", "add", "-q", "-b", "linked", path_str(&d.work)],
    );
    let gitfile = std::fs::read_to_string(d.work.join(".git")).unwrap();
    one_step_team(&d, "writer", "Write.", "executor");
    let run = d.run(
        "write",
        json!({"team": "writer", "runtime": "w", "workspace": "shared"}),
    );
    let status = d.wait(&run);
    let r = result_of(&d, &run);
    assert!(r.contains("done"), "the agent ran ({status}): {r}");
    assert_eq!(
        std::fs::read_to_string(d.work.join(".git")).unwrap(),
        gitfile
    );
    assert!(!r.contains("PLANTED"), "{status}: {r}");
}

/// Shared mode, `.git` a folder: a `config.worktree` the agent writes (git reads it when
/// per-worktree config is on) and a submodule's config under `.git/modules` (the user's `git
/// status` runs status in a submodule, by its config) are out of reach, whether or not they
/// were there before.
#[test]
fn in_shared_mode_the_agent_cannot_write_worktree_or_submodule_config() {
    const NAME: &str = "in_shared_mode_the_agent_cannot_write_worktree_or_submodule_config";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let script = "echo '[core]' > .git/config.worktree 2>/dev/null && echo PLANTED-WORKTREE; \
                  mkdir -p .git/modules/x 2>/dev/null && echo '[core]' > .git/modules/x/config 2>/dev/null && echo PLANTED-MODULE; \
                  echo x > mine.txt && git add mine.txt && git commit -qm mine && echo COMMITTED; echo done";
    let d = boxed_writer(script);
    repo(&d.work);
    one_step_team(&d, "writer", "Write.", "executor");
    let run = d.run(
        "write",
        json!({"team": "writer", "runtime": "w", "workspace": "shared"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let r = result_of(&d, &run);
    assert!(r.contains("COMMITTED"), "{r}");
    assert!(!r.contains("PLANTED"), "{r}");
    let wt = std::fs::read_to_string(d.work.join(".git/config.worktree")).unwrap_or_default();
    assert!(wt.is_empty(), "{wt}");
    assert!(!d.work.join(".git/modules/x").exists());
}

/// Worktree mode, a repository with per-worktree config on (`git sparse-checkout` turns it on):
/// the agent writes its worktree's `config.worktree` (a clean filter that runs a program) and
/// a `.gitattributes` naming it. crew's own `git add -A` after the attempt runs outside the box,
/// so the file must be out of the agent's reach, or the program runs as the user.
#[test]
fn in_worktree_mode_the_agent_cannot_plant_a_filter_for_crews_own_git() {
    const NAME: &str = "in_worktree_mode_the_agent_cannot_plant_a_filter_for_crews_own_git";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("pwned");
    let script = format!(
        "gd=$(git rev-parse --git-dir) && printf '[filter \"x\"]\\n\\tclean = \"touch {m}; cat\"\\n' > \"$gd/config.worktree\" && echo PLANTED; \
         echo '* filter=x' > .gitattributes; echo x > mine.txt; echo done",
        m = marker.display()
    );
    let d = boxed_writer(&script);
    repo(&d.work);
    git(&d.work, &["config", "extensions.worktreeConfig", "true"]);
    one_step_team(&d, "writer", "Write.", "executor");
    let run = d.run(
        "write",
        json!({"team": "writer", "runtime": "w", "workspace": "worktree"}),
    );
    let status = d.wait(&run);
    let r = result_of(&d, &run);
    assert!(
        !marker.exists(),
        "crew's git ran the agent's filter ({status}): {r}"
    );
    assert!(!r.contains("PLANTED"), "{r}");
    assert_eq!(status, "completed", "{}", d.status(&run));
}

/// A writing attempt's own object directory (`<run>/objects/<task>.attempt-N/`) left by a
/// `kill -9` of crewd mid-attempt: the restart takes its objects (the agent's commit) into the
/// repository and removes it before anything runs.
#[test]
fn a_killed_daemons_attempt_object_directory_is_taken_in_and_removed() {
    const NAME: &str = "a_killed_daemons_attempt_object_directory_is_taken_in_and_removed";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let mut d = Daemon::start();
    repo(&d.work);
    let made = d.fixture_path("made");
    let made_s = made.display().to_string();
    // The first attempt commits, says which commit, and waits to be killed; later ones
    // wait too (the run is cancelled).
    let script = format!(
        "[ -e {made_s} ] || {{ echo mine > own.txt && git add own.txt && git commit -qm own && \
         git rev-parse HEAD > {made_s}.tmp && mv {made_s}.tmp {made_s}; }}; \
         while :; do sleep 0.2; done"
    );
    std::fs::write(
        &d.config,
        format!(
            "sandbox = \"required\"\nno_output_timeout_ms = 60000\nkill_grace_ms = 300\n\
             [runtimes.w]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    d.restart();
    one_step_team(&d, "k", "Commit.", "executor");
    let run = d.run(
        "killed",
        json!({"team": "k", "runtime": "w", "workspace": "worktree"}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !made.exists() {
        assert!(
            Instant::now() < deadline,
            "the agent did not commit: {}",
            d.status(&run)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let commit = std::fs::read_to_string(&made).unwrap().trim().to_string();
    let left = d
        .state_dir
        .join(format!("runs/{run}/objects/01_only.attempt-1"));
    assert!(left.is_dir(), "the attempt's object directory");
    let work = d.work.clone();
    let in_repo = |c: &str| {
        std::process::Command::new("git")
            .args(["cat-file", "-e", c])
            .current_dir(&work)
            .status()
            .unwrap()
            .success()
    };
    assert!(
        !in_repo(&commit),
        "the commit is in the attempt's directory only"
    );
    d.kill9();
    d.restart();
    assert!(!left.exists(), "left behind: {}", left.display());
    assert!(
        in_repo(&commit),
        "the agent's commit came into the repository"
    );
    d.ok("team.cancel", json!({"runId": run}));
    d.wait(&run);
}

/// Of crewd's run directory a boxed task sees its inputs only (prompts, skills, extensions):
/// not the run's other tasks' transcripts and results, which hold what their agents read and
/// said. The second step runs after the first has finished, so both are there to be read.
#[test]
fn a_boxed_task_sees_its_inputs_of_the_run_and_not_the_other_tasks_records() {
    const NAME: &str = "a_boxed_task_sees_its_inputs_of_the_run_and_not_the_other_tasks_records";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let d = Daemon::start();
    let s = d.state_dir.display().to_string();
    let script = format!(
        "echo said-by-$CREW_TASK_ID; \
         for f in {s}/runs/*/transcripts/* {s}/runs/*/results/*; do \
           [ -r \"$f\" ] && echo ESCAPE \"$f\"; \
         done; \
         ls {s}/runs/*/prompts/*.md >/dev/null 2>&1 && echo PROMPTS-SEEN; echo done"
    );
    std::fs::write(
        &d.config,
        format!(
            "sandbox = \"required\"\nallow_no_change = true\n[runtimes.peek]\n\
             adapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    let mut d = d;
    d.restart();
    d.project_file(
        "teams/two.team.md",
        "---\nname: two\ndefaultWorkflow: two\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/two.workflow.md",
        "---\nname: two\n---\n\n## first\nrole: explorer\n\nLook.\n\n\
         ## second\nrole: explorer\ndependsOn: first\n\nLook again.\n",
    );
    let run = d.run("peek", json!({"team": "two", "runtime": "peek"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let second = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/02_second.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(second.contains("PROMPTS-SEEN"), "{second}");
    assert!(!second.contains("ESCAPE"), "{second}");
}

/// Candidates on two runtimes: the plan shows each candidate the box of its own runtime, not
/// of the run's.
#[test]
fn the_plan_shows_each_candidate_the_box_of_its_own_runtime() {
    const NAME: &str = "the_plan_shows_each_candidate_the_box_of_its_own_runtime";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let d = Daemon::start_with(Opts {
        config: "[runtimes.boxed]\nadapter = \"claude\"\ncommand = [\"/bin/sh\"]\n\
                 [runtimes.open]\nadapter = \"claude\"\ncommand = [\"/bin/sh\"]\nsandbox = \"off\"\n"
            .into(),
        env: vec![],
    });
    d.project_file(
        "teams/c.team.md",
        "---\nname: c\ndefaultWorkflow: c\n---\n\n- executor: agent=executor\n",
    );
    d.project_file(
        "workflows/c.workflow.md",
        "---\nname: c\n---\n\n## build\nrole: executor\ncandidates: [open, boxed]\n\nBuild.\n",
    );
    repo(&d.work);
    let cwd = path_str(&d.work).to_string();
    let plan = d.ok(
        "team.plan",
        json!({"goal": "g", "cwd": cwd, "team": "c", "runtime": "open", "workspace": "worktree"}),
    );
    let tasks = plan["tasks"].as_array().unwrap();
    let by_runtime = |rt: &str| {
        tasks
            .iter()
            .find(|t| t["runtime"] == rt)
            .unwrap_or_else(|| panic!("no candidate on {rt}: {plan:#}"))
    };
    assert!(by_runtime("open").get("sandbox").is_none(), "{plan:#}");
    assert!(by_runtime("boxed").get("sandbox").is_some(), "{plan:#}");
}

/// A boxed task's worktree has its HEAD detached while the agent works, so git lets the user
/// check the task's branch out in a worktree of theirs meanwhile. crew used to move that branch
/// to the agent's commit under their checkout (their next commit then undid the agent's
/// work). Now the task needs attention, saying so; the user's checkout is untouched and the
/// attempt's work — committed by the agent, so no snapshot of the tree would hold it — is kept
/// under its ref.
#[test]
fn a_task_branch_the_user_checked_out_meanwhile_is_not_moved_under_them() {
    const NAME: &str = "a_task_branch_the_user_checked_out_meanwhile_is_not_moved_under_them";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let d = Daemon::start_with(Opts {
        config: "sandbox = \"required\"\n[runtimes.w]\nadapter = \"command\"\n\
                 command = [\"/bin/sh\", \"-c\", \"echo work > b.txt && git add b.txt && \
                 git -c user.name=a -c user.email=a@x commit -qm work && sleep 3; echo done\"]\n"
            .into(),
        env: vec![],
    });
    let w = d.work.clone();
    repo(&w);
    one_step_team(&d, "solo", "Do it.", "executor");
    let run = d.run(
        "work",
        json!({"team": "solo", "runtime": "w", "workspace": "worktree"}),
    );
    let wt = d.state_dir.join("worktrees").join(&run).join("01_only");
    wait_for_file(&wt.join("b.txt"), "the agent never wrote");
    let branch = format!("crew/tasks/{run}/01_only");
    let mine = d.dir.path().join("mine");
    git(&w, &["worktree", "add", "-q", path_str(&mine), &branch]);
    let start = git(&mine, &["rev-parse", "HEAD"]);
    d.wait(&run);
    let st = d.status(&run);
    let task = Daemon::task(&st, "01_only");
    assert_eq!(task["status"], "needs_attention", "{st}");
    let reason = task["error"].as_str().unwrap_or_default();
    assert!(
        reason.contains("checked out in a worktree of yours"),
        "{task}"
    );
    assert_eq!(
        git(&mine, &["rev-parse", "HEAD"]),
        start,
        "moved under the user"
    );
    assert_eq!(git(&mine, &["status", "--porcelain"]), "");
    let kept = git(
        &w,
        &["show", &format!("refs/crew/{run}/01_only/attempt-1:b.txt")],
    );
    assert_eq!(kept, "work");
}

/// Shared mode binds the run's working directory into the box as it is: one that holds the
/// home directory, `/`, or crewd's state, socket and config, or lies inside the state, is
/// refused before anything runs (the agent would be given them, writable when it edits);
/// `team.plan` says the same. A project folder beside them runs.
#[test]
fn in_shared_mode_a_workdir_holding_the_home_or_crews_own_files_is_refused() {
    const NAME: &str = "in_shared_mode_a_workdir_holding_the_home_or_crews_own_files_is_refused";
    if let Err(why) = bwrap_works() {
        skip(NAME, &format!("bubblewrap cannot make a box here: {why}"));
    }
    out_of_tmp();
    let d = Daemon::start_with(Opts {
        config: "sandbox = \"required\"\nallow_no_change = true\n".into(),
        env: vec![],
    });
    let runs = d.state_dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let cases = [
        (d.dir.path().to_path_buf(), "holds"),
        (
            d.home.clone(),
            "is a folder a boxed agent must not be given",
        ),
        (
            Path::new("/").to_path_buf(),
            "is a folder a boxed agent must not be given",
        ),
        (runs.clone(), "is inside"),
    ];
    let goal = "Plant. [fake:write=planted.txt:x]";
    for (cwd, why) in &cases {
        let params = json!({"goal": goal, "agent": "executor", "runtime": "fake", "cwd": cwd});
        for method in ["team.run", "team.plan"] {
            let e = d.err(method, params.clone());
            let message = e["message"].as_str().unwrap_or_default();
            assert_eq!(e["code"], 1003, "{method} in {}: {e}", cwd.display());
            assert!(
                message.contains("cannot box an agent in this working directory")
                    && message.contains(why),
                "{method} in {}: {message}",
                cwd.display()
            );
        }
        assert!(!cwd.join("planted.txt").exists(), "{}", cwd.display());
    }
    let e = d.err(
        "team.run",
        json!({"goal": goal, "agent": "executor", "runtime": "fake", "cwd": d.dir.path()}),
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&d.state_dir.display().to_string())
            || e["message"]
                .as_str()
                .unwrap_or_default()
                .contains(&d.home.display().to_string()),
        "names what it would give away: {e}"
    );
    assert!(d.ok("team.list", json!({}))["runs"]
        .as_array()
        .unwrap()
        .is_empty());
    let run = d.run(goal, json!({"agent": "executor"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert!(d.work.join("planted.txt").exists());
}
