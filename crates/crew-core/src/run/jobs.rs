//! Scheduled jobs as state: what `schedule.*` events build.

use crate::schedule::{CatchUp, Overlap, ScheduleSpec};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleJob {
    pub id: String,
    pub name: String,
    pub spec: ScheduleSpec,
    pub timezone: String,
    pub enabled: bool,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    /// The `team.run` params, as the client gave them (validated when the job was added).
    pub run: serde_json::Value,
    pub created_at: DateTime<Utc>,
    /// The schedule's cursor: its last scheduled fire (or skip). Manual fires never move it,
    /// so a trigger can neither eat nor shift a scheduled fire.
    pub last_fire_at: Option<DateTime<Utc>>,
    /// The last `schedule.trigger`, for showing the job's last fire of any kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_manual_fire_at: Option<DateTime<Utc>>,
    pub last_run_id: Option<String>,
    pub fire_count: u64,
    /// Runs this job spawned, newest last (bounded).
    pub run_ids: Vec<String>,
    /// Nothing scheduled before this is owed: when the job was last enabled or its schedule
    /// changed. Without it a restart took the span a job was disabled for as downtime and
    /// caught up its fires (`catchUp: all`: up to 100 runs at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owed_from: Option<DateTime<Utc>>,
    /// The last scheduled fire that started no run, and why (the team gone, the cwd moved, the
    /// previous run still running): cleared by the next scheduled fire that starts one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_skip: Option<JobSkip>,
}

/// A scheduled fire that started no run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSkip {
    pub at: DateTime<Utc>,
    pub reason: String,
}

/// How many spawned run ids a job remembers.
pub const JOB_RUN_IDS_KEPT: usize = 100;

impl ScheduleJob {
    /// After `self` was changed from `before` at `now`: fires before `now` are not owed when
    /// the change enabled the job or gave it new times (its schedule or time zone).
    pub fn changed_from(&mut self, before: &ScheduleJob, now: DateTime<Utc>) {
        let enabled = self.enabled && !before.enabled;
        let new_times = self.spec != before.spec || self.timezone != before.timezone;
        if enabled || new_times {
            self.owed_from = Some(now);
        }
    }

    /// The job's last fire of any kind, and whether it was a manual one.
    pub fn last_fire(&self) -> Option<(DateTime<Utc>, bool)> {
        match (self.last_fire_at, self.last_manual_fire_at) {
            (Some(s), Some(m)) if m > s => Some((m, true)),
            (Some(s), _) => Some((s, false)),
            (None, Some(m)) => Some((m, true)),
            (None, None) => None,
        }
    }
}

/// Why a job key (an id or a name) names no single job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobLookup {
    NotFound,
    /// Several jobs carry this name (only journals from before names were unique): their ids.
    Ambiguous(Vec<String>),
}

/// The job `key` names: its id, else its exact name. Ids win, so a job is always reachable by
/// its id whatever names others chose.
pub fn find_job<'a>(
    jobs: &'a BTreeMap<String, ScheduleJob>,
    key: &str,
) -> Result<&'a ScheduleJob, JobLookup> {
    if let Some(j) = jobs.get(key) {
        return Ok(j);
    }
    let mut named = jobs.values().filter(|j| j.name == key);
    match (named.next(), named.next()) {
        (Some(j), None) => Ok(j),
        (None, _) => Err(JobLookup::NotFound),
        (Some(a), Some(b)) => {
            let mut ids = vec![a.id.clone(), b.id.clone()];
            ids.extend(named.map(|j| j.id.clone()));
            Err(JobLookup::Ambiguous(ids))
        }
    }
}

/// The job other than `except` that already has `name` as its name or its id.
pub fn name_owner<'a>(
    jobs: &'a BTreeMap<String, ScheduleJob>,
    name: &str,
    except: Option<&str>,
) -> Option<&'a str> {
    jobs.values()
        .find(|j| Some(j.id.as_str()) != except && (j.name == name || j.id == name))
        .map(|j| j.id.as_str())
}

/// `base`, or `base (2)`, `base (3)`… : the first that no job has, for names made up from the
/// goal (two jobs may well have the same goal).
pub fn unique_name(jobs: &BTreeMap<String, ScheduleJob>, base: &str) -> String {
    if name_owner(jobs, base, None).is_none() {
        return base.to_string();
    }
    // Terminates: each candidate is distinct and there are finitely many jobs.
    (2u64..)
        .map(|n| format!("{base} ({n})"))
        .find(|c| name_owner(jobs, c, None).is_none())
        .unwrap_or_else(|| base.to_string())
}

