//! Files the user names for a command's outputs, written so that nothing the user owns is
//! replaced by accident: what a path is decides how it is written (`target`), a replaced file
//! is swapped in whole, and outputs written as a run goes record their failures (`lost`).

pub(crate) mod lost;
pub(crate) mod overwrite;
pub(crate) mod target;

use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// Fails now, before any run, if `path` cannot be written later: a directory, a block device,
/// a socket, a missing directory, or one without write permission.
pub fn check_writable(flag: &'static str, path: &Path) -> Result<(), crate::error::ConfigError> {
    let bad = |message: String| crate::error::bad(flag, message);
    let path = match target::resolve(path).map_err(|e| bad(e.to_string()))? {
        target::Target::Replace(p) => p,
        // A device or FIFO is opened when written: a FIFO may get its reader only then.
        _ => return Ok(()),
    };
    let (dir, name) = dir_and_name(&path).map_err(|e| bad(format!("{e:#}")))?;
    tempfile::Builder::new()
        .prefix(&temp_prefix(&name))
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))
}

/// The hidden temporary name's prefix: the file's own name, shortened so that the whole
/// stays within the 255 bytes a name may have.
pub(crate) fn temp_prefix(name: &str) -> String {
    let mut end = name.len().min(200);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &name[..end])
}

/// The directory `path` is in and its file name.
pub(crate) fn dir_and_name(path: &Path) -> anyhow::Result<(&Path, String)> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    Ok((dir, name.to_string_lossy().into_owned()))
}

/// Temp file beside `path`, fsync, rename: readers see the old file or the new one, never a
/// part, and a crash leaves at most a hidden temp file. Only for what `target::resolve` found
/// to be a regular file or a new path.
pub fn replace_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (dir, name) = dir_and_name(path)?;
    // A replaced file keeps its mode; a new one gets 0666 less the umask, as `>` would give.
    let old_mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mode = old_mode
        .clone()
        .unwrap_or_else(|| std::fs::Permissions::from_mode(0o666));
    // A fresh name opened exclusively: nothing planted under it is followed or overwritten.
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(&name))
        .suffix(".tmp")
        .permissions(mode)
        .tempfile_in(dir)
        .with_context(|| format!("writing {}", path.display()))?;
    if let Some(m) = old_mode {
        // The umask applied at creation; the replaced file's mode is restored exactly.
        let _ = tmp.as_file().set_permissions(m);
    }
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("renaming onto {}", path.display()))?;
    Ok(())
}
