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
    let tmp = tmp_beside(path)?;
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

/// A temporary name in `path`'s directory, unique per call: two attempts may write the same
/// file at once (a shared system prompt).
fn tmp_beside(path: &Path) -> std::io::Result<std::path::PathBuf> {
    static NEXT_TMP: AtomicU64 = AtomicU64::new(0);
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("artifact path has no parent"))?;
    Ok(dir.join(format!(
        ".{}.tmp-{}-{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("artifact"),
        std::process::id(),
        NEXT_TMP.fetch_add(1, Ordering::Relaxed)
    )))
}

/// Make every file and rename under `run_dir` durable: data, names and directories. `syncfs`
/// covers them all in one call, where per-file `fsync` needs the file and each directory it
/// was renamed in. Attempts that end at about the same time share one (`durable::Group`).
/// Errors are reported (Linux >= 5.8 reports writeback errors to `syncfs`).
pub fn make_durable(run_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    static SYNCS: std::sync::LazyLock<crate::durable::Group> =
        std::sync::LazyLock::new(crate::durable::Group::default);
    let dir = std::fs::File::open(run_dir)?;
    let dev = dir.metadata()?.dev();
    SYNCS.sync(dev, || {
        nix::unistd::syncfs(&dir).map_err(std::io::Error::from)
    })
}

/// The artifact name of a system prompt's file: named by its content.
pub fn system_prompt_name(prompt: &str) -> String {
    let digest = sha256_hex(prompt.as_bytes());
    // crew's reserved scheme (`crew_core::ids::reserved`): no task's `prompts/<taskId>.md`
    // can be it.
    format!(
        "prompts/{}",
        crew_core::ids::reserved::system_prompt_file(digest.get(..16).unwrap_or(&digest))
    )
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

/// Artifact `name`, with the bytes of artifact `of` (already written): a hard link to its file,
/// put in place atomically, so the bytes are written once. A filesystem without hard links
/// gets a copy.
pub fn put_same(
    run_dir: &Path,
    of: &ArtifactRef,
    name: &str,
    bytes: &[u8],
) -> std::io::Result<ArtifactRef> {
    let source = run_dir.join(&of.name);
    let path = run_dir.join(name);
    let linked = match std::fs::hard_link(&source, &path) {
        Ok(()) => Ok(()),
        // An earlier attempt's: replaced by a link under a temporary name, renamed over it.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let tmp = tmp_beside(&path)?;
            let renamed =
                std::fs::hard_link(&source, &tmp).and_then(|()| std::fs::rename(&tmp, &path));
            // rename(2) leaves both names when they are already links to one file.
            let _ = std::fs::remove_file(&tmp);
            renamed
        }
        Err(e) => Err(e),
    };
    match linked {
        Ok(()) => Ok(ArtifactRef {
            name: name.to_string(),
            ..of.clone()
        }),
        Err(_) => put(run_dir, name, of.kind.as_str(), bytes),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_second_name_is_a_link_to_the_same_bytes_and_replaces_an_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        let ino = |n: &str| std::fs::metadata(run.join(n)).unwrap().ino();
        let one = put(run, "prompts/t.attempt-1.md", "prompt", b"first").unwrap();
        let latest = put_same(run, &one, "prompts/t.md", b"first").unwrap();
        assert_eq!(latest.name, "prompts/t.md");
        assert_eq!((latest.kind.as_str(), latest.bytes), ("prompt", 5));
        assert_eq!(latest.sha256, one.sha256);
        assert_eq!(ino("prompts/t.md"), ino("prompts/t.attempt-1.md"));

        // The next attempt's prompt takes the name over; the first attempt's file is kept.
        let two = put(run, "prompts/t.attempt-2.md", "prompt", b"second").unwrap();
        let again = put_same(run, &two, "prompts/t.md", b"second").unwrap();
        assert_eq!(again.sha256, two.sha256);
        assert_eq!(ino("prompts/t.md"), ino("prompts/t.attempt-2.md"));
        let read = |n: &str| std::fs::read_to_string(run.join(n)).unwrap();
        assert_eq!(read("prompts/t.md"), "second");
        assert_eq!(read("prompts/t.attempt-1.md"), "first");
        // Linking a name to the file it already is leaves no temporary file behind.
        put_same(run, &two, "prompts/t.md", b"second").unwrap();
        let mut names: Vec<String> = std::fs::read_dir(run.join("prompts"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["t.attempt-1.md", "t.attempt-2.md", "t.md"]);
    }

    #[test]
    fn without_the_first_file_the_second_name_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        let one = put(run, "prompts/t.attempt-1.md", "prompt", b"text").unwrap();
        std::fs::remove_file(run.join("prompts/t.attempt-1.md")).unwrap();
        let latest = put_same(run, &one, "prompts/t.md", b"text").unwrap();
        assert_eq!(latest.sha256, one.sha256);
        assert_eq!(std::fs::read(run.join("prompts/t.md")).unwrap(), b"text");
    }

    #[test]
    fn durable_syncs_the_run_directory() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "results/t.txt", "result", b"done").unwrap();
        make_durable(dir.path()).unwrap();
        assert!(make_durable(&dir.path().join("missing")).is_err());
    }
}
