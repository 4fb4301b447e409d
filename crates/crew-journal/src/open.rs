//! Opening a sled journal without ever trusting a damaged one.

use std::any::Any;
use std::fs;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use crate::acked::{self, AckedFile};
use crate::aside::{self, Step};
use crate::db_lock;
use crate::keys::{
    decode_pack, decode_pack_key, decode_seq, decode_snapshot, BY_RUN_TREE, EVENTS_END, INDEX_TAG,
    LOG_TREE, META_EPOCH, META_LAST_SEQ, META_SNAPSHOT, META_TREE,
};
use crate::marker::{self, Marker, MarkerError, MARKER_FILE};
use crate::seal::{self, Verdict};
use crate::JournalError;

/// sled's data file and config file; both exist in every sled 0.34 directory.
pub(crate) const SLED_DB_FILE: &str = "db";
const SLED_CONF_FILE: &str = "conf";

pub(crate) struct Opened {
    pub db: sled::Db,
    pub log: sled::Tree,
    pub meta: sled::Tree,
    /// What sled recovered, which is also what the marker file now says.
    pub state: Marker,
    /// The snapshot record, read here to check it: start-up reads it next, and it can be large.
    pub snapshot: Option<sled::IVec>,
    /// Where every acknowledged write is recorded (`acked.rs`); `None` if it cannot be opened.
    pub acked: Option<AckedFile>,
}

/// What the directory held before sled touched it.
#[derive(Clone, Copy)]
enum Found {
    /// Missing or empty: a new journal.
    Nothing,
    /// sled files, with what the marker and the acked file promise, if either was written.
    Journal(Option<Marker>),
}

/// How much to trust the files before sled recovers them in place.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trust {
    /// Files from anywhere: unless the seal vouches for them, judge a copy first.
    Judge,
    /// Files this process wrote until a write failed (`SledJournal::reopen`): opened in place
    /// and judged after sled's recovery, as copying them could need more room than a full disk
    /// has, and nothing else wrote them meanwhile.
    OwnFiles,
}

pub(crate) fn open(dir: &Path, cache_bytes: u64, trust: Trust) -> Result<Opened, JournalError> {
    if trust == Trust::Judge {
        // What a crash while judging a copy left (`aside.rs`), settled before anything is read.
        aside::resolve(dir)?;
    }
    let found = inspect(dir)?;
    if let Found::Journal(promised) = found {
        if trust == Trust::Judge {
            let verdict = seal::check(dir).map_err(|source| JournalError::Io {
                context: format!("checking the files of {} against their seal", dir.display()),
                source,
            })?;
            match verdict {
                // The files hold what they held at the close; it must be all that was acked.
                Verdict::Sealed(sealed) => verify(promised.unwrap_or_default(), sealed, None)
                    .map_err(|detail| JournalError::Corrupt {
                        path: dir.to_path_buf(),
                        detail: format!(
                            "{detail} (as sealed at the last clean close; the files were \
                                 left as they are)"
                        ),
                    })?,
                // A symlinked journal keeps its link: the copy is judged beside the files and
                // sled then recovers them in place (two recoveries).
                Verdict::Unsealed(why) if is_symlink(dir) => {
                    judge_copy(dir, cache_bytes, promised, &why)?
                }
                Verdict::Unsealed(why) => return open_on_copy(dir, cache_bytes, promised, &why),
            }
        }
        // sled is about to change the files.
        seal::remove(dir).map_err(|source| JournalError::Io {
            context: format!("removing the seal of {}", dir.display()),
            source,
        })?;
    }
    let mut opened = open_in(dir, dir, cache_bytes, found, true)?;
    // Without it only the check after a crash is weaker; the journal itself is fine.
    opened.acked = AckedFile::open(dir).ok();
    Ok(opened)
}

fn is_symlink(dir: &Path) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|meta| meta.file_type().is_symlink())
}

