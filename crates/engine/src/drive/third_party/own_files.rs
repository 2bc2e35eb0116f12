//! Files a client left for qbench to read (logs, qlogs, bodies), opened only when they are
//! regular files inside the process's own directory: a FIFO there once held qbench forever,
//! deaf to signals, and a path a client named outside it (/etc/shadow) was opened and read.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Longest h2load log qbench reads of one process: whole lines up to it (about 30 bytes a
/// request: two million requests).
pub(super) const MAX_H2LOAD_LOG: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub(super) enum OwnFileError {
    #[error("{0}: not a regular file inside the client's directory")]
    Foreign(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// Opens `path` for reading when it is a regular file inside `dir` and no link leads out:
/// without blocking (a FIFO opens at once, and is then refused), without following a last
/// link, and checked by what was opened (its descriptor's path and type), not by its name.
pub(super) fn open(dir: &Path, path: &Path) -> Result<File, OwnFileError> {
    let foreign = || OwnFileError::Foreign(path.to_path_buf());
    let io = |e| OwnFileError::Io(path.to_path_buf(), e);
    // A device is not opened at all (opening one may act).
    if !std::fs::symlink_metadata(path).map_err(io)?.is_file() {
        return Err(foreign());
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => foreign(),
            _ => io(e),
        })?;
    if !f.metadata().map_err(io)?.is_file() {
        return Err(foreign());
    }
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd(&f))).map_err(io)?;
    let home = dir.canonicalize().map_err(io)?;
    if !real.starts_with(&home) {
        return Err(foreign());
    }
    Ok(f)
}

fn fd(f: &File) -> i32 {
    use std::os::fd::AsRawFd;
    f.as_raw_fd()
}

/// The whole text of an own file of at most `max` bytes.
pub(super) fn read_bounded(dir: &Path, path: &Path, max: usize) -> Result<String, OwnFileError> {
    let f = open(dir, path)?;
    let mut text = String::new();
    f.take(max as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| OwnFileError::Io(path.to_path_buf(), e))?;
    if text.len() > max {
        return Err(OwnFileError::Io(
            path.to_path_buf(),
            std::io::Error::other(format!("larger than {max} bytes")),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_directory_open() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("p0");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("ok"), "x").unwrap();
        std::fs::write(outer.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret"), dir.join("out")).unwrap();
        std::os::unix::fs::symlink(dir.join("ok"), dir.join("in")).unwrap();
        std::os::unix::fs::symlink(outer.path(), dir.join("up")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a plain mkfifo in the test's own directory.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(open(&dir, &dir.join("ok")).is_ok());
        for bad in ["out", "in", "fifo", "up/secret", "../secret"] {
            assert!(
                matches!(open(&dir, &dir.join(bad)), Err(OwnFileError::Foreign(_))),
                "{bad}"
            );
        }
        assert!(open(&dir, Path::new("/etc/passwd")).is_err());
        assert!(matches!(
            open(&dir, &dir.join("missing")),
            Err(OwnFileError::Io(..))
        ));
    }
}
