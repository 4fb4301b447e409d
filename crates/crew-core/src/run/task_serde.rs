//! `TaskState`'s JSON (snapshots): the flat object the derived form gave, field for field and
//! in the same order, although the rarely set fields live in one boxed `Rare`.

use super::types::{ArtifactRef, Progress, Rare, TaskState, TaskStatus};
use crate::plan::PlannedTask;
use crate::usage::Usage;
use chrono::{DateTime, Utc};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

const FIELDS: &[&str] = &[
    "plan",
    "status",
    "attempts",
    "attemptsInWindow",
    "startedAt",
    "finishedAt",
    "priorUsage",
    "attemptUsage",
    "error",
    "artifacts",
    "pid",
    "pidStart",
    "model",
    "notBefore",
    "pendingSteers",
    "question",
    "answers",
    "reusedFrom",
    "progress",
];

impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rare = self.rare();
        let mut st = s.serialize_struct("TaskState", FIELDS.len())?;
        st.serialize_field("plan", &self.plan)?;
        st.serialize_field("status", &self.status)?;
        st.serialize_field("attempts", &self.attempts)?;
        st.serialize_field("attemptsInWindow", &self.attempts_in_window)?;
        st.serialize_field("startedAt", &self.started_at)?;
        st.serialize_field("finishedAt", &self.finished_at)?;
        st.serialize_field("priorUsage", &self.prior_usage)?;
        st.serialize_field("attemptUsage", &self.attempt_usage)?;
        st.serialize_field("error", &self.error)?;
        st.serialize_field("artifacts", &self.artifacts)?;
        st.serialize_field("pid", &self.pid)?;
        st.serialize_field("pidStart", &self.pid_start)?;
        st.serialize_field("model", &self.model)?;
        st.serialize_field("notBefore", &rare.not_before)?;
        st.serialize_field("pendingSteers", &rare.pending_steers)?;
        st.serialize_field("question", &rare.question)?;
        st.serialize_field("answers", &rare.answers)?;
        st.serialize_field("reusedFrom", &rare.reused_from)?;
        st.serialize_field("progress", &self.progress)?;
        st.end()
    }
}

enum Field {
    Plan,
    Status,
    Attempts,
    AttemptsInWindow,
    StartedAt,
    FinishedAt,
    PriorUsage,
    AttemptUsage,
    Error,
    Artifacts,
    Pid,
    PidStart,
    Model,
    NotBefore,
    PendingSteers,
    Question,
    Answers,
    ReusedFrom,
    Progress,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a task field name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Field, E> {
                Ok(match s {
                    "plan" => Field::Plan,
                    "status" => Field::Status,
                    "attempts" => Field::Attempts,
                    "attemptsInWindow" => Field::AttemptsInWindow,
                    "startedAt" => Field::StartedAt,
                    "finishedAt" => Field::FinishedAt,
                    "priorUsage" => Field::PriorUsage,
                    "attemptUsage" => Field::AttemptUsage,
                    "error" => Field::Error,
                    "artifacts" => Field::Artifacts,
                    "pid" => Field::Pid,
                    "pidStart" => Field::PidStart,
                    "model" => Field::Model,
                    "notBefore" => Field::NotBefore,
                    "pendingSteers" => Field::PendingSteers,
                    "question" => Field::Question,
                    "answers" => Field::Answers,
                    "reusedFrom" => Field::ReusedFrom,
                    "progress" => Field::Progress,
                    // As the derived form: unknown fields are skipped.
                    _ => Field::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// Store a field seen once; a repeated field is an error, as with the derived form.
fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

fn required<T, E: de::Error>(v: Option<T>, name: &'static str) -> Result<T, E> {
    v.ok_or_else(|| de::Error::missing_field(name))
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TaskState;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("struct TaskState")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TaskState, A::Error> {
                let mut plan: Option<Arc<PlannedTask>> = None;
                let mut status: Option<TaskStatus> = None;
                let mut attempts: Option<u32> = None;
                let mut attempts_in_window: Option<u32> = None;
                let mut started_at: Option<Option<DateTime<Utc>>> = None;
                let mut finished_at: Option<Option<DateTime<Utc>>> = None;
                let mut prior_usage: Option<Usage> = None;
                let mut attempt_usage: Option<Usage> = None;
                let mut error: Option<Option<String>> = None;
                let mut artifacts: Option<Vec<ArtifactRef>> = None;
                let mut pid: Option<Option<u32>> = None;
                let mut pid_start: Option<Option<u64>> = None;
                let mut model: Option<Option<String>> = None;
                let mut not_before: Option<Option<DateTime<Utc>>> = None;
                let mut pending_steers: Option<Vec<String>> = None;
                let mut question: Option<Option<String>> = None;
                let mut answers: Option<Vec<String>> = None;
                let mut reused_from: Option<Option<(String, String)>> = None;
                let mut progress: Option<Progress> = None;
                while let Some(key) = map.next_key::<Field>()? {
                    match key {
                        Field::Plan => once(&mut plan, &mut map, "plan")?,
                        Field::Status => once(&mut status, &mut map, "status")?,
                        Field::Attempts => once(&mut attempts, &mut map, "attempts")?,
                        Field::AttemptsInWindow => {
                            once(&mut attempts_in_window, &mut map, "attemptsInWindow")?
                        }
                        Field::StartedAt => once(&mut started_at, &mut map, "startedAt")?,
                        Field::FinishedAt => once(&mut finished_at, &mut map, "finishedAt")?,
                        Field::PriorUsage => once(&mut prior_usage, &mut map, "priorUsage")?,
                        Field::AttemptUsage => once(&mut attempt_usage, &mut map, "attemptUsage")?,
                        Field::Error => once(&mut error, &mut map, "error")?,
                        Field::Artifacts => once(&mut artifacts, &mut map, "artifacts")?,
                        Field::Pid => once(&mut pid, &mut map, "pid")?,
                        Field::PidStart => once(&mut pid_start, &mut map, "pidStart")?,
                        Field::Model => once(&mut model, &mut map, "model")?,
                        Field::NotBefore => once(&mut not_before, &mut map, "notBefore")?,
                        Field::PendingSteers => {
                            once(&mut pending_steers, &mut map, "pendingSteers")?
                        }
                        Field::Question => once(&mut question, &mut map, "question")?,
                        Field::Answers => once(&mut answers, &mut map, "answers")?,
                        Field::ReusedFrom => once(&mut reused_from, &mut map, "reusedFrom")?,
                        Field::Progress => once(&mut progress, &mut map, "progress")?,
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let mut t = TaskState::new(required(plan, "plan")?);
                t.status = required(status, "status")?;
                t.attempts = required(attempts, "attempts")?;
                t.attempts_in_window = required(attempts_in_window, "attemptsInWindow")?;
                // `Option` fields may be missing (None), as with the derived form.
                t.started_at = started_at.flatten();
                t.finished_at = finished_at.flatten();
                t.prior_usage = required(prior_usage, "priorUsage")?;
                t.attempt_usage = required(attempt_usage, "attemptUsage")?;
                t.error = error.flatten();
                t.artifacts = required(artifacts, "artifacts")?;
                t.pid = pid.flatten();
                t.pid_start = pid_start.flatten();
                t.model = model.flatten();
                t.set_rare(Rare {
                    not_before: not_before.flatten(),
                    pending_steers: required(pending_steers, "pendingSteers")?,
                    question: question.flatten(),
                    answers: required(answers, "answers")?,
                    reused_from: reused_from.flatten(),
                });
                t.progress = required(progress, "progress")?;
                Ok(t)
            }
        }
        d.deserialize_struct("TaskState", FIELDS, V)
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
