//! Agent output streams: stdout split into lines exactly as the executor does, fed to one
//! adapter's parser.

use crew_core::stream::{attempt_parser, parser, AdapterKind, LaunchSpec, StreamParser};
use crew_core::usage::Usage;

/// The usage a parser reports is journaled (task progress and results) and read back on every
/// start, so it must survive JSON; budgets are computed from it.
fn check_usage(kind: AdapterKind, u: &Usage) {
    let json = serde_json::to_string(u);
    let back = json
        .as_deref()
        .ok()
        .and_then(|j| serde_json::from_str::<Usage>(j).ok());
    assert_eq!(
        back.as_ref(),
        Some(u),
        "{kind:?} usage does not survive the journal: {json:?}"
    );
    let _ = u.budget_tokens();
}

fn feed(kind: AdapterKind, data: &[u8]) {
    feed_lines(kind, parser(kind).as_mut(), data, |_, _| {});
}

/// Feeds `data` line by line as the executor splits stdout, `between(parser, line)` after
/// each line, and checks what every parser must hold: usage that survives the journal, and no
/// empty final text.
fn feed_lines(
    kind: AdapterKind,
    p: &mut dyn StreamParser,
    data: &[u8],
    mut between: impl FnMut(&mut dyn StreamParser, &str),
) {
    for line in data.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(line);
        for ev in p.feed_line(&line) {
            let _ = ev.is_final();
        }
        between(&mut *p, &line);
        check_usage(kind, &p.usage());
    }
    let outcome = p.outcome();
    check_usage(kind, &outcome.usage);
    assert!(
        outcome.final_text.as_deref() != Some(""),
        "{kind:?}: an empty final text must be None"
    );
}

pub fn stream_pi(data: &[u8]) {
    feed(AdapterKind::Pi, data);
}

pub fn stream_claude(data: &[u8]) {
    feed(AdapterKind::Claude, data);
}

pub fn stream_codex(data: &[u8]) {
    feed(AdapterKind::Codex, data);
}

pub fn stream_gemini(data: &[u8]) {
    feed(AdapterKind::Gemini, data);
}

pub fn stream_opencode(data: &[u8]) {
    feed(AdapterKind::Opencode, data);
}

pub fn stream_command(data: &[u8]) {
    feed(AdapterKind::Command, data);
}

/// The most stdin lines a live parser may owe its worker for one line it was fed (an answer to
/// a request, the protocol's next request, a queued steer's turn): a worker must not be able to
/// make crew write without bound by what it prints.
const REPLIES_PER_LINE: usize = 8;

/// A live worker's spec: a read-only role in a cwd, a steer queued by every input line that
/// starts with `STEER`.
fn live_spec() -> LaunchSpec {
    LaunchSpec {
        command: vec!["agent".into()],
        prompt: "Describe the README".into(),
        prompt_file: None,
        system_prompt: "You are careful.".into(),
        system_prompt_mode: crew_core::resource::SystemPromptMode::Append,
        system_prompt_file: None,
        model: Some("m".into()),
        thinking: None,
        tools: vec!["read".into(), "grep".into()],
        rpc: true,
        prompt_via: Default::default(),
        effort: None,
        fallback_models: Vec::new(),
        skill_dirs: Vec::new(),
        session: Default::default(),
        cwd: "/work/repo".into(),
    }
}

/// Every stdin line a live parser hands out is one JSON value on one line.
fn check_lines(kind: AdapterKind, what: &str, lines: &[String]) {
    for l in lines {
        assert!(
            !l.contains('\n'),
            "{kind:?} {what}: a line with a newline: {l:?}"
        );
        assert!(
            serde_json::from_str::<serde_json::Value>(l).is_ok(),
            "{kind:?} {what}: not JSON: {l:?}"
        );
    }
}

/// A live worker's stdout (a JSON-RPC peer's, for codex app-server and ACP), fed as the
/// executor does: the start lines first, the replies after every line, steers in between.
fn feed_live(kind: AdapterKind, data: &[u8]) {
    let spec = live_spec();
    let mut p: Box<dyn StreamParser> = attempt_parser(kind, &spec, None);
    check_lines(kind, "start", &p.live_start(&spec.prompt));
    feed_lines(kind, p.as_mut(), data, |p, line| {
        // A steer comes between two lines the worker printed, as one from a client does.
        if line.starts_with("STEER") {
            check_lines(kind, "steer", &p.live_steer(line));
        }
        let replies = p.live_replies();
        assert!(
            replies.len() <= REPLIES_PER_LINE,
            "{kind:?}: {} replies to one line",
            replies.len()
        );
        check_lines(kind, "reply", &replies);
    });
}

pub fn stream_claude_live(data: &[u8]) {
    feed_live(AdapterKind::Claude, data);
}

pub fn stream_codex_live(data: &[u8]) {
    feed_live(AdapterKind::Codex, data);
}

pub fn stream_gemini_live(data: &[u8]) {
    feed_live(AdapterKind::Gemini, data);
}

pub fn stream_opencode_live(data: &[u8]) {
    feed_live(AdapterKind::Opencode, data);
}
