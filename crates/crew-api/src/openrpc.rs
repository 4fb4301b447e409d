//! The OpenRPC 1.x document of the API, generated from [`crate::methods::all`].

use crate::methods::{all, TeamSubscribe};
use crate::types::{SubscribeParams, SubscriptionItem};
use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};

fn generator() -> SchemaGenerator {
    SchemaSettings::draft07()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator()
}

/// Turn a params schema (an object, possibly behind a `$ref`) into by-name content descriptors.
fn params_descriptors(schema: &Value, defs: &Map<String, Value>) -> Vec<Value> {
    let resolved = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .rsplit('/')
            .next()
            .and_then(|name| defs.get(name))
            .unwrap_or(schema),
        None => schema,
    };
    let required: Vec<&str> = resolved
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = resolved.get("properties").and_then(Value::as_object) else {
        return vec![];
    };
    props
        .iter()
        .map(|(name, s)| {
            let mut d =
                json!({ "name": name, "schema": s, "required": required.contains(&name.as_str()) });
            if let Some(desc) = s.get("description") {
                d["description"] = desc.clone();
            }
            d
        })
        .collect()
}

fn error_doc(code: i32) -> Value {
    json!({ "code": code, "message": crate::error::meaning(code) })
}

/// The whole document, deterministic (sorted schemas) so it can be committed and diffed.
pub fn document() -> Value {
    let mut g = generator();
    let mut methods = Vec::new();
    let mut raw = Vec::new();
    for m in all() {
        let p = (m.params)(&mut g);
        let r = (m.result)(&mut g);
        raw.push((m.name, m.summary, m.errors, p, r));
    }
    let sub_params = g.subschema_for::<SubscribeParams>();
    let sub_item = g.subschema_for::<SubscriptionItem>();
    let defs: Map<String, Value> = g
        .take_definitions(true)
        .into_iter()
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .collect();

    for (name, summary, errors, p, r) in raw {
        methods.push(json!({
            "name": name,
            "summary": summary,
            "paramStructure": "by-name",
            "params": params_descriptors(p.as_value(), &defs),
            "result": { "name": "result", "schema": r.as_value() },
            "errors": errors.iter().map(|c| error_doc(*c)).collect::<Vec<_>>(),
        }));
    }
    methods.push(json!({
        "name": TeamSubscribe::NAME,
        "summary": "Subscribe to events (WebSocket only). Replays stored events after `afterSeq`, then live ones, with no gap or duplicate at the seam. Notifications are sent as `team.event`; a subscriber that falls too far behind gets a `dropped` notice and is closed. Unsubscribe with `team.unsubscribe`.",
        "paramStructure": "by-name",
        "params": params_descriptors(sub_params.as_value(), &defs),
        "result": { "name": "subscription", "schema": sub_item.as_value() },
        "x-notification": TeamSubscribe::NOTIFICATION,
        "x-unsubscribe": TeamSubscribe::UNSUBSCRIBE,
        "errors": [error_doc(crate::codes::NOT_FOUND)],
    }));
    methods.push(json!({
        "name": "rpc.discover",
        "summary": "This OpenRPC document.",
        "paramStructure": "by-name",
        "params": [],
        "result": { "name": "document", "schema": { "type": "object" } },
    }));
    json!({
        "openrpc": "1.3.2",
        "info": {
            "title": "crewd",
            "version": crate::API_VERSION,
            "description": "JSON-RPC 2.0 API of crewd over a Unix socket: HTTP POST for calls, WebSocket on the same socket for calls and subscriptions. Params are one named object; results are objects; fields are camelCase."
        },
        "methods": methods,
        "components": { "schemas": defs },
    })
}

/// A markdown method reference from the same source.
pub fn markdown() -> String {
    let doc = document();
    let mut out = String::from("# crewd method reference\n\nGenerated from `crates/crew-api` (`make docs`). Do not edit by hand.\n\n");
    out.push_str("Transport: JSON-RPC 2.0 over the daemon's Unix socket (HTTP POST or WebSocket). Params are one object.\n\n");
    out.push_str("| code | meaning |\n|---|---|\n");
    for (code, meaning) in crate::error::TABLE {
        out.push_str(&format!("| {code} | {meaning} |\n"));
    }
    out.push('\n');
    let empty = vec![];
    for m in doc["methods"].as_array().unwrap_or(&empty) {
        let name = m["name"].as_str().unwrap_or_default();
        out.push_str(&format!(
            "## `{name}`\n\n{}\n\n",
            m["summary"].as_str().unwrap_or_default()
        ));
        let params = m["params"].as_array().unwrap_or(&empty);
        if params.is_empty() {
            out.push_str("Params: none.\n\n");
        } else {
            out.push_str("| param | required | type | description |\n|---|---|---|---|\n");
            for p in params {
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} |\n",
                    p["name"].as_str().unwrap_or_default(),
                    if p["required"].as_bool().unwrap_or(false) {
                        "yes"
                    } else {
                        "no"
                    },
                    type_name(&p["schema"]),
                    p["description"].as_str().unwrap_or("").replace('\n', " ")
                ));
            }
            out.push('\n');
        }
        out.push_str(&format!(
            "Result: {}\n\n",
            type_name(&m["result"]["schema"])
        ));
        if let Some(errs) = m["errors"].as_array().filter(|e| !e.is_empty()) {
            let codes: Vec<String> = errs.iter().map(|e| e["code"].to_string()).collect();
            out.push_str(&format!("Errors: {}\n\n", codes.join(", ")));
        }
    }
    out
}

fn type_name(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return format!("`{}`", r.rsplit('/').next().unwrap_or(r));
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        return any.iter().map(type_name).collect::<Vec<_>>().join(" or ");
    }
    match s.get("type") {
        Some(Value::String(t)) if t == "array" => format!("{}[]", type_name(&s["items"])),
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `proto-docs/` is generated from this crate; this fails when it drifts. Regenerate with
    /// `make docs` (or `UPDATE_PROTO_DOCS=1 cargo test -p crew-api`).
    #[test]
    fn proto_docs_match_the_code() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto-docs");
        let json = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        let md = markdown();
        if std::env::var_os("UPDATE_PROTO_DOCS").is_some() {
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("openrpc.json"), &json).unwrap();
            std::fs::write(root.join("methods.md"), &md).unwrap();
        }
        let on_disk = std::fs::read_to_string(root.join("openrpc.json")).unwrap_or_default();
        assert!(
            on_disk == json,
            "proto-docs/openrpc.json is out of date: run `make docs`"
        );
        let on_disk = std::fs::read_to_string(root.join("methods.md")).unwrap_or_default();
        assert!(
            on_disk == md,
            "proto-docs/methods.md is out of date: run `make docs`"
        );
    }

    #[test]
    fn every_method_is_documented_once() {
        let doc = document();
        let names: Vec<&str> = doc["methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate method");
        for n in crate::methods::all_names() {
            if n != "team.unsubscribe" {
                assert!(names.contains(&n), "{n} missing from the document");
            }
        }
        // team.run's params are one object with camelCase fields.
        let run = doc["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "team.run")
            .unwrap();
        let pnames: Vec<&str> = run["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(
            pnames.contains(&"goal")
                && pnames.contains(&"failurePolicy")
                && pnames.contains(&"requirePlanApproval")
        );
    }
}
