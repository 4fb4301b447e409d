//! The HTTP side: auth on every request, assets, and `/rpc` forwarded to crewd's socket.
//!
//! `/rpc` is forwarded as HTTP, not re-encoded: a POST goes through with its body streamed both
//! ways, and a WebSocket handshake is replayed to crewd, whose `101` (and its
//! `Sec-WebSocket-Accept`, computed from the browser's key) goes back to the browser, after
//! which the two upgraded connections are spliced byte for byte. The gateway never parses
//! JSON-RPC, so it cannot disagree with crewd about it.

use crate::auth::{self, Verdict};
use crate::{assets, Gateway};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

type Body = BoxBody<Bytes, hyper::Error>;

pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    gw: Arc<Gateway>,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "dashboard accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        // Over the cap the connection is closed at once (dropped here): it holds no
        // descriptor, and what the gateway already serves goes on.
        let Ok(permit) = gw.conns.clone().try_acquire_owned() else {
            tracing::debug!("dashboard connection refused: at the connection cap");
            continue;
        };
        let permit = Arc::new(permit);
        let gw = gw.clone();
        tokio::spawn(async move {
            let held = permit.clone();
            let svc = hyper::service::service_fn(move |req| handle(gw.clone(), held.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(crate::HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "dashboard connection ended with an error");
            }
            drop(permit);
        });
    }
}

fn full(status: StatusCode, mime: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).map_err(|n| match n {}).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    r
}

fn text(status: StatusCode, msg: &str) -> Response<Body> {
    full(status, "text/plain; charset=utf-8", format!("{msg}\n"))
}

