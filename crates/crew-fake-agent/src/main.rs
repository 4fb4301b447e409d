//! `crew-fake-agent`: a stand-in for `pi` that speaks its JSON mode (`--mode json -p`) and
//! rpc mode (`--mode rpc`) with pi's real event shapes, so crew's tests, demos and benchmarks
//! run without an API key. What it does is chosen by `[fake:...]` directives in the prompt;
//! see `directives.rs`.

mod directives;
mod events;
mod out;
mod rpc;
mod script;
mod verdict;

use script::{Control, End, Mode};

/// pi flags that take a value: their value is not the prompt.
const VALUE_FLAGS: &[&str] = &[
    "--mode",
    "--model",
    "--models",
    "--provider",
    "--api-key",
    "--thinking",
    "--tools",
    "--exclude-tools",
    "-xt",
    "--system-prompt",
    "--append-system-prompt",
    "--extension",
    "-e",
    "--skill",
    "--session",
    "--session-dir",
];

#[derive(Debug, Default, PartialEq)]
struct Args {
    rpc: bool,
    /// The last positional argument.
    prompt: Option<String>,
    /// `--model`'s value (`[fake:busy-model=…]` fails under it).
    model: Option<String>,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Args {
    let mut parsed = Args::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        if arg == "--mode" {
            parsed.rpc = it.next().as_deref() == Some("rpc");
        } else if let Some(mode) = arg.strip_prefix("--mode=") {
            parsed.rpc = mode == "rpc";
        } else if arg == "--model" {
            parsed.model = it.next();
        } else if VALUE_FLAGS.contains(&arg.as_str()) {
            it.next();
        } else if arg.starts_with('-') && arg.len() > 1 {
            // Unknown flags are ignored (pi would reject them; the fake is lenient).
        } else {
            parsed.prompt = Some(arg);
        }
    }
    parsed
}

/// `Task: …` text as is; `@path` is the file's content (pi inlines it).
fn read_prompt(arg: Option<String>) -> Result<String, String> {
    match arg {
        Some(arg) => match arg.strip_prefix('@') {
            Some(path) => {
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
            }
            None => Ok(arg),
        },
        None => Ok(String::new()),
    }
}

pub(crate) fn hang() -> ! {
    loop {
        std::thread::park();
    }
}

fn main() {
    let args = parse_args(std::env::args().skip(1));
    script::set_model_arg(args.model.clone());
    if args.rpc {
        rpc::serve();
    }
    let prompt = match read_prompt(args.prompt) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake-agent: {e}");
            std::process::exit(1);
        }
    };
    match script::run(&prompt, Mode::Json, &mut Control::new(None, None)) {
        End::Done => std::process::exit(0),
        End::Exit(code) => std::process::exit(code),
        End::Hang => hang(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_pi_argv() {
        let table = [
            (
                &[
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--model",
                    "x:high",
                    "--tools",
                    "a,b",
                    "Task: hi",
                ][..],
                Args {
                    rpc: false,
                    prompt: Some("Task: hi".into()),
                    model: Some("x:high".into()),
                },
            ),
            (
                &["--mode", "rpc", "--no-session", "--tools", "read"][..],
                Args {
                    rpc: true,
                    prompt: None,
                    model: None,
                },
            ),
            (
                &["--mode=rpc", "--weird-flag", "--system-prompt", "/tmp/s.md"][..],
                Args {
                    rpc: true,
                    prompt: None,
                    model: None,
                },
            ),
            (
                &["-p", "first", "@/tmp/task.md"][..],
                Args {
                    rpc: false,
                    prompt: Some("@/tmp/task.md".into()),
                    model: None,
                },
            ),
            (
                &["-p", "-"][..],
                Args {
                    rpc: false,
                    prompt: Some("-".into()),
                    model: None,
                },
            ),
        ];
        for (argv, want) in table {
            assert_eq!(args(argv), want, "{argv:?}");
        }
    }

    #[test]
    fn reads_prompt_files() {
        assert_eq!(read_prompt(Some("Task: x".into())), Ok("Task: x".into()));
        assert_eq!(read_prompt(None), Ok(String::new()));
        assert!(read_prompt(Some("@/nonexistent/crew-fake".into())).is_err());
    }
}
