//! Schedules: `schedule ls`, `schedule get`, `schedule preview`. Fire times are shown in the
//! job's own zone, since that is the zone its cron expression means.

use super::table::{self, Cell, Col, Table};
use super::time::{abs_and_rel, absolute, compact_duration_ms, parse_time, relative, Zone};
use super::View;
use crate::style::Tone;
use crew_api::types::{Job, PreviewResult};
use std::fmt::Write as _;

/// The job's spec for humans: the cron expression, `every 5m`, or `at 2026-…` in the job's zone.
pub fn spec(job: &Job) -> String {
    spec_in(job, Zone::named(&job.timezone))
}

/// As `spec`, a one-shot's instant shown in `zone` (a table's one zone).
fn spec_in(job: &Job, zone: Zone) -> String {
    match job.kind.as_str() {
        "interval" => match job.spec.parse::<u64>() {
            Ok(ms) => format!("every {}", compact_duration_ms(ms)),
            Err(_) => format!("every {}", job.spec),
        },
        "at" => match parse_time(&job.spec) {
            Some(t) => format!("at {}", absolute(t, zone)),
            None => format!("at {}", job.spec),
        },
        _ => job.spec.clone(),
    }
}

/// `schedule ls`. Times are in one zone per table, named in the header: the jobs' zone when
/// they share one, else the viewer's. A cron expression means its job's own zone (the `zone`
/// column); a one-shot's instant is shown in the table's.
pub fn list(view: &View, jobs: &[Job]) -> String {
    if jobs.is_empty() {
        return "No scheduled jobs.\n".into();
    }
    let zone = match jobs.first() {
        Some(first) if jobs.iter().all(|j| j.timezone == first.timezone) => {
            Zone::named(&first.timezone)
        }
        _ => view.clock.zone,
    };
    let mut t = Table::new(vec![
        Col::new("id"),
        Col::new("name").cut(8).drop(3),
        Col::new("spec").cut(16),
        Col::new("zone").drop(1),
        Col::new("enabled"),
        Col::new(format!("next fire ({})", zone.label(view.clock.now))),
        Col::new("last fire").drop(2),
        Col::new("fires").right().drop(4),
    ]);
    for j in jobs {
        let next = if j.enabled {
            abs_and_rel(j.next_fire_at.as_deref(), &view.clock, zone)
        } else {
            "-".into()
        };
        t.row(vec![
            Cell::new(&j.id),
            Cell::new(view.cut(&j.name, 24)),
            Cell::new(spec_in(j, zone)),
            Cell::new(&j.timezone),
            if j.enabled {
                table::toned(view, Tone::Ok, "yes")
            } else {
                table::toned(view, Tone::Dim, "no")
            },
            Cell::new(next),
            Cell::new(
                j.last_fire_at
                    .as_deref()
                    .and_then(parse_time)
                    .map(|t| format!("{}{}{}", relative(t, view.clock.now), manual(j), skipped(j)))
                    .unwrap_or_else(|| "-".into()),
            ),
            Cell::new(j.fire_count),
        ]);
    }
    t.render(view)
}

/// ` (no run)` when the job's last scheduled fire started no run (`schedule get` says why).
fn skipped(j: &Job) -> &'static str {
    match (&j.last_skip, &j.last_fire_at) {
        (Some(s), Some(last)) if &s.at == last && !j.last_fire_manual => " (no run)",
        _ => "",
    }
}

/// ` (manual)` when the job's last fire was a `schedule trigger`.
fn manual(j: &Job) -> &'static str {
    if j.last_fire_manual && j.last_fire_at.is_some() {
        " (manual)"
    } else {
        ""
    }
}

pub fn detail(view: &View, j: &Job) -> String {
    let zone = Zone::named(&j.timezone);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}  {}",
        view.p(Tone::Bold, "Job"),
        view.p(Tone::Bold, &j.id),
        j.name
    );
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "  {} {value}", view.p(Tone::Dim, format!("{name:<9}")));
    };
    field("spec", format!("{} ({})", spec(j), j.kind));
    field("zone", j.timezone.clone());
    field(
        "enabled",
        if j.enabled {
            view.p(Tone::Ok, "yes")
        } else {
            view.p(Tone::Dim, "no")
        },
    );
    field(
        "next",
        if j.enabled {
            abs_and_rel(j.next_fire_at.as_deref(), &view.clock, zone)
        } else {
            "-".into()
        },
    );
    field(
        "last",
        format!(
            "{}{}",
            abs_and_rel(j.last_fire_at.as_deref(), &view.clock, zone),
            manual(j)
        ),
    );
    if let Some(skip) = &j.last_skip {
        field(
            "no run",
            format!(
                "{}: {}",
                abs_and_rel(Some(&skip.at), &view.clock, zone),
                view.p(Tone::Warn, view.cut(&skip.reason, 300))
            ),
        );
    }
    field("fires", j.fire_count.to_string());
    field("overlap", serde_plain(&j.overlap));
    field("catch-up", serde_plain(&j.catch_up));
    if let Some(r) = &j.last_run_id {
        field("last run", r.clone());
    }
    field("goal", view.cut(&j.run.goal, 200));
    let mut setup = vec![format!("cwd {}", j.run.cwd)];
    for (name, v) in [
        ("team", &j.run.team),
        ("workflow", &j.run.workflow),
        ("runtime", &j.run.runtime),
        ("model", &j.run.model),
    ] {
        if let Some(v) = v {
            setup.push(format!("{name} {v}"));
        }
    }
    field("run", setup.join(" · "));
    field(
        "created",
        abs_and_rel(Some(&j.created_at), &view.clock, zone),
    );
    out
}

