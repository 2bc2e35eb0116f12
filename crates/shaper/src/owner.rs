//! Which process owns a `qb-` object (a link's namespaces, a cpu cgroup): a file per object
//! under `/run/qbench/owners`, flock'ed by the owner for as long as it lives. The kernel drops
//! the lock when the owner exits, however it exits (`kill -9` too), so `cleanup` can tell a
//! link left behind from one a run is still using without trusting pids, which are reused.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the owners' lock files live: tmpfs, so none outlives a reboot (nor do the objects).
pub const DIR: &str = "/run/qbench/owners";

#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error("owner lock {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("owner lock: `{0}` is not an object name qbench makes")]
    Name(String),
}

/// The owner file of link `id` (its namespaces `qb-ID-c|r|s`).
pub fn link(id: &str) -> String {
    format!("qb-{id}-link")
}

/// The lock on one object; dropping it removes the file and lets the object go.
#[derive(Debug)]
pub struct Owner {
    file: File,
    path: PathBuf,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> OwnerError + '_ {
    move |source| OwnerError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Owner {
    /// Takes `name` for this process, or `None` if a live process holds it.
    pub fn claim(name: &str) -> Result<Option<Self>, OwnerError> {
        Self::claim_in(Path::new(DIR), name)
    }

    pub fn claim_in(dir: &Path, name: &str) -> Result<Option<Self>, OwnerError> {
        if !name.starts_with("qb-") || name.contains('/') {
            return Err(OwnerError::Name(name.into()));
        }
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join(name);
        // A holder that lets go unlinks its file between our open and our lock: the lock we
        // then get is on a file nobody will look at again, so open afresh (bounded: each retry
        // needs another process to take and release the name meanwhile).
        for _ in 0..16 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(io(&path))?;
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Ok(None);
                }
                return Err(io(&path)(e));
            }
            let locked = file.metadata().map_err(io(&path))?;
            let current = std::fs::symlink_metadata(&path);
            if current.is_ok_and(|m| m.ino() == locked.ino() && m.dev() == locked.dev()) {
                let mut owner = Self { file, path };
                owner.write_pid();
                return Ok(Some(owner));
            }
        }
        let busy = std::io::Error::other("taken and released too often to lock");
        Err(OwnerError::Io {
            path: path.display().to_string(),
            source: busy,
        })
    }

    /// The pid, for a person reading the directory; the lock, not this, decides.
    fn write_pid(&mut self) {
        let _ = self.file.set_len(0);
        let _ = writeln!(self.file, "{}", std::process::id());
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Unlink while still locked: a claimer that opened this file meanwhile finds it gone
        // once it gets the lock, and opens the path afresh.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes the lock files named as `which` picks that no live process holds (their objects
/// are gone or about to go).
pub fn sweep_stale(which: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(DIR) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !which(&name) {
            continue;
        }
        if let Ok(Some(stale)) = Owner::claim(&name) {
            drop(stale);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("qbench-owner-")
            .tempdir()
            .unwrap()
    }

    #[test]
    fn a_name_is_held_until_its_owner_lets_go() {
        let d = dir();
        let a = Owner::claim_in(d.path(), "qb-a1-x").unwrap().expect("free");
        // flock locks belong to the open file, so a second open in this process is refused
        // as another process would be.
        assert!(Owner::claim_in(d.path(), "qb-a1-x").unwrap().is_none());
        let pid: u32 = std::fs::read_to_string(d.path().join("qb-a1-x"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(pid, std::process::id());
        drop(a);
        assert!(!d.path().join("qb-a1-x").exists(), "the file goes with it");
        assert!(Owner::claim_in(d.path(), "qb-a1-x").unwrap().is_some());
    }

    #[test]
    fn a_file_left_by_a_dead_owner_is_free() {
        let d = dir();
        std::fs::write(d.path().join("qb-b2-x"), "1\n").unwrap();
        assert!(Owner::claim_in(d.path(), "qb-b2-x").unwrap().is_some());
    }

    #[test]
    fn names_that_are_not_ours_are_refused() {
        let d = dir();
        for bad in ["x", "qb-../etc", "qb-a/b", "../qb-a"] {
            assert!(
                matches!(Owner::claim_in(d.path(), bad), Err(OwnerError::Name(_))),
                "{bad}"
            );
        }
    }
}
