//! crew's ask server (`crewctl mcp --ask`): one tool, `ask_user`, for the Claude Code, Codex,
//! Gemini CLI and opencode workers crewd starts. It needs no daemon: the question is the tool
//! *call*, which crewd reads from the worker's own stream (as it reads pi's call of the same tool
//! from crew's pi extension); the result only tells the model to end its turn. The answer arrives
//! as the next prompt of the same CLI session (`claude -p --resume`, `codex exec resume`,
//! `gemini --resume`, `opencode run --session`).
//!
//! The tool is `ask_user` unless the worker's CLI needs another name: headless Gemini CLI
//! removes every tool named like its own interactive `ask_user`, an MCP server's included.

use crate::params::{parse, schema};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;

/// The tool's usual name: the same as pi's, so an agent file reads the same on every runtime.
pub const ASK_TOOL: &str = "ask_user";

/// True for a name an MCP client takes as a tool name (and crew puts on a worker's argv).
pub fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

const DESCRIPTION: &str =
    "Ask the user a question when you cannot go on without their decision or information. \
The question goes to the user; their answer arrives as your next message. \
End your turn right after calling this tool.";

/// Arguments of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskTool {
    /// The question for the user, self-contained.
    pub question: String,
}

/// What the model is told: the call was the question; stop now.
fn answer_text(question: &str) -> String {
    format!(
        "Your question went to the user: \"{question}\". End your turn now, without another tool call; their answer will arrive as the next message."
    )
}

/// The ask server, its one tool under `name`.
#[derive(Clone)]
pub struct AskServer {
    name: String,
}

impl Default for AskServer {
    fn default() -> Self {
        Self {
            name: ASK_TOOL.into(),
        }
    }
}

impl AskServer {
    /// `None` for a name that is not a tool name.
    pub fn named(name: &str) -> Option<Self> {
        is_tool_name(name).then(|| Self { name: name.into() })
    }

    fn tool(&self) -> Tool {
        Tool::new(self.name.clone(), DESCRIPTION, schema::<AskTool>())
            .with_annotations(ToolAnnotations::new().read_only(true))
    }
}

impl ServerHandler for AskServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("crew_ask", env!("CARGO_PKG_VERSION")).with_title("crew ask"),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == self.name).then(|| self.tool())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != self.name {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
        let result = match parse::<AskTool>(request.arguments) {
            Ok(a) => CallToolResult::success(vec![ContentBlock::text(answer_text(&a.question))]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        };
        Ok(result.into())
    }
}

/// Serves `server` on `transport` until the client closes it.
pub async fn serve_ask<T, E, A>(server: AskServer, transport: T) -> Result<(), crate::ServeError>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = server
        .serve(transport)
        .await
        .map_err(|e| crate::ServeError::Init(e.to_string()))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| crate::ServeError::Session(e.to_string()))
}

/// Serves `server` over this process's stdin and stdout.
pub async fn serve_ask_stdio(server: AskServer) -> Result<(), crate::ServeError> {
    serve_ask(server, rmcp::transport::stdio_pipes()).await
}