#[cfg(test)]
mod tests {

    /// Which changes make the past not owed: enabling, and new times; not a rename, not
    /// disabling, not an update that changes nothing of that.
    #[test]
    fn enabling_or_new_times_make_the_past_not_owed() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-07T12:00:00Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_default();
        let mut disabled = job("a", "a");
        disabled.enabled = false;
        let enabled = job("a", "a");
        type Change = Box<dyn Fn(&mut ScheduleJob)>;
        let cases: Vec<(&str, ScheduleJob, Change, bool)> = vec![
            (
                "enable",
                disabled.clone(),
                Box::new(|j| j.enabled = true),
                true,
            ),
            (
                "disable",
                enabled.clone(),
                Box::new(|j| j.enabled = false),
                false,
            ),
            (
                "rename",
                enabled.clone(),
                Box::new(|j| j.name = "b".into()),
                false,
            ),
            (
                "new zone",
                enabled.clone(),
                Box::new(|j| j.timezone = "Europe/Berlin".into()),
                true,
            ),
            (
                "new spec",
                enabled.clone(),
                Box::new(|j| {
                    j.spec = crate::schedule::ScheduleSpec::Cron {
                        expr: "0 0 * * *".into(),
                    }
                }),
                true,
            ),
        ];
        for (what, before, change, owed) in cases {
            let mut after = before.clone();
            change(&mut after);
            after.changed_from(&before, now);
            assert_eq!(after.owed_from == Some(now), owed, "{what}");
        }
    }

    use super::*;

    fn job(id: &str, name: &str) -> ScheduleJob {
        ScheduleJob {
            owed_from: None,
            last_skip: None,
            id: id.into(),
            name: name.into(),
            spec: ScheduleSpec::Interval { ms: 60_000 },
            timezone: "UTC".into(),
            enabled: true,
            overlap: Overlap::Skip,
            catch_up: CatchUp::Latest,
            run: serde_json::json!({"goal": "g"}),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            last_fire_at: None,
            last_manual_fire_at: None,
            last_run_id: None,
            fire_count: 0,
            run_ids: vec![],
        }
    }

    fn jobs(list: &[(&str, &str)]) -> BTreeMap<String, ScheduleJob> {
        list.iter()
            .map(|(id, name)| (id.to_string(), job(id, name)))
            .collect()
    }

    #[test]
    fn jobs_are_found_by_id_then_by_name() {
        let js = jobs(&[
            ("sched_1", "nightly"),
            ("sched_2", "sched_1"),
            ("sched_3", "old"),
            ("sched_4", "old"),
        ]);
        let cases: &[(&str, Result<&str, JobLookup>)] = &[
            ("sched_1", Ok("sched_1")),
            ("nightly", Ok("sched_1")),
            ("sched_2", Ok("sched_2")),
            ("Nightly", Err(JobLookup::NotFound)),
            ("", Err(JobLookup::NotFound)),
            (
                "old",
                Err(JobLookup::Ambiguous(vec![
                    "sched_3".into(),
                    "sched_4".into(),
                ])),
            ),
        ];
        for (key, want) in cases {
            let got = find_job(&js, key).map(|j| j.id.as_str());
            assert_eq!(&got, want, "{key:?}");
        }
    }

    #[test]
    fn names_are_unique_and_made_unique() {
        let js = jobs(&[("sched_1", "nightly"), ("sched_2", "default: x")]);
        assert_eq!(name_owner(&js, "nightly", None), Some("sched_1"));
        assert_eq!(name_owner(&js, "nightly", Some("sched_1")), None);
        assert_eq!(name_owner(&js, "sched_2", None), Some("sched_2"));
        assert_eq!(name_owner(&js, "weekly", None), None);
        assert_eq!(unique_name(&js, "weekly"), "weekly");
        assert_eq!(unique_name(&js, "default: x"), "default: x (2)");
        let mut js = js;
        js.insert("sched_3".into(), job("sched_3", "default: x (2)"));
        assert_eq!(unique_name(&js, "default: x"), "default: x (3)");
    }

    #[test]
    fn the_last_fire_is_of_any_kind() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(s, 0).unwrap();
        let mut j = job("sched_1", "n");
        assert_eq!(j.last_fire(), None);
        j.last_manual_fire_at = Some(t(10));
        assert_eq!(j.last_fire(), Some((t(10), true)));
        j.last_fire_at = Some(t(20));
        assert_eq!(j.last_fire(), Some((t(20), false)));
        j.last_manual_fire_at = Some(t(30));
        assert_eq!(j.last_fire(), Some((t(30), true)));
    }
}
