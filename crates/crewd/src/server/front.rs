//! What stands in front of jsonrpsee on every connection: each body (HTTP POST) and each message
//! (WebSocket) is judged by `envelope.rs` first. Invalid request objects, parse errors and
//! oversized batches are answered here; requests are handed to jsonrpsee one at a time, in the
//! form it reads correctly, and its answers are put back together:
//!
//! - an id jsonrpsee cannot hold (`-1`, `1.5`) travels as a string sentinel and is put back;
//! - a batch is split into single calls (so every call passes the RPC middleware, including
//!   the plain-HTTP subscription refusal and the limit codes) and its answers joined again;
//! - a notification runs as a call whose answer is dropped: nothing is sent back, and a body
//!   of only notifications gets HTTP 204 with no body.
//!
//! WebSocket: jsonrpsee reads frames itself with no hook before parsing, so the connection is
//! relayed: the client's WebSocket ends here, and a second one, over an in-memory duplex, goes
//! to jsonrpsee's own service (subscriptions, limits and shutdown stay jsonrpsee's).

use super::envelope::{self, Body, Entry};
use crew_api::ApiError;
use futures::io::{BufReader, BufWriter};
use hyper::body::{Bytes, Incoming};
use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse, StopHandle};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use tokio_util::compat::TokioAsyncReadCompatExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Slack jsonrpsee's own request limit gets over ours: a rewritten request carries a sentinel id
/// instead of the client's, which may be longer.
pub const REWRITE_SLACK: u32 = 4096;

pub struct Limits {
    pub max_request: usize,
    pub max_batch: usize,
    pub max_response: usize,
}

/// The sentinel ids of this process: `crew~<random>~<n>`, which no client will send.
fn sentinel_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| format!("crew~{:016x}~", rand::random::<u64>()))
}

fn sentinel(n: u64) -> String {
    format!("{}{n}", sentinel_prefix())
}

#[derive(Clone)]
pub struct FrontLayer {
    limits: Arc<Limits>,
    stop: StopHandle,
}

impl FrontLayer {
    pub fn new(limits: Arc<Limits>, stop: StopHandle) -> Self {
        FrontLayer { limits, stop }
    }
}

impl<S> tower::Layer<S> for FrontLayer {
    type Service = Front<S>;
    fn layer(&self, inner: S) -> Front<S> {
        Front {
            inner,
            limits: self.limits.clone(),
            stop: self.stop.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Front<S> {
    inner: S,
    limits: Arc<Limits>,
    stop: StopHandle,
}

impl<S> tower::Service<HttpRequest<Incoming>> for Front<S>
where
    S: tower::Service<HttpRequest<HttpBody>, Response = HttpResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest<Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            if jsonrpsee::server::ws::is_upgrade_request(&req) {
                return Ok(this.websocket(req).await);
            }
            if req.method() == hyper::Method::POST
                && jsonrpsee::server::http::content_type_is_json(&req)
            {
                return Ok(this.post(req).await);
            }
            // Everything else (GET, a wrong content type) gets jsonrpsee's answer.
            let mut inner = this.inner.clone();
            inner.call(req.map(HttpBody::new)).await
        })
    }
}

#[derive(Debug, PartialEq)]
enum ReadError {
    TooLarge,
    Broken,
    /// Nothing came for `BODY_IDLE`: a client that stops in the middle of its body holds one
    /// of the daemon's connection slots for as long as it stays silent.
    Stalled,
}

/// How long a body may pause between two of its pieces (what hyper allows a request's head),
/// and how long it may take in all (a trickle of a byte now and then holds a slot too; a
/// megabyte over a Unix socket takes milliseconds).
const BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(30);
const BODY_TOTAL: std::time::Duration = std::time::Duration::from_secs(120);

