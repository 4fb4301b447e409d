//! Agent output streams: stdout split into lines exactly as the executor does, fed to one
//! adapter's parser.

use crew_core::stream::{parser, AdapterKind};
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
    let mut p = parser(kind);
    for line in data.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(line);
        for ev in p.feed_line(&line) {
            let _ = ev.is_final();
        }
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
