//! Redaction and home paths: secrets redacted and the exporting daemon's `$HOME` written `~`
//! in everything a bundle carries, and `~` expanded with the importing daemon's `$HOME`.

use serde_json::Value;

pub(super) fn home_dir() -> Option<String> {
    std::env::var("HOME")
        .ok()
        .map(|h| h.trim_end_matches('/').to_string())
        .filter(|h| !h.is_empty())
}

/// `$HOME/x` → `~/x`, only where the match ends a path component (`/home/al` is not in
/// `/home/alice`).
fn shorten_home(s: &str, home: Option<&str>) -> String {
    let Some(home) = home else {
        return s.to_string();
    };
    if !s.contains(home) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(home) {
        let after = &rest[i + home.len()..];
        let boundary = after
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')));
        out.push_str(&rest[..i]);
        out.push_str(if boundary { "~" } else { home });
        rest = after;
    }
    out.push_str(rest);
    out
}

pub(super) fn expand_home(path: &str, home: Option<&str>) -> String {
    match (home, path.strip_prefix('~')) {
        (Some(h), Some(rest)) if rest.is_empty() || rest.starts_with('/') => format!("{h}{rest}"),
        _ => path.to_string(),
    }
}

fn clean_text(s: &str, home: Option<&str>) -> String {
    shorten_home(&crew_core::redact::redact_str(s), home)
}

/// Every string of a JSON value redacted and home-shortened.
pub(super) fn clean_value(v: &mut Value, home: Option<&str>) {
    match v {
        Value::String(s) => {
            let c = clean_text(s, home);
            if c != *s {
                *s = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| clean_value(i, home)),
        Value::Object(map) => map.values_mut().for_each(|i| clean_value(i, home)),
        _ => {}
    }
}

/// Artifact content as it goes into a bundle: transcripts line by line (structural redaction
/// of JSON lines), anything else as text.
pub(super) fn clean_artifact(name: &str, bytes: &[u8], home: Option<&str>) -> String {
    let text = String::from_utf8_lossy(bytes);
    if name.ends_with(".jsonl") {
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let (body, nl) = match line.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (line, ""),
            };
            out.push_str(&shorten_home(
                &crew_core::redact::redact_json_line(body),
                home,
            ));
            out.push_str(nl);
        }
        out
    } else {
        clean_text(&text, home)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_paths() {
        let h = Some("/home/al");
        let table = [
            ("/home/al", "~"),
            ("/home/al/p/x", "~/p/x"),
            ("cd /home/al/p && ls /home/al", "cd ~/p && ls ~"),
            ("/home/alice/p", "/home/alice/p"),
            ("\"/home/al\"", "\"~\""),
            ("nothing", "nothing"),
        ];
        for (input, want) in table {
            assert_eq!(shorten_home(input, h), want, "{input}");
        }
        assert_eq!(shorten_home("/home/al/x", None), "/home/al/x");
        let expand = [
            ("~", "/home/al"),
            ("~/p", "/home/al/p"),
            ("~bob/p", "~bob/p"),
            ("/abs", "/abs"),
        ];
        for (input, want) in expand {
            assert_eq!(expand_home(input, h), want, "{input}");
        }
    }

    #[test]
    fn artifacts_are_redacted() {
        let h = Some("/home/al");
        let jsonl = "{\"type\":\"session\",\"cwd\":\"/home/al/p\",\"apiKey\":\"abc\"}\nnot json sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123\n";
        let out = clean_artifact("transcripts/a.attempt-1.jsonl", jsonl.as_bytes(), h);
        assert!(!out.contains("/home/al"), "{out}");
        assert!(!out.contains("\"abc\""), "{out}");
        assert!(!out.contains("abcdefghijklmnopqrstuvwxyz0123"), "{out}");
        assert!(out.ends_with('\n'));
        assert_eq!(out.lines().count(), 2);
        let txt = clean_artifact("results/a.txt", b"token=s3cr3tvalue in /home/al/p", h);
        assert!(!txt.contains("s3cr3tvalue") && txt.contains("~/p"), "{txt}");
    }
}
