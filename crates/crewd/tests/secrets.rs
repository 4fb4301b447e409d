//! One redaction for everything a worker produces: a fake agent prints a PEM private key, a
//! URL with a password and an API key, in its final answer, its question and on stderr, and
//! none of it is found anywhere crew keeps or serves it: transcripts, results, shared outputs,
//! events, `team.status`, `team.list`, `team.summary`, `team.export`, the journal's files and
//! the daemon's log.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::Path;

/// Distinctive parts of the fake agent's made-up secrets (`crew-fake-agent`'s `LEAK_*`).
const SECRETS: &[&str] = &[
    "fakeagentleakedkeybody",
    "fakeagentUrlPassw0rd",
    "fakeagentApiKey",
    "-----END RSA PRIVATE KEY-----",
];

fn assert_clean(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} carries `{s}`:\n{text}");
    }
}

/// Every file under `dir`, as text (lossy: the journal's files are binary).
fn files(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
}

fn artifact(d: &Daemon, run: &str, name: &str) -> String {
    d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn nothing_a_worker_prints_keeps_its_secrets() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\nkill_grace_ms = 500\nfinal_drain_ms = 1000\n\
                 final_drain_quiet_ms = 200\n"
            .into(),
        env: vec![],
    });
    one_step_team(&d, "leaker", "Report. [fake:leak]", "explorer");
    one_step_team(
        &d,
        "asker",
        "Ask first. [fake:ask=Which key should I use?][fake:leak]",
        "explorer",
    );
    one_step_team(&d, "crasher", "Crash. [fake:leak][fake:crash]", "explorer");
    let done = d.run("leak in the result", json!({"team": "leaker"}));
    assert_eq!(d.wait(&done), "completed");
    let asked = d.run("leak in the question", json!({"team": "asker"}));
    assert_eq!(d.wait(&asked), "blocked");
    let crashed = d.run("leak on stderr", json!({"team": "crasher"}));
    assert_eq!(d.wait(&crashed), "failed");

    // The worker did print them: their redacted forms are where the secrets were.
    let result = artifact(&d, &done, "results/01_only.txt");
    assert!(result.contains("[REDACTED PRIVATE KEY]"), "{result}");
    assert!(
        result.contains("https://deploy:***@git.example.com/team/repo.git"),
        "{result}"
    );
    assert!(result.contains("ANTHROPIC key *** works."), "{result}");
    let shared = artifact(&d, &done, "shared/01_only.md");
    assert_eq!(shared, result);
    let st = d.status(&asked);
    let question = Daemon::task(&st, "01_only")["question"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        question.starts_with("Which key should I use? (I found the key ***"),
        "{question}"
    );
    assert!(
        st["run"]["reason"].as_str().unwrap().contains("***"),
        "{st}"
    );
    let st = d.status(&crashed);
    let error = Daemon::task(&st, "01_only")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(error.contains("https://deploy:***@"), "{error}");

    // Export takes finished runs only.
    d.ok("team.cancel", json!({"runId": asked}));
    assert_eq!(d.wait(&asked), "cancelled");
    for run in [&done, &asked, &crashed] {
        assert_clean("team.status", &d.status(run).to_string());
        assert_clean("team.events", &Value::from(d.events(Some(run))).to_string());
        assert_clean(
            "team.summary",
            &d.ok("team.summary", json!({"runId": run})).to_string(),
        );
        assert_clean(
            "team.export",
            &d.ok("team.export", json!({"runId": run})).to_string(),
        );
    }
    assert_clean("team.list", &d.ok("team.list", json!({})).to_string());
    // Every file of the state directory: artifacts, transcripts, the journal.
    let mut all = Vec::new();
    files(&d.state_dir, &mut all);
    assert!(
        all.iter().any(|(p, _)| p.contains("transcripts")),
        "{all:?}"
    );
    for (path, text) in &all {
        assert_clean(path, text);
    }
    assert_clean("crewd's log", &d.log_text());
}

/// A model streams a few characters at a time: each secret of the answer arrives split over
/// many `text_delta` lines, none of which holds a whole one. Joined, the transcript's deltas
/// still hold none (the redactor joins deltas before it redacts them).
#[test]
fn a_secret_streamed_a_few_characters_at_a_time_is_kept_nowhere() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\n".into(),
        env: vec![],
    });
    one_step_team(
        &d,
        "streamer",
        "Report. [fake:leak][fake:deltas=3]",
        "explorer",
    );
    let done = d.run("leak in small deltas", json!({"team": "streamer"}));
    assert_eq!(d.wait(&done), "completed");
    let result = artifact(&d, &done, "results/01_only.txt");
    assert!(result.contains("ANTHROPIC key *** works."), "{result}");

    let mut all = Vec::new();
    files(&d.state_dir, &mut all);
    let transcripts: Vec<&(String, String)> = all
        .iter()
        .filter(|(p, _)| p.contains("transcripts"))
        .collect();
    assert!(!transcripts.is_empty(), "{all:?}");
    for (path, text) in transcripts {
        let deltas: Vec<String> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| {
                v["assistantMessageEvent"]["delta"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert!(!deltas.is_empty(), "{path}: no deltas:\n{text}");
        let joined = deltas.concat();
        assert!(
            joined.contains("ANTHROPIC key *** works."),
            "{path}: {joined}"
        );
        assert_clean(&format!("{path}, its deltas joined"), &joined);
        assert_clean(path, text);
    }
    assert_clean(
        "team.export",
        &d.ok("team.export", json!({"runId": done})).to_string(),
    );
}
