//! Opening, reopening and refusing damaged journals (SledJournal only).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crew_journal::{Entry, Journal, JournalError, SledJournal, DEFAULT_CACHE_BYTES};
// The journal reopened right after a handle was dropped (sled releases the lock a moment later).
use support::journal::{open_journal as open, raw_sled, unpack_all};

mod support;

fn entry(seq: u64, run: Option<&str>) -> Entry {
    Entry {
        seq,
        run: run.map(str::to_owned),
        bytes: format!("event {seq}").repeat(20).into_bytes(),
    }
}

/// A closed journal with 300 entries over runs a/b, a snapshot, and run b (the newest) forgotten.
fn closed_journal(dir: &Path) {
    let journal = open(dir).unwrap();
    for chunk in (1..=300u64).collect::<Vec<_>>().chunks(30) {
        let entries: Vec<Entry> = chunk
            .iter()
            .map(|seq| entry(*seq, Some(if seq % 2 == 0 { "a" } else { "b" })))
            .collect();
        journal.append(&entries).unwrap();
    }
    journal.write_snapshot(250, b"state").unwrap();
    journal.forget_run("b").unwrap();
    drop(journal);
    // sled writes its own snapshot file (snap.*) when it recovers, so reopen once to have one.
    // sled's background threads release the file lock shortly after the drop, not at it.
    drop(open(dir).unwrap());
    assert!(!snapshot_files(dir).is_empty());
}

/// Every file under `dir` with its contents.
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

#[test]
fn reopen_keeps_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    closed_journal(&dir);
    for round in 0..2 {
        let journal = open(&dir).unwrap();
        assert_eq!(
            journal.last_seq(),
            300,
            "round {round}: forgetting the newest run keeps last_seq"
        );
        let all = journal.read_after(0, usize::MAX).unwrap();
        let want: Vec<u64> = (2..=300).step_by(2).collect();
        assert_eq!(all.iter().map(|(s, _)| *s).collect::<Vec<_>>(), want);
        assert!(all
            .iter()
            .all(|(seq, bytes)| *bytes == entry(*seq, None).bytes));
        let a = journal.read_run_after("a", 100, usize::MAX).unwrap();
        assert_eq!(a.len(), 100);
        assert_eq!(journal.read_run_after("b", 0, usize::MAX).unwrap(), vec![]);
        assert_eq!(
            journal.read_snapshot().unwrap(),
            Some((250, b"state".to_vec()))
        );
        assert!(journal.size_on_disk() > 0);
    }
    let journal = open(&dir).unwrap();
    journal.append(&[entry(301, Some("c"))]).unwrap();
    drop(journal);
    let journal = open(&dir).unwrap();
    assert_eq!(journal.last_seq(), 301);
    assert_eq!(journal.read_run_after("c", 0, 10).unwrap().len(), 1);
}

#[test]
fn the_snapshot_read_at_open_is_the_current_one() {
    // (writes after the open, the snapshot then expected)
    type Case = (&'static [(u64, &'static [u8])], (u64, &'static [u8]));
    let cases: [Case; 3] = [
        (&[], (250, b"state")),
        (&[(280, b"newer")], (280, b"newer")),
        (&[(260, b"one"), (290, b"two")], (290, b"two")),
    ];
    for (writes, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        closed_journal(&dir);
        let journal = open(&dir).unwrap();
        for (seq, bytes) in writes {
            journal.write_snapshot(*seq, bytes).unwrap();
        }
        // Twice: the copy kept from the open serves one read only.
        for _ in 0..2 {
            assert_eq!(
                journal.read_snapshot().unwrap(),
                Some((want.0, want.1.to_vec())),
                "{writes:?}"
            );
        }
        journal.write_snapshot(300, b"last").unwrap();
        assert_eq!(
            journal.read_snapshot().unwrap(),
            Some((300, b"last".to_vec()))
        );
    }
}

#[test]
fn fresh_and_empty_directories_open_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [tmp.path().join("missing/nested"), tmp.path().join("empty")];
    fs::create_dir(tmp.path().join("empty")).unwrap();
    for dir in cases {
        let journal = open(&dir).unwrap();
        assert_eq!(journal.last_seq(), 0, "{}", dir.display());
        drop(journal);
        // reopening a journal that never got an entry is fine too
        assert_eq!(open(&dir).unwrap().last_seq(), 0, "{}", dir.display());
    }
}

