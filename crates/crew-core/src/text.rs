//! Text a model or a worker wrote, made safe to keep: bounded before an event or a summary
//! holds it (one run's answer must never make the daemon's list too large to answer), and
//! echoed in messages without the characters that move a terminal's cursor or reorder a line.

/// The most characters an event keeps of a reason, an error, a question or a message.
pub const MAX_REASON_CHARS: usize = 4096;
/// The most characters an event keeps of a name a model or worker gives: the model (an agent's
/// stream names it), the tool in use.
pub const MAX_NAME_CHARS: usize = 256;
/// The most characters of one value (an id, a role, a path) echoed inside a message.
pub const MAX_ECHO_CHARS: usize = 64;

/// A character that must not reach a terminal as it is: C0 and C1 controls and DEL (escape
/// sequences start with them) and the Unicode bidi controls (they reorder what is shown, so a
/// line can read other than it is).
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// The Unicode bidirectional formatting characters (UAX #9): marks, embeddings, overrides and
/// isolates.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// `s` cut to at most `max` characters (on a char boundary), saying how many were cut.
pub fn bound(s: String, max: usize) -> String {
    let Some((at, _)) = s.char_indices().nth(max) else {
        return s;
    };
    let rest = s.get(at..).map_or(0, |r| r.chars().count());
    let mut out = s;
    out.truncate(at);
    out.push_str(&format!("… [{rest} more characters]"));
    out
}

/// One value quoted inside a message: at most [`MAX_ECHO_CHARS`] characters, unsafe ones
/// written as escapes (`\u{1b}`).
pub fn echo(s: &str) -> String {
    clean(s, MAX_ECHO_CHARS)
}

/// `s` with unsafe characters written as escapes, whole: for a log line, which must stay one
/// line whatever a worker, git or a path put in it.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(is_unsafe_char) {
        std::borrow::Cow::Owned(clean(s, usize::MAX))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// `s` in single quotes, as a POSIX shell reads it back unchanged whatever it holds.
pub fn shell_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `s` as one shell word: as it is when it holds nothing a shell reads specially, else
/// [`shell_quoted`].
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c));
    if plain {
        s.to_string()
    } else {
        shell_quoted(s)
    }
}

/// `s` with unsafe characters written as escapes, cut after `max` characters of it.
pub fn clean(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if is_unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn shell_words_are_quoted_only_when_a_shell_would_read_them_otherwise() {
        for (s, word) in [
            ("/tmp/repo", "/tmp/repo"),
            ("a b", "'a b'"),
            ("it's", "'it'\\''s'"),
            ("", "''"),
            ("$HOME", "'$HOME'"),
        ] {
            assert_eq!(shell_word(s), word, "{s}");
        }
        assert_eq!(shell_quoted("/tmp/repo"), "'/tmp/repo'");
    }

    use super::*;

    #[test]
    fn bound_cuts_and_counts() {
        assert_eq!(bound("abc".into(), 3), "abc");
        assert_eq!(bound("abcdé".into(), 3), "abc… [2 more characters]");
        assert_eq!(bound(String::new(), 0), "");
    }

    #[test]
    fn escape_keeps_everything_and_escapes_controls() {
        assert!(matches!(
            escape("plain é"),
            std::borrow::Cow::Borrowed("plain é")
        ));
        assert_eq!(
            escape("a\nb\r\u{1b}[2J\u{202E}c"),
            "a\\nb\\r\\u{1b}[2J\\u{202e}c"
        );
        let long = "z".repeat(10_000);
        assert_eq!(escape(&long), long);
    }

    #[test]
    fn echo_escapes_and_cuts() {
        assert_eq!(echo("a\u{1b}[2Kb"), "a\\u{1b}[2Kb");
        assert_eq!(echo("x\u{202E}y"), "x\\u{202e}y");
        assert_eq!(echo("\u{9b}"), "\\u{9b}");
        let long = "z".repeat(100);
        assert_eq!(echo(&long).chars().count(), MAX_ECHO_CHARS + 1);
    }

    #[test]
    fn unsafe_chars() {
        for c in [
            '\u{1b}', '\u{7f}', '\u{9b}', '\u{202E}', '\u{2066}', '\n', '\t',
        ] {
            assert!(is_unsafe_char(c), "{c:?}");
        }
        for c in ['a', 'é', '…', '中'] {
            assert!(!is_unsafe_char(c), "{c:?}");
        }
    }
}
