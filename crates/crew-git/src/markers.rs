//! Conflict markers left in a commit: a resolution (the user's, or later an agent's) that still
//! has `<<<<<<< ` or `>>>>>>> ` lines in a file is not one. `=======` alone is left out: it is
//! an ordinary line in Markdown and reStructuredText headings.

use crate::{check, GitError, Repo};

/// At most this many marker lines are reported (enough to say where; a file full of them is
/// not listed whole).
const REPORTED: usize = 20;
/// Paths per `git grep` call, well under any argument-length limit.
const CHUNK: usize = 500;

impl Repo {
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
