//! The JSON-RPC request path without a daemon: raw bodies through jsonrpsee's HTTP service with
//! crewd's limits (`rpc_request`), and params objects into every method's params type
//! (`rpc_params`). The handlers do what crewd's do before touching state: read the params.

use crew_api::methods::*;
use crew_api::types::SubscribeParams;
use crew_api::{codes, ApiError};
use http_body_util::BodyExt;
use jsonrpsee::server::{
    stop_channel, BatchRequestConfig, HttpBody, HttpRequest, ServerConfig, ServerHandle, StopHandle,
};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{Methods, RpcModule};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::OnceLock;
use tower::ServiceExt;

/// Reads one method's params: `Err` is the -32602 answer.
type ParamsFn = fn(Option<&str>) -> Result<(), ApiError>;

/// crewd's reading of params (`crewd::rpc::parse_params`): one object; none, `null` or `[]`
/// mean `{}`; an error names the field.
pub fn parse_params<T: DeserializeOwned>(raw: Option<&str>) -> Result<T, ApiError> {
    let raw = raw.map(str::trim).unwrap_or("");
    let raw = if raw.is_empty() || raw == "null" || raw == "[]" {
        "{}"
    } else {
        raw
    };
    if !raw.starts_with('{') {
        return Err(ApiError::invalid_params(
            "params",
            "must be one object with named fields",
        ));
    }
    let de = &mut serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let field = if path == "." || path.is_empty() {
            inner.split('`').nth(1).unwrap_or("params").to_string()
        } else {
            path
        };
        ApiError::invalid_params(&field, inner)
    })
}

/// Params that were accepted must print and read back to the same thing: clients echo them
/// (`schedule.get` returns the stored `team.run` params, `team.export` bundles them).
fn check<T: DeserializeOwned + Serialize>(raw: Option<&str>) -> Result<(), ApiError> {
    let value: T = parse_params(raw)?;
    let first = serde_json::to_string(&value);
    assert!(first.is_ok(), "accepted params do not serialize: {first:?}");
    let first = first.unwrap_or_default();
    let again: Result<T, _> = parse_params(Some(&first));
    assert!(
        again.is_ok(),
        "params printed as {first} are refused: {:?}",
        again.err()
    );
    let second = again.ok().and_then(|v| serde_json::to_string(&v).ok());
    assert_eq!(
        second.as_deref(),
        Some(first.as_str()),
        "params change when read back"
    );
    Ok(())
}

macro_rules! params_table {
    ($($m:ty),* $(,)?) => {
        &[$((<$m as Method>::NAME, check::<<$m as Method>::Params> as ParamsFn)),*]
    };
}

/// Every method of SPEC §10 with params, plus the subscription.
pub const METHODS: &[(&str, ParamsFn)] = params_table![
    DaemonPing,
    DaemonStatus_,
    DaemonShutdown,
    ResourceList,
    ResourceGet,
    ResourceValidate,
    TeamPlan,
    TeamRun,
    TeamStatus,
    TeamList,
    TeamCancel,
    TeamResume,
    TeamRetry,
    TeamApprove,
    TeamReject,
    TeamSteer,
    TeamRespond,
    TeamWait,
    TeamEvents,
    TeamArtifacts,
    TeamArtifact,
    TeamSummary,
    TeamForget,
    TeamPrune,
    TeamExport,
    TeamImport,
    TeamDiff,
    TeamApply,
    TeamPick,
    ScheduleAdd,
    ScheduleList,
    ScheduleGet,
    ScheduleUpdate,
    ScheduleEnable,
    ScheduleDisable,
    ScheduleRemove,
    ScheduleTrigger,
    SchedulePreview,
    CacheStats,
    CacheClear,
    CacheInvalidate,
];

const SUBSCRIBE: (&str, ParamsFn) = (TeamSubscribe::NAME, check::<SubscribeParams> as ParamsFn);

/// First byte: which method; the rest: its params text.
pub fn rpc_params(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        // jsonrpsee refuses such a body with -32700 before any params are read.
        return;
    };
    let all = METHODS.len() + 1;
    let (name, read) = match METHODS.get(usize::from(pick) % all) {
        Some(m) => *m,
        None => SUBSCRIBE,
    };
    if let Err(e) = read(Some(text)) {
        assert_eq!(e.code, codes::INVALID_PARAMS, "{name}: {e:?}");
        let field = e.data.as_ref().and_then(|d| d.get("field"));
        // An unknown field may really be called "" (`{"": 1}`); that one is named too.
        let named = field
            .and_then(Value::as_str)
            .is_some_and(|f| !f.is_empty() || e.message.contains("unknown field ``"));
        assert!(named, "{name}: the error does not name a field: {e:?}");
    }
}

