//! What an output path names, decided before anything is written: a regular file (or a new
//! path) is replaced atomically; a character device or FIFO (`/dev/null`, a named pipe, a
//! symbolic link to one) is written through, never replaced by a file, which as root would
//! take a device node away from the whole system; `/dev/stdout` and `/dev/stderr` are the
//! process's own streams; a directory, a block device or a socket is refused, and so is a link
//! another user left in a shared sticky directory (`/tmp`).

use std::fs::Metadata;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why an output path cannot take an output.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{} is a directory", .0.display())]
    Directory(PathBuf),
    #[error("{} is a block device: outputs go only to files, character devices and FIFOs", .0.display())]
    BlockDevice(PathBuf),
    #[error("{} is a socket: outputs go only to files, character devices and FIFOs", .0.display())]
    Socket(PathBuf),
    #[error("{} is a symbolic link in a shared sticky directory owned by neither you nor the directory's owner: not followed (the kernel's fs.protected_symlinks rule)", .0.display())]
    ForeignLink(PathBuf),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where an output's bytes end up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A regular file or a new path: written beside, then renamed onto (a symbolic link's
    /// target is replaced, the link stays).
    Replace(PathBuf),
    /// A character device or FIFO: opened and written, never created or replaced.
    Through(PathBuf),
    Stdout,
    Stderr,
}

/// At most this many symbolic links are followed, as the kernel's own limit (ELOOP).
const MAX_LINKS: usize = 40;

/// (device, inode) of what `path` names, following links.
fn inode(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether `p` is an entry of this process's descriptor table (`/proc/self/fd/N`,
/// `/dev/fd/N`, `/proc/thread-self/fd/N`), and which descriptor: such a link points at a
/// file the shell opened, which must be written through, never replaced by another file.
fn descriptor(p: &Path) -> Option<u32> {
    let dir = std::fs::canonicalize(p.parent()?).ok()?;
    let ours = Path::new("/proc").join(std::process::id().to_string());
    if !(dir.starts_with(&ours) && dir.ends_with("fd")) {
        return None;
    }
    p.file_name()?.to_str()?.parse().ok()
}

/// stdout or stderr, if `id` is the file one of them is open on.
fn own_stream(id: Option<(u64, u64)>) -> Option<Target> {
    let id = id?;
    if inode(Path::new("/proc/self/fd/1")) == Some(id) {
        Some(Target::Stdout)
    } else if inode(Path::new("/proc/self/fd/2")) == Some(id) {
        Some(Target::Stderr)
    } else {
        None
    }
}

fn by_type(path: PathBuf, meta: &Metadata) -> Result<Target, TargetError> {
    let t = meta.file_type();
    if t.is_file() {
        Ok(Target::Replace(path))
    } else if t.is_dir() {
        Err(TargetError::Directory(path))
    } else if t.is_char_device() || t.is_fifo() {
        Ok(Target::Through(path))
    } else if t.is_block_device() {
        Err(TargetError::BlockDevice(path))
    } else {
        Err(TargetError::Socket(path))
    }
}

/// Whether the link `p` (its metadata `link`) sits in a sticky, world-writable directory
/// (`/tmp`) and belongs to neither this process's user nor the directory's owner: another
/// user could have planted it there to turn a root run's output onto a file of their choice.
/// The kernel refuses such links itself only where `fs.protected_symlinks` is on, and not in
/// every container.
fn planted(p: &Path, link: &Metadata) -> bool {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(d) = std::fs::metadata(dir) else {
        return false;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    d.mode() & 0o1002 == 0o1002 && link.uid() != d.uid() && link.uid() != me
}

/// Decides where writing `path` goes, without writing anything. Links are followed one at a
/// time, so that a hop through a descriptor table is seen, and so that a link to a path that
/// does not exist yet names that path (created there, atomically).
pub fn resolve(path: &Path) -> Result<Target, TargetError> {
    if path == Path::new("-") {
        return Ok(Target::Stdout);
    }
    let io = |source| TargetError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(TargetError::Directory(path.to_path_buf()));
    }
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if let Some(fd) = descriptor(&p) {
            return Ok(match fd {
                1 => Target::Stdout,
                2 => Target::Stderr,
                _ => Target::Through(path.to_path_buf()),
            });
        }
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::Replace(p)),
            Err(e) => return Err(io(e)),
        };
        if !meta.file_type().is_symlink() {
            // The file or FIFO stdout or stderr already writes to (a redirection) is written
            // through that stream, never replaced under it. A device may be shared.
            let t = meta.file_type();
            if t.is_file() || t.is_fifo() {
                if let Some(own) = own_stream(Some((meta.dev(), meta.ino()))) {
                    return Ok(own);
                }
            }
            return by_type(p, &meta);
        }
        if planted(&p, &meta) {
            return Err(TargetError::ForeignLink(p));
        }
        let to = std::fs::read_link(&p).map_err(io)?;
        p = match p.parent() {
            Some(dir) if to.is_relative() => dir.join(to),
            _ => to,
        };
    }
    Err(io(std::io::Error::from_raw_os_error(libc::ELOOP)))
}

