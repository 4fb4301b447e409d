//! Issue 6: the resource cache, opt-in result reuse (also across a restart), bounded run
//! residency and the `cache.*` methods, through the real daemon.

mod common;
use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const READ_ONLY: [&str; 2] = ["01_explore", "02_plan"];
const WRITERS: [&str; 2] = ["03_execute", "04_verify"];
const ALL: [&str; 4] = ["01_explore", "02_plan", "03_execute", "04_verify"];
/// The fake agent's usage per answer: input 100 + output 20 + cacheRead 10 + cacheWrite 5.
const FAKE_TOKENS: u64 = 135;
const FAKE_COST: f64 = 0.0003;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A git repository with one commit in the daemon's work dir.
fn git_repo(d: &Daemon) {
    std::fs::write(d.work.join("README.md"), "hello\n").unwrap();
    git(&d.work, &["init", "-q"]);
    git(&d.work, &["add", "README.md"]);
    git(&d.work, &["commit", "-q", "-m", "init"]);
}

/// The builtin team's executor changes nothing on the fake agent; these tests are about reuse,
/// not about the no-change guard (tests/checks.rs), so the config lets it.
fn reuse_daemon() -> Daemon {
    Daemon::start_with(Opts {
        config: "allow_no_change = true\n".into(),
        ..Default::default()
    })
}

fn results(d: &Daemon) -> Value {
    d.ok("cache.stats", json!({}))["results"].clone()
}

/// Run to completion; its status.
fn run_done(d: &Daemon, goal: &str, extra: Value) -> (String, Value) {
    let id = d.run(goal, extra);
    assert_eq!(d.wait(&id), "completed", "{}", d.status(&id));
    let st = d.status(&id);
    (id, st)
}

/// Task id → the run it reused from (None = the agent ran).
fn reused(st: &Value, task: &str) -> Option<String> {
    let t = Daemon::task(st, task);
    t["reusedFrom"].as_object().map(|o| {
        assert_eq!(o["taskId"], task, "a task reuses the same step");
        o["runId"].as_str().unwrap().to_string()
    })
}

fn tokens(t: &Value) -> u64 {
    ["input", "output", "cacheRead", "cacheWrite"]
        .iter()
        .map(|k| t["usage"][k].as_u64().unwrap())
        .sum()
}

fn assert_ran(st: &Value, tasks: &[&str]) {
    for t in tasks {
        assert_eq!(reused(st, t), None, "{t} should have run: {st}");
        assert_eq!(tokens(Daemon::task(st, t)), FAKE_TOKENS, "{t}");
    }
}

fn assert_reused(st: &Value, tasks: &[&str], from: &str) {
    for t in tasks {
        assert_eq!(reused(st, t).as_deref(), Some(from), "{t}: {st}");
        let task = Daemon::task(st, t);
        assert_eq!(tokens(task), 0, "a reused task costs nothing: {task}");
        assert_eq!(task["usage"]["cost"], 0.0);
    }
}

fn approx(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-9
}

