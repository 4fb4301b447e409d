//! Agents: `agents/<name>.md`, pi-crew frontmatter plus the system prompt as body.

use super::diag::{basename, Diags};
use super::frontmatter::{self, parse_csv, Frontmatter};
use super::{Agent, Diagnostic, Parsed, Source, SystemPromptMode};

/// Every key pi-crew 0.9.35 read from an agent's frontmatter. crew uses a subset; the rest
/// (extensions, memory, routing, ...) is accepted so pi-crew files load without noise.
const KNOWN: &[&str] = &[
    "name",
    "description",
    "model",
    "fallbackModels",
    "thinking",
    "tools",
    "extensions",
    "excludeExtensions",
    "exclude_extensions",
    "skills",
    "skill",
    "systemPromptMode",
    "inheritProjectContext",
    "inheritSkills",
    "memory",
    "loadMode",
    "defaultTools",
    "contextMode",
    "maxTurns",
    "maxTokens",
    "effort",
    "disabled",
    "enabled",
    "triggers",
    "trigger",
    "useWhen",
    "avoidWhen",
    "cost",
    "category",
];

/// What `tools: *` / `tools: all` stands for.
pub(crate) const ALL_TOOLS: &[&str] = &["read", "edit", "write", "bash", "grep", "find", "ls"];

pub(super) const NO_DESCRIPTION: &str = "No description provided.";

pub(super) fn parse(source: Source, path: &str, text: &str) -> (Option<Parsed>, Vec<Diagnostic>) {
    let fm = frontmatter::split(text);
    let mut d = Diags::new(path);
    d.frontmatter_shape(&fm, KNOWN, "agent");
    let agent = read(&fm, &mut d, source, path);
    (Some(Parsed::Agent(agent)), d.into_vec())
}

fn read(fm: &Frontmatter, d: &mut Diags, source: Source, path: &str) -> Agent {
    let name = fm
        .text("name")
        .map_or_else(|| basename(path, ".md"), str::to_string);
    let system_prompt_mode = match d
        .one_of(fm.get("systemPromptMode"), &["replace", "append"])
        .as_deref()
    {
        Some("append") => SystemPromptMode::Append,
        _ => SystemPromptMode::Replace,
    };
    // Validated for the warning only: crew has no use for these pi-crew settings yet.
    for key in ["inheritProjectContext", "inheritSkills"] {
        d.boolean(fm.get(key));
    }
    d.one_of(fm.get("memory"), &["user", "project", "local"]);
    d.one_of(fm.get("loadMode"), &["essential", "lean"]);
    d.one_of(fm.get("contextMode"), &["fresh", "fork"]);
    d.one_of(fm.get("cost"), &["free", "cheap", "expensive"]);

    let disabled_flag = d.boolean(fm.get("disabled"));
    let enabled_flag = d.boolean(fm.get("enabled"));
    let fallback_models = fm
        .get("fallbackModels")
        .and_then(|e| parse_csv(&e.value))
        .unwrap_or_default();
    if let Some(e) = fm.get("fallbackModels") {
        for m in &fallback_models {
            d.check_model_ref(e.line, &e.key, m);
        }
    }
    let system_prompt = fm.body.trim().to_string();
    if system_prompt.is_empty() {
        d.warn(None, None, "agent has no system prompt (the body is empty)");
    }
    Agent {
        name,
        description: fm.text("description").unwrap_or(NO_DESCRIPTION).to_string(),
        model: d.model(fm.get("model")),
        fallback_models,
        thinking: fm
            .text("thinking")
            .filter(|t| *t != "false")
            .map(str::to_string),
        tools: fm.get("tools").map(|e| tools(&e.value)),
        skills: fm
            .get_any(&["skills", "skill"])
            .and_then(|e| parse_csv(&e.value))
            .unwrap_or_default(),
        system_prompt_mode,
        max_turns: d.positive_int(fm.get("maxTurns")),
        max_tokens: d.positive_int(fm.get("maxTokens")),
        effort: d.one_of(fm.get("effort"), &["low", "medium", "high"]),
        disabled: disabled_flag == Some(true) || enabled_flag == Some(false),
        system_prompt,
        source,
        path: path.to_string(),
    }
}

