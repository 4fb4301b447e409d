//! Reading the user's answer from the terminal without getting stuck on it: one key without
//! Enter (the Ctrl-C prompt, approve/reject), or one line (an answer to a question). Reads run
//! on a blocking thread that polls stdin in short slices and gives up as soon as it is told to,
//! so a second Ctrl-C ends crewctl at once instead of leaving a read that swallows the user's
//! next command.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How long one `poll` waits before looking at the cancel flag again.
const SLICE_MS: i32 = 50;

/// Puts the terminal in "one key" mode (no line buffering, no echo) and restores it on drop.
/// Signals stay on, so Ctrl-C still arrives as SIGINT.
struct KeyMode {
    fd: i32,
    saved: libc::termios,
}

impl KeyMode {
    fn enter(fd: i32) -> Option<KeyMode> {
        // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it or fails.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is stdin's descriptor and `saved` is a valid termios to write into.
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: as above; `raw` is a copy of the terminal's own settings with two flags off.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return None;
        }
        Some(KeyMode { fd, saved })
    }
}

impl Drop for KeyMode {
    fn drop(&mut self) {
        // SAFETY: restores the settings read in `enter` on the same descriptor.
        unsafe {
            libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved);
        }
    }
}

/// Waits until stdin has input, or `cancel` is set (`false`), or stdin is closed or broken.
fn wait_readable(fd: i32, cancel: &AtomicBool) -> bool {
    loop {
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, count 1.
        let n = unsafe { libc::poll(&mut p, 1, SLICE_MS) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if n > 0 {
            return p.revents & (libc::POLLIN | libc::POLLHUP) != 0;
        }
    }
}

fn read_byte(fd: i32) -> Option<u8> {
    let mut b = [0u8; 1];
    // SAFETY: reads at most one byte into a one-byte buffer.
    let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
    (n == 1).then_some(b[0])
}

/// One key, without Enter. `None`: cancelled, or stdin closed.
pub fn key_blocking(cancel: &AtomicBool) -> Option<u8> {
    let fd = std::io::stdin().as_raw_fd();
    let _mode = KeyMode::enter(fd);
    if !wait_readable(fd, cancel) {
        return None;
    }
    read_byte(fd)
}

/// One line typed with the terminal in key mode: the text is not echoed by the terminal but
/// handed to `show` after every key (the follow view draws it in its offer line, so live
/// output above cannot scramble it). Backspace deletes a character, Ctrl-U the line; escape
/// sequences (arrow keys) are ignored. `None`: cancelled, or stdin closed.
pub fn line_shown(cancel: &AtomicBool, show: impl Fn(&str)) -> Option<String> {
    let fd = std::io::stdin().as_raw_fd();
    let _mode = KeyMode::enter(fd);
    let mut line = LineEdit::default();
    show("");
    loop {
        if !wait_readable(fd, cancel) {
            return None;
        }
        match line.key(read_byte(fd)?) {
            Some(done) => return Some(done),
            None => show(&line.text()),
        }
    }
}

/// The line being typed, byte by byte.
#[derive(Default)]
struct LineEdit {
    bytes: Vec<u8>,
    /// Inside an escape sequence (ESC, then `[` or `O` and parameters up to a final byte).
    escape: u8,
}

impl LineEdit {
    /// Takes one byte; `Some(line)` when it ended the line.
    fn key(&mut self, b: u8) -> Option<String> {
        match (self.escape, b) {
            (1, b'[' | b'O') => self.escape = 2,
            (1, _) => self.escape = 0,
            (2, 0x40..=0x7e) => self.escape = 0,
            (2, _) => {}
            (_, 0x1b) => self.escape = 1,
            (_, b'\r' | b'\n') => return Some(self.text().trim_end().to_string()),
            (_, 0x7f | 0x08) => {
                // Back to the previous character's first byte.
                while let Some(last) = self.bytes.pop() {
                    if last & 0xc0 != 0x80 {
                        break;
                    }
                }
            }
            (_, 0x15) => self.bytes.clear(),
            (_, b) if b < 0x20 => {}
            // An answer is a message, not a file: bound it.
            (_, b) if self.bytes.len() < 64 * 1024 => self.bytes.push(b),
            _ => {}
        }
        None
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// A read on a blocking thread that can be abandoned: `stop` makes it return within a poll
/// slice, and awaiting the handle afterwards leaves the terminal as it was.
pub struct Read<T> {
    cancel: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<Option<T>>,
}

impl<T: Send + 'static> Read<T> {
    pub fn start(f: fn(&AtomicBool) -> Option<T>) -> Read<T> {
        Self::start_with(f)
    }

    pub fn start_with(f: impl FnOnce(&AtomicBool) -> Option<T> + Send + 'static) -> Read<T> {
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        let handle = tokio::task::spawn_blocking(move || f(&c));
        Read { cancel, handle }
    }

    /// The value read, or `None` (cancelled, stdin closed).
    pub async fn result(&mut self) -> Option<T> {
        (&mut self.handle).await.ok().flatten()
    }

    /// Abandons the read and waits for the thread to let go of the terminal.
    pub async fn stop(self) {
        self.cancel.store(true, Ordering::Relaxed);
        let _ = self.handle.await;
    }
}

#[cfg(test)]
mod tests {
    use super::LineEdit;

    fn typed(keys: &[u8]) -> (String, Option<String>) {
        let mut l = LineEdit::default();
        let mut done = None;
        for &k in keys {
            if let Some(d) = l.key(k) {
                done = Some(d);
                break;
            }
        }
        (l.text(), done)
    }

    #[test]
    fn a_line_is_edited_as_typed() {
        assert_eq!(typed(b"memory\r").1.as_deref(), Some("memory"));
        assert_eq!(typed(b"memorx\x7fy\n").1.as_deref(), Some("memory"));
        assert_eq!(
            typed("caf\u{e9}\x7fe\r".as_bytes()).1.as_deref(),
            Some("cafe")
        );
        assert_eq!(typed(b"junk\x15ok\r").1.as_deref(), Some("ok"));
        // An arrow key (ESC [ A) types nothing.
        assert_eq!(typed(b"a\x1b[Ab\r").1.as_deref(), Some("ab"));
        assert_eq!(typed(b"half").0, "half");
    }
}
