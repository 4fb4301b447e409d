//! `command`: any program. The prompt goes on argv (or as a file path, or as stdin), the system
//! prompt's file path in `CREW_SYSTEM_PROMPT_FILE`, and whatever it prints on stdout is the
//! answer. No usage, no model.

use super::{
    strip_cr, Launch, LaunchSpec, Outcome, PromptVia, StdinFrom, StreamParser, WorkerEvent,
    ENV_SYSTEM_PROMPT_FILE,
};
use crate::usage::Usage;
use std::collections::VecDeque;

/// Stdout kept for the final text. Beyond this the oldest lines go: the end of a program's
/// output is where its answer usually is.
const MAX_KEPT_BYTES: usize = 8 * 1024 * 1024;

pub(super) fn launch(spec: &LaunchSpec) -> Launch {
    let mut argv = spec.command.clone();
    let mut stdin = StdinFrom::Null;
    match (spec.prompt_via, &spec.prompt_file) {
        (PromptVia::File, Some(file)) => argv.push(file.clone()),
        (PromptVia::Stdin, Some(file)) => stdin = StdinFrom::File(file.clone()),
        _ => argv.push(spec.prompt.clone()),
    }
    // A program has no flag crew could know for the agent's system prompt: it gets the path.
    let env = match &spec.system_prompt_file {
        Some(file) if !spec.system_prompt.is_empty() => {
            vec![(ENV_SYSTEM_PROMPT_FILE.to_owned(), file.clone())]
        }
        _ => Vec::new(),
    };
    Launch { argv, env, stdin }
}

#[derive(Debug, Default)]
pub(crate) struct CommandParser {
    lines: VecDeque<String>,
    kept_bytes: usize,
    dropped_bytes: usize,
}

impl StreamParser for CommandParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let line = strip_cr(line);
        self.kept_bytes = self.kept_bytes.saturating_add(line.len() + 1);
        self.lines.push_back(line.to_owned());
        while self.kept_bytes > MAX_KEPT_BYTES {
            let Some(old) = self.lines.pop_front() else {
                break;
            };
            self.kept_bytes = self.kept_bytes.saturating_sub(old.len() + 1);
            self.dropped_bytes = self.dropped_bytes.saturating_add(old.len() + 1);
        }
        Vec::new()
    }

    fn usage(&self) -> Usage {
        Usage::default()
    }

    fn outcome(&self) -> Outcome {
        let mut text = String::with_capacity(self.kept_bytes + 64);
        if self.dropped_bytes > 0 {
            text.push_str(&format!(
                "[… {} bytes of earlier output dropped …]\n",
                self.dropped_bytes
            ));
        }
        for line in &self.lines {
            text.push_str(line);
            text.push('\n');
        }
        let text = text.trim();
        Outcome {
            final_text: (!text.is_empty()).then(|| text.to_owned()),
            ..Outcome::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::SystemPromptMode;
    use crate::stream::{build_launch, parser, AdapterKind};

    fn spec(via: PromptVia, file: Option<&str>) -> LaunchSpec {
        LaunchSpec {
            command: vec!["./review.sh".into(), "--strict".into()],
            prompt: "Goal: fix it".into(),
            prompt_file: file.map(str::to_owned),
            system_prompt: String::new(),
            system_prompt_mode: SystemPromptMode::Replace,
            system_prompt_file: None,
            model: Some("ignored".into()),
            thinking: None,
            tools: vec![],
            rpc: false,
            prompt_via: via,
            effort: None,
            fallback_models: vec![],
            skill_dirs: Vec::new(),
            session: Default::default(),
            cwd: "/work/repo".into(),
        }
    }

    #[test]
    fn argv_table() {
        let file = |p: &str| StdinFrom::File(p.into());
        let table = [
            (
                spec(PromptVia::Arg, None),
                Some("Goal: fix it"),
                StdinFrom::Null,
            ),
            (
                spec(PromptVia::Arg, Some("/tmp/p.md")),
                Some("Goal: fix it"),
                StdinFrom::Null,
            ),
            (
                spec(PromptVia::File, Some("/tmp/p.md")),
                Some("/tmp/p.md"),
                StdinFrom::Null,
            ),
            (
                spec(PromptVia::File, None),
                Some("Goal: fix it"),
                StdinFrom::Null,
            ),
            (
                spec(PromptVia::Stdin, Some("/tmp/p.md")),
                None,
                file("/tmp/p.md"),
            ),
        ];
        for (spec, last, stdin) in table {
            let launch = build_launch(AdapterKind::Command, &spec);
            let mut want = vec!["./review.sh", "--strict"];
            want.extend(last);
            assert_eq!(launch.argv, want);
            assert_eq!(launch.stdin, stdin);
            assert!(launch.env.is_empty(), "no system prompt, no variable");
        }
    }

    #[test]
    fn the_system_prompt_file_is_in_the_environment() {
        let mut s = spec(PromptVia::Arg, None);
        s.system_prompt = "You are a reviewer.".into();
        s.system_prompt_file = Some("/run/prompts/system-ab.md".into());
        assert_eq!(
            build_launch(AdapterKind::Command, &s).env,
            [(
                ENV_SYSTEM_PROMPT_FILE.to_owned(),
                "/run/prompts/system-ab.md".to_owned()
            )]
        );
    }

    #[test]
    fn final_text_is_all_stdout() {
        let table: &[(&str, Option<&str>)] = &[
            (
                include_str!("fixtures/command_output.txt"),
                Some("Reviewing 3 files…\n{\"not\": \"parsed\"}\n\nLGTM: no blocking issues."),
            ),
            ("line one\r\nline two\r\n", Some("line one\nline two")),
            ("\n  \n", None),
            ("", None),
        ];
        for (stream, want) in table {
            let mut p = parser(AdapterKind::Command);
            for line in stream.split('\n') {
                assert!(p.feed_line(line).is_empty());
            }
            let outcome = p.outcome();
            assert_eq!(outcome.final_text.as_deref(), *want, "{stream:?}");
            assert_eq!(outcome.usage, Usage::default());
            assert_eq!(outcome.error, None);
        }
    }

    #[test]
    fn keeps_the_tail_of_huge_output() {
        let mut p = parser(AdapterKind::Command);
        let line = "x".repeat(1024 * 1024);
        for _ in 0..20 {
            p.feed_line(&line);
        }
        p.feed_line("THE END");
        let text = p.outcome().final_text.unwrap();
        assert!(text.len() <= MAX_KEPT_BYTES + 100, "{}", text.len());
        assert!(text.starts_with("[… "));
        assert!(text.ends_with("THE END"));
    }
}
