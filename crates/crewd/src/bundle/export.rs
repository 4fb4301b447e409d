//! `team.export`: a finished run's events and files as one bundle, redacted, each file
//! described as it is in the bundle and the whole sealed with its checksum.
//!
//! The steps, in the order their errors come: the run as its journal replays it (finished
//! only), its files (bounded by [`EXPORT_MAX_BYTES`]), its events cleaned, the run view the
//! cleaned events replay to, the seal, and the size of the answer
//! ([`BUNDLE_MAX_BYTES`]).

use super::redact::{clean_artifact, clean_value, home_dir};
use super::{checksum, BUNDLE_MAX_BYTES, EXPORT_MAX_BYTES, FORMAT, VERSION};
use crate::artifacts::sha256_hex;
use crate::rpc::views;
use crate::shared::Shared;
use crew_api::ApiError;
use crew_core::run::{Event, EventBody, RunState};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Directory depth walked under a run's artifact directory.
const MAX_DEPTH: usize = 8;

/// One file of the run, as it goes into the bundle.
struct FileEntry {
    name: String,
    kind: String,
    task_id: Option<String>,
    content: String,
}

/// The files under a run's artifact directory, as `(relative name, path)`, sorted.
fn list_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new(), 0usize)];
    while let Some((d, prefix, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in rd.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            // Temp files of an interrupted atomic write; an attempt's git object directory
            // left by a failed take (binary, the repository's, refused by import).
            if name.starts_with('.') || (depth == 0 && name == "objects") {
                continue;
            }
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() && depth < MAX_DEPTH {
                stack.push((entry.path(), rel, depth + 1));
            } else if meta.is_file() && crew_core::ids::is_safe_artifact_name(&rel) {
                out.push((rel, entry.path()));
            }
        }
    }
    out.sort();
    out
}

/// Kind and task of a file the run's records do not name (a system prompt, the transcript of
/// an attempt that was stopped), from where it lives.
fn infer_owner(run: &RunState, name: &str) -> (String, Option<String>) {
    let (top, rest) = name.split_once('/').unwrap_or(("", name));
    let kind = match top {
        // The same kind `team.artifacts` gives them (`system_prompts::on_disk`).
        // `_system-` now; `system-` in bundles of older daemons (a task `system-…` would be
        // `prompts/system-….md` too: the reserved name is what tells them apart from now on).
        "prompts" if rest.starts_with("_system-") || rest.starts_with("system-") => "system-prompt",
        "prompts" => "prompt",
        "results" => "result",
        "transcripts" => "transcript",
        "shared" => "shared",
        _ => "file",
    };
    let task = if top == "shared" {
        run.tasks
            .iter()
            .find(|t| t.plan.output.as_deref() == Some(rest))
            .map(|t| t.plan.id.to_string())
    } else {
        let stem = rest.split('.').next().unwrap_or(rest);
        run.task(stem).map(|t| t.plan.id.to_string())
    };
    (kind.to_string(), task)
}

fn read_run_events(shared: &Shared, run_id: &str) -> Result<Vec<Event>, ApiError> {
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let page = shared
            .journal
            .read_run_after(run_id, after, 10_000)
            .map_err(|e| ApiError::internal(format!("cannot read the journal: {e}")))?;
        if page.is_empty() {
            return Ok(events);
        }
        for (seq, bytes) in page {
            after = seq;
            let ev = serde_json::from_slice::<Event>(&bytes).map_err(|e| {
                ApiError::internal(format!("event {seq} of run {run_id} is unreadable: {e}"))
            })?;
            events.push(ev);
        }
    }
}

fn event_artifacts(body: &mut EventBody) -> Option<&mut Vec<crew_core::run::ArtifactRef>> {
    match body {
        EventBody::TaskStarted { artifacts, .. } => Some(artifacts),
        EventBody::TaskCompleted { end, .. }
        | EventBody::TaskFailed { end }
        | EventBody::TaskRetrying { end, .. }
        | EventBody::TaskNeedsAttention { end, .. }
        | EventBody::TaskWaiting { end, .. } => Some(&mut end.artifacts),
        _ => None,
    }
}

/// Build the bundle of a finished run (reads the journal and the artifact files: call it off
/// the actor).
pub fn export(shared: &Shared, run_id: &str) -> Result<Value, ApiError> {
    export_with_home(shared, run_id, home_dir().as_deref())
}

fn export_with_home(shared: &Shared, run_id: &str, home: Option<&str>) -> Result<Value, ApiError> {
    let (events, run) = run_to_export(shared, run_id)?;
    let files = run_files(shared, run_id, &run, home)?;
    let events = cleaned_events(events, &files, home)?;
    let status = replayed_status(&events)?;
    let bundle = sealed(status, events, files);
    fits_one_answer(run_id, &bundle)?;
    Ok(bundle)
}

/// The run's events and the run they replay to: only a finished run is exported.
fn run_to_export(shared: &Shared, run_id: &str) -> Result<(Vec<Event>, RunState), ApiError> {
    let events = read_run_events(shared, run_id)?;
    let run = crew_core::run::replay_run(events.iter())
        .ok_or_else(|| ApiError::not_found("run", run_id))?;
    if !run.status.is_finished() {
        return Err(ApiError::invalid_state(format!(
            "run {run_id} is {}; only a finished run can be exported (wait for it or cancel it)",
            run.status.as_str()
        )));
    }
    Ok((events, run))
}