#[test]
fn a_first_open_interrupted_before_its_flush_opens_empty() {
    // sled created its files but the process died before our first flush and marker
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    drop(open(&dir).unwrap());
    fs::remove_file(dir.join("crew-journal.marker")).unwrap();
    fs::write(dir.join("db"), b"").unwrap();
    let journal = open(&dir).unwrap();
    assert_eq!(journal.last_seq(), 0);
    journal.append(&[entry(1, Some("a"))]).unwrap();
    drop(journal);
    assert_eq!(open(&dir).unwrap().last_seq(), 1);
}

#[test]
fn second_open_is_locked() {
    let tmp = tempfile::tempdir().unwrap();
    let _first = open(tmp.path()).unwrap();
    match SledJournal::open(tmp.path(), DEFAULT_CACHE_BYTES) {
        Err(JournalError::Locked { path, .. }) => assert_eq!(path, tmp.path()),
        other => panic!("expected Locked, got {other:?}"),
    }
}

fn garbage(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ 0xa5)
        .collect()
}

/// Overwrites the contents of every file sled wrote (keeping their lengths).
fn overwrite_sled_files(dir: &Path) {
    for (path, bytes) in files(dir) {
        if !path.ends_with("crew-journal.marker") {
            fs::write(&path, garbage(bytes.len().max(64), 7)).unwrap();
        }
    }
}

/// sled preallocates `db` with zeroes; the length up to the last byte it wrote.
fn written_len(db: &[u8]) -> usize {
    db.iter().rposition(|b| *b != 0).map_or(0, |last| last + 1)
}

fn snapshot_files(dir: &Path) -> Vec<PathBuf> {
    files(dir)
        .into_keys()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("snap."))
        })
        .collect()
}

enum Want {
    /// Refused as corrupt; `untouched`: not one byte changed (otherwise sled's recovery may have
    /// rewritten the unreadable part of `db`, but no file is gone).
    Corrupt { untouched: bool },
    /// Opens with everything `closed_journal` acknowledged.
    Intact,
}

fn assert_intact(journal: &SledJournal, context: &str) {
    assert_eq!(journal.last_seq(), 300, "{context}");
    let all = journal.read_after(0, usize::MAX).unwrap();
    let want: Vec<u64> = (2..=300).step_by(2).collect();
    assert_eq!(
        all.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        want,
        "{context}"
    );
    assert!(
        all.iter()
            .all(|(seq, bytes)| *bytes == entry(*seq, None).bytes),
        "{context}"
    );
    assert_eq!(
        journal.read_run_after("a", 0, usize::MAX).unwrap().len(),
        150,
        "{context}"
    );
    assert_eq!(
        journal.read_run_after("b", 0, usize::MAX).unwrap(),
        vec![],
        "{context}"
    );
    assert_eq!(
        journal.read_snapshot().unwrap(),
        Some((250, b"state".to_vec())),
        "{context}"
    );
}

