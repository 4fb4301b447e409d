//! Issue 5 through the real daemon: `schedule.*` validation, preview, real-time firing with
//! overlap, catch-up after a restart, removal, disabled and one-shot jobs, trigger.

mod common;
use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const FAST: &str = "no_output_timeout_ms = 5000\nkill_grace_ms = 500\nfinal_drain_ms = 1000\nfinal_drain_quiet_ms = 200\n";

fn daemon() -> Daemon {
    let d = Daemon::start_with(Opts {
        config: FAST.into(),
        env: vec![],
    });
    // `hold`: one write-role step, so with plan approval its runs stay blocked (active) and
    // start no worker. `nap`: one step that takes 2.5 s.
    one_step_team(&d, "hold", "Change things.", "executor");
    one_step_team(&d, "nap", "Take a nap. [fake:sleep=2500ms]", "explorer");
    d
}

/// `team.run` params for a job.
fn run_of(d: &Daemon, team: &str) -> Value {
    let mut p = json!({"goal": format!("scheduled {team}"), "cwd": path_str(&d.work), "runtime": "fake", "team": team});
    if team == "hold" {
        p["requirePlanApproval"] = json!(true);
    }
    p
}

fn ty(e: &Value) -> &str {
    e["type"].as_str().unwrap_or("")
}

fn instant(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}")))
        .unwrap_or_else(|e| panic!("{v}: {e}"))
        .with_timezone(&Utc)
}

/// `schedule.fired` / `schedule.skipped` events of one job, in journal order.
fn handled<'a>(evs: &'a [Value], job: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| {
            matches!(ty(e), "schedule.fired" | "schedule.skipped") && e["data"]["id"] == job
        })
        .collect()
}

fn fired<'a>(evs: &'a [Value], job: &str) -> Vec<&'a Value> {
    handled(evs, job)
        .into_iter()
        .filter(|e| ty(e) == "schedule.fired")
        .collect()
}

fn add(d: &Daemon, params: Value) -> Value {
    d.ok("schedule.add", params)
}

