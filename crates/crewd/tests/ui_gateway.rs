//! Issue 29 item 7: `ui_listen`'s gateway runs inside crewd, so its connections are crewd's
//! descriptors. 1,100 idle TCP connections once took crewd to 1024/1024 and `daemon.ping` on
//! the Unix socket timed out; the gateway now serves a capped number of connections (more are
//! closed at accept), with a header-read timeout, and the socket keeps answering.

mod common;

use common::{one_step_team, Daemon, Opts};
use serde_json::json;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;

const IDLE: usize = 1100;

/// This process may open `n` descriptors (raising its soft limit to the hard one if needed).
fn can_open(n: u64) -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit of this process.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return false;
        }
        if lim.rlim_cur >= n {
            return true;
        }
        if lim.rlim_max < n {
            return false;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0
    }
}

fn ui_addr(d: &Daemon) -> SocketAddr {
    let url = std::fs::read_to_string(d.state_dir.join("ui-url")).unwrap();
    let rest = url.trim().strip_prefix("http://").unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

#[test]
fn idle_dashboard_connections_never_take_the_socket_down() {
    let need = IDLE as u64 + 256;
    assert!(
        can_open(need),
        "this process may not open {need} descriptors (hard RLIMIT_NOFILE); `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped"
    );
    let d = Daemon::start_with(Opts {
        config: "ui_listen = \"127.0.0.1:0\"\n".into(),
        ..Default::default()
    });
    // crewd with the descriptors it had when the issue was found.
    let ok = Command::new("prlimit")
        .args(["--pid", &d.pid().to_string(), "--nofile=1024:1024"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "prlimit (Debian package `util-linux`) could not limit crewd's descriptors; `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped"
    );
    one_step_team(&d, "one", "[fake:turns=1]", "explorer");
    let addr = ui_addr(&d);
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        match TcpStream::connect(addr) {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect {} failed: {e}", idle.len()),
        }
    }
    // Every idle connection is open (or was closed by the gateway): the socket answers, and a
    // run starts workers and completes.
    for _ in 0..5 {
        let pong = d.ok("daemon.ping", json!({}));
        assert!(pong.is_object() || pong.is_string(), "{pong}");
    }
    let run = d.run("while the gateway is flooded", json!({"team": "one"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let fds = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .map(|r| r.count())
        .unwrap_or(0);
    eprintln!("crewd holds {fds} descriptors with {IDLE} idle dashboard connections");
    assert!(fds < 512, "crewd holds {fds} descriptors");
    drop(idle);
    d.ok("daemon.ping", json!({}));
}
