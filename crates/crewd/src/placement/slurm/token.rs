//! The token crewd mints per remote attempt: HMAC-SHA256, under a key of this daemon's
//! (`STATE/slurm-token.key`, 0600, made once), of the attempt's identity. Derived rather than
//! drawn and journaled: the journal, events, status and run bundles are served and exported,
//! and a token written there would let whoever reads them forge a worker's record. A restarted
//! daemon derives the same token again for the attempt it re-attaches to.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

const KEY_FILE: &str = "slurm-token.key";
const BLOCK: usize = 64;

#[derive(Debug, thiserror::Error)]
#[error("the Slurm token key {path}: {source}")]
pub struct KeyError {
    path: PathBuf,
    source: std::io::Error,
}

/// The daemon's key: read from the state directory, or made there (whole, 0600) the first
/// time.
pub fn key(state_dir: &Path) -> Result<[u8; 32], KeyError> {
    let path = state_dir.join(KEY_FILE);
    let err = |source| KeyError {
        path: path.clone(),
        source,
    };
    let k = match read(&path) {
        Ok(Some(k)) => k,
        Ok(None) => {
            // Written under a private name, then linked in place: a reader never sees half a
            // key, and of two daemons racing (one state dir is locked to one) one key wins.
            let fresh: [u8; 32] = rand::random();
            let tmp = state_dir.join(format!(".{KEY_FILE}.{}", std::process::id()));
            let made = (|| {
                use std::os::unix::fs::OpenOptionsExt;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(&fresh)?;
                f.sync_all()?;
                match std::fs::hard_link(&tmp, &path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                    Err(e) => Err(e),
                }
            })();
            let _ = std::fs::remove_file(&tmp);
            made.map_err(err)?;
            read(&path)
                .map_err(err)?
                .ok_or_else(|| err(std::io::Error::other("the key file is not 32 bytes")))?
        }
        Err(e) => return Err(err(e)),
    };
    Ok(k)
}

fn read(path: &Path) -> std::io::Result<Option<[u8; 32]>> {
    match std::fs::read(path) {
        Ok(b) => b
            .try_into()
            .map(Some)
            .map_err(|_| std::io::Error::other("the key file is not 32 bytes")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The token of one attempt (its job's staging directory included: a re-used directory name
/// under another `staging_dir` is another attempt).
pub fn derive(key: &[u8; 32], run: &str, task: &str, attempt: u32, staging: &str) -> String {
    let msg = format!("crew-slurm-token\0{run}\0{task}\0{attempt}\0{staging}");
    hmac_sha256(key, msg.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The tag of one attempt's job (in its comment, `super::job_comment`): how a restarted
/// daemon tells the job it submitted from one of the same name it did not. Its own label, so
/// the comment (shown to every cluster user) reveals nothing of the attempt's token.
pub fn job_tag(key: &[u8; 32], run: &str, task: &str, attempt: u32, staging: &str) -> String {
    let msg = format!("crew-slurm-job\0{run}\0{task}\0{attempt}\0{staging}");
    hmac_sha256(key, msg.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// HMAC (RFC 2104) over SHA-256, the key shorter than a block.
fn hmac_sha256(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    let mut ipad = [0x36u8; BLOCK];
    let mut opad = [0x5cu8; BLOCK];
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231, test case 2 needs a 4-byte key; case 1's 20 bytes of 0x0b, padded with
        // zeros to 32, is the same key to HMAC (keys are zero-padded to a block).
        let mut key = [0u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        let mac: String = hmac_sha256(&key, b"Hi There")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            mac,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn tokens_differ_per_attempt_and_persist_with_the_key() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&dir.path().join(KEY_FILE)).unwrap().is_none());
        let made = key(dir.path()).unwrap();
        assert_eq!(key(dir.path()).unwrap(), made, "made once, then read");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
        let key: [u8; 32] = [7; 32];
        let a = derive(&key, "r", "t", 1, "/s/t.attempt-1");
        assert_eq!(a, derive(&key, "r", "t", 1, "/s/t.attempt-1"));
        assert_ne!(a, derive(&key, "r", "t", 2, "/s/t.attempt-1"));
        assert_ne!(a, derive(&[8; 32], "r", "t", 1, "/s/t.attempt-1"));
        assert_eq!(a.len(), 64);
        let tag = job_tag(&key, "r", "t", 1, "/s/t.attempt-1");
        assert_eq!(tag, job_tag(&key, "r", "t", 1, "/s/t.attempt-1"));
        assert_ne!(tag, job_tag(&key, "r", "t", 2, "/s/t.attempt-1"));
        assert_ne!(tag, job_tag(&[8; 32], "r", "t", 1, "/s/t.attempt-1"));
        assert_eq!(tag.len(), 32);
        assert!(!a.contains(&tag), "the tag is not part of the token");
    }
}
