//! pi-crew's frontmatter: a `---` block of `key: value` lines. It is NOT YAML: each line is split
//! at its first `:`, values stay raw strings (quotes included), the last of duplicate keys wins and
//! `#` lines are comments. Every key keeps its line so diagnostics can point at `file:line:field`.

/// One `key: value` line of the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub value: String,
    /// 1-based line in the file.
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Frontmatter {
    /// True when the file opens with a closed `---` block.
    pub present: bool,
    /// Entries in file order; lookups take the last one of a key.
    pub entries: Vec<Entry>,
    /// Lines inside the block that are neither `key: value`, blank nor `#` comments.
    pub malformed: Vec<u32>,
    /// The raw block text (between the fences) and the line of its first line: for SKILL.md,
    /// whose block is real YAML.
    pub raw: String,
    pub raw_line: u32,
    /// Everything after the closing fence (or the whole file), with `\r\n` turned into `\n`.
    pub body: String,
    /// 1-based line of the first body line.
    pub body_line: u32,
}

impl Frontmatter {
    /// The entry of `key`, the last one when the key repeats.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().rev().find(|e| e.key == key)
    }

    /// The first present key of `keys` (aliases, the preferred one first).
    pub fn get_any(&self, keys: &[&str]) -> Option<&Entry> {
        keys.iter().find_map(|k| self.get(k))
    }

    /// The value of `key` when present and not empty.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.get(key)
            .map(|e| e.value.as_str())
            .filter(|v| !v.is_empty())
    }
}

fn is_fence(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Split `text` into frontmatter and body.
pub(crate) fn split(text: &str) -> Frontmatter {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let normalized = text.replace("\r\n", "\n");
    let lines: Vec<&str> = normalized.split('\n').collect();
    let close = match lines.first() {
        Some(first) if is_fence(first) => lines
            .iter()
            .skip(1)
            .position(|l| is_fence(l))
            .map(|p| p + 1),
        _ => None,
    };
    let Some(close) = close else {
        return Frontmatter {
            body: normalized.clone(),
            body_line: 1,
            ..Frontmatter::default()
        };
    };
    let block = lines.get(1..close).unwrap_or_default();
    let mut fm = Frontmatter {
        present: true,
        raw: block.join("\n"),
        raw_line: 2,
        body: lines.get(close + 1..).unwrap_or_default().join("\n"),
        body_line: line_no(close + 1),
        ..Frontmatter::default()
    };
    for (i, line) in block.iter().enumerate() {
        let line_no = line_no(i + 1);
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match trimmed.split_once(':') {
            Some((key, value)) if !key.trim().is_empty() => fm.entries.push(Entry {
                key: key.trim().to_string(),
                value: value.trim().to_string(),
                line: line_no,
            }),
            _ => fm.malformed.push(line_no),
        }
    }
    fm
}

/// 1-based line number of the 0-based line index `i`, saturating for absurdly long files.
pub(crate) fn line_no(i: usize) -> u32 {
    u32::try_from(i.saturating_add(1)).unwrap_or(u32::MAX)
}

/// pi-crew's `parseCsv`: split on `,` outside double quotes (the quotes themselves are dropped),
/// trim, drop empty items, dedupe keeping the first. `None` when nothing is left.
pub(crate) fn parse_csv(value: &str) -> Option<Vec<String>> {
    let mut items: Vec<String> = Vec::new();
    // Seen items by hash: a scan of `items` per item made a long `dependsOn` quadratic.
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut current = String::new();
    let mut in_quotes = false;
    let mut push = |current: &mut String, items: &mut Vec<String>| {
        let item = current.trim();
        if !item.is_empty() && seen.insert(item.to_string()) {
            items.push(item.to_string());
        }
        current.clear();
    };
    for c in value.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            ',' if !in_quotes => push(&mut current, &mut items),
            c => current.push(c),
        }
    }
    push(&mut current, &mut items);
    (!items.is_empty()).then_some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(fm: &Frontmatter) -> Vec<(&str, &str, u32)> {
        fm.entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str(), e.line))
            .collect()
    }

    #[test]
    fn splits_blocks() {
        struct Case {
            text: &'static str,
            present: bool,
            entries: &'static [(&'static str, &'static str, u32)],
            malformed: &'static [u32],
            body: &'static str,
            body_line: u32,
        }
        let cases = [
            Case {
                text: "---\nname: x\ndescription: a: b\n---\nbody\n",
                present: true,
                entries: &[("name", "x", 2), ("description", "a: b", 3)],
                malformed: &[],
                body: "body\n",
                body_line: 5,
            },
            Case {
                text: "---\r\nname: \"quoted\"\r\n# comment\r\n\r\nbogus line\r\n---\r\nb",
                present: true,
                entries: &[("name", "\"quoted\"", 2)],
                malformed: &[5],
                body: "b",
                body_line: 7,
            },
            Case {
                text: "---\nname: a\nname: b\n---",
                present: true,
                entries: &[("name", "a", 2), ("name", "b", 3)],
                malformed: &[],
                body: "",
                body_line: 5,
            },
            Case {
                text: "---\n---\nhello",
                present: true,
                entries: &[],
                malformed: &[],
                body: "hello",
                body_line: 3,
            },
            Case {
                text: "---\nname: x\nno closing fence",
                present: false,
                entries: &[],
                malformed: &[],
                body: "---\nname: x\nno closing fence",
                body_line: 1,
            },
            Case {
                text: "name: x\n---\n",
                present: false,
                entries: &[],
                malformed: &[],
                body: "name: x\n---\n",
                body_line: 1,
            },
            Case {
                text: "---\n: empty key\n  indented:  v  \n---\n",
                present: true,
                entries: &[("indented", "v", 3)],
                malformed: &[2],
                body: "",
                body_line: 5,
            },
            Case {
                text: "",
                present: false,
                entries: &[],
                malformed: &[],
                body: "",
                body_line: 1,
            },
        ];
        for c in cases {
            let fm = split(c.text);
            assert_eq!(fm.present, c.present, "{:?}", c.text);
            assert_eq!(kv(&fm), c.entries, "{:?}", c.text);
            assert_eq!(fm.malformed, c.malformed, "{:?}", c.text);
            assert_eq!(fm.body, c.body, "{:?}", c.text);
            assert_eq!(fm.body_line, c.body_line, "{:?}", c.text);
        }
    }

    #[test]
    fn last_duplicate_wins() {
        let fm = split("---\nname: a\nname: b\n---\n");
        assert_eq!(
            fm.get("name").map(|e| (e.value.as_str(), e.line)),
            Some(("b", 3))
        );
        assert_eq!(fm.text("missing"), None);
    }

    #[test]
    fn csv() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("a, b ,c", Some(&["a", "b", "c"])),
            ("a,,b,", Some(&["a", "b"])),
            ("b,a,b", Some(&["b", "a"])),
            ("\"x, y\",z", Some(&["x, y", "z"])),
            ("\"unclosed, x", Some(&["unclosed, x"])),
            ("", None),
            (" , ,", None),
            ("\"\"", None),
        ];
        for (input, want) in cases {
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(parse_csv(input), want, "{input:?}");
        }
    }
}
