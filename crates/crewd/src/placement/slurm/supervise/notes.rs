//! The worker's notes (`notes.jsonl` in its staging directory) as they arrive: what a local
//! attempt's port would hear, bounded as a local attempt's is.

use super::{blocking, bound};
use crate::attempt::{AttemptKey, Port};
use crew_core::usage::Usage;
use crew_staging::Note;
use std::path::Path;
use std::sync::Arc;

/// Most warnings of one attempt passed on (and one saying the rest are not).
const MAX_WARNING_NOTES: u32 = 32;

/// Longest note line kept (a note is a few hundred bytes; a progress note's tool name and a
/// warning are bounded again where they are used).
const MAX_NOTE_BYTES: usize = 1 << 20;

/// The worker's notes (`notes.jsonl`) as they arrive: what the attempt's port would hear.
#[derive(Default)]
pub(super) struct Notes {
    offset: u64,
    /// The unfinished last line, at most `MAX_NOTE_BYTES`.
    partial: Vec<u8>,
    /// The line being read was longer than `MAX_NOTE_BYTES`: the rest of it, up to its
    /// newline, is dropped as it comes.
    overlong: bool,
    /// Warnings passed on so far (each one a journaled `task.warning`).
    warnings: u32,
    /// The attempt's usage as last reported (for a failure the worker could not report).
    pub(super) usage: Usage,
}

