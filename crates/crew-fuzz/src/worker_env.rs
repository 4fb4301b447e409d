//! The worker environment: whatever bytes the daemon inherited, filtered by the allowlist.
//! Input: NUL-separated `NAME=VALUE` entries as in `/proc/<pid>/environ` (an entry starting
//! with `+` names an extra allowed variable instead).

use crew_core::worker_env::filter;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

pub fn worker_env(data: &[u8]) {
    let mut vars = Vec::new();
    let mut extra = Vec::new();
    for entry in data.split(|b| *b == 0) {
        if let Some(name) = entry.strip_prefix(b"+") {
            extra.push(String::from_utf8_lossy(name).into_owned());
            continue;
        }
        let (name, value) = match entry.iter().position(|b| *b == b'=') {
            Some(i) => (&entry[..i], &entry[i + 1..]),
            None => (entry, &b""[..]),
        };
        vars.push((
            OsString::from_vec(name.to_vec()),
            OsString::from_vec(value.to_vec()),
        ));
    }
    let own = [
        ("CREW_RUN_ID", "r".to_string()),
        ("CREW_ATTEMPT", "1".to_string()),
    ];
    let env = filter(vars.clone(), &extra, &own);
    for (k, v) in &env {
        let (k, v) = (k.as_bytes(), v.as_bytes());
        assert!(
            !k.is_empty() && !k.contains(&b'=') && !k.contains(&0) && !v.contains(&0),
            "not passable to execve: {k:?}={v:?}"
        );
    }
    // crew's own variables: each exactly once, with crew's value.
    for (name, value) in &own {
        let found: Vec<_> = env
            .iter()
            .filter(|(k, _)| k.as_bytes() == name.as_bytes())
            .collect();
        assert_eq!(found.len(), 1, "{name} in {env:?}");
        assert_eq!(found[0].1.as_bytes(), value.as_bytes());
    }
    // Nothing made up: every other pair came from the input, and filtering again keeps it all.
    let inherited: Vec<_> = env
        .iter()
        .filter(|(k, _)| !own.iter().any(|(o, _)| k.as_bytes() == o.as_bytes()))
        .cloned()
        .collect();
    for pair in &inherited {
        assert!(vars.contains(pair), "{pair:?} was not in the input");
    }
    assert_eq!(filter(inherited.clone(), &extra, &[]), inherited);
}