#[test]
fn damaged_journals_are_refused_and_left_alone() {
    type Damage = fn(&Path);
    let cases: Vec<(&str, Damage, Want)> = vec![
        (
            "garbage over all sled files",
            overwrite_sled_files,
            Want::Corrupt { untouched: true },
        ),
        (
            "garbage over db",
            |dir| {
                let len = fs::metadata(dir.join("db")).unwrap().len() as usize;
                fs::write(dir.join("db"), garbage(len, 1)).unwrap();
            },
            Want::Corrupt { untouched: true },
        ),
        (
            "db truncated to zero",
            |dir| fs::write(dir.join("db"), b"").unwrap(),
            Want::Corrupt { untouched: true },
        ),
        (
            "db truncated to half",
            |dir| {
                let bytes = fs::read(dir.join("db")).unwrap();
                fs::write(dir.join("db"), &bytes[..written_len(&bytes) / 2]).unwrap();
            },
            Want::Corrupt { untouched: true },
        ),
        (
            "db deleted",
            |dir| fs::remove_file(dir.join("db")).unwrap(),
            Want::Corrupt { untouched: true },
        ),
        (
            "conf garbage",
            |dir| fs::write(dir.join("conf"), garbage(40, 2)).unwrap(),
            Want::Corrupt { untouched: true },
        ),
        (
            "conf deleted",
            |dir| fs::remove_file(dir.join("conf")).unwrap(),
            Want::Corrupt { untouched: true },
        ),
        (
            "sled snapshot garbage",
            |dir| {
                for path in snapshot_files(dir) {
                    let len = fs::metadata(&path).unwrap().len() as usize;
                    fs::write(&path, garbage(len, 4)).unwrap();
                }
            },
            Want::Corrupt { untouched: true },
        ),
        (
            "sled snapshot deleted",
            |dir| {
                for path in snapshot_files(dir) {
                    fs::remove_file(path).unwrap();
                }
            },
            Want::Intact,
        ),
        (
            "bogus newest sled snapshot file",
            |dir| fs::write(dir.join("snap.00000000FFFFFFF0"), garbage(500, 3)).unwrap(),
            Want::Corrupt { untouched: true },
        ),
        (
            "marker garbage",
            |dir| fs::write(dir.join("crew-journal.marker"), b"hello").unwrap(),
            Want::Corrupt { untouched: true },
        ),
        (
            "marker ahead of the log",
            |dir| {
                let marker = "crew-journal-marker 1\nacked 9999\nepoch 2\n";
                fs::write(dir.join("crew-journal.marker"), marker).unwrap();
            },
            Want::Corrupt { untouched: true },
        ),
        (
            "marker ahead of the forgets and snapshots",
            |dir| {
                let marker = "crew-journal-marker 1\nacked 300\nepoch 3\n";
                fs::write(dir.join("crew-journal.marker"), marker).unwrap();
            },
            Want::Corrupt { untouched: true },
        ),
        (
            "sled files replaced by a fresh sled db",
            |dir| {
                for path in snapshot_files(dir) {
                    fs::remove_file(path).unwrap();
                }
                for name in ["db", "conf"] {
                    fs::remove_file(dir.join(name)).unwrap();
                }
                sled::open(dir).unwrap().flush().unwrap();
            },
            Want::Corrupt { untouched: true },
        ),
        // The marker is only a check; without it the journal is what sled recovered.
        (
            "marker deleted",
            |dir| fs::remove_file(dir.join("crew-journal.marker")).unwrap(),
            Want::Intact,
        ),
        ("nothing", |_| {}, Want::Intact),
    ];
    for (name, damage, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        closed_journal(&dir);
        damage(&dir);
        let before = files(&dir);
        let result = open(&dir);
        let after = files(&dir);
        // Whatever was judged on a copy, nothing of it stays beside the journal.
        assert_eq!(siblings(tmp.path()), ["journal"], "{name}");
        match (want, result) {
            (Want::Intact, Ok(journal)) => assert_intact(&journal, name),
            (Want::Corrupt { untouched }, Err(JournalError::Corrupt { path, detail })) => {
                assert_eq!(path, dir, "{name}");
                assert!(!detail.is_empty(), "{name}");
                let gone: Vec<_> = before.keys().filter(|p| !after.contains_key(*p)).collect();
                assert!(gone.is_empty(), "{name}: files deleted: {gone:?}");
                if untouched {
                    assert!(before == after, "{name}: files were modified");
                }
            }
            (_, other) => panic!("{name}: unexpected outcome {other:?}"),
        }
    }
}

#[test]
fn flipped_bytes_never_go_unnoticed() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    closed_journal(&pristine);
    let original = files(&pristine);
    let db_len = written_len(&original[&pristine.join("db")]);
    let mut refused = 0;
    for i in 0..40usize {
        let offset = (i * db_len) / 40 + i * 13 % 97;
        let dir = tmp.path().join(format!("case{i}"));
        fs::create_dir(&dir).unwrap();
        for (path, bytes) in &original {
            let mut bytes = bytes.clone();
            if path.ends_with("db") {
                bytes[offset.min(db_len - 1)] ^= 0x5a;
            }
            fs::write(dir.join(path.file_name().unwrap()), bytes).unwrap();
        }
        match open(&dir) {
            Ok(journal) => assert_intact(&journal, &format!("byte {offset} flipped")),
            Err(JournalError::Corrupt { .. }) => refused += 1,
            Err(other) => panic!("byte {offset} flipped: unexpected error {other}"),
        }
    }
    // nearly all of what sled wrote is checksummed live data
    assert!(refused >= 30, "only {refused} of 40 flips were refused");
}

