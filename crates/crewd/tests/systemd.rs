//! crewd under systemd: the unit files verify, socket activation through
//! `systemd-socket-activate`, readiness and stop notifications on `NOTIFY_SOCKET`, and a peer of
//! another uid refused (SO_PEERCRED). Tests that need a tool or root fail when it is missing;
//! `make test` leaves them out there and counts them skipped; `.ci/run` installs the tools and
//! runs as root.

mod common;

use common::{crewd_bin, path_str, Daemon};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The unit files in the repository's `systemd/`.
fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../systemd")
}

/// `name` on PATH, if there.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// A test that cannot run here fails, never passes: `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped.
fn cannot_run(test: &str, why: &str) -> ! {
    panic!("{test} cannot run here: {why}; `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("crewd-systemd")
        .tempdir()
        .expect("tempdir")
}

/// One JSON-RPC call as an HTTP POST on a Unix socket; the parsed response object.
fn http_call(socket: &Path, method: &str, params: Value) -> std::io::Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let r = crew_testkit::post(socket, body.as_bytes(), READY_TIMEOUT)?;
    serde_json::from_str(&r.body).map_err(|e| std::io::Error::other(format!("{e}: {}", r.body)))
}

/// A child's stderr, drained by a thread: every line is kept and also sent to `lines`.
struct Lines {
    lines: Receiver<String>,
    all: Arc<Mutex<String>>,
}

impl Lines {
    fn capture(stream: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = channel();
        let all = Arc::new(Mutex::new(String::new()));
        let keep = all.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                keep.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        Lines { lines: rx, all }
    }

    /// Block until a line containing `needle` arrives (or fail after `READY_TIMEOUT`).
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!(
                    "no line with {needle:?} ({e}); output so far:\n{}",
                    self.text()
                ),
            }
        }
    }

    fn text(&self) -> String {
        self.all.lock().unwrap().clone()
    }
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill -TERM");
}