fn header_str(req: &Request<Incoming>, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A refusal that also ends the connection: a client without the credential gets one answer,
/// not a connection to keep.
fn refuse(status: StatusCode, msg: &str) -> Response<Body> {
    let mut r = text(status, msg);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

async fn handle(
    gw: Arc<Gateway>,
    held: Arc<OwnedSemaphorePermit>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let span = tracing::debug_span!("ui", method = %req.method());
    let _g = span.enter();
    let unauthorized = || {
        refuse(
            StatusCode::UNAUTHORIZED,
            "crew dashboard: open the URL that `crewctl ui` printed (or crewd's ui-url file)",
        )
    };
    let verdict = auth::judge(
        &gw.hosts,
        &gw.cred,
        &auth::Request {
            host: header_str(&req, header::HOST),
            origin: header_str(&req, header::ORIGIN),
            cookie: header_str(&req, header::COOKIE),
            path: req.uri().path(),
            query: req.uri().query(),
        },
    );
    let sign_in = match verdict {
        Verdict::Foreign(why) => {
            return Ok(with_security_headers(refuse(StatusCode::FORBIDDEN, why)))
        }
        Verdict::Unauthorized => return Ok(with_security_headers(unauthorized())),
        Verdict::Code(code) => gw.redeem(code),
        Verdict::SetCookie => true,
        Verdict::Allow => false,
    };
    let resp = if sign_in {
        let mut r = text(StatusCode::SEE_OTHER, "signed in");
        let h = r.headers_mut();
        // To the dashboard without the token, so it leaves the address bar and the history.
        if let Ok(v) = HeaderValue::from_str(&format!("{}/", gw.cred.prefix())) {
            h.insert(header::LOCATION, v);
        }
        if let Ok(v) = HeaderValue::from_str(&gw.cred.set_cookie()) {
            h.insert(header::SET_COOKIE, v);
        }
        r
    } else if matches!(verdict, Verdict::Code(_)) {
        unauthorized()
    } else {
        route(&gw, held, req).await
    };
    Ok(with_security_headers(resp))
}

fn with_security_headers(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    // Everything the page needs is its own: no CDN, no inline script, no framing.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn route(
    gw: &Gateway,
    held: Arc<OwnedSemaphorePermit>,
    req: Request<Incoming>,
) -> Response<Body> {
    let inner = gw.cred.inner(req.uri().path()).unwrap_or("").to_owned();
    match (req.method(), inner.as_str()) {
        (_, "/rpc") => forward(gw, held, req).await,
        // The page's relative URLs (`assets/…`, `rpc`) need the trailing slash.
        (&Method::GET | &Method::HEAD, "") => {
            let mut r = text(StatusCode::PERMANENT_REDIRECT, "moved");
            if let Ok(v) = HeaderValue::from_str(&format!("{}/", gw.cred.prefix())) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        (&Method::GET | &Method::HEAD, "/") => asset("index.html"),
        (&Method::GET | &Method::HEAD, p) => match p.strip_prefix("/assets/") {
            Some(name) => asset(name),
            None => text(StatusCode::NOT_FOUND, "not found"),
        },
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    }
}

fn asset(name: &str) -> Response<Body> {
    match assets::get(name) {
        Some(a) => full(StatusCode::OK, a.mime, Bytes::from_static(a.bytes)),
        None => text(StatusCode::NOT_FOUND, "not found"),
    }
}

fn is_websocket(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

async fn connect(gw: &Gateway) -> Result<hyper::client::conn::http1::SendRequest<Body>, String> {
    let stream = tokio::net::UnixStream::connect(&gw.socket)
        .await
        .map_err(|e| format!("crewd is not running at {}: {e}", gw.socket.display()))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("crewd did not answer: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "crewd connection ended with an error");
        }
    });
    Ok(sender)
}

/// The request crewd gets: same method, headers and body, on `/`, with `Host` set to what a
/// local client sends and the browser's cookie (our token) and origin left behind.
fn backend_request<T, B>(req: &Request<T>, body: B) -> Request<B> {
    let mut out = Request::new(body);
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = hyper::Uri::from_static("/");
    let h = out.headers_mut();
    for (k, v) in req.headers() {
        if k != header::COOKIE && k != header::ORIGIN && k != header::HOST {
            h.append(k.clone(), v.clone());
        }
    }
    h.insert(header::HOST, HeaderValue::from_static("localhost"));
    out
}

async fn forward(
    gw: &Gateway,
    held: Arc<OwnedSemaphorePermit>,
    mut req: Request<Incoming>,
) -> Response<Body> {
    let mut sender = match connect(gw).await {
        Ok(s) => s,
        Err(msg) => return text(StatusCode::BAD_GATEWAY, &msg),
    };
    if is_websocket(&req) {
        let client_up = hyper::upgrade::on(&mut req);
        let back = backend_request(
            &req,
            Full::new(Bytes::new()).map_err(|n| match n {}).boxed(),
        );
        let mut resp = match sender.send_request(back).await {
            Ok(r) => r,
            Err(e) => return text(StatusCode::BAD_GATEWAY, &format!("crewd: {e}")),
        };
        if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
            let (parts, body) = resp.into_parts();
            return Response::from_parts(parts, body.boxed());
        }
        let backend_up = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            // The spliced WebSocket counts against the cap until it closes.
            let _held = held;
            match tokio::try_join!(client_up, backend_up) {
                Ok((c, b)) => {
                    let (mut c, mut b) = (TokioIo::new(c), TokioIo::new(b));
                    let _ = tokio::io::copy_bidirectional(&mut c, &mut b).await;
                }
                Err(e) => tracing::debug!(error = %e, "websocket upgrade failed"),
            }
        });
        let (parts, _) = resp.into_parts();
        return Response::from_parts(
            parts,
            Full::new(Bytes::new()).map_err(|n| match n {}).boxed(),
        );
    }
    let (parts, body) = req.into_parts();
    let back = backend_request(&Request::from_parts(parts, ()), body.boxed());
    match sender.send_request(back).await {
        Ok(r) => {
            let (parts, body) = r.into_parts();
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, &format!("crewd: {e}")),
    }
}
