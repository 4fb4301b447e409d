//! Skills: `skills/<dir>/SKILL.md`. Unlike the other resources the frontmatter is real YAML,
//! validated like pi-crew's "hybrid" mode: hard errors exclude the skill, soft ones warn.

use super::diag::{ident_ok, Diags};
use super::frontmatter;
use super::{Diagnostic, Parsed, Skill, Source};
use serde_yaml::Value;

const ALLOWED: &[&str] = &[
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
    "compatibility",
    "version",
    "author",
];

pub(super) fn parse(source: Source, path: &str, text: &str) -> (Option<Parsed>, Vec<Diagnostic>) {
    let mut d = Diags::new(path);
    let skill = read(source, path, text, &mut d);
    (skill.map(Parsed::Skill), d.into_vec())
}

/// The directory holding `SKILL.md`: the skill's identity.
fn dir_name(path: &str) -> Option<&str> {
    let mut parts = path.rsplit(['/', '\\']);
    let _file = parts.next()?;
    let dir = parts.next()?;
    Some(dir.rsplit(':').next().unwrap_or(dir))
}

fn read(source: Source, path: &str, text: &str, d: &mut Diags) -> Option<Skill> {
    let Some(dir) = dir_name(path).filter(|n| ident_ok(n)) else {
        d.error(
            None,
            None,
            "a skill lives in `<name>/SKILL.md` where <name> matches ^[A-Za-z0-9_-]+$",
        );
        return None;
    };
    let fm = frontmatter::split(text);
    let skill = |description: String| Skill {
        name: dir.to_string(),
        description,
        body: fm.body.trim().to_string(),
        source,
        path: path.to_string(),
    };
    if !fm.present {
        d.warn(
            None,
            None,
            "SKILL.md has no frontmatter; the skill has no description",
        );
        return Some(skill(String::new()));
    }
    let map = yaml_mapping(&fm, d)?;
    let fields = Fields {
        map: &map,
        lines: key_lines(&fm.raw, fm.raw_line),
    };
    fields.unknown_keys(d);
    fields.name(dir, d);
    let description = fields.description(d);
    fields.optional(d);
    if d.list.iter().any(|x| x.severity == super::Severity::Error) {
        return None;
    }
    Some(skill(description.unwrap_or_default()))
}

/// The frontmatter as a YAML mapping (empty frontmatter is an empty one); `None` with an
/// error when it is too big, not YAML, or not a mapping.
fn yaml_mapping(fm: &frontmatter::Frontmatter, d: &mut Diags) -> Option<serde_yaml::Mapping> {
    if let Some(problem) = yaml_too_big(&fm.raw) {
        d.error(Some(fm.raw_line), None, problem);
        return None;
    }
    match serde_yaml::from_str::<Value>(&fm.raw) {
        Ok(Value::Mapping(m)) => Some(m),
        Ok(Value::Null) => Some(serde_yaml::Mapping::new()),
        Ok(_) => {
            d.error(
                Some(fm.raw_line),
                None,
                "SKILL.md frontmatter is not a YAML mapping",
            );
            None
        }
        Err(e) => {
            let line = e.location().map(|l| {
                fm.raw_line
                    .saturating_add(u32::try_from(l.line()).unwrap_or(0))
                    .saturating_sub(1)
            });
            d.error(
                line.or(Some(fm.raw_line)),
                None,
                format!("SKILL.md frontmatter is not valid YAML: {e}"),
            );
            None
        }
    }
}

/// A skill's frontmatter fields and the lines they are on, checked one field at a time: a
/// hard problem excludes the skill, a soft one warns.
struct Fields<'a> {
    map: &'a serde_yaml::Mapping,
    lines: std::collections::HashMap<&'a str, u32>,
}

