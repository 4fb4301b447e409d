//! Issue 8: slow and hostile clients (SPEC §10, §11). While one attack runs, a well-behaved
//! WebSocket client keeps calling `daemon.ping`; every call must be answered, and its latency
//! (p50/p99) is printed next to the baseline. Latency is reported, not asserted: the machine is
//! shared. Memory is read from /proc (VmRSS, VmHWM) around each attack.

mod common;
use common::*;
use crew_api::client::ObjectParams;
use jsonrpsee::core::client::{Client, ClientT};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_CONNECTIONS: usize = 16;
/// How long each attack is kept up while the good client measures.
const ATTACK_TIME: Duration = Duration::from_secs(3);
/// A ping that takes longer than this counts as not answered.
const PING_LIMIT: Duration = Duration::from_secs(10);

fn daemon() -> Daemon {
    Daemon::start_with(Opts {
        config: format!(
            "max_connections = {MAX_CONNECTIONS}\nno_output_timeout_ms = 20000\n\
             kill_grace_ms = 300\nfinal_drain_ms = 300\nfinal_drain_quiet_ms = 100\n"
        ),
        env: vec![],
    })
}

// ---------------------------------------------------------------------------------------------
// Measuring

struct Sample {
    attack: &'static str,
    pings: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    rss_mb: f64,
    hwm_mb: f64,
    note: String,
}

fn proc_kb(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn rss_mb(pid: u32) -> f64 {
    proc_kb(pid, "VmRSS:") / 1024.0
}

fn hwm_mb(pid: u32) -> f64 {
    proc_kb(pid, "VmHWM:") / 1024.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn ping(client: &Client) -> Duration {
    let t = Instant::now();
    let r = tokio::time::timeout(
        PING_LIMIT,
        client.request::<Value, _>("daemon.ping", ObjectParams(json!({}))),
    )
    .await;
    match r {
        Ok(Ok(v)) => assert!(v.get("pid").is_some(), "{v}"),
        Ok(Err(e)) => panic!("the well-behaved client got an error: {e}"),
        Err(_) => panic!("the well-behaved client was not answered within {PING_LIMIT:?}"),
    }
    t.elapsed()
}

/// Runs `attack` (blocking I/O, repeated until ATTACK_TIME is up) on a thread while the good
/// client pings; returns the ping latencies and what the attack said.
async fn under_attack(
    d: &Daemon,
    client: &Client,
    name: &'static str,
    attack: impl FnOnce(&Path) -> String + Send + 'static,
) -> Sample {
    let socket = d.socket.clone();
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let handle = tokio::task::spawn_blocking(move || {
        // Set even when the attack panics, so the measuring loop ends and the panic surfaces.
        struct Done(Arc<AtomicBool>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let _done = Done(done2);
        attack(&socket)
    });
    let mut lat = Vec::new();
    while !done.load(Ordering::Acquire) || lat.len() < 50 {
        lat.push(ping(client).await);
    }
    let note = handle.await.expect("the attack thread panicked");
    assert!(d.child.is_some(), "daemon handle gone");
    summarize(d, name, lat, note)
}

fn summarize(d: &Daemon, attack: &'static str, mut lat: Vec<Duration>, note: String) -> Sample {
    lat.sort();
    Sample {
        attack,
        pings: lat.len(),
        p50: percentile(&lat, 0.50),
        p99: percentile(&lat, 0.99),
        max: lat.last().copied().unwrap_or_default(),
        rss_mb: rss_mb(d.pid()),
        hwm_mb: hwm_mb(d.pid()),
        note,
    }
}

fn over(start: Instant) -> bool {
    start.elapsed() >= ATTACK_TIME
}

// ---------------------------------------------------------------------------------------------
// Raw clients

/// A WebSocket connection done by hand, so the test decides when (and whether) to read.
fn ws_raw(socket: &Path) -> UnixStream {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101"), "no upgrade: {head}");
    s
}

/// A WebSocket session, or `None` when the daemon refuses it (closed, or not 101).
fn ws_try(socket: &Path) -> Option<UnixStream> {
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .ok()?;
    read_head(&mut s).starts_with("HTTP/1.1 101").then_some(s)
}

/// Bytes up to the end of the HTTP head.
fn read_head(s: &mut UnixStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// One masked client frame header (RFC 6455) for `len` payload bytes; the mask is zero so the
/// payload goes out as is.
fn ws_header(opcode: u8, len: u64) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
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
    f
}

fn ws_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = ws_header(opcode, payload.len() as u64);
    f.extend_from_slice(payload);
    f
}

/// Reads one server frame (unmasked); `None` on close or error.
fn ws_read(s: &mut UnixStream) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).ok()?;
    let mut len = u64::from(h[1] & 0x7f);
    if len == 126 {
        let mut l = [0u8; 2];
        s.read_exact(&mut l).ok()?;
        len = u64::from(u16::from_be_bytes(l));
    } else if len == 127 {
        let mut l = [0u8; 8];
        s.read_exact(&mut l).ok()?;
        len = u64::from_be_bytes(l);
    }
    let mut payload = vec![0u8; len as usize];
    s.read_exact(&mut payload).ok()?;
    Some((h[0] & 0x0f, payload))
}

