//! Reading a fan-out step's final answer for the actor (issue 17): at most the step's
//! `max_answer_bytes`, so a runaway agent's answer is judged by its size, never loaded whole.

use crew_core::fanout::Answer;
use std::io::Read;
use std::path::Path;

/// The answer in `path` (the task's results file), or why it is not one to parse.
pub fn read(path: &Path, limit: u64) -> Answer {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        // No final text: the validator says there is no block, as for an empty answer.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Answer::Text(String::new()),
        Err(e) => return Answer::Unreadable(e.to_string()),
    };
    let len = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => return Answer::Unreadable(e.to_string()),
    };
    if len > limit {
        return Answer::TooLarge { bytes: len };
    }
    // The file may have grown since: read one byte past the limit to know.
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    if let Err(e) = file.take(limit.saturating_add(1)).read_to_end(&mut buf) {
        return Answer::Unreadable(e.to_string());
    }
    let got = buf.len() as u64;
    if got > limit {
        return Answer::TooLarge {
            bytes: got.max(len),
        };
    }
    // crewd wrote it from the worker's text; a stray byte is no reason to refuse the block.
    Answer::Text(match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, "x".repeat(100)).unwrap();
        assert_eq!(read(&p, 100), Answer::Text("x".repeat(100)));
        assert_eq!(read(&p, 99), Answer::TooLarge { bytes: 100 });
        assert_eq!(
            read(&dir.path().join("none"), 10),
            Answer::Text(String::new())
        );
        assert!(matches!(
            read(dir.path(), 10),
            Answer::Unreadable(_) | Answer::TooLarge { .. }
        ));
    }
}
