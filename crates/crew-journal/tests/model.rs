//! SledJournal against MemJournal (the model) under random appends, forgets, reads, reopens and
//! rewrites of the packed events into the older one-event-per-key layout. Entry sizes straddle
//! the pack size, so appends split into several packs and forgets rewrite shared packs.

mod support;

use crew_journal::{Entry, Journal, MemJournal, SledJournal};
use proptest::prelude::*;
use std::path::Path;
use support::journal::{open_journal, unpack_all};

const RUNS: [Option<&str>; 4] = [Some("a"), Some("b"), Some("c"), None];

#[derive(Debug, Clone)]
enum Op {
    /// (run index into RUNS, byte length) per entry.
    Append(Vec<(usize, usize)>),
    Forget(usize),
    ReadAfter(u64, usize),
    ReadRunAfter(usize, u64, usize),
    Reopen,
    /// Reopen after rewriting every pack as one key per event (journals written before packing).
    Legacy,
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![Just(0usize), 1usize..64, 200usize..400, 1500usize..3000];
    let limit = prop_oneof![1usize..4, Just(100usize), Just(usize::MAX)];
    prop_oneof![
        4 => prop::collection::vec((0..RUNS.len(), size), 1..40).prop_map(Op::Append),
        1 => (0..3usize).prop_map(Op::Forget),
        2 => (0u64..200, limit.clone()).prop_map(|(a, l)| Op::ReadAfter(a, l)),
        2 => (0..3usize, 0u64..200, limit).prop_map(|(r, a, l)| Op::ReadRunAfter(r, a, l)),
        1 => Just(Op::Reopen),
        1 => Just(Op::Legacy),
    ]
}

fn open(dir: &Path) -> SledJournal {
    open_journal(dir).expect("open")
}

fn bytes(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 31 + i) as u8).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn sled_journal_behaves_like_the_model(ops in prop::collection::vec(op(), 1..14)) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("journal");
        let model = MemJournal::new();
        let mut journal = Some(open(&dir));
        for op in ops {
            let Some(sled) = journal.as_ref() else { break };
            match op {
                Op::Append(specs) => {
                    let first = model.last_seq() + 1;
                    let entries: Vec<Entry> = specs
                        .iter()
                        .zip(first..)
                        .map(|((run, len), seq)| Entry {
                            seq,
                            run: RUNS[*run].map(str::to_owned),
                            bytes: bytes(seq, *len),
                        })
                        .collect();
                    model.append(&entries).expect("model append");
                    sled.append(&entries).expect("sled append");
                }
                Op::Forget(run) => {
                    let run = RUNS[run].unwrap_or("a");
                    model.forget_run(run).expect("model forget");
                    sled.forget_run(run).expect("sled forget");
                }
                Op::ReadAfter(after, limit) => {
                    prop_assert_eq!(
                        sled.read_after(after, limit).expect("sled read"),
                        model.read_after(after, limit).expect("model read"),
                        "read_after({}, {})", after, limit
                    );
                }
                Op::ReadRunAfter(run, after, limit) => {
                    let run = RUNS[run].unwrap_or("a");
                    prop_assert_eq!(
                        sled.read_run_after(run, after, limit).expect("sled read"),
                        model.read_run_after(run, after, limit).expect("model read"),
                        "read_run_after({}, {}, {})", run, after, limit
                    );
                }
                Op::Reopen | Op::Legacy => {
                    drop(journal.take());
                    if matches!(op, Op::Legacy) {
                        unpack_all(&dir);
                    }
                    journal = Some(open(&dir));
                }
            }
            let sled = journal.as_ref().expect("open journal");
            prop_assert_eq!(sled.last_seq(), model.last_seq());
        }
        if let Some(sled) = journal.as_ref() {
            prop_assert_eq!(
                sled.read_after(0, usize::MAX).expect("sled read"),
                model.read_after(0, usize::MAX).expect("model read")
            );
            for run in ["a", "b", "c"] {
                prop_assert_eq!(
                    sled.read_run_after(run, 0, usize::MAX).expect("sled read"),
                    model.read_run_after(run, 0, usize::MAX).expect("model read")
                );
            }
        }
    }
}