/// A body read whole, refused once it passes `max` bytes, pauses for `BODY_IDLE` or takes
/// `BODY_TOTAL`.
async fn read_limited<B>(body: B, max: usize) -> Result<Vec<u8>, ReadError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    let mut body = body;
    let mut out = Vec::new();
    let end = tokio::time::Instant::now() + BODY_TOTAL;
    loop {
        let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
        let until = end.min(tokio::time::Instant::now() + BODY_IDLE);
        let frame = tokio::time::timeout_at(until, next)
            .await
            .map_err(|_| ReadError::Stalled)?;
        let Some(frame) = frame else { return Ok(out) };
        let frame = frame.map_err(|_| ReadError::Broken)?;
        if let Ok(data) = frame.into_data() {
            if out.len().saturating_add(data.len()) > max {
                return Err(ReadError::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
}

fn json_response(status: hyper::StatusCode, body: String) -> HttpResponse {
    let mut rp = HttpResponse::new(HttpBody::from(body));
    *rp.status_mut() = status;
    rp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json; charset=utf-8"),
    );
    rp
}

fn no_content() -> HttpResponse {
    let mut rp = HttpResponse::new(HttpBody::empty());
    *rp.status_mut() = hyper::StatusCode::NO_CONTENT;
    rp
}

fn too_large_text(max: usize) -> String {
    envelope::error_text(
        None,
        ApiError::limit_named(
            "max_request_bytes",
            max as u64,
            format!("the request is too large: at most {max} bytes (max_request_bytes)"),
        ),
    )
}

fn response_too_large_text(id: Option<&str>, max: usize) -> String {
    envelope::error_text(
        id,
        ApiError::limit_named(
            "max_response_bytes",
            max as u64,
            format!("the answer is too large: at most {max} bytes"),
        ),
    )
}

impl<S> Front<S>
where
    S: tower::Service<HttpRequest<HttpBody>, Response = HttpResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    /// One request to jsonrpsee as a POST with the client's headers and extensions.
    async fn forward(
        mut inner: S,
        parts: &hyper::http::request::Parts,
        body: String,
    ) -> Result<HttpResponse, BoxError> {
        let mut req = HttpRequest::new(HttpBody::from(body));
        *req.method_mut() = hyper::Method::POST;
        *req.uri_mut() = parts.uri.clone();
        *req.headers_mut() = parts.headers.clone();
        req.headers_mut().remove(hyper::header::CONTENT_LENGTH);
        req.headers_mut().remove(hyper::header::TRANSFER_ENCODING);
        *req.extensions_mut() = parts.extensions.clone();
        inner.call(req).await
    }

    /// One request to jsonrpsee; its answer's text (None: no answer, or it was refused).
    async fn forward_text(
        inner: S,
        max_response: usize,
        parts: &hyper::http::request::Parts,
        body: String,
    ) -> Option<String> {
        let rp = Self::forward(inner, parts, body).await.ok()?;
        let bytes = read_limited(rp.into_body(), max_response.saturating_add(4096))
            .await
            .ok()?;
        String::from_utf8(bytes).ok().filter(|t| !t.is_empty())
    }

    /// A call with `id` rewritten to a sentinel, its answer with `id` put back.
    async fn call_one(
        inner: S,
        max_response: usize,
        parts: &hyper::http::request::Parts,
        req: &envelope::Request<'_>,
        n: u64,
    ) -> Option<String> {
        let s = sentinel(n);
        let body = req.canonical(Some(&format!("\"{s}\"")));
        let answer = Self::forward_text(inner, max_response, parts, body).await?;
        let id = req.id?;
        Some(envelope::splice_id(&answer, &s, id).unwrap_or(answer))
    }

    async fn post(self, req: HttpRequest<Incoming>) -> HttpResponse {
        use hyper::StatusCode;
        let (parts, body) = req.into_parts();
        let bytes = match read_limited(body, self.limits.max_request).await {
            Ok(b) => b,
            Err(ReadError::TooLarge) => {
                return json_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    too_large_text(self.limits.max_request),
                )
            }
            Err(ReadError::Broken) => {
                return json_response(StatusCode::BAD_REQUEST, envelope::parse_error_text())
            }
            Err(ReadError::Stalled) => {
                return json_response(
                    StatusCode::REQUEST_TIMEOUT,
                    envelope::invalid_text(
                        None,
                        &format!(
                            "the request's body paused for {} s, or took {} s; send it whole",
                            BODY_IDLE.as_secs(),
                            BODY_TOTAL.as_secs()
                        ),
                    ),
                )
            }
        };
        let ok = |text: String| json_response(StatusCode::OK, text);
        let max_response = self.limits.max_response;
        match envelope::judge(&bytes, self.limits.max_batch) {
            Body::ParseError => ok(envelope::parse_error_text()),
            Body::BatchTooLarge { len } => {
                ok(envelope::batch_too_large_text(len, self.limits.max_batch))
            }
            Body::Single(Entry::Invalid { id, why }) => ok(envelope::invalid_text(id, &why)),
            Body::Single(Entry::Request(r)) if r.id.is_none() => {
                let _ = Self::call_one(self.inner.clone(), max_response, &parts, &r, 0).await;
                no_content()
            }
            Body::Single(Entry::Request(r)) if !r.id_needs_rewrite() => {
                // The common case: jsonrpsee reads this body exactly as we did.
                let body = String::from_utf8_lossy(&bytes).into_owned();
                match Self::forward(self.inner.clone(), &parts, body).await {
                    Ok(rp) => rp,
                    Err(_) => ok(envelope::error_text(
                        r.id,
                        ApiError::internal("the call was not answered"),
                    )),
                }
            }
            Body::Single(Entry::Request(r)) => {
                match Self::call_one(self.inner.clone(), max_response, &parts, &r, 0).await {
                    Some(answer) => ok(answer),
                    None => ok(envelope::error_text(
                        r.id,
                        ApiError::internal("the call was not answered"),
                    )),
                }
            }
            Body::Batch(entries) => {
                // One after the other, as jsonrpsee runs a batch.
                let mut answers: Vec<String> = Vec::new();
                let mut bytes = 2usize;
                for (n, e) in entries.iter().enumerate() {
                    let answer = match e {
                        Entry::Invalid { id, why } => envelope::invalid_text(*id, why),
                        Entry::Request(r) => {
                            let got = Self::call_one(
                                self.inner.clone(),
                                max_response,
                                &parts,
                                r,
                                n as u64,
                            )
                            .await;
                            match (r.id, got) {
                                (None, _) => continue,
                                (Some(_), Some(a)) => a,
                                (Some(id), None) => envelope::error_text(
                                    Some(id),
                                    ApiError::internal("the call was not answered"),
                                ),
                            }
                        }
                    };
                    let answer = if bytes.saturating_add(answer.len()) > self.limits.max_response {
                        let id = match e {
                            Entry::Request(r) => r.id,
                            Entry::Invalid { id, .. } => *id,
                        };
                        response_too_large_text(id, self.limits.max_response)
                    } else {
                        answer
                    };
                    bytes = bytes.saturating_add(answer.len() + 1);
                    answers.push(answer);
                }
                if answers.is_empty() {
                    no_content()
                } else {
                    ok(format!("[{}]", answers.join(",")))
                }
            }
        }
    }

    /// Accept the client's WebSocket and relay it to a jsonrpsee session of its own. The
    /// session is opened first, so a refusal (the connection limit) reaches the client as the
    /// answer to its upgrade, as it would from jsonrpsee.
    async fn websocket(self, req: HttpRequest<Incoming>) -> HttpResponse {
        let mut handshake = soketto::handshake::http::Server::new();
        let response = match handshake.receive_request(&req) {
            Ok(r) => r,
            Err(e) => {
                let mut rp =
                    HttpResponse::new(HttpBody::from(format!("WebSocket handshake failed: {e}")));
                *rp.status_mut() = hyper::StatusCode::BAD_REQUEST;
                return rp;
            }
        };
        let (ours, theirs) = tokio::io::duplex(64 << 10);
        let svc = tower::util::MapRequest::new(self.inner.clone(), |r: HttpRequest<Incoming>| {
            r.map(HttpBody::new)
        });
        let stopped = self.stop.clone().shutdown();
        tokio::spawn(async move {
            if let Err(e) =
                jsonrpsee::server::serve_with_graceful_shutdown(theirs, svc, stopped).await
            {
                tracing::debug!(error = %e, "relayed WebSocket session ended with an error");
            }
        });
        let mut client = soketto::handshake::Client::new(ours.compat(), "localhost", "/");
        match client.handshake().await {
            Ok(soketto::handshake::ServerResponse::Accepted { .. }) => {}
            other => {
                let status = match other {
                    Ok(soketto::handshake::ServerResponse::Rejected { status_code }) => {
                        hyper::StatusCode::from_u16(status_code)
                            .unwrap_or(hyper::StatusCode::SERVICE_UNAVAILABLE)
                    }
                    _ => hyper::StatusCode::SERVICE_UNAVAILABLE,
                };
                tracing::debug!(%status, "the WebSocket session was refused");
                let mut rp = HttpResponse::new(HttpBody::from("WebSocket session refused\n"));
                *rp.status_mut() = status;
                return rp;
            }
        }
        let mut builder = client.into_builder();
        builder.set_max_message_size(self.limits.max_response.saturating_add(4096));
        let (back_tx, back_rx) = builder.finish();
        tokio::spawn(async move {
            let upgraded = match hyper::upgrade::on(req).await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!(error = %e, "WebSocket upgrade failed");
                    return;
                }
            };
            let io = hyper_util::rt::TokioIo::new(upgraded);
            let mut builder = handshake.into_builder(BufReader::new(BufWriter::new(io.compat())));
            builder.set_max_message_size(self.limits.max_request);
            let (front_tx, front_rx) = builder.finish();
            self.relay(front_tx, front_rx, back_tx, back_rx).await;
        });
        response.map(|()| HttpBody::empty())
    }

    async fn relay<T, U>(
        self,
        mut front_tx: soketto::Sender<T>,
        front_rx: soketto::Receiver<T>,
        back_tx: soketto::Sender<U>,
        back_rx: soketto::Receiver<U>,
    ) where
        T: futures::AsyncRead + futures::AsyncWrite + Unpin + Send,
        U: futures::AsyncRead + futures::AsyncWrite + Unpin + Send,
    {
        let routes = Arc::new(Mutex::new(Routes::default()));
        // Few messages in flight here: a client that does not read must make jsonrpsee's own
        // buffers fill (and its slow-subscriber rules apply), not ours.
        let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<String>(16);
        let inbound = client_to_daemon(
            front_rx,
            back_tx,
            out_tx.clone(),
            routes.clone(),
            self.limits.clone(),
        );
        let outbound = daemon_to_client(back_rx, out_tx, routes, self.limits.clone());
        let writer = async {
            while let Some(msg) = out_rx.recv().await {
                if front_tx.send_text_owned(msg).await.is_err() || front_tx.flush().await.is_err() {
                    break;
                }
            }
        };
        tokio::select! {
            _ = inbound => {}
            _ = outbound => {}
            _ = writer => {}
        }
        let _ = front_tx.close().await;
    }
}

