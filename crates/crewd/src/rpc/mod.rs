//! JSON-RPC handlers, one module per method family. Every method is registered through its
//! `crew_api` descriptor, so the wire names and types are the API crate's.

mod cache;
pub mod checks;
mod daemon;
mod resource;
mod schedule;
mod subscribe;
pub(crate) mod team;
pub mod views;

use crate::actor::Actor;
use crate::shared::Shared;
use crew_api::{ApiError, Method};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::RpcModule;
use std::future::Future;
use std::sync::Arc;
use tracing::Instrument;

/// A method's params, as its handler takes them.
type P<M> = <M as Method>::Params;
/// A method's answer, as its handler gives it.
type Out<M> = Result<<M as Method>::Result, ApiError>;

/// `v` when it is in `range`, else the field's invalid-params error naming the range.
fn in_range<T: PartialOrd + std::fmt::Display>(
    field: &str,
    v: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ApiError> {
    if range.contains(&v) {
        return Ok(v);
    }
    let (lo, hi) = range.into_inner();
    Err(ApiError::invalid_params(
        field,
        format!("must be between {lo} and {hi}"),
    ))
}

pub struct Ctx {
    pub shared: Arc<Shared>,
    pub actor: Actor,
}

/// Params are one object (SPEC §10). No params, `null` or `[]` mean `{}`; a type error names
/// the field path.
pub fn parse_params<T: serde::de::DeserializeOwned>(params: &Params<'_>) -> Result<T, ApiError> {
    let raw = params.as_str().map(str::trim).unwrap_or("");
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
        let inner = inner
            .split(" at line ")
            .next()
            .unwrap_or(&inner)
            .to_string();
        // serde names a missing or unknown field in the message, not in the path.
        let field = if path == "." || path.is_empty() {
            inner.split('`').nth(1).unwrap_or("params").to_string()
        } else {
            path
        };
        ApiError::invalid_params(&field, inner)
    })
}

/// Run a handler's blocking work (files, the journal, caches behind locks) on tokio's blocking
/// pool, off the actor and the async workers; a panic there is the request's internal error.
pub(crate) async fn off_actor<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))
}

fn register<M, F, Fut>(module: &mut RpcModule<Ctx>, handler: F)
where
    M: Method,
    F: Fn(Arc<Ctx>, M::Params) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<M::Result, ApiError>> + Send + 'static,
{
    let res = module.register_async_method(M::NAME, move |params, ctx, _ext| {
        let handler = handler.clone();
        let span = tracing::info_span!("rpc", method = M::NAME);
        async move {
            let parsed: M::Params = parse_params(&params).map_err(ErrorObjectOwned::from)?;
            let started = std::time::Instant::now();
            let out = handler(ctx, parsed).await;
            match &out {
                Ok(_) => tracing::debug!(elapsed_us = started.elapsed().as_micros() as u64, "ok"),
                Err(e) => tracing::info!(code = e.code, error = %e.message, "error"),
            }
            out.map_err(ErrorObjectOwned::from)
        }
        .instrument(span)
    });
    if let Err(e) = res {
        // Only a programming error (a name registered twice) can get here.
        panic!("method {} registered twice: {e}", M::NAME);
    }
}

pub fn module(shared: Arc<Shared>, actor: Actor) -> RpcModule<Ctx> {
    let mut m = RpcModule::new(Ctx { shared, actor });
    daemon::register_all(&mut m);
    resource::register_all(&mut m);
    team::register_all(&mut m);
    subscribe::register_all(&mut m);
    schedule::register_all(&mut m);
    cache::register_all(&mut m);
    let doc = crew_api::openrpc::document();
    let _ = m.register_method("rpc.discover", move |_, _, _| {
        Ok::<_, ErrorObjectOwned>(doc.clone())
    });
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_check_names_its_bounds() {
        assert_eq!(in_range("limit", 1, 1..=1000).unwrap(), 1);
        assert_eq!(in_range("limit", 1000, 1..=1000).unwrap(), 1000);
        for v in [0, 1001, -5] {
            let e = in_range("limit", v, 1..=1000).unwrap_err();
            assert_eq!(
                e.message, "invalid params: limit: must be between 1 and 1000",
                "{v}"
            );
        }
    }

    #[test]
    fn parse_params_names_the_field() {
        let table = [
            (r#"{"cwd": 5, "goal": "x"}"#, "cwd"),
            (r#"{"goal": "x"}"#, "cwd"),
            (r#"{"goal": "x", "cwd": "/", "bogus": 1}"#, "bogus"),
            (
                r#"{"goal": "x", "cwd": "/", "budget": {"tokens": "lots"}}"#,
                "budget.tokens",
            ),
            (r#"[1, 2]"#, "params"),
        ];
        for (raw, field) in table {
            let p = Params::new(Some(raw));
            let e = parse_params::<crew_api::types::RunParams>(&p).unwrap_err();
            assert_eq!(e.code, -32602, "{raw}");
            assert_eq!(
                e.data.as_ref().unwrap()["field"],
                field,
                "{raw}: {}",
                e.message
            );
        }
        assert!(parse_params::<crew_api::types::NoParams>(&Params::new(None)).is_ok());
    }
}
