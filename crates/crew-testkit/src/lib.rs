//! Talking to a crewd from tests, benches and the soak: JSON-RPC as HTTP/1.1 POSTs on the
//! daemon's Unix socket, written by hand so a test controls every byte (oversized or broken
//! bodies, a daemon killed mid-answer) and sees the status line, which a client library hides.

use std::io::{BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// An HTTP answer: status code (0 if there was no status line) and body, dechunked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

/// The bytes of a POST of `body`; `close` asks the daemon to close the connection after it.
pub fn request(body: &[u8], close: bool) -> Vec<u8> {
    let mut out = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{}\r\n",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Read a whole answer (the connection was closed after it).
pub fn parse(raw: &[u8]) -> Response {
    let text = String::from_utf8_lossy(raw);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| text.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Response { status, body }
}

/// Join the chunks of a chunked body; stops at the last chunk or at anything malformed.
pub fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 {
            break;
        }
        let Some(chunk) = after.get(..n) else { break };
        out.push_str(chunk);
        rest = after.get(n..).unwrap_or_default();
        rest = rest.strip_prefix("\r\n").unwrap_or(rest);
    }
    out
}

/// One POST on a fresh connection, closed after the answer. A daemon may answer (413) and close
/// before it read all of an oversized body: the answer counts, the failed write does not.
pub fn post(socket: &Path, body: &[u8], timeout: Duration) -> std::io::Result<Response> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(timeout))?;
    let wrote = s.write_all(&request(body, true));
    let mut raw = Vec::new();
    let read = s.read_to_end(&mut raw);
    if raw.is_empty() {
        wrote?;
        read?;
        return Err(std::io::Error::other("the daemon closed without answering"));
    }
    Ok(parse(&raw))
}

/// `post` for async callers (the soak), with the same answer.
pub async fn post_async(
    socket: &Path,
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Response> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut s = tokio::net::UnixStream::connect(socket).await?;
        let wrote = s.write_all(&request(body, true)).await;
        let mut raw = Vec::new();
        let read = s.read_to_end(&mut raw).await;
        if raw.is_empty() {
            wrote?;
            read?;
            return Err(std::io::Error::other("the daemon closed without answering"));
        }
        Ok(parse(&raw))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"))?
}

/// An HTTP/1.1 keep-alive connection: many requests, one connection (load benches).
pub struct KeepAlive {
    reader: std::io::BufReader<UnixStream>,
    writer: UnixStream,
}

impl KeepAlive {
    pub fn connect(socket: &Path, timeout: Duration) -> std::io::Result<KeepAlive> {
        let s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(timeout))?;
        Ok(KeepAlive {
            reader: std::io::BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// POST `body`; the answer, read by its length or its chunks.
    pub fn post(&mut self, body: &[u8]) -> std::io::Result<Response> {
        self.writer.write_all(&request(body, false))?;
        let mut status = 0;
        let mut len = None;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(std::io::Error::other("connection closed"));
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(rest) = lower.strip_prefix("http/1.1 ") {
                status = rest.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
            } else if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse::<usize>().ok();
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size)?;
                let n = usize::from_str_radix(size.trim(), 16)
                    .map_err(|e| std::io::Error::other(format!("chunk size {size:?}: {e}")))?;
                let mut chunk = vec![0; n + 2];
                self.reader.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                out.extend_from_slice(chunk.get(..n).unwrap_or_default());
            }
        } else {
            let n = len.ok_or_else(|| std::io::Error::other("response without a length"))?;
            out.resize(n, 0);
            self.reader.read_exact(&mut out)?;
        }
        let body = String::from_utf8(out).map_err(std::io::Error::other)?;
        Ok(Response { status, body })
    }
}

/// A WebSocket session written by hand (RFC 6455), so a test sends exactly the bytes it means
/// (invalid JSON, odd ids) and sees every frame the daemon sends.
pub struct WsRaw {
    stream: UnixStream,
}

impl WsRaw {
    /// Upgrade a fresh connection; fails unless the daemon answers 101.
    pub fn connect(socket: &Path, timeout: Duration) -> std::io::Result<WsRaw> {
        let mut s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(timeout))?;
        s.write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )?;
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b)? == 0 {
                break;
            }
            head.push(b[0]);
        }
        if !head.starts_with(b"HTTP/1.1 101") {
            return Err(std::io::Error::other(format!(
                "no upgrade: {}",
                String::from_utf8_lossy(&head)
            )));
        }
        Ok(WsRaw { stream: s })
    }

    /// One masked text frame (mask zero: the payload goes out as is).
    pub fn send_text(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let len = payload.len() as u64;
        let mut f = vec![0x81];
        if len < 126 {
            f.push(0x80 | len as u8);
        } else if len <= u64::from(u16::MAX) {
            f.push(0x80 | 126);
            f.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            f.push(0x80 | 127);
            f.extend_from_slice(&len.to_be_bytes());
        }
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend_from_slice(payload);
        self.stream.write_all(&f)
    }

    /// The next data frame's payload as text; `None` on a close frame, EOF or timeout.
    pub fn read_text(&mut self) -> Option<String> {
        loop {
            let mut h = [0u8; 2];
            self.stream.read_exact(&mut h).ok()?;
            let mut len = u64::from(h[1] & 0x7f);
            if len == 126 {
                let mut l = [0u8; 2];
                self.stream.read_exact(&mut l).ok()?;
                len = u64::from(u16::from_be_bytes(l));
            } else if len == 127 {
                let mut l = [0u8; 8];
                self.stream.read_exact(&mut l).ok()?;
                len = u64::from_be_bytes(l);
            }
            let mut payload = vec![0u8; usize::try_from(len).ok()?];
            self.stream.read_exact(&mut payload).ok()?;
            match h[0] & 0x0f {
                0x8 => return None,
                // Ping, pong: not data.
                0x9 | 0xA => continue,
                _ => return Some(String::from_utf8_lossy(&payload).into_owned()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_whole_or_chunked() {
        let table: &[(&str, u16, &str)] = &[
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n{\"a\":1}",
                200,
                "{\"a\":1}",
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n",
                200,
                "{\"a\":1}",
            ),
            ("HTTP/1.1 413 Payload Too Large\r\n\r\n", 413, ""),
            ("garbage", 0, ""),
            ("", 0, ""),
        ];
        for (raw, status, body) in table {
            let r = parse(raw.as_bytes());
            assert_eq!((r.status, r.body.as_str()), (*status, *body), "{raw:?}");
        }
    }

    #[test]
    fn a_malformed_chunk_ends_the_body() {
        assert_eq!(dechunk("2\r\nab\r\nzz\r\nnot hex"), "ab");
        assert_eq!(dechunk("9\r\nshort"), "");
    }

    #[test]
    fn requests_carry_the_exact_length() {
        let r = String::from_utf8(request("{\"x\":\"é\"}".as_bytes(), true)).unwrap();
        assert!(r.contains("Content-Length: 10\r\n"), "{r}");
        assert!(r.contains("Connection: close\r\n"));
        assert!(r.ends_with("\r\n\r\n{\"x\":\"é\"}"));
    }
}