#[test]
fn reuse_takes_read_only_results_misses_after_edits_and_all_takes_writers_too() {
    let d = reuse_daemon();
    git_repo(&d);
    let goal = "summarise the readme";
    let reuse = json!({"reuseResults": true});

    let (r1, st1) = run_done(&d, goal, reuse.clone());
    assert_ran(&st1, &ALL);
    let s = results(&d);
    assert_eq!(
        (&s["hits"], &s["misses"], &s["entries"]),
        (&json!(0), &json!(2), &json!(2)),
        "only read-only tasks look up and store: {s}"
    );

    let (r2, st2) = run_done(&d, goal, reuse.clone());
    assert_reused(&st2, &READ_ONLY, &r1);
    assert_ran(&st2, &WRITERS);
    // The events say so: task.completed names the run and task reused, at zero tokens.
    let completed: Vec<Value> = d
        .events(Some(&r2))
        .into_iter()
        .filter(|e| e["type"] == "task.completed")
        .collect();
    assert_eq!(completed.len(), 4);
    for e in &completed {
        let task = e["taskId"].as_str().unwrap();
        if READ_ONLY.contains(&task) {
            assert_eq!(
                e["data"]["reusedFrom"],
                json!({"runId": r1, "taskId": task})
            );
            assert_eq!(e["data"]["usage"]["input"], 0, "{e}");
        } else {
            assert!(e["data"].get("reusedFrom").is_none(), "{e}");
        }
    }
    // The reused result is the same text, now an artifact of the new run.
    let a = |run: &str| {
        d.ok(
            "team.artifact",
            json!({"runId": run, "name": "results/02_plan.txt"}),
        )["content"]
            .clone()
    };
    assert_eq!(a(&r1), a(&r2));
    assert_eq!(
        d.ok(
            "team.artifact",
            json!({"runId": r2, "name": "shared/plan.md"})
        )["content"],
        a(&r1),
        "the step's shared output is written for a reused task too"
    );
    let s = results(&d);
    assert_eq!(
        (&s["hits"], &s["misses"], &s["entries"]),
        (&json!(2), &json!(2), &json!(2))
    );
    assert_eq!(s["tokensSaved"], 2 * FAKE_TOKENS);
    assert!(approx(&s["costSaved"], 2.0 * FAKE_COST), "{s}");
    assert!(approx(&s["hitRate"], 0.5), "{s}");

    // An edit to a tracked file: nothing matches.
    std::fs::write(d.work.join("README.md"), "hello, edited\n").unwrap();
    let (r3, st3) = run_done(&d, goal, reuse.clone());
    assert_ran(&st3, &ALL);
    // Same tree again: matches r3.
    let (_, st) = run_done(&d, goal, reuse.clone());
    assert_reused(&st, &READ_ONLY, &r3);

    // A new untracked file: nothing matches.
    std::fs::write(d.work.join("notes.txt"), "new file\n").unwrap();
    let (r4, st4) = run_done(&d, goal, reuse.clone());
    assert_ran(&st4, &ALL);

    // "all": writers may reuse too (once something stored them).
    let all = json!({"reuseResults": "all"});
    let (r5, st5) = run_done(&d, goal, all.clone());
    assert_reused(&st5, &READ_ONLY, &r4);
    assert_ran(&st5, &WRITERS);
    let (_, st6) = run_done(&d, goal, all);
    // Reuse points at the run that paid, never at another reuse.
    assert_reused(&st6, &READ_ONLY, &r4);
    assert_reused(&st6, &WRITERS, &r5);
    assert_eq!(tokens(&st6["run"]), 0, "{}", st6["run"]);

    // Another goal is another prompt.
    let (_, st) = run_done(&d, "another goal", reuse.clone());
    assert_ran(&st, &ALL);
    // Without the flag nothing is reused.
    let (_, st) = run_done(&d, goal, json!({}));
    assert_ran(&st, &ALL);
}

#[test]
fn reuse_is_off_outside_a_git_work_tree_and_the_run_is_told_why() {
    let d = Daemon::start();
    let p = |extra: Value| {
        let mut p = json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake"});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        d.ok("team.run", p)
    };
    let started = p(json!({"reuseResults": true}));
    let notes = started["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{started}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("not inside a git work tree"),
        "{started}"
    );
    let r1 = started["runId"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&r1), "completed");
    let plain = p(json!({}));
    assert_eq!(plain["notes"], json!([]));
    let again = p(json!({"reuseResults": "all"}));
    let r2 = again["runId"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&r2), "completed");
    assert_ran(&d.status(&r2), &ALL);
    let s = results(&d);
    assert_eq!(
        (&s["hits"], &s["misses"], &s["entries"]),
        (&json!(0), &json!(0), &json!(0))
    );
    // A bad mode names the field.
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "reuseResults": "some"}),
    );
    assert_eq!(e["code"], -32602);
    assert!(
        e["message"].as_str().unwrap().contains("reuseResults"),
        "{e}"
    );
}