/// Every file under the run's artifact directory, cleaned, with the kind and task the run's
/// records give it (or [`infer_owner`]'s). Refused past [`EXPORT_MAX_BYTES`] of files.
fn run_files(
    shared: &Shared,
    run_id: &str,
    run: &RunState,
    home: Option<&str>,
) -> Result<Vec<FileEntry>, ApiError> {
    let mut refs: BTreeMap<String, (String, String)> = BTreeMap::new();
    for t in &run.tasks {
        for a in &t.artifacts {
            refs.insert(a.name.clone(), (a.kind.to_string(), t.plan.id.to_string()));
        }
    }
    let mut files = Vec::new();
    let mut total = 0u64;
    let safe = crew_core::ids::SafeId::new(run_id)
        .map_err(|_| ApiError::invalid_params("runId", "is not a valid run id"))?;
    for (name, path) in list_files(&shared.run_dir(&safe)) {
        let bytes = std::fs::read(&path)
            .map_err(|e| ApiError::internal(format!("cannot read artifact {name}: {e}")))?;
        total += bytes.len() as u64;
        if total > EXPORT_MAX_BYTES {
            return Err(ApiError::limit(format!(
                "run {run_id} has more than {} MiB of artifacts; too big to export",
                EXPORT_MAX_BYTES >> 20
            )));
        }
        let (kind, task_id) = match refs.get(&name) {
            Some((k, t)) => (k.clone(), Some(t.clone())),
            None => infer_owner(run, &name),
        };
        let content = clean_artifact(&name, &bytes, home);
        files.push(FileEntry {
            name,
            kind,
            task_id,
            content,
        });
    }
    Ok(files)
}

/// The events as the bundle carries them: redacted and home-shortened, their artifact
/// references describing `files` as they are in the bundle.
fn cleaned_events(
    events: Vec<Event>,
    files: &[FileEntry],
    home: Option<&str>,
) -> Result<Vec<Value>, ApiError> {
    let digests: BTreeMap<&str, (u64, String)> = files
        .iter()
        .map(|f| {
            (
                f.name.as_str(),
                (f.content.len() as u64, sha256_hex(f.content.as_bytes())),
            )
        })
        .collect();
    let mut out_events = Vec::with_capacity(events.len());
    for mut ev in events {
        // The references describe the files as they are in the bundle.
        if let Some(list) = event_artifacts(&mut ev.body) {
            for a in list.iter_mut() {
                if let Some((bytes, sha)) = digests.get(a.name.as_str()) {
                    a.bytes = *bytes;
                    a.sha256 = sha.as_str().into();
                }
            }
        }
        let mut v = serde_json::to_value(&ev)
            .map_err(|e| ApiError::internal(format!("cannot serialize an event: {e}")))?;
        clean_value(&mut v, home);
        out_events.push(v);
    }
    Ok(out_events)
}

/// The bundle's `run`: what the cleaned events replay to, so a bundle agrees with itself.
fn replayed_status(out_events: &[Value]) -> Result<Value, ApiError> {
    let cleaned: Vec<Event> = out_events
        .iter()
        .map(|v| serde_json::from_value(v.clone()))
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::internal(format!("a redacted event no longer parses: {e}")))?;
    let replayed = crew_core::run::replay_run(cleaned.iter())
        .ok_or_else(|| ApiError::internal("the redacted events lost the run"))?;
    serde_json::to_value(views::status(&replayed)).map_err(|e| ApiError::internal(e.to_string()))
}

/// The bundle, its checksum over everything else.
fn sealed(status: Value, out_events: Vec<Value>, files: Vec<FileEntry>) -> Value {
    let artifacts: Vec<Value> = files
        .into_iter()
        .map(|f| {
            json!({
                "name": f.name,
                "kind": f.kind,
                "taskId": f.task_id,
                "bytes": f.content.len() as u64,
                "sha256": sha256_hex(f.content.as_bytes()),
                "content": f.content,
            })
        })
        .collect();
    let mut bundle = Map::new();
    bundle.insert("format".into(), json!(FORMAT));
    bundle.insert("version".into(), json!(VERSION));
    bundle.insert("exportedAt".into(), json!(views::time(chrono::Utc::now())));
    bundle.insert("run".into(), status);
    bundle.insert("events".into(), Value::Array(out_events));
    bundle.insert("artifacts".into(), Value::Array(artifacts));
    let sum = checksum(&bundle);
    bundle.insert("checksum".into(), json!(sum));
    Value::Object(bundle)
}

/// The serialized bundle fits in one answer ([`BUNDLE_MAX_BYTES`]).
fn fits_one_answer(run_id: &str, bundle: &Value) -> Result<(), ApiError> {
    let size = serde_json::to_vec(bundle)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > BUNDLE_MAX_BYTES {
        return Err(ApiError::limit(format!(
            "the bundle of run {run_id} would be {} MiB; at most {} MiB fit in one answer",
            size >> 20,
            BUNDLE_MAX_BYTES >> 20
        )));
    }
    Ok(())
}
