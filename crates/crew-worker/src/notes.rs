//! The attempt's port on a node: each note becomes one line of `notes.jsonl`, written and
//! flushed as it comes, which crewd reads as its own attempt's port would hear it.

use crew_attempt::port::{AttemptKey, Port, Report};
use crew_core::usage::Usage;
use crew_staging::Note;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

pub struct Notes {
    file: Mutex<Option<std::fs::File>>,
}

impl Notes {
    pub fn open(path: &Path) -> Notes {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(
                |e| tracing::warn!(error = %e, "cannot open notes.jsonl; crewd sees no progress"),
            )
            .ok();
        Notes {
            file: Mutex::new(file),
        }
    }

    fn put(&self, note: &Note) {
        let Ok(mut line) = serde_json::to_vec(note) else {
            return;
        };
        line.push(b'\n');
        if let Ok(mut f) = self.file.lock() {
            if let Some(f) = f.as_mut() {
                if let Err(e) = f.write_all(&line).and_then(|()| f.flush()) {
                    tracing::warn!(error = %e, "cannot write a note");
                }
            }
        }
    }
}

impl Port for Notes {
    fn spawned(&self, _: &AttemptKey, pid: u32, _: u64, live: bool) {
        self.put(&Note::Spawned { pid, live });
    }
    fn progress(&self, _: &AttemptKey, usage: Usage, tool: Option<String>) {
        self.put(&Note::Progress { usage, tool });
    }
    fn warning(&self, _: &AttemptKey, tool: String, message: String) {
        self.put(&Note::Warning { tool, message });
    }
    fn answered(&self, _: &AttemptKey) {
        self.put(&Note::Answered);
    }
    /// The result goes in the final record, written by `main` once the commit is made.
    fn finished(&self, _: Report) {}
}
