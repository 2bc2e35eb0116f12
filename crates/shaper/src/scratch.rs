//! A run's scratch directory in the system's temporary directory (a third-party client's
//! files: the CA it trusts, its logs, its downloads), owned as links and cgroups are: the
//! `qb-ID-scratch` owner lock (`crate::owner`) is taken before the directory is made and held
//! while it lives. A run killed with `kill -9` removes nothing; `cleanup` then removes the
//! directory, and never one whose run is alive.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::cleanup::{Cleaned, Scope};
use crate::owner::Owner;

const SUFFIX: &str = "-scratch";

/// A scratch directory, removed with what it holds when dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
    // Dropped after the directory is removed (fields drop after `Drop::drop`). None where
    // owner locks cannot be taken (not root): cleanup, which runs as root, then leaves the
    // directory alone, as another user's.
    _owner: Option<Owner>,
}

impl Scratch {
    /// A new directory `qb-ID-scratch` in the temporary directory, mode 0700.
    pub fn create() -> std::io::Result<Self> {
        Self::create_in(&std::env::temp_dir())
    }

    fn create_in(dir: &Path) -> std::io::Result<Self> {
        for attempt in 0..16u32 {
            let name = format!("qb-{}{SUFFIX}", fresh_id(attempt));
            // Taken first: from the moment the directory exists, cleanup finds it owned.
            let owner = match Owner::claim(&name) {
                Ok(Some(o)) => Some(o),
                Ok(None) => continue,
                Err(_) => None,
            };
            let path = dir.join(&name);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    return Ok(Self {
                        path,
                        _owner: owner,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(
            "no free name for a scratch directory in 16 tries",
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Eight hex digits, different for each call in a process.
fn fresh_id(attempt: u32) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static MADE: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let made = MADE.fetch_add(1, Ordering::Relaxed);
    let mixed = std::process::id().rotate_left(12) ^ nanos ^ made.rotate_left(24) ^ attempt;
    format!("{mixed:08x}")
}

/// The id of a name like ours, `qb-<8 hex>-scratch`.
fn our_id(name: &str) -> Option<&str> {
    let id = name.strip_prefix("qb-")?.strip_suffix(SUFFIX)?;
    (id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// Removes the scratch directories in the temporary directory whose run is gone (and, with
/// `scope.force`, those of live runs). Only directories this user made are touched: a name
/// like ours made by someone else, or a link, is left.
pub fn cleanup(scope: &Scope) -> Cleaned {
    cleanup_in(&std::env::temp_dir(), scope)
}

fn cleanup_in(dir: &Path, scope: &Scope) -> Cleaned {
    let mut out = Cleaned::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = our_id(&name) else {
            continue;
        };
        let path = e.path();
        let mine = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !scope.covers(id) || !mine {
            continue;
        }
        let owner = Owner::claim(&name);
        if !matches!(owner, Ok(Some(_))) && !scope.force {
            out.held.push(path.display().to_string());
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            out.removed.push(path.display().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs_root() -> bool {
        // The owner locks live in /run/qbench, which only root may write.
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn names_are_recognised_only_in_our_form() {
        assert_eq!(our_id("qb-0123abcd-scratch"), Some("0123abcd"));
        for other in [
            "qb-0123abc-scratch",
            "qb-0123abcg-scratch",
            "qb-0123abcd-cpu",
            "x",
        ] {
            assert_eq!(our_id(other), None, "{other}");
        }
    }

    #[test]
    fn a_live_runs_directory_is_held_and_a_dead_ones_removed() {
        if !needs_root() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let live = Scratch::create_in(tmp.path()).unwrap();
        std::fs::write(live.path().join("ca.pem"), "x").unwrap();
        let live_name = live
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // A directory left by a run that is gone: named like ours, no owner holding it.
        let dead = tmp.path().join("qb-00c0ffee-scratch");
        std::fs::create_dir_all(dead.join("run-0")).unwrap();
        // A link named like ours is not followed, nor removed.
        let target = tempfile::tempdir().unwrap();
        let link = tmp.path().join("qb-00facade-scratch");
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        let ids = |names: &[&str]| Scope {
            force: false,
            ids: names.iter().map(|n| n.to_string()).collect(),
        };
        let live_id = our_id(&live_name).unwrap().to_string();
        let c = cleanup_in(tmp.path(), &ids(&[&live_id, "00c0ffee", "00facade"]));
        assert_eq!(c.removed, [dead.display().to_string()]);
        assert_eq!(c.held, [live.path().display().to_string()]);
        assert!(live.path().join("ca.pem").exists());
        assert!(link.exists() && target.path().exists());
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists(), "dropped, the directory goes");
    }

    #[test]
    fn a_directory_outside_the_scope_or_anothers_is_left() {
        if !needs_root() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let other = tmp.path().join("qb-0000beef-scratch");
        std::fs::create_dir(&other).unwrap();
        let scoped = Scope {
            force: false,
            ids: vec!["0000dead".into()],
        };
        assert!(cleanup_in(tmp.path(), &scoped).removed.is_empty());
        // Made by another user: not ours to remove, whoever owns the lock.
        std::os::unix::fs::chown(&other, Some(65534), Some(65534)).unwrap();
        assert!(cleanup_in(tmp.path(), &Scope::default()).removed.is_empty());
        assert!(other.exists());
    }
}
