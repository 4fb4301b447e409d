//! The trait's contract, checked against both implementations with the same test functions.

use crew_journal::{Entry, Journal, JournalError, MemJournal, SledJournal, DEFAULT_CACHE_BYTES};

fn entry(seq: u64, run: Option<&str>) -> Entry {
    Entry {
        seq,
        run: run.map(str::to_owned),
        bytes: payload(seq),
    }
}

fn payload(seq: u64) -> Vec<u8> {
    format!("event {seq}").into_bytes()
}

fn seqs(items: &[(u64, Vec<u8>)]) -> Vec<u64> {
    items.iter().map(|(seq, _)| *seq).collect()
}

/// Appends seqs 1..=9: runs a and b interleaved, two entries without a run, in three calls.
fn populate(journal: &dyn Journal) {
    let runs = [
        Some("a"),
        Some("b"),
        Some("a"),
        None,
        Some("b"),
        Some("a"),
        Some("a"),
        None,
        Some("b"),
    ];
    let all: Vec<Entry> = (1..=9)
        .zip(runs)
        .map(|(seq, run)| entry(seq, run))
        .collect();
    journal.append(&all[0..1]).unwrap();
    journal.append(&all[1..6]).unwrap();
    journal.append(&all[6..9]).unwrap();
}

fn round_trip(journal: &dyn Journal) {
    assert_eq!(journal.last_seq(), 0);
    assert_eq!(journal.read_after(0, 100).unwrap(), vec![]);
    journal.append(&[]).unwrap();
    assert_eq!(journal.last_seq(), 0);
    populate(journal);
    assert_eq!(journal.last_seq(), 9);

    let all = journal.read_after(0, usize::MAX).unwrap();
    assert_eq!(seqs(&all), (1..=9).collect::<Vec<_>>());
    for (seq, bytes) in &all {
        assert_eq!(bytes, &payload(*seq), "bytes of seq {seq}");
    }

    let cases: Vec<(u64, usize, Vec<u64>)> = vec![
        (0, 3, vec![1, 2, 3]),
        (3, 2, vec![4, 5]),
        (8, 10, vec![9]),
        (9, 10, vec![]),
        (100, 10, vec![]),
        (u64::MAX, 10, vec![]),
        (0, 0, vec![]),
    ];
    for (after, limit, want) in cases {
        let got = journal.read_after(after, limit).unwrap();
        assert_eq!(seqs(&got), want, "read_after({after}, {limit})");
    }

    let run_cases: Vec<(&str, u64, usize, Vec<u64>)> = vec![
        ("a", 0, 100, vec![1, 3, 6, 7]),
        ("a", 1, 100, vec![3, 6, 7]),
        // seq 4 is inside the second append, whose group for run a holds 3 and 6
        ("a", 4, 100, vec![6, 7]),
        ("a", 3, 1, vec![6]),
        ("a", 0, 2, vec![1, 3]),
        ("a", 7, 100, vec![]),
        ("b", 0, 100, vec![2, 5, 9]),
        ("b", 2, 100, vec![5, 9]),
        ("b", 5, 100, vec![9]),
        ("b", 0, 0, vec![]),
        ("c", 0, 100, vec![]),
        ("", 0, 100, vec![]),
        // a run whose name extends another's
        ("ab", 0, 100, vec![]),
    ];
    for (run, after, limit, want) in run_cases {
        let got = journal.read_run_after(run, after, limit).unwrap();
        assert_eq!(
            seqs(&got),
            want,
            "read_run_after({run:?}, {after}, {limit})"
        );
        for (seq, bytes) in got {
            assert_eq!(bytes, payload(seq));
        }
    }
}

fn out_of_order_appends_change_nothing(journal: &dyn Journal) {
    journal
        .append(&[entry(1, Some("a")), entry(2, None)])
        .unwrap();
    let cases: Vec<(&str, Vec<Entry>, u64, u64)> = vec![
        ("repeat last", vec![entry(2, None)], 3, 2),
        ("gap", vec![entry(4, None)], 3, 4),
        ("zero", vec![entry(0, None)], 3, 0),
        ("gap inside", vec![entry(3, None), entry(5, None)], 4, 5),
        (
            "repeat inside",
            vec![entry(3, Some("a")), entry(3, Some("a"))],
            4,
            3,
        ),
        (
            "decreasing",
            vec![entry(3, None), entry(4, None), entry(2, None)],
            5,
            2,
        ),
    ];
    for (name, entries, expected, got) in cases {
        match journal.append(&entries) {
            Err(JournalError::OutOfOrder {
                expected: e,
                got: g,
            }) => {
                assert_eq!((e, g), (expected, got), "{name}")
            }
            other => panic!("{name}: expected OutOfOrder, got {other:?}"),
        }
        assert_eq!(journal.last_seq(), 2, "{name}");
        assert_eq!(
            seqs(&journal.read_after(0, 100).unwrap()),
            vec![1, 2],
            "{name}"
        );
        assert_eq!(
            seqs(&journal.read_run_after("a", 0, 100).unwrap()),
            vec![1],
            "{name}"
        );
    }
    let err = journal.append(&[entry(3, Some("bad\0run"))]).unwrap_err();
    assert!(matches!(err, JournalError::InvalidRun { .. }), "{err}");
    assert_eq!(journal.last_seq(), 2);
    let err = journal.read_run_after("bad\0run", 0, 10).unwrap_err();
    assert!(matches!(err, JournalError::InvalidRun { .. }), "{err}");
    // still usable afterwards
    journal.append(&[entry(3, None)]).unwrap();
    assert_eq!(journal.last_seq(), 3);
}

