//! Who may use the dashboard: the holder of the token, from a page this gateway served.
//!
//! Three checks, all on plain header values so they are tested without a socket:
//! - the token, carried once in the URL (`/?token=…`) and as an HttpOnly, SameSite=Strict
//!   cookie after that;
//! - `Host` must name the address the gateway listens on (a DNS-rebinding page reaches
//!   127.0.0.1 under its own host name, so it fails here);
//! - `Origin`, when a browser sends one (every WebSocket handshake and cross-site POST), must be
//!   this gateway's own origin: another site's page cannot drive the API with the cookie.

use std::net::SocketAddr;

/// The cookie that carries the token after the first visit.
pub const COOKIE: &str = "crew_ui_token";

/// A 256-bit random token, hex.
pub fn new_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// Compares in time independent of where the strings differ, so the token cannot be guessed a
/// byte at a time from response latency.
pub fn token_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token from a `Cookie` header, if it carries ours.
pub fn cookie_token(header: &str) -> Option<&str> {
    header
        .split(';')
        .map(str::trim)
        .find_map(|kv| kv.strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The token from a query string (`token=…`), if any.
pub fn query_token(query: &str) -> Option<&str> {
    query.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// The `Set-Cookie` value that gives the browser the token. No `Max-Age`: it lasts the browser
/// session; `Path=/` so the API and the assets both carry it.
pub fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
}

/// The `Host` values this gateway answers to: the address it listens on, and for loopback also
/// `localhost` with the same port.
#[derive(Debug, Clone)]
pub struct Hosts {
    allowed: Vec<String>,
}

impl Hosts {
    pub fn for_addr(addr: SocketAddr) -> Hosts {
        let port = addr.port();
        let mut allowed = vec![match addr {
            SocketAddr::V4(a) => format!("{}:{port}", a.ip()),
            SocketAddr::V6(a) => format!("[{}]:{port}", a.ip()),
        }];
        if addr.ip().is_loopback() {
            allowed.push(format!("localhost:{port}"));
            allowed.push(format!("127.0.0.1:{port}"));
            allowed.push(format!("[::1]:{port}"));
        }
        allowed.dedup();
        Hosts { allowed }
    }

    /// Is `host` (a `Host` header value) one of ours? Case-insensitive, as host names are.
    pub fn host_ok(&self, host: &str) -> bool {
        self.allowed.iter().any(|a| a.eq_ignore_ascii_case(host))
    }

    /// Is `origin` (an `Origin` header value) this gateway's own? `null` (sandboxed frames,
    /// some redirects) is not.
    pub fn origin_ok(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|rest| self.host_ok(rest))
    }

    /// The URL a person opens: the first allowed host, which is the listening address itself.
    pub fn url(&self, token: &str) -> String {
        let host = self
            .allowed
            .first()
            .map(String::as_str)
            .unwrap_or("127.0.0.1");
        format!("http://{host}/?token={token}")
    }
}

/// What the gateway does with a request, decided from its headers alone.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Allow,
    /// The URL carried the right token: set the cookie and redirect to the same path without it.
    SetCookie,
    /// `Host` or `Origin` is foreign (403).
    Foreign(&'static str),
    /// No token, or a wrong one (401).
    Unauthorized,
}

pub struct Request<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub cookie: Option<&'a str>,
    pub query: Option<&'a str>,
}

pub fn judge(hosts: &Hosts, token: &str, req: &Request<'_>) -> Verdict {
    match req.host {
        Some(h) if hosts.host_ok(h) => {}
        _ => return Verdict::Foreign("Host is not this dashboard's address"),
    }
    if let Some(o) = req.origin {
        if !hosts.origin_ok(o) {
            return Verdict::Foreign("Origin is not this dashboard");
        }
    }
    if req
        .cookie
        .and_then(cookie_token)
        .is_some_and(|t| token_eq(t, token))
    {
        return Verdict::Allow;
    }
    if req
        .query
        .and_then(query_token)
        .is_some_and(|t| token_eq(t, token))
    {
        return Verdict::SetCookie;
    }
    Verdict::Unauthorized
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Hosts {
        Hosts::for_addr("127.0.0.1:4000".parse().unwrap())
    }

    /// Host, Origin, Cookie, query, and what the gateway must do.
    type Case<'a> = (
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        Verdict,
    );

    #[test]
    fn judge_table() {
        let t = "abc123";
        let ok_cookie = format!("other=1; {COOKIE}={t}");
        let bad_cookie = format!("{COOKIE}=abc124");
        let cases: &[Case] = &[
            (
                Some("127.0.0.1:4000"),
                None,
                Some(&ok_cookie),
                None,
                Verdict::Allow,
            ),
            (
                Some("localhost:4000"),
                None,
                Some(&ok_cookie),
                None,
                Verdict::Allow,
            ),
            (
                Some("LOCALHOST:4000"),
                Some("http://localhost:4000"),
                Some(&ok_cookie),
                None,
                Verdict::Allow,
            ),
            (
                Some("127.0.0.1:4000"),
                None,
                None,
                Some("token=abc123"),
                Verdict::SetCookie,
            ),
            (
                Some("127.0.0.1:4000"),
                None,
                None,
                Some("x=1&token=abc123"),
                Verdict::SetCookie,
            ),
            (
                Some("127.0.0.1:4000"),
                None,
                None,
                None,
                Verdict::Unauthorized,
            ),
            (
                Some("127.0.0.1:4000"),
                None,
                Some(&bad_cookie),
                None,
                Verdict::Unauthorized,
            ),
            (
                Some("127.0.0.1:4000"),
                None,
                None,
                Some("token=abc12"),
                Verdict::Unauthorized,
            ),
            // DNS rebinding: the attacker's name resolves to 127.0.0.1.
            (
                Some("evil.example:4000"),
                None,
                Some(&ok_cookie),
                None,
                Verdict::Foreign("Host is not this dashboard's address"),
            ),
            (
                Some("127.0.0.1:4001"),
                None,
                Some(&ok_cookie),
                None,
                Verdict::Foreign("Host is not this dashboard's address"),
            ),
            (
                None,
                None,
                Some(&ok_cookie),
                None,
                Verdict::Foreign("Host is not this dashboard's address"),
            ),
            // Cross-site WebSocket or POST from another page.
            (
                Some("127.0.0.1:4000"),
                Some("http://evil.example"),
                Some(&ok_cookie),
                None,
                Verdict::Foreign("Origin is not this dashboard"),
            ),
            (
                Some("127.0.0.1:4000"),
                Some("null"),
                Some(&ok_cookie),
                None,
                Verdict::Foreign("Origin is not this dashboard"),
            ),
            (
                Some("127.0.0.1:4000"),
                Some("https://127.0.0.1:4000"),
                Some(&ok_cookie),
                None,
                Verdict::Foreign("Origin is not this dashboard"),
            ),
        ];
        for (host, origin, cookie, query, want) in cases {
            let got = judge(
                &hosts(),
                t,
                &Request {
                    host: *host,
                    origin: *origin,
                    cookie: *cookie,
                    query: *query,
                },
            );
            assert_eq!(&got, want, "{host:?} {origin:?} {cookie:?} {query:?}");
        }
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(token_eq(&a, &a.clone()));
        assert!(!token_eq(&a, &b));
    }

    #[test]
    fn url_names_the_listening_address() {
        assert_eq!(hosts().url("t"), "http://127.0.0.1:4000/?token=t");
        let v6 = Hosts::for_addr("[::1]:5".parse().unwrap());
        assert_eq!(v6.url("t"), "http://[::1]:5/?token=t");
        assert!(v6.host_ok("localhost:5"));
    }
}
