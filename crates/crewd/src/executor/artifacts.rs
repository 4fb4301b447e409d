//! Artifact files: written atomically (temp file, fsync, rename, fsync of the directory) before
//! the event that names them is journaled, so an event never points at a half-written file.

use crew_core::run::ArtifactRef;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;

pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("artifact path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("artifact"),
        std::process::id()
    ));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    sync_dir(dir)
}

pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Write `bytes` as artifact `name` (relative) of the run in `run_dir`.
pub fn put(run_dir: &Path, name: &str, kind: &str, bytes: &[u8]) -> std::io::Result<ArtifactRef> {
    write_atomic(&run_dir.join(name), bytes)?;
    Ok(ArtifactRef {
        name: name.to_string(),
        kind: kind.to_string(),
        bytes: bytes.len() as u64,
        sha256: sha256_hex(bytes),
    })
}

/// Describe a file that was already written and synced (the transcript, streamed to disk).
pub fn describe(run_dir: &Path, name: &str, kind: &str) -> std::io::Result<ArtifactRef> {
    let bytes = std::fs::read(run_dir.join(name))?;
    Ok(ArtifactRef {
        name: name.to_string(),
        kind: kind.to_string(),
        bytes: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
    })
}
