//! Event lines for `logs <runId>`: `time  type  task  message`.

use super::time::{clock_time, human_duration_ms, parse_time};
use super::units::{cost, tokens, usage_tokens};
use super::View;
use crate::style::Tone;
use crew_api::types::{Event, Usage};
use serde_json::Value;

fn s<'a>(data: &'a Value, key: &str) -> Option<&'a str> {
    data.get(key).and_then(Value::as_str)
}

fn u(data: &Value, key: &str) -> Option<u64> {
    data.get(key).and_then(Value::as_u64)
}

pub fn usage_of(data: &Value) -> Option<Usage> {
    data.get("usage")
        .and_then(|u| serde_json::from_value(u.clone()).ok())
}

fn usage_words(data: &Value) -> Option<String> {
    let u = usage_of(data)?;
    Some(format!(
        "{} tok · {}",
        tokens(usage_tokens(&u)),
        cost(u.cost)
    ))
}

/// What an event says, from its `message` or else from the fields of its `data`.
pub fn describe(e: &Event) -> String {
    if let Some(m) = &e.message {
        if !m.is_empty() {
            return m.clone();
        }
    }
    let d = &e.data;
    let parts: Vec<String> = match e.kind.as_str() {
        "task.started" => {
            let mut v = vec![format!("attempt {}", u(d, "attempt").unwrap_or(1))];
            v.extend(s(d, "runtime").map(String::from));
            v.extend(s(d, "model").map(String::from));
            v
        }
        "task.progress" => {
            let mut v = vec![];
            v.extend(s(d, "currentTool").map(|t| format!("▸ {t}")));
            v.extend(usage_of(d).map(|u| format!("{} tok", tokens(usage_tokens(&u)))));
            v
        }
        "task.completed" => {
            let mut v = vec![];
            v.extend(usage_words(d));
            if let Some(r) = d.get("reusedFrom") {
                v.push(format!(
                    "reused {}/{}",
                    s(r, "runId").unwrap_or("?"),
                    s(r, "taskId").unwrap_or("?")
                ));
            }
            v
        }
        "task.failed" => s(d, "error").map(String::from).into_iter().collect(),
        "task.expanded" => d
            .get("tasks")
            .and_then(Value::as_array)
            .map(|ts| {
                let ids: Vec<&str> = ts
                    .iter()
                    .filter_map(|t| t.get("id").and_then(Value::as_str))
                    .collect();
                format!("added {}: {}", ids.len(), ids.join(", "))
            })
            .into_iter()
            .collect(),
        "task.retrying" => {
            let mut v = vec![];
            v.extend(s(d, "reason").or(s(d, "error")).map(String::from));
            v.extend(u(d, "delayMs").map(|ms| format!("retry in {}", human_duration_ms(ms))));
            v
        }
        "task.needs_attention" => s(d, "reason")
            .or(s(d, "error"))
            .map(String::from)
            .into_iter()
            .collect(),
        "task.waiting" => s(d, "question")
            .map(|q| format!("asks: {q}"))
            .into_iter()
            .collect(),
        "task.steered" => {
            vec![format!(
                "{} ({})",
                s(d, "message").unwrap_or(""),
                s(d, "delivered").unwrap_or("?")
            )]
        }
        "task.queued" | "task.skipped" | "run.blocked" => {
            s(d, "reason").map(String::from).into_iter().collect()
        }
        "task.cancelled" | "run.cancelled" | "plan.approved" | "plan.rejected" => {
            s(d, "reason").map(String::from).into_iter().collect()
        }
        "run.completed" => usage_words(d).into_iter().collect(),
        "run.failed" => {
            let mut v = vec![];
            v.extend(s(d, "reason").map(String::from));
            v.extend(usage_words(d));
            v
        }
        "run.resumed" => d
            .get("requeuedTaskIds")
            .and_then(Value::as_array)
            .map(|a| format!("requeued {}", a.len()))
            .into_iter()
            .collect(),
        "run.budget_warning" | "run.budget_exceeded" => {
            vec![format!(
                "{} of {} tokens",
                tokens(u(d, "used").unwrap_or(0)),
                tokens(u(d, "total").unwrap_or(0))
            )]
        }
        "plan.approval_required" => s(d, "taskId")
            .map(|t| format!("before {t}"))
            .into_iter()
            .collect(),
        "schedule.fired" => {
            vec![format!(
                "{} → {}",
                s(d, "id").unwrap_or("?"),
                s(d, "runId").unwrap_or("?")
            )]
        }
        "schedule.skipped" => vec![format!(
            "{}: {}",
            s(d, "id").unwrap_or("?"),
            s(d, "reason").unwrap_or("")
        )],
        _ => vec![],
    };
    parts.join(" · ")
}

pub fn tone_of(kind: &str) -> Tone {
    match kind {
        "task.completed" | "run.completed" | "plan.approved" => Tone::Ok,
        "task.failed" | "run.failed" | "run.budget_exceeded" => Tone::Bad,
        "task.retrying"
        | "task.needs_attention"
        | "task.waiting"
        | "run.blocked"
        | "run.budget_warning"
        | "plan.approval_required"
        | "task.cancelled"
        | "run.cancelled"
        | "plan.rejected" => Tone::Warn,
        "task.started" | "run.started" | "run.resumed" => Tone::Active,
        _ => Tone::Dim,
    }
}

