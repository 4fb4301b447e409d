//! `team.export` / `team.import`: a finished run as one self-checking JSON document.
//!
//! Bundle, version 1:
//!
//! ```text
//! { format: "crew-run-bundle", version: 1, exportedAt,
//!   run: <team.status result>, events: [<every event of the run, SPEC §6 shape>],
//!   artifacts: [{name, kind, taskId, bytes, sha256, content}],
//!   checksum: sha256 of the canonical JSON of everything else }
//! ```
//!
//! Secrets are redacted and the exporting daemon's `$HOME` is written `~`, in the events and in
//! every artifact; `bytes`/`sha256` (and the artifact references inside the events) describe the
//! content as it is in the bundle, so a bundle is consistent with itself. Canonical JSON = object
//! keys sorted, no whitespace, floats as 15 significant digits (so a parser that is one ulp off
//! cannot break the checksum).
//!
//! Import rebuilds the run from its events, and only then changes anything:
//! - the events are replayed through the actor with their original `time` (`Core::emit_at`), so
//!   ids, statuses, timestamps, usage and artifact lists come out as they were exported;
//! - fields that are not the run's own map like this: `seq` is the exporting daemon's journal
//!   position and is given anew by this journal (`runSeq` is the run's own and is kept);
//!   `scheduleId` is kept as a historical reference (the schedule need not exist here and gains
//!   no run); a `cwd` of `~` or `~/…` is expanded with this daemon's `$HOME`;
//! - only a finished run (completed, failed, cancelled) is exported or imported: an unfinished
//!   one would have tasks "running" with no worker behind them;
//! - the artifact files are written (synced) before the events naming them are journaled;
//! - what crew later hands to git or to an agent's command line, or joins to a path, must be
//!   what crew makes: full commit ids, a worktree run's `subdir` inside its repository, no
//!   model, level or tool name starting with `-`, no pi session of an attempt yet to come.
//!
//! Export answers the bundle (up to ~31 MiB). Import takes it inline (`bundle`, bounded by
//! `max_request_bytes`, 1 MiB by default) or as a file the daemon reads (`path`, bounded by
//! [`IMPORT_FILE_MAX_BYTES`], above anything export makes): the client and the daemon are the
//! same user on the same machine (the socket's peer check), so reading the file the client
//! names reads nothing the client could not read itself, and every bundle export makes imports
//! under the same config. `crewctl import FILE` sends the path.
//!
//! An imported run is marked (`RunSpec::imported`): its system prompts, tools, runtime name
//! and cwd are someone else's. `team.resume` and `team.retry` of it fail with 1002 and show
//! what would run (error `data`) unless called with `confirmImported: true`.

use crate::artifacts::sha256_hex;
use crate::rpc::{views, Ctx};
use crate::shared::Shared;
use crew_api::types::{Diagnostic, ImportResult, Severity};
use crew_api::ApiError;
use crew_core::run::{Event, EventBody, Pending, RunState};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "crew-run-bundle";
pub const VERSION: u64 = 1;
/// Artifact bytes one export may carry; the bundle lives in memory a few times over.
const EXPORT_MAX_BYTES: u64 = 24 << 20;
/// The serialized bundle must fit in one answer (the server's response limit is 32 MiB).
const BUNDLE_MAX_BYTES: usize = 31 << 20;
/// A bundle file `team.import` reads (`path`): above [`BUNDLE_MAX_BYTES`], so anything export
/// makes fits.
pub const IMPORT_FILE_MAX_BYTES: u64 = 40 << 20;
/// Attempts one task of an imported run may have made (far above any real run's).
const MAX_ATTEMPTS: u32 = 1 << 20;
/// Directory depth walked under a run's artifact directory.
const MAX_DEPTH: usize = 8;

// ---------------------------------------------------------------------------------------------
// Canonical JSON and the checksum.

fn canonical_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_u64() {
                out.push_str(&i.to_string());
            } else if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else {
                out.push_str(&format!("{:.14e}", n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_into(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_into(item, out);
            }
            out.push('}');
        }
    }
}

/// `a` and `b` say the same wherever both say something: fields only one side has are
/// ignored, so a bundle's `run` stays comparable when a later daemon adds a status field.
fn agrees(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.iter().all(|(k, v)| y.get(k).is_none_or(|w| agrees(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| agrees(v, w))
        }
        _ => canonical(a) == canonical(b),
    }
}

pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    canonical_into(v, &mut out);
    out
}

/// The checksum of a bundle: over every field but `checksum`.
pub fn checksum(bundle: &Map<String, Value>) -> String {
    let mut rest = bundle.clone();
    rest.remove("checksum");
    sha256_hex(canonical(&Value::Object(rest)).as_bytes())
}

// ---------------------------------------------------------------------------------------------
// Redaction and home paths.

fn home_dir() -> Option<String> {
    std::env::var("HOME")
        .ok()
        .map(|h| h.trim_end_matches('/').to_string())
        .filter(|h| !h.is_empty())
}

/// `$HOME/x` → `~/x`, only where the match ends a path component (`/home/al` is not in
/// `/home/alice`).
fn shorten_home(s: &str, home: Option<&str>) -> String {
    let Some(home) = home else {
        return s.to_string();
    };
    if !s.contains(home) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(home) {
        let after = &rest[i + home.len()..];
        let boundary = after
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')));
        out.push_str(&rest[..i]);
        out.push_str(if boundary { "~" } else { home });
        rest = after;
    }
    out.push_str(rest);
    out
}

fn expand_home(path: &str, home: Option<&str>) -> String {
    match (home, path.strip_prefix('~')) {
        (Some(h), Some(rest)) if rest.is_empty() || rest.starts_with('/') => format!("{h}{rest}"),
        _ => path.to_string(),
    }
}

fn clean_text(s: &str, home: Option<&str>) -> String {
    shorten_home(&crew_core::redact::redact_str(s), home)
}

/// Every string of a JSON value redacted and home-shortened.
fn clean_value(v: &mut Value, home: Option<&str>) {
    match v {
        Value::String(s) => {
            let c = clean_text(s, home);
            if c != *s {
                *s = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| clean_value(i, home)),
        Value::Object(map) => map.values_mut().for_each(|i| clean_value(i, home)),
        _ => {}
    }
}

/// Artifact content as it goes into a bundle: transcripts line by line (structural redaction
/// of JSON lines), anything else as text.
fn clean_artifact(name: &str, bytes: &[u8], home: Option<&str>) -> String {
    let text = String::from_utf8_lossy(bytes);
    if name.ends_with(".jsonl") {
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let (body, nl) = match line.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (line, ""),
            };
            out.push_str(&shorten_home(
                &crew_core::redact::redact_json_line(body),
                home,
            ));
            out.push_str(nl);
        }
        out
    } else {
        clean_text(&text, home)
    }
}

