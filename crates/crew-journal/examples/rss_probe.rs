//! How much a process's RSS grows while `SledJournal` takes appends: the journal's share of
//! crewd's memory growth (`target/release/bench-memory` measures the whole daemon).
//!
//! Appends `--events` entries of 217 bytes (a typical encoded event) in groups of `--group`,
//! spread over runs of 3,700 events (a 1,000-task fake run) unless `--no-runs`, twice, and
//! prints the RSS growth of each half: the first includes what a fresh journal fills once
//! (sled's page cache, io buffers, page table), the second is the cost per event after that.
//!
//! `cargo run --release -p crew-journal --example rss_probe -- [--events 37000] [--group 2]
//! [--no-runs] [--cache-kib 1024] [--dir DIR]` (crewd's default cache is 1 MiB)

mod common;

use common::rss_kib;
use crew_journal::{Entry, Journal, SledJournal};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut events, mut group, mut runs) = (37_000u64, 2u64, true);
    let mut cache_kib = 1024u64;
    let mut dir = std::env::temp_dir();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--no-runs" => runs = false,
            "--events" => events = args.next().ok_or("--events N")?.parse()?,
            "--group" => group = args.next().ok_or("--group N")?.parse::<u64>()?.max(1),
            "--cache-kib" => cache_kib = args.next().ok_or("--cache-kib N")?.parse::<u64>()?.max(1),
            "--dir" => dir = PathBuf::from(args.next().ok_or("--dir DIR")?),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let tmp = tempfile::tempdir_in(&dir)?;
    let journal = SledJournal::open(tmp.path(), cache_kib << 10)?;
    let payload = vec![b'x'; 217];
    let start = rss_kib();
    let mut seq = 0;
    let mut marks = Vec::new();
    for half in 1..=2 {
        while seq < events * half {
            let entries: Vec<Entry> = (seq + 1..=seq + group)
                .map(|s| Entry {
                    seq: s,
                    run: runs.then(|| format!("run-{}", s / 3700)),
                    bytes: payload.clone(),
                })
                .collect();
            journal.append(&entries)?;
            seq += group;
        }
        marks.push(rss_kib());
    }
    // RSS can also shrink (sled's cache evicting, malloc trimming): signed differences.
    let kib = |v: u64| v as i64;
    let (first, second) = (kib(marks[0]) - kib(start), kib(marks[1]) - kib(marks[0]));
    println!(
        "{events} events (rounded up to whole groups) in groups of {group}{}: RSS {start} KiB at open, {first:+} KiB for the first {events}, {second:+} KiB for the next {events}",
        if runs { ", indexed by run" } else { "" }
    );
    Ok(())
}
