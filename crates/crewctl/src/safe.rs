//! The one gate between text and the user's terminal. Titles, answers, questions, errors,
//! transcripts and patches come from models and workers: an `ESC[1A ESC[2K` in a task title
//! would erase the plan row above it in the approval view, an OSC 52 in an answer would write
//! the clipboard, a bidi override would make a line read other than it is. Everything crewctl
//! writes to a terminal passes through [`term`], which writes such characters as visible
//! `\uXXXX` escapes (valid inside JSON strings too, so `--json` on a terminal stays JSON) and
//! lets through only the colour codes crewctl itself paints (`style.rs`). A colour left on at
//! the end of the text (a model's own, unclosed) is reset there, so it cannot colour what
//! crewctl prints after it.

use std::borrow::Cow;

/// `s` as it may reach a terminal: C0/C1 controls, DEL and bidi controls escaped, except
/// newline, tab, a CR before a newline, and the SGR colour sequences of crewctl's own tones.
pub fn term(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    let mut colour = Colour::default();
    while let Some(c) = rest.chars().next() {
        let n = c.len_utf8();
        if c == '\u{1b}' {
            if let Some(len) = own_sgr(rest) {
                let sgr = rest.get(..len).unwrap_or_default();
                colour.apply(sgr);
                out.push_str(sgr);
                rest = rest.get(len..).unwrap_or_default();
                continue;
            }
        }
        let keep = match c {
            '\n' | '\t' => true,
            '\r' => rest.get(1..).is_some_and(|r| r.starts_with('\n')),
            c => !unsafe_char(c),
        };
        if keep {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{:04x}", c as u32));
        }
        rest = rest.get(n..).unwrap_or_default();
    }
    if colour.on() {
        out.push_str("\u{1b}[0m");
    }
    Cow::Owned(out)
}

/// Which of the attributes `own_sgr` lets through are on.
#[derive(Default)]
struct Colour {
    foreground: bool,
    intensity: bool,
}

impl Colour {
    /// After `sgr` (one `own_sgr` sequence).
    fn apply(&mut self, sgr: &str) {
        let params = sgr
            .strip_prefix("\u{1b}[")
            .and_then(|p| p.strip_suffix('m'))
            .unwrap_or_default();
        for p in params.split(';') {
            match p {
                "" | "0" => *self = Colour::default(),
                "1" | "2" => self.intensity = true,
                "22" => self.intensity = false,
                "39" => self.foreground = false,
                _ => self.foreground = true,
            }
        }
    }

    fn on(&self) -> bool {
        self.foreground || self.intensity
    }
}

/// C0 and C1 controls, DEL, and the Unicode bidi formatting characters.
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// The length of the SGR sequence `s` starts with when it is one crewctl paints (bold, dim,
/// red, green, yellow, magenta, cyan, resets): colours only, never hidden or same-as-background
/// text, never a cursor move.
fn own_sgr(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\u{1b}[")?;
    let end = body.find('m')?;
    let params = body.get(..end)?;
    let ok = params.len() <= 16
        && params.split(';').all(|p| {
            matches!(
                p,
                "" | "0" | "1" | "2" | "22" | "31" | "32" | "33" | "35" | "36" | "39"
            )
        });
    ok.then_some(2 + end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_sequences_are_escaped() {
        let cases = [
            ("plain", "plain"),
            ("two\nlines\twith tab", "two\nlines\twith tab"),
            ("crlf\r\n", "crlf\r\n"),
            ("over\rwrite", "over\\u000dwrite"),
            ("\u{1b}[1A\u{1b}[2Kgone", "\\u001b[1A\\u001b[2Kgone"),
            ("\u{1b}]52;c;aGk=\u{7}", "\\u001b]52;c;aGk=\\u0007"),
            ("c1 \u{9b}2J", "c1 \\u009b2J"),
            ("bidi \u{202e}txt.exe", "bidi \\u202etxt.exe"),
            ("conceal \u{1b}[8mx", "conceal \\u001b[8mx"),
            ("\u{7f}", "\\u007f"),
        ];
        for (input, want) in cases {
            assert_eq!(term(input), want, "{input:?}");
        }
    }

    #[test]
    fn a_colour_left_on_is_reset_at_the_end() {
        let cases = [
            ("after\u{1b}[31mred", "after\u{1b}[31mred\u{1b}[0m"),
            (
                "\u{1b}[1;33mbold\u{1b}[22m",
                "\u{1b}[1;33mbold\u{1b}[22m\u{1b}[0m",
            ),
            ("\u{1b}[31mred\u{1b}[39m ok", "\u{1b}[31mred\u{1b}[39m ok"),
            ("\u{1b}[2mdim\u{1b}[0m", "\u{1b}[2mdim\u{1b}[0m"),
            ("\u{1b}[36m\u{1b}[m", "\u{1b}[36m\u{1b}[m"),
        ];
        for (input, want) in cases {
            assert_eq!(term(input), want, "{input:?}");
        }
    }

    #[test]
    fn crewctls_own_colours_pass() {
        use crate::style::{Paint, Tone};
        let p = Paint::new(true);
        for tone in [
            Tone::Ok,
            Tone::Bad,
            Tone::Warn,
            Tone::Active,
            Tone::Dim,
            Tone::Bold,
            Tone::Accent,
        ] {
            let s = p.paint(tone, "x");
            assert_eq!(term(&s), s, "{tone:?}");
        }
    }
}