// ---------------------------------------------------------------------------------------------
// Export.

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
    let events = read_run_events(shared, run_id)?;
    let run = crew_core::run::replay_run(events.iter())
        .ok_or_else(|| ApiError::not_found("run", run_id))?;
    if !run.status.is_finished() {
        return Err(ApiError::invalid_state(format!(
            "run {run_id} is {}; only a finished run can be exported (wait for it or cancel it)",
            run.status.as_str()
        )));
    }

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
            None => infer_owner(&run, &name),
        };
        let content = clean_artifact(&name, &bytes, home);
        files.push(FileEntry {
            name,
            kind,
            task_id,
            content,
        });
    }
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
    // `run` is what the cleaned events replay to, so a bundle agrees with itself.
    let cleaned: Vec<Event> = out_events
        .iter()
        .map(|v| serde_json::from_value(v.clone()))
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::internal(format!("a redacted event no longer parses: {e}")))?;
    let replayed = crew_core::run::replay_run(cleaned.iter())
        .ok_or_else(|| ApiError::internal("the redacted events lost the run"))?;
    let status = serde_json::to_value(views::status(&replayed))
        .map_err(|e| ApiError::internal(e.to_string()))?;

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
    let bundle = Value::Object(bundle);
    let size = serde_json::to_vec(&bundle)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > BUNDLE_MAX_BYTES {
        return Err(ApiError::limit(format!(
            "the bundle of run {run_id} would be {} MiB; at most {} MiB fit in one answer",
            size >> 20,
            BUNDLE_MAX_BYTES >> 20
        )));
    }
    Ok(bundle)
}

// ---------------------------------------------------------------------------------------------
// Import.

/// Whether a field has the JSON type it must have.
type TypeCheck = fn(&Value) -> bool;

fn diag(field: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        path: "bundle".into(),
        line: None,
        field: Some(field.to_string()),
        severity: Severity::Error,
        message: message.into(),
    }
}

fn refuse(message: impl Into<String>, diags: Vec<Diagnostic>) -> ApiError {
    ApiError::validation(message, diags)
}

/// A bundle that passed every check: what import writes and replays.
#[derive(Debug)]
pub struct Validated {
    pub run_id: crew_core::ids::SafeId,
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

    // What it is.
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
    if !diags.is_empty() {
        let what = if diags.iter().any(|d| d.field.as_deref() == Some("format")) {
            "this is not a crew run bundle".to_string()
        } else {
            format!("unsupported bundle version (this daemon reads version {VERSION})")
        };
        return Err(refuse(what, diags));
    }

    // Complete.
    let shape: [(&str, TypeCheck, &str); 5] = [
        ("exportedAt", Value::is_string, "a string"),
        ("run", Value::is_object, "an object"),
        ("events", Value::is_array, "an array"),
        ("artifacts", Value::is_array, "an array"),
        ("checksum", Value::is_string, "a string"),
    ];
    for (field, ok, what) in shape {
        match obj.get(field) {
            Some(v) if ok(v) => {}
            Some(_) => diags.push(diag(field, format!("must be {what}"))),
            None => diags.push(diag(field, "is missing")),
        }
    }
    if !diags.is_empty() {
        return Err(refuse("the bundle is incomplete (truncated?)", diags));
    }

    // Unchanged since export.
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

    // Coherent.
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
    for (i, v) in raw_events.into_iter().enumerate() {
        match serde_json::from_value::<Event>(v) {
            Ok(ev) => events.push(ev),
            Err(e) => diags.push(diag(&format!("events[{i}]"), e.to_string())),
        }
    }
    if !diags.is_empty() {
        return Err(refuse("some events cannot be read", diags));
    }
    let run_id = match events.first() {
        Some(Event {
            run_id: Some(id),
            body: EventBody::RunCreated(_),
            run_seq: 1,
            ..
        }) => match crew_core::ids::SafeId::new(id.as_str()) {
            Ok(id) => id,
            Err(_) => {
                return Err(refuse(
                    "the bundle does not start with its run's creation",
                    vec![diag(
                        "events[0]",
                        "must be the run.created event (runSeq 1) of a run with a valid id",
                    )],
                ))
            }
        },
        _ => {
            return Err(refuse(
                "the bundle does not start with its run's creation",
                vec![diag(
                    "events[0]",
                    "must be the run.created event (runSeq 1) of a run with a valid id",
                )],
            ))
        }
    };
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
    if !diags.is_empty() {
        return Err(refuse("the events do not form one run's history", diags));
    }

