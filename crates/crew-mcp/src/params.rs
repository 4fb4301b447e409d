//! The tools' arguments. Each is a crew-api params type, or one flattened into a struct that
//! adds the tool's own few fields (whether to wait, which task), so the input schema a client
//! sees is generated from the API types: a field added to `RunParams` appears in `team_run`
//! without a change here.

use crate::error::ToolError;
use crew_api::types::{RunIdParams, RunParams};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::sync::Arc;

/// Arguments of `team_run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTool {
    #[serde(flatten)]
    pub run: RunParams,
    /// Wait until the run stops (finished, or blocked on a question or an approval) and return
    /// its result (default true). With false the run's id comes back at once; follow it with
    /// `team_wait`.
    pub wait: Option<bool>,
    /// When waiting, give up waiting after this long (default: until the run stops, at most 1
    /// hour). The run goes on either way.
    #[schemars(range(min = 0, max = 3_600_000))]
    pub timeout_ms: Option<i64>,
}

/// Arguments of `team_result`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultTool {
    #[serde(flatten)]
    pub run: RunIdParams,
    /// One task's result, at more length, instead of the run's summary.
    pub task_id: Option<String>,
}

/// The input schema of a tool taking `T`: rmcp's generator (JSON Schema 2020-12, the dialect
/// MCP names), closed to unknown properties because crewd refuses them too.
pub fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut object = match rmcp::handler::server::common::schema_for_input::<T>() {
        Ok(s) => (*s).clone(),
        // Every params type is a struct, so this is unreachable; an empty object schema keeps
        // the tool listed rather than failing the whole list.
        Err(_) => JsonObject::new(),
    };
    object.insert("type".into(), serde_json::Value::from("object"));
    object.insert(
        "additionalProperties".into(),
        serde_json::Value::Bool(false),
    );
    Arc::new(object)
}

/// Arguments → `T`, refusing properties the schema does not name (flattened structs would
/// otherwise drop them silently), with errors that name the field.
pub fn parse<T: DeserializeOwned + JsonSchema + 'static>(
    args: Option<JsonObject>,
) -> Result<T, ToolError> {
    let args = args.unwrap_or_default();
    let schema = schema::<T>();
    if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
        let mut unknown: Vec<&str> = args
            .keys()
            .map(String::as_str)
            .filter(|k| !props.contains_key(*k))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let mut known: Vec<&str> = props.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(ToolError::Params(format!(
                "unknown field `{}`; expected one of: {}",
                unknown.join("`, `"),
                known.join(", ")
            )));
        }
    }
    serde_json::from_value(serde_json::Value::Object(args))
        .map_err(|e| ToolError::Params(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> Option<JsonObject> {
        v.as_object().cloned()
    }

    #[test]
    fn run_schema_is_the_api_params_plus_the_tools_own_fields() {
        let s = schema::<RunTool>();
        let props = s["properties"].as_object().unwrap();
        for k in [
            "goal",
            "cwd",
            "team",
            "workflow",
            "runtime",
            "budget",
            "wait",
            "timeoutMs",
        ] {
            assert!(props.contains_key(k), "{k} missing from {s:?}");
        }
        assert_eq!(s["required"], json!(["goal", "cwd"]));
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["type"], json!("object"));
    }

    #[test]
    fn unknown_and_mistyped_fields_are_refused_by_name() {
        let e = parse::<RunTool>(obj(json!({"goal": "g", "cwd": "/", "tema": "x"}))).unwrap_err();
        assert!(e.to_string().contains("unknown field `tema`"), "{e}");
        let e = parse::<RunTool>(obj(json!({"goal": "g"}))).unwrap_err();
        assert!(e.to_string().contains("cwd"), "{e}");
        let ok = parse::<RunTool>(obj(json!({"goal": "g", "cwd": "/w", "wait": false}))).unwrap();
        assert_eq!((ok.run.cwd.as_str(), ok.wait), ("/w", Some(false)));
        let r = parse::<ResultTool>(obj(json!({"runId": "r1", "taskId": "t"}))).unwrap();
        assert_eq!(
            (r.run.run_id.as_str(), r.task_id.as_deref()),
            ("r1", Some("t"))
        );
    }
}
