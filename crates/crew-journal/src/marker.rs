//! A sidecar file next to sled's files recording what sled must recover.
//!
//! sled can come back from damaged files as an empty or older database without reporting an
//! error (it recovers the longest readable prefix of its log). The marker lives outside sled, so
//! it survives that. It says "every seq up to `acked` was durably acknowledged, and so were
//! `epoch` snapshot/forget writes", and a journal that recovers less is reported as corrupt
//! instead of silently starting over or un-forgetting a run. It is written only after sled's
//! flush (so it never claims more than is durable) and only at open, on the first append into an
//! empty journal, after snapshots and forgets, and on clean close: it costs nothing per append.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub(crate) const MARKER_FILE: &str = "crew-journal.marker";
const MARKER_TMP: &str = "crew-journal.marker.tmp";
const HEADER: &str = "crew-journal-marker 1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Marker {
    /// Every seq up to this one was acknowledged.
    pub acked: u64,
    /// How many snapshot and forget writes were acknowledged.
    pub epoch: u64,
}

/// Why an existing marker could not be used.
pub(crate) enum MarkerError {
    Io(io::Error),
    Invalid(String),
}

/// `Ok(None)` when there is no marker file.
pub(crate) fn read(dir: &Path) -> Result<Option<Marker>, MarkerError> {
    let text = match fs::read(dir.join(MARKER_FILE)) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(MarkerError::Io(err)),
    };
    parse(&text).map(Some).ok_or_else(|| {
        MarkerError::Invalid(format!(
            "{MARKER_FILE} is not a crew journal marker: {:?}",
            String::from_utf8_lossy(&text[..text.len().min(64)])
        ))
    })
}

fn parse(bytes: &[u8]) -> Option<Marker> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let acked = lines.next()?.strip_prefix("acked ")?.parse().ok()?;
    let epoch = lines.next()?.strip_prefix("epoch ")?.parse().ok()?;
    lines.next().is_none().then_some(Marker { acked, epoch })
}

fn render(marker: Marker) -> String {
    format!("{HEADER}\nacked {}\nepoch {}\n", marker.acked, marker.epoch)
}

/// Replaces the marker atomically and durably (temp file, fsync, rename, fsync of the directory).
pub(crate) fn write(dir: &Path, marker: Marker) -> io::Result<()> {
    let tmp = dir.join(MARKER_TMP);
    let mut file = fs::File::create(&tmp)?;
    file.write_all(render(marker).as_bytes())?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(MARKER_FILE))?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        type Case = (&'static str, &'static [u8], Option<(u64, u64)>);
        let cases: Vec<Case> = vec![
            (
                "valid",
                b"crew-journal-marker 1\nacked 42\nepoch 3\n",
                Some((42, 3)),
            ),
            (
                "zero",
                b"crew-journal-marker 1\nacked 0\nepoch 0\n",
                Some((0, 0)),
            ),
            (
                "no final newline",
                b"crew-journal-marker 1\nacked 3\nepoch 1",
                Some((3, 1)),
            ),
            (
                "wrong header",
                b"crew-journal-marker 2\nacked 42\nepoch 3\n",
                None,
            ),
            ("missing epoch", b"crew-journal-marker 1\nacked 42\n", None),
            (
                "swapped lines",
                b"crew-journal-marker 1\nepoch 3\nacked 42\n",
                None,
            ),
            (
                "negative",
                b"crew-journal-marker 1\nacked -1\nepoch 0\n",
                None,
            ),
            (
                "extra line",
                b"crew-journal-marker 1\nacked 1\nepoch 0\nmore\n",
                None,
            ),
            ("garbage", &[0xff, 0x00, 0x13], None),
            ("empty", b"", None),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(parse(bytes).map(|m| (m.acked, m.epoch)), want, "{name}");
        }
    }

    #[test]
    fn write_then_read() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(read(dir.path()), Ok(None)));
        write(dir.path(), Marker { acked: 7, epoch: 1 }).unwrap();
        let latest = Marker { acked: 9, epoch: 2 };
        write(dir.path(), latest).unwrap();
        assert!(matches!(read(dir.path()), Ok(Some(m)) if m == latest));
        assert!(!dir.path().join(MARKER_TMP).exists());
        assert_eq!(parse(render(latest).as_bytes()), Some(latest));
    }
}