/// How long a FIFO output waits for its reader; a signal ends the wait sooner.
const FIFO_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens a target to write through (append: a descriptor's file keeps what it holds). A FIFO
/// is opened without blocking, and tried again until a reader has it open: a blocking open
/// would wait for ever, deaf to the signals qbench handles. Its writes block once it is open
/// unless `nonblocking` (see `write_through`).
fn open_through(path: &Path, nonblocking: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let is_fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    if !is_fifo {
        return std::fs::OpenOptions::new().append(true).open(path);
    }
    let since = std::time::Instant::now();
    let signals = crate::signals::received();
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) if nonblocking => return Ok(f),
            Ok(f) => {
                // Writes block again (a full pipe waits for its reader) once it is open.
                // SAFETY: fcntl(2) on a descriptor this function owns.
                unsafe {
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
                    let flags = libc::fcntl(fd, libc::F_GETFL);
                    libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
                }
                return Ok(f);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                // A signal that came before the wait (it ended the runs) leaves the report
                // still to be read; one during the wait ends it.
                pause(
                    signals,
                    since,
                    "waiting for a process to read the FIFO",
                    || format!("no process read the FIFO within {FIFO_WAIT:?}"),
                )?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes `bytes` whole to a file `target` (replaced, or written through); standard output
/// and error are the command line's to write, and `None` says it is one of them.
pub fn write_file(target: &Target, bytes: &[u8]) -> Option<anyhow::Result<()>> {
    use anyhow::Context as _;
    Some(match target {
        Target::Replace(path) => super::replace_atomically(path, bytes),
        Target::Through(path) => open_through(path, true)
            .and_then(|f| write_through(f, bytes))
            .with_context(|| format!("writing {}", path.display())),
        Target::Stdout | Target::Stderr => return None,
    })
}

/// A FIFO's wait, 20 ms more: unless a stopping signal came since `signals` were counted
/// (interrupted while `doing`) or `FIFO_WAIT` passed since `since` (`timed_out` says what).
fn pause(
    signals: u32,
    since: std::time::Instant,
    doing: &str,
    timed_out: impl Fn() -> String,
) -> std::io::Result<()> {
    if crate::signals::received() > signals {
        return Err(std::io::Error::other(format!("interrupted while {doing}")));
    }
    if since.elapsed() >= FIFO_WAIT {
        return Err(std::io::Error::other(timed_out()));
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    Ok(())
}

/// Writes `bytes` whole to `f`, a FIFO without blocking: a reader that holds it open and
/// takes nothing would otherwise block the runtime's thread, where no signal's handling runs.
/// A stopping signal, or `FIFO_WAIT` without a byte taken, ends the write.
fn write_through(mut f: std::fs::File, mut rest: &[u8]) -> std::io::Result<()> {
    use std::io::ErrorKind;
    let signals = crate::signals::received();
    let mut moved = std::time::Instant::now();
    while !rest.is_empty() {
        match f.write(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                rest = &rest[n..];
                moved = std::time::Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                pause(signals, moved, "the FIFO's reader took nothing", || {
                    format!("the FIFO's reader took nothing for {FIFO_WAIT:?}")
                })?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens `path` for an output written as it goes (`--log-requests`, `--json-stream`): a
/// regular file is created or truncated, anything else is treated as `resolve` says.
pub fn open_stream(path: &Path) -> Result<Box<dyn Write + Send>, TargetError> {
    let io = |source| TargetError::Io {
        path: path.to_path_buf(),
        source,
    };
    Ok(match resolve(path)? {
        Target::Replace(p) => Box::new(std::fs::File::create(&p).map_err(io)?),
        Target::Through(p) => Box::new(open_through(&p, false).map_err(io)?),
        Target::Stdout => Box::new(std::io::stdout()),
        Target::Stderr => Box::new(std::io::stderr()),
    })
}

/// What two outputs would share if they named the same thing; character devices are shared
/// harmlessly (`/dev/null` twice), so they have none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    Stdout,
    Stderr,
    Inode(u64, u64),
    NewPath(PathBuf),
}

/// The identity of `path` as an output, or `None` for a character device.
pub fn identity(path: &Path) -> Result<Option<Identity>, TargetError> {
    let io = |source| TargetError::Io {
        path: path.to_path_buf(),
        source,
    };
    Ok(Some(match resolve(path)? {
        Target::Stdout => Identity::Stdout,
        Target::Stderr => Identity::Stderr,
        Target::Through(p) | Target::Replace(p) => match std::fs::metadata(&p) {
            Ok(m) if m.file_type().is_char_device() => return Ok(None),
            Ok(m) => Identity::Inode(m.dev(), m.ino()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let parent = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let dir = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.into());
                Identity::NewPath(dir.join(p.file_name().unwrap_or_default()))
            }
            Err(e) => return Err(io(e)),
        },
    }))
}

/// Fails if two of the named outputs would write to the same file or stream: a later
/// output would replace an earlier one, or two streams would interleave.
pub(crate) fn check_distinct(
    outputs: &[(&'static str, &Path)],
) -> Result<(), crate::error::ConfigError> {
    let mut seen: Vec<(&'static str, Identity)> = Vec::new();
    for &(flag, path) in outputs {
        let id = identity(path).map_err(|e| crate::error::ConfigError {
            flag,
            message: e.to_string(),
        })?;
        let Some(id) = id else { continue };
        if let Some((earlier, _)) = seen.iter().find(|(_, other)| *other == id) {
            let what = match id {
                Identity::Stdout => "stdout".to_string(),
                Identity::Stderr => "stderr".to_string(),
                _ => path.display().to_string(),
            };
            return Err(crate::error::ConfigError {
                flag,
                message: format!(
                    "{what} is already the output of {earlier}: give each output its own file"
                ),
            });
        }
        seen.push((flag, id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn each_kind_of_path_resolves_as_the_rule_says() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.json");
        let new = dir.path().join("new.json");
        std::fs::write(&file, "old").unwrap();
        assert_eq!(resolve(&file).unwrap(), Target::Replace(file.clone()));
        assert_eq!(resolve(&new).unwrap(), Target::Replace(new.clone()));
        assert!(matches!(
            resolve(dir.path()),
            Err(TargetError::Directory(_))
        ));
        assert_eq!(
            resolve(Path::new("/dev/null")).unwrap(),
            Target::Through("/dev/null".into())
        );
        for out in ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
            assert_eq!(resolve(Path::new(out)).unwrap(), Target::Stdout, "{out}");
        }
        assert_eq!(resolve(Path::new("/dev/stderr")).unwrap(), Target::Stderr);
        // A link to a regular file: its target is replaced, the link stays a link.
        let link = dir.path().join("link.json");
        symlink(&file, &link).unwrap();
        let real = std::fs::canonicalize(&file).unwrap();
        assert_eq!(resolve(&link).unwrap(), Target::Replace(real));
        // A link to a device is written through.
        let null = dir.path().join("null");
        symlink("/dev/null", &null).unwrap();
        assert_eq!(resolve(&null).unwrap(), Target::Through("/dev/null".into()));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a path this test owns.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(resolve(&fifo).unwrap(), Target::Through(fifo.clone()));
        let sock = dir.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(matches!(resolve(&sock), Err(TargetError::Socket(_))));
    }

    /// A link another user left in a sticky, world-writable directory is not followed; one of
    /// this user's own is, and a link anywhere else whoever owns it.
    #[test]
    fn a_link_planted_in_a_shared_sticky_directory_is_refused() {
        use std::os::unix::fs::{lchown, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        let shared = dir.path().join("tmp");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let own = shared.join("own.tsv");
        symlink(&victim, &own).unwrap();
        assert_eq!(resolve(&own).unwrap(), Target::Replace(victim.clone()));
        let planted = shared.join("planted.tsv");
        symlink(&victim, &planted).unwrap();
        // Another user's link: only root can make one here, and CI runs as root.
        if lchown(&planted, Some(65534), Some(65534)).is_err() {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root");
            return;
        }
        assert!(matches!(
            resolve(&planted),
            Err(TargetError::ForeignLink(_))
        ));
        assert!(open_stream(&planted).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
        // Out of the sticky directory, the same user's link is followed.
        let plain = dir.path().join("plain.tsv");
        symlink(&victim, &plain).unwrap();
        lchown(&plain, Some(65534), Some(65534)).unwrap();
        assert_eq!(resolve(&plain).unwrap(), Target::Replace(victim));
    }

    #[test]
    fn a_link_to_a_regular_file_keeps_being_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.json");
        let link = dir.path().join("link.json");
        std::fs::write(&file, "old").unwrap();
        symlink(&file, &link).unwrap();
        write_file(&resolve(&link).unwrap(), b"new")
            .unwrap()
            .unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
    }

    #[test]
    fn the_same_file_twice_is_refused_and_devices_may_be_shared() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let same = dir.path().join(".").join("a");
        let err = check_distinct(&[("--json", &a), ("--hgrm", &same)]).unwrap_err();
        assert_eq!(err.flag, "--hgrm");
        assert!(err.message.contains("--json"), "{}", err.message);
        std::fs::write(&a, "x").unwrap();
        let link = dir.path().join("l");
        symlink(&a, &link).unwrap();
        assert!(check_distinct(&[("--json", &a), ("--keylog", &link)]).is_err());
        let err = check_distinct(&[
            ("--json", Path::new("-")),
            ("--hgrm", Path::new("/dev/stdout")),
        ])
        .unwrap_err();
        assert!(err.message.contains("stdout"), "{}", err.message);
        let null = Path::new("/dev/null");
        check_distinct(&[("--json", null), ("--hgrm", null), ("--plot", &a)]).unwrap();
    }
}
