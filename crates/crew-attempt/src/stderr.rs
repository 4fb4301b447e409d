//! The worker's stderr, kept as an artifact (`logs/<task>.attempt-<n>.stderr.txt`, kind
//! `stderr`): a crashing agent often says why only there. Bounded to the first `HEAD` and the
//! last `TAIL` bytes (what comes in between is counted, not kept). It is fed the lines the
//! executor has already redacted where stderr enters (`StderrTail`), so a cut never splits a
//! secret that redaction has not yet seen whole.

use crew_core::run::ArtifactRef;
use std::path::Path;

const HEAD: usize = 16 << 10;
const TAIL: usize = 48 << 10;

#[derive(Default)]
pub struct StderrLog {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Bytes between head and tail that were not kept.
    skipped: u64,
}

impl StderrLog {
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < HEAD {
            let n = bytes.len().min(HEAD - self.head.len());
            let (now, rest) = bytes.split_at(n);
            self.head.extend_from_slice(now);
            bytes = rest;
        }
        if bytes.is_empty() {
            return;
        }
        self.tail.extend_from_slice(bytes);
        // Trim in steps of at least TAIL, so each byte is moved a bounded number of times.
        if self.tail.len() > 2 * TAIL {
            let cut = self.tail.len() - TAIL;
            self.tail.drain(..cut);
            self.skipped = self.skipped.saturating_add(cut as u64);
        }
    }

    /// The kept text, redacted.
    pub fn text(&self) -> String {
        let mut tail: &[u8] = &self.tail;
        let mut skipped = self.skipped;
        if tail.len() > TAIL {
            let cut = tail.len() - TAIL;
            tail = &tail[cut..];
            skipped = skipped.saturating_add(cut as u64);
        }
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if skipped > 0 {
            text.push_str(&format!("\n[… {skipped} bytes of stderr not kept …]\n"));
        }
        text.push_str(&String::from_utf8_lossy(tail));
        // Fed redacted lines already; this pass costs little and keeps the log safe on its own.
        crew_core::redact::redact_str(&text)
    }

    /// Writes the artifact when the worker wrote anything to stderr.
    pub fn save(
        &self,
        run_dir: &Path,
        task_id: &str,
        attempt: u32,
    ) -> std::io::Result<Option<ArtifactRef>> {
        if self.head.is_empty() {
            return Ok(None);
        }
        let name = format!("logs/{task_id}.attempt-{attempt}.stderr.txt");
        crate::artifacts::put(run_dir, &name, "stderr", self.text().as_bytes()).map(Some)
    }
}

/// What is still in the stderr pipe once the worker's loop ended (the worker exited and its
/// group was killed): read to EOF, for at most `DRAIN`, so a crash's last words are not lost.
pub async fn drain(stderr: &mut Option<tokio::process::ChildStderr>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    const DRAIN: std::time::Duration = std::time::Duration::from_millis(500);
    let Some(s) = stderr.as_mut() else {
        return vec![];
    };
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 8192];
    let _ = tokio::time::timeout(DRAIN, async {
        while out.len() < TAIL {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            }
        }
    })
    .await;
    out
}

/// How much of the stderr's end error messages keep.
const STDERR_TAIL: usize = 8 << 10;

/// The end of the worker's stderr, for error messages: redacted line by line as it arrives
/// (a key printed there spans lines too), then cut to the last `STDERR_TAIL` bytes.
#[derive(Default)]
pub(crate) struct StderrTail {
    lines: crate::lines::RedactedLines,
    /// The redacted lines, bounded, for the stderr artifact: fed here, after redaction, so a
    /// secret spanning lines (a PEM block) is masked whole before any of it is cut or kept.
    pub(crate) log: StderrLog,
    pub(crate) text: String,
}

impl StderrTail {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let (log, text) = (&mut self.log, &mut self.text);
        self.lines.push(bytes, |line| keep(log, text, line));
    }

    /// Flushes the last line; `text` is then the trimmed tail for error messages.
    pub(crate) fn finish(mut self) -> StderrTail {
        let (log, text) = (&mut self.log, &mut self.text);
        self.lines.finish(|line| keep(log, text, line));
        self.text = self.text.trim().to_string();
        self
    }
}

fn keep(log: &mut StderrLog, text: &mut String, line: &str) {
    log.push(line.as_bytes());
    log.push(b"\n");
    text.push_str(line);
    text.push('\n');
    if text.len() > STDERR_TAIL * 2 {
        *text = crate::tail(text, STDERR_TAIL).to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_within_bounds() {
        let mut log = StderrLog::default();
        log.push(b"first line\n");
        for _ in 0..10_000 {
            log.push(&[b'x'; 100]);
        }
        log.push(b"\nlast line: boom\n");
        let text = log.text();
        assert!(text.starts_with("first line\n"), "{}", &text[..40]);
        assert!(text.ends_with("last line: boom\n"));
        assert!(text.contains("bytes of stderr not kept"));
        assert!(text.len() <= HEAD + TAIL + 100, "{}", text.len());
    }

    #[test]
    fn redacts_and_saves_only_when_something_was_written() {
        let dir = tempfile::tempdir().unwrap();
        assert!(StderrLog::default()
            .save(dir.path(), "t", 1)
            .unwrap()
            .is_none());
        let mut log = StderrLog::default();
        log.push(b"Error: ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 rejected\n");
        let a = log.save(dir.path(), "01_x", 2).unwrap().unwrap();
        assert_eq!(a.name, "logs/01_x.attempt-2.stderr.txt");
        let text = std::fs::read_to_string(dir.path().join(&a.name)).unwrap();
        assert!(!text.contains("abcdefghijklmnop"), "{text}");
        assert!(text.contains("rejected"));
    }
}
