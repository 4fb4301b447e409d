//! The pure part of the timer glue: what the engine knows about a job's timing, the queue of
//! armed instants, and what to do when an armed instant comes. No clocks, no I/O.

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use crew_core::run::ScheduleJob;
use crew_core::schedule::{missed_fires, CatchUp, Schedule, ScheduleSpec};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Most missed fires `catchUp: all` replays (the most recent ones).
pub const CATCH_UP_ALL_BOUND: usize = 100;

/// A job's timing facts, as journaled. `cursor` is the last scheduled instant that was handled
/// (fired or skipped), or the creation when none was.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTiming {
    pub spec: ScheduleSpec,
    pub schedule: Schedule,
    pub tz: Tz,
    pub created_at: DateTime<Utc>,
    pub last_fire_at: Option<DateTime<Utc>>,
    /// Nothing before this is owed (the job was enabled, or given new times, then).
    pub owed_from: Option<DateTime<Utc>>,
    pub enabled: bool,
    pub catch_up: CatchUp,
}

impl JobTiming {
    /// `None` for a job whose spec or zone no longer compiles (never stored by this daemon,
    /// but a journal is input too).
    pub fn from_job(job: &ScheduleJob) -> Option<JobTiming> {
        Some(JobTiming {
            spec: job.spec.clone(),
            schedule: Schedule::compile(&job.spec).ok()?,
            tz: crew_core::schedule::parse_timezone(&job.timezone).ok()?,
            created_at: job.created_at,
            last_fire_at: job.last_fire_at,
            owed_from: job.owed_from,
            enabled: job.enabled,
            catch_up: job.catch_up,
        })
    }

    /// The last instant handled or not owed: fires after it are the job's to make.
    pub fn cursor(&self) -> DateTime<Utc> {
        let handled = self.last_fire_at.unwrap_or(self.created_at);
        self.owed_from.map_or(handled, |o| handled.max(o))
    }

    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule.next_after(self.tz, self.created_at, after)
    }

    /// The next fire for a job (re)armed at `now`: nothing before `now` (fires missed while a
    /// job was disabled are not owed) and nothing at or before the cursor.
    pub fn next_from(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after(self.cursor().max(now))
    }

    /// Whether a change leaves the fire times alone (a rename, new run params, a new overlap).
    pub fn same_times(&self, other: &JobTiming) -> bool {
        self.schedule == other.schedule
            && self.tz == other.tz
            && self.created_at == other.created_at
            && self.owed_from == other.owed_from
            && self.enabled == other.enabled
    }

    /// Record a handled fire; cursors only move forward.
    pub fn handled(&mut self, at: DateTime<Utc>) {
        if self.last_fire_at.is_none_or(|l| at > l) {
            self.last_fire_at = Some(at);
        }
    }
}

/// An armed job: the scheduled instant it fires for, when to look at it (the same instant,
/// or later when a failed attempt is retried), and how late it may be before it counts as
/// missed (then `catchUp` decides). `fire`: for an interval job, the instant on the monotonic
/// clock it fires at (intervals count elapsed time, whatever the wall clock does); `None` for
/// cron and one-shot jobs, which fire when the wall clock reads `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    pub at: DateTime<Utc>,
    pub wake: DateTime<Utc>,
    pub grace: TimeDelta,
    pub fire: Option<tokio::time::Instant>,
}

/// Armed jobs ordered by wake time.
#[derive(Debug, Default)]
pub struct Queue {
    order: BTreeSet<(DateTime<Utc>, Arc<str>)>,
    by_job: HashMap<Arc<str>, Armed>,
}

impl Queue {
    pub fn arm(&mut self, id: &str, armed: Armed) {
        self.disarm(id);
        let id: Arc<str> = Arc::from(id);
        self.order.insert((armed.wake, id.clone()));
        self.by_job.insert(id, armed);
    }

    pub fn disarm(&mut self, id: &str) -> Option<Armed> {
        let (key, armed) = self.by_job.remove_entry(id)?;
        self.order.remove(&(armed.wake, key));
        Some(armed)
    }

    pub fn get(&self, id: &str) -> Option<&Armed> {
        self.by_job.get(id)
    }

    /// Armed jobs waking at or before `until`, earliest first.
    pub fn waking_by(&self, until: DateTime<Utc>) -> impl Iterator<Item = (&str, &Armed)> {
        self.order
            .iter()
            .take_while(move |(wake, _)| *wake <= until)
            .filter_map(|(_, id)| self.by_job.get(id).map(|a| (&**id, a)))
    }