/// The task column's width: crew's own ids (`_resolve-03_join-1`, `_fix-04_verify-1`) fit.
const TASK_W: usize = 18;

/// The header over a run's event lines: the columns, and the one zone their times are in.
pub fn header(view: &View) -> String {
    let zone = view.clock.zone.label(view.clock.now);
    let head = format!(
        "{:<8}  {:<22} {:<TASK_W$} details (times in {zone})",
        "time", "event", "task"
    );
    view.p(Tone::Dim, head)
}

/// One event as a line: `12:00:01  task.completed      01_explore  1.2k tok · $0.0012`.
pub fn line(view: &View, e: &Event) -> String {
    let time = parse_time(&e.time)
        .map(|t| clock_time(t, view.clock.zone))
        .unwrap_or_else(|| e.time.clone());
    let task = e.task_id.as_deref().unwrap_or("-");
    // On a terminal one line, cut; piped, a detail stays whole with its own line breaks, its
    // further lines indented (a manual conflict's recipe is commands to paste).
    let text = match view.width {
        // What the terminal leaves after the time, event and task columns (at least a few
        // words: a task id longer than its column pushes the line anyway).
        Some(w) => {
            let used = 8 + 2 + 22 + 1 + TASK_W.max(task.chars().count()) + 1;
            view.cut(&describe(e), usize::from(w).saturating_sub(used).max(20))
        }
        None => describe(e).trim_end().replace('\n', "\n    "),
    };
    let line = format!(
        "{time}  {:<22} {task:<TASK_W$} {text}",
        view.p(tone_of(&e.kind), pad(&e.kind, 22)),
    );
    line.trim_end().to_string()
}

fn pad(s: &str, w: usize) -> String {
    format!("{s:<w$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::view;
    use serde_json::json;

    pub(crate) fn ev(seq: u64, time: &str, kind: &str, task: Option<&str>, data: Value) -> Event {
        Event {
            seq,
            run_seq: seq,
            time: time.into(),
            kind: kind.into(),
            run_id: Some("r-1".into()),
            task_id: task.map(String::from),
            message: None,
            data,
        }
    }

    /// Piped, a long detail (a manual conflict's recipe) stays whole, its lines indented; on a
    /// terminal it is cut to one line that fits.
    #[test]
    fn piped_details_are_whole() {
        let recipe = format!("{}\nthen: crewctl resume r-1", "x".repeat(400));
        let mut e = ev(1, "2026-03-10T11:55:00Z", "run.blocked", None, json!({}));
        e.message = Some(recipe);
        let mut piped = view(80);
        piped.width = None;
        let whole = line(&piped, &e);
        assert!(whole.contains(&"x".repeat(400)), "{whole}");
        assert!(whole.ends_with("\n    then: crewctl resume r-1"), "{whole}");
        assert_eq!(whole.lines().count(), 2);
        let cut = line(&view(80), &e);
        assert!(!cut.contains("crewctl resume"), "{cut}");
        assert!(cut.chars().count() <= 80, "fits the terminal: {cut}");
    }

    #[test]
    fn event_lines_snapshot() {
        let usage = json!({"input": 1000, "output": 200, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0012, "turns": 1});
        let events = vec![
            ev(
                1,
                "2026-03-10T11:55:00Z",
                "run.created",
                None,
                json!({"goal": "x"}),
            ),
            ev(
                2,
                "2026-03-10T11:55:01Z",
                "task.started",
                Some("01_explore"),
                json!({"attempt": 1, "runtime": "fake", "model": null}),
            ),
            ev(
                3,
                "2026-03-10T11:55:02Z",
                "task.progress",
                Some("01_explore"),
                json!({"attempt": 1, "usage": usage, "currentTool": "read"}),
            ),
            ev(
                4,
                "2026-03-10T11:55:05Z",
                "task.retrying",
                Some("01_explore"),
                json!({"attempt": 1, "reason": "rate_limit", "delayMs": 2000}),
            ),
            ev(
                5,
                "2026-03-10T11:55:09Z",
                "task.completed",
                Some("01_explore"),
                json!({"attempt": 2, "usage": usage, "reusedFrom": {"runId": "r-0", "taskId": "01_explore"}}),
            ),
            ev(
                6,
                "2026-03-10T11:55:10Z",
                "plan.approval_required",
                None,
                json!({"taskId": "03_execute"}),
            ),
            ev(
                7,
                "2026-03-10T11:55:11Z",
                "run.blocked",
                None,
                json!({"reason": "plan approval required"}),
            ),
            ev(
                8,
                "2026-03-10T11:56:00Z",
                "task.failed",
                Some("03_execute"),
                json!({"attempt": 1, "error": "worker crashed with no output"}),
            ),
            ev(
                9,
                "2026-03-10T11:56:01Z",
                "run.failed",
                None,
                json!({"reason": "task 03_execute failed", "usage": usage}),
            ),
            Event {
                message: Some("custom message wins".into()),
                ..ev(
                    10,
                    "2026-03-10T11:56:02Z",
                    "task.waiting",
                    Some("04_x"),
                    json!({"question": "q?"}),
                )
            },
        ];
        let v = view(100);
        let mut out: Vec<String> = vec![header(&v)];
        out.extend(events.iter().map(|e| line(&v, e)));
        insta::assert_snapshot!(out.join("\n"));
    }
}