/// An HTTP POST of `body` on a fresh connection; (status, body), or (0, "") with no answer.
fn post(socket: &Path, body: &[u8]) -> (u16, String) {
    crew_testkit::post(socket, body, Duration::from_secs(30))
        .map(|r| (r.status, r.body))
        .unwrap_or_default()
}

fn error_code(body: &str) -> Option<i64> {
    let v: Value = serde_json::from_str(body.trim()).ok()?;
    let v = if let Value::Array(a) = v {
        a.into_iter().next()?
    } else {
        v
    };
    v.pointer("/error/code").and_then(Value::as_i64)
}

// ---------------------------------------------------------------------------------------------
// Attacks

/// Subscribers that replay every stored event and then never read a byte: the daemon must drop
/// them (SPEC §11: with a notice, never stalling) while new events keep coming. Runs are created
/// until the daemon's log says every one of them was dropped.
fn never_reading_subscribers(d: &Daemon) -> impl FnOnce(&Path) -> String {
    const STALLED: usize = 4;
    let work = path_str(&d.work).to_string();
    let log = d.log.clone();
    move |socket| {
        let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "team.subscribe", "params": {"afterSeq": 0}})
            .to_string();
        let stalled: Vec<UnixStream> = (0..STALLED)
            .map(|_| {
                let mut s = ws_raw(socket);
                s.write_all(&ws_frame(0x1, sub.as_bytes())).unwrap();
                s
            })
            .collect();
        let dropped = || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.lines()
                .filter(|l| l.contains("subscriber") && l.contains("dropped"))
                .count()
        };
        let before = dropped();
        // Live events on top of the replay, with big run.created events.
        let start = Instant::now();
        let mut runs = 0;
        while !over(start) || dropped() < before + STALLED {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "{} of {STALLED} never-reading subscribers dropped after {runs} runs",
                dropped() - before
            );
            let goal = "x".repeat(20_000);
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "team.run", "params": {
                "goal": goal, "cwd": work, "runtime": "fake", "team": "solo", "requirePlanApproval": true}})
            .to_string();
            let (status, resp) = post(socket, body.as_bytes());
            assert_eq!(status, 200, "{resp}");
            assert!(resp.contains("runId"), "{resp}");
            runs += 1;
        }
        let took = start.elapsed();
        drop(stalled);
        format!(
            "{STALLED} stalled subscribers all dropped after {:.1} s; {runs} runs created meanwhile",
            took.as_secs_f64()
        )
    }
}

/// An idle keep-alive HTTP connection that was served, or `None` when refused.
fn http_idle(socket: &Path) -> Option<UnixStream> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}"#;
    let ping = format!(
        "POST / HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(ping.as_bytes()).ok()?;
    let mut buf = [0u8; 4096];
    match s.read(&mut buf) {
        Ok(n) if n > 0 && buf.starts_with(b"HTTP/1.1 200") => Some(s),
        _ => None,
    }
}