struct Service {
    builder: jsonrpsee::server::TowerServiceBuilder<
        tower::layer::util::Identity,
        tower::layer::util::Identity,
    >,
    methods: Methods,
    stop: StopHandle,
    // Dropping it would stop the service.
    _handle: ServerHandle,
}

/// crewd's server limits (config defaults).
const MAX_REQUEST_BYTES: u32 = 1 << 20;
const MAX_BATCH: u32 = 64;

fn service() -> &'static Service {
    static SERVICE: OnceLock<Service> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let mut module = RpcModule::new(());
        for &(name, read) in METHODS {
            let registered = module.register_method(name, move |params, _, _| {
                read(params.as_str())
                    .map(|()| serde_json::json!({}))
                    .map_err(ErrorObjectOwned::from)
            });
            assert!(registered.is_ok(), "{name} registered twice");
        }
        let cfg = ServerConfig::builder()
            .max_request_body_size(MAX_REQUEST_BYTES)
            .max_response_body_size(32 << 20)
            .set_batch_request_config(BatchRequestConfig::Limit(MAX_BATCH))
            .build();
        let (stop, handle) = stop_channel();
        Service {
            builder: jsonrpsee::server::Server::builder()
                .set_config(cfg)
                .to_service_builder(),
            methods: module.into(),
            stop,
            _handle: handle,
        }
    })
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a tokio runtime: {e}"));
}

/// One answer object: a result or an error with an integer code and a message.
fn check_answer(v: &Value, body: &str) {
    let ok = v.get("result").is_some()
        || v.get("error").is_some_and(|e| {
            e.get("code").is_some_and(Value::is_i64)
                && e.get("message").is_some_and(Value::is_string)
        });
    assert!(ok, "not a JSON-RPC answer: {body}");
    if let Some(code) = v.pointer("/error/code").and_then(Value::as_i64) {
        // Only jsonrpsee itself or a params error may answer: the handlers do nothing else, and
        // an internal error (-32603) would mean a panic was caught somewhere.
        assert_ne!(code, i64::from(codes::INTERNAL_ERROR), "{body}");
    }
}

/// The bytes as an HTTP POST body.
pub fn rpc_request(data: &[u8]) {
    let svc = service();
    let tower_svc = svc
        .builder
        .clone()
        .build(svc.methods.clone(), svc.stop.clone());
    let request = HttpRequest::builder()
        .method("POST")
        .uri("/")
        .header("content-type", "application/json")
        .body(HttpBody::from(data.to_vec()));
    let Ok(request) = request else {
        return;
    };
    let (status, body) = RUNTIME.with(|rt| {
        rt.block_on(async move {
            let response = tower_svc.oneshot(request).await;
            assert!(response.is_ok(), "the service failed: {:?}", response.err());
            let response = response.unwrap_or_default();
            let status = response.status();
            let bytes = response.into_body().collect().await.map(|b| b.to_bytes());
            assert!(bytes.is_ok(), "unreadable response body");
            (status, bytes.unwrap_or_default())
        })
    });
    let body = String::from_utf8_lossy(&body).into_owned();
    assert!(
        status.is_success() || status.is_client_error(),
        "HTTP {status}: {body}"
    );
    if body.trim().is_empty() || body.trim() == "null" {
        // A notification (or a batch of them) has no answer; jsonrpsee's HTTP transport says
        // `null`.
        return;
    }
    if !status.is_success() {
        return;
    }
    let parsed: Result<Value, _> = serde_json::from_str(&body);
    assert!(parsed.is_ok(), "the answer is not JSON: {body}");
    match parsed.unwrap_or_default() {
        Value::Array(items) => {
            assert!(!items.is_empty(), "empty batch answer");
            for item in &items {
                check_answer(item, &body);
            }
        }
        other => check_answer(&other, &body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_fuzzed() {
        let fuzzed: Vec<&str> = METHODS.iter().map(|(n, _)| *n).collect();
        for doc in crew_api::methods::all() {
            assert!(fuzzed.contains(&doc.name), "{} is not fuzzed", doc.name);
        }
    }

    #[test]
    fn params_errors_name_the_field() {
        let e = parse_params::<crew_api::types::RunIdParams>(Some(r#"{"runId":7}"#));
        let e = e.err().map(|e| e.data);
        assert_eq!(
            e.flatten().and_then(|d| d.get("field").cloned()),
            Some(Value::from("runId"))
        );
    }
}