impl Fields<'_> {
    fn line(&self, key: &str) -> Option<u32> {
        self.lines.get(key).copied()
    }

    fn hard(&self, d: &mut Diags, key: &str, msg: impl Into<String>) {
        d.error(self.line(key), Some(key), msg.into());
    }

    fn unknown_keys(&self, d: &mut Diags) {
        for (k, _) in self.map {
            match k.as_str() {
                Some(k) if ALLOWED.contains(&k) => {}
                Some(k) => d.warn(
                    self.line(k),
                    Some(k),
                    format!("unknown SKILL.md field `{k}`; ignored"),
                ),
                None => d.warn(
                    None,
                    None,
                    "SKILL.md frontmatter has a non-string key; ignored",
                ),
            }
        }
    }

    /// The directory is the skill's name; `name:` may only repeat it.
    fn name(&self, dir: &str, d: &mut Diags) {
        match self.map.get("name") {
            None => d.warn(
                None,
                Some("name"),
                format!("SKILL.md has no `name`; the directory name `{dir}` is used"),
            ),
            Some(Value::String(n)) if skill_name_ok(n) => {
                if n != dir {
                    d.warn(
                        self.line("name"),
                        Some("name"),
                        format!("`name: {n}` differs from the directory name `{dir}`, which is the skill's name"),
                    );
                }
            }
            Some(_) => self.hard(
                d,
                "name",
                "`name` must be 1-64 characters of lowercase letters and digits separated by single hyphens",
            ),
        }
    }

    fn description(&self, d: &mut Diags) -> Option<String> {
        match self.map.get("description") {
            Some(Value::String(s))
                if s.is_empty() || s.chars().count() > 1024 || s.contains(['<', '>']) =>
            {
                self.hard(
                    d,
                    "description",
                    "`description` must be non-empty, at most 1024 characters, without `<` or `>`",
                );
                None
            }
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.hard(d, "description", "`description` must be a string");
                None
            }
            None => {
                d.error(None, Some("description"), "SKILL.md has no `description`");
                None
            }
        }
    }

    /// The optional fields' types: strings, a list of tool names, a mapping, a version.
    fn optional(&self, d: &mut Diags) {
        for key in ["license", "compatibility", "author"] {
            if self.map.get(key).is_some_and(|v| !v.is_string()) {
                self.hard(d, key, format!("`{key}` must be a string"));
            }
        }
        if let Some(v) = self.map.get("allowed-tools") {
            let ok = v
                .as_sequence()
                .is_some_and(|s| s.iter().all(Value::is_string));
            if !ok {
                self.hard(
                    d,
                    "allowed-tools",
                    "`allowed-tools` must be a list of strings",
                );
            }
        }
        if self.map.get("metadata").is_some_and(|v| !v.is_mapping()) {
            self.hard(d, "metadata", "`metadata` must be a mapping");
        }
        if let Some(v) = self.map.get("version") {
            let text = match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            };
            if !text.as_deref().is_some_and(version_ok) {
                self.hard(
                    d,
                    "version",
                    "`version` must look like 1.2 or 1.2.3, optionally with a -prerelease",
                );
            }
        }
    }
}