/// Lets sled recover a copy put at the journal's own path, the original set aside, and keeps it
/// as the journal when it is sound (`aside.rs`): one recovery, and the original's files are
/// never written.
fn open_on_copy(
    dir: &Path,
    cache_bytes: u64,
    promised: Option<Marker>,
    why: &str,
) -> Result<Opened, JournalError> {
    let Some(placed) = aside::place_copy(dir, why)? else {
        return Err(JournalError::Locked {
            path: dir.to_path_buf(),
            detail: "its files are open or being opened".into(),
        });
    };
    match open_in(dir, dir, cache_bytes, Found::Journal(promised), true) {
        Ok(mut opened) => {
            aside::reached(Step::Judged);
            if let Err(err) = placed.commit(dir) {
                // The copy was taken away from under the handle; it must never write again.
                std::mem::forget(opened);
                return Err(err);
            }
            // Without it only the check after a crash is weaker; the journal itself is fine.
            opened.acked = AckedFile::open(dir).ok();
            Ok(opened)
        }
        // `open_in` gave up sled's handle without letting it write.
        Err(err) => Err(placed.undo(
            dir,
            match err {
                JournalError::Corrupt { path, detail } => JournalError::Corrupt {
                    path,
                    detail: format!(
                        "{detail} (found while sled recovered a copy, {why}; the journal's files \
                         were left as they are)"
                    ),
                },
                other => other,
            },
        )),
    }
}

/// How long judging a copy waits for sled to close the copy's files.
const COPY_CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Lets sled recover a copy of the files and judges what it recovered, so that damage sled's
/// recovery would write over is found while the files are still as they were.
fn judge_copy(
    dir: &Path,
    cache_bytes: u64,
    promised: Option<Marker>,
    why: &str,
) -> Result<(), JournalError> {
    let name = dir.file_name().map_or_else(
        || "journal".into(),
        |name| name.to_string_lossy().into_owned(),
    );
    let copy = dir
        .parent()
        .unwrap_or(dir)
        .join(format!(".{name}.check-{}", std::process::id()));
    let io_error = |context: String, source: io::Error| JournalError::Io { context, source };
    match fs::remove_dir_all(&copy) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => {
            return Err(io_error(format!("removing {}", copy.display()), err))
        }
        _ => {}
    }
    let made = seal::copy_sled_files(dir, &copy).map_err(|err| {
        io_error(
            format!(
                "copying {} to {} to check it before opening it ({why}; the journal needs as much \
                 free space as it occupies for that)",
                dir.display(),
                copy.display()
            ),
            err,
        )
    });
    let judged = made
        .and_then(|()| open_in(&copy, dir, cache_bytes, Found::Journal(promised), false).map(drop));
    // sled closes the copy's files from a background thread a moment after the drop; until
    // then they take the room they took (on a nearly full disk, the room the journal needs).
    db_lock::with_db_unlocked(&copy.join(SLED_DB_FILE), COPY_CLOSE_WAIT, || {});
    let _ = fs::remove_dir_all(&copy);
    judged.map_err(|err| match err {
        JournalError::Corrupt { path, detail } => JournalError::Corrupt {
            path,
            detail: format!("{detail} (found on a copy, {why}; the files were left as they are)"),
        },
        other => other,
    })
}