/// Ends the child if a test fails half-way.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Log text without terminal colour sequences (`ESC [ ... m`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The `Key=value` settings of a unit file, per section; comments and blank lines dropped.
fn unit_settings(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
        } else if let Some((k, v)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

#[test]
fn unit_files_say_what_the_spec_asks() {
    let table: &[(&str, &str, &str, &str)] = &[
        ("crewd.service", "Service", "Type", "notify"),
        ("crewd.service", "Service", "NotifyAccess", "main"),
        ("crewd.service", "Service", "Restart", "on-failure"),
        (
            "crewd.service",
            "Service",
            "ExecStart",
            "%h/.local/bin/crewd",
        ),
        ("crewd.service", "Service", "NoNewPrivileges", "yes"),
        ("crewd.service", "Install", "WantedBy", "default.target"),
        (
            "crewd.socket",
            "Socket",
            "ListenStream",
            "%t/crew/crewd.sock",
        ),
        ("crewd.socket", "Socket", "SocketMode", "0600"),
        ("crewd.socket", "Socket", "DirectoryMode", "0700"),
        ("crewd.socket", "Install", "WantedBy", "sockets.target"),
    ];
    for (file, section, key, want) in table {
        let text = std::fs::read_to_string(units_dir().join(file)).expect(file);
        let settings = unit_settings(&text);
        let got: Vec<&str> = settings
            .iter()
            .filter(|(s, k, _)| s == section && k == key)
            .map(|(_, _, v)| v.as_str())
            .collect();
        assert_eq!(got, vec![*want], "{file} [{section}] {key}");
        for (s, k, v) in &settings {
            // A `#` after a value is not a comment in unit files: it becomes part of the value.
            assert!(!v.contains('#'), "{file} [{s}] {k}={v}: trailing comment");
        }
    }
}

#[test]
fn unit_files_pass_systemd_analyze_verify() {
    const NAME: &str = "unit_files_pass_systemd_analyze_verify";
    let Some(analyze) = which("systemd-analyze") else {
        cannot_run(
            NAME,
            "systemd-analyze is not installed (Debian package `systemd`)",
        );
    };
    // A user manager's view: %h/.local/bin/crewd must exist and %t must resolve.
    let dir = tempdir();
    let home = dir.path().join("home");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(crewd_bin(), home.join(".local/bin/crewd")).unwrap();
    let out = Command::new(analyze)
        .args(["verify", "--user", "--man=no"])
        .arg(units_dir().join("crewd.socket"))
        .arg(units_dir().join("crewd.service"))
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("run systemd-analyze");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // verify exits 0 on unknown keys and bad values, printing a warning: any output fails.
    assert!(
        out.status.success() && text.trim().is_empty(),
        "systemd-analyze verify ({}):\n{text}",
        out.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_activation_serves_http_and_websocket() {
    const NAME: &str = "socket_activation_serves_http_and_websocket";
    let Some(activate) = which("systemd-socket-activate") else {
        cannot_run(
            NAME,
            "systemd-socket-activate is not installed (Debian package `systemd`)",
        );
    };
    let dir = tempdir();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    let socket = dir.path().join("crewd.sock");
    let state = dir.path().join("state");
    // systemd-socket-activate passes on only what -E names.
    let mut child = Command::new(activate)
        .arg("-l")
        .arg(&socket)
        .arg(format!("--setenv=HOME={}", path_str(&home)))
        .arg(format!(
            "--setenv=XDG_CONFIG_HOME={}",
            path_str(&home.join(".config"))
        ))
        .arg("--setenv=CREW_LOG=info,jsonrpsee=warn,sled=warn")
        .arg("--setenv=NO_COLOR=1")
        .arg(crewd_bin())
        .arg("--state-dir")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn systemd-socket-activate");
    let log = Lines::capture(child.stderr.take().unwrap());
    let child = Reap(child);
    log.wait_for("Listening on");

    // The first connection makes systemd-socket-activate exec crewd in its own process.
    let ping = http_call(&socket, "daemon.ping", json!({})).expect("ping over HTTP");
    assert_eq!(
        ping["result"]["pid"],
        child.0.id(),
        "{ping}\n{}",
        log.text()
    );
    log.wait_for("using the socket passed by systemd");
    let status = http_call(&socket, "daemon.status", json!({})).unwrap();
    assert_eq!(status["result"]["socket"], path_str(&socket), "{status}");

    let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let (tx, rx) = jsonrpsee::client_transport::ws::WsTransportClientBuilder::default()
        .build_with_stream(url::Url::parse("ws://localhost/").unwrap(), stream)
        .await
        .expect("ws handshake");
    let ws = jsonrpsee::core::client::ClientBuilder::default().build_with_tokio(tx, rx);
    let r = crew_api::client::call::<crew_api::methods::DaemonPing>(&ws, &Default::default())
        .await
        .expect("ping over WebSocket");
    assert_eq!(r.pid, child.0.id());
    drop(ws);

    let mut child = child;
    sigterm(&child.0);
    let exit = child.0.wait().unwrap();
    assert!(exit.success(), "crewd exited with {exit}:\n{}", log.text());
    // The socket belongs to whoever passed it: crewd must not remove it.
    assert!(
        socket.exists(),
        "crewd removed a socket it did not create:\n{}",
        log.text()
    );
}

#[test]
fn notify_socket_gets_ready_then_stopping() {
    let dir = tempdir();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    notify.set_read_timeout(Some(READY_TIMEOUT)).unwrap();
    let socket = dir.path().join("run/crewd.sock");
    let child = Command::new(crewd_bin())
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("NOTIFY_SOCKET", &notify_path)
        .env("CREW_LOG", "info,jsonrpsee=warn,sled=warn")
        .env("NO_COLOR", "1")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crewd");
    let mut child = Reap(child);
    let log = Lines::capture(child.0.stderr.take().unwrap());

    let mut messages: Vec<String> = Vec::new();
    let recv_until = |want: &str, messages: &mut Vec<String>| {
        let mut buf = vec![0u8; 4096];
        loop {
            let n = notify
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no {want} ({e}); got {messages:?}\n{}", log.text()));
            let msg = String::from_utf8_lossy(&buf[..n]).to_string();
            let done = msg.lines().any(|l| l == want);
            messages.push(msg);
            if done {
                return;
            }
        }
    };
    recv_until("READY=1", &mut messages);
    // Ready means serving: the very first call must be answered.
    let ping = http_call(&socket, "daemon.ping", json!({})).expect("ping right after READY=1");
    assert_eq!(ping["result"]["pid"], child.0.id(), "{ping}");

    sigterm(&child.0);
    recv_until("STOPPING=1", &mut messages);
    let exit = child.0.wait().unwrap();
    assert!(exit.success(), "crewd exited with {exit}:\n{}", log.text());
    let ready = messages
        .iter()
        .filter(|m| m.lines().any(|l| l == "READY=1"));
    assert_eq!(ready.count(), 1, "{messages:?}");
    assert!(!socket.exists(), "crewd left its own socket behind");
}

#[test]
fn a_peer_of_another_uid_is_refused_and_logged() {
    const NAME: &str = "a_peer_of_another_uid_is_refused_and_logged";
    if !nix::unistd::geteuid().is_root() {
        cannot_run(NAME, "needs root to run a client as `nobody`");
    }
    let Some(setpriv) = which("setpriv") else {
        cannot_run(
            NAME,
            "setpriv is not installed (Debian package `util-linux`)",
        );
    };
    let Some(curl) = which("curl") else {
        cannot_run(NAME, "curl is not installed");
    };
    let Ok(Some(nobody)) = nix::unistd::User::from_name("nobody") else {
        cannot_run(NAME, "there is no user `nobody`");
    };
    let group = ["nogroup", "nobody"]
        .into_iter()
        .find(|g| matches!(nix::unistd::Group::from_name(g), Ok(Some(_))));
    let Some(group) = group else {
        cannot_run(NAME, "there is no group `nogroup` or `nobody`");
    };

    let d = Daemon::start();
    // crewd made the socket 0600 in a 0700 directory, which alone keeps `nobody` out. Open the
    // path (as root) so the connection reaches crewd and only its uid check stands in the way.
    let run_dir = d.socket.parent().unwrap();
    for (p, mode) in [
        (d.dir.path(), 0o711),
        (run_dir, 0o711),
        (d.socket.as_path(), 0o666),
    ] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{}}"#;
    let curl_args = |c: &mut Command| {
        c.args(["-sS", "--max-time", "30", "--unix-socket"])
            .arg(&d.socket)
            .args(["-H", "content-type: application/json", "-d", body])
            .arg("http://localhost/");
    };

    let mut as_nobody = Command::new(&setpriv);
    as_nobody
        .args([
            "--reuid=nobody",
            &format!("--regid={group}"),
            "--clear-groups",
        ])
        .arg(&curl)
        .args(["-w", "%{http_code}"]);
    curl_args(&mut as_nobody);
    let out = as_nobody.output().expect("run curl as nobody");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Refused with 403 (a client can tell it from the connection limit's 429), no answer.
    assert!(
        stdout.trim() == "403" && !stdout.contains("jsonrpc"),
        "a peer of uid {} got an answer ({}): {stdout} {stderr}",
        nobody.uid,
        out.status
    );
    // crewd logs before it drops the connection, so the line is there once curl saw the close.
    let log = strip_ansi(&d.log_text());
    let refused = log
        .lines()
        .find(|l| l.contains("connection from another user refused"))
        .unwrap_or_else(|| panic!("no refusal logged (curl: {stderr}):\n{log}"));
    assert!(
        refused.contains(&format!("peer_uid={}", nobody.uid)),
        "{refused}"
    );

    // The same client as the daemon's own user is served, and the daemon serves on.
    let mut as_root = Command::new(&curl);
    curl_args(&mut as_root);
    let out = as_root.output().expect("run curl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\"result\""),
        "{}: {stdout}",
        out.status
    );
    assert_eq!(d.ok("daemon.ping", json!({}))["pid"], d.pid());
}