/// Every connection slot taken by idle clients; more must be refused, not queued, and once they
/// close, new clients are served again. First idle HTTP keep-alive connections, then WebSocket
/// sessions (with HTTP connections on top of those).
fn connection_flood() -> impl FnOnce(&Path) -> String {
    move |socket| {
        let start = Instant::now();
        let take = |f: &dyn Fn(&Path) -> Option<UnixStream>| {
            let mut held = Vec::new();
            let mut refused = 0;
            for _ in 0..MAX_CONNECTIONS * 3 {
                match f(socket) {
                    Some(s) => held.push(s),
                    None => refused += 1,
                }
            }
            (held, refused)
        };
        let (http, http_refused) = take(&http_idle);
        assert!(http_refused > 0, "no HTTP connection refused at the limit");
        assert!(
            http.len() <= MAX_CONNECTIONS,
            "{} HTTP connections held with a limit of {MAX_CONNECTIONS}",
            http.len()
        );
        let http_held = http.len();
        drop(http);
        let served_again = |what: &str| {
            let back = Instant::now();
            while http_idle(socket).is_none() {
                // Closed connections are noticed asynchronously: a generous bound.
                assert!(
                    back.elapsed() < Duration::from_secs(30),
                    "no new client served 30 s after the {what} closed"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            back.elapsed()
        };
        let http_back = served_again("HTTP flood");
        let (ws, ws_refused) = take(&ws_try);
        assert!(ws_refused > 0, "no WebSocket session refused at the limit");
        assert!(
            ws.len() < MAX_CONNECTIONS,
            "{} WebSocket sessions besides the well-behaved one, with a limit of {MAX_CONNECTIONS}",
            ws.len()
        );
        // crewd counts a connection only until it upgrades to WebSocket, jsonrpsee counts the
        // sessions: what one client can hold at once is both together.
        let (more_http, _) = take(&http_idle);
        while !over(start) {
            assert!(
                ws_try(socket).is_none(),
                "a session beyond the limit was served"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let (ws_held, more) = (ws.len(), more_http.len());
        drop(ws);
        drop(more_http);
        let ws_back = served_again("WebSocket flood");
        format!(
            "HTTP: {http_held} idle held, {http_refused} refused, served again after {} ms; \
             WS: {ws_held} sessions held (+1 well-behaved), {ws_refused} refused, and {more} idle \
             HTTP connections on top; served again after {} ms",
            http_back.as_millis(),
            ws_back.as_millis()
        )
    }
}

/// Streams up to `total` bytes of a body after `head` until the daemon answers or closes;
/// (bytes sent, time to the answer, the answer).
fn stream_body(socket: &Path, head: &[u8], total: u64) -> (u64, Duration, Vec<u8>) {
    let s = UnixStream::connect(socket).expect("connect");
    let mut reader = s.try_clone().unwrap();
    reader
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let start = Instant::now();
    let answer = std::thread::spawn(move || {
        let mut resp = Vec::new();
        let _ = reader.read_to_end(&mut resp);
        (start.elapsed(), resp)
    });
    let mut w = s;
    w.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut sent = 0u64;
    let chunk = vec![b' '; 1 << 20];
    if w.write_all(head).is_ok() {
        while sent < total {
            if answer.is_finished() {
                break;
            }
            match w.write(&chunk) {
                Ok(n) => sent += n as u64,
                Err(_) => break,
            }
        }
    }
    let _ = w.shutdown(std::net::Shutdown::Write);
    let (took, resp) = answer.join().unwrap();
    (sent, took, resp)
}

const HUNDRED_MB: u64 = 100 << 20;

fn huge_bodies() -> impl FnOnce(&Path) -> String {
    move |socket| {
        let start = Instant::now();
        let mut notes = Vec::new();
        let mut rounds = 0;
        while !over(start) || rounds == 0 {
            // HTTP: Content-Length says 100 MB.
            let head = format!(
                "POST / HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\n\
                 Content-Length: {HUNDRED_MB}\r\nConnection: close\r\n\r\n"
            );
            let (sent, took, resp) = stream_body(socket, head.as_bytes(), HUNDRED_MB);
            let crew_testkit::Response { status, body } = crew_testkit::parse(&resp);
            assert!(
                status == 413 || error_code(&body) == Some(1005),
                "a 100 MB body got {status} {body}"
            );
            assert!(sent < HUNDRED_MB, "the daemon read the whole 100 MB");
            // WebSocket: one frame announcing 100 MB. soketto (under jsonrpsee) reads such a
            // frame to the end, discarding it, then closes: it costs bandwidth, not memory
            // (checked with VmHWM by the caller).
            let mut ws = ws_raw(socket);
            ws.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            ws.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let t = Instant::now();
            let mut ws_sent = 0u64;
            let chunk = vec![b' '; 1 << 20];
            if ws.write_all(&ws_header(0x1, HUNDRED_MB)).is_ok() {
                while ws_sent < HUNDRED_MB {
                    match ws.write(&chunk) {
                        Ok(n) => ws_sent += n as u64,
                        Err(_) => break,
                    }
                }
            }
            // Then: 1005 (request too big), a close frame or EOF; never a result.
            let after = ws_read(&mut ws);
            let refused = match &after {
                None => true,
                Some((0x8, _)) => true,
                Some((_, p)) => error_code(&String::from_utf8_lossy(p)) == Some(1005),
            };
            assert!(refused, "a 100 MB frame got {after:?}");
            let ws_took = t.elapsed();
            if rounds == 0 {
                notes.push(format!(
                    "HTTP: {status} after {} ms, {} MB sent; WS: closed after {} ms, {} MB sent",
                    took.as_millis(),
                    sent >> 20,
                    ws_took.as_millis(),
                    ws_sent >> 20
                ));
            }
            rounds += 1;
        }
        format!("{rounds} rounds; {}", notes.join("; "))
    }
}

fn huge_batches() -> impl FnOnce(&Path) -> String {
    move |socket| {
        let one = json!({"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"});
        let batch = Value::Array(vec![one; 10_000]).to_string();
        let start = Instant::now();
        let mut rounds = 0;
        let mut note = String::new();
        while !over(start) || rounds == 0 {
            let t = Instant::now();
            let (status, body) = post(socket, batch.as_bytes());
            let code = error_code(&body);
            assert!(
                code.is_some() && !body.contains("\"result\""),
                "a batch of 10,000 got {status} {}",
                &body[..body.len().min(300)]
            );
            // Same over WebSocket.
            let mut ws = ws_raw(socket);
            ws.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            ws.write_all(&ws_frame(0x1, batch.as_bytes())).unwrap();
            let answer = ws_read(&mut ws);
            let ws_code = answer
                .as_ref()
                .and_then(|(_, p)| error_code(&String::from_utf8_lossy(p)));
            assert!(ws_code.is_some(), "a WS batch of 10,000 got {answer:?}");
            if rounds == 0 {
                note = format!(
                    "{} KB batch refused with {code:?} (HTTP {status}) in {} ms, over WS with {ws_code:?}",
                    batch.len() >> 10,
                    t.elapsed().as_millis()
                );
            }
            rounds += 1;
        }
        format!("{rounds} rounds; {note}")
    }
}

/// Bodies no JSON-RPC server should choke on; each must get a standard error.
fn malformed_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let mut v: Vec<(&'static str, Vec<u8>)> = vec![
        ("invalid UTF-8", b"\xff\xfe\xfd".to_vec()),
        (
            "invalid UTF-8 in a string",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.ping\",\"params\":{\"x\":\"\xc3\x28\"}}"
                .to_vec(),
        ),
        ("truncated", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth".to_vec()),
        ("NUL bytes", b"\0\0\0\0".to_vec()),
        ("empty", Vec::new()),
        ("not an object", b"42".to_vec()),
        (
            "wrong types",
            b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":7,\"params\":\"x\"}".to_vec(),
        ),
        (
            "huge number",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"team.list\",\"params\":{\"limit\":1e999999}}"
                .to_vec(),
        ),
        (
            "string params",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"team.status\",\"params\":\"run\"}".to_vec(),
        ),
    ];
    v.push(("100k nested arrays", vec![b'['; 100_000]));
    let mut nested = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"team.run\",\"params\":".to_vec();
    nested.extend(std::iter::repeat_n(b'{', 50_000).flat_map(|_| b"{\"a\":".to_vec()));
    v.push(("50k nested objects in params", nested));
    v
}

fn malformed() -> impl FnOnce(&Path) -> String {
    move |socket| {
        let bodies = malformed_bodies();
        let start = Instant::now();
        let mut rounds = 0;
        let mut codes = Vec::new();
        while !over(start) || rounds == 0 {
            for (name, body) in &bodies {
                let (status, resp) = post(socket, body);
                let code = error_code(&resp);
                assert!(
                    status == 200 || status == 400 || status == 415,
                    "{name}: HTTP {status} {resp}"
                );
                assert!(
                    matches!(code, Some(-32700 | -32600 | -32602)),
                    "{name}: answered {status} {resp}"
                );
                if rounds == 0 {
                    codes.push(format!("{name}: {}", code.unwrap_or_default()));
                }
            }
            // The same garbage over WebSocket: an error answer or a closed connection, never
            // a dead daemon.
            for (_, body) in bodies.iter().take(4) {
                let mut ws = ws_raw(socket);
                ws.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let _ = ws.write_all(&ws_frame(0x1, body));
                let _ = ws_read(&mut ws);
            }
            let mut ws = ws_raw(socket);
            ws.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = ws.write_all(&ws_frame(0x2, b"\x00\x01binary"));
            let _ = ws_read(&mut ws);
            rounds += 1;
        }
        format!("{rounds} rounds; {}", codes.join(", "))
    }
}

fn print_table(samples: &[Sample]) {
    eprintln!(
        "\n{:<28} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8}  note",
        "daemon.ping during", "pings", "p50", "p99", "max", "RSS MB", "HWM MB"
    );
    for s in samples {
        eprintln!(
            "{:<28} {:>6} {:>9.2?} {:>9.2?} {:>9.2?} {:>8.1} {:>8.1}  {}",
            s.attack, s.pings, s.p50, s.p99, s.max, s.rss_mb, s.hwm_mb, s.note
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_do_not_hurt_a_well_behaved_one() {
    let d = daemon();
    one_step_team(&d, "solo", "Do it. [fake:turns=1]", "executor");
    let client = d.ws().await;
    let mut samples = Vec::new();

    // Baseline.
    let mut lat = Vec::new();
    let start = Instant::now();
    while start.elapsed() < ATTACK_TIME || lat.len() < 50 {
        lat.push(ping(&client).await);
    }
    samples.push(summarize(&d, "nothing (baseline)", lat, String::new()));

    let slow = under_attack(
        &d,
        &client,
        "never-reading subscribers",
        never_reading_subscribers(&d),
    )
    .await;
    samples.push(slow);
    let flood = under_attack(&d, &client, "connection flood", connection_flood()).await;
    samples.push(flood);
    let hwm_before = hwm_mb(d.pid());
    let huge = under_attack(&d, &client, "100 MB bodies", huge_bodies()).await;
    let hwm_after = hwm_mb(d.pid());
    samples.push(huge);
    let batch = under_attack(&d, &client, "batches of 10,000", huge_batches()).await;
    samples.push(batch);
    let bad = under_attack(&d, &client, "malformed UTF-8 / JSON", malformed()).await;
    samples.push(bad);
    print_table(&samples);

    assert!(
        hwm_after - hwm_before < 50.0,
        "peak memory rose by {:.1} MB during the 100 MB bodies",
        hwm_after - hwm_before
    );
    // Still serving, over both transports.
    ping(&client).await;
    assert!(d.ok("daemon.ping", json!({}))["pid"].is_number());
    let run = d.run("after the attacks", json!({"team": "solo"}));
    assert_eq!(d.wait(&run), "completed");
}

/// Clients that made one request each and then hold their keep-alive connections open, silent,
/// take every slot only until the daemon's head timer (30 s) closes them: then a new client is
/// served again without any of them going away by itself. Before, they held the daemon
/// unreachable for as long as they stayed.
#[test]
fn idle_keep_alive_clients_are_closed_and_free_their_slots() {
    let d = daemon();
    let socket = d.socket.clone();
    let mut held = Vec::new();
    while let Some(s) = http_idle(&socket) {
        held.push(s);
        assert!(held.len() <= MAX_CONNECTIONS, "more than the limit served");
    }
    assert_eq!(held.len(), MAX_CONNECTIONS, "slots taken before a refusal");
    let idle_from = Instant::now();
    for s in &mut held {
        // Each held connection is closed by the daemon (EOF), not by this client.
        s.set_read_timeout(Some(Duration::from_secs(90)))
            .unwrap_or_default();
        let mut buf = [0u8; 64];
        assert!(
            matches!(s.read(&mut buf), Ok(0)),
            "an idle connection was not closed by the daemon within 90 s"
        );
    }
    let closed_after = idle_from.elapsed();
    assert!(
        closed_after >= Duration::from_secs(25),
        "idle connections closed after {closed_after:?}: sooner than the head timer"
    );
    assert!(
        http_idle(&socket).is_some(),
        "no new client served after the idle ones were closed"
    );
    eprintln!(
        "{} idle keep-alive connections closed by the daemon after {:.1} s",
        held.len(),
        closed_after.as_secs_f64()
    );
}