/// Opens sled in `sled_dir` and judges what it recovered; errors name `report_dir`. `in_place`:
/// the journal itself (create what a new journal needs, move an old index, update the marker),
/// not a copy being judged.
fn open_in(
    sled_dir: &Path,
    report_dir: &Path,
    cache_bytes: u64,
    found: Found,
    in_place: bool,
) -> Result<Opened, JournalError> {
    let dir = report_dir;
    // A copy being judged may be dropped (it is ours to write); the journal is left alone.
    let abandon = |db: sled::Db, err: JournalError| {
        if in_place {
            abandon(db, err)
        } else {
            drop(db);
            err
        }
    };
    let corrupt = |detail: String| JournalError::Corrupt {
        path: dir.to_path_buf(),
        detail,
    };
    let config = sled::Config::new()
        .path(sled_dir)
        .cache_capacity(cache_bytes)
        .mode(sled::Mode::LowSpace)
        // Every write of ours is followed by an explicit flush; with the periodic flusher off,
        // nothing is written behind our back (e.g. while we decide that the files are corrupt).
        .flush_every_ms(None);
    let db = sled_call(dir, || config.open()).map_err(|err| map_open_error(dir, err))?;

    // Judge what sled recovered before creating anything in it.
    if let Found::Journal(marker) = found {
        let names = db.tree_names();
        if let Err(detail) = check_trees(&db, &names, marker.is_some()) {
            return Err(abandon(db, corrupt(detail)));
        }
    }
    let trees = sled_call(dir, || {
        let log = db.open_tree(LOG_TREE)?;
        let by_run = db.open_tree(BY_RUN_TREE)?;
        let meta = db.open_tree(META_TREE)?;
        let last_key = log.range(..&EVENTS_END[..]).next_back().transpose()?;
        let meta_last = meta.get(META_LAST_SEQ)?;
        let epoch = meta.get(META_EPOCH)?;
        let snapshot = meta.get(META_SNAPSHOT)?;
        Ok((log, by_run, meta, last_key, meta_last, epoch, snapshot))
    });
    let (log, by_run, meta, last_key, meta_last, epoch, snapshot) = match trees {
        Ok(trees) => trees,
        Err(err) => return Err(abandon(db, map_open_error(dir, err))),
    };
    let decode = |what: &str, bytes: Option<sled::IVec>| -> Result<u64, String> {
        bytes.map_or(Ok(0), |bytes| {
            decode_seq(&bytes).ok_or_else(|| format!("malformed {what}"))
        })
    };
    let marker = match found {
        Found::Nothing => None,
        Found::Journal(marker) => marker,
    };
    let checked = last_event_seq(last_key).and_then(|log_last| {
        let state = Marker {
            acked: log_last.max(decode("last_seq record", meta_last)?),
            epoch: decode("epoch record", epoch)?,
        };
        verify(marker.unwrap_or_default(), state, snapshot.as_deref()).map(|()| state)
    });
    let state = match checked {
        Ok(state) => state,
        Err(detail) => return Err(abandon(db, corrupt(detail))),
    };
    if !in_place {
        return Ok(Opened {
            db,
            log,
            meta,
            state,
            snapshot,
            acked: None,
        });
    }

    if let Err(err) = sled_call(dir, || move_legacy_index(&db, &by_run, &log)) {
        return Err(abandon(db, map_open_error(dir, err)));
    }
    let on_disk = marker::read(dir).ok().flatten();
    if on_disk != Some(state) {
        // A new journal is flushed before the marker vouches for it, so a crash in between
        // leaves sled files without a marker, which `inspect` accepts.
        db.flush()
            .map_err(|err| map_sled_error(dir, "creating the journal", err))?;
        marker::write(dir, state).map_err(|source| JournalError::Io {
            context: format!("writing {}", dir.join(MARKER_FILE).display()),
            source,
        })?;
    }
    Ok(Opened {
        db,
        log,
        meta,
        state,
        snapshot,
        acked: None,
    })
}

/// The seq of the newest entry, from the last event key (a pack, else a legacy event).
fn last_event_seq(last: Option<(sled::IVec, sled::IVec)>) -> Result<u64, String> {
    let Some((key, value)) = last else {
        return Ok(0);
    };
    if let Some(first) = decode_pack_key(&key) {
        return decode_pack(&value, first)
            .map(|pack| pack.last)
            .map_err(|why| format!("the newest event pack (seq {first}) is damaged: {why}"));
    }
    decode_seq(&key).ok_or_else(|| format!("malformed log key of {} bytes", key.len()))
}

/// How many index groups one batch of the move from `by_run` carries.
const MOVE_CHUNK: usize = 4096;

/// Moves the index of a journal written before it lived in `log` (keys.rs). Copy everything,
/// make it durable, then empty `by_run`: a crash at any point leaves every group in at least one
/// of the two trees, and the next open copies again (same keys, same values).
fn move_legacy_index(db: &sled::Db, by_run: &sled::Tree, log: &sled::Tree) -> sled::Result<()> {
    if by_run.is_empty() {
        return Ok(());
    }
    let mut batch = sled::Batch::default();
    let mut in_batch = 0;
    for item in by_run.iter() {
        let (key, value) = item?;
        let mut tagged = Vec::with_capacity(key.len() + 1);
        tagged.push(INDEX_TAG);
        tagged.extend_from_slice(&key);
        batch.insert(tagged, value);
        in_batch += 1;
        if in_batch == MOVE_CHUNK {
            log.apply_batch(std::mem::take(&mut batch))?;
            in_batch = 0;
        }
    }
    log.apply_batch(batch)?;
    db.flush()?;
    by_run.clear()?;
    db.flush()?;
    Ok(())
}

