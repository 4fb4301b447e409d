//! `team.subscribe` / `team.unsubscribe` and stored-event reads.
//!
//! Exactly once, in order, no gap at the seam: the subscriber joins the live bus FIRST, then
//! notes the durable seq D, replays stored events up to D from the journal, and then forwards
//! live events with seq > the last one sent. Anything published after joining is on the bus;
//! anything before D is in the journal; the overlap is skipped by seq.

use super::Ctx;
use crate::shared::Published;
use crate::shared::Shared;
use crew_api::methods::TeamSubscribe;
use crew_api::types::{Event, SubscribeParams, SubscriptionNotice};
use crew_api::ApiError;
use jsonrpsee::core::server::SendTimeoutError;
use jsonrpsee::{PendingSubscriptionSink, RpcModule, SubscriptionMessage, SubscriptionSink};
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tracing::Instrument;

/// A subscriber whose connection does not take a message for this long is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a dropped subscriber's final notice waits for it to read again.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(60);
const REPLAY_PAGE: usize = 1000;

/// Stored events after `after` (optionally of one run), at most `limit`, never beyond what is
/// durable.
pub fn read_events(
    shared: &Shared,
    run: Option<&str>,
    after: u64,
    limit: usize,
) -> Result<(Vec<Event>, u64), ApiError> {
    let durable = shared.durable_seq();
    let raw = match run {
        Some(r) => shared.journal.read_run_after(r, after, limit),
        None => shared.journal.read_after(after, limit),
    }
    .map_err(|e| ApiError::internal(format!("cannot read the journal: {e}")))?;
    let mut next = after;
    let mut out = Vec::with_capacity(raw.len());
    for (seq, bytes) in raw {
        if seq > durable {
            break;
        }
        next = seq;
        if let Ok(ev) = serde_json::from_slice::<Event>(&bytes) {
            out.push(ev);
        }
    }
    Ok((out, next))
}

fn raw_msg(json: &str) -> Option<SubscriptionMessage> {
    serde_json::value::RawValue::from_string(json.to_string())
        .ok()
        .map(SubscriptionMessage::from)
}

/// How a subscription ended.
enum End {
    /// The client went away or unsubscribed.
    Closed,
    /// The subscriber did not keep up; it gets a final notice.
    Dropped { last: u64, why: String },
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    let res = m.register_subscription(
        TeamSubscribe::NAME,
        TeamSubscribe::NOTIFICATION,
        TeamSubscribe::UNSUBSCRIBE,
        |params, pending: PendingSubscriptionSink, ctx, _ext| async move {
            let p: SubscribeParams = match super::parse_params(&params) {
                Ok(p) => p,
                Err(e) => {
                    pending
                        .reject(jsonrpsee::types::ErrorObjectOwned::from(e))
                        .await;
                    return;
                }
            };
            let after = match u64::try_from(p.after_seq.unwrap_or(0)) {
                Ok(a) => a,
                Err(_) => {
                    let e = ApiError::invalid_params("afterSeq", "must not be negative");
                    pending
                        .reject(jsonrpsee::types::ErrorObjectOwned::from(e))
                        .await;
                    return;
                }
            };
            if let Some(r) = &p.run_id {
                if !crew_core::ids::is_safe_id(r) {
                    let e = ApiError::invalid_params(
                        "runId",
                        "must be 1-128 characters of A-Z a-z 0-9 _ -",
                    );
                    pending
                        .reject(jsonrpsee::types::ErrorObjectOwned::from(e))
                        .await;
                    return;
                }
            }
            if let Some(r) = &p.run_id {
                let r2 = r.clone();
                let known = ctx
                    .actor
                    .call(move |core| Ok(core.state.summaries.contains_key(&r2)))
                    .await
                    .unwrap_or(false);
                if !known {
                    pending
                        .reject(jsonrpsee::types::ErrorObjectOwned::from(
                            ApiError::not_found("run", r),
                        ))
                        .await;
                    return;
                }
            }
            // Join the bus before reading the journal: see the module comment.
            let live = ctx.shared.bus.subscribe();
            let Ok(sink) = pending.accept().await else {
                return;
            };
            let span = tracing::info_span!(
                "subscription",
                run = p.run_id.as_deref().unwrap_or("*"),
                after
            );
            async move {
                if let End::Dropped { last, why } = stream(&ctx, &sink, live, p.run_id, after).await
                {
                    let notice = SubscriptionNotice {
                        notice: "dropped".into(),
                        last_seq: last,
                        message: format!("{why}; resubscribe with afterSeq = {last}"),
                    };
                    // Its buffers are full: the notice goes out once the client reads again (or
                    // is given up on). Nothing else is sent or held for it meanwhile.
                    if let Ok(msg) = serde_json::value::to_raw_value(&notice) {
                        let _ = sink
                            .send_timeout(SubscriptionMessage::from(msg), NOTICE_TIMEOUT)
                            .await;
                    }
                }
            }
            .instrument(span)
            .await
        },
    );
    if let Err(e) = res {
        panic!("team.subscribe registered twice: {e}");
    }
}

/// Send one message; a subscriber that does not take it within `SEND_TIMEOUT` is dropped.
async fn send(sink: &SubscriptionSink, msg: SubscriptionMessage, last: u64) -> Result<(), End> {
    match sink.send_timeout(msg, SEND_TIMEOUT).await {
        Ok(()) => Ok(()),
        Err(SendTimeoutError::Closed(_)) => Err(End::Closed),
        Err(SendTimeoutError::Timeout(_)) => {
            tracing::warn!(last, "subscriber does not read; dropped");
            Err(End::Dropped {
                last,
                why: format!("did not read for {}s", SEND_TIMEOUT.as_secs()),
            })
        }
    }
}

/// Stored events after `after`, then live ones; returns how it ended. The bus receiver is
/// dropped on return, so a dropped subscriber holds nothing while its notice waits.
async fn stream(
    ctx: &Ctx,
    sink: &SubscriptionSink,
    mut live: broadcast::Receiver<Published>,
    run_id: Option<String>,
    after: u64,
) -> End {
    let mut last = after;
    // Replay.
    loop {
        let shared = ctx.shared.clone();
        let run = run_id.clone();
        let page = tokio::task::spawn_blocking(move || {
            read_events(&shared, run.as_deref(), last, REPLAY_PAGE)
        })
        .await;
        let (events, next) = match page {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::warn!(error = %e.message, "replay failed");
                return End::Closed;
            }
            Err(_) => return End::Closed,
        };
        if events.is_empty() {
            break;
        }
        for ev in events {
            let seq = ev.seq;
            let Ok(msg) = serde_json::value::to_raw_value(&ev) else {
                continue;
            };
            if let Err(end) = send(sink, SubscriptionMessage::from(msg), last).await {
                return end;
            }
            last = seq;
        }
        last = last.max(next);
    }
    // Live.
    loop {
        tokio::select! {
            _ = sink.closed() => return End::Closed,
            r = live.recv() => match r {
                Ok(ev) => {
                    if ev.seq <= last {
                        continue;
                    }
                    if run_id.as_deref().is_some_and(|r| ev.run_id.as_deref() != Some(r)) {
                        last = ev.seq;
                        continue;
                    }
                    let Some(msg) = raw_msg(&ev.json) else { continue };
                    if let Err(end) = send(sink, msg, last).await {
                        return end;
                    }
                    last = ev.seq;
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(last, missed = n, "subscriber fell behind; dropped");
                    return End::Dropped { last, why: format!("fell {n} events behind") };
                }
                Err(RecvError::Closed) => return End::Closed,
            }
        }
    }
}