impl Notes {
    /// Read what the worker appended since the last look and pass it on. The file is opened
    /// as a worker's files are (`crew_staging::open_beneath`: a regular file, no link, no
    /// waiting on a FIFO), at most 8 MiB a look.
    pub(super) async fn read_new(&mut self, path: &Path, port: &Arc<dyn Port>, key: &AttemptKey) {
        use std::io::{Read, Seek};
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let offset = self.offset;
        let read = blocking(|| -> Result<Vec<u8>, String> {
            let mut f =
                crew_staging::open_beneath(dir, Path::new(name)).map_err(|e| e.to_string())?;
            f.seek(std::io::SeekFrom::Start(offset))
                .map_err(|e| e.to_string())?;
            let mut buf = Vec::new();
            f.take(8 << 20)
                .read_to_end(&mut buf)
                .map_err(|e| e.to_string())?;
            Ok(buf)
        });
        let buf = match read {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %bound(&e), "the worker's notes are not readable");
                return;
            }
        };
        self.offset = self.offset.saturating_add(buf.len() as u64);
        // Progress is a running total: of one look's notes the last is passed on, once (a
        // local attempt reports it at most every 250 ms; each is a journaled event).
        let mut progress = None;
        for line in self.take_lines(&buf) {
            self.pass(&line, port, key, &mut progress);
        }
        if let Some((usage, tool)) = progress {
            port.progress(key, usage, tool);
        }
    }

    /// The complete lines `buf` ends (with what was kept of the line before it), keeping the
    /// unfinished rest; a line past `MAX_NOTE_BYTES` is dropped whole.
    fn take_lines(&mut self, mut buf: &[u8]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        while !buf.is_empty() {
            let (piece, ended) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            buf = buf
                .get(piece.len() + usize::from(ended)..)
                .unwrap_or_default();
            if !self.overlong {
                if self.partial.len().saturating_add(piece.len()) > MAX_NOTE_BYTES {
                    tracing::warn!(
                        "a line of the worker's notes over {MAX_NOTE_BYTES} bytes is skipped"
                    );
                    self.partial.clear();
                    self.overlong = true;
                } else {
                    self.partial.extend_from_slice(piece);
                }
            }
            if ended {
                if !self.overlong {
                    lines.push(std::mem::take(&mut self.partial));
                }
                self.overlong = false;
            }
        }
        lines
    }

    fn pass(
        &mut self,
        line: &[u8],
        port: &Arc<dyn Port>,
        key: &AttemptKey,
        progress: &mut Option<(Usage, Option<String>)>,
    ) {
        // A line crew-worker did not write (or a layout it does not share) is skipped.
        let Ok(note) = serde_json::from_slice::<Note>(line) else {
            return;
        };
        match note {
            Note::Spawned { pid, live } => {
                tracing::info!(pid, live, "the agent started on the node")
            }
            Note::Progress { usage, tool } => {
                self.usage = usage;
                *progress = Some((usage, tool.map(|t| bound(&t))));
            }
            // As many as a local attempt reports, then one note that the rest are not.
            Note::Warning { tool, message } => {
                match self.warnings {
                    n if n < MAX_WARNING_NOTES => port.warning(key, bound(&tool), bound(&message)),
                    MAX_WARNING_NOTES => port.warning(
                        key,
                        String::new(),
                        format!(
                            "the worker reported more than {MAX_WARNING_NOTES} warnings; the rest are not shown"
                        ),
                    ),
                    _ => {}
                }
                self.warnings = self.warnings.saturating_add(1);
            }
            Note::Answered => port.answered(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::mkfifo;
    use super::*;
    use std::time::Duration;

    struct Heard(std::sync::Mutex<Vec<String>>);
    impl Port for Heard {
        fn spawned(&self, _: &AttemptKey, _: u32, _: u64, _: bool) {}
        fn progress(&self, _: &AttemptKey, _: Usage, tool: Option<String>) {
            self.0.lock().unwrap().push(tool.unwrap_or_default());
        }
        fn warning(&self, _: &AttemptKey, _: String, message: String) {
            self.0.lock().unwrap().push(message);
        }
        fn answered(&self, _: &AttemptKey) {}
        fn finished(&self, _: crate::attempt::Report) {}
    }

    fn key() -> AttemptKey {
        AttemptKey {
            run_id: "r".into(),
            task_id: "t".into(),
            attempt: 1,
        }
    }

    /// `notes.jsonl` without a newline (a worker's, or an unboxed agent's appending to it):
    /// what crewd keeps of the unfinished line stays bounded however much is written, and a
    /// note after the next newline is heard again.
    #[tokio::test]
    async fn a_note_line_without_end_is_not_kept_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        let heard = Arc::new(Heard(Default::default()));
        let port: Arc<dyn Port> = heard.clone();
        let mut notes = Notes::default();
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![b'x'; 4 << 20];
        for _ in 0..8 {
            f.write_all(&chunk).unwrap();
            notes.read_new(&path, &port, &key()).await;
            assert!(
                notes.partial.len() <= MAX_NOTE_BYTES,
                "{} bytes of one unfinished line kept",
                notes.partial.len()
            );
        }
        writeln!(f).unwrap();
        let note = Note::Warning {
            tool: "bash".into(),
            message: "refused".into(),
        };
        writeln!(f, "{}", serde_json::to_string(&note).unwrap()).unwrap();
        notes.read_new(&path, &port, &key()).await;
        assert_eq!(*heard.0.lock().unwrap(), ["refused"]);
    }

    /// A worker's notes are its word on what happened, each refusal a journaled
    /// `task.warning`: a worker (or an unboxed agent appending to its notes) that writes them
    /// by the thousand is heard as a local attempt is, a bounded number of times.
    #[tokio::test]
    async fn a_flood_of_warning_notes_is_heard_a_bounded_number_of_times() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        let heard = Arc::new(Heard(Default::default()));
        let port: Arc<dyn Port> = heard.clone();
        let mut notes = Notes::default();
        let mut f = std::fs::File::create(&path).unwrap();
        let note = Note::Warning {
            tool: "bash".into(),
            message: "refused".into(),
        };
        let line = serde_json::to_string(&note).unwrap();
        for _ in 0..10_000 {
            writeln!(f, "{line}").unwrap();
        }
        notes.read_new(&path, &port, &key()).await;
        notes.read_new(&path, &port, &key()).await;
        let n = heard.0.lock().unwrap().len();
        assert!(
            n <= MAX_WARNING_NOTES as usize + 1,
            "{n} warnings passed on"
        );
        assert!(n > 1);
    }

    /// Progress notes by the thousand in one look are one `task.progress` (the last), as a
    /// local attempt reports progress at most every 250 ms: each one is a journaled event.
    #[tokio::test]
    async fn progress_notes_of_one_look_are_passed_on_once() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        let heard = Arc::new(Heard(Default::default()));
        let port: Arc<dyn Port> = heard.clone();
        let mut notes = Notes::default();
        let mut f = std::fs::File::create(&path).unwrap();
        for i in 0..10_000 {
            let note = Note::Progress {
                usage: Usage {
                    input: i,
                    ..Usage::default()
                },
                tool: Some(format!("t{i}")),
            };
            writeln!(f, "{}", serde_json::to_string(&note).unwrap()).unwrap();
        }
        notes.read_new(&path, &port, &key()).await;
        assert_eq!(*heard.0.lock().unwrap(), ["t9999"]);
        assert_eq!(notes.usage.input, 9999);
    }

    /// `notes.jsonl` as a FIFO: the look at it returns at once.
    #[tokio::test]
    async fn notes_as_a_fifo_do_not_hold_the_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        mkfifo(&path);
        let port: Arc<dyn Port> = Arc::new(Heard(Default::default()));
        let mut notes = Notes::default();
        tokio::time::timeout(Duration::from_secs(5), notes.read_new(&path, &port, &key()))
            .await
            .expect("crewd blocked on a worker's FIFO");
    }
}
