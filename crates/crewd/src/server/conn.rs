//! One client connection: HTTP/1.1 (keep-alive, and the upgrade to WebSocket) served by hyper,
//! with the head of every request timed.
//!
//! jsonrpsee's own `serve_with_graceful_shutdown` times only a connection's first request: a
//! client that sent one and then held the connection open — or began a second head and stopped
//! — kept one of `max_connections` slots for as long as it liked, and enough of them kept the
//! daemon unreachable. Here hyper's header-read timer runs from the moment the connection waits
//! for a head until that head is complete, so a connection idle between requests for
//! `HEAD_IDLE` is closed, like one whose head stalls. An upgraded connection (a WebSocket with
//! its subscriptions, legitimately quiet for hours) has left HTTP and is not timed.

use std::future::Future;
use std::time::Duration;

/// How long a connection may wait for, or sit in, a request's head. The same 30 s a body may
/// stay silent (`front.rs`).
pub const HEAD_IDLE: Duration = Duration::from_secs(30);

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serve `io` until the client closes it, its head times out, or `stopped` (then in-flight
/// requests finish first).
pub async fn serve<S, B, I>(
    io: I,
    service: S,
    stopped: impl Future<Output = ()>,
    head_idle: Duration,
) -> Result<(), BoxError>
where
    S: tower::Service<hyper::Request<hyper::body::Incoming>, Response = hyper::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = hyper::body::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(head_idle)
        .keep_alive(true);
    let service = hyper_util::service::TowerToHyperService::new(service);
    let conn = builder
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(stopped, conn);
    tokio::select! {
        res = &mut conn => res.map_err(Into::into),
        _ = &mut stopped => {
            conn.as_mut().graceful_shutdown();
            conn.await.map_err(Into::into)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// `server` served by `serve`, every request answered with an empty 200.
    fn served(server: tokio::io::DuplexStream) -> tokio::task::JoinHandle<Result<(), BoxError>> {
        let ok = tower::service_fn(|_req| {
            let empty = http_body_util::Empty::<hyper::body::Bytes>::new();
            std::future::ready(Ok::<_, std::convert::Infallible>(hyper::Response::new(
                empty,
            )))
        });
        tokio::spawn(serve(server, ok, std::future::pending(), HEAD_IDLE))
    }

    const REQUEST: &[u8] = b"POST / HTTP/1.1\r\nhost: crewd\r\ncontent-length: 0\r\n\r\n";

    /// Reads until the end of the first response's head.
    async fn read_head(c: &mut tokio::io::DuplexStream) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = c.read(&mut buf).await.unwrap_or(0);
            assert!(n > 0, "closed before an answer: {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    /// A client that made a request and then holds its keep-alive connection open, silent, has
    /// it closed after `HEAD_IDLE` — before, it held its slot for ever.
    #[tokio::test(start_paused = true)]
    async fn an_idle_keep_alive_connection_is_closed() {
        let (mut client, server) = tokio::io::duplex(4096);
        let served = served(server);
        client.write_all(REQUEST).await.unwrap_or_default();
        assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
        let idle_from = tokio::time::Instant::now();
        let ended = tokio::time::timeout(HEAD_IDLE * 4, served).await;
        assert!(ended.is_ok(), "the idle connection was never closed");
        let idle = idle_from.elapsed();
        assert!(idle >= HEAD_IDLE && idle < HEAD_IDLE * 2, "{idle:?}");
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap_or(1), 0);
    }

    /// A second head begun and left unfinished is given up on too.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_second_head_is_given_up_on() {
        let (mut client, server) = tokio::io::duplex(4096);
        let served = served(server);
        client.write_all(REQUEST).await.unwrap_or_default();
        read_head(&mut client).await;
        client
            .write_all(b"POST / HTTP/1.1\r\nhost: cr")
            .await
            .unwrap_or_default();
        let ended = tokio::time::timeout(HEAD_IDLE * 4, served).await;
        assert!(ended.is_ok(), "the stalled head held the connection");
    }

    /// Requests closer together than `HEAD_IDLE` keep one connection as long as they come.
    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_kept() {
        let (mut client, server) = tokio::io::duplex(4096);
        let served = served(server);
        for _ in 0..5 {
            client.write_all(REQUEST).await.unwrap_or_default();
            assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
            tokio::time::sleep(HEAD_IDLE - Duration::from_secs(5)).await;
        }
        assert!(!served.is_finished());
    }
}
