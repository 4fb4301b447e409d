//! Judging a journal after a crash with one recovery by sled: on a copy that takes the journal's
//! place while the original is set aside, and stays as the journal when it is sound.
//!
//! sled's recovery writes into the files it opens, so files nothing vouches for (no valid seal,
//! `seal.rs`) are never opened in place. Instead, next to the journal `J`:
//!
//! 1. sled's lock on `J/db` is taken (no other sled may open the files meanwhile);
//! 2. `.J.copy` is made, tagged ([`COPY_TAG`]) and filled with a copy of every file;
//! 3. `J` is renamed to `.J.original`, and `.J.copy` to `J`;
//! 4. sled recovers `J` (the copy) in place and `open.rs` judges what it recovered;
//! 5. sound: the copy is made durable and `.J.original` renamed to `.J.superseded` (the commit:
//!    from here on `J` is the journal), which is then removed with the copy's tag; the sled
//!    handle is the live journal, so sled recovers the files once, not twice;
//! 6. damaged (or any failure before the commit): the handle is given up, `J` is renamed to
//!    `.J.discard` and `.J.original` back to `J`, as it was.
//!
//! The original is removed at the commit rather than kept until the next clean close: once the
//! copy takes writes, the original is an older journal that no path may go back to, and keeping
//! it would double the room the journal takes for as long as crewd runs.
//!
//! A crash can stop this anywhere; [`resolve`] runs before every open and settles what it left:
//! `.J.copy` and `.J.discard` are never the journal and are removed; `.J.original` is the journal
//! whenever it is there (`J` is then at most an uncommitted copy, tagged, or empty), and is
//! renamed back; `.J.superseded` beside a `J` holding sled's files is an older journal and is
//! removed. Anything else (say `.J.original` beside an untagged `J`) is refused untouched. Every
//! rename is followed by an fsync of the parent, so a power loss leaves one of these states too.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crate::acked::ACKED_FILE;
use crate::db_lock;
use crate::marker::MARKER_FILE;
use crate::open::SLED_DB_FILE;
use crate::seal;
use crate::JournalError;

/// In a copy crewd made and has not yet committed to; only ever read while `.J.original` exists.
pub(crate) const COPY_TAG: &str = "crew-journal.copy";
const TAG_TEXT: &[u8] = b"crew-journal-copy 1\n";

/// Where the sequence is; a crash injected at one (tests only) stops it there, cleaning nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
    /// `.J.copy` exists, with its tag and nothing else.
    Tagged,
    /// One file copied.
    Copying,
    /// Every file copied, `J` untouched.
    Copied,
    /// `J` renamed to `.J.original`; no `J`.
    SetAside,
    /// The copy at `J`.
    InPlace,
    /// sled recovered the copy at `J` and it was judged; not committed.
    Judged,
    /// `.J.original` renamed to `.J.superseded`.
    Committed,
    /// `.J.superseded` removed; the tag is still in `J`.
    Removed,
    /// Undoing: `J` renamed to `.J.discard`, `.J.original` not yet back.
    Discarded,
}

#[cfg(test)]
thread_local! {
    pub(crate) static CRASH_AT: std::cell::Cell<Option<Step>> = const { std::cell::Cell::new(None) };
}

pub(crate) fn reached(step: Step) {
    #[cfg(test)]
    if CRASH_AT.with(std::cell::Cell::get) == Some(step) {
        panic!("injected crash at {step:?}");
    }
    let _ = step;
}

/// The journal's siblings, named after it.
pub(crate) struct Siblings {
    parent: PathBuf,
    copy: PathBuf,
    original: PathBuf,
    superseded: PathBuf,
    discard: PathBuf,
}

impl Siblings {
    pub(crate) fn of(dir: &Path) -> Result<Self, JournalError> {
        let name = dir.file_name().ok_or_else(|| JournalError::Io {
            context: format!("naming the files next to {}", dir.display()),
            source: io::Error::other("the journal's path does not end in a name"),
        })?;
        let parent = match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let sibling = |suffix: &str| {
            let mut file = OsString::from(".");
            file.push(name);
            file.push(suffix);
            parent.join(file)
        };
        Ok(Self {
            copy: sibling(".copy"),
            original: sibling(".original"),
            superseded: sibling(".superseded"),
            discard: sibling(".discard"),
            parent,
        })
    }
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> JournalError {
    move |source| JournalError::Io { context, source }
}

fn exists(path: &Path) -> Result<bool, JournalError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(io_error(format!("looking at {}", path.display()))(err)),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Renames and makes the rename durable.
fn rename(from: &Path, to: &Path, parent: &Path) -> Result<(), JournalError> {
    fs::rename(from, to)
        .and_then(|()| sync_dir(parent))
        .map_err(io_error(format!(
            "renaming {} to {}",
            from.display(),
            to.display()
        )))
}

fn remove_tree(path: &Path) -> Result<(), JournalError> {
    match fs::remove_dir_all(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => {
            Err(io_error(format!("removing {}", path.display()))(err))
        }
        _ => Ok(()),
    }
}

fn is_tagged(dir: &Path) -> bool {
    fs::symlink_metadata(dir.join(COPY_TAG)).is_ok_and(|meta| meta.is_file())
}

fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|mut items| items.next().is_none())
}

