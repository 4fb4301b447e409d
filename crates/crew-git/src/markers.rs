//! Conflict markers in commits. `conflict_markers` finds them: a resolution (the user's, or an
//! agent's) that still has `<<<<<<< ` or `>>>>>>> ` lines in a file is not one (`=======`
//! alone is left out: it is an ordinary line in Markdown and reStructuredText headings).
//! `merge_with_markers` makes them: one commit holding every input, each conflict left in its
//! files, the start a resolver works from. `diff_check` is `git diff --check` of a change.

use crate::{check, GitError, Identity, MergeStep, Repo};

/// A merge of several commits with its conflicts left in the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// Has every input as an ancestor.
    pub commit: String,
    /// Each merge step that conflicted: the commit merged in, and the paths.
    pub conflicts: Vec<(String, Vec<String>)>,
}

/// At most this many marker lines are reported (enough to say where; a file full of them is
/// not listed whole).
const REPORTED: usize = 20;
/// Characters of one reported line, at most.
const LINE_MAX: usize = 512;
/// Paths per `git grep` call, well under any argument-length limit.
const CHUNK: usize = 500;

impl Repo {
    /// [`Repo::merge_all`], except that a conflict does not stop it: the merged tree, markers
    /// and all (`merge-tree --write-tree` writes them into the conflicted files), is committed
    /// with both parents and the next input merged onto it.
    pub async fn merge_with_markers(
        &self,
        commits: &[String],
        message: &str,
    ) -> Result<Marked, GitError> {
        let Some((first, rest)) = commits.split_first() else {
            return Err(GitError::Parse {
                args: "merge-tree".into(),
                what: "nothing to merge".into(),
            });
        };
        let mut acc = first.clone();
        let mut conflicts = Vec::new();
        for next in rest {
            match self.merge_step(&acc, next, message).await? {
                MergeStep::Holds => {}
                MergeStep::Onto(c) => acc = c,
                MergeStep::Conflict { paths, tree } => {
                    conflicts.push((next.clone(), paths));
                    acc = self
                        .commit_tree(&tree, &[&acc, next], message, Identity::Crew)
                        .await?;
                }
            }
        }
        Ok(Marked {
            commit: acc,
            conflicts,
        })
    }

    /// What `git diff --check` finds in the change from `from` to `to` (whitespace errors and
    /// conflict markers the change added), as its `path:line: problem` lines, up to
    /// [`REPORTED`]; empty when there is nothing. Markers `from` already had are not in the
    /// change: [`Repo::conflict_markers`] finds those.
    pub async fn diff_check(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let args = [
            "diff",
            "--check",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            from,
            to,
            "--",
        ];
        let out = self.raw(&args, &[]).await?;
        match out.code {
            Some(0) => Ok(Vec::new()),
            // Problems found: each is a location line followed by the offending `+` line.
            Some(2) => Ok(String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| !l.starts_with('+') && !l.is_empty())
                .take(REPORTED)
                // A path is the worker's to choose: bounded.
                .map(|l| l.chars().take(LINE_MAX).collect())
                .collect()),
            _ => {
                check(&args, out)?;
                Ok(Vec::new())
            }
        }
    }

    /// `path:line` of conflict-marker lines in `commit`'s versions of `paths` (text files only),
    /// up to [`REPORTED`]; empty when there are none.
    pub async fn conflict_markers(
        &self,
        commit: &str,
        paths: &[String],
    ) -> Result<Vec<String>, GitError> {
        let mut found = Vec::new();
        for chunk in paths.chunks(CHUNK) {
            let mut args = vec![
                "grep",
                "-I",
                "-n",
                "-z",
                "-E",
                "-e",
                "^(<{7}|>{7})( |$)",
                commit,
                "--",
            ];
            args.extend(chunk.iter().map(String::as_str));
            let out = self.raw(&args, &[]).await?;
            match out.code {
                Some(0) => {
                    let prefix = format!("{commit}:");
                    for rec in out.stdout.split(|b| *b == b'\n') {
                        let mut f = rec.split(|b| *b == 0);
                        let (Some(path), Some(line)) = (f.next(), f.next()) else {
                            continue;
                        };
                        let path = String::from_utf8_lossy(path);
                        let path = path.strip_prefix(&prefix).unwrap_or(&path);
                        found.push(format!("{path}:{}", String::from_utf8_lossy(line)));
                        if found.len() >= REPORTED {
                            return Ok(found);
                        }
                    }
                }
                // No match.
                Some(1) => {}
                _ => {
                    check(&args, out)?;
                }
            }
        }
        Ok(found)
    }
}
