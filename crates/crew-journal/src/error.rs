use std::path::PathBuf;

/// Everything a journal operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The files exist but cannot be trusted; nothing was deleted or repaired.
    #[error("journal at {path} is corrupt: {detail}")]
    Corrupt { path: PathBuf, detail: String },

    /// Another process (or another handle in this one) has the journal open.
    #[error("journal at {path} is already open elsewhere: {detail}")]
    Locked { path: PathBuf, detail: String },

    /// An operating-system error, e.g. ENOSPC; `source` carries the OS message.
    #[error("journal I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// An append whose seqs do not continue the log contiguously.
    #[error("append out of order: expected seq {expected}, got {got}")]
    OutOfOrder { expected: u64, got: u64 },

    /// An entry too big for the journal's layout (4 GiB or more).
    #[error("entry seq {seq} has {bytes} bytes, more than the journal can store in one entry")]
    TooLarge { seq: u64, bytes: usize },

    /// A run id the per-run index cannot represent (it uses NUL as separator).
    #[error("run id {run:?} contains a NUL byte")]
    InvalidRun { run: String },

    /// A snapshot claiming to cover seqs that were never appended.
    #[error("snapshot seq {seq} is past the journal's last seq {last_seq}")]
    SnapshotAhead { seq: u64, last_seq: u64 },

    /// An earlier write failed (e.g. disk full), so the on-disk state is uncertain; reopen the
    /// journal to continue.
    #[error("journal refuses writes after an earlier failure: {cause}")]
    Poisoned { cause: String },

    /// sled reported something that is neither I/O nor corruption (a bug or misuse).
    #[error("journal backend error while {context}: {detail}")]
    Backend { context: String, detail: String },
}
