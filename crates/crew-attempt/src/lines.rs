//! LF-delimited lines from a child's stdout, without trusting the child: a line longer than
//! the cap is cut (the rest up to the next LF is dropped), so a flood cannot exhaust memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub const MAX_LINE: usize = 1 << 20;

pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    overflow: bool,
    eof: bool,
    /// Lines that were cut at `MAX_LINE`.
    cut: u64,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: Vec::new(),
            overflow: false,
            eof: false,
            cut: 0,
        }
    }

    /// How many lines so far were longer than `MAX_LINE` and handed on cut.
    pub fn cut_lines(&self) -> u64 {
        self.cut
    }

    /// The next line without its `\n` (a trailing `\r` is stripped), or `None` at EOF.
    /// Cancel-safe: partial data stays buffered across calls.
    pub async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        loop {
            if self.eof {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(self.take()));
            }
            let chunk = self.inner.fill_buf().await?;
            if chunk.is_empty() {
                self.eof = true;
                continue;
            }
            match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    let head = chunk[..i].to_vec();
                    self.push(&head);
                    self.inner.consume(i + 1);
                    let line = self.take();
                    self.overflow = false;
                    return Ok(Some(line));
                }
                None => {
                    let n = chunk.len();
                    let owned = chunk.to_vec();
                    self.push(&owned);
                    self.inner.consume(n);
                }
            }
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.buf.len());
        if bytes.len() > room {
            self.buf.extend_from_slice(&bytes[..room]);
            self.overflow = true;
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn take(&mut self) -> String {
        if self.overflow {
            self.cut = self.cut.saturating_add(1);
        }
        let mut b = std::mem::take(&mut self.buf);
        if b.last() == Some(&b'\r') {
            b.pop();
        }
        String::from_utf8_lossy(&b).into_owned()
    }
}

/// Bytes a child writes (stderr, a command's output) as redacted lines: a line is handed on at
/// its `\n` (a trailing `\r` dropped), or once it grows past `LINE_MAX` (its rest a line of
/// its own), so a flood without a newline cannot grow it; each is redacted whole first, with
/// what came before (a secret may span lines).
#[derive(Default)]
pub(crate) struct RedactedLines {
    redactor: crew_core::redact::StreamRedactor,
    partial: Vec<u8>,
}

/// Longest line kept whole before it is flushed (and redacted) as a line of its own.
const LINE_MAX: usize = 64 << 10;

impl RedactedLines {
    pub(crate) fn push(&mut self, bytes: &[u8], mut line: impl FnMut(&str)) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            match piece.split_last() {
                Some((b'\n', rest)) => {
                    self.partial.extend_from_slice(rest);
                    self.flush(&mut line);
                }
                _ => {
                    self.partial.extend_from_slice(piece);
                    if self.partial.len() > LINE_MAX {
                        self.flush(&mut line);
                    }
                }
            }
        }
    }

    /// The unfinished last line, if any.
    pub(crate) fn finish(&mut self, mut line: impl FnMut(&str)) {
        if !self.partial.is_empty() {
            self.flush(&mut line);
        }
    }

    fn flush(&mut self, line: &mut impl FnMut(&str)) {
        let raw = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        line(&self.redactor.line(raw.trim_end_matches('\r')));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_caps_and_strips_cr() {
        let mut input = b"a\r\nb\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend(b"\nlast");
        let mut r = LineReader::new(tokio::io::BufReader::new(&input[..]));
        assert_eq!(r.next_line().await.unwrap().as_deref(), Some("a"));
        assert_eq!(r.next_line().await.unwrap().as_deref(), Some("b"));
        assert_eq!(r.cut_lines(), 0);
        assert_eq!(
            r.next_line().await.unwrap().map(|l| l.len()),
            Some(MAX_LINE)
        );
        assert_eq!(r.cut_lines(), 1);
        assert_eq!(r.next_line().await.unwrap().as_deref(), Some("last"));
        assert_eq!(r.next_line().await.unwrap(), None);
        assert_eq!(r.cut_lines(), 1);
    }
}