    let raw_files = obj
        .get("artifacts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut files = Vec::with_capacity(raw_files.len());
    let mut names = BTreeSet::new();
    let mut digests = BTreeMap::new();
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
    if !diags.is_empty() {
        return Err(refuse("some artifacts are damaged", diags));
    }

    let Some(run) = crew_core::run::replay_run(events.iter()) else {
        return Err(refuse(
            "the events do not make a run",
            vec![diag("events", "replaying them gives no run")],
        ));
    };
    if !run.status.is_finished() {
        return Err(refuse(
            format!(
                "the bundle's run is {} (truncated?); only a finished run can be imported",
                run.status.as_str()
            ),
            vec![diag(
                "events",
                format!(
                    "end with the run {}, not completed, failed or cancelled",
                    run.status.as_str()
                ),
            )],
        ));
    }
    // A run ends only once nothing of it runs: an attempt still in flight (a running task,
    // with a worker's pid or not, or a job on a cluster) in a finished run was never exported
    // by crew. Imported and resumed, it would have the next restart's recovery follow that
    // job, cancel it or take files from its staging directory, or kill that process group:
    // crewd acting on a job or a process it never started. (A waiting task is no attempt in
    // flight: its attempt ended with its question, and a failed run may keep one.)
    let in_flight: Vec<Diagnostic> = run
        .tasks
        .iter()
        .filter_map(|t| {
            use crew_core::run::TaskStatus;
            let what = if t.rare().job.is_some() {
                "a job on a cluster".to_string()
            } else if t.status == TaskStatus::Running {
                format!("running (attempt {})", t.attempts)
            } else {
                return None;
            };
            Some(diag(
                "events",
                format!(
                    "task {} has an attempt in flight in a finished run: {what}",
                    t.plan.id
                ),
            ))
        })
        // One per task would do, but a forged run may have thousands of tasks.
        .take(20)
        .collect();
    if !in_flight.is_empty() {
        return Err(refuse(
            "the bundle's run has attempts in flight; crew exports finished runs only",
            in_flight,
        ));
    }
    if let Some(Event {
        body: EventBody::RunCreated(spec),
        ..
    }) = events.first()
    {
        let mut found = Vec::new();
        option_like(
            &serde_json::to_value(spec).unwrap_or(Value::Null),
            "spec",
            &mut found,
        );
        if !found.is_empty() {
            return Err(refuse(
                "the bundle's run would put options on an agent's command line",
                found
                    .into_iter()
                    .take(20)
                    .map(|f| diag("events[0]", format!("{f} starts with `-`")))
                    .collect(),
            ));
        }
    }
    // The agent's cwd (writable in its box in shared mode) as the confirmation shows it: a
    // relative one would be relative to wherever crewd runs. `team.run` takes absolute ones.
    let cwd = &run.spec.cwd;
    if !(cwd.starts_with('/') || cwd == "~" || cwd.starts_with("~/")) {
        return Err(refuse(
            "the bundle's run has a relative cwd",
            vec![diag("events[0]", "the run's cwd is not an absolute path")],
        ));
    }
    let ws = workspace_diags(&run);
    if !ws.is_empty() {
        return Err(refuse(
            "the bundle's worktree run names what crew never records",
            ws,
        ));
    }
    // The next attempt is numbered one past a task's last (`t.attempts + 1`): a forged
    // `u32::MAX` would overflow it, or wrap to an attempt 0 whose session file the bundle
    // placed. No task makes anywhere near this many attempts.
    for t in run
        .tasks
        .iter()
        .filter(|t| t.attempts > MAX_ATTEMPTS)
        .take(20)
    {
        diags.push(diag(
            "events",
            format!(
                "task {} has made {} attempts; a run crew exports has at most {MAX_ATTEMPTS}",
                t.plan.id, t.attempts
            ),
        ));
    }
    // A selector's choice names the candidate whose result its dependents read
    // (`results/<candidate>.txt`, `actor::workers::sources`): a task of the run, never a path.
    let astray = run
        .tasks
        .iter()
        .filter_map(|t| Some((t, t.choice()?)))
        .filter(|(_, ch)| run.task(&ch.candidate).is_none());
    for (t, ch) in astray.take(20) {
        diags.push(diag(
            "events",
            format!(
                "task {} chose {:?}, which is no task of the run",
                t.plan.id,
                crew_core::text::bound(ch.candidate.clone(), 200)
            ),
        ));
    }
    // pi continues the session file crew names for an attempt (`executor::session`): one
    // the bundle placed for an attempt yet to come would be the next attempt's conversation,
    // which no confirmation shows.
    for (name, _) in &files {
        // An attempt's own object directory (`executor::sandbox::own_objects`) is no artifact:
        // a restart takes what one holds into the run's repository.
        if name.starts_with("objects/") {
            diags.push(diag(
                "artifacts",
                format!("{name} is in an attempt's object directory, which no export holds"),
            ));
        }
        if let Some((task, n)) = session_attempt(name) {
            if run.task(task).is_none_or(|t| n > t.attempts) {
                diags.push(diag(
                    "artifacts",
                    format!("{name} is the session of an attempt task {task} has not made"),
                ));
            }
        }
    }
    for t in &run.tasks {
        for a in &t.artifacts {
            if digests.get(&a.name).is_some_and(|d| a.sha256 != *d) {
                diags.push(diag(
                    "artifacts",
                    format!("{} differs from the file task {} names", a.name, t.plan.id),
                ));
            }
        }
    }
    let status = serde_json::to_value(views::status(&run)).unwrap_or(Value::Null);
    if !obj.get("run").is_some_and(|r| agrees(r, &status)) {
        diags.push(diag("run", "does not match what the events replay to"));
    }
    if !diags.is_empty() {
        return Err(refuse("the bundle contradicts itself", diags));
    }
    Ok(Validated {
        run_id,
        events,
        files,
    })
}

/// `(task, attempt)` of a session file crew names for an attempt:
/// `sessions/<task>/attempt-<n>.<ext>`.
fn session_attempt(name: &str) -> Option<(&str, u32)> {
    let (task, file) = name.strip_prefix("sessions/")?.split_once('/')?;
    let n = file.strip_prefix("attempt-")?.split('.').next()?;
    Some((task, n.parse().ok()?))
}

/// Fields of a run's plan (its tasks, and the roles of the tasks crew adds: fix, resolve,
/// fan-out, candidates) whose values crew puts on an agent CLI's command line after an option
/// (`--model X`, `--fallback-model X`, pi's `--thinking X` and `--tools X`, opencode's
/// `--variant X`). Gemini CLI and opencode read `--model --yolo` as two options.
const ARGV_VALUES: &[&str] = &["model", "thinking", "effort", "fallbackModels", "tools"];

/// Where, under `at`, a value of an [`ARGV_VALUES`] field starts with `-` (no model, level
/// or tool name does).
fn option_like(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, item) in map {
                let here = format!("{at}.{k}");
                if ARGV_VALUES.contains(&k.as_str()) {
                    let strings: Vec<&str> = match item {
                        Value::String(s) => vec![s],
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if strings.iter().any(|s| s.starts_with('-')) {
                        out.push(here.clone());
                    }
                }
                option_like(item, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                option_like(item, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// A worktree run's values that crew hands to git or joins to a path, checked as crew makes
/// them: commit ids are full object ids (a `--output=FILE` "commit" would be an option of
/// `git diff`, which `team.diff` runs with no confirmation, and writes that file), the run's
/// cwd in its repository is a relative path inside it (an absolute or `..` one would put the
/// agent's cwd, writable in its box, outside its worktree, where the confirmation does not
/// show), and the repository is an absolute path.
fn workspace_diags(run: &RunState) -> Vec<Diagnostic> {
    let Some(ws) = &run.spec.workspace else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut bad = |what: String, why: &str| {
        // A forged run may have thousands of tasks.
        if out.len() < 20 {
            out.push(diag("events", format!("{what} {why}")));
        }
    };
    let oid = "is not a full commit id";
    if !(ws.repo.starts_with('/') || ws.repo == "~" || ws.repo.starts_with("~/")) {
        bad("the workspace's repo".into(), "is not an absolute path");
    }
    let inside = Path::new(&ws.subdir)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        bad(
            "the workspace's subdir".into(),
            "is not a relative path inside the repository",
        );
    }
    if !crew_git::is_oid(&ws.base) {
        bad("the workspace's base".into(), oid);
    }
    if ws.head.as_deref().is_some_and(|h| !crew_git::is_oid(h)) {
        bad("the workspace's head".into(), oid);
    }
    for t in &run.tasks {
        if let Some(c) = t.commit() {
            let id = &t.plan.id;
            if !crew_git::is_oid(&c.commit) {
                bad(format!("task {id}'s result commit"), oid);
            }
            // A reused result's start may be empty; never anything but a commit id.
            if !c.start.is_empty() && !crew_git::is_oid(&c.start) {
                bad(format!("task {id}'s start commit"), oid);
            }
        }
    }
    if let Some(i) = &run.integration {
        if !crew_git::is_oid(&i.commit) {
            bad("the run's integrated commit".into(), oid);
        }
    }
    out
}

fn write_files(dir: &Path, files: &[(String, String)]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut dirs = BTreeSet::new();
    dirs.insert(dir.to_path_buf());
    for (name, content) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
            dirs.insert(parent.to_path_buf());
        }
        let mut f = std::fs::File::create(&path)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
    }
    for d in dirs {
        std::fs::File::open(&d)?.sync_all()?;
    }
    Ok(())
}

/// Put the artifacts in place: written under a temporary name, then renamed, so a run
/// directory is either complete or absent.
fn place_files(
    shared: &Shared,
    run_id: &crew_core::ids::SafeId,
    files: &[(String, String)],
) -> Result<(), ApiError> {
    let runs = shared.runs_dir();
    let target = shared.run_dir(run_id);
    if target.exists() {
        return Err(ApiError::invalid_state(format!(
            "the artifact directory of run {run_id} already exists"
        )));
    }
    let staging = runs.join(format!(".import-{run_id}-{:016x}", rand::random::<u64>()));
    let staged = write_files(&staging, files).and_then(|()| {
        std::fs::rename(&staging, &target)?;
        std::fs::File::open(&runs)?.sync_all()
    });
    if let Err(e) = staged {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(if target.exists() {
            ApiError::invalid_state(format!(
                "the artifact directory of run {run_id} already exists"
            ))
        } else {
            ApiError::internal(format!("cannot write the artifacts of run {run_id}: {e}"))
        });
    }
    Ok(())
}

/// The bundle a `team.import` names: inline, or read from the file at `path`.
fn read_bundle(p: crew_api::types::ImportParams) -> Result<Value, ApiError> {
    let path = match (p.bundle, p.path) {
        (Some(b), None) => return Ok(b),
        (None, Some(path)) => path,
        _ => {
            return Err(ApiError::invalid_params(
                "bundle",
                "give exactly one of `bundle` (the bundle) and `path` (a bundle file)",
            ))
        }
    };
    let bad = |why: String| ApiError::invalid_params("path", why);
    if !Path::new(&path).is_absolute() {
        return Err(bad("must be an absolute path".into()));
    }
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Judged by the opened file: a FIFO must not block the open, a device is not a bundle.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| bad(format!("cannot open {path}: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| bad(format!("cannot read {path}: {e}")))?;
    if !meta.is_file() {
        return Err(bad(format!("{path} is not a regular file")));
    }
    if meta.len() > IMPORT_FILE_MAX_BYTES {
        return Err(bad(format!(
            "{path} is {} bytes; a bundle file may have at most {IMPORT_FILE_MAX_BYTES}",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(IMPORT_FILE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("cannot read {path}: {e}")))?;
    if bytes.len() as u64 > IMPORT_FILE_MAX_BYTES {
        return Err(bad(format!(
            "{path} grew beyond {IMPORT_FILE_MAX_BYTES} bytes"
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("{path} is not a JSON bundle: {e}")))
}

/// What resuming or retrying an imported run would execute, for the user to confirm: every
/// task that can run once the run runs again — the tasks a retry names (and their dependents,
/// which a retry may bring back, completed ones too `withDependents`), and every task not
/// completed (a queued one starts as soon as the run runs, a waiting one once answered, a
/// skipped one comes back with what it waited for) — and every command.
fn imported_preview(run: &RunState, only: Option<&[String]>) -> Value {
    let mut named: BTreeSet<&str> = only
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    // Their dependents, transitively (a plan is ordered: dependencies come first).
    for t in &run.tasks {
        if t.plan.depends_on.iter().any(|d| named.contains(d.as_str())) {
            named.insert(&t.plan.id);
        }
    }
    let tasks: Vec<Value> = run
        .tasks
        .iter()
        .filter(|t| {
            named.contains(t.plan.id.as_str()) || t.status != crew_core::run::TaskStatus::Completed
        })
        .map(|t| {
            let prompt: &str = &t.plan.system_prompt;
            let head: String = prompt.chars().take(400).collect();
            json!({
                "id": t.plan.id,
                "agent": t.plan.agent,
                // A candidate may run on another runtime than the run's (issue 36).
                "runtime": crew_core::run::candidates::runtime_of(&t.plan)
                    .unwrap_or(&run.spec.runtime),
                "model": t.plan.model,
                "tools": t.plan.tools.as_ref(),
                "thinking": t.plan.thinking,
                "systemPromptBytes": prompt.len(),
                "systemPromptSha256": sha256_hex(prompt.as_bytes()),
                "systemPrompt": head,
                "task": t.plan.task_template.chars().take(400).collect::<String>(),
                // Commands the bundle would have this daemon run besides the agent (issues
                // 17, 29): the pre-step script with its arguments, and verification commands.
                "preStep": t.plan.checks.pre_step.as_ref().map(|p| p.display()),
                "verifyCommands": t.plan.checks.verify.as_ref().map(|v| &v.commands),
            })
        })
        .collect();
    let mut commands: Vec<String> = run
        .tasks
        .iter()
        .filter(|t| tasks.iter().any(|v| v["id"].as_str() == Some(&*t.plan.id)))
        .flat_map(|t| task_commands(&t.plan))
        .collect();
    // The project's per-task checks, frozen in the run (`executor::checks::verify_commands`):
    // after every editing task without checks of its own, the tasks crew adds (fix, fan-out,
    // resolve) included.
    commands.extend(
        run.spec
            .task_verify_commands
            .iter()
            .map(|c| format!("every editing task without checks of its own verify: {c}")),
    );
    // Roles crew may add tasks of once the run runs (a judge's fixer, a fan-out's roles, a
    // candidates' judge, the conflict resolver): their agents, tools and prompts are the
    // bundle's too, and an editing one writes the workspace.
    let mut templates: Vec<&crew_core::fanout::RoleTemplate> = Vec::new();
    templates.extend(
        run.spec
            .workspace
            .as_ref()
            .and_then(|w| w.resolver.as_deref()),
    );
    for t in &run.tasks {
        templates.extend(t.plan.judging.fix.as_ref().map(|f| &f.fixer));
        if let Some(e) = &t.plan.expands {
            templates.extend(e.roles.iter());
            templates.extend(e.candidates.as_ref().and_then(|c| c.judge.as_deref()));
        }
        if let Some(crew_core::run::candidates::Candidacy::Asked { judge, .. }) =
            t.plan.candidates.as_deref()
        {
            templates.extend(judge.as_deref());
        }
    }
    let added: Vec<Value> = templates
        .into_iter()
        .map(|r| {
            let prompt: &str = &r.system_prompt;
            json!({
                "role": r.role,
                "agent": r.agent,
                "model": r.model,
                "tools": r.tools.as_ref(),
                "systemPromptBytes": prompt.len(),
                "systemPromptSha256": sha256_hex(prompt.as_bytes()),
                "systemPrompt": prompt.chars().take(400).collect::<String>(),
            })
        })
        .collect();
    json!({
        "imported": true,
        "commands": commands,
        "addedRoles": added,
        "runtime": run.spec.runtime,
        "cwd": run.spec.cwd,
        // Worktree mode: the repository git runs in, whose checkout the agents see.
        "repo": run.spec.workspace.as_ref().map(|w| &w.repo),
        "model": run.spec.model,
        "taskVerifyCommands": run.spec.task_verify_commands,
        "goal": run.spec.goal.chars().take(400).collect::<String>(),
        "tasks": tasks,
    })
}

/// Every command line a task runs besides its agent: `pre-step: …` and `verify: …`, in the
/// order they run.
fn task_commands(plan: &crew_core::plan::PlannedTask) -> Vec<String> {
    let id = &plan.id;
    let pre = plan
        .checks
        .pre_step
        .iter()
        .map(|p| format!("{id} pre-step: {}", p.display()));
    let verify = plan
        .checks
        .verify
        .iter()
        .flat_map(|v| v.commands.iter())
        .map(|c| format!("{id} verify: {c}"));
    pre.chain(verify).collect()
}

/// `team.resume`/`team.retry` of an imported run: refused (1002, `data` = what would run)
/// unless `confirmed`. The run's prompts, tools, runtime and cwd came from a bundle.
pub async fn confirm_imported(
    ctx: &Ctx,
    run_id: &str,
    confirmed: Option<bool>,
    only: Option<Vec<String>>,
) -> Result<(), ApiError> {
    if confirmed == Some(true) {
        return Ok(());
    }
    let preview = crate::rpc::team::with_run(ctx, run_id, move |run| {
        run.spec
            .imported
            .then(|| imported_preview(run, only.as_deref()))
    })
    .await?;
    let Some(preview) = preview else {
        return Ok(());
    };
    let agents: BTreeSet<&str> = preview["tasks"]
        .as_array()
        .into_iter()
        .chain(preview["addedRoles"].as_array())
        .flatten()
        .filter_map(|t| t["agent"].as_str())
        .collect();
    let mut runtimes: BTreeSet<&str> = preview["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["runtime"].as_str())
        .collect();
    runtimes.insert(preview["runtime"].as_str().unwrap_or(""));
    // Every command is named in the message itself, not only in `data`: a client that shows
    // the message shows what would run.
    let commands: Vec<&str> = preview["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let commands = if commands.is_empty() {
        "no command besides the agents".to_string()
    } else {
        // Bounded like any message; `data.commands` has each whole.
        crew_core::text::bound(
            format!("these commands: {}", commands.join("; ")),
            crew_core::text::MAX_REASON_CHARS,
        )
    };
    let repo = preview["repo"]
        .as_str()
        .map(|r| format!(" (worktrees of the repository {r})"))
        .unwrap_or_default();
    Err(ApiError::invalid_state(format!(
        "run {run_id} was imported from a bundle: it would run that bundle's system prompts \
         and tools (agents: {}) with runtime `{}` in {}{repo}, and {commands}; see this \
         error's data for exactly what, and call again with confirmImported: true to run it",
        agents.into_iter().collect::<Vec<_>>().join(", "),
        runtimes.into_iter().collect::<Vec<_>>().join("`, `"),
        preview["cwd"].as_str().unwrap_or("")
    ))
    .with_data(preview))
}

pub async fn import(
    ctx: &Ctx,
    params: crew_api::types::ImportParams,
) -> Result<ImportResult, ApiError> {
    let mut valid = crate::rpc::off_actor(move || validate(&read_bundle(params)?)).await??;
    let run_id = valid.run_id.clone();
    let id = run_id.clone();
    let exists = ctx
        .actor
        .call(move |core| Ok(core.state.summaries.contains_key(id.as_str())))
        .await?;
    if exists {
        return Err(ApiError::invalid_state(format!(
            "run {run_id} already exists; forget it first to import it again"
        )));
    }
    let home = home_dir();
    if let Some(Event {
        body: EventBody::RunCreated(spec),
        ..
    }) = valid.events.first_mut()
    {
        spec.cwd = expand_home(&spec.cwd, home.as_deref());
        // Export wrote a worktree run's repository `~/…` as it wrote the cwd.
        if let Some(ws) = spec.workspace.as_mut() {
            ws.repo = expand_home(&ws.repo, home.as_deref());
        }
        spec.imported = true;
    }

    let files = std::mem::take(&mut valid.files);
    {
        let shared = ctx.shared.clone();
        let id = run_id.clone();
        crate::rpc::off_actor(move || place_files(&shared, &id, &files)).await??;
    }

    let events = valid.events;
    let id = run_id.clone();
    let done = ctx
        .actor
        .mutate(move |core| {
            if core.state.summaries.contains_key(id.as_str()) {
                return Err(ApiError::invalid_state(format!(
                    "run {id} already exists; forget it first to import it again"
                )));
            }
            for ev in events {
                let time = ev.time;
                core.emit_at(
                    Pending {
                        run_id: ev.run_id,
                        task_id: ev.task_id,
                        message: ev.message,
                        body: ev.body,
                    },
                    time,
                );
            }
            tracing::info!(run = %id, "run imported");
            Ok(ImportResult {
                run_id: id.to_string(),
            })
        })
        .await;
    if let Err(e) = &done {
        // Nothing names the files we placed unless the events went in.
        if e.code == crew_api::codes::INVALID_STATE {
            let dir = ctx.shared.run_dir(&run_id);
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_keys_and_ignores_layout() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2.5], "x": "s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":"s","y":[1,2.5]},"b":1}"#).unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&a),
            r#"{"a":{"x":"s","y":[1,2.50000000000000e0]},"b":1}"#
        );
        // One ulp apart (a parser without exact float parsing): same canonical form.
        let x = 0.1f64 + 0.2f64;
        let y = f64::from_bits(x.to_bits() + 1);
        assert_eq!(canonical(&json!(x)), canonical(&json!(y)));
    }

    #[test]
    fn run_views_agree_on_shared_fields_only() {
        let base = json!({"run": {"id": "r", "status": "completed"}, "tasks": [{"id": "a"}]});
        let table = [
            (json!({"run": {"id": "r"}, "tasks": [{"id": "a"}]}), true),
            (
                json!({"run": {"id": "r", "status": "completed", "newField": 1}, "tasks": [{"id": "a"}]}),
                true,
            ),
            (
                json!({"run": {"id": "r", "status": "failed"}, "tasks": [{"id": "a"}]}),
                false,
            ),
            (json!({"run": {"id": "r"}, "tasks": []}), false),
            (json!({"run": {"id": "r"}, "tasks": [{"id": "b"}]}), false),
            (json!({"run": "r"}), false),
        ];
        for (other, want) in table {
            assert_eq!(agrees(&other, &base), want, "{other}");
        }
    }

    #[test]
    fn home_paths() {
        let h = Some("/home/al");
        let table = [
            ("/home/al", "~"),
            ("/home/al/p/x", "~/p/x"),
            ("cd /home/al/p && ls /home/al", "cd ~/p && ls ~"),
            ("/home/alice/p", "/home/alice/p"),
            ("\"/home/al\"", "\"~\""),
            ("nothing", "nothing"),
        ];
        for (input, want) in table {
            assert_eq!(shorten_home(input, h), want, "{input}");
        }
        assert_eq!(shorten_home("/home/al/x", None), "/home/al/x");
        let expand = [
            ("~", "/home/al"),
            ("~/p", "/home/al/p"),
            ("~bob/p", "~bob/p"),
            ("/abs", "/abs"),
        ];
        for (input, want) in expand {
            assert_eq!(expand_home(input, h), want, "{input}");
        }
    }

    #[test]
    fn artifacts_are_redacted() {
        let h = Some("/home/al");
        let jsonl = "{\"type\":\"session\",\"cwd\":\"/home/al/p\",\"apiKey\":\"abc\"}\nnot json sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123\n";
        let out = clean_artifact("transcripts/a.attempt-1.jsonl", jsonl.as_bytes(), h);
        assert!(!out.contains("/home/al"), "{out}");
        assert!(!out.contains("\"abc\""), "{out}");
        assert!(!out.contains("abcdefghijklmnopqrstuvwxyz0123"), "{out}");
        assert!(out.ends_with('\n'));
        assert_eq!(out.lines().count(), 2);
        let txt = clean_artifact("results/a.txt", b"token=s3cr3tvalue in /home/al/p", h);
        assert!(!txt.contains("s3cr3tvalue") && txt.contains("~/p"), "{txt}");
    }

    /// A minimal finished run's events, as an export would carry them.
    fn sample_events() -> Vec<Value> {
        stamped(sample_pending())
    }

    /// `sample_events` before they are stamped.
    fn sample_pending() -> Vec<Pending> {
        use crew_core::plan::PlannedTask;
        use crew_core::run::AttemptEnd;
        let plan: PlannedTask = serde_json::from_value(json!({
            "id": "01_a", "stepId": "a", "role": "r", "agent": "r", "dependsOn": [],
            "taskTemplate": "t", "output": null, "reads": [], "model": null,
            "systemPrompt": "", "systemPromptMode": "replace", "tools": [],
            "thinking": null, "writes": false
        }))
        .unwrap_or_else(|e| panic!("the PlannedTask fixture needs updating: {e}"));
        let spec = crate::test_support::run_spec(vec![std::sync::Arc::new(plan)]);
        let content = "hello";
        let mut pend = first_attempt_of(spec, "01_a");
        pend.extend([
            Pending::task(
                "team_x",
                "01_a",
                EventBody::TaskCompleted {
                    end: AttemptEnd {
                        attempt: 1,
                        artifacts: vec![crew_core::run::ArtifactRef {
                            name: "results/01_a.txt".into(),
                            kind: "result".into(),
                            bytes: content.len() as u64,
                            sha256: sha256_hex(content.as_bytes()).as_str().into(),
                        }],
                        ..Default::default()
                    },
                    reused_from: None,
                    commit: None,
                    verification: vec![],
                    verdict: None,
                },
            ),
            Pending::run(
                "team_x",
                EventBody::RunCompleted {
                    usage: Default::default(),
                },
            ),
        ]);
        pend
    }

    /// A run of `spec` created and started, and `task`'s first attempt started.
    fn first_attempt_of(spec: crew_core::run::RunSpec, task: &str) -> Vec<Pending> {
        vec![
            Pending::run("team_x", EventBody::RunCreated(Box::new(spec))),
            Pending::run("team_x", EventBody::RunStarted {}),
            Pending::task(
                "team_x",
                task,
                EventBody::TaskStarted {
                    attempt: 1,
                    runtime: "fake".into(),
                    model: None,
                    artifacts: vec![],
                },
            ),
        ]
    }

    /// `pend` as a daemon would have journaled them.
    fn stamped(pend: Vec<Pending>) -> Vec<Value> {
        use crew_core::run::State;
        let mut st = State::default();
        let t0 = chrono::DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        pend.into_iter()
            .enumerate()
            .map(|(i, p)| {
                let ev = st.stamp(p, i as u64 + 10, t0 + chrono::Duration::seconds(i as i64));
                st.apply(&ev);
                serde_json::to_value(&ev).unwrap()
            })
            .collect()
    }

    fn sample_bundle() -> Value {
        bundle_of(sample_events())
    }

    /// A bundle of `events`, consistent and sealed as an export makes one (or a forger who
    /// recomputes the view and checksum).
    fn bundle_of(events: Vec<Value>) -> Value {
        let evs: Vec<Event> = events
            .iter()
            .map(|v| serde_json::from_value(v.clone()).unwrap())
            .collect();
        let run = crew_core::run::replay_run(evs.iter()).unwrap();
        let mut b = Map::new();
        b.insert("format".into(), json!(FORMAT));
        b.insert("version".into(), json!(1));
        b.insert("exportedAt".into(), json!("2025-01-01T00:00:09Z"));
        b.insert(
            "run".into(),
            serde_json::to_value(views::status(&run)).unwrap(),
        );
        b.insert("events".into(), Value::Array(events));
        b.insert(
            "artifacts".into(),
            json!([{"name": "results/01_a.txt", "kind": "result", "taskId": "01_a",
                    "bytes": 5, "sha256": sha256_hex(b"hello"), "content": "hello"}]),
        );
        let sum = checksum(&b);
        b.insert("checksum".into(), json!(sum));
        Value::Object(b)
    }

    /// Apply `edit`, then (when `reseal`) recompute the checksum like a careful forger would.
    fn edited(edit: impl Fn(&mut Map<String, Value>), reseal: bool) -> Value {
        let mut b = sample_bundle();
        let obj = b.as_object_mut().unwrap();
        edit(obj);
        if reseal {
            let sum = checksum(obj);
            obj.insert("checksum".into(), json!(sum));
        }
        b
    }

    fn events_mut(o: &mut Map<String, Value>) -> &mut Vec<Value> {
        o.get_mut("events").unwrap().as_array_mut().unwrap()
    }

    #[test]
    fn a_good_bundle_validates() {
        let v = validate(&sample_bundle()).unwrap();
        assert_eq!(v.run_id, "team_x");
        assert_eq!(v.events.len(), 5);
        assert_eq!(v.files, vec![("results/01_a.txt".into(), "hello".into())]);
    }

    /// A bundle whose run "finished" with its task's attempt still in flight: a job on a
    /// cluster (its id and staging directory) or a local worker (a pid and its start time).
    /// Once imported and resumed, a restart's recovery would follow that job (and cancel it,
    /// or take files from that directory) or kill that process group: crewd acting on a job or
    /// a process it never started. A run crew exports has no attempt in flight (a run ends
    /// only when nothing runs), so such a bundle is refused.
    #[test]
    fn a_run_with_an_attempt_in_flight_is_refused() {
        let in_flight: [(&str, Vec<EventBody>); 2] = [
            (
                "remote",
                vec![
                    EventBody::WorkerSubmitting {
                        attempt: 1,
                        job_name: "crew-team_x-01_a-1".into(),
                        staging: "/home/someone/private".into(),
                    },
                    EventBody::WorkerSubmitted {
                        attempt: 1,
                        job_id: 4242,
                    },
                ],
            ),
            (
                "local",
                vec![EventBody::WorkerSpawned {
                    attempt: 1,
                    pid: 1,
                    pid_start: 1,
                    live: false,
                }],
            ),
        ];
        for (what, bodies) in in_flight {
            let mut pend = sample_pending();
            // Keep run.created, run.started, task.started; end the run with the attempt open.
            pend.truncate(3);
            pend.extend(
                bodies
                    .into_iter()
                    .map(|b| Pending::task("team_x", "01_a", b)),
            );
            pend.push(Pending::run(
                "team_x",
                EventBody::RunFailed {
                    reason: "forged".into(),
                    usage: Default::default(),
                },
            ));
            let b = bundle_of(stamped(pend));
            let e = match validate(&b) {
                Ok(_) => panic!("{what}: a run with an attempt in flight was accepted"),
                Err(e) => e,
            };
            assert_eq!(e.code, crew_api::codes::VALIDATION_FAILED, "{what}");
            let data = serde_json::to_string(&e.data).unwrap();
            assert!(
                data.contains("01_a") && data.contains("in flight"),
                "{what}: {data}"
            );
        }
    }

    /// A failed run of `a` (failed, verified by `check a`), `b` (depends on `a`: skipped, verified
    /// by `check b`) and `c` (never started: queued), every task an editor, with the project's
    /// per-task check `project check`.
    fn three_task_failed_run() -> RunState {
        use crew_core::plan::PlannedTask;
        use crew_core::run::AttemptEnd;
        let task = |id: &str, deps: &[&str], verify: Option<&str>| {
            let mut v = json!({
                "id": id, "stepId": id, "role": "r", "agent": "r", "dependsOn": deps,
                "taskTemplate": "t", "output": null, "reads": [], "model": null,
                "systemPrompt": "", "systemPromptMode": "replace", "tools": ["edit"],
                "thinking": null, "writes": true
            });
            if let Some(c) = verify {
                v["checks"] = json!({"verify": {"commands": [c]}});
            }
            let plan: PlannedTask = serde_json::from_value(v)
                .unwrap_or_else(|e| panic!("the PlannedTask fixture needs updating: {e}"));
            std::sync::Arc::new(plan)
        };
        let mut spec = crate::test_support::run_spec(vec![
            task("a", &[], Some("check a")),
            task("b", &["a"], Some("check b")),
            task("c", &[], None),
        ]);
        // `c` a candidate of `a` on another runtime.
        let mut c = spec.tasks[2].as_ref().clone();
        c.candidates = Some(std::sync::Arc::new(
            serde_json::from_value(
                json!({"kind": "candidate", "of": "a", "index": 1, "runtime": "other"}),
            )
            .unwrap_or_else(|e| panic!("the Candidacy fixture needs updating: {e}")),
        ));
        spec.tasks[2] = std::sync::Arc::new(c);
        spec.task_verify_commands = vec!["project check".into()];
        // `a` a judge whose fixer edits.
        let mut a = spec.tasks[0].as_ref().clone();
        a.judging.fix = Some(std::sync::Arc::new(
            serde_json::from_value(json!({
                "fixer": {"role": "fixer", "agent": "fixer-agent", "model": null,
                          "systemPrompt": "fix it", "systemPromptMode": "replace",
                          "tools": ["edit", "bash"], "thinking": null, "writes": true},
                "maxRounds": 1
            }))
            .unwrap_or_else(|e| panic!("the FixPlan fixture needs updating: {e}")),
        ));
        spec.tasks[0] = std::sync::Arc::new(a);
        let mut pend = first_attempt_of(spec, "a");
        pend.extend([
            Pending::task(
                "team_x",
                "a",
                EventBody::TaskFailed {
                    end: AttemptEnd {
                        attempt: 1,
                        ..Default::default()
                    },
                },
            ),
            Pending::task(
                "team_x",
                "b",
                EventBody::TaskSkipped {
                    reason: "a failed".into(),
                },
            ),
            Pending::run(
                "team_x",
                EventBody::RunFailed {
                    reason: "a failed".into(),
                    usage: Default::default(),
                },
            ),
        ]);
        let events: Vec<Event> = stamped(pend)
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect();
        crew_core::run::replay_run(events.iter()).unwrap()
    }

    /// The confirmation of an imported run shows every task that can run once the run runs
    /// again, and every command: a queued task starts as soon as it does (a bundle's failed
    /// run may hold one), a retry brings back the tasks skipped because of the named ones, and
    /// the project's per-task checks (the run's `taskVerifyCommands`, from the bundle) run
    /// after every editing task without checks of its own.
    #[test]
    fn the_preview_shows_every_task_and_command_that_can_run() {
        let run = three_task_failed_run();
        let only = ["a".to_string()];
        for (what, p) in [
            ("resume", imported_preview(&run, None)),
            ("retry a", imported_preview(&run, Some(&only))),
        ] {
            let ids: Vec<&str> = p["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["id"].as_str())
                .collect();
            assert_eq!(ids, ["a", "b", "c"], "{what}: {p}");
            let commands: Vec<&str> = p["commands"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for c in ["a verify: check a", "b verify: check b", "project check"] {
                assert!(
                    commands.iter().any(|l| l.contains(c)),
                    "{what}: {c} is not shown: {p}"
                );
            }
            assert_eq!(p["taskVerifyCommands"], json!(["project check"]), "{what}");
            assert_eq!(p["tasks"][2]["runtime"], "other", "{what}: {p}");
            assert_eq!(p["addedRoles"][0]["agent"], "fixer-agent", "{what}: {p}");
            assert_eq!(
                p["addedRoles"][0]["tools"],
                json!(["edit", "bash"]),
                "{what}"
            );
        }
    }

    /// A session file for an attempt the task has not made is the conversation pi would
    /// continue on that attempt: refused; one of an attempt made is kept. An attempt's object
    /// directory, whose objects a restart takes into the repository, is refused too.
    #[test]
    fn a_session_of_an_attempt_to_come_is_refused() {
        for (name, ok) in [
            ("sessions/01_a/attempt-1.jsonl", true),
            ("sessions/01_a/attempt-2.jsonl", false),
            ("sessions/02_b/attempt-1.jsonl", false),
            ("objects/01_a.attempt-2/objects/info/alternates", false),
        ] {
            let b = edited(
                |o| {
                    let content = "{\"type\":\"session\"}\n";
                    o["artifacts"].as_array_mut().unwrap().push(json!({
                        "name": name, "kind": "file", "taskId": "01_a",
                        "bytes": content.len(), "sha256": sha256_hex(content.as_bytes()),
                        "content": content,
                    }));
                },
                true,
            );
            match validate(&b) {
                Ok(_) => assert!(ok, "{name} was accepted"),
                Err(e) => {
                    assert!(!ok, "{name}: {e:?}");
                    let data = serde_json::to_string(&e.data).unwrap();
                    assert!(
                        data.contains("has not made") || data.contains("object directory"),
                        "{name}: {data}"
                    );
                }
            }
        }
    }

    /// A task whose last attempt is numbered `u32::MAX`: its next one (`attempts + 1`) would
    /// overflow, or wrap to an attempt 0 whose session file the bundle could hold. Refused,
    /// even with the run's view made to agree.
    #[test]
    fn an_attempt_number_at_the_end_of_the_range_is_refused() {
        let mut pend = sample_pending();
        for p in &mut pend {
            match &mut p.body {
                EventBody::TaskStarted { attempt, .. } => *attempt = u32::MAX,
                EventBody::TaskCompleted { end, .. } => end.attempt = u32::MAX,
                _ => {}
            }
        }
        let e = validate(&bundle_of(stamped(pend))).expect_err("accepted");
        let data = serde_json::to_string(&e.data).unwrap();
        assert!(data.contains("4294967295 attempts"), "{data}");
    }

    /// A selector's choice names the candidate whose `results/<candidate>.txt` its dependents'
    /// prompts quote: a forged `../../../../home/you/notes` would have crewd read a file
    /// outside the run into a prompt. A choice must name a task of the run.
    #[test]
    fn a_choice_of_no_task_is_refused() {
        for (candidate, ok) in [("01_a", true), ("../../../../../home/you/notes", false)] {
            let mut pend = sample_pending();
            let done = pend.len() - 1;
            pend.insert(
                done,
                Pending::task(
                    "team_x",
                    "01_a",
                    EventBody::TaskCandidateChosen {
                        end: None,
                        commit: None,
                        choice: crew_core::run::candidates::Choice {
                            index: 1,
                            candidate: candidate.into(),
                            by: "first".into(),
                            reason: "r".into(),
                        },
                        verdict: None,
                    },
                ),
            );
            match validate(&bundle_of(stamped(pend))) {
                Ok(_) => assert!(ok, "{candidate} was accepted"),
                Err(e) => {
                    assert!(!ok, "{candidate}: {e:?}");
                    let data = serde_json::to_string(&e.data).unwrap();
                    assert!(data.contains("no task of the run"), "{data}");
                }
            }
        }
    }

    /// Issue 14.4: the plan inside `run.created` names a task outside the state directory.
    #[test]
    fn plan_task_ids_are_checked() {
        for evil in ["../../../../x/PWNED", "a/b", ""] {
            let b = edited(
                |o| {
                    let ev = &mut events_mut(o)[0];
                    ev["data"]["tasks"][0]["id"] = json!(evil);
                },
                true,
            );
            let e = validate(&b).unwrap_err();
            assert_eq!(e.code, crew_api::codes::VALIDATION_FAILED, "{evil}");
            let data = serde_json::to_string(&e.data).unwrap();
            assert!(
                data.contains("events[0]") && data.contains("not a valid id"),
                "{data}"
            );
        }
        if let Ok(dir) = std::env::var("CREW_WRITE_FUZZ_SEED") {
            std::fs::write(
                Path::new(&dir).join("sample.json"),
                serde_json::to_string_pretty(&sample_bundle()).unwrap(),
            )
            .unwrap();
        }
    }

    #[test]
    fn bad_bundles_are_refused_naming_the_field() {
        type Edit = Box<dyn Fn(&mut Map<String, Value>)>;
        let table: Vec<(&str, Edit, bool, &str)> = vec![
            (
                "foreign version",
                Box::new(|o| {
                    o.insert("version".into(), json!(2));
                }),
                true,
                "version",
            ),
            (
                "not a bundle",
                Box::new(|o| {
                    o.insert("format".into(), json!("zip"));
                }),
                true,
                "format",
            ),
            (
                "no format",
                Box::new(|o| {
                    o.remove("format");
                }),
                true,
                "format",
            ),
            (
                "no events",
                Box::new(|o| {
                    o.remove("events");
                }),
                false,
                "events",
            ),
            (
                "no artifacts",
                Box::new(|o| {
                    o.remove("artifacts");
                }),
                false,
                "artifacts",
            ),
            (
                "events not a list",
                Box::new(|o| {
                    o.insert("events".into(), json!({}));
                }),
                false,
                "events",
            ),
            (
                "no checksum",
                Box::new(|o| {
                    o.remove("checksum");
                }),
                false,
                "checksum",
            ),
            (
                "tampered goal",
                Box::new(|o| {
                    events_mut(o)[0]["data"]["goal"] = json!("rm -rf /");
                }),
                false,
                "checksum",
            ),
            (
                "truncated events",
                Box::new(|o| {
                    events_mut(o).pop();
                }),
                false,
                "checksum",
            ),
            (
                "truncated, resealed",
                Box::new(|o| {
                    events_mut(o).pop();
                }),
                true,
                "events",
            ),
            (
                "event missing, resealed",
                Box::new(|o| {
                    events_mut(o).remove(2);
                }),
                true,
                "events[2]",
            ),
            (
                "unknown event type",
                Box::new(|o| {
                    events_mut(o)[1]["type"] = json!("run.teleported");
                }),
                true,
                "events[1]",
            ),
            (
                "foreign run's event",
                Box::new(|o| {
                    events_mut(o)[1]["runId"] = json!("team_y");
                }),
                true,
                "events[1]",
            ),
            (
                "not starting with run.created",
                Box::new(|o| {
                    events_mut(o).remove(0);
                }),
                true,
                "events[0]",
            ),
            (
                "damaged artifact",
                Box::new(|o| {
                    o["artifacts"][0]["content"] = json!("hellO");
                }),
                true,
                "artifacts[0].content",
            ),
            (
                "path traversal",
                Box::new(|o| {
                    o["artifacts"][0]["name"] = json!("../../etc/passwd");
                }),
                true,
                "artifacts[0].name",
            ),
            (
                "artifact without content",
                Box::new(|o| {
                    o["artifacts"][0].as_object_mut().unwrap().remove("content");
                }),
                true,
                "artifacts[0]",
            ),
            (
                "run disagrees with events",
                Box::new(|o| {
                    o["run"]["run"]["status"] = json!("failed");
                }),
                true,
                "run",
            ),
            (
                "a relative cwd",
                Box::new(|o| {
                    events_mut(o)[0]["data"]["cwd"] = json!(".");
                }),
                true,
                "events[0]",
            ),
            (
                "an option as a model",
                Box::new(|o| {
                    events_mut(o)[0]["data"]["tasks"][0]["model"] = json!("--yolo");
                }),
                true,
                "events[0]",
            ),
            (
                "an option as a fallback model",
                Box::new(|o| {
                    events_mut(o)[0]["data"]["tasks"][0]["fallbackModels"] =
                        json!(["m", "--version"]);
                }),
                true,
                "events[0]",
            ),
            (
                "an option as a thinking level",
                Box::new(|o| {
                    events_mut(o)[0]["data"]["tasks"][0]["thinking"] = json!("--no-session");
                }),
                true,
                "events[0]",
            ),
            (
                "bad run id",
                Box::new(|o| {
                    for e in events_mut(o) {
                        e["runId"] = json!("../x");
                    }
                }),
                true,
                "events[0]",
            ),
        ];
        for (what, edit, reseal, field) in table {
            let e = validate(&edited(edit, reseal)).expect_err(what);
            assert_eq!(e.code, 1003, "{what}: {}", e.message);
            let diags = e.data.as_ref().unwrap()["diagnostics"]
                .as_array()
                .unwrap()
                .clone();
            assert!(
                diags.iter().any(|d| d["field"] == field),
                "{what}: expected a diagnostic on {field}, got {diags:?}"
            );
        }
        let e = validate(&json!("a string")).unwrap_err();
        assert_eq!(e.code, -32602);
        assert_eq!(e.data.unwrap()["field"], "bundle");
    }
}
