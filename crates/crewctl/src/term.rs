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

/// One line (without its newline). `None`: cancelled, or stdin closed before a newline.
pub fn line_blocking(cancel: &AtomicBool) -> Option<String> {
    let fd = std::io::stdin().as_raw_fd();
    let mut bytes = Vec::new();
    loop {
        if !wait_readable(fd, cancel) {
            return None;
        }
        match read_byte(fd)? {
            b'\n' => return Some(String::from_utf8_lossy(&bytes).trim_end().to_string()),
            b => bytes.push(b),
        }
        // An answer is a message, not a file: bound it.
        if bytes.len() > 64 * 1024 {
            return Some(String::from_utf8_lossy(&bytes).into_owned());
        }
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