/// Where an answer with a sentinel id goes.
enum Route {
    /// A single call: its id put back.
    Single { id: String },
    /// A call of a batch: slot `slot` of batch `batch`.
    InBatch { batch: u64, slot: usize, id: String },
    /// A notification run as a call: its answer is dropped.
    Discard,
}

struct PendingBatch {
    answers: Vec<Option<String>>,
    waiting: usize,
    bytes: usize,
}

#[derive(Default)]
struct Routes {
    next: u64,
    routes: HashMap<u64, Route>,
    batches: HashMap<u64, PendingBatch>,
}

impl Routes {
    fn add(&mut self, route: Route) -> u64 {
        self.next = self.next.wrapping_add(1);
        self.routes.insert(self.next, route);
        self.next
    }

    /// A batch answered in full: its array; or nothing yet.
    fn fill(&mut self, batch: u64, slot: usize, answer: String, max: usize) -> Option<String> {
        let b = self.batches.get_mut(&batch)?;
        let answer = if b.bytes.saturating_add(answer.len()) > max {
            response_too_large_text(None, max)
        } else {
            answer
        };
        b.bytes = b.bytes.saturating_add(answer.len() + 1);
        if let Some(s) = b.answers.get_mut(slot) {
            *s = Some(answer);
        }
        b.waiting = b.waiting.saturating_sub(1);
        if b.waiting > 0 {
            return None;
        }
        let b = self.batches.remove(&batch)?;
        let parts: Vec<String> = b.answers.into_iter().flatten().collect();
        (!parts.is_empty()).then(|| format!("[{}]", parts.join(",")))
    }
}