/// An enum's wire name (`cancel-previous`), for display.
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "-".into(),
    }
}

pub fn preview(view: &View, p: &PreviewResult) -> String {
    let zone = Zone::named(&p.timezone);
    let mut out = String::new();
    for t in &p.fire_times {
        match parse_time(t) {
            Some(at) => {
                let _ = writeln!(
                    out,
                    "{}  {} ({})",
                    absolute(at, zone),
                    p.timezone,
                    view.p(Tone::Dim, relative(at, view.clock.now))
                );
            }
            None => {
                let _ = writeln!(out, "{t}");
            }
        }
    }
    if out.is_empty() {
        out.push_str("No fire times.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::view;
    use crew_api::types::{CatchUp, Overlap, RunParams};

    fn job(
        [id, name, kind, spec, tz]: [&str; 5],
        enabled: bool,
        next: Option<&str>,
        last: Option<&str>,
        fires: u64,
    ) -> Job {
        Job {
            id: id.into(),
            name: name.into(),
            kind: kind.into(),
            spec: spec.into(),
            timezone: tz.into(),
            enabled,
            next_fire_at: next.map(String::from),
            last_fire_at: last.map(String::from),
            // The interval job's last fire was a `schedule trigger`.
            last_fire_manual: id == "s-3",
            last_run_id: None,
            run_ids: vec![],
            fire_count: fires,
            overlap: Overlap::Skip,
            catch_up: CatchUp::Latest,
            run: RunParams {
                goal: "nightly review".into(),
                cwd: "/home/u/proj".into(),
                team: Some("review".into()),
                ..RunParams::default()
            },
            created_at: "2026-03-01T00:00:00Z".into(),
            last_skip: None,
        }
    }

    /// A scheduled fire that started no run says so in the list, and why in the detail.
    #[test]
    fn a_fire_that_started_no_run_says_why() {
        let mut j = job(
            ["s-9", "gone team", "cron", "* * * * *", "UTC"],
            true,
            Some("2026-03-10T15:01:00Z"),
            Some("2026-03-10T15:00:00Z"),
            0,
        );
        j.last_skip = Some(crew_api::types::JobSkip {
            at: "2026-03-10T15:00:00Z".into(),
            reason: "the run cannot start: the team cannot run: unknown team `t`".into(),
        });
        let v = view(120);
        let list = list(&v, std::slice::from_ref(&j));
        assert!(list.contains("(no run)"), "{list}");
        let detail = detail(&v, &j);
        assert!(detail.contains("no run"), "{detail}");
        assert!(detail.contains("unknown team `t`"), "{detail}");
        j.last_skip = None;
        assert!(!super::list(&v, &[j]).contains("(no run)"));
    }

    fn jobs() -> Vec<Job> {
        vec![
            // 15:00 UTC is 16:00 in Berlin (CET) and 11:00 in New York (EDT since 8 March).
            job(
                [
                    "s-1",
                    "nightly review",
                    "cron",
                    "0 16 * * MON-FRI",
                    "Europe/Berlin",
                ],
                true,
                Some("2026-03-10T15:00:00Z"),
                Some("2026-03-09T15:00:00Z"),
                12,
            ),
            job(
                ["s-2", "standup notes", "cron", "@daily", "America/New_York"],
                true,
                Some("2026-03-11T04:00:00Z"),
                None,
                0,
            ),
            job(
                ["s-3", "poll", "interval", "300000", "UTC"],
                false,
                Some("2026-03-10T12:05:00Z"),
                Some("2026-03-10T11:55:00Z"),
                301,
            ),
            job(
                ["s-4", "release", "at", "2026-03-12T09:30:00Z", "UTC"],
                true,
                Some("2026-03-12T09:30:00Z"),
                None,
                0,
            ),
        ]
    }

    #[test]
    fn schedule_list_snapshot() {
        insta::assert_snapshot!(crate::render::fixtures::at_80_and_160(|v| list(v, &jobs())));
        assert_eq!(list(&view(120), &[]), "No scheduled jobs.\n");
    }

    #[test]
    fn job_detail_snapshot() {
        insta::assert_snapshot!(detail(&view(100), &jobs()[0]));
        let manual = detail(&view(100), &jobs()[2]);
        assert!(
            manual.contains("2026-03-10 11:55 (5m ago) (manual)"),
            "{manual}"
        );
    }

    #[test]
    fn specs() {
        let j = jobs();
        assert_eq!(spec(&j[0]), "0 16 * * MON-FRI");
        assert_eq!(spec(&j[2]), "every 5m");
        assert_eq!(spec(&j[3]), "at 2026-03-12 09:30");
    }

    #[test]
    fn preview_in_zone() {
        let p = PreviewResult {
            fire_times: vec![
                "2026-03-29T00:30:00Z".into(),
                "2026-03-29T01:30:00Z".into(),
                "bad".into(),
            ],
            timezone: "Europe/Berlin".into(),
        };
        // 01:30 UTC on 29 March is 03:30 CEST: Berlin's clocks skipped 02:00-03:00.
        insta::assert_snapshot!(preview(&view(100), &p), @r"
        2026-03-29 01:30  Europe/Berlin (in 18d)
        2026-03-29 03:30  Europe/Berlin (in 18d)
        bad
        ");
    }
}