/// `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 characters.
fn skill_name_ok(n: &str) -> bool {
    n.len() <= 64
        && n.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// `^\d+\.\d+(\.\d+)?(-[A-Za-z0-9.-]+)?$`
fn version_ok(v: &str) -> bool {
    let (core, pre) = match v.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (v, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let core_ok = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    let pre_ok = pre.is_none_or(|p| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    });
    core_ok && pre_ok
}

/// The line of each top-level `key:` in the YAML block (the first one of a key), for
/// diagnostics: one pass, where a scan per key was quadratic in a file with many keys.
fn key_lines(raw: &str, first_line: u32) -> std::collections::HashMap<&str, u32> {
    let mut out = std::collections::HashMap::new();
    for (i, l) in raw.split('\n').enumerate() {
        if l.starts_with([' ', '\t', '#', '-']) {
            continue;
        }
        let Some((key, _)) = l.split_once(':') else {
            continue;
        };
        let key = key.trim_end();
        let key = key
            .strip_prefix('"')
            .and_then(|k| k.strip_suffix('"'))
            .or_else(|| key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')))
            .unwrap_or(key);
        out.entry(key)
            .or_insert_with(|| first_line.saturating_add(u32::try_from(i).unwrap_or(u32::MAX)));
    }
    out
}

/// Bytes of a SKILL.md frontmatter block, at most: every allowed field is a short string, a
/// list of tool names or a small `metadata` mapping.
const YAML_MAX_BYTES: usize = 64 * 1024;
/// Nesting of that block, at most (flow brackets or indentation levels).
const YAML_MAX_DEPTH: usize = 32;

/// Refuse a block the YAML parser should not see: its work grows faster than the input with
/// deep nesting, so size and depth are bounded first, in one linear pass.
fn yaml_too_big(raw: &str) -> Option<String> {
    if raw.len() > YAML_MAX_BYTES {
        return Some(format!(
            "SKILL.md frontmatter is {} bytes; at most {YAML_MAX_BYTES} are read",
            raw.len()
        ));
    }
    let mut flow = 0usize;
    let mut deepest = 0usize;
    let mut quote: Option<char> = None;
    for line in raw.split('\n') {
        let indent = line.len() - line.trim_start_matches([' ', '-']).len();
        deepest = deepest.max(indent / 2);
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '[' | '{') => {
                    flow += 1;
                    deepest = deepest.max(flow);
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                (None, '#') => break,
                _ => {}
            }
        }
    }
    (deepest > YAML_MAX_DEPTH).then(|| {
        format!("SKILL.md frontmatter nests deeper than {YAML_MAX_DEPTH} levels; not read")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{parse_file, Kind, Severity};

    type Got = (Severity, Option<u32>, Option<String>);

    const PATH: &str = "/u/skills/read-only-explorer/SKILL.md";

    fn parse_at(path: &str, text: &str) -> (Option<Skill>, Vec<Got>) {
        let (p, d) = parse_file(Kind::Skill, Source::User, path, text.as_bytes());
        let skill = match p {
            Some(Parsed::Skill(s)) => Some(s),
            None => None,
            other => panic!("not a skill: {other:?}"),
        };
        (
            skill,
            d.into_iter()
                .map(|d| (d.severity, d.line, d.field))
                .collect(),
        )
    }

    #[test]
    fn valid_skill() {
        let (s, d) = parse_at(
            PATH,
            "---\nname: read-only-explorer\ndescription: \"Read-only exploration.\"\nlicense: MIT\n\
             allowed-tools: [read, grep]\nmetadata: {a: 1}\nversion: 1.2.3-beta.1\n---\n# read-only-explorer\nUse it.\n",
        );
        assert!(d.is_empty(), "{d:?}");
        let s = s.expect("kept");
        assert_eq!(s.name, "read-only-explorer");
        assert_eq!(s.description, "Read-only exploration.");
        assert_eq!(s.body, "# read-only-explorer\nUse it.");
    }

    #[test]
    fn hybrid_validation() {
        type Want = (
            bool,
            &'static [(Severity, Option<u32>, Option<&'static str>)],
        );
        let cases: &[(&str, &str, Want)] = &[
            ("no name: soft", "---\ndescription: d\n---\n", (true, &[(Severity::Warning, None, Some("name"))])),
            (
                "unknown props: soft",
                "---\nname: read-only-explorer\ndescription: d\norigin: pi-crew\ntriggers:\n  - x\n---\n",
                (true, &[(Severity::Warning, Some(4), Some("origin")), (Severity::Warning, Some(5), Some("triggers"))]),
            ),
            ("no frontmatter: soft", "# just markdown\n", (true, &[(Severity::Warning, None, None)])),
            (
                "name differs from dir: soft",
                "---\nname: other\ndescription: d\n---\n",
                (true, &[(Severity::Warning, Some(2), Some("name"))]),
            ),
            ("missing description", "---\nname: read-only-explorer\n---\n", (false, &[(Severity::Error, None, Some("description"))])),
            ("empty frontmatter", "---\n---\n", (false, &[(Severity::Warning, None, Some("name")), (Severity::Error, None, Some("description"))])),
            ("bad name", "---\nname: Bad_Name\ndescription: d\n---\n", (false, &[(Severity::Error, Some(2), Some("name"))])),
            ("name not string", "---\nname: 12\ndescription: d\n---\n", (false, &[(Severity::Error, Some(2), Some("name"))])),
            ("description with <", "---\ndescription: a <b>\n---\n", (false, &[(Severity::Warning, None, Some("name")), (Severity::Error, Some(2), Some("description"))])),
            ("description list", "---\nname: x\ndescription: [a]\n---\n", (false, &[(Severity::Warning, Some(2), Some("name")), (Severity::Error, Some(3), Some("description"))])),
            ("license not string", "---\ndescription: d\nname: read-only-explorer\nlicense: [a]\n---\n", (false, &[(Severity::Error, Some(4), Some("license"))])),
            ("allowed-tools not list", "---\ndescription: d\nname: read-only-explorer\nallowed-tools: read\n---\n", (false, &[(Severity::Error, Some(4), Some("allowed-tools"))])),
            ("metadata not map", "---\ndescription: d\nname: read-only-explorer\nmetadata: 3\n---\n", (false, &[(Severity::Error, Some(4), Some("metadata"))])),
            ("bad version", "---\ndescription: d\nname: read-only-explorer\nversion: v1\n---\n", (false, &[(Severity::Error, Some(4), Some("version"))])),
            ("numeric version ok", "---\ndescription: d\nname: read-only-explorer\nversion: 1.5\n---\n", (true, &[])),
            ("yaml error", "---\ndescription: [unclosed\n---\n", (false, &[(Severity::Error, Some(3), None)])),
            ("not a mapping", "---\n- a\n- b\n---\n", (false, &[(Severity::Error, Some(2), None)])),
            ("duplicate keys", "---\ndescription: a\ndescription: b\n---\n", (false, &[(Severity::Error, Some(2), None)])),
        ];
        for (name, text, (kept, want)) in cases {
            let (s, d) = parse_at(PATH, text);
            assert_eq!(s.is_some(), *kept, "{name}: {d:?}");
            let want: Vec<_> = want
                .iter()
                .map(|(s, l, f)| (*s, *l, f.map(str::to_string)))
                .collect();
            assert_eq!(d, want, "{name}");
        }
    }

    #[test]
    fn directory_is_identity() {
        let cases = [
            ("builtin:skills/safe-bash/SKILL.md", Some("safe-bash")),
            ("/u/skills/bad name/SKILL.md", None),
            ("SKILL.md", None),
        ];
        for (path, want) in cases {
            let (s, _) = parse_at(path, "---\ndescription: d\n---\n");
            assert_eq!(s.map(|s| s.name), want.map(str::to_string), "{path}");
        }
    }

    #[test]
    fn versions() {
        for (v, ok) in [
            ("1.2", true),
            ("1.2.3", true),
            ("1.2.3-rc.1", true),
            ("1", false),
            ("1.2.3.4", false),
            ("1.x", false),
            ("1.2-", false),
        ] {
            assert_eq!(version_ok(v), ok, "{v}");
        }
    }
}
