//! The MCP handler: tools only. A tool's failure is a tool result with `isError` and the
//! reason as text (MCP's rule for errors a model can act on); an unknown tool name is a
//! protocol error.

use crate::daemon::{Connector, Daemon};
use crate::tools::{self, Call, Name};
use crate::wait::Progress;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::path::PathBuf;
use std::sync::Arc;
use tracing::Instrument;

const INSTRUCTIONS: &str = "crew runs teams of AI coding agents (explorer, planner, executor, reviewer, …) on this machine through the crewd daemon. \
Hand a goal to a team with team_run (it waits and returns the result; pass cwd = the project directory). \
resource_list shows the teams and workflows; team_status, team_result, team_wait follow a run; \
team_respond answers a task that asks a question; team_cancel and team_resume control a run.";

#[derive(Clone)]
pub struct CrewServer {
    inner: Arc<Inner>,
}

struct Inner {
    daemon: Daemon,
    cwd: PathBuf,
}

impl CrewServer {
    pub fn new(connector: Connector, cwd: PathBuf) -> CrewServer {
        CrewServer {
            inner: Arc::new(Inner {
                daemon: Daemon::new(connector),
                cwd,
            }),
        }
    }
}

impl ServerHandler for CrewServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("crew", env!("CARGO_PKG_VERSION")).with_title("crew"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools::ALL.iter().map(|n| n.tool()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        Name::find(name).map(Name::tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(name) = Name::find(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        };
        let progress = context.meta.get_progress_token().map(|token| Progress {
            peer: context.peer.clone(),
            token,
        });
        let call = Call {
            daemon: &self.inner.daemon,
            cwd: &self.inner.cwd,
            progress,
            ct: context.ct.clone(),
        };
        let span = tracing::info_span!("tool", name = name.as_str());
        let result = match tools::call(name, request.arguments, call)
            .instrument(span)
            .await
        {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(e) => {
                tracing::debug!(tool = name.as_str(), error = %e, "tool failed");
                CallToolResult::error(vec![ContentBlock::text(e.to_string())])
            }
        };
        Ok(result.into())
    }
}
