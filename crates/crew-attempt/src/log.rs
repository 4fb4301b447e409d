//! How crewd and crew-worker write their log: every field, the message included, with its
//! control characters escaped, so one event is one line. Fields carry text from outside —
//! git's stderr in an error, a worker's words, a path — and a newline in one would split the
//! line, letting that text pass for a line of crew's own (or move a terminal's cursor).
//! It lives here because both binaries that run attempts log through it.

use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::{self, FormatFields};

/// The fields formatter for `tracing_subscriber::fmt().fmt_fields(..)`: the message as it is,
/// every other field as `name=value` (values as the default formatter shows them: strings
/// quoted, `%` fields displayed), each escaped with `crew_core::text::escape`.
pub fn fields() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        let text = crew_core::text::escape(&text);
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_event_is_one_line_whatever_its_fields_hold() {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .without_time()
            .fmt_fields(super::fields())
            .finish();
        let git = "error: gpg failed\n(no gpg output)\u{1b}[2J";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(code = 1002, error = %git, path = "a\nb", "refused:\n{}", "x");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(
                r#"refused:\nx code=1002 error=error: gpg failed\n(no gpg output)\u{1b}[2J path="a\nb""#
            ),
            "{text}"
        );
    }
}
