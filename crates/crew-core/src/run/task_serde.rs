//! `TaskState`'s JSON (snapshots): the flat object the derived form gave, field for field and
//! in the same order, although the rarely set fields live in one boxed `Rare`. Both directions go
//! through a flat struct with derived serde, so missing, repeated and unknown fields behave as
//! they always did.

use super::types::{ArtifactList, Progress, Rare, RemoteJob, TaskState, TaskStatus};
use super::workspace::TaskCommit;
use crate::plan::PlannedTask;
use crate::usage::Usage;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// A task as written: borrowed, so a snapshot copies nothing.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlatOut<'a> {
    plan: &'a Arc<PlannedTask>,
    status: TaskStatus,
    attempts: u32,
    attempts_in_window: u32,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    prior_usage: &'a Usage,
    attempt_usage: &'a Usage,
    error: &'a Option<String>,
    artifacts: &'a ArtifactList,
    pid: Option<u32>,
    pid_start: Option<u64>,
    model: &'a Option<String>,
    not_before: Option<DateTime<Utc>>,
    pending_steers: &'a [String],
    question: &'a Option<String>,
    answers: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    session: &'a Option<String>,
    reused_from: &'a Option<(String, String)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: &'a Option<TaskCommit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    feedback: &'a Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    verify_retries: u32,
    #[serde(skip_serializing_if = "is_zero")]
    fallback: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    fan_out_repair: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: &'a Option<crate::verdict::Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict_repair: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    job: &'a Option<RemoteJob>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    failed_checks: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    choice: &'a Option<super::candidates::Choice>,
    progress: &'a Progress,
}

