use super::*;
use crate::plan::build_plan;
use crate::resource::Catalog;

fn implement() -> (Expansion, PlannedTask) {
    let plan = build_plan(&Catalog::builtin(), Some("implement"), None).expect("plans");
    let from = plan
        .tasks
        .iter()
        .find(|t| t.expands.is_some())
        .expect("a fan-out step")
        .clone();
    let exp = Expansion::clone(from.expands.as_ref().expect("expands"));
    (exp, from)
}

fn task(id: &str, role: &str, deps: &[&str], scope: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "id": id, "role": role, "title": format!("do {id}"), "task": format!("work on {id}"),
        "dependsOn": deps, "scope": scope,
    })
}

fn answer(tasks: &[serde_json::Value]) -> String {
    format!(
        "Plan in prose.\n\n```json\n{}\n```\n",
        serde_json::json!({ "tasks": tasks })
    )
}

/// `Ok(ids)` or the problems, for a table.
fn check(answer: &str, max: u32) -> Result<Vec<String>, Vec<String>> {
    let (mut exp, from) = implement();
    exp.max_tasks = max;
    parse_and_validate(answer, &exp, &from, |id| {
        ["01_explore", "02_plan", "taken"].contains(&id)
    })
    .map(|ts| ts.iter().map(|t| t.id.to_string()).collect())
}

/// (case, answer, cap, Ok ids or a fragment one of the problems must contain)
type Case = (
    &'static str,
    String,
    u32,
    Result<Vec<&'static str>, &'static str>,
);

