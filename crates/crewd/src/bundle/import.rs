//! `team.import`: a bundle read (inline or from a file), checked (`validate`), its files placed
//! and then its events replayed with their original times.

use super::redact::{expand_home, home_dir};
use super::{validate, IMPORT_FILE_MAX_BYTES};
use crate::rpc::Ctx;
use crate::shared::Shared;
use crew_api::types::ImportResult;
use crew_api::ApiError;
use crew_core::run::{Event, EventBody, Pending};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

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

/// Import a bundle: checked whole first, then its files placed, then its events journaled
/// (refused, and the files removed again, when a run of its id appeared meanwhile).
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
    mark_imported(&mut valid.events, home_dir().as_deref());

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

/// The run as this daemon runs it: its cwd (and a worktree run's repository) under this
/// daemon's `$HOME` where export wrote `~`, and marked imported (`RunSpec::imported`).
fn mark_imported(events: &mut [Event], home: Option<&str>) {
    if let Some(Event {
        body: EventBody::RunCreated(spec),
        ..
    }) = events.first_mut()
    {
        spec.cwd = expand_home(&spec.cwd, home);
        // Export wrote a worktree run's repository `~/…` as it wrote the cwd.
        if let Some(ws) = spec.workspace.as_mut() {
            ws.repo = expand_home(&ws.repo, home);
        }
        spec.imported = true;
    }
}