/// Take notifications until `done` holds for what was taken (deadline 90 s).
async fn collect(
    sub: &mut jsonrpsee::core::client::Subscription<Value>,
    mut done: impl FnMut(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut out = Vec::new();
    while !done(&out) {
        let next = tokio::time::timeout_at(deadline, sub.next())
            .await
            .expect("no schedule event in time")
            .expect("subscription ended")
            .expect("bad notification");
        out.push(next);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Bad input.

#[test]
fn bad_input_is_refused_naming_the_field_and_nothing_is_stored() {
    let d = daemon();
    let run = run_of(&d, "hold");
    let future = (Utc::now() + TimeDelta::hours(1)).to_rfc3339();
    let with = |extra: Value| {
        let mut p = json!({"run": run.clone()});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let bad_run = |k: &str, v: Value| {
        let mut r = run.clone();
        r[k] = v;
        json!({"cron": "* * * * *", "run": r})
    };
    // (what, params, code, field)
    let cases: Vec<(&str, Value, i64, &str)> = vec![
        (
            "minute out of range",
            with(json!({"cron": "61 * * * *"})),
            -32602,
            "cron",
        ),
        (
            "not a cron",
            with(json!({"cron": "every day at nine"})),
            -32602,
            "cron",
        ),
        (
            "seven fields",
            with(json!({"cron": "0 0 9 * * MON 2030"})),
            -32602,
            "cron",
        ),
        (
            "unknown name",
            with(json!({"cron": "0 9 * * MOO"})),
            -32602,
            "cron",
        ),
        (
            "unknown zone",
            with(json!({"cron": "0 9 * * *", "timezone": "Mars/Olympus"})),
            -32602,
            "timezone",
        ),
        (
            "zero interval",
            with(json!({"intervalMs": 0})),
            -32602,
            "intervalMs",
        ),
        (
            "negative interval",
            with(json!({"intervalMs": -1000})),
            -32602,
            "intervalMs",
        ),
        (
            "interval as text",
            with(json!({"intervalMs": "1000"})),
            -32602,
            "intervalMs",
        ),
        (
            "at in the past",
            with(json!({"at": "2020-01-01T00:00:00Z"})),
            -32602,
            "at",
        ),
        (
            "at not RFC 3339",
            with(json!({"at": "tomorrow at nine"})),
            -32602,
            "at",
        ),
        (
            "at without an offset",
            with(json!({"at": "2030-01-01T09:00:00"})),
            -32602,
            "at",
        ),
        (
            "cron and interval",
            with(json!({"cron": "* * * * *", "intervalMs": 1000})),
            -32602,
            "cron, intervalMs",
        ),
        (
            "cron and at",
            with(json!({"cron": "* * * * *", "at": future})),
            -32602,
            "cron, at",
        ),
        (
            "interval and at",
            with(json!({"intervalMs": 1000, "at": future})),
            -32602,
            "intervalMs, at",
        ),
        ("neither", with(json!({})), -32602, "cron, intervalMs, at"),
        ("no run", json!({"cron": "* * * * *"}), -32602, "run"),
        (
            "relative cwd",
            bad_run("cwd", json!("relative/dir")),
            -32602,
            "run.cwd",
        ),
        (
            "empty goal",
            bad_run("goal", json!("  ")),
            -32602,
            "run.goal",
        ),
        (
            "unknown runtime",
            bad_run("runtime", json!("nope")),
            -32602,
            "run.runtime",
        ),
        (
            "unknown run field",
            bad_run("bogus", json!(1)),
            -32602,
            "run.bogus",
        ),
        (
            "bad overlap",
            with(json!({"cron": "* * * * *", "overlap": "sometimes"})),
            -32602,
            "overlap",
        ),
        (
            "bad catchUp",
            with(json!({"cron": "* * * * *", "catchUp": "most"})),
            -32602,
            "catchUp",
        ),
        (
            "empty name",
            with(json!({"cron": "* * * * *", "name": "  "})),
            -32602,
            "name",
        ),
        (
            "unknown field",
            with(json!({"cron": "* * * * *", "every": 5})),
            -32602,
            "every",
        ),
    ];
    for (what, params, code, field) in &cases {
        let e = d.err("schedule.add", params.clone());
        assert_eq!(e["code"], *code, "{what}: {e}");
        assert_eq!(e["data"]["field"], *field, "{what}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(field),
            "{what}: {e}"
        );
    }
    // A team that does not exist: the run is validated like team.run (1003 with diagnostics).
    let e = d.err("schedule.add", json!({"cron": "* * * * *", "run": {"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "no-such-team"}}));
    assert_eq!(e["code"], 1003, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("no-such-team"),
        "{e}"
    );
    assert!(
        !e["data"]["diagnostics"].as_array().unwrap().is_empty(),
        "{e}"
    );

    assert_eq!(d.ok("schedule.list", json!({}))["jobs"], json!([]));
    assert!(d
        .events(None)
        .iter()
        .all(|e| !ty(e).starts_with("schedule.")));

    // The same refusals on an existing job leave it as it was.
    let job = add(&d, with(json!({"cron": "0 9 * * *", "timezone": "UTC"})));
    let id = job["id"].as_str().unwrap();
    for (what, params, code, field) in &cases {
        let mut p = params.clone();
        // An update may leave the schedule and the run alone.
        if matches!(*field, "cron, intervalMs, at" | "run") {
            continue;
        }
        if !field.starts_with("run.") {
            p.as_object_mut().unwrap().remove("run");
        }
        p["id"] = json!(id);
        let e = d.err("schedule.update", p);
        assert_eq!(e["code"], *code, "update {what}: {e}");
        assert_eq!(e["data"]["field"], *field, "update {what}: {e}");
    }
    assert_eq!(d.ok("schedule.get", json!({"id": id})), job);

    // Unknown and malformed ids.
    for m in [
        "schedule.get",
        "schedule.update",
        "schedule.enable",
        "schedule.disable",
        "schedule.remove",
        "schedule.trigger",
    ] {
        assert_eq!(d.err(m, json!({"id": "sched_nope"}))["code"], 1001, "{m}");
        // Anything else is a name (names never reach a path): not found.
        assert_eq!(d.err(m, json!({"id": "../etc"}))["code"], 1001, "{m}");
        let e = d.err(m, json!({"id": "sched_../etc"}));
        assert_eq!(
            (e["code"].clone(), e["data"]["field"].clone()),
            (json!(-32602), json!("id")),
            "{m}"
        );
    }
    let list = d.ok("schedule.list", json!({}))["jobs"].clone();
    assert_eq!(list, json!([job]));
}

// ---------------------------------------------------------------------------------------------
// Preview.

#[test]
fn preview_over_rpc() {
    let d = Daemon::start();
    // (cron, zone, from, expected)
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "0 9 * * MON",
            "UTC",
            "2025-06-01T00:00:00Z",
            &["2025-06-02T09:00:00+00:00", "2025-06-09T09:00:00+00:00"],
        ),
        // New York springs forward at 02:00 on 9 March 2025: 02:30 does not exist that day and
        // fires once at the first instant after the gap.
        (
            "30 2 * * *",
            "America/New_York",
            "2025-03-08T12:00:00Z",
            &["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"],
        ),
        // Berlin falls back at 03:00 on 26 October 2025: 02:30 happens twice and fires once.
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2025-10-25T12:00:00Z",
            &["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"],
        ),
        (
            "0 0 29 2 *",
            "UTC",
            "2025-01-01T00:00:00Z",
            &["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"],
        ),
        // Day of month OR day of week, as in Vixie cron.
        (
            "0 0 13 * FRI",
            "UTC",
            "2025-06-01T00:00:00Z",
            &[
                "2025-06-06T00:00:00+00:00",
                "2025-06-13T00:00:00+00:00",
                "2025-06-20T00:00:00+00:00",
            ],
        ),
        (
            "@daily",
            "Asia/Kolkata",
            "2025-06-01T00:00:00Z",
            &["2025-06-02T00:00:00+05:30", "2025-06-03T00:00:00+05:30"],
        ),
        (
            "*/20 * * * * *",
            "UTC",
            "2025-06-01T00:00:05Z",
            &[
                "2025-06-01T00:00:20+00:00",
                "2025-06-01T00:00:40+00:00",
                "2025-06-01T00:01:00+00:00",
            ],
        ),
        (
            "0 8-10/2 * JAN,jul 1-5",
            "UTC",
            "2025-07-04T09:00:00Z",
            &["2025-07-04T10:00:00+00:00", "2025-07-07T08:00:00+00:00"],
        ),
    ];
    for (cron, zone, from, want) in cases {
        let r = d.ok(
            "schedule.preview",
            json!({"cron": cron, "timezone": zone, "from": from, "count": want.len()}),
        );
        assert_eq!(r["fireTimes"], json!(want), "{cron} in {zone} from {from}");
        assert_eq!(r["timezone"], *zone);
    }
    for (params, field) in [
        (json!({"cron": "61 * * * *"}), "cron"),
        (
            json!({"cron": "* * * * *", "timezone": "Nowhere/Land"}),
            "timezone",
        ),
        (json!({"cron": "* * * * *", "count": 0}), "count"),
        (json!({"cron": "* * * * *", "from": "yesterday"}), "from"),
    ] {
        let e = d.err("schedule.preview", params.clone());
        assert_eq!(
            (e["code"].clone(), e["data"]["field"].clone()),
            (json!(-32602), json!(field)),
            "{params}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Real time.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_second_job_keeps_firing_and_overlap_skip_holds() {
    let d = daemon();
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({})).await;
    let job = add(
        &d,
        json!({"cron": "* * * * * *", "timezone": "UTC", "run": run_of(&d, "nap")}),
    );
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(
        (
            job["kind"].clone(),
            job["overlap"].clone(),
            job["catchUp"].clone(),
            job["enabled"].clone()
        ),
        (json!("cron"), json!("skip"), json!("latest"), json!(true))
    );
    // Each nap run lasts ~2.5 s, so fires and skips alternate: F S S F S S ...
    collect(&mut sub, |evs| {
        let h = handled(evs, &id);
        let f = h.iter().filter(|e| ty(e) == "schedule.fired").count();
        f >= 3 && h.len() - f >= 3
    })
    .await;
    d.ok("schedule.disable", json!({"id": id}));
    let got = d.ok("schedule.get", json!({"id": id}));
    let evs = d.events(None);
    let h = handled(&evs, &id);

    // Every second was handled exactly once, fired or skipped: nothing dropped, nothing twice.
    let ats: Vec<DateTime<Utc>> = h.iter().map(|e| instant(&e["data"]["at"])).collect();
    for w in ats.windows(2) {
        assert_eq!(w[1] - w[0], TimeDelta::seconds(1), "{ats:?}");
    }
    for (e, at) in h.iter().zip(&ats) {
        assert_eq!(at.timestamp_subsec_nanos(), 0, "{e}");
        let late = instant(&e["time"]) - *at;
        assert!(
            late >= TimeDelta::zero() && late < TimeDelta::milliseconds(1500),
            "{e}"
        );
    }

    // Skips happen while the previous run is active; fires only once it is not.
    let mut previous: Option<Value> = None;
    let mut runs = Vec::new();
    for e in &h {
        let at = instant(&e["data"]["at"]);
        if ty(e) == "schedule.fired" {
            if let Some(prev) = &previous {
                let end = instant(&prev["run"]["finishedAt"]);
                assert!(end <= instant(&e["time"]), "{e} while {prev}");
            }
            let run_id = e["data"]["runId"].as_str().unwrap().to_string();
            assert_eq!(e["data"]["manual"], false);
            previous = Some(d.status(&run_id));
            runs.push(run_id);
        } else {
            let prev = previous.as_ref().expect("a skip before any fire");
            let prev_id = prev["run"]["id"].as_str().unwrap();
            let reason = e["data"]["reason"].as_str().unwrap();
            assert!(reason.contains(prev_id), "{reason}");
            if let Some(end) = prev["run"]["finishedAt"].as_str() {
                assert!(instant(&json!(end)) > at, "{e} after {prev}");
            }
        }
    }
    for r in &runs {
        let st = d.status(r);
        assert_eq!(st["run"]["scheduleId"], json!(id));
        assert_eq!(st["run"]["team"], "nap");
    }
    // The job records what it spawned.
    assert_eq!(got["runIds"], json!(runs));
    assert_eq!(got["lastRunId"], json!(runs.last()));
    assert_eq!(got["fireCount"], json!(runs.len()));
    assert_eq!(instant(&got["lastFireAt"]), *ats.last().unwrap());
    assert_eq!(got["nextFireAt"], Value::Null, "disabled");
    d.ok("schedule.remove", json!({"id": id}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_fires_after_a_restart_follow_each_catch_up_policy() {
    let mut d = daemon();
    let hold = run_of(&d, "hold");
    let at = Utc::now() + TimeDelta::milliseconds(3500);
    let at_s = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut jobs = Vec::new();
    for (name, extra) in [
        ("at-latest", json!({"at": at_s, "catchUp": "latest"})),
        ("at-none", json!({"at": at_s, "catchUp": "none"})),
        (
            "iv-all",
            json!({"intervalMs": 2000, "catchUp": "all", "overlap": "allow"}),
        ),
        (
            "iv-latest",
            json!({"intervalMs": 2000, "catchUp": "latest", "overlap": "allow"}),
        ),
        (
            "iv-none",
            json!({"intervalMs": 2000, "catchUp": "none", "overlap": "allow"}),
        ),
    ] {
        let mut p = extra.clone();
        p["name"] = json!(name);
        p["run"] = hold.clone();
        jobs.push(add(&d, p));
    }
    let listed = d.ok("schedule.list", json!({}))["jobs"].clone();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["fireCount"] == 0),
        "the machine was too slow: a job fired before the kill: {listed}"
    );
    d.kill9();
    // Down long enough to miss the one-shot and at least three interval fires.
    let last_created = jobs.iter().map(|j| instant(&j["createdAt"])).max().unwrap();
    let until =
        (last_created + TimeDelta::milliseconds(6300)).max(at + TimeDelta::milliseconds(300));
    std::thread::sleep((until - Utc::now()).to_std().unwrap_or_default());
    let restarted = Utc::now();
    d.restart();

    let id = |name: &str| {
        jobs.iter().find(|j| j["name"] == name).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Catch-up is one batch at start: once the one-shot's fire is there, all of it is.
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({"afterSeq": 0})).await;
    let at_latest = id("at-latest");
    collect(&mut sub, |evs| !fired(evs, &at_latest).is_empty()).await;
    let evs = d.events(None);
    let fired_at = |name: &str| -> Vec<DateTime<Utc>> {
        fired(&evs, &id(name))
            .iter()
            .map(|e| instant(&e["data"]["at"]))
            .collect()
    };
    let created =
        |name: &str| instant(&jobs.iter().find(|j| j["name"] == name).unwrap()["createdAt"]);
    // Interval instants of a job that were due by the restart: created + 2 s * k.
    let missed = |name: &str| -> Vec<DateTime<Utc>> {
        let c = created(name);
        (1..)
            .map(|k| c + TimeDelta::milliseconds(2000 * k))
            .take_while(|t| *t <= restarted)
            .collect()
    };
    let precise = |name: &str| {
        // createdAt on the wire has millisecond precision; the anchor has more.
        fired_at(name)
            .into_iter()
            .map(|t| t.timestamp_millis())
            .collect::<Vec<_>>()
    };
    let ms = |ts: Vec<DateTime<Utc>>| {
        ts.into_iter()
            .map(|t| t.timestamp_millis())
            .collect::<Vec<_>>()
    };

    // One-shots: `latest` fires once at its instant, `none` never.
    assert_eq!(fired_at("at-latest"), vec![instant(&json!(at_s))]);
    assert!(fired_at("at-none").is_empty());
    let g = d.ok("schedule.get", json!({"id": at_latest}));
    assert_eq!(
        (g["fireCount"].clone(), g["nextFireAt"].clone()),
        (json!(1), Value::Null)
    );
    assert_eq!(instant(&g["lastFireAt"]), instant(&json!(at_s)));
    let g = d.ok("schedule.get", json!({"id": id("at-none")}));
    assert_eq!(
        (g["fireCount"].clone(), g["nextFireAt"].clone()),
        (json!(0), Value::Null)
    );

    // `all`: every missed interval instant, in order.
    let all_missed = ms(missed("iv-all"));
    assert!(all_missed.len() >= 3, "{all_missed:?}");
    let all_fired: Vec<i64> = precise("iv-all");
    assert!(
        all_fired.len() >= all_missed.len(),
        "{all_fired:?} vs {all_missed:?}"
    );
    for (f, m) in all_fired.iter().zip(&all_missed) {
        assert!((f - m).abs() <= 1, "{all_fired:?} vs {all_missed:?}");
    }
    // `latest`: only the last one (or a later one, if one fell due while the daemon started).
    // (Later fires may already be live ones; none may be older than the latest missed.)
    let latest_missed = ms(missed("iv-latest"));
    let latest_fired = precise("iv-latest");
    let caught_up_by = instant(&fired(&evs, &at_latest)[0]["time"]).timestamp_millis();
    assert!(
        latest_fired.first().is_some_and(|f| *f <= caught_up_by),
        "{latest_fired:?}"
    );
    assert!(
        latest_fired
            .iter()
            .all(|f| *f >= latest_missed.last().unwrap() - 1),
        "{latest_fired:?} vs {latest_missed:?}"
    );
    // `none`: nothing that was due while down.
    let none_restart = restarted.timestamp_millis();
    assert!(
        precise("iv-none").iter().all(|t| *t > none_restart),
        "{:?}",
        precise("iv-none")
    );

    for j in &jobs {
        d.ok("schedule.remove", json!({"id": j["id"]}));
    }
}

#[test]
fn trigger_runs_now_and_removal_cancels_active_runs_unless_told_not_to() {
    let d = daemon();
    let yearly = |name: &str| {
        add(
            &d,
            json!({"name": name, "cron": "0 0 1 1 *", "timezone": "UTC", "run": run_of(&d, "hold"), "enabled": false}),
        )
    };
    let a = yearly("a");
    let a_id = a["id"].as_str().unwrap();
    // Trigger works on a disabled job and goes through team.run's path.
    let r1 = d.ok("schedule.trigger", json!({"id": a_id}))["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(d.wait(&r1), "blocked");
    let st = d.status(&r1);
    assert_eq!(
        (
            st["run"]["scheduleId"].clone(),
            st["run"]["approval"].clone()
        ),
        (json!(a_id), json!("pending"))
    );
    let r2 = d.ok("schedule.trigger", json!({"id": a_id}))["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let g = d.ok("schedule.get", json!({"id": a_id}));
    assert_eq!(g["runIds"], json!([r1, r2]));
    assert_eq!(g["fireCount"], 2);
    assert_eq!(g["lastRunId"], json!(r2));
    // A manual fire is the job's last fire (marked as manual), journaled as a fire: the
    // same `lastFireAt` after a restart. It does not move the schedule (next fire unchanged).
    let fired_at = d
        .events(None)
        .iter()
        .filter(|e| ty(e) == "schedule.fired" && e["data"]["runId"] == json!(r2))
        .map(|e| instant(&e["data"]["at"]))
        .next()
        .expect("the trigger's schedule.fired");
    assert_eq!(instant(&g["lastFireAt"]), fired_at, "{g}");
    assert_eq!(g["lastFireManual"], true);
    assert_eq!(
        g["nextFireAt"], a["nextFireAt"],
        "the schedule did not move"
    );
    let evs = d.events(None);
    let f = fired(&evs, a_id);
    assert_eq!(f.len(), 2);
    assert!(f.iter().all(|e| e["data"]["manual"] == true));
    assert_eq!(f[0]["data"]["runId"], json!(r1));

    // A finished run of the job is not cancelled.
    d.ok("team.cancel", json!({"runId": r1}));
    assert_eq!(d.wait(&r1), "cancelled");
    let removed = d.ok("schedule.remove", json!({"id": a_id}));
    assert_eq!(removed["cancelledRunIds"], json!([r2]));
    assert_eq!(d.wait(&r2), "cancelled");
    assert_eq!(d.err("schedule.get", json!({"id": a_id}))["code"], 1001);
    let evs = d.events(None);
    let rm = evs.iter().find(|e| ty(e) == "schedule.removed").unwrap();
    assert_eq!(rm["data"], json!({"id": a_id, "cancelledRunIds": [r2]}));

    let b = yearly("b");
    let b_id = b["id"].as_str().unwrap();
    let r3 = d.ok("schedule.trigger", json!({"id": b_id}))["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(d.wait(&r3), "blocked");
    let removed = d.ok("schedule.remove", json!({"id": b_id, "cancelRuns": false}));
    assert_eq!(removed["cancelledRunIds"], json!([]));
    assert_eq!(d.status(&r3)["run"]["status"], "blocked");
    assert_eq!(d.ok("schedule.list", json!({}))["jobs"], json!([]));

    // A job whose team went away: the trigger says why, nothing runs.
    one_step_team(&d, "fleeting", "Look.", "explorer");
    let mut run = run_of(&d, "fleeting");
    run["team"] = json!("fleeting");
    let c = add(&d, json!({"cron": "0 0 1 1 *", "run": run}));
    std::fs::remove_file(d.work.join(".crew/teams/fleeting.team.md")).unwrap();
    let e = d.err("schedule.trigger", json!({"id": c["id"]}));
    assert_eq!(e["code"], 1003, "{e}");
    assert_eq!(d.ok("schedule.get", json!({"id": c["id"]}))["fireCount"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_jobs_do_not_fire_and_a_one_shot_fires_once() {
    let d = daemon();
    let hold = run_of(&d, "hold");
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({})).await;
    // The control job marks the seconds (its first run stays blocked, so the rest are skips).
    let control = add(
        &d,
        json!({"cron": "* * * * * *", "timezone": "UTC", "run": hold}),
    );
    let control_id = control["id"].as_str().unwrap().to_string();
    let off = add(
        &d,
        json!({"cron": "* * * * * *", "timezone": "UTC", "run": hold, "enabled": false}),
    );
    let off_id = off["id"].as_str().unwrap().to_string();
    assert_eq!(off["nextFireAt"], Value::Null);
    let at = Utc::now() + TimeDelta::milliseconds(2200);
    let at_s = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let once = add(
        &d,
        json!({"at": at_s, "timezone": "Europe/Berlin", "run": hold}),
    );
    let once_id = once["id"].as_str().unwrap().to_string();
    // Shown in the job's zone, with its offset.
    assert_eq!(once["kind"], "at");
    assert_eq!(once["spec"], once["nextFireAt"]);
    let shown = once["nextFireAt"].as_str().unwrap();
    assert!(
        shown.ends_with("+01:00") || shown.ends_with("+02:00"),
        "{shown}"
    );
    assert_eq!(instant(&once["nextFireAt"]), instant(&json!(at_s)));

    // Across the one-shot's instant and two more seconds.
    let at_trunc = instant(&json!(at_s));
    collect(&mut sub, |evs| {
        !fired(evs, &once_id).is_empty()
            && handled(evs, &control_id)
                .iter()
                .filter(|e| instant(&e["data"]["at"]) > at_trunc + TimeDelta::seconds(1))
                .count()
                >= 1
    })
    .await;
    let evs = d.events(None);
    assert!(handled(&evs, &off_id).is_empty());
    let f = fired(&evs, &once_id);
    assert_eq!(f.len(), 1);
    assert_eq!(instant(&f[0]["data"]["at"]), at_trunc);
    let g = d.ok("schedule.get", json!({"id": once_id}));
    assert_eq!(
        (
            g["fireCount"].clone(),
            g["nextFireAt"].clone(),
            g["enabled"].clone()
        ),
        (json!(1), Value::Null, json!(true))
    );
    assert_eq!(instant(&g["lastFireAt"]), at_trunc);
    let g = d.ok("schedule.get", json!({"id": off_id}));
    assert_eq!(
        (g["fireCount"].clone(), g["nextFireAt"].clone()),
        (json!(0), Value::Null)
    );

    // Enabled it fires; disabled again it stops at once.
    let on = d.ok("schedule.enable", json!({"id": off_id}));
    assert!(on["nextFireAt"].is_string(), "{on}");
    collect(&mut sub, |evs| !fired(evs, &off_id).is_empty()).await;
    let off_again = d.ok("schedule.disable", json!({"id": off_id}));
    assert_eq!(off_again["enabled"], false);
    let disabled_at = Utc::now();
    collect(&mut sub, |evs| {
        handled(evs, &control_id)
            .iter()
            .filter(|e| instant(&e["data"]["at"]) > disabled_at + TimeDelta::seconds(1))
            .count()
            >= 1
    })
    .await;
    let evs = d.events(None);
    let late: Vec<_> = handled(&evs, &off_id)
        .into_iter()
        .filter(|e| instant(&e["data"]["at"]) > disabled_at)
        .collect();
    assert!(late.is_empty(), "{late:?}");
    for id in [control_id, off_id, once_id] {
        d.ok("schedule.remove", json!({"id": id}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_cancel_previous_cancels_the_active_run_then_starts() {
    let d = daemon();
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({})).await;
    let job = add(
        &d,
        json!({"cron": "* * * * * *", "timezone": "UTC", "overlap": "cancel-previous", "run": run_of(&d, "nap")}),
    );
    let id = job["id"].as_str().unwrap().to_string();
    collect(&mut sub, |evs| fired(evs, &id).len() >= 3).await;
    d.ok("schedule.disable", json!({"id": id}));
    let evs = d.events(None);
    let h = handled(&evs, &id);
    assert!(h.iter().all(|e| ty(e) == "schedule.fired"), "{h:?}");
    let runs: Vec<String> = h
        .iter()
        .map(|e| e["data"]["runId"].as_str().unwrap().to_string())
        .collect();
    for (k, pair) in h.windows(2).enumerate() {
        assert_eq!(
            instant(&pair[1]["data"]["at"]) - instant(&pair[0]["data"]["at"]),
            TimeDelta::seconds(1)
        );
        // Each fire found the previous (2.5 s) run active and cancelled it first.
        let prev = d.status(&runs[k]);
        assert_eq!(prev["run"]["status"], "cancelled", "{prev}");
        assert!(
            prev["run"]["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("superseded"),
            "{prev}"
        );
        assert!(instant(&prev["run"]["finishedAt"]) <= instant(&pair[1]["time"]));
    }
    // The last run is cancelled by the removal unless it already finished.
    let last = runs.last().unwrap();
    let removed = d.ok("schedule.remove", json!({"id": id}));
    let want = if d.status(last)["run"]["status"] == "cancelled" {
        json!([last])
    } else {
        json!([])
    };
    assert_eq!(removed["cancelledRunIds"], want);
}

#[test]
fn jobs_are_named_uniquely_and_found_by_name() {
    let mut d = daemon();
    let nightly = add(
        &d,
        json!({"name": "nightly review", "cron": "0 3 * * *", "timezone": "UTC", "run": run_of(&d, "hold")}),
    );
    let id = nightly["id"].as_str().unwrap().to_string();
    // Names are unique; what a name may be is checked.
    for (name, want) in [
        ("nightly review", "already the name of job"),
        ("  ", "must not be empty"),
        ("a\u{7}b", "control characters"),
        ("sched_0000000000000001", "must not start with sched_"),
    ] {
        let e = d.err(
            "schedule.add",
            json!({"name": name, "intervalMs": 60000, "run": run_of(&d, "hold")}),
        );
        assert_eq!(e["code"], -32602, "{name:?}: {e}");
        assert!(e.to_string().contains(want), "{name:?}: {e}");
    }
    // Names made up from the goal are made unique instead.
    let a = add(
        &d,
        json!({"intervalMs": 3_600_000, "run": run_of(&d, "hold"), "enabled": false}),
    );
    let b = add(
        &d,
        json!({"intervalMs": 3_600_000, "run": run_of(&d, "hold"), "enabled": false}),
    );
    assert_eq!(b["name"], format!("{} (2)", a["name"].as_str().unwrap()));

    // Every verb that takes the id takes the name.
    let g = d.ok("schedule.get", json!({"id": "nightly review"}));
    assert_eq!(g["id"], json!(id));
    let g = d.ok("schedule.disable", json!({"id": "nightly review"}));
    assert_eq!(
        (g["id"].clone(), g["enabled"].clone()),
        (json!(id), json!(false))
    );
    let g = d.ok("schedule.enable", json!({"id": "nightly review"}));
    assert_eq!(g["enabled"], true);
    let run = d.ok("schedule.trigger", json!({"id": "nightly review"}))["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let g = d.ok("schedule.get", json!({"id": id}));
    assert_eq!(g["lastRunId"], json!(run));
    assert_eq!(g["lastFireManual"], true);
    assert!(g["lastFireAt"].is_string(), "{g}");
    // Renaming onto another job's name is refused; to a free one works, and the old is gone.
    let e = d.err(
        "schedule.update",
        json!({"id": "nightly review", "name": a["name"]}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    let g = d.ok(
        "schedule.update",
        json!({"id": "nightly review", "name": "nightly"}),
    );
    assert_eq!(g["name"], "nightly");
    assert_eq!(
        d.err("schedule.get", json!({"id": "nightly review"}))["code"],
        1001
    );

    // The manual fire was journaled: the last fire survives a restart.
    d.restart();
    let after = d.ok("schedule.get", json!({"id": "nightly"}));
    assert_eq!(after["lastFireAt"], g["lastFireAt"]);
    assert_eq!(after["lastFireManual"], true);

    let r = d.ok("schedule.remove", json!({"id": "nightly"}));
    assert_eq!(r["cancelledRunIds"], json!([run]));
    assert_eq!(d.err("schedule.get", json!({"id": id}))["code"], 1001);
}

/// A scheduled fire that starts no run (the job's team was deleted since) is kept with its
/// reason, which `schedule.get` shows — it was only in crewd's log, the job silently doing the
/// same every time.
#[tokio::test]
async fn a_fire_that_starts_no_run_is_shown_with_its_reason() {
    let d = daemon();
    let client = d.ws().await;
    let mut sub = d.subscribe(&client, json!({})).await;
    one_step_team(&d, "doomed", "Do it.", "explorer");
    let job = add(
        &d,
        json!({"cron": "* * * * * *", "timezone": "UTC", "run": run_of(&d, "doomed")}),
    );
    let id = job["id"].as_str().unwrap().to_string();
    for dir in [
        d.work.join(".crew/teams"),
        d.home.join(".config/crew/teams"),
    ] {
        let _ = std::fs::remove_file(dir.join("doomed.team.md"));
    }
    collect(&mut sub, |evs| {
        handled(evs, &id)
            .iter()
            .any(|e| ty(e) == "schedule.skipped")
    })
    .await;
    d.ok("schedule.disable", json!({"id": id}));
    let got = d.ok("schedule.get", json!({"id": id}));
    let reason = got["lastSkip"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("doomed"), "{got}");
    assert!(got["lastSkip"]["at"].is_string(), "{got}");
}
