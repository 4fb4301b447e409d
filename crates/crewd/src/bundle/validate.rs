//! Checking a bundle before `team.import` changes anything, in stages (as ripgrep parses its
//! flags): what the bundle is, that it is whole and unchanged, its events, its files, and the
//! run they make. Each stage refuses the bundle with every diagnostic it found, or hands the
//! next what it read; the first stage that finds anything ends the check. So the stages' order
//! is the order of the answers a client sees, and a later stage relies on what an earlier one
//! checked (the run replays only from readable events of one run, say).

mod run;

use super::{checksum, FORMAT, VERSION};
use crate::artifacts::sha256_hex;
use crew_api::types::{Diagnostic, Severity};
use crew_api::ApiError;
use crew_core::ids::SafeId;
use crew_core::run::{Event, EventBody};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Diagnostics one check of a run's tasks gives at most: one per task would do, but a forged
/// run may have thousands of tasks.
pub(super) const MAX_LISTED: usize = 20;

/// Whether a field has the JSON type it must have.
type TypeCheck = fn(&Value) -> bool;

pub(super) fn diag(field: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        path: "bundle".into(),
        line: None,
        field: Some(field.to_string()),
        severity: Severity::Error,
        message: message.into(),
    }
}

pub(super) fn refuse(message: impl Into<String>, diags: Vec<Diagnostic>) -> ApiError {
    ApiError::validation(message, diags)
}

/// A stage's answer: the bundle refused with `diags` under `message`, or passed when the stage
/// found nothing.
pub(super) fn refuse_any(
    message: impl Into<String>,
    diags: Vec<Diagnostic>,
) -> Result<(), ApiError> {
    if diags.is_empty() {
        Ok(())
    } else {
        Err(refuse(message, diags))
    }
}

/// A bundle that passed every check: what import writes and replays.
#[derive(Debug)]
pub struct Validated {
    pub run_id: SafeId,
    pub events: Vec<Event>,
    /// `(name, content)`.
    pub files: Vec<(String, String)>,
}

/// Check a bundle completely without touching anything. Errors: -32602 when `bundle` is not an
/// object, else 1003 with diagnostics naming the fields.
pub fn validate(bundle: &Value) -> Result<Validated, ApiError> {
    let Some(obj) = bundle.as_object() else {
        return Err(ApiError::invalid_params(
            "bundle",
            "must be a JSON object (the `bundle` of team.export)",
        ));
    };
    // What the bundle is.
    what_it_is(obj)?;
    complete(obj)?;
    unchanged(obj)?;
    // Its events: one run's history.
    let events = read_events(obj)?;
    let run_id = created_run(&events)?;
    one_history(&events, &run_id)?;
    // Its files.
    let files = read_files(obj)?;
    // The run they make, as crew makes one.
    let run = run::finished_run(&events)?;
    run::nothing_in_flight(&run)?;
    run::no_options(&events)?;
    run::absolute_cwd(&run)?;
    refuse_any(
        "the bundle's run has tasks named like crew's own files",
        run::task_id_diags(&run),
    )?;
    refuse_any(
        "the bundle's worktree run names what crew never records",
        run::workspace_diags(&run),
    )?;
    refuse_any(
        "the bundle contradicts itself",
        run::contradictions(obj, &run, &files),
    )?;
    Ok(Validated {
        run_id,
        events,
        files: files.files,
    })
}

// ---------------------------------------------------------------------------------------------
// What the bundle is.

/// A crew run bundle, of the version this daemon reads.
fn what_it_is(obj: &Map<String, Value>) -> Result<(), ApiError> {
    let mut diags = Vec::new();
    match obj.get("format") {
        Some(Value::String(f)) if f == FORMAT => {}
        Some(other) => diags.push(diag("format", format!("is {other}, expected \"{FORMAT}\""))),
        None => diags.push(diag(
            "format",
            format!("is missing (expected \"{FORMAT}\")"),
        )),
    }
    match obj.get("version") {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(other) => diags.push(diag(
            "version",
            format!("{other} is not supported; this daemon reads version {VERSION}"),
        )),
        None => diags.push(diag("version", "is missing")),
    }
    let what = if diags.iter().any(|d| d.field.as_deref() == Some("format")) {
        "this is not a crew run bundle".to_string()
    } else {
        format!("unsupported bundle version (this daemon reads version {VERSION})")
    };
    refuse_any(what, diags)
}

