//! Colour decisions and painting. One `Paint` per output stream: escape codes are written only
//! when colour is on for that stream, so piped output stays plain.

use anstyle::{AnsiColor, Style};
use std::io::IsTerminal;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when the stream is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to colour a stream, given whether it is a terminal and the environment.
    pub fn enabled(self, is_terminal: bool, no_color: Option<&str>, term: Option<&str>) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                // https://no-color.org: any non-empty value disables colour.
                let no_color = no_color.is_some_and(|v| !v.is_empty());
                is_terminal && !no_color && term != Some("dumb")
            }
        }
    }

    pub fn for_stdout(self) -> bool {
        self.enabled(
            std::io::stdout().is_terminal(),
            env("NO_COLOR").as_deref(),
            env("TERM").as_deref(),
        )
    }

    pub fn for_stderr(self) -> bool {
        self.enabled(
            std::io::stderr().is_terminal(),
            env("NO_COLOR").as_deref(),
            env("TERM").as_deref(),
        )
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The role a piece of text plays; mapped to a colour in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Ok,
    Bad,
    Warn,
    Active,
    Dim,
    Bold,
    Accent,
}

impl Tone {
    fn style(self) -> Style {
        match self {
            Tone::Ok => Style::new().fg_color(Some(AnsiColor::Green.into())),
            Tone::Bad => Style::new().fg_color(Some(AnsiColor::Red.into())).bold(),
            Tone::Warn => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Tone::Active => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Tone::Dim => Style::new().dimmed(),
            Tone::Bold => Style::new().bold(),
            Tone::Accent => Style::new().fg_color(Some(AnsiColor::Magenta.into())),
        }
    }
}

/// Paints text for one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paint {
    pub on: bool,
}

impl Paint {
    #[cfg(test)]
    pub const PLAIN: Paint = Paint { on: false };

    pub fn new(on: bool) -> Self {
        Paint { on }
    }

    pub fn paint(&self, tone: Tone, text: impl std::fmt::Display) -> String {
        if self.on {
            let style = tone.style();
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_decision() {
        let cases = [
            (ColorChoice::Auto, true, None, None, true),
            (ColorChoice::Auto, false, None, None, false),
            (ColorChoice::Auto, true, Some("1"), None, false),
            (ColorChoice::Auto, true, Some(""), None, true),
            (ColorChoice::Auto, true, None, Some("dumb"), false),
            (ColorChoice::Always, false, Some("1"), None, true),
            (ColorChoice::Never, true, None, None, false),
        ];
        for (choice, tty, no_color, term, want) in cases {
            assert_eq!(
                choice.enabled(tty, no_color, term),
                want,
                "{choice:?} tty={tty} NO_COLOR={no_color:?} TERM={term:?}"
            );
        }
    }

    #[test]
    fn plain_paint_has_no_escapes() {
        assert_eq!(Paint::PLAIN.paint(Tone::Bad, "x"), "x");
        let on = Paint::new(true).paint(Tone::Bad, "x");
        assert!(on.contains('\u{1b}') && on.contains('x'));
    }
}