/// A task as read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FlatIn {
    plan: Arc<PlannedTask>,
    status: TaskStatus,
    attempts: u32,
    attempts_in_window: u32,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    prior_usage: Usage,
    attempt_usage: Usage,
    error: Option<String>,
    artifacts: ArtifactList,
    pid: Option<u32>,
    pid_start: Option<u64>,
    model: Option<String>,
    not_before: Option<DateTime<Utc>>,
    pending_steers: Vec<String>,
    question: Option<String>,
    answers: Vec<String>,
    #[serde(default)]
    session: Option<String>,
    reused_from: Option<(String, String)>,
    #[serde(default)]
    commit: Option<TaskCommit>,
    #[serde(default)]
    feedback: Option<String>,
    #[serde(default)]
    verify_retries: u32,
    #[serde(default)]
    fallback: u32,
    #[serde(default)]
    fan_out_repair: Option<String>,
    #[serde(default)]
    verdict: Option<crate::verdict::Verdict>,
    #[serde(default)]
    verdict_repair: Option<String>,
    #[serde(default)]
    job: Option<RemoteJob>,
    #[serde(default)]
    failed_checks: Vec<String>,
    #[serde(default)]
    choice: Option<super::candidates::Choice>,
    progress: Progress,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rare = self.rare();
        FlatOut {
            plan: &self.plan,
            status: self.status,
            attempts: self.attempts,
            attempts_in_window: self.attempts_in_window,
            started_at: self.started_at,
            finished_at: self.finished_at,
            prior_usage: &self.prior_usage,
            attempt_usage: &rare.attempt_usage,
            error: &self.error,
            artifacts: &self.artifacts,
            pid: rare.pid,
            pid_start: rare.pid_start,
            model: &self.model,
            not_before: rare.not_before,
            pending_steers: &rare.pending_steers,
            question: &rare.question,
            answers: &rare.answers,
            session: &rare.session,
            reused_from: &rare.reused_from,
            commit: &rare.commit,
            feedback: &rare.feedback,
            verify_retries: rare.verify_retries,
            fallback: rare.fallback,
            fan_out_repair: &rare.fan_out_repair,
            verdict: &rare.verdict,
            verdict_repair: &rare.verdict_repair,
            job: &rare.job,
            failed_checks: &rare.failed_checks,
            choice: &rare.choice,
            progress: &self.progress,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = FlatIn::deserialize(d)?;
        let mut t = TaskState::new(f.plan);
        t.status = f.status;
        t.attempts = f.attempts;
        t.attempts_in_window = f.attempts_in_window;
        t.started_at = f.started_at;
        t.finished_at = f.finished_at;
        t.prior_usage = f.prior_usage;
        t.error = f.error;
        t.artifacts = f.artifacts;
        t.model = f.model;
        t.set_rare(Rare {
            attempt_usage: f.attempt_usage,
            pid: f.pid,
            pid_start: f.pid_start,
            not_before: f.not_before,
            pending_steers: f.pending_steers,
            question: f.question,
            answers: f.answers,
            session: f.session,
            reused_from: f.reused_from,
            commit: f.commit,
            feedback: f.feedback,
            verify_retries: f.verify_retries,
            fallback: f.fallback,
            fan_out_repair: f.fan_out_repair,
            verdict: f.verdict,
            verdict_repair: f.verdict_repair,
            job: f.job,
            failed_checks: f.failed_checks,
            choice: f.choice,
        });
        t.progress = f.progress;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Every field set, exactly as the derived form wrote it (field order included).
    const FULL: &str = concat!(
        r#"{"plan":{"id":"01_a","stepId":"a","role":"r","agent":"g","dependsOn":[],"#,
        r#""taskTemplate":"Do {goal}.","output":null,"reads":[],"model":null,"#,
        r#""systemPrompt":"You work.","systemPromptMode":"replace","tools":["read"],"#,
        r#""thinking":null,"writes":false},"status":"waiting","attempts":2,"#,
        r#""attemptsInWindow":1,"startedAt":"2024-05-01T10:00:00Z","#,
        r#""finishedAt":"2024-05-01T10:01:00Z","#,
        r#""priorUsage":{"input":7,"output":2,"cacheRead":3,"cacheWrite":4,"cost":0.5,"turns":1},"#,
        r#""attemptUsage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":0.0,"turns":0},"#,
        r#""error":"boom","artifacts":[{"name":"results/01_a.txt","kind":"result","bytes":5,"#,
        r#""sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}],"#,
        r#""pid":42,"pidStart":99,"model":"m/x","notBefore":"2024-05-01T10:02:00Z","#,
        r#""pendingSteers":["left"],"question":"which?","answers":["this"],"#,
        r#""reusedFrom":["team_1","01_a"],"#,
        r#""progress":{"currentTool":"bash","turns":3,"tokens":9}}"#
    );

    /// What most finished tasks look like.
    const QUIET: &str = concat!(
        r#"{"plan":{"id":"01_a","stepId":"a","role":"r","agent":"g","dependsOn":[],"#,
        r#""taskTemplate":"Do {goal}.","output":null,"reads":[],"model":null,"#,
        r#""systemPrompt":"You work.","systemPromptMode":"replace","tools":["read"],"#,
        r#""thinking":null,"writes":false},"status":"completed","attempts":1,"#,
        r#""attemptsInWindow":1,"startedAt":"2024-05-01T10:00:00Z","#,
        r#""finishedAt":"2024-05-01T10:01:00Z","#,
        r#""priorUsage":{"input":7,"output":2,"cacheRead":3,"cacheWrite":4,"cost":0.5,"turns":1},"#,
        r#""attemptUsage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":0.0,"turns":0},"#,
        r#""error":null,"artifacts":[],"pid":null,"pidStart":null,"model":null,"#,
        r#""notBefore":null,"pendingSteers":[],"question":null,"answers":[],"reusedFrom":null,"#,
        r#""progress":{"currentTool":null,"turns":3,"tokens":9}}"#
    );

    fn quiet() -> Value {
        serde_json::from_str(QUIET).unwrap()
    }

    #[test]
    fn json_round_trips_flat_and_exact() {
        for (name, text, boxed) in [("full", FULL, true), ("quiet", QUIET, false)] {
            let t: TaskState = serde_json::from_str(text).unwrap();
            assert_eq!(t.rare.is_some(), boxed, "{name}");
            assert_eq!(serde_json::to_string(&t).unwrap(), text, "{name}");
            // From a Value (keys in another order, owned strings) to the same task.
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::from_value::<TaskState>(v).unwrap(), t, "{name}");
        }
        let t: TaskState = serde_json::from_str(FULL).unwrap();
        assert_eq!(
            (
                t.not_before().is_some(),
                t.pending_steers(),
                t.question(),
                t.answers()
            ),
            (
                true,
                &["left".to_string()][..],
                Some("which?"),
                &["this".to_string()][..]
            )
        );
        assert_eq!(
            t.reused_from(),
            Some(&("team_1".to_string(), "01_a".to_string()))
        );
    }

    #[test]
    fn the_box_goes_once_its_fields_are_empty() {
        let mut t: TaskState = serde_json::from_str(QUIET).unwrap();
        t.clear_rare(|r| r.question = None);
        assert!(t.rare.is_none(), "clearing allocates nothing");
        t.edit_rare(|r| r.pending_steers.push("x".into()));
        assert_eq!(t.pending_steers(), ["x"]);
        t.clear_rare(|r| r.question = None);
        assert!(t.rare.is_some(), "still holds a steer");
        t.clear_rare(|r| r.pending_steers.clear());
        assert!(t.rare.is_none());
        assert_eq!(serde_json::to_string(&t).unwrap(), QUIET);
    }

    #[test]
    fn a_running_attempts_usage_lives_in_the_box_until_it_ends() {
        let running = QUIET.replace(
            r#""attemptUsage":{"input":0,"#,
            r#""attemptUsage":{"input":5,"#,
        );
        let mut t: TaskState = serde_json::from_str(&running).unwrap();
        assert!(t.rare.is_some());
        assert_eq!((t.attempt_usage().input, t.usage().input), (5, 12));
        assert_eq!(serde_json::to_string(&t).unwrap(), running);
        assert_eq!(t.take_attempt_usage().input, 5);
        assert!(t.rare.is_none(), "an ended attempt leaves no box");
        assert_eq!(serde_json::to_string(&t).unwrap(), QUIET);
    }

    #[test]
    fn missing_repeated_and_unknown_fields_behave_as_derived() {
        let drop = |k: &str| {
            let mut v = quiet();
            v.as_object_mut().unwrap().remove(k);
            serde_json::from_value::<TaskState>(v)
        };
        for k in [
            "plan",
            "status",
            "attempts",
            "priorUsage",
            "artifacts",
            "answers",
            "progress",
        ] {
            let e = drop(k).unwrap_err().to_string();
            assert!(e.contains(&format!("missing field `{k}`")), "{k}: {e}");
        }
        for k in [
            "error",
            "notBefore",
            "question",
            "reusedFrom",
            "pid",
            "model",
        ] {
            assert!(drop(k).is_ok(), "{k}");
        }
        let text = QUIET;
        let repeated = text.replacen("{", r#"{"question":"q","#, 1);
        let e = serde_json::from_str::<TaskState>(&repeated).unwrap_err();
        assert!(e.to_string().contains("duplicate field `question`"), "{e}");
        let unknown = text.replacen("{", r#"{"later":{"x":[1]},"#, 1);
        assert_eq!(
            serde_json::from_str::<TaskState>(&unknown).unwrap(),
            serde_json::from_str::<TaskState>(text).unwrap()
        );
    }
}