async fn send_back<T>(back: &mut soketto::Sender<T>, text: String) -> bool
where
    T: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    back.send_text_owned(text).await.is_ok() && back.flush().await.is_ok()
}

fn lock(r: &Mutex<Routes>) -> std::sync::MutexGuard<'_, Routes> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// Client → jsonrpsee: judge each message, answer what is not a request, forward the rest.
async fn client_to_daemon<T, U>(
    mut front: soketto::Receiver<T>,
    mut back: soketto::Sender<U>,
    out: tokio::sync::mpsc::Sender<String>,
    routes: Arc<Mutex<Routes>>,
    limits: Arc<Limits>,
) where
    T: futures::AsyncRead + futures::AsyncWrite + Unpin,
    U: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    let mut data = Vec::new();
    loop {
        data.clear();
        match front.receive_data(&mut data).await {
            Ok(_) => {}
            Err(soketto::connection::Error::MessageTooLarge { .. }) => {
                if out.send(too_large_text(limits.max_request)).await.is_err() {
                    return;
                }
                continue;
            }
            Err(_) => return,
        }
        let (replies, forwards) = route_message(&data, &routes, limits.max_batch);
        for r in replies {
            if out.send(r).await.is_err() {
                return;
            }
        }
        for f in forwards {
            if !send_back(&mut back, f).await {
                return;
            }
        }
    }
}

