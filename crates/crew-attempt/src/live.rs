//! Live stdin (pi's rpc mode, Claude Code's stream-json input, codex app-server): writing the
//! prompt, steers and protocol replies to a worker, each write bounded in time.

use crate::stdout::Stdout;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Send a live worker what its protocol owes it after the lines fed so far (its next request,
/// an answer to a request of the agent's): the agent may be waiting for it and print nothing
/// until then, so every place that feeds lines sends them.
pub(crate) async fn send_replies(
    stdin: Option<&mut tokio::process::ChildStdin>,
    out: &mut Stdout,
    limit: Duration,
) {
    let replies = out.parser.live_replies();
    if let (Some(w), false) = (stdin, replies.is_empty()) {
        if let Err(e) = send_lines(w, &replies, limit).await {
            tracing::warn!(error = %e, "cannot answer the live worker");
        }
    }
}

/// Write `lines` to a live worker's stdin, each with its `\n`, within `limit`: a worker that
/// does not read its stdin must not hold the supervision loop.
pub(crate) async fn send_lines(
    w: &mut tokio::process::ChildStdin,
    lines: &[String],
    limit: Duration,
) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    match tokio::time::timeout(limit, w.write_all(&bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the worker does not read its stdin",
        )),
    }
}