/// Settles what a crash during [`place_copy`] or [`Placed`] left next to `dir` (see the module
/// comment); writes nothing when there is nothing to settle.
pub(crate) fn resolve(dir: &Path) -> Result<(), JournalError> {
    let siblings = Siblings::of(dir)?;
    let original = exists(&siblings.original)?;
    let copy = exists(&siblings.copy)?;
    let discard = exists(&siblings.discard)?;
    let superseded = exists(&siblings.superseded)?;
    let tagged = is_tagged(dir);
    if !(original || copy || discard || superseded || tagged) {
        return Ok(());
    }
    let corrupt = |detail: String| JournalError::Corrupt {
        path: dir.to_path_buf(),
        detail: format!("{detail}; nothing was touched"),
    };
    // A process in the middle of the sequence holds this lock until it committed or undid it,
    // and a live journal's sled holds it on `J/db`.
    let db = if original {
        siblings.original.join(SLED_DB_FILE)
    } else {
        dir.join(SLED_DB_FILE)
    };
    let _lock = match db_lock::try_lock(&db) {
        Ok(Some(lock)) => Some(lock),
        Ok(None) => {
            return Err(JournalError::Locked {
                path: dir.to_path_buf(),
                detail: format!("{} is locked: it is being opened or is open", db.display()),
            })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(io_error(format!("locking {}", db.display()))(err)),
    };
    if original && superseded {
        return Err(corrupt(format!(
            "{} and {} are both there, which crewd never leaves",
            siblings.original.display(),
            siblings.superseded.display()
        )));
    }
    if copy {
        remove_tree(&siblings.copy)?;
    }
    if discard {
        remove_tree(&siblings.discard)?;
    }
    if original {
        match fs::symlink_metadata(dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Ok(meta) if meta.is_dir() && is_tagged(dir) => {
                rename(dir, &siblings.discard, &siblings.parent)?;
                remove_tree(&siblings.discard)?;
            }
            Ok(meta) if meta.is_dir() && is_empty_dir(dir) => fs::remove_dir(dir)
                .map_err(io_error(format!("removing the empty {}", dir.display())))?,
            Ok(_) => {
                return Err(corrupt(format!(
                    "{} is there beside it, and this is not a copy crewd made: one of the two \
                     is the journal",
                    siblings.original.display()
                )))
            }
            Err(err) => return Err(io_error(format!("looking at {}", dir.display()))(err)),
        }
        return rename(&siblings.original, dir, &siblings.parent);
    }
    if superseded {
        if !dir.join(SLED_DB_FILE).is_file() {
            return Err(corrupt(format!(
                "it holds no sled database, and {} (an older copy of the journal) is there",
                siblings.superseded.display()
            )));
        }
        remove_tree(&siblings.superseded)?;
    }
    if tagged {
        untag(dir)?;
    }
    Ok(())
}

fn untag(dir: &Path) -> Result<(), JournalError> {
    fs::remove_file(dir.join(COPY_TAG))
        .and_then(|()| sync_dir(dir))
        .map_err(io_error(format!(
            "removing {}",
            dir.join(COPY_TAG).display()
        )))
}

/// The copy at the journal's path, the original set aside; [`Placed::commit`] or
/// [`Placed::undo`] ends it.
pub(crate) struct Placed {
    siblings: Siblings,
    /// sled's lock on the original's `db`, held until the end.
    _lock: File,
    /// fsyncs of every file and directory of the copy, running while sled recovers it.
    syncing: JoinHandle<io::Result<()>>,
}

/// Steps 1–3 of the module comment: on success the copy is at `dir`, the original set aside.
/// `Ok(None)`: the files are locked (open, or being opened).
pub(crate) fn place_copy(dir: &Path, why: &str) -> Result<Option<Placed>, JournalError> {
    let siblings = Siblings::of(dir)?;
    let lock = match db_lock::try_lock(&dir.join(SLED_DB_FILE)) {
        Ok(Some(lock)) => lock,
        Ok(None) => return Ok(None),
        Err(err) => {
            return Err(io_error(format!(
                "locking {}",
                dir.join(SLED_DB_FILE).display()
            ))(err))
        }
    };
    // Checked under the lock: another process may have got here first.
    if exists(&siblings.original)? || exists(&siblings.copy)? || is_tagged(dir) {
        return Ok(None);
    }
    let copied = copy_files(dir, &siblings.copy).map_err(|err| {
        let _ = fs::remove_dir_all(&siblings.copy);
        io_error(format!(
            "copying {} to {} to judge it before opening it ({why}; this takes as much free \
             space as the journal occupies)",
            dir.display(),
            siblings.copy.display()
        ))(err)
    });
    let files = copied?;
    reached(Step::Copied);
    let syncing = std::thread::spawn(move || files.iter().try_for_each(File::sync_all));
    if let Err(err) = rename(dir, &siblings.original, &siblings.parent) {
        let _ = fs::remove_dir_all(&siblings.copy);
        return Err(err);
    }
    reached(Step::SetAside);
    if let Err(err) = rename(&siblings.copy, dir, &siblings.parent) {
        // Back as it was; if that fails too, the next start-up puts it back.
        let _ = rename(&siblings.original, dir, &siblings.parent);
        let _ = fs::remove_dir_all(&siblings.copy);
        return Err(err);
    }
    reached(Step::InPlace);
    Ok(Some(Placed {
        siblings,
        _lock: lock,
        syncing,
    }))
}

/// Makes `to`, tags it, copies every file of the journal in `dir` into it; returns the copied
/// files and directories, opened, for their fsync (the directories last).
fn copy_files(dir: &Path, to: &Path) -> io::Result<Vec<File>> {
    fs::create_dir(to)?;
    let mut tag = File::create(to.join(COPY_TAG))?;
    tag.write_all(TAG_TEXT)?;
    tag.sync_all()?;
    sync_dir(to)?;
    if let Some(parent) = to.parent() {
        sync_dir(parent)?;
    }
    reached(Step::Tagged);
    let mut dirs = vec![to.to_path_buf()];
    let mut files = Vec::new();
    let mut rels = seal::sled_files(dir)?;
    rels.extend(
        [MARKER_FILE, ACKED_FILE]
            .map(PathBuf::from)
            .into_iter()
            .filter(|rel| dir.join(rel).is_file()),
    );
    for (at, rel) in rels.iter().enumerate() {
        let target = to.join(rel);
        if let Some(parent) = target.parent() {
            if !parent.exists() {
                fs::create_dir_all(parent)?;
                dirs.push(parent.to_path_buf());
            }
        }
        fs::copy(dir.join(rel), &target)?;
        files.push(File::open(&target)?);
        if at == 0 {
            reached(Step::Copying);
        }
    }
    // sled expects its blobs directory; a journal without blobs may not have one.
    let blobs = to.join("blobs");
    if !blobs.exists() {
        fs::create_dir(&blobs)?;
        dirs.push(blobs);
    }
    // Deepest first, so that a directory is synced after what it holds.
    dirs.reverse();
    for dir in dirs {
        files.push(File::open(dir)?);
    }
    Ok(files)
}

impl Placed {
    /// Step 5: the copy at `dir`, judged sound and still not written by anyone else, becomes the
    /// journal. On an error before the commit the original is put back (`undo`).
    pub(crate) fn commit(self, dir: &Path) -> Result<(), JournalError> {
        let synced = match self.syncing.join() {
            Ok(synced) => synced,
            Err(_) => Err(io::Error::other("the thread syncing the copy panicked")),
        }
        .and_then(|()| sync_dir(dir))
        .map_err(io_error(format!(
            "syncing the copy of the journal at {}",
            dir.display()
        )));
        let siblings = self.siblings;
        let committed = synced
            .and_then(|()| rename(&siblings.original, &siblings.superseded, &siblings.parent));
        if let Err(err) = committed {
            return Err(undo(&siblings, dir, err));
        }
        reached(Step::Committed);
        // From here on nothing can fail the open: the next start-up finishes what is left.
        let _ = remove_tree(&siblings.superseded);
        reached(Step::Removed);
        let _ = untag(dir);
        Ok(())
    }

    /// Step 6: puts the original back where it was, untouched, and removes the copy; returns
    /// `err` (what went wrong), or what stopped the undoing.
    pub(crate) fn undo(self, dir: &Path, err: JournalError) -> JournalError {
        // The copy's fsyncs are of no use any more; the thread ends by itself.
        drop(self.syncing);
        undo(&self.siblings, dir, err)
    }
}

fn undo(siblings: &Siblings, dir: &Path, err: JournalError) -> JournalError {
    let undone = rename(dir, &siblings.discard, &siblings.parent).and_then(|()| {
        reached(Step::Discarded);
        rename(&siblings.original, dir, &siblings.parent)
    });
    match undone {
        Ok(()) => {
            let _ = remove_tree(&siblings.discard);
            err
        }
        Err(JournalError::Io { context, source }) => JournalError::Io {
            context: format!(
                "{context}, putting the journal back after: {err} (the next start-up puts it \
                 back from {})",
                siblings.original.display()
            ),
            source,
        },
        Err(other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Entry, Journal, SledJournal, DEFAULT_CACHE_BYTES};
    use std::collections::BTreeMap;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::time::{Duration, Instant};

    const EVENTS: u64 = 500;

    fn entry(seq: u64) -> Entry {
        Entry {
            seq,
            run: Some(format!("run-{}", seq % 7)),
            bytes: format!("event {seq} ").repeat(10).into_bytes(),
        }
    }

    /// Waits out the lock of a handle dropped a moment ago (sled releases it from a thread).
    fn open(dir: &Path) -> Result<SledJournal, JournalError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match SledJournal::open(dir, DEFAULT_CACHE_BYTES) {
                Err(JournalError::Locked { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                other => return other,
            }
        }
    }

    /// A journal of `EVENTS` events as a crash leaves it: no seal.
    fn unsealed_journal(dir: &Path) {
        let journal = open(dir).unwrap();
        for first in (1..=EVENTS).step_by(50) {
            let entries: Vec<Entry> = (first..first + 50).map(entry).collect();
            journal.append(&entries).unwrap();
        }
        journal.write_snapshot(EVENTS, b"state").unwrap();
        drop(journal);
        // The clean close seals once sled let go; wait for that, then remove the seal.
        let seal = dir.join(seal::SEAL_FILE);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !seal.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        fs::remove_file(seal).unwrap();
    }

    fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(path) = stack.pop() {
            for item in fs::read_dir(&path).unwrap() {
                let path = item.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.insert(path.clone(), fs::read(&path).unwrap());
                }
            }
        }
        out
    }

    fn siblings(parent: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(parent)
            .unwrap()
            .map(|item| item.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Opens with a crash injected at `step`: the panic stops the sequence there, and nothing
    /// cleans up after it (sled's handle, if there was one, is dropped while unwinding).
    fn crash_at(dir: &Path, step: Step) {
        CRASH_AT.with(|at| at.set(Some(step)));
        let result = catch_unwind(AssertUnwindSafe(|| open(dir)));
        CRASH_AT.with(|at| at.set(None));
        assert!(
            result.is_err(),
            "{step:?}: the open went past the injected crash"
        );
    }

    fn assert_everything(journal: &SledJournal, step: Step) {
        assert_eq!(journal.last_seq(), EVENTS, "{step:?}");
        let all = journal.read_after(0, usize::MAX).unwrap();
        assert_eq!(all.len() as u64, EVENTS, "{step:?}");
        assert!(
            all.iter().all(|(seq, bytes)| *bytes == entry(*seq).bytes),
            "{step:?}"
        );
        assert_eq!(
            journal
                .read_run_after("run-3", 0, usize::MAX)
                .unwrap()
                .len(),
            (1..=EVENTS).filter(|seq| seq % 7 == 3).count(),
            "{step:?}"
        );
        assert_eq!(
            journal.read_snapshot().unwrap(),
            Some((EVENTS, b"state".to_vec())),
            "{step:?}"
        );
    }

    #[test]
    fn a_crash_at_any_step_of_judging_a_copy_opens_with_everything_next_time() {
        use Step::*;
        for step in [
            Tagged, Copying, Copied, SetAside, InPlace, Judged, Committed, Removed,
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("journal");
            unsealed_journal(&dir);
            crash_at(&dir, step);
            let journal = open(&dir).unwrap_or_else(|err| panic!("{step:?}: {err}"));
            assert_everything(&journal, step);
            assert_eq!(siblings(tmp.path()), ["journal"], "{step:?}");
            assert!(!dir.join(COPY_TAG).exists(), "{step:?}");
            // And it goes on as the journal.
            journal.append(&[entry(EVENTS + 1)]).unwrap();
            drop(journal);
            assert_eq!(open(&dir).unwrap().last_seq(), EVENTS + 1, "{step:?}");
        }
    }

    #[test]
    fn a_crash_while_judging_a_damaged_journal_leaves_it_refused_and_untouched() {
        use Step::*;
        for step in [Tagged, Copying, Copied, SetAside, InPlace, Discarded] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("journal");
            unsealed_journal(&dir);
            // Cut `db` to zero: sled would start an empty database over the acknowledged one.
            fs::write(dir.join("db"), b"").unwrap();
            let before = files(&dir);
            crash_at(&dir, step);
            match open(&dir) {
                Err(JournalError::Corrupt { path, .. }) => assert_eq!(path, dir, "{step:?}"),
                other => panic!("{step:?}: expected Corrupt, got {other:?}"),
            }
            assert!(files(&dir) == before, "{step:?}: the files changed");
            assert_eq!(siblings(tmp.path()), ["journal"], "{step:?}");
        }
    }
}
