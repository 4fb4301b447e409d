//! Who may use the dashboard: the holder of the token, from a page this gateway served.
//!
//! Three checks, all on plain header values so they are tested without a socket:
//! - the token, carried once in the URL (`<prefix>/?token=…`, or a one-time `?code=…`) and as
//!   an HttpOnly, SameSite=Strict cookie after that, whose name and `Path` are the gateway's
//!   own random ones (`Credential`), so other servers on 127.0.0.1 never receive it;
//! - `Host` must name the address the gateway listens on (a DNS-rebinding page reaches
//!   127.0.0.1 under its own host name, so it fails here);
//! - `Origin`, when a browser sends one (every WebSocket handshake and cross-site POST), must be
//!   this gateway's own origin: another site's page cannot drive the API with the cookie.

use std::net::{IpAddr, SocketAddr};

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

/// One gateway's credential, made when it starts (so a restart signs its browsers out) and
/// never shared with another gateway. Browsers send cookies to every port of a host, so the
/// cookie alone would reach any local server the user opens at `http://127.0.0.1:3000/`. Its
/// `Path` is a random prefix that the whole dashboard lives under: a browser sends the cookie
/// only to URLs under it, and no other server is ever asked for such a URL unless it knows the
/// prefix. The cookie's name is random too, so a page on another port cannot plant a cookie the
/// gateway would read (and a request carrying the name twice is refused).
#[derive(Debug, Clone)]
pub struct Credential {
    /// `/c-<hex>`: the dashboard's URLs are `<prefix>/`, `<prefix>/assets/…`, `<prefix>/rpc`.
    prefix: String,
    cookie: String,
    token: String,
}

impl Credential {
    pub fn new() -> Credential {
        Credential {
            prefix: format!("/c-{}", hex::encode(rand::random::<[u8; 16]>())),
            cookie: format!("crew_ui_{}", hex::encode(rand::random::<[u8; 8]>())),
            token: new_token(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn cookie_name(&self) -> &str {
        &self.cookie
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The `Set-Cookie` value that gives the browser the token. No `Max-Age`: it lasts the
    /// browser session; `Path` is the prefix, so the cookie goes nowhere else.
    pub fn set_cookie(&self) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path={}/",
            self.cookie, self.token, self.prefix
        )
    }

    /// The path after the prefix (`""`, `/`, `/rpc`…), or `None` for a path outside it.
    pub fn inner<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix(self.prefix.as_str())?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }
}

/// The values of every cookie named `name` in a `Cookie` header.
fn cookie_values<'a>(header: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    header.split(';').filter_map(move |kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

impl Default for Credential {
    fn default() -> Self {
        Credential::new()
    }
}

/// The `Host` values this gateway answers to: the address it listens on, and for loopback also
/// `localhost` with the same port. Bound to every address (`0.0.0.0`, `::`), no browser names
/// that address: then the machine's host name and each of its interfaces' addresses.
#[derive(Debug, Clone)]
pub struct Hosts {
    allowed: Vec<String>,
}

impl Hosts {
    pub fn for_addr(addr: SocketAddr) -> Hosts {
        let ips = if addr.ip().is_unspecified() {
            local_addresses(addr.is_ipv6())
        } else {
            Vec::new()
        };
        Hosts::with(addr, host_name(), &ips)
    }

    /// `for_addr` with the machine's name and addresses given.
    fn with(addr: SocketAddr, name: Option<String>, ips: &[IpAddr]) -> Hosts {
        let port = addr.port();
        let at = |ip: IpAddr| match ip {
            IpAddr::V4(a) => format!("{a}:{port}"),
            IpAddr::V6(a) => format!("[{a}]:{port}"),
        };
        let mut allowed = Vec::new();
        if addr.ip().is_unspecified() {
            // The name first: it is what the printed URL shows.
            allowed.extend(name.map(|n| format!("{n}:{port}")));
            allowed.extend(ips.iter().map(|ip| at(*ip)));
        } else {
            allowed.push(at(addr.ip()));
        }
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            allowed.push(format!("localhost:{port}"));
            allowed.push(format!("127.0.0.1:{port}"));
            allowed.push(format!("[::1]:{port}"));
        }
        let mut seen = std::collections::HashSet::new();
        allowed.retain(|h| seen.insert(h.to_ascii_lowercase()));
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

    /// The URL a person opens: the first allowed host, which is the listening address itself,
    /// then `path_and_query` (the credential's prefix and the sign-in parameter).
    pub fn url(&self, path_and_query: &str) -> String {
        let host = self
            .allowed
            .first()
            .map(String::as_str)
            .unwrap_or("127.0.0.1");
        format!("http://{host}{path_and_query}")
    }
}

/// The machine's host name, if it is one a `Host` header can carry.
fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    ok.then(|| name.to_ascii_lowercase())
}

