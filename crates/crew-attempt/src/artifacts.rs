//! Artifact files. An attempt writes each one whole (temp file, rename) without syncing it, and
//! makes them all durable at once when it ends (`make_durable`, one `syncfs`), before the event
//! that names them is journaled: an event never points at a half-written file, and a task costs
//! one filesystem sync instead of two per file (file and directory), which is what bounded
//! dispatch throughput. A file the daemon loses in a crash before that point is named by no
//! event and is written again by the retry.

use crew_core::run::{ArtifactKind, ArtifactRef, Sha256 as Digest256};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Replace `path` with `bytes` atomically (readers see the old file or the new one). Not synced.
pub fn write_replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("artifact path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    // Unique per call: two attempts may write the same file at once (a shared system prompt).
    static NEXT_TMP: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("artifact"),
        std::process::id(),
        NEXT_TMP.fetch_add(1, Ordering::Relaxed)
    ));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
    }
    std::fs::rename(&tmp, path)
}

/// Make every file and rename under `run_dir` durable: data, names and directories. `syncfs`
/// covers them all in one call (and concurrent attempts share the filesystem's commit), where
/// per-file `fsync` needs the file and each directory it was renamed in. Errors are reported
/// (Linux >= 5.8 reports writeback errors to `syncfs`).
pub fn make_durable(run_dir: &Path) -> std::io::Result<()> {
    let dir = std::fs::File::open(run_dir)?;
    nix::unistd::syncfs(&dir).map_err(std::io::Error::from)
}

/// The artifact name of a system prompt's file: named by its content.
pub fn system_prompt_name(prompt: &str) -> String {
    let digest = sha256_hex(prompt.as_bytes());
    format!("prompts/system-{}.md", digest.get(..16).unwrap_or(&digest))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest as an artifact reference holds it (32 bytes, hex in JSON).
fn sha256_of(bytes: &[u8]) -> Digest256 {
    Digest256::from_bytes(Sha256::digest(bytes).into())
}

/// Write `bytes` as artifact `name` (relative) of the run in `run_dir`.
pub fn put(run_dir: &Path, name: &str, kind: &str, bytes: &[u8]) -> std::io::Result<ArtifactRef> {
    write_replace(&run_dir.join(name), bytes)?;
    Ok(ArtifactRef {
        name: name.to_string(),
        kind: ArtifactKind::new(kind),
        bytes: bytes.len() as u64,
        sha256: sha256_of(bytes),
    })
}

/// Describe a file that was already written (the transcript, streamed to disk).
pub fn describe(run_dir: &Path, name: &str, kind: &str) -> std::io::Result<ArtifactRef> {
    let bytes = std::fs::read(run_dir.join(name))?;
    Ok(ArtifactRef {
        name: name.to_string(),
        kind: ArtifactKind::new(kind),
        bytes: bytes.len() as u64,
        sha256: sha256_of(&bytes),
    })
}
