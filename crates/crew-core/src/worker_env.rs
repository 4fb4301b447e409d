//! The environment a worker sees: an allowlist, not the daemon's whole environment, so API keys
//! of other providers and unrelated secrets never reach an agent that did not need them. The
//! daemon reads its environment (`std::env::vars_os`) and hands it to `filter`.
//!
//! Names and values are bytes (`OsString`): the daemon inherits whatever environment its
//! parent had, and one variable that is not UTF-8 (an `OLDPWD` in Latin-1) must neither stop a
//! worker from starting nor change what it gets. A name that is not UTF-8 matches no allowlist
//! entry; a value is passed on as it is.

use std::ffi::{OsStr, OsString};

const ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NVM_BIN",
    "NVM_DIR",
    "NVM_INC",
    "NODE_DISABLE_COLORS",
    "PI_CODING_AGENT_DIR",
    "NO_COLOR",
];

fn allowed(name: &OsStr, extra: &[String]) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    ALLOW.contains(&name) || name.starts_with("LC_") || extra.iter().any(|e| e == name)
}

/// What `execve` can carry: a name without `=` or NUL, a value without NUL. The daemon's own
/// environment never holds anything else, but the filter must not rely on that.
fn passable(name: &OsStr, value: &OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (n, v) = (name.as_bytes(), value.as_bytes());
    !n.is_empty() && !n.contains(&b'=') && !n.contains(&0) && !v.contains(&0)
}

/// The allowed part of `vars`, plus crew's own variables (`own`, which win over inherited
/// ones of the same name). `extra`: names allowed besides the built-in list.
pub fn filter(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[String],
    own: &[(&str, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vars
        .into_iter()
        .filter(|(k, v)| allowed(k, extra) && passable(k, v))
        .filter(|(k, _)| !own.iter().any(|(o, _)| OsStr::new(o) == k))
        .collect();
    for (k, v) in own {
        env.push((OsString::from(k), OsString::from(v)));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    #[test]
    fn allowlist() {
        let extra = vec!["ANTHROPIC_API_KEY".to_string()];
        for (name, ok) in [
            ("PATH", true),
            ("LC_ALL", true),
            ("ANTHROPIC_API_KEY", true),
            ("OPENAI_API_KEY", false),
            ("AWS_SECRET_ACCESS_KEY", false),
        ] {
            assert_eq!(allowed(OsStr::new(name), &extra), ok, "{name}");
        }
    }

    #[test]
    fn bytes_pass_through_and_never_panic() {
        let latin1 = |s: &[u8]| OsString::from_vec(s.to_vec());
        let vars = vec![
            (OsString::from("OLDPWD"), latin1(b"/home/j\xe9r\xf4me")),
            (OsString::from("LC_CTYPE"), latin1(b"fr_FR.ISO-8859-1\xff")),
            (latin1(b"LC_\xe9"), OsString::from("x")),
            (latin1(b"PATH\xff"), OsString::from("/evil")),
            (OsString::from("PATH"), OsString::from("/usr/bin")),
            (OsString::from("CREW_RUN_ID"), OsString::from("spoofed")),
            (OsString::from("LC_NUL"), latin1(b"a\0b")),
            (OsString::from("LC_A=B"), OsString::from("x")),
        ];
        let env = filter(vars, &[], &[("CREW_RUN_ID", "r1".to_string())]);
        let got: Vec<(&[u8], &[u8])> = env
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
            .collect();
        assert_eq!(
            got,
            vec![
                (&b"LC_CTYPE"[..], &b"fr_FR.ISO-8859-1\xff"[..]),
                (&b"PATH"[..], &b"/usr/bin"[..]),
                (&b"CREW_RUN_ID"[..], &b"r1"[..]),
            ]
        );
    }
}
