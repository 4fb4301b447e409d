//! Run ids as people type them: `last` or `-1` (newest run), `-N` (N-th newest), a prefix of the
//! random part (`3f9a1c2e`), or the whole id. Resolved here, against `team.list`, so every verb
//! that takes a run id takes all of these: a verb's argument is a [`RunRef`], whose one way to
//! an id is [`RunRef::resolve`], so no verb can pass what was typed on unresolved.

use crate::conn::Conn;
use crate::render::ids;
use crew_api::methods::TeamList;
use crew_api::types::{ListParams, RunSummaryView};

/// No run matches what was typed. Exit status `NOT_FOUND`.
#[derive(Debug)]
pub struct NoSuchRun {
    pub why: String,
}

impl std::fmt::Display for NoSuchRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.why)
    }
}

impl std::error::Error for NoSuchRun {}

/// A prefix that matches several runs. Exit status `USAGE`: the user must type more.
#[derive(Debug)]
pub struct Ambiguous {
    pub typed: String,
    pub candidates: Vec<RunSummaryView>,
    /// More matched than are listed.
    pub more: bool,
}

impl std::fmt::Display for Ambiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` matches {}{} runs; type more of the id:",
            self.typed,
            if self.more { "more than " } else { "" },
            self.candidates.len()
        )?;
        let full: Vec<&str> = self.candidates.iter().map(|r| r.id.as_str()).collect();
        for (r, short) in self.candidates.iter().zip(ids::short_ids(&full)) {
            write!(
                f,
                "\n  {short}  {}  {}  {}",
                r.id,
                r.status.as_str(),
                crate::render::units::cut(&r.goal, 40)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Ambiguous {}

/// What a typed run reference means, before asking the daemon.
#[derive(Debug, PartialEq, Eq)]
pub enum Typed {
    /// The N-th newest run (1 = newest).
    Newest(u32),
    /// A prefix of the random part of an id.
    Prefix(String),
    /// A whole id, passed on as it is.
    Exact(String),
}

pub fn parse(s: &str) -> Typed {
    let s = s.trim();
    if s == "last" {
        return Typed::Newest(1);
    }
    if let Some(n) = s.strip_prefix('-').and_then(|n| n.parse::<u32>().ok()) {
        if n >= 1 {
            return Typed::Newest(n);
        }
    }
    if ids::is_prefix_form(s) {
        return Typed::Prefix(s.to_ascii_lowercase());
    }
    Typed::Exact(s.to_string())
}

/// A run as typed on the command line. Deliberately without a way to read the text back: the
/// daemon wants whole ids, and `resolve` is how a typed run becomes one.
#[derive(Debug, Clone)]
pub struct RunRef(String);

impl std::str::FromStr for RunRef {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(RunRef(s.to_string()))
    }
}

impl RunRef {
    /// The whole id of the run this names (see the module's forms).
    pub async fn resolve(&self, conn: &Conn) -> anyhow::Result<String> {
        run_id(conn, &self.0).await
    }
}

const MAX_CANDIDATES: usize = 10;

/// The whole run id for what was typed.
async fn run_id(conn: &Conn, typed: &str) -> anyhow::Result<String> {
    match parse(typed) {
        Typed::Exact(id) => Ok(id),
        Typed::Newest(n) => {
            let l = conn
                .call::<TeamList>(&ListParams {
                    status: None,
                    limit: Some(i64::from(n.min(1000))),
                    before: None,
                    team: None,
                })
                .await?;
            match l
                .runs
                .get(usize::try_from(n).unwrap_or(usize::MAX).saturating_sub(1))
            {
                Some(r) => Ok(r.id.clone()),
                None => Err(NoSuchRun {
                    why: if l.runs.is_empty() {
                        "there are no runs yet".to_string()
                    } else {
                        format!("there are only {} runs", l.runs.len())
                    },
                }
                .into()),
            }
        }
        Typed::Prefix(p) => {
            let mut found: Vec<RunSummaryView> = vec![];
            let mut more = false;
            let mut before = None;
            loop {
                let page = conn
                    .call::<TeamList>(&ListParams {
                        status: None,
                        limit: Some(1000),
                        before: before.take(),
                        team: None,
                    })
                    .await?;
                for r in page.runs {
                    if ids::random_part(&r.id).is_some_and(|rand| rand.starts_with(&p)) {
                        if found.len() < MAX_CANDIDATES {
                            found.push(r);
                        } else {
                            more = true;
                        }
                    }
                }
                match page.next {
                    Some(next) => before = Some(next),
                    None => break,
                }
            }
            match found.len() {
                0 => Err(NoSuchRun {
                    why: format!("no run id starts with `{p}` (list them: crewctl ls)"),
                }
                .into()),
                1 if !more => Ok(found.remove(0).id),
                _ => Err(Ambiguous {
                    typed: typed.to_string(),
                    candidates: found,
                    more,
                }
                .into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_forms() {
        assert_eq!(parse("last"), Typed::Newest(1));
        assert_eq!(parse("-1"), Typed::Newest(1));
        assert_eq!(parse("-3"), Typed::Newest(3));
        assert_eq!(parse("3F9A"), Typed::Prefix("3f9a".into()));
        assert_eq!(
            parse("team_20260310115500_3f9a1c2e00001111"),
            Typed::Exact("team_20260310115500_3f9a1c2e00001111".into())
        );
        assert_eq!(parse("r-1"), Typed::Exact("r-1".into()));
        assert_eq!(parse("-0"), Typed::Exact("-0".into()));
    }
}
