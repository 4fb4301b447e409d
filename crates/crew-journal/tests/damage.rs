//! Damage sled cannot see or would write over: packs missing or altered inside the log (found
//! when they are read), a journal cut after a crash (found by the acked file before sled
//! touches the files), and packs written before checksums (still read).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crew_journal::{Entry, Journal, JournalError};
use support::journal::{open_journal as open, raw_sled};
use support::{self_test_command, ChildLines};

mod support;

fn entry(seq: u64) -> Entry {
    Entry {
        seq,
        run: Some(format!("run-{}", seq % 3)),
        bytes: format!("event {seq} ").repeat(10).into_bytes(),
    }
}

fn append_all(journal: &dyn Journal, last: u64) {
    for chunk in (1..=last).collect::<Vec<_>>().chunks(50) {
        let entries: Vec<Entry> = chunk.iter().map(|s| entry(*s)).collect();
        journal.append(&entries).unwrap();
    }
}

fn pack_keys(db: &sled::Db) -> Vec<sled::IVec> {
    let log = db.open_tree("log").unwrap();
    log.range(&[0xFEu8][..]..&[0xFFu8][..])
        .map(|item| item.unwrap().0)
        .collect()
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

#[test]
fn packs_missing_or_altered_in_the_log_are_found_when_read() {
    type Change = fn(&sled::Tree, &[sled::IVec]);
    let cases: Vec<(&str, Change, &str)> = vec![
        (
            "a pack removed",
            |log, keys| {
                log.remove(&keys[keys.len() / 2]).unwrap();
            },
            "event packs are missing",
        ),
        (
            "a byte of a pack changed",
            |log, keys| {
                let key = &keys[keys.len() / 2];
                let mut value = log.get(key).unwrap().unwrap().to_vec();
                let at = value.len() - 3;
                value[at] ^= 0x01;
                log.insert(key, value).unwrap();
            },
            "checksum does not match",
        ),
    ];
    for (name, change, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        append_all(&open(&dir).unwrap(), 600);
        {
            let db = raw_sled(&dir);
            let keys = pack_keys(&db);
            assert!(keys.len() > 4, "{name}");
            change(&db.open_tree("log").unwrap(), &keys);
            db.flush().unwrap();
        }
        let journal = open(&dir).unwrap();
        match journal.read_after(0, usize::MAX) {
            Err(JournalError::Corrupt { detail, .. }) => {
                assert!(detail.contains(want), "{name}: {detail}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// Rewrites every checked pack (0xFF, last seq, CRC) in the layout packs had before checksums.
fn strip_checksums(dir: &Path) {
    let db = raw_sled(dir);
    let log = db.open_tree("log").unwrap();
    for key in pack_keys(&db) {
        let value = log.get(&key).unwrap().unwrap();
        assert_eq!(value[0], 0xFF);
        log.insert(&key, &value[13..]).unwrap();
    }
    db.flush().unwrap();
}

#[test]
fn packs_written_before_checksums_still_read_append_and_forget() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    append_all(&open(&dir).unwrap(), 300);
    strip_checksums(&dir);
    let journal = open(&dir).unwrap();
    assert_eq!(journal.last_seq(), 300);
    let all = journal.read_after(0, usize::MAX).unwrap();
    assert_eq!(all.len(), 300);
    assert!(all.iter().all(|(seq, bytes)| *bytes == entry(*seq).bytes));
    // New packs are checked, after the old ones; forgetting works across both.
    journal.append(&[entry(301), entry(302)]).unwrap();
    journal.forget_run("run-1").unwrap();
    let left = journal.read_after(0, usize::MAX).unwrap();
    assert!(left.iter().all(|(seq, _)| seq % 3 != 1));
    assert_eq!(left.len(), 302 - 101);
    drop(journal);
    let journal = open(&dir).unwrap();
    assert_eq!(journal.read_after(0, usize::MAX).unwrap(), left);
    assert_eq!(journal.last_seq(), 302);
}

#[test]
fn forgetting_a_whole_pack_keeps_the_seqs_tiled() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    let journal = open(&dir).unwrap();
    append_all(&journal, 100);
    // One append of a single run: its packs hold nothing else.
    let only: Vec<Entry> = (101..=140)
        .map(|seq| Entry {
            run: Some("alone".into()),
            ..entry(seq)
        })
        .collect();
    journal.append(&only).unwrap();
    append_all_from(&journal, 141, 200);
    journal.forget_run("alone").unwrap();
    let seqs: Vec<u64> = journal
        .read_after(0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(seq, _)| seq)
        .collect();
    let want: Vec<u64> = (1..=100).chain(141..=200).collect();
    assert_eq!(seqs, want);
    drop(journal);
    assert_eq!(open(&dir).unwrap().last_seq(), 200);
}

fn append_all_from(journal: &dyn Journal, first: u64, last: u64) {
    let entries: Vec<Entry> = (first..=last).map(entry).collect();
    journal.append(&entries).unwrap();
}

const CHILD_DIR: &str = "CREW_JOURNAL_DAMAGE_CHILD_DIR";

/// The child: appends, says how far, and waits to be killed (no clean close, no seal).
#[test]
fn crashing_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    println!();
    let journal = open(Path::new(&dir)).unwrap();
    append_all(&journal, 2000);
    println!("ACKED {}", journal.last_seq());
    std::thread::sleep(std::time::Duration::from_secs(600));
}

/// sled preallocates; the length up to the last byte it wrote.
fn written_len(db: &[u8]) -> usize {
    db.iter().rposition(|b| *b != 0).map_or(0, |last| last + 1)
}

#[test]
fn a_journal_cut_after_a_crash_is_refused_untouched() {
    type Damage = fn(&mut Vec<u8>);
    let cases: Vec<(&str, Damage)> = vec![
        ("cut tail", |db| db.truncate(written_len(db) - 4096)),
        ("flipped byte in the tail", |db| {
            let at = written_len(db) - 2048;
            db[at] ^= 0x04
        }),
    ];
    for (name, damage) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("journal");
        let mut command = self_test_command("crashing_child");
        command.env(CHILD_DIR, &dir);
        let mut child = ChildLines::spawn(command);
        let acked = loop {
            let line = child.next_line().expect("the child stopped early");
            if let Some(n) = line.strip_prefix("ACKED ") {
                break n.parse::<u64>().unwrap();
            }
        };
        child.kill();
        let _ = child.finish();
        assert_eq!(acked, 2000);
        let db_path = dir.join("db");
        let mut db = fs::read(&db_path).unwrap();
        damage(&mut db);
        fs::write(&db_path, &db).unwrap();
        let before = files(&dir);
        match open(&dir) {
            Err(JournalError::Corrupt { detail, .. }) => {
                assert!(detail.contains("acknowledged"), "{name}: {detail}")
            }
            Ok(journal) => panic!("{name}: opened with last seq {}", journal.last_seq()),
            Err(other) => panic!("{name}: {other}"),
        }
        assert!(files(&dir) == before, "{name}: the files changed");
    }
}
