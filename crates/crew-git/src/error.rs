//! What can go wrong when crew asks git for something.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run `git {args}`: {source}")]
    Spawn {
        args: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {args}` took longer than {}s and was killed", .after.as_secs())]
    Timeout { args: String, after: Duration },
    /// git ran and said no: its own message, trimmed, is what the user sees.
    #[error("`git {args}` failed ({code}): {stderr}")]
    Failed {
        args: String,
        code: String,
        stderr: String,
    },
    #[error("unexpected output from `git {args}`: {what}")]
    Parse { args: String, what: String },
    /// Files `git add -A` left untracked however often it ran (named, some of them).
    #[error("git would not stage these files (core.ignorecase?): {0}")]
    NotStaged(String),
    /// A file name git gave that is not UTF-8 (shown lossily): crew's paths are text.
    #[error("a file name that is not UTF-8: {0}")]
    NotUtf8(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl GitError {
    /// git's stderr when git itself refused.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            GitError::Failed { stderr, .. } => Some(stderr),
            _ => None,
        }
    }
}
