//! What judging a journal before sled opens it costs at start-up (issue 14): a journal of
//! `--events` events of 250 bytes (runs of 20, group commits of 1,000, a snapshot record every
//! 10,000, as crewd writes them) is opened, each time on a fresh copy of the same files, as:
//!
//! - `raw sled`: `sled::Config::open` plus reading the newest key, which is all the journal did
//!   before it judged anything (the baseline);
//! - `sealed`: `SledJournal::open` after a clean close, checking every file against the seal;
//! - `unsealed`: `SledJournal::open` as after a crash (no seal): the files are copied, the copy
//!   put at the journal's path and recovered by sled, and kept as the journal when sound;
//!
//! then the replay crewd does next (`read_after` of the last 10,000 events) for scale, and the
//! clean close that writes the seal. The page cache is warm (the copies were just written).
//!
//! `cargo run --release -p crew-journal --example open_probe -- [--events 1000000] [--dir DIR]
//! [--rounds 3]`

use crew_journal::{Entry, Journal, SledJournal, DEFAULT_CACHE_BYTES};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for item in std::fs::read_dir(from)? {
        let item = item?;
        let target = to.join(item.file_name());
        if item.file_type()?.is_dir() {
            copy_dir(&item.path(), &target)?;
        } else {
            std::fs::copy(item.path(), target)?;
        }
    }
    Ok(())
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|items| {
            items
                .flatten()
                .map(|item| match item.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&item.path()),
                    _ => item.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Waits until sled let go of `dir` (it releases its lock from a background thread).
fn open_retrying(dir: &Path) -> SledJournal {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match SledJournal::open(dir, DEFAULT_CACHE_BYTES) {
            Ok(journal) => return journal,
            Err(crew_journal::JournalError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(err) => panic!("opening {}: {err}", dir.display()),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut events, mut rounds) = (1_000_000u64, 3usize);
    let mut base = std::env::temp_dir();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--events" => events = value.parse()?,
            "--rounds" => rounds = value.parse()?,
            "--dir" => base = PathBuf::from(value),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let root = base.join(format!("crew-open-probe-{}", std::process::id()));
    let pristine = root.join("pristine");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());

    let started = Instant::now();
    {
        let journal = SledJournal::open(&pristine, DEFAULT_CACHE_BYTES)?;
        let mut seq = 0u64;
        while seq < events {
            let entries: Vec<Entry> = (seq + 1..=(seq + 1000).min(events))
                .map(|s| Entry {
                    seq: s,
                    run: Some(format!("run-{}", s / 20)),
                    bytes: format!("{{\"seq\":{s},\"pad\":\"{}\"}}", "e".repeat(220)).into_bytes(),
                })
                .collect();
            seq += entries.len() as u64;
            journal.append(&entries)?;
            if seq.is_multiple_of(10_000) {
                journal.write_snapshot(seq, &vec![b's'; 64 << 10])?;
            }
        }
    }
    println!(
        "wrote {events} events in {:.2} s; the journal takes {:.1} MiB",
        started.elapsed().as_secs_f64(),
        dir_bytes(&pristine) as f64 / (1 << 20) as f64
    );

    let (mut raw, mut sealed, mut unsealed, mut replay, mut close) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Baseline: raw sled on a copy.
        let dir = root.join(format!("raw-{round}"));
        copy_dir(&pristine, &dir)?;
        let t = Instant::now();
        let db = sled::Config::new()
            .path(&dir)
            .cache_capacity(DEFAULT_CACHE_BYTES)
            .mode(sled::Mode::LowSpace)
            .flush_every_ms(None)
            .open()?;
        let log = db.open_tree("log")?;
        let _ = log.last()?;
        raw.push(t.elapsed());
        drop((log, db));

        // Sealed: the journal as a clean close left it.
        let dir = root.join(format!("sealed-{round}"));
        copy_dir(&pristine, &dir)?;
        let t = Instant::now();
        let journal = open_retrying(&dir);
        sealed.push(t.elapsed());
        let t = Instant::now();
        let tail = journal.read_after(events.saturating_sub(10_000), usize::MAX)?;
        replay.push(t.elapsed());
        assert_eq!(tail.len() as u64, events.min(10_000));
        let t = Instant::now();
        drop(journal);
        close.push(t.elapsed());

        // Unsealed: as after a crash.
        let dir = root.join(format!("unsealed-{round}"));
        copy_dir(&pristine, &dir)?;
        std::fs::remove_file(dir.join("crew-journal.seal"))?;
        let t = Instant::now();
        let journal = open_retrying(&dir);
        unsealed.push(t.elapsed());
        assert_eq!(journal.last_seq(), events);
        drop(journal);
    }
    let _ = std::fs::remove_dir_all(&root);

    let median = |v: &mut Vec<Duration>| -> f64 {
        v.sort();
        v.get(v.len() / 2).map_or(0.0, Duration::as_secs_f64)
    };
    let (raw, sealed, unsealed, replay, close) = (
        median(&mut raw),
        median(&mut sealed),
        median(&mut unsealed),
        median(&mut replay),
        median(&mut close),
    );
    println!("medians of {rounds} rounds:");
    println!("  raw sled open (baseline)     {:8.1} ms", raw * 1e3);
    println!(
        "  sealed open                  {:8.1} ms = {:.2} x baseline",
        sealed * 1e3,
        sealed / raw
    );
    println!(
        "  unsealed open (after a crash) {:7.1} ms = {:.2} x baseline",
        unsealed * 1e3,
        unsealed / raw
    );
    println!(
        "  replay of the last 10,000    {:8.1} ms (start-up's next step)",
        replay * 1e3
    );
    println!("  clean close, seal included   {:8.1} ms", close * 1e3);
    println!(
        "  start-up (open + replay): sealed {:.2} x, unsealed {:.2} x the baseline's",
        (sealed + replay) / (raw + replay),
        (unsealed + replay) / (raw + replay)
    );
    Ok(())
}
