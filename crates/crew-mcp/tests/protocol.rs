//! The server through rmcp's own client over an in-memory pipe, without a daemon: the tools are
//! listed with their generated schemas, and every failure is a tool result (`isError`) carrying
//! its reason, never a protocol error, except for a tool that does not exist.

use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::json;
use std::sync::Arc;

fn no_daemon() -> crew_mcp::Connector {
    Arc::new(|| {
        Box::pin(async { Err("crewd is not running (no socket at /nowhere).".to_string()) })
    })
}

fn text(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn tools_are_listed_and_failures_are_tool_errors() {
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(crew_mcp::serve(
        no_daemon(),
        std::env::temp_dir(),
        server_side,
    ));
    let client = ().serve(client_side).await.unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("crew")
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for n in [
        "team_run",
        "team_wait",
        "team_status",
        "team_result",
        "resource_list",
        "team_cancel",
    ] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    let run = tools.iter().find(|t| t.name == "team_run").unwrap();
    assert_eq!(run.input_schema["required"], json!(["goal", "cwd"]));

    // No daemon: the connector's words reach the model.
    let r = client
        .call_tool(CallToolRequestParams::new("team_list"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("crewd is not running"), "{}", text(&r));

    // Bad arguments are refused before any call, naming the field.
    let args = json!({"goal": "g", "cwd": "/", "tema": "x"});
    let r = client
        .call_tool(
            CallToolRequestParams::new("team_run")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("unknown field `tema`"), "{}", text(&r));

    // An unknown tool is the protocol's error.
    assert!(client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await
        .is_err());

    client.cancel().await.unwrap();
    let _ = server.await;
}

/// The ask server (`crewctl mcp --ask`): one tool, `ask_user` with a required `question`; a
/// call answers at once, without a daemon, telling the model to end its turn.
#[tokio::test]
async fn the_ask_server_has_one_tool_that_tells_the_model_to_stop() {
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(crew_mcp::serve_ask(
        crew_mcp::AskServer::default(),
        server_side,
    ));
    let client = ().serve(client_side).await.unwrap();

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ask_user"]);
    assert_eq!(tools[0].input_schema["required"], json!(["question"]));

    let args = json!({"question": "Which database?"});
    let r = client
        .call_tool(
            CallToolRequestParams::new("ask_user")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true));
    let said = text(&r);
    assert!(said.contains("Which database?"), "{said}");
    assert!(said.contains("End your turn now"), "{said}");

    // No question: a tool error naming the field.
    let r = client
        .call_tool(CallToolRequestParams::new("ask_user").with_arguments(Default::default()))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("question"), "{}", text(&r));

    client.cancel().await.unwrap();
    let _ = server.await;
}

/// `crewctl mcp --ask --tool NAME` (for Gemini CLI, which hides tools named `ask_user`): the one
/// tool under that name, and only that name is callable; a name no client takes is refused.
#[tokio::test]
async fn the_ask_server_serves_its_tool_under_another_name() {
    assert!(crew_mcp::AskServer::named("ask question").is_none());
    assert!(crew_mcp::AskServer::named("").is_none());
    assert!(crew_mcp::AskServer::named(&"x".repeat(65)).is_none());
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    let named = crew_mcp::AskServer::named("ask_question").unwrap();
    let server = tokio::spawn(crew_mcp::serve_ask(named, server_side));
    let client = ().serve(client_side).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ask_question"]);
    let args = json!({"question": "Which database?"});
    let call = |name: &'static str| {
        CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone())
    };
    let r = client.call_tool(call("ask_question")).await.unwrap();
    assert!(text(&r).contains("Which database?"), "{}", text(&r));
    assert!(client.call_tool(call("ask_user")).await.is_err());
    client.cancel().await.unwrap();
    let _ = server.await;
}