#[test]
fn validator_table() {
    let many: Vec<_> = (0..17)
        .map(|i| task(&format!("t{i}"), "executor", &[], &[]))
        .collect();
    let cases: Vec<Case> = vec![
        (
            "four parallel executors",
            answer(&[
                task("a", "executor", &[], &["src/a/**"]),
                task("b", "executor", &[], &["src/b.rs"]),
                task("c", "test-engineer", &["a"], &["tests/"]),
                task("d", "executor", &["a", "b"], &["docs/*.md", "src/[ab]*.rs"]),
            ]),
            16,
            Ok(vec!["a", "b", "c", "d"]),
        ),
        (
            "the whole answer is the object",
            serde_json::json!({"tasks": [task("x", "executor", &[], &[])]}).to_string(),
            16,
            Ok(vec!["x"]),
        ),
        (
            "no block",
            "I would split it in two.".into(),
            16,
            Err("no fan-out block found"),
        ),
        (
            "bad JSON",
            "```json\n{\"tasks\": [ {\"id\": \"a\",, } ]}\n```".into(),
            16,
            Err("not valid"),
        ),
        (
            "a misspelt field",
            "```json\n{\"tasks\": [{\"id\": \"a\", \"role\": \"executor\", \"title\": \"t\", \"task\": \"x\", \"depends_on\": []}]}\n```".into(),
            16,
            Err("unknown field `depends_on`"),
        ),
        ("empty list", answer(&[]), 16, Err("adds no tasks")),
        (
            "unknown role",
            answer(&[task("a", "wizard", &[], &[])]),
            16,
            Err("unknown role `wizard`"),
        ),
        (
            "cycle",
            answer(&[
                task("a", "executor", &["c"], &[]),
                task("b", "executor", &["a"], &[]),
                task("c", "executor", &["b"], &[]),
            ]),
            16,
            Err("dependency cycle: "),
        ),
        (
            "self dependency",
            answer(&[task("a", "executor", &["a"], &[])]),
            16,
            Err("depends on itself"),
        ),
        (
            "dependency outside the block",
            answer(&[task("a", "executor", &["01_explore"], &[])]),
            16,
            Err("is not a task of this block"),
        ),
        ("too many", answer(&many), 16, Err("at most 16 may be added")),
        (
            "a lower cap",
            answer(&many[..3]),
            2,
            Err("at most 2 may be added"),
        ),
        (
            "duplicate id",
            answer(&[task("a", "executor", &[], &[]), task("a", "executor", &[], &[])]),
            16,
            Err("used twice"),
        ),
        (
            "id of an existing task",
            answer(&[task("02_plan", "executor", &[], &[])]),
            16,
            Err("already a task of this run"),
        ),
        (
            "id with a path",
            answer(&[task("../x", "executor", &[], &[])]),
            16,
            Err("id must be"),
        ),
        (
            "upper-case id",
            answer(&[task("Parser", "executor", &[], &[])]),
            16,
            Err("id must be"),
        ),
        (
            "absolute scope",
            answer(&[task("a", "executor", &[], &["/etc/passwd"])]),
            16,
            Err("is absolute"),
        ),
        (
            "scope with ..",
            answer(&[task("a", "executor", &[], &["src/../../x"])]),
            16,
            Err("leaves the repository"),
        ),
        (
            "scope with an empty part",
            answer(&[task("a", "executor", &[], &["src//x"])]),
            16,
            Err("empty or `.` part"),
        ),
        (
            "unclosed class",
            answer(&[task("a", "executor", &[], &["src/[ab.rs"])]),
            16,
            Err("unclosed `[`"),
        ),
        (
            "home-relative scope",
            answer(&[task("a", "executor", &[], &["~/x"])]),
            16,
            Err("is absolute"),
        ),
    ];
    for (name, text, cap, want) in cases {
        let got = check(&text, cap);
        match (&got, &want) {
            (Ok(ids), Ok(w)) => assert_eq!(ids, w, "{name}"),
            (Err(problems), Err(fragment)) => assert!(
                problems.iter().any(|p| p.contains(fragment)),
                "{name}: {problems:?} lacks {fragment:?}"
            ),
            _ => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let got = check(
        &answer(&[
            task("a", "wizard", &[], &["/abs"]),
            task("B", "executor", &["zz"], &[]),
        ]),
        16,
    )
    .unwrap_err();
    assert_eq!(got.len(), 4, "{got:?}");
}

#[test]
fn added_tasks_are_bound_to_their_role_and_follow_the_fan_out_task() {
    let (exp, from) = implement();
    let ts = parse_and_validate(
        &answer(&[
            task("a", "executor", &[], &["src/a/**"]),
            task("b", "test-engineer", &["a", "a"], &[]),
        ]),
        &exp,
        &from,
        |_| false,
    )
    .unwrap();
    let a = &ts[0];
    assert_eq!(a.depends_on, std::slice::from_ref(&from.id));
    assert_eq!(a.added_by.as_ref(), Some(&from.id));
    assert_eq!(
        (a.role.as_str(), a.agent.as_str(), a.writes),
        ("executor", "executor", true)
    );
    assert_eq!(a.scope, ["src/a/**"]);
    assert_eq!(a.title.as_deref(), Some("do a"));
    assert!(a.task_template.starts_with("# do a\n\nwork on a"));
    assert!(a.system_prompt.starts_with("You are"));
    assert_eq!(a.output, None);
    assert!(a.expands.is_none());
    // Duplicate dependencies are kept once.
    assert_eq!(ts[1].depends_on, [from.id.clone(), "a".parse().unwrap()]);
}

#[test]
fn the_last_json_fence_counts() {
    let text = "First idea:\n```json\n{\"tasks\": []}\n```\nBetter:\n```json\n{\"tasks\": [{\"id\":\"z\",\"role\":\"executor\",\"title\":\"t\",\"task\":\"x\"}]}\n```\n";
    let b = extract(text).unwrap();
    assert_eq!(b.tasks.len(), 1);
    // An unterminated fence runs to the end of the answer.
    let b = extract("```json\n{\"tasks\": []}").unwrap();
    assert!(b.tasks.is_empty());
}

/// Issue 36: the cap counts the agents a block starts, candidates included: under the run's
/// `--candidates 3` an executor task counts 3, a read-only explorer 1, and a role's own
/// `candidates=N` wins over the run's. What passes splits into exactly the agents counted.
#[test]
fn the_cap_counts_each_added_task_s_candidates() {
    let (mut exp, from) = implement();
    exp.max_tasks = 7;
    exp.candidates = Some(crate::run::candidates::RunAskFrozen {
        contenders: vec![Default::default(); 3],
        select: None,
        judge: None,
    });
    let at_cap = answer(&[
        task("a", "executor", &[], &[]),
        task("b", "executor", &[], &[]),
        task("c", "explorer", &[], &[]),
    ]);
    let tasks = parse_and_validate(&at_cap, &exp, &from, |_| false).expect("7 agents fit");
    let split = crate::run::candidates::for_added(tasks, &exp);
    let agents = split
        .iter()
        .filter(|t| crate::run::candidates::selector(t).is_none())
        .count();
    assert_eq!(agents, 7, "what was counted is what is split");

    let over = answer(&[
        task("a", "executor", &[], &[]),
        task("b", "executor", &[], &[]),
        task("c", "executor", &[], &[]),
    ]);
    let problems = parse_and_validate(&over, &exp, &from, |_| false).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("adds 3 tasks that would start 9 agents")
            && problems[0].contains("each `executor` task runs 3 candidates")
            && problems[0].contains("at most 7 agents"),
        "{problems:?}"
    );
    let s = prompt_section(&exp, None);
    assert!(
        s.contains("each `executor` task runs 3 candidates") && s.contains("at most 7 agents"),
        "{s}"
    );

    // The role's own `candidates=2` wins: three executors are 6 agents.
    for r in exp.roles.iter_mut().filter(|r| r.role == "executor") {
        r.candidates = Some(2);
    }
    let tasks = parse_and_validate(&over, &exp, &from, |_| false).expect("6 agents fit");
    assert_eq!(crate::run::candidates::for_added(tasks, &exp).len(), 9);
}

#[test]
fn prompt_section_lists_roles_cap_and_repair() {
    let (exp, _) = implement();
    let s = prompt_section(&exp, None);
    assert!(s.contains("`executor` (edits files)"), "{s}");
    // A verifier checks the work: it runs commands and is not called a writer.
    assert!(
        s.contains("`verifier` (reads and runs commands, edits nothing)"),
        "{s}"
    );
    assert!(!s.contains("may change files"), "{s}");
    assert!(s.contains("At most 16 tasks"), "{s}");
    assert!(!s.contains(REPAIR_HEADING));
    let s = prompt_section(&exp, Some("tasks[0] (`a`): unknown role `wizard`\ncycle"));
    assert!(s.contains(REPAIR_HEADING));
    assert!(
        s.contains("- tasks[0] (`a`): unknown role `wizard`\n- cycle\n"),
        "{s}"
    );
}

#[test]
fn an_answer_over_the_limit_is_refused_by_its_size() {
    let (mut exp, from) = implement();
    let ok = answer(&[task("a", "executor", &[], &[])]);
    exp.max_answer_bytes = ok.len() as u64;
    let none = |_: &str| false;
    assert!(parse_and_validate(&ok, &exp, &from, none).is_ok());
    // One byte more (prose before a valid block) and it is not parsed at all.
    let long = format!(" {ok}");
    let err = parse_and_validate(&long, &exp, &from, none).unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert!(
        err[0].contains(&format!(
            "is {} bytes; a fan-out step's answer may be at most {} bytes",
            long.len(),
            ok.len()
        )),
        "{err:?}"
    );
    // What the daemon found too large without reading it says the same.
    let err = check_answer(&Answer::TooLarge { bytes: 5 << 20 }, &exp, &from, none).unwrap_err();
    assert!(err[0].contains("is 5242880 bytes"), "{err:?}");
    let err = check_answer(&Answer::Unreadable("gone".into()), &exp, &from, none).unwrap_err();
    assert!(err[0].contains("could not be read (gone)"), "{err:?}");
    assert!(check_answer(&Answer::Text(ok), &exp, &from, none).is_ok());
}

#[test]
fn the_answer_limit_is_left_out_of_the_journal_at_its_default() {
    let (mut exp, _) = implement();
    let v = serde_json::to_value(&exp).unwrap();
    assert!(v.get("maxAnswerBytes").is_none(), "{v}");
    let back: Expansion = serde_json::from_value(v).unwrap();
    assert_eq!(back.max_answer_bytes, DEFAULT_MAX_ANSWER_BYTES);
    exp.max_answer_bytes = 4096;
    let v = serde_json::to_value(&exp).unwrap();
    assert_eq!(v["maxAnswerBytes"], 4096);
}

/// Issue 29 item 1: a list far over its limit is one problem (its entries are not looked at),
/// and however many problems a block has, at most `MAX_PROBLEMS` are named.
#[test]
fn problems_are_capped_and_an_oversized_list_is_one_problem() {
    let deps = vec!["b"; 237_500];
    let a = answer(&[task("a", "executor", &deps, &[])]);
    let problems = check(&a, 16).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("dependsOn has 237500 entries"));
    let scopes: Vec<String> = (0..190_000).map(|_| "..".to_string()).collect();
    let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let problems = check(&answer(&[task("a", "executor", &[], &scopes)]), 16).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("scope has 190000 entries"));

    // 16 tasks, each with 4 bad scopes and an unknown dependency: 80 problems.
    let many: Vec<_> = (0..16)
        .map(|i| {
            task(
                &format!("t{i}"),
                "executor",
                &["nope"],
                &["..", "/a", "~", "a/../b"],
            )
        })
        .collect();
    let problems = check(&answer(&many), 16).unwrap_err();
    assert_eq!(problems.len(), MAX_PROBLEMS + 1, "{problems:?}");
    assert_eq!(problems.last().unwrap(), "and 60 more problems");
    assert!(problems.join("\n").len() < 8 << 10);
}

/// Issue 29 item 2: a title with a control character or a bidi override is refused, and values
/// echoed in problems are escaped and cut.
#[test]
fn control_characters_are_refused_in_titles_and_escaped_in_problems() {
    for title in [
        "ok\u{1b}[1A\u{1b}[2K",
        "x\u{202e}gpj.exe",
        "a\u{9b}2J",
        "two\nlines",
    ] {
        let mut t = task("a", "executor", &[], &[]);
        t["title"] = serde_json::json!(title);
        let problems = check(&answer(&[t]), 16).unwrap_err();
        assert!(
            problems[0].contains("title holds a control character"),
            "{title:?}: {problems:?}"
        );
    }
    let evil = format!("\u{1b}]52;c;{}\u{7}", "Q".repeat(500));
    let t = task(&evil, &evil, &[&evil], &[&evil]);
    let problems = check(&answer(&[t]), 16).unwrap_err();
    for p in &problems {
        assert!(!p.chars().any(crate::text::is_unsafe_char), "{p:?}");
        assert!(p.len() < 600, "{p}");
    }
}
