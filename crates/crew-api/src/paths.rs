//! Where the daemon's socket is by default (SPEC §2), shared by the daemon and clients.

use std::path::PathBuf;

/// `$CREW_SOCKET`, else `$XDG_RUNTIME_DIR/crew/crewd.sock`, else `/tmp/crew-$UID/crewd.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(s) = std::env::var_os("CREW_SOCKET").filter(|s| !s.is_empty()) {
        return PathBuf::from(s);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|s| !s.is_empty()) {
        return PathBuf::from(d).join("crew").join("crewd.sock");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/tmp/crew-{uid}")).join("crewd.sock")
}