#[test]
fn reusable_results_survive_a_restart_unless_their_file_is_gone() {
    let mut d = reuse_daemon();
    git_repo(&d);
    let goal = "survive";
    let reuse = json!({"reuseResults": true});
    let (r1, _) = run_done(&d, goal, reuse.clone());

    // The first run after the restart reuses before anything asked about the cache.
    d.restart();
    let (_, st) = run_done(&d, goal, reuse.clone());
    assert_reused(&st, &READ_ONLY, &r1);
    assert_eq!(results(&d)["entries"], 2);

    // A clean stop, and explore's result file disappears meanwhile: that entry is dropped, and
    // plan (whose prompt holds explore's identical answer) still reuses.
    d.stop();
    std::fs::remove_file(
        d.state_dir
            .join(format!("runs/{r1}/results/01_explore.txt")),
    )
    .unwrap();
    d.spawn(&[]);
    assert_eq!(results(&d)["entries"], 1);
    let (r3, st) = run_done(&d, goal, reuse.clone());
    assert_ran(&st, &["01_explore"]);
    assert_reused(&st, &["02_plan"], &r1);

    // A forgotten run's results are no longer offered, before and after a restart.
    d.ok("team.forget", json!({"runId": r1}));
    assert_eq!(results(&d)["entries"], 1, "r3's explore is left");
    d.restart();
    assert_eq!(results(&d)["entries"], 1);
    let (_, st) = run_done(&d, goal, reuse);
    assert_reused(&st, &["01_explore"], &r3);
    assert_ran(&st, &["02_plan"]);
}

const AGENT_V1: &str = "---\nname: explorer\ndescription: user explorer\ntools: read, grep\n---\n\nYou are EXPLORER-ONE.\n";
const AGENT_V2: &str = "---\nname: explorer\ndescription: user explorer\ntools: read, grep\n---\n\nYou are EXPLORER-NUMBER-TWO, edited.\n";