fn tools(value: &str) -> Vec<String> {
    match value {
        "*" | "all" => ALL_TOOLS.iter().map(|t| t.to_string()).collect(),
        "none" | "[]" | "" => Vec::new(),
        v => parse_csv(v).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{parse_file, Kind, Severity};

    fn agent(text: &str) -> (Agent, Vec<Diagnostic>) {
        match parse_file(
            Kind::Agent,
            Source::User,
            "/u/agents/probe.md",
            text.as_bytes(),
        ) {
            (Some(Parsed::Agent(a)), d) => (a, d),
            other => panic!("not an agent: {other:?}"),
        }
    }

    fn fields(d: &[Diagnostic]) -> Vec<(Severity, Option<u32>, Option<&str>)> {
        d.iter()
            .map(|d| (d.severity, d.line, d.field.as_deref()))
            .collect()
    }

    #[test]
    fn fields_parse() {
        let (a, d) = agent(
            "---\nname: Scout\ndescription: looks around\nmodel: anthropic/claude-haiku\n\
             fallbackModels: a/b, c/d, a/b\nthinking: high\ntools: read, grep\nskills: x,y\n\
             systemPromptMode: append\nmaxTurns: 12\nmaxTokens: 9000\neffort: low\n---\n\n  You scout.  \n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(a.name, "Scout");
        assert_eq!(a.description, "looks around");
        assert_eq!(a.model.as_deref(), Some("anthropic/claude-haiku"));
        assert_eq!(a.fallback_models, ["a/b", "c/d"]);
        assert_eq!(a.thinking.as_deref(), Some("high"));
        assert_eq!(a.tools, Some(vec!["read".to_string(), "grep".to_string()]));
        assert_eq!(a.skills, ["x", "y"]);
        assert_eq!(a.system_prompt_mode, SystemPromptMode::Append);
        assert_eq!((a.max_turns, a.max_tokens), (Some(12), Some(9000)));
        assert_eq!(a.effort.as_deref(), Some("low"));
        assert!(!a.disabled);
        assert_eq!(a.system_prompt, "You scout.");
        assert_eq!(
            (a.source, a.path.as_str()),
            (Source::User, "/u/agents/probe.md")
        );
    }

    #[test]
    fn defaults_and_special_values() {
        // (frontmatter lines, check)
        type Check = fn(&Agent) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |a| {
                a.name == "probe" && a.description == NO_DESCRIPTION && a.tools.is_none()
            }),
            ("model: false\nthinking: false", |a| {
                a.model.is_none() && a.thinking.is_none()
            }),
            ("tools: *", |a| {
                a.tools.as_ref().is_some_and(|t| t.len() == 7)
            }),
            ("tools: all", |a| {
                a.tools
                    .as_ref()
                    .is_some_and(|t| t.contains(&"bash".to_string()))
            }),
            ("tools: none", |a| a.tools == Some(vec![])),
            ("tools: []", |a| a.tools == Some(vec![])),
            ("tools:", |a| a.tools == Some(vec![])),
            ("skill: one", |a| a.skills == ["one"]),
            ("disabled: true", |a| a.disabled),
            ("enabled: false", |a| a.disabled),
            ("enabled: true", |a| !a.disabled),
            ("name:", |a| a.name == "probe"),
            ("description: \"quoted\"", |a| a.description == "\"quoted\""),
        ];
        for (fm, check) in cases {
            let (a, _) = agent(&format!("---\n{fm}\n---\nprompt"));
            assert!(check(&a), "{fm:?} -> {a:?}");
        }
    }

    #[test]
    fn bad_values_are_reported() {
        type Want = &'static [(Severity, Option<u32>, Option<&'static str>)];
        let cases: &[(&str, Want)] = &[
            (
                "effort: extreme",
                &[(Severity::Warning, Some(2), Some("effort"))],
            ),
            (
                "systemPromptMode: prepend",
                &[(Severity::Warning, Some(2), Some("systemPromptMode"))],
            ),
            (
                "maxTurns: many",
                &[(Severity::Warning, Some(2), Some("maxTurns"))],
            ),
            (
                "maxTokens: 0",
                &[(Severity::Warning, Some(2), Some("maxTokens"))],
            ),
            (
                "memory: cloud",
                &[(Severity::Warning, Some(2), Some("memory"))],
            ),
            (
                "disabled: yes",
                &[(Severity::Warning, Some(2), Some("disabled"))],
            ),
            (
                "colour: blue",
                &[(Severity::Warning, Some(2), Some("colour"))],
            ),
            (
                "model: openai/",
                &[(Severity::Warning, Some(2), Some("model"))],
            ),
            ("name: a\njust text", &[(Severity::Warning, Some(3), None)]),
            (
                "inheritProjectContext: true\nloadMode: lean\ntriggers: a,b",
                &[],
            ),
        ];
        for (fm, want) in cases {
            let (_, d) = agent(&format!("---\n{fm}\n---\nprompt"));
            assert_eq!(fields(&d), *want, "{fm:?}: {d:?}");
        }
    }

    #[test]
    fn empty_body_warns() {
        let (a, d) = agent("---\nname: x\n---\n\n");
        assert_eq!(a.system_prompt, "");
        assert_eq!(fields(&d), [(Severity::Warning, None, None)]);
    }
}