/// Runs sled code that may panic on damaged files, turning the panic into an error.
fn sled_call<T>(dir: &Path, op: impl FnOnce() -> sled::Result<T>) -> sled::Result<T> {
    catch_unwind(AssertUnwindSafe(op)).unwrap_or_else(|panic| {
        Err(sled::Error::Unsupported(format!(
            "sled panicked while recovering {}: {}",
            dir.display(),
            panic_message(&*panic)
        )))
    })
}

/// Gives up on a database judged corrupt without letting sled write to it.
fn abandon(db: sled::Db, err: JournalError) -> JournalError {
    // Dropping the last handle flushes, which could write over the evidence. Leaking it costs a
    // file descriptor and keeps the lock on a journal that nobody can use anyway.
    std::mem::forget(db);
    err
}

/// sled's own tree; it exists in every sled database and we never write to it.
const SLED_DEFAULT_TREE: &[u8] = b"__sled__default";

/// The trees of an existing journal: ours and sled's default one, nothing else. Without a marker
/// (a crash during the very first open, before anything could be appended) sled may have found
/// nothing or only some of our trees.
fn check_trees(db: &sled::Db, names: &[sled::IVec], marked: bool) -> Result<(), String> {
    if marked && !db.was_recovered() {
        return Err("sled found no database in its files and would start an empty one".into());
    }
    let ours = [LOG_TREE, BY_RUN_TREE, META_TREE].map(str::as_bytes);
    if let Some(foreign) = names
        .iter()
        .find(|name| name.as_ref() != SLED_DEFAULT_TREE && !ours.contains(&name.as_ref()))
    {
        return Err(format!(
            "a sled database with a tree {:?} that the journal does not have",
            String::from_utf8_lossy(foreign)
        ));
    }
    if !db.is_empty() {
        return Err(
            "a sled database with data in its default tree, which the journal never writes".into(),
        );
    }
    if marked
        && !ours
            .iter()
            .all(|tree| names.iter().any(|name| name.as_ref() == *tree))
    {
        return Err("sled recovered a database without the journal's trees".into());
    }
    Ok(())
}

/// Checks what sled recovered against what the marker promised.
fn verify(promised: Marker, recovered: Marker, snapshot: Option<&[u8]>) -> Result<(), String> {
    let last_seq = recovered.acked;
    if last_seq < promised.acked {
        return Err(format!(
            "sled recovered entries up to seq {last_seq}, but seq {} had been acknowledged",
            promised.acked
        ));
    }
    if recovered.epoch < promised.epoch {
        return Err(format!(
            "sled recovered {} snapshot/forget writes, but {} had been acknowledged",
            recovered.epoch, promised.epoch
        ));
    }
    match snapshot.map(decode_snapshot) {
        None => Ok(()),
        Some(Some((seq, _))) if seq <= last_seq => Ok(()),
        Some(Some((seq, _))) => Err(format!(
            "the snapshot is as of seq {seq}, past the last recovered seq {last_seq}"
        )),
        Some(None) => Err("malformed snapshot record".into()),
    }
}