#[test]
fn directories_that_are_not_journals_are_refused_untouched() {
    type Setup = fn(&Path);
    let cases: Vec<(&str, Setup)> = vec![
        ("an unrelated file", |dir| {
            fs::create_dir(dir).unwrap();
            fs::write(dir.join("notes.txt"), b"not a journal").unwrap();
        }),
        ("an unrelated subdirectory", |dir| {
            fs::create_dir_all(dir.join("sub")).unwrap();
        }),
        ("only sled's conf", |dir| {
            fs::create_dir(dir).unwrap();
            fs::write(dir.join("conf"), b"segment_size: 524288").unwrap();
        }),
        ("a regular file", |dir| fs::write(dir, b"a file").unwrap()),
    ];
    for (name, setup) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        setup(&dir);
        let before = if dir.is_dir() {
            files(&dir)
        } else {
            BTreeMap::new()
        };
        match open(&dir) {
            Err(JournalError::Corrupt { path, .. }) => assert_eq!(path, dir, "{name}"),
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
        if dir.is_dir() {
            assert!(files(&dir) == before, "{name}: the directory was modified");
        } else {
            assert_eq!(fs::read(&dir).unwrap(), b"a file", "{name}");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for (path, bytes) in files(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(target, bytes).unwrap();
    }
}

#[test]
fn other_programs_sled_databases_are_refused_and_kept() {
    type Setup = fn(&sled::Db);
    let cases: Vec<(&str, Setup)> = vec![
        ("a db with its own tree", |db| {
            db.open_tree("users").unwrap().insert("k", "v").unwrap();
        }),
        ("a db using the default tree", |db| {
            db.insert("k", "v").unwrap();
        }),
    ];
    for (name, setup) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        {
            let db = sled::open(&dir).unwrap();
            setup(&db);
            db.flush().unwrap();
        }
        let before = files(&dir);
        match open(&dir) {
            Err(JournalError::Corrupt { detail, .. }) => {
                assert!(detail.contains("tree"), "{name}: {detail}")
            }
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
        let after = files(&dir);
        let gone: Vec<_> = before.keys().filter(|p| !after.contains_key(*p)).collect();
        assert!(gone.is_empty(), "{name}: deleted {gone:?}");
        // sled's recovery may have written its own snapshot file, but the data is still there
        // (checked on a copy: the refused handle keeps the lock)
        let copy = tmp.path().join("copy");
        copy_dir(&dir, &copy);
        let db = sled::open(&copy).unwrap();
        let value = match db.get("k").unwrap() {
            Some(value) => value,
            None => db.open_tree("users").unwrap().get("k").unwrap().unwrap(),
        };
        assert_eq!(value.as_ref(), b"v", "{name}");
    }
}

/// Raw sled on a journal directory, waiting out the lock of a handle this test just dropped.
/// Journals written before the run index moved into the `log` tree kept it in a `by_run` tree
/// (the same keys without the leading 0xFF tag). Opening one moves the index, and every run
/// reads, appends and forgets as before.
#[test]
fn a_journal_with_the_old_run_index_tree_is_moved_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    closed_journal(&dir);
    let reads = |journal: &SledJournal| -> Vec<Vec<(u64, Vec<u8>)>> {
        ["a", "b", "c"]
            .iter()
            .map(|run| journal.read_run_after(run, 0, usize::MAX).unwrap())
            .collect()
    };
    let want = {
        let journal = open(&dir).unwrap();
        journal
            .append(&[
                entry(301, Some("c")),
                entry(302, Some("a")),
                entry(303, Some("c")),
            ])
            .unwrap();
        reads(&journal)
    };
    assert_eq!(
        want.iter().map(Vec::len).collect::<Vec<_>>(),
        [151, 0, 2],
        "a: 150 + 1, b forgotten, c: 2"
    );
    {
        let db = raw_sled(&dir);
        let log = db.open_tree("log").unwrap();
        let by_run = db.open_tree("by_run").unwrap();
        let index: Vec<_> = log.range(&[0xFFu8][..]..).map(Result::unwrap).collect();
        assert!(index.len() >= 3, "{} index groups", index.len());
        for (key, value) in index {
            log.remove(&key).unwrap();
            by_run.insert(&key[1..], value).unwrap();
        }
        db.flush().unwrap();
    }

    let journal = open(&dir).unwrap();
    assert_eq!(reads(&journal), want);
    assert_eq!(journal.last_seq(), 303);
    journal.append(&[entry(304, Some("c"))]).unwrap();
    assert_eq!(
        journal.read_run_after("c", 301, usize::MAX).unwrap(),
        vec![(303, entry(303, None).bytes), (304, entry(304, None).bytes)]
    );
    journal.forget_run("a").unwrap();
    assert!(journal
        .read_run_after("a", 0, usize::MAX)
        .unwrap()
        .is_empty());
    assert_eq!(journal.read_after(0, usize::MAX).unwrap().len(), 3);
    drop(journal);

    let db = raw_sled(&dir);
    assert!(db.open_tree("by_run").unwrap().is_empty());
}

/// Journals written before events were packed kept one event per key (key = seq). Such a
/// journal opens with everything in place; new appends are packed beside the old keys, and
/// reads, paging and forgetting work across both.
#[test]
fn a_journal_with_one_event_per_key_reads_appends_and_forgets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    closed_journal(&dir);
    let want_all = {
        let journal = open(&dir).unwrap();
        journal.read_after(0, usize::MAX).unwrap()
    };
    assert_eq!(want_all.len(), 150, "run a's entries");
    // Rewrite every pack as the old layout: one key per event.
    assert!(unpack_all(&dir) > 0);

    let journal = open(&dir).unwrap();
    assert_eq!(journal.last_seq(), 300);
    assert_eq!(journal.read_after(0, usize::MAX).unwrap(), want_all);
    assert_eq!(
        journal.read_run_after("a", 0, usize::MAX).unwrap(),
        want_all
    );
    journal
        .append(&[
            entry(301, Some("a")),
            entry(302, Some("c")),
            entry(303, Some("a")),
        ])
        .unwrap();
    let seqs = |items: Vec<(u64, Vec<u8>)>| items.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    // Pages that straddle the last old key and the first pack.
    assert_eq!(seqs(journal.read_after(296, 3).unwrap()), [298, 300, 301]);
    assert_eq!(seqs(journal.read_after(300, 10).unwrap()), [301, 302, 303]);
    assert_eq!(
        seqs(journal.read_run_after("a", 297, 10).unwrap()),
        [298, 300, 301, 303]
    );
    assert_eq!(
        journal.read_after(302, 10).unwrap(),
        vec![(303, entry(303, None).bytes)]
    );
    journal.forget_run("a").unwrap();
    assert_eq!(seqs(journal.read_after(0, usize::MAX).unwrap()), [302]);
    assert!(journal
        .read_run_after("a", 0, usize::MAX)
        .unwrap()
        .is_empty());
    drop(journal);

    let journal = open(&dir).unwrap();
    assert_eq!(journal.last_seq(), 303);
    assert_eq!(seqs(journal.read_run_after("c", 0, 10).unwrap()), [302]);
    drop(journal);
    let db = raw_sled(&dir);
    let log = db.open_tree("log").unwrap();
    assert_eq!(log.range(..&[0xFEu8][..]).count(), 0, "no old key left");
}

