//! The environment a worker sees: an allowlist, not the daemon's whole environment, so API keys
//! of other providers and unrelated secrets never reach an agent that did not need them.

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

fn allowed(name: &str, extra: &[String]) -> bool {
    ALLOW.contains(&name) || name.starts_with("LC_") || extra.iter().any(|e| e == name)
}

/// The filtered environment plus crew's own variables.
pub fn worker_env(extra: &[String], own: &[(&str, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| allowed(k, extra))
        .collect();
    for (k, v) in own {
        env.push((k.to_string(), v.clone()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(allowed(name, &extra), ok, "{name}");
        }
    }
}
