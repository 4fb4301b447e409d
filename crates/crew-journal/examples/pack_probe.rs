//! Why the journal packs an append's events into a few sled keys: raw sled, events of 220 bytes
//! written in group commits of `--batch` (one `apply_batch` + `flush` each), `--pack` events per
//! key. Prints durable events per second and the RSS growth.
//!
//! `cargo run --release -p crew-journal --example pack_probe -- [--pack 1] [--batch 1024]
//! [--events 400000] [--dir DIR]`. On the development machine (30 Nov 2026, ext4 disk),
//! batches of 1,024: 1 event per key 73k events/s, 8 per key 349k/s, 32 per key 502k/s.

mod common;

use common::rss_kib;
use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut pack, mut batch, mut events) = (1usize, 1024usize, 400_000usize);
    let mut dir = std::env::temp_dir();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--pack" => pack = value.parse()?,
            "--batch" => batch = value.parse()?,
            "--events" => events = value.parse()?,
            "--dir" => dir = PathBuf::from(value),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    if pack == 0 || batch == 0 {
        return Err("--pack and --batch must be positive".into());
    }
    let dir = tempfile::tempdir_in(dir)?;
    let db = sled::Config::new()
        .path(dir.path())
        .cache_capacity(64 << 20)
        .open()?;
    let log = db.open_tree("log")?;
    let event = [b'x'; 220];
    let before = rss_kib();
    let start = Instant::now();
    let mut seq = 0u64;
    while seq < events as u64 {
        let mut group = sled::Batch::default();
        let mut in_group = 0;
        while in_group < batch {
            let n = pack.min(batch - in_group);
            let mut value = Vec::with_capacity(n * (event.len() + 4));
            for _ in 0..n {
                value.extend_from_slice(&(event.len() as u32).to_be_bytes());
                value.extend_from_slice(&event);
            }
            group.insert(&(seq + 1).to_be_bytes(), value);
            seq += n as u64;
            in_group += n;
        }
        log.apply_batch(group)?;
        db.flush()?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{pack} events per key, group commits of {batch}: {:.0} events/s, RSS +{} KiB",
        seq as f64 / secs,
        rss_kib().saturating_sub(before)
    );
    Ok(())
}
