//! An attempt's own object directory (issue 34): a boxed agent writes new objects there, the
//! repository's own are its read-only alternates, and crew brings the new ones in afterwards.

use crate::{check, GitError, Repo};
use std::ffi::OsString;
use std::path::Path;

impl Repo {
    /// Bring every object in `from` (an object directory, without its alternates) into this
    /// repository's objects; how many there were. Each is read back by git and written under
    /// the name of its content (`pack-objects` then `unpack-objects`, which skips those the
    /// repository has), so a file named for one object that holds another is not taken as it.
    pub async fn take_objects(&self, from: &Path) -> Result<usize, GitError> {
        let dir = OsString::from(from);
        let theirs = [("GIT_OBJECT_DIRECTORY", &dir)];
        let list = [
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ];
        let names = self.run(&list, &theirs).await?;
        let count = names
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        if count == 0 {
            return Ok(0);
        }
        let pack = ["pack-objects", "--stdout", "-q"];
        let out = self.raw_in(&pack, &theirs, Some(names)).await?;
        let bytes = check(&pack, out)?;
        let unpack = ["unpack-objects", "-q"];
        let out = self.raw_in(&unpack, &[], Some(bytes)).await?;
        check(&unpack, out)?;
        Ok(count)
    }
}