/// Looks at the directory before sled does: sled creates files wherever it is pointed, so a
/// directory that is not a journal must be refused before sled ever sees it.
fn inspect(dir: &Path) -> Result<Found, JournalError> {
    let corrupt = |detail: String| JournalError::Corrupt {
        path: dir.to_path_buf(),
        detail,
    };
    let io_error = |context: &str, source: io::Error| JournalError::Io {
        context: format!("{context} {}", dir.display()),
        source,
    };
    let mut entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|err| io_error("creating", err))?;
            return Ok(Found::Nothing);
        }
        Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
            return Err(corrupt("not a directory".into()));
        }
        Err(err) => return Err(io_error("reading", err)),
    };
    if entries.next().is_none() {
        return Ok(Found::Nothing);
    }
    let marker = match marker::read(dir) {
        Ok(marker) => marker,
        Err(MarkerError::Invalid(detail)) => return Err(corrupt(detail)),
        Err(MarkerError::Io(err)) => return Err(io_error("reading the marker in", err)),
    };
    let acked = acked::read(dir).map_err(|err| io_error("reading the acked file in", err))?;
    // Both only ever claim what was durable when they were written; the later one says more.
    let marker = match (marker, acked) {
        (Some(a), Some(b)) => Some(Marker {
            acked: a.acked.max(b.acked),
            epoch: a.epoch.max(b.epoch),
        }),
        (a, b) => a.or(b),
    };
    let missing: Vec<&str> = [SLED_DB_FILE, SLED_CONF_FILE]
        .into_iter()
        .filter(|name| !dir.join(name).is_file())
        .collect();
    match (marker, missing.is_empty()) {
        (_, true) => Ok(Found::Journal(marker)),
        (Some(_), false) => Err(corrupt(format!(
            "sled's files are missing: {}",
            missing.join(", ")
        ))),
        (None, false) if missing.len() == 1 => Err(corrupt(format!(
            "an incomplete sled database: {} is missing",
            missing.join(", ")
        ))),
        (None, false) => Err(corrupt(
            "the directory is not empty and holds no sled database".into(),
        )),
    }
}

fn map_open_error(dir: &Path, err: sled::Error) -> JournalError {
    match err {
        sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
            JournalError::Locked {
                path: dir.to_path_buf(),
                detail: io.to_string(),
            }
        }
        sled::Error::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
            ) =>
        {
            JournalError::Corrupt {
                path: dir.to_path_buf(),
                detail: format!("sled cannot read its files: {io}"),
            }
        }
        // sled says Unsupported when its config file disagrees with what we ask for.
        sled::Error::Unsupported(detail) | sled::Error::ReportableBug(detail) => {
            JournalError::Corrupt {
                path: dir.to_path_buf(),
                detail: format!("sled refused to open it: {detail}"),
            }
        }
        other => map_sled_error(dir, &format!("opening {}", dir.display()), other),
    }
}

pub(crate) fn map_sled_error(dir: &Path, context: &str, err: sled::Error) -> JournalError {
    match err {
        sled::Error::Io(source) => JournalError::Io {
            context: context.to_owned(),
            source: restore_os_error(source),
        },
        sled::Error::Corruption { at, .. } => JournalError::Corrupt {
            path: dir.to_path_buf(),
            detail: match at {
                Some(at) => format!("sled found corrupted data at {at} while {context}"),
                None => format!("sled found corrupted data while {context}"),
            },
        },
        other => JournalError::Backend {
            context: context.to_owned(),
            detail: other.to_string(),
        },
    }
}

/// sled reports its first write error to every later caller as a copy made with
/// `io::Error::new(kind, format!("{original:?}"))`, which turns "No space left on device (os
/// error 28)" into a Debug dump; this gets the OS error back so the message reads normally.
fn restore_os_error(err: io::Error) -> io::Error {
    if err.raw_os_error().is_some() {
        return err;
    }
    let text = err.to_string();
    let code = text
        .strip_prefix("Os { code: ")
        .and_then(|rest| rest.split(',').next())
        .and_then(|code| code.parse::<i32>().ok());
    match code {
        Some(code) => io::Error::from_raw_os_error(code),
        None => err,
    }
}

pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_copied_by_sled_read_like_the_os() {
        let original = io::Error::from_raw_os_error(28);
        let copied = io::Error::new(original.kind(), format!("{original:?}"));
        let restored = restore_os_error(copied);
        assert_eq!(restored.raw_os_error(), Some(28));
        assert_eq!(restored.to_string(), original.to_string());
        let plain = restore_os_error(io::Error::other("could not acquire lock"));
        assert_eq!(plain.to_string(), "could not acquire lock");
        assert_eq!(
            restore_os_error(io::Error::from_raw_os_error(5)).raw_os_error(),
            Some(5)
        );
    }
}
