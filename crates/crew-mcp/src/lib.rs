//! crew's MCP server: the runs of crewd as Model Context Protocol tools, so the agent a user
//! already works in (Claude Code, Codex, any MCP client) can hand work to a crew team, wait for
//! it and read the result back. `crewctl mcp` serves it over stdio.
//!
//! The server is a thin client of crewd's JSON-RPC API: every tool is one or a few typed calls
//! through `crew_api::client`, and every tool's input schema is generated from the crew-api
//! params type it forwards (`params.rs`), so the MCP surface cannot drift from the API. The
//! protocol itself (framing, initialization, version negotiation, cancellation) is rmcp's.
//!
//! The connection to crewd is made on the first tool call, not at start-up, and made again
//! after it broke: an MCP client starts its servers with the editor, often before the daemon.
//!
//! `ask.rs` is a second, separate server (`crewctl mcp --ask`): the `ask_user` tool crewd gives
//! the Claude Code, Codex and opencode workers it starts.

mod ask;
mod daemon;
mod error;
mod params;
mod render;
mod server;
mod tools;
mod wait;
mod workspace;

pub use ask::{is_tool_name, serve_ask, serve_ask_stdio, AskServer, ASK_TOOL};
pub use daemon::{ConnectFuture, Connector};
pub use error::ToolError;
pub use server::CrewServer;

use rmcp::ServiceExt;

/// Why serving stopped before the client hung up.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("MCP initialization failed: {0}")]
    Init(String),
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
}

/// Serves MCP on `transport` (stdin/stdout for `crewctl mcp`, a duplex pipe in tests) until the
/// client closes it. `cwd` resolves relative `cwd` arguments: the directory the client started
/// the server in, which MCP clients set to the project.
pub async fn serve<T, E, A>(
    connector: Connector,
    cwd: std::path::PathBuf,
    transport: T,
) -> Result<(), ServeError>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = CrewServer::new(connector, cwd)
        .serve(transport)
        .await
        .map_err(|e| ServeError::Init(e.to_string()))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| ServeError::Session(e.to_string()))
}

/// Serves MCP over this process's stdin and stdout. Nothing else may write to stdout meanwhile.
pub async fn serve_stdio(connector: Connector, cwd: std::path::PathBuf) -> Result<(), ServeError> {
    serve(connector, cwd, rmcp::transport::stdio_pipes()).await
}