fn snapshots(journal: &dyn Journal) {
    assert_eq!(journal.read_snapshot().unwrap(), None);
    journal.write_snapshot(0, b"empty state").unwrap();
    assert_eq!(
        journal.read_snapshot().unwrap(),
        Some((0, b"empty state".to_vec()))
    );
    populate(journal);
    journal.write_snapshot(5, b"state at 5").unwrap();
    assert_eq!(
        journal.read_snapshot().unwrap(),
        Some((5, b"state at 5".to_vec()))
    );
    journal.write_snapshot(9, b"").unwrap();
    assert_eq!(journal.read_snapshot().unwrap(), Some((9, Vec::new())));
    match journal.write_snapshot(10, b"future") {
        Err(JournalError::SnapshotAhead {
            seq: 10,
            last_seq: 9,
        }) => {}
        other => panic!("expected SnapshotAhead, got {other:?}"),
    }
    assert_eq!(journal.read_snapshot().unwrap(), Some((9, Vec::new())));
    // the latest write wins, even with an older seq
    journal.write_snapshot(7, b"rewound").unwrap();
    assert_eq!(
        journal.read_snapshot().unwrap(),
        Some((7, b"rewound".to_vec()))
    );
}

fn forget_run(journal: &dyn Journal) {
    populate(journal);
    // b owns the newest entry (9): forgetting it must not lower last_seq
    journal.forget_run("b").unwrap();
    assert_eq!(journal.last_seq(), 9);
    assert_eq!(
        seqs(&journal.read_after(0, 100).unwrap()),
        vec![1, 3, 4, 6, 7, 8]
    );
    assert_eq!(journal.read_run_after("b", 0, 100).unwrap(), vec![]);
    assert_eq!(
        seqs(&journal.read_run_after("a", 0, 100).unwrap()),
        vec![1, 3, 6, 7]
    );
    journal.forget_run("b").unwrap();
    journal.forget_run("never-existed").unwrap();
    let err = journal.forget_run("bad\0run").unwrap_err();
    assert!(matches!(err, JournalError::InvalidRun { .. }), "{err}");

    match journal.append(&[entry(9, Some("b"))]) {
        Err(JournalError::OutOfOrder {
            expected: 10,
            got: 9,
        }) => {}
        other => panic!("a forgotten seq must not be reused, got {other:?}"),
    }
    journal
        .append(&[entry(10, Some("b")), entry(11, Some("a"))])
        .unwrap();
    assert_eq!(
        seqs(&journal.read_run_after("b", 0, 100).unwrap()),
        vec![10]
    );
    journal.forget_run("a").unwrap();
    assert_eq!(seqs(&journal.read_after(0, 100).unwrap()), vec![4, 8, 10]);
    assert_eq!(journal.last_seq(), 11);
}

fn many_entries_and_runs(journal: &dyn Journal) {
    // More entries than one forget transaction removes, over several appends and runs.
    let mut seq = 0;
    for batch in 0..10 {
        let entries: Vec<Entry> = (0..1000)
            .map(|i| {
                seq += 1;
                let run = format!("run-{}", (batch + i) % 3);
                Entry {
                    seq,
                    run: Some(run),
                    bytes: vec![b'x'; 300],
                }
            })
            .collect();
        journal.append(&entries).unwrap();
    }
    assert_eq!(journal.last_seq(), 10_000);
    let run1 = seqs(&journal.read_run_after("run-1", 0, usize::MAX).unwrap());
    assert_eq!(run1.len(), 3333);
    assert!(run1.windows(2).all(|w| w[0] < w[1]));
    let page = seqs(&journal.read_run_after("run-1", 5000, 10).unwrap());
    let want: Vec<u64> = run1
        .iter()
        .copied()
        .filter(|s| *s > 5000)
        .take(10)
        .collect();
    assert_eq!(page, want);
    journal.forget_run("run-1").unwrap();
    assert_eq!(
        journal.read_after(0, usize::MAX).unwrap().len(),
        10_000 - 3333
    );
    assert_eq!(journal.read_run_after("run-1", 0, 10).unwrap(), vec![]);
    assert_eq!(journal.last_seq(), 10_000);
}

macro_rules! against_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn mem() {
                super::$name(&crew_journal::MemJournal::new());
            }

            #[test]
            fn sled() {
                let dir = tempfile::tempdir().unwrap();
                let journal = crew_journal::SledJournal::open(
                    &dir.path().join("journal"),
                    crew_journal::DEFAULT_CACHE_BYTES,
                )
                .unwrap();
                super::$name(&journal);
            }
        }
    )*};
}

against_both!(
    round_trip,
    out_of_order_appends_change_nothing,
    snapshots,
    forget_run,
    many_entries_and_runs,
);

#[test]
fn journals_are_shareable_trait_objects() {
    let dir = tempfile::tempdir().unwrap();
    let journals: Vec<std::sync::Arc<dyn Journal>> = vec![
        std::sync::Arc::new(MemJournal::new()),
        std::sync::Arc::new(SledJournal::open(dir.path(), DEFAULT_CACHE_BYTES).unwrap()),
    ];
    for journal in journals {
        // Several writers race; each retries on OutOfOrder, so all 4 x 25 appends land once.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let journal = journal.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        loop {
                            let seq = journal.last_seq() + 1;
                            let run = format!("t{t}");
                            match journal.append(&[entry(seq, Some(&run))]) {
                                Ok(()) => break,
                                Err(JournalError::OutOfOrder { .. }) => continue,
                                Err(err) => panic!("{err}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(journal.last_seq(), 100);
        assert_eq!(
            seqs(&journal.read_after(0, 1000).unwrap()),
            (1..=100).collect::<Vec<_>>()
        );
        for t in 0..4 {
            assert_eq!(
                journal
                    .read_run_after(&format!("t{t}"), 0, 1000)
                    .unwrap()
                    .len(),
                25
            );
        }
    }
}
