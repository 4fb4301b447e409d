//! Slurm placement (issue 35) against a real Slurm: munged, slurmctld, two slurmd (nodes n1
//! and n2 on this host) and slurmrestd with JWT, started by `tests/slurm/start.sh` (or the one
//! `.ci/run` started, named by `CREW_SLURM_ENV`). No part of Slurm is mocked. A test that
//! cannot get a cluster fails, saying why: where Slurm is not installed, nextest's default
//! filter and `make test` (tests/run.sh) leave this binary out and count it as skipped.

mod common;
#[path = "support/slurm.rs"]
mod slurm_cluster;

use common::{git, path_str, Daemon, Opts};
use serde_json::{json, Value};
use slurm_cluster::{cluster, Cluster};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Daemons whose `fake-slurm` runtime runs the fake agent on the cluster.
trait FakeDaemon {
    fn daemon(&self, extra: &str) -> Daemon;
    fn daemon_env(&self, extra: &str, env: Vec<(String, String)>) -> Daemon;
}

impl FakeDaemon for Cluster {
    /// A daemon whose `fake-slurm` runtime runs the fake agent on the cluster.
    fn daemon(&self, extra: &str) -> Daemon {
        self.daemon_env(extra, vec![])
    }

    /// `daemon`, started with `env` added to its environment (not on restarts).
    fn daemon_env(&self, extra: &str, env: Vec<(String, String)>) -> Daemon {
        let fake = common::crewd_bin().with_file_name("crew-fake-agent");
        let config = format!(
            "max_attempts = 2\n{extra}\n{slurm}\
             [runtimes.fake-slurm]\nadapter = \"pi\"\ncommand = [{fake:?}]\nrpc = false\nplacement = \"slurm\"\n",
            slurm = self.slurm_config(),
            fake = fake.display().to_string(),
        );
        Daemon::start_with(Opts { config, env })
    }
}

fn repo(d: &Daemon) {
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("base.txt"), "base\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
}

/// Team `fan`: a planner that fans out `block` (a file), then an integrate step.
fn fan_team(d: &Daemon, block: &Path, integrate: &str) {
    d.project_file(
        "teams/fan.team.md",
        "---\nname: fan\ndefaultWorkflow: fan\nmaxConcurrency: 32\n---\n\n\
         - planner: agent=planner\n- executor: agent=executor\n- verifier: agent=verifier\n",
    );
    d.project_file(
        "workflows/fan.workflow.md",
        &format!(
            "---\nname: fan\n---\n\n## plan\nrole: planner\nexpands: tasks\n\nSplit the work. [fake:fanout={}]\n\n\
             ## integrate\nrole: verifier\ndependsOn: plan\n\n{integrate}\n",
            path_str(block)
        ),
    );
}

fn block(ids: &[String], task: impl Fn(&str) -> String) -> String {
    let tasks: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "role": "executor", "title": format!("task {id}"), "task": task(id),
                   "dependsOn": [], "scope": [format!("{id}.txt")]})
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "tasks": tasks })).unwrap()
}

fn head_and_status(w: &Path) -> (String, String) {
    (
        git(w, &["rev-parse", "HEAD"]),
        git(w, &["status", "--porcelain"]),
    )
}

