//! What sled's files were when the journal was closed cleanly: each file's length and CRC-32.
//!
//! sled writes into its files whenever it opens them: its recovery zeroes the log after the
//! first message it cannot read (a flipped byte reads as the torn end of the log), overwrites
//! the segments nothing points to any more, truncates the file and replaces its snapshot file.
//! On damaged files that destroys acknowledged history before anyone could judge it. So the
//! files are judged before sled sees them: a journal closed cleanly leaves this seal, and when
//! every file still has the length and checksum the seal lists, the files are exactly what sled
//! left and sled's recovery of them loses nothing. Without a seal (a crash), or when the files
//! differ from it, `open.rs` judges a copy first (`aside.rs`). The seal is removed before sled opens the
//! files in place, as they are about to change.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::marker::Marker;

pub(crate) const SEAL_FILE: &str = "crew-journal.seal";
const SEAL_TMP: &str = "crew-journal.seal.tmp";
const HEADER: &str = "crew-journal-seal 1";

/// Whether the files are the ones a clean close left.
pub(crate) enum Verdict {
    /// With what they held at the close.
    Sealed(Marker),
    /// Why they cannot be trusted without judging a copy.
    Unsealed(String),
}

/// sled's files under `dir` (relative paths, sorted): every file but the journal's own
/// sidecars (`crew-journal.*` at the top level).
pub(crate) fn sled_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for item in fs::read_dir(dir.join(&rel))? {
            let item = item?;
            let name = rel.join(item.file_name());
            let kind = item.file_type()?;
            if rel.as_os_str().is_empty()
                && item
                    .file_name()
                    .to_string_lossy()
                    .starts_with("crew-journal.")
            {
                continue;
            }
            if kind.is_dir() {
                stack.push(name);
            } else {
                // Symlinks and special files are listed too: their checksum fails to match.
                out.push(name);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Length and CRC-32 of a regular file (not following a symlink).
fn checksum(path: &Path) -> io::Result<(u64, u32)> {
    if !fs::symlink_metadata(path)?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut file = File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => {
                hasher.update(buf.get(..n).unwrap_or_default());
                len += n as u64;
            }
        }
    }
    Ok((len, hasher.finalize()))
}

fn render(dir: &Path, state: Marker) -> io::Result<Option<String>> {
    let mut text = format!("{HEADER}\nacked {} epoch {}\n", state.acked, state.epoch);
    for rel in sled_files(dir)? {
        let Some(name) = rel.to_str().filter(|name| !name.contains('\n')) else {
            return Ok(None);
        };
        let (len, crc) = checksum(&dir.join(&rel))?;
        text.push_str(&format!("{len} {crc:08x} {name}\n"));
    }
    Ok(Some(text))
}

/// Seals the files as they are now, holding `state`; call only once sled has closed them.
/// Atomic and durable (temp file, fsync, rename, fsync of the directory).
pub(crate) fn write(dir: &Path, state: Marker) -> io::Result<()> {
    let Some(text) = render(dir, state)? else {
        return Ok(());
    };
    let tmp = dir.join(SEAL_TMP);
    let mut file = File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(SEAL_FILE))?;
    File::open(dir)?.sync_all()
}