/// The addresses of this machine's interfaces (IPv6 ones too when `v6`: a `::` socket takes
/// both), from `getifaddrs`.
fn local_addresses(v6: bool) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr whose family says its real type.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            out.push(IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))));
        } else if family == libc::AF_INET6 && v6 {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            // A link-local address needs a zone, which a Host header cannot carry usefully.
            if ip.segments()[0] & 0xffc0 != 0xfe80 {
                out.push(IpAddr::V6(ip));
            }
        }
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// What the gateway does with a request, decided from its headers alone.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Serve it.
    Allow,
    /// The URL carried the right token: set the cookie and redirect to the same path without it.
    SetCookie,
    /// The URL carries a sign-in code (`?code=…`): the gateway redeems it (once) or refuses.
    Code(&'a str),
    /// `Host` or `Origin` is foreign (403).
    Foreign(&'static str),
    /// No token, a wrong one, several cookies that could be ours, or a path outside the
    /// prefix (401).
    Unauthorized,
}

pub struct Request<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub cookie: Option<&'a str>,
    pub path: &'a str,
    pub query: Option<&'a str>,
}

/// The value of `name=` in a query string, if any.
fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then_some(v)
    })
}

pub fn judge<'a>(hosts: &Hosts, cred: &Credential, req: &Request<'a>) -> Verdict<'a> {
    match req.host {
        Some(h) if hosts.host_ok(h) => {}
        _ => return Verdict::Foreign("Host is not this dashboard's address"),
    }
    if let Some(o) = req.origin {
        if !hosts.origin_ok(o) {
            return Verdict::Foreign("Origin is not this dashboard");
        }
    }
    if cred.inner(req.path).is_none() {
        return Verdict::Unauthorized;
    }
    let mut ours = req
        .cookie
        .map(|c| cookie_values(c, &cred.cookie))
        .into_iter()
        .flatten();
    match (ours.next(), ours.next()) {
        (Some(t), None) if token_eq(t, &cred.token) => return Verdict::Allow,
        // A page of another port can set a cookie of the same name for a longer path, which the
        // browser would send first: two candidates are refused, never chosen between.
        (Some(_), Some(_)) => return Verdict::Unauthorized,
        _ => {}
    }
    let query = req.query.unwrap_or_default();
    if query_param(query, "token").is_some_and(|t| token_eq(t, &cred.token)) {
        return Verdict::SetCookie;
    }
    if let Some(code) = query_param(query, "code") {
        return Verdict::Code(code);
    }
    Verdict::Unauthorized
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Hosts {
        Hosts::for_addr("127.0.0.1:4000".parse().unwrap())
    }

    /// Host, Origin, Cookie, path, query, and what the gateway must do.
    type Case<'a> = (
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
        Option<&'a str>,
        Verdict<'a>,
    );

    #[test]
    fn judge_table() {
        let cred = Credential::new();
        let (t, name, pre) = (cred.token(), cred.cookie_name(), cred.prefix());
        let ok_cookie = format!("other=1; {name}={t}");
        let bad_cookie = format!("{name}={}", "0".repeat(64));
        let two_cookies = format!("{name}={}; {name}={t}", "0".repeat(64));
        let old_cookie = format!("crew_ui_token={t}");
        let home = format!("{pre}/");
        let rpc = format!("{pre}/rpc");
        let other_prefix = "/c-00000000000000000000000000000000/".to_string();
        let with_token = format!("token={t}");
        let with_token2 = format!("x=1&token={t}");
        let h = Some("127.0.0.1:4000");
        let cases: Vec<Case> = vec![
            (h, None, Some(&ok_cookie), &home, None, Verdict::Allow),
            (h, None, Some(&ok_cookie), &rpc, None, Verdict::Allow),
            (h, None, Some(&ok_cookie), pre, None, Verdict::Allow),
            (
                Some("localhost:4000"),
                None,
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Allow,
            ),
            (
                Some("LOCALHOST:4000"),
                Some("http://localhost:4000"),
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Allow,
            ),
            (h, None, None, &home, Some(&with_token), Verdict::SetCookie),
            (h, None, None, &home, Some(&with_token2), Verdict::SetCookie),
            (h, None, None, &home, Some("code=abc"), Verdict::Code("abc")),
            (h, None, None, &home, None, Verdict::Unauthorized),
            (
                h,
                None,
                Some(&bad_cookie),
                &home,
                None,
                Verdict::Unauthorized,
            ),
            (
                h,
                None,
                None,
                &home,
                Some("token=abc12"),
                Verdict::Unauthorized,
            ),
            // Outside the prefix nothing is served, with any credential.
            (h, None, Some(&ok_cookie), "/", None, Verdict::Unauthorized),
            (
                h,
                None,
                Some(&ok_cookie),
                "/rpc",
                None,
                Verdict::Unauthorized,
            ),
            (h, None, None, "/", Some(&with_token), Verdict::Unauthorized),
            (
                h,
                None,
                Some(&ok_cookie),
                &other_prefix,
                None,
                Verdict::Unauthorized,
            ),
            // The old shared cookie name opens nothing.
            (
                h,
                None,
                Some(&old_cookie),
                &rpc,
                None,
                Verdict::Unauthorized,
            ),
            // A second cookie of our name (planted by another port's page): refused.
            (
                h,
                None,
                Some(&two_cookies),
                &rpc,
                None,
                Verdict::Unauthorized,
            ),
            // DNS rebinding: the attacker's name resolves to 127.0.0.1.
            (
                Some("evil.example:4000"),
                None,
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Foreign("Host is not this dashboard's address"),
            ),
            (
                Some("127.0.0.1:4001"),
                None,
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Foreign("Host is not this dashboard's address"),
            ),
            (
                None,
                None,
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Foreign("Host is not this dashboard's address"),
            ),
            // Cross-site WebSocket or POST from another page.
            (
                h,
                Some("http://evil.example"),
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Foreign("Origin is not this dashboard"),
            ),
            (
                h,
                Some("null"),
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Foreign("Origin is not this dashboard"),
            ),
            (
                h,
                Some("http://127.0.0.1:3000"),
                Some(&ok_cookie),
                &rpc,
                None,
                Verdict::Foreign("Origin is not this dashboard"),
            ),
        ];
        for (host, origin, cookie, path, query, want) in cases {
            let got = judge(
                &hosts(),
                &cred,
                &Request {
                    host,
                    origin,
                    cookie,
                    path,
                    query,
                },
            );
            assert_eq!(got, want, "{host:?} {origin:?} {cookie:?} {path} {query:?}");
        }
    }

    #[test]
    fn each_credential_is_its_own() {
        let (a, b) = (Credential::new(), Credential::new());
        assert_ne!(a.token(), b.token());
        assert_ne!(a.prefix(), b.prefix());
        assert_ne!(a.cookie_name(), b.cookie_name());
        assert_eq!(a.token().len(), 64);
        let c = a.set_cookie();
        assert!(
            c.contains("HttpOnly") && c.contains("SameSite=Strict"),
            "{c}"
        );
        assert!(c.ends_with(&format!("Path={}/", a.prefix())), "{c}");
        assert!(token_eq(a.token(), a.token()));
        assert!(!token_eq(a.token(), b.token()));
    }

    #[test]
    fn url_names_the_listening_address() {
        assert_eq!(hosts().url("/p/?code=t"), "http://127.0.0.1:4000/p/?code=t");
        let v6 = Hosts::for_addr("[::1]:5".parse().unwrap());
        assert_eq!(v6.url("/p/"), "http://[::1]:5/p/");
        assert!(v6.host_ok("localhost:5"));
    }

    /// Bound to every address, the dashboard answers to the machine's name and addresses (no
    /// browser sends `Host: 0.0.0.0`), and its URL names the machine.
    #[test]
    fn every_address_means_the_machines_names() {
        let ips = ["192.168.1.5".parse().unwrap(), "10.0.0.7".parse().unwrap()];
        let all = Hosts::with(
            "0.0.0.0:7070".parse().unwrap(),
            Some("build-box".into()),
            &ips,
        );
        assert_eq!(all.url("/p/"), "http://build-box:7070/p/");
        for ok in [
            "build-box:7070",
            "BUILD-BOX:7070",
            "192.168.1.5:7070",
            "10.0.0.7:7070",
            "localhost:7070",
        ] {
            assert!(all.host_ok(ok), "{ok}");
        }
        for bad in [
            "0.0.0.0:7070",
            "evil.example:7070",
            "build-box:7071",
            "192.168.1.6:7070",
        ] {
            assert!(!all.host_ok(bad), "{bad}");
        }
        assert!(all.origin_ok("http://192.168.1.5:7070"));
        // Without a name, the first address.
        let nameless = Hosts::with("0.0.0.0:7070".parse().unwrap(), None, &ips);
        assert_eq!(nameless.url("/"), "http://192.168.1.5:7070/");
        // The real lookup finds at least the loopback interface.
        assert!(local_addresses(false).iter().any(|ip| ip.is_loopback()));
        // A specific address stays the only one.
        let one = Hosts::with(
            "192.168.1.5:7070".parse().unwrap(),
            Some("build-box".into()),
            &[],
        );
        assert!(one.host_ok("192.168.1.5:7070") && !one.host_ok("build-box:7070"));
    }
}