#[test]
fn twenty_fan_out_tasks_run_on_both_nodes_and_integrate() {
    let c = cluster("twenty_fan_out_tasks_run_on_both_nodes_and_integrate");
    let d = c.daemon("");
    repo(&d);
    let before = head_and_status(&d.work);
    let ids: Vec<String> = (1..=20).map(|i| format!("t{i:02}")).collect();
    let b = d.fixture_path("block.json");
    std::fs::write(
        &b,
        block(&ids, |id| {
            format!("[fake:write={id}.txt:from {id}][fake:sleep=1500ms]")
        }),
    )
    .unwrap();
    let cats: String = ids
        .iter()
        .map(|id| format!("[fake:cat={id}.txt]"))
        .collect();
    fan_team(&d, &b, &cats);
    let run = d.run(
        "build it",
        json!({"team": "fan", "workspace": "worktree", "runtime": "fake-slurm", "maxFanOutTasks": 20}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    // Every task was a Slurm job (the planner, the 20, the integrate step), each once, and
    // they ran on both nodes.
    let jobs = c.jobs_of(&run);
    assert_eq!(jobs.len(), 22, "{jobs:?}");
    assert!(jobs.iter().all(|(_, s, _)| s == "COMPLETED"), "{jobs:?}");
    let nodes: std::collections::BTreeSet<&str> = jobs.iter().map(|(_, _, n)| n.as_str()).collect();
    assert!(
        nodes.contains("n1") && nodes.contains("n2"),
        "jobs ran on {nodes:?}"
    );
    // Every result commit is integrated, and the integrate step saw all of them.
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    for id in &ids {
        assert!(merged.lines().any(|l| l == format!("{id}.txt")), "{merged}");
    }
    let text = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/02_integrate.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for id in &ids {
        assert!(text.contains(&format!("{id}.txt: from {id}")), "{text}");
    }
    // The user's checkout is untouched.
    assert_eq!(head_and_status(&d.work), before);
}

/// The run's job names, with how many jobs Slurm has of each.
fn job_counts(c: &Cluster, run: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (name, _, _) in c.jobs_of(run) {
        *m.entry(name).or_insert(0) += 1;
    }
    m
}

#[test]
fn kill_9_while_jobs_run_reattaches_without_submitting_twice() {
    let c = cluster("kill_9_while_jobs_run_reattaches_without_submitting_twice");
    let mut d = c.daemon("");
    repo(&d);
    let ids: Vec<String> = (1..=6).map(|i| format!("k{i}")).collect();
    let b = d.fixture_path("block.json");
    std::fs::write(
        &b,
        block(&ids, |id| {
            format!("[fake:write={id}.txt:from {id}][fake:sleep=6s]")
        }),
    )
    .unwrap();
    fan_team(&d, &b, "Check. [fake:cat=k1.txt]");
    let run = d.run(
        "build it",
        json!({"team": "fan", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    // The six jobs are in Slurm and some run: now crewd dies.
    until("the fan-out jobs to run", Duration::from_secs(120), || {
        let jobs = c.jobs_of(&run);
        jobs.len() >= 7
            && jobs
                .iter()
                .any(|(n, s, _)| n.contains("-k") && s == "RUNNING")
    });
    d.kill9();
    let during = job_counts(&c, &run);
    d.spawn(&[]);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    // Each attempt was submitted once: one job per name, and the six tasks each ran in their
    // first attempt (followed again, not retried).
    let counts = job_counts(&c, &run);
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    for id in &ids {
        assert_eq!(
            counts.get(&format!("crew-{run}-{id}-1")),
            Some(&1),
            "{counts:?}"
        );
        assert!(
            !counts.contains_key(&format!("crew-{run}-{id}-2")),
            "{counts:?}"
        );
    }
    for name in during.keys() {
        assert!(counts.contains_key(name), "{name} was lost: {counts:?}");
    }
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    for id in &ids {
        assert!(merged.lines().any(|l| l == format!("{id}.txt")), "{merged}");
    }
    let recovered: Vec<Value> = d
        .events(None)
        .into_iter()
        .filter(|e| e["type"] == "daemon.recovered")
        .collect();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(
        recovered[0]["data"]["requeuedTasks"],
        json!([]),
        "{recovered:?}"
    );
}

/// crewd dies by SIGKILL (a fault point) the instant after Slurm took the job and before the
/// job's id is journaled: the journal holds only the intent (`worker.submitting`). After a
/// restart the job is found by its name and followed: Slurm has exactly one job for the
/// attempt, the task finishes in its first attempt and nothing is requeued.
#[test]
fn a_crewd_killed_between_submit_and_journaling_the_id_finds_the_job_by_name() {
    let c = cluster("a_crewd_killed_between_submit_and_journaling_the_id_finds_the_job_by_name");
    let mut d = c.daemon_env(
        "",
        vec![("CREW_TEST_FAULT".into(), "slurm-submitted:kill".into())],
    );
    repo(&d);
    common::one_step_team(
        &d,
        "one",
        "Work. [fake:write=one.txt:one][fake:sleep=2s]",
        "executor",
    );
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    d.wait_killed_at_fault();
    let during = job_counts(&c, &run);
    assert_eq!(during.len(), 1, "the job was submitted: {during:?}");
    d.spawn(&[]);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    let counts = job_counts(&c, &run);
    assert_eq!(counts, during, "one job for the attempt, never a second");
    assert!(counts.keys().all(|n| n.ends_with("-1")), "{counts:?}");
    let evs = d.events(Some(&run));
    let of = |t: &str| evs.iter().filter(|e| e["type"] == t).count();
    assert_eq!(
        (
            of("worker.submitting"),
            of("worker.submitted"),
            of("task.started")
        ),
        (1, 1, 1),
        "the intent before the kill, the id after the restart"
    );
    let recovered: Vec<Value> = d
        .events(None)
        .into_iter()
        .filter(|e| e["type"] == "daemon.recovered")
        .collect();
    assert_eq!(
        recovered[0]["data"]["requeuedTasks"],
        json!([]),
        "{recovered:?}"
    );
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    assert!(merged.lines().any(|l| l == "one.txt"), "{merged}");
}

/// A local run with one candidate on the cluster (`candidates: [fake, fake-slurm]`): crewd dies
/// right after that candidate's job was submitted. After the restart the job is followed by
/// its name, as for a Slurm run — it used to be taken for a local orphan (the run's runtime
/// is local), started again as a second job while the first ran on.
#[test]
fn a_cluster_candidate_of_a_local_run_is_followed_after_a_restart() {
    let c = cluster("a_cluster_candidate_of_a_local_run_is_followed_after_a_restart");
    let mut d = c.daemon_env(
        "",
        vec![("CREW_TEST_FAULT".into(), "slurm-submitted:kill".into())],
    );
    repo(&d);
    d.user_team(
        "mixed",
        "- executor: agent=executor\n",
        "## build\nrole: executor\ncandidates: [fake, fake-slurm]\nselect: first\n\n\
         Work. [fake:write=one.txt:one][fake:sleep=2s]\n",
    );
    let run = d.run(
        "write one",
        json!({"team": "mixed", "workspace": "worktree", "runtime": "fake"}),
    );
    d.wait_killed_at_fault();
    let during = job_counts(&c, &run);
    assert_eq!(
        during.len(),
        1,
        "the candidate's job was submitted: {during:?}"
    );
    d.spawn(&[]);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(job_counts(&c, &run), during, "one job, never a second");
    let evs = d.events(Some(&run));
    let submitted = evs
        .iter()
        .filter(|e| e["type"] == "worker.submitting")
        .count();
    assert_eq!(submitted, 1);
}

/// Anyone on the cluster can submit a job under the name crew gives an attempt (`squeue`
/// shows every job's name). crewd dies after journaling the intent and before submitting
/// (a `kill` fault point); meanwhile `nobody` submits a job of that name and comment, and so
/// does crewd's own user (root here) without the attempt's tag. After the restart crewd
/// adopts neither: it submits its own job, the task completes, and both foreign jobs are as
/// they were (held, never cancelled by crewd).
#[test]
fn a_job_of_the_attempts_name_that_crewd_did_not_submit_is_not_adopted() {
    let c = cluster("a_job_of_the_attempts_name_that_crewd_did_not_submit_is_not_adopted");
    let d = c.daemon_env("", vec![kill_before_submit()]);
    not_adopted(&c, d);
}

/// The same through the client commands (`squeue --json` lists the user by uid and name).
#[test]
fn the_cli_interface_adopts_no_job_it_did_not_submit() {
    let c = cluster("the_cli_interface_adopts_no_job_it_did_not_submit");
    let d = cli_daemon_env(&c, "", vec![kill_before_submit()]);
    not_adopted(&c, d);
}

fn kill_before_submit() -> (String, String) {
    ("CREW_TEST_FAULT".into(), "slurm-submit:kill".into())
}

/// `a_job_of_the_attempts_name_that_crewd_did_not_submit_is_not_adopted` with daemon `d`,
/// which dies before its first submission.
fn not_adopted(c: &Cluster, mut d: Daemon) {
    repo(&d);
    common::one_step_team(
        &d,
        "one",
        "Work. [fake:write=one.txt:one][fake:sleep=1s]",
        "executor",
    );
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    d.wait_killed_at_fault();
    assert!(job_counts(c, &run).is_empty(), "nothing submitted yet");

    let name = format!("crew-{run}-01_only-1");
    let comment = format!("crew run {run} task 01_only attempt 1");
    let sbatch = |as_nobody: bool| -> u64 {
        let mut cmd = if as_nobody {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "nobody", "--", "sbatch"]);
            c
        } else {
            std::process::Command::new("sbatch")
        };
        let out = cmd
            .args([
                "--parsable",
                &format!("--job-name={name}"),
                &format!("--comment={comment}"),
                "--chdir=/tmp",
                "--output=/dev/null",
                // Held: listed (pending) without taking a slot crewd's own job needs.
                "--hold",
                "--wrap=sleep 600",
            ])
            .env("SLURM_CONF", c.get("SLURM_CONF"))
            .current_dir("/tmp")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    // nobody's last: the newest job of the name is the one a look-up by name alone would take.
    let foreign = [sbatch(false), sbatch(true)];
    let state = |id: u64| {
        c.cmd(
            "squeue",
            &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%T"],
        )
        .trim()
        .to_string()
    };
    assert_eq!(foreign.map(state), ["PENDING", "PENDING"]);

    d.spawn(&[]);
    let submitted = || -> Option<u64> {
        d.events(Some(&run))
            .into_iter()
            .find(|e| e["type"] == "worker.submitted")
            .and_then(|e| e["data"]["jobId"].as_u64())
    };
    until("the attempt's job id", Duration::from_secs(60), || {
        submitted().is_some()
    });
    let own = submitted().unwrap();
    let cleanup = || {
        for id in foreign {
            c.cmd("scancel", &[&id.to_string()]);
        }
    };
    if foreign.contains(&own) {
        cleanup();
        panic!("crewd adopted job {own}, which it never submitted (foreign: {foreign:?})");
    }
    let end = d.wait(&run);
    let states: Vec<String> = foreign.iter().map(|id| state(*id)).collect();
    cleanup();
    assert_eq!(end, "completed", "{}", d.status(&run));
    assert_eq!(states, ["PENDING", "PENDING"], "crewd left them alone");
    let evs = d.events(Some(&run));
    let of = |t: &str| evs.iter().filter(|e| e["type"] == t).count();
    assert_eq!(
        (of("worker.submitting"), of("task.started")),
        (1, 1),
        "its one attempt, submitted once after the restart"
    );
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    assert!(merged.lines().any(|l| l == "one.txt"), "{merged}");
}

/// `team.import` takes a run exported elsewhere, and a bundle's checksum is no signature. A
/// forged bundle whose run "failed" while its task's attempt was still on a job (its events up
/// to `worker.submitted`, then `run.failed`), naming a job crewd never submitted (another job
/// of crewd's own Slurm user) and a staging directory of the forger's choosing: imported,
/// resumed and followed by a restart, recovery would re-attach to that job (follow it, cancel
/// it, take files from that directory). The import is refused.
#[test]
fn an_imported_run_cannot_hand_crewd_a_job_to_follow() {
    let c = cluster("an_imported_run_cannot_hand_crewd_a_job_to_follow");
    let mut d = c.daemon("");
    repo(&d);
    common::one_step_team(&d, "one", "Work. [fake:write=one.txt:one]", "executor");
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let mut bundle = d.ok("team.export", json!({"runId": run}))["bundle"].clone();
    d.ok("team.forget", json!({"runId": run}));

    let out = std::process::Command::new("sbatch")
        .args([
            "--parsable",
            "--job-name=not-crews",
            "--chdir=/tmp",
            "--output=/dev/null",
            "--hold",
            "--wrap=sleep 600",
        ])
        .env("SLURM_CONF", c.get("SLURM_CONF"))
        .current_dir("/tmp")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let foreign: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let state = || {
        c.cmd(
            "squeue",
            &["-h", "-t", "all", "-j", &foreign.to_string(), "-o", "%T"],
        )
        .trim()
        .to_string()
    };
    assert_eq!(state(), "PENDING", "held");
    let victim = d.dir.path().join("victim");
    let events = bundle["events"].as_array().unwrap().clone();
    let last = events
        .iter()
        .rposition(|e| e["type"] == "worker.submitted")
        .expect("the run's job was journaled");
    let mut forged: Vec<Value> = events[..=last].to_vec();
    for e in forged.iter_mut() {
        if e["type"] == "worker.submitting" {
            e["data"]["staging"] = json!(path_str(&victim));
        }
        if e["type"] == "worker.submitted" {
            e["data"]["jobId"] = json!(foreign);
        }
    }
    let mut end = events
        .iter()
        .find(|e| e["type"] == "run.completed")
        .unwrap()
        .clone();
    end["type"] = json!("run.failed");
    end["data"]["reason"] = json!("forged");
    end["runSeq"] = json!(forged.len() + 1);
    forged.push(end);
    bundle["events"] = json!(forged);
    // The view need only agree with the replay on the fields it has.
    bundle["run"] = json!({"run": {"id": run}, "tasks": [{"id": "01_only"}]});
    common::reseal(&mut bundle);

    let answer = d.http("team.import", json!({"bundle": bundle}));
    if answer.get("error").is_none() {
        // Accepted (crewd before the fix): show what it does with the run.
        d.ok(
            "team.resume",
            json!({"runId": run, "confirmImported": true}),
        );
        d.restart();
        let acted = Instant::now();
        while Instant::now() - acted < Duration::from_secs(60)
            && !victim.exists()
            && state() == "PENDING"
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        let seen = (victim.exists(), state());
        c.cmd("scancel", &[&foreign.to_string()]);
        panic!(
            "the forged run was imported; after a restart crewd made {} ({}) and job {foreign} \
             is {}: {answer}",
            path_str(&victim),
            if seen.0 { "it exists" } else { "not seen" },
            seen.1
        );
    }
    let e = &answer["error"];
    assert_eq!(e["code"], 1003, "{e}");
    assert!(e.to_string().contains("in flight"), "{e}");
    // Nothing of the run was kept, so nothing is left for a restart to act on.
    assert!(d.err("team.status", json!({"runId": run}))["code"].is_number());
    // Recovery runs before the restarted daemon answers.
    d.restart();
    let after = state();
    c.cmd("scancel", &[&foreign.to_string()]);
    assert_eq!(after, "PENDING", "crewd left the job alone");
    assert!(!victim.exists());
}

/// Candidates on the cluster that each fail the step's check on their node (the check wants
/// `b.txt`, which only the fix writes; on a node the fake agent cannot tell candidates apart,
/// so both write `a.txt`): each completes
/// with its commit and its failing check recorded (as a local candidate does), so the fix
/// starts from the best one — they used to fail as `verify` failures, their work gone.
#[test]
fn candidates_failing_their_checks_on_the_node_are_ruled_out_and_fixed() {
    let c = cluster("candidates_failing_their_checks_on_the_node_are_ruled_out_and_fixed");
    let d = c.daemon("");
    repo(&d);
    d.user_team(
        "fixit",
        "- executor: agent=executor\n- reviewer: agent=reviewer\n",
        "## build\nrole: executor\ncandidates: 2\nselect: smallest\n\
         verifyCommands: test -f a.txt && test -f b.txt\n\n\
         [fake:write=a.txt:a\\n][fake:fix-write=b.txt:fixed]\n",
    );
    let run = d.run(
        "make it",
        json!({"team": "fixit", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let of = |kind: &str, task: &str| {
        evs.iter()
            .filter(|e| e["type"] == kind && e["taskId"] == task)
            .count()
    };
    for k in 1..=2 {
        let cand = format!("_cand-01_build-{k}");
        assert_eq!(of("task.completed", &cand), 1, "{cand}: {}", d.status(&run));
        assert_eq!(of("task.failed", &cand), 0, "{cand}");
        let done = evs
            .iter()
            .find(|e| e["type"] == "task.completed" && e["taskId"] == cand.as_str())
            .unwrap();
        assert_eq!(done["data"]["commit"]["files"], 1, "its work kept: {done}");
        assert_ne!(done["data"]["verification"][0]["exitCode"], 0, "{done}");
    }
    let added = evs
        .iter()
        .find(|e| e["type"] == "task.fix_added")
        .expect("no fix added");
    assert_eq!(
        added["data"]["task"]["dependsOn"],
        json!(["_cand-01_build-1"])
    );
    assert_eq!(of("task.completed", "_fix-01_build-1"), 1);
}

/// The task's checks run on the node, in the worker's checkout, before it commits: a check
/// that passes only there (its working directory is the node's scratch checkout, never
/// crewd's worktree) passes, and its record comes back with the result.
#[test]
fn the_tasks_checks_run_on_the_node() {
    let c = cluster("the_tasks_checks_run_on_the_node");
    let mut d = c.daemon("");
    let check = "pwd | grep crew-worker-";
    let cfg = std::fs::read_to_string(&d.config).unwrap()
        + &format!(
            "[projects.{:?}]\ntask_verify_commands = [{check:?}]\n",
            path_str(&d.work)
        );
    std::fs::write(&d.config, cfg).unwrap();
    d.restart();
    repo(&d);
    common::one_step_team(&d, "one", "Work. [fake:write=one.txt:one]", "executor");
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let done = evs.iter().find(|e| e["type"] == "task.completed").unwrap();
    let v = &done["data"]["verification"];
    assert_eq!(v[0]["command"], check, "{done}");
    assert_eq!(v[0]["exitCode"], 0, "{done}");
    assert!(
        v[0]["tail"]
            .as_str()
            .unwrap_or_default()
            .contains("crew-worker-"),
        "{done}"
    );
    let output = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "verify/01_only.attempt-1.1.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(output.contains("$ pwd | grep crew-worker-"), "{output}");
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    assert!(merged.lines().any(|l| l == "one.txt"), "{merged}");
}

/// Processes whose command line or working directory names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let p = e.path();
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(p.join("cwd")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) || cwd.display().to_string().contains(needle) {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

#[test]
fn cancel_ends_the_jobs_cancelled_and_leaves_no_process() {
    let c = cluster("cancel_ends_the_jobs_cancelled_and_leaves_no_process");
    let d = c.daemon("");
    repo(&d);
    common::one_step_team(&d, "slow", "Work. [fake:sleep=120s]", "executor");
    let run = d.run(
        "work slowly",
        json!({"team": "slow", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    until("the job to run", Duration::from_secs(60), || {
        c.jobs_of(&run).iter().any(|(_, s, _)| s == "RUNNING")
    });
    until(
        "the agent to start on the node",
        Duration::from_secs(60),
        || !processes_naming(&format!("crew-worker-{run}")).is_empty(),
    );
    d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(d.wait(&run), "cancelled");
    until("Slurm to end the job", Duration::from_secs(60), || {
        let jobs = c.jobs_of(&run);
        !jobs.is_empty() && jobs.iter().all(|(_, s, _)| s == "CANCELLED")
    });
    until_gone(&run);
}

/// Slurm refuses the first cancel (a controller that timed out): crewd asks again, and the job
/// still ends CANCELLED with no process left — it used to ask once and let the job run on.
#[test]
fn a_refused_cancel_is_asked_again() {
    let c = cluster("a_refused_cancel_is_asked_again");
    let d = c.daemon_env(
        "",
        vec![("CREW_TEST_FAULT".into(), "slurm-cancel:error-once".into())],
    );
    repo(&d);
    common::one_step_team(&d, "slow", "Work. [fake:sleep=120s]", "executor");
    let run = d.run(
        "work slowly",
        json!({"team": "slow", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    until("the job to run", Duration::from_secs(60), || {
        c.jobs_of(&run).iter().any(|(_, s, _)| s == "RUNNING")
    });
    d.ok("team.cancel", json!({"runId": run}));
    d.wait_log("cannot cancel the Slurm job; asking again");
    until("Slurm to end the job", Duration::from_secs(50), || {
        let jobs = c.jobs_of(&run);
        !jobs.is_empty() && jobs.iter().all(|(_, s, _)| s == "CANCELLED")
    });
    assert_eq!(d.wait(&run), "cancelled");
    until_gone(&run);
}

#[test]
fn a_job_past_its_time_limit_is_a_retryable_timeout() {
    let c = cluster("a_job_past_its_time_limit_is_a_retryable_timeout");
    // Slurm's limits are whole minutes: one, and an agent that would take three.
    let d = c.daemon("");
    let cfg = std::fs::read_to_string(&d.config)
        .unwrap()
        .replace("time_limit_minutes = 5", "time_limit_minutes = 1");
    let mut d = d;
    std::fs::write(&d.config, cfg).unwrap();
    d.restart();
    repo(&d);
    common::one_step_team(&d, "slow", "Work. [fake:sleep=180s]", "executor");
    let run = d.run(
        "work too long",
        json!({"team": "slow", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    let mut retry = Value::Null;
    until("the first attempt to end", Duration::from_secs(240), || {
        if let Some(e) = d
            .events(Some(&run))
            .into_iter()
            .find(|e| e["type"] == "task.retrying")
        {
            retry = e;
        }
        !retry.is_null()
    });
    assert_eq!(retry["data"]["reason"], "timeout", "{retry}");
    let error = retry["data"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("TIMEOUT") && error.contains("time limit"),
        "{error}"
    );
    d.ok("team.cancel", json!({"runId": run}));
    d.wait(&run);
    let jobs = c.jobs_of(&run);
    assert_eq!(jobs[0].1, "TIMEOUT", "{jobs:?}");
}

#[test]
fn a_lost_node_retries_elsewhere_and_its_late_worker_is_not_taken() {
    let test = "a_lost_node_retries_elsewhere_and_its_late_worker_is_not_taken";
    // This test kills a slurmd: never on a cluster other tests share.
    let shared = std::env::var_os("CREW_SLURM_ENV");
    std::env::remove_var("CREW_SLURM_ENV");
    let c = cluster(test);
    if let Some(v) = shared {
        std::env::set_var("CREW_SLURM_ENV", v);
    }
    let d = c.daemon("");
    repo(&d);
    common::one_step_team(
        &d,
        "one",
        "Work. [fake:write=out.txt:from the node][fake:sleep=45s]",
        "executor",
    );
    let run = d.run(
        "work",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    let mut node = String::new();
    until("the job to run on a node", Duration::from_secs(60), || {
        if let Some((_, _, n)) = c.jobs_of(&run).into_iter().find(|(_, s, _)| s == "RUNNING") {
            node = n;
        }
        !node.is_empty()
    });
    until("the agent to start", Duration::from_secs(60), || {
        !processes_naming(&format!("crew-worker-{run}")).is_empty()
    });
    // The node's slurmd dies; the job's processes on it go on (as on a node cut off).
    let dir = c.owned.as_ref().unwrap().path();
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap();
    let pid: i32 = pids
        .lines()
        .find_map(|l| l.strip_prefix(&format!("slurmd.{node} ")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(unsafe { kill(pid, 9) }, 0);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    let evs = d.events(Some(&run));
    let retry = evs
        .iter()
        .find(|e| e["type"] == "task.retrying")
        .unwrap_or_else(|| {
            let kinds: Vec<String> = evs
                .iter()
                .map(|e| format!("{} {}", e["type"], e["data"]["error"]))
                .collect();
            panic!(
                "no retry: {kinds:?}; jobs {:?}; killed {node}",
                c.jobs_of(&run)
            )
        });
    // NODE_FAIL, or (Slurm 22.05's REST jobs are always requeueable) a requeue after the
    // node went down, which crew cancels and retries itself.
    assert!(
        ["node_fail", "requeued"].contains(&retry["data"]["reason"].as_str().unwrap_or("")),
        "{retry}"
    );
    let jobs = c.jobs_of(&run);
    let first = jobs.iter().find(|(n, _, _)| n.ends_with("-1")).unwrap();
    let second = jobs.iter().find(|(n, _, _)| n.ends_with("-2")).unwrap();
    assert!(
        ["NODE_FAIL", "CANCELLED"].contains(&first.1.as_str()),
        "{jobs:?}"
    );
    assert_eq!(second.1, "COMPLETED", "{jobs:?}");
    assert_ne!(second.2, node, "the retry ran on the lost node: {jobs:?}");
    // The lost node's worker finishes later, in its own attempt's directory, with its own
    // token: crewd took attempt 2's result, not it.
    until(
        "the lost node's worker to finish",
        Duration::from_secs(120),
        || processes_naming(&format!("crew-worker-{run}")).is_empty(),
    );
    let staging = PathBuf::from(
        d.config
            .to_str()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("staging_dir = "))
            .unwrap()
            .trim_matches('"'),
    )
    .join(&run);
    let late = staging.join("01_only.attempt-1/final.json");
    let taken = staging.join("01_only.attempt-2/final.json");
    let token = |p: &Path| -> String {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v["token"].as_str().unwrap().to_string()
    };
    assert!(late.exists(), "the late worker wrote its record");
    assert_ne!(token(&late), token(&taken));
    let commit = git(&d.work, &["show", &format!("crew/{run}:out.txt")]);
    assert!(commit.contains("from"), "{commit}");
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// Wait (30 s at most) until no worker or agent process of `run` is left besides crewd; the
/// ones left are named when they are not.
fn until_gone(run: &str) {
    let left = || {
        let mut l = processes_naming(&format!("crew-worker-{run}"));
        l.extend(
            processes_naming(run)
                .into_iter()
                .filter(|p| !p.contains("crewd")),
        );
        l
    };
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let now_left = left();
        if now_left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < end,
            "timed out waiting for the worker and agent to go; left: {now_left:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait (bounded) until `f` holds, looking every 100 ms.
fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The token crewd minted for an attempt (what its worker must echo) appears nowhere crewd
/// journals, serves or exports: not in the run's events, its status, its bundle, nor any file
/// of the daemon's state (journal, run directory). Before, `worker.submitting` carried it.
#[test]
fn the_attempts_token_is_never_journaled_served_or_exported() {
    let c = cluster("the_attempts_token_is_never_journaled_served_or_exported");
    let d = c.daemon("");
    repo(&d);
    common::one_step_team(&d, "one", "Work. [fake:write=one.txt:one]", "executor");
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let staging = staging_of(&d).join(&run).join("01_only.attempt-1");
    let launch: Value =
        serde_json::from_str(&std::fs::read_to_string(staging.join("launch.json")).unwrap())
            .unwrap();
    let token = launch["token"].as_str().unwrap().to_string();
    assert!(token.len() >= 32, "{launch}");
    let fin: Value =
        serde_json::from_str(&std::fs::read_to_string(staging.join("final.json")).unwrap())
            .unwrap();
    assert_eq!(fin["token"], token.as_str(), "the worker echoed it");

    let events = serde_json::to_string(&d.events(Some(&run))).unwrap();
    assert!(events.contains("worker.submitting"), "{events}");
    assert!(!events.contains(&token), "the events name the token");
    let status = d.status(&run).to_string();
    assert!(!status.contains(&token), "the status names the token");
    let bundle = d.ok("team.export", json!({"runId": run})).to_string();
    assert!(!bundle.contains(&token), "the bundle names the token");
    let mut files = 0;
    let mut stack = vec![d.state_dir.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files += 1;
                let bytes = std::fs::read(&p).unwrap_or_default();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&token),
                    "{} holds the token",
                    p.display()
                );
            }
        }
    }
    assert!(files > 3, "the state directory was read ({files} files)");
}

/// The staging directory a test daemon's config names.
fn staging_of(d: &Daemon) -> PathBuf {
    PathBuf::from(
        std::fs::read_to_string(&d.config)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("staging_dir = "))
            .unwrap()
            .trim_matches('"'),
    )
}

/// A daemon whose `fake-slurm` runtime reaches the cluster through its client commands
/// (`interface = "cli"`: sbatch, squeue, scancel), no slurmrestd URL or token in its config.
fn cli_daemon(c: &Cluster, extra_slurm: &str) -> Daemon {
    cli_daemon_env(c, extra_slurm, vec![])
}

/// `cli_daemon`, started with `env` added to its environment (not on restarts).
fn cli_daemon_env(c: &Cluster, extra_slurm: &str, env: Vec<(String, String)>) -> Daemon {
    let fake = common::crewd_bin().with_file_name("crew-fake-agent");
    let slurm = c.slurm_config_cli() + extra_slurm;
    assert!(!slurm.contains("url ="), "{slurm}");
    let config = format!(
        "max_attempts = 2\n{slurm}\
         [runtimes.fake-slurm]\nadapter = \"pi\"\ncommand = [{fake:?}]\nrpc = false\nplacement = \"slurm\"\n",
        fake = fake.display().to_string(),
    );
    Daemon::start_with(Opts { config, env })
}

/// `interface = "cli"`: a fan-out of four tasks submitted by `sbatch`, followed by `squeue`,
/// integrated as through REST; sbatch's jobs are never requeued by Slurm.
#[test]
fn the_cli_interface_submits_follows_and_integrates() {
    let c = cluster("the_cli_interface_submits_follows_and_integrates");
    let d = cli_daemon(&c, "");
    repo(&d);
    let before = head_and_status(&d.work);
    let ids: Vec<String> = (1..=4).map(|i| format!("c{i}")).collect();
    let b = d.fixture_path("block.json");
    std::fs::write(
        &b,
        block(&ids, |id| {
            format!("[fake:write={id}.txt:from {id}][fake:sleep=1s]")
        }),
    )
    .unwrap();
    let cats: String = ids
        .iter()
        .map(|id| format!("[fake:cat={id}.txt]"))
        .collect();
    fan_team(&d, &b, &cats);
    let run = d.run(
        "build it",
        json!({"team": "fan", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let jobs = c.jobs_of(&run);
    assert_eq!(jobs.len(), 6, "{jobs:?}");
    assert!(jobs.iter().all(|(_, s, _)| s == "COMPLETED"), "{jobs:?}");
    let ids_in_slurm = c.cmd("squeue", &["-h", "-t", "all", "-o", "%i|%j"]);
    for line in ids_in_slurm
        .lines()
        .filter(|l| l.contains(&format!("crew-{run}-")))
    {
        let id = line.split('|').next().unwrap();
        let show = c.cmd("scontrol", &["-o", "show", "job", id]);
        assert!(show.contains("Requeue=0"), "{show}");
    }
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    for id in &ids {
        assert!(merged.lines().any(|l| l == format!("{id}.txt")), "{merged}");
    }
    let text = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/02_integrate.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for id in &ids {
        assert!(text.contains(&format!("{id}.txt: from {id}")), "{text}");
    }
    assert_eq!(head_and_status(&d.work), before);
}

/// `interface = "cli"`: cancel `scancel`s the job (CANCELLED in Slurm, nothing of the run
/// left running).
#[test]
fn the_cli_interface_cancels() {
    let c = cluster("the_cli_interface_cancels");
    let d = cli_daemon(&c, "");
    repo(&d);
    common::one_step_team(&d, "slow", "Work. [fake:sleep=120s]", "executor");
    let run = d.run(
        "work slowly",
        json!({"team": "slow", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    until(
        "the agent to start on the node",
        Duration::from_secs(60),
        || !processes_naming(&format!("crew-worker-{run}")).is_empty(),
    );
    d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(d.wait(&run), "cancelled");
    until("Slurm to end the job", Duration::from_secs(60), || {
        let jobs = c.jobs_of(&run);
        !jobs.is_empty() && jobs.iter().all(|(_, s, _)| s == "CANCELLED")
    });
    until_gone(&run);
}

/// `interface = "cli"`: a job Slurm ends FAILED (its program cannot run: exit 127) is the
/// attempt's failure with Slurm's exit code, not retried; read from `squeue --json`.
#[test]
fn the_cli_interface_maps_a_failed_job() {
    let c = cluster("the_cli_interface_maps_a_failed_job");
    let d = cli_daemon(&c, "worker = \"/nonexistent/crew-worker\"\n");
    repo(&d);
    common::one_step_team(&d, "one", "Work. [fake:write=one.txt:one]", "executor");
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    assert!(
        !evs.iter().any(|e| e["type"] == "task.retrying"),
        "FAILED is not retryable"
    );
    let failed = evs
        .iter()
        .find(|e| e["type"] == "task.failed")
        .expect("task.failed");
    let error = failed["data"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("FAILED") && error.contains("exit code 127"),
        "{failed}"
    );
    let jobs = c.jobs_of(&run);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].1, "FAILED", "{jobs:?}");
}

/// The daemon's directories (its `$HOME`, checkout and state) and the node's scratch checkout
/// (the worker's `$TMPDIR`, from crewd's environment) outside `/tmp`: the box's `/tmp` is a
/// private, writable tmpfs, so a write under `/tmp` would land in the box, which is not what a
/// user's home is (as in sandbox.rs). Set after the cluster started; each test is a process of
/// its own under nextest.
fn out_of_tmp() {
    std::env::set_var("TMPDIR", env!("CARGO_TARGET_TMPDIR"));
}

/// bubblewrap can make a box on this host (the nodes are this host). Where it cannot, the box
/// tests fail saying so, never pass.
fn require_bwrap(test: &str) {
    let out = std::process::Command::new("bwrap")
        .args([
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "/bin/true",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "{test}: bubblewrap cannot make a box here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => {
            panic!("{test}: bubblewrap is not installed ({e}): install Debian's `bubblewrap`")
        }
    }
}

/// A hostile `command` agent placed on Slurm with the default sandbox (`auto`) runs on its node
/// in the box of a local attempt: the fake `$HOME`'s `~/.ssh` is not there, the staging
/// directory's token is not there, and nothing outside its worktree takes its writes (the
/// user's checkout, `$HOME`, crewd's state directory, the staging directory); its own edit
/// comes back as the task's result.
#[test]
fn a_hostile_agent_on_slurm_is_boxed_on_its_node() {
    const NAME: &str = "a_hostile_agent_on_slurm_is_boxed_on_its_node";
    let c = cluster(NAME);
    require_bwrap(NAME);
    out_of_tmp();
    let mut d = c.daemon("allow_no_change = true");
    repo(&d);
    let h = d.home.clone();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::write(h.join(".bashrc"), "# rc\n").unwrap();
    let staging = staging_of(&d);
    let (hs, s, r, st) = (
        h.display(),
        d.state_dir.display(),
        d.work.display(),
        staging.display(),
    );
    let script = format!(
        "cat {hs}/.ssh/id_ed25519 2>/dev/null && echo ESCAPE ssh-key; \
         cat {st}/*/*/launch.json 2>/dev/null && echo ESCAPE launch; \
         cat {st}/*/*/env.json 2>/dev/null && echo ESCAPE env; \
         echo x >> {hs}/.bashrc 2>/dev/null; \
         echo x > {r}/base.txt 2>/dev/null; \
         echo x > {s}/pwned 2>/dev/null; \
         echo x > {st}/pwned 2>/dev/null; \
         for f in {st}/*/*/final.json; do echo x > \"$f\" 2>/dev/null; done; \
         echo mine > own.txt && echo OWN-OK; echo done"
    );
    let cfg = std::fs::read_to_string(&d.config).unwrap()
        + &format!(
            "[runtimes.hostile]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n\
             placement = \"slurm\"\n"
        );
    std::fs::write(&d.config, cfg).unwrap();
    d.restart();
    common::one_step_team(&d, "h", "Escape.", "executor");
    let run = d.run(
        "escape",
        json!({"team": "h", "workspace": "worktree", "runtime": "hostile"}),
    );
    let end = d.wait(&run);
    let result = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/01_only.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(result.contains("OWN-OK"), "{result}\n{}", d.status(&run));
    assert_eq!(end, "completed", "{}", d.status(&run));
    assert!(!result.contains("ESCAPE"), "{result}");
    assert!(!result.contains("PRIVATE KEY"), "{result}");
    let attempt = staging.join(&run).join("01_only.attempt-1");
    let launch: Value =
        serde_json::from_str(&std::fs::read_to_string(attempt.join("launch.json")).unwrap())
            .unwrap();
    let token = launch["token"].as_str().unwrap();
    assert!(
        !result.contains(token),
        "the agent read its token: {result}"
    );
    // Outside, nothing it wrote landed.
    assert_eq!(
        std::fs::read_to_string(h.join(".bashrc")).unwrap(),
        "# rc\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.work.join("base.txt")).unwrap(),
        "base\n"
    );
    assert!(!d.state_dir.join("pwned").exists());
    assert!(!staging.join("pwned").exists());
    let fin: Value =
        serde_json::from_str(&std::fs::read_to_string(attempt.join("final.json")).unwrap())
            .unwrap();
    assert_eq!(fin["token"], token, "the worker's record is its own");
    assert!(fin.get("unboxed").is_none(), "boxed on its node: {fin}");
    // Its own edit is the task's result, integrated.
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    assert!(merged.lines().any(|l| l == "own.txt"), "{merged}");
}

/// A one-step team and workflow in the user's config directory (a pre-step script runs only
/// from files the user trusts); `config` goes under the step heading.
fn user_team(d: &Daemon, name: &str, config: &str, task: &str) {
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join(format!("teams/{name}.team.md")),
        format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- exec: agent=executor\n"),
    )
    .unwrap();
    std::fs::write(
        base.join(format!("workflows/{name}.workflow.md")),
        format!("---\nname: {name}\n---\n\n## only\nrole: exec\n{config}\n\n{task}\n"),
    )
    .unwrap();
}

/// The repository of `repo`, with an executable `prep.sh` of `body` committed.
fn repo_with_script(d: &Daemon, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    repo(d);
    let p = d.work.join("prep.sh");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(&d.work, &["add", "-A"]);
    git(&d.work, &["commit", "-qm", "prep"]);
}

/// A step's pre-step script runs on the node, in the node's checkout, before the agent: the
/// file it makes is there for the agent, and its output is in the agent's prompt (and in the
/// prompt crewd keeps).
#[test]
fn a_pre_step_script_runs_on_the_node_before_the_agent() {
    let c = cluster("a_pre_step_script_runs_on_the_node_before_the_agent");
    let d = c.daemon("");
    repo_with_script(
        &d,
        "echo \"PREP-MARKER cwd=$(pwd)\"\necho ready-from-prep > prepared.txt",
    );
    user_team(
        &d,
        "prep",
        "preStepScript: ./prep.sh",
        "Use it. [fake:cat=prepared.txt]",
    );
    let run = d.run(
        "prepare",
        json!({"team": "prep", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let artifact = |name: &str| {
        d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let result = artifact("results/01_only.txt");
    assert!(result.contains("ready-from-prep"), "{result}");
    // The fake agent's transcript holds the prompt it was given: the script's output, from
    // the node's scratch checkout.
    let transcript = artifact("transcripts/01_only.attempt-1.jsonl");
    assert!(
        transcript.contains("PREP-MARKER cwd=") && transcript.contains("crew-worker-"),
        "{transcript}"
    );
    let prompt = artifact("prompts/01_only.md");
    assert!(
        prompt.contains("## Pre-step script output") && prompt.contains("PREP-MARKER"),
        "{prompt}"
    );
    // The attempt's own copy, as a local attempt keeps it: the same file.
    assert_eq!(artifact("prompts/01_only.attempt-1.md"), prompt);
}

/// A failing pre-step script on the node fails the attempt as a local one's does: reason
/// `pre_step`, the script and the end of its output in the error, no agent started.
#[test]
fn a_failing_pre_step_script_on_the_node_fails_the_attempt() {
    let c = cluster("a_failing_pre_step_script_on_the_node_fails_the_attempt");
    let d = c.daemon("");
    repo_with_script(&d, "echo PREP-BROKE; exit 3");
    user_team(&d, "prep", "preStepScript: ./prep.sh", "Never reached.");
    let run = d.run(
        "prepare",
        json!({"team": "prep", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
    let st = d.status(&run);
    let t = Daemon::task(&st, "01_only");
    let error = t["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("pre-step script `./prep.sh` exited with 3") && error.contains("PREP-BROKE"),
        "{t:#}"
    );
    let events = d.events(Some(&run));
    let retrying: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "task.retrying")
        .collect();
    assert_eq!(retrying.len(), 1, "max_attempts = 2: {events:#?}");
    assert_eq!(
        retrying[0]["data"]["reason"], "pre_step",
        "{:#}",
        retrying[0]
    );
    // No agent ran: its transcript would be in the attempt's staging directory.
    let attempt = staging_of(&d).join(&run).join("01_only.attempt-1");
    assert!(attempt.join("launch.json").exists());
    assert!(!attempt.join("transcripts").exists(), "an agent ran");
}

/// A `PATH` with everything of the system's but bubblewrap: symlinks in `bin`.
fn path_without_bwrap(bin: &Path) -> String {
    for dir in ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            if name != "bwrap" && !bin.join(&name).exists() {
                let _ = std::os::unix::fs::symlink(e.path(), bin.join(&name));
            }
        }
    }
    bin.display().to_string()
}

/// A node that cannot box (no bubblewrap on the `PATH` crewd hands the worker): with
/// `sandbox = "required"` the attempt fails there, saying so (reason `sandbox`); with `auto`
/// it runs unboxed and says why in a `task.warning` and in the worker's final record.
#[test]
fn a_node_that_cannot_box_refuses_required_and_says_so_under_auto() {
    let c = cluster("a_node_that_cannot_box_refuses_required_and_says_so_under_auto");
    let fake = common::crewd_bin().with_file_name("crew-fake-agent");
    let bin = tempfile::tempdir().unwrap();
    let path = path_without_bwrap(bin.path());
    let extra = format!(
        "sandbox = \"required\"\n[runtimes.fake-auto]\nadapter = \"pi\"\ncommand = [{fake:?}]\n\
         rpc = false\nplacement = \"slurm\"\nsandbox = \"auto\"\n",
        fake = fake.display().to_string()
    );
    let d = c.daemon_env(&extra, vec![("PATH".into(), path)]);
    repo(&d);
    common::one_step_team(&d, "one", "Work. [fake:write=one.txt:one]", "executor");
    let required = d.run(
        "required",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&required), "failed", "{}", d.status(&required));
    let st = d.status(&required);
    let error = Daemon::task(&st, "01_only")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("sandbox = \"required\" and this attempt cannot be boxed on this node")
            && error.contains("not installed"),
        "{error}"
    );
    let events = d.events(Some(&required));
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "task.retrying" && e["data"]["reason"] == "sandbox"),
        "{events:#?}"
    );

    let auto = d.run(
        "auto",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-auto"}),
    );
    assert_eq!(d.wait(&auto), "completed", "{}", d.status(&auto));
    let warned = d
        .events(Some(&auto))
        .into_iter()
        .filter(|e| e["type"] == "task.warning")
        .map(|e| e.to_string())
        .collect::<Vec<_>>();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("runs unboxed on node") && w.contains("not installed")),
        "{warned:?}"
    );
    let fin: Value = serde_json::from_str(
        &std::fs::read_to_string(
            staging_of(&d)
                .join(&auto)
                .join("01_only.attempt-1/final.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        fin["unboxed"]
            .as_str()
            .unwrap_or_default()
            .contains("not installed"),
        "{fin}"
    );
}

/// `scontrol -o show job` of the run's job named `name`.
fn job_shown(c: &Cluster, run: &str, name: &str) -> String {
    let full = format!("crew-{run}-{name}");
    let id = c
        .cmd("squeue", &["-h", "-t", "all", "-o", "%i|%j"])
        .lines()
        .find_map(|l| {
            let (id, n) = l.split_once('|')?;
            (n == full).then(|| id.to_string())
        })
        .unwrap_or_else(|| panic!("no job {full}: {:?}", c.jobs_of(run)));
    c.cmd("scontrol", &["-o", "show", "job", &id])
}

/// CPUs, memory and time limit per role and per step (issue 35): the step's over its role's
/// over the runtime's over `[slurm]`'s, shown in `team.plan`, frozen when the run starts (a
/// crewd killed and restarted with other `[slurm]` defaults submits the next task as planned),
/// and asked of Slurm: its own `scontrol show job` says so.
#[test]
fn a_steps_and_roles_cpus_memory_and_time_limit_shape_their_jobs() {
    let c = cluster("a_steps_and_roles_cpus_memory_and_time_limit_shape_their_jobs");
    let mut d = c.daemon("");
    repo(&d);
    d.project_file(
        "teams/shaped.team.md",
        "---\nname: shaped\ndefaultWorkflow: shaped\n---\n\n\
         - executor: agent=executor cpusPerTask=2 memoryMb=250\n- verifier: agent=verifier\n",
    );
    d.project_file(
        "workflows/shaped.workflow.md",
        "---\nname: shaped\n---\n\n## build\nrole: executor\nmemoryMb: 300\ntimeLimitMinutes: 7\n\n\
         Work. [fake:write=one.txt:one][fake:sleep=4s]\n\n\
         ## check\nrole: verifier\ndependsOn: build\n\nCheck. [fake:cat=one.txt]\n",
    );
    let params = json!({"goal": "build it", "cwd": path_str(&d.work), "team": "shaped",
                        "workspace": "worktree", "runtime": "fake-slurm"});
    let plan = d.ok("team.plan", params.clone());
    let job = |id: &str| {
        plan["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .map(|t| {
                // The node's box: `the_plan_says_what_box_a_slurm_tasks_node_will_try`.
                let mut job = t["slurm"].clone();
                job.as_object_mut().unwrap().remove("sandbox");
                job
            })
            .unwrap()
    };
    assert_eq!(
        job("01_build"),
        json!({"partition": c.get("CREW_SLURM_PARTITION"), "cpusPerTask": 2, "memoryMb": 300, "timeLimitMinutes": 7}),
        "{plan}"
    );
    assert_eq!(
        job("02_check"),
        json!({"partition": c.get("CREW_SLURM_PARTITION"), "cpusPerTask": 1, "memoryMb": 100, "timeLimitMinutes": 5}),
        "{plan}"
    );

    let run = d.ok("team.run", params)["runId"]
        .as_str()
        .unwrap()
        .to_string();
    until("the build job to run", Duration::from_secs(60), || {
        c.jobs_of(&run)
            .iter()
            .any(|(n, s, _)| n.contains("01_build") && s == "RUNNING")
    });
    // crewd dies; it comes back with other cluster defaults, which this run does not take.
    d.kill9();
    let cfg = std::fs::read_to_string(&d.config)
        .unwrap()
        .replace("memory_mb = 100", "memory_mb = 120")
        .replace("time_limit_minutes = 5", "time_limit_minutes = 9");
    std::fs::write(&d.config, cfg).unwrap();
    d.spawn(&[]);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    let build = job_shown(&c, &run, "01_build-1");
    for want in ["CPUs/Task=2", "MinMemoryNode=300M", "TimeLimit=00:07:00"] {
        assert!(build.contains(want), "{want}: {build}");
    }
    let check = job_shown(&c, &run, "02_check-1");
    for want in ["CPUs/Task=1", "MinMemoryNode=100M", "TimeLimit=00:05:00"] {
        assert!(check.contains(want), "{want}: {check}");
    }
}

/// The ask tool on a node (issue 35): the agent on the cluster asks, the task waits with the
/// question as a local one does, `team.respond` answers, and the answer starts a fresh attempt
/// on the cluster (the CLI's session stays on the node that asked) whose prompt holds the
/// question and the answer; the run completes with that attempt's commit.
#[test]
fn a_remote_agent_asks_and_respond_starts_a_fresh_attempt_with_the_answer() {
    let c = cluster("a_remote_agent_asks_and_respond_starts_a_fresh_attempt_with_the_answer");
    let d = c.daemon("");
    repo(&d);
    common::one_step_team(
        &d,
        "asker",
        "Pick a database. [fake:ask=Which DB?][fake:write=db.txt:chosen]",
        "executor",
    );
    let run = d.run(
        "choose storage",
        json!({"team": "asker", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["status"], "waiting", "{st}");
    assert_eq!(t["question"], "Which DB?", "{st}");
    let evs = d.events(Some(&run));
    let waiting = evs.iter().find(|e| e["type"] == "task.waiting").unwrap();
    assert_eq!(waiting["data"]["question"], "Which DB?", "{waiting}");
    // The agent had crew's ask tool on the node (pi's: the extension in its staging directory).
    let first = staging_of(&d).join(&run).join("01_only.attempt-1");
    assert!(
        first.join("extensions/crew-ask.ts").is_file(),
        "no ask extension in {}",
        first.display()
    );
    let jobs = c.jobs_of(&run);
    assert_eq!(jobs.len(), 1, "{jobs:?}");

    d.ok(
        "team.respond",
        json!({"runId": run, "taskId": "01_only", "message": "Postgres"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_only")["attempts"], 2, "{st}");
    let artifact = |name: &str| {
        d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let prompt = artifact("prompts/01_only.md");
    assert!(prompt.contains("Answer: Postgres"), "{prompt}");
    assert!(
        prompt.contains("## Your earlier questions") && prompt.contains("\nWhich DB?\n"),
        "{prompt}"
    );
    let result = artifact("results/01_only.txt");
    assert!(result.contains("Answer: Postgres"), "{result}");
    // Two jobs, the second a fresh attempt on the cluster, and its commit integrated.
    let names: Vec<String> = c.jobs_of(&run).into_iter().map(|(n, _, _)| n).collect();
    assert!(
        names.contains(&format!("crew-{run}-01_only-1"))
            && names.contains(&format!("crew-{run}-01_only-2")),
        "{names:?}"
    );
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    assert!(merged.lines().any(|l| l == "db.txt"), "{merged}");
}

/// A worker's final record is the worker's word on how the attempt went, not on what crewd
/// decides: a record (the node's own, or one an unboxed agent or a compromised node rewrote,
/// token and all, since the worker holds the token) whose completed result says it was
/// *reused* and names a commit made crewd adopt that commit as the task's result — any
/// revision of the user's repository, here a commit of a private branch the run never saw,
/// which then landed on the run's branch. crewd keeps only what the worker may say (usage,
/// model, its classified outcome and checks) and takes the result from the bundle.
#[test]
fn a_workers_record_cannot_name_the_commit_crewd_adopts() {
    use std::os::unix::fs::PermissionsExt;
    let c = cluster("a_workers_record_cannot_name_the_commit_crewd_adopts");
    let mut d = c.daemon("");
    repo(&d);
    // A private branch's commit, in the user's repository only.
    git(&d.work, &["checkout", "-q", "-b", "private"]);
    std::fs::write(d.work.join("secret.txt"), "private\n").unwrap();
    git(&d.work, &["add", "-A"]);
    git(&d.work, &["commit", "-qm", "private"]);
    let secret = git(&d.work, &["rev-parse", "HEAD"]);
    git(&d.work, &["checkout", "-q", "main"]);
    // The job runs the real worker, then rewrites its record.
    let worker = common::crewd_bin().with_file_name("crew-worker");
    let dir = tempfile::tempdir().unwrap().keep();
    let forge = dir.join("forging-worker.sh");
    std::fs::write(
        &forge,
        format!(
            "#!/bin/sh\n{worker:?} \"$1\" || exit $?\n\
             python3 - \"$1\" <<'EOF'\n\
             import json, sys\n\
             p = sys.argv[1] + '/final.json'\n\
             f = json.load(open(p))\n\
             r = f['result']\n\
             r['reused_from'] = {{'runId': 'elsewhere', 'taskId': 'x'}}\n\
             r['commit'] = {{'branch': 'x', 'start': '{secret}', 'commit': '{secret}', 'files': 1, 'insertions': 1, 'deletions': 0}}\n\
             json.dump(f, open(p, 'w'))\n\
             EOF\n",
            worker = worker.display().to_string(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&forge, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = std::fs::read_to_string(&d.config).unwrap().replacen(
        "[slurm]\n",
        &format!("[slurm]\nworker = {:?}\n", forge.display().to_string()),
        1,
    );
    std::fs::write(&d.config, cfg).unwrap();
    d.restart();
    common::one_step_team(&d, "one", "Work. [fake:write=one.txt:one]", "executor");
    let run = d.run(
        "write one",
        json!({"team": "one", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    d.wait(&run);
    let st = d.status(&run);
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    assert!(
        !merged.lines().any(|l| l == "secret.txt"),
        "the private branch's file landed on the run's branch: {merged}\n{st:#}"
    );
    assert!(
        !st.to_string().contains(&secret),
        "crewd adopted the commit the worker's record named ({secret}): {st:#}"
    );
    assert!(st["tasks"][0]["reusedFrom"].is_null(), "{st:#}");
    assert_eq!(st["run"]["status"], "completed", "{st:#}");
    assert!(merged.lines().any(|l| l == "one.txt"), "{merged}");
}

/// Steps after one that changed something start past the run's base: their attempts' input
/// bundle holds only what the node lacks (a thin bundle whose prerequisite is the base, one
/// file for both steps that start at the same commit), the base's history comes once per run
/// in `base.bundle`, and the run completes with every step's work.
#[test]
fn later_steps_attempts_get_thin_bundles_and_the_run_completes() {
    let c = cluster("later_steps_attempts_get_thin_bundles_and_the_run_completes");
    let d = c.daemon("");
    repo(&d);
    // Some history the thin bundles leave out.
    for i in 0..5 {
        let text: String = (0..2000).map(|n| format!("{i} {n}\n")).collect();
        std::fs::write(d.work.join(format!("h{i}.txt")), text).unwrap();
        git(&d.work, &["add", "-A"]);
        git(&d.work, &["commit", "-qm", &format!("history {i}")]);
    }
    let base = git(&d.work, &["rev-parse", "HEAD"]);
    d.project_file(
        "teams/chain.team.md",
        "---\nname: chain\ndefaultWorkflow: chain\n---\n\n- executor: agent=executor\n",
    );
    d.project_file(
        "workflows/chain.workflow.md",
        "---\nname: chain\n---\n\n## first\nrole: executor\n\nWrite one. [fake:write=one.txt:one]\n\n\
         ## second\nrole: executor\ndependsOn: first\n\nWrite two. [fake:cat=one.txt][fake:write=two.txt:two]\n\n\
         ## third\nrole: executor\ndependsOn: first\n\nWrite three. [fake:cat=one.txt][fake:write=three.txt:three]\n",
    );
    let run = d.run(
        "chain",
        json!({"team": "chain", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let merged = git(&d.work, &["ls-tree", "--name-only", &format!("crew/{run}")]);
    for f in ["one.txt", "two.txt", "three.txt", "h4.txt"] {
        assert!(merged.lines().any(|l| l == f), "{merged}");
    }
    let second = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/02_second.txt"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(second.contains("one.txt: one"), "{second}");

    let dir = staging_of(&d).join(&run);
    let launch = |task: &str| -> Value {
        serde_json::from_slice(
            &std::fs::read(dir.join(format!("{task}.attempt-1/launch.json"))).unwrap(),
        )
        .unwrap()
    };
    // The first step starts at the base: its whole history, no base bundle.
    let first = launch("01_first");
    assert_eq!(first["start"], base.as_str());
    assert!(first["base"].is_null(), "{first}");
    assert!(!dir.join("01_first.attempt-1/base.bundle").exists());
    // The later two start at the first's result: thin, on the base.
    let start = launch("02_second")["start"].as_str().unwrap().to_string();
    assert_ne!(start, base);
    use std::os::unix::fs::MetadataExt;
    let inode = |p: PathBuf| {
        std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{p:?}: {e}"))
            .ino()
    };
    for task in ["02_second", "03_third"] {
        let l = launch(task);
        assert_eq!(l["base"], base.as_str(), "{l}");
        assert_eq!(l["start"], start.as_str(), "{l}");
        let a = dir.join(format!("{task}.attempt-1"));
        let verified = git(
            &d.work,
            &["bundle", "verify", path_str(&a.join("input.bundle"))],
        );
        assert!(
            verified.contains("requires this ref") && verified.contains(&base),
            "{verified}"
        );
        // One file per run and commit, linked into each attempt's directory.
        assert_eq!(
            inode(a.join("input.bundle")),
            inode(dir.join(format!("bundles/{start}.thin.bundle")))
        );
        assert_eq!(
            inode(a.join("base.bundle")),
            inode(dir.join(format!("bundles/{base}.bundle")))
        );
    }
    let size = |p: PathBuf| std::fs::metadata(p).unwrap().len();
    let (thin, whole) = (
        size(dir.join(format!("bundles/{start}.thin.bundle"))),
        size(dir.join(format!("bundles/{base}.bundle"))),
    );
    assert!(thin * 10 < whole, "thin {thin} B, base {whole} B");
    assert!(!dir.join(format!("bundles/{start}.bundle")).exists());
}

/// The input bundles' bytes for a chain of `CREW_BUNDLE_STEPS` (10) steps, each starting at
/// the one before's result, on a repository with real history (`CREW_BUNDLE_REPO`, default:
/// this one): what crewd wrote to the run's `bundles/` against what one whole bundle per start
/// commit (before thin bundles) takes, each made by `git bundle create` of the same commits.
/// A measurement, not in CI: `CREW_SLURM_ENV=target/slurm/env cargo nextest run -p crewd
/// --ignore-default-filter --run-ignored only -E 'binary(=slurm) & test(bundle_bytes)'
/// --no-capture`.
#[test]
#[ignore]
fn bundle_bytes_of_a_chain_on_a_real_history() {
    let src = std::env::var("CREW_BUNDLE_REPO")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../..").to_string());
    let steps: usize = std::env::var("CREW_BUNDLE_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let c = cluster("bundle_bytes_of_a_chain_on_a_real_history");
    let d = c.daemon("");
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    git(w, &["fetch", "-q", &src, "HEAD"]);
    git(w, &["reset", "-q", "--hard", "FETCH_HEAD"]);
    let commits = git(w, &["rev-list", "--count", "HEAD"]);
    d.project_file(
        "teams/chain.team.md",
        "---\nname: chain\ndefaultWorkflow: chain\n---\n\n- executor: agent=executor\n",
    );
    let mut flow = String::from("---\nname: chain\n---\n\n");
    for i in 1..=steps {
        flow.push_str(&format!("## s{i:02}\nrole: executor\n"));
        if i > 1 {
            flow.push_str(&format!("dependsOn: s{:02}\n", i - 1));
        }
        flow.push_str(&format!("\nStep {i}. [fake:write=chain-{i}.txt:{i}]\n\n"));
    }
    d.project_file("workflows/chain.workflow.md", &flow);
    let run = d.run(
        "chain",
        json!({"team": "chain", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let dir = staging_of(&d).join(&run);
    let written: u64 = std::fs::read_dir(dir.join("bundles"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    // The old way: each distinct start commit's whole history.
    let mut starts = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let launch = e.unwrap().path().join("launch.json");
        if let Ok(b) = std::fs::read(&launch) {
            let l: Value = serde_json::from_slice(&b).unwrap();
            starts.insert(l["start"].as_str().unwrap().to_string());
        }
    }
    let t = tempfile::tempdir().unwrap();
    let mut whole = 0;
    for (i, s) in starts.iter().enumerate() {
        git(w, &["update-ref", "refs/measure", s]);
        let out = t.path().join(format!("{i}.bundle"));
        git(
            w,
            &["bundle", "create", "-q", path_str(&out), "refs/measure"],
        );
        whole += std::fs::metadata(&out).unwrap().len();
    }
    git(w, &["update-ref", "-d", "refs/measure"]);
    println!(
        "bundle bytes: {steps} chained tasks on {commits} commits ({} start commits): \
         whole bundle per start commit {whole} B, written now {written} B",
        starts.len()
    );
    assert!(
        written < whole,
        "{written} B written, {whole} B the old way"
    );
}

/// Each remote attempt keeps the prompt it was given, as a local one does:
/// `prompts/<task>.attempt-N.md` for every attempt, `prompts/<task>.md` the latest's (one
/// file under two names), both named by the attempt's event.
#[test]
fn each_remote_attempt_keeps_its_prompt() {
    let c = cluster("each_remote_attempt_keeps_its_prompt");
    let d = c.daemon("");
    repo(&d);
    // A retryable failure (the fake's "overloaded"), on every attempt: the node's agent is
    // not told its attempt number (no process tags there), so `max_attempts = 2` both fail.
    common::one_step_team(&d, "flaky", "Try. [fake:fail-attempts=1]", "executor");
    let run = d.run(
        "try twice",
        json!({"team": "flaky", "workspace": "worktree", "runtime": "fake-slurm"}),
    );
    assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
    assert_eq!(Daemon::task(&d.status(&run), "01_only")["attempts"], 2);
    let artifact = |name: &str| {
        d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    for n in [1, 2] {
        let p = artifact(&format!("prompts/01_only.attempt-{n}.md"));
        assert!(p.contains("Try."), "attempt {n}: {p}");
    }
    assert_eq!(
        artifact("prompts/01_only.md"),
        artifact("prompts/01_only.attempt-2.md")
    );
    // The attempts' events name their own copy.
    let evs = d.events(Some(&run));
    let named: Vec<String> = evs
        .iter()
        .filter(|e| e["taskId"] == "01_only" || e["data"]["taskId"] == "01_only")
        .flat_map(|e| {
            e["data"]["artifacts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|a| a["name"].as_str().map(str::to_string))
        .collect();
    for n in [1, 2] {
        let want = format!("prompts/01_only.attempt-{n}.md");
        assert!(named.contains(&want), "{want} not in {named:?}");
    }
}

/// `team.plan` says what box a Slurm task's node will try: the runtime's `sandbox` mode and
/// network settings as crewd stages them, no paths (the node decides those, and whether it
/// can box); the local box (`sandbox`) is not shown for it.
#[test]
fn the_plan_says_what_box_a_slurm_tasks_node_will_try() {
    let c = cluster("the_plan_says_what_box_a_slurm_tasks_node_will_try");
    let d = c.daemon(
        "verify_network = false\n\
         [runtimes.boxed-slurm]\nadapter = \"pi\"\ncommand = [\"/bin/true\"]\nrpc = false\n\
         placement = \"slurm\"\nsandbox = \"required\"\nnetwork = false\n\
         sandbox_read = [\"/opt/tools\"]\n",
    );
    repo(&d);
    common::one_step_team(&d, "one", "Work.", "executor");
    let plan = |runtime: &str| {
        d.ok(
            "team.plan",
            json!({"goal": "g", "cwd": path_str(&d.work), "team": "one",
                   "workspace": "worktree", "runtime": runtime}),
        )["tasks"][0]
            .clone()
    };
    let t = plan("fake-slurm");
    assert!(t.get("sandbox").is_none(), "{t:#}");
    assert_eq!(
        t["slurm"]["sandbox"],
        json!({"mode": "auto", "network": true, "verifyNetwork": false}),
        "{t:#}"
    );
    let t = plan("boxed-slurm");
    assert_eq!(
        t["slurm"]["sandbox"],
        json!({"mode": "required", "network": false, "verifyNetwork": false,
               "read": ["/opt/tools"]}),
        "{t:#}"
    );
}
