//! `crewctl mcp`: crew-mcp's server on stdin/stdout, connecting to crewd the way every other
//! verb does (same socket discovery, same "crewd is not running" advice, shown to the model).

use crate::conn;
use crate::ctx::Ctx;
use std::sync::Arc;

pub async fn serve(ctx: &Ctx) -> anyhow::Result<u8> {
    let socket = ctx.socket.clone();
    let connector: crew_mcp::Connector = Arc::new(move || {
        let socket = socket.clone();
        Box::pin(async move {
            conn::connect(&socket)
                .await
                .map(|c| c.client)
                .map_err(|e| e.to_string())
        })
    });
    let cwd = std::env::current_dir()?;
    crew_mcp::serve_stdio(connector, cwd).await?;
    Ok(0)
}

/// `crewctl mcp --ask [--tool NAME]`: the ask server crewd gives its Claude Code, Codex,
/// Gemini CLI and opencode workers.
pub async fn serve_ask(tool: &str) -> anyhow::Result<u8> {
    let server = crew_mcp::AskServer::named(tool).ok_or_else(|| {
        anyhow::anyhow!("--tool {tool:?} is not a tool name (A-Z a-z 0-9 _ -, at most 64)")
    })?;
    crew_mcp::serve_ask_stdio(server).await?;
    Ok(0)
}
