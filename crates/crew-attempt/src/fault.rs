//! Fault injection for the worker path, in debug builds only (release builds compile every
//! point to nothing). `CREW_TEST_FAULT=<point>:<kind>[,…]`, with kind `panic` or `error`, makes
//! that point fail on every attempt (`kill`: the whole process dies there by SIGKILL, as a
//! `kill -9` at that instant would have it), so `tests/worker_faults.rs` can check that whatever fails
//! while a worker is started or supervised ends the attempt, never leaving a task `running`
//! without a worker. The points are named where they are hit (`fault::hit("render")`).
//! `error-once` fails the first hit only. `wait=<file>` holds the point (logging that it does) until `<file>` exists: a test does
//! something while the daemon is there, then lets it go on.

/// Fail here if the test environment says so: panic, or return an I/O error.
#[cfg(debug_assertions)]
pub fn hit(point: &str) -> std::io::Result<()> {
    use std::sync::OnceLock;
    static FAULTS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    let faults = FAULTS.get_or_init(|| {
        std::env::var("CREW_TEST_FAULT")
            .unwrap_or_default()
            .split(',')
            .filter_map(|f| f.split_once(':'))
            .map(|(p, k)| (p.trim().to_string(), k.trim().to_string()))
            .collect()
    });
    match faults
        .iter()
        .find(|(p, _)| p == point)
        .map(|(_, k)| k.as_str())
    {
        Some("panic") => panic!("injected fault at {point}"),
        Some("kill") => {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            Err(std::io::Error::other(format!("injected kill at {point}")))
        }
        Some("error-once") => {
            static FIRED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
            let mut fired = FIRED.lock().unwrap_or_else(|p| p.into_inner());
            if fired.iter().any(|p| p == point) {
                return Ok(());
            }
            fired.push(point.to_string());
            Err(std::io::Error::other(format!("injected fault at {point}")))
        }
        Some(k) if k.starts_with("wait=") => {
            let file = std::path::Path::new(k.trim_start_matches("wait="));
            tracing::info!(point, file = %file.display(), "fault point holds until the file exists");
            // Bounded: a test that never lets go fails on its own deadline, not here.
            for _ in 0..6000 {
                if file.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Ok(())
        }
        Some(_) => Err(std::io::Error::other(format!("injected fault at {point}"))),
        None => Ok(()),
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn hit(_point: &str) -> std::io::Result<()> {
    Ok(())
}