/// Complete: every field there, of its JSON type.
fn complete(obj: &Map<String, Value>) -> Result<(), ApiError> {
    let shape: [(&str, TypeCheck, &str); 5] = [
        ("exportedAt", Value::is_string, "a string"),
        ("run", Value::is_object, "an object"),
        ("events", Value::is_array, "an array"),
        ("artifacts", Value::is_array, "an array"),
        ("checksum", Value::is_string, "a string"),
    ];
    let mut diags = Vec::new();
    for (field, ok, what) in shape {
        match obj.get(field) {
            Some(v) if ok(v) => {}
            Some(_) => diags.push(diag(field, format!("must be {what}"))),
            None => diags.push(diag(field, "is missing")),
        }
    }
    refuse_any("the bundle is incomplete (truncated?)", diags)
}

/// Unchanged since export: the content hashes to its checksum.
fn unchanged(obj: &Map<String, Value>) -> Result<(), ApiError> {
    let want = obj.get("checksum").and_then(Value::as_str).unwrap_or("");
    let got = checksum(obj);
    if want != got {
        return Err(refuse(
            "checksum mismatch: the bundle was changed or truncated after it was exported",
            vec![diag(
                "checksum",
                format!("is {want}, but the content hashes to {got}"),
            )],
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Its events.

/// The events, at least one, each readable as an event.
fn read_events(obj: &Map<String, Value>) -> Result<Vec<Event>, ApiError> {
    let raw_events = obj
        .get("events")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if raw_events.is_empty() {
        return Err(refuse(
            "the bundle has no events",
            vec![diag("events", "is empty")],
        ));
    }
    let mut events = Vec::with_capacity(raw_events.len());
    let mut diags = Vec::new();
    for (i, v) in raw_events.into_iter().enumerate() {
        match serde_json::from_value::<Event>(v) {
            Ok(ev) => events.push(ev),
            Err(e) => diags.push(diag(&format!("events[{i}]"), e.to_string())),
        }
    }
    refuse_any("some events cannot be read", diags)?;
    Ok(events)
}

/// The id of the run the first event creates (`run.created`, runSeq 1, a valid id).
fn created_run(events: &[Event]) -> Result<SafeId, ApiError> {
    let id = match events.first() {
        Some(Event {
            run_id: Some(id),
            body: EventBody::RunCreated(_),
            run_seq: 1,
            ..
        }) => SafeId::new(id.as_str()).ok(),
        _ => None,
    };
    id.ok_or_else(|| {
        refuse(
            "the bundle does not start with its run's creation",
            vec![diag(
                "events[0]",
                "must be the run.created event (runSeq 1) of a run with a valid id",
            )],
        )
    })
}

/// Every event is the run's, in its place (runSeq 1, 2, …; a run is created once and never
/// forgotten in its own history), and names a task id crew makes.
fn one_history(events: &[Event], run_id: &SafeId) -> Result<(), ApiError> {
    let mut diags = Vec::new();
    for (i, ev) in events.iter().enumerate() {
        let field = format!("events[{i}]");
        if ev.run_id.as_deref() != Some(run_id.as_str()) {
            diags.push(diag(&field, format!("does not belong to run {run_id}")));
        } else if ev.run_seq != i as u64 + 1 {
            diags.push(diag(
                &field,
                format!(
                    "has runSeq {}, expected {} (events are missing or out of order)",
                    ev.run_seq,
                    i + 1
                ),
            ));
        } else if i > 0
            && matches!(
                ev.body,
                EventBody::RunCreated(_) | EventBody::RunForgotten {}
            )
        {
            diags.push(diag(
                &field,
                format!("{} cannot appear here", ev.body.type_name()),
            ));
        }
        if let Some(t) = &ev.task_id {
            if !crew_core::ids::is_safe_id(t) {
                diags.push(diag(&format!("{field}.taskId"), "is not a valid task id"));
            } else if !crew_core::ids::reserved::task_id_allowed_in_import(t) {
                diags.push(diag(
                    &format!("{field}.taskId"),
                    "is in crew's reserved scheme (`_…`) but not a task id crew makes",
                ));
            }
        }
    }
    refuse_any("the events do not form one run's history", diags)
}

// ---------------------------------------------------------------------------------------------
// Its files.

/// The bundle's files as it carries them.
pub(super) struct Files {
    /// `(name, content)`, in the bundle's order.
    pub(super) files: Vec<(String, String)>,
    /// Each file's sha256, by name.
    pub(super) digests: BTreeMap<String, String>,
}

/// The files, each under a safe name of its own and whole (its content matches its sha256 and
/// its byte count).
fn read_files(obj: &Map<String, Value>) -> Result<Files, ApiError> {
    let raw_files = obj
        .get("artifacts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut files = Vec::with_capacity(raw_files.len());
    let mut names = BTreeSet::new();
    let mut digests = BTreeMap::new();
    let mut diags = Vec::new();
    for (i, a) in raw_files.iter().enumerate() {
        let field = format!("artifacts[{i}]");
        let name = a.get("name").and_then(Value::as_str).unwrap_or("");
        let content = a.get("content").and_then(Value::as_str);
        let sha = a.get("sha256").and_then(Value::as_str);
        let bytes = a.get("bytes").and_then(Value::as_u64);
        if !crew_core::ids::is_safe_artifact_name(name) {
            diags.push(diag(
                &format!("{field}.name"),
                "must be a relative artifact name like results/01_explore.txt",
            ));
            continue;
        }
        if !names.insert(name.to_string()) {
            diags.push(diag(
                &format!("{field}.name"),
                format!("{name} is repeated"),
            ));
            continue;
        }
        let (Some(content), Some(sha), Some(bytes)) = (content, sha, bytes) else {
            diags.push(diag(
                &field,
                "needs content (string), sha256 (string) and bytes (number)",
            ));
            continue;
        };
        let actual = sha256_hex(content.as_bytes());
        if actual != sha || content.len() as u64 != bytes {
            diags.push(diag(
                &format!("{field}.content"),
                format!("{name}: content does not match its sha256/bytes"),
            ));
            continue;
        }
        digests.insert(name.to_string(), actual);
        files.push((name.to_string(), content.to_string()));
    }
    refuse_any("some artifacts are damaged", diags)?;
    Ok(Files { files, digests })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the bundle is comes from its format before its version: with the format wrong or
    /// missing it is no bundle at all, whatever its version says.
    #[test]
    fn a_bundle_is_named_by_its_format_before_its_version() {
        let unsupported = "unsupported bundle version (this daemon reads version 1)";
        let not_a_bundle = "this is not a crew run bundle";
        let table = [
            (json!({"format": FORMAT, "version": VERSION}), None),
            (
                json!({"format": FORMAT, "version": 2}),
                Some((unsupported, vec!["version"])),
            ),
            (
                json!({"format": FORMAT}),
                Some((unsupported, vec!["version"])),
            ),
            (
                json!({"format": "zip", "version": 2}),
                Some((not_a_bundle, vec!["format", "version"])),
            ),
            (
                json!({"version": VERSION}),
                Some((not_a_bundle, vec!["format"])),
            ),
        ];
        for (obj, want) in table {
            let got = what_it_is(obj.as_object().unwrap()).err().map(|e| {
                let data = e.data.unwrap_or_default();
                let fields: Vec<String> = data["diagnostics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d["field"].as_str().map(str::to_string))
                    .collect();
                (e.message, fields)
            });
            let want =
                want.map(|(m, f)| (m.to_string(), f.into_iter().map(String::from).collect()));
            assert_eq!(got, want, "{obj}");
        }
    }
}