/// What the journal's parent directory holds, by name.
fn siblings(parent: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(parent)
        .unwrap()
        .map(|item| item.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

const TAG: &str = "crew-journal.copy";

/// A copy crewd had begun: the tag and the first part of each file.
fn half_copy(from: &Path, to: &Path) {
    for (path, bytes) in files(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(target, &bytes[..bytes.len() / 2]).unwrap();
    }
    fs::write(to.join(TAG), b"crew-journal-copy 1\n").unwrap();
}

/// After a crash (no seal) sled recovers a copy at the journal's path; each state a crash can
/// leave on the way is settled to the original (or, once the copy was committed, to the copy).
#[test]
fn every_state_a_crash_while_judging_a_copy_leaves_opens_with_everything() {
    type Setup = fn(&Path, &Path);
    let cases: Vec<(&str, Setup)> = vec![
        ("a copy begun beside the journal", |parent, dir| {
            half_copy(dir, &parent.join(".journal.copy"))
        }),
        (
            "the journal set aside, no copy in its place",
            |parent, dir| fs::rename(dir, parent.join(".journal.original")).unwrap(),
        ),
        (
            "the journal set aside, the copy not yet moved",
            |parent, dir| {
                half_copy(dir, &parent.join(".journal.copy"));
                fs::rename(dir, parent.join(".journal.original")).unwrap();
            },
        ),
        (
            "the journal set aside, an empty directory in its place",
            |parent, dir| {
                fs::rename(dir, parent.join(".journal.original")).unwrap();
                fs::create_dir(dir).unwrap();
            },
        ),
        (
            "the journal set aside, a tagged copy in its place",
            |parent, dir| {
                let original = parent.join(".journal.original");
                fs::rename(dir, &original).unwrap();
                half_copy(&original, dir);
            },
        ),
        (
            "the journal set aside, the copy being discarded",
            |parent, dir| {
                let original = parent.join(".journal.original");
                fs::rename(dir, &original).unwrap();
                half_copy(&original, &parent.join(".journal.discard"));
            },
        ),
        (
            "the copy committed, the old journal not yet removed",
            |parent, dir| {
                copy_dir(dir, &parent.join(".journal.superseded"));
                fs::write(dir.join(TAG), b"crew-journal-copy 1\n").unwrap();
            },
        ),
        (
            "the copy committed and the old journal removed",
            |_, dir| {
                fs::write(dir.join(TAG), b"crew-journal-copy 1\n").unwrap();
            },
        ),
    ];
    for (name, setup) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        closed_journal(&dir);
        fs::remove_file(dir.join("crew-journal.seal")).unwrap();
        setup(tmp.path(), &dir);
        let journal = open(&dir).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_intact(&journal, name);
        assert_eq!(siblings(tmp.path()), ["journal"], "{name}");
        assert!(!dir.join(TAG).exists(), "{name}");
    }
}

/// States crewd never leaves (someone moved things by hand) are refused, nothing touched.
#[test]
fn a_set_aside_journal_beside_something_else_is_refused_untouched() {
    type Setup = fn(&Path, &Path);
    let cases: Vec<(&str, Setup)> = vec![
        (
            "the journal set aside, an untagged journal in its place",
            |parent, dir| copy_dir(dir, &parent.join(".journal.original")),
        ),
        (
            "both a set-aside and a superseded journal",
            |parent, dir| {
                fs::rename(dir, parent.join(".journal.original")).unwrap();
                copy_dir(
                    &parent.join(".journal.original"),
                    &parent.join(".journal.superseded"),
                );
            },
        ),
        ("a superseded journal and no journal", |parent, dir| {
            fs::rename(dir, parent.join(".journal.superseded")).unwrap()
        }),
    ];
    for (name, setup) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        closed_journal(&dir);
        fs::remove_file(dir.join("crew-journal.seal")).unwrap();
        setup(tmp.path(), &dir);
        let names = siblings(tmp.path());
        let before = files(tmp.path());
        match open(&dir) {
            Err(JournalError::Corrupt { path, detail }) => {
                assert_eq!(path, dir, "{name}");
                assert!(detail.contains("nothing was touched"), "{name}: {detail}");
            }
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(siblings(tmp.path()), names, "{name}");
        assert!(files(tmp.path()) == before, "{name}: files changed");
    }
}

/// A journal reached through a symlink keeps its link after a crash: the copy is judged beside
/// the files (not in their place, which would replace the link by a directory).
#[test]
fn a_symlinked_journal_stays_where_its_link_points() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("elsewhere");
    closed_journal(&real);
    fs::remove_file(real.join("crew-journal.seal")).unwrap();
    let dir = tmp.path().join("journal");
    std::os::unix::fs::symlink(&real, &dir).unwrap();
    let journal = open(&dir).unwrap();
    assert_intact(&journal, "symlinked");
    assert!(fs::symlink_metadata(&dir).unwrap().file_type().is_symlink());
    assert_eq!(siblings(tmp.path()), ["elsewhere", "journal"]);
}