/// Compares the files with the seal, reading each file once; writes nothing.
pub(crate) fn check(dir: &Path) -> io::Result<Verdict> {
    let sealed = match fs::read_to_string(dir.join(SEAL_FILE)) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Ok(Verdict::Unsealed("it was not closed cleanly".into()))
        }
        Err(err) if err.kind() == io::ErrorKind::InvalidData => {
            return Ok(Verdict::Unsealed("its seal is not text".into()))
        }
        Err(err) => return Err(err),
    };
    let mut lines = sealed.lines();
    let state = lines.next().filter(|line| *line == HEADER).and_then(|_| {
        let line = lines.next()?.strip_prefix("acked ")?;
        let (acked, epoch) = line.split_once(" epoch ")?;
        Some(Marker {
            acked: acked.parse().ok()?,
            epoch: epoch.parse().ok()?,
        })
    });
    let Some(state) = state else {
        return Ok(Verdict::Unsealed("its seal is malformed".into()));
    };
    let listed: Vec<&str> = lines.collect();
    let files = sled_files(dir)?;
    if listed.len() != files.len() {
        return Ok(Verdict::Unsealed(format!(
            "it holds {} files where {} were sealed",
            files.len(),
            listed.len()
        )));
    }
    for (line, rel) in listed.iter().zip(&files) {
        let mut parts = line.splitn(3, ' ');
        let (Some(len), Some(crc), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return Ok(Verdict::Unsealed("its seal is malformed".into()));
        };
        if Path::new(name) != rel {
            return Ok(Verdict::Unsealed(format!(
                "{} was not there when it was sealed",
                rel.display()
            )));
        }
        let matches = match checksum(&dir.join(rel)) {
            Ok((actual_len, actual_crc)) => {
                len.parse::<u64>().ok() == Some(actual_len)
                    && u32::from_str_radix(crc, 16).ok() == Some(actual_crc)
            }
            Err(err) if err.kind() == io::ErrorKind::Other => false,
            Err(err) => return Err(err),
        };
        if !matches {
            return Ok(Verdict::Unsealed(format!(
                "{} changed since it was sealed",
                rel.display()
            )));
        }
    }
    Ok(Verdict::Sealed(state))
}

/// Removes the seal (the files are about to change).
pub(crate) fn remove(dir: &Path) -> io::Result<()> {
    match fs::remove_file(dir.join(SEAL_FILE)) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// Copies sled's files into `to` (a new directory) to judge them there.
pub(crate) fn copy_sled_files(dir: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir(to)?;
    fs::create_dir_all(to.join("blobs"))?;
    for rel in sled_files(dir)? {
        let target = to.join(&rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(dir.join(&rel), target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_holds_until_a_file_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = &tmp.path().join("journal");
        fs::create_dir_all(dir.join("blobs")).unwrap();
        fs::write(dir.join("db"), b"some bytes").unwrap();
        fs::write(dir.join("blobs/1"), b"blob").unwrap();
        fs::write(dir.join("crew-journal.marker"), b"ours").unwrap();
        assert!(matches!(check(dir).unwrap(), Verdict::Unsealed(_)));
        let state = Marker {
            acked: 12,
            epoch: 3,
        };
        write(dir, state).unwrap();
        assert!(matches!(check(dir).unwrap(), Verdict::Sealed(s) if s == state));
        // Our own files are not part of it.
        fs::write(dir.join("crew-journal.marker"), b"changed").unwrap();
        assert!(matches!(check(dir).unwrap(), Verdict::Sealed(_)));
        type Change = fn(&Path);
        let changes: Vec<(&str, Change)> = vec![
            ("flipped byte", |d| {
                fs::write(d.join("db"), b"some bytez").unwrap()
            }),
            ("truncated", |d| fs::write(d.join("db"), b"some").unwrap()),
            ("removed", |d| fs::remove_file(d.join("blobs/1")).unwrap()),
            ("added", |d| fs::write(d.join("snap.01"), b"x").unwrap()),
            ("seal garbage", |d| {
                fs::write(d.join(SEAL_FILE), b"x").unwrap()
            }),
            ("seal removed", |d| remove(d).unwrap()),
        ];
        for (name, change) in changes {
            let case = tmp.path().join(name);
            copy_sled_files(dir, &case).unwrap();
            fs::copy(dir.join(SEAL_FILE), case.join(SEAL_FILE)).unwrap();
            assert!(
                matches!(check(&case).unwrap(), Verdict::Sealed(_)),
                "{name}"
            );
            change(&case);
            assert!(
                matches!(check(&case).unwrap(), Verdict::Unsealed(_)),
                "{name}"
            );
        }
    }
}
