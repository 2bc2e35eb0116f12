//! Bad input: the one error every check of a flag or a spec returns, naming the flag (or
//! scenario field) and what is wrong, and the helpers that make it.

#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub message: String,
}

/// A usage error unless `ok`.
pub fn usage(ok: bool, flag: &'static str, message: impl Into<String>) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(bad(flag, message))
    }
}

/// Makes `--out DIR` (and its parents) unless it is a directory already; a file there is
/// named as such instead of as "File exists".
pub fn out_dir(path: &std::path::Path) -> Result<(), ConfigError> {
    if path.exists() && !path.is_dir() {
        return Err(bad(
            "--out",
            format!("{} is not a directory: --out names one", path.display()),
        ));
    }
    std::fs::create_dir_all(path).map_err(|e| bad("--out", format!("{}: {e}", path.display())))
}

pub fn bad(flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        message: message.into(),
    }
}