/// Every system prompt the run's workers got (one file per distinct prompt, shared by the tasks
/// of an agent), read through `team.artifact`.
fn system_prompt(d: &Daemon, run: &str) -> String {
    let dir = d.state_dir.join("runs").join(run).join("prompts");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("_system-") && n.ends_with(".md"))
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no system prompt file in {}",
        dir.display()
    );
    names
        .iter()
        .map(|name| {
            d.ok(
                "team.artifact",
                json!({"runId": run, "name": format!("prompts/{name}")}),
            )["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn resources(d: &Daemon) -> Value {
    d.ok("cache.stats", json!({}))["resources"].clone()
}

#[test]
fn an_edited_agent_file_changes_the_next_run_without_a_restart() {
    let d = Daemon::start();
    let agents = d.home.join(".config/crew/agents");
    std::fs::create_dir_all(&agents).unwrap();
    let file = agents.join("explorer.md");
    std::fs::write(&file, AGENT_V1).unwrap();

    let (r1, _) = run_done(&d, "g", json!({}));
    assert!(system_prompt(&d, &r1).contains("EXPLORER-ONE"));
    let s = resources(&d);
    assert_eq!((&s["misses"], &s["entries"]), (&json!(1), &json!(1)), "{s}");

    // Unchanged: a hit, same prompt.
    let (r2, _) = run_done(&d, "g", json!({}));
    assert!(system_prompt(&d, &r2).contains("EXPLORER-ONE"));
    let s = resources(&d);
    assert_eq!((&s["hits"], &s["misses"]), (&json!(1), &json!(1)), "{s}");

    std::fs::write(&file, AGENT_V2).unwrap();
    let (r3, _) = run_done(&d, "g", json!({}));
    let sys = system_prompt(&d, &r3);
    assert!(
        sys.contains("EXPLORER-NUMBER-TWO") && !sys.contains("EXPLORER-ONE"),
        "{sys}"
    );
    let s = resources(&d);
    assert_eq!(
        (&s["hits"], &s["misses"], &s["entries"]),
        (&json!(1), &json!(2), &json!(1)),
        "the edit is a miss: {s}"
    );
    assert!(approx(&s["hitRate"], 1.0 / 3.0), "{s}");
    let got = d.ok("resource.get", json!({"kind": "agent", "name": "explorer"}));
    assert!(got.to_string().contains("EXPLORER-NUMBER-TWO"), "{got}");
    assert_eq!(resources(&d)["hits"], 2);

    // invalidate by path (the file, then its directory), clear.
    let inv = d.ok("cache.invalidate", json!({"path": path_str(&file)}));
    assert_eq!(inv["invalidated"], 1);
    assert_eq!(resources(&d)["entries"], 0);
    d.ok("resource.get", json!({"kind": "agent", "name": "explorer"}));
    let s = resources(&d);
    assert_eq!((&s["misses"], &s["entries"]), (&json!(3), &json!(1)), "{s}");
    let inv = d.ok("cache.invalidate", json!({"path": path_str(&agents)}));
    assert_eq!(inv["invalidated"], 1);
    let inv = d.ok("cache.invalidate", json!({"path": path_str(&agents)}));
    assert_eq!(inv["invalidated"], 0);
    d.ok("resource.list", json!({}));
    let before = resources(&d);
    assert_eq!(before["entries"], 1);
    d.ok("cache.clear", json!({"cache": "resources"}));
    let s = resources(&d);
    assert_eq!(s["entries"], 0);
    assert_eq!(s["evictions"], before["evictions"].as_u64().unwrap() + 1);
    assert_eq!(s["capacity"], 1024);

    // Bad params.
    for p in [
        json!({}),
        json!({"path": "/x", "runId": "r"}),
        json!({"path": "relative/path"}),
    ] {
        assert_eq!(d.err("cache.invalidate", p.clone())["code"], -32602, "{p}");
    }
    assert_eq!(
        d.err("cache.invalidate", json!({"runId": "nope"}))["code"],
        1001
    );
    assert_eq!(
        d.err("cache.clear", json!({"cache": "everything"}))["code"],
        -32602
    );
}

#[test]
fn invalidate_and_clear_results_and_runs() {
    let d = reuse_daemon();
    git_repo(&d);
    let goal = "clear me";
    let reuse = json!({"reuseResults": true});
    let (r1, st1) = run_done(&d, goal, reuse.clone());

    // runId: its two results plus its resident details.
    let inv = d.ok("cache.invalidate", json!({"runId": r1}));
    assert_eq!(inv["invalidated"], 3);
    assert_eq!(results(&d)["entries"], 0);
    let runs = d.ok("cache.stats", json!({}))["runs"].clone();
    assert_eq!(runs["entries"], 0, "{runs}");
    assert_eq!(d.ok("daemon.status", json!({}))["runs"]["resident"], 0);
    // Its details come back from the journal, unchanged.
    assert_eq!(d.status(&r1), st1);
    let runs = d.ok("cache.stats", json!({}))["runs"].clone();
    assert_eq!(
        (&runs["misses"], &runs["entries"]),
        (&json!(1), &json!(1)),
        "{runs}"
    );
    let (r2, st) = run_done(&d, goal, reuse.clone());
    assert_ran(&st, &ALL);

    // cache.clear results: nothing left to reuse.
    d.ok("cache.clear", json!({"cache": "results"}));
    let s = results(&d);
    assert_eq!(s["entries"], 0);
    assert_eq!(s["evictions"], 2);
    let (_, st) = run_done(&d, goal, reuse.clone());
    assert_ran(&st, &ALL);

    // cache.clear runs: every finished run leaves memory and still answers.
    d.ok("cache.clear", json!({"cache": "runs"}));
    assert_eq!(d.ok("daemon.status", json!({}))["runs"]["resident"], 0);
    assert_eq!(d.status(&r2)["run"]["status"], "completed");
    assert_eq!(
        d.ok("team.list", json!({}))["runs"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // cache.clear (all): results too.
    run_done(&d, goal, reuse);
    assert_eq!(results(&d)["entries"], 2);
    d.ok("cache.clear", json!({}));
    let all = d.ok("cache.stats", json!({}));
    assert_eq!(
        (
            &all["results"]["entries"],
            &all["runs"]["entries"],
            &all["resources"]["entries"]
        ),
        (&json!(0), &json!(0), &json!(0)),
        "{all}"
    );
}

/// `n` runs of the tiny team, created `batch` at a time concurrently, each waited for.
fn many_runs(d: &Daemon, n: usize, batch: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let k = batch.min(n - ids.len());
        let made: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..k)
                .map(|_| s.spawn(|| d.run("tiny run", json!({"team": "tiny"}))))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for id in &made {
            assert_eq!(d.wait(id), "completed", "{}", d.status(id));
        }
        ids.extend(made);
    }
    ids
}

#[test]
fn a_thousand_finished_runs_stay_within_the_residency_bound_and_the_oldest_still_answers() {
    let d = Daemon::start_with(Opts {
        config: "resident_runs = 100\n".into(),
        env: vec![],
    });
    one_step_team(&d, "tiny", "Do the tiny thing.", "explorer");
    let first = d.run("the oldest run", json!({"team": "tiny"}));
    assert_eq!(d.wait(&first), "completed");
    let first_status = d.status(&first);
    let first_events = d.events(Some(&first));

    let ids = many_runs(&d, 999, 25);
    assert_eq!(ids.len(), 999);

    let st = d.ok("daemon.status", json!({}));
    let (resident, active, total) = (
        st["runs"]["resident"].as_u64().unwrap(),
        st["runs"]["active"].as_u64().unwrap(),
        st["runs"]["total"].as_u64().unwrap(),
    );
    assert_eq!(total, 1000);
    assert!(resident <= 100 + active, "{st}");
    let runs = d.ok("cache.stats", json!({}))["runs"].clone();
    assert_eq!(runs["capacity"], 100);
    assert!(runs["entries"].as_u64().unwrap() <= 100, "{runs}");
    assert!(runs["evictions"].as_u64().unwrap() >= 900, "{runs}");
    let misses = runs["misses"].as_u64().unwrap();

    // The oldest run was evicted long ago: it loads from the journal and answers the same.
    assert_eq!(d.status(&first), first_status);
    let runs = d.ok("cache.stats", json!({}))["runs"].clone();
    assert_eq!(runs["misses"].as_u64().unwrap(), misses + 1, "{runs}");
    let hits = runs["hits"].as_u64().unwrap();
    // Now it is resident: a hit.
    assert_eq!(d.status(&first), first_status);
    let runs = d.ok("cache.stats", json!({}))["runs"].clone();
    assert_eq!(runs["hits"].as_u64().unwrap(), hits + 1, "{runs}");
    assert_eq!(d.events(Some(&first)), first_events);
    // Loading it did not break the bound.
    let st = d.ok("daemon.status", json!({}));
    assert!(
        st["runs"]["resident"].as_u64().unwrap() <= 100 + st["runs"]["active"].as_u64().unwrap(),
        "{st}"
    );
    // Reading many old runs keeps the bound too, and each answers.
    for id in ids.iter().take(150) {
        assert_eq!(d.status(id)["run"]["status"], "completed");
    }
    let st = d.ok("daemon.status", json!({}));
    assert!(st["runs"]["resident"].as_u64().unwrap() <= 100, "{st}");
    assert!(
        d.ok("cache.stats", json!({}))["runs"]["hitRate"]
            .as_f64()
            .unwrap()
            < 1.0
    );
}

/// With room for one finished run, concurrent readers of many old runs keep evicting each
/// other's run between "load it" and "read it": every read still answers, none says the run is
/// unknown.
#[test]
fn concurrent_reads_of_evicted_runs_never_report_them_unknown() {
    let d = Daemon::start_with(Opts {
        config: "resident_runs = 1\n".into(),
        env: vec![],
    });
    one_step_team(&d, "tiny", "Do the tiny thing.", "explorer");
    let ids = many_runs(&d, 12, 6);
    std::thread::scope(|s| {
        for k in 0..6 {
            let (d, ids) = (&d, &ids);
            s.spawn(move || {
                for round in 0..20 {
                    let id = &ids[(k * 5 + round) % ids.len()];
                    let r = d
                        .try_http("team.status", json!({"runId": id}))
                        .expect("the daemon answers");
                    assert_eq!(r["result"]["run"]["status"], "completed", "{id}: {r}");
                }
            });
        }
    });
    let runs = d.ok("cache.stats", json!({}))["runs"].clone();
    assert!(runs["misses"].as_u64().unwrap() >= 12, "{runs}");
}

/// After a restart nothing has been used yet: the first read of an evicted run loads it and it
/// stays (the runs that were resident all along must not count as more recently used).
#[test]
fn the_first_read_after_a_restart_of_an_evicted_run_answers() {
    let mut d = Daemon::start_with(Opts {
        config: "resident_runs = 2\n".into(),
        env: vec![],
    });
    one_step_team(&d, "tiny", "Do the tiny thing.", "explorer");
    let ids = many_runs(&d, 4, 1);
    d.restart();
    let st = d
        .try_http("team.status", json!({"runId": ids[0]}))
        .expect("the daemon answers");
    assert_eq!(st["result"]["run"]["status"], "completed", "{st}");
}
