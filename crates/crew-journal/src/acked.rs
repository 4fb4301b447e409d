//! A second sidecar next to sled's files, kept current after every acknowledged write.
//!
//! The marker (`marker.rs`) is fsynced and replaced by rename, too costly for every group
//! commit, so after a crash it lags behind: a journal cut or damaged past the marker's seq would
//! open as a shorter journal without a word. This file closes that gap: after each successful
//! append, snapshot or forget, one `pwrite` of 32 bytes records the seq and epoch now durable,
//! into one of two slots in turn. It is not fsynced: it survives a crash of the process (the
//! page cache has it), and after a crash of the machine it may be older, which only weakens the
//! check, as it never claims more than sled had made durable when it was written. A slot holds
//! a magic, the acked seq, the epoch, a generation and a CRC-32, so a torn or damaged slot is
//! ignored and the other one used.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::marker::Marker;

pub(crate) const ACKED_FILE: &str = "crew-journal.acked";

const MAGIC: &[u8; 4] = b"CJA1";
const SLOT: usize = 32;

pub(crate) struct AckedFile {
    file: File,
    generation: u64,
}

impl AckedFile {
    /// Opens (or creates) the file; what it records is read separately, before (`read`).
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(ACKED_FILE))?;
        let generation = best_slot(&file)?.map_or(0, |(generation, _)| generation);
        Ok(Self { file, generation })
    }

    /// Records `state` (already durable in sled) in the older slot.
    pub(crate) fn record(&mut self, state: Marker) -> io::Result<()> {
        let generation = self.generation.wrapping_add(1);
        let offset = (generation % 2) * SLOT as u64;
        self.file.write_all_at(&encode(state, generation), offset)?;
        self.generation = generation;
        Ok(())
    }
}

/// What the file records; `None` when it is missing or neither slot is intact.
pub(crate) fn read(dir: &Path) -> io::Result<Option<Marker>> {
    match File::open(dir.join(ACKED_FILE)) {
        Ok(file) => Ok(best_slot(&file)?.map(|(_, state)| state)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

fn best_slot(file: &File) -> io::Result<Option<(u64, Marker)>> {
    let mut bytes = [0u8; 2 * SLOT];
    let mut read = 0;
    while read < bytes.len() {
        let Some(rest) = bytes.get_mut(read..) else {
            break;
        };
        match file.read_at(rest, read as u64)? {
            0 => break,
            n => read += n,
        }
    }
    let slots = bytes.get(..read).unwrap_or_default().chunks_exact(SLOT);
    Ok(slots
        .filter_map(decode)
        .max_by_key(|(generation, _)| *generation))
}

fn encode(state: Marker, generation: u64) -> [u8; SLOT] {
    let mut slot = [0u8; SLOT];
    slot[..4].copy_from_slice(MAGIC);
    slot[4..12].copy_from_slice(&state.acked.to_be_bytes());
    slot[12..20].copy_from_slice(&state.epoch.to_be_bytes());
    slot[20..28].copy_from_slice(&generation.to_be_bytes());
    let crc = crc32fast::hash(&slot[..28]);
    slot[28..].copy_from_slice(&crc.to_be_bytes());
    slot
}

fn decode(slot: &[u8]) -> Option<(u64, Marker)> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(slot.get(at..at + 8)?.try_into().ok()?))
    };
    let crc = u32::from_be_bytes(slot.get(28..32)?.try_into().ok()?);
    if slot.get(..4)? != MAGIC || crc32fast::hash(slot.get(..28)?) != crc {
        return None;
    }
    let state = Marker {
        acked: word(4)?,
        epoch: word(12)?,
    };
    Some((word(20)?, state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_newest_intact_slot_wins() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let mut file = AckedFile::open(dir.path()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        for acked in 1..=5 {
            file.record(Marker { acked, epoch: 2 }).unwrap();
            assert_eq!(read(dir.path()).unwrap(), Some(Marker { acked, epoch: 2 }));
        }
        // Damage the newest slot (generation 5 is in slot 1): the other one is used.
        let path = dir.path().join(ACKED_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[SLOT + 6] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(
            read(dir.path()).unwrap(),
            Some(Marker { acked: 4, epoch: 2 })
        );
        // Reopened, it continues after the intact slot and overwrites the damaged one.
        let mut file = AckedFile::open(dir.path()).unwrap();
        file.record(Marker { acked: 9, epoch: 3 }).unwrap();
        assert_eq!(
            read(dir.path()).unwrap(),
            Some(Marker { acked: 9, epoch: 3 })
        );
        fs::write(&path, b"short").unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
    }
}
