//! Issue 29 items 5 and 7: the dashboard's credential never reaches another server on
//! 127.0.0.1, a planted cookie signs nobody in or out, each gateway has its own credential, a
//! one-time code works once, and a refused client's connection is closed.
//!
//! The browser is modelled by its cookie rule (RFC 6265 §5.4): a cookie goes to every port of
//! its host, on every request whose path is under the cookie's `Path`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Resp {
    status: u16,
    headers: HashMap<String, String>,
    closed: bool,
}

/// One HTTP/1.1 request on a fresh connection; `closed` says whether the server closed the
/// connection after its answer (checked with a short read timeout).
fn get(addr: SocketAddr, path: &str, cookie: Option<&str>) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{cookie}Content-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "no answer to {path}");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut have = buf.len() - head_end - 4;
    while have < len {
        let n = s.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        have += n;
    }
    s.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let closed = matches!(s.read(&mut chunk), Ok(0));
    Resp {
        status,
        headers,
        closed,
    }
}

/// A cookie as a browser keeps it: name, value, path.
struct Jar {
    name: String,
    value: String,
    path: String,
}

impl Jar {
    fn from_set_cookie(v: &str) -> Jar {
        let mut parts = v.split(';').map(str::trim);
        let (name, value) = parts.next().unwrap().split_once('=').unwrap();
        let path = parts
            .find_map(|p| p.strip_prefix("Path="))
            .unwrap_or("/")
            .to_string();
        Jar {
            name: name.into(),
            value: value.into(),
            path,
        }
    }

    /// The `Cookie` header a browser sends with a request for `path` on 127.0.0.1 at any port.
    fn header_for(&self, path: &str) -> Option<String> {
        let p = self.path.trim_end_matches('/');
        let matches = self.path == "/" || path == p || path.starts_with(&format!("{p}/"));
        matches.then(|| format!("{}={}", self.name, self.value))
    }
}

/// A second local server (a dev server the user opens): records every `Cookie` header.
fn second_server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let req = String::from_utf8_lossy(&buf).into_owned();
            for l in req.lines() {
                if let Some(c) = l.strip_prefix("Cookie: ") {
                    rec.lock().unwrap().push(c.to_string());
                }
            }
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (addr, seen)
}

async fn gateway() -> (SocketAddr, String, String) {
    // No daemon behind it: a request the gateway lets through gets 502, one it refuses 401.
    let b = crew_ui::bind(
        "127.0.0.1:0".parse().unwrap(),
        false,
        Path::new("/nonexistent/crewd.sock"),
    )
    .await
    .unwrap();
    let addr = b.local_addr().unwrap();
    let (url, once) = (b.url(), b.one_time_url());
    tokio::spawn(b.serve(std::future::pending()));
    let strip = |u: &str| {
        u.strip_prefix(&format!("http://{addr}"))
            .unwrap()
            .to_string()
    };
    (addr, strip(&url), strip(&once))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cookie_never_reaches_another_loopback_server() {
    let (addr, sign_in, _) = gateway().await;
    let r = get(addr, &sign_in, None);
    assert_eq!(r.status, 303);
    let jar = Jar::from_set_cookie(&r.headers["set-cookie"]);
    let home = r.headers["location"].clone();
    assert!(jar.path.len() > 20, "a random Path: {}", jar.path);
    // Signed in: the API is reached (502: no daemon behind this gateway).
    let rpc = format!("{}rpc", home);
    assert_eq!(get(addr, &rpc, jar.header_for(&rpc).as_deref()).status, 502);
    assert_eq!(
        get(addr, &home, jar.header_for(&home).as_deref()).status,
        200
    );

    // The user opens pages of a dev server on another port: the browser sends it nothing.
    let (other, seen) = second_server();
    for path in [
        "/",
        "/rpc",
        "/assets/app.js",
        "/index.html",
        "/c-0/",
        "/api?x=1",
    ] {
        let _ = get(other, path, jar.header_for(path).as_deref());
    }
    let seen = seen.lock().unwrap().clone();
    assert!(seen.is_empty(), "the other server received {seen:?}");

    // What another port's page can do: plant a cookie of any name it can guess. The old shared
    // name opens nothing, and a second cookie of the real name signs nobody in.
    let old = format!("crew_ui_token={}", jar.value);
    assert_eq!(get(addr, &rpc, Some(&old)).status, 401);
    let planted = format!("{}=0000; {}={}", jar.name, jar.name, jar.value);
    let r = get(addr, &rpc, Some(&planted));
    assert_eq!(r.status, 401);
    assert!(r.closed, "a refused connection is closed");
    // The right cookie on a path outside the prefix opens nothing either.
    let right = format!("{}={}", jar.name, jar.value);
    assert_eq!(get(addr, "/rpc", Some(&right)).status, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_gateway_has_its_own_credential_and_codes_work_once() {
    let (a, a_url, a_once) = gateway().await;
    let (b, b_url, _) = gateway().await;
    let ja = Jar::from_set_cookie(&get(a, &a_url, None).headers["set-cookie"]);
    let jb = Jar::from_set_cookie(&get(b, &b_url, None).headers["set-cookie"]);
    assert_ne!(ja.name, jb.name);
    assert_ne!(ja.value, jb.value);
    assert_ne!(ja.path, jb.path);
    // A's cookie at B: nothing (the browser would not even send it; sent by hand, refused).
    let b_rpc = format!("{}/rpc", jb.path.trim_end_matches('/'));
    let a_cookie = format!("{}={}", ja.name, ja.value);
    assert_eq!(get(b, &b_rpc, Some(&a_cookie)).status, 401);

    let r = get(a, &a_once, None);
    assert_eq!(r.status, 303, "the one-time code signs in");
    assert!(r.headers["set-cookie"].contains(&ja.value));
    let again = get(a, &a_once, None);
    assert_eq!(again.status, 401, "and only once");
    assert!(again.closed);
}

/// A connection that never sends its headers is closed by the gateway (the header-read timeout)
/// instead of holding one of its connections for ever.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_connection_is_closed() {
    let (addr, _, _) = gateway().await;
    let closed = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        // Bounded only so a regression fails instead of hanging; not a timing assertion.
        s.set_read_timeout(Some(crew_ui::HEADER_TIMEOUT * 6))
            .unwrap();
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .unwrap();
    assert!(
        closed,
        "the gateway kept a connection that never finished its headers"
    );
}