/// One client message judged: (answers that go straight back, requests forwarded to
/// jsonrpsee with crew's sentinel ids where the client's id must be put back later).
fn route_message(
    data: &[u8],
    routes: &Mutex<Routes>,
    max_batch: usize,
) -> (Vec<String>, Vec<String>) {
    match envelope::judge(data, max_batch) {
        Body::ParseError => (vec![envelope::parse_error_text()], vec![]),
        Body::BatchTooLarge { len } => {
            (vec![envelope::batch_too_large_text(len, max_batch)], vec![])
        }
        Body::Single(Entry::Invalid { id, why }) => {
            (vec![envelope::invalid_text(id, &why)], vec![])
        }
        Body::Single(Entry::Request(r)) => (vec![], vec![route_single(data, &r, routes)]),
        Body::Batch(entries) => lock(routes).route_batch(&entries),
    }
}

/// A single request as jsonrpsee gets it.
fn route_single(data: &[u8], r: &envelope::Request<'_>, routes: &Mutex<Routes>) -> String {
    let route = match r.id {
        // The common case: jsonrpsee reads this message exactly as we did.
        Some(_) if !r.id_needs_rewrite() => return String::from_utf8_lossy(data).into_owned(),
        Some(id) => Route::Single { id: id.to_string() },
        None => Route::Discard,
    };
    let n = lock(routes).add(route);
    r.canonical(Some(&format!("\"{}\"", sentinel(n))))
}