    pub fn earliest_wake(&self) -> Option<DateTime<Utc>> {
        self.order.first().map(|(t, _)| *t)
    }

    /// Remove and return every job whose wake time is at or before `now`, earliest first.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> Vec<(String, Armed)> {
        let mut out = Vec::new();
        while let Some((wake, _)) = self.order.first() {
            if *wake > now {
                break;
            }
            let Some((_, id)) = self.order.pop_first() else {
                break;
            };
            if let Some(armed) = self.by_job.remove(&id) {
                out.push((id.to_string(), armed));
            }
        }
        out
    }

    pub fn len(&self) -> usize {
        self.by_job.len()
    }
}

/// What one armed job does when its time has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    /// Scheduled instants to fire, oldest first (empty: nothing is owed).
    pub instants: Vec<DateTime<Utc>>,
    /// The next fire is the first one strictly after this (and after the cursor).
    pub resume_from: DateTime<Utc>,
}

/// A job armed for `armed.at` is looked at `now`. On time (late by at most `grace`): fire that
/// instant. Later than that (the daemon was down, the machine slept, the clock jumped): the
/// fires in (cursor, now] are missed and the job's `catchUp` decides which of them fire; the
/// job then continues from `now`.
pub fn plan_fire(job: &JobTiming, armed: &Armed, now: DateTime<Utc>) -> FirePlan {
    let on_time = now
        .checked_sub_signed(armed.grace)
        .is_none_or(|limit| armed.at >= limit);
    if on_time {
        return FirePlan {
            instants: vec![armed.at],
            resume_from: armed.at,
        };
    }
    FirePlan {
        instants: missed_fires(
            &job.spec,
            job.tz,
            job.created_at,
            Some(job.cursor()),
            job.created_at,
            now,
            job.catch_up,
            CATCH_UP_ALL_BOUND,
        ),
        resume_from: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_core::schedule::{Overlap, ScheduleSpec};

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn timing(spec: ScheduleSpec, created: &str, last: Option<&str>, policy: CatchUp) -> JobTiming {
        let job = ScheduleJob {
            id: "j".into(),
            name: "j".into(),
            spec,
            timezone: "UTC".into(),
            enabled: true,
            overlap: Overlap::Skip,
            catch_up: policy,
            run: serde_json::json!({}),
            created_at: utc(created),
            last_fire_at: last.map(utc),
            last_manual_fire_at: None,
            last_run_id: None,
            fire_count: 0,
            run_ids: vec![],
            owed_from: None,
            last_skip: None,
        };
        JobTiming::from_job(&job).unwrap()
    }

    #[test]
    fn plan_fire_table() {
        let every_10m = || ScheduleSpec::Interval { ms: 600_000 };
        let created = "2025-01-01T00:00:00Z";
        // (name, last fire, armed at, grace s, now, policy, want instants, want resume)
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            &'a str,
            i64,
            &'a str,
            CatchUp,
            Vec<&'a str>,
            &'a str,
        );
        let cases: Vec<Case> = vec![
            (
                "on time",
                None,
                "2025-01-01T00:10:00Z",
                30,
                "2025-01-01T00:10:00Z",
                CatchUp::None,
                vec!["2025-01-01T00:10:00Z"],
                "2025-01-01T00:10:00Z",
            ),
            (
                "late within grace still fires its instant",
                None,
                "2025-01-01T00:10:00Z",
                30,
                "2025-01-01T00:10:30Z",
                CatchUp::None,
                vec!["2025-01-01T00:10:00Z"],
                "2025-01-01T00:10:00Z",
            ),
            (
                "past grace: none drops",
                None,
                "2025-01-01T00:10:00Z",
                30,
                "2025-01-01T00:35:00Z",
                CatchUp::None,
                vec![],
                "2025-01-01T00:35:00Z",
            ),
            (
                "past grace: latest keeps the last",
                None,
                "2025-01-01T00:10:00Z",
                30,
                "2025-01-01T00:35:00Z",
                CatchUp::Latest,
                vec!["2025-01-01T00:30:00Z"],
                "2025-01-01T00:35:00Z",
            ),
            (
                "past grace: all keeps each since the last fire",
                Some("2025-01-01T00:10:00Z"),
                "2025-01-01T00:20:00Z",
                30,
                "2025-01-01T00:45:00Z",
                CatchUp::All,
                vec![
                    "2025-01-01T00:20:00Z",
                    "2025-01-01T00:30:00Z",
                    "2025-01-01T00:40:00Z",
                ],
                "2025-01-01T00:45:00Z",
            ),
            (
                "no grace (start-up): a second late is missed",
                None,
                "2025-01-01T00:10:00Z",
                0,
                "2025-01-01T00:10:01Z",
                CatchUp::None,
                vec![],
                "2025-01-01T00:10:01Z",
            ),
            (
                "no grace, exactly on time",
                None,
                "2025-01-01T00:10:00Z",
                0,
                "2025-01-01T00:10:00Z",
                CatchUp::None,
                vec!["2025-01-01T00:10:00Z"],
                "2025-01-01T00:10:00Z",
            ),
        ];
        for (name, last, at, grace, now, policy, want, resume) in cases {
            let job = timing(every_10m(), created, last, policy);
            let armed = Armed {
                at: utc(at),
                wake: utc(at),
                grace: TimeDelta::seconds(grace),
                fire: None,
            };
            let plan = plan_fire(&job, &armed, utc(now));
            assert_eq!(
                plan,
                FirePlan {
                    instants: want.into_iter().map(utc).collect(),
                    resume_from: utc(resume),
                },
                "{name}"
            );
        }
    }

    #[test]
    fn next_from_never_owes_the_past_and_never_repeats_the_cursor() {
        let spec = ScheduleSpec::Cron {
            expr: "0 * * * *".into(),
        };
        // (last fire, now, want)
        let cases = [
            (None, "2025-01-01T05:30:00Z", Some("2025-01-01T06:00:00Z")),
            (
                Some("2025-01-01T06:00:00Z"),
                "2025-01-01T06:00:00Z",
                Some("2025-01-01T07:00:00Z"),
            ),
            (
                Some("2025-01-01T09:00:00Z"),
                "2025-01-01T05:30:00Z",
                Some("2025-01-01T10:00:00Z"),
            ),
        ];
        for (last, now, want) in cases {
            let job = timing(spec.clone(), "2025-01-01T00:00:00Z", last, CatchUp::Latest);
            assert_eq!(job.next_from(utc(now)), want.map(utc), "{last:?} {now}");
        }
        let once = timing(
            ScheduleSpec::At {
                at: utc("2025-01-01T01:00:00Z"),
            },
            "2025-01-01T00:00:00Z",
            Some("2025-01-01T01:00:00Z"),
            CatchUp::Latest,
        );
        assert_eq!(once.next_from(utc("2025-01-01T00:30:00Z")), None);
    }

    #[test]
    fn cursor_only_moves_forward() {
        let mut job = timing(
            ScheduleSpec::Interval { ms: 1000 },
            "2025-01-01T00:00:00Z",
            None,
            CatchUp::Latest,
        );
        for (handled, want) in [
            ("2025-01-01T00:00:05Z", "2025-01-01T00:00:05Z"),
            ("2025-01-01T00:00:03Z", "2025-01-01T00:00:05Z"),
            ("2025-01-01T00:00:06Z", "2025-01-01T00:00:06Z"),
        ] {
            job.handled(utc(handled));
            assert_eq!(job.cursor(), utc(want));
        }
    }

    #[test]
    fn queue_orders_by_wake_and_rearming_replaces() {
        let mut q = Queue::default();
        let armed = |at: &str, wake: &str| Armed {
            at: utc(at),
            wake: utc(wake),
            grace: TimeDelta::zero(),
            fire: None,
        };
        q.arm("a", armed("2025-01-01T00:00:03Z", "2025-01-01T00:00:03Z"));
        q.arm("b", armed("2025-01-01T00:00:01Z", "2025-01-01T00:00:01Z"));
        q.arm("c", armed("2025-01-01T00:00:02Z", "2025-01-01T00:00:09Z"));
        // Re-arming `a` replaces its entry.
        q.arm("a", armed("2025-01-01T00:00:02Z", "2025-01-01T00:00:02Z"));
        assert_eq!(q.len(), 3);
        assert_eq!(q.earliest_wake(), Some(utc("2025-01-01T00:00:01Z")));
        let due: Vec<String> = q
            .take_due(utc("2025-01-01T00:00:05Z"))
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(due, ["b", "a"]);
        assert_eq!(
            q.disarm("c").map(|a| a.at),
            Some(utc("2025-01-01T00:00:02Z"))
        );
        assert_eq!(q.earliest_wake(), None);
        assert!(q.take_due(utc("2030-01-01T00:00:00Z")).is_empty());
    }
}
