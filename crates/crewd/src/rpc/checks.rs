//! Checks of params that reach a worker's argv, environment or a path: a NUL byte there makes
//! `execve`/`chdir` fail, so it is refused at the call (-32602 naming the field) instead of
//! being acknowledged and failing every attempt later.

use crew_api::ApiError;
use std::path::Path;

/// Text that may end up in argv, an environment variable or a path.
pub fn no_nul(field: &str, text: &str) -> Result<(), ApiError> {
    if text.contains('\0') {
        Err(ApiError::invalid_params(
            field,
            "must not contain a NUL character",
        ))
    } else {
        Ok(())
    }
}

/// A working directory the daemon's workers can run in: absolute, an existing directory, and
/// one this user may enter (what `chdir` in the spawned worker needs).
pub fn enterable_dir(field: &str, dir: &str) -> Result<(), ApiError> {
    no_nul(field, dir)?;
    let path = Path::new(dir);
    if !path.is_absolute() {
        return Err(ApiError::invalid_params(field, "must be an absolute path"));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(ApiError::invalid_params(
                field,
                format!("{dir} is not a directory"),
            ))
        }
        Err(e) => {
            return Err(ApiError::invalid_params(
                field,
                format!("{dir} cannot be used: {e}"),
            ))
        }
    }
    nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).map_err(|e| {
        ApiError::invalid_params(field, format!("{dir} cannot be entered by the daemon: {e}"))
    })
}

/// An absolute path param (no NUL).
pub fn absolute_path(field: &str, path: &str) -> Result<(), ApiError> {
    no_nul(field, path)?;
    if Path::new(path).is_absolute() {
        Ok(())
    } else {
        Err(ApiError::invalid_params(field, "must be an absolute path"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_field() {
        let dir = std::env::temp_dir();
        let dir = dir.to_str().unwrap();
        assert!(enterable_dir("cwd", dir).is_ok());
        let file = tempfile::NamedTempFile::new().unwrap();
        let table = [
            (format!("{dir}\0x"), "NUL"),
            ("relative".to_string(), "absolute"),
            ("/nonexistent/crew-test".to_string(), "cannot be used"),
            (file.path().to_str().unwrap().to_string(), "not a directory"),
        ];
        for (cwd, why) in table {
            let e = enterable_dir("cwd", &cwd).unwrap_err();
            assert_eq!(e.code, -32602);
            assert_eq!(e.data.as_ref().unwrap()["field"], "cwd");
            assert!(e.message.contains(why), "{cwd:?}: {}", e.message);
        }
        assert!(no_nul("goal", "a\0b").is_err());
        assert!(no_nul("goal", "ab").is_ok());
    }
}
