//! JSON with comments, as Gemini CLI reads its `settings.json` (the `strip-json-comments`
//! package: `//` and `/* */` comments outside strings, nothing else): crew reads the user's
//! settings to add its ask server, and a file Gemini CLI itself accepts must not make crew give
//! up on it.

/// `text` with every comment outside a string replaced by spaces (newlines kept, so a parse
/// error still names the right line). An unterminated block comment runs to the end, as in
/// Gemini CLI. One pass, no recursion.
pub(crate) fn strip_comments(text: &str) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum At {
        Code,
        Str { escaped: bool },
        Line,
        Block { star: bool },
    }
    let mut out = String::with_capacity(text.len());
    let mut at = At::Code;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        at = match at {
            At::Code => match (c, chars.peek()) {
                ('"', _) => {
                    out.push(c);
                    At::Str { escaped: false }
                }
                ('/', Some('/')) => {
                    chars.next();
                    out.push_str("  ");
                    At::Line
                }
                ('/', Some('*')) => {
                    chars.next();
                    out.push_str("  ");
                    At::Block { star: false }
                }
                _ => {
                    out.push(c);
                    At::Code
                }
            },
            At::Str { escaped } => {
                out.push(c);
                match c {
                    '"' if !escaped => At::Code,
                    '\\' => At::Str { escaped: !escaped },
                    _ => At::Str { escaped: false },
                }
            }
            At::Line => match c {
                '\n' | '\r' => {
                    out.push(c);
                    At::Code
                }
                _ => {
                    out.push(' ');
                    At::Line
                }
            },
            At::Block { star } => {
                out.push(if c == '\n' || c == '\r' { c } else { ' ' });
                match c {
                    '/' if star => At::Code,
                    '*' => At::Block { star: true },
                    _ => At::Block { star: false },
                }
            }
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_comments;
    use serde_json::{json, Value};

    #[test]
    fn comments_go_and_strings_stay() {
        let cases: &[(&str, Value)] = &[
            ("{}", json!({})),
            ("// mine\n{\"a\": 1}", json!({"a": 1})),
            ("{\"a\": 1 // one\n}", json!({"a": 1})),
            ("{\"a\": /* x */ 2}", json!({"a": 2})),
            (
                "{/* a\n multi-line * / comment **/\"a\": 3}",
                json!({"a": 3}),
            ),
            (
                r#"{"url": "http://host/x"}"#,
                json!({"url": "http://host/x"}),
            ),
            (
                r#"{"s": "/* not a comment */"}"#,
                json!({"s": "/* not a comment */"}),
            ),
            (
                r#"{"q": "a \" // still a string"}"#,
                json!({"q": "a \" // still a string"}),
            ),
            (
                r#"{"b": "ends in a backslash \\"} // c"#,
                json!({"b": "ends in a backslash \\"}),
            ),
            ("{\"a\": 1}\r\n// crlf\r\n", json!({"a": 1})),
            ("{\"é\": \"ü\"} /* ünïcode */", json!({"é": "ü"})),
        ];
        for (text, want) in cases {
            let stripped = strip_comments(text);
            let got: Value = serde_json::from_str(&stripped)
                .unwrap_or_else(|e| panic!("{text:?} -> {stripped:?}: {e}"));
            assert_eq!(&got, want, "{text:?}");
            assert_eq!(
                stripped.lines().count(),
                text.lines().count(),
                "{text:?}: lines kept"
            );
        }
    }

    #[test]
    fn an_unterminated_comment_runs_to_the_end() {
        let blank = |n: usize| format!("{{}}{}", " ".repeat(n));
        assert_eq!(strip_comments("{} /* open"), blank(8));
        assert_eq!(strip_comments("{} // x"), blank(5));
        assert_eq!(strip_comments("\"open string // x"), "\"open string // x");
    }

    proptest::proptest! {
        /// Any text: no panic, and the same number of characters and line breaks.
        #[test]
        fn keeps_the_shape_of_any_text(text in "\\PC*") {
            let out = strip_comments(&text);
            proptest::prop_assert_eq!(out.chars().count(), text.chars().count());
            proptest::prop_assert_eq!(out.matches('\n').count(), text.matches('\n').count());
        }
    }
}