impl Routes {
    /// A batch: each request forwarded under its own sentinel id; the invalid entries'
    /// answers wait in the batch's slots for the rest, or go back at once when nothing in it
    /// expects an answer.
    fn route_batch(&mut self, entries: &[Entry<'_>]) -> (Vec<String>, Vec<String>) {
        self.next = self.next.wrapping_add(1);
        let batch = self.next;
        let mut answers = Vec::with_capacity(entries.len());
        let mut forwards = Vec::new();
        // Bounded by the batch's length (`max_batch`).
        let mut waiting = 0;
        for (slot, e) in entries.iter().enumerate() {
            match e {
                Entry::Invalid { id, why } => answers.push(Some(envelope::invalid_text(*id, why))),
                Entry::Request(r) => {
                    answers.push(None);
                    let route = match r.id {
                        Some(id) => {
                            waiting += 1;
                            Route::InBatch {
                                batch,
                                slot,
                                id: id.to_string(),
                            }
                        }
                        None => Route::Discard,
                    };
                    let n = self.add(route);
                    forwards.push(r.canonical(Some(&format!("\"{}\"", sentinel(n)))));
                }
            }
        }
        if waiting == 0 {
            let parts: Vec<String> = answers.into_iter().flatten().collect();
            let replies = if parts.is_empty() {
                vec![]
            } else {
                vec![format!("[{}]", parts.join(","))]
            };
            return (replies, forwards);
        }
        let bytes = answers.iter().flatten().map(|a| a.len() + 1).sum::<usize>() + 2;
        self.batches.insert(
            batch,
            PendingBatch {
                answers,
                waiting,
                bytes,
            },
        );
        (vec![], forwards)
    }
}

/// jsonrpsee → client: put ids back, join batches, drop the answers to notifications; pass
/// everything else (subscription notifications) through as it is.
async fn daemon_to_client<T>(
    mut back: soketto::Receiver<T>,
    out: tokio::sync::mpsc::Sender<String>,
    routes: Arc<Mutex<Routes>>,
    limits: Arc<Limits>,
) where
    T: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    let prefix = sentinel_prefix();
    let mut data = Vec::new();
    loop {
        data.clear();
        if back.receive_data(&mut data).await.is_err() {
            return;
        }
        let Ok(text) = String::from_utf8(std::mem::take(&mut data)) else {
            continue;
        };
        let send = match envelope::sentinel_number(&text, prefix) {
            None => Some(text),
            Some(n) => {
                let mut r = lock(&routes);
                let s = sentinel(n);
                match r.routes.remove(&n) {
                    None | Some(Route::Discard) => None,
                    Some(Route::Single { id }) => envelope::splice_id(&text, &s, &id),
                    Some(Route::InBatch { batch, slot, id }) => {
                        let answer = envelope::splice_id(&text, &s, &id).unwrap_or(text);
                        r.fill(batch, slot, answer, limits.max_response)
                    }
                }
            }
        };
        if let Some(msg) = send {
            if out.send(msg).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that never sends another piece.
    struct Silent;

    impl hyper::body::Body for Silent {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    /// A client silent in the middle of its body is answered after `BODY_IDLE`, not held.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_is_given_up_on() {
        let started = tokio::time::Instant::now();
        assert_eq!(read_limited(Silent, 1024).await, Err(ReadError::Stalled));
        assert!(started.elapsed() >= BODY_IDLE);
    }

    /// A byte just before each `BODY_IDLE`, for ever.
    struct Trickle(Option<std::pin::Pin<Box<tokio::time::Sleep>>>);

    impl hyper::body::Body for Trickle {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            let wait = BODY_IDLE - std::time::Duration::from_secs(1);
            let sleep = self
                .0
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(wait)));
            match sleep.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    self.0 = None;
                    Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(b" ")))))
                }
            }
        }
    }

    /// A trickle that never pauses long enough is given up on after `BODY_TOTAL`.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_trickles_is_given_up_on() {
        let started = tokio::time::Instant::now();
        assert_eq!(
            read_limited(Trickle(None), 1 << 20).await,
            Err(ReadError::Stalled)
        );
        let took = started.elapsed();
        assert!(
            took >= BODY_TOTAL && took < BODY_TOTAL + BODY_IDLE,
            "{took:?}"
        );
    }
}
